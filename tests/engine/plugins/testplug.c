/* tests/engine/plugins/testplug.c: the plugins test_plugin_load loads, one source built once
 * per case with -DTP_CASE=<case> (see tests/engine/CMakeLists.txt). Each bad case gets
 * exactly one thing wrong, so a refusal can only be for that reason.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Each case uses only some of the pieces below. */
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-const-variable"

#include "pipefuse/plugin.h"

/* The cases, as numbers so that #if can tell them apart. */
#define TP_GOOD         1 /* a point stage with a param, and an 8-input point stage */
#define TP_OLDER_MINOR  2 /* ABI minor below the engine's (or equal when that is 0) */
#define TP_ABI_MAJOR    3 /* built for ABI 2.0 */
#define TP_NEWER_MINOR  4 /* built for ABI 1.(engine minor + 1) */
#define TP_NO_ENTRY     5 /* exports no pf_plugin_entry */
#define TP_NULL_ENTRY   6 /* pf_plugin_entry returns NULL */
#define TP_DUP          7 /* built twice: both define stage tp_dup */
#define TP_BAD_DEFAULT  8 /* a default outside its declared range */
#define TP_BAD_OFFSET   9 /* a param field beyond params_size */
#define TP_NO_POINT_ROW 10
#define TP_NO_RADIUS    11
#define TP_SHORT        12 /* stage structs from an older SDK: size ends before some fields */
#define TP_TINY         13 /* a stage struct too small to hold even the common fields */
#define TP_SWAPPED      14 /* a range with min > max (ABI 1.1: refused; TP_ABI_1_0: unbounded) */
#define TP_RADIUS       15 /* a stencil whose radius is its int param r (TP_RADIUS_DEF) */
#define TP_COLOUR       16 /* a point stage whose output needs colour (out_channels 3) */
#define TP_BAD_ARRAY    17 /* an array default whose element [2] is out of range */
#define TP_REDUCE_SUM   18 /* a reduce of a 1x1 table declaring reduce_sum TP_RSUM */
#define TP_RSUM_POINT   19 /* a point stage declaring reduce_sum */
#define TP_MANY_FAULTS  20 /* errors: no inputs, a default out of range, out_channels 5 */
#define TP_ERR_FILL     21 /* a stencil and a resample that fail with err filled, unterminated */
#define TP_SIZES                                                                                   \
    22            /* stages asking for absurd scratch or partials, and tables whose
                              columns or row names fall short */
#define TP_LOG 23 /* logs through host->log at its entry and from every band it runs */
#define TP_LYING                                                                                   \
    24 /* n_stages 2 for one stage whose pointer ends a page that the next does not follow;
          with TP_BAD_PTR, n_stages 3 and the second pointer into that unmapped page */
#define TP_OVERSIZE                                                                                \
    25 /* a stage descriptor whose .size claims the whole struct while only its first TP_KEEP
          bytes lie before an unmapped page (a plugin built against a smaller struct) */

#ifndef TP_CASE
#error "build with -DTP_CASE=<case>"
#endif

/* ---- Ops shared by the cases --------------------------------------------------------- */

typedef struct tp_gain_params {
    float gain;
} tp_gain_params;

/* RGBA * gain */
PF_POINT_FN pf_float4 tp_gain(const tp_gain_params *p, const pf_float4 *in, pf_pos pos)
{
    return pf_f4(in[0].x * p->gain, in[0].y * p->gain, in[0].z * p->gain, in[0].w * p->gain);
}
PF_POINT_ROW(tp_gain, tp_gain_params)

/* The sum of eight inputs, channel by channel. */
PF_POINT_FN pf_float4 tp_sum8(const tp_gain_params *p, const pf_float4 *in, pf_pos pos)
{
    pf_float4 s = pf_f4(0, 0, 0, 0);
    for (int k = 0; k < 8; k++)
        s = pf_f4(s.x + in[k].x, s.y + in[k].y, s.z + in[k].z, s.w + in[k].w);
    return s;
}
PF_POINT_ROW(tp_sum8, tp_gain_params)

