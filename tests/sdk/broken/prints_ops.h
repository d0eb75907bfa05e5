/* tests/sdk/broken/prints_ops.h: an op that prints (line 15): it compiles for the CPU
 * (prints.c includes stdio.h first) and under NVRTC, and prints from every pixel. */
#ifndef PRINTS_OPS_H
#define PRINTS_OPS_H

#include "pipefuse/point.h"

typedef struct prints_params {
    float gain;
} prints_params;

PF_POINT_FN pf_float4 prints(const prints_params *p, const pf_float4 *in, pf_pos pos)
{
    if (pos.x == 0 && pos.y == 0)
        printf("gain %f\n", (double)p->gain);
    return pf_f4(in[0].x * p->gain, in[0].y * p->gain, in[0].z * p->gain, in[0].w);
}

#endif
