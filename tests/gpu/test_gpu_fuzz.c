/* tests/gpu/test_gpu_fuzz.c: a differential fuzzer of the CUDA executor against the CPU
 * executor.
 *
 * Each case draws a random pipeline over every stage family (point, stencil, resample,
 * reduce; one or two inputs, branches and joins), random CUDA options (fusion, graph,
 * watchdog bands, frames in flight), and a sequence of frames that runs through the
 * same two pipelines (one per executor): formats u8/u16/f32 with 1-4 channels, sizes
 * from 1 (1xN, Nx1, primes, odd), pitches past the row by any multiple of the sample
 * size, views that start inside a larger buffer, host and device frames, and shapes
 * and formats that change from one frame to the next (half the frames keep the shape
 * and change only the format: the case that re-uses a plan with new kernels).
 *
 * Every output is compared with the CPU's. Images: within one output step (8-bit
 * steps; u16 values / 257; floats * 255): the GPU's float sums in stencils and
 * resampling may round to the other side of a .5. Ops whose result jumps on an ulp
 * (threshold, unsharp's threshold) are only drawn where their input is exact on both
 * executors. Tables: sums and statistics within 1e-4 relative (|a - b| / (|b| + 1));
 * histograms through their cumulative counts, within 1% of the pixels + 1 (a pixel one
 * ulp from a bin edge may land in the next bin). A frame the CPU refuses (a crop
 * outside a small frame) must be refused by the GPU too.
 *
 * PF_FUZZ_PRECISION=fast runs the GPU pipeline with "precision": "fast" and holds it to
 * fast mode's bound (FAST_STEPS, docs/stages.md): every value past an input is taken as
 * inexact there, so the ops that jump on an ulp are drawn only on inputs.
 *
 * PF_FUZZ_SELFTEST=1 runs both pipelines on the CPU executor (no device needed): the
 * generator and the comparisons checked on their own, and the CPU executor's plans
 * checked across changing shapes, formats and options (ctest: test_fuzz_cpu).
 *
 * Environment: PF_FUZZ_SET="streams=1,fusion=false" (options for the GPU
 * pipeline after the drawn ones), PF_FUZZ_SEED (default 20261201), PF_FUZZ_CASES (default 300, 40 with
 * PF_TEST_QUICK), PF_FUZZ_CASE=N runs case N alone and prints its pipeline. A failure
 * prints the seed, the case and the one-line command that replays it. Exits 77
 * without a device.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "cuda_skip.h"
#include "testutil.h"

static pf_engine *eng;
static unsigned long long seed;
static int cur_case, verbose, case_failed;
static int selftest; /* PF_FUZZ_SELFTEST: both pipelines on the CPU, no device frames */
static int fast;     /* PF_FUZZ_PRECISION=fast: the GPU pipeline in fast mode */
/* Fast mode's bound against the CPU, in the steps the images are compared in (8-bit steps;
   u16 values / 257; floats * 255): docs/stages.md states it. */
#define FAST_STEPS 2.0
static const char *argv0;

#define MAX_NODES 24
#define MAX_OUT   4

/* ---- Random pipelines ------------------------------------------------------------------- */

typedef struct gen {
    pf_rng *r;
    char json[16384];
    size_t len;
    int n_nodes; /* inputs, then stages */
    int n_inputs;
    int geo[MAX_NODES];   /* shape class: resampling makes a new one */
    int exact[MAX_NODES]; /* the value is the same float on both executors */
    int used[MAX_NODES];  /* read by a stage or an output */
    int n_out;
    int out_node[MAX_OUT];
    int out_kind[MAX_OUT]; /* 0 image, 1 histogram, 2 other table */
    int table_kind;        /* the one table output: 1 histogram, 2 other */
    int next_geo;
} gen;

static void put(gen *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g->json + g->len, sizeof g->json - g->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        g->len += (size_t)n < sizeof g->json - g->len ? (size_t)n : 0;
}

static double frand(pf_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * pf_rng_float(r);
}

static void node_name(const gen *g, int i, char *buf, size_t size)
{
    if (i < g->n_inputs)
        snprintf(buf, size, "%s", i ? "b" : "a");
    else
        snprintf(buf, size, "s%d", i - g->n_inputs);
}