#ifndef TP_DEFAULT
#define TP_DEFAULT 1.0
#endif
#ifndef TP_OFFSET
#define TP_OFFSET offsetof(tp_gain_params, gain)
#endif

static const pf_param_desc tp_gain_table[] = {
    {"gain", "factor on all four channels", TP_OFFSET, PF_PARAM_FLOAT, .def = TP_DEFAULT, .min = 0,
     .max = 10},
};

#ifndef TP_STAGE_NAME
#define TP_STAGE_NAME "tp_stage"
#endif
#ifndef TP_PLUGIN_NAME
#define TP_PLUGIN_NAME "testplug"
#endif

/* min 10 above max 0: a swapped range */
static const pf_param_desc tp_swapped_table[] = {
    {"gain", "factor on all four channels", offsetof(tp_gain_params, gain), PF_PARAM_FLOAT,
     .def = 1, .min = 10, .max = 0},
};

typedef struct tp_radius_params {
    int r;
} tp_radius_params;
#ifndef TP_RADIUS_DEF
#define TP_RADIUS_DEF 1
#endif
static const pf_param_desc tp_radius_table[] = {
    PF_INT_PARAM(tp_radius_params, r, TP_RADIUS_DEF, PF_NO_MIN, PF_NO_MAX, "the radius"),
};
static int tp_param_radius(const void *params)
{
    return ((const tp_radius_params *)params)->r;
}

/* A point stage without NVRTC source (CPU only, which is all these tests need): struct
   size, stage name, n_in inputs and row function (NULL or fn##_row). */
#define TP_POINT(size_, sname, n_in, row)                                                          \
    .size = size_, .name = sname, .kind = PF_STAGE_POINT, .n_inputs = n_in,                        \
    .params_size = sizeof(tp_gain_params), PF_PARAMS(tp_gain_table), .point_row = row

/* ---- Reduce and stencil pieces (TP_SHORT, TP_NO_RADIUS) ------------------------------ */

static int tp_copy_run(const pf_stage_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++)
        for (int x = 0; x < a->out.width; x++)
            pf_image_row(&a->out, y)[x] = pf_image_row(&a->in[0], y)[x];
    return 0;
}

/* one row, one column: the number of pixels */
static int tp_count_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                          size_t err_size)
{
    out->width = 1;
    out->height = 1;
    return 0;
}
static size_t tp_count_len(const void *params, const pf_shape *in)
{
    return 1;
}
static int tp_count_run(const pf_stage_args *a)
{
    a->partial[0] += (double)(a->region.y1 - a->region.y0) * a->in[0].width;
    return 0;
}
static void tp_count_combine(const void *params, const pf_shape *in, const double *partials, int n,
                             double *result)
{
    result[0] = 0;
    for (int b = 0; b < n; b++)
        result[0] += partials[b];
}
/* A reduce stage counting pixels: struct size and stage name. */
#define TP_COUNT(size_, sname)                                                                     \
    .size = size_, .name = sname, .kind = PF_STAGE_REDUCE, .n_inputs = 1, .shape = tp_count_shape, \
    .run_cpu = tp_count_run, .partial_len = tp_count_len, .combine = tp_count_combine

static int tp_radius(const void *params)
{
    return 7;
}
static const char *tp_row_name(const void *params, int row)
{
    return "garbage";
}
static const char *const tp_columns[] = {"garbage", NULL};

/* ---- The cases ----------------------------------------------------------------------- */

#if TP_CASE == TP_NO_ENTRY

PF_PLUGIN_EXPORT int tp_not_an_entry(void);
PF_PLUGIN_EXPORT int tp_not_an_entry(void)
{
    return 42;
}

#elif TP_CASE == TP_NULL_ENTRY

PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host);
PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host)
{
    (void)host;
    return NULL;
}

#else

