/* cli/bench.c: `pipefuse bench`: one pipeline in every execution mode, side by side.
 *
 * For each mode (CPU; CUDA eager and graph, each unfused and fused) it runs synthetic
 * frames and reports: launches per frame, median and p99 time of a frame run alone
 * (submit, then wait), host submit time, time per frame back to back (frames in
 * flight), effective bandwidth (the bytes a frame must move: its inputs and outputs,
 * once) against the device's copy bandwidth, the GPU busy fraction (kernel time from
 * CUDA events over the back-to-back frame time), and a verdict: launch-bound,
 * memory-bound or compute-bound, with its reason. CUDA modes use device frames, so
 * no PCIe transfer is timed: the pipeline is measured, not the bus.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "pipefuse/tools.h"

#ifdef PF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct bench_mode {
    const char *name;
    const char *backend, *graph, *fusion;
} bench_mode;

static const bench_mode modes[] = {
    {"cpu", "cpu", "false", "true"},
    {"cuda-eager-unfused", "cuda", "false", "false"},
    {"cuda-eager-fused", "cuda", "false", "true"},
    {"cuda-graph-unfused", "cuda", "true", "false"},
    {"cuda-graph-fused", "cuda", "true", "true"},
};
#define N_MODES ((int)(sizeof modes / sizeof modes[0]))

/* 0 when name is one of the modes; else -1 after saying which ones there are. */
static int check_mode(const char *name)
{
    const char *names[N_MODES];
    for (int m = 0; m < N_MODES; m++) {
        if (strcmp(name, modes[m].name) == 0)
            return 0;
        names[m] = modes[m].name;
    }
    fprintf(stderr, "pipefuse bench: --mode %s: unknown mode", name);
    cli_say_names(name, "modes", names, N_MODES);
    return -1;
}

typedef struct bench_result {
    int ran;
    char error[512];
    int launches;
    double median_ms, p99_ms, submit_us, throughput_ms, kernel_ms, gbps, copy_ratio, busy;
    char verdict[32], reason[256];
} bench_result;

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

/* Device-to-device copy bandwidth, read + write, over buffers larger than L2, the
   median of 20 copies. 0 without a device. */
static double copy_bandwidth(void)
{
#ifdef PF_HAVE_CUDA
    const size_t bytes = 512u << 20;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0, e1;
    double t[20], bw = 0;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(a);
        return 0;
    }
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    for (int i = 0; i < 20; i++) {
        float ms = 0;
        cudaEventRecord(e0, 0);
        cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        t[i] = ms;
    }
    qsort(t, 20, sizeof t[0], cmp_double);
    if (t[10] > 0)
        bw = 2.0 * (double)bytes / (t[10] * 1e-3);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return bw;
#else
    return 0;
#endif
}

/* A pipeline's inputs and outputs, at most (docs/pipeline-format.md, "Limits"). */
#define MAX_FRAMES 64

typedef struct bench_setup {
    pf_pipeline *p;
    int frames;
    pf_frame in[MAX_FRAMES], out[MAX_FRAMES];   /* host frames */
    pf_frame din[MAX_FRAMES], dout[MAX_FRAMES]; /* device frames */
    int n_in, n_out;
    double bytes; /* a frame's inputs and image outputs */
    void *stream;
} bench_setup;

static void verdict(bench_result *r, int cuda)
{
    if (!cuda) {
        snprintf(r->verdict, sizeof r->verdict, "cpu");
        if (r->copy_ratio > 0)
            snprintf(r->reason, sizeof r->reason,
                     "the CPU executor, at %.1f%% of the GPU's copy bandwidth",
                     r->copy_ratio * 100);
        else
            snprintf(r->reason, sizeof r->reason, "the CPU executor (no GPU to compare with)");
    } else if (r->busy < 0.5) {
        snprintf(r->verdict, sizeof r->verdict, "launch-bound");
        snprintf(r->reason, sizeof r->reason,
                 "kernels run %.0f%% of each frame's time; submission and waiting take the rest",
                 r->busy * 100);
    } else if (r->copy_ratio >= 0.5) {
        snprintf(r->verdict, sizeof r->verdict, "memory-bound");
        snprintf(r->reason, sizeof r->reason,
                 "moves its bytes at %.0f%% of copy bandwidth with the GPU %.0f%% busy",
                 r->copy_ratio * 100, r->busy * 100);
    } else {
        snprintf(r->verdict, sizeof r->verdict, "compute-bound");
        snprintf(r->reason, sizeof r->reason,
                 "the GPU is %.0f%% busy but moves data at only %.0f%% of copy bandwidth",
                 r->busy * 100, r->copy_ratio * 100);
    }
}

