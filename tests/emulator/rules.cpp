// The CUDA emulator's own rules, each shown to hold: work waits in its
// stream until the host forces it; only an event wait or the legacy stream's
// implicit synchronization orders two streams; per-thread default streams
// order nothing; memory comes 256-byte aligned and full of NaNs; the blocks
// of a grid do not run in order; captures refuse what CUDA refuses; a
// block's threads meet at __syncthreads and exchange through warp shuffles,
// a cooperative launch's blocks at the grid barrier; the runtime's choice of
// a persistent loop asks the device once per kernel. Built
// twice (tests/emulator/CMakeLists.txt): as is, and with
// CUDA_API_PER_THREAD_DEFAULT_STREAM. Exit 0 when every rule holds.
#define RNNC_CUDA_EMULATOR // rnnc/cuda.h's emulated branches, as a bundle builds
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <rnnc/cuda.h>

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

// Each thread offers a number of its own, then reads both neighbours': right
// only if the barrier held every thread back until all had written, whichever
// way the block's threads take turns.
__global__ void neighbours(unsigned *out) {
  __shared__ unsigned offered[64];
  const unsigned t = threadIdx.x, n = blockDim.x;
  offered[t] = blockIdx.x * n + t;
  __syncthreads();
  out[blockIdx.x * n + t] = offered[(t + 1) % n] * 65536 + offered[(t + n - 1) % n];
}

// Every lane ends with the sum of its warp's lane indices (a butterfly).
__global__ void warpSum(double *out) {
  double v = threadIdx.x % 32;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[threadIdx.x] = v;
}

// Each block writes its number, waits at the grid barrier, then sums all
// blocks' numbers: right only if every block wrote before any read.
__global__ void gridSum(double *slots, double *sums) {
  if (threadIdx.x == 0) slots[blockIdx.x] = blockIdx.x + 1;
  rnnc_emulator::grid_sync();
  if (threadIdx.x == 0) {
    double sum = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += slots[b];
    sums[blockIdx.x] = sum;
  }
}

void threadRules() {
  void *p = nullptr;
  cudaMalloc(&p, 2 * 64 * sizeof(unsigned));
  auto *read = static_cast<unsigned *>(p);
  rnnc_emulator::launch(reinterpret_cast<const void *>(&neighbours), 2, 64, nullptr, read);
  cudaDeviceSynchronize();
  bool met = true;
  for (unsigned b = 0; b < 2; ++b)
    for (unsigned t = 0; t < 64; ++t)
      met = met && read[b * 64 + t] == (b * 64 + (t + 1) % 64) * 65536 + b * 64 + (t + 63) % 64;
  expect(met, "__syncthreads holds each thread until the block's all arrive");

  cudaMalloc(&p, 64 * sizeof(double));
  auto *sums = static_cast<double *>(p);
  rnnc_emulator::launch(reinterpret_cast<const void *>(&warpSum), 1, 64, nullptr, sums);
  cudaDeviceSynchronize();
  bool exchanged = true;
  for (unsigned t = 0; t < 64; ++t) exchanged = exchanged && sums[t] == 31 * 32 / 2;
  expect(exchanged, "a warp's lanes exchange through __shfl_xor_sync");

  const unsigned blocks = 3;
  double *slots = static_cast<double *>((cudaMalloc(&p, blocks * sizeof(double)), p));
  double *gridSums = static_cast<double *>((cudaMalloc(&p, blocks * sizeof(double)), p));
  const bool launched = rnnc_emulator::launch_cooperative(reinterpret_cast<const void *>(&gridSum), blocks, 64, 0,
                                                          nullptr, slots, gridSums);
  cudaDeviceSynchronize();
  bool waited = launched;
  for (unsigned b = 0; b < blocks; ++b) waited = waited && gridSums[b] == blocks * (blocks + 1) / 2;
  expect(waited, "a cooperative launch's blocks all reach the grid barrier before any goes on");
}

// The choice of a persistent loop (rnnc/cuda.h): the device's attributes and
// the kernel's occupancy asked at the first call, not at every forward.
void persistentChoice() {
  rnnc::persist::Product products[] = {{512, 128}};
  const rnnc::persist::Loop loop{products, 1, 2, sizeof(double), 1, 128};
  const void *kernel = reinterpret_cast<const void *>(&gridSum);
  const int before = rnnc_emulator::deviceQueries();
  const rnnc::persist::Choice first = rnnc::cuda::persistent_choice(kernel, "rules", loop, 4);
  const int asked = rnnc_emulator::deviceQueries() - before;
  const rnnc::persist::Choice again = rnnc::cuda::persistent_choice(kernel, "rules", loop, 16);
  expect(asked > 0 && rnnc_emulator::deviceQueries() - before == asked && first.grid == again.grid &&
             first.shared == again.shared,
         "persistent_choice asks the device once per kernel");
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
  threadRules();
  persistentChoice();
  captureRules();
  std::printf("%d rule(s) broken\n", failures);
  return failures ? 1 : 0;
}
