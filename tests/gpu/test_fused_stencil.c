#define _GNU_SOURCE
/* tests/gpu/test_fused_stencil.c: 3x3 stencils (sobel, median3) and separable ones
 * (gaussian, box) as generated kernels on the GPU against the CPU executor; a separable
 * one reading the input gives the bytes of the stage's own kernels too.
 *
 * Each case is a pipeline whose stencil reads: a point chain only it reads, with a
 * position-dependent op (its ops run on the stencil's tile at the clamped coordinates,
 * so that chain's image is never written), a pipeline input in its own format, another
 * stencil's float image, a two-input chain, or a chain whose image is also an output
 * (then stored, and the stencil reads it back). Then point units reading the stencil's
 * result (epilogues, run in the stencil's kernel before its stores): alone, after a chain
 * on the tile and position-dependent with an image a box reads, reading the result
 * twice, reading the input too, and reading an image the stencil's input comes from
 * after a gaussian (the mixed bench's shape); and a point unit reading the result and a
 * box the stencil does not wait for (no epilogue: the float image is stored). Every
 * frame format, sizes from one pixel to 1024x1024, graph and eager, device and host
 * frames, the watchdog's bands, and a live parameter change in graph mode (the fused
 * kernel's by-value parameters updated in the captured graph). Outputs are poisoned
 * before each run. Integer outputs agree within one code (the chains' maths functions may differ in the last bits between
 * CPU and GPU, and a sobel magnifies that), floats to a relative 1e-5 of their magnitude
 * (at least 1). The printed plan must show the fused stencil. Exits 77 without a device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h"
#include "gpu_frames.h"
#include "testutil.h"

static pf_engine *eng;

/* %1$s is the stencil op and %2$s its params (", \"params\": {...}" or ""); its stage is
   "s", its output "o". */
