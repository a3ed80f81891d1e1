// The emulator's cublasGemmEx (include/cublas_v2.h), which a 16-bit model's
// products call (--dtype bf16|f16, docs/precision.md), against a reference
// of this file's own: op(A) and op(B) drawn first and laid out by transpose
// and leading dimension after, elements decoded with rnnc/half.h, products
// summed in double, rounded once to float, then to C's type. Every supported
// combination of types, both transposes, beta 0 (C full of NaNs, never read)
// and 1, both math modes: bit for bit, the padding of every leading
// dimension untouched, nothing done before the stream is synchronized.
// Other types (CUBLAS_STATUS_NOT_SUPPORTED) and leading dimensions too short
// (CUBLAS_STATUS_INVALID_VALUE) refused, C left as it was. Exit 0 when all hold.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "rnnc/half.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

int failures = 0;

void expect(bool holds, const char *what) {
  std::printf("%s %s\n", holds ? "ok " : "BAD", what);
  failures += !holds;
}

const char *nameOf(cudaDataType t) {
  return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_16F ? "f16" : t == CUDA_R_32F ? "f32" : "other";
}
size_t bytesOf(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

/// The bits `v` is stored as in type t (16 bits: rounded to nearest even).
uint32_t encode(cudaDataType t, float v) {
  if (t == CUDA_R_16BF) return rnnc::half::bf16_bits(v);
  if (t == CUDA_R_16F) return rnnc::half::f16_bits(v);
  return rnnc::half::float_bits(v);
}
float decode(cudaDataType t, uint32_t bits) {
  if (t == CUDA_R_16BF) return rnnc::half::bf16_float(static_cast<uint16_t>(bits));
  if (t == CUDA_R_16F) return rnnc::half::f16_float(static_cast<uint16_t>(bits));
  return rnnc::half::bits_float(bits);
}
uint32_t nanBits(cudaDataType t) { return t == CUDA_R_32F ? 0xffffffffu : 0xffffu; } // what cudaMalloc fills with

/// x as a tensor core reads it in TF32: 10 bits of mantissa, to nearest, ties away from zero.
double tf32(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double unit = std::ldexp(1.0, std::max(std::ilogb(x), -126) - 10);
  return std::round(x / unit) * unit;
}

/// Device memory holding `bits` as elements of type t.
void *upload(cudaDataType t, const std::vector<uint32_t> &bits) {
  void *p = nullptr;
  cudaMalloc(&p, bits.size() * bytesOf(t));
  for (size_t i = 0; i < bits.size(); ++i) {
    if (t == CUDA_R_32F) static_cast<uint32_t *>(p)[i] = bits[i];
    else static_cast<uint16_t *>(p)[i] = static_cast<uint16_t>(bits[i]);
  }
  return p;
}
/// The elements of device memory p (host memory in the emulator), as bits.
std::vector<uint32_t> bitsAt(cudaDataType t, const void *p, size_t n) {
  std::vector<uint32_t> bits(n);
  for (size_t i = 0; i < n; ++i)
    bits[i] = t == CUDA_R_32F ? static_cast<const uint32_t *>(p)[i] : static_cast<const uint16_t *>(p)[i];
  return bits;
}

std::mt19937_64 rng(11);

/// A rows x cols matrix of values representable in t.
std::vector<std::vector<float>> draw(cudaDataType t, int rows, int cols) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> v(static_cast<size_t>(rows), std::vector<float>(static_cast<size_t>(cols)));
  for (auto &row : v)
    for (float &x : row) x = decode(t, encode(t, normal(rng)));
  return v;
}
/// `v` column-major with leading dimension ld (transposed first with `trans`), NaN in the padding.
std::vector<uint32_t> layOut(cudaDataType t, const std::vector<std::vector<float>> &v, bool trans, int ld) {
  const size_t rows = trans ? v[0].size() : v.size(), cols = trans ? v.size() : v[0].size();
  std::vector<uint32_t> bits(size_t(ld) * cols, nanBits(t));
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) bits[r + c * size_t(ld)] = encode(t, trans ? v[c][r] : v[r][c]);
  return bits;
}