#if TP_CASE == TP_GOOD || TP_CASE == TP_OLDER_MINOR || TP_CASE == TP_ABI_MAJOR ||                  \
    TP_CASE == TP_NEWER_MINOR || TP_CASE == TP_BAD_DEFAULT || TP_CASE == TP_BAD_OFFSET
static const pf_stage_desc tp_stage = {TP_POINT(PF_STAGE_DESC_SIZE, TP_STAGE_NAME, 1, tp_gain_row),
                                       .doc = "multiplies by gain"};
#if TP_CASE == TP_GOOD
static const pf_stage_desc tp_stage8 = {TP_POINT(PF_STAGE_DESC_SIZE, "tp_sum8", 8, tp_sum8_row),
                                        .doc = "sum of eight inputs"};
static const pf_stage_desc *const tp_stages[] = {&tp_stage, &tp_stage8};
#else
static const pf_stage_desc *const tp_stages[] = {&tp_stage};
#endif

#elif TP_CASE == TP_DUP
static const pf_stage_desc tp_stage = {TP_POINT(PF_STAGE_DESC_SIZE, "tp_dup", 1, tp_gain_row)};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_NO_POINT_ROW
static const pf_stage_desc tp_stage = {TP_POINT(PF_STAGE_DESC_SIZE, "tp_norow", 1, NULL)};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_NO_RADIUS
static const pf_stage_desc tp_stage = {.size = PF_STAGE_DESC_SIZE,
                                       .name = "tp_noradius",
                                       .kind = PF_STAGE_STENCIL,
                                       .n_inputs = 1,
                                       .run_cpu = tp_copy_run};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_SHORT
/* What an older plugin's memory looks like past its structs' end is anything: here,
   non-NULL pointers that the engine must not read. A point stage from before
   point_cuda, and a reduce stage from before columns and row_name. */
static const pf_stage_desc tp_short_point = {
    TP_POINT(offsetof(pf_stage_desc, point_cuda), "tp_short_point", 1, tp_gain_row),
    .point_cuda = tp_copy_run, .radius = tp_radius, .run_cpu = tp_copy_run,
    .run_cuda = tp_copy_run};
static const pf_stage_desc tp_short_reduce = {
    TP_COUNT(offsetof(pf_stage_desc, columns), "tp_short_reduce"), .columns = tp_columns,
    .row_name = tp_row_name};
static const pf_stage_desc *const tp_stages[] = {&tp_short_point, &tp_short_reduce};

#elif TP_CASE == TP_SWAPPED
static const pf_stage_desc tp_stage = {.size = PF_STAGE_DESC_SIZE,
                                       .name = "tp_swapped",
                                       .kind = PF_STAGE_POINT,
                                       .n_inputs = 1,
                                       .params_size = sizeof(tp_gain_params),
                                       PF_PARAMS(tp_swapped_table),
                                       .point_row = tp_gain_row};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_RADIUS
static const pf_stage_desc tp_stage = {.size = PF_STAGE_DESC_SIZE,
                                       .name = TP_STAGE_NAME,
                                       .kind = PF_STAGE_STENCIL,
                                       .n_inputs = 1,
                                       .params_size = sizeof(tp_radius_params),
                                       PF_PARAMS(tp_radius_table),
                                       .radius = tp_param_radius,
                                       .run_cpu = tp_copy_run};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_BAD_ARRAY
typedef struct tp_array_params {
    float v[3];
} tp_array_params;
static const float tp_array_def[3] = {0.5f, 1.0f, 20.0f};
static const pf_param_desc tp_array_table[] = {
    PF_FLOAT_ARRAY_PARAM(tp_array_params, v, tp_array_def, 0, 10, "three values")};
static const pf_stage_desc tp_stage = {.size = PF_STAGE_DESC_SIZE,
                                       .name = "tp_bad_array",
                                       .kind = PF_STAGE_POINT,
                                       .n_inputs = 1,
                                       .params_size = sizeof(tp_array_params),
                                       PF_PARAMS(tp_array_table),
                                       .point_row = tp_gain_row};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_COLOUR
