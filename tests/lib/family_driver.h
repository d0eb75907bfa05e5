/* tests/lib/family_driver.h: a driver for the tests of the non-point stage families
 * (filter, geometry, analysis). It checks a family's descriptors and param tables and
 * that its stage names are unique over every built plugin, and runs an image stage
 * whole, in bands of 1, 3 and 7 rows (which must be bit-identical to the whole run) and
 * on one band alone (nothing outside it may be written), into poisoned outputs, against a
 * reference image within a stated tolerance. */
#ifndef PF_FAMILY_DRIVER_H
#define PF_FAMILY_DRIVER_H

#include "stage_harness.h"

typedef void (*fd_test_fn)(pf_rng *r);

/* A family test's main: the family's descriptors (plugin, its stage names in order and
   their kind), then each test with a seed of its own. Returns pf_test_done(test). */
int fd_main(const char *test, const char *plugin, pf_stage_kind kind, const char *const *names,
            int n_names, const fd_test_fn *tests, int n_tests);

/* Runs d on in every way (see above). The whole run must match want, or alt where a
   pixel may round either way across a threshold (alt NULL: none). */
void fd_check_image_stage(const pf_stage_desc *d, const void *params, const pf_image *in,
                          const pf_image *want, const pf_image *alt, double tol, const char *label);

/* Whether two images have the same bits. */
int fd_same_bits(const pf_image *a, const pf_image *b);
/* The least and greatest colour sample (r, g, b) of im, from 0 and 0; a NaN is least. */
void fd_colour_range(const pf_image *im, float *lo, float *hi);
/* |got - want| within tol, relative where |want| > 1; the same infinity, or NaN for NaN. */
int fd_close(double got, double want, double tol);
/* RGBA of the pixel at (x, y), clamped to the edge, in double; and a pixel set from it. */
void fd_px(const pf_image *im, int x, int y, double v[4]);
void fd_set(pf_image *im, int x, int y, const double v[4]);

#endif
