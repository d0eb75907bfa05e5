/* cli/batch/lanes.c: the engine lanes (the GPU's scheduler, the CPU's lanes: plans per shape, frames in flight, tables, bands) */
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

/* ---- Engine lanes ------------------------------------------------------------------------------- */

static void drop(cached *c)
{
    pf_stats st;
    st.size = sizeof st;
    if (c->p && pf_pipeline_stats(c->p, &st) == PF_OK)
        atomic_fetch_add(&W.plans, st.plans);
    pf_pipeline_destroy(c->p);
    memset(c, 0, sizeof *c);
}

/* A failure that loses the GPU context: the worker cannot go on. */
static int context_lost(int rc)
{
    return rc == PF_CUDA;
}

/* The context is the process's: other lanes fail too once it is lost. The first lane
   to see it ends the worker. With its file alone in the engine, that file lost it and is
   blamed; with other frames in flight (or none of its own: alone is 0) any of them may
   have, so none is blamed: those that were in the engine run again one at a time in the
   next worker (reported as "L suspects"), where the one that loses the context alone is
   named, and the others just run. */
static void lost_and_exit(job *j, int alone)
{
    static atomic_int once;
    if (atomic_exchange(&once, 1) != 0)
        for (;;)
            pause();
    if (alone) {
        report_done(j, 1, j->err, " (the GPU context is lost; the worker restarts)");
        report("L");
    } else {
        report("L suspects");
    }
    _exit(3);
}

/* Whether the lane holds a plan for shape s (whole frames). */
static int cached_shape(const lane *L, pf_shape s)
{
    for (int i = 0; i < PLAN_CACHE; i++)
        if (L->c[i].p && L->c[i].shape.width == s.width && L->c[i].shape.height == s.height &&
            L->c[i].banded == 0 && L->c[i].rows == 0)
            return 1;
    return 0;
}

/* The lane's pipeline planned for primary input shape s: the job's (the other inputs'
   own shapes), or its bands' (banded: every input's), or (banded 2) the job's in strips
   of j->band_rows output rows. Cached, or loaded and planned. */
