// The part of cuBLAS generated code uses: column-major GEMM and GEMV, as a
// plain reference accumulating in double, queued on the handle's stream;
// with CUBLAS_TF32_TENSOR_OP_MATH a float GEMM's operands are rounded to
// TF32 (10 bits of mantissa) first, as tensor cores read them. cublasGemmEx
// takes bf16 and f16 matrices (--dtype bf16|f16: docs/precision.md) as
// uint16_t bit patterns, decoded and rounded with rnnc/half.h.
#pragma once

#include "cuda_runtime.h"
#include "rnnc/half.h"

#include <type_traits>

// library_types.h's, which the real cublas_v2.h includes: the element types
// cublasGemmEx (and cublasLt.h's matmul: float, double) takes here.
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef cudaDataType_t cudaDataType;

struct EmuBlas {
  EmuStream *stream = nullptr; // the default stream until cublasSetStream
  bool tf32 = false;
};
typedef EmuBlas *cublasHandle_t;
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N, CUBLAS_OP_T };
enum cublasMath_t { CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_64F = 70, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

inline const char *cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_NOT_SUPPORTED ? "the functionality requested is not supported"
         : s                              ? "emulated cuBLAS error"
                                          : "success";
}
inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
  static std::vector<std::unique_ptr<EmuBlas>> handles;
  handles.push_back(std::make_unique<EmuBlas>());
  *h = handles.back().get();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
  h->tf32 = m == CUBLAS_TF32_TENSOR_OP_MATH;
  return CUBLAS_STATUS_SUCCESS;
}

namespace rnnc_emulator {
/// `x` as a tensor core reads it: TF32 (float with the low 13 bits of the
/// mantissa rounded off, to nearest, ties away) when `tf32`, else itself.
template <class T> inline double operand(T x, bool tf32) {
  if constexpr (std::is_same_v<T, float>) {
    if (tf32 && std::isfinite(x)) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      u = (u + 0x1000u) & ~0x1fffu;
      std::memcpy(&x, &u, 4);
    }
  }
  return double(x);
}

/// C = alpha op(A) op(B) + beta C, column-major, with cuBLAS's checks of the leading dimensions.
template <class T>
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T *alpha, const T *A, int lda,
                    const T *B, int ldb, const T *beta, T *C, int ldc) {
  if (m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m ||
      lda < 1 || ldb < 1 || ldc < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  T a = *alpha, b = *beta;
  const bool tf32 = h->tf32;
  bool queued = issue(h->stream, [=] {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int p = 0; p < k; ++p) {
          T x = ta == CUBLAS_OP_N ? A[i + p * lda] : A[p + i * lda];
          T y = tb == CUBLAS_OP_N ? B[p + j * ldb] : B[j + p * ldb];
          s += operand(x, tf32) * operand(y, tf32);
        }
        T &c = C[i + j * ldc];
        c = static_cast<T>(a * s + (b == T(0) ? 0.0 : double(b) * double(c)));
      }
  });
  return queued ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
/// Element i of a cublasGemmEx matrix of type `t`, exactly.
inline float element(const void *p, cudaDataType t, size_t i) {
  if (t == CUDA_R_32F) return static_cast<const float *>(p)[i];
  const uint16_t bits = static_cast<const uint16_t *>(p)[i];
  return t == CUDA_R_16BF ? rnnc::half::bf16_float(bits) : rnnc::half::f16_float(bits);
}
/// Stores `v` as element i, rounded to nearest even for 16 bits.
inline void setElement(void *p, cudaDataType t, size_t i, float v) {
  if (t == CUDA_R_32F) static_cast<float *>(p)[i] = v;
  else static_cast<uint16_t *>(p)[i] = t == CUDA_R_16BF ? rnnc::half::bf16_bits(v) : rnnc::half::f16_bits(v);
}

