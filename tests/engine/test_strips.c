/* tests/engine/test_strips.c: pipelines in strips of output rows (pipefuse/bands.h,
 * engine/strip.c): every strip's rows against the whole frame's, byte for byte, for
 * resizes of every mode (shrinking, enlarging, antialiased), crops, pads, flips, turns
 * by quarter and any angle, stencils before and after them, ops that read the pixel's
 * position, two inputs and two outputs, in 8-bit, 16-bit and float frames, strips of
 * 1 row to more than the image. Each strip's inputs are copied into buffers holding
 * exactly the rows pf_pipeline_strip names (the sanitizer builds catch a read past them),
 * and its outputs into buffers of exactly its rows. Then: the memory a strip plan needs
 * against the whole frame's, the refusals (a reduce stage, outputs of two heights) and
 * the frame checks.
 */
#include <string.h>

#include "pipefuse/bands.h"
#include "testutil.h"

static pf_engine *eng;

/* A frame of exactly rows x width pixels: pitch the row's bytes, no slack. */
static pf_frame frame_exact(int w, int h, pf_sample s, int ch)
{
    size_t pitch = (size_t)w * pf_frame_pixel_bytes(s, ch);
    pf_frame f = {malloc(pitch * (size_t)(h > 0 ? h : 1)), w, h, pitch, s, ch};
    if (!f.data) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    memset(f.data, 0xa5, pitch * (size_t)(h > 0 ? h : 1));
    return f;
}

static void copy_rows(const pf_frame *src, int sy, pf_frame *dst, int dy, int n)
{
    size_t bytes = (size_t)src->width * pf_frame_pixel_bytes(src->sample, src->channels);
    for (int i = 0; i < n; i++)
        memcpy((char *)dst->data + (size_t)(dy + i) * dst->pitch,
               (const char *)src->data + (size_t)(sy + i) * src->pitch, bytes);
}

static int frames_equal(const pf_frame *a, const pf_frame *b, int *at_y)
{
    size_t bytes = (size_t)a->width * pf_frame_pixel_bytes(a->sample, a->channels);
    for (int y = 0; y < a->height; y++)
        if (memcmp((const char *)a->data + (size_t)y * a->pitch,
                   (const char *)b->data + (size_t)y * b->pitch, bytes) != 0) {
            *at_y = y;
            return 0;
        }
    return 1;
}

/* Runs json on random w x h inputs (n_in of them) whole and in strips of each of rows[],
   and checks that the strips' rows are the whole frame's. monotone: every strip's
   input window starts and ends at or below the last one's (a decoder can stream them). */
