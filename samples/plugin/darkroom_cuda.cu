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

/* ---- zones ---------------------------------------------------------------------------- */

#include "zones.h"

#define ZONES_THREADS 256

/* One block per input row of the band: each thread counts its pixels of the row per
   zone, then the block adds the threads' values in a fixed tree order and thread 0
   writes the row's partial (2 * ZONES_MAX doubles: counts, then luma sums) into scratch.
   No atomics: the same input gives the same bits every run. */
__global__ void zones_rows_kernel(const zones_params *__restrict__ p, pf_image in, int y0,
                                  double *__restrict__ rows_out)
{
    __shared__ double s[ZONES_THREADS];
    const int zones = p->zones, y = y0 + blockIdx.x;
    double count[ZONES_MAX], sum[ZONES_MAX];
    for (int z = 0; z < ZONES_MAX; z++)
        count[z] = sum[z] = 0;
    const pf_float4 *row = pf_row_d(in, y);
    for (int x = threadIdx.x; x < in.width; x += ZONES_THREADS) {
        float l = pf_luma(row[x]);
        int z = zones_of(zones, l);
        /* a register array indexed by a variable would spill: select instead */
        for (int k = 0; k < ZONES_MAX; k++)
            if (k == z) {
                count[k] += 1;
                sum[k] += l;
            }
    }
    double *out = rows_out + (size_t)blockIdx.x * 2 * ZONES_MAX;
    for (int k = 0; k < 2 * zones; k++) {
        s[threadIdx.x] = k < zones ? count[k] : sum[k - zones];
        __syncthreads();
        for (int half = ZONES_THREADS / 2; half > 0; half /= 2) {
            if (threadIdx.x < half)
                s[threadIdx.x] += s[threadIdx.x + half];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            out[k < zones ? k : ZONES_MAX + k - zones] = s[0];
        __syncthreads();
    }
}

/* The band's partial: each of 2 * zones threads adds its value over the band's rows, in
   row order, into a->partial (counts first, then sums, as the CPU partial). */
__global__ void zones_combine_kernel(const zones_params *__restrict__ p,
                                     const double *__restrict__ rows_in, int rows,
                                     double *__restrict__ partial)
{
    const int zones = p->zones, k = threadIdx.x;
    if (k >= 2 * zones)
        return;
    const int col = k < zones ? k : ZONES_MAX + k - zones;
    double v = 0;
    for (int r = 0; r < rows; r++)
        v += rows_in[(size_t)r * 2 * ZONES_MAX + col];
    partial[k] = v;
}

/* The launcher: the partial of input rows [a->region.y0, a->region.y1), in two launches
   on a->stream. The scratch holds one row partial per row of the band. */
extern "C" int zones_cuda(const pf_stage_args *a)
{
    int rows = a->region.y1 - a->region.y0;
    if (rows <= 0)
        return 0;
    if (pf_cuda_scratch_short(a, "zones", (size_t)rows * 2 * ZONES_MAX * sizeof(double)))
        return 1;
    const zones_params *p = (const zones_params *)a->params;
    double *rows_out = (double *)a->scratch;
    zones_rows_kernel<<<rows, ZONES_THREADS, 0, (cudaStream_t)a->stream>>>(p, a->in[0],
                                                                           a->region.y0, rows_out);
    if (pf_cuda_check(a, "zones_rows_kernel"))
        return 1;
    zones_combine_kernel<<<1, 2 * ZONES_MAX, 0, (cudaStream_t)a->stream>>>(p, rows_out, rows,
                                                                           a->partial);
    return pf_cuda_check(a, "zones_combine_kernel");
}
