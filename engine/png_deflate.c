/* engine/png_deflate.c: a PNG's image data deflated in segments on several threads
 * (png_deflate.h says what and why).
 *
 * The image is cut into segments of a fixed number of rows, chosen from its size alone
 * (about a 64th of its filtered data, between PF_PNGZ_SEG_MIN and PF_PNGZ_SEG_MAX), so
 * the file's bytes are the same whatever the number of threads and however the rows
 * arrive (at once, in bands, one at a time). Rows are gathered (copied) until they make
 * a segment for each thread, or the image ends; a call bringing more is deflated from
 * the caller's memory, the rows gathered before it first (a span: gathered rows, then
 * the call's). A segment's thread filters its own rows, and also the rows just before
 * them, to prime its deflate with the 32 KB of filtered data that precede it: filtering
 * is a function of a row and the one above, so every thread finds the bytes its
 * neighbour compresses without waiting for it. Rows before the span come from what the
 * writer kept of the previous span: the last row as stored, and the last 32 KB of
 * filtered data.
 *
 * Segments run in rounds of a few per thread, joined, then written in order from the
 * caller's thread: memory stays a few segments per thread whatever the image's size,
 * and only the caller's thread writes. */
#include "png_deflate.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define WINDOW       32768 /* deflate's window: a segment's dictionary */
#define ROUND_PER_TH 4     /* segments per thread in a round */
#define MAX_THREADS  256

/* One thread's scratch: its deflate stream and rows. */
typedef struct worker {
    z_stream zs;
    int zs_ready;
    unsigned char *row[2];  /* rows as stored (16-bit swapped), alternating cur/prev */
    unsigned char *cand[5]; /* a row filtered by each filter tried: 1 + rowbytes */
    unsigned char *dict;    /* the data before a segment: WINDOW + rows */
    size_t dict_cap, dict_len;
} worker;

/* One segment's work and result. */
typedef struct segment {
    int r0, r1; /* rows of the span */
    int last;   /* the image's last segment: Z_FINISH */
    unsigned char *out;
    size_t out_len, out_cap;
    uLong adler;
    size_t in_len;
    int failed;
    char why[128];
} segment;

/* Rows deflated together: the gathered ones (a, na of them, pa apart), then the call's
   (b, pb apart); n in all. */
typedef struct span {
    const unsigned char *a, *b;
    size_t pa, pb;
    int na, n;
} span;

struct pf_pngz {
    pf_pngz_opts o;
    int threads;
    size_t rowbytes;
    int bpp; /* bytes between a byte and the one it is filtered against */
    int strategy;
    pf_pngz_write_fn write;
    void *ctx;
    int y;       /* rows done */
    int started; /* the zlib header is out */
    int failed;
    uLong adler;
    unsigned char *prev; /* the last row done, as stored (zeros before the first) */
    unsigned char *tail; /* the last WINDOW bytes of filtered data (fewer at first) */
    size_t tail_len;
    int seg_rows;        /* rows of a segment (the last one's may be fewer) */
    unsigned char *pend; /* gathered rows, as the caller gave them, rowbytes apart */
    int pend_rows, pend_cap;
    worker *w;
    segment *seg;
    int seg_cap;
    /* a round in flight */
    const span *sp;
    int n_seg;
    atomic_int next;
};

/* ---- Messages ------------------------------------------------------------------------- */

static void say(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errn, const char *fmt, ...)
{
    if (!err || !errn)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
}

/* ---- Filters (the PNG specification, section 9) ----------------------------------------- */

