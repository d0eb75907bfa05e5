/* tests/sdk/broken/crash_check.c: a point stage whose params check crashes on a gain above
 * 5 (its defaults and plugin check's random draws below 5 pass), so a pipeline that sets
 * one crashes where the pipeline loads, before any worker runs a frame. */
#include "common.h"

static int gain_check(const void *params, char *err, size_t err_size)
{
    (void)err, (void)err_size;
    if (((const gain_params *)params)->gain > 5)
        *(volatile int *)0 = 1; /* the fault */
    return 0;
}

PF_POINT_ROW(broken_gain, gain_params)
static const pf_param_desc table[] = {PF_FLOAT_PARAM(gain_params, gain, 1, 0, 10, "factor on RGB")};
static const pf_stage_desc crash_check = {PF_POINT_DESC(broken_gain, gain_params, NULL),
                                          .name = "sdk_crash_check",
                                          .doc = "RGB * gain; its check crashes above 5",
                                          .n_inputs = 1,
                                          .check = gain_check,
                                          PF_PARAMS(table)};
static const pf_stage_desc *const stages[] = {&crash_check};
PF_DEFINE_PLUGIN("crash_check", "1.0", "a params check that crashes", stages)
