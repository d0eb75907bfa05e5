/* cli/batch/codec.c: the codec threads (decode, encode and write) and a job's way through the queues */
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

/* Frees a frame of a job: back to the pinned pool when it came from there. */
static void free_frame(pf_frame *f)
{
    if (W.pool && pinned_owns(W.pool, f))
        pinned_release(W.pool, f);
    else
        pf_frame_free(f);
}

/* On the GPU, a decoded input moved into a pinned frame by the codec thread that decoded
   it (the codecs are many, the lane feeding the GPU one): the upload is then DMA from it.
   Where no pinned frame can be had, the input stays as it is (the engine stages it). */
static void pin_input(job *j)
{
    pf_frame *f = &j->in[0], pf;
    if (!W.pool || !f->data || pinned_owns(W.pool, f) ||
        pinned_frame(W.pool, f->width, f->height, f->sample, f->channels, &pf) != PF_OK)
        return;
    size_t row = pf_frame_pixel_bytes(f->sample, f->channels) * (size_t)f->width;
    for (int y = 0; y < f->height; y++)
        memcpy((char *)pf.data + (size_t)y * pf.pitch, (const char *)f->data + (size_t)y * f->pitch,
               row);
    pf_frame_free(f);
    *f = pf;
}

static void free_job(job *j)
{
    for (int k = 0; k < RUN_MAX_IO; k++) {
        free_frame(&j->out[k]);
        if (j->tab[k].columns) {
            for (int c = 0; c < j->tab[k].cols; c++)
                free((char *)j->tab[k].columns[c]);
            free((void *)j->tab[k].columns);
            free((void *)j->tab[k].data);
        }
        if (j->row_names[k]) {
            for (int r = 0; r < j->tab[k].rows; r++)
                free(j->row_names[k][r]);
            free(j->row_names[k]);
        }
    }
    free_frame(&j->in[0]);
    cli_rows_close(j->rows);
    pf_png_meta_free(j->meta);
    pf_jpeg_meta_free(j->jmeta);
    for (int k = 0; k < RUN_MAX_IO; k++)
        free(j->names[k]);
    free(j->path);
    free(j);
}

void push(queue *q, job *j)
{
    j->next = NULL;
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    q->n++;
}

job *pop(queue *q)
{
    job *j = q->head;
    if (j) {
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        q->n--;
    }
    return j;
}

void to_encode(job *j)
{
    pthread_mutex_lock(&W.mu);
    W.in_engine--;
    push(&W.encode, j);
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
}

/* ---- Codec threads --------------------------------------------------------------------------------- */

/* The items of j's outputs, frames[k] being output k's frame (for bands, one of the
   image's size whose data is not read), the first image output last: its appearance
   commits the set. order[i] is item i's output. The count, or -1 with the message. */
int job_items(job *j, const pf_frame *frames, out_item *items, int *order)
{
    int n = 0, commit = -1;
    for (int k = 0; k < W.n_out; k++) {
        int img = W.oi[k].kind == PF_OUTPUT_IMAGE;
        if (!j->names[k] || !j->names[k][0])
            break;
        items[n] = (out_item){j->names[k], img,     &frames[k], &j->tab[k], W.json[k],
                              j->meta,     &j->src, j->jmeta,   j->fmt,     .phys = OUT_PHYS_DROP};
        /* its form, and the input's density through its geometry */
        if (img && pf_pipeline_output_png_form(W.forms, k) > 0)
            items[n].png_form = pf_pipeline_output_png_form(W.forms, k);
        if (img && pf_pipeline_output_geometry(W.forms, k, j->src.width, j->src.height,
                                               &items[n].geometry))
            items[n].phys = OUT_PHYS_GEOMETRY;
        order[n] = k;
        if (img && commit < 0)
            commit = n;
        n++;
    }
    if (n < W.n_out) {
        snprintf(j->err, sizeof j->err, "no name for output %d", n);
        return -1;
    }
    if (commit < 0)
        commit = 0;
    if (n > 0) {
        out_item c = items[commit];
        int ck = order[commit];
        memmove(items + commit, items + commit + 1, sizeof *items * (size_t)(n - commit - 1));
        memmove(order + commit, order + commit + 1, sizeof *order * (size_t)(n - commit - 1));
        items[n - 1] = c;
        order[n - 1] = ck;
    }
    return n;
}

