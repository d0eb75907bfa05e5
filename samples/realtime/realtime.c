/* samples/realtime/realtime.c: a real-time frame loop on the pipefuse C API.
 *
 * What an application does: load a pipeline once, then per frame fill an input,
 * submit it, and collect the frame submitted a few frames earlier, so that uploads,
 * compute and downloads of consecutive frames overlap. A parameter is changed live
 * every frame; that costs nothing but a copy of the parameter block, because
 * parameters live in device memory and the captured CUDA Graph reads them there.
 *
 *     realtime [PIPELINE] [--frames N] [--size WxH] [--backend auto|cpu|cuda]
 *              [--param ID.NAME] [--in-flight K]
 *
 * Prints frames per second, latency percentiles (submit to outputs ready) and the
 * engine's counters: allocations and device-wide synchronisations in the loop are
 * expected to be zero.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipefuse/pipefuse.h"

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

/* A synthetic frame: a gradient that moves with the frame number, so every frame
   differs the way camera frames do. */
static void fill(pf_frame *f, int n)
{
    for (int y = 0; y < f->height; y++) {
        unsigned char *row = (unsigned char *)f->data + (size_t)y * f->pitch;
        for (int x = 0; x < f->width; x++) {
            row[4 * x + 0] = (unsigned char)(x + n);
            row[4 * x + 1] = (unsigned char)(y + 2 * n);
            row[4 * x + 2] = (unsigned char)((x ^ y) + n);
            row[4 * x + 3] = 255;
        }
    }
}

int main(int argc, char **argv)
{
    const char *file = "pipelines/demo.json", *backend = "auto", *param = "bright.amount";
    int frames = 300, width = 1920, height = 1080, in_flight = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--frames") && i + 1 < argc)
            frames = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            sscanf(argv[++i], "%dx%d", &width, &height);
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--param") && i + 1 < argc)
            param = argv[++i];
        else if (!strcmp(argv[i], "--in-flight") && i + 1 < argc)
            in_flight = atoi(argv[++i]);
        else if (argv[i][0] != '-')
            file = argv[i];
        else {
            fprintf(stderr, "usage: realtime [PIPELINE] [--frames N] [--size WxH] "
                            "[--backend auto|cpu|cuda] [--param ID.NAME] [--in-flight K]\n");
            return 2;
        }
    }
    if (frames < 1 || width < 1 || height < 1 || in_flight < 1 || in_flight > 8) {
        fprintf(stderr, "realtime: bad --frames, --size or --in-flight\n");
        return 2;
    }

    /* Once: engine, pipeline, options, buffers. */
    pf_engine *e = NULL;
    if (pf_engine_create(NULL, &e) != PF_OK) {
        fprintf(stderr, "realtime: %s\n", pf_engine_errmsg(e));
        pf_engine_destroy(e);
        return 1;
    }
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_file(e, file, &p) != PF_OK) {
        fprintf(stderr, "realtime: %s\n", pf_engine_errmsg(e));
        pf_engine_destroy(e);
        return 1;
    }
    char slots[8];
    snprintf(slots, sizeof slots, "%d", in_flight);
    if (pf_pipeline_set_option(p, "backend", backend) != PF_OK ||
        pf_pipeline_set_option(p, "slots", slots) != PF_OK) {
        fprintf(stderr, "realtime: %s\n", pf_pipeline_errmsg(p));
        return 1;
    }
    pf_shape shape = {width, height};
    if (pf_pipeline_input_count(p) != 1 || pf_pipeline_plan(p, &shape, 1) != PF_OK) {
        fprintf(stderr, "realtime: %s\n",
                pf_pipeline_input_count(p) != 1 ? "the pipeline must have one input"
                                                : pf_pipeline_errmsg(p));
        return 1;
    }
    int n_out = pf_pipeline_output_count(p);
    pf_frame in[8], out[8][16];
    memset(out, 0, sizeof out);
    for (int k = 0; k < in_flight; k++) {
        in[k] = (pf_frame){
            malloc((size_t)width * 4 * height), width, height, (size_t)width * 4, PF_U8, 4};
        for (int o = 0; o < n_out && o < 16; o++) {
            pf_output_info oi;
            pf_pipeline_output_info(p, o, &oi);
            if (oi.kind == PF_OUTPUT_IMAGE)
                out[k][o] = (pf_frame){malloc((size_t)oi.shape.width * 4 * oi.shape.height),
                                       oi.shape.width,
                                       oi.shape.height,
                                       (size_t)oi.shape.width * 4,
                                       PF_U8,
                                       4};
        }
    }
    double *latency = malloc(sizeof(double) * (size_t)frames),
           *t_submit = malloc(sizeof(double) * (size_t)frames);
    int *ticket = malloc(sizeof(int) * (size_t)frames);

    /* The loop: submit frame n, then collect frame n - (in_flight - 1). */
    double t0 = now_ms();
    pf_stats warm;
    warm.size = sizeof warm;
    for (int n = 0; n < frames + in_flight - 1; n++) {
        if (n < frames) {
            int k = n % in_flight;
            fill(&in[k], n);
            char v[32];
            snprintf(v, sizeof v, "%.4f", 0.05 + 0.05 * sin(n * 0.1)); /* the live change */
            if (pf_pipeline_set_param(p, param, v) != PF_OK) {
                fprintf(stderr, "realtime: %s\n", pf_pipeline_errmsg(p));
                return 1;
            }
            t_submit[n] = now_ms();
            if (pf_pipeline_submit(p, &in[k], 1, out[k], n_out, &ticket[n]) != PF_OK) {
                fprintf(stderr, "realtime: frame %d: %s\n", n, pf_pipeline_errmsg(p));
                return 1;
            }
            if (n == in_flight) /* every slot has run once: the steady state starts */
                pf_pipeline_stats(p, &warm);
        }
        int done = n - (in_flight - 1);
        if (done >= 0) {
            if (pf_pipeline_wait(p, ticket[done]) != PF_OK) {
                fprintf(stderr, "realtime: frame %d: %s\n", done, pf_pipeline_errmsg(p));
                return 1;
            }
            latency[done] = now_ms() - t_submit[done];
        }
    }
    double total = now_ms() - t0;

    pf_stats s;
    s.size = sizeof s;
    pf_pipeline_stats(p, &s);
    qsort(latency, (size_t)frames, sizeof(double), cmp_double);
    printf("pipeline %s, %dx%d, backend %s, %d frames, %d in flight\n", file, width, height,
           s.backend, frames, in_flight);
    printf("throughput: %.1f frames/s (%.3f ms per frame)\n", frames / (total / 1e3),
           total / frames);
    printf("latency ms: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", latency[frames / 2],
           latency[(int)(frames * 0.9)], latency[(int)(frames * 0.99)], latency[frames - 1]);
    printf("per frame: %d launches, %d units, %d streams\n", s.launches_per_frame,
           s.units_per_frame, s.streams);
    if (frames > in_flight)
        printf("in the loop: %llu allocations, %llu device synchronisations, %llu plans, "
               "%llu graph captures\n",
               s.allocations - warm.allocations, s.device_syncs - warm.device_syncs,
               s.plans - warm.plans, s.graph_captures - warm.graph_captures);
    for (int k = 0; k < in_flight; k++) {
        free(in[k].data);
        for (int o = 0; o < 16; o++)
            free(out[k][o].data);
    }
    free(latency), free(t_submit), free(ticket);
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
    return 0;
}
