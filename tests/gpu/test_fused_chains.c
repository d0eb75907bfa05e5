#define _GNU_SOURCE
/* tests/gpu/test_fused_chains.c: fused point chains whose values cross op boundaries in
 * the shapes where NVRTC's optimiser once stored garbage, on the GPU against the CPU.
 *
 * NVVM of CUDA 13.0 treated a value carried through several inlined ops as undefined
 * (a fuzz case: the alpha that grayscale and difference keep, blended with itself, was
 * stored as 0). Fused kernels pass each value that another op of the kernel reads
 * through pf_opaque (kernels/fused_rt.h); a value only stored or summed needs none.
 * These chains carry kept channels (alpha) and one value read twice across several
 * ops, end in a stored value without the barrier, and run in every frame format, with
 * graphs and without, from host and device frames, and into a column sum. They guard
 * the shapes and the barrier's placement; they did not reproduce the miscompile itself
 * (on the H200 they also passed with pf_opaque made the identity), so test_gpu_fuzz's
 * random chains, where it was found, stay the wider net. Integer
 * outputs agree within one code, floats within 1e-5 of their magnitude (at least 1),
 * tables within 1e-6. Exits 77 without a device.
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
    /* the fuzz case's shape: alpha kept by grayscale and difference, blended with itself */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"g\", \"op\": \"grayscale\", \"inputs\": [\"x\"]},"
    "{\"id\": \"d\", \"op\": \"difference\", \"inputs\": [\"g\", \"x\"]},"
    "{\"id\": \"b\", \"op\": \"blend\", \"inputs\": [\"d\", \"d\"], \"params\": {\"opacity\": "
    "0.4}}], \"outputs\": {\"o\": \"b\"}}",
    /* kept alpha through a longer chain, a value read by two later ops, two outputs */
    "{\"pipefuse\": 1, \"inputs\": [\"x\", \"y\"], \"stages\": ["
    "{\"id\": \"g\", \"op\": \"grayscale\", \"inputs\": [\"x\"]},"
    "{\"id\": \"s\", \"op\": \"saturation\", \"inputs\": [\"g\"], \"params\": {\"amount\": 1.5}},"
    "{\"id\": \"d\", \"op\": \"difference\", \"inputs\": [\"s\", \"y\"]},"
    "{\"id\": \"m\", \"op\": \"multiply\", \"inputs\": [\"d\", \"g\"]},"
    "{\"id\": \"b\", \"op\": \"blend\", \"inputs\": [\"m\", \"d\"], \"params\": {\"opacity\": "
    "0.7}},"
    "{\"id\": \"i\", \"op\": \"invert\", \"inputs\": [\"b\"], \"params\": {\"alpha\": true}}],"
    "\"outputs\": {\"o\": \"i\", \"mid\": \"d\"}}",
    /* alpha over with itself after a kept-alpha op, then a threshold */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"c\", \"op\": \"contrast\", \"inputs\": [\"x\"], \"params\": {\"amount\": 1.2}},"
    "{\"id\": \"a\", \"op\": \"alpha_over\", \"inputs\": [\"c\", \"c\"]},"
    "{\"id\": \"t\", \"op\": \"threshold\", \"inputs\": [\"a\"], \"params\": {\"level\": 0.4}},"
    "{\"id\": \"b\", \"op\": \"blend\", \"inputs\": [\"t\", \"a\"], \"params\": {\"opacity\": "
    "0.5}}], \"outputs\": {\"o\": \"b\"}}",
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static void run_case(pf_rng *r, int c, int w, int h, pf_sample s, int ch, int graph, int device)
{
    char what[256];
    snprintf(what, sizeof what, "case %d %dx%d sample %d x%d graph %d device %d", c, w, h, (int)s,
             ch, graph, device);
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(eng, cases[c], what, &p) != PF_OK) {
        CHECKF(0, "%s: load: %s", what, pf_engine_errmsg(eng));
        return;
    }
    int n_in = pf_pipeline_input_count(p), n_out = pf_pipeline_output_count(p);
    pf_frame in[2], cpu[2], gpu[2];
    for (int k = 0; k < n_in; k++)
        in[k] = pf_test_frame_padded(r, w, h, s, ch, 0.0f, 1.0f);
    for (int o = 0; o < n_out; o++) {
        cpu[o] = pf_test_frame_padded(r, w, h, s, ch, 0.0f, 1.0f);
        gpu[o] = pf_test_frame_padded(r, w, h, s, ch, 0.0f, 1.0f);
    }
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    int rc = pf_test_run_frame(p, in, n_in, cpu, n_out, 0);
    CHECKF(rc == PF_OK, "%s: cpu: %s", what, pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    CHECK(pf_pipeline_set_option(p, "graph", graph ? "true" : "false") == PF_OK);
    /* the fused kernel, and its graph replayed: three frames */
    for (int k = 0; k < 3 && rc == PF_OK; k++) {
        rc = pf_test_run_frame(p, in, n_in, gpu, n_out, device);
        CHECKF(rc == PF_OK, "%s: gpu: %s", what, pf_pipeline_errmsg(p));
        for (int o = 0; o < n_out && rc == PF_OK; o++)
            if (pf_test_frames_close(&cpu[o], &gpu[o], what, o ? "1" : "0"))
                rc = PF_STAGE; /* reported; the next frames would repeat it */
    }
    pf_stats st = {.size = sizeof st};
    CHECK(pf_pipeline_stats(p, &st) == PF_OK);
    CHECKF(st.launches_per_frame == 1, "%s: %d launches a frame: the chain was not fused", what,
           st.launches_per_frame);
    for (int k = 0; k < n_in; k++)
        free(in[k].data);
    for (int o = 0; o < n_out; o++)
        free(cpu[o].data), free(gpu[o].data);
    pf_pipeline_destroy(p);
}

