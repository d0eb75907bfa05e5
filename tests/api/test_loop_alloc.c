/* tests/api/test_loop_alloc.c: a CPU frame loop allocates nothing (DESIGN.md: no
 * allocation in a frame loop). malloc, calloc and realloc are counted here (the program's
 * own definitions come before libc's) while frames run: after a first frame, and after a
 * parameter change's first frame (which may build point tables), further frames of a
 * pipeline with point chains, a table-driven chain, a stencil, a resample and a reduce
 * allocate nothing, on every worker thread. Skipped under sanitizers, which own malloc.
 *   test_loop_alloc        the CPU backend
 *   test_loop_alloc gpu    the CUDA backend with graphs (skipped without a device), host
 *                          frames pageable and page-locked (pf_frame_alloc_host): what
 *                          pipefuse allocates and what CUDA allocates for it. Frames
 *                          rotate through the pipeline's slots, and each slot's first
 *                          frame used to capture its graph inside the loop (146
 *                          allocations in 5 frames on the H200, cuStreamBeginCapture).
 *   Allocations inside the CUDA driver's cuGraphLaunch, and on threads the driver runs
 *   for itself, are reported, not counted: the driver now and then grows its own launch
 *   bookkeeping, and its threads allocate when other GPU work runs on the machine.
 *   test_loop_alloc_dev gpu  the same and device frames (pf_pipeline_submit_device on
 *                          the application's stream, new pointers every frame); built
 *                          where CUDA is.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#ifdef PF_LOOP_DEVICE
#include <cuda_runtime_api.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PF_OWN_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PF_OWN_MALLOC 0
#endif
#endif
#ifndef PF_OWN_MALLOC
#define PF_OWN_MALLOC 1
#endif

#if PF_OWN_MALLOC
#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static atomic_int counting;
static atomic_long counted;
static atomic_long in_launch; /* made inside cuGraphLaunch or a graph's kernel-node update:
                                 the CUDA driver's own */
static atomic_long on_driver; /* made on a thread of the CUDA driver's own */
static int trace_left;        /* PF_ALLOC_TRACE=N: the stacks of the first N counted calls */
static _Thread_local int in_count;

/* Whether the stack holds the CUDA driver's cuGraphLaunch: launching the frame's graph is
   what a frame loop does, and the driver now and then grows its own launch bookkeeping
   there (1 allocation in 6 frames with two in flight, in some runs on the H200); or its
   cuGraphExecKernelNodeSetParams, the call a parameter change makes so that the graph
   needs no new capture. Other allocations are pipefuse's, or CUDA's for a call pipefuse
   chose to make (a capture). */
static int inside_graph_launch(void *const *frames, int n)
{
    for (int i = 1; i < n; i++) {
        Dl_info d;
        if (dladdr(frames[i], &d) && d.dli_sname &&
            (strcmp(d.dli_sname, "cuGraphLaunch") == 0 ||
             strncmp(d.dli_sname, "cuGraphExecKernelNodeSetParams", 30) == 0))
            return 1;
    }
    return 0;
}

/* Whether every frame but the first two (count, malloc) is in the CUDA driver or the C
   library: a thread the driver started for itself (with other GPU work on the machine it
   allocates now and then, nothing of pipefuse's or this program's on its stack). The
   caller's thread has main on its stack, pipefuse's workers the pool's loop. */
static int on_driver_thread(void *const *frames, int n)
{
    static const char *const theirs[] = {"libcuda", "libc.", "libc-", "ld-linux", "libgcc"};
    for (int i = 2; i < n; i++) {
        Dl_info d;
        if (!dladdr(frames[i], &d) || !d.dli_fname)
            continue;
        const char *base = strrchr(d.dli_fname, '/') ? strrchr(d.dli_fname, '/') + 1 : d.dli_fname;
        int foreign = 0;
        for (size_t k = 0; k < sizeof theirs / sizeof theirs[0]; k++)
            foreign |= strncmp(base, theirs[k], strlen(theirs[k])) == 0;
        if (!foreign)
            return 0;
    }
    return 1;
}

