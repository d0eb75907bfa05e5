/* kernels/separable_rt.h: the two passes of a generated separable stencil kernel (a
 * stage declaring pf_stage_desc.separable_fn), compiled by NVRTC as
 * "pipefuse/separable_rt.h" after fused_rt.h (engine/fuse_stencil.c writes the kernels
 * that call these, and defines PF_SEP_RMAX, the stage's separable_max, and the block
 * geometry PF_SEP_TW, PF_SEP_VTX, PF_SEP_VTY, PF_SEP_VRPT from engine/fuse.h).
 *
 * The arithmetic is the filter family's (plugins/filter/filter_cuda.cu, filter.c) in
 * the same order, for any stage declaring the function: taps normalised in double
 * (tap_i / (tap_0 + 2 tap_1 + ... + 2 tap_r)); a horizontal pass over the band's rows
 * plus the halo, into scratch; a vertical pass over those; each sum acc + w_i (a + b)
 * with every operation rounded on its own; premultiplied alpha as premultiply.h says;
 * every sum normalised by the weights' float sum. What differs from the precompiled
 * kernels is where a pixel comes from and where a result goes: the horizontal pass calls
 * SRC.load(x, y, raw) for the pixels of a row (the unit's inputs as they are in memory)
 * and SRC.apply(raw, x, y) when it stages them (converted from their formats, the
 * absorbed point ops run on them), both written by the generated kernel: a row's loads
 * are issued before the sums of the row before, its arithmetic after them. The vertical
 * pass hands each result to DST(x, y, v) (stores in the outputs' formats).
 *
 * Scratch (one block per stream, pf_fuse_sep_scratch): rows [s0, s0 + rows) of
 * horizontal sums, width W each, then the taps (w[0..r]) and their weight sum at
 * PF_SEP_RMAX + 1, which the block computing the band's first row stores for the
 * vertical pass. Launches are sized for PF_SEP_RMAX, whatever the params: a parameter
 * changed between frames changes neither the grid nor the scratch.
 */
#ifndef PIPEFUSE_SEPARABLE_RT_H
#define PIPEFUSE_SEPARABLE_RT_H

#include "pipefuse/premultiply.h" /* plugins/premultiply.h */

