/* tests/sdk/broken/huge_radius.c: a stencil whose radius() returns more than
 * PF_MAX_RADIUS (the engine refuses it). */
#include "common.h"

static int mean_run(const pf_stage_args *a)
{
    mean_rows(a, a->region.y0, a->region.y1);
    return 0;
}

static int radius_huge(const void *params)
{
    return PF_MAX_RADIUS + 44;
}

static const pf_stage_desc huge = {.size = PF_STAGE_DESC_SIZE,
                                   .name = "sdk_huge_radius",
                                   .doc = "3x3 mean that declares a radius of 300",
                                   .kind = PF_STAGE_STENCIL,
                                   .n_inputs = 1,
                                   .radius = radius_huge,
                                   .run_cpu = mean_run};
static const pf_stage_desc *const stages[] = {&huge};
PF_DEFINE_PLUGIN("huge_radius", "1.0", "a stencil declaring a radius above PF_MAX_RADIUS", stages)
