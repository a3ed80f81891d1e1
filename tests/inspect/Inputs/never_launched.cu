// rnnc-inspect must flag the kernel nobody launches (and only it).
// EXPECT: 20 never-launched
#include "rnnc/cuda.h"

namespace {

// rnnc helper: a[0] = 0 (a helper need not be launched, nor name an equation)
__global__ void zero(float *a) { a[0] = 0; }

// used_0: launched through the kernel table
//   toy.rnn:3  y = x
__global__ void __launch_bounds__(32) used_0(float *a) { a[0] = 1; }

// direct_1: launched by name
//   toy.rnn:4  z = y
__global__ void direct_1(float *a) { a[0] = 2; }

// unused_2: never launched
//   toy.rnn:5  w = z
__global__ void unused_2(float *a) { a[0] = 3; }

const void *kernel_[3] = {reinterpret_cast<const void *>(zero), reinterpret_cast<const void *>(used_0),
                          reinterpret_cast<const void *>(unused_2)};

int go(float *a, cudaStream_t s) {
  if (!rnnc::cuda::launch(kernel_[1], "used_0", 1, 32, s, a)) return 1;
  return rnnc::cuda::launch(reinterpret_cast<const void *>(direct_1), "direct_1", 1, 32, s, a) ? 0 : 1;
}

} // namespace
