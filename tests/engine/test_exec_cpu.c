/* tests/engine/test_exec_cpu.c: the CPU executor (engine/exec_cpu.c, frame.c, api.c's run)
 * against references computed here from the documented formulas, on random frames of
 * odd sizes in every sample format; outputs are poisoned before each run so that
 * unwritten pixels show.
 *
 * Tolerances: references are computed in double from inputs converted as documented
 * (integer samples / max), while the engine works in float with the reciprocal, so
 * float results may differ by a few ulps: 2e-6 for point ops, 1e-5 for the gaussian
 * (float weights and sums), 1e-9 relative for column sums. Integer outputs must match
 * the rounded reference exactly, except where the reference lies within that tolerance
 * of a rounding tie. Engine against engine (fused/unfused, thread counts) is bit-exact.
 */
#define _GNU_SOURCE
#include <math.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

static pf_engine *eng;

/* ---- Frames -------------------------------------------------------------------------- */

static const char *const sample_names[] = {"u8", "u16", "f32"};

static double sample_max(pf_sample s)
{
    return s == PF_U8 ? 255.0 : s == PF_U16 ? 65535.0 : 1.0;
}

static void *sample_ptr(const pf_frame *f, int x, int y, int c)
{
    size_t b = pf_frame_pixel_bytes(f->sample, f->channels) / (size_t)f->channels;
    return (char *)f->data + (size_t)y * f->pitch + ((size_t)x * f->channels + c) * b;
}

/* Raw sample value: 0..255, 0..65535 or the float. */
static double get(const pf_frame *f, int x, int y, int c)
{
    void *p = sample_ptr(f, x, y, c);
    return f->sample == PF_U8 ? *(uint8_t *)p : f->sample == PF_U16 ? *(uint16_t *)p : *(float *)p;
}

static void set(pf_frame *f, int x, int y, int c, double v)
{
    void *p = sample_ptr(f, x, y, c);
    if (f->sample == PF_U8)
        *(uint8_t *)p = (uint8_t)v;
    else if (f->sample == PF_U16)
        *(uint16_t *)p = (uint16_t)v;
    else
        *(float *)p = (float)v;
}

/* A frame with every byte 0xff (NaN floats, max integers), so unwritten samples show. */
static pf_frame frame_new(int w, int h, pf_sample s, int ch)
{
    pf_frame f;
    if (pf_frame_alloc(&f, w, h, s, ch) != PF_OK) {
        fprintf(stderr, "cannot allocate a %dx%d frame\n", w, h);
        exit(1);
    }
    memset(f.data, 0xff, f.pitch * (size_t)h);
    return f;
}

/* Random samples: integers over their whole range, floats in [lo, hi). */
static pf_frame frame_random(pf_rng *r, int w, int h, pf_sample s, int ch, float lo, float hi)
{
    pf_frame f = frame_new(w, h, s, ch);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++)
                set(&f, x, y, c,
                    s == PF_F32 ? lo + (hi - lo) * pf_rng_float(r)
                                : (double)(pf_rng_u32(r) % (uint32_t)(sample_max(s) + 1)));
    return f;
}

/* The working-format pixel of a frame as documented: integers / max; gray g becomes
   (g, g, g, 1), gray+alpha (g, g, g, a), RGB (r, g, b, 1). */
static void load_px(const pf_frame *f, int x, int y, double v[4])
{
    double m = sample_max(f->sample), s[4];
    for (int c = 0; c < f->channels; c++)
        s[c] = get(f, x, y, c) / m;
    switch (f->channels) {
    case 1:
        v[0] = v[1] = v[2] = s[0], v[3] = 1;
        break;
    case 2:
        v[0] = v[1] = v[2] = s[0], v[3] = s[1];
        break;
    case 3:
        v[0] = s[0], v[1] = s[1], v[2] = s[2], v[3] = 1;
        break;
    default:
        memcpy(v, s, sizeof s);
        break;
    }
}

/* A reference image: w * h * 4 doubles. */
typedef struct ref {
    int w, h;
    double *v;
} ref;

static ref ref_new(int w, int h)
{
    ref r = {w, h, calloc((size_t)w * (size_t)h * 4, sizeof(double))};
    if (!r.v)
        exit(1);
    return r;
}

static double *ref_px(const ref *r, int x, int y)
{
    return r->v + ((size_t)y * r->w + x) * 4;
}

static ref ref_load(const pf_frame *f)
{
    ref r = ref_new(f->width, f->height);
    for (int y = 0; y < f->height; y++)
        for (int x = 0; x < f->width; x++)
            load_px(f, x, y, ref_px(&r, x, y));
    return r;
}

/* The value output channel c of a ch-channel frame takes from RGBA v, before
   quantisation: gray is Rec. 709 luma. */
static double out_value(const double v[4], int ch, int c)
{
    double luma = 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
    if (ch <= 2)
        return c == 0 ? luma : v[3];
    return v[c];
}

/* Compares out with the reference: floats within tol, integers rounded exactly (ties
   within tol either way). Returns the number of mismatches, printing the first. */
static int compare(const pf_frame *out, const ref *r, double tol, const char *what)
{
    int bad = 0;
    CHECKF(out->width == r->w && out->height == r->h, "%s: %dx%d, reference %dx%d", what,
           out->width, out->height, r->w, r->h);
    if (out->width != r->w || out->height != r->h)
        return 1;
    double m = sample_max(out->sample);
    for (int y = 0; y < r->h; y++)
        for (int x = 0; x < r->w; x++)
            for (int c = 0; c < out->channels; c++) {
                double want = out_value(ref_px(r, x, y), out->channels, c);
                double got = get(out, x, y, c);
                int ok;
                if (out->sample == PF_F32) {
                    ok = isnan(want) ? isnan(got) : fabs(got - want) <= tol;
                } else {
                    double t = isnan(want) ? 0 : want * m;
                    t = t < 0 ? 0 : (t > m ? m : t);
                    double q = floor(t + 0.5);
                    ok = got == q ||
                         (fabs(t - floor(t) - 0.5) <= tol * m + 1e-9 && fabs(got - t) < 1);
                }
                if (!ok && bad++ == 0)
                    fprintf(stderr, "%s: (%d, %d) channel %d: got %.9g, expected %.9g (%s)\n", what,
                            x, y, c, got, want, sample_names[out->sample]);
            }
    CHECKF(bad == 0, "%s: %d samples differ", what, bad);
    return bad;
}

