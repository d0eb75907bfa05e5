/* tests/cpu/test_cpu_fast.c: the CPU executor's fast paths give the same bytes as the
 * float path they stand for.
 *
 * Point units of per-channel stages reading 8- or 16-bit frames run as table lookups
 * (engine/cpu_lut.c), or the first stages of a unit do (two 8-bit inputs: tables over
 * every pair of codes); geometry stages that move
 * pixels copy samples (plugins/geometry/geometry_native.c); histograms count codes
 * (plugins/analysis). The reference is the same pipeline fed the same samples as float
 * frames (k / 255 or k / 65535, the floats the integer load makes), which always runs
 * the float chain: every code value in every channel (the first rows of each input hold
 * a permutation of all codes per channel) and random samples after, for every input
 * and output format, and again after a parameter changes between frames. */
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

static pf_engine *eng;

static const char *const chains[] = {
    /* the identity: a row copy */
    "{\"id\": \"s\", \"op\": \"brightness\", \"params\": {\"amount\": 0}}",
    "{\"id\": \"s\", \"op\": \"brightness\", \"params\": {\"amount\": 0.1}}",
    "{\"id\": \"s\", \"op\": \"invert\", \"params\": {\"alpha\": true}}",
    "{\"id\": \"s\", \"op\": \"contrast\", \"params\": {\"amount\": 1.5, \"pivot\": 0.4}}",
    "{\"id\": \"s\", \"op\": \"gamma\", \"params\": {\"gamma\": 2.2}}",
    "{\"id\": \"s\", \"op\": \"levels\", \"params\": {\"in_low\": 0.2, \"in_high\": 0.8, "
    "\"gamma\": 10, \"out_low\": 0.1, \"out_high\": 0.9}}",
    "{\"id\": \"s\", \"op\": \"linear\", \"params\": {\"a\": 1.8, \"b\": -0.3}}",
    /* a fused chain of per-channel stages */
    "{\"id\": \"c1\", \"op\": \"brightness\", \"params\": {\"amount\": 0.05}}, "
    "{\"id\": \"c2\", \"op\": \"contrast\", \"inputs\": [\"c1\"], \"params\": {\"amount\": 1.2}}, "
    "{\"id\": \"c3\", \"op\": \"gamma\", \"inputs\": [\"c2\"], \"params\": {\"gamma\": 1.1}}, "
    "{\"id\": \"c4\", \"op\": \"linear\", \"inputs\": [\"c3\"], \"params\": {\"a\": 0.9, \"b\": "
    "0.05}}, "
    "{\"id\": \"c5\", \"op\": \"invert\", \"inputs\": [\"c4\"]}, "
    "{\"id\": \"s\", \"op\": \"levels\", \"inputs\": [\"c5\"], \"params\": {\"in_low\": 0.05, "
    "\"in_high\": 0.95, \"gamma\": 0.7}}",
    /* with a cross-channel stage in the middle: not tabulated, the same bytes anyway */
    "{\"id\": \"c1\", \"op\": \"gamma\", \"params\": {\"gamma\": 1.3}}, "
    "{\"id\": \"c2\", \"op\": \"saturation\", \"inputs\": [\"c1\"], \"params\": {\"amount\": "
    "1.4}}, "
    "{\"id\": \"s\", \"op\": \"brightness\", \"inputs\": [\"c2\"], \"params\": {\"amount\": -0.1}}",
    /* bench/cpu_bench.c's chain8: its first three stages tabulated, the rest in float */
    "{\"id\": \"c1\", \"op\": \"brightness\", \"params\": {\"amount\": 0.05}}, "
    "{\"id\": \"c2\", \"op\": \"contrast\", \"inputs\": [\"c1\"], \"params\": {\"amount\": 1.2}}, "
    "{\"id\": \"c3\", \"op\": \"gamma\", \"inputs\": [\"c2\"], \"params\": {\"gamma\": 1.1}}, "
    "{\"id\": \"c4\", \"op\": \"saturation\", \"inputs\": [\"c3\"], \"params\": {\"amount\": "
    "1.2}}, "
    "{\"id\": \"c5\", \"op\": \"linear\", \"inputs\": [\"c4\"], \"params\": {\"a\": 0.9, \"b\": "
    "0.05}}, "
    "{\"id\": \"c6\", \"op\": \"invert\", \"inputs\": [\"c5\"]}, "
    "{\"id\": \"c7\", \"op\": \"levels\", \"inputs\": [\"c6\"], \"params\": {\"in_low\": 0.05, "
    "\"in_high\": 0.95}}, "
    "{\"id\": \"s\", \"op\": \"brightness\", \"inputs\": [\"c7\"], \"params\": {\"amount\": "
    "-0.05}}",
    /* per-channel stages into a float image that a stencil reads: tabulated into it */
    "{\"id\": \"c1\", \"op\": \"gamma\", \"params\": {\"gamma\": 2.2}}, "
    "{\"id\": \"s\", \"op\": \"gaussian\", \"inputs\": [\"c1\"], \"params\": {\"sigma\": "
    "1.5}}",
    "{\"id\": \"c1\", \"op\": \"levels\", \"params\": {\"in_low\": 0.1, \"in_high\": 0.7, "
    "\"gamma\": 2}}, "
    "{\"id\": \"c2\", \"op\": \"brightness\", \"inputs\": [\"c1\"], \"params\": {\"amount\": "
    "-0.2}}, "
    "{\"id\": \"s\", \"op\": \"box\", \"inputs\": [\"c2\"], \"params\": {\"radius\": 1}}",
    /* a later stage reads an early member, or the input: no tables */
    "{\"id\": \"c1\", \"op\": \"gamma\", \"params\": {\"gamma\": 1.7}}, "
    "{\"id\": \"c2\", \"op\": \"brightness\", \"inputs\": [\"c1\"], \"params\": {\"amount\": "
    "0.1}}, "
    "{\"id\": \"c3\", \"op\": \"saturation\", \"inputs\": [\"c2\"], \"params\": {\"amount\": "
    "0.5}}, "
    "{\"id\": \"s\", \"op\": \"blend\", \"inputs\": [\"c3\", \"c1\"], \"params\": {\"opacity\": "
    "0.3}}",
    "{\"id\": \"c1\", \"op\": \"gamma\", \"params\": {\"gamma\": 1.7}}, "
    "{\"id\": \"c2\", \"op\": \"saturation\", \"inputs\": [\"c1\"], \"params\": {\"amount\": "
    "0.5}}, "
    "{\"id\": \"s\", \"op\": \"blend\", \"inputs\": [\"c2\", \"a\"], \"params\": {\"opacity\": "
    "0.3}}",
};