/* j->outs: the names written, in output order. */
void job_outs(job *j, const out_item *items, const int *order, int n)
{
    size_t used = 0;
    j->outs[0] = 0;
    for (int k = 0; k < W.n_out && used < sizeof j->outs; k++)
        for (int i = 0; i < n; i++)
            if (order[i] == k && used < sizeof j->outs)
                used += (size_t)snprintf(j->outs + used, sizeof j->outs - used, "%s%s",
                                         used ? ", " : "", items[i].final_name);
}

/* Threads for one PNG's deflate (png_deflate.h): the codec threads' share for each
   file being decoded or encoded now, so that one large file alone uses every core and a
   batch of many files keeps one a file. */
int png_threads(void)
{
    pthread_mutex_lock(&W.mu);
    int busy = W.encoding + W.decoding;
    int t = W.codecs / (busy > 0 ? busy : 1);
    pthread_mutex_unlock(&W.mu);
    return t > 1 ? t : 1;
}

static void encode(job *j)
{
    double enc_start = now_ms();
    tls_job = j->index;
    tls_step = "encode";
    if (j->status == 0 && !j->written) { /* a banded job was written by its lane */
        out_item items[RUN_MAX_IO];
        int order[RUN_MAX_IO];
        int n = job_items(j, j->out, items, order);
        out_opts oo = {W.dirfd, W.o->zlib, W.o->png_filter, png_threads()};
        if (n < 0 || out_write_set(&oo, items, n, j->err, sizeof j->err) != 0)
            j->status = 1;
        else
            job_outs(j, items, order, n);
        j->enc_ms = now_ms() - enc_start;
    }
    if (j->status == 0) {
        report("T %d %.3f %.3f %.3f %d", j->index, j->dec_ms, j->eng_ms, j->enc_ms,
               j->written ? j->band_rows : 0);
        report_done(j, 0, j->outs, "");
    } else {
        /* Its failure may be another file's stage's doing: a descriptor closed under it
           (EBADF never happens to a descriptor nobody else closed) */
        process_intact(-1);
        if (strstr(j->err, strerror(EBADF))) {
            report("C -1 a descriptor of the worker's closed under a file's write\tthe "
                   "pipeline's stages (seen when %s failed for it)",
                   j->path);
            _exit(6);
        }
        report_done(j, 1, j->err, "");
    }
    tls_job = -1;
    tls_step = NULL;
}

/* A reader's message without the input's path in front: the log names the input. */
void reader_error(job *j, const char *err)
{
    size_t pl = strlen(j->path);
    const char *m = strncmp(err, j->path, pl) == 0 && err[pl] == ':' ? err + pl + 2 : err;
    snprintf(j->err, sizeof j->err, "%s", m);
    j->status = 1;
}

/* On the GPU, a whole file decoded straight into a pinned frame, row by row, so its upload
   is DMA with no copy on the host. 1: done (read, or failed with j->err); 0: read it as
   usual (an interlaced PNG, a JPEG its EXIF turns, no pinned frame to be had). */
static int read_pinned(job *j, char *err, size_t errn)
{
    cli_rows *r = NULL;
    pf_frame fmt, pf;
    int rc = cli_rows_open(j->path, W.o->max_pixels, W.o->max_memory, W.o->strip, &r, &fmt, &j->src,
                           &j->meta, &j->jmeta, &j->fmt, err, errn);
    if (rc == PF_UNSUPPORTED)
        return 0;
    if (rc != PF_OK) {
        reader_error(j, err);
        return 1;
    }
    if (pinned_frame(W.pool, fmt.width, fmt.height, fmt.sample, fmt.channels, &pf) != PF_OK) {
        cli_rows_close(r);
        pf_png_meta_free(j->meta);
        pf_jpeg_meta_free(j->jmeta);
        j->meta = NULL;
        j->jmeta = NULL;
        return 0;
    }
    rc = cli_rows_read(r, &pf, fmt.height, err, errn);
    cli_rows_close(r);
    if (rc != PF_OK) {
        pinned_release(W.pool, &pf);
        reader_error(j, err);
        return 1;
    }
    j->in[0] = pf;
    return 1;
}