static pf_pipeline *pipeline_for(lane *L, job *j, pf_shape s, int banded)
{
    cached *hit = NULL, *victim = &L->c[0];
    const int rows = banded == 2 ? j->band_rows : 0;
    for (int i = 0; i < PLAN_CACHE; i++) {
        if (L->c[i].p && L->c[i].shape.width == s.width && L->c[i].shape.height == s.height &&
            L->c[i].banded == banded && L->c[i].rows == rows)
            hit = &L->c[i];
        if (!L->c[i].p || (victim->p && L->c[i].use < victim->use))
            victim = &L->c[i];
    }
    if (hit) {
        hit->use = ++L->clock;
        return hit->p;
    }
    drop(victim);
    pf_pipeline *p;
    if (load_pipeline(L->e, &p, j->err, sizeof j->err) != 0)
        return NULL;
    pf_shape shapes[RUN_MAX_IO];
    shapes[0] = s;
    for (int i = 1; i < W.n_in; i++)
        shapes[i] =
            banded == 1 && !W.unused[i] ? s : (pf_shape){W.bound[i].width, W.bound[i].height};
    /* Before any buffer: the plan's bytes (the engine counts them from the shapes) and
       the file's frames, against --max-memory. */
    pf_memory m;
    memset(&m, 0, sizeof m);
    m.size = sizeof m;
    if ((rows ? pf_pipeline_strip_memory(p, shapes, W.n_in, rows, &m)
              : pf_pipeline_memory(p, shapes, W.n_in, &m)) != PF_OK) {
        snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
        pf_pipeline_destroy(p);
        return NULL;
    }
    unsigned long long pb = plan_host_bytes(&m);
    if (W.gpu && W.dev_budget && m.device_bytes > W.dev_budget) {
        snprintf(j->err, sizeof j->err,
                 "needs %s of GPU memory for a %dx%d frame (the largest buffer, %s, %s), over "
                 "the %s this batch may take of the device",
                 size_str(m.device_bytes).s, s.width, s.height,
                 m.largest_stage ? m.largest_stage : "?", size_str(m.largest_bytes).s,
                 size_str(W.dev_budget).s);
        pf_pipeline_destroy(p);
        return NULL;
    }
    if (W.o->max_memory && pb + j->est > W.o->max_memory) {
        snprintf(j->err, sizeof j->err,
                 "needs %s: its frames %s and the pipeline's buffers %s (the largest, %s, %s), "
                 "over --max-memory %s",
                 size_str(pb + j->est).s, size_str(j->est).s, size_str(pb).s,
                 m.largest_stage ? m.largest_stage : "?", size_str(m.largest_bytes).s,
                 size_str(W.o->max_memory).s);
        pf_pipeline_destroy(p);
        return NULL;
    }
    int rc = rows ? pf_pipeline_plan_strips(p, shapes, W.n_in, rows, NULL)
                  : pf_pipeline_plan(p, shapes, W.n_in);
    if (rc != PF_OK) {
        snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
        pf_pipeline_destroy(p);
        if (context_lost(rc)) /* lost by a frame before this file's: it runs again */
            lost_and_exit(j, 0);
        return NULL;
    }
    report("P %d %d", s.width, s.height);
    /* Plans of other shapes go while the lanes' pipelines would hold over a quarter of
       the memory budget. */
    for (;;) {
        unsigned long long held = 0;
        cached *lru = NULL;
        for (int i = 0; i < PLAN_CACHE; i++) {
            held += L->c[i].bytes;
            if (L->c[i].p && &L->c[i] != victim && (!lru || L->c[i].use < lru->use))
                lru = &L->c[i];
        }
        unsigned long long held_dev = 0;
        for (int i = 0; i < PLAN_CACHE; i++)
            held_dev += L->c[i].dev_bytes;
        int host_ok = !W.o->max_memory || held + pb <= W.o->max_memory / 4 / (unsigned)W.lanes;
        int dev_ok = !W.gpu || !W.dev_budget || held_dev + m.device_bytes <= W.dev_budget;
        if (!lru || (host_ok && dev_ok))
            break;
        drop(lru);
    }
    victim->p = p;
    victim->shape = s;
    victim->banded = banded;
    victim->rows = rows;
    victim->use = ++L->clock;
    victim->bytes = pb;
    victim->dev_bytes = m.device_bytes;
    return p;
}

static const char *copied_row_name(const void *params, int row)
{
    return ((char *const *)params)[row];
}

/* Copies the tables of the frame just waited for, so the lane can go on. */
static int copy_tables(pf_pipeline *p, job *j)
{
    for (int k = 0; k < W.n_out; k++) {
        if (W.oi[k].kind != PF_OUTPUT_TABLE)
            continue;
        pf_table t;
        if (pf_pipeline_table(p, k, &t) != PF_OK) {
            snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
            return -1;
        }
        size_t cells = (size_t)t.rows * (size_t)t.cols;
        double *data = malloc(cells * sizeof *data + 1);
        char **cols = calloc((size_t)t.cols + 1, sizeof *cols);
        char **rows = t.row_name ? calloc((size_t)t.rows + 1, sizeof *rows) : NULL;
        if (!data || !cols || (t.row_name && !rows)) {
            free(data);
            free(cols);
            free(rows);
            snprintf(j->err, sizeof j->err, "out of memory copying a table");
            return -1;
        }
        memcpy(data, t.data, cells * sizeof *data);
        for (int c = 0; c < t.cols; c++)
            cols[c] = strdup(t.columns && t.columns[c] ? t.columns[c] : "");
        for (int r = 0; rows && r < t.rows; r++)
            rows[r] = strdup(t.row_name(t.params, r));
        j->tab[k] = (pf_table){
            data, t.rows, t.cols, (const char *const *)cols, rows ? copied_row_name : NULL, rows};
        j->row_names[k] = rows;
    }
    return 0;
}

/* A frame that failed in the engine: its message, and the worker's end when the GPU
   context is lost. */