/* Submits one frame of the mode; device frames for CUDA. */
static int submit(bench_setup *b, int cuda, int *ticket)
{
    if (cuda)
        return pf_pipeline_submit_device(b->p, b->din, b->n_in, b->dout, b->n_out, b->stream,
                                         ticket);
    return pf_pipeline_submit(b->p, b->in, b->n_in, b->out, b->n_out, ticket);
}

static int sync_frame(bench_setup *b, int cuda, int ticket)
{
#ifdef PF_HAVE_CUDA
    if (cuda)
        return cudaStreamSynchronize((cudaStream_t)b->stream) == cudaSuccess
                   ? pf_pipeline_wait(b->p, ticket)
                   : PF_CUDA;
#endif
    return pf_pipeline_wait(b->p, ticket);
}

static void run_mode(bench_setup *b, const bench_mode *m, double copy_bw, bench_result *r)
{
    pf_pipeline *p = b->p;
    int cuda = strcmp(m->backend, "cuda") == 0;
    memset(r, 0, sizeof *r);
    if (pf_pipeline_set_option(p, "backend", m->backend) != PF_OK ||
        pf_pipeline_set_option(p, "graph", m->graph) != PF_OK ||
        pf_pipeline_set_option(p, "fusion", m->fusion) != PF_OK ||
        pf_pipeline_set_option(p, "profile", "false") != PF_OK) {
        snprintf(r->error, sizeof r->error, "%s", pf_pipeline_errmsg(p));
        return;
    }
    int frames = cuda ? b->frames : (b->frames < 20 ? b->frames : 20);
    double *lat = malloc(sizeof(double) * (size_t)frames);
    double *sub = malloc(sizeof(double) * (size_t)frames);
    if (!lat || !sub) {
        free(lat), free(sub);
        snprintf(r->error, sizeof r->error, "out of memory");
        return;
    }
    int ticket = 0, rc = PF_OK;
    /* Warm up: plan, measure bands, compile, capture every slot. */
    for (int i = 0; i < 8 && rc == PF_OK; i++) {
        rc = submit(b, cuda, &ticket);
        if (rc == PF_OK)
            rc = sync_frame(b, cuda, ticket);
    }
    /* A frame alone: latency and host submit time. */
    for (int i = 0; i < frames && rc == PF_OK; i++) {
        double t0 = now_ms();
        rc = submit(b, cuda, &ticket);
        double t1 = now_ms();
        if (rc == PF_OK)
            rc = sync_frame(b, cuda, ticket);
        lat[i] = now_ms() - t0;
        sub[i] = t1 - t0;
    }
    /* Back to back, frames in flight; waits only when a slot is needed again. */
    int slots = pf_pipeline_slots(p), *tickets = calloc((size_t)frames, sizeof(int));
    double t0 = now_ms();
    for (int i = 0; i < frames && rc == PF_OK && tickets; i++) {
        if (!cuda && i >= 1)
            rc = pf_pipeline_wait(p, tickets[i - 1]);
        if (cuda && i >= slots)
            rc = pf_pipeline_wait(p, tickets[i - slots]);
        if (rc == PF_OK)
            rc = submit(b, cuda, &tickets[i]);
    }
    for (int i = frames - slots > 0 ? frames - slots : 0; i < frames && rc == PF_OK && cuda; i++)
        rc = sync_frame(b, cuda, tickets[i]);
    if (rc == PF_OK && !cuda)
        rc = pf_pipeline_wait(p, tickets[frames - 1]);
    double total = now_ms() - t0;
    free(tickets);
    /* Kernel time of one frame, from events (a profiled, eager frame). */
    if (rc == PF_OK && cuda) {
        rc = pf_pipeline_set_option(p, "profile", "true");
        for (int i = 0; i < 2 && rc == PF_OK; i++) {
            rc = submit(b, cuda, &ticket);
            if (rc == PF_OK)
                rc = sync_frame(b, cuda, ticket);
        }
        for (int u = 0; u < pf_pipeline_unit_count(p) && rc == PF_OK; u++) {
            pf_unit_info ui;
            pf_pipeline_unit(p, u, &ui);
            r->kernel_ms += ui.measured_ms;
        }
        pf_pipeline_set_option(p, "profile", "false");
    }
    if (rc != PF_OK) {
        snprintf(r->error, sizeof r->error, "%s", pf_pipeline_errmsg(p));
        free(lat), free(sub);
        return;
    }
    pf_stats s;
    s.size = sizeof s;
    pf_pipeline_stats(p, &s);
    qsort(lat, (size_t)frames, sizeof(double), cmp_double);
    qsort(sub, (size_t)frames, sizeof(double), cmp_double);
    r->ran = 1;
    r->launches = s.launches_per_frame;
    r->median_ms = lat[frames / 2];
    r->p99_ms = lat[(int)(frames * 0.99) < frames ? (int)(frames * 0.99) : frames - 1];
    r->submit_us = sub[frames / 2] * 1e3;
    r->throughput_ms = total / frames;
    r->gbps = b->bytes / (r->throughput_ms * 1e-3) / 1e9;
    r->copy_ratio = copy_bw > 0 ? r->gbps * 1e9 / copy_bw : 0;
    r->busy = cuda && r->throughput_ms > 0 ? r->kernel_ms / r->throughput_ms : 1.0;
    if (r->busy > 1)
        r->busy = 1;
    verdict(r, cuda);
    free(lat), free(sub);
}