static const pf_stage_desc tp_stage = {TP_POINT(PF_STAGE_DESC_SIZE, "tp_sepia", 1, tp_gain_row),
                                       .out_channels = 3};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_REDUCE_SUM
/* TP_RSUM 3 is no sum the engine knows (refused); a sum by columns is a table of 4
   columns and a row per input column, not 1x1 (a fault: the engine loads it and runs the
   stage's own code). */
static const pf_stage_desc tp_stage = {TP_COUNT(PF_STAGE_DESC_SIZE, TP_STAGE_NAME),
                                       .reduce_sum = TP_RSUM};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_RSUM_POINT
static const pf_stage_desc tp_stage = {TP_POINT(PF_STAGE_DESC_SIZE, TP_STAGE_NAME, 1, tp_gain_row),
                                       .reduce_sum = PF_REDUCE_SUM_COLUMNS};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_MANY_FAULTS
/* In the order the loader meets them: no inputs, the default (TP_DEFAULT), out_channels. */
static const pf_stage_desc tp_stage = {TP_POINT(PF_STAGE_DESC_SIZE, TP_STAGE_NAME, 0, tp_gain_row),
                                       .out_channels = 5};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_ERR_FILL
/* Both fail, writing 'E' into every byte of err, the terminator's too: the engine must
   read no further than err_size. The resample fails only for inputs 7 pixels wide. */
static int tp_fill_run(const pf_stage_args *a)
{
    memset(a->err, 'E', a->err_size);
    return 1;
}
static int tp_fill_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                         size_t err_size)
{
    *out = *in;
    if (in->width != 7)
        return 0;
    memset(err, 'E', err_size);
    return 1;
}
static const pf_stage_desc tp_fill_stencil = {.size = PF_STAGE_DESC_SIZE,
                                              .name = "tp_fill_stencil",
                                              .kind = PF_STAGE_STENCIL,
                                              .n_inputs = 1,
                                              .radius = tp_radius,
                                              .run_cpu = tp_fill_run};
static const pf_stage_desc tp_fill_resample = {.size = PF_STAGE_DESC_SIZE,
                                               .name = "tp_fill_resample",
                                               .kind = PF_STAGE_RESAMPLE,
                                               .n_inputs = 1,
                                               .shape = tp_fill_shape,
                                               .run_cpu = tp_copy_run};
static const pf_stage_desc *const tp_stages[] = {&tp_fill_stencil, &tp_fill_resample};

#elif TP_CASE == TP_SIZES
/* tp_scratch asks scratch_bytes() for `bytes` (-1: SIZE_MAX, as a negative int cast to
   size_t gives) and fills it; tp_partial's partial_len() is 1 (bytes -1: 2^63 doubles,
   which times two bands wraps to 0); tp_cols has a 3x2 table with
   one column name; tp_rows a 1x2 table whose second row has no name. */
typedef struct tp_size_params {
    int bytes;
} tp_size_params;
static const pf_param_desc tp_size_table[] = {
    PF_INT_PARAM(tp_size_params, bytes, 64, -1, 1 << 20, "bytes asked for (-1: SIZE_MAX)"),
};
static size_t tp_size_of(const void *params)
{
    return (size_t)((const tp_size_params *)params)->bytes; /* -1: SIZE_MAX */
}
static size_t tp_scratch_bytes(const void *params, int width, int rows)
{
    return tp_size_of(params);
}
/* Docs: scratch is at least scratch_bytes() bytes. A stage would trust that; this one
   says so when it is not, rather than write past what it was given. */
