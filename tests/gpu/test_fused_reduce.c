#define _GNU_SOURCE
/* tests/gpu/test_fused_reduce.c: summing reduces (colsum, rowsum) as generated kernels
 * on the GPU against the CPU executor.
 *
 * Each case is a pipeline whose table is a sum by columns or by rows of: a point chain
 * only the sum reads (its ops run inside the sum's kernel, position-dependent ones
 * too), a pipeline input read in its own format, a stencil's float image, a two-input
 * chain, and a chain whose image is also an output (then stored and read back). Every
 * frame format, sizes from one pixel to 2000 rows, graph and eager, device and host
 * frames, the watchdog's bands, and a live parameter change (the fused kernel's
 * by-value parameters updated in the captured graph). Tables agree to a relative 1e-6:
 * the same float values summed in double in another order. The printed plan must show
 * the fused reductions. Exits 77 without a device.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_skip.h"
#include "gpu_frames.h"
#include "testutil.h"

static pf_engine *eng;

/* %1$s is the reduce op. */
static const char *const cases[] = {
    /* a chain only the sum reads, with a position-dependent op */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"a\", \"op\": \"linear\", \"inputs\": [\"x\"], \"params\": {\"a\": 2.0, \"b\": "
    "0.25}},"
    "{\"id\": \"g\", \"op\": \"gamma\", \"inputs\": [\"a\"], \"params\": {\"gamma\": 1.7}},"
    "{\"id\": \"v\", \"op\": \"vignette\", \"inputs\": [\"g\"]},"
    "{\"id\": \"t\", \"op\": \"%1$s\", \"inputs\": [\"v\"]}], \"outputs\": {\"t\": \"t\"}}",
    /* the input itself, in its own format */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"t\", \"op\": \"%1$s\", \"inputs\": [\"x\"]}], \"outputs\": {\"t\": \"t\"}}",
    /* a stencil's float image */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"b\", \"op\": \"box\", \"inputs\": [\"x\"], \"params\": {\"radius\": 2}},"
    "{\"id\": \"t\", \"op\": \"%1$s\", \"inputs\": [\"b\"]}], \"outputs\": {\"t\": \"t\"}}",
    /* two inputs through a blend and an invert */
    "{\"pipefuse\": 1, \"inputs\": [\"x\", \"y\"], \"stages\": ["
    "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"x\", \"y\"], \"params\": {\"opacity\": "
    "0.3}},"
    "{\"id\": \"i\", \"op\": \"invert\", \"inputs\": [\"m\"]},"
    "{\"id\": \"t\", \"op\": \"%1$s\", \"inputs\": [\"i\"]}], \"outputs\": {\"t\": \"t\"}}",
    /* the chain's image is an output too: stored, and the sum reads it */
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
    "{\"id\": \"c\", \"op\": \"contrast\", \"inputs\": [\"x\"], \"params\": {\"amount\": 1.3}},"
    "{\"id\": \"t\", \"op\": \"%1$s\", \"inputs\": [\"c\"]}], \"outputs\": {\"t\": \"t\", "
    "\"img\": \"c\"}}",
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const struct {
    int w, h;
} sizes[] = {{1, 1},       {3, 1},     {1, 5},     {7, 3},      {333, 77},
             {1024, 1024}, {37, 2000}, {2000, 37}, {1000, 1024}};
#define N_SIZES ((int)(sizeof sizes / sizeof sizes[0]))

static pf_frame make_frame(pf_rng *r, int w, int h, pf_sample s, int ch)
{
    return pf_test_frame_padded(r, w, h, s, ch, -0.25f, 1.25f); /* floats past [0, 1] too */
}

/* The table of output 0 after one frame; NULL on failure (reported). */
/* A copy of table output 0 of the last frame; its rows into *rows. */
static double *run_table_copy(pf_pipeline *p, int *rows)
{
    pf_table t;
    if (pf_pipeline_table(p, 0, &t) != PF_OK)
        return NULL;
    double *copy = malloc(sizeof(double) * (size_t)t.rows * (size_t)t.cols);
    if (copy)
        memcpy(copy, t.data, sizeof(double) * (size_t)t.rows * (size_t)t.cols);
    *rows = t.rows;
    return copy;
}

static double *run_table(pf_pipeline *p, const pf_frame *in, int n_in, pf_frame *img, int device,
                         int *rows, const char *what)
{
    int n_out = pf_pipeline_output_count(p);
    pf_frame outs[2];
    memset(outs, 0, sizeof outs);
    if (n_out > 1)
        outs[1] = *img;
    int rc = pf_test_run_frame(p, in, n_in, outs, n_out, device);
    if (rc != PF_OK) {
        CHECKF(0, "%s: run: %s: %s", what, pf_status_str(rc), pf_pipeline_errmsg(p));
        return NULL;
    }
    double *copy = run_table_copy(p, rows);
    CHECKF(copy != NULL, "%s: no table", what);
    return copy;
}

/* Tables of n sums each, of float values: within 1e-6 of the larger of the value and
   the count (each float is within a few ulp on both sides; the sums' order differs). */
static int compare(const double *a, const double *b, int rows, int n, const char *what)
{
    for (int k = 0; k < rows * 4; k++) {
        double tol = 1e-6 * fmax(fabs(a[k]), (double)n) + 1e-9;
        if (isnan(a[k]) && isnan(b[k]))
            continue;
        if (!(fabs(a[k] - b[k]) <= tol)) {
            CHECKF(0, "%s: table [%d][%d]: gpu %.12g cpu %.12g", what, k / 4, k % 4, b[k], a[k]);
            return 1;
        }
    }
    return 0;
}

static void run_case(pf_rng *r, int c, const char *op, int w, int h, pf_sample s, int ch, int graph,
                     int device, int banded)
{
    char json[2048], what[256];
    snprintf(json, sizeof json, cases[c], op);
    snprintf(what, sizeof what, "case %d %s %dx%d sample %d x%d graph %d device %d bands %d", c, op,
             w, h, (int)s, ch, graph, device, banded);
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(eng, json, what, &p) != PF_OK) {
        CHECKF(0, "%s: load: %s", what, pf_engine_errmsg(eng));
        return;
    }
    int n_in = pf_pipeline_input_count(p);
    pf_frame in[2], img_cpu, img_gpu;
    for (int k = 0; k < n_in; k++)
        in[k] = make_frame(r, w, h, s, ch);
    img_cpu = make_frame(r, w, h, s, ch);
    img_gpu = make_frame(r, w, h, s, ch);
    int rows_c = 0, rows_g = 0;
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    double *ref = run_table(p, in, n_in, &img_cpu, 0, &rows_c, what);
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    CHECK(pf_pipeline_set_option(p, "graph", graph ? "true" : "false") == PF_OK);
    if (banded)
        CHECK(pf_pipeline_set_option(p, "max_launch_ms", "0.002") == PF_OK);
    double *got = run_table(p, in, n_in, &img_gpu, device, &rows_g, what);
    int n = strcmp(op, "colsum") == 0 ? h : w;
    if (ref && got && rows_c == rows_g && compare(ref, got, rows_c, n, what) == 0 &&
        pf_pipeline_output_count(p) > 1)
        CHECKF(pf_test_frame_mismatches(&img_cpu, &img_gpu) == 0 || s != PF_U8 ||
                   pf_test_frame_diff(&img_cpu, &img_gpu, NULL, NULL) <= 1.0,
               "%s: image output differs", what);
    /* A sum by columns in one launch of at most 8 chunks adds a stripe's blocks in a
       thread-block cluster (the option clusters, on by default); without it, through
       partial tables and a counter. Both add the same partials in the same order: the
       same bits. */
    if (got && !banded && strcmp(op, "colsum") == 0) {
        int rows_o = 0;
        CHECK(pf_pipeline_set_option(p, "clusters", "false") == PF_OK);
        double *other = run_table(p, in, n_in, &img_gpu, device, &rows_o, what);
        CHECKF(other && rows_o == rows_g &&
                   memcmp(other, got, sizeof(double) * 4 * (size_t)rows_g) == 0,
               "%s: the sums with and without clusters differ", what);
        free(other);
        CHECK(pf_pipeline_set_option(p, "clusters", "true") == PF_OK);
    }
    free(ref);
    free(got);
    /* A second frame after a live parameter change: the graph's kernel nodes take the
       new by-value parameters (case 0: linear's a). */
    if (c == 0 && graph) {
        CHECK(pf_pipeline_set_param(p, "a.a", "0.5") == PF_OK);
        got = run_table(p, in, n_in, &img_gpu, device, &rows_g, what);
        CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
        ref = run_table(p, in, n_in, &img_cpu, 0, &rows_c, what);
        if (ref && got)
            compare(ref, got, rows_c, n, what);
        free(ref);
        free(got);
    }
    for (int k = 0; k < n_in; k++)
        free(in[k].data);
    free(img_cpu.data);
    free(img_gpu.data);
    pf_pipeline_destroy(p);
}

