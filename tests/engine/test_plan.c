/* tests/engine/test_plan.c: the planner (engine/plan.c) through the public API: fusion
 * groups, launch units and their order, shapes, streams and waits, and the printed plan
 * and Graphviz graph. Pipelines are written inline; stages are the built-in ones.
 */
#define _GNU_SOURCE
#include <string.h>

#include "testutil.h"

/* ---- Helpers ------------------------------------------------------------------------- */

static pf_engine *eng;

/* JSON pipeline text with one input "x", the given stages and outputs. */
#define PIPE(stages, outputs)                                                                      \
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [" stages "], \"outputs\": {" outputs "}}"
#define PT(id, op, in) "{\"id\": \"" id "\", \"op\": \"" op "\", \"inputs\": [" in "]}"

/* Loads and plans json for w x h inputs (all of them), for the CPU; NULL, with a failed
   check, when either fails. */
static pf_pipeline *planned(const char *json, int w, int h)
{
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(eng, json, "test", &p);
    CHECKF(rc == PF_OK, "load: %s", pf_engine_errmsg(eng));
    if (rc != PF_OK)
        return NULL;
    /* the CPU plan, whatever the build and machine: the same on every one */
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    pf_shape s[8];
    for (int i = 0; i < 8; i++)
        s[i] = (pf_shape){w, h};
    rc = pf_pipeline_plan(p, s, pf_pipeline_input_count(p));
    CHECKF(rc == PF_OK, "plan: %s", pf_pipeline_errmsg(p));
    if (rc != PF_OK) {
        pf_pipeline_destroy(p);
        return NULL;
    }
    return p;
}

/* The unit that runs stage id, or -1. */
static int unit_of(const pf_pipeline *p, const char *id)
{
    pf_unit_info u;
    for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
        pf_pipeline_unit(p, i, &u);
        for (int k = 0; k < u.n_stages; k++)
            if (strcmp(u.stages[k], id) == 0)
                return i;
    }
    return -1;
}

static pf_unit_info unit(const pf_pipeline *p, int i)
{
    pf_unit_info u;
    memset(&u, 0, sizeof u);
    CHECK(pf_pipeline_unit(p, i, &u) == PF_OK);
    return u;
}

/* The plan as text (print_plan, or print_dot when dot); free the result. */
static char *plan_text(const pf_pipeline *p, int dot)
{
    FILE *f = tmpfile();
    if (!f)
        return strdup("");
    int rc = dot ? pf_pipeline_print_dot(p, f) : pf_pipeline_print_plan(p, f);
    CHECK(rc == PF_OK);
    long n = ftell(f);
    char *s = calloc(1, (size_t)n + 1);
    rewind(f);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n)
        s[0] = 0;
    fclose(f);
    return s;
}

/* ---- Fusion -------------------------------------------------------------------------- */

static const char chain5[] =
    PIPE(PT("a", "brightness", "\"x\"") "," PT("b", "contrast", "\"a\"") "," PT(
             "c", "invert", "\"b\"") "," PT("d", "gamma", "\"c\"") "," PT("e", "linear", "\"d\""),
         "\"out\": \"e\"");

