/* my_ops.h: the plugin's point ops and params structs. Compiled as C, as CUDA and by
 * NVRTC for fused kernels: include only pipefuse/point.h, mark every function
 * PF_POINT_FN, keep params to float / int / float arrays, no globals. */
#ifndef MY_OPS_H
#define MY_OPS_H

#include "pipefuse/point.h"

typedef struct my_gain_params {
    float gain; /* TODO: your fields (float, int, float[N] only) */
} my_gain_params;

/* TODO: your op. in[k] is input k at this pixel; pos its position in the whole image. */
PF_POINT_FN pf_float4 my_gain(const my_gain_params *p, const pf_float4 *in, pf_pos pos)
{
    (void)pos; /* not used here: this op does not depend on where the pixel is */
    pf_float4 c = in[0];
    return pf_f4(c.x * p->gain, c.y * p->gain, c.z * p->gain, c.w);
}

/* A stencil's params live here too when its CUDA kernel needs them. */
typedef struct my_blur3_params {
    float mix; /* 0: the input, 1: the 3x3 mean */
} my_blur3_params;

/* The stencil's per-pixel maths, shared by the CPU loop and the CUDA kernel.
   n: the 3x3 neighbourhood, row-major from the top left. */
PF_POINT_FN pf_float4 my_blur3_pixel(const my_blur3_params *p, const pf_float4 *n)
{
    pf_float4 s = pf_f4(0, 0, 0, 0);
    for (int i = 0; i < 9; i++)
        s = pf_f4(s.x + n[i].x, s.y + n[i].y, s.z + n[i].z, s.w + n[i].w);
    const float k = 1.0f / 9.0f;
    return pf_f4(pf_lerpf(n[4].x, s.x * k, p->mix), pf_lerpf(n[4].y, s.y * k, p->mix),
                 pf_lerpf(n[4].z, s.z * k, p->mix), pf_lerpf(n[4].w, s.w * k, p->mix));
}

#endif