static pf_pipeline *load2(const char *stages, int n_in)
{
    char json[4096];
    snprintf(json, sizeof json,
             "{\"pipefuse\": 1, \"inputs\": [%s], \"stages\": [%s], \"outputs\": {\"o\": "
             "\"s\"}, \"options\": {\"backend\": \"cpu\"}}",
             n_in == 2 ? "\"a\", \"b\"" : "\"a\"", stages);
    return pf_test_load_string(eng, json, "test_cpu_fast", NULL);
}

static pf_pipeline *load(const char *stages)
{
    return load2(stages, 1);
}

static int max_code(pf_sample s)
{
    return s == PF_U8 ? 255 : 65535;
}

/* An integer frame whose first `codes` pixels hold, in channel c, a permutation of all
   codes (k * (2c + 1) + 977c, an odd factor); random codes after. */
static pf_frame codes_frame(pf_rng *r, pf_sample s, int ch, int w, int h)
{
    pf_frame f;
    if (pf_frame_alloc(&f, w, h, s, ch) != PF_OK)
        exit(1);
    int m = max_code(s);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) {
                long i = (long)y * w + x;
                int v = i <= m ? (int)((i * (2 * c + 1) + 977 * c) & m) : (int)(pf_rng_u32(r) & m);
                char *row = (char *)f.data + (size_t)y * f.pitch;
                if (s == PF_U8)
                    ((uint8_t *)row)[x * ch + c] = (uint8_t)v;
                else
                    ((uint16_t *)row)[x * ch + c] = (uint16_t)v;
            }
    return f;
}

/* The same samples as floats, as the integer load makes them: k / max, rounded once. */
static pf_frame as_float(const pf_frame *f)
{
    pf_frame g;
    if (pf_frame_alloc(&g, f->width, f->height, PF_F32, f->channels) != PF_OK)
        exit(1);
    float m = (float)max_code(f->sample);
    for (int y = 0; y < f->height; y++) {
        const char *src = (const char *)f->data + (size_t)y * f->pitch;
        float *dst = (float *)((char *)g.data + (size_t)y * g.pitch);
        for (int i = 0; i < f->width * f->channels; i++)
            dst[i] = (f->sample == PF_U8 ? (float)((const uint8_t *)src)[i]
                                         : (float)((const uint16_t *)src)[i]) /
                     m;
    }
    return g;
}

