/* plugins/filter/filter.h: params of the filter family (stencil stages), shared by the
 * plugin and its tests. Fields are float or int only (see point.h). */
#ifndef PF_PLUGIN_FILTER_H
#define PF_PLUGIN_FILTER_H

#define PF_GAUSSIAN_MAX_SIGMA 64 /* so the radius, ceil(3 * sigma), is at most 192 */
#define PF_BOX_MAX_RADIUS     64

#include "../premultiply.h" /* PF_ALPHA_*: the alpha param of gaussian, box and unsharp */

typedef struct pf_gaussian_params {
    float sigma; /* standard deviation in pixels; 0: identity */
    int alpha;   /* PF_ALPHA_* */
} pf_gaussian_params;

typedef struct pf_box_params {
    int radius; /* mean over (2 * radius + 1)^2 pixels */
    int alpha;  /* PF_ALPHA_* */
} pf_box_params;

typedef struct pf_sobel_params {
    float scale; /* factor on the gradient magnitude */
} pf_sobel_params;

typedef struct pf_unsharp_params {
    float sigma;     /* of the gaussian the detail is taken against */
    float amount;    /* out = in + amount * (in - blurred) */
    float threshold; /* only where |in - blurred| > threshold */
    int alpha;       /* PF_ALPHA_*: how the blur treats alpha */
} pf_unsharp_params;

/* The 19 compare-exchanges of Paeth's median-of-9 network, in order, shared by the CPU
   and CUDA median3: SORT2(i, j) leaves the smaller of p[i], p[j] in p[i]. */
#define FILTER_MEDIAN9_NETWORK(SORT2)                                                              \
    SORT2(1, 2);                                                                                   \
    SORT2(4, 5);                                                                                   \
    SORT2(7, 8);                                                                                   \
    SORT2(0, 1);                                                                                   \
    SORT2(3, 4);                                                                                   \
    SORT2(6, 7);                                                                                   \
    SORT2(1, 2);                                                                                   \
    SORT2(4, 5);                                                                                   \
    SORT2(7, 8);                                                                                   \
    SORT2(0, 3);                                                                                   \
    SORT2(5, 8);                                                                                   \
    SORT2(4, 7);                                                                                   \
    SORT2(3, 6);                                                                                   \
    SORT2(1, 4);                                                                                   \
    SORT2(2, 5);                                                                                   \
    SORT2(4, 7);                                                                                   \
    SORT2(4, 2);                                                                                   \
    SORT2(6, 4);                                                                                   \
    SORT2(4, 2)

/* median3 takes no params. */

#endif /* PF_PLUGIN_FILTER_H */