/// One product C = alpha op(A) op(B) + beta C through the emulator, against the reference; true when bit for bit.
bool product(cublasHandle_t h, cudaStream_t s, cudaDataType ab, cudaDataType ct, bool ta, bool tb, int m, int n, int k,
             float alpha, float beta, bool tf32Math) {
  const auto a = draw(ab, m, std::max(k, 1)), b = draw(ab, std::max(k, 1), n), c0 = draw(ct, m, n);
  const int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
  std::vector<uint32_t> cBits = layOut(ct, c0, false, ldc);
  if (beta == 0) cBits.assign(cBits.size(), nanBits(ct)); // never read
  void *A = upload(ab, layOut(ab, a, ta, lda)), *B = upload(ab, layOut(ab, b, tb, ldb)), *C = upload(ct, cBits);
  cublasSetMathMode(h, tf32Math ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  const cublasStatus_t status = cublasGemmEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                             &alpha, A, ab, lda, B, ab, ldb, &beta, C, ct, ldc, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT);
  const bool queued = bitsAt(ct, C, cBits.size()) == cBits;
  cudaStreamSynchronize(s);
  std::vector<uint32_t> want = cBits;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const double x = a[size_t(i)][size_t(p)], y = b[size_t(p)][size_t(j)];
        sum += tf32Math ? tf32(x) * tf32(y) : x * y;
      }
      const double c = beta == 0 ? 0.0 : double(beta) * c0[size_t(i)][size_t(j)];
      want[size_t(i) + size_t(j) * size_t(ldc)] = encode(ct, static_cast<float>(double(alpha) * sum + c));
    }
  const std::vector<uint32_t> got = bitsAt(ct, C, cBits.size());
  cudaFree(A), cudaFree(B), cudaFree(C);
  if (status == CUBLAS_STATUS_SUCCESS && queued && got == want) return true;
  std::printf("    A, B %s, C %s, %s%s, m %d n %d k %d, alpha %g beta %g%s: ", nameOf(ab), nameOf(ct), ta ? "T" : "N",
              tb ? "T" : "N", m, n, k, alpha, beta, tf32Math ? ", TF32" : "");
  if (status != CUBLAS_STATUS_SUCCESS) std::printf("status %d\n", status);
  else if (!queued) std::printf("C changed before the stream was synchronized\n");
  else
    for (size_t e = 0; e < want.size(); ++e)
      if (got[e] != want[e]) {
        std::printf("C[%zu] (row %zu, column %zu) is %#x (%.9g), not %#x (%.9g)\n", e, e % size_t(ldc), e / size_t(ldc),
                    got[e], decode(ct, got[e]), want[e], decode(ct, want[e]));
        break;
      }
  return false;
}

/// A call the emulator must refuse with `want`, queuing nothing (or, with
/// CUBLAS_STATUS_SUCCESS, accept, writing C).
void refused(cublasHandle_t h, cudaStream_t s, cudaDataType at, cudaDataType bt, cudaDataType ct,
             cublasComputeType_t compute, bool ta, bool tb, int m, int n, int k, int lda, int ldb, int ldc,
             cublasStatus_t want, const char *what) {
  std::vector<uint32_t> cBits(size_t(std::max(ldc, 1)) * size_t(std::max(n, 1)));
  for (uint32_t &x : cBits) x = encode(ct, 1.5f);
  void *A = upload(at, std::vector<uint32_t>(64 * 64, encode(at, 1.0f)));
  void *B = upload(bt, std::vector<uint32_t>(64 * 64, encode(bt, 1.0f)));
  void *C = upload(ct, cBits);
  const float alpha = 1, beta = 0;
  const cublasStatus_t status = cublasGemmEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                             &alpha, A, at, lda, B, bt, ldb, &beta, C, ct, ldc, compute,
                                             CUBLAS_GEMM_DEFAULT);
  cudaStreamSynchronize(s);
  expect(status == want && (bitsAt(ct, C, cBits.size()) == cBits) == (want != CUBLAS_STATUS_SUCCESS), what);
  if (status != want) std::printf("    status %d, not %d\n", status, want);
  cudaFree(A), cudaFree(B), cudaFree(C);
}

} // namespace

