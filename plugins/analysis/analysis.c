/* plugins/analysis/analysis.c: the analysis family, reduce stages (histogram, colsum,
 * rowsum, stats).
 *
 * Each stage fills one partial per band of input rows and folds the partials, in band
 * order, into a table with the columns r, g, b, a. histogram, colsum and rowsum add
 * into a partial shaped like their table, so combining is a sum; stats keeps count,
 * mean and M2 per band (a two-pass mean and sum of squared deviations within the
 * band) and merges bands with Chan's parallel formula, which stays accurate where a
 * sum of squares would cancel. Everything accumulates in double. histogram (here), colsum,
 * rowsum and stats (analysis_native.c) also read 8- and 16-bit frames in their own format,
 * giving the same partials.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/plugin.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "analysis.h"
#include "analysis_native.h"

static const char *const rgba_columns[] = {"r", "g", "b", "a", NULL};

static void channels(pf_float4 v, float c[4])
{
    memcpy(c, &v, sizeof(float[4]));
}

static int table_rows(pf_shape *out, int rows)
{
    out->width = 4;
    out->height = rows;
    return 0;
}

/* ---- Tables that are sums: histogram, colsum, rowsum --------------------------------- */

/* Adds pixel (x, y), of value v, into t, a table-shaped partial. */
typedef void (*accum_fn)(const void *params, double *t, int x, int y, pf_float4 v);

static int run_accum(const pf_stage_args *a, accum_fn add)
{
    const pf_image *in = &a->in[0];
    for (int y = a->region.y0; y < a->region.y1; y++) {
        const pf_float4 *src = pf_image_row(in, y);
        for (int x = 0; x < in->width; x++)
            add(a->params, a->partial, x, y, src[x]);
    }
    return 0;
}

/* For a stage id with id_shape and id_add: its partial length (the table's size), its
   run (accumulate the band) and its combine (sum the partials, in band order). */
#define SUM_TABLE_LEN(id)                                                                          \
    static size_t id##_len(const void *params, const pf_shape *in)                                 \
    {                                                                                              \
        pf_shape t;                                                                                \
        id##_shape(params, in, &t, NULL, 0);                                                       \
        return (size_t)t.width * (size_t)t.height;                                                 \
    }                                                                                              \
    static void id##_combine(const void *params, const pf_shape *in, const double *partials,       \
                             int n, double *result)                                                \
    {                                                                                              \
        sum_partials(partials, n, id##_len(params, in), result);                                   \
    }
#define SUM_TABLE(id)                                                                              \
    SUM_TABLE_LEN(id)                                                                              \
    static int id##_run(const pf_stage_args *a)                                                    \
    {                                                                                              \
        return run_accum(a, id##_add);                                                             \
    }

static void sum_partials(const double *partials, int n, size_t len, double *result)
{
    memset(result, 0, len * sizeof(double));
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < len; i++)
            result[i] += partials[(size_t)b * len + i];
}

static int bins_of(const void *params)
{
    int bins = ((const pf_histogram_params *)params)->bins;
    return bins < 2 ? 2 : (bins > PF_HISTOGRAM_MAX_BINS ? PF_HISTOGRAM_MAX_BINS : bins);
}

static int histogram_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                           size_t err_size)
{
    return table_rows(out, bins_of(params));
}

/* The bin of v: floor(v * bins), clamped to [0, bins). A value that is the float of a
   16-bit code k / 65535 (every u8 and u16 sample loads as one: 8-bit codes are
   257 k / 65535) bins as that exact fraction, floor(k * bins / 65535) in integers: the
   float itself can sit on the other side of a bin edge (the code 65408 loads as exactly
   65409 / 65536, so 65536 bins put it one bin up; 1 / 65535 times 65535 rounds below
   1). So one bin per code value puts code k in bin k, for 8 and 16 bits alike. */
