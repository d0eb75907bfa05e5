/* plugins/filter/filter.h: params of the filter family (stencil stages), shared by the
 * plugin and its tests. Fields are float or int only (see point.h). */
#ifndef PF_PLUGIN_FILTER_H
#define PF_PLUGIN_FILTER_H

#define PF_GAUSSIAN_MAX_SIGMA 64 /* so the radius, ceil(3 * sigma), is at most 192 */
#define PF_BOX_MAX_RADIUS     64

#include "../premultiply.h" /* PF_ALPHA_*: the alpha param of gaussian, box and unsharp */
/* sobel and median3: their params and per-pixel functions, shared with NVRTC */
#include "../../kernels/point/filter3x3_ops.h"

typedef struct pf_gaussian_params {
    float sigma; /* standard deviation in pixels; 0: identity */
    int alpha;   /* PF_ALPHA_* */
} pf_gaussian_params;

typedef struct pf_box_params {
    int radius; /* mean over (2 * radius + 1)^2 pixels */
    int alpha;  /* PF_ALPHA_* */
} pf_box_params;

typedef struct pf_unsharp_params {
    float sigma;     /* of the gaussian the detail is taken against */
    float amount;    /* out = in + amount * (in - blurred) */
    float threshold; /* only where |in - blurred| > threshold */
    int alpha;       /* PF_ALPHA_*: how the blur treats alpha */
} pf_unsharp_params;

#endif /* PF_PLUGIN_FILTER_H */
