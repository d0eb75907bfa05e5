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

/* ---- Strips: pipelines with resample stages, a band of output rows at a time ----------
 *
 * pf_pipeline_band_halo's bands are frames of their own, which a resize cannot be cut
 * into. Strips are bands of the outputs' rows run on one plan for the whole image: each
 * stage computes the rows of its output the later stages need, from the rows of its
 * inputs it reads (a stencil its radius more, a resample stage what its rows_in says),
 * as on the whole frame, so every strip's rows are the whole frame's, bit for bit, and
 * each node holds only its rows of the strip. A program reads the rows each strip asks
 * of the inputs, runs it and writes its output rows: a resize, crop or any-angle rotate
 * of a photo in a fraction of the whole frames' memory. Strips run on the CPU. */

/* Whether p can run in strips: PF_OK, or PF_UNSUPPORTED with the reason in why: a used
   reduce stage (its table needs the whole frame) or a resample stage without rows_in.
   (Outputs of different heights are refused when planned.) Reads p only. */
int pf_pipeline_strips_possible(const pf_pipeline *p, char *why, size_t why_size);

/* Plans p on the CPU for whole inputs of these shapes run in strips of `rows` output
   rows (the image outputs, one height), *n_strips of them (NULL: not wanted). The
   memory limit (max_memory) counts the strips' buffers. pf_pipeline_run and the other
   frame calls plan whole frames again; a parameter change of a stencil or resample stage
   (which may move the rows it reads) drops the strip plan, and the strip calls then
   return PF_NOT_PLANNED until strips are planned again. PF_UNSUPPORTED with the reason
   in the message when p cannot run in strips. */
int pf_pipeline_plan_strips(pf_pipeline *p, const pf_shape *inputs, int n_inputs, int rows,
                            int *n_strips);

/* Strip s of the current strip plan: the output rows [*y0, *y1) it computes and, per
   input (n_inputs entries of in_rows), the rows [y0, y1) it reads ({0, 0}: none).
   Windows move down the image from strip to strip for resizes, crops, pads and stencils,
   not for a vertical flip or a quarter turn (whose first strip reads the last rows, or
   every row). */
int pf_pipeline_strip(pf_pipeline *p, int s, int *y0, int *y1, pf_region *in_rows, int n_inputs);

/* The memory a strip plan of `rows` rows needs, as pf_pipeline_memory (nothing planned:
   the current plan stays). */
int pf_pipeline_strip_memory(pf_pipeline *p, const pf_shape *inputs, int n_inputs, int rows,
                             pf_memory *m);

/* Runs strip s: inputs[i] holds input i's rows in_rows[i] of pf_pipeline_strip (its
   height that many rows; any height when none), outputs[o] receives the output rows
   [y0, y1) (its height y1 - y0; NULL data: not wanted). Synchronous, on the caller's
   thread and the engine's pool; frames in other memory than each other. */
int pf_pipeline_run_strip(pf_pipeline *p, int s, const pf_frame *inputs, int n_in,
                          pf_frame *outputs, int n_out);

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