static int histogram_bin(float v, int bins)
{
    if (v >= 0.0f && v <= 1.0f) {
        long k = lrintf(v * 65535.0f);
        if ((float)k / 65535.0f == v) {
            long b = k * (long)bins / 65535;
            return b >= bins ? bins - 1 : (int)b;
        }
    }
    double b = floor((double)v * bins); /* in double: no overflow for inf or 1e30 */
    return b < 0 ? 0 : (b >= bins ? bins - 1 : (int)b);
}

static void histogram_add(const void *params, double *t, int x, int y, pf_float4 v)
{
    const int bins = bins_of(params);
    float c[4];
    channels(v, c);
    for (int k = 0; k < 4; k++) {
        if (isnan(c[k]))
            continue;
        t[(size_t)histogram_bin(c[k], bins) * 4 + (size_t)k] += 1;
    }
}
SUM_TABLE_LEN(histogram)

/* histogram_bin, each step cheaper and the same bin: (float)k / 65535.0f as k times
   1 / 65535 in double, rounded to float. The two agree for every k <= 65535: k / 65535
   lies at least 2^-24 / 65535 of itself away from any point halfway between two floats
   (an odd number over 65535 2^n is never such a point), far beyond the double product's
   error of a few 2^-53. */
static inline int histogram_bin_fast(float v, int bins)
{
    if (v >= 0.0f && v <= 1.0f) {
#if defined(__SSE__)
        long k = _mm_cvt_ss2si(_mm_set_ss(v * 65535.0f)); /* lrintf: the current rounding */
#else
        long k = lrintf(v * 65535.0f);
#endif
        if ((float)((double)k * (1.0 / 65535.0)) == v) {
            long b = k * (long)bins / 65535;
            return b >= bins ? bins - 1 : (int)b;
        }
    }
    double b = floor((double)v * bins);
    return b < 0 ? 0 : (b >= bins ? bins - 1 : (int)b);
}

/* The float path: a band's samples counted in integers (up to 256 bins; the counts of a
   band of at most 2^30 pixels fit), in four sets by column so that neighbours of one
   value do not wait on each other's increment, then added to the partial: the same sums
   as adding 1 a sample (integers, exact in double). More bins add to the partial
   directly. */
static int histogram_run(const pf_stage_args *a)
{
    const int bins = bins_of(a->params);
    const pf_image *in = &a->in[0];
    uint32_t n[4][4 * 256];
    if (bins > 256)
        return run_accum(a, histogram_add);
    memset(n, 0, sizeof n);
    for (int y = a->region.y0; y < a->region.y1; y++) {
        const float *src = (const float *)pf_image_row(in, y);
        for (int i = 0; i < 4 * in->width; i++) {
            const float v = src[i];
            if (!isnan(v))
                n[(i >> 2) & 3][histogram_bin_fast(v, bins) * 4 + (i & 3)]++;
        }
    }
    for (int i = 0; i < 4 * bins; i++)
        a->partial[i] += (double)n[0][i] + n[1][i] + n[2][i] + n[3][i];
    return 0;
}

/* In the frame's own format (run_native, 8- and 16-bit frames): each band counts its
   samples by code, then adds each code's count to the bin of the float the engine loads
   that code as (k / max, the same division, so the same bin) and of the channel that
   float lands in (gray is r, g and b; a missing alpha is 1). The float path adds 1 per
   sample into the same doubles; counts are integers, exact in double either way, so
   the partials are the same numbers. */
static int histogram_native_ok(const void *params)
{
    return 1;
}