static int same_bytes(const pf_frame *a, const pf_frame *b)
{
    if (a->width != b->width || a->height != b->height || a->sample != b->sample ||
        a->channels != b->channels)
        return 0;
    size_t row = (size_t)a->width * pf_frame_pixel_bytes(a->sample, a->channels);
    for (int y = 0; y < a->height; y++)
        if (memcmp((char *)a->data + (size_t)y * a->pitch, (char *)b->data + (size_t)y * b->pitch,
                   row) != 0)
            return 0;
    return 1;
}

/* ---- Pipelines ----------------------------------------------------------------------- */

static pf_pipeline *load_on(pf_engine *e, const char *json)
{
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(e, json, "exec", &p);
    CHECKF(rc == PF_OK, "load: %s", pf_engine_errmsg(e));
    /* these are tests of the CPU executor, on any build and machine */
    CHECK(!p || pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    return p;
}

static pf_pipeline *load(const char *json)
{
    return load_on(eng, json);
}

static pf_stats stats(const pf_pipeline *p)
{
    pf_stats s = {.size = sizeof s};
    CHECK(pf_pipeline_stats(p, &s) == PF_OK);
    return s;
}

static int run1(pf_pipeline *p, const pf_frame *in, pf_frame *out)
{
    int rc = pf_pipeline_run(p, in, 1, out, 1);
    CHECKF(rc == PF_OK, "run: %s", pf_pipeline_errmsg(p));
    return rc;
}

static pf_engine *engine_with_threads(int n)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.threads = n;
    return pf_test_engine_with(&cfg);
}

/* ---- Point chain --------------------------------------------------------------------- */

#define CHAIN_JSON(amount)                                                                         \
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["                                         \
    "{\"id\": \"a\", \"op\": \"brightness\", \"params\": {\"amount\": " amount "}},"               \
    "{\"id\": \"b\", \"op\": \"contrast\", \"params\": {\"amount\": 1.3, \"pivot\": 0.4}},"        \
    "{\"id\": \"c\", \"op\": \"invert\"}], \"outputs\": {\"o\": \"c\"}}"

/* brightness(amount), contrast(1.3 about 0.4), invert: RGB only; alpha kept. */
static ref ref_chain(const pf_frame *in, double amount)
{
    ref r = ref_load(in);
    for (size_t i = 0; i < (size_t)r.w * r.h; i++)
        for (int c = 0; c < 3; c++) {
            double v = r.v[i * 4 + c] + amount;
            v = v + (v - 0.4) * (1.3 - 1.0);
            r.v[i * 4 + c] = 1.0 - v;
        }
    return r;
}

static void test_chain(void)
{
    static const int sizes[][2] = {{37, 23}, {129, 67}, {301, 5}, {1, 1}, {257, 130}};
    pf_rng rng;
    pf_rng_seed(&rng, 1);
    pf_pipeline *p = load(CHAIN_JSON("0.1"));
    if (!p)
        return;
    for (int si = 0; si < 5; si++) {
        int w = sizes[si][0], h = sizes[si][1];
        for (int s = PF_U8; s <= PF_F32; s++) {
            int ch = 1 + (si + s) % 4;
            pf_frame in = frame_random(&rng, w, h, (pf_sample)s, ch, -0.25f, 1.25f);
            ref r = ref_chain(&in, 0.1);
            char what[128];
            for (int os = PF_U8; os <= PF_F32; os++) {
                for (int och = 1; och <= 4; och++) {
                    if (os != PF_F32 && och != 4 && och != ch)
                        continue; /* enough combinations */
                    pf_frame out = frame_new(w, h, (pf_sample)os, och);
                    snprintf(what, sizeof what, "chain %dx%d %s/%d -> %s/%d", w, h, sample_names[s],
                             ch, sample_names[os], och);
                    if (run1(p, &in, &out) == PF_OK)
                        compare(&out, &r, 2e-6, what);
                    pf_frame_free(&out);
                }
            }
            free(r.v);
            pf_frame_free(&in);
        }
    }
    pf_pipeline_destroy(p);
}

/* ---- Two inputs, stencils, reductions, resampling ------------------------------------ */

static void test_blend(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 2);
    pf_pipeline *p = load("{\"pipefuse\": 1, \"inputs\": [\"a\", \"b\"], \"stages\": ["
                          "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"a\", \"b\"], "
                          "\"params\": {\"opacity\": 0.3}}], \"outputs\": {\"o\": \"m\"}}");
    if (!p)
        return;
    CHECK(pf_pipeline_input_count(p) == 2);
    CHECK(strcmp(pf_pipeline_input_name(p, 1), "b") == 0);
    pf_frame in[2] = {frame_random(&rng, 45, 31, PF_U8, 3, 0, 1),
                      frame_random(&rng, 45, 31, PF_U16, 4, 0, 1)};
    pf_frame out = frame_new(45, 31, PF_F32, 4);
    ref a = ref_load(&in[0]), b = ref_load(&in[1]);
    for (size_t i = 0; i < (size_t)45 * 31 * 4; i++)
        a.v[i] = a.v[i] + (b.v[i] - a.v[i]) * 0.3;
    int rc = pf_pipeline_run(p, in, 2, &out, 1);
    CHECKF(rc == PF_OK, "%s", pf_pipeline_errmsg(p));
    if (rc == PF_OK)
        compare(&out, &a, 2e-6, "blend");

    /* inputs of different sizes: a shape error naming both */
    pf_frame small = frame_random(&rng, 44, 31, PF_U8, 3, 0, 1);
    pf_frame in2[2] = {small, in[1]};
    rc = pf_pipeline_run(p, in2, 2, &out, 1);
    CHECKF(rc == PF_SHAPE && strstr(pf_pipeline_errmsg(p), "44x31") &&
               strstr(pf_pipeline_errmsg(p), "45x31"),
           "%s: %s", pf_status_name(rc), pf_pipeline_errmsg(p));
    pf_frame_free(&small);
    free(a.v), free(b.v);
    pf_frame_free(&in[0]), pf_frame_free(&in[1]), pf_frame_free(&out);
    pf_pipeline_destroy(p);
}

/* Gaussian of radius ceil(3 sigma), weights exp(-i^2 / (2 sigma^2)) normalised,
   horizontal then vertical, reads clamped to the image. In place. */
static void ref_gaussian(ref *r, double sigma)
{
    int rad = (int)ceil(3 * sigma), w = r->w, h = r->h;
    double wt[256], sum = 0;
    for (int i = 0; i <= rad; i++) {
        wt[i] = exp(-(double)i * i / (2 * sigma * sigma));
        sum += i ? 2 * wt[i] : wt[i];
    }
    ref t = ref_new(w, h);
    for (int pass = 0; pass < 2; pass++) {
        const ref *src = pass ? &t : r;
        ref *dst = pass ? r : &t;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 4; c++) {
                    double acc = 0;
                    for (int i = -rad; i <= rad; i++) {
                        int sx = pass ? x : x + i, sy = pass ? y + i : y;
                        sx = sx < 0 ? 0 : (sx >= w ? w - 1 : sx);
                        sy = sy < 0 ? 0 : (sy >= h ? h - 1 : sy);
                        acc += wt[i < 0 ? -i : i] / sum * ref_px(src, sx, sy)[c];
                    }
                    ref_px(dst, x, y)[c] = acc;
                }
    }
    free(t.v);
}

