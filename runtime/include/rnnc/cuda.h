// What the CUDA host code rnnc generates calls: every CUDA and cuBLAS call
// checked with the failing call named, the per-process context (streams,
// events, one cuBLAS handle per stream, one cuBLASLt handle), the GEMMs, the
// row helpers on device buffers and the graph cache of --cuda-graphs.
// Header-only: a .cu bundle links cudart, cublas and cublasLt; a --jit bundle
// adds rnnc/cuda_jit.h and nvrtc.
// Only the runtime API is used, so a program that has no GPU still starts
// and the first call says "no CUDA device".
#pragma once

#include "rnnc/persistent.h"
#include "rnnc/workspace.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace rnnc::cuda {

using namespace rnnc::host;

/// "cudaMemcpyAsync" from "cudaMemcpyAsync(dst, src, ...)".
inline std::string callName(const char *call) {
  const char *paren = std::strchr(call, '(');
  return paren ? std::string(call, static_cast<size_t>(paren - call)) : std::string(call);
}

inline bool ok(cudaError_t e, const char *call) {
  if (e == cudaSuccess) return true;
  last_error() = callName(call) + ": " + cudaGetErrorString(e);
  return false;
}

inline bool ok(cublasStatus_t s, const char *call) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  last_error() = callName(call) + ": " + cublasGetStatusString(s);
  return false;
}

/// What a helper that launches kernels returned (copy_rows16): false when a
/// launch failed, last_error() already naming it.
inline bool ok(bool issued, const char *) { return issued; }

