/* samples/plugin/darkroom_cuda.cu: the darkroom plugin's CUDA side, compiled only when
 * pipefuse_add_plugin finds a CUDA compiler (the C side then sees PF_PLUGIN_HAVE_CUDA).
 *
 * The rules for everything here, because the engine may capture these launches into a
 * CUDA Graph and replay them frame after frame: launch on a->stream only; never
 * synchronise, allocate or copy to or from the host; read params through a->params,
 * which is DEVICE memory (the engine updates it between frames without re-capturing).
 */
#include "pipefuse/cuda.cuh"

#include "emboss.h"
#include "spotlight_ops.h"

/* ---- spotlight ------------------------------------------------------------------------ */

/* The precompiled one-stage kernel and its launcher `int spotlight_cuda(const
   pf_stage_args *)`, from the same op as the CPU row function and the NVRTC source. */
PF_POINT_CUDA(spotlight, spotlight_params)

/* ---- emboss --------------------------------------------------------------------------- */

/* One thread per output pixel of rows [y0, y1). Params are read from device memory. */
__global__ void emboss_kernel(const emboss_params *__restrict__ p, pf_image in, pf_image out,
                              int y0, int y1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = y0 + blockIdx.y;
    if (x >= out.width || y >= y1)
        return;
    float dx, dy;
    emboss_direction(p, &dx, &dy);
    pf_float4 n[9];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++)
            n[j * 3 + i] = pf_at_clamped_d(in, x + i - 1, y + j - 1);
    pf_row_d(out, y)[x] = emboss_pixel(p, n, dx, dy);
}

/* The launcher: the one place that launches emboss_kernel. It covers exactly the rows
   of a->region, on a->stream, and reports a failed launch through a->err. */
extern "C" int emboss_cuda(const pf_stage_args *a)
{
    int rows = a->region.y1 - a->region.y0;
    if (rows <= 0)
        return 0;
    dim3 block(128, 1), grid(PF_CEIL_DIV(a->out.width, 128), rows);
    emboss_kernel<<<grid, block, 0, (cudaStream_t)a->stream>>>(
        (const emboss_params *)a->params, a->in[0], a->out, a->region.y0, a->region.y1);
    return pf_cuda_check(a, "emboss_kernel");
}
