// The products with a weight (h(t-1) · W_hh^T, x · W_ih^T forward, δ · W
// backward) with the weight packed once per call into panels, register-blocked
// micro-kernels that stream those panels, and the weight gradients (Σ δᵀ x) on
// the same micro-kernels (docs/codegen.md, "Per-step products").
// Every element is one fused multiply-add chain over k in order, whatever the
// ISA (AVX-512, AVX2 + FMA, scalar std::fma: picked once, at load time), the
// thread count or the rows around it: the bits never depend on the machine's width.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define RNNC_PANELS_X86 1
#endif

namespace rnnc::cpu {

/// Pieces of rows (first row, rows) of a product's A and C: a --lengths
/// product of every step at once reads and writes its running rows in place
/// (rnnc/workspace.h's packed_product).
using RowPieces = std::vector<std::pair<int64_t, int64_t>>;

/// Columns of a panel: one 64-byte line of E (16 floats, 8 doubles).
template <class E> constexpr int64_t kPanel = 64 / int64_t(sizeof(E));

/// The elements pack_panels writes for an N-column product over K: N rounded
/// up to whole panels, times K (at most the 16-column rounding rnnc reserves).
template <class E> constexpr int64_t panel_elements(int64_t N, int64_t K) {
  return (N + kPanel<E> - 1) / kPanel<E> * kPanel<E> * K;
}

namespace panels_detail {

/// A product's operand x[0 .. n) as E in `out`: converted exactly where it is
/// stored in 16 bits, rounded to S16 (a 16-bit model's storage type) where it
/// is kept in E, copied where S16 is void. Returns out.
template <class S16, class S, class E> inline const E *operand(const S *x, int64_t n, E *out) {
  if constexpr (!std::is_void_v<S16> && std::is_same_v<S, E>)
    std::transform(x, x + n, out, [](E v) { return E(S16(v)); });
  else
    std::copy_n(x, n, out);
  return out;
}

/// The micro-kernels' instruction sets, widest first.
enum class Isa { Scalar, Avx2, Avx512 };

/// The widest this CPU has.
inline Isa widest_isa() {
  Isa best = Isa::Scalar;
#ifdef RNNC_PANELS_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = Isa::Avx2;
  if (__builtin_cpu_supports("avx512f")) best = Isa::Avx512;
#endif
  return best;
}

/// What panel_product runs, decided once: the widest, or a narrower one when
/// RNNC_CPU_ISA=scalar|avx2 asks (a check that they agree, bit for bit).
inline Isa isa() {
  static const Isa chosen = [] {
    const char *ask = std::getenv("RNNC_CPU_ISA");
    Isa want = Isa::Avx512;
    if (ask && std::strcmp(ask, "scalar") == 0) want = Isa::Scalar;
    if (ask && std::strcmp(ask, "avx2") == 0) want = Isa::Avx2;
    return std::min(want, widest_isa());
  }();
  return chosen;
}

/// Multiply-adds below which a product or gradient stays on the calling
/// thread: a fork costs more than the other core saves.
constexpr double kTeamMacs = 1 << 17;

/// Columns [c0, c1) of rows [0, M) of C, one fma chain per element: the
/// reference every vector kernel equals.
template <class E>
inline void scalar_columns(int64_t M, int64_t K, const E *A, const E *panels, E *C, int64_t ldc, int64_t c0, int64_t c1) {
  constexpr int64_t P = kPanel<E>;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t n = c0; n < c1; ++n) {
      const E *w = panels + (n / P) * K * P + n % P;
      E sum = E(0);
      for (int64_t k = 0; k < K; ++k) sum = std::fma(A[r * K + k], w[k * P], sum);
      C[r * ldc + n] = sum;
    }
}

/// Rows [m0, m1) and columns [c0, c1) of G[M][N] += Dᵀ · X over R steps
/// (D [R][M], X [R][N]): G's value, then one fma per step in order.
template <class E>
inline void scalar_gradient(int64_t M, int64_t N, int64_t R, const E *D, const E *X, E *G, int64_t m0, int64_t m1,
                            int64_t c0, int64_t c1) {
  for (int64_t i = m0; i < m1; ++i)
    for (int64_t c = c0; c < c1; ++c) {
      E sum = G[i * N + c];
      for (int64_t r = 0; r < R; ++r) sum = std::fma(D[r * M + i], X[r * N + c], sum);
      G[i * N + c] = sum;
    }
}

} // namespace panels_detail
} // namespace rnnc::cpu

