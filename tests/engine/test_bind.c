/* tests/engine/test_bind.c: parameters bound to a reduction (engine/bind.c, the loader's
 * "from" objects). Each example rule runs on frames the test makes, with the reduce
 * stage also an output: the values the test computes from that table (its own code,
 * written from docs/pipeline-format.md) set explicitly in a second pipeline must give the
 * same bytes. Then: frames in a row (the values follow each frame, through the CPU's
 * tables of 8-bit codes), a flat frame (levels refuses in_low == in_high: the file's
 * values run), a bound stage fused behind the reduce's own producer, and the errors of
 * the loader, of a set() and of the CUDA backend.
 */
#define _GNU_SOURCE /* open_memstream */
#include <math.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

static pf_engine *eng;

/* An 8-bit RGB frame whose channels run over [lo, hi] of the codes, with noise. */
static pf_frame frame_ramp(pf_rng *r, int w, int h, int lo, int hi)
{
    pf_frame f;
    if (pf_frame_alloc(&f, w, h, PF_U8, 3) != PF_OK)
        exit(1);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                int v = lo + (int)((long)(hi - lo) * ((x + 3 * y + 17 * c) % 97) / 96) +
                        pf_rng_range(r, -3, 3);
                ((uint8_t *)f.data)[(size_t)y * f.pitch + (size_t)x * 3 + c] =
                    (uint8_t)(v < 0     ? 0
                              : v > 255 ? 255
                                        : v);
            }
    return f;
}

/* Runs p on in into a new 8-bit frame of in's shape and channels; the table of output
   `table` (when >= 0) copied into t (rows x 4). */
static pf_frame run(pf_pipeline *p, const pf_frame *in, int image, int table, double *t, int cap)
{
    pf_frame out[2];
    memset(out, 0, sizeof out);
    CHECK(pf_frame_alloc(&out[image], in->width, in->height, PF_U8, in->channels) == PF_OK);
    int rc = pf_pipeline_run(p, in, 1, out, 2);
    CHECKF(rc == PF_OK, "%s", pf_pipeline_errmsg(p));
    if (table >= 0) {
        pf_table tb;
        CHECK(pf_pipeline_table(p, table, &tb) == PF_OK);
        CHECK(tb.cols == 4 && tb.rows * 4 <= cap);
        for (int i = 0; i < tb.rows * 4 && i < cap; i++)
            t[i] = tb.data[i];
    }
    return out[image];
}

static void same(const pf_frame *a, const pf_frame *b, const char *what)
{
    long bad = pf_test_frame_mismatches(a, b);
    CHECKF(bad == 0, "%s: %ld samples differ from the explicit values", what, bad);
}

/* The documented rules, written here from the docs. */
static double count(const double *t, int bin, int c)
{
    return c == 4 ? t[bin * 4] + t[bin * 4 + 1] + t[bin * 4 + 2] : t[bin * 4 + c];
}

static double percentile(const double *t, int bins, int c, double pct)
{
    double total = 0, cum = 0;
    for (int i = 0; i < bins; i++)
        total += count(t, i, c);
    for (int i = 0; i < bins; i++) {
        cum += count(t, i, c);
        if (cum > 0 && cum >= total * pct / 100)
            return (i + 0.5) / bins;
    }
    return NAN;
}

/* Otsu as its usual statement: the threshold t maximising the between-class variance
   sigma_b^2(t) = (mu_T w(t) - mu(t))^2 / (w(t) (1 - w(t))), w and mu the cumulative
   probability and first moment of bins 0..t; the level the upper edge of bin t. */
static double otsu(const double *t, int bins, int c)
{
    double total = 0, mu_t = 0;
    for (int i = 0; i < bins; i++)
        total += count(t, i, c), mu_t += count(t, i, c) * (i + 0.5) / bins;
    mu_t /= total;
    double w = 0, mu = 0, best = -1;
    int at = -1;
    for (int i = 0; i + 1 < bins; i++) {
        w += count(t, i, c) / total;
        mu += count(t, i, c) / total * (i + 0.5) / bins;
        if (w <= 0 || w >= 1)
            continue;
        double s = (mu_t * w - mu) * (mu_t * w - mu) / (w * (1 - w));
        if (s > best * (1 + 1e-12)) /* the first maximum, as the engine's exact products */
            best = s, at = i;
    }
    return (at + 1.0) / bins;
}

