/* kernels/point/filter3x3_ops.h: the filter family's 3x3 stencils, sobel and median3, as
 * one output pixel of its neighbourhood; and the taps of its separable ones, gaussian and
 * box (pf_stage_desc.separable_fn), which filter.c builds its kernels from too.
 *
 * Compiled as plain C by plugins/filter/filter.c, as CUDA by filter_cuda.cu, and handed
 * to NVRTC as the stages' point_source (embedded as pf_src_filter3x3_ops), where a
 * fused stencil kernel calls sobel_px and median3_px (pf_stage_desc.stencil_fn) on the
 * tile it stages. n[0..8] is the 3x3 neighbourhood row-major from the top left, n[4]
 * the centre. See pipefuse/point.h for what such a header may use.
 *
 * Rounding: on the GPU every sum and product is an explicit __fadd_rn / __fmul_rn (and
 * __fsqrt_rn), so nothing contracts into an FMA; the C build (ISO C, no contraction)
 * rounds each operation the same way, in the same order, so CPU and GPU agree bit for
 * bit.
 */
#ifndef PF_KERNELS_POINT_FILTER3X3_OPS_H
#define PF_KERNELS_POINT_FILTER3X3_OPS_H

#include "pipefuse/point.h"

/* ---- Params ------------------------------------------------------------------- */

typedef struct pf_sobel_params {
    float scale; /* factor on the gradient magnitude */
} pf_sobel_params;

/* median3 takes no params (params_size 0); the struct names the type its function
   takes, and is never read. */
typedef struct pf_median3_params {
    int unused;
} pf_median3_params;

/* ---- Rounded arithmetic ------------------------------------------------------------ */

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FILTER3_ADD(a, b) __fadd_rn(a, b)
#define FILTER3_SUB(a, b) __fsub_rn(a, b)
#define FILTER3_MUL(a, b) __fmul_rn(a, b)
#define FILTER3_SQRT(a)   __fsqrt_rn(a)
#else
#define FILTER3_ADD(a, b) ((a) + (b))
#define FILTER3_SUB(a, b) ((a) - (b))
#define FILTER3_MUL(a, b) ((a) * (b))
#define FILTER3_SQRT(a)   sqrtf(a)
#endif

/* ---- Separable kernels: gaussian, box ------------------------------------------------- */

#define FILTER_GAUSSIAN_MAX_SIGMA 64 /* so the radius, ceil(3 * sigma), is at most 192 */
#define FILTER_BOX_MAX_RADIUS     64
#define FILTER_ALPHA_STRAIGHT     1 /* premultiply.h's PF_ALPHA_STRAIGHT (filter.c asserts it) */

typedef struct pf_gaussian_params {
    float sigma; /* standard deviation in pixels; 0: identity */
    int alpha;   /* PF_ALPHA_* */
} pf_gaussian_params;

typedef struct pf_box_params {
    int radius; /* mean over (2 * radius + 1)^2 pixels */
    int alpha;  /* PF_ALPHA_* */
} pf_box_params;

/* The radius, ceil(3 sigma) with sigma clamped to [0, 64] (NaN as 0), and the
   unnormalised tap at offset i (0 <= i <= r): exp(-i^2 / (2 sigma^2)), 1 for radius 0.
   The device's double exp() may differ from libm's in the last bit, so a tap normalised
   to float may differ by one ulp between the CPU and the GPU. */
PF_POINT_FN int gaussian_sep(const pf_gaussian_params *p, int i, double *tap, int *premultiply)
{
    double sigma = p->sigma;
    sigma = sigma > 0 ? (sigma < FILTER_GAUSSIAN_MAX_SIGMA ? sigma : FILTER_GAUSSIAN_MAX_SIGMA) : 0;
    const int r = (int)ceil(3.0 * sigma);
    if (i >= 0 && i <= r)
        *tap = r ? exp(-(double)i * i / (2.0 * sigma * sigma)) : 1.0;
    *premultiply = p->alpha != FILTER_ALPHA_STRAIGHT;
    return r;
}

/* The radius clamped to [0, 64]; every tap 1 (normalised: 1 / (2 r + 1)). */
PF_POINT_FN int box_sep(const pf_box_params *p, int i, double *tap, int *premultiply)
{
    const int r =
        p->radius < 0 ? 0 : (p->radius > FILTER_BOX_MAX_RADIUS ? FILTER_BOX_MAX_RADIUS : p->radius);
    if (i >= 0 && i <= r)
        *tap = 1.0;
    *premultiply = p->alpha != FILTER_ALPHA_STRAIGHT;
    return r;
}

