// What the C++ code rnnc generates calls: scalar functions the ops need, the
// BLAS call behind every GEMM, and the row helpers on host buffers (the
// workspace layout is rnnc/workspace.h). Header-only, so a bundle compiles
// with $(rnnc --print-cflags) and links only OpenBLAS.
#pragma once

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

namespace rnnc::cpu {

using namespace rnnc::host;

/// exp and tanh that the compiler can vectorize: for float, a range reduction
/// and a polynomial (Cephes' coefficients, within 2 ulp, no branches); for
/// double, the standard library's.
inline float fast_exp(float x) {
  x = std::clamp(x, -87.3f, 88.7f);
  float n = std::nearbyint(x * 1.44269504088896341f);
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
inline double fast_exp(double x) { return std::exp(x); }

inline float fast_tanh(float x) {
  float a = std::fabs(x);
  // |x| < 0.625: x + x^3 P(x^2); else 1 - 2 / (e^2|x| + 1), with the sign of x.
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = x + x * z * p;
  float big = 1.0f - 2.0f / (fast_exp(2.0f * std::min(a, 9.0f)) + 1.0f);
  return a < 0.625f ? small : std::copysign(big, x);
}
inline double fast_tanh(double x) { return std::tanh(x); }

template <class T> inline T sigmoid(T x) { return T(1) / (T(1) + fast_exp(-x)); }
template <class T> inline T softplus(T x) { return x > T(20) ? x : std::log1p(std::exp(x)); }
template <class T> inline T hard_sigmoid(T x) { return std::clamp(x / T(6) + T(0.5), T(0), T(1)); }
template <class T> inline T hard_sigmoid_grad(T x) { return x > T(-3) && x < T(3) ? T(1) / T(6) : T(0); }
template <class T> inline T silu(T x) { return x * sigmoid(x); }
template <class T> inline T step(T x) { return x > T(0) ? T(1) : T(0); }
template <class T> inline T sign(T x) { return x > T(0) ? T(1) : x < T(0) ? T(-1) : T(0); }

/// C[M][N] = alpha · op(A) · op(B) + beta · C, row-major; op transposes when asked.
/// lda, ldb, ldc are the row lengths of A, B, C as stored.
/// One row (a single sequence in a loop) is a matrix-vector product.
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C, float beta) {
  if (M <= 0 || N <= 0) return;
  if (M == 1 && !ta) {
    if (tb) cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, B, K, A, 1, beta, C, 1);
    else cblas_sgemv(CblasRowMajor, CblasTrans, K, N, 1.0f, B, N, A, 1, beta, C, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
              ta ? M : K, B, tb ? K : N, beta, C, N);
}
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double *A, const double *B, double *C,
                 double beta) {
  if (M <= 0 || N <= 0) return;
  if (M == 1 && !ta) {
    if (tb) cblas_dgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0, B, K, A, 1, beta, C, 1);
    else cblas_dgemv(CblasRowMajor, CblasTrans, K, N, 1.0, B, N, A, 1, beta, C, 1);
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0, A,
              ta ? M : K, B, tb ? K : N, beta, C, N);
}

/// Rows [first, first + rows) of a [*][B][width] array set to zero.
template <class E> inline void clear_rows(E *a, int64_t first, int64_t rows, int64_t B, int64_t width) {
  std::fill_n(a + first * B * width, rows * B * width, E(0));
}
/// `rows` rows of src copied into a from row `first`.
template <class E> inline void copy_rows(E *a, int64_t first, const E *src, int64_t rows, int64_t B, int64_t width) {
  std::copy_n(src, rows * B * width, a + first * B * width);
}
/// `rows` rows of a from row `first` copied out.
template <class E> inline void read_rows(const E *a, int64_t first, int64_t rows, int64_t B, int64_t width, E *out) {
  std::copy_n(a + first * B * width, rows * B * width, out);
}

// Loops run in parallel over time (docs/time-parallel.md).

/// The chunks a loop of T steps is cut into: at most 64 (the rows of its
/// scratch), each at least two steps; 0 where the loop runs step by step.
/// `guarded` (--time-parallel auto): also 0 where the cost model expects the
/// steps to be faster, from `elements` (B·n·k state values a step), Newton's
/// `iterations` (0: a scan) and the threads OpenMP would use. The
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
  const double threads = omp_get_max_threads();
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
