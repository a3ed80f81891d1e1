// Every dropped status is flagged, however it is dropped; a used one is not.
// EXPECT: 23 unchecked-status
// EXPECT: 24 unchecked-status
// EXPECT: 25 unchecked-status
// EXPECT: 26 unchecked-status
// EXPECT: 27 unchecked-status
// EXPECT: 29 unchecked-status
#include "rnnc/cuda.h"

namespace {

// step_0: one step
//   toy.rnn:3  y = x
__global__ void step_0(float *a) { a[0] = 1; }

const void *kernel_[1] = {reinterpret_cast<const void *>(step_0)};

int go(float *a, const float *b, cudaStream_t s, cublasHandle_t blas) {
  RNNC_CUDA_CHECK(cudaMemsetAsync(a, 0, 4, s));
  if (cudaMemcpy(a, b, 4, cudaMemcpyDeviceToDevice) != cudaSuccess) return 1;
  cudaError_t kept = cudaStreamSynchronize(s);
  if (!rnnc::cuda::launch(kernel_[0], "step_0", 1, 32, s, a)) return 1;
  cudaMemcpy(a, b, 4, cudaMemcpyDeviceToDevice);
  (void)cudaMemsetAsync(a, 0, 4, s);
  rnnc::cuda::launch(kernel_[0], "step_0", 1, 32, s, a);
  cublasSetStream(blas, s), (void)kept;
  for (int i = 0; i < 2; ++i) rnnc::cuda::gemm(blas, false, true, 1, 1, 1, b, b, a, 0.0f);
  if (kept == cudaSuccess)
    cudaStreamSynchronize(s);
  return kept == cudaSuccess ? 0 : 1;
}

} // namespace
