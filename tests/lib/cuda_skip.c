/* tests/lib/cuda_skip.c: see cuda_skip.h. */
#include "cuda_skip.h"

#include <stdio.h>

#include <cuda_runtime_api.h>

int pf_test_cuda_device(const char *test)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0)
        return 1;
    printf("%s: skipped: %s\n", test, e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    return 0;
}
