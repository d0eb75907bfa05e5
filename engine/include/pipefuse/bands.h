/* pipefuse/bands.h: large images in bands of rows, from decode to encode.
 *
 * A pipeline of point and stencil stages computes any band of output rows from the
 * input rows of that band plus a halo above and below (the stencils' radii along the
 * deepest path). A program can then read a PNG a band at a time, run each band as a
 * frame of its own and write the output rows as they come, holding a few bands instead
 * of the whole image and every whole-frame intermediate (`pipefuse run` does so for
 * large images, docs/batch.md). The results are the whole-frame results, bit for bit,
 * when each band is given its halo and a band that reaches the image's top or bottom
 * edge starts or ends there (stages clamp their reads at the frame's edges, which are
 * then the image's).
 *
 * pf_png_rows reads a non-interlaced PNG row by row in the formats pf_png_read gives,
 * with the same checks and messages; interlaced (Adam7) files cannot be read in one pass
 * of rows and are refused (read them whole).
 */
#ifndef PIPEFUSE_BANDS_H
#define PIPEFUSE_BANDS_H

#include "pipefuse/png.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether p can run in bands of rows: PF_OK with *halo, the rows of input context a band
   of output rows needs on each side (0 for point stages only). PF_UNSUPPORTED, with the
   reason in why, when a used stage is a resample or reduce stage (it needs the whole
   frame), when a point op may read the pixel's position (pf_pos: a band would see its
   own position; an op counts as reading it when its source text (point_source) names the
   position parameter in its body, in a macro its body uses or in a call, or when it has
   no source text and does not declare PF_STAGE_PER_CHANNEL). Unused stages do not count. With several
   inputs each is given the same band (they have one shape). Reads p only; the current
   params count (a radius follows them). */
int pf_pipeline_band_halo(const pf_pipeline *p, int *halo, char *why, size_t why_size);

/* ---- PNG rows ------------------------------------------------------------------------- */

typedef struct pf_png_rows pf_png_rows;

/* Opens a PNG for reading by rows: reads the header (and, with meta not NULL, the
   metadata chunks as pf_png_read_meta keeps them, including those stored after the image
   data: the file's chunk list is walked first, and when such chunks exist the image data
   is decoded once more, row by row, to reach them). *format gets the frame format of the
   rows (width, height, sample, channels; data NULL). Fails as pf_png_read does (PF_IO,
   PF_IMAGE, PF_TOO_LARGE, PF_NO_MEMORY), or PF_UNSUPPORTED for an interlaced file (read
   it whole with pf_png_read) and for an animated PNG (which pf_png_read refuses too, with
   the same message). */
int pf_png_rows_open(const char *path, unsigned long long max_pixels, pf_png_rows **out,
                     pf_frame *format, pf_png_info *info, pf_png_meta **meta, char *err,
                     size_t err_size);

/* Reads the next n rows into rows 0..n-1 of dst (of the format open gave, any pitch).
   After the last row it reads to the end of the file (IEND), so a truncated or corrupt
   file fails there. On failure the message names the file and the row being read. */
int pf_png_rows_read(pf_png_rows *r, pf_frame *dst, int n, char *err, size_t err_size);

/* The rows read so far. */
int pf_png_rows_done(const pf_png_rows *r);

/* Closes the file and frees r (NULL: nothing). */
void pf_png_rows_close(pf_png_rows *r);

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_BANDS_H */
