#define _GNU_SOURCE
/* tests/gpu/test_exec_cuda.c: the CUDA executor against the CPU executor.
 *
 * Every example pipeline and a set of random point chains run on both executors, in
 * eager and graph mode, on random frames of odd sizes; 8-bit outputs may differ by one
 * step (float rounding on either side of a .5), tables by a relative 1e-4. Then the
 * real-time contract: no allocation and no device-wide synchronisation in steady state,
 * a parameter change without re-capture, frames in flight, device frames on the
 * application's stream. Exits 77 without a device.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/png.h"
#include "cuda_skip.h"
#include "testutil.h"

static pf_engine *eng;

static pf_frame random_frame(pf_rng *r, int w, int h, pf_sample s, int ch)
{
    pf_frame f;
    memset(&f, 0, sizeof f);
    f.width = w;
    f.height = h;
    f.sample = s;
    f.channels = ch;
    f.pitch = pf_frame_pixel_bytes(s, ch) * (size_t)w + 8 * (s != PF_F32); /* not tight */
    f.data = malloc(f.pitch * (size_t)h);
    for (size_t i = 0; i < f.pitch * (size_t)h; i++)
        ((unsigned char *)f.data)[i] = (unsigned char)pf_rng_u32(r);
    if (s == PF_F32)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w * ch; x++)
                ((float *)((char *)f.data + (size_t)y * f.pitch))[x] = pf_rng_float(r);
    return f;
}

static pf_frame like(const pf_frame *f, int w, int h, pf_sample s, int ch)
{
    (void)f;
    pf_frame o;
    memset(&o, 0, sizeof o);
    o.width = w;
    o.height = h;
    o.sample = s;
    o.channels = ch;
    o.pitch = pf_frame_pixel_bytes(s, ch) * (size_t)w;
    o.data = calloc(o.pitch, (size_t)h);
    return o;
}

/* The first bytes of two frames' first row, for a replayed failing case. */
static void print_head(const pf_frame *a, const pf_frame *b)
{
    size_t n = pf_frame_pixel_bytes(a->sample, a->channels) * (size_t)(a->width < 4 ? a->width : 4);
    for (int f = 0; f < 2; f++) {
        printf("  %s:", f ? "got" : "cpu");
        for (size_t i = 0; i < n; i++)
            printf(" %02x", ((const unsigned char *)(f ? b : a)->data)[i]);
        printf("\n");
    }
}

/* Runs p once per backend mode and compares every output with the CPU's. */
static void compare_backends(const char *what, pf_pipeline *p, const pf_frame *in, int n_in,
                             pf_sample out_sample, int out_ch)
{
    /* graph, fusion */
    static const char *const modes[][2] = {
        {"false", "false"}, {"true", "false"}, {"false", "true"}, {"true", "true"}};
    int n_out = pf_pipeline_output_count(p);
    pf_frame ref[8], got[8];
    double *ref_tab[8] = {0};
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    int rc = pf_pipeline_plan(
        p, (pf_shape[]){{in[0].width, in[0].height}, {in[0].width, in[0].height}}, n_in);
    CHECKF(rc == PF_OK, "%s: plan: %s", what, pf_pipeline_errmsg(p));
    if (rc != PF_OK)
        return;
    for (int o = 0; o < n_out; o++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, o, &oi);
        ref[o] = like(&in[0], oi.shape.width, oi.shape.height, out_sample, out_ch);
        got[o] = like(&in[0], oi.shape.width, oi.shape.height, out_sample, out_ch);
    }
    rc = pf_pipeline_run(p, in, n_in, ref, n_out);
    CHECKF(rc == PF_OK, "%s: cpu run: %s", what, pf_pipeline_errmsg(p));
    for (int o = 0; o < n_out; o++) {
        pf_table t;
        if (pf_pipeline_table(p, o, &t) == PF_OK) {
            ref_tab[o] = malloc(sizeof(double) * (size_t)t.rows * (size_t)t.cols);
            memcpy(ref_tab[o], t.data, sizeof(double) * (size_t)t.rows * (size_t)t.cols);
        }
    }
    for (int m = 0; m < 4; m++) {
        CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
        CHECK(pf_pipeline_set_option(p, "graph", modes[m][0]) == PF_OK);
        CHECK(pf_pipeline_set_option(p, "fusion", modes[m][1]) == PF_OK);
        for (int rep = 0; rep < 2; rep++) { /* the second run replays */
            for (int o = 0; o < n_out; o++)
                memset(got[o].data, 0xA5, got[o].pitch * (size_t)got[o].height);
            rc = pf_pipeline_run(p, in, n_in, got, n_out);
            CHECKF(rc == PF_OK, "%s: cuda graph=%s fusion=%s: %s", what, modes[m][0], modes[m][1],
                   pf_pipeline_errmsg(p));
            if (rc != PF_OK)
                break;
            for (int o = 0; o < n_out; o++) {
                pf_table t;
                if (pf_pipeline_table(p, o, &t) == PF_OK) {
                    double worst = 0;
                    for (int k = 0; k < t.rows * t.cols; k++) {
                        double d = fabs(t.data[k] - ref_tab[o][k]) / (fabs(ref_tab[o][k]) + 1.0);
                        worst = d > worst ? d : worst;
                    }
                    CHECKF(worst < 1e-4, "%s: table %d differs by %g (graph=%s fusion=%s)", what, o,
                           worst, modes[m][0], modes[m][1]);
                } else {
                    double d = pf_test_frame_diff(&ref[o], &got[o], NULL, NULL);
                    CHECKF(d <= 1.0, "%s: output %d differs by %g steps (graph=%s fusion=%s)", what,
                           o, d, modes[m][0], modes[m][1]);
                    if (d > 1.0 && getenv("PF_TEST_REPLAY"))
                        print_head(&ref[o], &got[o]);
                }
            }
        }
    }
    for (int o = 0; o < n_out; o++) {
        free(ref[o].data);
        free(got[o].data);
        free(ref_tab[o]);
    }
    pf_pipeline_set_option(p, "graph", "true");
    pf_pipeline_set_option(p, "fusion", "true");
}