/* A node of the same shape class as `like` (for a second input of a join), or -1. */
static int pick_same_geo(gen *g, int like)
{
    int cand[MAX_NODES], n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->geo[i] == g->geo[like])
            cand[n++] = i;
    return n ? cand[pf_rng_u32(g->r) % (unsigned)n] : -1;
}

/* One stage reading node `src`; returns 0 when nothing was added. */
static int add_stage(gen *g, int src, int final, int join)
{
    pf_rng *r = g->r;
    char in0[16], in1[16], in2[16], id[16];
    node_name(g, src, in0, sizeof in0);
    int me = g->n_nodes;
    snprintf(id, sizeof id, "s%d", me - g->n_inputs);
    int geo = g->geo[src], exact = g->exact[src];
    int family =
        join ? 9 : pf_rng_range(r, 0, 9); /* 0-4 point, 5-6 stencil, 7-8 resample, 9 join */
    if (final && family == 9)
        family = 0;
    char params[512] = "";
    const char *op = NULL;
    const char *inputs2 = NULL;
    char inbuf[64];
    if (family <= 4) {
        switch (pf_rng_range(r, 0, 11)) {
        case 0:
            op = "brightness";
            snprintf(params, sizeof params, "\"amount\": %.4f", frand(r, -0.5, 0.5));
            break;
        case 1:
            op = "contrast";
            snprintf(params, sizeof params, "\"amount\": %.4f, \"pivot\": %.3f", frand(r, 0, 3),
                     frand(r, 0, 1));
            break;
        case 2:
            op = "gamma";
            snprintf(params, sizeof params, "\"gamma\": %.4f", frand(r, 0.2, 5));
            exact = 0;
            break;
        case 3:
            op = "invert";
            snprintf(params, sizeof params, "\"alpha\": %s",
                     pf_rng_range(r, 0, 1) ? "true" : "false");
            break;
        case 4:
            op = "grayscale";
            snprintf(params, sizeof params, "\"amount\": %.3f", frand(r, 0, 1));
            break;
        case 5:
            if (exact) { /* a step function: only where both executors hold the same float */
                op = "threshold";
                snprintf(params, sizeof params, "\"level\": %.4f", frand(r, 0, 1));
            } else {
                op = "saturation";
                snprintf(params, sizeof params, "\"amount\": %.3f", frand(r, 0, 3));
            }
            break;
        case 6:
            op = "saturation";
            snprintf(params, sizeof params, "\"amount\": %.3f", frand(r, 0, 3));
            break;
        case 7: {
            double lo = frand(r, 0, 0.4), hi = frand(r, 0.6, 1);
            op = "levels";
            snprintf(params, sizeof params,
                     "\"in_low\": %.3f, \"in_high\": %.3f, \"gamma\": %.3f, \"out_low\": %.3f, "
                     "\"out_high\": %.3f",
                     lo, hi, frand(r, 0.3, 3), frand(r, 0, 0.3), frand(r, 0.7, 1));
            exact = 0;
            break;
        }
        case 8:
            op = "linear";
            snprintf(params, sizeof params, "\"a\": %.4f, \"b\": %.4f", frand(r, -2, 2),
                     frand(r, -1, 1));
            break;
        case 9:
            op = "vignette";
            snprintf(params, sizeof params, "\"strength\": %.3f, \"radius\": %.3f", frand(r, 0, 1),
                     frand(r, 0.1, 2));
            exact = 0;
            break;
        case 10: {
            op = "color_matrix";
            char *p = params;
            size_t left = sizeof params;
            int n = snprintf(p, left, "\"matrix\": [");
            for (int k = 0; k < 16; k++) {
                p += n, left -= (size_t)n;
                n = snprintf(p, left, "%s%.3f", k ? ", " : "",
                             (k % 5 == 0 ? 1.0 : 0.0) + frand(r, -0.3, 0.3));
            }
            p += n, left -= (size_t)n;
            snprintf(p, left, "], \"offset\": [%.3f, %.3f, %.3f, 0]", frand(r, -0.2, 0.2),
                     frand(r, -0.2, 0.2), frand(r, -0.2, 0.2));
            break;
        }
        default:
            op = "vignette";
            snprintf(params, sizeof params, "\"strength\": %.3f", frand(r, 0, 1));
            exact = 0;
            break;
        }
    } else if (family <= 6) {
        exact = 0;
        switch (pf_rng_range(r, 0, 4)) {
        case 0:
            op = "gaussian";
            snprintf(params, sizeof params, "\"sigma\": %.3f", frand(r, 0, 3));
            break;
        case 1:
            op = "box";
            snprintf(params, sizeof params, "\"radius\": %d", pf_rng_range(r, 0, 4));
            break;
        case 2:
            op = "sobel";
            snprintf(params, sizeof params, "\"scale\": %.3f", frand(r, 0, 2));
            break;
        case 3:
            op = "unsharp";
            snprintf(params, sizeof params, "\"sigma\": %.3f, \"amount\": %.3f", frand(r, 0.3, 2.5),
                     frand(r, 0, 2));
            break;
        default:
            op = "median3";
            exact = g->exact[src];
            break; /* a selection: exact stays exact */
        }
    } else if (family <= 8) {
        geo = g->next_geo++;
        switch (pf_rng_range(r, 0, 4)) {
        case 0: {
            static const char *const modes[] = {"bilinear", "nearest", "area"};
            op = "resize";
            exact = 0;
            if (pf_rng_range(r, 0, 1))
                snprintf(params, sizeof params, "\"scale\": %.3f, \"mode\": \"%s\"",
                         frand(r, 0.2, 2.5), modes[pf_rng_u32(r) % 3]);
            else
                snprintf(params, sizeof params, "\"width\": %d, \"height\": %d, \"mode\": \"%s\"",
                         pf_rng_range(r, 1, 200), pf_rng_range(r, 0, 120),
                         modes[pf_rng_u32(r) % 3]);
            break;
        }
        case 1:
            op = "crop";
            snprintf(params, sizeof params, "\"x\": %d, \"y\": %d, \"width\": %d, \"height\": %d",
                     pf_rng_range(r, 0, 3), pf_rng_range(r, 0, 3),
                     pf_rng_range(r, 0, 9) * pf_rng_range(r, 0, 1),
                     pf_rng_range(r, 0, 9) * pf_rng_range(r, 0, 1));
            break;
        case 2: {
            static const char *const axes[] = {"horizontal", "vertical", "both"};
            op = "flip";
            snprintf(params, sizeof params, "\"axis\": \"%s\"", axes[pf_rng_u32(r) % 3]);
            geo = g->geo[src];
            break;
        }
        case 3: {
            static const char *const angles[] = {"90", "180", "270"};
            op = "rotate";
            snprintf(params, sizeof params, "\"angle\": \"%s\"", angles[pf_rng_u32(r) % 3]);
            break;
        }
        default:
            op = "pad";
            snprintf(params, sizeof params,
                     "\"left\": %d, \"right\": %d, \"top\": %d, \"bottom\": %d, \"color\": [%.2f, "
                     "%.2f, %.2f, %.2f]",
                     pf_rng_range(r, 0, 5), pf_rng_range(r, 0, 5), pf_rng_range(r, 0, 5),
                     pf_rng_range(r, 0, 5), frand(r, 0, 1), frand(r, 0, 1), frand(r, 0, 1),
                     frand(r, 0, 1));
            break;
        }
    } else {
        int other = join ? 1 : pick_same_geo(g, src); /* the first join reads both inputs */
        node_name(g, other, in1, sizeof in1);
        exact = exact && g->exact[other];
        switch (pf_rng_range(r, 0, 5)) {
        case 0:
            op = "blend";
            snprintf(params, sizeof params, "\"opacity\": %.3f", frand(r, 0, 1));
            break;
        case 1:
            op = "add";
            snprintf(params, sizeof params, "\"scale\": %.3f", frand(r, -2, 2));
            break;
        case 2:
            op = "multiply";
            break;
        case 3:
            op = "difference";
            break;
        case 4:
            op = "alpha_over";
            break;
        default: {
            int m = pick_same_geo(g, src);
            node_name(g, m, in2, sizeof in2);
            op = "mask";
            snprintf(params, sizeof params, "\"invert\": %s",
                     pf_rng_range(r, 0, 1) ? "true" : "false");
            snprintf(inbuf, sizeof inbuf, "\"%s\", \"%s\", \"%s\"", in0, in1, in2);
            inputs2 = inbuf;
            break;
        }
        }
        if (!inputs2) {
            snprintf(inbuf, sizeof inbuf, "\"%s\", \"%s\"", in0, in1);
            inputs2 = inbuf;
        }
    }
    if (!inputs2) {
        snprintf(inbuf, sizeof inbuf, "\"%s\"", in0);
        inputs2 = inbuf;
    }
    put(g, "%s\n    {\"id\": \"%s\", \"op\": \"%s\", \"inputs\": [%s], \"params\": {%s}}",
        me > g->n_inputs ? "," : "", id, op, inputs2, params);
    g->geo[me] = geo;
    g->exact[me] = exact && !fast;
    for (int i = 0; i < me; i++) {
        char nm[16], q[20];
        node_name(g, i, nm, sizeof nm);
        snprintf(q, sizeof q, "\"%s\"", nm);
        if (strstr(inputs2, q))
            g->used[i] = 1;
    }
    g->n_nodes++;
    return 1;
}

