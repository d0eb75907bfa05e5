/* plugins/filter/filter.c: the filter family, stencil stages (gaussian, box, sobel,
 * unsharp, median3).
 *
 * Each stage computes exactly the output rows of its region from the whole input,
 * clamping reads to the edge. The separable ones (gaussian, box, unsharp) run their
 * horizontal pass over the region's rows plus the halo into scratch and never look at
 * rows another band computed, so a pixel's value, and the order of the sums that make
 * it, is the same however the output is banded: banded runs are bit-identical.
 *
 * gaussian, box and unsharp's blur mix neighbours, so by default they premultiply
 * (premultiply.h): a row holding any alpha other than 1 is premultiplied into scratch
 * before the horizontal pass, and the colours of the vertical pass's sums are divided by
 * the summed alpha. Rows of opaque pixels are read as they are (c * 1 is c), so an
 * opaque image gives the straight result bit for bit. Every sum is normalised by the
 * float weights' own sum (pf_norm_colour), so a flat image stays flat and alpha 1 stays 1. sobel and median3 do not
 * average colours and work on the stored values (see docs/stages.md).
 */
#include <math.h>
#include <stdio.h>

#include "pipefuse/plugin.h"

#include "filter.h"

extern const char pf_src_filter3x3_ops[]; /* kernels/point/filter3x3_ops.h, for NVRTC */

#define MAX_TAPS_RADIUS 192 /* ceil(3 * PF_GAUSSIAN_MAX_SIGMA) */

/* ---- Small helpers --------------------------------------------------------------- */

static inline int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static inline pf_float4 f4_scale(pf_float4 a, float s)
{
    return pf_f4(a.x * s, a.y * s, a.z * s, a.w * s);
}

/* acc + s * (a + b) */
static inline pf_float4 f4_pair(pf_float4 acc, float s, pf_float4 a, pf_float4 b)
{
    return pf_f4(acc.x + s * (a.x + b.x), acc.y + s * (a.y + b.y), acc.z + s * (a.z + b.z),
                 acc.w + s * (a.w + b.w));
}

static int scratch_fail(const pf_stage_args *a, const char *msg, size_t need)
{
    if (a->err && a->err_size)
        snprintf(a->err, a->err_size, "%s: %zu bytes needed, %zu given", msg, need,
                 a->scratch_size);
    return -1;
}

/* ---- Separable symmetric convolution ------------------------------------------------ */

/* A normalised symmetric kernel: w[k] is the weight at offsets +k and -k. */
typedef struct kernel1d {
    int r;
    float w[MAX_TAPS_RADIUS + 1];
} kernel1d;

/* A kernel from a stage's taps function (gaussian_sep, box_sep: the stages'
   separable_fn): returns its radius and, unless k is NULL, fills k with the taps
   normalised as the engine's generated passes normalise them (plugin.h, separable_fn):
   each divided by their sum, tap 0 once and the others twice, in double, in order. */
typedef int (*taps_fn)(const void *params, int i, double *tap, int *premultiply);

static int kernel_from(taps_fn fn, const void *params, kernel1d *k)
{
    double t[MAX_TAPS_RADIUS + 1], sum = 0;
    int pm;
    const int r = fn(params, -1, t, &pm);
    if (!k)
        return r;
    for (int i = 0; i <= r; i++) {
        fn(params, i, &t[i], &pm);
        sum += i ? 2 * t[i] : t[i];
    }
    for (int i = 0; i <= r; i++)
        k->w[i] = (float)(t[i] / sum);
    k->r = r;
    return r;
}

static int gaussian_taps(const void *params, int i, double *tap, int *premultiply)
{
    return gaussian_sep((const pf_gaussian_params *)params, i, tap, premultiply);
}

static int box_taps(const void *params, int i, double *tap, int *premultiply)
{
    return box_sep((const pf_box_params *)params, i, tap, premultiply);
}

/* Params are clamped to their ranges, so the weights always fit. A box's taps come out
   as 1.0f / (2 r + 1), the float division, for every radius it takes. */
static int gaussian_kernel(const void *params, kernel1d *k)
{
    return kernel_from(gaussian_taps, params, k);
}

static int box_kernel(const void *params, kernel1d *k)
{
    return kernel_from(box_taps, params, k);
}

_Static_assert(FILTER_ALPHA_STRAIGHT == PF_ALPHA_STRAIGHT, "the ops header's alpha names");

