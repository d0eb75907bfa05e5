/* my_plugin_cuda.cu: the CUDA side, built when a CUDA compiler is found. Launch on
 * a->stream only; no synchronisation, no allocation; params are device memory. */
#include "pipefuse/cuda.cuh"

#include "my_ops.h"

PF_POINT_CUDA(my_gain, my_gain_params) /* defines my_gain_cuda */

__global__ void my_blur3_kernel(const my_blur3_params *__restrict__ p, pf_image in, pf_image out,
                                int y0, int y1)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = y0 + blockIdx.y;
    if (x >= out.width || y >= y1)
        return;
    pf_float4 n[9];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++)
            n[j * 3 + i] = pf_at_clamped_d(in, x + i - 1, y + j - 1);
    pf_row_d(out, y)[x] = my_blur3_pixel(p, n);
}

extern "C" int my_blur3_cuda(const pf_stage_args *a)
{
    int rows = a->region.y1 - a->region.y0;
    if (rows <= 0)
        return 0;
    dim3 block(128, 1), grid(PF_CEIL_DIV(a->out.width, 128), rows);
    my_blur3_kernel<<<grid, block, 0, (cudaStream_t)a->stream>>>(
        (const my_blur3_params *)a->params, a->in[0], a->out, a->region.y0, a->region.y1);
    return pf_cuda_check(a, "my_blur3_kernel");
}
