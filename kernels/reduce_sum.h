/* kernels/reduce_sum.h: the last step of a summing reduce on the GPU (engine/fuse.c
 * writes the kernels that leave its partial tables): the partial tables added, in their
 * order, into the result table, so that only the table crosses to the host. */
#ifndef PF_KERNELS_REDUCE_SUM_H
#define PF_KERNELS_REDUCE_SUM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[j] = the sum of part[0][j], ..., part[n - 1][j] in double, in an order fixed by n, for
   j < len, where part[k] starts at part + k * len. Launches on stream; 0 or a
   cudaError_t. n may be 0 (the table is zeros). */
int pf_cuda_sum_tables(const double *part, int n, size_t len, double *out, void *stream);

#ifdef __cplusplus
}
#endif

#endif
