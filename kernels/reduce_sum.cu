/* kernels/reduce_sum.cu: see reduce_sum.h. A block takes 32 table entries with 8
   threads each: thread g of an entry adds partials g, g + 8, g + 16, ... in order, and
   the entry's 8 sums then add in order, g = 0 to 7. So every entry's sum has one order
   fixed by n alone, and an entry's partials are read by 8 threads at once: a thread per
   entry reading all of them one after another waited on memory for each (20 us for 64
   partials of 1024 columns). */
#include <cuda_runtime.h>

#include "reduce_sum.h"

#define SUM_ENTRIES 32 /* table entries per block */
#define SUM_GROUPS  8  /* threads per entry */

__global__ void __launch_bounds__(SUM_ENTRIES *SUM_GROUPS)
    pf_sum_tables_kernel(const double *__restrict__ part, int n, size_t len,
                         double *__restrict__ out)
{
    __shared__ double sh[SUM_GROUPS][SUM_ENTRIES];
    const size_t j = (size_t)blockIdx.x * SUM_ENTRIES + threadIdx.x;
    const int g = threadIdx.y;
    double s = 0.0;
    /* eight partials loaded, then added in order: their loads are in flight together */
    for (int k0 = g; j < len && k0 < n; k0 += 8 * SUM_GROUPS) {
        double t[8];
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const int k = k0 + q * SUM_GROUPS;
            t[q] = k < n ? part[(size_t)k * len + j] : 0.0;
        }
#pragma unroll
        for (int q = 0; q < 8; q++)
            if (k0 + q * SUM_GROUPS < n)
                s += t[q];
    }
    sh[g][threadIdx.x] = s;
    __syncthreads();
    if (g != 0 || j >= len)
        return;
    double t = sh[0][threadIdx.x];
#pragma unroll
    for (int q = 1; q < SUM_GROUPS; q++)
        t += sh[q][threadIdx.x];
    out[j] = t;
}

extern "C" int pf_cuda_sum_tables(const double *part, int n, size_t len, double *out, void *stream)
{
    if (len == 0)
        return 0;
    const dim3 block(SUM_ENTRIES, SUM_GROUPS);
    const unsigned blocks = (unsigned)((len + SUM_ENTRIES - 1) / SUM_ENTRIES);
    pf_sum_tables_kernel<<<blocks, block, 0, (cudaStream_t)stream>>>(part, n, len, out);
    return (int)cudaGetLastError();
}
