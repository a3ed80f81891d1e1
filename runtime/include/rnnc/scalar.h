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
RNNC_SCALAR unsigned philox4x32_10(unsigned c0, unsigned c1, unsigned c2, unsigned c3, unsigned k0, unsigned k1) {
  for (int round = 0; round < 10; ++round) {
    const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned hi0 = unsigned(p0 >> 32), lo0 = unsigned(p0), hi1 = unsigned(p1 >> 32), lo1 = unsigned(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
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

// The threshold of a mask that keeps with probability q: a draw keeps when
// its top 24 bits are below it (exact in every engine: no float compare).
RNNC_SCALAR unsigned keep_threshold(double q) { return unsigned(q * 16777216.0 + 0.5); }

// A mask's value at (element i, sequence b, step t) of mask `site`, with
// rng = {key low, key high, 1 in training}: in training `kept` with the
// probability threshold / 2^24, else 0; in evaluation `expected`. step is
// ~0u for a mask per sequence.
template <class T>
RNNC_SCALAR T keep_mask(const unsigned *rng, unsigned site, unsigned step, unsigned b, unsigned i, unsigned threshold,
                        T kept, T expected) {
  if (!rng[2]) return expected;
  return (philox4x32_10(i, b, step, site, rng[0], rng[1]) >> 8) < threshold ? kept : T(0);
}
