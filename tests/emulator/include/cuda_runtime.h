// The part of the CUDA runtime API generated code and rnnc/cuda.h use, on
// host memory (see emulator.h).
#pragma once

#include "emulator.h"

#include <memory>

enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorNoDevice = 100 };
typedef cudaError cudaError_t;
typedef struct EmuStream *cudaStream_t;
typedef struct EmuEvent *cudaEvent_t;
typedef rnnc_emulator::Graph *cudaGraph_t;
typedef rnnc_emulator::Graph *cudaGraphExec_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed };
constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2;

inline const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
  static int streams = 0;
  *s = reinterpret_cast<cudaStream_t>(static_cast<intptr_t>(++streams));
  return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
  *e = nullptr;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
namespace rnnc_emulator {
/// Device memory still held, freed when the library unloads (what the CUDA
/// runtime does to a process's memory at exit), so leak checkers stay quiet.
struct Heap {
  std::vector<void *> blocks;
  ~Heap() {
    for (void *p : blocks) std::free(p);
  }
};
inline Heap &heap() {
  static Heap h;
  return h;
}
} // namespace rnnc_emulator

inline cudaError_t cudaMalloc(void **p, size_t n) {
  // Not zeroed, like device memory: filled with NaN-ish bytes so a read of
  // something never written shows.
  *p = std::malloc(n ? n : 1);
  if (!*p) return cudaErrorMemoryAllocation;
  std::memset(*p, 0xff, n);
  rnnc_emulator::heap().blocks.push_back(*p);
  return cudaSuccess;
}
inline cudaError_t cudaFree(void *p) {
  auto &blocks = rnnc_emulator::heap().blocks;
  for (size_t k = 0; k < blocks.size(); ++k)
    if (blocks[k] == p) {
      blocks.erase(blocks.begin() + static_cast<long>(k));
      std::free(p);
      return cudaSuccess;
    }
  return p ? cudaErrorInvalidValue : cudaSuccess;
}
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
  std::memmove(dst, src, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind, cudaStream_t) {
  rnnc_emulator::issue([=] { std::memmove(dst, src, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t) {
  rnnc_emulator::issue([=] { std::memset(dst, value, n); });
  return cudaSuccess;
}
inline cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  if (rnnc_emulator::capturing()) return cudaErrorInvalidValue;
  rnnc_emulator::capturing() = new rnnc_emulator::Graph;
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) {
  *g = rnnc_emulator::capturing();
  rnnc_emulator::capturing() = nullptr;
  return *g ? cudaSuccess : cudaErrorInvalidValue;
}
namespace rnnc_emulator {
/// Instantiated graphs still held, freed when the library unloads: the
/// generated code keeps its graphs until the process ends, as on a GPU.
inline std::vector<std::unique_ptr<Graph>> &execs() {
  static std::vector<std::unique_ptr<Graph>> held;
  return held;
}
} // namespace rnnc_emulator
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long) {
  rnnc_emulator::execs().push_back(std::make_unique<rnnc_emulator::Graph>(*g));
  *exec = rnnc_emulator::execs().back().get();
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t g) {
  auto &held = rnnc_emulator::execs();
  for (size_t k = 0; k < held.size(); ++k)
    if (held[k].get() == g) {
      held.erase(held.begin() + static_cast<long>(k));
      return cudaSuccess;
    }
  return cudaErrorInvalidValue;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t) {
  for (auto &w : g->work) w();
  return cudaSuccess;
}
inline cudaError_t cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, cudaStream_t) { return cudaErrorInvalidValue; }
