/* tests/sdk/broken/wide_radius.c: a stencil that declares radius 1 but reads pixels
 * three rows and columns away. */
#include "common.h"

static int wide_run(const pf_stage_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++) {
        pf_float4 *row = pf_image_row(&a->out, y);
        for (int x = 0; x < a->out.width; x++) {
            pf_float4 c = mean3x3(a, x, y), far = pf_image_at_clamped(&a->in[0], x + 3, y - 3);
            row[x] = pf_f4(0.5f * (c.x + far.x), c.y, c.z, c.w);
        }
    }
    return 0;
}

static const pf_stage_desc wide = {.size = PF_STAGE_DESC_SIZE,
                                   .name = "sdk_wide_radius",
                                   .doc = "3x3 mean, R mixed with a pixel 3 away (radius says 1)",
                                   .kind = PF_STAGE_STENCIL,
                                   .n_inputs = 1,
                                   .radius = radius_one,
                                   .run_cpu = wide_run};
static const pf_stage_desc *const stages[] = {&wide};
PF_DEFINE_PLUGIN("wide_radius", "1.0", "a stencil reading beyond its radius", stages)
