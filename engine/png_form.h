/* engine/png_form.h: what png_form.c (output forms, pHYs through geometry) needs from
 * png.c's metadata: the source's header, palette and whether it carries an ICC profile. */
#ifndef PF_PNG_FORM_H
#define PF_PNG_FORM_H

#include "pipefuse/png.h"

typedef struct pf_png_source {
    int width, height, bit_depth, color_type; /* the source's IHDR */
    int has_iccp;
    int n_palette, n_trans; /* PLTE entries (0: none) and tRNS entries of a palette source */
    const unsigned char *palette, *trans;
} pf_png_source;

/* The source meta was read from (meta not NULL). */
void pf_png_meta_source(const pf_png_meta *meta, pf_png_source *src);

#endif