static void engine_failed(job *j, pf_pipeline *p, int rc)
{
    snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
    j->status = 1;
    int alone = engine_count() <= 1;
    engine_leave(j);
    if (context_lost(rc))
        lost_and_exit(j, alone);
}

/* Waits for the oldest submitted frame of the lane and hands it to the encoders. */
static void retire(job **fifo, pf_pipeline **fp, int *n)
{
    job *j = fifo[0];
    pf_pipeline *p = fp[0];
    tls_job = j->index;
    int rc = pf_pipeline_wait(p, j->ticket);
    j->eng_ms = now_ms() - j->eng_ms;
    if (rc != PF_OK) {
        engine_failed(j, p, rc);
    } else {
        if (W.has_tables && copy_tables(p, j) != 0)
            j->status = 1;
        engine_leave(j);
    }
    memmove(fifo, fifo + 1, sizeof *fifo * (size_t)(*n - 1));
    memmove(fp, fp + 1, sizeof *fp * (size_t)(*n - 1));
    (*n)--;
    to_encode(j);
}

/* --profile: the last frame's time per launch unit of the first lane, with the stage
   ids inside each. */
static void print_profile(const pf_pipeline *p)
{
    static const char *const kinds[] = {"point", "stencil", "resample", "reduce"};
    pf_stats s;
    s.size = sizeof s;
    if (pf_pipeline_stats(p, &s) != PF_OK)
        return;
    fprintf(stderr, "profile of the last frame of lane 0 (%s; %s):\n", s.backend,
            strcmp(s.backend, "cpu") ? "GPU time from CUDA events" : "wall time per unit");
    fprintf(stderr, "  %-4s %-8s %6s %10s %10s %9s %8s  %s\n", "unit", "kind", "bands", "time ms",
            "model ms", "MB", "GB/s", "stages");
    double total = 0;
    for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
        pf_unit_info u;
        pf_pipeline_unit(p, i, &u);
        total += u.measured_ms;
        fprintf(stderr, "  #%-3d %-8s %6d %10.3f %10.3f %9.1f %8.1f  ", i, kinds[u.kind], u.bands,
                u.measured_ms, u.predicted_ms, u.bytes / 1e6,
                u.measured_ms > 0 ? u.bytes / (u.measured_ms * 1e6) : 0.0);
        for (int k = 0; k < u.n_stages; k++)
            fprintf(stderr, "%s%s", k ? (u.fused ? " + " : ", ") : "", u.stages[k]);
        fputc('\n', stderr);
    }
    fprintf(stderr, "  total %.3f ms in %d launch(es)", total, s.launches_per_frame);
    if (s.timed_launches)
        fprintf(stderr, "; longest launch %.3f ms", s.max_launch_ms);
    fputc('\n', stderr);
    if (s.budget_ms > 0)
        fprintf(stderr, "  watchdog budget %.1f ms: %llu of %llu timed launches over it\n",
                s.budget_ms, s.launches_over_budget, s.timed_launches);
}

static pf_frame frame_rows(const pf_frame *f, int y, int n)
{
    pf_frame v = *f;
    v.data = (char *)f->data + (size_t)y * f->pitch;
    v.height = n;
    return v;
}

/* The encoder of a banded file: on a thread of its own it writes the output rows of one
   band while the lane reads and runs the next. Two sets of output frames alternate:
   band i is computed into set i % 2 once band i - 2 has been written from it. */
typedef struct band_writer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    out_stream *os;
    pf_frame (*out)[RUN_MAX_IO]; /* [2][RUN_MAX_IO] */
    const int *item_of;
    int index;                   /* the job's, for crash reports */
    int posted, written;         /* bands handed over, bands written */
    int y0[2], y1[2], a[2];      /* the output rows in each set, and its first input row */
    int finish, abandon, failed; /* no more bands; stop now; a write failed */
    double ms;
    char err[2048];
} band_writer;

