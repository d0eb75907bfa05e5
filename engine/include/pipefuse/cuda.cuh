/* pipefuse/cuda.cuh: helpers for a plugin's CUDA launchers (.cu files only).
 *
 * Every launcher takes the stage's pf_stage_args, launches on a->stream only, checks
 * the launch and reports failure through a->err: the rules of graph capture (no
 * synchronisation, no allocation) hold inside it.
 */
#ifndef PIPEFUSE_CUDA_CUH
#define PIPEFUSE_CUDA_CUH

#include <cuda_runtime.h>
#include <stdio.h>

#include "pipefuse/plugin.h"

#define PF_CEIL_DIV(a, b) (((a) + (b)-1) / (b))

/* Row y of a device image. */
static __device__ __forceinline__ pf_float4 *pf_row_d(const pf_image &im, int y)
{
    return (pf_float4 *)((char *)im.data + (size_t)y * im.pitch);
}

static __device__ __forceinline__ pf_float4 pf_at_clamped_d(const pf_image &im, int x, int y)
{
    x = x < 0 ? 0 : (x >= im.width ? im.width - 1 : x);
    y = y < 0 ? 0 : (y >= im.height ? im.height - 1 : y);
    return pf_row_d(im, y)[x];
}

/* After a launch: 0, or 1 with "<what>: <CUDA error>" in a->err. */
static inline int pf_cuda_check(const pf_stage_args *a, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 0;
    if (a->err && a->err_size)
        snprintf(a->err, a->err_size, "%s: %s (%s)", what, cudaGetErrorString(e),
                 cudaGetErrorName(e));
    return 1;
}

/* Whether a->scratch holds need bytes: 0, or 1 with "<what>: scratch too small: ..." in
   a->err. A scratch_size of 0 means "sized by cuda_scratch_bytes" and is trusted. */
static inline int pf_cuda_scratch_short(const pf_stage_args *a, const char *what, size_t need)
{
    if (a->scratch && (!a->scratch_size || a->scratch_size >= need))
        return 0;
    if (a->err && a->err_size)
        snprintf(a->err, a->err_size, "%s: scratch too small: %zu bytes needed, %zu given", what,
                 need, a->scratch_size);
    return 1;
}

/* Inputs of a one-stage point kernel, passed by value. */
typedef struct pf_point_io {
    pf_image in[PF_MAX_INPUTS];
    int n_in;
    pf_image out;
    int y0, y1;
} pf_point_io;

/* A precompiled one-stage kernel and its launcher `int fn##_cuda(const pf_stage_args *)`
   for the point op fn with params struct T (both from the op header): one thread per
   pixel, 16-byte loads and stores, rows [region.y0, region.y1). */
#define PF_POINT_CUDA(fn, T)                                                                       \
    __global__ void fn##_kernel(const T *__restrict__ p, pf_point_io io)                           \
    {                                                                                              \
        int x = blockIdx.x * blockDim.x + threadIdx.x;                                             \
        int y = io.y0 + blockIdx.y;                                                                \
        if (x >= io.out.width || y >= io.y1)                                                       \
            return;                                                                                \
        pf_float4 v[PF_MAX_INPUTS];                                                                \
        _Pragma("unroll") for (int k = 0; k < PF_MAX_INPUTS; k++) if (k < io.n_in) v[k] =          \
            pf_row_d(io.in[k], y)[x];                                                              \
        pf_pos pos = {x, y, io.out.width, io.out.height};                                          \
        pf_row_d(io.out, y)[x] = fn(p, v, pos);                                                    \
    }                                                                                              \
    extern "C" int fn##_cuda(const pf_stage_args *a)                                               \
    {                                                                                              \
        pf_point_io io;                                                                            \
        for (int k = 0; k < a->n_in && k < PF_MAX_INPUTS; k++)                                     \
            io.in[k] = a->in[k];                                                                   \
        io.n_in = a->n_in;                                                                         \
        io.out = a->out;                                                                           \
        io.y0 = a->region.y0;                                                                      \
        io.y1 = a->region.y1;                                                                      \
        if (io.y1 <= io.y0)                                                                        \
            return 0;                                                                              \
        dim3 block(256, 1), grid(PF_CEIL_DIV(a->out.width, 256), io.y1 - io.y0);                   \
        fn##_kernel<<<grid, block, 0, (cudaStream_t)a->stream>>>((const T *)a->params, io);        \
        return pf_cuda_check(a, #fn "_kernel");                                                    \
    }

#endif /* PIPEFUSE_CUDA_CUH */