/* s as a JSON string on stdout: quotes, backslashes and control characters escaped, and
   a byte that is not UTF-8 (a file name may hold any) as U+FFFD, so that the document
   stays valid JSON whatever the pipeline's path or a message holds. */
static void json_str(const char *s)
{
    const unsigned char *c = (const unsigned char *)s;
    putchar('"');
    while (*c) {
        /* the length of a well-formed UTF-8 sequence at c, or 0 */
        int n = *c < 0x80                  ? 1
                : *c >= 0xC2 && *c <= 0xDF ? 2
                : *c >= 0xE0 && *c <= 0xEF ? 3
                : *c >= 0xF0 && *c <= 0xF4 ? 4
                                           : 0;
        for (int k = 1; k < n; k++)
            if ((c[k] & 0xC0) != 0x80)
                n = 0;
        if ((n == 3 && ((*c == 0xE0 && c[1] < 0xA0) || (*c == 0xED && c[1] > 0x9F))) ||
            (n == 4 && ((*c == 0xF0 && c[1] < 0x90) || (*c == 0xF4 && c[1] > 0x8F))))
            n = 0; /* overlong, a surrogate, or beyond U+10FFFF */
        if (n == 0) {
            fputs("\\ufffd", stdout);
            c++;
        } else if (*c == '"' || *c == '\\') {
            printf("\\%c", *c++);
        } else if (*c < 0x20) {
            printf("\\u%04x", *c++);
        } else {
            fwrite(c, 1, (size_t)n, stdout);
            c += n;
        }
    }
    putchar('"');
}

