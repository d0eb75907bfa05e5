/* tests/cpu/liar.c: a plugin whose stages declare fast paths that give other numbers
 * than their float code, so that test_cpu_fast can tell which path the executor took:
 *   liar_point  a point stage declared per-channel that reads the position (x / 4096 is
 *               added to R): through tables, R holds the code's position instead;
 *   liar_copy   a resample stage whose float run writes 0 and whose run_native copies;
 *   liar_stencil  a stencil (radius 1) whose float run writes 0 and whose run_native
 *               copies;
 *   liar_count  a reduce stage whose float run counts nothing and whose run_native
 *               counts the band's pixels.
 */
#include <string.h>

#include "pipefuse/plugin.h"

typedef struct liar_params {
    int unused;
} liar_params;

PF_POINT_FN pf_float4 liar_point(const liar_params *p, const pf_float4 *in, pf_pos pos)
{
    return pf_f4(in[0].x + (float)pos.x / 4096.0f, in[0].y, in[0].z, in[0].w);
}
PF_POINT_ROW(liar_point, liar_params)

static int same_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                      size_t err_size)
{
    *out = *in;
    return 0;
}

static int yes(const void *params)
{
    return 1;
}

static int copy_run(const pf_stage_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++)
        memset(pf_image_row(&a->out, y), 0, sizeof(pf_float4) * (size_t)a->out.width);
    return 0;
}

static int copy_native(const pf_native_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++)
        memcpy((char *)a->out + (size_t)y * a->out_pitch,
               (const char *)a->in + (size_t)y * a->in_pitch,
               a->pixel_bytes * (size_t)a->out_width);
    return 0;
}

static int count_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                       size_t err_size)
{
    out->width = 4;
    out->height = 1;
    return 0;
}

static size_t count_len(const void *params, const pf_shape *in)
{
    return 4;
}

static int count_run(const pf_stage_args *a)
{
    return 0;
}

static int count_native(const pf_native_args *a)
{
    a->partial[0] += (double)(a->region.y1 - a->region.y0) * a->in_width;
    return 0;
}

static void count_combine(const void *params, const pf_shape *in, const double *partials, int n,
                          double *result)
{
    memset(result, 0, 4 * sizeof(double));
    for (int b = 0; b < n; b++)
        result[0] += partials[4 * b];
}

static const char *const count_columns[] = {"n", "b", "c", "d", NULL};

static const pf_stage_desc liar_point_desc = {.size = PF_STAGE_DESC_SIZE,
                                              .kind = PF_STAGE_POINT,
                                              .params_size = sizeof(liar_params),
                                              .point_row = liar_point_row,
                                              .name = "liar_point",
                                              .doc = "R + x / 4096, declared per-channel",
                                              .n_inputs = 1,
                                              .flags = PF_STAGE_PER_CHANNEL};

static const pf_stage_desc liar_copy_desc = {.size = PF_STAGE_DESC_SIZE,
                                             .kind = PF_STAGE_RESAMPLE,
                                             .name = "liar_copy",
                                             .doc = "0 in float, a copy natively",
                                             .n_inputs = 1,
                                             .params_size = sizeof(liar_params),
                                             .shape = same_shape,
                                             .run_cpu = copy_run,
                                             .native_ok = yes,
                                             .run_native = copy_native};

static const pf_stage_desc liar_count_desc = {.size = PF_STAGE_DESC_SIZE,
                                              .kind = PF_STAGE_REDUCE,
                                              .name = "liar_count",
                                              .doc = "0 in float, the pixels natively",
                                              .n_inputs = 1,
                                              .params_size = sizeof(liar_params),
                                              .shape = count_shape,
                                              .partial_len = count_len,
                                              .run_cpu = count_run,
                                              .combine = count_combine,
                                              .columns = count_columns,
                                              .native_ok = yes,
                                              .run_native = count_native};

static int radius_one(const void *params)
{
    return 1;
}
static const pf_stage_desc liar_stencil_desc = {.size = PF_STAGE_DESC_SIZE,
                                                .kind = PF_STAGE_STENCIL,
                                                .name = "liar_stencil",
                                                .doc = "0 in float, a copy natively",
                                                .n_inputs = 1,
                                                .params_size = sizeof(liar_params),
                                                .radius = radius_one,
                                                .run_cpu = copy_run,
                                                .native_ok = yes,
                                                .run_native = copy_native};
static const pf_stage_desc *const liar_stages[] = {&liar_point_desc, &liar_copy_desc,
                                                   &liar_stencil_desc, &liar_count_desc};

PF_DEFINE_PLUGIN("liar", "1.0.0", "fast paths that differ from the float code (tests only)",
                 liar_stages)
