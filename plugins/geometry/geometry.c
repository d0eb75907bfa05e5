/* plugins/geometry/geometry.c: the geometry family, resample stages (resize, crop,
 * flip, rotate, pad).
 *
 * Each stage declares its output shape (failing with the sizes named when its params
 * do not fit the input) and computes exactly the output rows of its region from the
 * whole input. crop, flip, rotate and pad are pure coordinate maps and share one loop;
 * resize sums per-axis taps (bilinear, nearest, area, or a filter: the antialiased
 * triangle, Catmull-Rom, Mitchell, Lanczos-3, from geometry.h) in double, in a fixed order, so banded runs are bit-identical. resize and
 * rotate by any angle mix pixels, premultiplied by default (pf_acc4 in geometry.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/plugin.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "geometry.h"
#include "geometry_native.h"

static int shape_error(char *err, size_t err_size, const char *fmt, ...)
{
    if (err && err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Sets *out to w x h (rounded, at least 1) unless that is too large. */
static int set_shape(const char *stage, const pf_shape *in, double w, double h, pf_shape *out,
                     char *err, size_t err_size)
{
    w = floor(w + 0.5), h = floor(h + 0.5);
    w = w < 1 ? 1 : w, h = h < 1 ? 1 : h; /* NaN stays NaN, and fails below */
    if (!(w <= PF_GEOMETRY_MAX_SIDE && h <= PF_GEOMETRY_MAX_SIDE &&
          w * h <= PF_GEOMETRY_MAX_PIXELS))
        return shape_error(err, err_size,
                           "%s: a %.0fx%.0f output from the %dx%d input is too large (at most "
                           "%d pixels a side and %d in all)",
                           stage, w, h, in->width, in->height, PF_GEOMETRY_MAX_SIDE,
                           PF_GEOMETRY_MAX_PIXELS);
    out->width = (int)w;
    out->height = (int)h;
    return 0;
}

static int same_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                      size_t err_size)
{
    *out = *in;
    return 0;
}

/* ---- Coordinate maps: crop, flip, rotate, pad ------------------------------------------ */

/* Where output pixel (x, y) comes from in an input of w x h: 1 and (*sx, *sy), or 0
   when it lies outside the input (pad's border). */
typedef int (*map_fn)(const void *params, int w, int h, int x, int y, int *sx, int *sy);

/* Output pixel (x, y) by map, the definition: the mapped pixel, clamped, or fill. */
static pf_float4 mapped_px(const pf_stage_args *a, map_fn map, pf_float4 fill, int x, int y)
{
    int sx, sy;
    const pf_image *in = &a->in[0];
    return map(a->params, in->width, in->height, x, y, &sx, &sy) ? pf_image_at_clamped(in, sx, sy)
                                                                 : fill;
}

/* Every map here (crop, flip, the quarter turns, pad) is affine along an output row:
   (sx, sy) = (sx0 + x dx, sy0 + x dy). So a row asks map for its first, second and last
   pixels only, and copies pixels whose source lies inside the input straight from
   their row (a memcpy where the row is a plain run); pixels outside (pad's border), and
   any row where the three points are not on one line, take mapped_px: the same values
   as asking map for every pixel. */
static int run_mapped(const pf_stage_args *a, map_fn map, pf_float4 fill)
{
    const pf_image *in = &a->in[0];
    const int w = a->out.width, iw = in->width, ih = in->height;
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *dst = pf_image_row(&a->out, y);
        int sx0, sy0, sx1, sy1, sxl, syl;
        map(a->params, iw, ih, 0, y, &sx0, &sy0);
        map(a->params, iw, ih, 1, y, &sx1, &sy1);
        map(a->params, iw, ih, w - 1, y, &sxl, &syl);
        const long long dx = sx1 - sx0, dy = sy1 - sy0;
        if (w < 2 || sxl != sx0 + dx * (w - 1) || syl != sy0 + dy * (w - 1)) {
            for (int x = 0; x < w; x++)
                dst[x] = mapped_px(a, map, fill, x, y);
            continue;
        }
        int x = 0;
        if (dy == 0 && dx == 1 && sy0 >= 0 && sy0 < ih) { /* crop, pad: one run of a row */
            int lo = sx0 < 0 ? -sx0 : 0, hi = sx0 + w > iw ? iw - sx0 : w;
            for (; x < lo && x < w; x++)
                dst[x] = mapped_px(a, map, fill, x, y);
            if (hi > lo)
                memcpy(dst + lo, pf_image_row(in, sy0) + sx0 + lo, sizeof(pf_float4) * (hi - lo));
            x = hi > lo ? hi : x;
        }
        for (; x < w; x++) {
            long long sx = sx0 + dx * x, sy = sy0 + dy * x;
            dst[x] = sx >= 0 && sx < iw && sy >= 0 && sy < ih ? pf_image_row(in, (int)sy)[sx]
                                                              : mapped_px(a, map, fill, x, y);
        }
    }
    return 0;
}

