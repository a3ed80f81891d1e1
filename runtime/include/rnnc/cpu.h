// What the C++ code rnnc generates calls: scalar functions the ops need, the
// BLAS call behind every GEMM, and the row helpers on host buffers (the
// workspace layout is rnnc/workspace.h). Header-only, so a bundle compiles
// with $(rnnc --print-cflags) and links only OpenBLAS.
#pragma once

#include "rnnc/panels.h"
#include "rnnc/workspace.h"

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

namespace rnnc::cpu {

using namespace rnnc::host;

/// min and max as std::min and std::max define them (the same result, NaNs
/// included), but selects on values: a reference to a constant operand keeps
/// GCC from vectorizing a loop with AVX2.
namespace math_detail {
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
} // namespace math_detail

/// exp and tanh that the compiler can vectorize: for float, a range reduction
/// and a polynomial (Cephes' coefficients, within 2 ulp), without a branch. A
/// float select GCC would turn into one (it moves the work after it into both
/// arms, and with -ftrapping-math, the default, cannot then vectorize the loop
/// with AVX2), so the clamps and selects below work on the floats' bits:
/// integer min and masks, which vectorize on every ISA. A NaN gives NaN. For
/// double, the standard library's.
namespace math_detail {
inline int32_t bits_of(float x) {
  int32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
inline float float_of(int32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
/// keep ? a : b, as a mask on the bits.
inline float select(bool keep, float a, float b) {
  const int32_t m = -int32_t(keep);
  return float_of((bits_of(a) & m) | (bits_of(b) & ~m));
}
} // namespace math_detail

inline float fast_exp(float x) {
  using namespace math_detail;
  // x clamped to [-87.3, 88.7]: a positive float orders as its bits, signed; a negative one as
  // its bits, unsigned, reversed. -0 stays -0.
  const int32_t bits = bits_of(x), high = 0x42b16666, low = int32_t(0xc2ae999a); // 88.7f, -87.3f
  const int32_t below = bits < high ? bits : high;
  const uint32_t clamped = uint32_t(below) < uint32_t(low) ? uint32_t(below) : uint32_t(low);
  const float y = float_of(int32_t(clamped));
  float n = std::nearbyint(y * 1.44269504088896341f);
  float r = y - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = float_of((static_cast<int32_t>(n) + 127) << 23);
  return select((bits & 0x7fffffff) > 0x7f800000, x, p * scale); // NaN in, NaN out
}
inline double fast_exp(double x) { return std::exp(x); }

inline float fast_tanh(float x) {
  using namespace math_detail;
  const float a = std::fabs(x);
  // |x| < 0.625: x + x^3 P(x^2); else 1 - 2 / (e^2|x| + 1), with the sign of x (|x| taken
  // to at most 9, on its bits: NaN takes small's arm, which keeps it).
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float big = 1.0f - 2.0f / (fast_exp(2.0f * float_of(std::min(bits_of(a), bits_of(9.0f)))) + 1.0f);
  return select(a >= 0.625f, std::copysign(big, x), small);
}
inline double fast_tanh(double x) { return std::tanh(x); }

/// The math rnnc/scalar.h's formulas and the generated code call: sigmoid's
/// exp is fast_exp; min and max are math_detail's.
namespace math {
using cpu::fast_exp;
using std::exp;
using std::log1p;
using math_detail::max;
using math_detail::min;
} // namespace math

#define RNNC_SCALAR inline
#include "rnnc/scalar.h"
#undef RNNC_SCALAR

// GEMMs (docs/reliability.md, "Determinism"). A BLAS that spreads one product over its own
// threads cuts it by the thread count, and which of its kernels (a vector block or an edge, a
// different order of the sum) computes an element follows the cut. So rnnc cuts each product
// itself, into tiles fixed by the shape alone, and the BLAS computes each tile on the thread
// that calls it: every element's sum runs in the same order for any number of threads.

/// OpenBLAS runs on the calling thread from the first GEMM on. Its pthreads build obeys
/// openblas_set_num_threads(1); its OpenMP build stays on one thread inside an OpenMP team, which
/// is where gemm() calls it (there, openblas_set_num_threads would also set OpenMP's own count).
inline bool blas_in_team() {
#ifdef OPENBLAS_VERSION
  static const bool in_team = [] {
    if (openblas_get_parallel() != 2) openblas_set_num_threads(1);
    return openblas_get_parallel() == 2;
  }();
  return in_team;
#else
  return false;
#endif
}

/// A product's cut into tiles of C: `rows` × `cols` tiles of at most row_step × col_step. It
/// depends on M, N and K only. Tiles have at least kTileMacs multiply-adds where the product
/// allows (a matrix-vector product, memory-bound, kVectorMacs), at most kMaxTiles of them. The
/// longer side is halved first, down to 128 rows or columns (64 for a vector), so tiles stay square-ish (a tile
/// packs K × (its rows + its columns) for rows × columns × K of work); column steps are
/// multiples of 16, so every tile but the last is whole vectors.
struct GemmTiles {
  int64_t rows, cols, row_step, col_step;
};
inline GemmTiles gemm_tiles(int64_t M, int64_t N, int64_t K) {
  constexpr double kTileMacs = 1 << 21, kVectorMacs = 1 << 16;
  constexpr int64_t kMaxTiles = 64;
  const int64_t kMinSide = M == 1 ? 64 : 128;
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const double macs = double(M) * double(N) * double(std::max<int64_t>(K, 1));
  const double want = std::min(macs / (M == 1 ? kVectorMacs : kTileMacs), double(kMaxTiles));
  int64_t rows = 1, cols = 1;
  while (double(rows * cols * 2) <= want) {
    const int64_t m = M / rows, n = N / cols;
    if (m >= n && m >= 2 * kMinSide) rows *= 2;
    else if (n >= 2 * kMinSide) cols *= 2;
    else if (m >= 2 * kMinSide) rows *= 2;
    else break;
  }
  const int64_t col_step = ceil_div(ceil_div(N, cols), 16) * 16, row_step = ceil_div(M, rows);
  return {ceil_div(M, row_step), ceil_div(N, col_step), row_step, col_step};
}

/// One tile: rows [r0, r0 + m) and columns [c0, c0 + n) of C, by one BLAS call on this thread.
/// A single row (one sequence in a loop) is a matrix-vector product.
template <class E>
inline void gemm_tile(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t r0, int64_t m, int64_t c0, int64_t n,
                      const E *A, const E *B, E *C, E beta) {
  constexpr bool f32 = sizeof(E) == sizeof(float);
  const E *a = ta ? A + r0 : A + r0 * K, *b = tb ? B + c0 * K : B + c0;
  E *c = C + r0 * N + c0;
  const auto gemv = [&](CBLAS_TRANSPOSE t, int64_t rows, int64_t cols, int64_t ld) {
    if constexpr (f32) cblas_sgemv(CblasRowMajor, t, rows, cols, 1.0f, b, ld, a, 1, beta, c, 1);
    else cblas_dgemv(CblasRowMajor, t, rows, cols, 1.0, b, ld, a, 1, beta, c, 1);
  };
  if (m == 1 && !ta) return tb ? gemv(CblasNoTrans, n, K, K) : gemv(CblasTrans, K, n, N);
  const CBLAS_TRANSPOSE opA = ta ? CblasTrans : CblasNoTrans, opB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (f32) cblas_sgemm(CblasRowMajor, opA, opB, m, n, K, 1.0f, a, ta ? M : K, b, tb ? K : N, beta, c, N);
  else cblas_dgemm(CblasRowMajor, opA, opB, m, n, K, 1.0, a, ta ? M : K, b, tb ? K : N, beta, c, N);
}

/// y[N] = a · B + beta · y for one row a[K] and B stored [K][N]. Cut by columns, each tile would
/// read B in short strided pieces (1.7x slower than one call at N = 256, K = 1024), so the cut is
/// by rows of B instead: fixed chunks (from N and K alone), each chunk's partial product by one
/// BLAS call into `parts`, then the partials added to y in chunk order.
template <class E> inline void gemv_by_rows(int64_t N, int64_t K, const E *a, const E *B, E *y, E beta, bool in_team) {
  constexpr int64_t kChunkMacs = 1 << 16, kMaxChunks = 16;
  const int64_t want = std::clamp<int64_t>(N * K / kChunkMacs, 1, std::min<int64_t>(kMaxChunks, std::max<int64_t>(K, 1)));
  const int64_t step = (K + want - 1) / want, chunks = K > 0 ? (K + step - 1) / step : 1;
  const auto gemv = [&](int64_t k0, int64_t rows, E b, E *out) {
    if constexpr (sizeof(E) == sizeof(float))
      cblas_sgemv(CblasRowMajor, CblasTrans, rows, N, 1.0f, B + k0 * N, N, a + k0, 1, b, out, 1);
    else cblas_dgemv(CblasRowMajor, CblasTrans, rows, N, 1.0, B + k0 * N, N, a + k0, 1, b, out, 1);
  };
  if (chunks == 1 && !in_team) return gemv(0, K, beta, y);
  if (chunks == 1) {
#pragma omp parallel for
    for (int c = 0; c < 1; ++c) gemv(0, K, beta, y);
    return;
  }
  thread_local std::vector<E> parts;
  parts.resize(size_t(chunks * N));
  E *p = parts.data();
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) gemv(c * step, std::min(step, K - c * step), E(0), p + c * N);
  for (int64_t n = 0; n < N; ++n) {
    E sum = beta == E(0) ? E(0) : beta * y[n];
    for (int64_t c = 0; c < chunks; ++c) sum += p[c * N + n];
    y[n] = sum;
  }
}

/// C[M][N] = op(A) · op(B) + beta · C, row-major; op transposes when asked. A, B and C are
/// stored whole: A as [M][K] (ta: [K][M]), B as [K][N] (tb: [N][K]), C as [M][N]. The tiles
/// (gemm_tiles) run in an OpenMP team when there are several.
template <class E>
inline void gemm_tiled(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const E *A, const E *B, E *C, E beta) {
  if (M <= 0 || N <= 0) return;
  const GemmTiles g = gemm_tiles(M, N, K);
  const int64_t tiles = g.rows * g.cols;
  const auto tile = [&](int64_t i) {
    const int64_t r0 = (i / g.cols) * g.row_step, c0 = (i % g.cols) * g.col_step;
    gemm_tile(ta, tb, M, N, K, r0, std::min(g.row_step, M - r0), c0, std::min(g.col_step, N - c0), A, B, C, beta);
  };
  const bool in_team = blas_in_team(); // first: it also keeps OpenBLAS on the calling thread
  if (M == 1 && !ta && !tb) return gemv_by_rows(N, K, A, B, C, beta, in_team);
  if (tiles == 1 && !in_team) return tile(0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < tiles; ++i) tile(i);
}
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C, float beta) {
  gemm_tiled(ta, tb, M, N, K, A, B, C, beta);
}
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *C,
                 double beta) {
  gemm_tiled(ta, tb, M, N, K, A, B, C, beta);
}