static void test_chain(void)
{
    pf_pipeline *p = planned(chain5, 33, 17);
    if (!p)
        return;
    CHECKF(pf_pipeline_unit_count(p) == 1, "%d units", pf_pipeline_unit_count(p));
    pf_unit_info u = unit(p, 0);
    CHECK(u.kind == PF_UNIT_POINT && u.n_stages == 5 && u.fused == 1);
    static const char *const order[] = {"a", "b", "c", "d", "e"};
    for (int k = 0; k < u.n_stages && k < 5; k++)
        CHECKF(strcmp(u.stages[k], order[k]) == 0, "stage %d is %s", k, u.stages[k]);
    CHECK(u.shape.width == 33 && u.shape.height == 17);
    char *txt = plan_text(p, 0);
    CHECKF(strstr(txt, "G0: a + b + c + d + e"), "%s", txt);
    CHECKF(strstr(txt, "launch units per frame: 1 (5 without fusion)"), "%s", txt);
    free(txt);

    /* fusion off: one unit per stage, in order, none fused */
    CHECK(pf_pipeline_set_option(p, "fusion", "false") == PF_OK);
    CHECK(pf_pipeline_unit_count(p) == 0); /* options drop the plan */
    pf_shape s = {33, 17};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    CHECKF(pf_pipeline_unit_count(p) == 5, "%d units", pf_pipeline_unit_count(p));
    for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
        u = unit(p, i);
        CHECK(u.kind == PF_UNIT_POINT && u.n_stages == 1 && !u.fused);
        CHECKF(strcmp(u.stages[0], order[i]) == 0, "unit %d is %s", i, u.stages[0]);
    }
    txt = plan_text(p, 0);
    CHECKF(strstr(txt, "[fusion off]"), "%s", txt);
    free(txt);
    pf_pipeline_destroy(p);

    /* and from the file's options */
    p = planned("{\"pipefuse\": 1, \"inputs\": [\"x\"], \"options\": {\"fusion\": false},"
                "\"stages\": [" PT("a", "brightness", "\"x\"") "," PT(
                    "b", "invert", "\"a\"") "], \"outputs\": {\"o\": \"b\"}}",
                8, 8);
    CHECK(p && pf_pipeline_unit_count(p) == 2);
    pf_pipeline_destroy(p);
}

/* A chain longer than one fused kernel takes (PF_FUSE_MAX_MEMBERS in plan.c, 128) is
   cut into consecutive kernels of at most 128 stages: NVRTC time stays linear. */
static void test_long_chain(void)
{
    size_t cap = 64 * 1024, len = 0;
    char *json = malloc(cap);
    len += (size_t)snprintf(json + len, cap - len,
                            "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [");
    for (int i = 0; i < 300; i++) {
        char prev[16];
        snprintf(prev, sizeof prev, i ? "s%d" : "x", i - 1);
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"id\": \"s%d\", \"op\": \"invert\", \"inputs\": [\"%s\"]}",
                                i ? "," : "", i, prev);
    }
    snprintf(json + len, cap - len, "], \"outputs\": {\"o\": \"s299\"}}");
    pf_pipeline *p = planned(json, 16, 4);
    free(json);
    if (!p)
        return;
    int n = pf_pipeline_unit_count(p), total = 0;
    CHECKF(n == 3, "300 stages in %d units", n);
    for (int i = 0; i < n; i++) {
        pf_unit_info u = unit(p, i);
        CHECKF(u.n_stages <= 128 && u.kind == PF_UNIT_POINT, "unit %d: %d stages", i, u.n_stages);
        total += u.n_stages;
    }
    CHECK(total == 300);
    pf_pipeline_destroy(p);
}

static void test_diamond(void)
{
    pf_pipeline *p =
        planned(PIPE(PT("a", "brightness", "\"x\"") "," PT("b", "invert", "\"a\"") "," PT(
                         "c", "gamma", "\"a\"") "," PT("d", "blend", "\"b\", \"c\""),
                     "\"o\": \"d\""),
                20, 10);
    if (!p)
        return;
    CHECKF(pf_pipeline_unit_count(p) == 1, "%d units", pf_pipeline_unit_count(p));
    pf_unit_info u = unit(p, 0);
    CHECK(u.n_stages == 4 && u.fused);
    /* evaluation order respects the edges */
    CHECK(strcmp(u.stages[0], "a") == 0 && strcmp(u.stages[3], "d") == 0);
    pf_pipeline_destroy(p);

    /* siblings reading the same input fuse: two outputs, one unit */
    p = planned(PIPE(PT("b1", "brightness", "\"x\"") "," PT("b2", "contrast", "\"x\""),
                     "\"one\": \"b1\", \"two\": \"b2\""),
                20, 10);
    if (p) {
        CHECKF(pf_pipeline_unit_count(p) == 1, "%d units", pf_pipeline_unit_count(p));
        CHECK(unit(p, 0).n_stages == 2);
        char *txt = plan_text(p, 0);
        CHECKF(strstr(txt, "writes b1 b2"), "%s", txt); /* both outputs stored */
        free(txt);
    }
    pf_pipeline_destroy(p);
}

/* a -> gaussian -> c with a -> c: fusing a and c would make a unit feed the gaussian and
   wait for it. */
