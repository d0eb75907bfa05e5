/* tests/sdk/broken/region_ignorer.c: a stencil that ignores its region and writes every
 * row of the output on every call. Its values are right; only banding exposes it. */
#include "common.h"

static int ignorer_run(const pf_stage_args *a)
{
    mean_rows(a, 0, a->out.height); /* the fault: not region.y0 .. region.y1 */
    return 0;
}

static const pf_stage_desc ignorer = {.size = PF_STAGE_DESC_SIZE,
                                      .name = "sdk_region_ignorer",
                                      .doc = "3x3 mean, written to every row whatever the region",
                                      .kind = PF_STAGE_STENCIL,
                                      .n_inputs = 1,
                                      .radius = radius_one,
                                      .run_cpu = ignorer_run};
static const pf_stage_desc *const stages[] = {&ignorer};
PF_DEFINE_PLUGIN("region_ignorer", "1.0", "a stencil that ignores its region", stages)
