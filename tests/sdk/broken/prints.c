/* tests/sdk/broken/prints.c: a point stage whose op calls printf (prints_ops.h): plugin
 * check must refuse it, naming the call and its line. */
#include <stdio.h>

#include "pipefuse/plugin.h"
#include "prints_ops.h"

extern const char pf_src_prints_ops[];

PF_POINT_ROW(prints, prints_params)
static const pf_param_desc params[] = {
    PF_FLOAT_PARAM(prints_params, gain, 1, 0, 4, "factor on RGB")};
static const pf_stage_desc stage = {PF_POINT_DESC(prints, prints_params, pf_src_prints_ops),
                                    .name = "sdk_prints", .doc = "RGB * gain, printing the gain",
                                    .n_inputs = 1, PF_PARAMS(params)};
static const pf_stage_desc *const stages[] = {&stage};
PF_DEFINE_PLUGIN("prints", "1.0", "an op that calls printf", stages)