/* The first case into a column sum: its ops run in the sum's kernel. */
static void run_sum(pf_rng *r, pf_sample s, int ch)
{
    char json[1024], what[128];
    snprintf(json, sizeof json, "%.*s", (int)(strstr(cases[0], "], \"outputs\"") - cases[0]),
             cases[0]);
    strncat(json,
            ",{\"id\": \"t\", \"op\": \"colsum\", \"inputs\": [\"b\"]}], \"outputs\": {\"o\": "
            "\"t\"}}",
            sizeof json - strlen(json) - 1);
    snprintf(what, sizeof what, "colsum of case 0, sample %d x%d", (int)s, ch);
    pf_pipeline *p = pf_test_load_string(eng, json, what, "cpu");
    pf_frame in = pf_test_frame_padded(r, 301, 67, s, ch, 0.0f, 1.0f), none;
    memset(&none, 0, sizeof none);
    pf_table t;
    double cpu[301 * 4];
    CHECK(pf_test_run_frame(p, &in, 1, &none, 1, 0) == PF_OK);
    CHECK(pf_pipeline_table(p, 0, &t) == PF_OK && t.rows == 301 && t.cols == 4);
    memcpy(cpu, t.data, sizeof cpu);
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    for (int k = 0; k < 3; k++) {
        CHECKF(pf_test_run_frame(p, &in, 1, &none, 1, k == 2) == PF_OK, "%s: %s", what,
               pf_pipeline_errmsg(p));
        CHECK(pf_pipeline_table(p, 0, &t) == PF_OK);
        for (int e = 0; e < 301 * 4; e++)
            if (!(fabs(t.data[e] - cpu[e]) <= 1e-6 * fmax(fabs(cpu[e]), 67.0))) {
                CHECKF(0, "%s: entry %d: gpu %.12g cpu %.12g", what, e, t.data[e], cpu[e]);
                break;
            }
    }
    free(in.data);
    pf_pipeline_destroy(p);
}

int main(void)
{
    if (!pf_test_cuda_device("test_fused_chains"))
        return PF_TEST_SKIPPED;
    eng = pf_test_engine();
    pf_rng r;
    pf_rng_seed(&r, 20261203);
    static const pf_sample samples[] = {PF_U8, PF_U16, PF_F32};
    static const int sizes[][2] = {{1, 1}, {67, 5}, {333, 77}};
    int n = 0;
    for (int c = 0; c < N_CASES; c++)
        for (int f = 0; f < 12; f++)
            for (int si = 0; si < 3; si++) {
                run_case(&r, c, sizes[si][0], sizes[si][1], samples[f / 4], f % 4 + 1,
                         (c + f + si) % 2, (f + si) % 3 == 0);
                n++;
            }
    for (int f = 0; f < 12; f++, n++)
        run_sum(&r, samples[f / 4], f % 4 + 1);
    printf("test_fused_chains: %d runs\n", n);
    pf_engine_destroy(eng);
    return pf_test_done("test_fused_chains");
}
