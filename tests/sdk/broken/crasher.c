/* tests/sdk/broken/crasher.c: a stencil that writes through a NULL pointer on its last band. */
#include "common.h"

static int crash_run(const pf_stage_args *a)
{
    mean_rows(a, a->region.y0, a->region.y1);
    if (a->region.y1 == a->out.height)
        ((volatile pf_float4 *)NULL)[a->out.width].x = 0; /* the fault: a write near NULL */
    return 0;
}

static const pf_stage_desc crasher = {.size = PF_STAGE_DESC_SIZE,
                                      .name = "sdk_crasher",
                                      .doc = "3x3 mean that crashes on the last row",
                                      .kind = PF_STAGE_STENCIL,
                                      .n_inputs = 1,
                                      .radius = radius_one,
                                      .run_cpu = crash_run};
static const pf_stage_desc *const stages[] = {&crasher};
PF_DEFINE_PLUGIN("crasher", "1.0", "a stage that crashes", stages)
