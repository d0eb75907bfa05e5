/* tests/testutil.h: what every test uses: checks that count failures, a seeded
 * random generator, random float images with odd sizes and poisoned outputs. */
#ifndef PF_TESTUTIL_H
#define PF_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipefuse/pipefuse.h"

extern int pf_test_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            pf_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)

#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            pf_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)

/* Exit status for main: 0 when no check failed. */
int pf_test_done(const char *name);

/* xorshift64*: deterministic across platforms. */
typedef struct pf_rng {
    uint64_t s;
} pf_rng;
void pf_rng_seed(pf_rng *r, uint64_t seed);
uint32_t pf_rng_u32(pf_rng *r);
float pf_rng_float(pf_rng *r);               /* [0, 1) */
int pf_rng_range(pf_rng *r, int lo, int hi); /* [lo, hi] */

/* A float4 image with pitch padded beyond the width (so pitch bugs show), filled with
   uniform [lo, hi) values; alpha too. Free with pf_test_image_free. */
pf_image pf_test_image(pf_rng *r, int w, int h, float lo, float hi);
pf_image pf_test_image_poisoned(int w, int h); /* every float NaN */
void pf_test_image_free(pf_image *im);
/* Largest |a-b| over all channels; NaN anywhere counts as infinity. */
double pf_test_image_maxdiff(const pf_image *a, const pf_image *b);

/* Largest difference between two frames of one format and size, in output steps (1 =
   one 8-bit step; u16 values / 257; floats * 255); NaN counts as infinity. Where it
   is largest goes to *at_x, *at_y (either may be NULL). */
double pf_test_frame_diff(const pf_frame *a, const pf_frame *b, int *at_x, int *at_y);

/* Floats that test stores to u8 and u16: special values (NaN, infinities, signed zeros,
   tiny, huge), then every rounding tie of both formats give or take 4 ulps, then values
   over [-0.1, 1.1]; cap (at least 16) values into v. */
void pf_test_store_values(float *v, size_t cap);

/* An engine over the build tree's plugins only (no environment path), or exit(1). */
pf_engine *pf_test_engine(void);

/* A fresh empty directory under the build tree's Testing folder. */
const char *pf_test_tmpdir(const char *name);

#endif