static void gen_pipeline(gen *g, pf_rng *r)
{
    memset(g, 0, sizeof *g);
    g->r = r;
    g->n_inputs = pf_rng_range(r, 0, 3) == 0 ? 2 : 1;
    g->n_nodes = g->n_inputs;
    for (int i = 0; i < g->n_inputs; i++)
        g->exact[i] = 1; /* both executors load samples to the same floats */
    g->next_geo = 1;
    put(g, "{\"pipefuse\": 1, \"inputs\": [%s], \"stages\": [",
        g->n_inputs == 2 ? "\"a\", \"b\"" : "\"a\"");
    int n = pf_rng_range(r, 1, 9);
    for (int k = 0; k < n && g->n_nodes < MAX_NODES - 4; k++) {
        /* mostly chains; sometimes a branch from an earlier node */
        int src =
            pf_rng_range(r, 0, 3) ? g->n_nodes - 1 : (int)(pf_rng_u32(r) % (unsigned)g->n_nodes);
        add_stage(g, k == 0 ? 0 : src, 0, k == 0 && g->n_inputs == 2);
    }
    /* Outputs: the last node, maybe an earlier image, maybe a table of some node. */
    /* Outputs: the last node; a stage nothing reads (a branch's end), or sometimes an
       earlier one; maybe a table of another such stage or of any node. */
    int last = g->n_nodes - 1, dead = -1;
    g->out_node[g->n_out] = last;
    g->out_kind[g->n_out++] = 0;
    g->used[last] = 1;
    for (int i = g->n_inputs; i < last; i++)
        if (!g->used[i])
            dead = i;
    if (dead < 0 && g->n_nodes > g->n_inputs + 1 && pf_rng_range(r, 0, 2) == 0)
        dead = g->n_inputs + (int)(pf_rng_u32(r) % (unsigned)(g->n_nodes - g->n_inputs - 1));
    if (dead >= 0) {
        g->out_node[g->n_out] = dead;
        g->out_kind[g->n_out++] = 0;
        g->used[dead] = 1;
    }
    dead = -1;
    for (int i = g->n_inputs; i < last; i++)
        if (!g->used[i])
            dead = i;
    if (dead >= 0 || pf_rng_range(r, 0, 1)) {
        int src = dead >= 0               ? dead
                  : pf_rng_range(r, 0, 1) ? g->n_nodes - 1
                                          : (int)(pf_rng_u32(r) % (unsigned)g->n_nodes);
        char in0[16];
        node_name(g, src, in0, sizeof in0);
        int kind = pf_rng_range(r, 0, 3);
        static const char *const ops[] = {"histogram", "colsum", "rowsum", "stats"};
        char params[64] = "";
        if (kind == 0)
            snprintf(params, sizeof params, "\"bins\": %d", pf_rng_range(r, 2, 300));
        put(g, ",\n    {\"id\": \"t\", \"op\": \"%s\", \"inputs\": [\"%s\"], \"params\": {%s}}",
            ops[kind], in0, params);
        g->out_node[g->n_out] = -1;
        g->out_kind[g->n_out++] = kind == 0 ? 1 : 2;
        g->table_kind = kind == 0 ? 1 : 2;
    }
    put(g, "\n  ], \"outputs\": {");
    for (int o = 0; o < g->n_out; o++) {
        char name[16];
        if (g->out_node[o] < 0)
            snprintf(name, sizeof name, "t");
        else
            node_name(g, g->out_node[o], name, sizeof name);
        put(g, "%s\"o%d\": \"%s\"", o ? ", " : "", o, name);
    }
    put(g, "}}\n");
}