/* rows_in of a map: the input rows that output rows r read, clamped as mapped_px reads.
   A map is affine along an output row, so a row's sources lie between those of its
   first and last pixels. */
static int mapped_rows(const void *params, map_fn map, const pf_shape *in, const pf_shape *out,
                       pf_region r, pf_region *rows)
{
    int lo = in->height, hi = -1;
    for (int y = r.y0; y < r.y1; y++)
        for (int e = 0; e < 2; e++) {
            int sx, sy;
            map(params, in->width, in->height, e ? out->width - 1 : 0, y, &sx, &sy);
            sy = sy < 0 ? 0 : sy >= in->height ? in->height - 1 : sy;
            lo = sy < lo ? sy : lo;
            hi = sy > hi ? sy : hi;
        }
    *rows = hi < lo ? (pf_region){0, 0} : (pf_region){lo, hi + 1};
    return 0;
}

#define MAPPED_ROWS(id)                                                                            \
    static int id##_rows_in(const void *params, const pf_shape *in, const pf_shape *out, int k,    \
                            pf_region r, pf_region *rows)                                          \
    {                                                                                              \
        (void)k;                                                                                   \
        return mapped_rows(params, id##_map, in, out, r, rows);                                    \
    }

#define MAPPED_RUN(id)                                                                             \
    static int id##_run(const pf_stage_args *a)                                                    \
    {                                                                                              \
        return run_mapped(a, id##_map, pf_f4(0, 0, 0, 0));                                         \
    }

static const char *const gravities[] = {PF_GRAVITY_NAMES, NULL};

static int pad_map(const void *params, int w, int h, int x, int y, int *sx, int *sy);

static const char *const crop_outside[] = {"error", "clamp", "pad", NULL};

static int crop_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                      size_t err_size)
{
    const pf_crop_params *p = (const pf_crop_params *)params;
    long long x, y, w, h;
    if (pf_crop_size(p, in->width, in->height, &x, &y, &w, &h) != 0)
        return shape_error(err, err_size,
                           "crop: the %lldx%lld rectangle at %lld,%lld (x %d, y %d, width %d, "
                           "height %d, width_pct %g, height_pct %g, gravity %s) is outside the "
                           "%dx%d input%s",
                           w, h, x, y, p->x, p->y, p->width, p->height, p->width_pct, p->height_pct,
                           gravities[p->gravity], in->width, in->height,
                           p->outside == PF_CROP_CLAMP
                               ? " and no part of it is left (outside clamp)"
                               : "; \"outside\": \"clamp\" cuts it to the input, \"pad\" fills "
                                 "the rest");
    return set_shape("crop", in, (double)w, (double)h, out, err, err_size);
}

/* crop is pad's map from its corner: output (x, y) is input (x + x0, y + y0), or the
   fill outside the input (outside pad only: the other rules keep the rectangle in). */
static int crop_run(const pf_stage_args *a)
{
    const pf_crop_params *p = (const pf_crop_params *)a->params;
    long long x0, y0;
    pf_crop_origin(p, a->in[0].width, a->in[0].height, a->out.width, a->out.height, &x0, &y0);
    pf_pad_params m = {.left = (int)-x0, .top = (int)-y0};
    pf_stage_args shifted = *a;
    shifted.params = &m;
    return run_mapped(&shifted, pad_map, pf_f4(p->color[0], p->color[1], p->color[2], p->color[3]));
}

static int crop_rows_in(const void *params, const pf_shape *in, const pf_shape *out, int k,
                        pf_region r, pf_region *rows)
{
    (void)k;
    long long x0, y0;
    pf_crop_origin((const pf_crop_params *)params, in->width, in->height, out->width, out->height,
                   &x0, &y0);
    pf_pad_params m = {.left = (int)-x0, .top = (int)-y0};
    return mapped_rows(&m, pad_map, in, out, r, rows);
}

static int flip_map(const void *params, int w, int h, int x, int y, int *sx, int *sy)
{
    int axis = ((const pf_flip_params *)params)->axis;
    *sx = axis == PF_FLIP_VERTICAL ? x : w - 1 - x;
    *sy = axis == PF_FLIP_HORIZONTAL ? y : h - 1 - y;
    return 1;
}
MAPPED_RUN(flip)
MAPPED_ROWS(flip)

static int rotate_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                        size_t err_size)
{
    const pf_rotate_params *p = (const pf_rotate_params *)params;
    if (p->degrees != 0) {
        double w = in->width, h = in->height;
        if (p->expand)
            pf_rotated_size(p->degrees, in->width, in->height, &w, &h);
        return set_shape("rotate", in, w, h, out, err, err_size);
    }
    int swap = p->angle != PF_ROTATE_180;
    out->width = swap ? in->height : in->width;
    out->height = swap ? in->width : in->height;
    return 0;
}