static const char *const cases[] = {
    /* a chain only the stencil reads, with a position-dependent op */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"a\", \"op\": \"linear\", \"inputs\": [\"x\"], \"params\": {\"a\": 2.0, \"b\": "
    "-0.25}},"
    "{\"id\": \"g\", \"op\": \"gamma\", \"inputs\": [\"a\"], \"params\": {\"gamma\": 1.7}},"
    "{\"id\": \"v\", \"op\": \"vignette\", \"inputs\": [\"g\"]},"
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"v\"]}], \"outputs\": {\"o\": \"s\"}}",
    /* the input itself, in its own format */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"x\"]}], \"outputs\": {\"o\": \"s\"}}",
    /* another stencil's float image */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"b\", \"op\": \"box\", \"inputs\": [\"x\"], \"params\": {\"radius\": 2}},"
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"b\"]}], \"outputs\": {\"o\": \"s\"}}",
    /* two inputs through a blend and an invert */
    "{\"pipefuse\": 1, \"inputs\": [\"x\", \"y\"], \"stages\": ["
    "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"x\", \"y\"], \"params\": {\"opacity\": "
    "0.3}},"
    "{\"id\": \"i\", \"op\": \"invert\", \"inputs\": [\"m\"]},"
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"i\"]}], \"outputs\": {\"o\": \"s\"}}",
    /* the chain's image is an output too: stored, and the stencil reads it */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"c\", \"op\": \"contrast\", \"inputs\": [\"x\"], \"params\": {\"amount\": 1.3}},"
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"c\"]}], \"outputs\": {\"o\": \"s\", "
    "\"img\": \"c\"}}",
    /* an epilogue: a point unit reading only the result runs in the stencil's kernel,
       which stores both outputs */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"x\"]},"
    "{\"id\": \"n\", \"op\": \"invert\", \"inputs\": [\"s\"]}], \"outputs\": {\"o\": \"s\", "
    "\"inv\": \"n\"}}",
    /* a chain on the tile and a position-dependent epilogue whose first image a box
       reads (stored as float RGBA from the stencil's kernel) */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"a\", \"op\": \"linear\", \"inputs\": [\"x\"], \"params\": {\"a\": 2.0, \"b\": "
    "-0.25}},"
    "{\"id\": \"v\", \"op\": \"vignette\", \"inputs\": [\"a\"]},"
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"v\"]},"
    "{\"id\": \"n\", \"op\": \"invert\", \"inputs\": [\"s\"]},"
    "{\"id\": \"g\", \"op\": \"vignette\", \"inputs\": [\"n\"]},"
    "{\"id\": \"b\", \"op\": \"box\", \"inputs\": [\"n\"], \"params\": {\"radius\": 1}}],"
    "\"outputs\": {\"o\": \"g\", \"bx\": \"b\"}}",
    /* an epilogue reading the result twice, the result an output too */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"x\"]},"
    "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"s\", \"s\"], \"params\": "
    "{\"opacity\": 0.3}},"
    "{\"id\": \"i\", \"op\": \"invert\", \"inputs\": [\"m\"]}], \"outputs\": {\"o\": \"i\", "
    "\"s\": \"s\"}}",
    /* an epilogue reading the pipeline input too (loaded at the pixel, natively) */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"x\"]},"
    "{\"id\": \"t\", \"op\": \"blend\", \"inputs\": [\"s\", \"x\"], \"params\": "
    "{\"opacity\": 0.5}}], \"outputs\": {\"o\": \"t\"}}",
    /* the bench's mixed shape: an epilogue reading an image the stencil's input is
       computed from (a float image), after a gaussian */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"a\", \"op\": \"saturation\", \"inputs\": [\"x\"], \"params\": {\"amount\": "
    "1.2}},"
    "{\"id\": \"g\", \"op\": \"gaussian\", \"inputs\": [\"a\"], \"params\": {\"sigma\": "
    "1.5}},"
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"g\"]},"
    "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"a\", \"s\"], \"params\": "
    "{\"opacity\": 0.5}}], \"outputs\": {\"o\": \"m\"}}",
    /* a point unit reading the result and an image the stencil does not wait for (a
       box of the input): no epilogue, the result's float image stored */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"b\", \"op\": \"box\", \"inputs\": [\"x\"]},"
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"x\"]},"
    "{\"id\": \"t\", \"op\": \"blend\", \"inputs\": [\"s\", \"b\"], \"params\": "
    "{\"opacity\": 0.5}}], \"outputs\": {\"o\": \"t\"}}",
    /* a chain read by the stencil and by two blurs and their blend (each kernel reading
       it computes it: the chain's image is never written) */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"a\", \"op\": \"linear\", \"inputs\": [\"x\"], \"params\": {\"a\": 2.0, \"b\": "
    "-0.25}},"
    "{\"id\": \"v\", \"op\": \"vignette\", \"inputs\": [\"a\"]},"
    "{\"id\": \"s\", \"op\": \"%1$s\"%2$s, \"inputs\": [\"v\"]},"
    "{\"id\": \"g\", \"op\": \"gaussian\", \"inputs\": [\"v\"], \"params\": {\"sigma\": 1.2}},"
    "{\"id\": \"b\", \"op\": \"box\", \"inputs\": [\"v\"]},"
    "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"g\", \"b\"]},"
    "{\"id\": \"t\", \"op\": \"blend\", \"inputs\": [\"m\", \"s\"], \"params\": "
    "{\"opacity\": 0.5}}], \"outputs\": {\"o\": \"t\"}}",
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const struct {
    int w, h;
} sizes[] = {{1, 1}, {2, 1}, {1, 3}, {33, 9}, {333, 77}, {1024, 1024}};
#define N_SIZES ((int)(sizeof sizes / sizeof sizes[0]))

static pf_frame make_frame(pf_rng *r, int w, int h, pf_sample s, int ch)
{
    return pf_test_frame_padded(r, w, h, s, ch, 0.0f, 1.0f);
}

/* Runs one frame into outs (poisoned first), from host or device frames. */
static int run(pf_pipeline *p, const pf_frame *in, int n_in, pf_frame *outs, int n_out, int device,
               const char *what)
{
    int rc = pf_test_run_frame(p, in, n_in, outs, n_out, device);
    CHECKF(rc == PF_OK, "%s: run: %s: %s", what, pf_status_str(rc), pf_pipeline_errmsg(p));
    return rc;
}

static const char *out_name(const pf_pipeline *p, int o)
{
    pf_output_info info;
    return pf_pipeline_output_info(p, o, &info) == PF_OK ? info.name : "?";
}

/* Both executors on the same inputs; 0 when they agree. */
static int run_both(pf_pipeline *p, const pf_frame *in, int n_in, pf_frame *cpu, pf_frame *gpu,
                    int graph, int device, int banded, const char *what)
{
    int n_out = pf_pipeline_output_count(p), bad = 0;
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    if (run(p, in, n_in, cpu, n_out, 0, what) != PF_OK)
        return 1;
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    CHECK(pf_pipeline_set_option(p, "graph", graph ? "true" : "false") == PF_OK);
    if (banded)
        CHECK(pf_pipeline_set_option(p, "max_launch_ms", "0.002") == PF_OK);
    if (run(p, in, n_in, gpu, n_out, device, what) != PF_OK)
        return 1;
    for (int o = 0; o < n_out && !bad; o++)
        bad = pf_test_frames_close(&cpu[o], &gpu[o], what, out_name(p, o));
    return bad;
}

/* The stencils: 3x3 ones (stencil_fn) and separable ones (separable_fn), the gaussian's
   radius 7 at sigma 2.2 and the box's 3, straight alpha. */
static const struct {
    const char *op, *params, *changed; /* changed: a live change of its own param, or NULL */
} ops[] = {
    {"sobel", "", "s.scale=0.25"},
    {"median3", "", NULL},
    {"gaussian", ", \"params\": {\"sigma\": 2.2}", "s.sigma=1.3"},
    {"box", ", \"params\": {\"radius\": 3, \"alpha\": \"straight\"}", "s.radius=2"},
};
#define N_OPS ((int)(sizeof ops / sizeof ops[0]))

/* Whether two frames of one shape and format hold the same bytes; reports the first
   row that differs. */
static int frames_identical(const pf_frame *a, const pf_frame *b, const char *what)
{
    size_t row = pf_frame_pixel_bytes(a->sample, a->channels) * (size_t)a->width;
    for (int y = 0; y < a->height; y++)
        if (memcmp((const char *)a->data + (size_t)y * a->pitch,
                   (const char *)b->data + (size_t)y * b->pitch, row) != 0) {
            CHECKF(0, "%s: row %d differs between the fused and the stage's own kernels", what, y);
            return 0;
        }
    return 1;
}

/* A separable stencil reading the pipeline input (case 1): its generated kernels give
   the bytes the stage's own CUDA kernels give (fusion off: the input converted by the
   engine's conversion kernel, then the plugin's two passes): the same sums in the same
   order. */
static void check_same_as_unfused(pf_pipeline *p, const pf_frame *in, int n_in, pf_frame *fused,
                                  int n_out, pf_rng *r, const char *what)
{
    pf_frame own[2];
    for (int o = 0; o < n_out; o++)
        own[o] = make_frame(r, fused[o].width, fused[o].height, fused[o].sample, fused[o].channels);
    CHECK(pf_pipeline_set_option(p, "fusion", "false") == PF_OK);
    if (run(p, in, n_in, own, n_out, 0, what) == PF_OK)
        for (int o = 0; o < n_out; o++)
            frames_identical(&fused[o], &own[o], what);
    CHECK(pf_pipeline_set_option(p, "fusion", "true") == PF_OK);
    for (int o = 0; o < n_out; o++)
        free(own[o].data);
}

static void run_case(pf_rng *r, int c, int op_index, int w, int h, pf_sample s, int ch, int graph,
                     int device, int banded)
{
    char json[2048], what[256];
    const char *op = ops[op_index].op;
    snprintf(json, sizeof json, cases[c], op, ops[op_index].params);
    snprintf(what, sizeof what, "case %d %s %dx%d sample %d x%d graph %d device %d bands %d", c, op,
             w, h, (int)s, ch, graph, device, banded);
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(eng, json, what, &p) != PF_OK) {
        CHECKF(0, "%s: load: %s", what, pf_engine_errmsg(eng));
        return;
    }
    int n_in = pf_pipeline_input_count(p), n_out = pf_pipeline_output_count(p);
    pf_frame in[2], cpu[2], gpu[2];
    for (int k = 0; k < n_in; k++)
        in[k] = make_frame(r, w, h, s, ch);
    for (int o = 0; o < n_out; o++) {
        cpu[o] = make_frame(r, w, h, s, ch);
        gpu[o] = make_frame(r, w, h, s, ch);
    }
    int bad = run_both(p, in, n_in, cpu, gpu, graph, device, banded, what);
    if (!bad && c == 1 && op_index >= 2)
        check_same_as_unfused(p, in, n_in, gpu, n_out, r, what);
    /* A second frame after a live parameter change: the graph's kernel nodes take the
       new by-value parameters (case 0: linear's a, which the stencil's tile or rows run,
       and the stencil's own param: sobel's scale, a smaller radius of the separable
       ones, which keeps the plan). */
    if (!bad && c == 0 && graph) {
        char again[300];
        snprintf(again, sizeof again, "%s, after a parameter change", what);
        /* every slot's graph captured first (the backend is still the GPU; two frames
           after the first are timed launch by launch, and there are three slots), then
           frames after the change replay them with the new by-value parameters */
        int rc = PF_OK;
        for (int k = 0; k < 6 && rc == PF_OK; k++)
            rc = run(p, in, n_in, gpu, n_out, device, what);
        pf_stats st = {.size = sizeof st};
        CHECK(pf_pipeline_stats(p, &st) == PF_OK);
        unsigned long long captures = st.graph_captures;
        CHECK(pf_pipeline_set_param(p, "a.a", "0.5") == PF_OK);
        if (ops[op_index].changed) { /* key=value */
            char key[64];
            const char *eq = strchr(ops[op_index].changed, '=');
            snprintf(key, sizeof key, "%.*s", (int)(eq - ops[op_index].changed),
                     ops[op_index].changed);
            CHECK(pf_pipeline_set_param(p, key, eq + 1) == PF_OK);
        }
        for (int k = 0; k < 3 && rc == PF_OK; k++)
            rc = run(p, in, n_in, gpu, n_out, device, again);
        CHECK(pf_pipeline_stats(p, &st) == PF_OK);
        /* (not asked of banded runs, where the watchdog may ask for a new plan, nor of
           device frames, which this test moves to new memory every frame) */
        CHECKF(rc != PF_OK || banded || device || st.graph_captures == captures,
               "%s: the parameter change re-captured the graph (%llu -> %llu)", again, captures,
               st.graph_captures);
        CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
        if (rc == PF_OK && run(p, in, n_in, cpu, n_out, 0, again) == PF_OK)
            for (int o = 0; o < n_out; o++)
                pf_test_frames_close(&cpu[o], &gpu[o], again, out_name(p, o));
    }
    for (int k = 0; k < n_in; k++)
        free(in[k].data);
    for (int o = 0; o < n_out; o++) {
        free(cpu[o].data);
        free(gpu[o].data);
    }
    pf_pipeline_destroy(p);
}