/* Equal samples (floats: equal values), at every pixel. */
static int same_frames(const pf_frame *a, const pf_frame *b)
{
    return pf_test_frame_diff(a, b, NULL, NULL) == 0;
}

static void run(pf_pipeline *p, const pf_frame *in, pf_frame *out)
{
    int rc = pf_pipeline_run(p, in, 1, out, out ? 1 : 0);
    CHECKF(rc == PF_OK, "run: %s", pf_pipeline_errmsg(p));
}

/* Pipeline `stages` on integer frames against float frames of the same samples, every
   input format to every output format. */
static void check_tables(const char *stages, pf_rng *r)
{
    pf_pipeline *p = load(stages), *ref = load(stages);
    static const pf_sample outs[] = {PF_U8, PF_U16, PF_F32};
    for (int s = 0; s < 2; s++) {
        pf_sample is = s ? PF_U16 : PF_U8;
        /* every code once per channel, then random rows */
        int w = 256, h = s ? 260 : 3;
        for (int ci = 1; ci <= 4; ci++) {
            pf_frame in = codes_frame(r, is, ci, w, h), fin = as_float(&in);
            for (int o = 0; o < 3; o++)
                for (int co = 1; co <= 4; co++) {
                    pf_frame got, want;
                    if (pf_frame_alloc(&got, w, h, outs[o], co) != PF_OK ||
                        pf_frame_alloc(&want, w, h, outs[o], co) != PF_OK)
                        exit(1);
                    run(p, &in, &got);
                    run(ref, &fin, &want);
                    CHECKF(same_frames(&got, &want), "%s: %s x%d -> %s x%d differs", stages,
                           s ? "u16" : "u8", ci,
                           o == 0   ? "u8"
                           : o == 1 ? "u16"
                                    : "f32",
                           co);
                    pf_frame_free(&got);
                    pf_frame_free(&want);
                }
            pf_frame_free(&in);
            pf_frame_free(&fin);
        }
    }
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(ref);
}

/* A parameter changed between frames reaches the tables: the next frame is the float
   chain with the new value (and differs from the old one). */
static void check_live_param(pf_rng *r)
{
    const char *stages = chains[4]; /* gamma 2.2 */
    pf_pipeline *p = load(stages), *ref = load(stages);
    pf_frame in = codes_frame(r, PF_U8, 4, 301, 20), fin = as_float(&in);
    pf_frame a, b, want;
    if (pf_frame_alloc(&a, 301, 20, PF_U8, 4) || pf_frame_alloc(&b, 301, 20, PF_U8, 4) ||
        pf_frame_alloc(&want, 301, 20, PF_U8, 4))
        exit(1);
    run(p, &in, &a);
    CHECK(pf_pipeline_set_param(p, "s.gamma", "0.6") == PF_OK);
    CHECK(pf_pipeline_set_param(ref, "s.gamma", "0.6") == PF_OK);
    run(p, &in, &b);
    run(ref, &fin, &want);
    CHECK(same_frames(&b, &want));
    CHECK(!same_frames(&a, &b));
    /* and the format of the same pipeline's frames may change from frame to frame */
    pf_frame in16 = codes_frame(r, PF_U16, 4, 300, 300), fin16 = as_float(&in16), g16, w16;
    if (pf_frame_alloc(&g16, 300, 300, PF_U16, 3) || pf_frame_alloc(&w16, 300, 300, PF_U16, 3))
        exit(1);
    run(p, &in16, &g16);
    run(ref, &fin16, &w16);
    CHECK(same_frames(&g16, &w16));
    pf_frame_free(&in);
    pf_frame_free(&fin);
    pf_frame_free(&a);
    pf_frame_free(&b);
    pf_frame_free(&want);
    pf_frame_free(&in16);
    pf_frame_free(&fin16);
    pf_frame_free(&g16);
    pf_frame_free(&w16);
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(ref);
}

/* ---- Two 8-bit inputs: tables over every pair of codes ------------------------------ */