static void test_no_cycle(void)
{
    pf_pipeline *p =
        planned(PIPE(PT("a", "brightness", "\"x\"") "," PT("g", "gaussian", "\"a\"") "," PT(
                         "c", "blend", "\"a\", \"g\""),
                     "\"o\": \"c\""),
                40, 30);
    if (!p)
        return;
    CHECKF(pf_pipeline_unit_count(p) == 3, "%d units", pf_pipeline_unit_count(p));
    CHECK(unit_of(p, "a") == 0 && unit_of(p, "g") == 1 && unit_of(p, "c") == 2);
    CHECK(unit(p, 1).kind == PF_UNIT_STENCIL);
    char *txt = plan_text(p, 0);
    CHECKF(strstr(txt, "writes a"), "a is read by two units, so stored: %s", txt);
    free(txt);
    pf_pipeline_destroy(p);
}

/* A point chain, then a reduce; a resample between two chains splits them. */
static void test_kinds(void)
{
    pf_pipeline *p =
        planned(PIPE(PT("lin", "linear", "\"x\"") "," PT("inv", "invert", "\"lin\"") "," PT(
                         "sums", "colsum", "\"inv\""),
                     "\"sums\": \"sums\""),
                31, 7);
    if (p) {
        CHECKF(pf_pipeline_unit_count(p) == 2, "%d units", pf_pipeline_unit_count(p));
        pf_unit_info u0 = unit(p, 0), u1 = unit(p, 1);
        CHECK(u0.kind == PF_UNIT_POINT && u0.n_stages == 2);
        CHECK(u1.kind == PF_UNIT_REDUCE && u1.n_stages == 1);
        CHECK(u1.shape.width == 31 && u1.shape.height == 7); /* a reduce's input shape */
        pf_output_info oi;
        CHECK(pf_pipeline_output_info(p, 0, &oi) == PF_OK);
        CHECK(oi.kind == PF_OUTPUT_TABLE && oi.shape.width == 4 && oi.shape.height == 31);
    }
    pf_pipeline_destroy(p);

    p = planned(
        PIPE(PT("b1", "brightness", "\"x\"") "," PT(
                 "b2", "invert",
                 "\"b1\"") ","
                           "{\"id\": \"r\", \"op\": \"resize\", \"inputs\": [\"b2\"], \"params\": "
                           "{\"width\": 50, \"height\": 20}}," PT("b3", "gamma", "\"r\"") "," PT(
                               "b4", "contrast", "\"b3\""),
             "\"o\": \"b4\""),
        101, 77);
    if (p) {
        CHECKF(pf_pipeline_unit_count(p) == 3, "%d units", pf_pipeline_unit_count(p));
        pf_unit_info u0 = unit(p, 0), u1 = unit(p, 1), u2 = unit(p, 2);
        CHECK(u0.kind == PF_UNIT_POINT && u0.n_stages == 2 && u0.shape.width == 101);
        CHECK(u1.kind == PF_UNIT_RESAMPLE && u1.shape.width == 50 && u1.shape.height == 20);
        CHECK(u2.kind == PF_UNIT_POINT && u2.n_stages == 2 && u2.shape.width == 50);
        CHECK(unit_of(p, "b3") == 2 && unit_of(p, "b4") == 2);
    }
    pf_pipeline_destroy(p);
}

/* A stage that reaches no output is in no unit, and the plan says so. */
static void test_unused(void)
{
    pf_pipeline *p = planned(PIPE(PT("a", "brightness", "\"x\"") "," PT(
                                      "lost", "gaussian", "\"a\"") "," PT("b", "invert", "\"a\""),
                                  "\"o\": \"b\""),
                             16, 16);
    if (!p)
        return;
    CHECK(unit_of(p, "lost") == -1);
    CHECK(pf_pipeline_unit_count(p) == 1);
    char *txt = plan_text(p, 0);
    CHECKF(strstr(txt, "lost") && strstr(txt, "unused"), "%s", txt);
    free(txt);
    txt = plan_text(p, 1);
    CHECKF(strstr(txt, "unused"), "%s", txt);
    free(txt);
    pf_pipeline_destroy(p);
}