/* Clockwise: a quarter turn takes the input's top left corner to the output's top right. */
static int rotate_map(const void *params, int w, int h, int x, int y, int *sx, int *sy)
{
    switch (((const pf_rotate_params *)params)->angle) {
    case PF_ROTATE_90:
        *sx = y;
        *sy = h - 1 - x;
        break;
    case PF_ROTATE_270:
        *sx = w - 1 - y;
        *sy = x;
        break;
    default:
        *sx = w - 1 - x;
        *sy = h - 1 - y;
        break;
    }
    return 1;
}

/* Any angle: each output pixel centre turned back into the input, bilinear between the
   four nearest pixels, fill for those outside; in double, in this order, as on CUDA. */
static int rotate_any_run(const pf_stage_args *a)
{
    const pf_rotate_params *p = (const pf_rotate_params *)a->params;
    const pf_image *in = &a->in[0];
    const pf_float4 fill = pf_f4(p->fill[0], p->fill[1], p->fill[2], p->fill[3]);
    const int pm = p->alpha != PF_ALPHA_STRAIGHT;
    double s, c;
    pf_sincos_deg(p->degrees, &s, &c);
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *dst = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++) {
            double fx, fy;
            int x0, y0;
            pf_rotate_source(s, c, a->out.width, a->out.height, in->width, in->height, x, y, &x0,
                             &y0, &fx, &fy);
            pf_acc4 acc = {{0, 0, 0, 0}, 0};
            for (int k = 0; k < 4; k++) {
                int ix = x0 + (k & 1), iy = y0 + (k >> 1);
                double w = (k & 1 ? fx : 1.0 - fx) * (k >> 1 ? fy : 1.0 - fy);
                if (w == 0)
                    continue;
                pf_float4 v = ix >= 0 && ix < in->width && iy >= 0 && iy < in->height
                                  ? pf_image_row(in, iy)[ix]
                                  : fill;
                pf_acc4_add(&acc, pm, w, v.x, v.y, v.z, v.w);
            }
            dst[x] = pf_f4(pf_acc4_out(&acc, pm, 0), pf_acc4_out(&acc, pm, 1),
                           pf_acc4_out(&acc, pm, 2), pf_acc4_out(&acc, pm, 3));
        }
    }
    return 0;
}

/* Any angle reads the two rows around each pixel's source, the corners of the region
   bounding them (the map is affine); quarter and half turns are maps. */
static int rotate_rows_in(const void *params, const pf_shape *in, const pf_shape *out, int k,
                          pf_region r, pf_region *rows)
{
    (void)k;
    const pf_rotate_params *p = (const pf_rotate_params *)params;
    if (p->degrees == 0)
        return mapped_rows(params, rotate_map, in, out, r, rows);
    if (r.y1 <= r.y0) {
        *rows = (pf_region){0, 0};
        return 0;
    }
    double s, c;
    pf_sincos_deg(p->degrees, &s, &c);
    int lo = INT32_MAX, hi = INT32_MIN;
    for (int e = 0; e < 4; e++) {
        double fx, fy;
        int x0, y0;
        pf_rotate_source(s, c, out->width, out->height, in->width, in->height,
                         e & 1 ? out->width - 1 : 0, e & 2 ? r.y1 - 1 : r.y0, &x0, &y0, &fx, &fy);
        lo = y0 < lo ? y0 : lo;
        hi = y0 + 1 > hi ? y0 + 1 : hi;
    }
    lo = lo < 0 ? 0 : lo;
    hi = hi >= in->height ? in->height - 1 : hi;
    *rows = hi < lo ? (pf_region){0, 0} : (pf_region){lo, hi + 1};
    return 0;
}

static int rotate_run(const pf_stage_args *a)
{
    if (((const pf_rotate_params *)a->params)->degrees != 0)
        return rotate_any_run(a);
    return run_mapped(a, rotate_map, pf_f4(0, 0, 0, 0));
}

static int pad_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                     size_t err_size)
{
    const pf_pad_params *p = (const pf_pad_params *)params;
    return set_shape("pad", in, (double)in->width + p->left + p->right,
                     (double)in->height + p->top + p->bottom, out, err, err_size);
}

