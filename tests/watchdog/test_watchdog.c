/* tests/watchdog/test_watchdog.c: watchdog-safe splitting.
 *
 * PF_WATCHDOG_PART=plan (no GPU): a forced budget splits every unit kind into bands
 * in the plan and its print; the CPU runs banded and unbanded to the same bytes.
 * PF_WATCHDOG_PART=gpu: with a 5 ms budget and stages that spin, after the first
 * measured frames refine the split, every launch of a measured frame stays within the
 * budget (a 25% margin for timing noise), bands are more than one, and the output of
 * point (fused with a built-in), stencil, resample and reduce units is identical to
 * the unsplit run, in eager and in graph mode. Exits 77 without a device.
 * PF_WATCHDOG_PART=lost: a kernel that traps ends the CUDA context; the run reports it,
 * and every later call, on that pipeline or a new one, fails at once with the reason
 * instead of touching the dead context. Exits 77 without a device.
 */
#define _GNU_SOURCE
#include <math.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

static pf_engine *eng;

/* An engine that loads the spin plugin (and the built-ins), nothing from the environment;
   exit(1), with the reason on stderr, when it cannot be made. */
static pf_engine *spin_engine(void)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = SPIN_DIR;
    return pf_test_engine_with(&cfg);
}

#define BUDGET_MS 5.0
#define MARGIN    1.25

/* point (spin fused with brightness), stencil, resample and reduce, in one pipeline. */
static const char *pipeline_json(int iters, char *buf, size_t n)
{
    /* The reduce runs one thread per column, so it needs far fewer iterations for the
       same time as the others. */
    int reduce_iters = iters / 15;
    snprintf(buf, n,
             "{\"pipefuse\":1,\"inputs\":[\"src\"],\"stages\":["
             "{\"id\":\"spin\",\"op\":\"spin_point\",\"params\":{\"iters\":%d}},"
             "{\"id\":\"warm\",\"op\":\"brightness\",\"params\":{\"amount\":0.0625}},"
             "{\"id\":\"blur\",\"op\":\"spin_stencil\",\"params\":{\"iters\":%d}},"
             "{\"id\":\"flip\",\"op\":\"spin_resample\",\"params\":{\"iters\":%d}},"
             "{\"id\":\"sums\",\"op\":\"spin_reduce\",\"params\":{\"iters\":%d}}],"
             "\"outputs\":{\"img\":\"flip\",\"sums\":\"sums\"}}",
             iters, iters, iters, reduce_iters);
    return buf;
}

static pf_pipeline *load(int iters)
{
    char json[2048];
    return pf_test_load_string(eng, pipeline_json(iters, json, sizeof json), "spin.json", NULL);
}

typedef struct result {
    pf_frame img;
    double *sums;
    int n;
} result;

static int run(pf_pipeline *p, const pf_frame *in, result *r)
{
    pf_frame outs[2] = {r->img, {0}};
    int rc = pf_pipeline_run(p, in, 1, outs, 2);
    if (rc != PF_OK) {
        fprintf(stderr, "run: %s\n", pf_pipeline_errmsg(p));
        return rc;
    }
    pf_table t;
    if (pf_pipeline_table(p, 1, &t) != PF_OK)
        return -1;
    r->n = t.rows * t.cols;
    memcpy(r->sums, t.data, sizeof(double) * (size_t)r->n);
    return PF_OK;
}

static result make_result(int w, int h)
{
    result r;
    CHECK(pf_frame_alloc(&r.img, w, h, PF_U16, 4) == PF_OK);
    r.sums = calloc((size_t)w * 4, sizeof(double));
    r.n = 0;
    return r;
}

static int same(const result *a, const result *b)
{
    for (int y = 0; y < a->img.height; y++)
        if (memcmp((char *)a->img.data + (size_t)y * a->img.pitch,
                   (char *)b->img.data + (size_t)y * b->img.pitch, (size_t)a->img.width * 8))
            return 0;
    return a->n == b->n && memcmp(a->sums, b->sums, sizeof(double) * (size_t)a->n) == 0;
}

static pf_frame random_input(int w, int h)
{
    pf_frame f;
    pf_rng r;
    pf_rng_seed(&r, 99);
    CHECK(pf_frame_alloc(&f, w, h, PF_U8, 4) == PF_OK);
    pf_test_frame_random(&r, &f);
    return f;
}