/// Rows [first, first + rows) of a [*][B][width] array set to zero.
template <class E> inline void clear_rows(E *a, int64_t first, int64_t rows, int64_t B, int64_t width) {
  std::fill_n(a + first * B * width, rows * B * width, E(0));
}
/// `rows` rows of src copied into a from row `first` (converted where src is
/// stored in 16 bits and a is not, or the other way: rnnc/half.h).
template <class E, class S> inline void copy_rows(E *a, int64_t first, const S *src, int64_t rows, int64_t B, int64_t width) {
  std::copy_n(src, rows * B * width, a + first * B * width);
}
/// `rows` rows of a from row `first` copied out (converted as copy_rows).
template <class E, class S> inline void read_rows(const E *a, int64_t first, int64_t rows, int64_t B, int64_t width, S *out) {
  std::copy_n(a + first * B * width, rows * B * width, out);
}

// Loops run in parallel over time (docs/time-parallel.md).

/// The chunks a loop of T steps is cut into: at most 64 (the rows of its
/// scratch), each at least two steps; 0 where the loop runs step by step.
/// `guarded` (--time-parallel auto): also 0 where the cost model expects the
/// steps to be faster, from `elements` (B·n·k state values a step), Newton's
/// `iterations` (0: a scan) and the machine's processors (not OMP_NUM_THREADS,
/// so that a loop runs the same way, to the bit, for any thread count). The
/// environment's RNNC_TIME_PARALLEL=off runs every such loop step by step.
inline int64_t scan_chunks(int64_t T, int64_t elements, int iterations, bool guarded) {
  static const bool off = [] {
    const char *v = std::getenv("RNNC_TIME_PARALLEL");
    return v && std::strcmp(v, "off") == 0;
  }();
  const int64_t chunks = std::min<int64_t>(64, T / 2);
  if (chunks < 2 || off) return 0;
  if (!guarded) return chunks;
#ifdef _OPENMP
  const double threads = omp_get_num_procs(); // the machine's, not OMP_NUM_THREADS: the same bits for any count
#else
  const double threads = 1;
#endif
  // In nanoseconds, fitted to docs/benchmarks/time-parallel-cpu.md (2 cores): a state element costs
  // about 0.5 a pass over it; a step 7 more on one thread, or a barrier (1000) when its rows are split
  // across threads (past kTeamWork elements); a step of a parallel pass 9; each parallel phase a fork
  // and join (8000).
  constexpr double kElement = 0.5, kStep = 7, kParallelStep = 9, kBarrier = 1000, kRegion = 8000;
  constexpr double kTeamWork = double(1 << 17);
  const double e = double(elements);
  const double sequential = double(T) * (e >= kTeamWork ? kElement * e / threads + kBarrier : kElement * e + kStep);
  // Passes over every step: a scan composes the chunks, then runs them; Newton linearizes, composes
  // and applies each iteration (about 4 passes' worth), then runs the exact steps.
  const double passes = iterations ? 4.0 * iterations + 1.5 : 2.0;
  const double regions = iterations ? 3.0 * iterations + 3 : 3;
  const double parallel = double(T) * passes * (kElement * e + kParallelStep) / threads + double(chunks) * e * kElement +
                          regions * kRegion;
  return parallel < sequential ? chunks : 0;
}

