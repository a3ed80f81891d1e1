// The part of cuBLAS generated code uses: column-major GEMM and GEMV, as a
// plain reference accumulating in double (see emulator.h).
#pragma once

#include "cuda_runtime.h"

typedef struct EmuBlas *cublasHandle_t;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N, CUBLAS_OP_T };
enum cublasMath_t { CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH };

inline const char *cublasGetStatusString(cublasStatus_t s) { return s ? "emulated cuBLAS error" : "success"; }
inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
  *h = nullptr;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

namespace rnnc_emulator {
/// C = alpha op(A) op(B) + beta C, column-major, with cuBLAS's checks of the leading dimensions.
template <class T>
cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T *alpha, const T *A, int lda,
                    const T *B, int ldb, const T *beta, T *C, int ldc) {
  if (m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m ||
      lda < 1 || ldb < 1 || ldc < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  T a = *alpha, b = *beta;
  issue([=] {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int p = 0; p < k; ++p) {
          T x = ta == CUBLAS_OP_N ? A[i + p * lda] : A[p + i * lda];
          T y = tb == CUBLAS_OP_N ? B[p + j * ldb] : B[j + p * ldb];
          s += double(x) * double(y);
        }
        T &c = C[i + j * ldc];
        c = static_cast<T>(a * s + (b == T(0) ? 0.0 : double(b) * double(c)));
      }
  });
  return CUBLAS_STATUS_SUCCESS;
}
/// y = alpha op(A) x + beta y, column-major.
template <class T>
cublasStatus_t gemv(cublasOperation_t t, int m, int n, const T *alpha, const T *A, int lda, const T *x, int incx,
                    const T *beta, T *y, int incy) {
  if (m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx != 1 || incy != 1) return CUBLAS_STATUS_INVALID_VALUE;
  T a = *alpha, b = *beta;
  issue([=] {
    int rows = t == CUBLAS_OP_N ? m : n, cols = t == CUBLAS_OP_N ? n : m;
    for (int i = 0; i < rows; ++i) {
      double s = 0;
      for (int j = 0; j < cols; ++j) s += double(t == CUBLAS_OP_N ? A[i + j * lda] : A[j + i * lda]) * double(x[j]);
      y[i] = static_cast<T>(a * s + (b == T(0) ? 0.0 : double(b) * double(y[i])));
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
} // namespace rnnc_emulator

// Plain functions with cuBLAS's signatures, so code may take their address.
inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                                  float *C, int ldc) {
  return rnnc_emulator::gemm<float>(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline cublasStatus_t cublasDgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const double *alpha, const double *A, int lda, const double *B, int ldb,
                                  const double *beta, double *C, int ldc) {
  return rnnc_emulator::gemm<double>(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline cublasStatus_t cublasSgemv(cublasHandle_t, cublasOperation_t t, int m, int n, const float *alpha, const float *A,
                                  int lda, const float *x, int incx, const float *beta, float *y, int incy) {
  return rnnc_emulator::gemv<float>(t, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
inline cublasStatus_t cublasDgemv(cublasHandle_t, cublasOperation_t t, int m, int n, const double *alpha, const double *A,
                                  int lda, const double *x, int incx, const double *beta, double *y, int incy) {
  return rnnc_emulator::gemv<double>(t, m, n, alpha, A, lda, x, incx, beta, y, incy);
}
