/* pipefuse/plugin.h: the plugin SDK, the one header a stage author needs.
 *
 * A plugin is a shared library that exports exactly one symbol, pf_plugin_entry,
 * returning a versioned descriptor that lists its stages. Plugins never link
 * against the engine: what the engine offers reaches them through pf_host_api.
 *
 * ABI rules: PF_ABI_VERSION is major << 16 | minor. The engine loads a plugin when
 * the majors match and the plugin's minor is not newer than the engine's. Structs
 * carry their size and only ever grow at the end; the engine reads a field only when
 * the plugin's struct is large enough to hold it.
 *
 * Stage kinds, and what the engine plans from their declarations:
 *   point     out(x,y) = f(in0(x,y), in1(x,y), ..., params, position). Fusable.
 *             Written once in a header (see point.h); the descriptor carries its CPU
 *             row function, its source text for NVRTC and a slot for a precompiled
 *             CUDA kernel.
 *   stencil   out(x,y) depends on inputs within a declared radius. Same shape.
 *   resample  output shape differs (resize, crop, flip, rotate, pad).
 *   reduce    a small table (histogram, column sums, ...), computed as one partial
 *             per band of input rows and then combined, so that it can be split.
 * Every stencil and resample stage runs on a region: a band of output rows. Inputs
 * are always whole images; a stage clamps its own reads at the borders.
 */
#ifndef PIPEFUSE_PLUGIN_H
#define PIPEFUSE_PLUGIN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "pipefuse/point.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PF_ABI_MAJOR         1
#define PF_ABI_MINOR         6
#define PF_ABI_VERSION       ((uint32_t)((PF_ABI_MAJOR << 16) | PF_ABI_MINOR))
#define PF_PLUGIN_ENTRY_NAME "pf_plugin_entry"
#define PF_MAX_INPUTS        8
/* The largest halo a stencil may declare: radius() must return 0 to PF_MAX_RADIUS for
   every params set the stage accepts; the engine refuses params that make it return
   anything else (a check() can refuse them first, with a better message). */
#define PF_MAX_RADIUS 256

#if defined(_WIN32)
#define PF_PLUGIN_EXPORT __declspec(dllexport)
#else
#define PF_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- Images and regions ------------------------------------------------------- */

typedef struct pf_shape {
    int width, height;
} pf_shape;

/* A float32 RGBA image, host or device memory. pitch is in bytes, a multiple of 16. */
typedef struct pf_image {
    pf_float4 *data;
    int width, height;
    size_t pitch;
} pf_image;

/* Rows [y0, y1) of a stage's output (of its input, for reduce stages). */
typedef struct pf_region {
    int y0, y1;
} pf_region;

static inline pf_float4 *pf_image_row(const pf_image *im, int y)
{
    return (pf_float4 *)((char *)im->data + (size_t)y * im->pitch);
}

/* The pixel at (x, y) with coordinates clamped to the image: the border rule of every
   built-in stencil and resample stage. */
static inline pf_float4 pf_image_at_clamped(const pf_image *im, int x, int y)
{
    x = x < 0 ? 0 : (x >= im->width ? im->width - 1 : x);
    y = y < 0 ? 0 : (y >= im->height ? im->height - 1 : y);
    return pf_image_row(im, y)[x];
}

/* ---- Parameters ----------------------------------------------------------------- */

typedef enum pf_param_type {
    PF_PARAM_FLOAT = 0,  /* float field */
    PF_PARAM_INT,        /* int field */
    PF_PARAM_BOOL,       /* int field, 0 or 1 */
    PF_PARAM_ENUM,       /* int field, index into enum_names */
    PF_PARAM_FLOAT_ARRAY /* float[count] field */
} pf_param_type;

/* One row of a stage's parameter table, bound to a field of its params struct.
   The engine parses, type-checks and range-checks values and fills the struct; a
   stage never looks a key up by string. min and max bound every element of an
   array (int, float and float-array rows; bool and enum rows have none, and their min
   and max are not read); PF_NO_MIN / PF_NO_MAX leave a side open, and every default
   must be finite.
   A row whose min is above its max, or a NaN bound, is refused when the plugin loads
   (plugins built for ABI 1.0 used min > max for "unbounded"; they still load so). */