/* The CUDA plan fuses what the printed plan says: case 0's chain into the stencil. */
static void check_plan_print(void)
{
    char json[2048];
    snprintf(json, sizeof json, cases[0], "sobel", "");
    pf_pipeline *p = pf_test_load_string(eng, json, "plan", "cuda");
    pf_shape s = {64, 32};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    char *text = pf_test_plan_text(p);
    CHECKF(text && strstr(text, "fused into stencil s (sobel)") &&
               strstr(text, "S: s (sobel, 3x3 sobel_px) in one kernel with a + g + v"),
           "plan print:\n%s", text ? text : "");
    /* the launches: case 6 is one kernel for the stencil with its prologue and epilogue,
       and the box's (a separable stencil's two passes, counted as one unit launch) */
    pf_pipeline_destroy(p);
    free(text);
    snprintf(json, sizeof json, cases[6], "sobel", "");
    p = pf_test_load_string(eng, json, "plan", "cuda");
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    text = pf_test_plan_text(p);
    CHECKF(text && strstr(text, "S: s (sobel, 3x3 sobel_px) in one kernel with a + v on its tile, "
                                "then n + g on its result"),
           "plan print:\n%s", text ? text : "");
    /* x loaded natively, g stored natively by that kernel, the box's output by its own
       generated kernels: no conversion launch */
    pf_stats st = {.size = sizeof st};
    CHECK(pf_pipeline_stats(p, &st) == PF_OK);
    CHECKF(st.launches_per_frame == 2, "case 6: %d launches a frame, not 2", st.launches_per_frame);
    free(text);
    pf_pipeline_destroy(p);
    /* the mixed bench's shape: the chain the gaussian takes in is recomputed in the
       sobel's epilogue (the blend reads it), so it is never stored */
    snprintf(json, sizeof json, cases[9], "sobel", "");
    p = pf_test_load_string(eng, json, "plan", "cuda");
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    text = pf_test_plan_text(p);
    CHECKF(text &&
               strstr(text, "and stencil s (sobel): recomputed in its epilogue, nothing stored") &&
               strstr(text, "then m on its result, recomputing a there") &&
               strstr(text, "with a on the rows it stages"),
           "plan print:\n%s", text ? text : "");
    free(text);
    pf_pipeline_destroy(p);
    /* a separable stencil: two kernels, the chain run on the rows it stages */
    snprintf(json, sizeof json, cases[0], "gaussian", "");
    p = pf_test_load_string(eng, json, "plan", "cuda");
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    text = pf_test_plan_text(p);
    CHECKF(text && strstr(text, "fused into stencil s (gaussian)") &&
               strstr(text, "S: s (gaussian, separable gaussian_sep) in two kernels (rows, then "
                            "columns) with a + g + v on the rows it stages"),
           "plan print:\n%s", text ? text : "");
    free(text);
    pf_pipeline_destroy(p);
}