/* ---- Frames ---------------------------------------------------------------------------------- */

typedef struct buf {
    pf_frame f; /* the view the engine sees */
    void *base; /* its allocation */
    size_t bytes;
} buf;

static size_t sample_bytes(pf_sample s)
{
    return s == PF_U8 ? 1 : s == PF_U16 ? 2 : 4;
}

static int rand_dim(pf_rng *r)
{
    static const int special[] = {1, 1, 2, 3, 5, 7, 13, 31, 61, 127, 128, 129, 251, 256, 257};
    return pf_rng_range(r, 0, 2) ? special[pf_rng_u32(r) % 15] : pf_rng_range(r, 1, 300);
}

/* A frame of w x h in format (s, ch) with a random pitch and start inside its buffer. */
static buf make_buf(pf_rng *r, int w, int h, pf_sample s, int ch, int fill)
{
    buf b;
    memset(&b, 0, sizeof b);
    size_t sb = sample_bytes(s), row = pf_frame_pixel_bytes(s, ch) * (size_t)w;
    static const int pads[] = {0, 0, 1, 3, 5, 7, 9, 17};
    size_t pad = (size_t)(pf_rng_range(r, 0, 3) ? pads[pf_rng_u32(r) % 8] : pf_rng_range(r, 0, 40));
    size_t off = pf_rng_range(r, 0, 1) ? 0 : (size_t)pf_rng_range(r, 1, 17);
    b.f.width = w;
    b.f.height = h;
    b.f.sample = s;
    b.f.channels = ch;
    b.f.pitch = row + pad * sb;
    b.bytes = (off + pad) * sb + b.f.pitch * (size_t)h + 64;
    b.base = malloc(b.bytes);
    b.f.data = (char *)b.base + off * sb;
    for (size_t i = 0; i < b.bytes; i++)
        ((unsigned char *)b.base)[i] = fill ? (unsigned char)pf_rng_u32(r) : 0xA5;
    if (fill && s == PF_F32)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w * ch; x++)
                ((float *)((char *)b.f.data + (size_t)y * b.f.pitch))[x] =
                    (float)frand(r, -0.1, 1.1);
    return b;
}

