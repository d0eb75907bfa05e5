/* tests/sdk/test_reduce_finish.c: a summing reduce with reduce_finish (the sample plugin's
 * `profile`: row means of R, G, B and A, finished from the row sums) as the engine's
 * generated kernel on the GPU, against the CPU executor (the stage's own run_cpu and
 * combine).
 *
 *   test_reduce_finish SAMPLE_PLUGIN_DIR
 *
 * Cases: the input alone, a point chain only the reduce reads (its ops run in the sum's
 * kernel, the reduce's params beside theirs in the kernel's parameters), and a chain
 * whose image is also an output. Sizes from one pixel to 2000 rows (one partial table
 * and many), 8-bit and float frames, graph replay and eager launches, the watchdog's
 * bands, and live changes of the reduce's own param (mean false: the sums; then the
 * means again), which update the captured graph's kernel arguments. Tables agree to a
 * relative 1e-6 (the same floats summed in double in another order, then divided). The
 * printed plan must show the finished reduction. Exits 77 without a device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h"
#include "gpu_frames.h"
#include "testutil.h"

static pf_engine *eng;

static const char *const cases[] = {
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"t\", \"op\": \"profile\", \"inputs\": [\"x\"]}], \"outputs\": {\"t\": \"t\"}}",
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"a\", \"op\": \"linear\", \"inputs\": [\"x\"], \"params\": {\"a\": 2.0, \"b\": "
    "0.25}},"
    "{\"id\": \"v\", \"op\": \"vignette\", \"inputs\": [\"a\"]},"
    "{\"id\": \"t\", \"op\": \"profile\", \"inputs\": [\"v\"]}], \"outputs\": {\"t\": \"t\"}}",
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"c\", \"op\": \"contrast\", \"inputs\": [\"x\"], \"params\": {\"amount\": 1.3}},"
    "{\"id\": \"t\", \"op\": \"profile\", \"inputs\": [\"c\"]}], \"outputs\": {\"t\": \"t\", "
    "\"img\": \"c\"}}",
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const struct {
    int w, h;
} sizes[] = {{1, 1}, {7, 3}, {333, 77}, {37, 2000}, {2000, 37}};
#define N_SIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* Table output 0 of one frame through p, copied (NULL on failure, reported). */
static double *run_table(pf_pipeline *p, const pf_frame *in, pf_frame *img, int *rows,
                         const char *what)
{
    pf_frame outs[2];
    memset(outs, 0, sizeof outs);
    int n_out = pf_pipeline_output_count(p);
    if (n_out > 1)
        outs[1] = *img;
    int rc = pf_test_run_frame(p, in, 1, outs, n_out, 0);
    if (rc != PF_OK) {
        CHECKF(0, "%s: run: %s: %s", what, pf_status_str(rc), pf_pipeline_errmsg(p));
        return NULL;
    }
    pf_table t;
    if (pf_pipeline_table(p, 0, &t) != PF_OK || t.cols != 4) {
        CHECKF(0, "%s: no table of 4 columns", what);
        return NULL;
    }
    double *copy = malloc(sizeof(double) * 4 * (size_t)t.rows);
    if (copy)
        memcpy(copy, t.data, sizeof(double) * 4 * (size_t)t.rows);
    *rows = t.rows;
    return copy;
}

/* gpu against cpu, each entry within 1e-6 of the larger of |cpu| and 1. */
static int compare(const double *cpu, const double *gpu, int rows, const char *what)
{
    for (int k = 0; k < rows * 4; k++)
        if (!(fabs(cpu[k] - gpu[k]) <= 1e-6 * fmax(fabs(cpu[k]), 1.0))) {
            CHECKF(0, "%s: table [%d][%d]: gpu %.12g cpu %.12g", what, k / 4, k % 4, gpu[k],
                   cpu[k]);
            return 1;
        }
    return 0;
}

static pf_pipeline *load(const char *json, const char *what, const char *backend)
{
    pf_pipeline *p = pf_test_load_string(eng, json, what, backend);
    return p;
}