/// max_i |a[i] - b[i]| / (1 + |a[i]|) over n elements (NaN where either is).
/// f(j, m) for each element j < n of a mask drawn once per call at `site`
/// (counter (j / 8, ~0, ~0, site)): m is `scale` (1 / keep) or 0 in training,
/// 1 in evaluation. One Philox call draws eight elements.
template <class E, class F>
inline void each_call_mask(const unsigned *rng, unsigned site, unsigned threshold, E scale, int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n > (1 << 18))
  for (int64_t q = 0; q < (n + 7) / 8; ++q) {
    unsigned draw[8];
    keep_draws8(rng, site, ~0u, ~0u, static_cast<unsigned>(q), draw);
    for (int64_t j = 8 * q; j < std::min(n, 8 * q + 8); ++j) f(j, keep_value(rng, draw[j - 8 * q], threshold, scale, E(1)));
  }
}

/// A dropped param (DropConnect, docs/language.md): out[j] = w[j] times
/// element j's mask (w and out may be stored in 16 bits: rnnc/half.h; out
/// rounded once, as a product's weight).
template <class E, class S, class O>
inline void drop_param(const unsigned *rng, unsigned site, unsigned threshold, E scale, const S *w, O *out, int64_t n) {
  each_call_mask(rng, site, threshold, scale, n, [&](int64_t j, E m) { out[j] = O(E(w[j]) * m); });
}

