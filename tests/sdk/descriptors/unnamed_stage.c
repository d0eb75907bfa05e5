/* tests/sdk/descriptors/unnamed_stage.c: two stages, the second without a name. Messages
 * about it cannot name it by its name, so they name it by its place in the list and the
 * field: stages[1].name. */
#include "../broken/common.h"

PF_POINT_ROW(broken_gain, gain_params)
static const pf_param_desc table[] = {PF_FLOAT_PARAM(gain_params, gain, 1, 0, 10, "factor on RGB")};
static const pf_stage_desc named = {PF_POINT_DESC(broken_gain, gain_params, NULL),
                                    .name = "sdk_named", .doc = "RGB * gain", .n_inputs = 1,
                                    PF_PARAMS(table)};
static const pf_stage_desc unnamed = {PF_POINT_DESC(broken_gain, gain_params, NULL),
                                      .doc = "RGB * gain, without a name", .n_inputs = 1,
                                      PF_PARAMS(table)};
static const pf_stage_desc *const stages[] = {&named, &unnamed};
PF_DEFINE_PLUGIN("unnamed_stage", "1.0", "a stage without a name", stages)
