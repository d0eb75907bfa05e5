/* samples/realtime/realtime.c: a real-time frame loop on the pipefuse C API.
 *
 * What an application does: load a pipeline once, get its frame buffers once, then per
 * frame submit an input and collect finished frames without blocking, so that the
 * uploads, kernels and downloads of consecutive frames overlap. The three kinds of
 * host frames are here (docs/realtime.md):
 *
 *   pageable   (default) the application's malloc'd buffers: the engine stages them
 *              through its own pinned memory, copying with several threads;
 *   --pinned   buffers from pf_frame_alloc_host: the GPU reads and writes them by DMA,
 *              nothing is copied on the application's thread;
 *   --register the application's malloc'd buffers registered once with
 *              pf_engine_register_host: DMA as for --pinned;
 *   --device   device buffers (cudaMalloc) on the application's CUDA stream: no copies.
 *
 * The input frames are filled before the loop (the time that takes is printed apart):
 * the figures are the engine's. Each frame is collected with pf_pipeline_poll as soon
 * as it is done (its latency is submit to that moment), or with pf_pipeline_wait when
 * its buffers are needed again.
 *
 *     realtime [PIPELINE | --stage OP] [--frames N] [--size WxH] [--in-flight K]
 *              [--pinned | --register | --device] [--backend auto|cpu|cuda]
 *              [--fps F] [--param ID.NAME] [--floor] [--json]
 *
 * --fps paces submissions (a camera's rate) instead of running flat out, which shows
 * latency rather than throughput; --param changes that parameter every frame (it costs
 * a copy of the parameter block, not a re-plan); --floor also measures the PCIe floor
 * (pinned upload and download of the frame's bytes, overlapped) and host memcpy of the
 * frame on one thread and on all cores; --json prints one JSON object instead of text.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipefuse/pipefuse.h"

#ifdef PF_SAMPLE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_IN_FLIGHT 8
#define MAX_OUTPUTS   16

enum mode { PAGEABLE, PINNED, REGISTERED, DEVICE };
static const char *const mode_names[] = {"pageable", "pinned", "registered", "device"};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "realtime: %s: %s\n", what, msg);
    exit(1);
}

/* The engine's and the pipeline's messages already start with the pipeline's name. */
static void die_msg(const char *msg)
{
    fprintf(stderr, "realtime: %s\n", msg);
    exit(1);
}

/* A synthetic frame: a gradient that moves with the frame number, so every frame
   differs the way camera frames do. */
static void fill(unsigned char *data, size_t pitch, int w, int h, int n)
{
    for (int y = 0; y < h; y++) {
        unsigned char *row = data + (size_t)y * pitch;
        for (int x = 0; x < w; x++) {
            row[4 * x + 0] = (unsigned char)(x + n);
            row[4 * x + 1] = (unsigned char)(y + 2 * n);
            row[4 * x + 2] = (unsigned char)((x ^ y) + n);
            row[4 * x + 3] = 255;
        }
    }
}

/* ---- Baselines: host memcpy on one thread and on several, the PCIe floor ---------------- */

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t bytes;
} copy_part;

static void *copy_main(void *arg)
{
    copy_part *c = arg;
    memcpy(c->dst, c->src, c->bytes);
    return NULL;
}

/* Median time of copying bytes between two prefaulted buffers with threads threads. */
static double memcpy_ms(size_t bytes, int threads)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b)
        die("memcpy baseline", "out of memory");
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double t[7];
    for (int r = 0; r < 7; r++) {
        pthread_t tid[64];
        copy_part part[64];
        size_t per = (bytes / (size_t)threads + 4095) & ~(size_t)4095;
        double t0 = now_ms();
        int n = 0;
        for (size_t off = 0; off < bytes && n < threads; off += per, n++) {
            part[n] = (copy_part){b + off, a + off, off + per < bytes ? per : bytes - off};
            if (n > 0 && pthread_create(&tid[n], NULL, copy_main, &part[n]) != 0)
                die("memcpy baseline", "cannot start a thread");
        }
        copy_main(&part[0]);
        for (int k = 1; k < n; k++)
            pthread_join(tid[k], NULL);
        t[r] = now_ms() - t0;
    }
    free(a);
    free(b);
    return median(t, 7);
}

