// The part of cuBLASLt generated code uses (rnnc/cuda.h's gemm_bias): one
// column-major matmul D = alpha op(A) op(B) + beta C + bias, the bias added to
// every column (CUBLASLT_EPILOGUE_BIAS), in float or double, as a plain
// reference summing in double and queued on the call's stream; with
// CUBLAS_COMPUTE_32F_FAST_TF32 the operands are rounded to TF32 first, as
// cublas_v2.h's math mode does. The heuristic offers one algorithm, or none
// under RNNC_EMULATOR_LT_ALGOS=0 (the caller's fallback, tested that way).
// Only what gemm_bias sets is modelled: other attributes are refused.
#pragma once

#include "cublas_v2.h"

#include <cstdlib>

struct EmuLt {};
typedef EmuLt *cublasLtHandle_t;
enum cublasLtEpilogue_t { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4 };
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
};
enum cublasLtMatmulPreferenceAttributes_t { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 };

struct EmuLtDesc {
  cublasComputeType_t compute;
  cudaDataType scale;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
};
typedef EmuLtDesc *cublasLtMatmulDesc_t;
struct EmuLtLayout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
typedef EmuLtLayout *cublasLtMatrixLayout_t;
struct EmuLtPreference {};
typedef EmuLtPreference *cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  static EmuLt one;
  *h = &one;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType scale) {
  *d = new EmuLtDesc{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v,
                                                     size_t bytes) {
  auto take = [&](auto &field) {
    if (bytes != sizeof field) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, v, bytes);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (a) {
  case CUBLASLT_MATMUL_DESC_TRANSA: return take(d->ta);
  case CUBLASLT_MATMUL_DESC_TRANSB: return take(d->tb);
  case CUBLASLT_MATMUL_DESC_EPILOGUE: return take(d->epilogue);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return take(d->bias);
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                                 int64_t ld) {
  *l = new EmuLtLayout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = new EmuLtPreference;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t a,
                                                           const void *, size_t bytes) {
  return a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof(size_t) ? CUBLAS_STATUS_SUCCESS
                                                                                  : CUBLAS_STATUS_INVALID_VALUE;
}

namespace rnnc_emulator {
/// Whether the emulated cuBLASLt can run this matmul: what a GPU's would
/// refuse (layouts that do not match the operation, types that differ) is
/// refused here too.
inline bool ltSupports(const EmuLtDesc &d, const EmuLtLayout &a, const EmuLtLayout &b, const EmuLtLayout &c,
                       const EmuLtLayout &dl) {
  const bool dbl = a.type == CUDA_R_64F;
  const bool compute = dbl ? d.compute == CUBLAS_COMPUTE_64F
                           : a.type == CUDA_R_32F && (d.compute == CUBLAS_COMPUTE_32F || d.compute == CUBLAS_COMPUTE_32F_FAST_TF32);
  const uint64_t m = d.ta == CUBLAS_OP_N ? a.rows : a.cols, k = d.ta == CUBLAS_OP_N ? a.cols : a.rows;
  const uint64_t kb = d.tb == CUBLAS_OP_N ? b.rows : b.cols, n = d.tb == CUBLAS_OP_N ? b.cols : b.rows;
  return compute && d.scale == a.type && b.type == a.type && c.type == a.type && dl.type == a.type && k == kb &&
         c.rows == m && c.cols == n && dl.rows == m && dl.cols == n && a.ld >= int64_t(a.rows) && b.ld >= int64_t(b.rows) &&
         c.ld >= int64_t(m) && dl.ld >= int64_t(m) && (d.epilogue != CUBLASLT_EPILOGUE_BIAS || d.bias);
}

template <class T>
void ltMatmul(const EmuLtDesc &d, T alpha, const T *A, const EmuLtLayout &a, const T *B, const EmuLtLayout &b, T beta,
              const T *C, const EmuLtLayout &c, T *D, const EmuLtLayout &dl) {
  const bool tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const int64_t m = int64_t(c.rows), n = int64_t(c.cols), k = int64_t(d.ta == CUBLAS_OP_N ? a.cols : a.rows);
  const T *bias = static_cast<const T *>(d.bias);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const T x = d.ta == CUBLAS_OP_N ? A[i + p * a.ld] : A[p + i * a.ld];
        const T y = d.tb == CUBLAS_OP_N ? B[p + j * b.ld] : B[j + p * b.ld];
        s += operand(x, tf32) * operand(y, tf32);
      }
      // The epilogue adds the bias to the scaled sum, rounded to T (as a GPU's adds in its compute type).
      double v = double(alpha) * s + (beta == T(0) ? 0.0 : double(beta) * double(C[i + j * c.ld]));
      if (d.epilogue == CUBLASLT_EPILOGUE_BIAS) v = double(static_cast<T>(v)) + double(bias[i]);
      D[i + j * dl.ld] = static_cast<T>(v);
    }
}
} // namespace rnnc_emulator

inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                                     cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                                     cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t, int requested,
                                                     cublasLtMatmulHeuristicResult_t *results, int *returned) {
  *returned = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const char *algos = std::getenv("RNNC_EMULATOR_LT_ALGOS");
  if ((algos && std::atoi(algos) == 0) || !rnnc_emulator::ltSupports(*d, *a, *b, *c, *dl)) return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = {};
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                     cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                                     const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t dl,
                                     const cublasLtMatmulAlgo_t *algo, void *, size_t, cudaStream_t stream) {
  if (!algo || !rnnc_emulator::ltSupports(*d, *a, *b, *c, *dl)) return CUBLAS_STATUS_NOT_SUPPORTED;
  // The descriptors and the host scalars may be gone once the call returns: the queued work keeps copies.
  const EmuLtDesc desc = *d;
  const EmuLtLayout la = *a, lb = *b, lc = *c, ld = *dl;
  const bool dbl = la.type == CUDA_R_64F;
  const double al = dbl ? *static_cast<const double *>(alpha) : *static_cast<const float *>(alpha);
  const double be = dbl ? *static_cast<const double *>(beta) : *static_cast<const float *>(beta);
  bool queued = rnnc_emulator::issue(stream, [=] {
    if (dbl)
      rnnc_emulator::ltMatmul(desc, al, static_cast<const double *>(A), la, static_cast<const double *>(B), lb, be,
                              static_cast<const double *>(C), lc, static_cast<double *>(D), ld);
    else
      rnnc_emulator::ltMatmul(desc, float(al), static_cast<const float *>(A), la, static_cast<const float *>(B), lb,
                              float(be), static_cast<const float *>(C), lc, static_cast<float *>(D), ld);
  });
  return queued ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