static unsigned char paeth(int a, int b, int c)
{
    int p = a + b - c;
    int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return (unsigned char)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

/* Row cur (prv the one above) filtered with filter type t (0 None .. 4 Paeth) into out,
   its type byte first. */
static void filter_row(int t, const unsigned char *cur, const unsigned char *prv,
                       unsigned char *out, size_t n, size_t bpp)
{
    unsigned char *o = out + 1;
    out[0] = (unsigned char)t;
    size_t i = 0;
    switch (t) {
    case 0:
        memcpy(o, cur, n);
        break;
    case 1:
        for (; i < bpp && i < n; i++)
            o[i] = cur[i];
        for (; i < n; i++)
            o[i] = (unsigned char)(cur[i] - cur[i - bpp]);
        break;
    case 2:
        for (; i < n; i++)
            o[i] = (unsigned char)(cur[i] - prv[i]);
        break;
    case 3:
        for (; i < bpp && i < n; i++)
            o[i] = (unsigned char)(cur[i] - (prv[i] >> 1));
        for (; i < n; i++)
            o[i] = (unsigned char)(cur[i] - ((cur[i - bpp] + prv[i]) >> 1));
        break;
    default:
        for (; i < bpp && i < n; i++)
            o[i] = (unsigned char)(cur[i] - prv[i]);
        for (; i < n; i++)
            o[i] = (unsigned char)(cur[i] - paeth(cur[i - bpp], prv[i], prv[i - bpp]));
        break;
    }
}

/* libpng's measure of a filtered row: the sum of its bytes taken as signed magnitudes. */
static unsigned long row_cost(const unsigned char *o, size_t n)
{
    unsigned long s = 0;
    for (size_t i = 0; i < n; i++)
        s += o[i] < 128 ? o[i] : 256u - o[i];
    return s;
}

/* Row cur filtered by z's mask: the one filter, or the cheapest of several (the first
   in None..Paeth order on a tie, as libpng). Returns the filtered row (1 + rowbytes). */
static const unsigned char *filter_best(const pf_pngz *z, worker *w, const unsigned char *cur,
                                        const unsigned char *prv)
{
    int mask = z->o.filter ? z->o.filter : PF_PNGZ_NONE;
    int best = -1;
    unsigned long best_cost = 0;
    for (int t = 0; t < 5; t++) {
        if (!(mask & (PF_PNGZ_NONE << t)))
            continue;
        filter_row(t, cur, prv, w->cand[t], z->rowbytes, (size_t)z->bpp);
        if (mask == (PF_PNGZ_NONE << t))
            return w->cand[t];
        unsigned long c = row_cost(w->cand[t] + 1, z->rowbytes);
        if (best < 0 || c < best_cost) {
            best = t;
            best_cost = c;
        }
    }
    return w->cand[best];
}

/* Row j of span sp as stored (j = -1: the row before the span), in buf when it must be
   swapped, else where it is. */
static const unsigned char *stored(const pf_pngz *z, const span *sp, int j, unsigned char *buf)
{
    if (j < 0)
        return z->prev;
    const unsigned char *src =
        j < sp->na ? sp->a + (size_t)j * sp->pa : sp->b + (size_t)(j - sp->na) * sp->pb;
    if (!(z->o.swap16 && z->o.bits == 16))
        return src;
    for (size_t i = 0; i + 1 < z->rowbytes; i += 2) {
        buf[i] = src[i + 1];
        buf[i + 1] = src[i];
    }
    return buf;
}

/* Rows r0..r1-1 of sp filtered, each handed to fn. */
typedef int (*row_fn)(void *arg, const unsigned char *frow, size_t n);
static int filter_rows(const pf_pngz *z, worker *w, const span *sp, int r0, int r1, row_fn fn,
                       void *arg)
{
    const unsigned char *prv = stored(z, sp, r0 - 1, w->row[1]);
    for (int j = r0; j < r1; j++) {
        const unsigned char *cur = stored(z, sp, j, prv == w->row[0] ? w->row[1] : w->row[0]);
        if (fn(arg, filter_best(z, w, cur, prv), z->rowbytes + 1) != 0)
            return -1;
        prv = cur;
    }
    return 0;
}

static int append_dict(void *arg, const unsigned char *frow, size_t n)
{
    worker *w = arg;
    memcpy(w->dict + w->dict_len, frow, n);
    w->dict_len += n;
    return 0;
}

/* The filtered data before row r0 of sp, its last WINDOW bytes at most: the kept tail,
   then the span's rows before r0 that reach back a window. */
static void window_before(const pf_pngz *z, worker *w, const span *sp, int r0,
                          const unsigned char **dict, size_t *len)
{
    int need = (int)((WINDOW + z->rowbytes) / (z->rowbytes + 1));
    int d0 = r0 > need ? r0 - need : 0;
    w->dict_len = 0;
    if (d0 == 0) {
        memcpy(w->dict, z->tail, z->tail_len);
        w->dict_len = z->tail_len;
    }
    filter_rows(z, w, sp, d0, r0, append_dict, w);
    size_t n = w->dict_len;
    *dict = w->dict + (n > WINDOW ? n - WINDOW : 0);
    *len = n > WINDOW ? WINDOW : n;
}

/* ---- One segment ------------------------------------------------------------------------ */

typedef struct seg_run {
    worker *w;
    segment *s;
} seg_run;

/* Deflates what zs holds with flush, growing the segment's output as needed. */
static int zrun(seg_run *r, int flush)
{
    z_stream *zs = &r->w->zs;
    segment *s = r->s;
    for (;;) {
        if (zs->avail_out == 0) {
            size_t cap = s->out_cap ? 2 * s->out_cap : 65536;
            unsigned char *p = realloc(s->out, cap);
            if (!p) {
                snprintf(s->why, sizeof s->why, "out of memory for %zu bytes of output", cap);
                return -1;
            }
            s->out = p;
            s->out_cap = cap;
            zs->next_out = p + s->out_len;
            zs->avail_out = (uInt)(cap - s->out_len > UINT32_MAX ? UINT32_MAX : cap - s->out_len);
        }
        unsigned before = zs->avail_out;
        int rc = deflate(zs, flush);
        s->out_len += before - zs->avail_out;
        if (rc == Z_STREAM_END)
            return 0;
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            snprintf(s->why, sizeof s->why, "zlib's deflate failed: %s",
                     zs->msg ? zs->msg : zError(rc));
            return -1;
        }
        if (zs->avail_out != 0 && flush != Z_FINISH)
            return 0; /* all input taken, and a flush complete */
    }
}