static void test_gaussian_blend(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 3);
    pf_pipeline *p = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
                          "{\"id\": \"g\", \"op\": \"gaussian\", \"params\": {\"sigma\": 1.5, "
                          "\"alpha\": \"straight\"}}," /* the reference mixes straight */
                          "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"x\", \"g\"], "
                          "\"params\": {\"opacity\": 0.7}}], \"outputs\": {\"o\": \"m\"}}");
    if (!p)
        return;
    /* tall enough for several CPU bands of rows */
    pf_frame in = frame_random(&rng, 67, 1031, PF_F32, 4, 0, 1);
    pf_frame out = frame_new(67, 1031, PF_F32, 4);
    ref x = ref_load(&in), g = ref_load(&in);
    ref_gaussian(&g, 1.5);
    for (size_t i = 0; i < (size_t)67 * 1031 * 4; i++)
        x.v[i] = x.v[i] + (g.v[i] - x.v[i]) * 0.7;
    if (run1(p, &in, &out) == PF_OK)
        compare(&out, &x, 1e-5, "gaussian+blend");

    /* a larger sigma needs more scratch: set between frames, it still runs right */
    CHECK(pf_pipeline_set_param(p, "g.sigma", "6") == PF_OK);
    ref x2 = ref_load(&in), g2 = ref_load(&in);
    ref_gaussian(&g2, 6);
    for (size_t i = 0; i < (size_t)67 * 1031 * 4; i++)
        x2.v[i] = x2.v[i] + (g2.v[i] - x2.v[i]) * 0.7;
    if (run1(p, &in, &out) == PF_OK)
        compare(&out, &x2, 1e-5, "gaussian sigma 6 + blend");
    free(x.v), free(g.v), free(x2.v), free(g2.v);
    pf_frame_free(&in), pf_frame_free(&out);
    pf_pipeline_destroy(p);
}