static pf_pipeline *load(const char *json, const char *name)
{
    return pf_test_load_string(eng, json, name, "cpu");
}

static void test_auto_levels(void)
{
    pf_pipeline *p = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
                          "{\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"x\"]},"
                          "{\"id\": \"lv\", \"op\": \"levels\", \"inputs\": [\"x\"], \"params\": {"
                          "\"in_low\": {\"from\": \"hist\", \"percentile\": 0.5},"
                          "\"in_high\": {\"from\": \"hist\", \"percentile\": 99.5}, "
                          "\"gamma\": 1.2}}],"
                          "\"outputs\": {\"y\": \"lv\", \"h\": \"hist\"}}",
                          "auto levels");
    pf_pipeline *q = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
                          "{\"id\": \"lv\", \"op\": \"levels\", \"inputs\": [\"x\"], "
                          "\"params\": {\"gamma\": 1.2}}], \"outputs\": {\"y\": \"lv\"}}",
                          "explicit levels");
    pf_rng r;
    pf_rng_seed(&r, 7);
    static double t[256 * 4];
    /* three frames in a row, each its own range: the values (and the CPU's tables of
       8-bit codes) follow each frame */
    const int ranges[3][2] = {{40, 180}, {90, 120}, {0, 255}};
    for (int k = 0; k < 3; k++) {
        pf_frame in = frame_ramp(&r, 61 + k, 47, ranges[k][0], ranges[k][1]);
        pf_frame got = run(p, &in, 0, 1, t, 256 * 4);
        double lo = percentile(t, 256, 4, 0.5), hi = percentile(t, 256, 4, 99.5);
        CHECKF(lo < hi && lo > ranges[k][0] / 255.0 - 0.02 && hi < ranges[k][1] / 255.0 + 0.02,
               "frame %d: levels from %g to %g for codes %d..%d", k, lo, hi, ranges[k][0],
               ranges[k][1]);
        char v[64];
        snprintf(v, sizeof v, "%.9g", lo);
        CHECK(pf_pipeline_set_param(q, "lv.in_low", "0") == PF_OK);
        CHECK(pf_pipeline_set_param(q, "lv.in_high", "1") == PF_OK);
        CHECK(pf_pipeline_set_param(q, "lv.in_low", v) == PF_OK);
        snprintf(v, sizeof v, "%.9g", hi);
        CHECK(pf_pipeline_set_param(q, "lv.in_high", v) == PF_OK);
        pf_frame want = run(q, &in, 0, -1, NULL, 0);
        char what[64];
        snprintf(what, sizeof what, "auto levels, frame %d", k);
        same(&got, &want, what);
        pf_frame_free(&in), pf_frame_free(&got), pf_frame_free(&want);
    }
    /* a flat frame: in_low == in_high, which levels refuses: the file's values (0, 1) */
    pf_frame flat = frame_ramp(&r, 20, 10, 100, 100);
    memset(flat.data, 100, flat.pitch * (size_t)flat.height);
    pf_frame got = run(p, &flat, 0, 1, t, 256 * 4);
    CHECK(pf_pipeline_set_param(q, "lv.in_low", "0") == PF_OK);
    CHECK(pf_pipeline_set_param(q, "lv.in_high", "1") == PF_OK);
    pf_frame want = run(q, &flat, 0, -1, NULL, 0);
    same(&got, &want, "auto levels of a flat frame");
    pf_frame_free(&flat), pf_frame_free(&got), pf_frame_free(&want);
    /* a bound value is the frame's: set() refuses it, and says where it comes from */
    CHECK(pf_pipeline_set_param(p, "lv.in_low", "0.2") == PF_PARAM);
    CHECKF(strstr(pf_pipeline_errmsg(p), "bound to a reduction of stage 'hist'") != NULL, "%s",
           pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_set_param(p, "lv.gamma", "1.5") == PF_OK);
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(q);
}