int main() {
  cublasHandle_t h;
  cublasCreate(&h);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cublasSetStream(h, s);

  const cudaDataType supported[][2] = {{CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_16F, CUDA_R_16F},
                                       {CUDA_R_16F, CUDA_R_32F},   {CUDA_R_32F, CUDA_R_32F}};
  const int sizes[][3] = {{1, 1, 1}, {4, 3, 5}, {9, 7, 37}, {3, 2, 0}}; // m, n, k
  for (const auto &[ab, ct] : supported)
    for (bool tf32Math : {false, true}) {
      int good = 0, all = 0;
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (float beta : {0.0f, 1.0f})
            for (float alpha : {1.0f, -0.6875f})
              for (const auto &[m, n, k] : sizes)
                good += product(h, s, ab, ct, ta, tb, m, n, k, alpha, beta, tf32Math), ++all;
      char what[160];
      std::snprintf(what, sizeof what,
                    "A, B %s, C %s%s: %d of %d products (transposes, alpha, beta 0 and 1, sizes) bit for bit",
                    nameOf(ab), nameOf(ct), tf32Math ? ", TF32 math" : "", good, all);
      expect(good == all, what);
    }

  const auto f32 = CUBLAS_COMPUTE_32F;
  const auto other = static_cast<cudaDataType>(1);           // CUDA_R_64F
  const auto compute16 = static_cast<cublasComputeType_t>(64); // CUBLAS_COMPUTE_16F
  struct Types {
    cudaDataType a, b, c;
    cublasComputeType_t compute;
    const char *what;
  };
  const Types unsupported[] = {
      {CUDA_R_16BF, CUDA_R_16F, CUDA_R_32F, f32, "A bf16, B f16: not supported"},
      {CUDA_R_16F, CUDA_R_16BF, CUDA_R_16F, f32, "A f16, B bf16: not supported"},
      {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16F, f32, "A, B bf16, C f16: not supported"},
      {CUDA_R_16F, CUDA_R_16F, CUDA_R_16BF, f32, "A, B f16, C bf16: not supported"},
      {CUDA_R_32F, CUDA_R_32F, CUDA_R_16BF, f32, "A, B f32, C bf16: not supported"},
      {CUDA_R_32F, CUDA_R_16F, CUDA_R_32F, f32, "A f32, B f16: not supported"},
      {other, other, CUDA_R_32F, f32, "A, B f64, C f32: not supported"},
      {CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, compute16, "CUBLAS_COMPUTE_16F: not supported"},
  };
  for (const Types &t : unsupported)
    refused(h, s, t.a, t.b, t.c, t.compute, false, false, 4, 3, 5, 4, 5, 4, CUBLAS_STATUS_NOT_SUPPORTED, t.what);

  const cudaDataType bf = CUDA_R_16BF;
  refused(h, s, bf, bf, bf, f32, false, false, 4, 3, 5, 3, 5, 4, CUBLAS_STATUS_INVALID_VALUE, "lda < m (A not transposed)");
  refused(h, s, bf, bf, bf, f32, true, false, 4, 3, 5, 4, 5, 4, CUBLAS_STATUS_INVALID_VALUE, "lda < k (A transposed)");
  refused(h, s, bf, bf, bf, f32, false, false, 4, 3, 5, 4, 4, 4, CUBLAS_STATUS_INVALID_VALUE, "ldb < k (B not transposed)");
  refused(h, s, bf, bf, bf, f32, false, true, 4, 3, 5, 4, 2, 4, CUBLAS_STATUS_INVALID_VALUE, "ldb < n (B transposed)");
  refused(h, s, bf, bf, bf, f32, false, false, 4, 3, 5, 4, 5, 3, CUBLAS_STATUS_INVALID_VALUE, "ldc < m");
  refused(h, s, bf, bf, CUDA_R_32F, f32, false, false, 0, 3, 5, 0, 5, 1, CUBLAS_STATUS_INVALID_VALUE, "lda 0");
  refused(h, s, bf, bf, bf, f32, false, false, 4, -1, 5, 4, 5, 4, CUBLAS_STATUS_INVALID_VALUE, "n < 0");
  // The same calls with the leading dimensions right are accepted (so the ones above fail for their ld).
  refused(h, s, bf, bf, bf, f32, true, true, 4, 3, 5, 5, 3, 4, CUBLAS_STATUS_SUCCESS,
          "the smallest leading dimensions accepted (beta 0 writes C)");
  return failures ? 1 : 0;
}