static __device__ __forceinline__ int pf_sep_clampi(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static __device__ __forceinline__ float4 pf_sep_scale(float4 a, float s)
{
    return make_float4(__fmul_rn(a.x, s), __fmul_rn(a.y, s), __fmul_rn(a.z, s), __fmul_rn(a.w, s));
}

/* acc + s * (a + b) */
static __device__ __forceinline__ float4 pf_sep_pair(float4 acc, float s, float4 a, float4 b)
{
    return make_float4(__fadd_rn(acc.x, __fmul_rn(s, __fadd_rn(a.x, b.x))),
                       __fadd_rn(acc.y, __fmul_rn(s, __fadd_rn(a.y, b.y))),
                       __fadd_rn(acc.z, __fmul_rn(s, __fadd_rn(a.z, b.z))),
                       __fadd_rn(acc.w, __fmul_rn(s, __fadd_rn(a.w, b.w))));
}

static __device__ __forceinline__ float4 pf_sep_pm(float4 v)
{
    const float a = pf_pm_alpha(v.w);
    return make_float4(pf_pm_mul(v.x, a), pf_pm_mul(v.y, a), pf_pm_mul(v.z, a), a);
}

/* The taps w[0..r], normalised, with the whole block: TAPS(i, &t) gives tap i
   unnormalised; tmp holds r + 1 doubles. The sum is taken in order by one thread. */
template <class TAPS>
static __device__ void pf_sep_build_taps(const TAPS &taps, int r, float *w, double *tmp,
                                         double *sum_s)
{
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;
    for (int i = tid; i <= r; i += nt)
        taps(i, &tmp[i]);
    __syncthreads();
    if (tid == 0) {
        double sum = 0;
        for (int i = 0; i <= r; i++)
            sum = __dadd_rn(sum, i ? __dmul_rn(2.0, tmp[i]) : tmp[i]);
        *sum_s = sum;
    }
    __syncthreads();
    for (int i = tid; i <= r; i += nt)
        w[i] = __double2float_rn(__ddiv_rn(tmp[i], *sum_s));
    __syncthreads();
}

/* filter.c's weight_sum: the taps summed as both passes sum alpha 1. */
static __device__ float pf_sep_weight_sum(const float *w, int r)
{
    float h = __fmul_rn(1.0f, w[0]);
    for (int t = 1; t <= r; t++)
        h = __fadd_rn(h, __fmul_rn(w[t], 2.0f));
    float v = __fmul_rn(h, w[0]);
    for (int t = 1; t <= r; t++)
        v = __fadd_rn(v, __fmul_rn(w[t], __fadd_rn(h, h)));
    return v;
}

/* The horizontal pass: a block of PF_SEP_TW threads takes PF_SEP_TW columns of rpb
   source rows; each row's segment plus the halo (read at clamped columns) goes to shared
   memory, alternating between two buffers, the next row's reads issued before this
   row's sums. Source rows [max(y0 - r, 0), min(y1 + r, H)) are computed into tmp row
   (y - s0). */
template <class SRC, class TAPS>
static __device__ void pf_sep_h(const SRC &src, const TAPS &taps, int r, bool pm, int W, int H,
                                float4 *__restrict__ tmp, float *__restrict__ taps_out, int s0,
                                int y0, int y1, int rpb)
{
    const int NPRE = (2 * PF_SEP_TW + 2 * PF_SEP_RMAX - 1) / PF_SEP_TW; /* reads a row */
    __shared__ float4 seg[2][PF_SEP_TW + 2 * PF_SEP_RMAX];
    __shared__ float w[PF_SEP_RMAX + 1];
    __shared__ double sum_s;
    static_assert(sizeof(seg) >= sizeof(double) * (PF_SEP_RMAX + 1), "taps scratch fits");

    const int lo_all = max(y0 - r, 0), hi_all = min(y1 + r, H);
    const int row0 = s0 + blockIdx.y * rpb;
    const int lo = max(row0, lo_all), hi = min(row0 + rpb, hi_all);
    if (lo >= hi) /* rows only a larger radius needs: the same for the whole block */
        return;
    pf_sep_build_taps(taps, r, w, (double *)&seg[0][0], &sum_s);
    if (blockIdx.x == 0 && lo == lo_all && threadIdx.x == 0) {
        for (int i = 0; i <= r; i++)
            taps_out[i] = w[i];
        taps_out[PF_SEP_RMAX + 1] = pf_sep_weight_sum(w, r);
    }
    pm = pm && r > 0; /* radius 0 mixes nothing: a copy */

    const int x0 = blockIdx.x * PF_SEP_TW, tx = threadIdx.x, x = x0 + tx;
    const int n = min(PF_SEP_TW, W - x0) + 2 * r; /* segment length */
    typename SRC::raw pre[NPRE];
#pragma unroll
    for (int m = 0; m < NPRE; m++)
        if (tx + m * PF_SEP_TW < n)
            src.load(pf_sep_clampi(x0 - r + tx + m * PF_SEP_TW, 0, W - 1), lo, pre[m]);
    int b = 0;
    for (int y = lo; y < hi; y++, b ^= 1) {
        /* seg[b] was last read two rows ago, before the barrier of the row between */
#pragma unroll
        for (int m = 0; m < NPRE; m++) {
            const int j = tx + m * PF_SEP_TW;
            if (j < n) {
                const float4 v = src.apply(pre[m], pf_sep_clampi(x0 - r + j, 0, W - 1), y);
                seg[b][j] = pm ? pf_sep_pm(v) : v;
            }
        }
        __syncthreads();
        if (y + 1 < hi) {
#pragma unroll
            for (int m = 0; m < NPRE; m++)
                if (tx + m * PF_SEP_TW < n)
                    src.load(pf_sep_clampi(x0 - r + tx + m * PF_SEP_TW, 0, W - 1), y + 1, pre[m]);
        }
        if (x < W) {
            const float4 *c = seg[b] + tx + r;
            float4 acc = pf_sep_scale(c[0], w[0]);
            for (int i = 1; i <= r; i++)
                acc = pf_sep_pair(acc, w[i], c[-i], c[i]);
            tmp[(size_t)(y - s0) * (size_t)W + x] = acc;
        }
    }
}

/* The vertical pass: a block of PF_SEP_VTX x PF_SEP_VTY threads takes PF_SEP_VTX columns
   of PF_SEP_VTY * PF_SEP_VRPT output rows, each thread PF_SEP_VRPT consecutive rows of
   one column, reading tmp through L1 into registers that slide one row a tap. Taps come
   from the horizontal pass. Each normalised result goes to DST(x, y, v). */
template <class DST>
static __device__ void pf_sep_v(const DST &dst, int r, bool pm, int W, int H,
                                const float4 *__restrict__ tmp, const float *__restrict__ taps,
                                int s0, int y0, int y1)
{
    const int VRPT = PF_SEP_VRPT;
    __shared__ float w[PF_SEP_RMAX + 1];
    __shared__ float wsum_s;
    const int tid = threadIdx.y * PF_SEP_VTX + threadIdx.x;
    for (int i = tid; i <= r; i += PF_SEP_VTX * PF_SEP_VTY)
        w[i] = taps[i];
    if (tid == 0)
        wsum_s = taps[PF_SEP_RMAX + 1];
    pm = pm && r > 0;
    __syncthreads();

    const int x = blockIdx.x * PF_SEP_VTX + threadIdx.x, xc = min(x, W - 1);
    const int yb = y0 + blockIdx.y * PF_SEP_VTY * VRPT + threadIdx.y * VRPT;
    /* Rows the horizontal pass wrote; clamping again keeps the rows past y1 of a tile,
       whose results are dropped, inside them too. */
    const int lo = max(y0 - r, 0), hi = min(y1 + r, H) - 1;
    const float4 *col = tmp + xc;
#define PF_SEP_TROW(row)                                                                           \
    col[(size_t)(pf_sep_clampi(pf_sep_clampi((row), 0, H - 1), lo, hi) - s0) * (size_t)W]

    float4 acc[VRPT], u[VRPT], d[VRPT];
    {
        float4 c[VRPT + 2]; /* rows yb - 1 .. yb + VRPT */
#pragma unroll
        for (int j = 0; j < VRPT + 2; j++)
            c[j] = PF_SEP_TROW(yb - 1 + j);
#pragma unroll
        for (int j = 0; j < VRPT; j++) {
            acc[j] = pf_sep_scale(c[j + 1], w[0]);
            u[j] = c[j];
            d[j] = c[j + 2];
        }
    }
#pragma unroll 2
    for (int i = 1; i <= r; i++) {
        const float wi = w[i];
#pragma unroll
        for (int j = 0; j < VRPT; j++)
            acc[j] = pf_sep_pair(acc[j], wi, u[j], d[j]);
#pragma unroll
        for (int j = VRPT - 1; j > 0; j--)
            u[j] = u[j - 1];
#pragma unroll
        for (int j = 0; j < VRPT - 1; j++)
            d[j] = d[j + 1];
        u[0] = PF_SEP_TROW(yb - i - 1);
        d[VRPT - 1] = PF_SEP_TROW(yb + VRPT + i);
    }
#undef PF_SEP_TROW

    if (x >= W)
        return;
#pragma unroll
    for (int j = 0; j < VRPT; j++) {
        const int y = yb + j;
        if (y >= y1)
            break;
        float4 o = acc[j];
        if (wsum_s != 1.0f || pm) { /* premultiply.h's pf_norm_colour, as filter.c */
            o.x = pf_norm_colour(o.x, o.w, wsum_s, pm);
            o.y = pf_norm_colour(o.y, o.w, wsum_s, pm);
            o.z = pf_norm_colour(o.z, o.w, wsum_s, pm);
            o.w = __fdiv_rn(o.w, wsum_s);
        }
        dst(x, y, o);
    }
}

#endif /* PIPEFUSE_SEPARABLE_RT_H */