#define ARTICLE_JSON                                                                               \
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["                                         \
    "{\"id\": \"axb\", \"op\": \"linear\", \"params\": {\"a\": 2.0, \"b\": 0.5}},"                 \
    "{\"id\": \"sums\", \"op\": \"colsum\", \"inputs\": [\"axb\"]}],"                              \
    "\"outputs\": {\"column_sums\": \"sums\"}}"

/* The article's case: y = 2x + 0.5 on every channel, then per-column sums. */
static void check_article(pf_pipeline *p, const pf_frame *in, const char *what)
{
    pf_table t;
    int rc = pf_pipeline_table(p, 0, &t);
    CHECKF(rc == PF_OK, "%s: no table", what);
    if (rc != PF_OK)
        return;
    CHECKF(t.rows == in->width && t.cols == 4, "%s: table %dx%d", what, t.rows, t.cols);
    CHECK(t.columns && strcmp(t.columns[0], "r") == 0 && strcmp(t.columns[3], "a") == 0);
    int bad = 0;
    for (int x = 0; x < in->width && t.rows == in->width; x++) {
        double want[4] = {0, 0, 0, 0}, v[4];
        for (int y = 0; y < in->height; y++) {
            load_px(in, x, y, v);
            for (int c = 0; c < 4; c++)
                want[c] += 2.0 * v[c] + 0.5;
        }
        for (int c = 0; c < 4; c++)
            if (fabs(t.data[x * 4 + c] - want[c]) > 1e-9 * in->height + 1e-6 * fabs(want[c]) &&
                bad++ == 0)
                fprintf(stderr, "%s: column %d channel %d: %.17g, expected %.17g\n", what, x, c,
                        t.data[x * 4 + c], want[c]);
    }
    CHECKF(bad == 0, "%s: %d sums differ", what, bad);
}

static void test_article(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 4);
    pf_pipeline *p = load(ARTICLE_JSON);
    if (!p)
        return;
    pf_frame in = frame_random(&rng, 257, 131, PF_F32, 4, -1, 1);
    /* a table output takes no frame: NULL entries, or none at all */
    if (pf_pipeline_run(p, &in, 1, NULL, 0) == PF_OK)
        check_article(p, &in, "article 257x131");
    else
        CHECKF(0, "%s", pf_pipeline_errmsg(p));
    pf_frame_free(&in);

    /* the same size again: no plan, no allocation */
    pf_stats st0 = stats(p);
    in = frame_random(&rng, 257, 131, PF_U8, 3, 0, 1);
    if (run1(p, &in, NULL) == PF_OK) {
        check_article(p, &in, "article 257x131 rgb8");
        pf_stats st = stats(p);
        CHECK(st.plans == st0.plans && st.allocations_last_frame == 0 && st.frames == 2);
    }
    pf_frame_free(&in);

    /* re-planned when the input size changes */
    in = frame_random(&rng, 23, 1500, PF_U16, 1, 0, 1);
    pf_output_info oi;
    if (run1(p, &in, NULL) == PF_OK) {
        check_article(p, &in, "article 23x1500 gray16");
        CHECK(pf_pipeline_output_info(p, 0, &oi) == PF_OK && oi.shape.height == 23);
        CHECK(stats(p).plans == st0.plans + 1);
    }
    pf_frame_free(&in);
    pf_pipeline_destroy(p);
}

/* Bilinear with pixel centres aligned: output o samples input coordinate
   (o + 0.5) * n_in / n_out - 0.5, from its two neighbours clamped to the image. */
static ref ref_bilinear(const pf_frame *in, int w, int h)
{
    ref r = ref_new(w, h);
    for (int y = 0; y < h; y++) {
        double cy = (y + 0.5) * in->height / h - 0.5, fy = cy - floor(cy);
        int y0 = (int)floor(cy), y1 = y0 + 1;
        y0 = y0 < 0 ? 0 : (y0 >= in->height ? in->height - 1 : y0);
        y1 = y1 < 0 ? 0 : (y1 >= in->height ? in->height - 1 : y1);
        for (int x = 0; x < w; x++) {
            double cx = (x + 0.5) * in->width / w - 0.5, fx = cx - floor(cx);
            int x0 = (int)floor(cx), x1 = x0 + 1;
            x0 = x0 < 0 ? 0 : (x0 >= in->width ? in->width - 1 : x0);
            x1 = x1 < 0 ? 0 : (x1 >= in->width ? in->width - 1 : x1);
            double a[4], b[4], c[4], d[4];
            load_px(in, x0, y0, a), load_px(in, x1, y0, b);
            load_px(in, x0, y1, c), load_px(in, x1, y1, d);
            for (int k = 0; k < 4; k++)
                ref_px(&r, x, y)[k] =
                    (1 - fy) * ((1 - fx) * a[k] + fx * b[k]) + fy * ((1 - fx) * c[k] + fx * d[k]);
        }
    }
    return r;
}

static void test_resample(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 5);
    pf_pipeline *p = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
                          "{\"id\": \"cut\", \"op\": \"crop\", \"inputs\": [\"x\"], \"params\": "
                          "{\"x\": 3, \"y\": 5, \"width\": 20, \"height\": 9}},"
                          "{\"id\": \"fit\", \"op\": \"resize\", \"inputs\": [\"x\"], \"params\": "
                          "{\"width\": 50, \"alpha\": \"straight\"}},"
                          "{\"id\": \"big\", \"op\": \"resize\", \"inputs\": [\"x\"], \"params\": "
                          "{\"scale\": 2, \"mode\": \"nearest\"}}],"
                          "\"outputs\": {\"cut\": \"cut\", \"fit\": \"fit\", \"big\": \"big\"}}");
    if (!p)
        return;
    pf_shape s = {101, 77};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    pf_output_info oi[3];
    for (int i = 0; i < 3; i++)
        CHECK(pf_pipeline_output_info(p, i, &oi[i]) == PF_OK);
    CHECK(oi[0].shape.width == 20 && oi[0].shape.height == 9);
    CHECKF(oi[1].shape.width == 50 && oi[1].shape.height == 38, "fit %dx%d", oi[1].shape.width,
           oi[1].shape.height); /* 77 * 50 / 101 = 38.1 */
    CHECK(oi[2].shape.width == 202 && oi[2].shape.height == 154);

    pf_frame in = frame_random(&rng, 101, 77, PF_F32, 4, 0, 1);
    pf_frame out[3] = {frame_new(20, 9, PF_F32, 4), frame_new(50, 38, PF_U8, 3),
                       frame_new(202, 154, PF_F32, 4)};
    int rc = pf_pipeline_run(p, &in, 1, out, 3);
    CHECKF(rc == PF_OK, "%s", pf_pipeline_errmsg(p));
    if (rc == PF_OK) {
        ref cut = ref_new(20, 9), big = ref_new(202, 154);
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 20; x++)
                load_px(&in, x + 3, y + 5, ref_px(&cut, x, y));
        for (int y = 0; y < 154; y++)
            for (int x = 0; x < 202; x++)
                load_px(&in, x / 2, y / 2, ref_px(&big, x, y));
        ref fit = ref_bilinear(&in, 50, 38);
        compare(&out[0], &cut, 0, "crop");
        compare(&out[1], &fit, 1e-6, "resize bilinear to 50x38, u8 RGB");
        compare(&out[2], &big, 0, "resize nearest x2");
        free(cut.v), free(big.v), free(fit.v);
    }
    for (int i = 0; i < 3; i++)
        pf_frame_free(&out[i]);
    pf_frame_free(&in);
    pf_pipeline_destroy(p);
}

/* ---- Determinism: fusion, threads ---------------------------------------------------- */

