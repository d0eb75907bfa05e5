/* tests/sdk/broken/common.h: what the broken plugins share: a correct point op and a
 * correct 3x3 stencil and a correct pixel count, so that each plugin gets exactly one thing
 * wrong (many_faults.c excepted). */
#ifndef SDK_BROKEN_COMMON_H
#define SDK_BROKEN_COMMON_H

#include "pipefuse/plugin.h"

typedef struct gain_params {
    float gain;
} gain_params;

/* RGB * gain, alpha kept. */
PF_POINT_FN pf_float4 broken_gain(const gain_params *p, const pf_float4 *in, pf_pos pos)
{
    return pf_f4(in[0].x * p->gain, in[0].y * p->gain, in[0].z * p->gain, in[0].w);
}

/* The mean of the 3x3 neighbourhood of (x, y) in input 0, clamped at the borders. */
static inline pf_float4 mean3x3(const pf_stage_args *a, int x, int y)
{
    pf_float4 s = pf_f4(0, 0, 0, 0);
    for (int j = -1; j <= 1; j++)
        for (int i = -1; i <= 1; i++) {
            pf_float4 v = pf_image_at_clamped(&a->in[0], x + i, y + j);
            s = pf_f4(s.x + v.x, s.y + v.y, s.z + v.z, s.w + v.w);
        }
    return pf_f4(s.x / 9, s.y / 9, s.z / 9, s.w / 9);
}

static inline int radius_one(const void *params)
{
    return 1;
}

/* Rows [y0, y1) of a->out: the 3x3 mean of input 0. */
static inline void mean_rows(const pf_stage_args *a, int y0, int y1)
{
    for (int y = y0; y < y1; y++) {
        pf_float4 *row = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++)
            row[x] = mean3x3(a, x, y);
    }
}

/* A reduce stage's pieces: a 1x1 table, the number of pixels. */
static inline int count_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                              size_t err_size)
{
    out->width = out->height = 1;
    return 0;
}

static inline size_t count_len(const void *params, const pf_shape *in)
{
    return 1;
}

static inline int count_run(const pf_stage_args *a)
{
    a->partial[0] += (double)(a->region.y1 - a->region.y0) * a->in[0].width;
    return 0;
}

static inline void count_combine(const void *params, const pf_shape *in, const double *partials,
                                 int n, double *result)
{
    result[0] = 0;
    for (int b = 0; b < n; b++)
        result[0] += partials[b];
}

static const char *const count_columns[] = {"pixels", NULL};

/* `static const pf_stage_desc count`, a reduce stage counting pixels (CPU only) that
   declares reduce_sum rsum; and the stage list `stages`. */
#define COUNT_STAGE(sname, rsum)                                                                   \
    static const pf_stage_desc count = {.size = PF_STAGE_DESC_SIZE,                                \
                                        .name = sname,                                             \
                                        .doc = "the number of pixels",                             \
                                        .kind = PF_STAGE_REDUCE,                                   \
                                        .n_inputs = 1,                                             \
                                        .shape = count_shape,                                      \
                                        .run_cpu = count_run,                                      \
                                        .partial_len = count_len,                                  \
                                        .combine = count_combine,                                  \
                                        .columns = count_columns,                                  \
                                        .reduce_sum = rsum};                                       \
    static const pf_stage_desc *const stages[] = {&count};

/* `static const pf_stage_desc gain`, a point stage of broken_gain (CPU only) whose one
   parameter has this default, range [0, 10] and doc; and the stage list `stages`. */
#define GAIN_STAGE(sname, sdoc, def_, pdoc)                                                        \
    PF_POINT_ROW(broken_gain, gain_params)                                                         \
    static const pf_param_desc table[] = {{"gain", pdoc, PF_OFFSET(gain_params, gain),             \
                                           PF_PARAM_FLOAT, .def = def_, .min = 0, .max = 10}};     \
    static const pf_stage_desc gain = {PF_POINT_DESC(broken_gain, gain_params, NULL),              \
                                       .name = sname, .doc = sdoc, .n_inputs = 1,                  \
                                       PF_PARAMS(table)};                                          \
    static const pf_stage_desc *const stages[] = {&gain};

#endif
