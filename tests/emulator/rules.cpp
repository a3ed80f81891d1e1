// The CUDA emulator's own rules, each shown to hold: work waits in its
// stream until the host forces it; only an event wait or the legacy stream's
// implicit synchronization orders two streams; per-thread default streams
// order nothing; memory comes 256-byte aligned and full of NaNs; the blocks
// of a grid do not run in order; captures refuse what CUDA refuses. Built
// twice (tests/emulator/CMakeLists.txt): as is, and with
// CUDA_API_PER_THREAD_DEFAULT_STREAM. Exit 0 when every rule holds.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

int failures = 0;

void expect(bool holds, const char *rule) {
  std::printf("%s %s\n", holds ? "ok " : "BAD", rule);
  failures += !holds;
}

__global__ void setTo(double *a, double v) { a[blockIdx.x] = v; }

std::vector<unsigned> order; // blocks in the order they ran
__global__ void noteBlock() {
  if (threadIdx.x == 0) order.push_back(blockIdx.x);
}

double *deviceDouble() {
  void *p = nullptr;
  cudaMalloc(&p, sizeof(double));
  return static_cast<double *>(p);
}

void queuedUntilForced() {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  double *a = deviceDouble();
  expect(std::isnan(*a), "fresh device memory reads as NaN");
  rnnc_emulator::launch(reinterpret_cast<const void *>(&setTo), 1, 32, s, a, 1.0);
  expect(std::isnan(*a), "a launch has not run before anything forces it");
  cudaStreamSynchronize(s);
  expect(*a == 1.0, "cudaStreamSynchronize runs the stream's work");

  // A copy on another stream, without a wait, may read before the launch writes.
  cudaStream_t t;
  cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
  double *b = deviceDouble(), seen = 0;
  rnnc_emulator::launch(reinterpret_cast<const void *>(&setTo), 1, 32, s, a, 2.0);
  cudaMemcpyAsync(b, a, sizeof(double), cudaMemcpyDeviceToDevice, t);
  cudaStreamSynchronize(t);
  expect(*b == 1.0, "a stream does not wait for another's work without an event");
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  cudaEventRecord(e, s);
  cudaStreamWaitEvent(t, e, 0);
  cudaMemcpyAsync(b, a, sizeof(double), cudaMemcpyDeviceToDevice, t);
  cudaStreamSynchronize(t);
  expect(*b == 2.0, "a stream waiting for an event sees the work before the record");

  // The blocking copy: on the legacy stream it waits for blocking streams only.
  cudaStream_t blocking;
  cudaStreamCreateWithFlags(&blocking, cudaStreamDefault);
  rnnc_emulator::launch(reinterpret_cast<const void *>(&setTo), 1, 32, s, a, 3.0);
  cudaMemcpy(&seen, a, sizeof(double), cudaMemcpyDeviceToHost);
  expect(seen == 2.0, "cudaMemcpy does not wait for a non-blocking stream");
  cudaStreamSynchronize(s);
  rnnc_emulator::launch(reinterpret_cast<const void *>(&setTo), 1, 32, blocking, a, 4.0);
  cudaMemcpy(&seen, a, sizeof(double), cudaMemcpyDeviceToHost);
  if (rnnc_emulator::kPerThreadDefaultStream)
    expect(seen == 3.0, "per-thread default stream: cudaMemcpy does not wait for a blocking stream");
  else
    expect(seen == 4.0, "legacy default stream: cudaMemcpy waits for a blocking stream");
  cudaDeviceSynchronize();
  expect(*a == 4.0, "cudaDeviceSynchronize runs everything");
}

void allocation() {
  bool aligned = true;
  for (size_t n : {1, 8, 100, 257, 4096}) {
    void *p = nullptr;
    cudaMalloc(&p, n);
    aligned = aligned && reinterpret_cast<uintptr_t>(p) % 256 == 0;
  }
  expect(aligned, "cudaMalloc returns 256-byte aligned memory");
}

void blockOrder() {
  order.clear();
  rnnc_emulator::launch(reinterpret_cast<const void *>(&noteBlock), 16, 32, nullptr);
  cudaDeviceSynchronize();
  bool ascending = true;
  for (size_t k = 1; k < order.size(); ++k) ascending = ascending && order[k - 1] < order[k];
  expect(order.size() == 16 && !ascending, "the blocks of a grid run out of order");
}

void captureRules() {
  cudaStream_t blocking, quiet;
  cudaStreamCreateWithFlags(&blocking, cudaStreamDefault);
  cudaStreamCreateWithFlags(&quiet, cudaStreamNonBlocking);
  cudaGraph_t g = nullptr;
  if (!rnnc_emulator::kPerThreadDefaultStream) {
    expect(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal) == cudaErrorStreamCaptureUnsupported,
           "the legacy default stream cannot be captured");
  } else {
    expect(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal) == cudaSuccess &&
               cudaStreamEndCapture(nullptr, &g) == cudaSuccess && g,
           "the per-thread default stream can be captured");
    cudaGraphDestroy(g);
  }

  double *a = deviceDouble(), host = 0;
  cudaStreamBeginCapture(blocking, cudaStreamCaptureModeThreadLocal);
  rnnc_emulator::launch(reinterpret_cast<const void *>(&setTo), 1, 32, blocking, a, 5.0);
  cudaError_t copied = cudaMemcpy(&host, a, sizeof(double), cudaMemcpyDeviceToHost);
  if (!rnnc_emulator::kPerThreadDefaultStream)
    expect(copied == cudaErrorStreamCaptureImplicit, "the legacy stream is unusable while a blocking stream captures");
  else
    expect(copied == cudaErrorStreamCaptureUnsupported, "a blocking copy is refused during a capture");
  expect(cudaStreamEndCapture(blocking, &g) == cudaErrorStreamCaptureInvalidated && !g,
         "a capture that broke a rule ends invalidated");

  void *p = nullptr;
  cudaStreamBeginCapture(quiet, cudaStreamCaptureModeThreadLocal);
  expect(cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported, "cudaMalloc is refused during a capture");
  expect(cudaStreamEndCapture(quiet, &g) == cudaErrorStreamCaptureInvalidated, "... and invalidates it");
  cudaStreamBeginCapture(quiet, cudaStreamCaptureModeThreadLocal);
  expect(cudaStreamSynchronize(quiet) == cudaErrorStreamCaptureUnsupported, "a synchronize is refused during a capture");
  expect(cudaStreamEndCapture(quiet, &g) == cudaErrorStreamCaptureInvalidated, "... and invalidates it");

  // A good capture records without running, and each launch of it runs it.
  *a = 0;
  cudaStreamBeginCapture(quiet, cudaStreamCaptureModeThreadLocal);
  rnnc_emulator::launch(reinterpret_cast<const void *>(&setTo), 1, 32, quiet, a, 6.0);
  expect(cudaStreamEndCapture(quiet, &g) == cudaSuccess && g, "a capture that kept the rules gives a graph");
  cudaDeviceSynchronize();
  expect(*a == 0, "captured work does not run at capture");
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  cudaGraphLaunch(exec, quiet);
  cudaStreamSynchronize(quiet);
  expect(*a == 6.0, "a graph launch runs the captured work");
}

} // namespace

int main() {
  std::printf("%s default stream\n", rnnc_emulator::kPerThreadDefaultStream ? "per-thread" : "legacy");
  queuedUntilForced();
  allocation();
  blockOrder();
  captureRules();
  std::printf("%d rule(s) broken\n", failures);
  return failures ? 1 : 0;
}