static const char *const pairs[] = {
    /* tables that are integer forms (cpu_lut.c's classify_pairs): run as byte operations */
    "{\"id\": \"s\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"]}",
    "{\"id\": \"s\", \"op\": \"difference\", \"inputs\": [\"a\", \"b\"]}",
    "{\"id\": \"s\", \"op\": \"multiply\", \"inputs\": [\"b\", \"a\"]}",
    /* and tables that are not: looked up */
    "{\"id\": \"s\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"], \"params\": {\"scale\": "
    "0.7}}",
    "{\"id\": \"s\", \"op\": \"blend\", \"inputs\": [\"a\", \"b\"], \"params\": "
    "{\"opacity\": 0.3}}",
    "{\"id\": \"d\", \"op\": \"difference\", \"inputs\": [\"b\", \"a\"]}, "
    "{\"id\": \"g\", \"op\": \"gamma\", \"inputs\": [\"d\"], \"params\": {\"gamma\": 0.8}}, "
    "{\"id\": \"s\", \"op\": \"multiply\", \"inputs\": [\"g\", \"a\"]}",
};

/* Inputs a and b whose first 65536 pixels hold every pair of codes in each channel
   (a the high byte, b the low byte of a permutation per channel), random after. */
static void pair_frames(pf_rng *r, int ch, pf_frame *a, pf_frame *b)
{
    pf_frame all = codes_frame(r, PF_U16, ch, 256, 260);
    if (pf_frame_alloc(a, 256, 260, PF_U8, ch) != PF_OK ||
        pf_frame_alloc(b, 256, 260, PF_U8, ch) != PF_OK)
        exit(1);
    for (int y = 0; y < 260; y++) {
        const uint16_t *s = (const uint16_t *)((const char *)all.data + (size_t)y * all.pitch);
        uint8_t *da = (uint8_t *)a->data + (size_t)y * a->pitch;
        uint8_t *db = (uint8_t *)b->data + (size_t)y * b->pitch;
        for (int i = 0; i < 256 * ch; i++) {
            da[i] = (uint8_t)(s[i] >> 8);
            db[i] = (uint8_t)s[i];
        }
    }
    pf_frame_free(&all);
}

static void check_pairs(const char *stages, pf_rng *r)
{
    pf_pipeline *p = load2(stages, 2), *ref = load2(stages, 2);
    static const pf_sample outs[] = {PF_U8, PF_U16, PF_F32};
    for (int ci = 1; ci <= 4; ci++) {
        pf_frame in[2], fin[2];
        pair_frames(r, ci, &in[0], &in[1]);
        fin[0] = as_float(&in[0]);
        fin[1] = as_float(&in[1]);
        for (int o = 0; o < 3; o++)
            for (int co = 1; co <= 4; co++) {
                pf_frame got, want;
                if (pf_frame_alloc(&got, 256, 260, outs[o], co) != PF_OK ||
                    pf_frame_alloc(&want, 256, 260, outs[o], co) != PF_OK)
                    exit(1);
                CHECK(pf_pipeline_run(p, in, 2, &got, 1) == PF_OK);
                CHECK(pf_pipeline_run(ref, fin, 2, &want, 1) == PF_OK);
                CHECKF(same_frames(&got, &want), "%s: u8 x%d -> %d x%d differs", stages, ci, o, co);
                pf_frame_free(&got);
                pf_frame_free(&want);
            }
        for (int k = 0; k < 2; k++) {
            pf_frame_free(&in[k]);
            pf_frame_free(&fin[k]);
        }
    }
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(ref);
}

/* ---- Geometry in the frames' own format ---------------------------------------------- */