static void count(void)
{
    if (!atomic_load_explicit(&counting, memory_order_relaxed) || in_count)
        return;
    in_count = 1;
    void *frames[32];
    int n = backtrace(frames, 32);
    if (inside_graph_launch(frames, n)) {
        atomic_fetch_add(&in_launch, 1);
    } else if (on_driver_thread(frames, n)) {
        atomic_fetch_add(&on_driver, 1);
    } else if (atomic_fetch_add(&counted, 1) < trace_left) {
        static const char line[] = "--- allocation in the frame loop:\n";
        if (write(2, line, sizeof line - 1) < 0)
            n = 0;
        backtrace_symbols_fd(frames, n, 2);
    }
    in_count = 0;
}

void *malloc(size_t n)
{
    count();
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t s)
{
    count();
    return __libc_calloc(n, s);
}
void *realloc(void *p, size_t n)
{
    count();
    return __libc_realloc(p, n);
}
#endif

static const char json[] =
    "{\"pipefuse\":1,\"inputs\":[\"src\",\"top\"],\"stages\":["
    "{\"id\":\"b\",\"op\":\"brightness\",\"inputs\":[\"src\"],\"params\":{\"amount\":0.1}},"
    "{\"id\":\"c\",\"op\":\"contrast\",\"inputs\":[\"b\"],\"params\":{\"amount\":1.2}},"
    "{\"id\":\"g\",\"op\":\"gaussian\",\"inputs\":[\"c\"],\"params\":{\"sigma\":1.5}},"
    "{\"id\":\"s\",\"op\":\"sobel\",\"inputs\":[\"g\"]},"
    "{\"id\":\"m\",\"op\":\"blend\",\"inputs\":[\"c\",\"s\"],\"params\":{\"opacity\":0.5}},"
    "{\"id\":\"t\",\"op\":\"alpha_over\",\"inputs\":[\"m\",\"top\"]},"
    "{\"id\":\"f\",\"op\":\"flip\",\"inputs\":[\"t\"]},"
    "{\"id\":\"h\",\"op\":\"histogram\",\"inputs\":[\"f\"]}],"
    "\"outputs\":{\"out\":\"f\",\"hist\":\"h\",\"vivid\":\"c\"}}";

static pf_frame frame(int w, int h, int ch, unsigned seed)
{
    pf_frame f;
    memset(&f, 0, sizeof f);
    f.width = w, f.height = h, f.sample = PF_U8, f.channels = ch;
    f.pitch = (size_t)w * (size_t)ch;
    f.data = malloc(f.pitch * (size_t)h);
    for (size_t i = 0; i < f.pitch * (size_t)h; i++)
        ((unsigned char *)f.data)[i] = (unsigned char)(i * 2654435761u >> 13 ^ seed);
    return f;
}

