/* tests/sdk/broken/cxx_only_ops.h: an op that is valid C but not C++ (a void pointer
 * converted without a cast, on the line marked below): the CPU build compiles it,
 * NVRTC (C++) does not. */
#ifndef CXX_ONLY_OPS_H
#define CXX_ONLY_OPS_H

#include "pipefuse/point.h"

typedef struct cxx_only_params {
    float gain;
} cxx_only_params;

PF_POINT_FN pf_float4 cxx_only(const cxx_only_params *p, const pf_float4 *in, pf_pos pos)
{
    const float *g = (const void *)&p->gain; /* line 15: C only */
    return pf_f4(in[0].x * *g, in[0].y * *g, in[0].z * *g, in[0].w);
}

#endif
