/* tests/lib/testutil.h: the test harness every test links (pf_testlib): checks that
 * count failures, the skip code, a seeded random generator, random float images with
 * odd sizes and poisoned outputs, image and frame comparisons, engines and pipelines
 * over the build tree's plugins, files and temporary directories. In the same library,
 * stage_harness.h runs one stage straight from its plugin's descriptor and
 * point_driver.h checks a family of point stages against references; cuda_skip.h
 * (pf_testlib_cuda) skips a test without a CUDA device. */
#ifndef PF_TESTUTIL_H
#define PF_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Exit status of a test that cannot run here (no device, no NVRTC): ctest reports it
   skipped (SKIP_RETURN_CODE, set by pf_add_test). */
#define PF_TEST_SKIPPED 77

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
/* Whether floats [i0, i1) of row y are all still NaN: not written since poisoned. */
int pf_test_image_unwritten(const pf_image *im, int y, size_t i0, size_t i1);
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

/* A pipeline of k `difference` stages in a row, each reading a new input and each a
   pipeline output: k + 1 inputs a0..ak and k outputs o0..o(k-1), one fused unit with as
   many descriptors as a unit may have. Written into json (cap bytes); k at most 60. */
void pf_test_difference_chain(char *json, size_t cap, int k);

/* An engine over the build tree's plugins only (no environment path), or exit(1). */
pf_engine *pf_test_engine(void);
/* The same with the caller's settings (plugin_path, threads, log, ...), from
   pf_engine_config_init; the environment path is turned off here. exit(1) on failure. */
pf_engine *pf_test_engine_with(pf_engine_config *cfg);
/* A log callback that drops every notice (cfg.log), for tests that provoke many. */
void pf_test_quiet_log(void *user, int level, const char *msg);

/* A pipeline from JSON text (name: what messages call it) or from a file, with the
   backend option set (NULL: the default); exit(1) with both messages on failure. */
pf_pipeline *pf_test_load_string(pf_engine *e, const char *json, const char *name,
                                 const char *backend);
pf_pipeline *pf_test_load_file(pf_engine *e, const char *path, const char *backend);

/* Every sample of an allocated frame random: any code of 8- and 16-bit formats, [0, 1)
   for floats; the padding past each row is left as it is. */
void pf_test_frame_random(pf_rng *r, pf_frame *f);
/* Sample c of pixel (x, y) of an 8- or 16-bit frame. */
unsigned pf_test_frame_sample(const pf_frame *f, int x, int y, int c);
/* How many samples of two 8- or 16-bit frames differ; -1 when their shapes or formats
   differ. */
long pf_test_frame_mismatches(const pf_frame *a, const pf_frame *b);

/* A fresh empty directory under the build tree's Testing folder (a static buffer: the
   next call reuses it). */
const char *pf_test_tmpdir(const char *name);

/* Removes path and everything under it (rm -rf); 0 when done. */
int pf_test_remove_tree(const char *path);

/* A whole file in memory (malloc'd, free with free()), its length in *size; NULL when it
   cannot be opened. */
void *pf_test_read_file(const char *path, size_t *size);
/* Writes n bytes to path, or exit(1) naming it. */
void pf_test_write_file(const char *path, const void *data, size_t n);

/* Big-endian 32-bit values, as PNG chunks store them. */
uint32_t pf_test_get_be32(const unsigned char *p);
void pf_test_put_be32(unsigned char *p, uint32_t v);

/* PF_EXPECT_STATUS_MSG(p, call, want, words...): call returns want and leaves in p's message
   every one of the words, its own message: a message planted first (a set_param of no
   stage, "nosuch") must be gone, so a call that writes none is caught. */
#define PF_EXPECT_STATUS_MSG(p, call, want, ...)                                                   \
    do {                                                                                           \
        CHECK(pf_pipeline_set_param((p), "nosuch.param", "1") == PF_PARAM);                        \
        CHECK(strstr(pf_pipeline_errmsg(p), "nosuch") != NULL);                                    \
        int rc_ = (call);                                                                          \
        const char *m_ = pf_pipeline_errmsg(p);                                                    \
        const char *words_[] = {__VA_ARGS__};                                                      \
        int ok_ = rc_ == (want) && !strstr(m_, "nosuch");                                          \
        for (size_t k_ = 0; k_ < sizeof words_ / sizeof words_[0]; k_++)                           \
            ok_ = ok_ && strstr(m_, words_[k_]);                                                   \
        CHECKF(ok_, "%s: %s, \"%s\"", #call, pf_status_name(rc_), m_);                             \
    } while (0)

#endif
