/* engine/jpeg_internal.h: what jpeg.c (the codec) and jpeg_meta.c (metadata, always
 * built) share. */
#ifndef PF_JPEG_INTERNAL_H
#define PF_JPEG_INTERNAL_H

#include <stddef.h>

#include "pipefuse/jpeg.h"

struct pf_jpeg_meta {
    unsigned char *icc; /* the whole profile */
    size_t icc_size;
    unsigned char *exif; /* the TIFF structure, without "Exif\0\0" */
    size_t exif_size;
};

/* The EXIF orientation in a TIFF structure: 1-8, or 0 when there is none or it is out of
   range or the structure is malformed. *at (may be NULL) gets the offset of its 16-bit
   value, to reset it in a copy. */
int pf_exif_orientation(const unsigned char *tiff, size_t n, size_t *at);

/* Sets the orientation at `at` (from pf_exif_orientation) to 1, in tiff's byte order. */
void pf_exif_reset_orientation(unsigned char *tiff, size_t n, size_t at);

/* A new meta owning copies of icc and exif (TIFF, no prefix); NULL when out of memory. */
pf_jpeg_meta *pf_jpeg_meta_make(const void *icc, size_t icc_size, const void *exif,
                                size_t exif_size);

/* A copy of the JPEG stream in (n bytes, SOI first, as an encoder wrote it) with m's EXIF
   (APP1, in place of a JFIF APP0) and its ICC profile (APP2 segments, when it is of the
   colour kind of `channels`) after SOI, in a malloc'd *out. PF_OK or PF_NO_MEMORY. */
int pf_jpeg_splice_meta(const unsigned char *in, size_t n, const pf_jpeg_meta *m, int channels,
                        unsigned char **out, size_t *out_n);

#endif