static void test_examples(pf_rng *r)
{
    static const char *const files[] = {"demo",     "article", "sharpen",   "edges",   "thumbnail",
                                        "analysis", "duotone", "crossfade", "geometry"};
    static const pf_sample samples[] = {PF_U8, PF_U16, PF_F32};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/pipelines/%s.json", PF_SOURCE_DIR, files[f]);
        pf_pipeline *p = NULL;
        if (pf_pipeline_load_file(eng, path, &p) != PF_OK) {
            CHECKF(0, "%s: %s", path, pf_engine_errmsg(eng));
            continue;
        }
        pf_sample s = samples[f % 3];
        pf_frame in[2];
        /* Large enough for geometry.json's crop after its quarter turn. */
        in[0] = random_frame(r, 341, 263, s, 1 + (int)(f % 4));
        in[1] = random_frame(r, 341, 263, s, 4);
        compare_backends(files[f], p, in, pf_pipeline_input_count(p), s, 4);
        free(in[0].data);
        free(in[1].data);
        pf_pipeline_destroy(p);
    }
}

/* Random chains and diamonds of point stages with random params. */
static void test_random_points(pf_rng *r)
{
    static const char *const ops1[] = {"brightness", "contrast",  "gamma",
                                       "invert",     "grayscale", "saturation",
                                       "linear",     "vignette",  "threshold"};
    static const char *const ops2[] = {"blend", "add", "multiply", "difference", "alpha_over"};
    static const pf_sample samples[] = {PF_U8, PF_U16, PF_F32};
    int cases = getenv("PF_TEST_QUICK") ? 12 : 300; /* quick: under compute-sanitizer */
    const char *replay = getenv("PF_TEST_REPLAY");  /* a failing case's rng state */
    if (replay) {
        r->s = strtoull(replay, NULL, 10);
        cases = 1;
    }
    for (int t = 0; t < cases; t++) {
        uint64_t seed = r->s; /* replay a failing case from this state */
        char json[8192];
        size_t o = (size_t)snprintf(json, sizeof json,
                                    "{\"pipefuse\":1,\"inputs\":[\"a\",\"b\"],\"stages\":[");
        int n = pf_rng_range(r, 1, 12);
        for (int i = 0; i < n; i++) {
            char in0[16], in1[16];
            snprintf(in0, sizeof in0, i ? "s%d" : "a", pf_rng_range(r, 0, i ? i - 1 : 0));
            snprintf(in1, sizeof in1, pf_rng_range(r, 0, 2) ? "b" : "s%d",
                     pf_rng_range(r, 0, i ? i - 1 : 0));
            if (!i && strcmp(in1, "b"))
                snprintf(in1, sizeof in1, "a");
            if (pf_rng_range(r, 0, 2))
                o += (size_t)snprintf(json + o, sizeof json - o,
                                      "%s{\"id\":\"s%d\",\"op\":\"%s\",\"inputs\":[\"%s\"]}",
                                      i ? "," : "", i, ops1[pf_rng_u32(r) % 9], in0);
            else
                o += (size_t)snprintf(json + o, sizeof json - o,
                                      "%s{\"id\":\"s%d\",\"op\":\"%s\",\"inputs\":[\"%s\",\"%s\"]}",
                                      i ? "," : "", i, ops2[pf_rng_u32(r) % 5], in0, in1);
        }
        snprintf(json + o, sizeof json - o, "],\"outputs\":{\"out\":\"s%d\"}}", n - 1);
        pf_pipeline *p = NULL;
        if (pf_pipeline_load_string(eng, json, "random", &p) != PF_OK) {
            CHECKF(0, "case %d: %s\n%s", t, pf_engine_errmsg(eng), json);
            continue;
        }
        if (getenv("PF_TEST_DUMP"))
            pf_pipeline_set_option(p, "dump_kernels", getenv("PF_TEST_DUMP"));
        char key[64];
        snprintf(key, sizeof key, "s%d.amount", 0);
        pf_pipeline_set_float(p, key, pf_rng_float(r) * 0.5); /* where s0 has an amount */
        pf_frame in[2];
        int w = pf_rng_range(r, 1, 300), h = pf_rng_range(r, 1, 40);
        in[0] = random_frame(r, w, h, samples[pf_rng_u32(r) % 3], pf_rng_range(r, 1, 4));
        in[1] = random_frame(r, w, h, samples[pf_rng_u32(r) % 3], pf_rng_range(r, 1, 4));
        pf_sample os = samples[pf_rng_u32(r) % 3];
        int oc = pf_rng_range(r, 1, 4);
        char what[9000];
        snprintf(what, sizeof what, "random case %d (rng state %llu, %dx%d, %s)", t,
                 (unsigned long long)seed, w, h, json);
        compare_backends(what, p, in, 2, os, oc);
        free(in[0].data);
        free(in[1].data);
        pf_pipeline_destroy(p);
    }
}

/* Fused kernels take their parameters by value (a short chain) or through a pointer to
   the device block (a group whose parameters pass PF_FUSE_PARAM_ARG_MAX bytes: 60 colour
   matrices of 80 bytes); in both, a parameter changed between replayed frames reaches
   the kernels without a capture, every frame as the CPU computes it. */