static int histogram_native(const pf_native_args *a)
{
    const int bins = bins_of(a->params), ci = a->channels, w = a->in_width;
    const int codes = a->sample == 0 ? 256 : a->sample == 1 ? 65536 : 0;
    const float max = a->sample == 0 ? 255.0f : 65535.0f;
    if (!codes || ci < 1 || ci > 4) {
        snprintf(a->err, a->err_size, "histogram: no native path for sample type %d x%d", a->sample,
                 ci);
        return -1;
    }
    /* 8-bit samples are counted by code, 16-bit ones by bin: code k's float k / 65535 is
       binned by its exact fraction (histogram_bin), floor(k bins / 65535), which the
       count computes in integers; a band then adds bins, not 65536 codes a channel. The
       counts on the stack where they fit (4 KB). */
    const int by_bin = a->sample == 1, slots = by_bin ? bins : codes;
    uint32_t small[4 * 256];
    uint32_t *count = (size_t)slots * (size_t)ci <= sizeof small / sizeof small[0]
                          ? small
                          : calloc((size_t)slots * (size_t)ci, sizeof *count);
    if (!count) {
        snprintf(a->err, a->err_size, "histogram: out of memory for %d counts", slots * ci);
        return -1;
    }
    /* rows at a time whose samples fit a 32-bit count (2^31 samples: more rows than an
       int holds for a narrow image, so capped by the band) */
    const size_t fit = ((size_t)1 << 31) / ((size_t)w * (size_t)ci);
    const int band = a->region.y1 - a->region.y0;
    const int step = fit < 1 ? 1 : fit < (size_t)band ? (int)fit : band > 0 ? band : 1;
    for (int y0 = a->region.y0; y0 < a->region.y1; y0 += step) {
        int y1 = a->region.y1 - y0 > step ? y0 + step : a->region.y1;
        memset(count, 0, sizeof *count * (size_t)slots * (size_t)ci);
        for (int y = y0; y < y1; y++) {
            const char *row = (const char *)a->in + (size_t)y * a->in_pitch;
            if (a->sample == 0 && (ci == 4 || ci == 3)) {
                /* one pass over the pixels, the channels' counts apart: increments of
                   one count follow each other less often (a run of one value in a
                   channel no longer waits on its own last store four times a pixel) */
                const uint8_t *p = (const uint8_t *)row;
                uint32_t *n0 = count, *n1 = count + 256, *n2 = count + 512, *n3 = count + 768;
                if (ci == 4)
                    for (int x = 0; x < w; x++, p += 4)
                        n0[p[0]]++, n1[p[1]]++, n2[p[2]]++, n3[p[3]]++;
                else
                    for (int x = 0; x < w; x++, p += 3)
                        n0[p[0]]++, n1[p[1]]++, n2[p[2]]++;
                continue;
            }
            for (int c = 0; c < ci; c++) {
                uint32_t *n = count + (size_t)c * (size_t)slots;
                if (a->sample == 0)
                    for (int x = 0; x < w; x++)
                        n[((const uint8_t *)row)[x * ci + c]]++;
                else
                    for (int x = 0; x < w; x++) {
                        uint32_t b = (uint32_t)(((const uint16_t *)row)[x * ci + c] *
                                                (uint64_t)bins / 65535u);
                        n[b < (uint32_t)bins ? b : (uint32_t)bins - 1]++;
                    }
            }
        }
        /* float channel c (r, g, b, a) comes from frame channel src[c]; -1: alpha 1 */
        const int src[4] = {0, ci >= 3 ? 1 : 0, ci >= 3 ? 2 : 0, ci == 4 ? 3 : ci == 2 ? 1 : -1};
        for (int c = 0; c < 4; c++) {
            if (src[c] < 0) {
                a->partial[(size_t)histogram_bin(1.0f, bins) * 4 + 3] +=
                    (double)(y1 - y0) * (double)w;
                continue;
            }
            const uint32_t *n = count + (size_t)src[c] * (size_t)slots;
            if (by_bin)
                for (int k = 0; k < bins; k++)
                    a->partial[(size_t)k * 4 + (size_t)c] += n[k];
            else
                for (int k = 0; k < codes; k++)
                    if (n[k])
                        a->partial[(size_t)histogram_bin((float)k / max, bins) * 4 + (size_t)c] +=
                            n[k];
        }
    }
    if (count != small)
        free(count);
    return 0;
}

