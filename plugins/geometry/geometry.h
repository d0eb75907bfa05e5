/* plugins/geometry/geometry.h: params of the geometry family (resample stages), shared
 * by the plugin and its tests. Fields are float or int only (enums are int indices). */
#ifndef PF_PLUGIN_GEOMETRY_H
#define PF_PLUGIN_GEOMETRY_H

#define PF_GEOMETRY_MAX_SIDE   262144    /* largest output width or height */
#define PF_GEOMETRY_MAX_PIXELS (1 << 30) /* largest output area (16 GiB of float RGBA) */

enum { PF_RESIZE_BILINEAR, PF_RESIZE_NEAREST, PF_RESIZE_AREA };
typedef struct pf_resize_params {
    int width, height; /* 0: derived from the other keeping the aspect, both 0: scale */
    float scale;       /* used when width and height are both 0 */
    int mode;          /* PF_RESIZE_* */
} pf_resize_params;

typedef struct pf_crop_params {
    int x, y;          /* top left corner in the input */
    int width, height; /* 0: up to the right (bottom) edge */
} pf_crop_params;

enum { PF_FLIP_HORIZONTAL, PF_FLIP_VERTICAL, PF_FLIP_BOTH };
typedef struct pf_flip_params {
    int axis; /* PF_FLIP_* */
} pf_flip_params;

enum { PF_ROTATE_90, PF_ROTATE_180, PF_ROTATE_270 };
typedef struct pf_rotate_params {
    int angle; /* PF_ROTATE_*, clockwise */
} pf_rotate_params;

typedef struct pf_pad_params {
    int left, right, top, bottom; /* pixels added on each side */
    float color[4];               /* RGBA of the added pixels */
} pf_pad_params;

#endif /* PF_PLUGIN_GEOMETRY_H */
