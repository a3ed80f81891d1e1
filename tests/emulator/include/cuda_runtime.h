// The part of the CUDA runtime API generated code and rnnc/cuda.h use, on
// host memory, with the streams and capture rules of emulator_streams.h.
#pragma once

#include "emulator.h"

#include <memory>
#include <vector>

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
};
typedef cudaError cudaError_t;
typedef EmuStream *cudaStream_t;
typedef EmuEvent *cudaEvent_t;
typedef rnnc_emulator::Graph *cudaGraph_t;
typedef rnnc_emulator::Graph *cudaGraphExec_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed };
constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2;

inline const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
  default: return "emulated CUDA error";
  }
}
inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}

// Streams and events.
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  *s = rnnc_emulator::device().create(!(flags & cudaStreamNonBlocking));
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; } // its queued work still runs
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
  static std::vector<std::unique_ptr<EmuEvent>> events;
  events.push_back(std::make_unique<EmuEvent>());
  *e = events.back().get();
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  rnnc_emulator::Device &d = rnnc_emulator::device();
  EmuStream *st = d.resolve(s);
  // Events in a graph are not emulated: none of rnnc's captures uses one.
  if (st->capture) return st->invalidated = true, cudaErrorStreamCaptureUnsupported;
  if (d.isLegacy(st) && !d.push(st, rnnc_emulator::Item{rnnc_emulator::Item::Work, [] {}, 0}))
    return cudaErrorStreamCaptureImplicit;
  e->ticket = d.record(st);
  return cudaSuccess;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  rnnc_emulator::Device &d = rnnc_emulator::device();
  EmuStream *st = d.resolve(s);
  if (st->capture) return st->invalidated = true, cudaErrorStreamCaptureUnsupported;
  return d.push(st, rnnc_emulator::Item{rnnc_emulator::Item::Wait, {}, e->ticket}) ? cudaSuccess
                                                                                   : cudaErrorStreamCaptureImplicit;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  rnnc_emulator::Device &d = rnnc_emulator::device();
  if (d.captureForbids()) return cudaErrorStreamCaptureUnsupported;
  d.drainStream(d.resolve(s));
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
  rnnc_emulator::Device &d = rnnc_emulator::device();
  if (d.captureForbids()) return cudaErrorStreamCaptureUnsupported;
  d.drainAll();
  return cudaSuccess;
}

// Memory.
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
  if (rnnc_emulator::device().captureForbids()) return cudaErrorStreamCaptureUnsupported;
  // 256-byte aligned, as cudaMalloc's; not zeroed, like device memory: all
  // bits set, a NaN in float and double (and -1 as an index), so a read of
  // something never written shows.
  const size_t bytes = (n ? n + 255 : 256) / 256 * 256;
  *p = std::aligned_alloc(256, bytes);
  if (!*p) return cudaErrorMemoryAllocation;
  std::memset(*p, 0xff, bytes);
  rnnc_emulator::heap().blocks.push_back(*p);
  return cudaSuccess;
}
inline cudaError_t cudaFree(void *p) {
  rnnc_emulator::Device &d = rnnc_emulator::device();
  if (d.captureForbids()) return cudaErrorStreamCaptureUnsupported;
  d.drainAll(); // cudaFree waits for the device
  auto &blocks = rnnc_emulator::heap().blocks;
  for (size_t k = 0; k < blocks.size(); ++k)
    if (blocks[k] == p) {
      blocks.erase(blocks.begin() + static_cast<long>(k));
      std::free(p);
      return cudaSuccess;
    }
  return p ? cudaErrorInvalidValue : cudaSuccess;
}
/// From the host the source is read when the call is made, as CUDA stages
/// pageable memory before cudaMemcpyAsync returns; other copies run in order.
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  if (kind == cudaMemcpyHostToDevice) {
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char *>(src),
                                                                static_cast<const unsigned char *>(src) + n);
    return rnnc_emulator::issue(s, [=] { std::memcpy(dst, staged->data(), n); }) ? cudaSuccess
                                                                                : cudaErrorStreamCaptureImplicit;
  }
  return rnnc_emulator::issue(s, [=] { std::memmove(dst, src, n); }) ? cudaSuccess : cudaErrorStreamCaptureImplicit;
}
/// Queued on stream 0 (the legacy stream: after every blocking stream's
/// work), and waited for; refused during a capture, which it invalidates.
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
  rnnc_emulator::Device &d = rnnc_emulator::device();
  if (EmuStream *c = d.capturing()) {
    c->invalidated = true;
    return d.isLegacy(d.resolve(nullptr)) && c->blocking ? cudaErrorStreamCaptureImplicit
                                                         : cudaErrorStreamCaptureUnsupported;
  }
  if (cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, nullptr)) return e;
  d.drainStream(d.resolve(nullptr));
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s) {
  return rnnc_emulator::issue(s, [=] { std::memset(dst, value, n); }) ? cudaSuccess : cudaErrorStreamCaptureImplicit;
}