/* colsum and rowsum: a table row per image column (row), of the sums along it. A
   rowsum band fills only its own rows of the table; the others stay 0 and add nothing. */
#define LINE_SUMS(id, coord, extent)                                                               \
    static int id##_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,        \
                          size_t err_size)                                                         \
    {                                                                                              \
        return table_rows(out, in->extent);                                                        \
    }                                                                                              \
    static void id##_add(const void *params, double *t, int x, int y, pf_float4 v)                 \
    {                                                                                              \
        double *r = t + (size_t)(coord)*4;                                                         \
        r[0] += v.x, r[1] += v.y, r[2] += v.z, r[3] += v.w;                                        \
    }                                                                                              \
    SUM_TABLE(id)

LINE_SUMS(colsum, x, width)
LINE_SUMS(rowsum, y, height)

/* ---- stats ------------------------------------------------------------------------------ */

/* A band's partial: ST_* (analysis_native.h) per channel. */

static int stats_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                       size_t err_size)
{
    return table_rows(out, PF_STATS_ROWS);
}

static size_t stats_len(const void *params, const pf_shape *in)
{
    return 4 * ST_FIELDS;
}

static int stats_run(const pf_stage_args *a)
{
    const pf_image *in = &a->in[0];
    double n[4] = {0}, sum[4] = {0}, m2[4] = {0}, mn[4], mx[4], mean[4];
    float c[4];
    for (int k = 0; k < 4; k++)
        mn[k] = INFINITY, mx[k] = -INFINITY;
    for (int y = a->region.y0; y < a->region.y1; y++)
        for (int x = 0; x < in->width; x++) {
            channels(pf_image_row(in, y)[x], c);
            for (int k = 0; k < 4; k++)
                if (!isnan(c[k])) {
                    n[k] += 1;
                    sum[k] += c[k];
                    mn[k] = c[k] < mn[k] ? c[k] : mn[k];
                    mx[k] = c[k] > mx[k] ? c[k] : mx[k];
                }
        }
    for (int k = 0; k < 4; k++)
        mean[k] = n[k] > 0 ? sum[k] / n[k] : 0;
    for (int y = a->region.y0; y < a->region.y1; y++)
        for (int x = 0; x < in->width; x++) {
            channels(pf_image_row(in, y)[x], c);
            for (int k = 0; k < 4; k++)
                if (!isnan(c[k]))
                    m2[k] += (c[k] - mean[k]) * (c[k] - mean[k]);
        }
    for (int k = 0; k < 4; k++) {
        double *q = a->partial + k * ST_FIELDS;
        if (n[k] > 0) {
            q[ST_N] = n[k];
            q[ST_MEAN] = mean[k];
            q[ST_M2] = m2[k];
            q[ST_MIN] = mn[k];
            q[ST_MAX] = mx[k];
        }
    }
    return 0;
}

static void stats_combine(const void *params, const pf_shape *in, const double *partials,
                          int n_partials, double *result)
{
    for (int k = 0; k < 4; k++) {
        double n = 0, mean = 0, m2 = 0, mn = NAN, mx = NAN;
        for (int b = 0; b < n_partials; b++) {
            const double *q = partials + (size_t)b * 4 * ST_FIELDS + (size_t)k * ST_FIELDS;
            double nb = q[ST_N];
            if (nb == 0)
                continue;
            if (n == 0) {
                mean = q[ST_MEAN], m2 = q[ST_M2], mn = q[ST_MIN], mx = q[ST_MAX];
            } else { /* Chan, Golub and LeVeque */
                double d = q[ST_MEAN] - mean;
                mean += d * nb / (n + nb);
                m2 += q[ST_M2] + d * d * n * nb / (n + nb);
                mn = q[ST_MIN] < mn ? q[ST_MIN] : mn;
                mx = q[ST_MAX] > mx ? q[ST_MAX] : mx;
            }
            n += nb;
        }
        result[PF_STATS_MIN * 4 + k] = mn;
        result[PF_STATS_MAX * 4 + k] = mx;
        result[PF_STATS_MEAN * 4 + k] = n > 0 ? mean : NAN;
        result[PF_STATS_STDDEV * 4 + k] = n > 0 ? sqrt(m2 / n) : NAN;
    }
}

