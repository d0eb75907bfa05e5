/* cli/batch/worker.c: the worker's setup, the starter thread and the main loop reading jobs */
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

struct worker_state W = {.mu = PTHREAD_MUTEX_INITIALIZER,
                         .cv = PTHREAD_COND_INITIALIZER,
                         .wmu = PTHREAD_MUTEX_INITIALIZER};

static void set_lanes(int cpu);

static int setup(char *err, size_t errn)
{
    const run_opts *o = W.o;
    if (!(W.e = new_engine(o->common->threads, err, errn)))
        return -1;
    pf_pipeline *p;
    if (load_pipeline(W.e, &p, err, errn) != 0)
        return -1;
    W.n_in = pf_pipeline_input_count(p);
    W.n_out = pf_pipeline_output_count(p);
    if (W.n_in > RUN_MAX_IO || W.n_out > RUN_MAX_IO) {
        snprintf(err, errn, "at most %d inputs and outputs", RUN_MAX_IO);
        pf_pipeline_destroy(p);
        return -1;
    }
    for (int i = 1; i < W.n_in; i++) {
        const char *name = pf_pipeline_input_name(p, i), *file = NULL;
        if ((W.unused[i] = !pf_pipeline_input_used(p, i))) {
            /* no output reads it: a pixel stands in for it, with or without --input */
            static uint32_t pixel;
            W.bound[i] = (pf_frame){&pixel, 1, 1, sizeof pixel, PF_U8, 4};
            continue;
        }
        for (int k = 0; k < o->n_binds; k++) {
            size_t len = strlen(name);
            if (strncmp(o->binds[k], name, len) == 0 && o->binds[k][len] == '=')
                file = o->binds[k] + len + 1;
        }
        if (!file) {
            snprintf(err, errn,
                     "pipeline input '%s' needs --input %s=FILE (the files on the command line "
                     "go to '%s')",
                     name, name, pf_pipeline_input_name(p, 0));
            pf_pipeline_destroy(p);
            return -1;
        }
        char e2[1024];
        const char *kind = not_regular(file);
        if (kind) { /* each worker reads it again, after a restart too */
            snprintf(err, errn,
                     "--input %s: %s: not a regular file (%s): every worker reads it, a "
                     "restarted one again; copy it to a file",
                     name, file, kind);
            pf_pipeline_destroy(p);
            return -1;
        }
        pf_png_info bsrc;
        pf_png_meta *bpm;
        pf_jpeg_meta *bjm;
        cli_format bfmt;
        if (cli_image_read(file, o->max_pixels, o->max_memory, 1, &W.bound[i], &bsrc, &bpm, &bjm,
                           &bfmt, e2, sizeof e2) != PF_OK) {
            snprintf(err, errn, "--input %s: %s", name, e2);
            pf_pipeline_destroy(p);
            return -1;
        }
    }
    for (int k = 0; k < W.n_out; k++) {
        pf_pipeline_output_info(p, k, &W.oi[k]);
        W.out_name[k] = strdup(W.oi[k].name);
        W.oi[k].name = W.out_name[k];
        W.json[k] = W.oi[k].table_format ? W.oi[k].table_format == 2 : o->json_tables;
        W.n_images += W.oi[k].kind == PF_OUTPUT_IMAGE;
        W.has_tables |= W.oi[k].kind == PF_OUTPUT_TABLE;
    }
    /* Bands: decided once for the pipeline; per file only its size and interlacing. */
    char why[512] = "";
    W.bandable = o->band_rows != 0 && !W.has_tables &&
                 pf_pipeline_band_halo(p, &W.halo, why, sizeof why) == PF_OK;
    char why_strips[512] = "";
    W.stripable = o->band_rows != 0 && !W.bandable && !W.has_tables &&
                  pf_pipeline_strips_possible(p, why_strips, sizeof why_strips) == PF_OK;
    if (o->band_rows != 0 && !W.bandable && !W.stripable && !o->quiet) {
        if (W.has_tables)
            snprintf(why, sizeof why, "the pipeline has table outputs");
        else if (why_strips[0]) /* not cut into frames, nor run in strips: the latter's reason */
            snprintf(why, sizeof why, "%s", why_strips);
        char msg[700];
        snprintf(msg, sizeof msg, "--band-rows %d: images run whole: %s", o->band_rows, why);
        if (o->band_rows > 0) /* said once per run, whatever the restarts (notice) */
            notice(0, msg);
    }
    if (W.bandable && o->band_rows > 0 && 2 * W.halo > o->band_rows && !o->quiet) {
        /* each band decodes and computes its rows and the halo above and below it */
        char msg[300];
        snprintf(msg, sizeof msg,
                 "--band-rows %d: the pipeline reads %d rows above and below each band, so "
                 "bands compute %.1f times the rows of the image; --band-rows %d or more keeps "
                 "it under 1.5",
                 o->band_rows, W.halo, (double)(o->band_rows + 2 * W.halo) / o->band_rows,
                 4 * W.halo);
        notice(1, msg);
    }
    if (load_pipeline(W.e, &W.forms, err, errn) != 0 ||
        (((W.bandable && o->band_rows < 0) || W.stripable) &&
         load_pipeline(W.e, &W.probe, err, errn) != 0)) {
        pf_pipeline_destroy(p);
        return -1;
    }
    /* Lanes: on the CPU one per core, files side by side; on the GPU one lane keeps
       its frame slots full. A trial plan tells which backend the pipeline gets. */
    int cpu = (o->backend && strcmp(o->backend, "cpu") == 0) || auto_backend() == 1;
    /* Until the trial plan (start_lanes) says: the GPU where a CUDA driver is */
    void *cuda = cpu ? NULL : dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (cuda)
        dlclose(cuda);
    else
        cpu = 1;
    W.trial = p;
    set_lanes(cpu);
    build_attribution();
    return 0;
}

