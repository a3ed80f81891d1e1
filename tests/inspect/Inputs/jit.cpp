// A --jit host part: the kernels are a string, loaded by name into kernel_.
// EXPECT: 20 never-launched
// EXPECT: 36 unchecked-status
#include "rnnc/cuda_jit.h"

namespace {

const char kKernelSource[] = R"rnnc_cuda(#ifdef __CUDACC_RTC__
typedef long long int64_t;
#endif
#define RNNC_KERNEL extern "C" __global__
typedef float real;

// fused_0: launched
//   toy.rnn:3  y = tanh(x)
RNNC_KERNEL void __launch_bounds__(128) fused_0(real *a, int64_t n) { a[n] = ::tanhf(a[0]); }

// fused_1: loaded, never launched
//   toy.rnn:4  z = y
RNNC_KERNEL void fused_1(real *a) { a[threadIdx.x] = 1; }
)rnnc_cuda";

const void *kernel_[2];
const char *const kKernelNames[] = {"fused_0", "fused_1"};

int ready() { return rnnc::cuda::load_kernels(kKernelSource, kKernelNames, 2, kernel_); }

int launch_fused_0(float *a, cudaStream_t s) {
  return rnnc::cuda::launch(kernel_[0], "fused_0", 1, 128, s, a, int64_t(3)) ? 0 : 1;
}

int check(nvrtcProgram p) {
  size_t size = 0;
  RNNC_CUDA_CHECK(cudaGetDeviceCount(nullptr));
  if (!rnnc::cuda::ok(nvrtcGetPTXSize(p, &size), "nvrtcGetPTXSize")) return 1;
  nvrtcDestroyProgram(&p);
  return 0;
}

} // namespace