/* ---- Shapes -------------------------------------------------------------------------- */

static void test_shape_mismatch(void)
{
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(
        eng,
        PIPE("{\"id\": \"cut\", \"op\": \"crop\", \"inputs\": [\"x\"], \"params\": {\"x\": 2, "
             "\"y\": 3, \"width\": 10, \"height\": 5}}," PT("mix", "blend", "\"x\", \"cut\""),
             "\"o\": \"mix\""),
        "mismatch", &p);
    CHECKF(rc == PF_OK, "%s", pf_engine_errmsg(eng));
    if (rc != PF_OK)
        return;
    pf_shape s = {40, 30};
    rc = pf_pipeline_plan(p, &s, 1);
    const char *msg = pf_pipeline_errmsg(p);
    CHECKF(rc == PF_SHAPE, "got %s", pf_status_name(rc));
    CHECKF(strstr(msg, "mix") && strstr(msg, "40x30") && strstr(msg, "10x5"), "%s", msg);
    CHECK(pf_pipeline_unit_count(p) == 0);
    CHECK(pf_pipeline_print_plan(p, stdout) == PF_NOT_PLANNED);
    printf("mismatch: %s\n", msg);

    /* a crop outside the input: the stage's own message, with the stage named */
    s = (pf_shape){8, 8};
    rc = pf_pipeline_plan(p, &s, 1);
    msg = pf_pipeline_errmsg(p);
    CHECKF(rc == PF_SHAPE && strstr(msg, "cut") && strstr(msg, "8x8"), "%s: %s", pf_status_name(rc),
           msg);

    /* wrong number of shapes, empty shapes */
    pf_shape two[2] = {{40, 30}, {40, 30}};
    CHECK(pf_pipeline_plan(p, two, 2) == PF_INVALID_ARGUMENT);
    s = (pf_shape){0, 30};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_INVALID_ARGUMENT);
    pf_pipeline_destroy(p);
}

/* ---- Streams ------------------------------------------------------------------------- */

static void test_streams(void)
{
    pf_pipeline *p = planned(PIPE(PT("g1", "gaussian", "\"x\"") "," PT("g2", "box", "\"x\"") "," PT(
                                      "j", "blend", "\"g1\", \"g2\""),
                                  "\"o\": \"j\""),
                             64, 48);
    if (!p)
        return;
    CHECK(pf_pipeline_unit_count(p) == 3);
    int u1 = unit_of(p, "g1"), u2 = unit_of(p, "g2"), uj = unit_of(p, "j");
    CHECK(u1 >= 0 && u2 >= 0 && uj > u1 && uj > u2);
    pf_unit_info a = unit(p, u1), b = unit(p, u2), j = unit(p, uj);
    CHECKF(a.stream != b.stream, "independent branches on one stream %d", a.stream);
    CHECK(j.stream == a.stream || j.stream == b.stream);
    pf_stats st = {.size = sizeof st};
    CHECK(pf_pipeline_stats(p, &st) == PF_OK && st.streams == 2 && st.units_per_frame == 3);
    char *txt = plan_text(p, 0);
    CHECKF(strstr(txt, "streams: 2"), "%s", txt);
    CHECKF(strstr(txt, "waits #"), "the join waits for the other branch: %s", txt);
    free(txt);

    /* "streams": 1 puts everything on one stream: nothing waits */
    CHECK(pf_pipeline_set_option(p, "streams", "1") == PF_OK);
    pf_shape s = {64, 48};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    txt = plan_text(p, 0);
    CHECKF(strstr(txt, "streams: 1") && !strstr(txt, "waits"), "%s", txt);
    free(txt);
    pf_pipeline_destroy(p);

    /* a chain has one stream and no waits */
    p = planned(PIPE(PT("g", "gaussian", "\"x\"") "," PT("i", "invert", "\"g\""), "\"o\": \"i\""),
                64, 48);
    if (p) {
        txt = plan_text(p, 0);
        CHECKF(strstr(txt, "streams: 1") && !strstr(txt, "waits"), "%s", txt);
        free(txt);
    }
    pf_pipeline_destroy(p);
}

/* ---- Printing ------------------------------------------------------------------------ */