/// Returns 1 from the enclosing function, the failing call named in last_error().
#define RNNC_CUDA_CHECK(call)                                                                                          \
  do {                                                                                                                 \
    if (!::rnnc::cuda::ok((call), #call)) return 1;                                                                    \
  } while (0)

/// Streams, events and cuBLAS handles of a model in one thread, created on
/// first use and kept until the process ends (released from a destructor,
/// they would race the CUDA runtime's own teardown).
/// Stream 0 is the caller's (bind); a caller that passes none gets a blocking
/// stream of the context's own, so work it then puts on the legacy default
/// stream (a cudaMemcpy of the results) waits for the model. The others are
/// non-blocking, forked from stream 0 and joined back to it with events.
class Context {
public:
  /// Creates `streams` streams and `events` events once; false with
  /// last_error() set ("no CUDA device: ...") when that cannot be done.
  bool ready(int streams, int events, bool tf32) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ready_) return true;
    if (!error_.empty()) {
      last_error() = error_;
      return false;
    }
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      error_ = std::string("no CUDA device (cudaGetDeviceCount: ") +
               (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) + ")";
      last_error() = error_;
      return false;
    }
    streams_.assign(static_cast<size_t>(streams), nullptr);
    blas_.assign(static_cast<size_t>(streams), nullptr);
    blasSpace_.assign(static_cast<size_t>(streams), nullptr);
    events_.assign(static_cast<size_t>(events), nullptr);
    for (int s = 0; s < streams; ++s) {
      if (!ok(cudaStreamCreateWithFlags(&streams_[s], s == 0 ? cudaStreamDefault : cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags") ||
          !ok(cublasCreate(&blas_[s]), "cublasCreate") || !ok(cublasSetStream(blas_[s], streams_[s]), "cublasSetStream") ||
          // A workspace of its own per handle: results do not depend on
          // which stream ran first, and graph capture never allocates.
          !ok(cudaMalloc(&blasSpace_[s], kBlasWorkspace), "cudaMalloc") ||
          !ok(cublasSetWorkspace(blas_[s], blasSpace_[s], kBlasSpaceBytes), "cublasSetWorkspace") ||
          !ok(cublasSetMathMode(blas_[s], tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode")) {
        error_ = last_error();
        return false;
      }
    }
    for (cudaEvent_t &ev : events_)
      if (!ok(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags")) {
        error_ = last_error();
        return false;
      }
    if (!ok(cublasLtCreate(&lt_), "cublasLtCreate")) {
      error_ = last_error();
      return false;
    }
    own_ = streams_[0];
    if (!ok(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) {
      error_ = last_error();
      return false;
    }
    ready_ = true;
    return true;
  }

  /// Makes `caller` (a cudaStream_t; null: the context's own) stream 0 and
  /// binds stream 0's cuBLAS handle to it. False with last_error() set.
  bool bind(void *caller) {
    streams_[0] = caller ? static_cast<cudaStream_t>(caller) : own_;
    return ok(cublasSetStream(blas_[0], streams_[0]), "cublasSetStream");
  }

  cudaStream_t stream(int s) const { return streams_[static_cast<size_t>(s)]; }
  /// Where --cuda-graphs records a loop (run_captured): non-blocking, used by nothing else.
  cudaStream_t captureStream() const { return capture_; }
  cublasHandle_t blas(int s) const { return blas_[static_cast<size_t>(s)]; }
  /// cuBLASLt (gemm_bias), not bound to a stream; it borrows stream s's cuBLAS workspace.
  cublasLtHandle_t lt() const { return lt_; }
  void *blasSpace(int s) const { return blasSpace_[static_cast<size_t>(s)]; }
  /// Past the kBlasSpaceBytes the libraries use of stream s's workspace:
  /// where a product's two biases are summed before its GEMM (in stream
  /// order, so one place serves every product of the stream).
  void *biasSpace(int s) const { return static_cast<char *>(blasSpace_[static_cast<size_t>(s)]) + kBlasSpaceBytes; }
  static constexpr size_t kBiasSpace = size_t(1) << 20; // codegen/FoldBias.h's kBiasSpaceBytes
  static constexpr size_t kBlasSpaceBytes = (size_t(32) << 20) - kBiasSpace;
  cudaEvent_t event(int e) const { return events_[static_cast<size_t>(e)]; }

private:
  static constexpr size_t kBlasWorkspace = kBlasSpaceBytes + kBiasSpace;
  std::mutex mutex_;
  bool ready_ = false;
  std::string error_;
  std::vector<cudaStream_t> streams_;
  cudaStream_t own_ = nullptr; // stream 0 when the caller passes none
  cudaStream_t capture_ = nullptr;
  std::vector<cublasHandle_t> blas_;
  cublasLtHandle_t lt_ = nullptr;
  std::vector<void *> blasSpace_;
  std::vector<cudaEvent_t> events_;
};

/// Row-major C[M][N] = op(A) · op(B) + beta · C, as rnnc::cpu::gemm: cuBLAS is
/// column-major, so it computes Cᵀ = op(B)ᵀ · op(A)ᵀ. T: float or double.
template <class T>
inline cublasStatus_t gemm(cublasHandle_t h, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T *A, const T *B,
                           T *C, T beta) {
  const T one = 1;
  auto call = [&](auto gemmFn) {
    return gemmFn(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                  static_cast<int>(M), static_cast<int>(K), &one, B, static_cast<int>(tb ? K : N), A,
                  static_cast<int>(ta ? M : K), &beta, C, static_cast<int>(N));
  };
  if constexpr (std::is_same_v<T, float>) return call(cublasSgemm);
  else return call(cublasDgemm);
}

/// g[cols] += Σ_rows d[row][cols] (d row-major): d as a column-major
/// [cols × rows] matrix times a vector of ones, deterministic unlike atomics.
template <class T>
inline cublasStatus_t column_sums(cublasHandle_t h, int64_t rows, int64_t cols, const T *d, const T *ones, T *g) {
  const T one = 1;
  auto call = [&](auto gemvFn) {
    return gemvFn(h, CUBLAS_OP_N, static_cast<int>(cols), static_cast<int>(rows), &one, d, static_cast<int>(cols), ones, 1,
                  &one, g, 1);
  };
  if constexpr (std::is_same_v<T, float>) return call(cublasSgemv);
  else return call(cublasDgemv);
}

/// Rows [first, first + rows) of a [*][B][width] device array set to zero.
template <class E>
inline cudaError_t clear_rows(E *a, int64_t first, int64_t rows, int64_t B, int64_t width, cudaStream_t s) {
  return cudaMemsetAsync(a + first * B * width, 0, static_cast<size_t>(rows * B * width) * sizeof(E), s);
}
/// `rows` rows of src (device memory) copied into a from row `first`.
template <class E>
inline cudaError_t copy_rows(E *a, int64_t first, const E *src, int64_t rows, int64_t B, int64_t width, cudaStream_t s) {
  return cudaMemcpyAsync(a + first * B * width, src, static_cast<size_t>(rows * B * width) * sizeof(E),
                         cudaMemcpyDeviceToDevice, s);
}
/// `rows` rows of a from row `first` copied out to device memory.
template <class E>
inline cudaError_t read_rows(const E *a, int64_t first, int64_t rows, int64_t B, int64_t width, E *out, cudaStream_t s) {
  return cudaMemcpyAsync(out, a + first * B * width, static_cast<size_t>(rows * B * width) * sizeof(E),
                         cudaMemcpyDeviceToDevice, s);
}

/// How a kernel is launched: plainly, with dynamic shared memory, or cooperatively.
enum class LaunchKind { plain, shared, cooperative };

/// One launch of `kernel` with `args` by value and `shared` bytes of dynamic
/// shared memory per block; false with last_error() naming `what` on failure.
template <class... Args>
inline bool launch_as(LaunchKind kind, const void *kernel, const char *what, unsigned grid, unsigned block, size_t shared,
                      cudaStream_t s, Args... args) {
#ifdef RNNC_CUDA_EMULATOR // tests/emulator: the kernel's threads run on the host
  (void)what;
  switch (kind) {
  case LaunchKind::plain: return rnnc_emulator::launch(kernel, grid, block, s, args...);
  case LaunchKind::shared: return rnnc_emulator::launch_shared(kernel, grid, block, shared, s, args...);
  case LaunchKind::cooperative: return rnnc_emulator::launch_cooperative(kernel, grid, block, shared, s, args...);
  }
  return false;
#else
  void *argv[] = {static_cast<void *>(&args)...};
  const bool cooperative = kind == LaunchKind::cooperative;
  cudaError_t e = cooperative ? cudaLaunchCooperativeKernel(kernel, dim3(grid), dim3(block), argv, shared, s)
                              : cudaLaunchKernel(kernel, dim3(grid), dim3(block), argv, shared, s);
  if (e == cudaSuccess) return true;
  last_error() = std::string(cooperative ? "cudaLaunchCooperativeKernel(" : "cudaLaunchKernel(") + what +
                 "): " + cudaGetErrorString(e);
  return false;
#endif
}

/// Launches `kernel` (a __global__ function, or a cudaKernel_t from
/// rnnc/cuda_jit.h) with `args` by value; the error names `what`.
template <class... Args>
inline bool launch(const void *kernel, const char *what, unsigned grid, unsigned block, cudaStream_t s, Args... args) {
  return launch_as(LaunchKind::plain, kernel, what, grid, block, 0, s, args...);
}

/// Launches `kernel` with `shared` bytes of dynamic shared memory per block
/// (a fused loop's kernel a step: its values on chip; at most 48 KiB, which
/// needs no opting in).
template <class... Args>
inline bool launch_shared(const void *kernel, const char *what, unsigned grid, unsigned block, size_t shared, cudaStream_t s,
                          Args... args) {
  return launch_as(LaunchKind::shared, kernel, what, grid, block, shared, s, args...);
}

/// Launches `kernel` as a cooperative kernel (a persistent loop: all `grid`
/// blocks live at once, meeting at grid barriers) with `shared` bytes of
/// dynamic shared memory per block.
template <class... Args>
inline bool launch_cooperative(const void *kernel, const char *what, unsigned grid, unsigned block, size_t shared,
                               cudaStream_t s, Args... args) {
  return launch_as(LaunchKind::cooperative, kernel, what, grid, block, shared, s, args...);
}

/// What persistent_choice learned of a device and a persistent kernel: the
/// device's attributes, and how many blocks with `bytes` of dynamic shared
/// memory a multiprocessor holds (after allowing the kernel that much).
struct PersistentKnown {
  int device = 0;
  const void *kernel = nullptr;
  persist::Gpu gpu;
  int64_t bytes = -1; // -1: no occupancy asked yet
  int blocks = 0;
};

/// How loop `l` runs for B sequences on this device (persist::choose):
/// persistent (its kernel `kernel`, 256 threads a block) with what grid and
/// shared memory, fused with what grid, or step by step. Allows the kernel the shared memory
/// it needs. The device's attributes and the kernel's occupancy are asked
/// once per device and kernel (every forward and backward calls this). With
/// RNNC_LOOP_REPORT set, says on stderr what it chose and why.
inline persist::Choice persistent_choice(const void *kernel, const char *what, const persist::Loop &l, int64_t B) {
  static std::mutex mutex;
  static std::vector<PersistentKnown> known;
  persist::Choice c;
  PersistentKnown k;
  bool found = false;
  if (cudaGetDevice(&k.device) != cudaSuccess) {
    cudaGetLastError(); // step by step, whose launches say what is wrong
    c.why = "the device's attributes could not be read";
  } else {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const PersistentKnown &x : known)
        if (x.device == k.device && x.kernel == kernel) k = x, found = true;
    }
    int sms = 0, cooperative = 0, shared = 0;
    if (!found && (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, k.device) != cudaSuccess ||
                   cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, k.device) != cudaSuccess ||
                   cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, k.device) != cudaSuccess)) {
      cudaGetLastError();
      c.why = "the device's attributes could not be read";
    } else {
      if (!found) k.kernel = kernel, k.gpu = persist::Gpu{sms, shared, cooperative != 0};
      c = persist::choose(l, k.gpu, B, persist::modeFromEnvironment(), [&](int64_t bytes) {
        if (bytes == k.bytes) return k.blocks;
        int blocks = 0;
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 256, static_cast<size_t>(bytes)) != cudaSuccess) {
          cudaGetLastError();
          blocks = 0;
        }
        k.bytes = bytes, k.blocks = blocks;
        return blocks;
      });
      std::lock_guard<std::mutex> lock(mutex);
      bool stored = false;
      for (PersistentKnown &x : known)
        if (x.device == k.device && x.kernel == kernel) x = k, stored = true;
      if (!stored) known.push_back(k);
    }
  }
  if (std::getenv("RNNC_LOOP_REPORT")) {
    if (c.variant == persist::Variant::Persistent)
      std::fprintf(stderr, "rnnc: %s: persistent, %u blocks, %lld bytes of shared memory each: %s\n", what, c.grid,
                   static_cast<long long>(c.shared), c.why);
    else if (c.variant == persist::Variant::Fused)
      std::fprintf(stderr, "rnnc: %s: fused, a kernel of %u blocks a step per product: %s\n", what, c.grid, c.why);
    else
      std::fprintf(stderr, "rnnc: %s: step by step: %s%s%s%s\n", what, c.why, c.notPersistent ? " (not persistent: " : "",
                   c.notPersistent ? c.notPersistent : "", c.notPersistent ? ")" : "");
  }
  return c;
}

