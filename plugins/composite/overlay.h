/* plugins/composite/overlay.h: params of the overlay stage (composite family), shared by
 * composite.c, composite_cuda.cu and the tests. An overlay of any size is laid over the
 * base at a position or a gravity (a watermark); the output has the base's size. */
#ifndef PF_PLUGIN_OVERLAY_H
#define PF_PLUGIN_OVERLAY_H

#include "../geometry/geometry.h" /* gravities: PF_GRAVITY_*, pf_gravity_x/y */

typedef struct pf_overlay_params {
    int x, y;      /* offset: from the top left, or inward from the gravity's anchor */
    int gravity;   /* PF_GRAVITY_* */
    float opacity; /* factor on the overlay's alpha */
} pf_overlay_params;

#endif /* PF_PLUGIN_OVERLAY_H */
