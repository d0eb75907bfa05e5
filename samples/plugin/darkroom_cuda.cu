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
    pf_float4 n[9];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++)
            n[j * 3 + i] = pf_at_clamped_d(in, x + i - 1, y + j - 1);
    pf_row_d(out, y)[x] = emboss_fused(p, n); /* the stencil_fn, as the CPU */
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

/* ---- soften --------------------------------------------------------------------------- */

#include "soften.h"

/* o + w * (a + b), each operation rounded on its own: nvcc would otherwise contract it
   into an FMA and differ from the CPU in the last bits. */
__device__ static pf_float4 soften_pair_d(pf_float4 o, float w, pf_float4 a, pf_float4 b)
{
    return pf_f4(__fadd_rn(o.x, __fmul_rn(w, __fadd_rn(a.x, b.x))),
                 __fadd_rn(o.y, __fmul_rn(w, __fadd_rn(a.y, b.y))),
                 __fadd_rn(o.z, __fmul_rn(w, __fadd_rn(a.z, b.z))),
                 __fadd_rn(o.w, __fmul_rn(w, __fadd_rn(a.w, b.w))));
}

__device__ static pf_float4 soften_scale_d(pf_float4 a, float w)
{
    return pf_f4(__fmul_rn(a.x, w), __fmul_rn(a.y, w), __fmul_rn(a.z, w), __fmul_rn(a.w, w));
}

/* The horizontal sum at (x, y) of the tent, as run_cpu's first pass. */
__device__ static pf_float4 soften_h(const pf_image &in, const float *k, int r, int x, int y)
{
    pf_float4 o = soften_scale_d(pf_at_clamped_d(in, x, y), k[0]);
    for (int i = 1; i <= r; i++)
        o = soften_pair_d(o, k[i], pf_at_clamped_d(in, x - i, y), pf_at_clamped_d(in, x + i, y));
    return o;
}

/* One thread per output pixel of rows [y0, y1): the horizontal sums of the rows it needs,
   recomputed (no scratch, simple rather than fast), then the vertical sum and the
   normalisation, in run_cpu's order. */
__global__ void soften_kernel(const soften_params *__restrict__ p, pf_image in, pf_image out,
                              int y0, int y1)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = y0 + blockIdx.y;
    if (x >= out.width || y >= y1)
        return;
    double t[SOFTEN_MAX_RADIUS + 1], sum = 0;
    float k[SOFTEN_MAX_RADIUS + 1];
    int pm;
    const int r = soften_taps(p, -1, &t[0], &pm);
    for (int i = 0; i <= r; i++) {
        soften_taps(p, i, &t[i], &pm);
        sum = __dadd_rn(sum, i ? __dmul_rn(2.0, t[i]) : t[i]);
    }
    for (int i = 0; i <= r; i++)
        k[i] = __double2float_rn(__ddiv_rn(t[i], sum));
    float hs = __fmul_rn(1.0f, k[0]);
    for (int i = 1; i <= r; i++)
        hs = __fadd_rn(hs, __fmul_rn(k[i], 2.0f));
    float wsum = __fmul_rn(hs, k[0]);
    for (int i = 1; i <= r; i++)
        wsum = __fadd_rn(wsum, __fmul_rn(k[i], __fadd_rn(hs, hs)));
    const int h = in.height;
    pf_float4 o = soften_scale_d(soften_h(in, k, r, x, y), k[0]);
    for (int i = 1; i <= r; i++)
        o = soften_pair_d(o, k[i], soften_h(in, k, r, x, max(y - i, 0)),
                          soften_h(in, k, r, x, min(y + i, h - 1)));
    if (wsum != 1.0f)
        o = pf_f4(__fdiv_rn(o.x, wsum), __fdiv_rn(o.y, wsum), __fdiv_rn(o.z, wsum),
                  __fdiv_rn(o.w, wsum));
    pf_row_d(out, y)[x] = o;
}

extern "C" int soften_cuda(const pf_stage_args *a)
{
    int rows = a->region.y1 - a->region.y0;
    if (rows <= 0)
        return 0;
    dim3 block(128, 1), grid(PF_CEIL_DIV(a->out.width, 128), rows);
    soften_kernel<<<grid, block, 0, (cudaStream_t)a->stream>>>(
        (const soften_params *)a->params, a->in[0], a->out, a->region.y0, a->region.y1);
    return pf_cuda_check(a, "soften_kernel");
}

/* ---- profile -------------------------------------------------------------------------- */

/* One thread per row of the band adds its pixels in x order: deterministic, no atomics.
   (Where fusion is on, the engine's own kernel computes the table instead.) */
__global__ void profile_kernel(pf_image in, int y0, int y1, double *__restrict__ partial)
{
    const int y = y0 + blockIdx.x * blockDim.x + threadIdx.x;
    if (y >= y1)
        return;
    const pf_float4 *row = pf_row_d(in, y);
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int x = 0; x < in.width; x++) {
        s0 += row[x].x;
        s1 += row[x].y;
        s2 += row[x].z;
        s3 += row[x].w;
    }
    double *t = partial + 4 * (size_t)y;
    t[0] = s0, t[1] = s1, t[2] = s2, t[3] = s3;
}

extern "C" int profile_cuda(const pf_stage_args *a)
{
    int rows = a->region.y1 - a->region.y0;
    if (rows <= 0)
        return 0;
    profile_kernel<<<PF_CEIL_DIV(rows, 128), 128, 0, (cudaStream_t)a->stream>>>(
        a->in[0], a->region.y0, a->region.y1, a->partial);
    return pf_cuda_check(a, "profile_kernel");
}