static int deflate_row(void *arg, const unsigned char *frow, size_t n)
{
    seg_run *r = arg;
    r->s->adler = adler32(r->s->adler, frow, (uInt)n);
    r->s->in_len += n;
    r->w->zs.next_in = (unsigned char *)frow; /* zlib does not write through next_in */
    r->w->zs.avail_in = (uInt)n;
    return zrun(r, Z_NO_FLUSH);
}

static int run_segment(pf_pngz *z, worker *w, segment *s)
{
    if (!w->zs_ready) {
        memset(&w->zs, 0, sizeof w->zs);
        int rc = deflateInit2(&w->zs, z->o.level, Z_DEFLATED, -15, 8, z->strategy);
        if (rc != Z_OK) {
            snprintf(s->why, sizeof s->why, "zlib's deflateInit2 failed: %s", zError(rc));
            return -1;
        }
        w->zs_ready = 1;
    } else if (deflateReset(&w->zs) != Z_OK) {
        snprintf(s->why, sizeof s->why, "zlib's deflateReset failed");
        return -1;
    }
    s->out_len = 0;
    s->in_len = 0;
    s->adler = adler32(0, NULL, 0);
    const unsigned char *dict;
    size_t dict_len;
    window_before(z, w, z->sp, s->r0, &dict, &dict_len);
    if (dict_len && deflateSetDictionary(&w->zs, dict, (uInt)dict_len) != Z_OK) {
        snprintf(s->why, sizeof s->why, "zlib's deflateSetDictionary failed");
        return -1;
    }
    seg_run r = {w, s};
    w->zs.next_out = s->out;
    w->zs.avail_out = (uInt)(s->out_cap > UINT32_MAX ? UINT32_MAX : s->out_cap);
    if (filter_rows(z, w, z->sp, s->r0, s->r1, deflate_row, &r) != 0)
        return -1;
    w->zs.avail_in = 0;
    return zrun(&r, s->last ? Z_FINISH : Z_SYNC_FLUSH);
}

/* A thread's loop over the round's segments, in index order. */
static void take_segments(pf_pngz *z, worker *w)
{
    for (int i; (i = atomic_fetch_add(&z->next, 1)) < z->n_seg;)
        if (run_segment(z, w, &z->seg[i]) != 0)
            z->seg[i].failed = 1;
}