int main(int argc, char **argv)
{
#if !PF_OWN_MALLOC
    (void)argc, (void)argv;
    return PF_TEST_SKIPPED;
#else
    const char *trace = getenv("PF_ALLOC_TRACE");
    void *warm[2];
    backtrace(warm, 2); /* its first call loads what it needs: not while counting */
    Dl_info d;
    dladdr(warm[0], &d);
    if (trace)
        trace_left = atoi(trace);
    pf_engine *e = pf_test_engine();
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(e, json, "loop.json", &p);
    CHECKF(rc == PF_OK, "%s", pf_engine_errmsg(e));
    if (rc != PF_OK)
        return pf_test_done("test_loop_alloc");
    int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    const char *name = gpu ? "test_loop_alloc gpu" : "test_loop_alloc";
    CHECK(pf_pipeline_set_option(p, "backend", gpu ? "cuda" : "cpu") == PF_OK);
    const int W = 301, H = 203;
    if (gpu && pf_pipeline_plan(p, (pf_shape[]){{W, H}, {W, H}}, 2) == PF_NO_DEVICE) {
        printf("SKIPPED: %s\n", pf_pipeline_errmsg(p));
        pf_pipeline_destroy(p);
        pf_engine_destroy(e);
        return PF_TEST_SKIPPED;
    }
    /* kind 0: pageable host frames; 1 (GPU): page-locked ones; 2 (test_loop_alloc_dev):
       device frames, two sets of inputs in turn (new pointers every frame) */
    int kinds = gpu ? 2 : 1;
#ifdef PF_LOOP_DEVICE
    cudaStream_t stream = NULL;
    if (gpu) {
        CHECK(cudaStreamCreate(&stream) == cudaSuccess);
        kinds = 3;
    }
#endif
    for (int kind = 0; kind < kinds; kind++) {
        pf_frame in[2][2], out[3];
        memset(out, 0, sizeof out);
        if (kind == 0) {
            in[0][0] = frame(W, H, 4, 1), in[0][1] = frame(W, H, 4, 2);
            out[0] = frame(W, H, 4, 0), out[2] = frame(W, H, 3, 0);
        } else if (kind == 1) {
            CHECK(pf_frame_alloc_host(e, W, H, PF_U8, 4, &in[0][0]) == PF_OK);
            CHECK(pf_frame_alloc_host(e, W, H, PF_U8, 4, &in[0][1]) == PF_OK);
            CHECK(pf_frame_alloc_host(e, W, H, PF_U8, 4, &out[0]) == PF_OK);
            CHECK(pf_frame_alloc_host(e, W, H, PF_U8, 3, &out[2]) == PF_OK);
            if (!in[0][0].data || !in[0][1].data || !out[0].data || !out[2].data)
                break;
            memset(in[0][0].data, 7, in[0][0].pitch * (size_t)H);
            memset(in[0][1].data, 200, in[0][1].pitch * (size_t)H);
        }
#ifdef PF_LOOP_DEVICE
        else {
            for (int k = 0; k < 5; k++) {
                pf_frame *f = k < 4 ? &in[k / 2][k % 2] : &out[0];
                memset(f, 0, sizeof *f);
                f->width = W, f->height = H, f->sample = PF_U8, f->channels = 4;
                CHECK(cudaMallocPitch(&f->data, &f->pitch, (size_t)W * 4, (size_t)H) ==
                      cudaSuccess);
                CHECK(cudaMemset2D(f->data, f->pitch, 40 * k, (size_t)W * 4, (size_t)H) ==
                      cudaSuccess);
            }
            out[2] = out[0];
            out[2].channels = 3;
            CHECK(cudaMallocPitch(&out[2].data, &out[2].pitch, (size_t)W * 3, (size_t)H) ==
                  cudaSuccess);
        }
#endif
        if (kind != 2)
            in[1][0] = in[0][0], in[1][1] = in[0][1];
        const char *what = kind == 0   ? "pageable host frames"
                           : kind == 1 ? "page-locked host frames"
                                       : "device frames";
        const char *amounts[] = {"0.1", "0.25", "-0.3"};
        long frame_no = 0;
#ifdef PF_LOOP_DEVICE
#define SUBMIT(t)                                                                                  \
    (kind == 2 ? pf_pipeline_submit_device(p, in[frame_no++ % 2], 2, out, 3, stream, (t))          \
               : pf_pipeline_submit(p, in[frame_no++ % 2], 2, out, 3, (t)))
#else
#define SUBMIT(t) pf_pipeline_submit(p, in[frame_no++ % 2], 2, out, 3, (t))
#endif
        for (int round = 0; round < 3; round++) {
            char key[] = "b.amount";
            CHECK(pf_pipeline_set_param(p, key, amounts[round]) == PF_OK);
            int ticket;
            /* the first frames after a change may build what the change needs (two: the
               device frames' two sets of inputs) */
            for (int f = 0; f < 2; f++) {
                CHECKF(SUBMIT(&ticket) == PF_OK, "%s", pf_pipeline_errmsg(p));
                CHECK(pf_pipeline_wait(p, ticket) == PF_OK);
            }
            atomic_store(&counted, 0);
            atomic_store(&counting, 1);
            for (int f = 0; f < 7; f++) {
                rc = SUBMIT(&ticket);
                if (rc == PF_OK)
                    rc = pf_pipeline_wait(p, ticket);
                if (rc != PF_OK)
                    break;
            }
            atomic_store(&counting, 0);
            CHECKF(rc == PF_OK, "%s", pf_pipeline_errmsg(p));
            long n = atomic_load(&counted);
            CHECKF(n == 0, "%s, round %d: 7 frames on the %s made %ld allocations", what, round,
                   gpu ? "GPU" : "CPU", n);
        }
        /* a parameter changed before every frame, as a real-time loop's slider does
           (pf_pipeline_set_float: no text to parse): the changes and the frames allocate
           nothing once the first two frames after the first change have run */
        for (int pass = 0; pass < 2 && rc == PF_OK; pass++) {
            atomic_store(&counted, 0);
            atomic_store(&counting, pass == 1);
            for (int f = 0; f < (pass ? 8 : 2) && rc == PF_OK; f++) {
                int ticket;
                rc = pf_pipeline_set_float(p, "b.amount", 0.05 * (f % 4) - 0.1);
                if (rc == PF_OK)
                    rc = SUBMIT(&ticket);
                if (rc == PF_OK)
                    rc = pf_pipeline_wait(p, ticket);
            }
            atomic_store(&counting, 0);
            CHECKF(rc == PF_OK, "%s", pf_pipeline_errmsg(p));
            long n = atomic_load(&counted);
            CHECKF(n == 0,
                   "%s: 8 frames, a parameter changed before each, on the %s made %ld allocations",
                   what, gpu ? "GPU" : "CPU", n);
        }
        /* two frames in flight at once, as a loop that overlaps frames runs (the same
           outputs: only the count is looked at); the first such frames warm up */
        for (int pass = 0; pass < 2; pass++) {
            int t[2];
            atomic_store(&counted, 0);
            atomic_store(&counting, pass == 1);
            for (int f = 0; f < 6 && rc == PF_OK; f++) {
                rc = SUBMIT(&t[f % 2]);
                if (rc == PF_OK && f > 0)
                    rc = pf_pipeline_wait(p, t[(f + 1) % 2]);
            }
            if (rc == PF_OK)
                rc = pf_pipeline_wait(p, t[1]);
            atomic_store(&counting, 0);
            CHECKF(rc == PF_OK, "%s", pf_pipeline_errmsg(p));
            long n = atomic_load(&counted);
            CHECKF(n == 0, "%s: 6 frames two in flight on the %s made %ld allocations", what,
                   gpu ? "GPU" : "CPU", n);
        }
#undef SUBMIT
        for (int i = 0; i < 2; i++) {
            if (kind == 0)
                free(in[0][i].data);
            else if (kind == 1)
                pf_frame_free_host(e, &in[0][i]);
        }
        if (kind == 0) {
            free(out[0].data);
            free(out[2].data);
        } else if (kind == 1) {
            pf_frame_free_host(e, &out[0]);
            pf_frame_free_host(e, &out[2]);
        }
#ifdef PF_LOOP_DEVICE
        if (kind == 2) {
            for (int k = 0; k < 4; k++)
                cudaFree(in[k / 2][k % 2].data);
            cudaFree(out[0].data);
            cudaFree(out[2].data);
        }
#endif
    }
#ifdef PF_LOOP_DEVICE
    if (stream)
        cudaStreamDestroy(stream);
#endif
    if (atomic_load(&in_launch) || atomic_load(&on_driver))
        printf("%s: not counted, the CUDA driver's own: %ld allocations inside cuGraphLaunch or "
               "cuGraphExecKernelNodeSetParams, "
               "%ld on its own threads\n",
               name, atomic_load(&in_launch), atomic_load(&on_driver));
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
    return pf_test_done(name);
#endif
}
