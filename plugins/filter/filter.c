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
#include "filter_rows.h"

extern const char pf_src_filter3x3_ops[]; /* kernels/point/filter3x3_ops.h, for NVRTC */

#define MAX_TAPS_RADIUS FILTER_MAX_TAPS_RADIUS

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

/* Row src premultiplied into pm, or src itself when every alpha in it is 1 (where the
   premultiplied values are the same); *mixed is set when it was not. The row loops, this
   one's and the passes', are filter_rows.c's. */
static const pf_float4 *premultiplied_row(const pf_float4 *src, pf_float4 *pm, int w, int *mixed)
{
    if (filter_row_opaque(src, w))
        return src;
    *mixed = 1;
    filter_premultiply_row(src, pm, w);
    return pm;
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
            filter_sep_row_h((const float *)src, (float *)t, 4 * r, 4 * (w - r), k);
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
    const int norm = pm && mixed    ? FILTER_NORM_PM
                     : wsum != 1.0f ? FILTER_NORM_STRAIGHT
                                    : FILTER_NORM_NONE;
    const float *rows[2 * MAX_TAPS_RADIUS + 1]; /* the row, then above and below per tap */
    for (int y = y0; y < y1; y++) {
        rows[0] = (const float *)(tmp + (size_t)(y - s0) * (size_t)w);
        for (int t = 1; t <= r; t++) {
            rows[2 * t - 1] =
                (const float *)(tmp + (size_t)(clampi(y - t, 0, h - 1) - s0) * (size_t)w);
            rows[2 * t] = (const float *)(tmp + (size_t)(clampi(y + t, 0, h - 1) - s0) * (size_t)w);
        }
        filter_sep_row_v(rows, (float *)pf_image_row(&a->out, y), 4 * (size_t)w, k, norm, wsum);
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

static int unsharp_run(const pf_stage_args *a)
{
    const pf_unsharp_params *p = (const pf_unsharp_params *)a->params;
    kernel1d k; /* the blur lands in the output rows first */
    gaussian_kernel(a->params, &k);
    if (separable(a, &k, p->alpha) != 0)
        return -1;
    for (int y = a->region.y0; y < a->region.y1; y++)
        filter_sharpen_row(pf_image_row(&a->in[0], y), pf_image_row(&a->out, y), a->out.width,
                           p->amount, p->threshold);
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

/* run3x3's form of the per-pixel functions of filter3x3_ops.h */
static pf_float4 sobel_at(const void *params, const pf_float4 *n)
{
    return sobel_px((const pf_sobel_params *)params, n);
}

static pf_float4 median3_at(const void *params, const pf_float4 *n)
{
    return median3_px((const pf_median3_params *)params, n);
}

/* A 3x3 stage over the region: the pixels 1 .. w-2 of a row, whose neighbours need no
   clamping in x, by its row loop (filter_rows.c: the samples of a row are floats 4 apart
   per pixel, so each output float is a function of the same float index -4, 0, +4 in the
   rows above, at and below, an elementwise loop); the first and last pixels by px on
   their clamped neighbourhood. */
typedef void (*inner3x3_fn)(const void *params, const float *u, const float *m, const float *d,
                            float *o, int n);

static int run3x3(const pf_stage_args *a, inner3x3_fn inner,
                  pf_float4 (*px)(const void *, const pf_float4 *))
{
    const pf_image *in = &a->in[0];
    int w = a->out.width, h = in->height;
    pf_float4 n[9];
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *dst = pf_image_row(&a->out, y);
        const float *u = (const float *)pf_image_row(in, y > 0 ? y - 1 : 0);
        const float *m = (const float *)pf_image_row(in, y);
        const float *d = (const float *)pf_image_row(in, y + 1 < h ? y + 1 : h - 1);
        inner(a->params, u, m, d, (float *)dst, 4 * w);
        for (int x = 0; x<w; x += w - 1> 0 ? w - 1 : 1) {
            gather3x3(in, x, y, n);
            dst[x] = px(a->params, n);
        }
    }
    return 0;
}

static void sobel_inner(const void *params, const float *u, const float *m, const float *d,
                        float *o, int n)
{
    filter_sobel_inner(u, m, d, o, n, ((const pf_sobel_params *)params)->scale);
}

static void median3_inner(const void *params, const float *u, const float *m, const float *d,
                          float *o, int n)
{
    filter_median3_inner(u, m, d, o, n);
}

static int sobel_run(const pf_stage_args *a)
{
    return run3x3(a, sobel_inner, sobel_at);
}

static int median3_run(const pf_stage_args *a)
{
    return run3x3(a, median3_inner, median3_at);
}

/* median3 on the frames' own codes (run_native): the engine's load of an 8- or 16-bit
   code is monotone and makes no NaN, so the median of the loaded values is the load of
   the median code, which the store gives back: the float path's bytes, without its
   float image. The first and last pixels of a row take their clamped neighbourhood. */
static int median3_native_ok(const void *params)
{
    (void)params;
    return 1;
}

#define MEDIAN3_ROWS(T, inner)                                                                     \
    for (int y = a->region.y0; y < a->region.y1; y++) {                                            \
        const T *rows[3];                                                                          \
        for (int j = 0; j < 3; j++) {                                                              \
            int yy = y + j - 1 < 0 ? 0 : y + j - 1 >= h ? h - 1 : y + j - 1;                       \
            rows[j] = (const T *)((const char *)a->in + (size_t)yy * a->in_pitch);                 \
        }                                                                                          \
        T *o = (T *)((char *)a->out + (size_t)y * a->out_pitch);                                   \
        inner(rows[0], rows[1], rows[2], o, w *ch, ch);                                            \
        for (int x = 0; x<w; x += w - 1> 0 ? w - 1 : 1)                                            \
            for (int c = 0; c < ch; c++) {                                                         \
                T v[9];                                                                            \
                for (int j = 0; j < 9; j++) {                                                      \
                    int xx = x + j % 3 - 1;                                                        \
                    xx = xx < 0 ? 0 : xx >= w ? w - 1 : xx;                                        \
                    v[j] = rows[j / 3][xx * ch + c];                                               \
                }                                                                                  \
                for (int i = 1; i < 9; i++) /* insertion sort: nine values */                      \
                    for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {                               \
                        T t = v[k];                                                                \
                        v[k] = v[k - 1], v[k - 1] = t;                                             \
                    }                                                                              \
                o[x * ch + c] = v[4];                                                              \
            }                                                                                      \
    }

static int median3_native(const pf_native_args *a)
{
    const int w = a->in_width, h = a->in_height, ch = a->channels;
    if (a->sample == 0)
        MEDIAN3_ROWS(uint8_t, filter_median3_codes8)
    else if (a->sample == 1)
        MEDIAN3_ROWS(uint16_t, filter_median3_codes16)
    else {
        snprintf(a->err, a->err_size, "median3: run_native on float samples");
        return -1;
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
        radius_one, NULL, 6, .params_size = 0, FILTER3X3_FN(median3),
        .native_ok = median3_native_ok, .run_native = median3_native);

static const pf_stage_desc *const filter_stages[] = {&gaussian, &box, &sobel, &unsharp, &median3};

PF_DEFINE_PLUGIN("filter", "1.0.0", "stencil filters: blur, edges, sharpening, median",
                 filter_stages)