int cli_parse_format(const char *s, pf_sample *sample, int *channels)
{
    static const struct {
        const char *name;
        pf_sample s;
        int c;
    } f[] = {{"gray8", PF_U8, 1},   {"graya8", PF_U8, 2},  {"rgb8", PF_U8, 3},
             {"rgba8", PF_U8, 4},   {"gray16", PF_U16, 1}, {"graya16", PF_U16, 2},
             {"rgb16", PF_U16, 3},  {"rgba16", PF_U16, 4}, {"grayf", PF_F32, 1},
             {"grayaf", PF_F32, 2}, {"rgbf", PF_F32, 3},   {"rgbaf", PF_F32, 4}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (strcmp(s, f[i].name) == 0) {
            *sample = f[i].s;
            *channels = f[i].c;
            return 0;
        }
    return -1;
}

/* 0, or -1 with the reason in err. */
static int alloc_frames(bench_setup *b, pf_shape size, pf_sample sample, int channels, int cuda,
                        char *err, size_t err_size)
{
    pf_pipeline *p = b->p;
    pf_shape shapes[MAX_FRAMES];
    b->n_in = pf_pipeline_input_count(p);
    b->n_out = pf_pipeline_output_count(p);
    snprintf(err, err_size, "out of memory");
    if (b->n_in > MAX_FRAMES || b->n_out > MAX_FRAMES) {
        snprintf(err, err_size, "%d inputs and %d outputs; at most %d of each", b->n_in, b->n_out,
                 MAX_FRAMES);
        return -1;
    }
    for (int i = 0; i < b->n_in; i++)
        shapes[i] = size;
    pf_pipeline_set_option(p, "backend", "cpu");
    if (pf_pipeline_plan(p, shapes, b->n_in) != PF_OK) {
        snprintf(err, err_size, "%s", pf_pipeline_errmsg(p));
        return -1;
    }
    unsigned seed = 12345;
    for (int i = 0; i < b->n_in; i++) {
        if (pf_frame_alloc(&b->in[i], size.width, size.height, sample, channels) != PF_OK)
            return -1;
        for (size_t k = 0; k < b->in[i].pitch * (size_t)size.height; k++)
            ((unsigned char *)b->in[i].data)[k] =
                (unsigned char)((seed = seed * 1103515245 + 12345) >> 16);
        if (sample == PF_F32)
            for (size_t k = 0; k < b->in[i].pitch * (size_t)size.height / 4; k++)
                ((float *)b->in[i].data)[k] = (float)(k % 251) / 251.0f;
        b->bytes += (double)pf_frame_pixel_bytes(sample, channels) * size.width * size.height;
    }
    for (int o = 0; o < b->n_out; o++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, o, &oi);
        if (oi.kind != PF_OUTPUT_IMAGE)
            continue;
        if (pf_frame_alloc(&b->out[o], oi.shape.width, oi.shape.height, sample, channels) != PF_OK)
            return -1;
        b->bytes +=
            (double)pf_frame_pixel_bytes(sample, channels) * oi.shape.width * oi.shape.height;
    }
#ifdef PF_HAVE_CUDA
    if (cuda) {
        cudaStream_t st;
        snprintf(err, err_size, "cannot allocate device frames");
        if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess)
            return -1;
        b->stream = st;
        for (int i = 0; i < b->n_in; i++) {
            b->din[i] = b->in[i];
            if (cudaMalloc(&b->din[i].data, b->in[i].pitch * (size_t)size.height) != cudaSuccess ||
                cudaMemcpy(b->din[i].data, b->in[i].data, b->in[i].pitch * (size_t)size.height,
                           cudaMemcpyHostToDevice) != cudaSuccess)
                return -1;
        }
        for (int o = 0; o < b->n_out; o++) {
            b->dout[o] = b->out[o];
            if (b->out[o].data &&
                cudaMalloc(&b->dout[o].data, b->out[o].pitch * (size_t)b->out[o].height) !=
                    cudaSuccess)
                return -1;
        }
    }
#endif
    return 0;
}

