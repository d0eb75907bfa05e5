/* tests/jpeg/jpeg_make.h: JPEG test files made with libjpeg directly (not through
 * pipefuse), in every form the reader must take, and libjpeg's own decode of a file as
 * the reference. */
#ifndef PF_TEST_JPEG_MAKE_H
#define PF_TEST_JPEG_MAKE_H

#include <stddef.h>

typedef struct jm_opts {
    int w, h;
    int space;  /* 1 gray, 3 YCbCr (from RGB), 4 CMYK (Adobe), 5 YCCK (Adobe), 6 RGB */
    int hs, vs; /* luma sampling factors over chroma: 2x2 4:2:0 ... (colour) */
    int progressive;
    int restart_rows; /* restart interval in MCU rows (0: none) */
    int arith;
    int quality;     /* 0: 90 */
    int orientation; /* 0: no EXIF */
    const unsigned char *icc;
    size_t icc_size;
    unsigned seed;
} jm_opts;

/* A w x h JPEG of a smooth pattern with mild noise (malloc'd; free with free()). */
unsigned char *jm_make(const jm_opts *o, size_t *size);
/* The same made from the caller's samples (1, 3 or 4 a pixel, rows packed). */
unsigned char *jm_make_from(const jm_opts *o, const unsigned char *pixels, size_t *size);

/* libjpeg's decode of data as stored (no orientation): gray, RGB, or CMYK as stored
   (space 4/5); *ch gets the samples a pixel. malloc'd, rows packed. NULL on failure. */
unsigned char *jm_decode(const unsigned char *data, size_t size, int *w, int *h, int *ch);

#endif