static void test_otsu_and_gains(void)
{
    pf_rng r;
    pf_rng_seed(&r, 11);
    static double t[256 * 4];
    /* Otsu on a two-tone page with noise; the histogram of the gray image */
    pf_pipeline *p =
        load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
             "{\"id\": \"g\", \"op\": \"grayscale\", \"inputs\": [\"x\"]},"
             "{\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"g\"]},"
             "{\"id\": \"bw\", \"op\": \"threshold\", \"inputs\": [\"g\"], \"params\": "
             "{\"level\": {\"from\": \"hist\", \"otsu\": true, \"channel\": \"r\"}}}],"
             "\"outputs\": {\"y\": \"bw\", \"h\": \"hist\"}}",
             "otsu");
    pf_pipeline *q = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
                          "{\"id\": \"g\", \"op\": \"grayscale\", \"inputs\": [\"x\"]},"
                          "{\"id\": \"bw\", \"op\": \"threshold\", \"inputs\": [\"g\"]}],"
                          "\"outputs\": {\"y\": \"bw\"}}",
                          "explicit threshold");
    pf_frame in = frame_ramp(&r, 80, 60, 30, 70);
    for (int y = 0; y < 60; y++)
        for (int x = 0; x < 80; x++)
            if ((x / 10 + y / 15) % 2)
                for (int c = 0; c < 3; c++)
                    ((uint8_t *)in.data)[(size_t)y * in.pitch + (size_t)x * 3 + c] += 150;
    pf_frame got = run(p, &in, 0, 1, t, 256 * 4);
    double level = otsu(t, 256, 0);
    /* the gray levels fill bins up to 68 and from 183: the level is the gap's lower edge */
    CHECKF(level == 69.0 / 256, "otsu level %g for a page of two tones, the gap at bins 69..182",
           level);
    char v[64];
    snprintf(v, sizeof v, "%.9g", level);
    CHECK(pf_pipeline_set_param(q, "bw.level", v) == PF_OK);
    pf_frame want = run(q, &in, 0, -1, NULL, 0);
    same(&got, &want, "otsu");
    pf_frame_free(&got), pf_frame_free(&want);
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(q);

    /* grey world and gain_to from a stats table, the bound stage fused behind the
       stats' own producer (a brightness both read) */
    p = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
             "{\"id\": \"b\", \"op\": \"brightness\", \"inputs\": [\"x\"], "
             "\"params\": {\"amount\": 0.05}},"
             "{\"id\": \"st\", \"op\": \"stats\", \"inputs\": [\"b\"]},"
             "{\"id\": \"wb\", \"op\": \"gains\", \"inputs\": [\"b\"], \"params\": {"
             "\"r\": {\"from\": \"st\", \"grey_gain\": true, \"channel\": \"r\"},"
             "\"g\": {\"from\": \"st\", \"grey_gain\": true, \"channel\": \"g\"},"
             "\"b\": {\"from\": \"st\", \"gain_to\": 0.5, \"channel\": \"b\", \"scale\": 2, "
             "\"offset\": -0.25}}},"
             "{\"id\": \"out\", \"op\": \"contrast\", \"inputs\": [\"wb\"], "
             "\"params\": {\"amount\": 1.1}}],"
             "\"outputs\": {\"y\": \"out\", \"s\": \"st\"}}",
             "gains");
    q = load("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
             "{\"id\": \"b\", \"op\": \"brightness\", \"inputs\": [\"x\"], "
             "\"params\": {\"amount\": 0.05}},"
             "{\"id\": \"wb\", \"op\": \"gains\", \"inputs\": [\"b\"]},"
             "{\"id\": \"out\", \"op\": \"contrast\", \"inputs\": [\"wb\"], "
             "\"params\": {\"amount\": 1.1}}],"
             "\"outputs\": {\"y\": \"out\"}}",
             "explicit gains");
    got = run(p, &in, 0, 1, t, 256 * 4);
    const double *mean = t + 2 * 4; /* rows min, max, mean, stddev */
    double grey = (mean[0] + mean[1] + mean[2]) / 3;
    double gains[3] = {grey / mean[0], grey / mean[1], 0.5 / mean[2] * 2 - 0.25};
    static const char *const keys[3] = {"wb.r", "wb.g", "wb.b"};
    for (int c = 0; c < 3; c++) {
        snprintf(v, sizeof v, "%.9g", gains[c]);
        CHECK(pf_pipeline_set_param(q, keys[c], v) == PF_OK);
    }
    want = run(q, &in, 0, -1, NULL, 0);
    same(&got, &want, "grey world and gain_to");
    pf_frame_free(&got), pf_frame_free(&want), pf_frame_free(&in);
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(q);
}

