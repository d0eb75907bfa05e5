/* tests/sdk/broken/many_faults.c: one stage with several faults: no doc string, no
 * inputs, a default outside its range, out_channels 5 and reduce_sum on a point stage.
 * `plugin check` lists them all; the engine refuses the plugin naming the first error
 * (the inputs). */
#include "common.h"

PF_POINT_ROW(broken_gain, gain_params)
static const pf_param_desc table[] = {{"gain", "factor on R, G and B", PF_OFFSET(gain_params, gain),
                                       PF_PARAM_FLOAT, .def = 25, .min = 0, .max = 10}};
static const pf_stage_desc gain = {PF_POINT_DESC(broken_gain, gain_params, NULL),
                                   .name = "sdk_many_faults",
                                   .n_inputs = 0,
                                   PF_PARAMS(table),
                                   .out_channels = 5,
                                   .reduce_sum = PF_REDUCE_SUM_ROWS};
static const pf_stage_desc *const stages[] = {&gain};
PF_DEFINE_PLUGIN("many_faults", "1.0", "several faults in one stage", stages)