/* The bytes outside the view (before it, between rows, after it) stay as they were. */
static int guard_ok(const buf *b)
{
    size_t row = pf_frame_pixel_bytes(b->f.sample, b->f.channels) * (size_t)b->f.width;
    const unsigned char *p = b->base, *d = b->f.data;
    for (const unsigned char *q = p; q < d; q++)
        if (*q != 0xA5)
            return 0;
    for (int y = 0; y < b->f.height; y++)
        for (size_t k = row; k < b->f.pitch && !(y == b->f.height - 1 && k >= row); k++)
            if (d[(size_t)y * b->f.pitch + k] != 0xA5)
                return 0;
    const unsigned char *end = d + (size_t)(b->f.height - 1) * b->f.pitch + row;
    for (const unsigned char *q = end; q < p + b->bytes; q++)
        if (*q != 0xA5)
            return 0;
    return 1;
}

/* ---- One case ----------------------------------------------------------------------------- */

static void fail(const gen *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL seed %llu case %d: ", seed, cur_case);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (!case_failed) {
        fprintf(stderr, "  replay: PF_FUZZ_SEED=%llu PF_FUZZ_CASE=%d %s\n", seed, cur_case, argv0);
        if (!verbose)
            fprintf(stderr, "  pipeline:\n%s", g->json);
    }
    case_failed = 1;
    pf_test_failures++;
}

static const char *sample_name(pf_sample s)
{
    return s == PF_U8 ? "u8" : s == PF_U16 ? "u16" : "f32";
}

/* Copies a host view to a device buffer of the same layout (pitch, offset), on st: the
   frame is submitted on st, a non-blocking stream, which does not wait for work on the
   legacy default stream (a plain cudaMemcpy or cudaMemset there may still be running
   when the frame's kernels start). */
static void *to_device(const buf *b, pf_frame *dev, int copy, cudaStream_t st)
{
    void *base = NULL;
    if (cudaMalloc(&base, b->bytes) != cudaSuccess)
        return NULL;
    if (copy)
        cudaMemcpyAsync(base, b->base, b->bytes, cudaMemcpyHostToDevice, st);
    else
        cudaMemsetAsync(base, 0xA5, b->bytes, st);
    *dev = b->f;
    dev->data = (char *)base + ((char *)b->f.data - (char *)b->base);
    return base;
}