static void free_frames(bench_setup *b)
{
    for (int i = 0; i < MAX_FRAMES; i++) {
        pf_frame_free(&b->in[i]);
#ifdef PF_HAVE_CUDA
        if (b->din[i].data)
            cudaFree(b->din[i].data);
#endif
    }
    for (int o = 0; o < MAX_FRAMES; o++) {
        pf_frame_free(&b->out[o]);
#ifdef PF_HAVE_CUDA
        if (b->dout[o].data)
            cudaFree(b->dout[o].data);
#endif
    }
#ifdef PF_HAVE_CUDA
    if (b->stream)
        cudaStreamDestroy((cudaStream_t)b->stream);
#endif
}

int cli_bench(int argc, char **argv, const cli_common *c)
{
    const char *file = NULL, *format = "rgba8", *only = NULL;
    pf_shape size = {1920, 1080};
    int frames = 200, json = 0;
    int ended = 0; /* after "--", every argument is the pipeline file */
    for (int i = 0; i < argc; i++) {
        if (ended || argv[i][0] != '-' || !argv[i][1]) {
            if (file) {
                fprintf(stderr,
                        "pipefuse bench: unexpected argument '%s': one pipeline file at most (see "
                        "pipefuse bench --help)\n",
                        argv[i]);
                return PF_EXIT_USAGE;
            }
            file = argv[i];
        } else if (strcmp(argv[i], "--") == 0) {
            ended = 1;
        } else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            if (cli_size_option("bench", argv[++i], &size) != 0)
                return PF_EXIT_USAGE;
        } else if (strcmp(argv[i], "--frames") == 0 && i + 1 < argc) {
            long long f;
            if (cli_parse_int(argv[++i], 3, 1000000, &f) != 0) {
                fprintf(stderr, "pipefuse bench: --frames %s: expected 3 to 1000000\n", argv[i]);
                return PF_EXIT_USAGE;
            }
            frames = (int)f;
        } else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            format = argv[++i];
        } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            return cli_unknown_option("bench", argv[i]);
        }
    }
    if (only && check_mode(only) != 0)
        return PF_EXIT_USAGE;
    pf_sample sample;
    int channels;
    if (cli_parse_format(format, &sample, &channels) != 0) {
        fprintf(stderr,
                "pipefuse bench: --format %s: unknown format (formats: gray8 graya8 rgb8 rgba8, "
                "the same with 16 or f)\n",
                format);
        return PF_EXIT_USAGE;
    }
    if (!file) {
        fprintf(stderr, "pipefuse bench: no pipeline file given (see pipefuse bench --help)\n");
        return PF_EXIT_USAGE;
    }
    pf_engine *e = cli_engine(c);
    if (!e)
        return PF_EXIT_USAGE;
    bench_setup b;
    memset(&b, 0, sizeof b);
    b.frames = frames;
    cli_doing("loading %s", file);
    int lrc = pf_pipeline_load_file(e, file, &b.p);
    cli_doing("%s", "");
    if (lrc != PF_OK) {
        fprintf(stderr, "pipefuse: %s\n", pf_engine_errmsg(e));
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    if (c->precision && pf_pipeline_set_option(b.p, "precision", c->precision) != PF_OK) {
        fprintf(stderr, "pipefuse bench: --precision %s: %s\n", c->precision,
                pf_pipeline_errmsg(b.p));
        pf_pipeline_destroy(b.p);
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    pf_stats pst;
    memset(&pst, 0, sizeof pst);
    pst.size = sizeof pst;
    const char *precision =
        pf_pipeline_stats(b.p, &pst) == PF_OK && pst.precision ? pst.precision : "exact";
    double copy_bw = copy_bandwidth();
    int cuda = copy_bw > 0;
    char device[256] = "none";
#ifdef PF_HAVE_CUDA
    struct cudaDeviceProp prop;
    if (cuda && cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        snprintf(device, sizeof device, "%s", prop.name);
#endif
    char why[4096];
    if (alloc_frames(&b, size, sample, channels, cuda, why, sizeof why) != 0) {
        fprintf(stderr, "pipefuse bench: %s: cannot set up %dx%d frames: %s\n", file, size.width,
                size.height, why);
        free_frames(&b);
        pf_pipeline_destroy(b.p);
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    bench_result res[N_MODES];
    memset(res, 0, sizeof res);
    for (int m = 0; m < N_MODES; m++) {
        if (only && strcmp(only, modes[m].name) != 0)
            continue;
        if (strcmp(modes[m].backend, "cuda") == 0 && !cuda) {
            snprintf(res[m].error, sizeof res[m].error, "no CUDA device");
            continue;
        }
        run_mode(&b, &modes[m], copy_bw, &res[m]);
    }
    if (json) {
        printf("{\n  \"pipeline\": ");
        json_str(file);
        printf(",\n  \"size\": [%d, %d],\n  \"format\": \"%s\",\n  \"frames\": %d,\n"
               "  \"device\": ",
               size.width, size.height, format, frames);
        json_str(device);
        printf(",\n  \"precision\": \"%s\",\n  \"copy_gbps\": %.1f,\n  \"bytes_per_frame\": "
               "%.0f,\n  \"modes\": [",
               precision, copy_bw / 1e9, b.bytes);
        int first = 1;
        for (int m = 0; m < N_MODES; m++) {
            bench_result *r = &res[m];
            if (!r->ran && !r->error[0])
                continue;
            printf("%s\n    {\"mode\": \"%s\"", first ? "" : ",", modes[m].name);
            first = 0;
            if (!r->ran) {
                printf(", \"error\": ");
                json_str(r->error);
                printf("}");
                continue;
            }
            printf(", \"launches_per_frame\": %d, \"median_ms\": %.6f, \"p99_ms\": %.6f, "
                   "\"submit_us\": %.3f, \"throughput_ms\": %.6f, \"kernel_ms\": %.6f, "
                   "\"gbps\": %.2f, \"copy_ratio\": %.4f, \"busy\": %.4f, \"verdict\": \"%s\", "
                   "\"reason\": ",
                   r->launches, r->median_ms, r->p99_ms, r->submit_us, r->throughput_ms,
                   r->kernel_ms, r->gbps, r->copy_ratio, r->busy, r->verdict);
            json_str(r->reason);
            printf("}");
        }
        printf("\n  ]\n}\n");
    } else {
        printf("%s, %dx%d %s, %d frames; device: %s; precision %s; copy bandwidth %.0f GB/s; a "
               "frame must move %.1f MB\n",
               file, size.width, size.height, format, frames, device, precision, copy_bw / 1e9,
               b.bytes / 1e6);
        printf("%-19s %8s %10s %10s %10s %11s %9s %6s %6s  %s\n", "mode", "launches", "median ms",
               "p99 ms", "submit us", "frame ms", "GB/s", "copy", "busy", "verdict");
        for (int m = 0; m < N_MODES; m++) {
            bench_result *r = &res[m];
            if (!r->ran) {
                if (r->error[0])
                    printf("%-19s (not run: %s)\n", modes[m].name, r->error);
                continue;
            }
            printf("%-19s %8d %10.4f %10.4f %10.2f %11.4f %9.1f %5.0f%% %5.0f%%  %s\n",
                   modes[m].name, r->launches, r->median_ms, r->p99_ms, r->submit_us,
                   r->throughput_ms, r->gbps, r->copy_ratio * 100, r->busy * 100, r->verdict);
            printf("%-19s %s\n", "", r->reason);
        }
        printf("launches: kernels per frame; median/p99: one frame submitted and waited for; "
               "frame ms: back to back, %d in flight; busy: kernel time (CUDA events) over frame "
               "ms\n",
               pf_pipeline_slots(b.p));
    }
    int failed = 0;
    for (int m = 0; m < N_MODES; m++)
        failed |= !res[m].ran && res[m].error[0] && strcmp(res[m].error, "no CUDA device") != 0;
    free_frames(&b);
    pf_pipeline_destroy(b.p);
    pf_engine_destroy(e);
    return failed ? PF_EXIT_FAILED : PF_EXIT_OK;
}