/* The sum of the weights, taken as the two passes take a sum over opaque pixels (alpha 1
   everywhere): what the summed alpha is where every pixel read is opaque. */
static float weight_sum(const kernel1d *k)
{
    float h = 1.0f * k->w[0];
    for (int t = 1; t <= k->r; t++)
        h = h + k->w[t] * (1.0f + 1.0f);
    float v = h * k->w[0];
    for (int t = 1; t <= k->r; t++)
        v = v + k->w[t] * (h + h);
    return v;
}

/* Scratch for the horizontal pass: the band's rows plus the halo above and below, and
   one row for a premultiplied source row. */
static size_t separable_scratch(int r, int width, int rows)
{
    return (size_t)width * (size_t)(rows + 2 * r + 1) * sizeof(pf_float4);
}

/* Whether every alpha of the row is 1: a reduction without an early exit, which the
   compiler vectorises. */
static int row_opaque(const pf_float4 *src, int w)
{
    int all = 1;
    for (int x = 0; x < w; x++)
        all &= src[x].w == 1.0f;
    return all;
}

/* Row src premultiplied into pm, or src itself when every alpha in it is 1 (where the
   premultiplied values are the same); *mixed is set when it was not. */
static const pf_float4 *premultiplied_row(const pf_float4 *src, pf_float4 *pm, int w, int *mixed)
{
    if (row_opaque(src, w))
        return src;
    *mixed = 1;
    for (int x = 0; x < w; x++) {
        const pf_float4 v = src[x];
        const float a = pf_pm_alpha(v.w);
        pm[x] = pf_f4(pf_pm_mul(v.x, a), pf_pm_mul(v.y, a), pf_pm_mul(v.z, a), a);
    }
    return pm;
}

/* A row of sums normalised (premultiply.h's pf_norm_colour): pm, premultiplied colours
   back to straight, else every channel divided by wsum; alpha divided by wsum. */
static void normalise_row(pf_float4 *o, int w, float wsum, int pm)
{
    for (int x = 0; x < w; x++) {
        const float a = o[x].w;
        o[x] = pf_f4(pf_norm_colour(o[x].x, a, wsum, pm), pf_norm_colour(o[x].y, a, wsum, pm),
                     pf_norm_colour(o[x].z, a, wsum, pm), a / wsum);
    }
}

/* Where the compiler and the C library can dispatch at load time (GCC or clang on x86-64
   with ifunc), the row loops below are also built for AVX2 and the CPU picks; not under
   the sanitizers (see frame.c). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) &&                                \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define FILTER_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FILTER_VECTOR_CLONES
#endif

/* The row loops of the separable pass, over floats (4 a pixel): o[i] = k0 * c[i], then
   for each tap t in order o[i] += kt * (a_t[i] + b_t[i]), which is f4_scale and f4_pair
   of the per-pixel form in the same order, element by element: the same values, in a
   loop the compiler vectorises. Horizontally a_t and b_t are the row itself shifted by
   -t and +t pixels (pixels whose taps stay inside the row); vertically, the rows t
   above and below. */
FILTER_VECTOR_CLONES static void sep_row_h(const float *restrict src, float *restrict o, int lo,
                                           int hi, const kernel1d *k)
{
    for (int i = lo; i < hi; i++)
        o[i] = src[i] * k->w[0];
    for (int t = 1; t <= k->r; t++) {
        const float kt = k->w[t];
        for (int i = lo; i < hi; i++)
            o[i] = o[i] + kt * (src[i - 4 * t] + src[i + 4 * t]);
    }
}

FILTER_VECTOR_CLONES static void sep_row_v(const pf_float4 *tmp, size_t w, int y, int s0, int h,
                                           float *restrict o, const kernel1d *k)
{
    const float *c = (const float *)(tmp + (size_t)(y - s0) * w);
    for (size_t i = 0; i < 4 * w; i++)
        o[i] = c[i] * k->w[0];
    for (int t = 1; t <= k->r; t++) {
        const float kt = k->w[t];
        const float *up = (const float *)(tmp + (size_t)(clampi(y - t, 0, h - 1) - s0) * w);
        const float *dn = (const float *)(tmp + (size_t)(clampi(y + t, 0, h - 1) - s0) * w);
        for (size_t i = 0; i < 4 * w; i++)
            o[i] = o[i] + kt * (up[i] + dn[i]);
    }
}

/* Convolves input 0 with k horizontally then vertically, into the region's rows, with
   alpha as PF_ALPHA_* says. */
