/* tests/jpeg/jpeg_api.c: the C API path a real-time application or a Python loop takes
 * with JPEGs in host memory: decode (pf_jpeg_read_memory), run a pipeline on the frame,
 * encode (pf_jpeg_encode) with the input's metadata, decode again.
 *
 * - colour and gray inputs: the pipeline's output encoded at quality 100 4:4:4 reads back
 *   within 4 steps of it (1 on average), at the pipeline output's size and channels;
 * - an input turned by its EXIF (6) runs upright: the pipeline sees the turned frame and
 *   the encoded result carries EXIF orientation 1 and the input's ICC profile;
 * - the default encode (quality 85, 4:2:0) of the same frame is smaller than quality 100.
 */
#include <stdlib.h>
#include <string.h>

#include "jpeg_make.h"
#include "pipefuse/jpeg.h"
#include "testutil.h"

static void run_one(pf_pipeline *p, const jm_opts *o, const char *what)
{
    size_t n;
    unsigned char *jpg = jm_make(o, &n);
    char err[512];
    pf_frame in, out, back;
    pf_jpeg_info info;
    pf_jpeg_meta *meta = NULL;
    int st = pf_jpeg_read_memory(jpg, n, what, NULL, &in, &info, &meta, err, sizeof err);
    CHECKF(st == PF_OK, "%s: %s", what, err);
    if (st != PF_OK) {
        free(jpg);
        return;
    }
    CHECK(pf_frame_alloc(&out, in.width, in.height, PF_U8, in.channels) == PF_OK);
    st = pf_pipeline_run(p, &in, 1, &out, 1);
    CHECKF(st == PF_OK, "%s: run: %s", what, pf_pipeline_errmsg(p));
    pf_jpeg_write_opts hi = {sizeof hi, 100, PF_JPEG_444, 0, 0};
    void *enc = NULL, *def = NULL;
    size_t enc_n = 0, def_n = 0;
    CHECK(pf_jpeg_encode(&out, &hi, meta, &enc, &enc_n, err, sizeof err) == PF_OK);
    CHECK(pf_jpeg_encode(&out, NULL, meta, &def, &def_n, err, sizeof err) == PF_OK);
    CHECKF(def_n < enc_n, "%s: default encode %zu bytes, quality 100 %zu", what, def_n, enc_n);
    pf_jpeg_meta *m2 = NULL;
    pf_jpeg_info i2;
    st = pf_jpeg_read_memory(enc, enc_n, "encoded", NULL, &back, &i2, &m2, err, sizeof err);
    CHECKF(st == PF_OK, "%s: %s", what, err);
    if (st == PF_OK) {
        CHECK(back.width == out.width && back.height == out.height &&
              back.channels == out.channels);
        double mx = pf_test_frame_diff(&out, &back, NULL, NULL), sum = 0;
        for (int y = 0; y < out.height; y++)
            for (int i = 0; i < out.width * out.channels; i++)
                sum += abs(((unsigned char *)out.data)[y * out.pitch + i] -
                           ((unsigned char *)back.data)[y * back.pitch + i]);
        sum /= (double)out.width * out.height * out.channels;
        CHECKF(mx <= 4 && sum <= 1, "%s: %.0f steps off at most, %.2f on average", what, mx, sum);
        CHECK(i2.orientation == 1); /* reset when it was applied */
        if (o->orientation)
            CHECK(info.applied && in.width == o->h && in.height == o->w);
        const void *a, *b;
        size_t na, nb;
        if (pf_jpeg_meta_icc(meta, &a, &na))
            CHECKF(pf_jpeg_meta_icc(m2, &b, &nb) && na == nb && !memcmp(a, b, na),
                   "%s: the ICC profile was not carried", what);
        pf_frame_free(&back);
    }
    pf_jpeg_meta_free(m2);
    free(enc);
    free(def);
    pf_jpeg_meta_free(meta);
    pf_frame_free(&out);
    pf_frame_free(&in);
    free(jpg);
}

/* The C API's argument checks: an options struct whose size cannot hold its first field
   is refused (not read as defaults); a NULL out names itself in the engine's message. */
static void test_arguments(pf_engine *e)
{
    pf_frame f;
    CHECK(pf_frame_alloc(&f, 32, 32, PF_U8, 3) == PF_OK);
    memset(f.data, 100, f.pitch * 32);
    void *b = NULL;
    size_t n = 0;
    char err[512] = "";
    pf_jpeg_write_opts q = {3, .quality = 101};
    CHECKF(pf_jpeg_encode(&f, &q, NULL, &b, &n, err, sizeof err) == PF_INVALID_ARGUMENT &&
               strstr(err, "pf_jpeg_write_opts.size is 3"),
           "size 3: %s", err);
    q.size = 0; /* the whole struct: quality 101 is seen, and refused */
    CHECKF(pf_jpeg_encode(&f, &q, NULL, &b, &n, err, sizeof err) == PF_INVALID_ARGUMENT &&
               strstr(err, "101"),
           "size 0: %s", err);
    q.size = sizeof q, q.quality = 90;
    CHECK(pf_jpeg_encode(&f, &q, NULL, &b, &n, err, sizeof err) == PF_OK && n > 0);
    free(b);
    pf_frame_free(&f);
    pf_pipeline *p = NULL;
    CHECK(pf_pipeline_load_string(e, "{", "earlier", &p) != PF_OK);
    CHECK(pf_pipeline_load_file(e, PF_SOURCE_DIR "/pipelines/sharpen.json", NULL) ==
          PF_INVALID_ARGUMENT);
    CHECKF(strstr(pf_engine_errmsg(e), "NULL out"), "load_file, NULL out: '%s'",
           pf_engine_errmsg(e));
    CHECK(pf_frame_alloc_host(e, 8, 8, PF_U8, 4, NULL) == PF_INVALID_ARGUMENT);
    CHECKF(strstr(pf_engine_errmsg(e), "pf_frame_alloc_host: NULL out"), "alloc_host: '%s'",
           pf_engine_errmsg(e));
}

int main(void)
{
    if (!pf_jpeg_available())
        return PF_TEST_SKIPPED;
    pf_engine *e = pf_test_engine();
    pf_pipeline *p = pf_test_load_file(e, PF_SOURCE_DIR "/pipelines/sharpen.json", "cpu");
    static unsigned char icc[400];
    icc[2] = 1, icc[3] = 0x90; /* 400 */
    memcpy(icc + 16, "RGB ", 4);
    memcpy(icc + 36, "acsp", 4);
    run_one(p, &(jm_opts){.w = 97, .h = 61, .space = 3, .seed = 1}, "colour");
    run_one(p, &(jm_opts){.w = 64, .h = 40, .space = 1, .seed = 2}, "gray");
    run_one(p,
            &(jm_opts){.w = 80,
                       .h = 50,
                       .space = 3,
                       .orientation = 6,
                       .icc = icc,
                       .icc_size = sizeof icc,
                       .seed = 3},
            "turned, with a profile");
    pf_pipeline_destroy(p);
    test_arguments(e);
    pf_engine_destroy(e);
    return pf_test_done("jpeg_api");
}
