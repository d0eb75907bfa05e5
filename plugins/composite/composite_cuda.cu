/* plugins/composite/composite_cuda.cu: the composite family's precompiled one-stage
 * kernels, from the same op header as the CPU rows and the NVRTC source. */
#include "pipefuse/cuda.cuh"

#include "composite_ops.h"
#include "overlay.h"

PF_POINT_CUDA(composite_blend, composite_blend_params)
PF_POINT_CUDA(composite_add, composite_add_params)
PF_POINT_CUDA(composite_multiply, composite_none_params)
PF_POINT_CUDA(composite_difference, composite_none_params)
PF_POINT_CUDA(composite_alpha_over, composite_none_params)
PF_POINT_CUDA(composite_mask, composite_mask_params)

/* overlay: composite.c's overlay_run, one thread per output pixel (32 x 8 blocks). */
__global__ void __launch_bounds__(256)
    overlay_kernel(const pf_overlay_params *__restrict__ p, pf_image b, pf_image o, pf_image out,
                   int y0, int y1)
{
    const int x = blockIdx.x * 32 + threadIdx.x;
    const int y = y0 + blockIdx.y * 8 + threadIdx.y;
    if (x >= out.width || y >= y1)
        return;
    const long long sx = x - pf_gravity_x(p->gravity, b.width, o.width, p->x);
    const long long sy = y - pf_gravity_y(p->gravity, b.height, o.height, p->y);
    float4 v = pf_row_d(b, y)[x];
    if (sx >= 0 && sx < o.width && sy >= 0 && sy < o.height) {
        const composite_none_params none = {0};
        pf_float4 pair[2] = {v, pf_row_d(o, (int)sy)[sx]};
        pair[1].w *= p->opacity;
        pf_pos pos = {x, y, b.width, b.height};
        v = composite_alpha_over(&none, pair, pos);
    }
    pf_row_d(out, y)[x] = v;
}

extern "C" int composite_overlay_cuda(const pf_stage_args *a)
{
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0 || a->out.width <= 0)
        return 0;
    const int tiles = PF_CEIL_DIV(y1 - y0, 8);
    if (tiles > 65535) {
        if (a->err && a->err_size)
            snprintf(a->err, a->err_size,
                     "overlay: a band of %d rows is too tall for one launch (at most %d)", y1 - y0,
                     65535 * 8);
        return 1;
    }
    dim3 blk(32, 8), grid(PF_CEIL_DIV(a->out.width, 32), tiles);
    overlay_kernel<<<grid, blk, 0, (cudaStream_t)a->stream>>>((const pf_overlay_params *)a->params,
                                                              a->in[0], a->in[1], a->out, y0, y1);
    return pf_cuda_check(a, "overlay");
}