static int pad_map(const void *params, int w, int h, int x, int y, int *sx, int *sy)
{
    const pf_pad_params *p = (const pf_pad_params *)params;
    *sx = x - p->left;
    *sy = y - p->top;
    return *sx >= 0 && *sx < w && *sy >= 0 && *sy < h;
}

MAPPED_ROWS(pad)

static int pad_run(const pf_stage_args *a)
{
    const float *c = ((const pf_pad_params *)a->params)->color;
    return run_mapped(a, pad_map, pf_f4(c[0], c[1], c[2], c[3]));
}

/* ---- resize -------------------------------------------------------------------------------- */

/* round_half_up(num / den) for num >= 0, den > 0, in integers. */
static double div_round(long long num, long long den)
{
    return (double)((2 * num + den) / (2 * den));
}

static int resize_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                        size_t err_size)
{
    const pf_resize_params *p = (const pf_resize_params *)params;
    double w = p->width, h = p->height;
    if (p->width > 0 && p->height > 0 && p->fit != PF_FIT_STRETCH) {
        /* The factor is width / in width or height / in height, whichever is smaller
           (inside) or larger (cover): compared exactly, in integers. The side that sets
           it is exactly the box's; the other is derived as a width or height alone
           derives it, one product and one division, so an exact half stays a half and
           rounds up (in width * (height / in height) rounded twice: 11x22 into 100x15
           made 7.4999999, 7 wide where "height": 15 makes 8); in integers, exactly. */
        const long long bx = (long long)p->width * in->height,
                        by = (long long)p->height * in->width;
        const int by_width = p->fit == PF_FIT_INSIDE ? bx <= by : bx >= by;
        if (by_width)
            w = p->width, h = div_round((long long)in->height * p->width, in->width);
        else
            w = div_round((long long)in->width * p->height, in->height), h = p->height;
        if (p->shrink_only && (by_width ? p->width > in->width : p->height > in->height))
            w = in->width, h = in->height; /* a factor above 1: kept at 1 */
        return set_shape("resize", in, w, h, out, err, err_size);
    }
    if (p->width > 0 && p->height <= 0)
        h = div_round((long long)in->height * p->width, in->width);
    else if (p->height > 0 && p->width <= 0)
        w = div_round((long long)in->width * p->height, in->height);
    else if (p->width <= 0 && p->height <= 0) {
        w = pf_decimal_size(in->width, p->scale, 0);
        h = pf_decimal_size(in->height, p->scale, 0);
    }
    if (p->shrink_only && (w > in->width || h > in->height)) { /* both grow together */
        w = fmin(w, in->width);
        h = fmin(h, in->height);
    }
    return set_shape("resize", in, w, h, out, err, err_size);
}

/* The horizontal taps of every output column, computed once per band (they were
   computed per pixel of every row): column x has taps tap[x * stride + i], i < count[x]. */
typedef struct xtaps {
    int stride;
    int *count, *idx;
    double *w;
} xtaps;

/* The taps of outputs [o0, o1) of an axis, output o at entry o - o0. */
static int xtaps_make(xtaps *t, int mode, int aa, int n_in, int n_out, int o0, int o1)
{
    t->stride = 1;
    for (int x = o0; x < o1; x++) {
        pf_span s = pf_axis_span(mode, aa, n_in, n_out, x);
        t->stride = s.count > t->stride ? s.count : t->stride;
    }
    size_t n = (size_t)(o1 - o0) * (size_t)t->stride;
    t->count = malloc(sizeof(int) * (size_t)(o1 - o0));
    t->idx = malloc(sizeof(int) * n);
    t->w = malloc(sizeof(double) * n);
    if (!t->count || !t->idx || !t->w)
        return -1;
    for (int x = o0; x < o1; x++) {
        pf_span s = pf_axis_span(mode, aa, n_in, n_out, x);
        const size_t e = (size_t)(x - o0);
        t->count[e] = s.count;
        for (int i = 0; i < s.count; i++)
            t->w[e * t->stride + i] = pf_span_weight(&s, i, &t->idx[e * t->stride + i]);
    }
    return 0;
}

static void xtaps_free(xtaps *t)
{
    free(t->count);
    free(t->idx);
    free(t->w);
}

/* The sum of output column x's taps over the ny rows iys, weighted wys: straight, or
   premultiplied (pm); unless opaque is NULL, *opaque says whether every pixel read has
   alpha 1. */
