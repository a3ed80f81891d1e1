// rnnc-inspect's forced include for CUDA sources: what CUDA's headers give a
// .cu (the execution-space keywords, the built-in index variables, the
// intrinsics rnnc's kernels call) as declarations clang's CUDA mode accepts
// with -nocudainc. With __CUDACC_RTC__ (a --jit kernel string, which NVRTC
// compiles with no #include) it also declares the device math functions.
#pragma once

// clang's cuda_wrappers/new (on the include path in CUDA mode even with
// -nocudainc) calls ::malloc and ::free without declaring them.
#ifndef __CUDACC_RTC__
#include <stdlib.h>
#endif

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

// <<<grid, block, shared memory, stream>>> needs the runtime's configure call.
#ifndef __RNNC_INSPECT_DIM3
#define __RNNC_INSPECT_DIM3
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
#endif
extern "C" int cudaConfigureCall(dim3 gridDim, dim3 blockDim, __SIZE_TYPE__ sharedMem = 0, struct CUstream_st *stream = 0);
extern "C" unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, __SIZE_TYPE__ sharedMem = 0,
                                                struct CUstream_st *stream = 0);

struct __rnnc_inspect_uint3 {
  unsigned int x, y, z;
};
extern const __device__ __attribute__((weak)) __rnnc_inspect_uint3 threadIdx;
extern const __device__ __attribute__((weak)) __rnnc_inspect_uint3 blockIdx;
extern const __device__ __attribute__((weak)) __rnnc_inspect_uint3 blockDim;
extern const __device__ __attribute__((weak)) __rnnc_inspect_uint3 gridDim;
extern const __device__ __attribute__((weak)) int warpSize;

__device__ void __syncthreads(void);
__device__ void __syncwarp(unsigned int mask = 0xffffffffu);
__device__ void __threadfence(void);
__device__ float __int_as_float(int x);
__device__ int __float_as_int(float x);
template <class T> __device__ T __shfl_xor_sync(unsigned int mask, T var, int laneMask, int width = 32);
template <class T> __device__ T __shfl_sync(unsigned int mask, T var, int srcLane, int width = 32);
template <class T> __device__ T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = 32);
template <class T> __device__ T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = 32);
template <class T> __device__ T __ldg(const T *p);
__device__ float atomicAdd(float *address, float val);
__device__ double atomicAdd(double *address, double val);
__device__ int atomicAdd(int *address, int val);
__device__ unsigned int atomicAdd(unsigned int *address, unsigned int val);
__device__ unsigned int atomicExch(unsigned int *address, unsigned int val);
__device__ void __nanosleep(unsigned int ns);

#ifdef __CUDACC_RTC__
#define __RNNC_INSPECT_MATH(name)                                                                                       \
  __device__ float name##f(float);                                                                                     \
  __device__ double name(double);
__RNNC_INSPECT_MATH(exp)
__RNNC_INSPECT_MATH(exp2)
__RNNC_INSPECT_MATH(expm1)
__RNNC_INSPECT_MATH(log)
__RNNC_INSPECT_MATH(log2)
__RNNC_INSPECT_MATH(log1p)
__RNNC_INSPECT_MATH(sqrt)
__RNNC_INSPECT_MATH(rsqrt)
__RNNC_INSPECT_MATH(fabs)
__RNNC_INSPECT_MATH(tanh)
__RNNC_INSPECT_MATH(sin)
__RNNC_INSPECT_MATH(cos)
__RNNC_INSPECT_MATH(erf)
__RNNC_INSPECT_MATH(floor)
__RNNC_INSPECT_MATH(ceil)
#undef __RNNC_INSPECT_MATH
__device__ float fminf(float, float);
__device__ double fmin(double, double);
__device__ float fmaxf(float, float);
__device__ double fmax(double, double);
__device__ float powf(float, float);
__device__ double pow(double, double);
#endif