typedef struct pf_param_desc {
    const char *name;
    const char *doc;
    size_t offset;
    pf_param_type type;
    double def, min, max;
    const char *const *enum_names; /* PF_PARAM_ENUM: NULL-terminated; def is an index */
    int count;                     /* PF_PARAM_FLOAT_ARRAY: number of floats */
    const float *def_array;        /* PF_PARAM_FLOAT_ARRAY: count defaults */
} pf_param_desc;

#define PF_OFFSET(T, field) offsetof(T, field)
#define PF_COUNTOF(a)       ((int)(sizeof(a) / sizeof((a)[0])))
#define PF_PARAMS(table)    .params = (table), .n_params = PF_COUNTOF(table)
/* No bound on that side of a range: PF_FLOAT_PARAM(T, gain, 1, 0, PF_NO_MAX, "..."). */
#define PF_NO_MIN (-HUGE_VAL)
#define PF_NO_MAX HUGE_VAL

/* PF_FIELD_OFFSET_(T, f, ok, msg): offsetof(T, f), and a compile error naming msg
   ("negative width in bit-field 'msg'") when ok is 0. In C only (C++ has no _Generic;
   there the offset alone). */
#ifdef __cplusplus
#define PF_FIELD_OFFSET_(T, f, ok, msg) PF_OFFSET(T, f)
#else
#define PF_FIELD_OFFSET_(T, f, ok, msg)                                                            \
    (PF_OFFSET(T, f) + 0 * sizeof(struct { int msg : (ok) ? 1 : -1; }))
#endif
#define PF_FIELD_IS_(T, f, type) _Generic(((T *)0)->f, type : 1, default : 0)

/* Rows named after the field they fill (of params struct T), so that the name and the
   field cannot drift, and checked at compile time against the field's type (float for
   PF_FLOAT_PARAM, int for PF_INT_PARAM, PF_BOOL_PARAM and PF_ENUM_PARAM, float[N] for
   PF_FLOAT_ARRAY_PARAM): PF_FLOAT_PARAM(my_params, gain, 1, 0, 4, "factor on RGB").
   PF_ENUM_PARAM: names is a NULL-terminated array of the choices, d the default's index.
   PF_FLOAT_ARRAY_PARAM: defs is an array of exactly N defaults (static const float). */
#define PF_FLOAT_PARAM(T, f, d, lo, hi, doc)                                                       \
    {                                                                                              \
#f, doc,                                                                                   \
            PF_FIELD_OFFSET_(T, f, PF_FIELD_IS_(T, f, float), PF_FLOAT_PARAM_needs_a_float_field), \
            PF_PARAM_FLOAT, d, lo, hi, NULL, 0, NULL                                               \
    }
#define PF_INT_PARAM(T, f, d, lo, hi, doc)                                                         \
    {                                                                                              \
#f, doc, PF_FIELD_OFFSET_(T, f, PF_FIELD_IS_(T, f, int), PF_INT_PARAM_needs_an_int_field), \
            PF_PARAM_INT, d, lo, hi, NULL, 0, NULL                                                 \
    }
#define PF_BOOL_PARAM(T, f, d, doc)                                                                \
    {                                                                                              \
#f, doc,                                                                                   \
            PF_FIELD_OFFSET_(T, f, PF_FIELD_IS_(T, f, int), PF_BOOL_PARAM_needs_an_int_field),     \
            PF_PARAM_BOOL, d, 0, 1, NULL, 0, NULL                                                  \
    }
#define PF_ENUM_PARAM(T, f, d, names, doc)                                                         \
    {                                                                                              \
#f, doc,                                                                                   \
            PF_FIELD_OFFSET_(T, f, PF_FIELD_IS_(T, f, int), PF_ENUM_PARAM_needs_an_int_field),     \
            PF_PARAM_ENUM, d, 0, PF_COUNTOF(names) - 2, names, 0, NULL                             \
    }