static inline pf_acc4 resize_sum(const pf_image *in, const int *iys, const double *wys, int ny,
                                 const xtaps *tx, int x, int pm, int *opaque)
{
    const int *ixs = tx->idx + (size_t)x * tx->stride;
    const double *wxs = tx->w + (size_t)x * tx->stride;
    pf_acc4 acc = {{0, 0, 0, 0}, 0};
    int all = 1;
    for (int j = 0; j < ny; j++) {
        const double wy = wys[j];
        const pf_float4 *src = pf_image_row(in, iys[j]);
        for (int i = 0; i < tx->count[x]; i++) {
            double w = wy * wxs[i];
            if (w == 0) /* so that an exact tap is exact even beside an inf */
                continue;
            const pf_float4 v = src[ixs[i]];
            if (opaque)
                all &= v.w == 1.0f;
            pf_acc4_add(&acc, pm, w, v.x, v.y, v.z, v.w);
        }
    }
    if (opaque)
        *opaque = all;
    return acc;
}

/* Whether every pixel that output column x's taps read with a weight other than 0 has
   alpha 1 (resize_sum's test, without the sums). */
static inline int resize_opaque(const pf_image *in, const int *iys, const double *wys, int ny,
                                const xtaps *tx, int x)
{
    const int *ixs = tx->idx + (size_t)x * tx->stride;
    const double *wxs = tx->w + (size_t)x * tx->stride;
    for (int j = 0; j < ny; j++) {
        const pf_float4 *src = pf_image_row(in, iys[j]);
        for (int i = 0; i < tx->count[x]; i++)
            if (wys[j] * wxs[i] != 0 && src[ixs[i]].w != 1.0f)
                return 0;
    }
    return 1;
}

/* resize_sum straight (pm 0): the same products and sums in the same order, two channels
   a step in SSE2's double lanes (each lane the scalar's operation, rounded alike: the
   build does not contract a multiply and an add). */
static inline pf_acc4 resize_sum_straight(const pf_image *in, const int *iys, const double *wys,
                                          int ny, const xtaps *tx, int x)
{
#if defined(__SSE2__)
    const int *ixs = tx->idx + (size_t)x * tx->stride;
    const double *wxs = tx->w + (size_t)x * tx->stride;
    __m128d lo = _mm_setzero_pd(), hi = _mm_setzero_pd();
    for (int j = 0; j < ny; j++) {
        const double wy = wys[j];
        const pf_float4 *src = pf_image_row(in, iys[j]);
        for (int i = 0; i < tx->count[x]; i++) {
            const double w = wy * wxs[i];
            if (w == 0) /* so that an exact tap is exact even beside an inf */
                continue;
            const __m128 v = _mm_loadu_ps((const float *)&src[ixs[i]]);
            const __m128d wv = _mm_set1_pd(w);
            lo = _mm_add_pd(lo, _mm_mul_pd(wv, _mm_cvtps_pd(v)));
            hi = _mm_add_pd(hi, _mm_mul_pd(wv, _mm_cvtps_pd(_mm_movehl_ps(v, v))));
        }
    }
    pf_acc4 acc = {{0, 0, 0, 0}, 0};
    _mm_storeu_pd(acc.v, lo);
    _mm_storeu_pd(acc.v + 2, hi);
    return acc;
#else
    return resize_sum(in, iys, wys, ny, tx, x, 0, NULL);
#endif
}

/* Whether every pixel of the rows iys that have a weight other than 0 has alpha 1: then
   every pixel resize_opaque would test is opaque, and the whole output row sums
   straight. */
static int resize_rows_opaque(const pf_image *in, const int *iys, const double *wys, int ny)
{
    for (int j = 0; j < ny; j++) {
        if (wys[j] == 0)
            continue;
        const float *s = (const float *)pf_image_row(in, iys[j]);
        for (int x0 = 0; x0 < in->width; x0 += 64) { /* out at the first chunk with one */
            const int x1 = in->width - x0 > 64 ? x0 + 64 : in->width;
            int all = 1;
            for (int x = x0; x < x1; x++)
                all &= s[4 * x + 3] == 1.0f;
            if (!all)
                return 0;
        }
    }
    return 1;
}

/* A row of output pixels summed straight (resize_sum_straight, pf_acc4_out without
   division): the plain form, and with AVX where the CPU has it, a pixel's four channels
   in one register of doubles (each lane the scalar's operations in the scalar's order;
   AVX has no FMA and the build contracts nothing). */
