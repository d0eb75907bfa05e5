/* tests/sdk/twins/twin_a.c: one of two plugins made from the skeleton (twin_a, twin_b):
 * each has a stage named "tint" and an op header guarded by MY_OPS_H. Pipelines name
 * them twin_a.tint and twin_b.tint; fused, both headers meet in one kernel. */
#include "pipefuse/plugin.h"
#include "twin_a_ops.h"

extern const char pf_src_twin_a_ops[];

PF_POINT_ROW(twin_a_tint, twin_params)
static const pf_param_desc params[] = {
    PF_FLOAT_PARAM(twin_params, amount, 0.1f, -1, 1, "added to RGB (scaled)")};
static const pf_stage_desc tint = {PF_POINT_DESC(twin_a_tint, twin_params, pf_src_twin_a_ops),
                                   .name = "tint", .doc = "RGB plus a scaled amount", .n_inputs = 1,
                                   PF_PARAMS(params)};
static const pf_stage_desc *const stages[] = {&tint};
PF_DEFINE_PLUGIN("twin_a", "1.0", "a plugin made from the skeleton", stages)