static void test_param_modes(pf_rng *r)
{
    for (int big = 0; big < 2; big++) {
        int n = big ? 60 : 6;
        size_t cap = 200 * (size_t)n + 256, o = 0;
        char *json = malloc(cap);
        if (!json)
            exit(1);
        o += (size_t)snprintf(json + o, cap - o, "{\"pipefuse\":1,\"inputs\":[\"a\"],\"stages\":[");
        for (int i = 0; i < n; i++) {
            char prev[16] = "a";
            if (i > 0)
                snprintf(prev, sizeof prev, "m%d", i - 1);
            o += (size_t)snprintf(json + o, cap - o,
                                  "%s{\"id\":\"m%d\",\"op\":\"color_matrix\",\"inputs\":[\"%s\"],"
                                  "\"params\":{\"offset\":[0.001,-0.001,0.002,0]}}",
                                  i ? "," : "", i, prev);
        }
        o += (size_t)snprintf(json + o, cap - o, "],\"outputs\":{\"o\":\"m%d\"}}", n - 1);
        pf_pipeline *gpu = NULL, *cpu = NULL;
        CHECKF(pf_pipeline_load_string(eng, json, "param modes", &gpu) == PF_OK &&
                   pf_pipeline_load_string(eng, json, "param modes", &cpu) == PF_OK,
               "%s\n%s", pf_engine_errmsg(eng), json);
        free(json);
        if (!gpu || !cpu) {
            pf_pipeline_destroy(gpu);
            pf_pipeline_destroy(cpu);
            continue;
        }
        CHECK(pf_pipeline_set_option(gpu, "backend", "cuda") == PF_OK);
        CHECK(pf_pipeline_set_option(cpu, "backend", "cpu") == PF_OK);
        pf_frame in = random_frame(r, 320, 200, PF_U8, 4);
        pf_frame out = like(&in, 320, 200, PF_U8, 4), ref = like(&in, 320, 200, PF_U8, 4);
        pf_stats s5, s9;
        s5.size = s9.size = sizeof(pf_stats);
        for (int f = 0; f < 10; f++) {
            if (f > 0) { /* a live change before every frame but the first */
                char key[32], v[96];
                snprintf(key, sizeof key, "m%d.offset", (f * 7) % n);
                snprintf(v, sizeof v, "[%g, %g, 0, 0]", 0.01 * f, -0.005 * f);
                CHECK(pf_pipeline_set_param(gpu, key, v) == PF_OK);
                CHECK(pf_pipeline_set_param(cpu, key, v) == PF_OK);
            }
            CHECKF(pf_pipeline_run(gpu, &in, 1, &out, 1) == PF_OK, "%s", pf_pipeline_errmsg(gpu));
            CHECK(pf_pipeline_run(cpu, &in, 1, &ref, 1) == PF_OK);
            double d = pf_test_frame_diff(&out, &ref, NULL, NULL);
            CHECKF(d <= 1.0, "%d matrices, frame %d: GPU differs from the CPU by %g", n, f, d);
            if (f == 5)
                CHECK(pf_pipeline_stats(gpu, &s5) == PF_OK);
        }
        CHECK(pf_pipeline_stats(gpu, &s9) == PF_OK);
        CHECKF(strcmp(s9.backend, "cuda-graph") == 0, "backend %s", s9.backend);
        CHECKF(s9.launches_per_frame == 1, "%d matrices: %d launches, not one fused kernel", n,
               s9.launches_per_frame);
        CHECKF(s9.graph_captures == s5.graph_captures, "%d matrices: live changes re-captured", n);
        CHECKF(s9.graph_launches >= s5.graph_launches + 4, "%d matrices: not replayed", n);
        free(in.data);
        free(out.data);
        free(ref.data);
        pf_pipeline_destroy(gpu);
        pf_pipeline_destroy(cpu);
    }
}

/* A plan built ahead (pf_pipeline_build_kernels, as `pipefuse check --build`) puts its
   kernels in the cache: the first frame of the same pipeline, loaded again from another
   name, compiles nothing. */
static void test_kernel_cache(pf_rng *r)
{
    char dir[] = "/tmp/pf_kcache_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECKF(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    const char *old = getenv("PIPEFUSE_CACHE_DIR");
    char *keep = old ? strdup(old) : NULL;
    setenv("PIPEFUSE_CACHE_DIR", dir, 1);
    const char *json = "{\"pipefuse\":1,\"inputs\":[\"a\"],\"stages\":["
                       "{\"id\":\"s\",\"op\":\"brightness\",\"params\":{\"amount\":0.1}},"
                       "{\"id\":\"t\",\"op\":\"gamma\",\"params\":{\"gamma\":1.3}}],"
                       "\"outputs\":{\"o\":\"t\"}}";
    pf_pipeline *ahead = NULL, *p = NULL;
    CHECK(pf_pipeline_load_string(eng, json, "ahead", &ahead) == PF_OK);
    CHECK(pf_pipeline_load_string(eng, json, "later", &p) == PF_OK);
    if (ahead && p) {
        pf_shape shape = {640, 360};
        int built = 0;
        pf_stats s;
        s.size = sizeof s;
        CHECK(pf_pipeline_plan(ahead, &shape, 1) == PF_OK);
        CHECKF(pf_pipeline_build_kernels(ahead, 0, NULL, &built) == PF_OK, "%s",
               pf_pipeline_errmsg(ahead));
        CHECK(pf_pipeline_stats(ahead, &s) == PF_OK);
        CHECKF(built == 1 && s.kernel_compiles == 1, "built %d, compiled %llu", built,
               s.kernel_compiles);
        CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
        pf_frame in = random_frame(r, 640, 360, PF_U8, 4), out = like(&in, 640, 360, PF_U8, 4);
        CHECKF(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK, "%s", pf_pipeline_errmsg(p));
        CHECK(pf_pipeline_stats(p, &s) == PF_OK);
        CHECKF(s.kernel_compiles == 0 && s.kernel_cache_hits == 1,
               "the first frame after a build ahead: %llu compiles, %llu cache hits",
               s.kernel_compiles, s.kernel_cache_hits);
        free(in.data);
        free(out.data);
    }
    pf_pipeline_destroy(ahead);
    pf_pipeline_destroy(p);
    if (keep) {
        setenv("PIPEFUSE_CACHE_DIR", keep, 1);
        free(keep);
    } else {
        unsetenv("PIPEFUSE_CACHE_DIR");
    }
    CHECK(pf_test_remove_tree(dir) == 0);
}