#define PF_FLOAT_ARRAY_PARAM(T, f, defs, lo, hi, doc)                                              \
    {                                                                                              \
#f, doc,                                                                                   \
            PF_FIELD_OFFSET_(T, f,                                                                 \
                             _Generic(&((T *)0)->f, float(*)[PF_COUNTOF(defs)] : 1, default : 0),  \
                             PF_FLOAT_ARRAY_PARAM_needs_a_float_array_of_as_many_as_defs),         \
            PF_PARAM_FLOAT_ARRAY, 0, lo, hi, NULL, PF_COUNTOF(defs), defs                          \
    }

/* ---- Calls into a stage ----------------------------------------------------------- */

/* What a stencil, resample or reduce stage (or a precompiled point kernel) is given.
   On the CPU, data pointers are host memory and stream is NULL; on CUDA they are
   device memory and stream is the cudaStream_t to launch on (never synchronise it). */
typedef struct pf_stage_args {
    uint32_t size;      /* sizeof(pf_stage_args) at the engine's build */
    const void *params; /* the stage's params struct (device memory on CUDA) */
    const pf_image *in; /* n_in whole input images */
    int n_in;
    pf_image out;     /* whole output image; write only the rows of region */
    pf_region region; /* output rows (input rows for reduce) to compute */
    void *scratch;    /* scratch_bytes(params, width, rows) bytes, or NULL */
    size_t scratch_size;
    double *partial; /* reduce: partial_len doubles to fill for region */
    void *stream;    /* CUDA stream, NULL on the CPU */
    char *err;       /* on failure, a message here */
    size_t err_size;
} pf_stage_args;

/* What run_native gets: whole frames in their own format (in and out have the same
   pixel_bytes per pixel, pitch in bytes), the output rows to write, and the params. */
typedef struct pf_native_args {
    uint32_t size; /* sizeof(pf_native_args) at the engine's build */
    const void *params;
    const void *in;
    int in_width, in_height;
    size_t in_pitch;
    void *out;
    int out_width, out_height;
    size_t out_pitch;
    int sample;   /* the frames' format: 0 8-bit, 1 16-bit, 2 float samples (pf_sample) */
    int channels; /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA */
    size_t pixel_bytes;
    pf_region region;
    /* One float RGBA pixel in the frames' format (pixel_bytes at px), rounded and
       clamped as the engine stores outputs: for constant colours such as pad's fill. */
    void (*from_float4)(const struct pf_native_args *a, pf_float4 v, void *px);
    char *err;
    size_t err_size;
    double *partial; /* reduce: as in pf_stage_args (out is NULL); region is input rows */
} pf_native_args;

/* CPU point op over n pixels of one row: in[k] points at pixel x0 of input k's row y. */
typedef void (*pf_point_row_fn)(const void *params, const pf_float4 *const *in, int n_in,
                                pf_float4 *out, int x0, int n, int y, int width, int height);

typedef int (*pf_stage_run_fn)(const pf_stage_args *a);

typedef enum pf_stage_kind {
    PF_STAGE_POINT = 0,
    PF_STAGE_STENCIL,
    PF_STAGE_RESAMPLE,
    PF_STAGE_REDUCE
} pf_stage_kind;

