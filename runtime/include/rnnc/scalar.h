// The scalar formulas of rnnc's pointwise functions, written once: the compiler
// (its interpreter and constant folder), rnnc/cpu.h and the CUDA prelude all
// include this text. It is included inside a namespace that has math::exp,
// math::fast_exp (an exp the target may approximate), math::log1p, math::min
// and math::max, with RNNC_SCALAR defined as the functions' qualifiers.
template <class T> RNNC_SCALAR T sigmoid(T x) { return T(1) / (T(1) + math::fast_exp(-x)); }
template <class T> RNNC_SCALAR T softplus(T x) { return x > T(20) ? x : math::log1p(math::exp(x)); }
template <class T> RNNC_SCALAR T hard_sigmoid(T x) { return math::min(math::max(x / T(6) + T(0.5), T(0)), T(1)); }
template <class T> RNNC_SCALAR T hard_sigmoid_grad(T x) { return x > T(-3) && x < T(3) ? T(1) / T(6) : T(0); }
template <class T> RNNC_SCALAR T silu(T x) { return x * sigmoid(x); }
template <class T> RNNC_SCALAR T step(T x) { return x > T(0) ? T(1) : T(0); }
template <class T> RNNC_SCALAR T sign(T x) { return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0); }

// Random masks (dropout, zoneout; docs/language.md#dropout-and-zoneout). The
// counter-based generator Philox-4x32-10 (Salmon et al., SC 2011): one 32-bit
// word from the counter (element, sequence, step, site) under a 64-bit key, so
// every engine draws the same mask for an element without sharing state, and
// backward draws forward's mask again instead of storing it.
// One round with the key of round n: (k0 + n W0, k1 + n W1). Written as ten
// calls, with selects and no branches, so a loop over elements vectorizes.
RNNC_SCALAR void philox_round(unsigned &c0, unsigned &c1, unsigned &c2, unsigned &c3, unsigned k0, unsigned k1) {
  const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
  const unsigned hi0 = unsigned(p0 >> 32), lo0 = unsigned(p0), hi1 = unsigned(p1 >> 32), lo1 = unsigned(p1);
  c0 = hi1 ^ c1 ^ k0;
  c1 = lo1;
  c2 = hi0 ^ c3 ^ k1;
  c3 = lo0;
}
RNNC_SCALAR void philox4x32_10_rounds(unsigned &c0, unsigned &c1, unsigned &c2, unsigned &c3, unsigned k0, unsigned k1) {
  const unsigned w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  philox_round(c0, c1, c2, c3, k0, k1);
  philox_round(c0, c1, c2, c3, k0 + w0, k1 + w1);
  philox_round(c0, c1, c2, c3, k0 + 2 * w0, k1 + 2 * w1);
  philox_round(c0, c1, c2, c3, k0 + 3 * w0, k1 + 3 * w1);
  philox_round(c0, c1, c2, c3, k0 + 4 * w0, k1 + 4 * w1);
  philox_round(c0, c1, c2, c3, k0 + 5 * w0, k1 + 5 * w1);
  philox_round(c0, c1, c2, c3, k0 + 6 * w0, k1 + 6 * w1);
  philox_round(c0, c1, c2, c3, k0 + 7 * w0, k1 + 7 * w1);
  philox_round(c0, c1, c2, c3, k0 + 8 * w0, k1 + 8 * w1);
  philox_round(c0, c1, c2, c3, k0 + 9 * w0, k1 + 9 * w1);
}
// The first word of Philox-4x32-10 at counter (c0, c1, c2, c3) under key (k0, k1).
RNNC_SCALAR unsigned philox4x32_10(unsigned c0, unsigned c1, unsigned c2, unsigned c3, unsigned k0, unsigned k1) {
  philox4x32_10_rounds(c0, c1, c2, c3, k0, k1);
  return c0;
}

// The key of one forward call's masks: splitmix64's finalizer of the seed and
// the caller's call counter, so calls and seeds draw unrelated masks.
RNNC_SCALAR unsigned long long splitmix64(unsigned long long z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
RNNC_SCALAR unsigned long long mask_key(unsigned long long seed, unsigned long long call) {
  return splitmix64(seed ^ splitmix64(call));
}

// The threshold of a mask that keeps with probability q: a draw (16 bits)
// keeps when it is below it (exact in every engine: no float compare).
RNNC_SCALAR unsigned keep_threshold(double q) { return unsigned(q * 65536.0 + 0.5); }

// The draw of element i of sequence b at step t of mask `site`, with
// rng = {key low, key high, 1 in training}: half i % 2 (low first) of word
// (i / 2) % 4 of Philox-4x32-10 at counter (i / 8, b, step, site), so one
// call serves eight elements. step is ~0u for a mask per sequence.
RNNC_SCALAR unsigned keep_draw(const unsigned *rng, unsigned site, unsigned step, unsigned b, unsigned i) {
  unsigned c0 = i >> 3, c1 = b, c2 = step, c3 = site;
  philox4x32_10_rounds(c0, c1, c2, c3, rng[0], rng[1]);
  const unsigned w = (i >> 1) & 3u, word = w == 0 ? c0 : w == 1 ? c1 : w == 2 ? c2 : c3;
  return (i & 1u) ? word >> 16 : word & 0xFFFFu;
}

// The draws of elements 8q .. 8q + 7 at once (one Philox call), into out[0..7].
RNNC_SCALAR void keep_draws8(const unsigned *rng, unsigned site, unsigned step, unsigned b, unsigned q, unsigned *out) {
  unsigned c0 = q, c1 = b, c2 = step, c3 = site;
  philox4x32_10_rounds(c0, c1, c2, c3, rng[0], rng[1]);
  out[0] = c0 & 0xFFFFu;
  out[1] = c0 >> 16;
  out[2] = c1 & 0xFFFFu;
  out[3] = c1 >> 16;
  out[4] = c2 & 0xFFFFu;
  out[5] = c2 >> 16;
  out[6] = c3 & 0xFFFFu;
  out[7] = c3 >> 16;
}

// A mask's value from its draw: in training `kept` when the draw is below
// the threshold (probability threshold / 2^16), else 0; in
// evaluation `expected`. Arithmetic, not branches (a loop over elements
// vectorizes); every product is exact.
template <class T> RNNC_SCALAR T keep_value(const unsigned *rng, unsigned draw, unsigned threshold, T kept, T expected) {
  const T keep = T(draw < threshold), train = T(rng[2] != 0);
  return keep * kept * train + expected * (T(1) - train);
}

// keep_value of element i's draw.
template <class T>
RNNC_SCALAR T keep_mask(const unsigned *rng, unsigned site, unsigned step, unsigned b, unsigned i, unsigned threshold,
                        T kept, T expected) {
  return keep_value(rng, keep_draw(rng, site, step, b, i), threshold, kept, expected);
}