static const char *const moves[] = {
    "{\"id\": \"s\", \"op\": \"crop\", \"params\": {\"x\": 3, \"y\": 2, \"width\": 17, "
    "\"height\": 9}}",
    "{\"id\": \"s\", \"op\": \"crop\", \"params\": {\"width_pct\": 50, \"height_pct\": 40, "
    "\"gravity\": \"bottom-right\"}}",
    "{\"id\": \"s\", \"op\": \"flip\", \"params\": {\"axis\": \"horizontal\"}}",
    "{\"id\": \"s\", \"op\": \"flip\", \"params\": {\"axis\": \"vertical\"}}",
    "{\"id\": \"s\", \"op\": \"flip\", \"params\": {\"axis\": \"both\"}}",
    "{\"id\": \"s\", \"op\": \"rotate\", \"params\": {\"angle\": \"90\"}}",
    "{\"id\": \"s\", \"op\": \"rotate\", \"params\": {\"angle\": \"180\"}}",
    "{\"id\": \"s\", \"op\": \"rotate\", \"params\": {\"angle\": \"270\"}}",
    "{\"id\": \"s\", \"op\": \"pad\", \"params\": {\"left\": 3, \"right\": 1, \"top\": 2, "
    "\"bottom\": 5, \"color\": [0.2, 0.5019608, 1.2, 0.7]}}",
    "{\"id\": \"s\", \"op\": \"resize\", \"params\": {\"scale\": 0.5, \"mode\": \"nearest\"}}",
    "{\"id\": \"s\", \"op\": \"resize\", \"params\": {\"width\": 41, \"height\": 7, \"mode\": "
    "\"nearest\"}}",
    "{\"id\": \"s\", \"op\": \"resize\", \"params\": {\"scale\": 2.3, \"mode\": \"nearest\"}}",
    /* a stencil on the codes (median3's run_native: a selection) */
    "{\"id\": \"s\", \"op\": \"median3\"}",
    /* not copies: the float path, the same bytes as ever */
    "{\"id\": \"s\", \"op\": \"resize\", \"params\": {\"scale\": 0.7, \"mode\": \"bilinear\"}}",
    "{\"id\": \"s\", \"op\": \"rotate\", \"params\": {\"degrees\": 30}}",
};

/* Each stage on integer frames of every format, into the same format, against the float
   path (float frames of the same samples, stored into the same integer format). */
static void check_moves(const char *stages, pf_rng *r)
{
    pf_pipeline *p = load(stages), *ref = load(stages);
    for (int s = 0; s < 2; s++)
        for (int ch = 1; ch <= 4; ch++) {
            pf_sample is = s ? PF_U16 : PF_U8;
            pf_frame in = codes_frame(r, is, ch, 37, 23), fin = as_float(&in), got, want;
            pf_output_info info;
            pf_shape shape = {37, 23};
            if (pf_pipeline_plan(p, &shape, 1) != PF_OK ||
                pf_pipeline_output_info(p, 0, &info) != PF_OK) {
                fprintf(stderr, "%s: %s\n", stages, pf_pipeline_errmsg(p));
                exit(1);
            }
            int w = info.shape.width, h = info.shape.height;
            if (pf_frame_alloc(&got, w, h, is, ch) != PF_OK ||
                pf_frame_alloc(&want, w, h, is, ch) != PF_OK)
                exit(1);
            memset(got.data, 0xa5, got.pitch * (size_t)h); /* unwritten pixels show */
            run(p, &in, &got);
            run(ref, &fin, &want);
            CHECKF(same_frames(&got, &want), "%s: %s x%d differs", stages, s ? "u16" : "u8", ch);
            pf_frame_free(&in);
            pf_frame_free(&fin);
            pf_frame_free(&got);
            pf_frame_free(&want);
        }
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(ref);
}

/* ---- Histograms counted by code ---------------------------------------------------- */

/* histogram with `bins` on integer frames of every format against the float path (the
   same samples as floats): the same counts in every bin. The frames are tall enough for
   several bands; one column wide too (more rows fit a 32-bit count than an int holds). */
static void check_histogram_width(int bins, int width, pf_rng *r)
{
    char stages[256];
    snprintf(stages, sizeof stages,
             "{\"id\": \"s\", \"op\": \"histogram\", \"params\": {\"bins\": %d}}", bins);
    pf_pipeline *p = load(stages), *ref = load(stages);
    for (int s = 0; s < 2; s++)
        for (int ch = 1; ch <= 4; ch++) {
            pf_frame in = codes_frame(r, s ? PF_U16 : PF_U8, ch, width, s ? 300 : 70),
                     fin = as_float(&in);
            pf_table got, want;
            run(p, &in, NULL);
            run(ref, &fin, NULL);
            CHECK(pf_pipeline_table(p, 0, &got) == PF_OK);
            CHECK(pf_pipeline_table(ref, 0, &want) == PF_OK);
            CHECKF(got.rows == bins && want.rows == bins && got.cols == 4 &&
                       !memcmp(got.data, want.data, sizeof(double) * 4 * (size_t)bins),
                   "histogram %d bins: %s x%d differs", bins, s ? "u16" : "u8", ch);
            double total = 0;
            for (int i = 0; i < 4 * bins; i++)
                total += got.data[i];
            CHECK(total == 4.0 * in.width * in.height);
            pf_frame_free(&in);
            pf_frame_free(&fin);
        }
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(ref);
}