static void *band_writer_main(void *arg)
{
    thread_altstack();
    band_writer *bw = arg;
    tls_job = bw->index;
    tls_step = "encode";
    char e[2048];
    pthread_mutex_lock(&bw->mu);
    for (;;) {
        while (bw->written == bw->posted && !bw->finish && !bw->abandon)
            pthread_cond_wait(&bw->cv, &bw->mu);
        if (bw->abandon || bw->written == bw->posted)
            break;
        int b = bw->written % 2, y0 = bw->y0[b], y1 = bw->y1[b], a = bw->a[b], rc = 0;
        pthread_mutex_unlock(&bw->mu);
        double t = now_ms();
        for (int k = 0; k < W.n_out && rc == 0; k++) {
            if (W.oi[k].kind != PF_OUTPUT_IMAGE)
                continue;
            pf_frame v = frame_rows(&bw->out[b][k], y0 - a, y1 - y0);
            rc = out_stream_rows(bw->os, bw->item_of[k], &v, y1 - y0, e, sizeof e);
        }
        pthread_mutex_lock(&bw->mu);
        bw->ms += now_ms() - t;
        if (rc != 0) {
            bw->failed = 1;
            snprintf(bw->err, sizeof bw->err, "%s", e);
            pthread_cond_broadcast(&bw->cv);
            break;
        }
        bw->written++;
        pthread_cond_broadcast(&bw->cv);
    }
    pthread_mutex_unlock(&bw->mu);
    tls_job = -1;
    tls_step = NULL;
    return NULL;
}

/* Reads and drops the file's next n rows, through the window's buffer. */
static int skip_rows(job *j, pf_frame *in, int n, char *err, size_t errn)
{
    while (n > 0) {
        int k = n < in->height ? n : in->height;
        if (cli_rows_read(j->rows, in, k, err, errn) != PF_OK)
            return -1;
        n -= k;
    }
    return 0;
}

/* A large image in bands (docs/batch.md), from the input decode opened to the outputs'
   commit. Frames of bands (a pipeline of point and stencil stages): output rows [y0, y0
   + R) come from a frame of the input's rows [a, a + R + 2 halo), a = y0 - halo kept
   inside the image, so every band is one shape (one plan) and a band at the top or
   bottom edge holds that edge, where stages clamp their reads as on the whole frame.
   Strips (j->strips, a pipeline with resample stages, pipefuse/bands.h): one plan for
   the whole image, strip s computing output rows [y0, y1) from the window of input
   rows the engine names, windows moving down the image. Either way consecutive windows
   overlap: the rows kept move up, the rest are read (rows no window holds are read and
   dropped). The lane reads and runs a band while band_writer_main encodes the one
   before. Nothing is written under the final names unless every row was. */