/* The real-time contract. */
static void test_steady_state(pf_rng *r)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/pipelines/demo.json", PF_SOURCE_DIR);
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_file(eng, path, &p) != PF_OK) {
        CHECKF(0, "%s", pf_engine_errmsg(eng));
        return;
    }
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    pf_frame in = random_frame(r, 640, 360, PF_U8, 4);
    pf_frame out = like(&in, 640, 360, PF_U8, 4), out2 = like(&in, 640, 360, PF_U8, 4);
    pf_stats s0, s1;
    s0.size = s1.size = sizeof(pf_stats);
    for (int i = 0; i < 5; i++) /* warm every slot's graph */
        CHECK(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK);
    CHECK(pf_pipeline_stats(p, &s0) == PF_OK);
    for (int i = 0; i < 20; i++) {
        char v[32];
        snprintf(v, sizeof v, "%g", 0.01 * i);
        CHECK(pf_pipeline_set_param(p, "bright.amount", v) == PF_OK); /* live change */
        CHECK(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK);
        pf_stats s;
        s.size = sizeof s;
        pf_pipeline_stats(p, &s);
        CHECKF(s.allocations_last_frame == 0, "frame %d allocated %llu times", i,
               s.allocations_last_frame);
        CHECKF(s.device_syncs_last_frame == 0, "frame %d synchronised the device", i);
    }
    CHECK(pf_pipeline_stats(p, &s1) == PF_OK);
    CHECKF(strcmp(s1.backend, "cuda-graph") == 0, "backend %s", s1.backend);
    CHECKF(s1.graph_captures == s0.graph_captures, "parameter changes re-captured (%llu -> %llu)",
           s0.graph_captures, s1.graph_captures);
    CHECKF(s1.graph_instantiations == s0.graph_instantiations, "re-instantiated");
    CHECKF(s1.graph_launches >= s0.graph_launches + 20, "not replayed as graphs");
    CHECKF(s1.plans == s0.plans, "re-planned in steady state");
    CHECK(s1.device_syncs == 0);

    /* Nothing per frame that did not change: once every slot holds the last parameter
       change, frames over the same buffers copy no parameters or descriptors. */
    pf_stats s2, s3;
    s2.size = s3.size = sizeof(pf_stats);
    for (int i = 0; i < 6; i++)
        CHECK(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK);
    CHECK(pf_pipeline_stats(p, &s2) == PF_OK);
    CHECKF(s2.param_uploads <= s1.param_uploads + 3, "%llu uploads for 3 slots",
           s2.param_uploads - s1.param_uploads);
    for (int i = 0; i < 10; i++)
        CHECK(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK);
    CHECK(pf_pipeline_stats(p, &s3) == PF_OK);
    CHECKF(s3.param_uploads == s2.param_uploads, "unchanged frames uploaded %llu times",
           s3.param_uploads - s2.param_uploads);
    CHECK(s3.graph_launches >= s2.graph_launches + 10);

    /* The live change took effect: compare with the CPU at the last amount. */
    pf_pipeline_set_option(p, "backend", "cpu");
    CHECK(pf_pipeline_run(p, &in, 1, &out2, 1) == PF_OK);
    CHECKF(pf_test_frame_diff(&out, &out2, NULL, NULL) <= 1.0,
           "live parameter did not reach the GPU (%g)",
           pf_test_frame_diff(&out, &out2, NULL, NULL));

    /* Frames in flight: three submitted before any wait. */
    pf_pipeline_set_option(p, "backend", "cuda");
    pf_frame outs[3] = {like(&in, 640, 360, PF_U8, 4), like(&in, 640, 360, PF_U8, 4),
                        like(&in, 640, 360, PF_U8, 4)};
    int tickets[3];
    for (int i = 0; i < 3; i++)
        CHECKF(pf_pipeline_submit(p, &in, 1, &outs[i], 1, &tickets[i]) == PF_OK, "submit %d: %s", i,
               pf_pipeline_errmsg(p));
    int extra;
    CHECK(pf_pipeline_submit(p, &in, 1, &out2, 1, &extra) == PF_UNSUPPORTED); /* all busy */
    for (int i = 2; i >= 0; i--) {
        CHECK(pf_pipeline_wait(p, tickets[i]) == PF_OK);
        CHECKF(pf_test_frame_diff(&outs[i], &out, NULL, NULL) <= 1.0, "in-flight frame %d differs",
               i);
    }
    CHECK(pf_pipeline_wait(p, 12345) == PF_INVALID_ARGUMENT);

    /* Device frames on the application's own stream. */
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st) == cudaSuccess);
    pf_frame din = in, dout = out;
    CHECK(cudaMalloc(&din.data, in.pitch * (size_t)in.height) == cudaSuccess);
    dout.pitch = 640 * 4 + 64;
    CHECK(cudaMalloc(&dout.data, dout.pitch * 360) == cudaSuccess);
    CHECK(cudaMemcpy(din.data, in.data, in.pitch * (size_t)in.height, cudaMemcpyHostToDevice) ==
          cudaSuccess);
    CHECK(cudaMemset(dout.data, 0, dout.pitch * 360) == cudaSuccess);
    int ticket;
    for (int i = 0; i < 4; i++)
        CHECKF(pf_pipeline_submit_device(p, &din, 1, &dout, 1, st, &ticket) == PF_OK,
               "submit_device: %s", pf_pipeline_errmsg(p));
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    pf_frame back = like(&in, 640, 360, PF_U8, 4);
    CHECK(cudaMemcpy2D(back.data, back.pitch, dout.data, dout.pitch, 640 * 4, 360,
                       cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECKF(pf_test_frame_diff(&back, &out, NULL, NULL) <= 1.0,
           "device frames differ from host frames (%g)",
           pf_test_frame_diff(&back, &out, NULL, NULL));
    CHECK(pf_pipeline_wait(p, ticket) == PF_OK);

    /* Device frames whose addresses change every frame (two output buffers by turns,
       of different pitches): each frame's descriptors reach its kernels. */
    pf_frame dout2 = dout;
    dout2.pitch = 640 * 4;
    CHECK(cudaMalloc(&dout2.data, dout2.pitch * 360) == cudaSuccess);
    CHECK(cudaMemset(dout.data, 0, dout.pitch * 360) == cudaSuccess);
    CHECK(cudaMemset(dout2.data, 0, dout2.pitch * 360) == cudaSuccess);
    for (int i = 0; i < 7; i++)
        CHECKF(pf_pipeline_submit_device(p, &din, 1, i % 2 ? &dout2 : &dout, 1, st, &ticket) ==
                   PF_OK,
               "submit_device %d: %s", i, pf_pipeline_errmsg(p));
    CHECK(cudaStreamSynchronize(st) == cudaSuccess);
    CHECK(pf_pipeline_wait(p, ticket) == PF_OK);
    for (int b = 0; b < 2; b++) {
        const pf_frame *d = b ? &dout2 : &dout;
        CHECK(cudaMemcpy2D(back.data, back.pitch, d->data, d->pitch, 640 * 4, 360,
                           cudaMemcpyDeviceToHost) == cudaSuccess);
        CHECKF(pf_test_frame_diff(&back, &out, NULL, NULL) <= 1.0,
               "device buffer %d of two by turns differs (%g)", b,
               pf_test_frame_diff(&back, &out, NULL, NULL));
    }
    cudaFree(dout2.data);
    cudaFree(din.data);
    cudaFree(dout.data);
    cudaStreamDestroy(st);
    for (int i = 0; i < 3; i++)
        free(outs[i].data);
    free(back.data);
    free(in.data);
    free(out.data);
    free(out2.data);
    pf_pipeline_destroy(p);
}

/* Frame descriptors reach fused kernels as arguments when they fit (4 KB with the
   parameters), else through the device block: a chain of `difference` stages, each
   reading a new input and each a pipeline output (k + 1 inputs, k outputs), with 20
   stages (by value) and 45 (too many descriptors: a pointer). Device frames whose output
   buffers change every frame (two sets by turns, of different pitches) give the CPU's
   bytes in every buffer; by value, a change updates the graph's kernel node and copies
   nothing to the device; through the pointer, the descriptors are copied. */
static void test_descriptor_args(pf_rng *r)
{
    enum { W = 64, H = 24, KMAX = 45 };
    static const int lens[] = {20, KMAX};
    for (int l = 0; l < 2; l++) {
        int k = lens[l];
        char json[8192];
        pf_test_difference_chain(json, sizeof json, k);
        pf_pipeline *p = NULL;
        CHECKF(pf_pipeline_load_string(eng, json, "many_io", &p) == PF_OK, "%s",
               pf_engine_errmsg(eng));
        if (!p)
            continue;
        pf_frame in[KMAX + 1], din[KMAX + 1], ref[KMAX], back = {0}, dout[2][KMAX];
        for (int i = 0; i <= k; i++) {
            in[i] = random_frame(r, W, H, PF_U8, 4);
            din[i] = in[i];
            CHECK(cudaMalloc(&din[i].data, in[i].pitch * H) == cudaSuccess);
            CHECK(cudaMemcpy(din[i].data, in[i].data, in[i].pitch * H, cudaMemcpyHostToDevice) ==
                  cudaSuccess);
        }
        for (int i = 0; i < k; i++) {
            ref[i] = like(&in[0], W, H, PF_U8, 4);
            for (int b = 0; b < 2; b++) {
                dout[b][i] = ref[i];
                dout[b][i].pitch = W * 4 + 64 * b;
                CHECK(cudaMalloc(&dout[b][i].data, dout[b][i].pitch * H) == cudaSuccess);
                CHECK(cudaMemset(dout[b][i].data, 0, dout[b][i].pitch * H) == cudaSuccess);
            }
        }
        back = like(&in[0], W, H, PF_U8, 4);
        CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
        CHECKF(pf_pipeline_run(p, in, k + 1, ref, k) == PF_OK, "%d stages, cpu: %s", k,
               pf_pipeline_errmsg(p));
        CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
        cudaStream_t st;
        CHECK(cudaStreamCreate(&st) == cudaSuccess);
        pf_stats s0, s1;
        s0.size = s1.size = sizeof(pf_stats);
        int ticket = 0, rc = PF_OK;
        const int frames = 12, warm = 6;
        for (int f = 0; f < frames && rc == PF_OK; f++) {
            if (f == warm) { /* every slot has captured its graph */
                CHECK(cudaStreamSynchronize(st) == cudaSuccess);
                CHECK(pf_pipeline_stats(p, &s0) == PF_OK);
            }
            rc = pf_pipeline_submit_device(p, din, k + 1, dout[f % 2], k, st, &ticket);
            CHECKF(rc == PF_OK, "%d stages, frame %d: %s", k, f, pf_pipeline_errmsg(p));
        }
        CHECK(cudaStreamSynchronize(st) == cudaSuccess);
        CHECK(pf_pipeline_wait(p, ticket) == PF_OK);
        CHECK(pf_pipeline_stats(p, &s1) == PF_OK);
        CHECKF(strcmp(s1.backend, "cuda-graph") == 0 && s1.graph_captures == s0.graph_captures,
               "%d stages: backend %s, %llu captures after the warm-up", k, s1.backend,
               s1.graph_captures - s0.graph_captures);
        unsigned long long updates = s1.graph_node_updates - s0.graph_node_updates,
                           uploads = s1.param_uploads - s0.param_uploads;
        if (k <= 40)
            CHECKF(updates >= (unsigned)(frames - warm) && uploads == 0,
                   "%d stages, descriptors by value: %llu node updates and %llu copies to the "
                   "device for %d frames of moved buffers",
                   k, updates, uploads, frames - warm);
        else
            CHECKF(updates == 0 && uploads >= (unsigned)(frames - warm),
                   "%d stages, descriptors through the device: %llu node updates and %llu "
                   "copies for %d frames of moved buffers",
                   k, updates, uploads, frames - warm);
        /* Both sets cleared, then a frame into each slot with the set its slot's last
           frame did not use (slots by turns: frames 9 to 11 wrote sets 1, 0, 1): only
           kernels given the new buffers write where asked. */
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < k; i++)
                CHECK(cudaMemsetAsync(dout[b][i].data, 0, dout[b][i].pitch * H, st) == cudaSuccess);
        for (int f = frames; f < frames + 3 && rc == PF_OK; f++) {
            rc = pf_pipeline_submit_device(p, din, k + 1, dout[f % 2], k, st, &ticket);
            CHECKF(rc == PF_OK, "%d stages, frame %d: %s", k, f, pf_pipeline_errmsg(p));
        }
        CHECK(cudaStreamSynchronize(st) == cudaSuccess);
        CHECK(pf_pipeline_wait(p, ticket) == PF_OK);
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < k; i++) {
                CHECK(cudaMemcpy2D(back.data, back.pitch, dout[b][i].data, dout[b][i].pitch, W * 4,
                                   H, cudaMemcpyDeviceToHost) == cudaSuccess);
                double d = pf_test_frame_diff(&back, &ref[i], NULL, NULL);
                CHECKF(d <= 1.0, "%d stages: output %d in buffer set %d differs by %g", k, i, b, d);
            }
        cudaStreamDestroy(st);
        for (int i = 0; i <= k; i++) {
            free(in[i].data);
            cudaFree(din[i].data);
        }
        for (int i = 0; i < k; i++) {
            free(ref[i].data);
            cudaFree(dout[0][i].data);
            cudaFree(dout[1][i].data);
        }
        free(back.data);
        pf_pipeline_destroy(p);
    }
}