static void resize_row_straight_plain(const pf_image *in, const int *iys, const double *wys, int ny,
                                      const xtaps *tx, pf_float4 *dst, int w)
{
    for (int x = 0; x < w; x++) {
        const pf_acc4 acc = resize_sum_straight(in, iys, wys, ny, tx, x);
        dst[x] = pf_f4(pf_acc4_out(&acc, 0, 0), pf_acc4_out(&acc, 0, 1), pf_acc4_out(&acc, 0, 2),
                       pf_acc4_out(&acc, 0, 3));
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RESIZE_AVX 1

__attribute__((target("avx"))) static void
resize_row_straight_avx(const pf_image *in, const int *iys, const double *wys, int ny,
                        const xtaps *tx, pf_float4 *dst, int w)
{
    for (int x = 0; x < w; x++) {
        const int *ixs = tx->idx + (size_t)x * tx->stride;
        const double *wxs = tx->w + (size_t)x * tx->stride;
        const int nx = tx->count[x];
        __m256d acc = _mm256_setzero_pd();
        for (int j = 0; j < ny; j++) {
            const double wy = wys[j];
            const float *src = (const float *)pf_image_row(in, iys[j]);
            for (int i = 0; i < nx; i++) {
                const double wt = wy * wxs[i];
                if (wt == 0) /* so that an exact tap is exact even beside an inf */
                    continue;
                const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(src + 4 * (size_t)ixs[i]));
                acc = _mm256_add_pd(acc, _mm256_mul_pd(_mm256_set1_pd(wt), v));
            }
        }
        _mm_storeu_ps((float *)&dst[x], _mm256_cvtpd_ps(acc));
    }
}
#else
#define RESIZE_AVX 0
#endif

static void resize_row_straight(const pf_image *in, const int *iys, const double *wys, int ny,
                                const xtaps *tx, pf_float4 *dst, int w)
{
#if RESIZE_AVX
    if (__builtin_cpu_supports("avx")) {
        resize_row_straight_avx(in, iys, wys, ny, tx, dst, w);
        return;
    }
#endif
    resize_row_straight_plain(in, iys, wys, ny, tx, dst, w);
}

static int resize_run(const pf_stage_args *a)
{
    const pf_resize_params *p = (const pf_resize_params *)a->params;
    const pf_image *in = &a->in[0];
    /* nearest copies one pixel: nothing to premultiply */
    const int pm = p->alpha != PF_ALPHA_STRAIGHT && p->mode != PF_RESIZE_NEAREST;
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0 || a->out.width <= 0)
        return 0;
    /* the taps of every column and of the band's rows, computed once */
    xtaps tx = {0}, ty = {0};
    if (xtaps_make(&tx, p->mode, p->antialias, in->width, a->out.width, 0, a->out.width) != 0 ||
        xtaps_make(&ty, p->mode, p->antialias, in->height, a->out.height, y0, y1) != 0) {
        xtaps_free(&tx);
        xtaps_free(&ty);
        if (a->err && a->err_size)
            snprintf(a->err, a->err_size,
                     "resize: out of memory for the taps of %d columns and %d rows", a->out.width,
                     y1 - y0);
        return -1;
    }
    for (int y = y0; y < y1; y++) {
        const size_t e = (size_t)(y - y0) * (size_t)ty.stride;
        const int *iys = ty.idx + e, ny = ty.count[y - y0];
        const double *wys = ty.w + e;
        pf_float4 *dst = pf_image_row(&a->out, y);
        if (!pm || resize_rows_opaque(in, iys, wys, ny)) {
            resize_row_straight(in, iys, wys, ny, &tx, dst, a->out.width);
            continue;
        }
        for (int x = 0; x < a->out.width; x++) {
            /* Where every pixel read is opaque, premultiplied sums are the straight sums
               and their colour is not divided (pf_acc4_out): only a pixel that reads some
               alpha other than 1 is summed premultiplied. */
            const int div = pm && !resize_opaque(in, iys, wys, ny, &tx, x);
            const pf_acc4 acc = div ? resize_sum(in, iys, wys, ny, &tx, x, 1, NULL)
                                    : resize_sum_straight(in, iys, wys, ny, &tx, x);
            dst[x] = pf_f4(pf_acc4_out(&acc, div, 0), pf_acc4_out(&acc, div, 1),
                           pf_acc4_out(&acc, div, 2), pf_acc4_out(&acc, div, 3));
        }
    }
    xtaps_free(&tx);
    xtaps_free(&ty);
    return 0;
}

/* The rows every tap of output rows r reads, clamped to the input as resize_run reads. */
static int resize_rows_in(const void *params, const pf_shape *in, const pf_shape *out, int k,
                          pf_region r, pf_region *rows)
{
    (void)k;
    const pf_resize_params *p = (const pf_resize_params *)params;
    int lo = in->height, hi = -1;
    for (int y = r.y0; y < r.y1; y++) {
        pf_span sp = pf_axis_span(p->mode, p->antialias, in->height, out->height, y);
        for (int i = 0; i<sp.count; i += sp.count - 1> 0 ? sp.count - 1 : 1) {
            int idx;
            pf_span_weight(&sp, i, &idx);
            lo = idx < lo ? idx : lo;
            hi = idx > hi ? idx : hi;
        }
    }
    *rows = hi < lo ? (pf_region){0, 0} : (pf_region){lo, hi + 1};
    return 0;
}

