// Launches rnnc-inspect cannot tie to a kernel, or whose message names another.
// EXPECT: 22 launch-name-mismatch
// EXPECT: 23 unknown-kernel
// EXPECT: 24 unknown-kernel
#include "rnnc/cuda.h"

namespace {

// one_0: launched three ways
//   toy.rnn:3  y = x
__global__ void one_0(float *a) { a[0] = 1; }

__device__ void not_a_kernel(float *a) { a[0] = 2; }

const void *kernel_[1] = {reinterpret_cast<const void *>(one_0)};

int go(float *a, cudaStream_t s, const void *somewhere) {
  one_0<<<1, 32>>>(a);
  one_0<<<dim3(2), 64, 128, s>>>(a);
  RNNC_CUDA_CHECK(cudaLaunchKernel(kernel_[0], dim3(1), dim3(32), nullptr, 0, s));
  if (!rnnc::cuda::launch(kernel_[0], "one_0", 1, 32, s, a)) return 1;
  if (!rnnc::cuda::launch(kernel_[0], "two_1", 1, 32, s, a)) return 1;
  if (!rnnc::cuda::launch(somewhere, "one_0", 1, 32, s, a)) return 1;
  return rnnc::cuda::launch(kernel_[3 - 2], "one_0", 1, 32, s, a) ? 0 : 1;
}

} // namespace