/* Runs one frame through both pipelines; 1 when both ran and were compared. */
static int run_frame(const gen *g, pf_pipeline *cpu, pf_pipeline *gpu, pf_rng *r, int w, int h,
                     int frame, int device)
{
    pf_sample in_s[2];
    int in_c[2];
    buf in[2];
    pf_frame in_f[2];
    for (int i = 0; i < g->n_inputs; i++) {
        in_s[i] = (pf_sample)pf_rng_range(r, 0, 2);
        in_c[i] = pf_rng_range(r, 1, 4);
        in[i] = make_buf(r, w, h, in_s[i], in_c[i], 1);
        in_f[i] = in[i].f;
    }
    char what[256];
    snprintf(what, sizeof what, "frame %d: %dx%d %s%d pitch %zu%s", frame, w, h,
             sample_name(in_s[0]), in_c[0], in[0].f.pitch, device ? " (device frames)" : "");
    if (verbose)
        printf("  %s\n", what);
    pf_shape shapes[2] = {{w, h}, {w, h}};
    int rc_cpu = pf_pipeline_plan(cpu, shapes, g->n_inputs);
    int rc_gpu = pf_pipeline_plan(gpu, shapes, g->n_inputs);
    int n_out = pf_pipeline_output_count(cpu), compared = 0;
    buf ref[MAX_OUT], got[MAX_OUT];
    memset(ref, 0, sizeof ref);
    memset(got, 0, sizeof got);
    if (rc_cpu != PF_OK || rc_gpu != PF_OK) {
        if ((rc_cpu == PF_OK) != (rc_gpu == PF_OK))
            fail(g, "%s: plan cpu=%d gpu=%d: %s / %s", what, rc_cpu, rc_gpu,
                 pf_pipeline_errmsg(cpu), pf_pipeline_errmsg(gpu));
        goto out;
    }
    pf_frame ref_f[MAX_OUT], got_f[MAX_OUT];
    for (int o = 0; o < n_out; o++) {
        pf_output_info oi;
        pf_pipeline_output_info(cpu, o, &oi);
        if (oi.kind != PF_OUTPUT_IMAGE) {
            memset(&ref_f[o], 0, sizeof ref_f[o]);
            memset(&got_f[o], 0, sizeof got_f[o]);
            continue;
        }
        pf_sample s = (pf_sample)pf_rng_range(r, 0, 2);
        int ch = pf_rng_range(r, 1, 4);
        pf_rng r2 = *r;
        ref[o] = make_buf(r, oi.shape.width, oi.shape.height, s, ch, 0);
        got[o] = make_buf(&r2, oi.shape.width, oi.shape.height, s, ch, 0); /* same layout */
        ref_f[o] = ref[o].f;
        got_f[o] = got[o].f;
    }
    rc_cpu = pf_pipeline_run(cpu, in_f, g->n_inputs, ref_f, n_out);
    void *dev_in[2] = {0}, *dev_out[MAX_OUT] = {0};
    if (!device) {
        rc_gpu = pf_pipeline_run(gpu, in_f, g->n_inputs, got_f, n_out);
    } else {
        pf_frame din[2], dout[MAX_OUT];
        cudaStream_t st;
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
        for (int i = 0; i < g->n_inputs; i++)
            dev_in[i] = to_device(&in[i], &din[i], 1, st);
        for (int o = 0; o < n_out; o++) {
            memset(&dout[o], 0, sizeof dout[o]);
            if (got[o].base)
                dev_out[o] = to_device(&got[o], &dout[o], 0, st);
        }
        int ticket = 0;
        rc_gpu = pf_pipeline_submit_device(gpu, din, g->n_inputs, dout, n_out, st, &ticket);
        if (rc_gpu == PF_OK)
            rc_gpu = pf_pipeline_wait(gpu, ticket);
        cudaStreamSynchronize(st);
        cudaStreamDestroy(st);
        for (int o = 0; o < n_out; o++)
            if (dev_out[o])
                cudaMemcpy(got[o].base, dev_out[o], got[o].bytes, cudaMemcpyDeviceToHost);
    }
    if (rc_cpu != PF_OK || rc_gpu != PF_OK) {
        if ((rc_cpu == PF_OK) != (rc_gpu == PF_OK) || rc_gpu == PF_CUDA)
            fail(g, "%s: run cpu=%d gpu=%d: %s / %s", what, rc_cpu, rc_gpu, pf_pipeline_errmsg(cpu),
                 pf_pipeline_errmsg(gpu));
        goto free_dev;
    }
    compared = 1;
    for (int o = 0; o < n_out; o++) {
        pf_table tr, tg;
        if (pf_pipeline_table(cpu, o, &tr) == PF_OK) {
            if (pf_pipeline_table(gpu, o, &tg) != PF_OK || tr.rows != tg.rows ||
                tr.cols != tg.cols) {
                fail(g, "%s: table o%d: shapes differ", what, o);
                continue;
            }
            if (g->table_kind == 1) { /* histogram: rows are bins, columns channels */
                double total = 0, worst = 0;
                for (int c = 0; c < tr.cols; c++) {
                    double ca = 0, cb = 0, t = 0;
                    for (int k = 0; k < tr.rows; k++) {
                        ca += tr.data[k * tr.cols + c];
                        cb += tg.data[k * tg.cols + c];
                        t += tr.data[k * tr.cols + c];
                        worst = fabs(ca - cb) > worst ? fabs(ca - cb) : worst;
                    }
                    total = t > total ? t : total;
                    if (ca != cb)
                        fail(g, "%s: histogram o%d channel %d counts %g pixels, cpu %g", what, o, c,
                             cb, ca);
                }
                if (worst > 0.01 * total + 1)
                    fail(g, "%s: histogram o%d: cumulative counts differ by %g of %g", what, o,
                         worst, total);
            } else {
                for (int k = 0; k < tr.rows * tr.cols; k++) {
                    double a = tr.data[k], b = tg.data[k];
                    double d = isnan(a) && isnan(b) ? 0 : fabs(b - a) / (fabs(a) + 1.0);
                    if (!(d < 1e-4)) {
                        fail(g, "%s: table o%d [%d][%d]: gpu %.9g cpu %.9g", what, o, k / tr.cols,
                             k % tr.cols, b, a);
                        break;
                    }
                }
            }
            continue;
        }
        if (!ref[o].base)
            continue;
        int x = 0, y = 0;
        double d = pf_test_frame_diff(&ref[o].f, &got[o].f, &x, &y);
        if (d > (fast ? FAST_STEPS : 1.0))
            fail(g, "%s: image o%d (%dx%d %s%d) differs by %g steps at (%d, %d)", what, o,
                 ref[o].f.width, ref[o].f.height, sample_name(ref[o].f.sample), ref[o].f.channels,
                 d, x, y);
        if (!guard_ok(&got[o]))
            fail(g,
                 "%s: image o%d: the GPU wrote outside the frame (pitch padding or past the view)",
                 what, o);
    }
free_dev:
    for (int i = 0; i < 2; i++)
        cudaFree(dev_in[i]);
    for (int o = 0; o < MAX_OUT; o++)
        cudaFree(dev_out[o]);
out:
    for (int i = 0; i < g->n_inputs; i++)
        free(in[i].base);
    for (int o = 0; o < MAX_OUT; o++)
        free(ref[o].base), free(got[o].base);
    return compared;
}