/// Grid size of a grid-stride launch over n elements: enough blocks to fill
/// the device a few times over, never more than the elements need.
inline unsigned grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

/// What a 16-bit model's products need (--dtype bf16|f16, docs/precision.md):
/// its storage type S for cuBLAS, its conversion kernels (to_real, to_store)
/// and a scratch of `elements` S for the float operands rounded to S.
template <class S> struct Storage16 {
  cudaDataType type; // CUDA_R_16BF or CUDA_R_16F
  const void *to_real, *to_store;
  S *scratch;
  int64_t elements;
};

/// Row-major C[M][N] = op(A) · op(B) + beta · C for a 16-bit model: one
/// cublasGemmEx per block, 16-bit operands, products summed in float (tensor
/// cores), C 16-bit (rounded once) or float. An operand kept in float (a
/// recurrent state, a gradient summed in float) is rounded to S first, as
/// the CPU's products round it (rnnc/panels.h), a block of rows at a time in
/// the scratch: a product (!ta) takes blocks of A's and C's rows (B is the
/// weight, always S); a weight gradient (ta, C float) blocks of the K summed
/// rows of A and B. TA, TB: float or S; TC: float or S.
template <class S, class TA, class TB, class TC>
inline cublasStatus_t gemm16(cublasHandle_t h, cudaStream_t s, const Storage16<S> &st, bool ta, bool tb, int64_t M,
                             int64_t N, int64_t K, const TA *A, const TB *B, TC *C, float beta) {
  constexpr bool a16 = std::is_same_v<TA, S>, b16 = std::is_same_v<TB, S>, c16 = std::is_same_v<TC, S>;
  static_assert((a16 || std::is_same_v<TA, float>) && (b16 || std::is_same_v<TB, float>) &&
                    (c16 || std::is_same_v<TC, float>),
                "float or the model's 16-bit type");
  const float one = 1;
  auto ex = [&](int64_t m, int64_t n, int64_t k, const S *a, const S *b, TC *c, float scale) {
    return cublasGemmEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                        static_cast<int>(m), static_cast<int>(k), &one, b, st.type, static_cast<int>(tb ? k : n), a,
                        st.type, static_cast<int>(ta ? m : k), &scale, c, c16 ? st.type : CUDA_R_32F, static_cast<int>(N),
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  // x itself when it is S already, else x's n elements rounded into `out`.
  auto rounded = [&](const auto *x, int64_t n, S *out) -> const S * {
    if constexpr (std::is_same_v<std::remove_cv_t<std::remove_pointer_t<decltype(x)>>, S>) {
      (void)n, (void)out;
      return x;
    } else {
      if (!launch(st.to_store, "to_store", grid_for(n, 256), 256, s, x, out, n)) status = CUBLAS_STATUS_EXECUTION_FAILED;
      return out;
    }
  };
  if (!ta) { // a product: blocks of A's and C's rows
    if constexpr (!b16) {
      return CUBLAS_STATUS_NOT_SUPPORTED; // a product's weight is stored in 16 bits
    } else {
      const int64_t block = a16 ? M : std::max<int64_t>(1, st.elements / K);
      for (int64_t m0 = 0; m0 < M && status == CUBLAS_STATUS_SUCCESS; m0 += block) {
        const int64_t n = std::min(block, M - m0);
        const S *a = rounded(A + m0 * K, n * K, st.scratch);
        if (status == CUBLAS_STATUS_SUCCESS) status = ex(n, N, K, a, B, C + m0 * N, beta);
      }
    }
  } else { // a weight gradient: blocks of the K summed rows of A [K][M] and B [K][N]
    if constexpr (c16) {
      return CUBLAS_STATUS_NOT_SUPPORTED; // gradients sum in float
    } else {
      const int64_t perRow = (a16 ? 0 : M) + (b16 ? 0 : N);
      const int64_t block = perRow ? std::max<int64_t>(1, st.elements / perRow) : K;
      for (int64_t k0 = 0; k0 < K && status == CUBLAS_STATUS_SUCCESS; k0 += block) {
        const int64_t n = std::min(block, K - k0);
        const S *a = rounded(A + k0 * M, n * M, st.scratch);
        const S *b = rounded(B + k0 * N, n * N, st.scratch + (a16 ? 0 : n * M));
        if (status == CUBLAS_STATUS_SUCCESS) status = ex(M, N, n, a, b, C, k0 == 0 ? beta : 1.0f);
      }
    }
  }
  return status;
}

/// Row-major C[M][N] = A[M][K] · Wᵀ + bias, W [N][K] row-major, bias [N]
/// added to every row (a product whose biases FoldBias.h folded). cuBLASLt's
/// bias epilogue (CUBLASLT_EPILOGUE_BIAS) where its heuristic has an algorithm
/// for the shape and type; else C's rows set to the bias by the `bias_rows`
/// kernel and a GEMM adding to them (beta = 1). `tf32`: TF32 products, as the
/// model's cuBLAS handles compute.
template <class T>
inline cublasStatus_t gemm_bias(cublasLtHandle_t lt, cublasHandle_t h, void *space, size_t spaceBytes, cudaStream_t s, bool tf32,
                      const void *biasRows, int64_t M, int64_t N, int64_t K, const T *A, const T *W, T *C, const T *bias) {
  constexpr bool dbl = std::is_same_v<T, double>;
  const cudaDataType type = dbl ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t compute = dbl ? CUBLAS_COMPUTE_64F : tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasOperation_t transposed = CUBLAS_OP_T;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, a = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t found = {};
  int count = 0;
  // Column-major, as cuBLAS sees row-major arrays: Cᵀ [N x M] = op(W's [K x N]) · Aᵀ [K x M], op = T.
  bool planned = cublasLtMatmulDescCreate(&desc, compute, type) == CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof transposed) ==
                     CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) ==
                     CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) ==
                     CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatrixLayoutCreate(&w, type, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K) ==
                     CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatrixLayoutCreate(&a, type, static_cast<uint64_t>(K), static_cast<uint64_t>(M), K) ==
                     CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatrixLayoutCreate(&c, type, static_cast<uint64_t>(N), static_cast<uint64_t>(M), N) ==
                     CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &spaceBytes,
                                                      sizeof spaceBytes) == CUBLAS_STATUS_SUCCESS &&
                 cublasLtMatmulAlgoGetHeuristic(lt, desc, w, a, c, c, preference, 1, &found, &count) ==
                     CUBLAS_STATUS_SUCCESS &&
                 count > 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  const T one = 1, zero = 0;
  if (planned) status = cublasLtMatmul(lt, desc, &one, W, w, A, a, &zero, C, c, C, c, &found.algo, space, spaceBytes, s);
  if (preference) cublasLtMatmulPreferenceDestroy(preference);
  for (cublasLtMatrixLayout_t layout : {w, a, c})
    if (layout) cublasLtMatrixLayoutDestroy(layout);
  if (desc) cublasLtMatmulDescDestroy(desc);
  if (planned) return status;
  // No algorithm with the epilogue: the rows start as the bias and the GEMM adds to them.
  if (!launch(biasRows, "bias_rows", grid_for(M * N, 256), 256, s, C, M, N, bias, static_cast<const T *>(nullptr)))
    return CUBLAS_STATUS_EXECUTION_FAILED;
  return gemm(h, false, true, M, N, K, A, W, C, T(1));
}

