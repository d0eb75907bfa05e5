/* tests/sdk/descriptors/false_per_channel.c: two point stages that declare
 * PF_STAGE_PER_CHANNEL falsely: a gray (channel c depends on the other channels) and a
 * horizontal ramp (the output depends on the position). The CPU executor runs such stages
 * as tables per channel on 8- and 16-bit frames, so the claim gives wrong pixels; plugin
 * check must fail it, and pass the same flag on an honest gain. */
#include "../broken/common.h"

PF_POINT_FN pf_float4 mean_gray(const gain_params *p, const pf_float4 *in, pf_pos pos)
{
    float l = (in[0].x + in[0].y + in[0].z) * (1.0f / 3.0f) * p->gain;
    return pf_f4(l, l, l, in[0].w);
}

PF_POINT_FN pf_float4 ramp(const gain_params *p, const pf_float4 *in, pf_pos pos)
{
    float k = p->gain * (float)pos.x / (float)pos.width;
    return pf_f4(in[0].x * k, in[0].y * k, in[0].z * k, in[0].w);
}

PF_POINT_ROW(mean_gray, gain_params)
PF_POINT_ROW(ramp, gain_params)
PF_POINT_ROW(broken_gain, gain_params)
static const pf_param_desc table[] = {PF_FLOAT_PARAM(gain_params, gain, 1, 0, 4, "factor on RGB")};
static const pf_stage_desc gray = {PF_POINT_DESC(mean_gray, gain_params, NULL),
                                   .name = "sdk_pc_gray",
                                   .doc = "mean of RGB, times gain",
                                   .n_inputs = 1,
                                   PF_PARAMS(table),
                                   .flags = PF_STAGE_PER_CHANNEL};
static const pf_stage_desc ramp_d = {PF_POINT_DESC(ramp, gain_params, NULL),
                                     .name = "sdk_pc_ramp",
                                     .doc = "RGB * gain * x / width",
                                     .n_inputs = 1,
                                     PF_PARAMS(table),
                                     .flags = PF_STAGE_PER_CHANNEL};
static const pf_stage_desc honest = {PF_POINT_DESC(broken_gain, gain_params, NULL),
                                     .name = "sdk_pc_gain",
                                     .doc = "RGB * gain",
                                     .n_inputs = 1,
                                     PF_PARAMS(table),
                                     .flags = PF_STAGE_PER_CHANNEL};
static const pf_stage_desc *const stages[] = {&gray, &ramp_d, &honest};
PF_DEFINE_PLUGIN("false_per_channel", "1.0", "false per-channel claims", stages)