static int separable(const pf_stage_args *a, const kernel1d *k, int alpha)
{
    const pf_image *in = &a->in[0];
    const int w = in->width, h = in->height, r = k->r;
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y0 >= y1)
        return 0;
    /* Source rows the band reads, clamped: the rows beyond the image repeat the edge. */
    const int s0 = y0 - r < 0 ? 0 : y0 - r, s1 = y1 + r > h ? h : y1 + r;
    const int pm = alpha != PF_ALPHA_STRAIGHT && r > 0; /* radius 0 mixes nothing: a copy */
    const size_t need = (size_t)w * (size_t)(s1 - s0 + pm) * sizeof(pf_float4);
    if (!a->scratch || a->scratch_size < need)
        return scratch_fail(a, "scratch too small", need);
    pf_float4 *tmp = (pf_float4 *)a->scratch, *pm_row = tmp + (size_t)w * (size_t)(s1 - s0);

    int mixed = 0; /* some row read has an alpha other than 1 */
    for (int y = s0; y < s1; y++) {
        const pf_float4 *src = pf_image_row(in, y);
        if (pm)
            src = premultiplied_row(src, pm_row, w, &mixed);
        pf_float4 *t = tmp + (size_t)(y - s0) * (size_t)w;
        /* pixels r .. w-r-1 read no clamped tap: the vector loop; the rest per pixel */
        if (w > 2 * r)
            sep_row_h((const float *)src, (float *)t, 4 * r, 4 * (w - r), k);
        for (int x = 0; x < w; x++) {
            if (w > 2 * r && x == r) { /* done above: on to pixel w - r */
                x = w - r - 1;
                continue;
            }
            pf_float4 acc = f4_scale(src[x], k->w[0]);
            for (int i = 1; i <= r; i++)
                acc = f4_pair(acc, k->w[i], src[clampi(x - i, 0, w - 1)],
                              src[clampi(x + i, 0, w - 1)]);
            t[x] = acc;
        }
    }
    /* Where every row read is opaque every summed alpha is wsum, and c / alpha is
       c / wsum: the straight normalisation gives the same bits. A weight sum of 1 (a
       radius of 0) divides by 1: nothing to do. */
    const float wsum = weight_sum(k);
    for (int y = y0; y < y1; y++) {
        sep_row_v(tmp, (size_t)w, y, s0, h, (float *)pf_image_row(&a->out, y), k);
        if (wsum != 1.0f || (pm && mixed))
            normalise_row(pf_image_row(&a->out, y), w, wsum, pm && mixed);
    }
    return 0;
}

/* ---- gaussian, box, unsharp ------------------------------------------------------------ */

/* The radius, scratch size and run of a separable stage with kernel id_kernel and params
   pf_id_params (with an alpha field). */
#define SEPARABLE(id)                                                                              \
    static int id##_radius(const void *params)                                                     \
    {                                                                                              \
        return id##_kernel(params, NULL);                                                          \
    }                                                                                              \
    static size_t id##_scratch(const void *params, int width, int rows)                            \
    {                                                                                              \
        return separable_scratch(id##_kernel(params, NULL), width, rows);                          \
    }                                                                                              \
    static int id##_run(const pf_stage_args *a)                                                    \
    {                                                                                              \
        kernel1d k;                                                                                \
        id##_kernel(a->params, &k);                                                                \
        return separable(a, &k, ((const pf_##id##_params *)a->params)->alpha);                     \
    }

SEPARABLE(gaussian)
SEPARABLE(box)

/* unsharp's sigma is its struct's first field, as gaussian's: the same functions serve. */
_Static_assert(offsetof(pf_unsharp_params, sigma) == offsetof(pf_gaussian_params, sigma),
               "unsharp and gaussian share the sigma field");

static float sharpen(float v, float blurred, float amount, float threshold)
{
    float d = v - blurred;
    return PF_FABSF(d) > threshold ? v + amount * d : v;
}

static int unsharp_run(const pf_stage_args *a)
{
    const pf_unsharp_params *p = (const pf_unsharp_params *)a->params;
    kernel1d k; /* the blur lands in the output rows first */
    gaussian_kernel(a->params, &k);
    if (separable(a, &k, p->alpha) != 0)
        return -1;
    for (int y = a->region.y0; y < a->region.y1; y++) {
        const pf_float4 *src = pf_image_row(&a->in[0], y);
        pf_float4 *dst = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++) {
            pf_float4 s = src[x], b = dst[x];
            dst[x] = pf_f4(sharpen(s.x, b.x, p->amount, p->threshold),
                           sharpen(s.y, b.y, p->amount, p->threshold),
                           sharpen(s.z, b.z, p->amount, p->threshold), s.w);
        }
    }
    return 0;
}

/* ---- 3x3 stages: sobel, median3 ---------------------------------------------------------- */

static int radius_one(const void *params)
{
    return 1;
}

/* The 3x3 neighbourhood of (x, y), row-major from the top left, clamped to the edge. */
static void gather3x3(const pf_image *in, int x, int y, pf_float4 n[9])
{
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++)
            n[j * 3 + i] = pf_image_at_clamped(in, x + i - 1, y + j - 1);
}

/* Calls px(params, neighbourhood, centre) for every pixel of the region. */
static int run3x3(const pf_stage_args *a, pf_float4 (*px)(const void *, const pf_float4 *))
{
    pf_float4 n[9];
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *dst = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++) {
            gather3x3(&a->in[0], x, y, n);
            dst[x] = px(a->params, n);
        }
    }
    return 0;
}