static void run_case(pf_rng *r, int c, int w, int h, pf_sample s, int graph, int banded)
{
    char what[256];
    snprintf(what, sizeof what, "case %d %dx%d sample %d graph %d bands %d", c, w, h, (int)s, graph,
             banded);
    pf_pipeline *cpu = load(cases[c], what, "cpu"), *gpu = load(cases[c], what, "cuda");
    if (!graph)
        CHECK(pf_pipeline_set_option(gpu, "graph", "false") == PF_OK);
    if (banded)
        CHECK(pf_pipeline_set_option(gpu, "max_launch_ms", "0.0001") == PF_OK);
    pf_frame in = pf_test_frame_padded(r, w, h, s, 4, -0.25f, 1.25f);
    pf_frame img_cpu = {0}, img_gpu = {0};
    if (pf_pipeline_output_count(cpu) > 1) {
        img_cpu = pf_test_frame_padded(r, w, h, s, 4, 0, 1);
        img_gpu = pf_test_frame_padded(r, w, h, s, 4, 0, 1);
    }
    pf_shape shape = {w, h};
    CHECK(pf_pipeline_plan(gpu, &shape, 1) == PF_OK);
    char *text = pf_test_plan_text(gpu);
    CHECKF(text && strstr(text, "R: t (profile, sum by rows, finished by profile_finish) in one "
                                "kernel"),
           "%s: the plan does not finish the reduction in its kernel:\n%s", what, text ? text : "");
    free(text);
    /* means, then sums, then means again: the reduce's own param changed live */
    static const char *const means[] = {"true", "false", "true"};
    double *first = NULL;
    for (int k = 0; k < 3; k++) {
        char step[320];
        snprintf(step, sizeof step, "%s, mean %s", what, means[k]);
        CHECK(pf_pipeline_set_param(cpu, "t.mean", means[k]) == PF_OK);
        CHECK(pf_pipeline_set_param(gpu, "t.mean", means[k]) == PF_OK);
        int rc_rows = 0, rg_rows = 0;
        double *tc = run_table(cpu, &in, &img_cpu, &rc_rows, step);
        double *tg = run_table(gpu, &in, &img_gpu, &rg_rows, step);
        if (tc && tg) {
            CHECKF(rc_rows == h && rg_rows == h, "%s: %d and %d rows, not %d", step, rc_rows,
                   rg_rows, h);
            if (rc_rows == h && rg_rows == h && !compare(tc, tg, h, step) && k == 1 && first) {
                /* the sums are the means times the width: the param reached the kernel */
                CHECKF(fabs(tg[0] - first[0] * w) <= 1e-6 * fmax(fabs(tg[0]), 1.0),
                       "%s: sum %.12g is not width %d times the mean %.12g", step, tg[0], w,
                       first[0]);
            }
            if (img_cpu.data)
                pf_test_frames_close(&img_cpu, &img_gpu, step, "img");
        }
        if (k == 0) {
            first = tg;
            tg = NULL;
        }
        free(tc);
        free(tg);
    }
    free(first);
    free(in.data);
    free(img_cpu.data);
    free(img_gpu.data);
    pf_pipeline_destroy(cpu);
    pf_pipeline_destroy(gpu);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_reduce_finish SAMPLE_PLUGIN_DIR\n");
        return 1;
    }
    if (!pf_test_cuda_device("test_reduce_finish"))
        return PF_TEST_SKIPPED;
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = argv[1];
    eng = pf_test_engine_with(&cfg);
    pf_rng r;
    pf_rng_seed(&r, 36);
    for (int c = 0; c < N_CASES; c++)
        for (int i = 0; i < N_SIZES; i++) {
            run_case(&r, c, sizes[i].w, sizes[i].h, PF_U8, 1, 0);
            run_case(&r, c, sizes[i].w, sizes[i].h, PF_F32, 1, 0);
        }
    run_case(&r, 1, 333, 77, PF_U8, 0, 0);   /* eager launches */
    run_case(&r, 1, 333, 2000, PF_U8, 1, 1); /* bands */
    run_case(&r, 2, 2000, 37, PF_F32, 0, 1);
    pf_engine_destroy(eng);
    return pf_test_done("test_reduce_finish");
}