/* Sample conversion in fused kernels is exact, not merely within a step: float inputs
   around every rounding tie of u8 and u16 outputs (and NaN, infinities, signed zeros,
   huge and tiny values) store the CPU's very bytes, and every u8 and u16 value loads as
   the CPU's float. */
static void test_conversions(void)
{
    const char *json = "{\"pipefuse\":1,\"inputs\":[\"a\"],\"stages\":[{\"id\":\"s\","
                       "\"op\":\"brightness\",\"params\":{\"amount\":0}}],"
                       "\"outputs\":{\"o\":\"s\"}}";
    pf_pipeline *p = NULL;
    CHECK(pf_pipeline_load_string(eng, json, "conversions", &p) == PF_OK);
    if (!p)
        return;
    const int w = 1024, h = 580; /* 2,375,680 floats: the specials, then every tie +- 4 ulps */
    pf_frame in;
    CHECK(pf_frame_alloc(&in, w, h, PF_F32, 4) == PF_OK);
    size_t cap = (size_t)w * h * 4;
    float *v = malloc(sizeof(float) * cap);
    if (!v)
        exit(1);
    pf_test_store_values(v, cap);
    for (int y = 0; y < h; y++)
        memcpy((char *)in.data + (size_t)y * in.pitch, v + (size_t)y * w * 4,
               sizeof(float) * w * 4);
    free(v);
    pf_sample outs[] = {PF_U8, PF_U16};
    for (int o = 0; o < 2; o++) {
        pf_frame ref, got;
        CHECK(pf_frame_alloc(&ref, w, h, outs[o], 4) == PF_OK);
        CHECK(pf_frame_alloc(&got, w, h, outs[o], 4) == PF_OK);
        CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
        CHECK(pf_pipeline_run(p, &in, 1, &ref, 1) == PF_OK);
        CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
        CHECK(pf_pipeline_set_option(p, "fusion", "true") == PF_OK);
        CHECKF(pf_pipeline_run(p, &in, 1, &got, 1) == PF_OK, "%s", pf_pipeline_errmsg(p));
        long bad = 0;
        for (int y = 0; y < h; y++)
            bad += memcmp((char *)ref.data + (size_t)y * ref.pitch,
                          (char *)got.data + (size_t)y * got.pitch,
                          pf_frame_pixel_bytes(outs[o], 4) * (size_t)w) != 0;
        CHECKF(bad == 0, "f32 -> %s: %ld rows differ from the CPU", o ? "u16" : "u8", bad);
        /* And back: every value of that format loads as the CPU's float. */
        for (size_t i = 0; i < (size_t)w * h * 4; i++) {
            size_t y = i / ((size_t)w * 4), x = i % ((size_t)w * 4);
            if (outs[o] == PF_U8)
                ((unsigned char *)ref.data + y * ref.pitch)[x] = (unsigned char)i;
            else
                ((unsigned short *)((char *)ref.data + y * ref.pitch))[x] = (unsigned short)i;
        }
        pf_frame fr, fg;
        CHECK(pf_frame_alloc(&fr, w, h, PF_F32, 4) == PF_OK);
        CHECK(pf_frame_alloc(&fg, w, h, PF_F32, 4) == PF_OK);
        CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
        CHECK(pf_pipeline_run(p, &ref, 1, &fr, 1) == PF_OK);
        CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
        CHECK(pf_pipeline_run(p, &ref, 1, &fg, 1) == PF_OK);
        bad = 0;
        for (int y = 0; y < h; y++)
            bad +=
                memcmp((char *)fr.data + (size_t)y * fr.pitch,
                       (char *)fg.data + (size_t)y * fg.pitch, sizeof(float) * 4 * (size_t)w) != 0;
        CHECKF(bad == 0, "%s -> f32: %ld rows differ from the CPU", o ? "u16" : "u8", bad);
        pf_frame_free(&ref), pf_frame_free(&got), pf_frame_free(&fr), pf_frame_free(&fg);
    }
    pf_frame_free(&in);
    pf_pipeline_destroy(p);
}