static void check_strips(const char *name, const char *json, int n_in, int w, int h, pf_sample smp,
                         int ch, const int *rows, int n_rows, int monotone)
{
    pf_pipeline *p = pf_test_load_string(eng, json, name, "cpu");
    pf_rng rng;
    pf_rng_seed(&rng, (uint64_t)w * 7919u + (uint64_t)h);
    pf_frame in[4], whole[4], built[4];
    pf_shape shapes[4];
    for (int i = 0; i < n_in; i++) {
        CHECK(pf_frame_alloc(&in[i], w, h, smp, ch) == PF_OK);
        pf_test_frame_random(&rng, &in[i]);
        shapes[i] = (pf_shape){w, h};
    }
    int rc = pf_pipeline_plan(p, shapes, n_in);
    CHECKF(rc == PF_OK, "%s: %s", name, pf_pipeline_errmsg(p));
    int n_out = pf_pipeline_output_count(p);
    for (int o = 0; o < n_out; o++) {
        pf_output_info oi;
        CHECK(pf_pipeline_output_info(p, o, &oi) == PF_OK);
        CHECK(pf_frame_alloc(&whole[o], oi.shape.width, oi.shape.height, smp, ch) == PF_OK);
        CHECK(pf_frame_alloc(&built[o], oi.shape.width, oi.shape.height, smp, ch) == PF_OK);
    }
    rc = pf_pipeline_run(p, in, n_in, whole, n_out);
    CHECKF(rc == PF_OK, "%s: whole: %s", name, pf_pipeline_errmsg(p));
    for (int r = 0; r < n_rows && rc == PF_OK; r++) {
        int n = 0;
        rc = pf_pipeline_plan_strips(p, shapes, n_in, rows[r], &n);
        CHECKF(rc == PF_OK, "%s: strips of %d: %s", name, rows[r], pf_pipeline_errmsg(p));
        CHECKF(rc != PF_OK || n == (whole[0].height + rows[r] - 1) / rows[r],
               "%s: %d strips of %d rows for %d", name, n, rows[r], whole[0].height);
        for (int o = 0; o < n_out; o++)
            memset(built[o].data, 0x5a, built[o].pitch * (size_t)built[o].height);
        pf_region last = {0, 0};
        for (int s = 0; s < n && rc == PF_OK; s++) {
            int y0, y1;
            pf_region win[4];
            CHECK(pf_pipeline_strip(p, s, &y0, &y1, win, n_in) == PF_OK);
            CHECKF(y0 == s * rows[r] && y1 > y0 && y1 <= whole[0].height, "%s: strip %d: %d..%d",
                   name, s, y0, y1);
            if (monotone && win[0].y1 > win[0].y0) {
                CHECKF(win[0].y0 >= last.y0 && win[0].y1 >= last.y1,
                       "%s: strip %d reads rows %d..%d after %d..%d", name, s, win[0].y0,
                       win[0].y1 - 1, last.y0, last.y1 - 1);
                last = win[0];
            }
            pf_frame ins[4], outs[4];
            for (int i = 0; i < n_in; i++) {
                CHECK(win[i].y0 >= 0 && win[i].y1 <= h && win[i].y0 <= win[i].y1);
                ins[i] = frame_exact(w, win[i].y1 - win[i].y0, smp, ch);
                copy_rows(&in[i], win[i].y0, &ins[i], 0, win[i].y1 - win[i].y0);
            }
            for (int o = 0; o < n_out; o++)
                outs[o] = frame_exact(whole[o].width, y1 - y0, smp, ch);
            rc = pf_pipeline_run_strip(p, s, ins, n_in, outs, n_out);
            CHECKF(rc == PF_OK, "%s: strip %d of %d rows: %s", name, s, rows[r],
                   pf_pipeline_errmsg(p));
            for (int o = 0; o < n_out; o++) {
                copy_rows(&outs[o], 0, &built[o], y0, y1 - y0);
                free(outs[o].data);
            }
            for (int i = 0; i < n_in; i++)
                free(ins[i].data);
        }
        for (int o = 0; o < n_out && rc == PF_OK; o++) {
            int at = -1;
            CHECKF(frames_equal(&whole[o], &built[o], &at),
                   "%s: output %d in strips of %d rows differs from the whole frame at row %d",
                   name, o, rows[r], at);
        }
    }
    /* A whole frame after strips plans whole frames again. */
    if (rc == PF_OK) {
        for (int o = 0; o < n_out; o++)
            memset(built[o].data, 0, built[o].pitch * (size_t)built[o].height);
        rc = pf_pipeline_run(p, in, n_in, built, n_out);
        CHECKF(rc == PF_OK, "%s: whole after strips: %s", name, pf_pipeline_errmsg(p));
        for (int o = 0; o < n_out && rc == PF_OK; o++) {
            int at = -1;
            CHECKF(frames_equal(&whole[o], &built[o], &at), "%s: whole after strips, row %d", name,
                   at);
        }
    }
    for (int i = 0; i < n_in; i++)
        pf_frame_free(&in[i]);
    for (int o = 0; o < n_out; o++) {
        pf_frame_free(&whole[o]);
        pf_frame_free(&built[o]);
    }
    pf_pipeline_destroy(p);
}

#define ONE_IN(stages, outputs)                                                                    \
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [" stages "], \"outputs\": {" outputs "}}"

static const int some_rows[] = {1, 7, 16, 64, 1000};

