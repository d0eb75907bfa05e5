/* cli/batch/backend.c: --backend auto's choice, before CUDA is touched */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "worker.h"

/* ---- --backend auto ------------------------------------------------------------------------------- */

/* What the GPU costs a worker before its first frame: the CUDA context, the fused
   kernels (from the kernel cache, or NVRTC), each lane's engine and its plans. Measured
   on an H200 (docs/benchmarks.md, the batch on the GPU): 0.7 to 1.0 s more than the
   same batch on the CPU when the pipeline itself costs nothing. */
#define GPU_START_MS 1000.0

void batch_lanes(int cpu, int *lanes, int *threads, int *cores)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (W.o->common->threads > 0 && W.o->common->threads < n)
        n = W.o->common->threads;
    *lanes = W.o->lanes ? W.o->lanes : cpu ? (int)(n < 8 ? n : 8) : 1;
    if (*lanes > MAX_LANES)
        *lanes = MAX_LANES;
    *threads = (int)(n / *lanes > 0 ? n / *lanes : 1);
    *cores = (int)n;
}

/* The CPU batch's time for the pipeline's work, in ms per pixel of the batch: one frame
   at 512x512 RGB8 timed with a lane's threads (batch_lanes), over the lanes that run files side by
   side (a frame with every thread would count the threads' start and join, which a
   batch of small files does not pay). The first run (which plans, so it is the slower)
   decides where it is far from GPU_START_MS either way, else the faster of two more; 0
   when it cannot be measured. */
static double cpu_ms_per_pixel(unsigned long long batch_px)
{
    pf_pipeline *p = NULL;
    char err[512];
    W.backend = "cpu";
    int rc = load_pipeline(W.e, &p, err, sizeof err);
    W.backend = NULL;
    if (rc != 0)
        return 0;
    int lanes, threads, cores;
    batch_lanes(1, &lanes, &threads, &cores);
    char tv[16];
    snprintf(tv, sizeof tv, "%d", threads);
    if (pf_pipeline_set_option(p, "threads", tv) != PF_OK) {
        pf_pipeline_destroy(p);
        return 0;
    }
    const int w = 512, h = 512;
    pf_frame in[RUN_MAX_IO], out[RUN_MAX_IO];
    pf_shape s[RUN_MAX_IO];
    memset(out, 0, sizeof out);
    memset(in, 0, sizeof in);
    double ms = 0;
    if (pf_frame_alloc(&in[0], w, h, PF_U8, 3) != PF_OK)
        goto done;
    for (int y = 0; y < h; y++) /* a gradient: no stage sees a constant image */
        for (int x = 0; x < 3 * w; x++)
            ((unsigned char *)in[0].data)[(size_t)y * in[0].pitch + (size_t)x] =
                (unsigned char)(x * 7 + y * 3);
    s[0] = (pf_shape){w, h};
    for (int i = 1; i < W.n_in; i++) {
        in[i] = W.bound[i];
        s[i] = (pf_shape){W.bound[i].width, W.bound[i].height};
    }
    if (pf_pipeline_plan(p, s, W.n_in) != PF_OK)
        goto done;
    for (int k = 0; k < W.n_out; k++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, k, &oi);
        if (oi.kind == PF_OUTPUT_IMAGE &&
            pf_frame_alloc(&out[k], oi.shape.width, oi.shape.height, PF_U8,
                           pf_pipeline_output_channels(p, k, 3)) != PF_OK)
            goto done;
    }
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now_ms();
        if (pf_pipeline_run(p, in, W.n_in, out, W.n_out) != PF_OK)
            goto done;
        double t = (now_ms() - t0) / ((double)w * h) / lanes;
        best = r == 0 || t < best ? t : best;
        double batch_ms = best * (double)batch_px;
        if (r == 0 && (batch_ms < GPU_START_MS / 2 || batch_ms > GPU_START_MS * 4))
            break;
    }
    ms = best;
done:
    for (int k = 0; k < W.n_out; k++)
        pf_frame_free(&out[k]);
    pf_frame_free(&in[0]);
    pf_pipeline_destroy(p);
    return ms;
}