int main(void)
{
    if (!pf_test_cuda_device("test_fused_stencil"))
        return PF_TEST_SKIPPED;
    eng = pf_test_engine();
    check_plan_print();
    pf_rng r;
    pf_rng_seed(&r, 20261202);
    static const pf_sample samples[] = {PF_U8, PF_U16, PF_F32};
    int quick = getenv("PF_TEST_QUICK") != NULL, n = 0;
    for (int c = 0; c < N_CASES; c++)
        for (int op = 0; op < N_OPS; op++)
            for (int si = 0; si < N_SIZES; si++)
                for (int f = 0; f < 12; f++) {
                    /* every format on a mid size; the others on a rotating format */
                    if (sizes[si].w != 333 && f != (c * 5 + si + op) % 12)
                        continue;
                    if (quick && f % 4 != 0 && sizes[si].w == 333)
                        continue;
                    int graph = (si + f + op) % 2, device = (c + f) % 3 == 0;
                    int banded = sizes[si].w == 1024 || (sizes[si].w == 333 && f % 6 == 5);
                    run_case(&r, c, op, sizes[si].w, sizes[si].h, samples[f / 4], f % 4 + 1, graph,
                             device, banded);
                    n++;
                }
    printf("test_fused_stencil: %d runs\n", n);
    pf_engine_destroy(eng);
    return pf_test_done("test_fused_stencil");
}