static int run_case(int c, int *frames_compared)
{
    pf_rng r;
    /* every case from its own state: one case replays without the ones before it */
    pf_rng_seed(&r,
                seed * 0x9E3779B97F4A7C15ull + (unsigned long long)c * 0xBF58476D1CE4E5B9ull + 1);
    gen g;
    gen_pipeline(&g, &r);
    cur_case = c;
    case_failed = 0;
    if (verbose)
        printf("case %d:\n%s", c, g.json);
    pf_pipeline *cpu = NULL, *gpu = NULL;
    if (pf_pipeline_load_string(eng, g.json, "fuzz", &cpu) != PF_OK ||
        pf_pipeline_load_string(eng, g.json, "fuzz", &gpu) != PF_OK) {
        fail(&g, "load: %s", pf_engine_errmsg(eng));
        pf_pipeline_destroy(cpu);
        return 0;
    }
    CHECK(pf_pipeline_set_option(cpu, "backend", "cpu") == PF_OK);
    CHECK(pf_pipeline_set_option(gpu, "backend", selftest ? "cpu" : "cuda") == PF_OK);
    const char *fusion = pf_rng_range(&r, 0, 3) ? "true" : "false";
    const char *graph = pf_rng_range(&r, 0, 3) ? "true" : "false";
    char ms[32] = "0";
    if (pf_rng_range(&r, 0, 3) == 0) /* watchdog bands: a budget far under a launch */
        snprintf(ms, sizeof ms, "%g", pf_rng_range(&r, 0, 1) ? 0.001 : 0.02);
    char slots[8];
    snprintf(slots, sizeof slots, "%d", pf_rng_range(&r, 1, 3));
    CHECK(pf_pipeline_set_option(gpu, "fusion", fusion) == PF_OK);
    CHECK(pf_pipeline_set_option(gpu, "graph", graph) == PF_OK);
    CHECK(pf_pipeline_set_option(gpu, "precision", fast ? "fast" : "exact") == PF_OK);
    CHECK(pf_pipeline_set_option(gpu, "max_launch_ms", ms) == PF_OK);
    CHECK(pf_pipeline_set_option(gpu, "slots", slots) == PF_OK);
    /* PF_FUZZ_SET="streams=1,graph=false" overrides options of the GPU pipeline, to
       narrow down a replayed failure. */
    const char *set = getenv("PF_FUZZ_SET");
    char opts[256];
    snprintf(opts, sizeof opts, "%s", set ? set : "");
    for (char *kv = strtok(opts, ","); kv; kv = strtok(NULL, ",")) {
        char *eq = strchr(kv, '=');
        if (eq) {
            *eq = 0;
            CHECKF(pf_pipeline_set_option(gpu, kv, eq + 1) == PF_OK, "PF_FUZZ_SET %s: %s", kv,
                   pf_pipeline_errmsg(gpu));
        }
    }
    if (verbose)
        printf("  fusion %s graph %s max_launch_ms %s slots %s%s%s\n", fusion, graph, ms, slots,
               set ? ", then " : "", set ? set : "");
    int n_frames = pf_rng_range(&r, 2, 7), w = rand_dim(&r), h = rand_dim(&r), ran = 0;
    for (int f = 0; f < n_frames && !case_failed; f++) {
        if (f > 0 && pf_rng_range(&r, 0, 1)) { /* a new shape; else the same, new formats */
            switch (pf_rng_range(&r, 0, 5)) {
            case 0:
                w = 1, h = rand_dim(&r);
                break;
            case 1:
                w = rand_dim(&r), h = 1;
                break;
            default:
                w = rand_dim(&r), h = rand_dim(&r);
                break;
            }
        }
        int device = pf_rng_range(&r, 0, 3) == 0 && !selftest;
        ran += run_frame(&g, cpu, gpu, &r, w, h, f, device);
    }
    *frames_compared += ran;
    pf_pipeline_destroy(cpu);
    pf_pipeline_destroy(gpu);
    return ran > 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    argv0 = argv[0];
    selftest = getenv("PF_FUZZ_SELFTEST") != NULL;
    fast = getenv("PF_FUZZ_PRECISION") && strcmp(getenv("PF_FUZZ_PRECISION"), "fast") == 0;
    if (!selftest && !pf_test_cuda_device("test_gpu_fuzz"))
        return PF_TEST_SKIPPED;
    const char *s = getenv("PF_FUZZ_SEED");
    seed = s ? strtoull(s, NULL, 10) : 20261201ull;
    const char *nc = getenv("PF_FUZZ_CASES");
    int cases = nc ? atoi(nc) : getenv("PF_TEST_QUICK") ? 40 : 300;
    eng = pf_test_engine();
    const char *one = getenv("PF_FUZZ_CASE");
    int ran = 0, frames = 0, first = 0;
    if (one) {
        verbose = 1;
        first = atoi(one);
        cases = 1;
    }
    for (int c = first; c < first + cases; c++)
        ran += run_case(c, &frames);
    printf("test_gpu_fuzz%s: seed %llu: %d cases (%d with frames both executors ran), %d frames "
           "compared\n",
           fast ? " (precision fast)" : "", seed, cases, ran, frames);
    /* A generator that only makes refused pipelines would test nothing. */
    CHECKF(one || ran >= cases * 3 / 4, "only %d of %d cases ran", ran, cases);
    pf_engine_destroy(eng);
    return pf_test_done("test_gpu_fuzz");
}
