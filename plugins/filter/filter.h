/* plugins/filter/filter.h: params of the filter family (stencil stages), shared by the
 * plugin and its tests. Fields are float or int only (see point.h). */
#ifndef PF_PLUGIN_FILTER_H
#define PF_PLUGIN_FILTER_H

#include "../premultiply.h" /* PF_ALPHA_*: the alpha param of gaussian, box and unsharp */
/* gaussian and box's params and taps, sobel and median3's params and per-pixel
   functions: shared with NVRTC */
#include "../../kernels/point/filter3x3_ops.h"

#define PF_GAUSSIAN_MAX_SIGMA FILTER_GAUSSIAN_MAX_SIGMA
#define PF_BOX_MAX_RADIUS     FILTER_BOX_MAX_RADIUS

typedef struct pf_unsharp_params {
    float sigma;     /* of the gaussian the detail is taken against */
    float amount;    /* out = in + amount * (in - blurred) */
    float threshold; /* only where |in - blurred| > threshold */
    int alpha;       /* PF_ALPHA_*: how the blur treats alpha */
} pf_unsharp_params;

#endif /* PF_PLUGIN_FILTER_H */
