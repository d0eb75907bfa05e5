/* tests/lib/stage_harness.h: runs one stage straight from its plugin's descriptor, with
 * no engine in between, so that stage tests check the stage and nothing else (part of
 * the test harness library, pf_testlib). */
#ifndef PF_STAGE_HARNESS_H
#define PF_STAGE_HARNESS_H

#include "testutil.h"

/* dlopens PF_PLUGIN_DIR/<plugin>.so and returns its stage named name, or exits. */
const pf_stage_desc *h_stage(const char *plugin, const char *name);

/* A params struct filled with the table's defaults (free with free()). */
void *h_params(const pf_stage_desc *d);

/* Output shape of a stage for one input shape (same shape for point and stencil). */
pf_shape h_out_shape(const pf_stage_desc *d, const void *params, pf_shape in);

/* Runs a point, stencil or resample stage over the whole output in bands of
   band_rows rows (0: one band), into out (allocated by the caller at h_out_shape).
   Returns the stage's status. */
int h_run(const pf_stage_desc *d, const void *params, const pf_image *in, int n_in, pf_image *out,
          int band_rows);

/* Runs a reduce stage in bands of band_rows input rows (0: one band) and combines.
   *result is malloc'd rows*cols doubles (free with free()). */
int h_reduce(const pf_stage_desc *d, const void *params, const pf_image *in, int n_in,
             int band_rows, double **result, int *rows, int *cols);

/* An image with alpha, as files with alpha give: alpha in [0, 1], about a quarter of
   the pixels transparent (alpha 0) with garbage colour (huge, negative, infinite or
   NaN), a quarter opaque (alpha 1), colour in [0, 1] elsewhere. With bits 8 or 16 every
   value but the garbage is a code k / (2^bits - 1), as an integer file loads; with 0,
   any float. */
pf_image h_alpha_image(pf_rng *r, int w, int h, int bits);

#endif