/// The gradient of a dropped param reaches its param through the same mask:
/// g[j] += d[j] times element j's mask.
template <class E>
inline void fold_dropped_grad(const unsigned *rng, unsigned site, unsigned threshold, E scale, const E *d, E *g, int64_t n) {
  each_call_mask(rng, site, threshold, scale, n, [&](int64_t j, E m) { g[j] += d[j] * m; });
}

template <class E> inline double relative_gap(const E *a, const E *b, int64_t n) {
  double gap = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i])) / (1 + std::fabs(double(a[i])));
    if (!(d <= gap)) gap = d; // NaN sticks
  }
  return gap;
}

/// Whether Newton's answer stands: each chunk's exact end within the
/// tolerance (1e-4 in float, 1e-9 in double) of the guess the next chunk
/// started from. With RNNC_SCAN_REPORT set, says so on stderr.
inline bool newton_kept(const char *loop, int iterations, double residual, size_t real_bytes) {
  const double tolerance = real_bytes == sizeof(float) ? 1e-4 : 1e-9;
  const bool kept = residual <= tolerance;
  static const bool report = std::getenv("RNNC_SCAN_REPORT") != nullptr;
  if (report)
    std::fprintf(stderr, "rnnc: newton (%s): %d iterations, residual %.9g: %s\n", loop, iterations, residual,
                 kept ? "kept" : "not converged, ran step by step");
  return kept;
}
} // namespace rnnc::cpu
