/* kernels/reduce_sum.cu: see reduce_sum.h. A thread per table entry, its partials
   loaded eight at a time ahead of the adds (one round trip to memory per eight, where a
   load per add waited on each: 20 us for 64 partials of 1024 columns), added in order. */
#include <cuda_runtime.h>

#include "reduce_sum.h"

__global__ void pf_sum_tables_kernel(const double *__restrict__ part, int n, size_t len,
                                     double *__restrict__ out)
{
    const size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= len)
        return;
    double s = 0.0;
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        double t[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            t[i] = part[(size_t)(k + i) * len + j];
#pragma unroll
        for (int i = 0; i < 8; i++)
            s += t[i];
    }
    for (; k < n; k++)
        s += part[(size_t)k * len + j];
    out[j] = s;
}

extern "C" int pf_cuda_sum_tables(const double *part, int n, size_t len, double *out, void *stream)
{
    if (len == 0)
        return 0;
    const unsigned threads = 128;
    const unsigned blocks = (unsigned)((len + threads - 1) / threads);
    pf_sum_tables_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(part, n, len, out);
    return (int)cudaGetLastError();
}