/* A pipeline text with one levels stage whose in_low is the given binding. */
static void refused(const char *binding, const char *extra_stage, int status, const char *says)
{
    char json[2048];
    snprintf(json, sizeof json,
             "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
             "{\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"x\"]},"
             "{\"id\": \"cs\", \"op\": \"colsum\", \"inputs\": [\"x\"]},%s"
             "{\"id\": \"lv\", \"op\": \"levels\", \"inputs\": [\"x\"], \"params\": "
             "{\"in_low\": %s}}], \"outputs\": {\"y\": \"lv\"}}",
             extra_stage, binding);
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(eng, json, "refused.json", &p);
    CHECKF(rc == status, "%s: status %d, expected %d", binding, rc, status);
    CHECKF(strstr(pf_engine_errmsg(eng), says) != NULL, "%s: '%s' does not say '%s'", binding,
           pf_engine_errmsg(eng), says);
    pf_pipeline_destroy(p);
}

static void test_errors(void)
{
    refused("{\"from\": \"hist\"}", "", PF_PARAM, "needs a rule");
    refused("{\"from\": \"hist\", \"mean\": true, \"max\": true}", "", PF_PARAM,
            "one rule per bound parameter: mean and max");
    refused("{\"from\": \"hist\", \"percentile\": 101}", "", PF_PARAM,
            "stages[2].params.in_low.percentile: 101 is outside [0, 100]");
    refused("{\"from\": \"hist\", \"mean\": 1}", "", PF_PARAM,
            "in_low.mean: expected true, got the number 1");
    refused("{\"from\": \"hist\", \"avg\": true}", "", PF_PARAM,
            "unknown key 'avg' in a bound parameter");
    refused("{\"from\": \"x\", \"mean\": true}", "", PF_PARAM, "'x' is a pipeline input");
    refused("{\"from\": \"hsit\", \"mean\": true}", "", PF_PIPELINE, "did you mean 'hist'?");
    refused("{\"from\": \"cs\", \"mean\": true}", "", PF_PARAM,
            "'cs' is a colsum stage; a bound parameter reads a histogram or stats");
    refused("{\"from\": \"st\", \"otsu\": true}",
            "{\"id\": \"st\", \"op\": \"stats\", \"inputs\": [\"x\"]},", PF_PARAM,
            "otsu reads a histogram; 'st' is a stats stage");
    refused("{\"from\": \"hist\", \"grey_gain\": true}", "", PF_PARAM,
            "grey_gain is the gain of one colour channel");
    refused("{\"from\": \"hist\", \"mean\": true, \"channel\": \"luma\"}", "", PF_PARAM,
            "channel must be");
    refused("{\"from\": \"h2\", \"mean\": true}",
            "{\"id\": \"h2\", \"op\": \"histogram\", \"inputs\": [\"lv\"]},", PF_PIPELINE,
            "cycle:");
    refused("{\"from\": \"lv\", \"mean\": true}", "", PF_PIPELINE, "cycle: lv -> lv");
    /* stages that do not declare PF_STAGE_BINDABLE, and params that are not floats */
    pf_pipeline *p = NULL;
    CHECK(pf_pipeline_load_string(
              eng,
              "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
              "{\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"x\"]},"
              "{\"id\": \"g\", \"op\": \"gaussian\", \"inputs\": [\"x\"], \"params\": "
              "{\"sigma\": {\"from\": \"hist\", \"mean\": true}}}], \"outputs\": {\"y\": \"g\"}}",
              "gaussian.json", &p) == PF_PARAM);
    CHECKF(strstr(pf_engine_errmsg(eng), "gaussian.sigma cannot be bound to a reduction") != NULL,
           "%s", pf_engine_errmsg(eng));
    CHECK(pf_pipeline_load_string(
              eng,
              "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
              "{\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"x\"]},"
              "{\"id\": \"i\", \"op\": \"invert\", \"inputs\": [\"x\"], \"params\": "
              "{\"alpha\": {\"from\": \"hist\", \"mean\": true}}}], \"outputs\": {\"y\": \"i\"}}",
              "invert.json", &p) == PF_PARAM);
    CHECKF(strstr(pf_engine_errmsg(eng), "only a float parameter can be bound") != NULL, "%s",
           pf_engine_errmsg(eng));
    /* the CUDA backend refuses such a pipeline, naming the stage; auto runs it on the CPU */
    p = pf_test_load_file(eng, PF_SOURCE_DIR "/pipelines/auto_levels.json", "cuda");
    pf_shape s = {8, 8};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_UNSUPPORTED);
    CHECKF(strstr(pf_pipeline_errmsg(p), "stage 'stretch' has parameters bound to a reduction") !=
               NULL,
           "%s", pf_pipeline_errmsg(p));
    pf_pipeline_destroy(p);
    p = pf_test_load_file(eng, PF_SOURCE_DIR "/pipelines/auto_levels.json", NULL);
    CHECKF(pf_pipeline_plan(p, &s, 1) == PF_OK, "%s", pf_pipeline_errmsg(p));
    pf_stats st;
    st.size = sizeof st;
    CHECK(pf_pipeline_stats(p, &st) == PF_OK && strcmp(st.backend, "cpu") == 0);
    pf_pipeline_destroy(p);
}