/* Large frames: fused kernels give each thread 8, 4 or 2 pixels there (1 on the small
   random frames), with 16-byte chunks; odd widths leave a ragged last chunk. */
static void test_large(pf_rng *r)
{
    const char *json = "{\"pipefuse\":1,\"inputs\":[\"a\",\"b\"],\"stages\":["
                       "{\"id\":\"s0\",\"op\":\"saturation\",\"inputs\":[\"a\"]},"
                       "{\"id\":\"s1\",\"op\":\"vignette\",\"inputs\":[\"s0\"]},"
                       "{\"id\":\"s2\",\"op\":\"alpha_over\",\"inputs\":[\"s1\",\"b\"]}],"
                       "\"outputs\":{\"out\":\"s2\",\"mid\":\"s0\"}}";
    static const int sizes[][2] = {{3001, 1013}, {1921, 1081}, {1023, 577}};
    pf_pipeline *p = NULL;
    CHECK(pf_pipeline_load_string(eng, json, "large", &p) == PF_OK);
    if (!p)
        return;
    for (int i = 0; i < 3; i++) {
        pf_frame in[2];
        in[0] = random_frame(r, sizes[i][0], sizes[i][1], PF_U8, 4);
        in[1] = random_frame(r, sizes[i][0], sizes[i][1], PF_U16, 2);
        char what[64];
        snprintf(what, sizeof what, "large %dx%d", sizes[i][0], sizes[i][1]);
        compare_backends(what, p, in, 2, PF_U8, 4);
        free(in[0].data);
        free(in[1].data);
    }
    pf_pipeline_destroy(p);
}