typedef struct thread_arg {
    pf_pngz *z;
    worker *w;
} thread_arg;

static void *thread_main(void *p)
{
    thread_arg *a = p;
    take_segments(a->z, a->w);
    return NULL;
}

/* ---- Writing ------------------------------------------------------------------------------- */

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* One chunk of the pieces' bytes, joined. */
static int chunk_pieces(pf_pngz_write_fn write, void *ctx, const char *type,
                        const unsigned char *const *data, const size_t *len, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += len[i];
    if (total > 0x7fffffffu)
        return -1;
    unsigned char head[8];
    be32(head, (uint32_t)total);
    memcpy(head + 4, type, 4);
    uLong crc = crc32(0, head + 4, 4);
    if (write(ctx, head, 8) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (!len[i])
            continue;
        crc = crc32(crc, data[i], (uInt)len[i]);
        if (write(ctx, data[i], len[i]) != 0)
            return -1;
    }
    unsigned char c[4];
    be32(c, (uint32_t)crc);
    return write(ctx, c, 4);
}

PF_PNGZ_API int pf_pngz_chunk(pf_pngz_write_fn write, void *ctx, const char *type, const void *data,
                              size_t n)
{
    const unsigned char *d = data;
    return chunk_pieces(write, ctx, type, &d, &n, 1);
}

/* The zlib header (RFC 1950): deflate, 32 KB window, the level's hint, no dictionary. */
static void zlib_header(int level, unsigned char h[2])
{
    int flevel = level < 0 ? 2 : level < 2 ? 0 : level < 6 ? 1 : level == 6 ? 2 : 3;
    h[0] = 0x78;
    h[1] = (unsigned char)(flevel << 6);
    h[1] = (unsigned char)(h[1] + 31 - (h[0] * 256 + h[1]) % 31);
}

/* Segment i done: its IDAT chunk, after the zlib header for the first and with the
   Adler-32 after the last. */
static int emit(pf_pngz *z, segment *s)
{
    unsigned char head[2], sum[4];
    const unsigned char *d[3] = {head, s->out, sum};
    size_t len[3] = {0, s->out_len, 0};
    if (!z->started) {
        zlib_header(z->o.level, head);
        len[0] = 2;
        z->started = 1;
    }
    z->adler = adler32_combine(z->adler, s->adler, (z_off_t)s->in_len);
    if (s->last) {
        be32(sum, (uint32_t)z->adler);
        len[2] = 4;
    }
    return chunk_pieces(z->write, z->ctx, "IDAT", d, len, 3);
}

/* Runs segments [first, first + count) of span sp on the threads, then writes them. */
static int run_round(pf_pngz *z, const span *sp, int first, int count, int per, int total_segs,
                     char *err, size_t errn)
{
    for (int i = 0; i < count; i++) {
        segment *s = &z->seg[i];
        s->r0 = (first + i) * per;
        s->r1 = s->r0 + per < sp->n ? s->r0 + per : sp->n;
        s->last = first + i == total_segs - 1 && z->y + sp->n == z->o.height;
        s->failed = 0;
        s->why[0] = 0;
    }
    z->sp = sp;
    z->n_seg = count;
    atomic_store(&z->next, 0);
    int helpers = (count < z->threads ? count : z->threads) - 1;
    pthread_t th[MAX_THREADS];
    thread_arg ta[MAX_THREADS];
    int started = 0;
    for (int i = 0; i < helpers; i++) {
        ta[i] = (thread_arg){z, &z->w[i + 1]};
        if (pthread_create(&th[i], NULL, thread_main, &ta[i]) != 0)
            break; /* fewer threads: the caller's takes what is left */
        started++;
    }
    take_segments(z, &z->w[0]);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < count; i++) {
        segment *s = &z->seg[i];
        if (s->failed) {
            say(err, errn, "PNG image data, rows %d to %d: %s", z->y + s->r0, z->y + s->r1 - 1,
                s->why);
            return -1;
        }
        if (emit(z, s) != 0) {
            say(err, errn, "PNG image data: write failed");
            return -1;
        }
    }
    return 0;
}