typedef struct pf_stage_desc {
    uint32_t size; /* sizeof(pf_stage_desc) at the plugin's build: PF_STAGE_DESC_SIZE */
    const char *name;
    const char *doc;
    pf_stage_kind kind;
    int n_inputs; /* 1..PF_MAX_INPUTS */
    size_t params_size;
    const pf_param_desc *params;
    int n_params;
    /* Optional check across params (lo < hi and such): 0 when fine, else a message. */
    int (*check)(const void *params, char *err, size_t err_size);
    /* Relative compute weight per output pixel for the launch planner; 0 means 1. */
    float cost;

    /* point */
    pf_point_row_fn point_row;
    const char *point_fn;       /* the op's function name in point_source */
    const char *params_type;    /* the params struct's name in point_source */
    const char *point_source;   /* the op header as text, for NVRTC; NULL: not fusable */
    pf_stage_run_fn point_cuda; /* precompiled one-stage kernel launcher, or NULL */

    /* stencil: halo needed around each output pixel, in pixels */
    int (*radius)(const void *params);

    /* resample: output shape; reduce: table shape (width = columns, height = rows).
       Returns 0, or non-zero with a message (a crop outside the image, say). */
    int (*shape)(const void *params, const pf_shape *in, pf_shape *out, char *err, size_t err_size);

    /* stencil, resample: scratch needed for a band of rows of an image this wide */
    size_t (*scratch_bytes)(const void *params, int width, int rows);
    /* stencil, resample: compute the output rows of a->region into a->out.
       reduce: compute the partial of the input rows a->region into a->partial
       (partial_len doubles, zeroed by the engine). 0 on success. */
    pf_stage_run_fn run_cpu;
    /* The same on CUDA: a->in, a->out, a->params, a->scratch and a->partial are device
       memory; launch on a->stream only (it may be under CUDA Graph capture: no
       synchronisation, no allocation, no host reads of device data). For reduce, the
       partial must be deterministic: per-block partials in scratch, then a fixed-order
       combine into a->partial, never floating-point atomics. */
    pf_stage_run_fn run_cuda;

    /* reduce: doubles in one band's partial; combine folds n partials, in band
       order, into the result table (rows x columns, row-major). The result must
       not depend on how the rows were banded beyond floating-point rounding. */
    size_t (*partial_len)(const void *params, const pf_shape *in);
    void (*combine)(const void *params, const pf_shape *in, const double *partials, int n_partials,
                    double *result);
    const char *const *columns;                           /* NULL-terminated column names */
    const char *(*row_name)(const void *params, int row); /* optional row labels */

    /* Device scratch that run_cuda needs (NULL: none). Unlike scratch_bytes, it is asked
       once per unit, with host params when the engine plans (and again when params
       change), for the whole image: rows is the output's height (the input's, for a
       reduce) and width the wider of input 0 and the output. Every band's call gets that
       whole block in a->scratch (a->scratch_size bytes); bands of a unit run one after
       another on one stream, so each may use all of it. */
    size_t (*cuda_scratch_bytes)(const void *params, int width, int rows);

    /* ---- ABI 1.1 ---- */
    /* Channels the output needs whatever the input has: 0 (or 1) follows the input,
       3 colour, 4 colour and alpha. A sepia stage says 3, so that an "auto" output of a
       gray photo through it is written as RGB (gray+alpha as RGBA). Point, stencil and
       resample stages; later stages keep what an earlier one needs. */
    int out_channels;

    /* ---- ABI 1.2 ---- */
    /* PF_STAGE_* facts the engine may plan from; 0 declares none. */
    unsigned flags;
    /* resample and reduce, optional: whether run_native works for these params (1) or
       the stage needs float RGBA (0), and run_native itself. A resample stage copies the
       output rows of a->region from the input in the frames' own format, any sample
       size, the same bytes as run_cpu's float path would store: stages that only move
       pixels (crop, flip, quarter turns, pad, nearest resize) offer it; the CPU executor
       uses it when the stage reads a caller frame and writes one of the same 8- or
       16-bit format. A reduce stage fills a->partial from the input rows of a->region of
       an 8- or 16-bit caller frame, the same numbers as run_cpu on the float image the
       engine would load (a histogram counting codes). From ABI 1.6 a stencil stage may
       offer it too, as a resample stage does (the same bytes as its float path would
       store: median3 selects among the codes). */
    int (*native_ok)(const void *params);
    int (*run_native)(const pf_native_args *a);

    /* ---- ABI 1.3 ---- */
    /* reduce, optional: the table is a plain sum of the input's pixels, which the engine
       may then compute itself on the GPU, fused behind the point stages that produce the
       input (their ops run in registers on the way into the sum, so their image is never
       written) and with the partial sums added on the device:
         PF_REDUCE_SUM_COLUMNS  table row x (columns r, g, b, a): the sum over y of (x, y)
         PF_REDUCE_SUM_ROWS     table row y: the sum over x of (x, y)
       in double, in an order fixed by the sizes alone. 0 declares nothing: run_cuda and
       combine do the work. The table's shape must be the one these sums fill (width
       4; height the input's width or height), and run_cpu, run_cuda and combine must
       compute the same sums, in any order of addition. */
    int reduce_sum;
    /* stencil of radius 1 (3x3), optional: the name of a PF_POINT_FN in point_source
       (whose params struct params_type names) computing one output pixel from its
       neighbourhood, `pf_float4 fn(const T *params, const pf_float4 *n)`, n[0..8] the 3x3
       input pixels row-major from the top left (n[4] the centre), clamped to the edge as
       the engine gives them to run_cpu. The engine may then run the stage as a kernel of
       its own on the GPU that loads its input in the frame's own format, or the inputs of
       the point stages producing it (whose ops it runs on the tile it stages, so their
       image is never written), and stores to the outputs' own formats. run_cpu and
       run_cuda must compute what the function computes; NULL declares nothing. */
    const char *stencil_fn;

    /* ---- ABI 1.4 ---- */
    /* separable stencil, optional: the name of a PF_POINT_FN in point_source (whose
       params struct params_type names), `int fn(const T *params, int i, double *tap,
       int *premultiply)`, returning the radius r of a symmetric kernel (0..separable_max)
       and, for 0 <= i <= r, setting *tap to the unnormalised weight at offsets -i and +i;
       *premultiply to 1 where the sums are weighted by alpha (premultiply.h's rules), 0
       where every channel is summed alike. The stage must then compute what the
       engine's two passes compute (docs/plugins.md, "Separable stencils"): the taps
       w[i] = (float)(tap_i / (tap_0 + 2 tap_1 + ... + 2 tap_r)), the sum in double in
       that order; a horizontal pass o = w[0] c[x] + w[1] (c[x - 1] + c[x + 1]) + ...,
       then the same vertically over those sums, reads clamped to the edge, each float
       operation rounded on its own; every sum normalised by the weights' float sum
       (pf_norm_colour). The engine may then run the stage as kernels of its own on the
       GPU that load the inputs of the point stages producing its input, in the frames'
       own formats, and run their ops as the row is staged, so their image is never
       written. NULL declares nothing. */
    const char *separable_fn;
    int separable_max; /* the largest radius separable_fn returns, 1..PF_SEPARABLE_MAX */

    /* ---- ABI 1.5 ---- */
    /* summing reduce (reduce_sum), optional: the name of a PF_POINT_FN in point_source
       (whose params struct params_type names) making each entry of the table from its
       sum, `double fn(const T *params, double sum, int row, int column, int width, int
       height)`, width and height the input's (a mean divides by the pixels summed: height
       for PF_REDUCE_SUM_COLUMNS, width for PF_REDUCE_SUM_ROWS). The engine's kernel then
       applies it on the device after the partial sums are added, so tables of means and
       other functions of the sums fuse too. run_cpu with combine, and run_cuda with
       combine, must give fn(sum) for every entry. NULL: the table is the sum itself. */
    const char *reduce_finish;

    /* ---- ABI 1.6 ---- */
    /* resample, optional: the rows of input k (of the stage's n_in inputs, shapes in[])
       that computing output rows out_rows of an output of shape *out reads, as a region
       [y0, y1) of the input ([0, 0) when it reads none), clamped reads included; 0, or
       non-zero when it cannot say. The engine may then run a pipeline in strips of
       output rows (pipefuse/bands.h), each stage on the rows its consumers need, with
       only those rows of its inputs held: run_cpu and run_native must then read no other
       row of input k for that region. NULL: the stage needs its whole input, and a
       pipeline using it runs whole frames. */
    int (*rows_in)(const void *params, const pf_shape *in, const pf_shape *out, int k,
                   pf_region out_rows, pf_region *in_rows);
} pf_stage_desc;