/* Independent branches on several streams give the same bytes as on one stream, and
   graph replay the same bytes as eager launches. */
static void test_streams(pf_rng *r)
{
    static const char json[] =
        "{\"pipefuse\":1,\"inputs\":[\"src\"],\"stages\":["
        "{\"id\":\"soft\",\"op\":\"gaussian\",\"inputs\":[\"src\"],\"params\":{\"sigma\":2}},"
        "{\"id\":\"edge\",\"op\":\"sobel\",\"inputs\":[\"src\"]},"
        "{\"id\":\"med\",\"op\":\"median3\",\"inputs\":[\"src\"]},"
        "{\"id\":\"mix\",\"op\":\"blend\",\"inputs\":[\"soft\",\"edge\"]},"
        "{\"id\":\"diff\",\"op\":\"difference\",\"inputs\":[\"edge\",\"med\"]},"
        "{\"id\":\"hist\",\"op\":\"histogram\",\"inputs\":[\"med\"]}],"
        "\"outputs\":{\"a\":\"mix\",\"b\":\"diff\",\"h\":\"hist\"}}";
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(eng, json, "branches.json", &p) != PF_OK) {
        CHECKF(0, "%s", pf_engine_errmsg(eng));
        return;
    }
    pf_frame in = random_frame(r, 517, 311, PF_U8, 4);
    pf_frame out[4][2];
    double hist[4][256 * 4];
    static const char *const cfg[4][2] = {
        {"0", "true"}, {"1", "true"}, {"0", "false"}, {"1", "false"}};
    CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
    for (int m = 0; m < 4; m++) {
        CHECK(pf_pipeline_set_option(p, "streams", cfg[m][0]) == PF_OK);
        CHECK(pf_pipeline_set_option(p, "graph", cfg[m][1]) == PF_OK);
        out[m][0] = like(&in, 517, 311, PF_U8, 4);
        out[m][1] = like(&in, 517, 311, PF_U8, 4);
        pf_frame o3[3] = {out[m][0], out[m][1], {0}};
        for (int rep = 0; rep < 3; rep++)
            CHECKF(pf_pipeline_run(p, &in, 1, o3, 3) == PF_OK, "%s", pf_pipeline_errmsg(p));
        pf_stats s;
        s.size = sizeof s;
        pf_pipeline_stats(p, &s);
        CHECKF(cfg[m][0][0] == '1' ? s.streams == 1 : s.streams >= 3, "streams %d (option %s)",
               s.streams, cfg[m][0]);
        pf_table t;
        CHECK(pf_pipeline_table(p, 2, &t) == PF_OK && t.rows * t.cols == 256 * 4);
        memcpy(hist[m], t.data, sizeof hist[m]);
    }
    for (int m = 1; m < 4; m++) {
        for (int o = 0; o < 2; o++)
            CHECKF(memcmp(out[m][o].data, out[0][o].data, out[0][o].pitch * 311) == 0,
                   "output %d differs: streams %s graph %s against the default", o, cfg[m][0],
                   cfg[m][1]);
        CHECKF(memcmp(hist[m], hist[0], sizeof hist[0]) == 0, "histogram differs (mode %d)", m);
    }
    for (int m = 0; m < 4; m++)
        free(out[m][0].data), free(out[m][1].data);
    free(in.data);
    pf_pipeline_destroy(p);
}