static void check_histogram(int bins, pf_rng *r)
{
    for (int width = 256; width >= 1; width -= 255)
        check_histogram_width(bins, width, r);
}

/* ---- Which path ran ------------------------------------------------------------------ */

/* The liar plugin's fast paths give other numbers than its float code: integer frames
   must show the fast ones (so the paths tested above are the ones that ran), float
   frames the float ones. */
static void check_paths_taken(pf_rng *r)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = PF_LIAR_DIR;
    pf_engine *saved = eng;
    eng = pf_test_engine_with(&cfg);
    pf_frame in = codes_frame(r, PF_U8, 4, 300, 10), fin = as_float(&in), a, b;
    if (pf_frame_alloc(&a, 300, 10, PF_U8, 4) || pf_frame_alloc(&b, 300, 10, PF_U8, 4))
        exit(1);
    pf_pipeline *p = load("{\"id\": \"s\", \"op\": \"liar_point\"}");
    run(p, &in, &a);
    run(p, &fin, &b);
    CHECKF(!same_frames(&a, &b), "a per-channel point unit on RGBA8 did not run through tables");
    pf_pipeline_destroy(p);

    /* tabulated into the float image a stencil reads (gaussian of sigma 0 copies it) */
    p = load("{\"id\": \"c\", \"op\": \"liar_point\"}, {\"id\": \"s\", \"op\": "
             "\"gaussian\", \"inputs\": [\"c\"], \"params\": {\"sigma\": 0}}");
    run(p, &in, &a);
    run(p, &fin, &b);
    CHECKF(!same_frames(&a, &b), "a per-channel point unit stored for a stencil was not tabulated");
    pf_pipeline_destroy(p);

    p = load("{\"id\": \"s\", \"op\": \"liar_copy\"}");
    run(p, &in, &a);
    run(p, &fin, &b);
    CHECKF(same_frames(&a, &in), "a resample stage with run_native did not copy RGBA8");
    int zero = 1;
    for (int y = 0; y < b.height; y++)
        for (int x = 0; x < 4 * b.width; x++)
            zero &= ((const uint8_t *)b.data + (size_t)y * b.pitch)[x] == 0;
    CHECKF(zero, "float frames took the native copy");
    pf_pipeline_destroy(p);

    p = load("{\"id\": \"s\", \"op\": \"liar_stencil\"}");
    run(p, &in, &a);
    run(p, &fin, &b);
    CHECKF(same_frames(&a, &in), "a stencil stage with run_native did not copy RGBA8");
    zero = 1;
    for (int y = 0; y < b.height; y++)
        for (int x = 0; x < 4 * b.width; x++)
            zero &= ((const uint8_t *)b.data + (size_t)y * b.pitch)[x] == 0;
    CHECKF(zero, "float frames took the stencil's native run");
    pf_pipeline_destroy(p);

    p = load("{\"id\": \"s\", \"op\": \"liar_count\"}");
    pf_table t;
    run(p, &in, NULL);
    CHECK(pf_pipeline_table(p, 0, &t) == PF_OK && t.data[0] == 300.0 * 10);
    run(p, &fin, NULL);
    CHECK(pf_pipeline_table(p, 0, &t) == PF_OK && t.data[0] == 0);
    pf_pipeline_destroy(p);

    pf_frame_free(&in);
    pf_frame_free(&fin);
    pf_frame_free(&a);
    pf_frame_free(&b);
    pf_engine_destroy(eng);
    eng = saved;
}

int main(void)
{
    eng = pf_test_engine();
    pf_rng r;
    pf_rng_seed(&r, 17);
    for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++)
        check_tables(chains[i], &r);
    check_paths_taken(&r);
    check_live_param(&r);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        check_pairs(pairs[i], &r);
    for (size_t i = 0; i < sizeof moves / sizeof moves[0]; i++)
        check_moves(moves[i], &r);
    static const int bins[] = {2, 17, 256, 1000, 65535, 65536};
    for (size_t i = 0; i < sizeof bins / sizeof bins[0]; i++)
        check_histogram(bins[i], &r);
    pf_engine_destroy(eng);
    return pf_test_done("test_cpu_fast");
}
