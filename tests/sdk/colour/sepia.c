/* tests/sdk/colour/sepia.c: a point stage that makes colour from any input, and declares
 * it (out_channels 3), so that an "auto" output of a gray photo through it is RGB. CPU
 * only (no point source): the channels do not depend on the backend. */
#include "pipefuse/plugin.h"

typedef struct sepia_params {
    float amount;
} sepia_params;

PF_POINT_FN pf_float4 sepia(const sepia_params *p, const pf_float4 *in, pf_pos pos)
{
    (void)pos;
    float l = pf_luma(in[0]);
    return pf_f4(pf_lerpf(in[0].x, pf_minf(l * 1.07f, 1.0f), p->amount),
                 pf_lerpf(in[0].y, l * 0.74f, p->amount), pf_lerpf(in[0].z, l * 0.43f, p->amount),
                 in[0].w);
}

PF_POINT_ROW(sepia, sepia_params)
static const pf_param_desc params[] = {
    PF_FLOAT_PARAM(sepia_params, amount, 1, 0, 1, "0: unchanged, 1: full sepia")};
static const pf_stage_desc stage = {.size = PF_STAGE_DESC_SIZE,
                                    .kind = PF_STAGE_POINT,
                                    .name = "sepia",
                                    .doc = "Sepia toning; its output is colour",
                                    .n_inputs = 1,
                                    .params_size = sizeof(sepia_params),
                                    PF_PARAMS(params),
                                    .point_row = sepia_row,
                                    .out_channels = 3};
static const pf_stage_desc *const stages[] = {&stage};
PF_DEFINE_PLUGIN("photofx", "1.0", "a colour-making stage", stages)