/* ---- Descriptors ------------------------------------------------------------------------- */

#define INT_ROW(T, f, doc, d, hi) PF_INT_PARAM(T, f, d, 0, hi, doc)
#define ENUM_ROW(T, f, doc, names)                                                                 \
    {                                                                                              \
#f, doc, PF_OFFSET(T, f), PF_PARAM_ENUM, .enum_names = names                               \
    }
#define SIDE PF_GEOMETRY_MAX_SIDE

static const char *const resize_modes[] = {"bilinear", "nearest",  "area", "bicubic",
                                           "mitchell", "lanczos3", NULL};
static const char *const alpha_modes[] = {PF_ALPHA_NAMES, NULL};
static const char *const flip_axes[] = {"horizontal", "vertical", "both", NULL};
static const char *const rotate_angles[] = {"90", "180", "270", NULL};
static const char *const fits[] = {"stretch", "inside", "cover", NULL};
static const float rotate_fill_def[4] = {0, 0, 0, 0};
static const float pad_color_def[4] = {0, 0, 0, 1};

static const pf_param_desc resize_params[] = {
    INT_ROW(pf_resize_params, width,
            "output width in pixels; 0: from height keeping the aspect ratio, or from scale", 0,
            SIDE),
    INT_ROW(pf_resize_params, height,
            "output height in pixels; 0: from width keeping the aspect ratio, or from scale", 0,
            SIDE),
    {"scale", "size factor, used when width and height are both 0",
     PF_OFFSET(pf_resize_params, scale), PF_PARAM_FLOAT, .def = 1, .min = 1.0 / 1024, .max = 64},
    ENUM_ROW(pf_resize_params, mode,
             "bilinear (pixel centres aligned), nearest, area (exact box average when "
             "shrinking, bilinear when enlarging), bicubic (Catmull-Rom), mitchell "
             "(Mitchell-Netravali, B = C = 1/3) or lanczos3; the last three widen their kernel "
             "by the shrink factor (antialiased, as Pillow and vips)",
             resize_modes),
    ENUM_ROW(pf_resize_params, fit,
             "with width and height both given: stretch (exactly that size), inside (the "
             "largest size within the box keeping the aspect ratio) or cover (the smallest "
             "size covering it, keeping the aspect ratio)",
             fits),
    PF_BOOL_PARAM(pf_resize_params, shrink_only, 0,
                  "never enlarge: an input already within the size keeps its own"),
    PF_ENUM_PARAM(pf_resize_params, alpha, 0, alpha_modes,
                  "every mode but nearest: " PF_ALPHA_DOC "; nearest copies pixels as they are"),
    PF_BOOL_PARAM(pf_resize_params, antialias, 0,
                  "bilinear: where an axis shrinks, widen the triangle to the shrink factor "
                  "(Pillow's BILINEAR), so every input pixel counts and thumbnails do not alias"),
};
static const pf_param_desc crop_params[] = {
    PF_INT_PARAM(pf_crop_params, x, 0, -SIDE, SIDE,
                 "left edge of the kept rectangle; with a gravity, columns inward from it"),
    PF_INT_PARAM(pf_crop_params, y, 0, -SIDE, SIDE,
                 "top edge of the kept rectangle; with a gravity, rows inward from it"),
    INT_ROW(pf_crop_params, width,
            "width kept; 0: width_pct, else up to the right edge (with a gravity: all)", 0, SIDE),
    INT_ROW(pf_crop_params, height,
            "height kept; 0: height_pct, else up to the bottom edge (with a gravity: all)", 0,
            SIDE),
    ENUM_ROW(pf_crop_params, gravity,
             "where the rectangle sits: none (at x, y) or center, top, bottom, left, right, "
             "top-left, top-right, bottom-left, bottom-right, with x and y moving it inward",
             gravities),
    PF_FLOAT_PARAM(pf_crop_params, width_pct, 0, 0, 100,
                   "width kept in percent of the input's, when width is 0 (0: unused)"),
    PF_FLOAT_PARAM(pf_crop_params, height_pct, 0, 0, 100,
                   "height kept in percent of the input's, when height is 0 (0: unused)"),
    ENUM_ROW(pf_crop_params, outside,
             "a rectangle reaching outside the input: error, clamp (the part of it inside "
             "the input, so a thumbnail box larger than its input keeps the input) or pad "
             "(the output is the whole rectangle, color outside the input)",
             crop_outside),
    {"color", "with outside pad: RGBA of the pixels outside the input",
     PF_OFFSET(pf_crop_params, color), PF_PARAM_FLOAT_ARRAY, .min = PF_NO_MIN, .max = PF_NO_MAX,
     .count = 4, .def_array = pad_color_def},
};
static const pf_param_desc flip_params[] = {
    ENUM_ROW(pf_flip_params, axis, "horizontal (mirror left-right), vertical (upside down) or both",
             flip_axes),
};
static const pf_param_desc rotate_params[] = {
    ENUM_ROW(pf_rotate_params, angle, "clockwise turn in degrees; 90 and 270 swap width and height",
             rotate_angles),
    PF_FLOAT_PARAM(pf_rotate_params, degrees, 0, -360, 360,
                   "any clockwise angle, bilinear (0: angle is used instead)"),
    PF_BOOL_PARAM(pf_rotate_params, expand, 1,
                  "with degrees: the output holds the whole turned input (else the input's size)"),
    {"fill", "with degrees: RGBA where no input pixel lands", PF_OFFSET(pf_rotate_params, fill),
     PF_PARAM_FLOAT_ARRAY, .min = PF_NO_MIN, .max = PF_NO_MAX, .count = 4,
     .def_array = rotate_fill_def},
    PF_ENUM_PARAM(pf_rotate_params, alpha, 0, alpha_modes,
                  "with degrees: " PF_ALPHA_DOC " (the fill takes part as a pixel)"),
};
static const pf_param_desc pad_params[] = {
    INT_ROW(pf_pad_params, left, "columns added on the left", 0, SIDE),
    INT_ROW(pf_pad_params, right, "columns added on the right", 0, SIDE),
    INT_ROW(pf_pad_params, top, "rows added at the top", 0, SIDE),
    INT_ROW(pf_pad_params, bottom, "rows added at the bottom", 0, SIDE),
    {"color", "RGBA of the added pixels", PF_OFFSET(pf_pad_params, color), PF_PARAM_FLOAT_ARRAY,
     .min = PF_NO_MIN, .max = PF_NO_MAX, .count = 4, .def_array = pad_color_def},
};

