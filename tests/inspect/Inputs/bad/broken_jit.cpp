// The host part parses; its kernel string does not.
#include "rnnc/cuda_jit.h"

const char kKernelSource[] = R"rnnc_cuda(
__global__ void broken(float *a) { a[0] = undeclared_name; }
)rnnc_cuda";