static void test_resizes(void)
{
    static const char *const modes[] = {"bilinear", "nearest",  "area",
                                        "bicubic",  "mitchell", "lanczos3"};
    static const char *const sizes[] = {"\"scale\": 0.5", "\"width\": 37", "\"height\": 150",
                                        "\"width\": 61, \"height\": 20"};
    char json[2048], name[128];
    for (int m = 0; m < 6; m++)
        for (int z = 0; z < 4; z++) {
            snprintf(json, sizeof json,
                     ONE_IN("{\"id\": \"r\", \"op\": \"resize\", \"inputs\": [\"x\"], \"params\": "
                            "{%s, \"mode\": \"%s\"%s}}",
                            "\"out\": \"r\""),
                     sizes[z], modes[m], m == 0 && z < 2 ? ", \"antialias\": true" : "");
            snprintf(name, sizeof name, "resize %s %s", modes[m], sizes[z]);
            check_strips(name, json, 1, 113, 87, m % 2 ? PF_U16 : PF_U8, 4, some_rows, 5, 1);
        }
    /* the photo pipeline: half size, a grade, a blur; and a stencil before */
    check_strips("half + grade + blur",
                 ONE_IN("{\"id\": \"half\", \"op\": \"resize\", \"inputs\": [\"x\"], \"params\": "
                        "{\"scale\": 0.5}},"
                        "{\"id\": \"b\", \"op\": \"brightness\", \"inputs\": [\"half\"], "
                        "\"params\": {\"amount\": 0.05}},"
                        "{\"id\": \"c\", \"op\": \"contrast\", \"inputs\": [\"b\"], "
                        "\"params\": {\"amount\": 1.2}},"
                        "{\"id\": \"g\", \"op\": \"gaussian\", \"inputs\": [\"c\"], "
                        "\"params\": {\"sigma\": 1.5}}",
                        "\"out\": \"g\""),
                 1, 200, 150, PF_U8, 3, some_rows, 5, 1);
    check_strips("blur + lanczos + sharpen + vignette",
                 ONE_IN("{\"id\": \"g\", \"op\": \"gaussian\", \"inputs\": [\"x\"], "
                        "\"params\": {\"sigma\": 2}},"
                        "{\"id\": \"r\", \"op\": \"resize\", \"inputs\": [\"g\"], \"params\": "
                        "{\"width\": 70, \"mode\": \"lanczos3\"}},"
                        "{\"id\": \"u\", \"op\": \"unsharp\", \"inputs\": [\"r\"]},"
                        "{\"id\": \"v\", \"op\": \"vignette\", \"inputs\": [\"u\"]}",
                        "\"out\": \"v\""),
                 1, 151, 133, PF_F32, 4, some_rows, 5, 1);
    /* two outputs of one height, one of them read by a stencil too */
    check_strips("two outputs",
                 ONE_IN("{\"id\": \"r\", \"op\": \"resize\", \"inputs\": [\"x\"], \"params\": "
                        "{\"scale\": 0.4, \"mode\": \"area\"}},"
                        "{\"id\": \"gr\", \"op\": \"grayscale\", \"inputs\": [\"r\"]},"
                        "{\"id\": \"s\", \"op\": \"sobel\", \"inputs\": [\"gr\"]}",
                        "\"gray\": \"gr\", \"edges\": \"s\""),
                 1, 140, 101, PF_U8, 4, some_rows, 5, 1);
}