/* Device frames in place: an output that is its input (or starts inside it in a wider
   format) gives what separate buffers give, with graphs and without, frame after frame,
   for point chains, geometry, stencils and branches on several streams. */
static void test_in_place(pf_rng *r)
{
    static const char *const json[] = {
        "{\"pipefuse\":1,\"inputs\":[\"src\"],\"stages\":["
        "{\"id\":\"b\",\"op\":\"brightness\",\"inputs\":[\"src\"],\"params\":{\"amount\":0.1}},"
        "{\"id\":\"c\",\"op\":\"invert\",\"inputs\":[\"b\"]}],\"outputs\":{\"out\":\"c\"}}",
        "{\"pipefuse\":1,\"inputs\":[\"src\"],\"stages\":["
        "{\"id\":\"f\",\"op\":\"flip\",\"inputs\":[\"src\"]}],\"outputs\":{\"out\":\"f\"}}",
        "{\"pipefuse\":1,\"inputs\":[\"src\"],\"stages\":["
        "{\"id\":\"g\",\"op\":\"gaussian\",\"inputs\":[\"src\"],\"params\":{\"sigma\":3}}],"
        "\"outputs\":{\"out\":\"g\"}}",
        "{\"pipefuse\":1,\"inputs\":[\"src\"],\"stages\":["
        "{\"id\":\"soft\",\"op\":\"gaussian\",\"inputs\":[\"src\"],\"params\":{\"sigma\":2}},"
        "{\"id\":\"edge\",\"op\":\"sobel\",\"inputs\":[\"src\"]},"
        "{\"id\":\"mix\",\"op\":\"blend\",\"inputs\":[\"soft\",\"edge\"]}],"
        "\"outputs\":{\"out\":\"mix\"}}",
    };
    const int W = 213, H = 97;
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st) == cudaSuccess);
    pf_frame in = random_frame(r, W, H, PF_U8, 4);
    unsigned char *dbuf = NULL;
    size_t big = (size_t)W * H * 16; /* room for a float RGBA output over the input */
    CHECK(cudaMalloc((void **)&dbuf, big) == cudaSuccess);
    for (size_t j = 0; j < sizeof json / sizeof json[0]; j++) {
        pf_pipeline *p = NULL;
        if (pf_pipeline_load_string(eng, json[j], "in_place.json", &p) != PF_OK) {
            CHECKF(0, "%s", pf_engine_errmsg(eng));
            continue;
        }
        for (int wide = 0; wide < 2; wide++) {
            pf_sample os = wide ? PF_F32 : PF_U8;
            pf_frame ref = like(&in, W, H, os, 4), back = like(&in, W, H, os, 4);
            CHECK(pf_pipeline_set_option(p, "backend", "cuda") == PF_OK);
            CHECKF(pf_pipeline_run(p, &in, 1, &ref, 1) == PF_OK, "%s", pf_pipeline_errmsg(p));
            for (int g = 0; g < 2; g++) {
                CHECK(pf_pipeline_set_option(p, "graph", g ? "true" : "false") == PF_OK);
                pf_frame din = in, dout = ref;
                din.data = dbuf;
                dout.data = dbuf; /* the same memory: in place, or wider over it */
                if (!wide)
                    dout.pitch = in.pitch;
                int ticket = 0, rc = PF_OK;
                for (int rep = 0; rep < 3 && rc == PF_OK; rep++) {
                    CHECK(cudaMemcpyAsync(dbuf, in.data, in.pitch * (size_t)H,
                                          cudaMemcpyHostToDevice, st) == cudaSuccess);
                    rc = pf_pipeline_submit_device(p, &din, 1, &dout, 1, st, &ticket);
                    CHECKF(rc == PF_OK, "pipeline %zu wide %d graph %d: %s", j, wide, g,
                           pf_pipeline_errmsg(p));
                }
                CHECK(cudaStreamSynchronize(st) == cudaSuccess);
                if (rc != PF_OK)
                    continue;
                CHECK(pf_pipeline_wait(p, ticket) == PF_OK);
                CHECK(cudaMemcpy2D(back.data, back.pitch, dbuf, dout.pitch, back.pitch, H,
                                   cudaMemcpyDeviceToHost) == cudaSuccess);
                CHECKF(memcmp(back.data, ref.data, ref.pitch * (size_t)H) == 0,
                       "pipeline %zu in place (wide %d, graph %d) differs from separate buffers", j,
                       wide, g);
            }
            free(ref.data);
            free(back.data);
        }
        pf_pipeline_destroy(p);
    }
    cudaFree(dbuf);
    cudaStreamDestroy(st);
    free(in.data);
}

int main(void)
{
    if (!pf_test_cuda_device("test_exec_cuda"))
        return PF_TEST_SKIPPED;
    eng = pf_test_engine();
    pf_rng r;
    pf_rng_seed(&r, 20261129);
    if (getenv("PF_TEST_REPLAY")) { /* one random case, from its printed rng state */
        test_random_points(&r);
        pf_engine_destroy(eng);
        return pf_test_done("test_exec_cuda");
    }
    test_conversions();
    test_examples(&r);
    test_random_points(&r);
    test_large(&r);
    test_steady_state(&r);
    test_param_modes(&r);
    test_kernel_cache(&r);
    test_streams(&r);
    test_descriptor_args(&r);
    test_in_place(&r);
    pf_engine_destroy(eng);
    return pf_test_done("test_exec_cuda");
}
