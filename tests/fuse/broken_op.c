/* tests/fuse/broken_op.c: a point stage whose CPU op works but whose source text for
 * NVRTC has an error, to test how a failed fused compile is reported. */
#include "pipefuse/plugin.h"

typedef struct broken_params {
    float k;
} broken_params;

static inline pf_float4 broken_scale(const broken_params *p, const pf_float4 *in, pf_pos pos)
{
    return pf_f4(in[0].x * p->k, in[0].y * p->k, in[0].z * p->k, in[0].w);
}
PF_POINT_ROW(broken_scale, broken_params)

static const char broken_source[] =
    "typedef struct broken_params { float k; } broken_params;\n"
    "PF_POINT_FN pf_float4 broken_scale(const broken_params *p, const pf_float4 *in, pf_pos pos)\n"
    "{\n    return in[0] * undefined_symbol;\n}\n";

static const pf_param_desc broken_table[] = {
    {"k", "scale", PF_OFFSET(broken_params, k), PF_PARAM_FLOAT, .def = 1, .min = 0, .max = 2}};
static const pf_stage_desc broken_desc = {PF_POINT_DESC(broken_scale, broken_params, broken_source),
                                          .name = "broken_scale",
                                          .doc = "scales RGB (its "
                                                 "NVRTC source is broken on purpose)",
                                          .n_inputs = 1, PF_PARAMS(broken_table)};
static const pf_stage_desc *const stages[] = {&broken_desc};
PF_DEFINE_PLUGIN("broken", "1.0", "a plugin for testing NVRTC errors", stages)
