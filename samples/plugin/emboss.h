/* samples/plugin/emboss.h: the `emboss` stencil stage's params and per-pixel maths,
 * shared by the CPU code (darkroom.c) and the CUDA kernel (darkroom_cuda.cu).
 *
 * A stencil is not fused, so nothing here goes to NVRTC; but writing the per-pixel
 * maths once, as a PF_POINT_FN function of the 3x3 neighbourhood, keeps the CPU and
 * GPU results equal by construction (PF_POINT_FN is `static inline` in C and
 * `__device__` in CUDA, see pipefuse/point.h). Only the loops that walk the image
 * differ between the two.
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

#endif /* DARKROOM_EMBOSS_H */
