// Nothing to flag: rnnc-inspect exits 0.
#include "rnnc/cuda.h"

namespace {

// fused_0: one step
//   toy.rnn:3  y = x
__global__ void fused_0(float *a) { a[0] = 1; }

int go(float *a, cudaStream_t s) {
  return rnnc::cuda::launch(reinterpret_cast<const void *>(fused_0), "fused_0", 1, 32, s, a) ? 0 : 1;
}

} // namespace
