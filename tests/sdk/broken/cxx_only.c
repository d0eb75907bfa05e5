/* tests/sdk/broken/cxx_only.c: a point stage whose op header NVRTC cannot compile
 * (cxx_only_ops.h): plugin check and `pipefuse check` must fail naming that header and
 * line, and blame no other stage of the fused kernel. */
#include "cxx_only_ops.h"
#include "pipefuse/plugin.h"

extern const char pf_src_cxx_only_ops[];

PF_POINT_ROW(cxx_only, cxx_only_params)
static const pf_param_desc params[] = {
    PF_FLOAT_PARAM(cxx_only_params, gain, 1, 0, 4, "factor on RGB")};
static const pf_stage_desc stage = {PF_POINT_DESC(cxx_only, cxx_only_params, pf_src_cxx_only_ops),
                                    .name = "sdk_cxx_only", .doc = "RGB * gain, written in C only",
                                    .n_inputs = 1, PF_PARAMS(params)};
static const pf_stage_desc *const stages[] = {&stage};
PF_DEFINE_PLUGIN("cxx_only", "1.0", "an op header that is not C++", stages)