/* Lanes, codec threads and the GPU's share of memory for the backend (cpu or not). */
static void set_lanes(int cpu)
{
    /* On the GPU one lane, one engine and one plan per shape keep the device's frame
       slots full, tables or not: frames are waited for in order and each frame's
       tables are copied right after its wait (retire), before the next completes. */
    batch_lanes(cpu, &W.lanes, &W.lane_threads, &W.codecs);
    /* On the GPU: a share of the device's free memory for each lane's plans (the rest
       for other work on the device), and bands only for frames that do not fit it. */
    atomic_store(&W.gpu, !cpu);
}

/* The starter thread's work, while the codec threads decode the first files: the trial
   plan tells the backend (on the GPU it creates the CUDA context and builds the fused
   kernels, the slow part of a worker's start), then the lanes' engines, the pinned pool
   on the GPU, and the lanes. Returns 0, or -1 with the message. */
static int start_lanes(char *err, size_t errn)
{
    const run_opts *o = W.o;
    pf_pipeline *p = W.trial;
    int cpu = !atomic_load(&W.gpu);
    if (!cpu) {
        pf_shape s[RUN_MAX_IO];
        for (int i = 0; i < W.n_in; i++)
            s[i] = i ? (pf_shape){W.bound[i].width, W.bound[i].height} : (pf_shape){1024, 1024};
        pf_stats st;
        st.size = sizeof st;
        if (pf_pipeline_plan(p, s, W.n_in) == PF_OK && pf_pipeline_stats(p, &st) == PF_OK)
            cpu = strcmp(st.backend, "cpu") == 0;
        else
            cpu = !(o->backend && strcmp(o->backend, "cuda") == 0);
        set_lanes(cpu);
    }
    if (!cpu) {
        /* a share of the device's free memory for each lane's plans (the rest for other
           work on the device); bands only for frames that do not fit it */
        unsigned long long dev_free = 0, dev_total = 0;
        if (pf_engine_device_memory(W.e, &dev_free, &dev_total) == PF_OK)
            atomic_store(&W.dev_budget, dev_free / 10 * 7 / (unsigned)W.lanes);
        if (!o->quiet) {
            char msg[300];
            snprintf(msg, sizeof msg,
                     "on the GPU: %d lane%s, up to %d frames in flight each, %d codec threads; "
                     "%s of device memory for the plans, whole frames unless one does not fit",
                     W.lanes, W.lanes == 1 ? "" : "s", pf_pipeline_slots(p), W.codecs,
                     size_str(atomic_load(&W.dev_budget) * (unsigned)W.lanes).s);
            notice(0, msg);
        }
    }
    pf_pipeline_destroy(p);
    W.trial = NULL;
    lane *lanes = calloc((size_t)W.lanes, sizeof *lanes);
    if (!lanes) {
        snprintf(err, errn, "out of memory");
        return -1;
    }
    for (int i = 0; i < W.lanes; i++)
        if (!(lanes[i].e = new_engine(W.lane_threads, err, errn)))
            return -1;
    if (!cpu && W.lanes <= PINNED_MAX_ENGINES) {
        /* at most the frames in flight's half of --max-memory, and 4 GiB: page-locked
           memory is the machine's */
        pf_engine *engines[PINNED_MAX_ENGINES];
        for (int i = 0; i < W.lanes; i++)
            engines[i] = lanes[i].e;
        unsigned long long lim = 4ull << 30;
        if (o->max_memory && o->max_memory / 2 < lim)
            lim = o->max_memory / 2;
        pinned_pool *pool = NULL;
        if (pinned_pool_create(engines, W.lanes, lim, &pool) == PF_OK) {
            pthread_mutex_lock(&W.mu);
            W.pool = pool;
            pthread_mutex_unlock(&W.mu);
        }
    }
    W.lane0 = lanes;
    report("R %d %d", W.lanes, W.codecs); /* the supervisor's count of files to send */
    for (int i = 0; i < W.lanes; i++)
        if (pthread_create(&lanes[i].tid, NULL, lane_main, &lanes[i]) != 0) {
            snprintf(err, errn, "cannot start a thread");
            return -1;
        }
    W.lane_list = lanes;
    return 0;
}

