// Does not parse: rnnc-inspect says so and exits 1.
#include "rnnc/cuda.h"

__global__ void broken(float *a) { a[0] = ; }
