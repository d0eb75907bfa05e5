/* tests/sdk/broken/stateful.c: a point stage that keeps global state: each call of its
 * row function adds a little more, so no two runs agree. */
#include "common.h"

static unsigned calls; /* the fault */

static void stateful_row(const void *params, const pf_float4 *const *in, int n_in, pf_float4 *out,
                         int x0, int n, int y, int width, int height)
{
    float drift = 1e-3f * (float)(__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) % 97);
    for (int i = 0; i < n; i++)
        out[i] = pf_f4(in[0][i].x + drift, in[0][i].y, in[0][i].z, in[0][i].w);
}

static const pf_stage_desc drift = {.size = PF_STAGE_DESC_SIZE,
                                    .name = "sdk_stateful",
                                    .doc = "R + a drift that grows with every call",
                                    .kind = PF_STAGE_POINT,
                                    .n_inputs = 1,
                                    .params_size = sizeof(gain_params),
                                    .point_row = stateful_row};
static const pf_stage_desc *const stages[] = {&drift};
PF_DEFINE_PLUGIN("stateful", "1.0", "global state in a stage", stages)
