/* tests/lib/point_driver.h: a driver for any family of point stages (part of the test
 * harness library, pf_testlib): test_color.c and test_composite.c describe their stages
 * and references, the driver does the rest. Per stage it checks the descriptor and
 * param table, that the name is unique over every built plugin, that the identity
 * parameters give the input back, and then, over odd image sizes, default, edge and
 * random params, and poisoned outputs, each pixel against the reference within a stated
 * tolerance; also that splitting rows into pieces and running in place change nothing.
 */
#ifndef PF_POINT_DRIVER_H
#define PF_POINT_DRIVER_H

#include <math.h>

#include "stage_harness.h"

typedef struct pt_stage pt_stage;

/* One pixel's expected value. in[k] is input k's RGBA. May set mag[c] to the size of
   the terms that channel c sums (the scale of its rounding); returns 0 to skip a pixel
   that sits on a discontinuity (a threshold) where float and double may disagree. */
typedef int (*pt_ref_fn)(const pt_stage *s, const double in[][4], pf_pos pos, double out[4],
                         double mag[4]);

struct pt_stage {
    const char *name;
    int n_inputs;
    pt_ref_fn ref;
    double tol;        /* |got - want| <= tol * max(1, |want|, mag) */
    const char *ident; /* identity: "" the defaults, "name=value" set on them; NULL none */
    /* filled by the driver */
    const pf_stage_desc *d;
    void *params;
};
#define PT_STAGE(name, n_inputs, ref, tol, ident)                                                  \
    {                                                                                              \
        name, n_inputs, ref, tol, ident, NULL, NULL                                                \
    }

/* Input values, all four channels, are uniform in [PT_LO, PT_HI): beyond [0, 1], as
   nothing clamps unless it says so. */
#define PT_LO (-0.25f)
#define PT_HI 1.25f

/* A param's descriptor by name, or exit(1). */
const pf_param_desc *pt_param(const pt_stage *s, const char *name);
/* A param's value (element i of an array) read through the stage's own table. */
double pt_geti(const pt_stage *s, const char *name, int i);
double pt_get(const pt_stage *s, const char *name);
/* Element i of param p set to v. */
void pt_set(const pt_stage *s, const pf_param_desc *p, int i, double v);
/* The params back to the table's defaults. */
void pt_reset(pt_stage *s);

/* Inputs for s, random in [lo, hi), and a poisoned output, all w x h. */
typedef struct pt_images {
    pf_image in[PF_MAX_INPUTS], out;
    int n;
} pt_images;
pt_images pt_images_new(const pt_stage *s, pf_rng *r, int w, int h, float lo, float hi);
void pt_images_free(pt_images *im);

/* For pt_hand: a channel left as it is. */
#define KEEP NAN
#define KEEP4                                                                                      \
    {                                                                                              \
        KEEP, KEEP, KEEP, KEEP                                                                     \
    }

/* A hand-made case: inputs random in [0, 1) but for the channels of ov[k] that are not
   NaN; params the defaults and then `set` ("name=value", NULL or "" nothing). The output
   must be input want_in with the channels of want that are not NaN put in, within tol
   (0: exactly). */
void pt_hand(pt_stage *s, const char *set, const float ov[][4], int want_in, const float want[4],
             double tol, const char *what);

/* Every check above, for each stage of a family (plugin: its file name without .so). */
void pt_run_family(const char *plugin, pt_stage *stages, int n);
/* The stage of that name in stages, or exit(1). */
pt_stage *pt_find(pt_stage *stages, int n, const char *name);
void pt_free_family(pt_stage *stages, int n);

/* Rec. 709 luma, again. */
static inline double pt_luma(const double c[4])
{
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
}

#endif
