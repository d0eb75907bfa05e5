/* samples/plugin/soften.h: the `soften` separable stencil's params and taps, its point
 * source (pipefuse_add_plugin(... POINT_OPS soften.h)).
 *
 * A blur whose 2D kernel is a product of one 1D kernel across and the same down is
 * separable: the engine can then run it as two generated kernels (a pass along the rows,
 * then one down the columns), running the point stages before it as each row is staged,
 * so their image is never written. The stage declares its 1D taps with separable_fn, and
 * its run_cpu (darkroom.c) computes exactly what the engine's passes compute: that
 * contract is plugin.h's and docs/plugins.md's "Separable stencils". The taps here are a
 * tent: radius + 1 - |i| at offset i, every channel summed alike (no premultiplication).
 */
#ifndef DARKROOM_SOFTEN_H
#define DARKROOM_SOFTEN_H

#include "pipefuse/point.h"

#define SOFTEN_MAX_RADIUS 16 /* the stage's separable_max */

typedef struct soften_params {
    int radius; /* 0..SOFTEN_MAX_RADIUS: the farthest pixel weighted */
} soften_params;

/* The separable_fn: returns the radius r and, for 0 <= i <= r, the unnormalised weight at
   offsets -i and +i in *tap; *premultiply 0: every channel, alpha too, summed alike. The
   engine calls it with i = -1 for the radius alone. */
PF_POINT_FN int soften_taps(const soften_params *p, int i, double *tap, int *premultiply)
{
    const int r =
        p->radius < 0 ? 0 : (p->radius > SOFTEN_MAX_RADIUS ? SOFTEN_MAX_RADIUS : p->radius);
    if (i >= 0 && i <= r)
        *tap = (double)(r + 1 - i);
    *premultiply = 0;
    return r;
}

#endif /* DARKROOM_SOFTEN_H */