/* ---- sobel --------------------------------------------------------------------------- */

/* scale * |(gx, gy)| of one channel: gx = (tr + 2 mr + br) - (tl + 2 ml + bl), gy = (bl +
   2 bm + br) - (tl + 2 tm + tr), each left to right. */
PF_POINT_FN float sobel1(float scale, float tl, float tm, float tr, float ml, float mr, float bl,
                         float bm, float br)
{
    const float gx = FILTER3_SUB(FILTER3_ADD(FILTER3_ADD(tr, FILTER3_MUL(2.0f, mr)), br),
                                 FILTER3_ADD(FILTER3_ADD(tl, FILTER3_MUL(2.0f, ml)), bl));
    const float gy = FILTER3_SUB(FILTER3_ADD(FILTER3_ADD(bl, FILTER3_MUL(2.0f, bm)), br),
                                 FILTER3_ADD(FILTER3_ADD(tl, FILTER3_MUL(2.0f, tm)), tr));
    return FILTER3_MUL(scale, FILTER3_SQRT(FILTER3_ADD(FILTER3_MUL(gx, gx), FILTER3_MUL(gy, gy))));
}

#define FILTER3_SOBEL_CH(c)                                                                        \
    sobel1(s, n[0].c, n[1].c, n[2].c, n[3].c, n[5].c, n[6].c, n[7].c, n[8].c)

/* The gradient magnitude per RGB channel; alpha passes through. */
PF_POINT_FN pf_float4 sobel_px(const pf_sobel_params *p, const pf_float4 *n)
{
    const float s = p->scale;
    return pf_f4(FILTER3_SOBEL_CH(x), FILTER3_SOBEL_CH(y), FILTER3_SOBEL_CH(z), n[4].w);
}

/* ---- median3 ------------------------------------------------------------------------- */

/* The 19 compare-exchanges of Paeth's median-of-9 network, in order: SORT2(i, j) leaves
   the smaller of p<i>, p<j> in p<i>. */
#define FILTER_MEDIAN9_NETWORK(SORT2)                                                              \
    SORT2(1, 2);                                                                                   \
    SORT2(4, 5);                                                                                   \
    SORT2(7, 8);                                                                                   \
    SORT2(0, 1);                                                                                   \
    SORT2(3, 4);                                                                                   \
    SORT2(6, 7);                                                                                   \
    SORT2(1, 2);                                                                                   \
    SORT2(4, 5);                                                                                   \
    SORT2(7, 8);                                                                                   \
    SORT2(0, 3);                                                                                   \
    SORT2(5, 8);                                                                                   \
    SORT2(4, 7);                                                                                   \
    SORT2(3, 6);                                                                                   \
    SORT2(1, 4);                                                                                   \
    SORT2(2, 5);                                                                                   \
    SORT2(4, 7);                                                                                   \
    SORT2(4, 2);                                                                                   \
    SORT2(6, 4);                                                                                   \
    SORT2(4, 2)

/* A compare-exchange is two selects on one comparison, p<i> > p<j> (so NaNs and signed
   zeros land the same everywhere), written without branches: filter.c's row loop over it
   vectorises. */
#define FILTER3_SORT2(i, j)                                                                        \
    do {                                                                                           \
        const float a_ = p##i, b_ = p##j;                                                          \
        const int c_ = a_ > b_;                                                                    \
        p##i = c_ ? b_ : a_;                                                                       \
        p##j = c_ ? a_ : b_;                                                                       \
    } while (0)

PF_POINT_FN float median9(float p0, float p1, float p2, float p3, float p4, float p5, float p6,
                          float p7, float p8)
{
    FILTER_MEDIAN9_NETWORK(FILTER3_SORT2);
    return p4;
}

#define FILTER3_MEDIAN_CH(c)                                                                       \
    median9(n[0].c, n[1].c, n[2].c, n[3].c, n[4].c, n[5].c, n[6].c, n[7].c, n[8].c)

/* The median of each channel, alpha included. */
PF_POINT_FN pf_float4 median3_px(const pf_median3_params *p, const pf_float4 *n)
{
    (void)p;
    return pf_f4(FILTER3_MEDIAN_CH(x), FILTER3_MEDIAN_CH(y), FILTER3_MEDIAN_CH(z),
                 FILTER3_MEDIAN_CH(w));
}

#endif /* PF_KERNELS_POINT_FILTER3X3_OPS_H */