static int tp_scratch_run(const pf_stage_args *a)
{
    size_t want = tp_size_of(a->params);
    if (!a->scratch || a->scratch_size < want) {
        snprintf(a->err, a->err_size, "given %zu bytes of scratch, asked for %zu", a->scratch_size,
                 want);
        return 1;
    }
    memset(a->scratch, 1, want);
    return tp_copy_run(a);
}
static int tp_zero_radius(const void *params)
{
    return 0;
}
static size_t tp_partial_len(const void *params, const pf_shape *in)
{
    return ((const tp_size_params *)params)->bytes < 0 ? (size_t)1 << 63 : 1;
}
static int tp_table_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                          size_t err_size)
{
    out->width = 3;
    out->height = 2;
    return 0;
}
static int tp_rows_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                         size_t err_size)
{
    out->width = 1;
    out->height = 2;
    return 0;
}
static void tp_table_combine(const void *params, const pf_shape *in, const double *partials, int n,
                             double *result)
{
    for (int i = 0; i < 6; i++)
        result[i] = i;
}
static void tp_rows_combine(const void *params, const pf_shape *in, const double *partials, int n,
                            double *result)
{
    result[0] = 0;
    result[1] = 1;
}
static const char *tp_row_or_null(const void *params, int row)
{
    return row == 0 ? "first" : NULL;
}
static const char *const tp_one_column[] = {"only", NULL};
static const pf_stage_desc tp_scratch = {.size = PF_STAGE_DESC_SIZE,
                                         .name = "tp_scratch",
                                         .kind = PF_STAGE_STENCIL,
                                         .n_inputs = 1,
                                         .params_size = sizeof(tp_size_params),
                                         PF_PARAMS(tp_size_table),
                                         .radius = tp_zero_radius,
                                         .scratch_bytes = tp_scratch_bytes,
                                         .run_cpu = tp_scratch_run};
/* A reduce stage of the pieces above (TP_COUNT's, with a table shape, partial length,
   combine, column names and row names of its own). */
#define TP_TABLE(sname, shape_, len_, combine_)                                                    \
    .size = PF_STAGE_DESC_SIZE, .name = sname, .kind = PF_STAGE_REDUCE, .n_inputs = 1,             \
    .shape = shape_, .run_cpu = tp_count_run, .partial_len = len_, .combine = combine_
static const pf_stage_desc tp_partial = {
    TP_TABLE("tp_partial", tp_count_shape, tp_partial_len, tp_count_combine),
    .params_size = sizeof(tp_size_params), PF_PARAMS(tp_size_table)};
static const pf_stage_desc tp_cols = {
    TP_TABLE("tp_cols", tp_table_shape, tp_count_len, tp_table_combine), .columns = tp_one_column};
static const pf_stage_desc tp_rows = {
    TP_TABLE("tp_rows", tp_rows_shape, tp_count_len, tp_rows_combine), .row_name = tp_row_or_null};
/* Names both rows unless its bytes param is 0: a param change that loses a row's name. */
static const char *tp_row_unless_zero(const void *params, int row)
{
    return row == 0 ? "first" : ((const tp_size_params *)params)->bytes != 0 ? "second" : NULL;
}
static const pf_stage_desc tp_rows_param = {
    TP_TABLE("tp_rows_param", tp_rows_shape, tp_count_len, tp_rows_combine),
    .row_name = tp_row_unless_zero, .params_size = sizeof(tp_size_params),
    PF_PARAMS(tp_size_table)};
static const pf_stage_desc *const tp_stages[] = {&tp_scratch, &tp_partial, &tp_cols, &tp_rows,
                                                 &tp_rows_param};

#elif TP_CASE == TP_LOG
static const pf_host_api *tp_host;
static int tp_log_radius(const void *params)
{
    return 0;
}
static int tp_log_run(const pf_stage_args *a)
{
    tp_host->log(1, "tp_log: ran a band");
    return tp_copy_run(a);
}
static const pf_stage_desc tp_log_stage = {.size = PF_STAGE_DESC_SIZE,
                                           .name = "tp_log",
                                           .kind = PF_STAGE_STENCIL,
                                           .n_inputs = 1,
                                           .radius = tp_log_radius,
                                           .run_cpu = tp_log_run};
static const pf_stage_desc *const tp_stages[] = {&tp_log_stage};

#elif TP_CASE == TP_TINY
static const pf_stage_desc tp_stage = {
    TP_POINT(offsetof(pf_stage_desc, params), "tp_tiny", 1, tp_gain_row)};