static void run_banded(lane *L, job *j)
{
    const int w = j->in[0].width, h = j->in[0].height, R = j->band_rows, halo = W.halo;
    const int strips = j->strips;
    int hb = R + 2 * halo; /* below h: plan_job bands only taller images */
    int n_bands = (h + R - 1) / R;
    pf_frame in, out[2][RUN_MAX_IO], hdr[RUN_MAX_IO];
    out_item items[RUN_MAX_IO];
    int order[RUN_MAX_IO], item_of[RUN_MAX_IO], n = 0, entered = 0, started = 0;
    char err[2048] = "";
    band_writer bw;
    pthread_t writer;
    memset(&in, 0, sizeof in);
    memset(out, 0, sizeof out);
    memset(hdr, 0, sizeof hdr);
    memset(&bw, 0, sizeof bw);
    pthread_mutex_init(&bw.mu, NULL);
    pthread_cond_init(&bw.cv, NULL);
    bw.out = out;
    bw.item_of = item_of;
    bw.index = j->index;
    j->eng_ms = 0;
    pf_pipeline *p =
        strips ? pipeline_for(L, j, (pf_shape){w, h}, 2) : pipeline_for(L, j, (pf_shape){w, hb}, 1);
    if (!p) {
        j->status = 1;
        goto done;
    }
    if (strips) { /* the buffer holds the tallest window */
        pf_region win[RUN_MAX_IO];
        int y0, y1;
        hb = 1;
        pf_shape shapes[RUN_MAX_IO];
        for (int i = 0; i < W.n_in; i++)
            shapes[i] = i ? (pf_shape){W.bound[i].width, W.bound[i].height} : (pf_shape){w, h};
        if (pf_pipeline_plan_strips(p, shapes, W.n_in, R, &n_bands) != PF_OK) {
            snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
            j->status = 1;
            goto done;
        }
        for (int s = 0; s < n_bands && pf_pipeline_strip(p, s, &y0, &y1, win, W.n_in) == PF_OK; s++)
            hb = win[0].y1 - win[0].y0 > hb ? win[0].y1 - win[0].y0 : hb;
    }
    if (pf_frame_alloc(&in, w, hb, j->in[0].sample, j->in[0].channels) != PF_OK) {
        snprintf(j->err, sizeof j->err, "out of memory for a band of %dx%d", w, hb);
        j->status = 1;
        goto done;
    }
    for (int k = 0; k < W.n_out; k++) {
        if (W.oi[k].kind != PF_OUTPUT_IMAGE)
            continue;
        pf_output_info oi;
        pf_pipeline_output_info(p, k, &oi);
        int ch = pf_pipeline_output_channels(p, k, j->in[0].channels);
        pf_sample smp = oi.bits == 16 ? PF_U16 : oi.bits == 8 ? PF_U8 : j->in[0].sample;
        /* frames of bands: the band's shape; strips: R rows of the whole output */
        int oh = strips ? R : oi.shape.height;
        for (int b = 0; b < 2; b++)
            if (pf_frame_alloc(&out[b][k], oi.shape.width, oh, smp, ch) != PF_OK) {
                snprintf(j->err, sizeof j->err, "out of memory for a band of %dx%d", w, hb);
                j->status = 1;
                goto done;
            }
        hdr[k] = out[0][k]; /* the header's: the whole image's size */
        hdr[k].height = strips ? oi.shape.height : h;
    }
    if ((n = job_items(j, hdr, items, order)) < 0) {
        j->status = 1;
        goto done;
    }
    for (int i = 0; i < n; i++)
        item_of[order[i]] = i;
    out_opts oo = {W.dirfd, W.o->zlib, W.o->png_filter, png_threads()};
    double t = now_ms();
    if (out_stream_open(&oo, items, n, &bw.os, j->err, sizeof j->err) != 0) {
        j->status = 1;
        goto done;
    }
    j->enc_ms += now_ms() - t;
    if (pthread_create(&writer, NULL, band_writer_main, &bw) != 0) {
        snprintf(j->err, sizeof j->err, "cannot start a thread");
        j->status = 1;
        goto done;
    }
    started = 1;
    engine_enter(j);
    entered = 1;
    j->eng_ms = 0;
    int a = 0, have = 0; /* the buffer holds the input's rows [a, a + have) */
    for (int i = 0; i < n_bands; i++) {
        int y0 = i * R, y1 = y0 + R < h ? y0 + R : h, b = i % 2;
        int na = y0 - halo < 0 ? 0 : y0 - halo > h - hb ? h - hb : y0 - halo, nb = na + hb;
        pf_region win[RUN_MAX_IO];
        if (strips) {
            if (pf_pipeline_strip(p, i, &y0, &y1, win, W.n_in) != PF_OK) {
                snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
                j->status = 1;
                goto done;
            }
            na = win[0].y0, nb = win[0].y1;
            if (nb <= na) /* it reads none: the window stays */
                na = a, nb = a + have;
        }
        t = now_ms();
        int keep = a + have - na; /* rows of the last window in this one */
        if (keep > 0 && na > a)
            memmove(in.data, (char *)in.data + (size_t)(na - a) * in.pitch,
                    (size_t)keep * in.pitch);
        if (keep < 0 && skip_rows(j, &in, -keep, err, sizeof err) != 0) {
            reader_error(j, err);
            goto done;
        }
        have = keep > 0 ? keep : 0;
        a = na;
        pf_frame dst = frame_rows(&in, have, nb - na - have);
        if (have < nb - na &&
            cli_rows_read(j->rows, &dst, nb - na - have, err, sizeof err) != PF_OK) {
            reader_error(j, err);
            goto done;
        }
        have = nb - na;
        j->dec_ms += now_ms() - t;
        /* output set b is free once band i - 2 is written */
        pthread_mutex_lock(&bw.mu);
        while (bw.written < i - 1 && !bw.failed)
            pthread_cond_wait(&bw.cv, &bw.mu);
        int failed = bw.failed;
        pthread_mutex_unlock(&bw.mu);
        if (failed)
            break;
        double t1 = now_ms();
        pf_frame ins[RUN_MAX_IO]; /* the other inputs (--input): the same rows of each */
        ins[0] = strips && have ? frame_rows(&in, 0, have) : in;
        int rc;
        if (strips) { /* other inputs: the window of each; outputs: the strip's rows */
            pf_frame outs[RUN_MAX_IO];
            for (int k = 1; k < W.n_in; k++)
                ins[k] = win[k].y1 <= win[k].y0
                             ? W.bound[k]
                             : frame_rows(&W.bound[k], win[k].y0, win[k].y1 - win[k].y0);
            for (int k = 0; k < W.n_out; k++)
                outs[k] = frame_rows(&out[b][k], 0, y1 - y0);
            rc = pf_pipeline_run_strip(p, i, ins, W.n_in, outs, W.n_out);
        } else {
            for (int k = 1; k < W.n_in; k++)
                ins[k] = W.unused[k] ? W.bound[k] : frame_rows(&W.bound[k], a, hb);
            rc = pf_pipeline_run(p, ins, W.n_in, out[b], W.n_out);
        }
        j->eng_ms += now_ms() - t1;
        if (rc != PF_OK) {
            entered = 0;
            engine_failed(j, p, rc);
            goto done;
        }
        pthread_mutex_lock(&bw.mu);
        bw.y0[b] = y0;
        bw.y1[b] = y1;
        bw.a[b] = strips ? y0 : a; /* strips: the frames hold the strip's rows */
        bw.posted = i + 1;
        pthread_cond_broadcast(&bw.cv);
        pthread_mutex_unlock(&bw.mu);
    }
    /* strips: the rows after the last window, read to the file's end (as a whole
       frame's decode reads them: a truncated file fails) */
    if (strips && a + have < h && skip_rows(j, &in, h - a - have, err, sizeof err)) {
        reader_error(j, err);
        goto done;
    }
    /* the last bands written (or a failure), then the commit */
    pthread_mutex_lock(&bw.mu);
    bw.finish = 1;
    pthread_cond_broadcast(&bw.cv);
    pthread_mutex_unlock(&bw.mu);
    pthread_join(writer, NULL);
    started = 0;
    j->enc_ms += bw.ms;
    if (bw.failed) {
        snprintf(j->err, sizeof j->err, "%s", bw.err);
        j->status = 1;
        goto done;
    }
    t = now_ms();
    if (out_stream_commit(bw.os, j->err, sizeof j->err) != 0)
        j->status = 1;
    else
        job_outs(j, items, order, n);
    bw.os = NULL;
    j->enc_ms += now_ms() - t;
    j->written = j->status == 0;
done:
    if (started) { /* a failure on the lane: the writer stops where it is */
        pthread_mutex_lock(&bw.mu);
        bw.abandon = 1;
        pthread_cond_broadcast(&bw.cv);
        pthread_mutex_unlock(&bw.mu);
        pthread_join(writer, NULL);
    }
    if (entered)
        engine_leave(j);
    out_stream_abort(bw.os);
    pthread_mutex_destroy(&bw.mu);
    pthread_cond_destroy(&bw.cv);
    pf_frame_free(&in);
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < W.n_out; k++)
            pf_frame_free(&out[b][k]);
    cli_rows_close(j->rows);
    j->rows = NULL;
}

