/* tests/sdk/broken/crash_check.c: a point stage whose params check crashes on a gain above
 * 5 (its defaults and plugin check's random draws below 5 pass), so a pipeline that sets
 * one crashes where the pipeline loads, before any worker runs a frame: through NULL, or
 * above 9 by overflowing the stack. */
#include "common.h"

static int deeper(volatile int n)
{
    volatile char pad[4096];
    pad[0] = (char)n;
    if (n == -1) /* never: the stack runs out first */
        return 0;
    return deeper(n + 1) + pad[0];
}

static int gain_check(const void *params, char *err, size_t err_size)
{
    (void)err, (void)err_size;
    float g = ((const gain_params *)params)->gain;
    if (g > 9)
        return deeper(0);
    if (g > 5)
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