static const pf_stage_desc *const tp_stages[] = {&tp_stage};

#elif TP_CASE == TP_LYING
static const pf_stage_desc tp_stage = {TP_POINT(PF_STAGE_DESC_SIZE, "tp_lying", 1, tp_gain_row),
                                       .doc = "a stage of a plugin that miscounts them"};

#elif TP_CASE == TP_OVERSIZE
static const pf_stage_desc tp_stage = {TP_POINT(PF_STAGE_DESC_SIZE, TP_STAGE_NAME, 1, tp_gain_row),
                                       .doc = "a stage whose descriptor is shorter than it says"};

#else
#error "unknown TP_CASE"
#endif

#if defined(TP_ABI_1_0)
#define TP_ABI (1u << 16)
#elif TP_CASE == TP_ABI_MAJOR
#define TP_ABI (2u << 16)
#elif TP_CASE == TP_NEWER_MINOR
#define TP_ABI ((uint32_t)(PF_ABI_MAJOR << 16) | (PF_ABI_MINOR + 1))
#elif TP_CASE == TP_OLDER_MINOR
/* With an engine at minor 0 there is no older minor: this is then the same version. */
#define TP_ABI ((uint32_t)(PF_ABI_MAJOR << 16) | (PF_ABI_MINOR > 0 ? PF_ABI_MINOR - 1 : 0))
#else
#define TP_ABI PF_ABI_VERSION
#endif

PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host);
#if TP_CASE == TP_LYING
/* The stage list is the last words of a page whose next page is unmapped: what reading
   past a short array meets at worst. */
PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host)
{
    static pf_plugin_desc d;
    (void)host;
    long pg = sysconf(_SC_PAGESIZE);
    char *m =
        mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || munmap(m + pg, (size_t)pg) != 0)
        return NULL;
#ifdef TP_BAD_PTR
    const pf_stage_desc **slots = (const pf_stage_desc **)(m + pg) - 3;
    slots[0] = &tp_stage;
    slots[1] = (const pf_stage_desc *)(m + pg); /* a stage in the unmapped page */
    slots[2] = &tp_stage;
    int n = 3;
#else
    const pf_stage_desc **slots = (const pf_stage_desc **)(m + pg) - 1;
    slots[0] = &tp_stage;
    int n = 2; /* one more than the list holds */
#endif
    d = (pf_plugin_desc){sizeof(pf_plugin_desc),
                         TP_ABI,
                         TP_PLUGIN_NAME,
                         "0.0.1",
                         "test plugin",
                         (const pf_stage_desc *const *)slots,
                         n};
    return &d;
}
#elif TP_CASE == TP_OVERSIZE
/* The descriptor's first TP_KEEP bytes end a page whose next page is unmapped; its .size
   still says PF_STAGE_DESC_SIZE. */
PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host)
{
    static pf_plugin_desc d;
    static const pf_stage_desc *slots[1];
    (void)host;
    long pg = sysconf(_SC_PAGESIZE);
    char *m =
        mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || munmap(m + pg, (size_t)pg) != 0)
        return NULL;
    size_t keep = TP_KEEP;
    memcpy(m + pg - keep, &tp_stage, keep);
    slots[0] = (const pf_stage_desc *)(m + pg - keep);
    d = (pf_plugin_desc){
        sizeof(pf_plugin_desc), TP_ABI, TP_PLUGIN_NAME, "0.0.1", "test plugin", slots, 1};
    return &d;
}
#else
PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host)
{
    static const pf_plugin_desc d = {
        sizeof(pf_plugin_desc), TP_ABI,    TP_PLUGIN_NAME,       "0.0.1",
        "test plugin",          tp_stages, PF_COUNTOF(tp_stages)};
    (void)host;
#if TP_CASE == TP_LOG
    tp_host = host;
    host->log(0, "tp_log: loaded");
#endif
    return &d;
}
#endif

#endif
