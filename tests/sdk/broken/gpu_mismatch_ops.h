/* tests/sdk/broken/gpu_mismatch_ops.h: a point op whose CUDA and NVRTC builds compute
 * something else than its CPU build (an #ifdef on the compiler), the mistake that only a
 * run on a GPU shows. */
#ifndef SDK_GPU_MISMATCH_OPS_H
#define SDK_GPU_MISMATCH_OPS_H

#include "pipefuse/point.h"

typedef struct mismatch_params {
    float gain;
} mismatch_params;

PF_POINT_FN pf_float4 mismatch_gain(const mismatch_params *p, const pf_float4 *in, pf_pos pos)
{
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
    float g = p->gain + 0.25f; /* the fault */
#else
    float g = p->gain;
#endif
    return pf_f4(in[0].x * g, in[0].y * g, in[0].z * g, in[0].w);
}

#endif
