/* tests/sdk/twins/twin_b_ops.h: made from the skeleton, as twin_a_ops.h is: the same
 * include guard, the same macro with another value, a helper of the same name. */
#ifndef MY_OPS_H
#define MY_OPS_H

#include "pipefuse/point.h"

#define MY_FACTOR 2.0f

typedef struct twin_params {
    float amount;
} twin_params;

PF_POINT_FN float my_mix(float v, float amount)
{
    return v + amount * MY_FACTOR;
}

/* RGB + amount * 2 */
PF_POINT_FN pf_float4 twin_b_tint(const twin_params *p, const pf_float4 *in, pf_pos pos)
{
    return pf_f4(my_mix(in[0].x, p->amount), my_mix(in[0].y, p->amount), my_mix(in[0].z, p->amount),
                 in[0].w);
}

#endif