static void test_print(void)
{
    static const char json[] =
        PIPE(PT("bright", "brightness", "\"x\"") "," PT("punch", "contrast", "\"bright\"") "," PT(
                 "glow", "gaussian",
                 "\"punch\"") "," PT("soft", "blend",
                                     "\"punch\", \"glow\"") "," PT("hist", "histogram", "\"soft\""),
             "\"result\": \"soft\", \"histogram\": \"hist\"");
    pf_pipeline *p = planned(json, 120, 80);
    if (!p)
        return;
    char *txt = plan_text(p, 0);
    const char *want[] = {"pipeline test",
                          "inputs (1)",
                          "x",
                          "120x80",
                          "fusion groups (2)",
                          "G0: bright + punch",
                          "G1: soft",
                          "launch units per frame: 4 (5 without fusion)",
                          "outputs (2)",
                          "histogram",
                          "table 256 rows x 4 columns",
                          "image 120x80",
                          "sigma=",
                          "memory:"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(txt, want[i]), "plan lacks '%s':\n%s", want[i], txt);
    free(txt);

    txt = plan_text(p, 1);
    CHECKF(strncmp(txt, "digraph", 7) == 0, "%s", txt);
    int depth = 0, min = 0, quotes = 0;
    for (const char *c = txt; *c; c++) {
        if (*c == '"' && (c == txt || c[-1] != '\\'))
            quotes++;
        if (quotes % 2)
            continue;
        depth += *c == '{';
        depth -= *c == '}';
        min = depth < min ? depth : min;
    }
    CHECKF(depth == 0 && min == 0 && quotes % 2 == 0, "unbalanced dot: depth %d, quotes %d", depth,
           quotes);
    const char *dwant[] = {"\"bright\" -> \"punch\"",
                           "\"punch\" -> \"soft\"",
                           "\"glow\" -> \"soft\"",
                           "cluster_u0",
                           "lightblue",
                           "\"out:result\"",
                           "\"hist\" -> \"out:histogram\""};
    for (size_t i = 0; i < sizeof dwant / sizeof dwant[0]; i++)
        CHECKF(strstr(txt, dwant[i]), "dot lacks '%s':\n%s", dwant[i], txt);
    free(txt);
    pf_pipeline_destroy(p);

    /* nothing to print before a plan */
    CHECK(pf_pipeline_load_string(eng, json, "test", &p) == PF_OK);
    CHECK(pf_pipeline_print_dot(p, stdout) == PF_NOT_PLANNED);
    CHECK(pf_pipeline_unit_count(p) == 0);
    pf_unit_info u;
    CHECK(pf_pipeline_unit(p, 0, &u) == PF_INVALID_ARGUMENT);
    pf_pipeline_destroy(p);

    /* a fused group's stores in the formats the outputs declare (the others as the
       8-bit RGBA inputs the print assumes, with the channels their stages need) */
    static const char formats[] =
        PIPE(PT("a", "invert", "\"x\"") "," PT("g", "grayscale", "\"a\""),
             "\"deep\": {\"from\": \"a\", \"format\": \"rgb16\"}, \"flat\": \"g\"");
    p = planned(formats, 16, 8);
    if (!p)
        return;
    txt = plan_text(p, 0);
    CHECKF(strstr(txt, "loads x(rgba8)") && strstr(txt, "deep(rgb16)") &&
               strstr(txt, "flat(rgba8)"),
           "formats:\n%s", txt);
    free(txt);
    pf_pipeline_destroy(p);
}

/* ---- Many inputs from one producer --------------------------------------------------- */

/* tp_sum8 (the good test plugin) reads one fused producer eight times in a pipeline of
   three nodes: the planner's candidate list must not outgrow its node count. */
/* An engine with the test plugins of plugdirs/<dir> only, or NULL (the test skipped,
   with a line saying why: plugdirs' modes follow the build's umask, and
   test_plugin_load covers the loader). */
static pf_engine *plugdir_engine(const char *dir, const char *test)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", TP_PLUGDIRS, dir);
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.use_env_path = 0;
    cfg.plugin_path = path;
    pf_engine *e = NULL;
    if (pf_engine_create(&cfg, &e) == PF_OK)
        return e;
    printf("%s: skipped: %s\n", test, pf_engine_errmsg(e));
    pf_engine_destroy(e);
    return NULL;
}