// Graphs.
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  rnnc_emulator::Device &d = rnnc_emulator::device();
  EmuStream *st = d.resolve(s);
  if (d.isLegacy(st) || st->capture) return cudaErrorStreamCaptureUnsupported;
  st->capture = new rnnc_emulator::Graph;
  st->invalidated = false;
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
  EmuStream *st = rnnc_emulator::device().resolve(s);
  *g = nullptr;
  if (!st->capture) return cudaErrorInvalidValue;
  std::unique_ptr<rnnc_emulator::Graph> graph(st->capture);
  st->capture = nullptr;
  if (st->invalidated) return cudaErrorStreamCaptureInvalidated;
  *g = graph.release();
  return cudaSuccess;
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
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s) {
  for (auto &w : g->work)
    if (!rnnc_emulator::issue(s, w)) return cudaErrorStreamCaptureImplicit;
  return cudaSuccess;
}
inline cudaError_t cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, cudaStream_t) { return cudaErrorInvalidValue; }

// The device's limits (rnnc_emulator::limits) and what the persistent loops ask of it.
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrCooperativeLaunch = 95,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
inline cudaError_t cudaGetLastError() { return cudaSuccess; } // the emulated calls keep no sticky error
inline cudaError_t cudaGetDevice(int *d) {
  *d = 0;
  return cudaSuccess;
}
namespace rnnc_emulator {
/// Device attributes and occupancies asked so far (the rules check that a
/// bundle asks them once per kernel, not every call).
inline int &deviceQueries() {
  static int n = 0;
  return n;
}
} // namespace rnnc_emulator
inline cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr a, int) {
  ++rnnc_emulator::deviceQueries();
  const rnnc_emulator::Limits &l = rnnc_emulator::limits();
  switch (a) {
  case cudaDevAttrMultiProcessorCount: *value = l.sms; break;
  case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
  case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
  case cudaDevAttrCooperativeLaunch: *value = 1; break;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(l.sharedPerBlockOptin); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}
inline cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute a, int value) {
  if (a != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > rnnc_emulator::limits().sharedPerBlockOptin)
    return cudaErrorInvalidValue;
  for (auto &[k, n] : rnnc_emulator::dynamicAllowed())
    if (k == kernel) return n = static_cast<size_t>(value), cudaSuccess;
  rnnc_emulator::dynamicAllowed().push_back({kernel, static_cast<size_t>(value)});
  return cudaSuccess;
}
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *kernel, int threads,
                                                                 size_t dynamicBytes) {
  ++rnnc_emulator::deviceQueries();
  if (threads <= 0 || dynamicBytes > rnnc_emulator::dynamicLimit(kernel)) return *blocks = 0, cudaSuccess;
  *blocks = rnnc_emulator::blocksPerSm(static_cast<unsigned>(threads), dynamicBytes);
  return cudaSuccess;
}

/// For tests/emulator/compare.cpp: a non-blocking stream of this bundle's
/// emulated device, which it passes as the caller's stream.
extern "C" __attribute__((visibility("default"))) void *rnnc_emulator_caller_stream() {
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  return s;
}