/* A span's rows, all deflated and written; the kept row and tail moved past it. */
static int run_span(pf_pngz *z, const span *sp, char *err, size_t errn)
{
    if (sp->n <= 0)
        return 0;
    int per = z->seg_rows, segs = (sp->n + per - 1) / per;
    int round = z->threads * ROUND_PER_TH;
    for (int first = 0; first < segs; first += round) {
        int count = segs - first < round ? segs - first : round;
        if (run_round(z, sp, first, count, per, segs, err, errn) != 0)
            return -1;
    }
    /* the filtered data before the next span, and its row above */
    const unsigned char *dict;
    size_t len;
    window_before(z, &z->w[0], sp, sp->n, &dict, &len);
    memmove(z->tail, dict, len);
    z->tail_len = len;
    const unsigned char *last = stored(z, sp, sp->n - 1, z->w[0].row[0]);
    memcpy(z->prev, last, z->rowbytes);
    z->y += sp->n;
    return 0;
}

/* ---- The entry points ----------------------------------------------------------------------- */

static int online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static size_t row_bytes(const pf_pngz_opts *o)
{
    return ((size_t)o->width * (size_t)o->channels * (size_t)o->bits + 7) / 8;
}

PF_PNGZ_API int pf_pngz_worth(const pf_pngz_opts *o)
{
    if (o->width <= 0 || o->height <= 0)
        return 0;
    return (row_bytes(o) + 1) * (size_t)o->height >= PF_PNGZ_MIN_PARALLEL;
}

static int check_opts(const pf_pngz_opts *o, char *err, size_t errn)
{
    int b = o->bits;
    if (o->width <= 0 || o->height <= 0 || o->channels < 1 || o->channels > 4 ||
        (b != 1 && b != 2 && b != 4 && b != 8 && b != 16) || (b < 8 && o->channels != 1) ||
        o->level < -1 || o->level > 9 || (o->filter & ~PF_PNGZ_ALL) || o->threads < 0) {
        say(err, errn,
            "PNG image data: cannot write %dx%d pixels of %d channels of %d bits at zlib level "
            "%d with filters 0x%x on %d threads",
            o->width, o->height, o->channels, b, o->level, (unsigned)o->filter, o->threads);
        return -1;
    }
    return 0;
}

PF_PNGZ_API int pf_pngz_begin(const pf_pngz_opts *o, pf_pngz_write_fn write, void *ctx,
                              pf_pngz **out, char *err, size_t errn)
{
    *out = NULL;
    if (!o || !write || check_opts(o, err, errn) != 0) {
        if (!o || !write)
            say(err, errn, "PNG image data: no %s", o ? "write function" : "options");
        return -1;
    }
    pf_pngz *z = calloc(1, sizeof *z);
    if (!z) {
        say(err, errn, "PNG image data: out of memory");
        return -1;
    }
    z->o = *o;
    z->threads =
        o->threads ? (o->threads > MAX_THREADS ? MAX_THREADS : o->threads) : online_cores();
    z->rowbytes = row_bytes(o);
    size_t px = (size_t)o->channels * (size_t)o->bits;
    z->bpp = px >= 8 ? (int)(px / 8) : 1;
    /* libpng's choice: Z_FILTERED for filtered rows, the default strategy for None */
    z->strategy = (o->filter & ~PF_PNGZ_NONE) ? Z_FILTERED : Z_DEFAULT_STRATEGY;
    z->write = write;
    z->ctx = ctx;
    z->adler = adler32(0, NULL, 0);
    size_t rb = z->rowbytes;
    /* segments of about a 64th of the image, from its size alone */
    size_t total = (rb + 1) * (size_t)o->height, seg = total / 64;
    seg = seg < PF_PNGZ_SEG_MIN ? PF_PNGZ_SEG_MIN : seg > PF_PNGZ_SEG_MAX ? PF_PNGZ_SEG_MAX : seg;
    z->seg_rows = seg / (rb + 1) > 1 ? (int)(seg / (rb + 1)) : 1;
    if (z->seg_rows > o->height)
        z->seg_rows = o->height;
    int segs = (o->height + z->seg_rows - 1) / z->seg_rows;
    if (z->threads > segs) /* no more threads (and their buffers) than segments */
        z->threads = segs;
    /* gathered rows: a segment for each thread, 32 at most */
    size_t gather = (size_t)(z->threads < 32 ? z->threads : 32) * (size_t)z->seg_rows;
    z->pend_cap = gather > (size_t)o->height ? o->height : (int)gather;
    z->seg_cap = z->threads * ROUND_PER_TH;
    z->prev = calloc(1, rb);
    z->tail = malloc(WINDOW);
    z->pend = malloc((size_t)z->pend_cap * rb);
    z->w = calloc((size_t)z->threads, sizeof *z->w);
    z->seg = calloc((size_t)z->seg_cap, sizeof *z->seg);
    int ok = z->prev && z->tail && z->pend && z->w && z->seg;
    size_t need = (WINDOW + rb) / (rb + 1) + 1;
    for (int t = 0; ok && t < z->threads; t++) {
        worker *w = &z->w[t];
        w->dict_cap = WINDOW + need * (rb + 1);
        w->dict = malloc(w->dict_cap);
        ok = w->dict != NULL;
        for (int i = 0; ok && i < 2; i++)
            ok = (w->row[i] = malloc(rb)) != NULL;
        for (int i = 0; ok && i < 5; i++)
            if ((o->filter ? o->filter : PF_PNGZ_NONE) & (PF_PNGZ_NONE << i))
                ok = (w->cand[i] = malloc(rb + 1)) != NULL;
    }
    if (!ok) {
        pf_pngz_free(z);
        say(err, errn, "PNG image data: out of memory for %d threads' rows of %zu bytes",
            z->threads, rb);
        return -1;
    }
    *out = z;
    return 0;
}