static void decode(job *j)
{
    tls_job = j->index;
    tls_step = "decode";
    report("B %d", j->index); /* its time limit starts (run.c) */
    j->t0 = now_ms();
    double dec_start = j->t0;
    char err[2048] = "";
    unsigned long long max_px = W.o->max_pixels ? W.o->max_pixels : PF_PNG_DEFAULT_MAX_PIXELS;
    const char *kind = not_regular(j->path);
    if (kind) {
        snprintf(j->err, sizeof j->err,
                 "not a regular file (%s): inputs are read more than once; give one image "
                 "on stdin as '-', or copy it to a file",
                 kind);
        j->status = 1;
    } else if (j->pixels > max_px) {
        /* the smaller limit first: a file over --max-pixels is named so, whatever its bytes */
        snprintf(j->err, sizeof j->err,
                 "image is %llu pixels, more than the limit of %llu (--max-pixels); not decoded",
                 j->pixels, max_px);
        j->status = 1;
    } else if (W.o->max_memory && j->est > W.o->max_memory) {
        snprintf(j->err, sizeof j->err,
                 "its frames need %s (from the file's header), over --max-memory %s; not decoded",
                 size_str(j->est).s, size_str(W.o->max_memory).s);
        j->status = 1;
    } else if (j->band_rows) {
        /* bands: the header and metadata now, the rows as the lane runs them */
        int rc = cli_rows_open(j->path, W.o->max_pixels, W.o->max_memory, W.o->strip, &j->rows,
                               &j->in[0], &j->src, &j->meta, &j->jmeta, &j->fmt, err, sizeof err);
        if (rc == PF_UNSUPPORTED) { /* interlaced, or turned by its EXIF: whole */
            j->band_rows = 0;
            decode(j);
            return;
        }
        if (rc != PF_OK)
            reader_error(j, err);
    } else if (W.pool && read_pinned(j, err, sizeof err)) {
        /* read, or failed with its message */
    } else if (cli_image_read(j->path, W.o->max_pixels, W.o->max_memory, W.o->strip, &j->in[0],
                              &j->src, &j->meta, &j->jmeta, &j->fmt, err, sizeof err) != PF_OK) {
        reader_error(j, err); /* the reader's messages start with the path */
    }
    j->dec_ms = now_ms() - dec_start;
    tls_job = -1;
    tls_step = NULL;
}

void *codec_main(void *arg)
{
    (void)arg;
    thread_altstack();
    unsigned long long half = W.o->max_memory / 2;
    pthread_mutex_lock(&W.mu);
    for (;;) {
        job *j = pop(&W.encode);
        if (j) {
            W.encoding++;
            pthread_mutex_unlock(&W.mu);
            encode(j);
            unsigned long long est = j->est;
            free_job(j);
            pthread_mutex_lock(&W.mu);
            W.encoding--;
            W.bytes_in_flight -= est;
            pthread_cond_broadcast(&W.cv);
            continue;
        }
        j = W.decode.head;
        int busy = W.bytes_in_flight > 0;
        if (j && (!busy || !half || W.bytes_in_flight + j->est <= half)) {
            pop(&W.decode);
            W.decoding++;
            W.bytes_in_flight += j->est;
            pthread_mutex_unlock(&W.mu);
            decode(j);
            pthread_mutex_lock(&W.mu);
            W.decoding--;
            if (!j->status && !j->rows && W.pool) {
                pthread_mutex_unlock(&W.mu);
                pin_input(j);
                pthread_mutex_lock(&W.mu);
            }
            if (j->status) {
                W.in_engine++; /* to_encode counts it out */
                pthread_mutex_unlock(&W.mu);
                to_encode(j);
                pthread_mutex_lock(&W.mu);
            } else {
                push(&W.ready, j);
            }
            pthread_cond_broadcast(&W.cv);
            continue;
        }
        if (W.input_closed && !W.decode.n && !W.decoding && !W.ready.n && !W.in_engine &&
            !W.encode.n)
            break;
        pthread_cond_wait(&W.cv, &W.mu);
    }
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
    return NULL;
}