#define DEMO_JSON                                                                                  \
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["                                         \
    "{\"id\": \"bright\", \"op\": \"brightness\", \"params\": {\"amount\": 0.04}},"                \
    "{\"id\": \"punch\", \"op\": \"contrast\", \"params\": {\"amount\": 1.15}},"                   \
    "{\"id\": \"vivid\", \"op\": \"saturation\", \"params\": {\"amount\": 1.3}},"                  \
    "{\"id\": \"glow\", \"op\": \"gaussian\", \"params\": {\"sigma\": 2.0}},"                      \
    "{\"id\": \"soft\", \"op\": \"blend\", \"inputs\": [\"vivid\", \"glow\"]},"                    \
    "{\"id\": \"frame\", \"op\": \"vignette\", \"inputs\": [\"soft\"]},"                           \
    "{\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"frame\"],"                           \
    " \"params\": {\"bins\": 64}},"                                                                \
    "{\"id\": \"st\", \"op\": \"stats\", \"inputs\": [\"frame\"]},"                                \
    "{\"id\": \"cols\", \"op\": \"colsum\", \"inputs\": [\"vivid\"]},"                             \
    "{\"id\": \"rows\", \"op\": \"rowsum\", \"inputs\": [\"soft\"]}],"                             \
    "\"outputs\": {\"result\": \"frame\", \"eight\": \"frame\", \"mid\": \"vivid\","               \
    "\"hist\": \"hist\", \"stats\": \"st\", \"cols\": \"cols\", \"rows\": \"rows\"}}"
#define DEMO_IMAGES  3
#define DEMO_OUTPUTS 7

typedef struct demo_result {
    pf_frame img[DEMO_IMAGES];
    double *tables[DEMO_OUTPUTS];
    size_t table_len[DEMO_OUTPUTS];
} demo_result;

static int run_demo(pf_pipeline *p, const pf_frame *in, demo_result *r)
{
    memset(r, 0, sizeof *r);
    int w = in->width, h = in->height;
    r->img[0] = frame_new(w, h, PF_F32, 4);
    r->img[1] = frame_new(w, h, PF_U8, 3);
    r->img[2] = frame_new(w, h, PF_U16, 4);
    pf_frame outs[DEMO_OUTPUTS] = {r->img[0], r->img[1], r->img[2]};
    int rc = pf_pipeline_run(p, in, 1, outs, DEMO_OUTPUTS);
    CHECKF(rc == PF_OK, "demo: %s", pf_pipeline_errmsg(p));
    for (int o = DEMO_IMAGES; o < DEMO_OUTPUTS && rc == PF_OK; o++) {
        pf_table t;
        CHECK(pf_pipeline_table(p, o, &t) == PF_OK);
        r->table_len[o] = (size_t)t.rows * (size_t)t.cols;
        r->tables[o] = malloc(sizeof(double) * r->table_len[o]);
        memcpy(r->tables[o], t.data, sizeof(double) * r->table_len[o]);
    }
    return rc;
}

static void demo_free(demo_result *r)
{
    for (int i = 0; i < DEMO_IMAGES; i++)
        pf_frame_free(&r->img[i]);
    for (int o = 0; o < DEMO_OUTPUTS; o++)
        free(r->tables[o]);
}

static void demo_same(const demo_result *a, const demo_result *b, const char *what)
{
    for (int i = 0; i < DEMO_IMAGES; i++)
        CHECKF(same_bytes(&a->img[i], &b->img[i]), "%s: image output %d differs", what, i);
    for (int o = DEMO_IMAGES; o < DEMO_OUTPUTS; o++)
        CHECKF(a->table_len[o] == b->table_len[o] && a->tables[o] && b->tables[o] &&
                   memcmp(a->tables[o], b->tables[o], sizeof(double) * a->table_len[o]) == 0,
               "%s: table output %d differs", what, o);
}

static void test_determinism(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 6);
    /* 301 wide: 108-row CPU bands, so 5 bands per unit and per reduce */
    pf_frame in = frame_random(&rng, 301, 500, PF_U16, 4, 0, 1);
    pf_engine *engines[3] = {engine_with_threads(1), engine_with_threads(2),
                             engine_with_threads(7)};
    demo_result base, r;
    pf_pipeline *p = load_on(engines[0], DEMO_JSON);
    if (!p || run_demo(p, &in, &base) != PF_OK) {
        pf_pipeline_destroy(p);
        pf_frame_free(&in);
        for (int i = 0; i < 3; i++)
            pf_engine_destroy(engines[i]);
        return;
    }
    /* the stats table is not all NaN or zero: there is something to compare */
    CHECK(base.tables[4] && base.tables[4][8] > 0.1 && base.tables[4][8] < 0.9);

    /* fusion off: the same bytes */
    CHECK(pf_pipeline_set_option(p, "fusion", "false") == PF_OK);
    if (run_demo(p, &in, &r) == PF_OK)
        demo_same(&base, &r, "fusion off");
    demo_free(&r);
    pf_pipeline_destroy(p);

    /* 2 and 7 threads, fused and not; and the pipeline's own thread cap */
    for (int e = 1; e < 3; e++) {
        for (int fuse = 0; fuse < 2; fuse++) {
            char what[64];
            snprintf(what, sizeof what, "%d threads, fusion %s", e == 1 ? 2 : 7,
                     fuse ? "on" : "off");
            p = load_on(engines[e], DEMO_JSON);
            if (p && !fuse)
                CHECK(pf_pipeline_set_option(p, "fusion", "false") == PF_OK);
            if (p && run_demo(p, &in, &r) == PF_OK)
                demo_same(&base, &r, what);
            demo_free(&r);
            if (p && e == 2 && fuse) {
                CHECK(pf_pipeline_set_option(p, "threads", "3") == PF_OK);
                if (run_demo(p, &in, &r) == PF_OK)
                    demo_same(&base, &r, "7 threads, capped at 3");
                demo_free(&r);
            }
            pf_pipeline_destroy(p);
        }
    }
    demo_free(&base);
    pf_frame_free(&in);
    for (int i = 0; i < 3; i++)
        pf_engine_destroy(engines[i]);
}

/* ---- Edge conversions ---------------------------------------------------------------- */

/* Input format -> working format -> output format, through an identity stage. */
static void test_conversions(void)
{
    pf_pipeline *p = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
                          "{\"id\": \"id\", \"op\": \"brightness\", \"params\": {\"amount\": 0}}],"
                          "\"outputs\": {\"o\": \"id\", \"raw\": \"x\"}}");
    if (!p)
        return;
    pf_rng rng;
    pf_rng_seed(&rng, 7);
    /* every input format to f32 RGBA: gray (g,g,g,1), gray+alpha (g,g,g,a), RGB alpha 1 */
    for (int s = PF_U8; s <= PF_F32; s++)
        for (int ch = 1; ch <= 4; ch++) {
            pf_frame in = frame_random(&rng, 19, 7, (pf_sample)s, ch, -2, 2);
            /* the ends of the integer range map to exactly 0 and 1 */
            if (s != PF_F32) {
                set(&in, 0, 0, 0, 0);
                set(&in, 1, 0, 0, sample_max((pf_sample)s));
            }
            pf_frame out[2] = {frame_new(19, 7, PF_F32, 4), frame_new(19, 7, PF_F32, 4)};
            ref r = ref_load(&in);
            char what[64];
            snprintf(what, sizeof what, "%s/%d in", sample_names[s], ch);
            int rc = pf_pipeline_run(p, &in, 1, out, 2);
            CHECKF(rc == PF_OK, "%s", pf_pipeline_errmsg(p));
            if (rc == PF_OK) {
                compare(&out[0], &r, 1.5e-7, what);
                compare(&out[1], &r, 1.5e-7, what); /* an input as an output */
                if (s != PF_F32)
                    CHECK(get(&out[0], 0, 0, 0) == 0.0 && get(&out[0], 1, 0, 0) == 1.0);
            }
            free(r.v);
            pf_frame_free(&out[0]), pf_frame_free(&out[1]), pf_frame_free(&in);
        }

    /* f32 to integers: round to nearest, clamp to [0, max], NaN to 0 */
    static const float vals[] = {0.0f,          0.4f / 255,    0.6f / 255,   1.0f / 255,
                                 127.49f / 255, 127.51f / 255, 254.6f / 255, 1.0f,
                                 -0.3f,         1.7f,          NAN,          INFINITY,
                                 -INFINITY,     -0.0f,         0.5f,         1e30f};
    static const uint8_t want8[] = {0, 0, 1, 1, 127, 128, 255, 255, 0, 255, 0, 255, 0, 0, 128, 255};
    static const uint16_t want16[] = {0, 103,   154, 257,   32765, 32770, 65432, 65535,
                                      0, 65535, 0,   65535, 0,     0,     32768, 65535};
    int n = (int)(sizeof vals / sizeof vals[0]);
    pf_frame in = frame_new(n, 1, PF_F32, 4);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 4; c++)
            set(&in, i, 0, c, vals[i]);
    pf_frame o8 = frame_new(n, 1, PF_U8, 4), o16 = frame_new(n, 1, PF_U16, 4);
    pf_frame of = frame_new(n, 1, PF_F32, 4);
    if (run1(p, &in, &o8) == PF_OK && run1(p, &in, &o16) == PF_OK && run1(p, &in, &of) == PF_OK)
        for (int i = 0; i < n; i++)
            for (int c = 0; c < 4; c++) {
                CHECKF(get(&o8, i, 0, c) == want8[i], "u8 of %g: %g, expected %d", (double)vals[i],
                       get(&o8, i, 0, c), want8[i]);
                CHECKF(get(&o16, i, 0, c) == want16[i], "u16 of %g: %g, expected %d",
                       (double)vals[i], get(&o16, i, 0, c), want16[i]);
                /* f32 passes through, NaN included (brightness 0 adds 0 to RGB) */
                double f = get(&of, i, 0, c);
                CHECKF(isnan(vals[i]) ? isnan(f) : f == vals[i], "f32 of %g: %g", (double)vals[i],
                       f);
            }
    pf_frame_free(&in), pf_frame_free(&o8), pf_frame_free(&o16), pf_frame_free(&of);

    /* RGBA to fewer channels: gray is Rec. 709 luma, gray+alpha keeps alpha, RGB drops it */
    in = frame_random(&rng, 33, 9, PF_F32, 4, 0, 1);
    ref r = ref_load(&in);
    for (int ch = 1; ch <= 3; ch++)
        for (int s = PF_U8; s <= PF_F32; s++) {
            pf_frame out = frame_new(33, 9, (pf_sample)s, ch);
            char what[64];
            snprintf(what, sizeof what, "f32/4 -> %s/%d", sample_names[s], ch);
            if (run1(p, &in, &out) == PF_OK)
                compare(&out, &r, 3e-7, what);
            pf_frame_free(&out);
        }
    free(r.v);
    pf_frame_free(&in);
    pf_pipeline_destroy(p);
}