typedef struct floor_ms {
    double h2d, d2h, both; /* one frame's bytes: up alone, down alone, both overlapped */
} floor_ms;

#ifdef PF_SAMPLE_CUDA
#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            die(#call, cudaGetErrorString(e_));                                                    \
    } while (0)

/* Pinned host <-> device copies of bytes on two streams, the median of 9 rounds of 10. */
static floor_ms pcie_floor(size_t bytes)
{
    floor_ms f = {-1, -1, -1};
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return f; /* no device: no floor */
    }
    void *hu, *hd, *du, *dd;
    cudaStream_t su, sd;
    cudaEvent_t e0, e1;
    CK(cudaHostAlloc(&hu, bytes, cudaHostAllocDefault));
    CK(cudaHostAlloc(&hd, bytes, cudaHostAllocDefault));
    CK(cudaMalloc(&du, bytes));
    CK(cudaMalloc(&dd, bytes));
    CK(cudaStreamCreateWithFlags(&su, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&sd, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    memset(hu, 1, bytes);
    memset(hd, 2, bytes);
    for (int which = 0; which < 3; which++) {
        double t[9];
        for (int r = 0; r < 9; r++) {
            CK(cudaDeviceSynchronize()); /* a baseline, outside any frame loop */
            double t0 = now_ms();
            for (int k = 0; k < 10; k++) {
                if (which != 1)
                    CK(cudaMemcpyAsync(du, hu, bytes, cudaMemcpyHostToDevice, su));
                if (which != 0)
                    CK(cudaMemcpyAsync(hd, dd, bytes, cudaMemcpyDeviceToHost, sd));
            }
            CK(cudaStreamSynchronize(su));
            CK(cudaStreamSynchronize(sd));
            t[r] = (now_ms() - t0) / 10;
        }
        double m = median(t, 9);
        if (which == 0)
            f.h2d = m;
        else if (which == 1)
            f.d2h = m;
        else
            f.both = m;
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaStreamDestroy(su), cudaStreamDestroy(sd);
    cudaFreeHost(hu), cudaFreeHost(hd), cudaFree(du), cudaFree(dd);
    return f;
}
#endif

/* ---- Frame buffers of each kind ------------------------------------------------------ */

typedef struct ring_entry {
    pf_frame in, out[MAX_OUTPUTS];
} ring_entry;

static pf_frame make_frame(pf_engine *e, enum mode m, int w, int h)
{
    pf_frame f = {NULL, w, h, (size_t)w * 4, PF_U8, 4};
    size_t bytes = f.pitch * (size_t)h;
    if (m == PINNED) {
        if (pf_frame_alloc_host(e, w, h, PF_U8, 4, &f) != PF_OK)
            die_msg(pf_engine_errmsg(e)); /* it names the call */
    } else if (m == DEVICE) {
#ifdef PF_SAMPLE_CUDA
        CK(cudaMalloc(&f.data, bytes));
#endif
    } else {
        /* Whole pages: CUDA page-locks whole pages, so a registered buffer must not share
           its last page with another buffer (or the allocator's bookkeeping). */
        bytes = (bytes + 4095) & ~(size_t)4095;
        if (posix_memalign(&f.data, 4096, bytes) != 0)
            die("frame", "out of memory");
        memset(f.data, 0, bytes); /* fault the pages in, as a reused buffer would be */
        if (m == REGISTERED && pf_engine_register_host(e, f.data, bytes) != PF_OK)
            die_msg(pf_engine_errmsg(e)); /* it names the call and the range */
    }
    return f;
}

static void free_frame(pf_engine *e, enum mode m, pf_frame *f)
{
    if (!f->data)
        return;
    if (m == PINNED) {
        pf_frame_free_host(e, f);
        return;
    }
    if (m == DEVICE) {
#ifdef PF_SAMPLE_CUDA
        cudaFree(f->data);
#endif
        return;
    }
    if (m == REGISTERED)
        pf_engine_unregister_host(e, f->data);
    free(f->data);
}

int main(int argc, char **argv)
{
    const char *file = "pipelines/demo.json", *stage = NULL, *backend = "auto", *param = NULL;
    int frames = 300, width = 1920, height = 1080, in_flight = 3, json = 0, want_floor = 0;
    double fps = 0;
    enum mode mode = PAGEABLE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--frames") && v)
            frames = atoi(argv[++i]);
        else if (!strcmp(a, "--size") && v && sscanf(v, "%dx%d", &width, &height) == 2)
            i++;
        else if (!strcmp(a, "--backend") && v)
            backend = argv[++i];
        else if (!strcmp(a, "--param") && v)
            param = argv[++i];
        else if (!strcmp(a, "--stage") && v)
            stage = argv[++i];
        else if (!strcmp(a, "--in-flight") && v)
            in_flight = atoi(argv[++i]);
        else if (!strcmp(a, "--fps") && v)
            fps = atof(argv[++i]);
        else if (!strcmp(a, "--pinned"))
            mode = PINNED;
        else if (!strcmp(a, "--register"))
            mode = REGISTERED;
        else if (!strcmp(a, "--device"))
            mode = DEVICE;
        else if (!strcmp(a, "--floor"))
            want_floor = 1;
        else if (!strcmp(a, "--json"))
            json = 1;
        else if (a[0] != '-')
            file = a;
        else {
            fprintf(stderr, "usage: realtime [PIPELINE | --stage OP] [--frames N] [--size WxH] "
                            "[--in-flight K] [--pinned | --register | --device] "
                            "[--backend auto|cpu|cuda] [--fps F] [--param ID.NAME] [--floor] "
                            "[--json]\n");
            return 2;
        }
    }
    if (frames < 1 || width < 1 || height < 1 || in_flight < 1 || in_flight > MAX_IN_FLIGHT ||
        fps < 0) {
        fprintf(stderr, "realtime: bad --frames, --size, --in-flight (1-%d) or --fps\n",
                MAX_IN_FLIGHT);
        return 2;
    }
#ifndef PF_SAMPLE_CUDA
    if (mode == DEVICE) { /* --floor without CUDA measures host memcpy only */
        fprintf(stderr, "realtime: --device needs a build with CUDA\n");
        return 2;
    }
#endif

    /* Once: engine, pipeline, options, buffers. */
    pf_engine *e = NULL;
    if (pf_engine_create(NULL, &e) != PF_OK)
        die("engine", pf_engine_errmsg(e));
    pf_pipeline *p = NULL;
    char text[512];
    if (stage) {
        snprintf(text, sizeof text,
                 "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": [{\"id\": \"s\", "
                 "\"op\": \"%s\"}], \"outputs\": {\"out\": \"s\"}}",
                 stage);
        file = stage;
    }
    if ((stage ? pf_pipeline_load_string(e, text, stage, &p)
               : pf_pipeline_load_file(e, file, &p)) != PF_OK)
        die_msg(pf_engine_errmsg(e));
    char slots[8];
    snprintf(slots, sizeof slots, "%d", in_flight);
    if (pf_pipeline_set_option(p, "backend", backend) != PF_OK ||
        pf_pipeline_set_option(p, "slots", slots) != PF_OK)
        die_msg(pf_pipeline_errmsg(p));
    pf_shape shape = {width, height};
    if (pf_pipeline_input_count(p) != 1)
        die(file, "the pipeline must have one input");
    if (pf_pipeline_plan(p, &shape, 1) != PF_OK)
        die_msg(pf_pipeline_errmsg(p));
    int n_out = pf_pipeline_output_count(p);
    if (n_out > MAX_OUTPUTS)
        die(file, "too many outputs");
    ring_entry ring[MAX_IN_FLIGHT];
    memset(ring, 0, sizeof ring);
    unsigned char *host_fill = malloc((size_t)width * 4 * (size_t)height);
    if (!host_fill)
        die("frame", "out of memory");
    double fill_ms = 0;
    for (int k = 0; k < in_flight; k++) {
        ring[k].in = make_frame(e, mode, width, height);
        double t0 = now_ms();
        if (mode == DEVICE) {
            fill(host_fill, (size_t)width * 4, width, height, k);
#ifdef PF_SAMPLE_CUDA
            CK(cudaMemcpy(ring[k].in.data, host_fill, (size_t)width * 4 * (size_t)height,
                          cudaMemcpyHostToDevice));
#endif
        } else {
            fill(ring[k].in.data, ring[k].in.pitch, width, height, k);
        }
        fill_ms += (now_ms() - t0) / in_flight;
        for (int o = 0; o < n_out; o++) {
            pf_output_info oi;
            if (pf_pipeline_output_info(p, o, &oi) == PF_OK && oi.kind == PF_OUTPUT_IMAGE)
                ring[k].out[o] = make_frame(e, mode, oi.shape.width, oi.shape.height);
        }
    }
    void *stream = NULL;
#ifdef PF_SAMPLE_CUDA
    cudaStream_t app_stream = NULL;
    if (mode == DEVICE) {
        CK(cudaStreamCreateWithFlags(&app_stream, cudaStreamNonBlocking));
        stream = app_stream;
    }
#endif

    /* The loop. Frame n uses ring entry n % K, so before submitting it the frame that
       used the entry last (n - K) must be complete; every frame done meanwhile is
       collected by polling, oldest first. Ten frames warm up first (first captures,
       lazy module loading); they are not in the figures. */
    const int warmup = 10;
    int total = frames + warmup;
    double *t_sub = calloc((size_t)total, sizeof(double)),
           *t_done = calloc((size_t)total, sizeof(double));
    int *ticket = calloc((size_t)total, sizeof(int));
    if (!t_sub || !t_done || !ticket)
        die("loop", "out of memory");
    int oldest = 0; /* frames before it are collected */
    double submit_ms = 0, collect_ms = 0, t0 = 0;
    pf_stats warm = {.size = sizeof warm};
    for (int n = 0; n <= total; n++) {
        if (n == warmup) { /* the figures start here, with nothing in flight */
            for (; oldest < n; oldest++) {
                if (pf_pipeline_wait(p, ticket[oldest]) != PF_OK)
                    die_msg(pf_pipeline_errmsg(p));
                t_done[oldest] = now_ms();
            }
            pf_pipeline_stats(p, &warm);
            submit_ms = collect_ms = 0;
            t0 = now_ms();
        }
        /* Collect: what is done, then (blocking) what frees the entry frame n needs. */
        double tc = now_ms();
        while (oldest < n) {
            int must = n < total && oldest <= n - in_flight;
            int rc =
                must ? pf_pipeline_wait(p, ticket[oldest]) : pf_pipeline_poll(p, ticket[oldest]);
            if (rc == PF_NOT_READY)
                break;
            if (rc != PF_OK)
                die_msg(pf_pipeline_errmsg(p));
            t_done[oldest++] = now_ms();
        }
        if (n == total) {
            for (; oldest < total; oldest++) {
                if (pf_pipeline_wait(p, ticket[oldest]) != PF_OK)
                    die_msg(pf_pipeline_errmsg(p));
                t_done[oldest] = now_ms();
            }
            collect_ms += now_ms() - tc;
            break;
        }
        collect_ms += now_ms() - tc;
        if (fps > 0 && n >= warmup) { /* a camera: frame n arrives at t0 + n / fps */
            double due = t0 + (n - warmup) * 1e3 / fps, left = due - now_ms();
            if (left > 0)
                nanosleep(&(struct timespec){(time_t)(left / 1e3), (long)(fmod(left, 1e3) * 1e6)},
                          NULL);
        }
        if (param) {
            char v[32];
            snprintf(v, sizeof v, "%.4f", 0.05 + 0.05 * sin(n * 0.1)); /* the live change */
            if (pf_pipeline_set_param(p, param, v) != PF_OK)
                die_msg(pf_pipeline_errmsg(p));
        }
        ring_entry *r = &ring[n % in_flight];
        t_sub[n] = now_ms();
        int rc = mode == DEVICE
                     ? pf_pipeline_submit_device(p, &r->in, 1, r->out, n_out, stream, &ticket[n])
                     : pf_pipeline_submit(p, &r->in, 1, r->out, n_out, &ticket[n]);
        if (rc != PF_OK)
            die_msg(pf_pipeline_errmsg(p));
        submit_ms += now_ms() - t_sub[n];
    }
    double wall = now_ms() - t0;

    pf_stats s = {.size = sizeof s};
    pf_pipeline_stats(p, &s);
    double *lat = malloc(sizeof(double) * (size_t)frames);
    for (int n = 0; n < frames; n++)
        lat[n] = t_done[warmup + n] - t_sub[warmup + n];
    qsort(lat, (size_t)frames, sizeof(double), cmp_double);
    double p50 = lat[frames / 2], p99 = lat[(int)(frames * 0.99)];
    size_t bytes = (size_t)width * 4 * (size_t)height;
    floor_ms fl = {-1, -1, -1}; /* negative: not measured */
#ifdef PF_SAMPLE_CUDA
    if (want_floor)
        fl = pcie_floor(bytes);
#endif
    /* Host memcpy on one thread, and the fastest over 2, 4, ... up to every core. */
    double mc1 = 0, mcn = 0;
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN), best = 1;
    cores = cores < 1 ? 1 : cores > 64 ? 64 : cores;
    if (want_floor) {
        mc1 = mcn = memcpy_ms(bytes, 1);
        for (int t = 2; t < 2 * cores; t *= 2) {
            double m = memcpy_ms(bytes, t < cores ? t : cores);
            if (m < mcn) {
                mcn = m;
                best = t < cores ? t : cores;
            }
        }
    }
    unsigned long long allocs = s.allocations - warm.allocations,
                       syncs = s.device_syncs - warm.device_syncs;
    if (json) {
        printf("{\"pipeline\": \"%s\", \"width\": %d, \"height\": %d, \"mode\": \"%s\", "
               "\"backend\": \"%s\", \"in_flight\": %d, \"frames\": %d, \"fps_target\": %g, "
               "\"ms_per_frame\": %.4f, \"fps\": %.1f, \"p50_ms\": %.4f, \"p99_ms\": %.4f, "
               "\"submit_ms\": %.4f, \"collect_ms\": %.4f, \"fill_ms\": %.4f, "
               "\"allocations_in_loop\": %llu, \"device_syncs_in_loop\": %llu",
               file, width, height, mode_names[mode], s.backend, in_flight, frames, fps,
               wall / frames, frames / (wall / 1e3), p50, p99, submit_ms / frames,
               collect_ms / frames, fill_ms, allocs, syncs);
        if (want_floor && fl.both >= 0)
            printf(", \"h2d_ms\": %.4f, \"d2h_ms\": %.4f, \"pcie_floor_ms\": %.4f", fl.h2d, fl.d2h,
                   fl.both);
        if (want_floor)
            printf(", \"frame_bytes\": %zu, \"memcpy_ms\": %.4f, \"memcpy_best_ms\": %.4f, "
                   "\"memcpy_best_threads\": %d",
                   bytes, mc1, mcn, best);
        printf("}\n");
    } else {
        printf("pipeline %s, %dx%d RGBA8, backend %s, %s frames, %d in flight%s\n", file, width,
               height, s.backend, mode_names[mode], in_flight, fps > 0 ? ", paced" : "");
        printf("application fill (not in the figures): %.3f ms per frame\n", fill_ms);
        printf("engine: %d frames, %.3f ms per frame (%.1f frames/s)%s\n", frames, wall / frames,
               frames / (wall / 1e3), fps > 0 ? ", paced by --fps" : "");
        printf("latency, submit to collected: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", p50, p99,
               lat[frames - 1]);
        printf("the application's thread, per frame: submit %.3f ms, collect %.3f ms\n",
               submit_ms / frames, collect_ms / frames);
        printf("per frame: %d launches, %d units, %d streams; in the loop: %llu allocations, "
               "%llu device synchronisations\n",
               s.launches_per_frame, s.units_per_frame, s.streams, allocs, syncs);
        if (want_floor && fl.both >= 0)
            printf("PCIe for %.1f MB, pinned: up %.3f ms, down %.3f ms, both overlapped %.3f ms "
                   "(the floor)\n",
                   bytes / 1e6, fl.h2d, fl.d2h, fl.both);
        else if (want_floor)
            printf("PCIe floor: not measured (no CUDA device, or a build without CUDA)\n");
        if (want_floor)
            printf("host memcpy of %.1f MB: %.3f ms on 1 thread, %.3f ms at best (%d threads)\n",
                   bytes / 1e6, mc1, mcn, best);
    }
    for (int k = 0; k < in_flight; k++) {
        free_frame(e, mode, &ring[k].in);
        for (int o = 0; o < MAX_OUTPUTS; o++)
            free_frame(e, mode, &ring[k].out[o]);
    }
#ifdef PF_SAMPLE_CUDA
    if (app_stream)
        cudaStreamDestroy(app_stream);
#endif
    free(lat), free(t_sub), free(t_done), free(ticket), free(host_fill);
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
    return 0;
}