/* CUDA launchers, in geometry_cuda.cu (PF_CUDA: NULL without); none needs scratch. */
int resize_cuda(const pf_stage_args *a);
int crop_cuda(const pf_stage_args *a);
int flip_cuda(const pf_stage_args *a);
int rotate_cuda(const pf_stage_args *a);
int pad_cuda(const pf_stage_args *a);

/* A resample stage on one input, with params struct pf_<id>_params and table id_params,
   and its CUDA launcher id_cuda. */
#define RESAMPLE(id, doc_, shape_fn, cost_)                                                        \
    static const pf_stage_desc id = {.size = PF_STAGE_DESC_SIZE,                                   \
                                     .name = #id,                                                  \
                                     .doc = doc_,                                                  \
                                     .kind = PF_STAGE_RESAMPLE,                                    \
                                     .n_inputs = 1,                                                \
                                     .cost = cost_,                                                \
                                     .params_size = sizeof(pf_##id##_params),                      \
                                     PF_PARAMS(id##_params),                                       \
                                     .shape = shape_fn,                                            \
                                     .run_cpu = id##_run,                                          \
                                     .run_cuda = PF_CUDA(id##_cuda),                               \
                                     .native_ok = id##_native_ok,                                  \
                                     .run_native = id##_native,                                    \
                                     .rows_in = id##_rows_in}

RESAMPLE(resize,
         "Resize to a given size, into or over a box keeping the aspect ratio, or by a "
         "factor, optionally never enlarging: bilinear (antialiased or not), nearest, area, "
         "bicubic, mitchell or lanczos3; premultiplied alpha by default",
         resize_shape, 4);
RESAMPLE(crop,
         "Keep a rectangle of the input, in pixels or percent, at a position or a gravity; "
         "one reaching outside fails, or is cut to the input, or padded",
         crop_shape, 1);
RESAMPLE(flip, "Mirror horizontally, vertically or both", same_shape, 1);
RESAMPLE(rotate,
         "Rotate clockwise by a quarter, half or three quarter turn, or by any angle "
         "(bilinear, premultiplied by default, with a fill colour, the output expanded to "
         "hold it or not)",
         rotate_shape, 1);
RESAMPLE(pad, "Add borders of a constant color around the input", pad_shape, 1);

static const pf_stage_desc *const geometry_stages[] = {&resize, &crop, &flip, &rotate, &pad};

PF_DEFINE_PLUGIN("geometry", "1.0.0", "resampling: resize, crop, flip, rotate, pad",
                 geometry_stages)