/// A 16-bit model's row copies between its float buffers (the recurrent
/// states) and its 16-bit ports: the elements converted by its kernels;
/// copies of one type are copy_rows' and read_rows'.
template <class T16, class E, class S>
inline bool copy_rows16(const Storage16<T16> &st, E *a, int64_t first, const S *src, int64_t rows, int64_t B, int64_t width,
                        cudaStream_t s) {
  const int64_t n = rows * B * width;
  if constexpr (std::is_same_v<E, S>) return ok(copy_rows(a, first, src, rows, B, width, s), "copy_rows");
  else if constexpr (std::is_same_v<E, float>) return launch(st.to_real, "to_real", grid_for(n, 256), 256, s, src, a + first * B * width, n);
  else return launch(st.to_store, "to_store", grid_for(n, 256), 256, s, src, a + first * B * width, n);
}
template <class T16, class E, class S>
inline bool read_rows16(const Storage16<T16> &st, const E *a, int64_t first, int64_t rows, int64_t B, int64_t width, S *out,
                        cudaStream_t s) {
  const int64_t n = rows * B * width;
  if constexpr (std::is_same_v<E, S>) return ok(read_rows(a, first, rows, B, width, out, s), "read_rows");
  else if constexpr (std::is_same_v<E, float>) return launch(st.to_store, "to_store", grid_for(n, 256), 256, s, a + first * B * width, out, n);
  else return launch(st.to_real, "to_real", grid_for(n, 256), 256, s, a + first * B * width, out, n);
}