/* The plan knows what a bound parameter reads: the stage runs after the table's unit (one
   stream here, not two branches side by side), the unit line names the table, and the
   graph has an edge from it. */
static void test_plan_shows_bindings(void)
{
    pf_pipeline *p = NULL;
    const char *json =
        "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
        "{\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"x\"]},"
        "{\"id\": \"lv\", \"op\": \"levels\", \"inputs\": [\"x\"], \"params\": "
        "{\"in_low\": {\"from\": \"hist\", \"percentile\": 1}, \"in_high\": {\"from\": "
        "\"hist\", \"percentile\": 99}}}], \"outputs\": {\"y\": \"lv\"}}";
    CHECK(pf_pipeline_load_string(eng, json, "shows.json", &p) == PF_OK);
    if (!p)
        return;
    pf_shape in = {64, 48};
    CHECK(pf_pipeline_plan(p, &in, 1) == PF_OK);
    char *text = NULL, *dot = NULL;
    size_t nt = 0, nd = 0;
    FILE *f = open_memstream(&text, &nt), *g = open_memstream(&dot, &nd);
    CHECK(f && g);
    if (f && g) {
        CHECK(pf_pipeline_print_plan(p, f) == PF_OK);
        CHECK(pf_pipeline_print_dot(p, g) == PF_OK);
        fclose(f), fclose(g);
        CHECKF(strstr(text, "streams: 1") && strstr(text, "tables hist  writes lv") &&
                   !strstr(text, "tables hist hist"),
               "plan:\n%s", text);
        CHECKF(strstr(dot, "\"hist\" -> \"lv\" [style=dashed, label=\"in_low\"]") &&
                   strstr(dot, "\"hist\" -> \"lv\" [style=dashed, label=\"in_high\"]"),
               "dot:\n%s", dot);
    }
    free(text), free(dot);
    pf_pipeline_destroy(p);
}

int main(void)
{
    eng = pf_test_engine();
    test_auto_levels();
    test_otsu_and_gains();
    test_errors();
    test_plan_shows_bindings();
    pf_engine_destroy(eng);
    return pf_test_done("test_bind");
}