/* One column sum's graphs kept across frames whose device buffers move (two inputs by
   turns), whose format changes and comes back (a format seen before brings back its own
   kernel and its launch geometry: a reduce's pixels a thread follow the format), and
   whose parameter changes: the kernel nodes take new descriptors and parameters in
   place, and every table is the CPU's. 1000x1024 is one launch of a few chunks of rows:
   a cluster a stripe on sm_90. */
static void test_moving_frames(pf_rng *r)
{
    /* format (0 u8, 1 float) and buffer of each frame: float, u8, then float again
       (its kernel built before the u8 one: what its launches need comes back with it);
       u8 over both buffers by turns (3 slots: each slot's frames alternate, so its graph's
       nodes take new descriptors), with a parameter change at step 7; float again. */
    enum { W = 1000, H = 1024, STEPS = 13 };
    int seq[STEPS][2] = {{1, 0}, {0, 0}, {1, 1}};
    for (int k = 3; k < STEPS; k++)
        seq[k][0] = k >= 11, seq[k][1] = k % 2;
    char json[2048];
    snprintf(json, sizeof json, cases[0], "colsum");
    pf_pipeline *p = NULL, *q = NULL;
    CHECKF(pf_pipeline_load_string(eng, json, "moving", &p) == PF_OK &&
               pf_pipeline_load_string(eng, json, "moving_cpu", &q) == PF_OK,
           "load: %s", pf_engine_errmsg(eng));
    if (!p || !q) {
        pf_pipeline_destroy(p);
        pf_pipeline_destroy(q);
        return;
    }
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    CHECK(pf_pipeline_set_option(q, "backend", "cpu") == PF_OK);
    static const pf_sample fmt[2] = {PF_U8, PF_F32};
    pf_frame in[2][2], din[2][2];
    for (int f = 0; f < 2; f++)
        for (int b = 0; b < 2; b++) {
            in[f][b] = make_frame(r, W, H, fmt[f], 4);
            din[f][b] = in[f][b];
            size_t bytes = in[f][b].pitch * (size_t)H;
            CHECK(cudaMalloc(&din[f][b].data, bytes) == cudaSuccess);
            CHECK(cudaMemcpy(din[f][b].data, in[f][b].data, bytes, cudaMemcpyHostToDevice) ==
                  cudaSuccess);
        }
    pf_stats s0, s1;
    s0.size = s1.size = sizeof(pf_stats);
    CHECK(pf_pipeline_stats(p, &s0) == PF_OK);
    for (int k = 0; k < STEPS; k++) {
        char what[128];
        int f = seq[k][0], b = seq[k][1];
        snprintf(what, sizeof what, "moving frames, step %d (format %d, buffer %d)", k, f, b);
        if (k == 7) { /* a live change: the nodes take the new parameter too */
            CHECK(pf_pipeline_set_param(p, "a.a", "0.5") == PF_OK);
            CHECK(pf_pipeline_set_param(q, "a.a", "0.5") == PF_OK);
        }
        pf_frame none;
        memset(&none, 0, sizeof none);
        int t = -1, rc = pf_pipeline_submit_device(p, &din[f][b], 1, &none, 1, NULL, &t);
        if (rc == PF_OK)
            rc = pf_pipeline_wait(p, t);
        CHECKF(rc == PF_OK, "%s: %s", what, pf_pipeline_errmsg(p));
        int rows_g = 0, rows_c = 0;
        double *got = rc == PF_OK ? run_table_copy(p, &rows_g) : NULL;
        pf_frame none_c;
        memset(&none_c, 0, sizeof none_c);
        CHECKF(pf_pipeline_run(q, &in[f][b], 1, &none_c, 1) == PF_OK, "%s: cpu: %s", what,
               pf_pipeline_errmsg(q));
        double *ref = run_table_copy(q, &rows_c);
        if (got && ref && rows_g == rows_c)
            compare(ref, got, rows_c, H, what);
        else
            CHECKF(0, "%s: no table (%d and %d rows)", what, rows_g, rows_c);
        free(got);
        free(ref);
    }
    CHECK(pf_pipeline_stats(p, &s1) == PF_OK);
    CHECKF(s1.graph_node_updates > s0.graph_node_updates && s1.graph_launches > s0.graph_launches,
           "moving frames: %llu node updates, %llu graph launches",
           s1.graph_node_updates - s0.graph_node_updates, s1.graph_launches - s0.graph_launches);
    for (int f = 0; f < 2; f++)
        for (int b = 0; b < 2; b++) {
            free(in[f][b].data);
            cudaFree(din[f][b].data);
        }
    pf_pipeline_destroy(p);
    pf_pipeline_destroy(q);
}