static void test_repeated_producer(void)
{
    pf_engine *e = plugdir_engine("good", "repeated producer");
    if (!e)
        return;
    pf_engine *saved = eng;
    eng = e;
    pf_pipeline *p =
        planned(PIPE(PT("a", "brightness", "\"x\"") "," PT(
                         "s", "tp_sum8", "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\""),
                     "\"o\": \"s\""),
                9, 4);
    if (p) {
        CHECK(pf_pipeline_unit_count(p) == 1 && unit(p, 0).n_stages == 2);
        float in[9 * 4 * 4], out[9 * 4 * 4];
        for (int k = 0; k < 144; k++)
            in[k] = (float)k / 256.0f;
        pf_frame fi = {in, 9, 4, 9 * 16, PF_F32, 4}, fo = {out, 9, 4, 9 * 16, PF_F32, 4};
        CHECK(pf_pipeline_run(p, &fi, 1, &fo, 1) == PF_OK);
        int bad = 0;
        for (int k = 0; k < 144; k++) /* brightness 0 is the identity; sums are exact */
            bad += out[k] != 8.0f * in[k];
        CHECKF(bad == 0, "%d wrong samples", bad);
    }
    pf_pipeline_destroy(p);
    eng = saved;
    pf_engine_destroy(e);
}

/* ---- A stage's message without a terminator -------------------------------------------- */

/* The err_fill plugin's stages fill a->err (and shape()'s err) to the last byte with 'E'
   and fail: the message the pipeline reports is theirs, cut at its buffer's last byte,
   and nothing reads past it (the asan preset would stop here otherwise). */
static void test_unterminated_messages(void)
{
    pf_engine *e = plugdir_engine("err_fill", "unterminated messages");
    if (!e)
        return;
    pf_engine *saved = eng;
    eng = e;
    pf_pipeline *p = planned(PIPE(PT("s", "tp_fill_stencil", "\"x\""), "\"o\": \"s\""), 9, 4);
    if (p) {
        float in[9 * 4 * 4] = {0}, out[9 * 4 * 4];
        pf_frame fi = {in, 9, 4, 9 * 16, PF_F32, 4}, fo = {out, 9, 4, 9 * 16, PF_F32, 4};
        int rc = pf_pipeline_run(p, &fi, 1, &fo, 1);
        const char *m = pf_pipeline_errmsg(p);
        CHECKF(rc == PF_STAGE && strstr(m, "EEEEEEEE") && strlen(m) < 4096,
               "stencil: %s, %zu bytes: %.200s", pf_status_name(rc), strlen(m), m);
        pf_pipeline_destroy(p);
    }
    pf_pipeline *q = NULL;
    CHECK(pf_pipeline_load_string(e, PIPE(PT("r", "tp_fill_resample", "\"x\""), "\"o\": \"r\""),
                                  "test", &q) == PF_OK);
    if (q) {
        pf_shape s = {7, 3};
        int rc = pf_pipeline_plan(q, &s, 1);
        const char *m = pf_pipeline_errmsg(q);
        CHECKF(rc == PF_SHAPE && strstr(m, "EEEEEEEE") && strlen(m) < 4096,
               "resample: %s, %zu bytes: %.200s", pf_status_name(rc), strlen(m), m);
        pf_pipeline_destroy(q);
    }
    eng = saved;
    pf_engine_destroy(e);
}

/* With the argument "repeated", only test_repeated_producer (a test of its own: when it
   fails it may crash). */
int main(int argc, char **argv)
{
    eng = pf_test_engine();
    if (argc > 1 && strcmp(argv[1], "repeated") == 0) {
        test_repeated_producer();
        pf_engine_destroy(eng);
        return pf_test_done("test_plan repeated");
    }
    test_chain();
    test_long_chain();
    test_diamond();
    test_no_cycle();
    test_kinds();
    test_unused();
    test_shape_mismatch();
    test_streams();
    test_print();
    test_unterminated_messages();
    pf_engine_destroy(eng);
    return pf_test_done("test_plan");
}