/// cublasGemmEx with float compute: A and B of one type (bf16, f16 or
/// float), C of theirs or float, alpha and beta floats; other combinations
/// are not supported (as on a GPU, where each is a kernel of its own).
/// Summed in double and rounded once to float, then to C's type; real tensor
/// cores sum in float, in an order they do not specify, which compare.cpp's
/// tolerance allows. `algo` only picks a kernel on a GPU: ignored.
inline cublasStatus_t gemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                             const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                             cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                             cublasComputeType_t computeType) {
  if (m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m ||
      lda < 1 || ldb < 1 || ldc < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool sixteen = Atype == CUDA_R_16BF || Atype == CUDA_R_16F;
  if (computeType != CUBLAS_COMPUTE_32F || Btype != Atype || (!sixteen && Atype != CUDA_R_32F) ||
      (Ctype != Atype && Ctype != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const double a = *static_cast<const float *>(alpha), b = *static_cast<const float *>(beta);
  // The math mode applies to float operands (a 16-bit value is a TF32 one already).
  const bool tf32 = h->tf32 && Atype == CUDA_R_32F;
  bool queued = issue(h->stream, [=] {
    const size_t M = size_t(m), N = size_t(n), K = size_t(k), la = size_t(lda), lb = size_t(ldb), lc = size_t(ldc);
    // op(A) (m x k) and op(B) (k x n) decoded once, column-major.
    std::vector<double> x(M * K), y(K * N);
    for (size_t p = 0; p < K; ++p) {
      for (size_t i = 0; i < M; ++i)
        x[i + p * M] = operand(element(A, Atype, ta == CUBLAS_OP_N ? i + p * la : p + i * la), tf32);
      for (size_t j = 0; j < N; ++j)
        y[p + j * K] = operand(element(B, Btype, tb == CUBLAS_OP_N ? p + j * lb : j + p * lb), tf32);
    }
    for (size_t i = 0; i < M; ++i)
      for (size_t j = 0; j < N; ++j) {
        double s = 0;
        for (size_t p = 0; p < K; ++p) s += x[i + p * M] * y[p + j * K];
        const size_t c = i + j * lc;
        // beta 0: C is not read (it may hold anything, NaN included), as cuBLAS's.
        setElement(C, Ctype, c, static_cast<float>(a * s + (b == 0 ? 0.0 : b * double(element(C, Ctype, c)))));
      }
  });
  return queued ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
/// y = alpha op(A) x + beta y, column-major.
template <class T>
cublasStatus_t gemv(cublasHandle_t h, cublasOperation_t t, int m, int n, const T *alpha, const T *A, int lda, const T *x, int incx,
                    const T *beta, T *y, int incy) {
  if (m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx != 1 || incy != 1) return CUBLAS_STATUS_INVALID_VALUE;
  T a = *alpha, b = *beta;
  bool queued = issue(h->stream, [=] {
    int rows = t == CUBLAS_OP_N ? m : n, cols = t == CUBLAS_OP_N ? n : m;
    for (int i = 0; i < rows; ++i) {
      double s = 0;
      for (int j = 0; j < cols; ++j) s += double(t == CUBLAS_OP_N ? A[i + j * lda] : A[j + i * lda]) * double(x[j]);
      y[i] = static_cast<T>(a * s + (b == T(0) ? 0.0 : double(b) * double(y[i])));
    }
  });
  return queued ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
} // namespace rnnc_emulator

// Plain functions with cuBLAS's signatures, so code may take their address.
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                                  float *C, int ldc) {
  return rnnc_emulator::gemm<float>(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const double *alpha, const double *A, int lda, const double *B, int ldb,
                                  const double *beta, double *C, int ldc) {
  return rnnc_emulator::gemm<double>(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline cublasStatus_t cublasSgemv(cublasHandle_t h, cublasOperation_t t, int m, int n, const float *alpha, const float *A,
                                  int lda, const float *x, int incx, const float *beta, float *y, int incy) {
  return rnnc_emulator::gemv<float>(h, t, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
inline cublasStatus_t cublasDgemv(cublasHandle_t h, cublasOperation_t t, int m, int n, const double *alpha, const double *A,
                                  int lda, const double *x, int incx, const double *beta, double *y, int incy) {
  return rnnc_emulator::gemv<double>(h, t, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                                   int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                                   cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t) {
  return rnnc_emulator::gemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                               computeType);
}