/// One CUDA graph per loop stage (--cuda-graphs): the T launches of a loop
/// captured once and replayed while the shape and the pointers stay the same.
/// Kept until the process ends, as the Context is: a destructor's
/// cudaGraphExecDestroy at exit may run after the CUDA runtime is gone.
class GraphCache {
public:
  /// The graph of stage `stage` for this key, or null: capture it then.
  cudaGraphExec_t find(int stage, const std::vector<const void *> &key) {
    Entry &e = at(stage);
    return e.key == key ? e.exec : nullptr;
  }
  /// Keeps `graph` (instantiated) for `stage` under `key`; false on failure.
  bool keep(int stage, const std::vector<const void *> &key, cudaGraph_t graph, cudaGraphExec_t *exec) {
    Entry &e = at(stage);
    if (e.exec) cudaGraphExecDestroy(e.exec);
    e.exec = nullptr;
    e.key.clear();
    bool good = ok(cudaGraphInstantiate(exec, graph, 0), "cudaGraphInstantiate");
    cudaGraphDestroy(graph);
    if (!good) return false;
    e.exec = *exec;
    e.key = key;
    return true;
  }

private:
  struct Entry {
    std::vector<const void *> key;
    cudaGraphExec_t exec = nullptr;
  };
  Entry &at(int stage) {
    if (static_cast<size_t>(stage) >= entries_.size()) entries_.resize(static_cast<size_t>(stage) + 1);
    return entries_[static_cast<size_t>(stage)];
  }
  std::vector<Entry> entries_;
};