/* The printed plan says which reduces run fused, and with which point ops. */
static void check_plan_print(void)
{
    char json[2048];
    snprintf(json, sizeof json, cases[0], "colsum");
    pf_pipeline *p = pf_test_load_string(eng, json, "plan", "cuda");
    pf_shape s = {64, 32};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    char *text = pf_test_plan_text(p);
    CHECKF(text && strstr(text, "fused into reduce t (colsum)") &&
               strstr(text, "R: t (colsum, sum by columns) in one kernel with a + g + v"),
           "plan print:\n%s", text ? text : "");
    free(text);
    pf_pipeline_destroy(p);
}

int main(void)
{
    if (!pf_test_cuda_device("test_fused_reduce"))
        return PF_TEST_SKIPPED;
    eng = pf_test_engine();
    check_plan_print();
    pf_rng r;
    pf_rng_seed(&r, 20261201);
    static const pf_sample samples[] = {PF_U8, PF_U16, PF_F32};
    int quick = getenv("PF_TEST_QUICK") != NULL, n = 0;
    for (int c = 0; c < N_CASES; c++)
        for (int op = 0; op < 2; op++)
            for (int si = 0; si < N_SIZES; si++)
                for (int f = 0; f < 12; f++) {
                    /* every format on a mid size; the others on a rotating format */
                    if (sizes[si].w != 333 && f != (c * 5 + si + op) % 12)
                        continue;
                    if (quick && f % 4 != 0 && sizes[si].w == 333)
                        continue;
                    int graph = (si + f) % 2, device = (c + f) % 3 == 0;
                    int banded = sizes[si].w == 1024 || (sizes[si].w == 333 && f == 5);
                    run_case(&r, c, op ? "rowsum" : "colsum", sizes[si].w, sizes[si].h,
                             samples[f / 4], f % 4 + 1, graph, device, banded);
                    n++;
                }
    test_moving_frames(&r);
    printf("test_fused_reduce: %d runs\n", n);
    pf_engine_destroy(eng);
    return pf_test_done("test_fused_reduce");
}
