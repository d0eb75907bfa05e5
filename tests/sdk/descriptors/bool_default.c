/* tests/sdk/descriptors/bool_default.c: a bool row written by hand, as the sample's emboss
 * `gray` is, but defaulting to true: `.def = 1` and no bounds. A bool has no range, so the
 * plugin loads and passes its checks (it was refused as "default 1 is outside its range
 * [0, 0]"). */
#include "../broken/common.h"

typedef struct flag_params {
    float gain;
    int on;
} flag_params;

PF_POINT_FN pf_float4 flag_gain(const flag_params *p, const pf_float4 *in, pf_pos pos)
{
    float k = p->on ? p->gain : 1.0f;
    return pf_f4(in[0].x * k, in[0].y * k, in[0].z * k, in[0].w);
}

PF_POINT_ROW(flag_gain, flag_params)
static const pf_param_desc table[] = {
    PF_FLOAT_PARAM(flag_params, gain, 2, 0, 4, "factor on RGB while on"),
    {"on", "apply the gain", PF_OFFSET(flag_params, on), PF_PARAM_BOOL, .def = 1},
};
static const pf_stage_desc stage = {PF_POINT_DESC(flag_gain, flag_params, NULL),
                                    .name = "sdk_bool_default", .doc = "RGB * gain while on",
                                    .n_inputs = 1, PF_PARAMS(table)};
static const pf_stage_desc *const stages[] = {&stage};
PF_DEFINE_PLUGIN("bool_default", "1.0", "a hand-written bool row defaulting to true", stages)