static void part_plan(void)
{
    pf_pipeline *p = load(100);
    pf_shape big = {8192, 8192};
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    CHECK(pf_pipeline_set_option(p, "max_launch_ms", "1") == PF_OK);
    CHECK(pf_pipeline_plan(p, &big, 1) == PF_OK);
    int kinds = 0;
    for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
        pf_unit_info u;
        pf_pipeline_unit(p, i, &u);
        CHECKF(u.bands > 1, "unit %d (%s) not split at 8192x8192 with a 1 ms budget", i,
               u.stages[0]);
        CHECKF(u.predicted_ms / u.bands <= 1.0 * 0.5 + 1e-9, "unit %d: %.2f ms per band predicted",
               i, u.predicted_ms / u.bands);
        kinds |= 1 << u.kind;
    }
    CHECKF(kinds == 0xF, "not every unit kind present (mask %x)", kinds);
    FILE *f = tmpfile();
    CHECK(f && pf_pipeline_print_plan(p, f) == PF_OK);
    if (f) {
        char text[16384] = "";
        rewind(f);
        text[fread(text, 1, sizeof text - 1, f)] = 0;
        CHECKF(strstr(text, "watchdog budget: 1.0 ms") != NULL, "plan print: %s", text);
        CHECK(strstr(text, "bands 1 ") == NULL);
        fclose(f);
    }
    /* No budget: one band each. */
    CHECK(pf_pipeline_set_option(p, "max_launch_ms", "0") == PF_OK);
    CHECK(pf_pipeline_plan(p, &big, 1) == PF_OK);
    for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
        pf_unit_info u;
        pf_pipeline_unit(p, i, &u);
        CHECK(u.bands == 1);
    }
    /* The CPU executor banded as the plan says gives the same bytes. */
    pf_frame in = random_input(301, 203);
    result a = make_result(301, 203), b = make_result(301, 203);
    CHECK(run(p, &in, &a) == PF_OK);
    CHECK(pf_pipeline_set_option(p, "max_launch_ms", "0.001") == PF_OK);
    CHECK(pf_pipeline_set_option(p, "threads", "3") == PF_OK);
    CHECK(run(p, &in, &b) == PF_OK);
    CHECK(same(&a, &b));
    pf_frame_free(&in), pf_frame_free(&a.img), pf_frame_free(&b.img), free(a.sums), free(b.sums);
    pf_pipeline_destroy(p);
}

/* A fresh engine whose first plan is for the CUDA backend (no earlier probe of the
   device): the cost model has the device's bandwidth, so bands are few, not one per
   row as an unknown (zero) bandwidth made them. */
static void first_plan_bands(void)
{
    pf_engine *e = spin_engine();
    CHECK(e != NULL);
    if (!e)
        return;
    char json[2048];
    pf_pipeline *p = NULL;
    CHECK(pf_pipeline_load_string(e, pipeline_json(0, json, sizeof json), "fresh.json", &p) ==
          PF_OK);
    if (p) {
        CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
        CHECK(pf_pipeline_set_option(p, "max_launch_ms", "1000") == PF_OK);
        pf_shape s = {2048, 2048};
        CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
        for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
            pf_unit_info u;
            pf_pipeline_unit(p, i, &u);
            CHECKF(isfinite(u.predicted_ms) && u.bands == 1,
                   "first plan, unit %d: %.3g ms predicted, %d bands under a 1 s budget", i,
                   u.predicted_ms, u.bands);
        }
        pf_pipeline_destroy(p);
    }
    pf_engine_destroy(e);
}

static void part_gpu(void)
{
    first_plan_bands();
    /* Quick (under compute-sanitizer, where times mean nothing): correctness only. */
    int quick = getenv("PF_TEST_QUICK") != NULL;
    /* On an H200 12000 iterations take about 9 ms per 4096x4096 unit. */
    const int w = quick ? 512 : 4096, h = quick ? 512 : 4096, iters = quick ? 20 : 12000;
    pf_frame in = random_input(w, h);
    pf_pipeline *p = load(iters);
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    result whole = make_result(w, h), split = make_result(w, h);
    int rc = run(p, &in, &whole);
    CHECKF(rc == PF_OK, "unsplit run failed");
    if (rc != PF_OK)
        return;
    /* Time unsplit launches, to know the test really needs splitting. */
    CHECK(pf_pipeline_set_option(p, "profile", "true") == PF_OK);
    CHECK(run(p, &in, &whole) == PF_OK);
    double longest = 0;
    for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
        pf_unit_info u;
        pf_pipeline_unit(p, i, &u);
        printf("unsplit unit %d (%s): %.2f ms\n", i, u.stages[0], u.measured_ms);
        longest = u.measured_ms > longest ? u.measured_ms : longest;
    }
    CHECKF(quick || longest > BUDGET_MS, "the spin stages are too fast to test splitting (%.2f ms)",
           longest);

    CHECK(pf_pipeline_set_option(p, "max_launch_ms", quick ? "0.01" : "5") == PF_OK);
    for (int frame = 0; frame < 8; frame++) /* measure, refine, re-plan, measure again */
        CHECK(run(p, &in, &split) == PF_OK);
    for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
        pf_unit_info u;
        pf_pipeline_unit(p, i, &u);
        printf("split unit %d (%s): %d bands, longest %.2f ms, all %.2f ms (predicted %.2f)\n", i,
               u.stages[0], u.bands, u.measured_band_ms, u.measured_ms, u.predicted_ms);
        CHECKF(u.bands > 1, "unit %d not split", i);
        CHECKF(quick || u.measured_band_ms <= BUDGET_MS * MARGIN, "unit %d: a launch took %.2f ms",
               i, u.measured_band_ms);
    }
    CHECKF(same(&whole, &split), "split output differs from unsplit (eager)");
    pf_stats s;
    s.size = sizeof s;
    pf_pipeline_stats(p, &s);
    printf("timed launches %llu, over budget %llu, longest %.2f ms\n", s.timed_launches,
           s.launches_over_budget, s.max_launch_ms);
    /* Graph mode replays the same bands. */
    CHECK(pf_pipeline_set_option(p, "profile", "false") == PF_OK);
    memset(split.img.data, 0, split.img.pitch * (size_t)h);
    for (int frame = 0; frame < 3; frame++)
        CHECK(run(p, &in, &split) == PF_OK);
    pf_pipeline_stats(p, &s);
    CHECKF(strcmp(s.backend, "cuda-graph") == 0 && s.graph_launches > 0, "not replayed as a graph");
    CHECKF(same(&whole, &split), "split output differs from unsplit (graph)");
    /* And the CPU agrees with the GPU. */
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    CHECK(run(p, &in, &split) == PF_OK);
    CHECKF(same(&whole, &split), "CPU output differs from the GPU's");
    pf_frame_free(&in), pf_frame_free(&whole.img), pf_frame_free(&split.img);
    free(whole.sums), free(split.sums);
    pf_pipeline_destroy(p);
}