/* pf_stage_desc.separable_max: the largest radius a separable stage may declare. */
#define PF_SEPARABLE_MAX 256

/* pf_stage_desc.reduce_sum (and reduce_finish, the function of each sum) */
#define PF_REDUCE_SUM_COLUMNS 1
#define PF_REDUCE_SUM_ROWS    2

/* pf_stage_desc.flags */
/* point: output channel c of a pixel depends only on channel c of each input pixel and
   on the params; not on other channels, nor on the position. brightness, gamma, levels,
   invert are; grayscale, saturation, a colour matrix, a vignette are not. The CPU
   executor tabulates chains of such stages over every 8- and 16-bit code value, so a
   false claim gives wrong pixels. */
#define PF_STAGE_PER_CHANNEL 1u
/* point (ABI 1.6): its float params may be bound to a reduction in a pipeline file
   ({"from": "hist", "percentile": 0.5}), a value per frame: none of them changes the
   output's shape or what the engine plans, and check() refusing a frame's values is
   not an error (the stage then runs with the file's values). */
#define PF_STAGE_BINDABLE    2u
#define PF_STAGE_FLAGS_KNOWN (PF_STAGE_PER_CHANNEL | PF_STAGE_BINDABLE)

#define PF_STAGE_DESC_SIZE ((uint32_t)sizeof(pf_stage_desc))