static void *starter_main(void *arg)
{
    (void)arg;
    thread_altstack();
    char err[3000];
    if (start_lanes(err, sizeof err) != 0) {
        report("X %s", err);
        _exit(2);
    }
    return NULL;
}

/* ---- Main ------------------------------------------------------------------------------------------ */

void worker_main(const run_opts *o, int job_fd, int rep_fd, int dirfd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the supervisor killed: so is the worker */
    W.o = o;
    W.rep_fd = rep_fd;
    W.dirfd = dirfd;
    char err[3000];
    install_handlers();
    record_process(job_fd);
    if (setup(err, sizeof err) != 0) {
        report("X %s", err);
        _exit(2);
    }

    /* codec threads for the most cores either backend uses: the lanes' backend is
       known once the starter's trial plan is done, while these decode */
    int n_codecs = W.codecs;
    pthread_t *codecs = calloc((size_t)n_codecs, sizeof *codecs);
    pthread_t starter;
    if (!codecs) {
        report("X out of memory");
        _exit(2);
    }
    for (int k = 0; k < W.n_out; k++)
        report("O %c %d %s",
               W.oi[k].kind != PF_OUTPUT_IMAGE ? 't'
               : cli_png_only(W.forms, k)      ? 'p'
                                               : 'i',
               W.json[k], W.oi[k].name);
    /* ready for files now, with the lanes the backend will likely have (the starter
       says again when it knows) */
    report("R %d %d", W.lanes, W.codecs);
    for (int i = 0; i < n_codecs; i++)
        if (pthread_create(&codecs[i], NULL, codec_main, NULL) != 0) {
            report("X cannot start a thread");
            _exit(2);
        }
    if (pthread_create(&starter, NULL, starter_main, NULL) != 0) {
        report("X cannot start a thread");
        _exit(2);
    }

    /* Jobs: "J index\tpath" lines (the path escaped as in the joblog); "H" asks where
       the threads are; end of file ends. */
    char buf[16384];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(job_fd, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
            *nl = 0;
            char *tab = strchr(line, '\t');
            if (line[0] == 'J' && tab) {
                int idx = atoi(line + 2);
                job *j = calloc(1, sizeof *j);
                if (!j || !(j->path = strdup(tab + 1))) {
                    report("X out of memory");
                    _exit(2);
                }
                /* path, then a name per output, tab-separated */
                char *field = j->path;
                for (int k = 0; k <= W.n_out; k++) {
                    char *next = strchr(field, '\t');
                    if (next)
                        *next++ = 0;
                    cli_unescape(field);
                    if (k && !(j->names[k - 1] = strdup(field))) {
                        report("X out of memory");
                        _exit(2);
                    }
                    if (!next)
                        break;
                    field = next;
                }
                /* a relative path from the starting directory, whatever a stage did */
                char *abs = NULL;
                if (j->path[0] != '/' && strcmp(j->path, "-") != 0 && W.cwd &&
                    asprintf(&abs, "%s/%s", W.cwd, j->path) > 0) {
                    free(j->path);
                    j->path = abs;
                }
                j->index = idx;
                plan_job(j);
                pthread_mutex_lock(&W.mu);
                push(&W.decode, j);
                pthread_cond_broadcast(&W.cv);
                pthread_mutex_unlock(&W.mu);
            } else if (line[0] == 'H') {
                ask_threads();
            }
            line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
    }
    pthread_mutex_lock(&W.mu);
    W.input_closed = 1;
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
    pthread_join(starter, NULL);
    for (int i = 0; i < n_codecs; i++)
        pthread_join(codecs[i], NULL);
    for (int i = 0; i < W.lanes; i++)
        pthread_join(W.lane_list[i].tid, NULL);
    report("Z %llu", (unsigned long long)atomic_load(&W.plans));
    _exit(0);
}