static const char *stats_row_name(const void *params, int row)
{
    static const char *const names[PF_STATS_ROWS] = {"min", "max", "mean", "stddev"};
    return row >= 0 && row < PF_STATS_ROWS ? names[row] : NULL;
}

/* ---- Descriptors ---------------------------------------------------------------------------- */

static const pf_param_desc histogram_params[] = {
    {"bins", "number of bins over [0, 1]; values outside count in the end bins, NaN nowhere",
     PF_OFFSET(pf_histogram_params, bins), PF_PARAM_INT, .def = 256, .min = 2,
     .max = PF_HISTOGRAM_MAX_BINS},
};

/* CUDA launchers and device scratch sizes, in analysis_cuda.cu (PF_CUDA: NULL without). */
int histogram_cuda(const pf_stage_args *a);
int colsum_cuda(const pf_stage_args *a);
int rowsum_cuda(const pf_stage_args *a);
int stats_cuda(const pf_stage_args *a);
size_t colsum_cuda_scratch(const void *params, int width, int rows);
size_t stats_cuda_scratch(const void *params, int width, int rows);

/* A reduce stage on one input over id_shape, id_len, id_run, id_combine and the CUDA
   launcher id_cuda, with columns r, g, b, a; the variadic part adds params, row names
   and device scratch. */
#define REDUCE(id, doc_, cost_, ...)                                                               \
    static const pf_stage_desc id = {.size = PF_STAGE_DESC_SIZE,                                   \
                                     .name = #id,                                                  \
                                     .doc = doc_,                                                  \
                                     .kind = PF_STAGE_REDUCE,                                      \
                                     .n_inputs = 1,                                                \
                                     .cost = cost_,                                                \
                                     .shape = id##_shape,                                          \
                                     .partial_len = id##_len,                                      \
                                     .run_cpu = id##_run,                                          \
                                     .combine = id##_combine,                                      \
                                     .run_cuda = PF_CUDA(id##_cuda),                               \
                                     .columns = rgba_columns,                                      \
                                     __VA_ARGS__}

REDUCE(histogram, "Per-channel histogram of RGBA over [0, 1]: bins rows of counts", 2,
       .params_size = sizeof(pf_histogram_params), PF_PARAMS(histogram_params),
       .native_ok = histogram_native_ok, .run_native = histogram_native);
/* colsum, rowsum and stats also read 8- and 16-bit frames as they are (analysis_native.c) */
#define NATIVE(id) .native_ok = analysis_native_ok, .run_native = id##_native
REDUCE(colsum, "Per-column sums of RGBA: one row per image column", 1, .params_size = 0,
       .cuda_scratch_bytes = PF_CUDA(colsum_cuda_scratch), .reduce_sum = PF_REDUCE_SUM_COLUMNS,
       NATIVE(colsum));
REDUCE(rowsum, "Per-row sums of RGBA: one row per image row", 1, .params_size = 0,
       .reduce_sum = PF_REDUCE_SUM_ROWS, NATIVE(rowsum));
REDUCE(stats, "Min, max, mean and population standard deviation of RGBA, NaN ignored", 2,
       .params_size = 0, .row_name = stats_row_name,
       .cuda_scratch_bytes = PF_CUDA(stats_cuda_scratch), NATIVE(stats));

static const pf_stage_desc *const analysis_stages[] = {&histogram, &colsum, &rowsum, &stats};

PF_DEFINE_PLUGIN("analysis", "1.0.0", "reductions: histogram, column and row sums, statistics",
                 analysis_stages)