/// Runs `body(stream)` (the launches of a loop stage) on `s` as the CUDA
/// graph kept for `stage` under `key`, capturing it first when the key is
/// new. It is captured on `capture`, a private stream nothing else uses (with
/// `blas`, the handle body's cuBLAS calls use, bound to it meanwhile), so no
/// other stream is tied up while it records: capturing on a blocking stream
/// would make every other thread's use of the legacy default stream fail.
/// Returns 0, or 1 with last_error() set.
template <class Body>
inline int run_captured(GraphCache &cache, int stage, const std::vector<const void *> &key, cudaStream_t s,
                        cudaStream_t capture, cublasHandle_t blas, Body body) {
  cudaGraphExec_t exec = cache.find(stage, key);
  if (!exec) {
    RNNC_CUDA_CHECK(cublasSetStream(blas, capture));
    RNNC_CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
    int failed = body(capture);
    cudaGraph_t graph = nullptr;
    cudaError_t ended = cudaStreamEndCapture(capture, &graph);
    RNNC_CUDA_CHECK(cublasSetStream(blas, s));
    if (failed) {
      if (graph) cudaGraphDestroy(graph);
      return 1;
    }
    RNNC_CUDA_CHECK(ended);
    if (!cache.keep(stage, key, graph, &exec)) return 1;
  }
  RNNC_CUDA_CHECK(cudaGraphLaunch(exec, s));
  return 0;
}

