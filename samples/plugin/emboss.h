/* samples/plugin/emboss.h: the `emboss` stencil stage's params and per-pixel maths,
 * shared by the CPU code (darkroom.c) and the CUDA kernel (darkroom_cuda.cu).
 *
 * It is also the stage's point source (pipefuse_add_plugin(... POINT_OPS emboss.h)), and
 * emboss_fused, the output pixel from its 3x3 neighbourhood, is its stencil_fn: on the
 * GPU the engine runs it in a kernel of its own that stages the tile in shared memory,
 * runs the point stages producing the stencil's input on the tile and those reading its
 * result before it stores, so neither image is written. So this header follows the rules
 * of a point-op header: it includes only pipefuse/point.h, every function is PF_POINT_FN
 * (`static inline` in C, `__device__` in CUDA), and it calls only the maths functions
 * docs/plugins.md lists. run_cpu and the CUDA kernel call emboss_fused too: the CPU, the
 * stage's own kernel and the engine's fused kernel compute the same thing by
 * construction, which `pipefuse plugin check` verifies on the CPU.
 */
#ifndef DARKROOM_EMBOSS_H
#define DARKROOM_EMBOSS_H

#include "pipefuse/point.h"

typedef struct emboss_params {
    float angle;    /* direction the light comes from, degrees counter-clockwise from +x */
    float strength; /* factor on the directional gradient */
    int gray;       /* bool: output the luma of the relief instead of per-channel relief */
} emboss_params;

/* The light's direction as a unit vector (dx, dy), image rows growing downwards. Done
   once per launch, not per pixel. */
PF_POINT_FN void emboss_direction(const emboss_params *p, float *dx, float *dy)
{
    float a = p->angle * 0.017453292519943295f; /* degrees to radians */
    *dx = cosf(a);
    *dy = -sinf(a);
}

/* Sobel derivative along (dx, dy) of one channel, n = the 3x3 neighbourhood row-major
   from the top left, scaled to about [-1, 1] for a step of 1. */
PF_POINT_FN float emboss_slope(const float *n, float dx, float dy)
{
    float gx = (n[2] + 2.0f * n[5] + n[8]) - (n[0] + 2.0f * n[3] + n[6]);
    float gy = (n[6] + 2.0f * n[7] + n[8]) - (n[0] + 2.0f * n[1] + n[2]);
    return (gx * dx + gy * dy) * 0.25f;
}

/* The output pixel from the 3x3 neighbourhood: 0.5 + strength * slope, per RGB channel
   or on the luma (gray); alpha of the centre pixel. */
PF_POINT_FN pf_float4 emboss_pixel(const emboss_params *p, const pf_float4 *n, float dx, float dy)
{
    float r[9], g[9], b[9];
    for (int i = 0; i < 9; i++) {
        r[i] = n[i].x;
        g[i] = n[i].y;
        b[i] = n[i].z;
    }
    float sr = emboss_slope(r, dx, dy), sg = emboss_slope(g, dx, dy), sb = emboss_slope(b, dx, dy);
    if (p->gray) {
        float l = 0.5f + p->strength * (0.2126f * sr + 0.7152f * sg + 0.0722f * sb);
        return pf_f4(l, l, l, n[4].w);
    }
    return pf_f4(0.5f + p->strength * sr, 0.5f + p->strength * sg, 0.5f + p->strength * sb, n[4].w);
}

/* The stencil_fn: `pf_float4 fn(const T *params, const pf_float4 *n)`, n[0..8] the 3x3
   input pixels row-major from the top left (n[4] the centre), clamped at the edges. */
PF_POINT_FN pf_float4 emboss_fused(const emboss_params *p, const pf_float4 *n)
{
    float dx, dy;
    emboss_direction(p, &dx, &dy);
    return emboss_pixel(p, n, dx, dy);
}

#endif /* DARKROOM_EMBOSS_H */
