/* tests/sdk/broken/deep_radius.c: a stencil that declares radius 30 but reads a pixel 31
 * columns away: only an image larger than 63 pixels shows it. */
#include "common.h"

static int deep_run(const pf_stage_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *row = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++) {
            pf_float4 c = mean3x3(a, x, y), far = pf_image_at_clamped(&a->in[0], x - 31, y);
            row[x] = pf_f4(0.5f * (c.x + far.x), c.y, c.z, c.w);
        }
    }
    return 0;
}

static int radius_30(const void *params)
{
    return 30;
}

static const pf_stage_desc deep = {.size = PF_STAGE_DESC_SIZE,
                                   .name = "sdk_deep_radius",
                                   .doc = "3x3 mean, R mixed with a pixel 31 away (radius says 30)",
                                   .kind = PF_STAGE_STENCIL,
                                   .n_inputs = 1,
                                   .radius = radius_30,
                                   .run_cpu = deep_run};
static const pf_stage_desc *const stages[] = {&deep};
PF_DEFINE_PLUGIN("deep_radius", "1.0", "a stencil reading one pixel beyond its radius of 30",
                 stages)