// Loops run in parallel over time (docs/cuda.md, "Loops in parallel over time").

/// What the cost model of such a loop knows about it (rnnc prints one per stage).
struct ScanShape {
  int64_t width;        // n: elements of each state
  int64_t groups;       // blocks per chunk and sequence: groups of up to 8 elements side by side
  int64_t lanes;        // time-lanes per block: the runs a chunk's steps are cut into
  double step_launches; // kernels per step of the loop run step by step
  double step_words;    // reals a step loads and stores per element, step by step
  double launches;      // kernels of the parallel passes (Newton: all its iterations)
  double words;         // reals the parallel passes load and store per element and step
};

/// The chunks a loop of T steps is cut into on the GPU: 1 .. 64 (the rows of
/// its scratch), about 8 steps per time-lane, more while the blocks would not
/// fill the device, never so many that a time-lane gets no step. `guarded`
/// (--time-parallel auto): 0 where the loop's own kernels, one launch per step,
/// are expected to be faster. The environment's RNNC_TIME_PARALLEL=off runs
/// every such loop step by step (as rnnc::cpu's).
inline int64_t scan_chunks(int64_t T, int64_t B, const ScanShape &s, bool guarded, size_t real_bytes) {
  static const bool off = [] {
    const char *v = std::getenv("RNNC_TIME_PARALLEL");
    return v && std::strcmp(v, "off") == 0;
  }();
  constexpr double kLaunchUs = 4;       // a kernel launch and the gap before the next one on the stream
  constexpr double kBytesPerUs = 2e6;   // 2 TB/s: what an elementwise kernel reaches on an H100/H200
  constexpr double kChunkUs = 0.5;      // the carries' serial chain, per chunk (a dependent load, a few FMAs)
  constexpr int64_t kRunSteps = 8;      // steps per time-lane before more chunks are cut
  constexpr int64_t kFillBlocks = 1024; // blocks that keep every SM busy (132 SMs, 8 blocks of 256 threads each)
  if (T < 1 || B < 1 || off) return 0;
  const int64_t most = std::min<int64_t>(64, (T + s.lanes - 1) / s.lanes);
  int64_t chunks = std::max((T + s.lanes * kRunSteps - 1) / (s.lanes * kRunSteps),
                            (kFillBlocks + B * s.groups - 1) / (B * s.groups));
  chunks = std::max<int64_t>(1, std::min(chunks, most));
  if (!guarded) return chunks;
  // In microseconds: launches, plus the bytes each form moves at the bandwidth.
  const double elementSteps = double(T) * double(B) * double(s.width), bytes = double(real_bytes);
  const double sequential = double(T) * s.step_launches * kLaunchUs + elementSteps * s.step_words * bytes / kBytesPerUs;
  const double parallel = s.launches * kLaunchUs + elementSteps * s.words * bytes / kBytesPerUs + double(chunks) * kChunkUs;
  return parallel < sequential ? chunks : 0;
}

