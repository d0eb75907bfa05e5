/* tests/engine/test_scale.c: a pipeline of 100 000 stages loads, plans, prints and runs
 * (CPU, a tiny frame), with the fusion groups and launch units the structure implies and
 * the pixels it computes. The pipeline is generated here: blocks of point chains, a
 * stencil whose result is added with a factor of 0, two-input stages and a fan-out from
 * the pipeline input, so every stage leaves the pixels as they are. Planning was once
 * quadratic in stages (100k stages: minutes and more than a GiB); bench/plan_scale.py
 * times it. Here only correctness is checked, so a slow machine cannot fail it.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <string.h>

#include "testutil.h"

typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n + 64;
        t->s = realloc(t->s, t->cap);
        if (!t->s) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
    }
}

/* Block k of 6 stages reads prev (a stage id or "x"):
     a_k = linear(prev)          b_k = linear(a_k)         c_k = box(b_k)
     d_k = add(b_k, c_k, 0)      e_k = blend(d_k, a_k, 0)  f_k = add(e_k, x, 0)
   {a_k, b_k} join the group before them; d_k cannot join it (c_k lies between), so
   d_k, e_k, f_k and the next block's a, b form the next group. */
#define STAGES_PER_BLOCK 6

static char *pipeline(int blocks)
{
    text t = {NULL, 0, 0};
    put(&t, "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [\n");
    char prev[32] = "x";
    for (int k = 0; k < blocks; k++) {
        put(&t,
            "{\"id\": \"a%d\", \"op\": \"linear\", \"inputs\": [\"%s\"]},\n"
            "{\"id\": \"b%d\", \"op\": \"linear\", \"inputs\": [\"a%d\"], \"params\": {\"a\": "
            "1}},\n"
            "{\"id\": \"c%d\", \"op\": \"box\", \"inputs\": [\"b%d\"]},\n"
            "{\"id\": \"d%d\", \"op\": \"add\", \"inputs\": [\"b%d\", \"c%d\"], \"params\": "
            "{\"scale\": 0}},\n"
            "{\"id\": \"e%d\", \"op\": \"blend\", \"inputs\": [\"d%d\", \"a%d\"], \"params\": "
            "{\"opacity\": 0}},\n"
            "{\"id\": \"f%d\", \"op\": \"add\", \"inputs\": [\"e%d\", \"x\"], \"params\": "
            "{\"scale\": 0}}%s\n",
            k, prev, k, k, k, k, k, k, k, k, k, k, k, k, k + 1 < blocks ? "," : "");
        snprintf(prev, sizeof prev, "f%d", k);
    }
    put(&t, "], \"outputs\": {\"out\": \"%s\", \"stats\": \"st\"}}", prev);
    /* the stats reduce of the last stage, appended as one more stage */
    char *close = strstr(t.s + t.len - 64, "\n], \"outputs\"");
    if (!close) {
        fprintf(stderr, "generator: no stage list end\n");
        exit(1);
    }
    char tail[128];
    snprintf(tail, sizeof tail, "%s", close);
    t.len = (size_t)(close - t.s);
    put(&t, ",\n{\"id\": \"st\", \"op\": \"stats\", \"inputs\": [\"%s\"]}%s", prev, tail);
    return t.s;
}

static void big_pipeline(pf_engine *e, int blocks)
{
    char *json = pipeline(blocks);
    int n_stages = blocks * STAGES_PER_BLOCK + 1;
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(e, json, "generated", &p);
    free(json);
    CHECKF(rc == PF_OK, "load: %s", pf_engine_errmsg(e));
    if (rc != PF_OK)
        return;
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    pf_shape s = {5, 3};
    rc = pf_pipeline_plan(p, &s, 1);
    CHECKF(rc == PF_OK, "plan: %s", pf_pipeline_errmsg(p));
    if (rc != PF_OK) {
        pf_pipeline_destroy(p);
        return;
    }
    /* Units: group 0 = {a0, b0}; per block a box; per block a group {d, e, f, a', b'}
       (the last one {d, e, f}); the stats reduce. */
    int units = pf_pipeline_unit_count(p), stages = 0, points = 0, groups = 0;
    CHECKF(units == 2 + 2 * blocks, "units: %d, expected %d", units, 2 + 2 * blocks);
    for (int i = 0; i < units; i++) {
        pf_unit_info u;
        CHECK(pf_pipeline_unit(p, i, &u) == PF_OK);
        stages += u.n_stages;
        if (u.kind == PF_UNIT_POINT) {
            groups++;
            points += u.n_stages;
            int want = i == 0 ? 2 : (i == units - 2 ? 3 : 5);
            CHECKF(u.n_stages == want, "unit %d: %d stages, expected %d (first %s)", i, u.n_stages,
                   want, u.stages[0]);
        }
    }
    CHECKF(stages == n_stages, "units hold %d stages, expected %d", stages, n_stages);
    CHECK(groups == blocks + 1 && points == 5 * blocks);

    /* The printed plan and the dot graph go through every unit. */
    FILE *null = fopen("/dev/null", "w");
    CHECK(null != NULL);
    if (null) {
        CHECK(pf_pipeline_print_plan(p, null) == PF_OK);
        CHECK(pf_pipeline_print_dot(p, null) == PF_OK);
        fclose(null);
    }

    /* Every stage keeps the pixels: the output is the input. */
    unsigned char in[3][5 * 4], out[3][5 * 4];
    for (int i = 0; i < (int)sizeof in; i++)
        ((unsigned char *)in)[i] = (unsigned char)(i * 37 + 11);
    memset(out, 0xA5, sizeof out);
    pf_frame fi = {in, 5, 3, 5 * 4, PF_U8, 4};
    pf_frame fo[2] = {{out, 5, 3, 5 * 4, PF_U8, 4}, {NULL, 0, 0, 0, PF_U8, 0}};
    rc = pf_pipeline_run(p, &fi, 1, fo, 2);
    CHECKF(rc == PF_OK, "run: %s", pf_pipeline_errmsg(p));
    CHECK(memcmp(in, out, sizeof in) == 0);
    pf_table t;
    CHECK(pf_pipeline_table(p, 1, &t) == PF_OK && t.rows >= 1 && t.cols >= 1); /* stats */
    pf_pipeline_destroy(p);
}