/* ---- The plugin ------------------------------------------------------------------ */

typedef struct pf_host_api {
    uint32_t size;
    uint32_t abi_version;
    void (*log)(int level, const char *msg); /* level: 0 info, 1 warning, 2 error */
} pf_host_api;

typedef struct pf_plugin_desc {
    uint32_t size;        /* sizeof(pf_plugin_desc) at the plugin's build */
    uint32_t abi_version; /* PF_ABI_VERSION at the plugin's build */
    const char *name;
    const char *version;
    const char *doc;
    const pf_stage_desc *const *stages;
    int n_stages;
} pf_plugin_desc;

typedef const pf_plugin_desc *(*pf_plugin_entry_fn)(const pf_host_api *host);

/* ---- Helpers for writing stages ----------------------------------------------------- */

/* CPU row function for a point op `fn` with params struct T, named fn##_row. The params
   are copied into a local first: no store to out can change them then, so the compiler
   keeps what the op computes from them alone (levels' 1 / (in_high - in_low), say) out
   of the pixel loop; the same arithmetic, the same results. */
#define PF_POINT_ROW(fn, T)                                                                        \
    static void fn##_row(const void *params, const pf_float4 *const *in, int n_in, pf_float4 *out, \
                         int x0, int n, int y, int width, int height)                              \
    {                                                                                              \
        const T pl_ = *(const T *)params;                                                          \
        const T *p_ = &pl_;                                                                        \
        pf_float4 v_[PF_MAX_INPUTS];                                                               \
        pf_pos pos_ = {x0, y, width, height};                                                      \
        for (int i_ = 0; i_ < n; i_++, pos_.x++) {                                                 \
            for (int k_ = 0; k_ < n_in; k_++)                                                      \
                v_[k_] = in[k_][i_];                                                               \
            out[i_] = fn(p_, v_, pos_);                                                            \
        }                                                                                          \
    }

/* A CUDA launcher when the plugin is built with CUDA (pf_add_plugin defines
   PF_PLUGIN_HAVE_CUDA then), NULL otherwise: `.run_cuda = PF_CUDA(blur_cuda)`. */
#ifdef PF_PLUGIN_HAVE_CUDA
#define PF_CUDA(fn) fn
#else
#define PF_CUDA(fn) NULL
#endif

/* The point-specific fields of a stage descriptor; src is the op header's text. */
#define PF_POINT_DESC(fn, T, src)                                                                  \
    .size = PF_STAGE_DESC_SIZE, .kind = PF_STAGE_POINT, .params_size = sizeof(T),                  \
    .point_row = fn##_row, .point_fn = #fn, .params_type = #T, .point_source = (src)

/* Defines the entry symbol for a plugin whose stages are in the array `stage_list`. */
#define PF_DEFINE_PLUGIN(pname, pversion, pdoc, stage_list)                                        \
    PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host);               \
    PF_PLUGIN_EXPORT const pf_plugin_desc *pf_plugin_entry(const pf_host_api *host)                \
    {                                                                                              \
        static const pf_plugin_desc d = {                                                          \
            sizeof(pf_plugin_desc), PF_ABI_VERSION, pname, pversion, pdoc, stage_list,             \
            PF_COUNTOF(stage_list)};                                                               \
        (void)host;                                                                                \
        return &d;                                                                                 \
    }

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_PLUGIN_H */