PF_PNGZ_API int pf_pngz_rows(pf_pngz *z, const void *rows, size_t pitch, int n, char *err,
                             size_t errn)
{
    if (!z || z->failed || n < 0 || (n && !rows) || n > z->o.height - z->y - z->pend_rows) {
        if (z && !z->failed)
            say(err, errn, "PNG image data: %d rows given at row %d of %d", n, z->y + z->pend_rows,
                z->o.height);
        else
            say(err, errn, "PNG image data: %s", z ? "stopped after a failure" : "no writer");
        return -1;
    }
    const unsigned char *src = rows;
    size_t rb = z->rowbytes;
    int total = z->pend_rows + n, ends = z->y + total == z->o.height;
    if (total < z->pend_cap && !ends) { /* few rows yet: gathered */
        for (int i = 0; i < n; i++)
            memcpy(z->pend + (size_t)(z->pend_rows + i) * rb, src + (size_t)i * pitch, rb);
        z->pend_rows = total;
        return 0;
    }
    /* whole segments (all the rows at the end): the gathered rows, then the call's; the
       rest, fewer than a segment and all the call's (pend_cap is whole segments), is
       gathered for the next call */
    int take = ends ? total : total / z->seg_rows * z->seg_rows;
    span sp = {z->pend, src, rb, pitch, z->pend_rows, take};
    if (run_span(z, &sp, err, errn) != 0) {
        z->failed = 1;
        return -1;
    }
    int from = take - z->pend_rows;
    z->pend_rows = total - take;
    for (int i = 0; i < z->pend_rows; i++)
        memcpy(z->pend + (size_t)i * rb, src + (size_t)(from + i) * pitch, rb);
    return 0;
}

PF_PNGZ_API void pf_pngz_free(pf_pngz *z)
{
    if (!z)
        return;
    for (int t = 0; z->w && t < z->threads; t++) {
        worker *w = &z->w[t];
        if (w->zs_ready)
            deflateEnd(&w->zs);
        free(w->dict);
        for (int i = 0; i < 2; i++)
            free(w->row[i]);
        for (int i = 0; i < 5; i++)
            free(w->cand[i]);
    }
    for (int i = 0; z->seg && i < z->seg_cap; i++)
        free(z->seg[i].out);
    free(z->w);
    free(z->seg);
    free(z->prev);
    free(z->tail);
    free(z->pend);
    free(z);
}