static void test_maps(void)
{
    check_strips("crop + pad",
                 ONE_IN("{\"id\": \"c\", \"op\": \"crop\", \"inputs\": [\"x\"], \"params\": "
                        "{\"x\": 9, \"y\": 13, \"width\": 60, \"height\": 50}},"
                        "{\"id\": \"p\", \"op\": \"pad\", \"inputs\": [\"c\"], \"params\": "
                        "{\"top\": 7, \"bottom\": 3, \"left\": 2}},"
                        "{\"id\": \"g\", \"op\": \"box\", \"inputs\": [\"p\"], \"params\": "
                        "{\"radius\": 2}}",
                        "\"out\": \"g\""),
                 1, 90, 80, PF_U8, 4, some_rows, 5, 1);
    check_strips("crop outside pad",
                 ONE_IN("{\"id\": \"c\", \"op\": \"crop\", \"inputs\": [\"x\"], \"params\": "
                        "{\"width\": 120, \"height\": 120, \"gravity\": \"center\", "
                        "\"outside\": \"pad\"}}",
                        "\"out\": \"c\""),
                 1, 90, 80, PF_U16, 3, some_rows, 5, 1);
    check_strips("rotate 17 degrees",
                 ONE_IN("{\"id\": \"r\", \"op\": \"rotate\", \"inputs\": [\"x\"], \"params\": "
                        "{\"degrees\": 17}}",
                        "\"out\": \"r\""),
                 1, 71, 53, PF_U8, 4, some_rows, 5, 1);
    check_strips("rotate -100 degrees",
                 ONE_IN("{\"id\": \"r\", \"op\": \"rotate\", \"inputs\": [\"x\"], \"params\": "
                        "{\"degrees\": -100, \"expand\": false}}",
                        "\"out\": \"r\""),
                 1, 71, 53, PF_F32, 4, some_rows, 5, 0);
    check_strips("rotate 90",
                 ONE_IN("{\"id\": \"r\", \"op\": \"rotate\", \"inputs\": [\"x\"], \"params\": "
                        "{\"angle\": \"90\"}}",
                        "\"out\": \"r\""),
                 1, 31, 23, PF_U8, 4, some_rows, 5, 0);
    check_strips("flip vertical",
                 ONE_IN("{\"id\": \"f\", \"op\": \"flip\", \"inputs\": [\"x\"], \"params\": "
                        "{\"axis\": \"vertical\"}},"
                        "{\"id\": \"g\", \"op\": \"gaussian\", \"inputs\": [\"f\"]}",
                        "\"out\": \"g\""),
                 1, 45, 39, PF_U8, 4, some_rows, 5, 0);
    check_strips("blend of two inputs, then resized",
                 "{\"pipefuse\": 1, \"inputs\": [\"a\", \"b\"], \"stages\": ["
                 "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"a\", \"b\"], "
                 "\"params\": {\"opacity\": 0.3}},"
                 "{\"id\": \"r\", \"op\": \"resize\", \"inputs\": [\"m\"], \"params\": "
                 "{\"scale\": 0.75, \"mode\": \"bicubic\"}}], \"outputs\": {\"out\": \"r\"}}",
                 2, 64, 48, PF_U8, 4, some_rows, 5, 1);
    /* an overlay (a resample stage of two inputs) of the same size, offset */
    check_strips("overlay",
                 "{\"pipefuse\": 1, \"inputs\": [\"a\", \"b\"], \"stages\": ["
                 "{\"id\": \"m\", \"op\": \"overlay\", \"inputs\": [\"a\", \"b\"], "
                 "\"params\": {\"x\": 9, \"y\": 17, \"opacity\": 0.6}},"
                 "{\"id\": \"r\", \"op\": \"resize\", \"inputs\": [\"m\"], \"params\": "
                 "{\"scale\": 0.5}}], \"outputs\": {\"out\": \"r\"}}",
                 2, 64, 48, PF_U8, 4, some_rows, 5, 1);
}

