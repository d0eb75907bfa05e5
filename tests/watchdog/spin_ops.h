/* tests/watchdog/spin_ops.h: a point op whose cost per pixel is a parameter. It spins
 * `iters` dependent multiply-adds and returns its input exactly (a - a is 0 for the
 * finite a it computes, and no compiler may assume so without fast-math), so split
 * and unsplit runs must agree bit for bit. */
#ifndef SPIN_OPS_H
#define SPIN_OPS_H

#include "pipefuse/point.h"

typedef struct spin_params {
    int iters;
} spin_params;

/* spin_fault: a copy on the CPU; on the GPU, with `trap` set, the kernel traps, which
   ends the CUDA context (a sticky error), for the lost-engine test. */
typedef struct spin_fault_params {
    int trap;
} spin_fault_params;

PF_POINT_FN float spin_zero(int iters, float seed)
{
    float a = seed;
    for (int i = 0; i < iters; i++)
        a = a * 0.999f + 0.001f;
    return a - a;
}

PF_POINT_FN pf_float4 spin_point(const spin_params *p, const pf_float4 *in, pf_pos pos)
{
    float z = spin_zero(p->iters, in[0].x);
    return pf_f4(in[0].x + z, in[0].y + z, in[0].z + z, in[0].w + z);
}

#endif
