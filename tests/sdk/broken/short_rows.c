/* tests/sdk/broken/short_rows.c: a resample stage halving the height (each output row the
 * mean of two input rows) whose rows_in leaves out the second row of the last pair. */
#include "common.h"

static int halve_shape(const void *params, const pf_shape *in, pf_shape *out, char *err,
                       size_t err_size)
{
    out->width = in->width;
    out->height = in->height / 2 > 0 ? in->height / 2 : 1;
    return 0;
}

static int halve_run(const pf_stage_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *row = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++) {
            pf_float4 u = pf_image_at_clamped(&a->in[0], x, 2 * y),
                      v = pf_image_at_clamped(&a->in[0], x, 2 * y + 1);
            row[x] = pf_f4(0.5f * (u.x + v.x), 0.5f * (u.y + v.y), 0.5f * (u.z + v.z),
                           0.5f * (u.w + v.w));
        }
    }
    return 0;
}

/* Wrong: rows 2 y0 .. 2 y1 - 2, where the last output row reads 2 y1 - 1 too. */
static int halve_rows_in(const void *params, const pf_shape *in, const pf_shape *out, int k,
                         pf_region r, pf_region *rows)
{
    rows->y0 = 2 * r.y0 < in->height ? 2 * r.y0 : in->height - 1;
    rows->y1 = 2 * r.y1 - 1 < in->height ? 2 * r.y1 - 1 : in->height;
    return 0;
}

static const pf_stage_desc halve = {.size = PF_STAGE_DESC_SIZE,
                                    .name = "sdk_short_rows",
                                    .doc = "half height, two rows averaged (rows_in is short)",
                                    .kind = PF_STAGE_RESAMPLE,
                                    .n_inputs = 1,
                                    .shape = halve_shape,
                                    .run_cpu = halve_run,
                                    .rows_in = halve_rows_in};
static const pf_stage_desc *const stages[] = {&halve};
PF_DEFINE_PLUGIN("short_rows", "1.0", "a resample stage whose rows_in is short", stages)