/* Loads json and expects status st with want in the message. */
static void refused(pf_engine *e, const char *json, int st, const char *want)
{
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(e, json, "limits", &p);
    CHECKF(rc == st && p == NULL, "%s: got %s", want, pf_status_name(rc));
    CHECKF(strstr(pf_engine_errmsg(e), want) != NULL, "message '%s' lacks '%s'",
           pf_engine_errmsg(e), want);
    pf_pipeline_destroy(p);
}

/* n inputs i0.., one blend chain over them, and n_out outputs (stage or input). */
static char *wide(int n, int n_out)
{
    text t = {NULL, 0, 0};
    put(&t, "{\"pipefuse\": 1, \"inputs\": [");
    for (int i = 0; i < n; i++)
        put(&t, "%s\"i%d\"", i ? ", " : "", i);
    put(&t, "], \"stages\": [");
    for (int i = 1; i < n; i++)
        put(&t, "%s{\"id\": \"m%d\", \"op\": \"blend\", \"inputs\": [\"%s%d\", \"i%d\"]}",
            i > 1 ? ", " : "", i, i > 1 ? "m" : "i", i - 1, i);
    put(&t, "], \"outputs\": {");
    for (int o = 0; o < n_out; o++) /* o0: the last stage; then stages and inputs */
        put(&t, "%s\"o%d\": \"%s%d\"", o ? ", " : "", o, o % 2 || o == 0 ? "m" : "i",
            o == 0  ? n - 1
            : o % 2 ? o % (n - 1) + 1
                    : o % n);
    put(&t, "}}");
    return t.s;
}

/* The limits of docs/pipeline-format.md, and a pipeline at them planned and printed
   (the printer once kept per-input formats in an array of 64 and read past it). */
static void limits(pf_engine *e)
{
    char *json = wide(65, 1);
    refused(e, json, PF_PIPELINE, "inputs: 65 inputs; a pipeline takes at most 64");
    free(json);
    json = wide(8, 65);
    refused(e, json, PF_PIPELINE, "outputs: 65 outputs; a pipeline has at most 64");
    free(json);

    json = wide(64, 64);
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(e, json, "wide", &p);
    free(json);
    CHECKF(rc == PF_OK, "64 inputs: %s", pf_engine_errmsg(e));
    if (rc == PF_OK) {
        CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
        pf_shape s[64];
        for (int i = 0; i < 64; i++)
            s[i] = (pf_shape){3, 2};
        CHECKF(pf_pipeline_plan(p, s, 64) == PF_OK, "plan: %s", pf_pipeline_errmsg(p));
        FILE *null = fopen("/dev/null", "w");
        CHECK(null && pf_pipeline_print_plan(p, null) == PF_OK);
        if (null)
            fclose(null);
        pf_pipeline_destroy(p);
    }

    /* 200001 stages: refused before any of them is read */
    text t = {NULL, 0, 0};
    put(&t, "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [");
    for (int k = 0; k <= 200000; k++)
        put(&t, "%s{}", k ? "," : "");
    put(&t, "], \"outputs\": {\"o\": \"x\"}}");
    refused(e, t.s, PF_PIPELINE, "stages: 200001 stages; a pipeline has at most 200000");

    /* text over 16 MiB, as for files */
    size_t big = (16u << 20) + 16;
    t.s = realloc(t.s, big + 1);
    if (t.s) {
        memset(t.s, ' ', big);
        memcpy(t.s, "{\"pipefuse\": 1}", 15);
        t.s[big] = 0;
        refused(e, t.s, PF_INVALID_ARGUMENT, "larger than 16 MiB; not a pipeline");
    }
    free(t.s);
}

/* An engine's worker threads are capped like the threads option: a config asking for
   100000 is refused by name (it once started 32k threads). */
static void thread_cap(void)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.use_env_path = 0;
    cfg.no_builtin = 1;
    cfg.threads = 100000;
    pf_engine *e = NULL;
    int rc = pf_engine_create(&cfg, &e);
    CHECKF(rc == PF_INVALID_ARGUMENT, "threads 100000: %s", pf_status_name(rc));
    CHECKF(e && strstr(pf_engine_errmsg(e), "threads is 100000; an engine runs at most 1024"),
           "message: %s", e ? pf_engine_errmsg(e) : "(no engine)");
    pf_engine_destroy(e);
    cfg.threads = 3;
    e = NULL;
    CHECK(pf_engine_create(&cfg, &e) == PF_OK);
    pf_engine_destroy(e);
}

int main(void)
{
    thread_cap();
    pf_engine *e = pf_test_engine();
    limits(e);
    big_pipeline(e, 3);
    big_pipeline(e, 100000 / STAGES_PER_BLOCK);
    pf_engine_destroy(e);
    return pf_test_done("test_scale");
}
