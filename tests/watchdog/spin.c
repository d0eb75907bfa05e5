/* tests/watchdog/spin.c: a test-only plugin with one stage of each kind whose cost per
 * pixel is tunable (`iters`), for watchdog splitting tests: spin_point (point),
 * spin_stencil (out = mean of the pixels above and below: reads halo rows),
 * spin_resample (a vertical flip: reads rows of other bands) and spin_reduce (column
 * sums). Each returns exactly what it would without the spinning. And spin_fault, a
 * copy that traps on the GPU when asked, for the lost-context test. */
#include <string.h>

#include "spin.h"

extern const char pf_src_spin_ops[];

static const pf_param_desc spin_table[] = {
    PF_INT_PARAM(spin_params, iters, 0, 0, 1000000, "multiply-adds spun per pixel")};

PF_POINT_ROW(spin_point, spin_params)

static int radius1(const void *params)
{
    return 1;
}

static int same_shape(const void *params, const pf_shape *in, pf_shape *out, char *err, size_t n)
{
    *out = *in;
    return 0;
}

static int stencil_cpu(const pf_stage_args *a)
{
    const spin_params *p = a->params;
    for (int y = a->region.y0; y < a->region.y1; y++)
        for (int x = 0; x < a->out.width; x++) {
            pf_float4 u = pf_image_at_clamped(&a->in[0], x, y - 1);
            pf_float4 d = pf_image_at_clamped(&a->in[0], x, y + 1);
            float z = spin_zero(p->iters, u.x);
            pf_image_row(&a->out, y)[x] = pf_f4((u.x + d.x) * 0.5f + z, (u.y + d.y) * 0.5f,
                                                (u.z + d.z) * 0.5f, (u.w + d.w) * 0.5f);
        }
    return 0;
}

static int resample_cpu(const pf_stage_args *a)
{
    const spin_params *p = a->params;
    for (int y = a->region.y0; y < a->region.y1; y++)
        for (int x = 0; x < a->out.width; x++) {
            pf_float4 v = pf_image_row(&a->in[0], a->in[0].height - 1 - y)[x];
            v.x += spin_zero(p->iters, v.x);
            pf_image_row(&a->out, y)[x] = v;
        }
    return 0;
}

static int fault_cpu(const pf_stage_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++)
        memcpy(pf_image_row(&a->out, y), pf_image_row(&a->in[0], y),
               sizeof(pf_float4) * (size_t)a->out.width);
    return 0;
}

static int col_shape(const void *params, const pf_shape *in, pf_shape *out, char *err, size_t n)
{
    out->width = 4;
    out->height = in->width;
    return 0;
}

static size_t col_partial(const void *params, const pf_shape *in)
{
    return (size_t)in->width * 4;
}

static int reduce_cpu(const pf_stage_args *a)
{
    const spin_params *p = a->params;
    for (int y = a->region.y0; y < a->region.y1; y++)
        for (int x = 0; x < a->in[0].width; x++) {
            pf_float4 v = pf_image_row(&a->in[0], y)[x];
            double *s = a->partial + 4 * (size_t)x;
            s[0] += v.x + spin_zero(p->iters, v.x), s[1] += v.y, s[2] += v.z, s[3] += v.w;
        }
    return 0;
}

static void col_combine(const void *params, const pf_shape *in, const double *partials, int n,
                        double *result)
{
    size_t len = (size_t)in->width * 4;
    memset(result, 0, sizeof(double) * len);
    for (int b = 0; b < n; b++)
        for (size_t i = 0; i < len; i++)
            result[i] += partials[(size_t)b * len + i];
}

static const pf_param_desc fault_table[] = {
    PF_BOOL_PARAM(spin_fault_params, trap, 0, "trap on the GPU (ends the CUDA context)")};

static const char *const rgba[] = {"r", "g", "b", "a", NULL};

#define SPIN_COMMON(sname, skind, sdoc)                                                            \
    .size = PF_STAGE_DESC_SIZE, .name = sname, .doc = sdoc, .kind = skind, .n_inputs = 1,          \
    .params_size = sizeof(spin_params), PF_PARAMS(spin_table), .cost = 1

static const pf_stage_desc point_desc = {PF_POINT_DESC(spin_point, spin_params, pf_src_spin_ops),
                                         .name = "spin_point",
                                         .doc = "returns its input after spinning",
                                         .n_inputs = 1,
                                         PF_PARAMS(spin_table),
                                         .point_cuda = PF_CUDA(spin_point_cuda)};
static const pf_stage_desc stencil_desc = {
    SPIN_COMMON("spin_stencil", PF_STAGE_STENCIL, "mean of the pixels above and below"),
    .radius = radius1, .run_cpu = stencil_cpu, .run_cuda = PF_CUDA(spin_stencil_cuda)};
static const pf_stage_desc resample_desc = {
    SPIN_COMMON("spin_resample", PF_STAGE_RESAMPLE, "vertical flip"), .shape = same_shape,
    .run_cpu = resample_cpu, .run_cuda = PF_CUDA(spin_resample_cuda)};
static const pf_stage_desc reduce_desc = {
    SPIN_COMMON("spin_reduce", PF_STAGE_REDUCE, "column sums"),
    .shape = col_shape,
    .partial_len = col_partial,
    .combine = col_combine,
    .columns = rgba,
    .run_cpu = reduce_cpu,
    .run_cuda = PF_CUDA(spin_reduce_cuda)};

static const pf_stage_desc fault_desc = {.size = PF_STAGE_DESC_SIZE,
                                         .name = "spin_fault",
                                         .doc = "a copy; traps on the GPU when asked",
                                         .kind = PF_STAGE_RESAMPLE,
                                         .n_inputs = 1,
                                         .params_size = sizeof(spin_fault_params),
                                         PF_PARAMS(fault_table),
                                         .cost = 1,
                                         .shape = same_shape,
                                         .run_cpu = fault_cpu,
                                         .run_cuda = PF_CUDA(spin_fault_cuda)};

static const pf_stage_desc *const stages[] = {&point_desc, &stencil_desc, &resample_desc,
                                              &reduce_desc, &fault_desc};
PF_DEFINE_PLUGIN("spin", "1.0", "tunable-cost stages for watchdog tests", stages)