/* run3x3's form of the per-pixel functions of filter3x3_ops.h */
static pf_float4 sobel_at(const void *params, const pf_float4 *n)
{
    return sobel_px((const pf_sobel_params *)params, n);
}

static pf_float4 median3_at(const void *params, const pf_float4 *n)
{
    return median3_px((const pf_median3_params *)params, n);
}

static int sobel_run(const pf_stage_args *a)
{
    return run3x3(a, sobel_at);
}

/* The pixels 1 .. w-2 of a row, whose neighbours need no clamping in x: the samples of
   a row are floats 4 apart per pixel, so each output float is the median of the same
   float index -4, 0, +4 in the rows above, at and below, an elementwise loop. */
FILTER_VECTOR_CLONES static void median3_inner(const float *restrict u, const float *restrict m,
                                               const float *restrict d, float *restrict o, int n)
{
    for (int k = 4; k < n - 4; k++)
        o[k] =
            median9(u[k - 4], u[k], u[k + 4], m[k - 4], m[k], m[k + 4], d[k - 4], d[k], d[k + 4]);
}

static int median3_run(const pf_stage_args *a)
{
    const pf_image *in = &a->in[0];
    int w = a->out.width, h = in->height;
    pf_float4 n[9];
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *dst = pf_image_row(&a->out, y);
        const float *u = (const float *)pf_image_row(in, y > 0 ? y - 1 : 0);
        const float *m = (const float *)pf_image_row(in, y);
        const float *d = (const float *)pf_image_row(in, y + 1 < h ? y + 1 : h - 1);
        median3_inner(u, m, d, (float *)dst, 4 * w);
        for (int x = 0; x<w; x += w - 1> 0 ? w - 1 : 1) { /* the first and last pixels */
            gather3x3(in, x, y, n);
            dst[x] = median3_at(a->params, n);
        }
    }
    return 0;
}

/* ---- Descriptors ----------------------------------------------------------------------- */

#define FLOAT_ROW(T, f, doc, d, lo, hi) PF_FLOAT_PARAM(T, f, d, lo, hi, doc)
#define SIGMA_ROW(T, doc)               FLOAT_ROW(T, sigma, doc, 1, 0, PF_GAUSSIAN_MAX_SIGMA)
#define ALPHA_ROW(T)                    PF_ENUM_PARAM(T, alpha, 0, alpha_modes, PF_ALPHA_DOC)

static const char *const alpha_modes[] = {PF_ALPHA_NAMES, NULL};

static const pf_param_desc gaussian_params[] = {
    SIGMA_ROW(pf_gaussian_params, "standard deviation in pixels; the radius is ceil(3 sigma), "
                                  "0 passes the image through"),
    ALPHA_ROW(pf_gaussian_params),
};
static const pf_param_desc box_params[] = {
    {"radius", "half size of the square: the mean is over (2 radius + 1)^2 pixels",
     PF_OFFSET(pf_box_params, radius), PF_PARAM_INT, .def = 1, .min = 0, .max = PF_BOX_MAX_RADIUS},
    ALPHA_ROW(pf_box_params),
};
static const pf_param_desc sobel_params[] = {
    FLOAT_ROW(pf_sobel_params, scale, "factor on the gradient magnitude", 1, 0, 1000),
};
static const pf_param_desc unsharp_params[] = {
    SIGMA_ROW(pf_unsharp_params, "standard deviation in pixels of the blur the detail is "
                                 "taken against"),
    FLOAT_ROW(pf_unsharp_params, amount, "how much of the detail (in - blurred) to add", 1, 0, 10),
    FLOAT_ROW(pf_unsharp_params, threshold,
              "sharpen only where |in - blurred| exceeds this, per channel", 0, 0, 1),
    ALPHA_ROW(pf_unsharp_params),
};