/// The grid of a scan kernel over `blocks` blocks: at least 1, at most 65535
/// (its block loop takes the rest).
inline unsigned scan_grid(int64_t blocks) {
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

/// With RNNC_SCAN_REPORT set, says on stderr whether Newton's answer for
/// `loop` stood, as rnnc::cpu does: the largest gap (device memory, copied
/// back, which waits for the stream) against the tolerance the kernels used
/// (1e-4 in float, 1e-9 in double). Returns 0, or 1 when the copy fails.
template <class R> inline int newton_report(const char *loop, int iterations, const R *residual, cudaStream_t s) {
  static const bool report = std::getenv("RNNC_SCAN_REPORT") != nullptr;
  if (!report) return 0;
  R gap = 0;
  RNNC_CUDA_CHECK(cudaMemcpyAsync(&gap, residual, sizeof(R), cudaMemcpyDeviceToHost, s));
  RNNC_CUDA_CHECK(cudaStreamSynchronize(s));
  const bool kept = gap <= (sizeof(R) == sizeof(float) ? R(1e-4) : R(1e-9));
  std::fprintf(stderr, "rnnc: newton (%s): %d iterations, residual %.9g: %s\n", loop, iterations, double(gap),
               kept ? "kept" : "not converged, ran step by step");
  return 0;
}

/// Device memory for the ABI's device_alloc/free/copy (rnnc/model.h).
inline void *device_alloc(int64_t bytes) {
  void *p = nullptr;
  if (bytes <= 0 || !ok(cudaMalloc(&p, static_cast<size_t>(bytes)), "cudaMalloc")) return nullptr;
  return p;
}
inline void device_free(void *p) { cudaFree(p); }
/// Synchronous with all the device's work: cudaMemcpy alone waits only for the
/// default stream, which is not the caller's stream (non-blocking, or built
/// with per-thread default streams), so the device is synchronized first.
inline int device_copy(void *dst, const void *src, int64_t bytes, int32_t kind) {
  static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
  if (kind < 0 || kind > 2) return 1;
  return ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize") &&
                 ok(cudaMemcpy(dst, src, static_cast<size_t>(bytes), kinds[kind]), "cudaMemcpy")
             ? 0
             : 1;
}

/// The alignment the kernels' vector loads and stores (real4: 16 bytes) need
/// of the workspace and the params; false with last_error() set.
inline bool check_aligned(const void *ws, const void *params) {
  if ((reinterpret_cast<uintptr_t>(ws) | reinterpret_cast<uintptr_t>(params)) % 16 == 0) return true;
  last_error() = "the workspace and the params must be 16-byte aligned (cudaMalloc and torch's allocator give 256)";
  return false;
}

} // namespace rnnc::cuda
