/* tests/sdk/broken/swapped_range.c: a parameter whose min and max are swapped (once
 * "unbounded"; refused from ABI 1.1). */
#include "common.h"

PF_POINT_ROW(broken_gain, gain_params)
static const pf_param_desc table[] = {PF_FLOAT_PARAM(gain_params, gain, 1, 10, 0, "factor on RGB")};
static const pf_stage_desc gain = {PF_POINT_DESC(broken_gain, gain_params, NULL),
                                   .name = "sdk_swapped_range", .doc = "RGB * gain", .n_inputs = 1,
                                   PF_PARAMS(table)};
static const pf_stage_desc *const stages[] = {&gain};
PF_DEFINE_PLUGIN("swapped_range", "1.0", "a parameter range with min above max", stages)
