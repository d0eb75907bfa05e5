/* tests/watchdog/spin_cuda.cu: the spin stages on the GPU, one thread per pixel (per
 * column for the reduce, so that its sums are in row order, as on the CPU). */
#include "pipefuse/cuda.cuh"

#include "spin.h"

PF_POINT_CUDA(spin_point, spin_params)

__global__ void spin_stencil_kernel(const spin_params *p, pf_image in, pf_image out, int y0, int y1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = y0 + blockIdx.y;
    if (x >= out.width || y >= y1)
        return;
    pf_float4 u = pf_at_clamped_d(in, x, y - 1), d = pf_at_clamped_d(in, x, y + 1);
    float z = spin_zero(p->iters, u.x);
    pf_row_d(out, y)[x] = pf_f4(
        __fadd_rn(__fmul_rn(__fadd_rn(u.x, d.x), 0.5f), z), __fmul_rn(__fadd_rn(u.y, d.y), 0.5f),
        __fmul_rn(__fadd_rn(u.z, d.z), 0.5f), __fmul_rn(__fadd_rn(u.w, d.w), 0.5f));
}

__global__ void spin_resample_kernel(const spin_params *p, pf_image in, pf_image out, int y0,
                                     int y1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = y0 + blockIdx.y;
    if (x >= out.width || y >= y1)
        return;
    pf_float4 v = pf_row_d(in, in.height - 1 - y)[x];
    v.x += spin_zero(p->iters, v.x);
    pf_row_d(out, y)[x] = v;
}

__global__ void spin_reduce_kernel(const spin_params *p, pf_image in, double *partial, int y0,
                                   int y1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= in.width)
        return;
    double s[4] = {0, 0, 0, 0};
    for (int y = y0; y < y1; y++) {
        pf_float4 v = pf_row_d(in, y)[x];
        s[0] += v.x + spin_zero(p->iters, v.x), s[1] += v.y, s[2] += v.z, s[3] += v.w;
    }
    for (int k = 0; k < 4; k++)
        partial[4 * (size_t)x + k] = s[k];
}

__global__ void spin_fault_kernel(const spin_fault_params *p, pf_image in, pf_image out, int y0,
                                  int y1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = y0 + blockIdx.y;
    if (x >= out.width || y >= y1)
        return;
    if (p->trap)
        __trap();
    pf_row_d(out, y)[x] = pf_row_d(in, y)[x];
}

#define LAUNCH_ROWS(kernel, ...)                                                                   \
    dim3 block(256), grid(PF_CEIL_DIV(a->out.width, 256), a->region.y1 - a->region.y0);            \
    if (a->region.y1 <= a->region.y0)                                                              \
        return 0;                                                                                  \
    kernel<<<grid, block, 0, (cudaStream_t)a->stream>>>(__VA_ARGS__);                              \
    return pf_cuda_check(a, #kernel);

extern "C" int spin_stencil_cuda(const pf_stage_args *a)
{
    LAUNCH_ROWS(spin_stencil_kernel, (const spin_params *)a->params, a->in[0], a->out, a->region.y0,
                a->region.y1)
}

extern "C" int spin_resample_cuda(const pf_stage_args *a)
{
    LAUNCH_ROWS(spin_resample_kernel, (const spin_params *)a->params, a->in[0], a->out,
                a->region.y0, a->region.y1)
}

extern "C" int spin_fault_cuda(const pf_stage_args *a)
{
    LAUNCH_ROWS(spin_fault_kernel, (const spin_fault_params *)a->params, a->in[0], a->out,
                a->region.y0, a->region.y1)
}

extern "C" int spin_reduce_cuda(const pf_stage_args *a)
{
    dim3 block(256), grid(PF_CEIL_DIV(a->in[0].width, 256));
    spin_reduce_kernel<<<grid, block, 0, (cudaStream_t)a->stream>>>(
        (const spin_params *)a->params, a->in[0], a->partial, a->region.y0, a->region.y1);
    return pf_cuda_check(a, "spin_reduce_kernel");
}
