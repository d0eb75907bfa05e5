/* samples/plugin/zones.h: the `zones` reduce stage's params and per-pixel maths, shared
 * by the CPU code (darkroom.c) and the CUDA kernels (darkroom_cuda.cu), so both sort a
 * pixel into the same zone.
 */
#ifndef DARKROOM_ZONES_H
#define DARKROOM_ZONES_H

#include "pipefuse/point.h"

#define ZONES_MAX 16 /* the largest `zones`; the CUDA side sizes its arrays with it */

typedef struct zones_params {
    int zones; /* luma [0, 1] split into this many equal zones, 2..ZONES_MAX */
} zones_params;

/* The zone of a pixel by its Rec. 709 luma: below 0 (or NaN) the first, 1 and above the
   last. */
PF_POINT_FN int zones_of(int zones, float luma)
{
    if (!(luma > 0.0f))
        return 0;
    int z = (int)(luma * (float)zones);
    return z < zones ? z : zones - 1;
}

#endif