static void part_lost(void)
{
    const char *json = "{\"pipefuse\":1,\"inputs\":[\"src\"],\"stages\":["
                       "{\"id\":\"f\",\"op\":\"spin_fault\"}],\"outputs\":{\"o\":\"f\"}}";
    pf_pipeline *p = NULL;
    CHECK(pf_pipeline_load_string(eng, json, "fault.json", &p) == PF_OK);
    if (!p)
        return;
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    pf_frame in = random_input(67, 31);
    pf_frame out;
    CHECK(pf_frame_alloc(&out, 67, 31, PF_U8, 4) == PF_OK);
    CHECKF(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK, "%s", pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_set_param(p, "f.trap", "true") == PF_OK);
    int rc = pf_pipeline_run(p, &in, 1, &out, 1);
    printf("trap: %s\n", pf_pipeline_errmsg(p));
    CHECKF(rc == PF_CUDA, "a trapping kernel returned %d", rc);
    CHECKF(strstr(pf_pipeline_errmsg(p), "lost") != NULL, "not reported as lost: %s",
           pf_pipeline_errmsg(p));
    /* Later calls fail at once, with the first error's reason. */
    CHECK(pf_pipeline_set_param(p, "f.trap", "false") == PF_OK);
    rc = pf_pipeline_run(p, &in, 1, &out, 1);
    printf("after: %s\n", pf_pipeline_errmsg(p));
    CHECKF(rc == PF_CUDA && strstr(pf_pipeline_errmsg(p), "lost earlier") != NULL,
           "a run after the loss returned %d: %s", rc, pf_pipeline_errmsg(p));
    pf_pipeline *q = NULL;
    CHECK(pf_pipeline_load_string(eng, json, "fault2.json", &q) == PF_OK);
    if (q) {
        CHECK(pf_pipeline_set_option(q, "backend", "cuda") == PF_OK);
        rc = pf_pipeline_run(q, &in, 1, &out, 1);
        CHECKF(rc == PF_CUDA && strstr(pf_pipeline_errmsg(q), "lost earlier") != NULL,
               "a new pipeline after the loss returned %d: %s", rc, pf_pipeline_errmsg(q));
        pf_pipeline_destroy(q);
    }
    pf_pipeline_destroy(p); /* and the engine's destruction below: no hang, no crash */
    pf_frame_free(&in), pf_frame_free(&out);
}

int main(void)
{
    const char *part = getenv("PF_WATCHDOG_PART");
    eng = spin_engine();
    if (part && (strcmp(part, "gpu") == 0 || strcmp(part, "lost") == 0)) {
        pf_pipeline *probe = load(0);
        pf_pipeline_set_option(probe, "backend", "cuda");
        pf_shape s = {8, 8};
        int rc = pf_pipeline_plan(probe, &s, 1);
        pf_pipeline_destroy(probe);
        if (rc == PF_NO_DEVICE) {
            printf("test_watchdog: no CUDA device: skipped\n");
            pf_engine_destroy(eng);
            return 77;
        }
        if (strcmp(part, "gpu") == 0)
            part_gpu();
        else
            part_lost();
    } else {
        part_plan();
    }
    pf_engine_destroy(eng);
    return pf_test_done("test_watchdog");
}