static void test_memory_and_refusals(void)
{
    /* Host memory counts a scratch block per CPU thread: two threads here, so the figures
       below hold on any machine */
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.threads = 2;
    pf_engine *e2 = pf_test_engine_with(&cfg);
    pf_pipeline *p = pf_test_load_string(
        e2,
        ONE_IN("{\"id\": \"half\", \"op\": \"resize\", \"inputs\": [\"x\"], \"params\": "
               "{\"scale\": 0.5}},"
               "{\"id\": \"g\", \"op\": \"gaussian\", \"inputs\": [\"half\"]}",
               "\"out\": \"g\""),
        "memory", "cpu");
    pf_shape s = {4000, 3000};
    pf_memory whole, strip;
    memset(&whole, 0, sizeof whole);
    memset(&strip, 0, sizeof strip);
    whole.size = strip.size = sizeof whole;
    CHECK(pf_pipeline_memory(p, &s, 1, &whole) == PF_OK);
    CHECK(pf_pipeline_strip_memory(p, &s, 1, 32, &strip) == PF_OK);
    /* whole: the input's float image alone is 192 MB; strips of 32 output rows hold
       about 70 input rows and 40 of the half-size image */
    CHECKF(whole.host_bytes > 190e6 && strip.host_bytes < 12e6,
           "host bytes whole %llu, in strips of 32 rows %llu", (unsigned long long)whole.host_bytes,
           (unsigned long long)strip.host_bytes);
    /* the limit counts the strips' buffers: a plan over it whole fits in strips */
    CHECK(pf_pipeline_set_option(p, "max_memory", "67108864") == PF_OK);
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_NO_MEMORY);
    int n = 0;
    CHECKF(pf_pipeline_plan_strips(p, &s, 1, 32, &n) == PF_OK && n == 47, "%s (%d strips)",
           pf_pipeline_errmsg(p), n);
    /* frames of the wrong size are refused, naming the rows expected */
    int y0, y1;
    pf_region win;
    CHECK(pf_pipeline_strip(p, 1, &y0, &y1, &win, 1) == PF_OK);
    CHECKF(y0 == 32 && y1 == 64 && win.y0 < 64 && win.y1 > 128, "strip 1: %d..%d from %d..%d", y0,
           y1, win.y0, win.y1);
    pf_frame in = frame_exact(4000, win.y1 - win.y0 + 1, PF_U8, 4);
    pf_frame out = frame_exact(2000, 32, PF_U8, 4);
    CHECK(pf_pipeline_run_strip(p, 1, &in, 1, &out, 1) == PF_SHAPE);
    CHECKF(strstr(pf_pipeline_errmsg(p), "strip 1 reads rows") != NULL, "%s",
           pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_run_strip(p, n, &in, 1, &out, 1) == PF_INVALID_ARGUMENT);
    in.height--;
    out.height = 31;
    CHECK(pf_pipeline_run_strip(p, 1, &in, 1, &out, 1) == PF_SHAPE);
    CHECKF(strstr(pf_pipeline_errmsg(p), "strip 1 makes rows 32..63") != NULL, "%s",
           pf_pipeline_errmsg(p));
    free(in.data);
    free(out.data);
    pf_pipeline_destroy(p);
    pf_engine_destroy(e2);

    /* a parameter that moves the rows a stage reads drops the strip plan: the windows
       were worked out from the old value */
    p = pf_test_load_string(eng,
                            ONE_IN("{\"id\": \"f\", \"op\": \"flip\", \"inputs\": [\"x\"], "
                                   "\"params\": {\"axis\": \"horizontal\"}}",
                                   "\"out\": \"f\""),
                            "params", "cpu");
    pf_shape fs = {16, 40};
    CHECK(pf_pipeline_plan_strips(p, &fs, 1, 8, &n) == PF_OK && n == 5);
    CHECK(pf_pipeline_strip(p, 0, &y0, &y1, &win, 1) == PF_OK && win.y0 == 0 && win.y1 == 8);
    CHECK(pf_pipeline_set_param(p, "f.axis", "\"vertical\"") == PF_OK);
    CHECK(pf_pipeline_strip(p, 0, &y0, &y1, &win, 1) == PF_NOT_PLANNED);
    CHECK(pf_pipeline_plan_strips(p, &fs, 1, 8, &n) == PF_OK);
    CHECKF(pf_pipeline_strip(p, 0, &y0, &y1, &win, 1) == PF_OK && win.y0 == 32 && win.y1 == 40,
           "a vertical flip's first strip reads rows %d..%d", win.y0, win.y1 - 1);
    pf_pipeline_destroy(p);

    char why[512];
    p = pf_test_load_string(
        eng,
        ONE_IN("{\"id\": \"h\", \"op\": \"histogram\", \"inputs\": [\"x\"]}", "\"hist\": \"h\""),
        "reduce", "cpu");
    CHECK(pf_pipeline_strips_possible(p, why, sizeof why) == PF_UNSUPPORTED);
    CHECKF(strstr(why, "'h' (histogram) is a reduce stage") != NULL, "%s", why);
    pf_shape small = {20, 10};
    CHECK(pf_pipeline_plan_strips(p, &small, 1, 4, NULL) == PF_UNSUPPORTED);
    CHECKF(strstr(pf_pipeline_errmsg(p), "cannot run in strips") != NULL, "%s",
           pf_pipeline_errmsg(p));
    pf_pipeline_destroy(p);

    p = pf_test_load_string(eng,
                            ONE_IN("{\"id\": \"r\", \"op\": \"resize\", \"inputs\": [\"x\"], "
                                   "\"params\": {\"scale\": 0.5}}",
                                   "\"small\": \"r\", \"big\": \"x\""),
                            "heights", "cpu");
    CHECK(pf_pipeline_strips_possible(p, why, sizeof why) == PF_OK);
    CHECK(pf_pipeline_plan_strips(p, &small, 1, 4, NULL) == PF_UNSUPPORTED);
    CHECKF(strstr(pf_pipeline_errmsg(p), "differ in height") != NULL, "%s", pf_pipeline_errmsg(p));
    pf_pipeline_destroy(p);
}

int main(void)
{
    eng = pf_test_engine();
    test_resizes();
    test_maps();
    test_memory_and_refusals();
    pf_engine_destroy(eng);
    return pf_test_done("test_strips");
}