/* ---- Errors -------------------------------------------------------------------------- */

static void test_errors(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 8);
    pf_pipeline *p = load(CHAIN_JSON("0.1"));
    if (!p)
        return;
    pf_frame in = frame_random(&rng, 21, 13, PF_U8, 4, 0, 1);
    pf_frame out = frame_new(21, 12, PF_U8, 4);

    /* an output frame of the wrong size */
    int rc = pf_pipeline_run(p, &in, 1, &out, 1);
    const char *msg = pf_pipeline_errmsg(p);
    CHECKF(rc == PF_SHAPE && strstr(msg, "21x12") && strstr(msg, "21x13") && strstr(msg, "'o'"),
           "%s: %s", pf_status_name(rc), msg);
    CHECK(((uint8_t *)out.data)[0] == 0xff); /* nothing written */
    pf_frame_free(&out);
    out = frame_new(21, 13, PF_U8, 4);

    /* the wrong number of inputs */
    pf_frame two[2] = {in, in};
    rc = pf_pipeline_run(p, two, 2, &out, 1);
    CHECKF(rc == PF_INVALID_ARGUMENT && strstr(pf_pipeline_errmsg(p), "1 input"), "%s: %s",
           pf_status_name(rc), pf_pipeline_errmsg(p));
    rc = pf_pipeline_run(p, NULL, 1, &out, 1);
    CHECK(rc == PF_INVALID_ARGUMENT);
    rc = pf_pipeline_run(p, &in, 0, &out, 1);
    CHECK(rc == PF_INVALID_ARGUMENT);

    /* frames that are not frames */
    pf_frame bad = in;
    bad.pitch = 21 * 4 - 1;
    CHECK(pf_pipeline_run(p, &bad, 1, &out, 1) == PF_INVALID_ARGUMENT);
    bad = in;
    bad.channels = 5;
    CHECK(pf_pipeline_run(p, &bad, 1, &out, 1) == PF_INVALID_ARGUMENT);
    bad = in;
    bad.data = NULL;
    CHECK(pf_pipeline_run(p, &bad, 1, &out, 1) == PF_INVALID_ARGUMENT);
    bad = out;
    bad.sample = (pf_sample)7;
    rc = pf_pipeline_run(p, &in, 1, &bad, 1);
    CHECKF(rc == PF_INVALID_ARGUMENT && strstr(pf_pipeline_errmsg(p), "'o'"), "%s: %s",
           pf_status_name(rc), pf_pipeline_errmsg(p));

    /* and after all that, a good run still works */
    ref r = ref_chain(&in, 0.1);
    if (run1(p, &in, &out) == PF_OK)
        compare(&out, &r, 2e-6, "after errors");
    free(r.v);

    /* backend cuda on this build: PF_NO_DEVICE, saying so */
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    rc = pf_pipeline_run(p, &in, 1, &out, 1);
    msg = pf_pipeline_errmsg(p);