/* CUDA launchers and device scratch sizes, in filter_cuda.cu (PF_CUDA: NULL without). */
int gaussian_cuda(const pf_stage_args *a);
int box_cuda(const pf_stage_args *a);
int sobel_cuda(const pf_stage_args *a);
int unsharp_cuda(const pf_stage_args *a);
int median3_cuda(const pf_stage_args *a);
size_t gaussian_cuda_scratch(const void *params, int width, int rows);
size_t box_cuda_scratch(const void *params, int width, int rows);

/* A stencil stage on one input, with its CUDA launcher id_cuda; the variadic part
   names its params (WITH_PARAMS) and its device scratch. */
#define STENCIL(id, doc_, radius_fn, scratch_fn, cost_, ...)                                       \
    static const pf_stage_desc id = {.size = PF_STAGE_DESC_SIZE,                                   \
                                     .name = #id,                                                  \
                                     .doc = doc_,                                                  \
                                     .kind = PF_STAGE_STENCIL,                                     \
                                     .n_inputs = 1,                                                \
                                     .cost = cost_,                                                \
                                     .radius = radius_fn,                                          \
                                     .scratch_bytes = scratch_fn,                                  \
                                     .run_cpu = id##_run,                                          \
                                     .run_cuda = PF_CUDA(id##_cuda),                               \
                                     __VA_ARGS__}
#define WITH_PARAMS(t) .params_size = sizeof(pf_##t##_params), PF_PARAMS(t##_params)
/* A 3x3 stage's per-pixel function in filter3x3_ops.h, for the engine's fused stencil
   kernels (pf_stage_desc.stencil_fn). */
#define FILTER3X3_FN(t)                                                                            \
    .stencil_fn = #t "_px", .params_type = "pf_" #t "_params", .point_source = pf_src_filter3x3_ops

/* A separable stage's taps function in filter3x3_ops.h (pf_stage_desc.separable_fn), for
   the engine's generated passes. */
#define SEPARABLE_FN(t, max)                                                                       \
    .separable_fn = #t "_sep", .separable_max = (max), .params_type = "pf_" #t "_params",          \
    .point_source = pf_src_filter3x3_ops

STENCIL(gaussian, "Gaussian blur (separable), clamped at the borders, premultiplied by default",
        gaussian_radius, gaussian_scratch, 8, WITH_PARAMS(gaussian),
        .cuda_scratch_bytes = PF_CUDA(gaussian_cuda_scratch),
        SEPARABLE_FN(gaussian, MAX_TAPS_RADIUS));
STENCIL(box,
        "Mean over a (2 radius + 1)^2 square (separable), clamped at the borders, premultiplied "
        "by default",
        box_radius, box_scratch, 8, WITH_PARAMS(box),
        .cuda_scratch_bytes = PF_CUDA(box_cuda_scratch), SEPARABLE_FN(box, PF_BOX_MAX_RADIUS));
STENCIL(sobel,
        "Sobel gradient magnitude per RGB channel, unnormalised (a step of 1 gives 4), on the "
        "stored values; alpha passes through",
        radius_one, NULL, 3, WITH_PARAMS(sobel), FILTER3X3_FN(sobel));
STENCIL(unsharp,
        "Unsharp mask on RGB: in + amount (in - gaussian(in)) where the detail "
        "exceeds the threshold, the blur premultiplied by default; alpha passes through",
        gaussian_radius, gaussian_scratch, 10, WITH_PARAMS(unsharp),
        .cuda_scratch_bytes = PF_CUDA(gaussian_cuda_scratch));
STENCIL(median3, "3x3 median per channel, alpha included, on the stored (straight) values",
        radius_one, NULL, 6, .params_size = 0, FILTER3X3_FN(median3));

static const pf_stage_desc *const filter_stages[] = {&gaussian, &box, &sobel, &unsharp, &median3};

PF_DEFINE_PLUGIN("filter", "1.0.0", "stencil filters: blur, edges, sharpening, median",
                 filter_stages)
