/* tests/sdk/broken/calls_exit.c: a stencil that calls exit(0) when asked for its first
 * row, as a program's error handling might. */
#include <stdlib.h>

#include "common.h"

static int exit_run(const pf_stage_args *a)
{
    if (a->region.y0 == 0)
        exit(0); /* the fault: and with status 0 */
    mean_rows(a, a->region.y0, a->region.y1);
    return 0;
}

static const pf_stage_desc quitter = {.size = PF_STAGE_DESC_SIZE,
                                      .name = "sdk_calls_exit",
                                      .doc = "3x3 mean, but exits the process on row 0",
                                      .kind = PF_STAGE_STENCIL,
                                      .n_inputs = 1,
                                      .radius = radius_one,
                                      .run_cpu = exit_run};
static const pf_stage_desc *const stages[] = {&quitter};
PF_DEFINE_PLUGIN("calls_exit", "1.0", "a stage that calls exit()", stages)