/* Whether the CPU probe may run the pipeline before any file: every stage of its file is
   a built-in one (a plugin's stage that crashes or hangs on the probe's frame would stop
   the worker where no file is there to blame) with CUDA code (else the engine takes the
   CPU anyway, and says why). 0 with the reason in why. */
static int probe_allowed(char *why, size_t whyn)
{
    char builtin[PATH_MAX] = "";
    Dl_info info;
    if (dladdr((void *)&pf_engine_create, &info) && info.dli_fname &&
        realpath(info.dli_fname, builtin)) {
        char *slash = strrchr(builtin, '/');
        if (slash)
            snprintf(slash, sizeof builtin - (size_t)(slash - builtin), "/pipefuse/plugins");
    }
    json_error_t je;
    json_t *root = json_load_file(W.o->pipeline, 0, &je);
    json_t *stages = root ? json_object_get(root, "stages") : NULL;
    int ok = stages != NULL && builtin[0];
    if (!ok)
        snprintf(why, whyn, "the pipeline's stages could not be listed");
    const int n_st = pf_engine_stage_count(W.e);
    for (size_t k = 0; ok && k < json_array_size(stages); k++) {
        const char *op = json_string_value(json_object_get(json_array_get(stages, k), "op"));
        for (int s = 0; op && ok && s < n_st; s++) {
            const char *file = NULL, *plugin = NULL;
            const pf_stage_desc *d = pf_engine_stage(W.e, s, &file, &plugin);
            if (!d || strcmp(d->name, op) != 0)
                continue;
            char dir[PATH_MAX];
            char *slash = file && realpath(file, dir) ? strrchr(dir, '/') : NULL;
            if (slash)
                *slash = 0;
            if (!slash || strcmp(dir, builtin) != 0) {
                snprintf(why, whyn, "op %s comes from plugin %s (%s)", op, plugin ? plugin : "?",
                         file ? file : "?");
                ok = 0;
            } else if (!(d->kind == PF_STAGE_POINT ? d->point_cuda != NULL : d->run_cuda != NULL)) {
                snprintf(why, whyn, "op %s has no CUDA code", op);
                ok = 0;
            }
        }
    }
    json_decref(root);
    return ok;
}

/* --backend auto (the default) over a batch: the CPU when the pipeline's work for every
   pixel of the batch (from the inputs' headers) takes the CPU less time than the GPU
   takes to start, decided before CUDA is touched; said once. 1: the CPU; 0: as the
   engine chooses (the GPU where there is one); -1: not auto. */
int auto_backend(void)
{
    const run_opts *o = W.o;
    if ((o->backend && strcmp(o->backend, "auto") != 0) || !o->batch_pixels)
        return -1;
    /* no CUDA driver: nothing to choose (the engine says so); loading the library
       touches no device */
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!cuda)
        return -1;
    dlclose(cuda);
    char why[700];
    if (!probe_allowed(why, sizeof why)) { /* as the engine chooses */
        if (o->verbose && !o->quiet) {
            char msg[800];
            snprintf(msg, sizeof msg, "--backend auto: the engine chooses (%s)", why);
            notice(0, msg);
        }
        return 0;
    }
    double per_px = cpu_ms_per_pixel(o->batch_pixels);
    if (per_px <= 0)
        return 0;
    double cpu_ms = per_px * (double)o->batch_pixels;
    char msg[400];
    int cpu = cpu_ms < GPU_START_MS;
    snprintf(msg, sizeof msg,
             "--backend auto: %s: the pipeline's work for this batch's %.1f megapixels takes "
             "the CPU about %.2f s, %s than a GPU takes to start (about %.1f s)",
             cpu ? "the CPU" : "the GPU where there is one", (double)o->batch_pixels / 1e6,
             cpu_ms / 1e3, cpu ? "less" : "more", GPU_START_MS / 1e3);
    if (!o->quiet)
        notice(0, msg);
    if (cpu)
        W.backend = "cpu";
    return cpu;
}
