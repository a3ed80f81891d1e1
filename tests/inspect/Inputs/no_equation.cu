// A kernel whose comment names no equation, and one with no comment at all.
// EXPECT: 14 no-equation
// EXPECT: 17 no-equation
#include "rnnc/cuda.h"

namespace {

// good_0: names its equation
//   toy.rnn:3  y = x
__global__ void good_0(float *a) { a[0] = 1; }

// vague_1: says what it is, not where it comes from
// (toy.rnn is mentioned, but no FILE.rnn:LINE)
__global__ void vague_1(float *a) { a[0] = 2; }

int spacer;
__global__ void bare_2(float *a) { a[0] = 3; }

int go(float *a, cudaStream_t s) {
  RNNC_CUDA_CHECK(cudaMemsetAsync(a, 0, 4, s));
  if (!rnnc::cuda::launch(reinterpret_cast<const void *>(good_0), "good_0", 1, 32, s, a)) return 1;
  if (!rnnc::cuda::launch(reinterpret_cast<const void *>(vague_1), "vague_1", 1, 32, s, a)) return 1;
  return rnnc::cuda::launch(reinterpret_cast<const void *>(bare_2), "bare_2", 1, 32, s, a) ? 0 : 1;
}

} // namespace
