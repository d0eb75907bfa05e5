/* tests/sdk/descriptors/inf_default.c: a float default of infinity in a range open above
 * (PF_NO_MAX). In range, but no pipeline file can write it back (JSON has no infinity):
 * refused as not finite, naming the row's field (it loaded, and plugin check then failed
 * its CPU run on a JSON parse error of its own making). */
#include "../broken/common.h"

PF_POINT_ROW(broken_gain, gain_params)
static const pf_param_desc table[] = {
    PF_FLOAT_PARAM(gain_params, gain, HUGE_VAL /* the fault */, 0, PF_NO_MAX, "factor on RGB")};
static const pf_stage_desc stage = {PF_POINT_DESC(broken_gain, gain_params, NULL),
                                    .name = "sdk_inf_default", .doc = "RGB * gain", .n_inputs = 1,
                                    PF_PARAMS(table)};
static const pf_stage_desc *const stages[] = {&stage};
PF_DEFINE_PLUGIN("inf_default", "1.0", "a default of infinity", stages)