#ifndef PF_TEST_HAVE_CUDA
    CHECKF(rc == PF_NO_DEVICE && strstr(msg, "cuda") && strstr(msg, "CUDA"), "%s: %s",
           pf_status_name(rc), msg);
#else /* a CUDA build runs it, or says why not */
    CHECKF(rc == PF_OK || ((rc == PF_NO_DEVICE || rc == PF_CUDA) && msg[0]), "%s: %s",
           pf_status_name(rc), msg);
#endif
    printf("backend cuda: %s: %s\n", pf_status_name(rc), rc == PF_OK ? "ran" : msg);
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    CHECK(run1(p, &in, &out) == PF_OK);
    CHECK(pf_pipeline_set_option(p, "backend", "gpu") == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_set_option(p, "fusion", "yes") == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_set_option(p, "streams", "-1") == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_set_option(p, "speed", "1") == PF_INVALID_ARGUMENT);
    CHECK(strstr(pf_pipeline_errmsg(p), "speed") != NULL);
    /* bytes that are not UTF-8: refused by name with a message (once "no memory", none) */
    CHECK(pf_pipeline_set_option(p, "fusion", "fal\xf0\x04\x05") == PF_INVALID_ARGUMENT);
    CHECKF(strstr(pf_pipeline_errmsg(p), "option fusion:") != NULL, "%s", pf_pipeline_errmsg(p));
    pf_frame_free(&in), pf_frame_free(&out);
    pf_pipeline_destroy(p);
}

/* ---- Parameters between frames ------------------------------------------------------- */

static void test_set_param(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 9);
    pf_pipeline *p = load(CHAIN_JSON("0.1"));
    if (!p)
        return;
    pf_frame in = frame_random(&rng, 40, 30, PF_F32, 4, 0, 1);
    pf_frame out = frame_new(40, 30, PF_F32, 4);
    ref r1 = ref_chain(&in, 0.1), r3 = ref_chain(&in, 0.3), r5 = ref_chain(&in, -0.5);
    if (run1(p, &in, &out) == PF_OK)
        compare(&out, &r1, 2e-6, "amount 0.1");

    unsigned long long plans = stats(p).plans;
    CHECK(pf_pipeline_set_param(p, "a.amount", "0.3") == PF_OK);
    CHECK(pf_pipeline_unit_count(p) == 1); /* a value, not a shape: the plan stays */
    if (run1(p, &in, &out) == PF_OK)
        compare(&out, &r3, 2e-6, "amount 0.3");
    pf_stats st = stats(p);
    CHECKF(st.plans == plans && st.allocations_last_frame == 0,
           "a new value: %llu plans (was %llu), %llu allocations in the frame", st.plans, plans,
           st.allocations_last_frame);
    CHECK(strcmp(st.backend, "cpu") == 0);

    /* rejected values change nothing */
    int rc = pf_pipeline_set_param(p, "a.amount", "5");
    CHECKF(rc == PF_PARAM && strstr(pf_pipeline_errmsg(p), "a.amount"), "%s: %s",
           pf_status_name(rc), pf_pipeline_errmsg(p));
    rc = pf_pipeline_set_param(p, "a.amount", "\"high\"");
    CHECK(rc == PF_PARAM);
    rc = pf_pipeline_set_param(p, "a.amount", "0.3.1");
    CHECK(rc == PF_PARAM);
    rc = pf_pipeline_set_param(p, "a.amout", "0.2");
    CHECKF(rc == PF_PARAM && strstr(pf_pipeline_errmsg(p), "amount"), "%s", pf_pipeline_errmsg(p));
    rc = pf_pipeline_set_param(p, "aa.amount", "0.2");
    CHECKF(rc == PF_PARAM && strstr(pf_pipeline_errmsg(p), "aa"), "%s", pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_set_param(p, "x.amount", "0.2") == PF_PARAM); /* an input */
    CHECK(pf_pipeline_set_param(p, "amount", "0.2") == PF_PARAM);
    CHECK(pf_pipeline_set_float(p, "a.amount", NAN) == PF_PARAM);
    if (run1(p, &in, &out) == PF_OK)
        compare(&out, &r3, 2e-6, "amount 0.3 after rejected values");

    CHECK(pf_pipeline_set_float(p, "a.amount", -0.5) == PF_OK);
    if (run1(p, &in, &out) == PF_OK)
        compare(&out, &r5, 2e-6, "amount -0.5");
    free(r1.v), free(r3.v), free(r5.v);
    pf_frame_free(&out);
    pf_pipeline_destroy(p);

    /* a param that changes a shape: the plan is dropped, the old size refused */
    p = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [{\"id\": \"cut\", \"op\": "
             "\"crop\", \"params\": {\"width\": 10, \"height\": 10}}], \"outputs\": {\"o\": "
             "\"cut\"}}");
    if (p) {
        out = frame_new(10, 10, PF_F32, 4);
        CHECK(run1(p, &in, &out) == PF_OK);
        CHECK(pf_pipeline_set_param(p, "cut.width", "12") == PF_OK);
        CHECK(pf_pipeline_unit_count(p) == 0);
        CHECK(pf_pipeline_run(p, &in, 1, &out, 1) == PF_SHAPE);
        pf_frame_free(&out);
        out = frame_new(12, 10, PF_F32, 4);
        ref cut = ref_new(12, 10);
        for (int y = 0; y < 10; y++)
            for (int x = 0; x < 12; x++)
                load_px(&in, x, y, ref_px(&cut, x, y));
        if (run1(p, &in, &out) == PF_OK)
            compare(&out, &cut, 0, "crop 12x10");
        /* a crop outside the image: refused at the plan, with the stage named */
        CHECK(pf_pipeline_set_param(p, "cut.width", "41") == PF_OK);
        int rc2 = pf_pipeline_run(p, &in, 1, &out, 1);
        CHECKF(rc2 == PF_SHAPE && strstr(pf_pipeline_errmsg(p), "cut"), "%s: %s",
               pf_status_name(rc2), pf_pipeline_errmsg(p));
        free(cut.v);
        pf_frame_free(&out);
    }
    pf_pipeline_destroy(p);
    pf_frame_free(&in);
}