#ifdef RNNC_PANELS_X86
// The vector kernels, once per instruction set: each section defines its
// Vec<E> and includes the same kernel text under its target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
namespace rnnc::cpu::panels_detail::avx512 {
template <class E> struct Vec;
template <> struct Vec<float> {
  using V = __m512;
  static constexpr int kLanes = 16, kRows = 8, kVectors = 2; // a tile: 8 rows × 32 columns
  static V load(const float *p) { return _mm512_loadu_ps(p); }
  static V broadcast(const float *p) { return _mm512_set1_ps(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V zero() { return _mm512_setzero_ps(); }
  static void store(float *p, V v) { _mm512_storeu_ps(p, v); }
};
template <> struct Vec<double> {
  using V = __m512d;
  static constexpr int kLanes = 8, kRows = 8, kVectors = 2;
  static V load(const double *p) { return _mm512_loadu_pd(p); }
  static V broadcast(const double *p) { return _mm512_set1_pd(*p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V zero() { return _mm512_setzero_pd(); }
  static void store(double *p, V v) { _mm512_storeu_pd(p, v); }
};
#include "rnnc/panels_kernel.h"

/// to[c * 16 + r] = from[r * ld + c] for r, c < 16: a 16 x 16 tile of floats
/// transposed in registers (pack_panels' W^T), rows in, rows out. (The
/// all-ones masked forms are the plain instructions; GCC 12 takes the plain
/// intrinsics' undefined pass-through for an uninitialized read.)
inline void transpose16(const float *from, int64_t ld, float *to) {
  constexpr __mmask16 all = 0xFFFF;
  constexpr __mmask8 all8 = 0xFF;
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(from + i * ld);
  for (int i = 0; i < 16; i += 2) { // each 128-bit lane: pairs of rows, 32 bits interleaved
    t[i] = _mm512_maskz_unpacklo_ps(all, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(all, r[i], r[i + 1]);
  }
  for (int g = 0; g < 4; ++g) { // then r[4g + c], lane L: rows 4g .. 4g + 3 of column 4L + c
    const __m512d lo = _mm512_castps_pd(t[4 * g]), hi = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d lo2 = _mm512_castps_pd(t[4 * g + 2]), hi2 = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(all8, lo, lo2));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(all8, lo, lo2));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(all8, hi, hi2));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(all8, hi, hi2));
  }
  for (int c = 0; c < 4; ++c) { // column 4L + c: lane L of r[c], r[4 + c], r[8 + c], r[12 + c]
    const __m512 a = _mm512_maskz_shuffle_f32x4(all, r[c], r[4 + c], 0x44);
    const __m512 b = _mm512_maskz_shuffle_f32x4(all, r[8 + c], r[12 + c], 0x44);
    const __m512 e = _mm512_maskz_shuffle_f32x4(all, r[c], r[4 + c], 0xEE);
    const __m512 f = _mm512_maskz_shuffle_f32x4(all, r[8 + c], r[12 + c], 0xEE);
    _mm512_storeu_ps(to + (0 + c) * 16, _mm512_maskz_shuffle_f32x4(all, a, b, 0x88));
    _mm512_storeu_ps(to + (4 + c) * 16, _mm512_maskz_shuffle_f32x4(all, a, b, 0xDD));
    _mm512_storeu_ps(to + (8 + c) * 16, _mm512_maskz_shuffle_f32x4(all, e, f, 0x88));
    _mm512_storeu_ps(to + (12 + c) * 16, _mm512_maskz_shuffle_f32x4(all, e, f, 0xDD));
  }
}
} // namespace rnnc::cpu::panels_detail::avx512
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace rnnc::cpu::panels_detail::avx2 {
template <class E> struct Vec;
template <> struct Vec<float> {
  using V = __m256;
  static constexpr int kLanes = 8, kRows = 6, kVectors = 2; // a tile: 6 rows × 16 columns
  static V load(const float *p) { return _mm256_loadu_ps(p); }
  static V broadcast(const float *p) { return _mm256_broadcast_ss(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V zero() { return _mm256_setzero_ps(); }
  static void store(float *p, V v) { _mm256_storeu_ps(p, v); }
};
template <> struct Vec<double> {
  using V = __m256d;
  static constexpr int kLanes = 4, kRows = 6, kVectors = 2;
  static V load(const double *p) { return _mm256_loadu_pd(p); }
  static V broadcast(const double *p) { return _mm256_broadcast_sd(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V zero() { return _mm256_setzero_pd(); }
  static void store(double *p, V v) { _mm256_storeu_pd(p, v); }
};
#include "rnnc/panels_kernel.h"

/// to[c * ldt + r] = from[r * ld + c] for r, c < 8: an 8 x 8 tile of floats
/// transposed in registers.
inline void transpose8(const float *from, int64_t ld, float *to, int64_t ldt) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(from + i * ld);
  for (int i = 0; i < 8; i += 2) { // each 128-bit lane: pairs of rows, 32 bits interleaved
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 2; ++g) { // then r[4g + c], lane L: rows 4g .. 4g + 3 of column 4L + c
    r[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) { // column 4L + c: lane L of r[c], then of r[4 + c]
    _mm256_storeu_ps(to + c * ldt, _mm256_permute2f128_ps(r[c], r[4 + c], 0x20));
    _mm256_storeu_ps(to + (4 + c) * ldt, _mm256_permute2f128_ps(r[c], r[4 + c], 0x31));
  }
}

/// avx512::transpose16's contract, as four 8 x 8 tiles.
inline void transpose16(const float *from, int64_t ld, float *to) {
  for (int64_t i = 0; i < 16; i += 8)
    for (int64_t j = 0; j < 16; j += 8) transpose8(from + i * ld + j, ld, to + j * 16 + i, 16);
}
} // namespace rnnc::cpu::panels_detail::avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

namespace rnnc::cpu {

namespace panels_detail {
/// panel_product on `chosen`, which this CPU must have, over `count` pieces of
/// rows (M of them in all).
template <class E>
void product(Isa chosen, const std::pair<int64_t, int64_t> *pieces, int64_t count, int64_t M, int64_t N, int64_t K,
             const E *A, const E *panels, E *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  // A block is a tile's columns (the widest kernel's: the same cut for every ISA).
  constexpr int64_t kBlock = 2 * kPanel<E>;
  const int64_t blocks = (N + kBlock - 1) / kBlock;
  const auto block = [&](int64_t b) {
    const int64_t c0 = b * kBlock, c1 = std::min(N, c0 + kBlock);
    for (int64_t p = 0; p < count; ++p) {
      const auto [first, rows] = pieces[p];
      const E *a = A + first * K;
      E *c = C + first * ldc;
#ifdef RNNC_PANELS_X86
      if (chosen == Isa::Avx512) avx512::columns(rows, K, a, panels, c, ldc, c0, c1);
      else if (chosen == Isa::Avx2) avx2::columns(rows, K, a, panels, c, ldc, c0, c1);
      else scalar_columns(rows, K, a, panels, c, ldc, c0, c1);
#else
      scalar_columns(rows, K, a, panels, c, ldc, c0, c1);
#endif
    }
  };
  if (blocks < 2 || double(M) * double(N) * double(K) < kTeamMacs) {
    for (int64_t b = 0; b < blocks; ++b) block(b);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) block(b);
}
template <class E>
inline void product(Isa chosen, int64_t M, int64_t N, int64_t K, const E *A, const E *panels, E *C, int64_t ldc) {
  const std::pair<int64_t, int64_t> all{0, M};
  product(chosen, &all, 1, M, N, K, A, panels, C, ldc);
}

/// weight_gradient on `chosen`, which this CPU must have.
template <class E>
void gradient(Isa chosen, int64_t M, int64_t N, int64_t R, const E *D, const E *X, E *G) {
  if (M <= 0 || N <= 0 || R <= 0) return;
  const auto rows = [&](int64_t m0, int64_t m1) {
    if (m0 >= m1) return;
#ifdef RNNC_PANELS_X86
    if (chosen == Isa::Avx512) return avx512::gradient_rows(M, N, R, D, X, G, m0, m1);
    if (chosen == Isa::Avx2) return avx2::gradient_rows(M, N, R, D, X, G, m0, m1);
#endif
    scalar_gradient(M, N, R, D, X, G, m0, m1, 0, N);
  };
  constexpr int64_t kStep = 8; // a thread's rows are whole tiles on every ISA (8 or 6 + 2)
#ifdef _OPENMP
  if (M >= 2 * kStep && double(M) * double(N) * double(R) >= kTeamMacs) {
    // Each thread its own rows of G (and the columns of D they read): any cut gives the same bits.
#pragma omp parallel
    {
      const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
      const int64_t per = ((M + kStep - 1) / kStep + team - 1) / team * kStep;
      rows(std::min(M, me * per), std::min(M, (me + 1) * per));
    }
    return;
  }
#endif
  rows(0, M);
}

#if defined(RNNC_PREBUILT_PANELS) || defined(RNNC_PANELS_INSTANTIATE)
#ifdef RNNC_PANELS_INSTANTIATE
#define RNNC_PANELS_EXTERN
#else
#define RNNC_PANELS_EXTERN extern
#endif
#define RNNC_PANELS_OF(E)                                                                                                     \
  RNNC_PANELS_EXTERN template void product<E>(Isa, const std::pair<int64_t, int64_t> *, int64_t, int64_t, int64_t, int64_t, \
                                              const E *, const E *, E *, int64_t);                                           \
  RNNC_PANELS_EXTERN template void gradient<E>(Isa, int64_t, int64_t, int64_t, const E *, const E *, E *);
RNNC_PANELS_OF(float)
RNNC_PANELS_OF(double)
#undef RNNC_PANELS_OF
#undef RNNC_PANELS_EXTERN
#endif
} // namespace panels_detail

/// A weight's gradient over R rows: G[M][N] += Σ_r D[r]ᵀ X[r], D [R][M] (the
/// product's output gradients), X [R][N] (its inputs), blocked as a GEMM with
/// X and D copied per block into a thread_local scratch (panels_kernel.h's
/// gradient_rows). Every element is G's value plus one fma chain over r in order, whatever the
/// ISA or the thread count (each thread of the team takes its own rows of G).
/// D and X stored in 16 bits (rnnc/half.h) are converted to E a block of rows
/// at a time; the chains and their bits are those of their E values. In a
/// 16-bit model (S16, its storage type) an operand kept in E is rounded to S16
/// first, as cublasGemmEx reads it on CUDA (rnnc/cuda.h's gemm16).
template <class S16 = void, class SD, class SX, class E>
inline void weight_gradient(int64_t M, int64_t N, int64_t R, const SD *D, const SX *X, E *G) {
  if constexpr (std::is_same_v<SD, E> && std::is_same_v<SX, E> && std::is_void_v<S16>) {
    panels_detail::gradient(panels_detail::isa(), M, N, R, D, X, G);
  } else {
    // Blocks of up to 2^20 elements (4 MiB of floats): the rows of every step at once in one block
    // at the usual widths, so that a block is one team's work, not many.
    const int64_t block = std::max<int64_t>(256, (int64_t(1) << 20) / std::max<int64_t>(1, std::max(M, N)));
    thread_local std::vector<E> d, x;
    d.resize(size_t(std::min(R, block) * M));
    x.resize(size_t(std::min(R, block) * N));
    for (int64_t r0 = 0; r0 < R; r0 += block) {
      const int64_t n = std::min(block, R - r0);
      panels_detail::operand<S16>(D + r0 * M, n * M, d.data());
      panels_detail::operand<S16>(X + r0 * N, n * N, x.data());
      panels_detail::gradient(panels_detail::isa(), M, N, n, d.data(), x.data(), G);
    }
  }
}

namespace panels_detail {

/// Panel p of pack_panels: W's columns (rows of a transposed W) n0 .. n0 + P.
/// A transposed W goes P of its columns at a time: for floats, P x P tiles
/// transposed in AVX-512 or AVX2 registers; else element by element.
template <class S, class E>
inline void pack_panel(bool transposed, int64_t N, int64_t K, const S *W, int64_t p, E *panel) {
  constexpr int64_t P = kPanel<E>;
  const int64_t n0 = p * P, cols = std::min(P, N - n0);
  if (!transposed) {
    for (int64_t k = 0; k < K; ++k) {
      E *to = panel + k * P;
      const S *from = W + k * N + n0;
      for (int64_t j = 0; j < cols; ++j) to[j] = E(from[j]);
      for (int64_t j = cols; j < P; ++j) to[j] = E(0);
    }
    return;
  }
#ifdef RNNC_PANELS_X86
  constexpr bool floats = std::is_same_v<S, float> && std::is_same_v<E, float>;
  const Isa chosen = isa();
  const bool registers = floats && cols == P && chosen >= Isa::Avx2;
#endif
  for (int64_t k0 = 0; k0 < K; k0 += P) {
    const int64_t ks = std::min(P, K - k0);
#ifdef RNNC_PANELS_X86
    if constexpr (floats)
      if (registers && ks == P) {
        if (chosen == Isa::Avx512) avx512::transpose16(W + n0 * K + k0, K, panel + k0 * P);
        else avx2::transpose16(W + n0 * K + k0, K, panel + k0 * P);
        continue;
      }
#endif
    for (int64_t k = k0; k < k0 + ks; ++k) {
      E *to = panel + k * P;
      for (int64_t j = 0; j < cols; ++j) to[j] = E(W[(n0 + j) * K + k]);
      for (int64_t j = cols; j < P; ++j) to[j] = E(0);
    }
  }
}

} // namespace panels_detail

/// The K × N right operand of C = A · op(W), op(W) = W^T of a [N][K] W when
/// `transposed` (a Gemm kernel) or W itself, [K][N] (GemmT), as panels
/// [N / kPanel][K][kPanel]: a panel's rows are the kPanel columns of one k,
/// contiguous; columns past N are zeros.
/// W may be stored in 16 bits (rnnc/half.h): the panels are E, converted once.
/// A large W is packed by the OpenMP team, split as panel_product splits its
/// columns (static, in order), so each thread's panels start in its own cache.
template <class S, class E> inline void pack_panels(bool transposed, int64_t N, int64_t K, const S *W, E *panels) {
  constexpr int64_t P = kPanel<E>;
  const int64_t count = (N + P - 1) / P;
#pragma omp parallel for schedule(static) if (count >= 2 && double(N) * double(K) >= double(1 << 16))
  for (int64_t p = 0; p < count; ++p) panels_detail::pack_panel(transposed, N, K, W, p, panels + p * K * P);
}

/// C[M][N] = A[M][K] · op(W), op(W) packed by pack_panels (64-byte aligned is best),
/// C's rows ldc apart. Split by blocks of columns across an OpenMP team when
/// there is the work for one: a thread takes the same columns at every step,
/// so its part of the panels stays in its own cache. A and C stored in 16
/// bits (rnnc/half.h) go through E rows a block at a time: A converted
/// exactly, C rounded once from the E sums. In a 16-bit model (S16) an A kept
/// in E is rounded to S16 first, as weight_gradient's operands are.
template <class S16 = void, class SA, class E, class SC>
inline void panel_product(int64_t M, int64_t N, int64_t K, const SA *A, const E *panels, SC *C, int64_t ldc) {
  if constexpr (std::is_same_v<SA, E> && std::is_same_v<SC, E> && std::is_void_v<S16>) {
    panels_detail::product(panels_detail::isa(), M, N, K, A, panels, C, ldc);
  } else {
    const int64_t block = std::max<int64_t>(256, (int64_t(1) << 20) / std::max<int64_t>(1, std::max(N, K)));
    thread_local std::vector<E> a, c;
    constexpr bool exact = std::is_same_v<SA, E> && std::is_void_v<S16>; // A's rows read in place
    if constexpr (!exact) a.resize(size_t(std::min(M, block) * K));
    if constexpr (!std::is_same_v<SC, E>) c.resize(size_t(std::min(M, block) * N));
    for (int64_t r0 = 0; r0 < M; r0 += block) {
      const int64_t n = std::min(block, M - r0);
      const E *rows = nullptr;
      if constexpr (exact) rows = A + r0 * K;
      else rows = panels_detail::operand<S16>(A + r0 * K, n * K, a.data());
      if constexpr (std::is_same_v<SC, E>) {
        panels_detail::product(panels_detail::isa(), n, N, K, rows, panels, C + r0 * ldc, ldc);
      } else {
        panels_detail::product(panels_detail::isa(), n, N, K, rows, panels, c.data(), N);
        for (int64_t r = 0; r < n; ++r) std::copy_n(c.data() + r * N, N, C + (r0 + r) * ldc);
      }
    }
  }
}

/// panel_product over pieces of A's and C's rows (row 0 at A and C; A's rows
/// K apart, C's ldc): a --lengths product of every step at once over its
/// running rows, read and written in place (no copies). One team takes the
/// columns as panel_product's, each thread every piece of its columns: the
/// same bits as panel_product on the rows packed together.
template <class S16 = void, class SA, class E, class SC>
inline void panel_product(const RowPieces &pieces, int64_t N, int64_t K, const SA *A, const E *panels, SC *C,
                          int64_t ldc) {
  if constexpr (std::is_same_v<SA, E> && std::is_same_v<SC, E> && std::is_void_v<S16>) {
    int64_t M = 0;
    for (auto [first, rows] : pieces) M += rows;
    panels_detail::product(panels_detail::isa(), pieces.data(), int64_t(pieces.size()), M, N, K, A, panels, C, ldc);
  } else { // 16-bit storage converts its rows by blocks anyway: a piece at a time
    for (auto [first, rows] : pieces) panel_product<S16>(rows, N, K, A + first * K, panels, C + first * ldc, ldc);
  }
}

} // namespace rnnc::cpu