void *lane_main(void *arg)
{
    thread_altstack();
    lane *L = arg;
    job *fifo[8];
    pf_pipeline *fp[8];
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&W.mu);
        while (!W.ready.n && !(W.input_closed && !W.decode.n && !W.decoding) && !n)
            pthread_cond_wait(&W.cv, &W.mu);
        job *j = pop(&W.ready);
        if (j)
            W.in_engine++;
        int done = !j && !n && W.input_closed && !W.decode.n && !W.decoding;
        pthread_mutex_unlock(&W.mu);
        if (done)
            break;
        if (!j) {
            retire(fifo, fp, &n);
            continue;
        }
        if (j->rows) { /* a large image in bands: the lane runs it from decode to commit */
            while (n)
                retire(fifo, fp, &n);
            run_banded(L, j);
            to_encode(j);
            continue;
        }
        /* A plan to make may drop others to stay within the budgets: none of them may
           have a frame in flight then (a new shape waits for the frames before it). */
        pf_shape sh = {j->in[0].width, j->in[0].height};
        if (n && !cached_shape(L, sh))
            while (n)
                retire(fifo, fp, &n);
        pf_pipeline *p = pipeline_for(L, j, sh, 0);
        if (!p) {
            j->status = 1;
            to_encode(j);
            continue;
        }
        /* On the CPU submit runs the frame: retire it at once. On the GPU up to the
           pipeline's slots in flight, waited for in order (tables are copied after each
           frame's own wait, before a later frame can complete). */
        pf_stats st;
        st.size = sizeof st;
        int cpu = pf_pipeline_stats(p, &st) == PF_OK && strcmp(st.backend, "cpu") == 0;
        int depth = cpu ? 1 : pf_pipeline_slots(p);
        if (depth > 8)
            depth = 8;
        while (n && n >= depth)
            retire(fifo, fp, &n);
        int rc = PF_OK;
        for (int k = 0; k < W.n_out && rc == PF_OK; k++) {
            pf_output_info oi;
            pf_pipeline_output_info(p, k, &oi);
            if (oi.kind != PF_OUTPUT_IMAGE)
                continue;
            /* "auto" channels: the input's, widened where a stage's output needs more */
            int ch = pf_pipeline_output_channels(p, k, j->in[0].channels);
            pf_sample s = oi.bits == 16 ? PF_U16 : oi.bits == 8 ? PF_U8 : j->in[0].sample;
            if (!W.pool ||
                pinned_frame(W.pool, oi.shape.width, oi.shape.height, s, ch, &j->out[k]) != PF_OK)
                rc = pf_frame_alloc(&j->out[k], oi.shape.width, oi.shape.height, s, ch);
            if (rc != PF_OK)
                snprintf(j->err, sizeof j->err, "out of memory for a %dx%d output", oi.shape.width,
                         oi.shape.height);
        }
        if (rc != PF_OK) {
            j->status = 1;
            to_encode(j);
            continue;
        }
        pf_frame in[RUN_MAX_IO];
        in[0] = j->in[0];
        for (int i = 1; i < W.n_in; i++)
            in[i] = W.bound[i];
        engine_enter(j);
        for (;;) {
            rc = pf_pipeline_submit(p, in, W.n_in, j->out, W.n_out, &j->ticket);
            if (rc != PF_UNSUPPORTED || !n)
                break;
            retire(fifo, fp, &n); /* every slot busy */
            tls_job = j->index;
        }
        tls_job = -1;
        if (rc != PF_OK) {
            engine_failed(j, p, rc);
            to_encode(j);
            continue;
        }
        /* A pageable input was copied by submit; a pinned one is read by DMA while the
           frame runs, and goes back to the pool with the job. */
        if (!W.pool || !pinned_owns(W.pool, &j->in[0]))
            pf_frame_free(&j->in[0]);
        fifo[n] = j;
        fp[n] = p;
        n++;
        if (depth == 1)
            retire(fifo, fp, &n);
    }
    if (W.o->profile && L == W.lane0) {
        cached *last = NULL;
        for (int i = 0; i < PLAN_CACHE; i++)
            if (L->c[i].p && (!last || L->c[i].use > last->use))
                last = &L->c[i];
        if (last)
            print_profile(last->p);
    }
    for (int i = 0; i < PLAN_CACHE; i++)
        drop(&L->c[i]);
    return NULL;
}
