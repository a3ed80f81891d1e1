// What the CUDA host code rnnc generates calls: every CUDA and cuBLAS call
// checked with the failing call named, the per-process context (streams,
// events, one cuBLAS handle per stream), the GEMMs, the row helpers on device
// buffers and the graph cache of --cuda-graphs. Header-only: a .cu bundle
// links cudart and cublas; a --jit bundle adds rnnc/cuda_jit.h and nvrtc.
// Only the runtime API is used, so a program that has no GPU still starts
// and the first call says "no CUDA device".
#pragma once

#include "rnnc/workspace.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
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

/// Returns 1 from the enclosing function, the failing call named in last_error().
#define RNNC_CUDA_CHECK(call)                                                                                          \
  do {                                                                                                                 \
    if (!::rnnc::cuda::ok((call), #call)) return 1;                                                                    \
  } while (0)

/// Streams, events and cuBLAS handles of a model, created on first use and
/// kept until the process ends (released from a static destructor, they
/// would race the CUDA runtime's own teardown).
/// Stream 0 is a blocking stream, so work a caller then puts on the legacy
/// default stream (a cudaMemcpy of the results) waits for the model; the
/// others are non-blocking and joined to stream 0 with events.
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
          !ok(cublasSetWorkspace(blas_[s], blasSpace_[s], kBlasWorkspace), "cublasSetWorkspace") ||
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
    ready_ = true;
    return true;
  }

  cudaStream_t stream(int s) const { return streams_[static_cast<size_t>(s)]; }
  cublasHandle_t blas(int s) const { return blas_[static_cast<size_t>(s)]; }
  cudaEvent_t event(int e) const { return events_[static_cast<size_t>(e)]; }

private:
  static constexpr size_t kBlasWorkspace = size_t(32) << 20;
  std::mutex mutex_;
  bool ready_ = false;
  std::string error_;
  std::vector<cudaStream_t> streams_;
  std::vector<cublasHandle_t> blas_;
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

/// Launches `kernel` (a __global__ function, or a cudaKernel_t from
/// rnnc/cuda_jit.h) with `args` by value; the error names `what`.
template <class... Args>
inline bool launch(const void *kernel, const char *what, unsigned grid, unsigned block, cudaStream_t s, Args... args) {
#ifdef RNNC_CUDA_EMULATOR // tests/emulator: the kernel's threads run on the host
  (void)what;
  return rnnc_emulator::launch(kernel, grid, block, s, args...);
#else
  void *argv[] = {static_cast<void *>(&args)...};
  cudaError_t e = cudaLaunchKernel(kernel, dim3(grid), dim3(block), argv, 0, s);
  if (e == cudaSuccess) return true;
  last_error() = std::string("cudaLaunchKernel(") + what + "): " + cudaGetErrorString(e);
  return false;
#endif
}

/// Grid size of a grid-stride launch over n elements: enough blocks to fill
/// the device a few times over, never more than the elements need.
inline unsigned grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

/// One CUDA graph per loop stage (--cuda-graphs): the T launches of a loop
/// captured once and replayed while the shape and the pointers stay the same.
class GraphCache {
public:
  ~GraphCache() {
    for (Entry &e : entries_)
      if (e.exec) cudaGraphExecDestroy(e.exec);
  }
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
/// new. Returns 0, or 1 with last_error() set.
template <class Body>
inline int run_captured(GraphCache &cache, int stage, const std::vector<const void *> &key, cudaStream_t s, Body body) {
  cudaGraphExec_t exec = cache.find(stage, key);
  if (!exec) {
    RNNC_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    int failed = body(s);
    cudaGraph_t graph = nullptr;
    cudaError_t ended = cudaStreamEndCapture(s, &graph);
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

/// Device memory for the ABI's device_alloc/free/copy (rnnc/model.h).
inline void *device_alloc(int64_t bytes) {
  void *p = nullptr;
  if (bytes <= 0 || !ok(cudaMalloc(&p, static_cast<size_t>(bytes)), "cudaMalloc")) return nullptr;
  return p;
}
inline void device_free(void *p) { cudaFree(p); }
inline int device_copy(void *dst, const void *src, int64_t bytes, int32_t kind) {
  static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
  if (kind < 0 || kind > 2) return 1;
  return ok(cudaMemcpy(dst, src, static_cast<size_t>(bytes), kinds[kind]), "cudaMemcpy") ? 0 : 1;
}

} // namespace rnnc::cuda