/* Outputs skipped with NULL data or a short list; the others still right. */
static void test_skipped_outputs(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 10);
    pf_pipeline *p = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
                          "{\"id\": \"a\", \"op\": \"invert\"},"
                          "{\"id\": \"b\", \"op\": \"brightness\", \"params\": {\"amount\": 0.5}}],"
                          "\"outputs\": {\"inv\": \"a\", \"both\": \"b\"}}");
    if (!p)
        return;
    pf_frame in = frame_random(&rng, 17, 11, PF_F32, 4, 0, 1);
    pf_frame outs[2] = {{0}, frame_new(17, 11, PF_F32, 4)};
    ref r = ref_load(&in);
    for (size_t i = 0; i < (size_t)17 * 11 * 4; i++)
        if (i % 4 != 3)
            r.v[i] = 1.0 - r.v[i] + 0.5;
    if (pf_pipeline_run(p, &in, 1, outs, 2) == PF_OK)
        compare(&outs[1], &r, 2e-6, "second output only");
    else
        CHECKF(0, "%s", pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_run(p, &in, 1, outs, 1) == PF_OK);
    CHECK(pf_pipeline_run(p, &in, 1, NULL, 0) == PF_OK);
    free(r.v);
    pf_frame_free(&outs[1]), pf_frame_free(&in);
    pf_pipeline_destroy(p);
}

/* Frames as applications lay them out: tight rows (pitch = width * pixel bytes) and
   data at any address the sample type allows, not only pf_frame_alloc's. */
static void test_layouts(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 11);
    pf_pipeline *p = load(CHAIN_JSON("0.1"));
    if (!p)
        return;
    for (int s = PF_U8; s <= PF_F32; s++)
        for (int ch = 1; ch <= 4; ch++) {
            int w = 13, h = 5;
            size_t bpp = pf_frame_pixel_bytes((pf_sample)s, ch), align = bpp / (size_t)ch;
            pf_frame a = frame_random(&rng, w, h, (pf_sample)s, ch, 0, 1);
            /* copies of a and of an output, tight, one sample past a 16-byte boundary */
            size_t bytes = bpp * (size_t)(w * h) + 16;
            char *inbuf = malloc(bytes), *outbuf = malloc(bytes);
            pf_frame in = {inbuf + align, w, h, bpp * (size_t)w, (pf_sample)s, ch};
            pf_frame out = {outbuf + align, w, h, bpp * (size_t)w, (pf_sample)s, ch};
            for (int y = 0; y < h; y++)
                memcpy((char *)in.data + (size_t)y * in.pitch, (char *)a.data + (size_t)y * a.pitch,
                       in.pitch);
            memset(out.data, 0xff, out.pitch * (size_t)h);
            ref r = ref_chain(&a, 0.1);
            char what[64];
            snprintf(what, sizeof what, "tight %s/%d", sample_names[s], ch);
            if (run1(p, &in, &out) == PF_OK)
                compare(&out, &r, 2e-6, what);
            free(r.v);
            free(inbuf), free(outbuf);
            pf_frame_free(&a);
        }
    pf_pipeline_destroy(p);
}

/* A reduce whose table changes size between frames. */
static void test_table_resize(void)
{
    pf_rng rng;
    pf_rng_seed(&rng, 12);
    pf_pipeline *p = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
                          "{\"id\": \"h\", \"op\": \"histogram\", \"params\": {\"bins\": 256}}],"
                          "\"outputs\": {\"h\": \"h\"}}");
    if (!p)
        return;
    pf_frame in = frame_random(&rng, 29, 31, PF_U8, 1, 0, 1);
    for (int bins = 256; bins >= 4; bins /= 4) {
        char v[16];
        snprintf(v, sizeof v, "%d", bins);
        CHECK(pf_pipeline_set_param(p, "h.bins", v) == PF_OK);
        pf_table t;
        if (run1(p, &in, NULL) != PF_OK || pf_pipeline_table(p, 0, &t) != PF_OK)
            continue;
        CHECKF(t.rows == bins && t.cols == 4, "%d bins: table %dx%d", bins, t.rows, t.cols);
        /* gray g counts in bin floor(g / 255 * bins) of r, g and b; alpha 1 in the last */
        double want[256] = {0};
        for (int y = 0; y < 31; y++)
            for (int x = 0; x < 29; x++) {
                int b = (int)floor(get(&in, x, y, 0) / 255.0 * bins);
                want[b < bins ? b : bins - 1]++;
            }
        int bad = 0;
        for (int b = 0; b < bins && t.rows == bins; b++)
            bad += t.data[b * 4] != want[b] || t.data[b * 4 + 2] != want[b] ||
                   t.data[b * 4 + 3] != (b == bins - 1 ? 29 * 31 : 0);
        CHECKF(bad == 0, "%d bins: %d rows differ", bins, bad);
    }
    pf_frame_free(&in);
    pf_pipeline_destroy(p);
}

int main(void)
{
    eng = pf_test_engine();
    test_chain();
    test_blend();
    test_gaussian_blend();
    test_article();
    test_resample();
    test_determinism();
    test_conversions();
    test_errors();
    test_set_param();
    test_skipped_outputs();
    test_layouts();
    test_table_resize();
    pf_engine_destroy(eng);
    return pf_test_done("test_exec_cpu");
}
