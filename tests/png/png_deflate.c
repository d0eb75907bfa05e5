/* tests/png/png_deflate.c: image data deflated in segments on several threads
 * (engine/png_deflate.c) reads back as the same pixels.
 *
 * Each case writes a PNG into memory: signature, IHDR and PLTE by hand, the image data
 * through pf_pngz, IEND. Then
 * - zlib's own inflate takes the joined IDAT data as one zlib stream: its header and
 *   Adler-32 are checked by zlib, it must end exactly at the end of the data, and the
 *   rows, unfiltered here, must be the rows given;
 * - libpng reads the file (CRCs, IHDR, image data) to the same rows.
 * Cases: every stored format (gray, gray+alpha, RGB, RGBA at 8 and 16 bits, in host
 * and in PNG byte order; 1-, 2- and 4-bit gray; 4- and 8-bit palette), every filter
 * (none, sub, up, avg, paeth, and the per-row choices fast and all) at zlib levels 0,
 * 1, 6 and 9; sizes one row below, at and above the segment sizes; rows given at once,
 * in bands of random heights and one at a time; 1 to 5 threads. The segments are seen:
 * a large image on 4 threads comes in several IDAT chunks, one a segment.
 * Failures: a write that fails stops the stream and every later call, more rows than
 * the image has is refused, bad options are refused with a message.
 * pf_png_write takes this path for a large frame (RGB at 8 and 16 bits, a palette, 4-bit
 * gray): the file reads back to the frame, with its text chunks before and after the
 * image data where they were, its IDAT chunks the segments'; pf_png_write_options'
 * threads 1 and 3 write the same bytes as one per core, -1 is refused.
 * Every case is also written on one thread with its rows at once: the same bytes. */
#define _POSIX_C_SOURCE 200809L
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "png_deflate.h"
#include "pipefuse/png.h"
#include "testutil.h"

/* ---- A PNG in memory ---------------------------------------------------------------- */

typedef struct sink {
    unsigned char *p;
    size_t n, cap;
    long fail_after; /* a write past this many bytes fails (-1: never) */
    int writes;
} sink;

static int sink_write(void *ctx, const void *data, size_t n)
{
    sink *s = ctx;
    s->writes++;
    if (s->fail_after >= 0 && s->n + n > (size_t)s->fail_after)
        return -1;
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->n + n)
            cap *= 2;
        unsigned char *q = realloc(s->p, cap);
        if (!q)
            return -1;
        s->p = q;
        s->cap = cap;
    }
    memcpy(s->p + s->n, data, n);
    s->n += n;
    return 0;
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

typedef struct fmt {
    int bits, channels, palette;
} fmt;

static size_t rowbytes(const fmt *f, int w)
{
    return ((size_t)w * (size_t)f->channels * (size_t)f->bits + 7) / 8;
}

/* An image's rows as given (host order for 16 bits when swap): smooth, with noise and
   repeats, so that deflate finds matches and literals. */
static unsigned char *make_rows(const fmt *f, int w, int h, uint64_t seed)
{
    size_t rb = rowbytes(f, w);
    unsigned char *p = malloc(rb * (size_t)h);
    pf_rng r;
    pf_rng_seed(&r, seed);
    for (int y = 0; y < h; y++) {
        unsigned char *row = p + rb * (size_t)y;
        for (size_t i = 0; i < rb; i++) {
            int v = (int)((i * 3 + (size_t)y * 5) & 0xff);
            if (pf_rng_range(&r, 0, 7) == 0)
                v = (int)(pf_rng_u32(&r) & 0xff);
            row[i] = (unsigned char)v;
        }
        if (y >= 4 && pf_rng_range(&r, 0, 9) == 0) /* a repeated row now and then */
            memcpy(row, p + rb * (size_t)(y - 4), rb);
        if (f->palette && f->bits == 8) /* indices within a 200-entry palette */
            for (size_t i = 0; i < rb; i++)
                row[i] = (unsigned char)(row[i] % 200);
    }
    return p;
}

/* Row y as PNG stores it. */
static void stored_row(const fmt *f, const unsigned char *rows, size_t rb, int y, int swap,
                       unsigned char *out)
{
    const unsigned char *s = rows + rb * (size_t)y;
    if (f->bits == 16 && swap)
        for (size_t i = 0; i + 1 < rb; i += 2) {
            out[i] = s[i + 1];
            out[i + 1] = s[i];
        }
    else
        memcpy(out, s, rb);
}

static void chunk(sink *s, const char *type, const void *data, size_t n)
{
    CHECK(pf_pngz_chunk(sink_write, s, type, data, n) == 0);
}

static void png_head(sink *s, const fmt *f, int w, int h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    sink_write(s, sig, 8);
    unsigned char ihdr[13] = {0};
    for (int i = 0; i < 4; i++) {
        ihdr[i] = (unsigned char)((uint32_t)w >> (24 - 8 * i));
        ihdr[4 + i] = (unsigned char)((uint32_t)h >> (24 - 8 * i));
    }
    static const int ct[] = {0, 4, 2, 6};
    ihdr[8] = (unsigned char)f->bits;
    ihdr[9] = (unsigned char)(f->palette ? 3 : ct[f->channels - 1]);
    chunk(s, "IHDR", ihdr, 13);
    if (f->palette) {
        int n = 1 << f->bits;
        unsigned char pal[768];
        for (int i = 0; i < n * 3; i++)
            pal[i] = (unsigned char)(i * 7);
        chunk(s, "PLTE", pal, (size_t)n * 3);
    }
}

/* ---- Reading it back ------------------------------------------------------------------ */

static int paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* The IDAT data joined, inflated by zlib (which checks the header and Adler-32),
   unfiltered and compared with the rows. Returns the number of IDAT chunks. */
static int check_zlib(const char *what, const sink *s, const fmt *f, int w, int h,
                      const unsigned char *rows, int swap)
{
    size_t rb = rowbytes(f, w),
           bpp = (size_t)(f->channels * f->bits >= 8 ? f->channels * f->bits / 8 : 1);
    unsigned char *z = malloc(s->n);
    size_t zn = 0;
    int idats = 0, after_idat_other = 0;
    for (size_t at = 8; at + 12 <= s->n;) {
        uint32_t len = rd32(s->p + at);
        if (!memcmp(s->p + at + 4, "IDAT", 4)) {
            CHECKF(!after_idat_other, "%s: IDAT chunks are not consecutive", what);
            memcpy(z + zn, s->p + at + 8, len);
            zn += len;
            idats++;
        } else if (idats) {
            after_idat_other = 1;
        }
        at += 12 + (size_t)len;
    }
    size_t raw_n = (rb + 1) * (size_t)h;
    unsigned char *raw = malloc(raw_n + 16);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    CHECK(inflateInit(&zs) == Z_OK);
    zs.next_in = z;
    zs.avail_in = (uInt)zn;
    zs.next_out = raw;
    zs.avail_out = (uInt)raw_n + 16;
    int rc = inflate(&zs, Z_FINISH);
    CHECKF(rc == Z_STREAM_END, "%s: inflate says %d (%s)", what, rc, zs.msg ? zs.msg : "");
    CHECKF(zs.avail_in == 0, "%s: %u bytes after the zlib stream's end", what, zs.avail_in);
    CHECKF(zs.total_out == raw_n, "%s: inflated %lu bytes, not %zu", what, zs.total_out, raw_n);
    inflateEnd(&zs);
    unsigned char *prev = calloc(1, rb), *cur = malloc(rb), *want = malloc(rb);
    int bad = 0;
    for (int y = 0; rc == Z_STREAM_END && y < h && !bad; y++) {
        const unsigned char *in = raw + (rb + 1) * (size_t)y;
        int t = in[0];
        CHECKF(t <= 4, "%s: row %d has filter type %d", what, y, t);
        for (size_t i = 0; i < rb; i++) {
            int a = i >= bpp ? cur[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
            int p = t == 0 ? 0 : t == 1 ? a : t == 2 ? b : t == 3 ? (a + b) / 2 : paeth(a, b, c);
            cur[i] = (unsigned char)(in[1 + i] + p);
        }
        stored_row(f, rows, rb, y, swap, want);
        if (memcmp(cur, want, rb) != 0) {
            CHECKF(0, "%s: row %d differs after inflate and unfiltering", what, y);
            bad = 1;
        }
        memcpy(prev, cur, rb);
    }
    free(z);
    free(raw);
    free(prev);
    free(cur);
    free(want);
    return idats;
}

typedef struct mem_in {
    const unsigned char *p;
    size_t n, at;
} mem_in;

static void mem_read(png_structp png, png_bytep out, size_t n)
{
    mem_in *m = png_get_io_ptr(png);
    if (m->at + n > m->n)
        png_error(png, "past the end");
    memcpy(out, m->p + m->at, n);
    m->at += n;
}

static void quiet(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* libpng reads the file to the same rows, as stored (no transformation). */
static void check_libpng(const char *what, const sink *s, const fmt *f, int w, int h,
                         const unsigned char *rows, int swap)
{
    size_t rb = rowbytes(f, w);
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, quiet);
    png_infop info = png_create_info_struct(png);
    unsigned char *row = malloc(rb), *want = malloc(rb);
    mem_in m = {s->p, s->n, 0};
    volatile int y = 0;
    if (setjmp(png_jmpbuf(png))) {
        CHECKF(0, "%s: libpng failed at row %d", what, y);
    } else {
        png_set_read_fn(png, &m, mem_read);
        png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
        png_read_info(png, info);
        CHECK(png_get_rowbytes(png, info) == rb);
        for (; y < h; y++) {
            png_read_row(png, row, NULL);
            stored_row(f, rows, rb, y, swap, want);
            /* libpng leaves the padding bits of a last partial byte as they were */
            int pad = (int)(rb * 8 - (size_t)w * (size_t)(f->bits * f->channels));
            unsigned char keep = (unsigned char)(0xff << pad);
            if (memcmp(row, want, rb - 1) != 0 || ((row[rb - 1] ^ want[rb - 1]) & keep)) {
                CHECKF(0, "%s: libpng reads row %d differently", what, y);
                break;
            }
        }
        png_read_end(png, NULL);
        CHECKF(m.at == s->n, "%s: libpng stopped at byte %zu of %zu", what, m.at, s->n);
    }
    png_destroy_read_struct(&png, &info, NULL);
    free(row);
    free(want);
}

/* ---- One case ------------------------------------------------------------------------ */

enum { AT_ONCE, BANDS, ONE_BY_ONE };

/* Writes and checks one image; returns its IDAT chunk count (0 on failure). */
static int run_case(const fmt *f, int w, int h, int filter, int level, int threads, int how,
                    int swap, uint64_t seed)
{
    char what[160];
    snprintf(what, sizeof what, "%dx%d %d-bit x%d%s filters 0x%x level %d threads %d %s%s", w, h,
             f->bits, f->channels, f->palette ? " palette" : "", filter, level, threads,
             how == AT_ONCE ? "at once"
             : how == BANDS ? "in bands"
                            : "row by row",
             f->bits == 16 && !swap ? " (PNG order)" : "");
    unsigned char *rows = make_rows(f, w, h, seed);
    size_t rb = rowbytes(f, w);
    sink s = {0};
    s.fail_after = -1;
    png_head(&s, f, w, h);
    pf_pngz_opts o = {w, h, f->bits, f->channels, level, filter, threads, swap};
    pf_pngz *z = NULL;
    char err[256] = "";
    int ok = pf_pngz_begin(&o, sink_write, &s, &z, err, sizeof err) == 0;
    CHECKF(ok, "%s: begin: %s", what, err);
    pf_rng r;
    pf_rng_seed(&r, seed ^ 0x5eed);
    for (int y = 0; ok && y < h;) {
        int n = how == AT_ONCE ? h : how == ONE_BY_ONE ? 1 : pf_rng_range(&r, 1, 37);
        if (n > h - y)
            n = h - y;
        ok = pf_pngz_rows(z, rows + rb * (size_t)y, rb, n, err, sizeof err) == 0;
        CHECKF(ok, "%s: rows %d+%d: %s", what, y, n, err);
        y += n;
    }
    pf_pngz_free(z);
    chunk(&s, "IEND", NULL, 0);
    int idats = 0;
    if (ok) {
        idats = check_zlib(what, &s, f, w, h, rows, swap);
        check_libpng(what, &s, f, w, h, rows, swap);
        /* the same bytes on one thread with every row at once */
        sink one = {0};
        one.fail_after = -1;
        png_head(&one, f, w, h);
        o.threads = 1;
        CHECK(pf_pngz_begin(&o, sink_write, &one, &z, err, sizeof err) == 0 &&
              pf_pngz_rows(z, rows, rb, h, err, sizeof err) == 0);
        pf_pngz_free(z);
        chunk(&one, "IEND", NULL, 0);
        CHECKF(one.n == s.n && memcmp(one.p, s.p, s.n) == 0,
               "%s: %zu bytes, %zu on one thread with the rows at once, or other bytes", what, s.n,
               one.n);
        free(one.p);
    }
    free(s.p);
    free(rows);
    return idats;
}

static const fmt formats[] = {{8, 1, 0},  {8, 2, 0},  {8, 3, 0},  {8, 4, 0}, {16, 1, 0},
                              {16, 2, 0}, {16, 3, 0}, {16, 4, 0}, {1, 1, 0}, {2, 1, 0},
                              {4, 1, 0},  {4, 1, 1},  {8, 1, 1}};
static const int filters[] = {PF_PNGZ_NONE, PF_PNGZ_SUB,   PF_PNGZ_UP,
                              PF_PNGZ_AVG,  PF_PNGZ_PAETH, PF_PNGZ_NONE | PF_PNGZ_SUB | PF_PNGZ_UP,
                              PF_PNGZ_ALL};

/* Every format with every filter, about 300 KB of filtered data (3 segments). */
static void formats_and_filters(void)
{
    static const int levels[] = {1, 6, 0, 9};
    int k = 0;
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
        const fmt *f = &formats[i];
        int w = (int)(1200 * 8 / (f->bits * f->channels)); /* 1200 bytes a row */
        for (size_t j = 0; j < sizeof filters / sizeof *filters; j++, k++)
            run_case(f, w + (int)j, 250, filters[j], levels[k % 4], 3, k % 3, k % 2,
                     (uint64_t)k + 1);
    }
}

/* Heights at the segment sizes, give or take a row; odd widths; a single row and a
   single column; a row larger than a segment. */
static void boundaries(void)
{
    const fmt rgb = {8, 3, 0}, gray16 = {16, 1, 0};
    int w = 1001; /* 3003 bytes a row, 3004 filtered */
    int k = 0;
    for (unsigned mult = 1; mult <= 8; mult *= 2)
        for (int d = -1; d <= 1; d++, k++) {
            int h = (int)(mult * PF_PNGZ_SEG_MIN / 3004) + d;
            run_case(&rgb, w, h, PF_PNGZ_UP, 1, 2 + k % 3, k % 3, 1, 100 + (uint64_t)k);
        }
    for (int d = -1; d <= 1; d++) /* around one MAX segment a thread on 2 threads */
        run_case(&rgb, w, (int)(2 * PF_PNGZ_SEG_MAX / 3004) + d, PF_PNGZ_ALL, 1, 2, AT_ONCE, 1,
                 200 + (uint64_t)d);
    run_case(&rgb, 300000, 1, PF_PNGZ_PAETH, 1, 4, AT_ONCE, 1, 300);  /* one 900 KB row */
    run_case(&rgb, 250000, 3, PF_PNGZ_SUB, 1, 4, ONE_BY_ONE, 1, 301); /* rows > a segment */
    run_case(&gray16, 1, 200000, PF_PNGZ_ALL, 1, 3, BANDS, 1, 302);   /* one column */
    run_case(&gray16, 7, 5, PF_PNGZ_ALL, 6, 4, AT_ONCE, 1, 303);      /* tiny */
    for (int t = 1; t <= 5; t++)
        run_case(&rgb, 777, 600, PF_PNGZ_ALL, 1, t, t % 3, 1, 400 + (uint64_t)t);
}

/* A large image on 4 threads is written in segments: several IDAT chunks. */
static void segments_seen(void)
{
    const fmt rgba = {8, 4, 0};
    int idats = run_case(&rgba, 1000, 1000, PF_PNGZ_UP, 1, 4, AT_ONCE, 1, 500); /* 4 MB */
    CHECKF(idats >= 4, "a 4 MB image on 4 threads came in %d IDAT chunks", idats);
    pf_pngz_opts big = {1000, 1000, 8, 4, 1, PF_PNGZ_UP, 4, 1};
    pf_pngz_opts small = {100, 100, 8, 4, 1, PF_PNGZ_UP, 4, 1};
    pf_pngz_opts serial = {1000, 1000, 8, 4, 1, PF_PNGZ_UP, 1, 1};
    CHECK(pf_pngz_worth(&big));
    CHECK(!pf_pngz_worth(&small));
    CHECK(pf_pngz_worth(&serial)); /* the size decides, not the threads */
}

/* The bytes of an image written at once, its options o. */
static size_t written_size(const pf_pngz_opts *o, const unsigned char *rows, size_t rb)
{
    sink s = {0};
    s.fail_after = -1;
    pf_pngz *z = NULL;
    char err[256] = "";
    CHECK(pf_pngz_begin(o, sink_write, &s, &z, err, sizeof err) == 0);
    CHECK(z && pf_pngz_rows(z, rows, rb, o->height, err, sizeof err) == 0);
    pf_pngz_free(z);
    free(s.p);
    return s.n;
}

/* Each segment is primed with the data before it: rows of noise repeating every 8 rows
   compress in segments about as well as in one zlib stream (a segment starting cold
   would store its first 8 rows, about 10 KB, as literals: 9 segments here). */
static void segments_primed(void)
{
    int w = 400, h = 1000; /* 1200 bytes a row, 1.2 MB: 10 segments of 128 KB */
    size_t rb = 1200, fn = (rb + 1) * (size_t)h;
    unsigned char *rows = malloc(rb * (size_t)h), *filtered = malloc(fn);
    pf_rng r;
    pf_rng_seed(&r, 99);
    for (size_t i = 0; i < rb * 8; i++)
        rows[i] = (unsigned char)pf_rng_u32(&r);
    for (int y = 0; y < h; y++) {
        if (y >= 8)
            memcpy(rows + rb * (size_t)y, rows + rb * (size_t)(y % 8), rb);
        filtered[(rb + 1) * (size_t)y] = 0; /* filter None */
        memcpy(filtered + (rb + 1) * (size_t)y + 1, rows + rb * (size_t)y, rb);
    }
    uLongf zn = compressBound((uLong)fn);
    unsigned char *zb = malloc(zn);
    CHECK(compress2(zb, &zn, filtered, (uLong)fn, 6) == Z_OK);
    pf_pngz_opts o = {w, h, 8, 3, 6, PF_PNGZ_NONE, 4, 0};
    size_t seg = written_size(&o, rows, rb);
    CHECKF(seg < zn + 1024,
           "noise repeating every 8 rows: %zu bytes in segments, %lu in one stream", seg,
           (unsigned long)zn);
    free(zb);
    free(filtered);
    free(rows);
}

/* A failed write stops the stream; more rows than the image, and bad options, fail. */
static void failures(void)
{
    const fmt rgb = {8, 3, 0};
    int w = 500, h = 2000;
    unsigned char *rows = make_rows(&rgb, w, h, 7);
    size_t rb = rowbytes(&rgb, w);
    sink s = {0};
    s.fail_after = 100000;
    pf_pngz_opts o = {w, h, 8, 3, 1, PF_PNGZ_UP, 3, 0};
    pf_pngz *z = NULL;
    char err[256] = "";
    CHECK(pf_pngz_begin(&o, sink_write, &s, &z, err, sizeof err) == 0);
    int rc = 0, y = 0;
    while (rc == 0 && y < h) {
        rc = pf_pngz_rows(z, rows + rb * (size_t)y, rb, 100, err, sizeof err);
        y += 100;
    }
    CHECKF(rc != 0 && strstr(err, "write failed"), "a failing write: rc %d, message '%s'", rc, err);
    CHECK(s.n <= 100000);
    err[0] = 0;
    CHECK(y >= h || pf_pngz_rows(z, rows, rb, 1, err, sizeof err) != 0);
    pf_pngz_free(z);
    free(s.p);

    s = (sink){0};
    s.fail_after = -1;
    o.height = 10;
    CHECK(pf_pngz_begin(&o, sink_write, &s, &z, err, sizeof err) == 0);
    CHECK(pf_pngz_rows(z, rows, rb, 8, err, sizeof err) == 0);
    CHECK(pf_pngz_rows(z, rows, rb, 3, err, sizeof err) != 0);
    CHECKF(strstr(err, "3 rows given at row 8 of 10") != NULL, "too many rows: '%s'", err);
    pf_pngz_free(z);
    free(s.p);

    pf_pngz_opts bad[] = {{0, 1, 8, 3, 1, 0, 1, 0},  {1, 1, 3, 1, 1, 0, 1, 0},
                          {1, 1, 4, 3, 1, 0, 1, 0},  {1, 1, 8, 5, 1, 0, 1, 0},
                          {1, 1, 8, 3, 10, 0, 1, 0}, {1, 1, 8, 3, 1, 0x07, 1, 0},
                          {1, 1, 8, 3, 1, 0, -1, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        z = (pf_pngz *)&s; /* must come back NULL */
        CHECKF(pf_pngz_begin(&bad[i], sink_write, &s, &z, err, sizeof err) != 0 && !z &&
                   strstr(err, "cannot write"),
               "bad options %zu accepted or unexplained: '%s'", i, err);
    }
    free(rows);
}

/* ---- pf_png_write of a large frame ----------------------------------------------------- */

/* A source file with text before and after the image data, written by libpng. */
static void write_source(const char *path)
{
    FILE *fp = fopen(path, "wb");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (!fp || !png || !info || setjmp(png_jmpbuf(png))) {
        CHECK(0);
        return;
    }
    png_init_io(png, fp);
    png_set_IHDR(png, info, 4, 2, 8, PNG_COLOR_TYPE_RGB, 0, 0, 0);
    png_text t = {0};
    t.compression = PNG_TEXT_COMPRESSION_NONE;
    t.key = "Title";
    t.text = "before";
    png_set_text(png, info, &t, 1);
    png_write_info(png, info);
    unsigned char row[12] = {0};
    png_write_row(png, row);
    png_write_row(png, row);
    t.key = "Comment";
    t.text = "after the image data";
    png_set_text(png, info, &t, 1);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    fclose(fp);
}

/* The chunks of a file in order, IDATs as one "I", tEXt "t", IEND "E"; *segmented: its
   IDAT chunks are not libpng's (all 8192 bytes but the last), so png_deflate.c wrote
   them. */
static void walk(const char *path, char *order, size_t n, int *segmented)
{
    FILE *fp = fopen(path, "rb");
    unsigned char buf[8];
    int idats = 0, odd = 0;
    uint32_t last = 0;
    order[0] = 0;
    if (fp && fseek(fp, 8, SEEK_SET) == 0)
        while (fread(buf, 1, 8, fp) == 8 && strlen(order) + 2 < n) {
            uint32_t len = rd32(buf);
            if (!memcmp(buf + 4, "IDAT", 4)) {
                if (idats++ && last != 8192)
                    odd = 1; /* a chunk before this one was not 8192 bytes */
                last = len;
                if (idats == 1)
                    strcat(order, "I");
            } else if (!memcmp(buf + 4, "tEXt", 4)) {
                strcat(order, "t");
            } else if (!memcmp(buf + 4, "IEND", 4)) {
                strcat(order, "E");
            }
            if (fseek(fp, (long)len + 4, SEEK_CUR) != 0)
                break;
        }
    if (fp)
        fclose(fp);
    *segmented = odd;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    unsigned char *p = NULL;
    *n = 0;
    if (fp && fseek(fp, 0, SEEK_END) == 0) {
        long len = ftell(fp);
        rewind(fp);
        p = len > 0 ? malloc((size_t)len) : NULL;
        if (p && fread(p, 1, (size_t)len, fp) == (size_t)len)
            *n = (size_t)len;
    }
    if (fp)
        fclose(fp);
    return p;
}

static unsigned char *px8(pf_frame *f, int x, int y)
{
    return (unsigned char *)f->data + (size_t)y * f->pitch + (size_t)x * (size_t)f->channels;
}

/* pf_png_write of large frames: 8- and 16-bit RGB with text before and after the image
   data, a palette and 4-bit gray (pf_png_write_opts' forms: packed rows). Each reads back
   to the frame, the chunks in their places; with several cores the image data is the
   segmented writer's. */
static void through_pf_png_write(void)
{
    const char *dir = pf_test_tmpdir("png_deflate");
    char src[1200], out[1200], err[512] = "", order[64];
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN), seg;
    snprintf(src, sizeof src, "%s/src.png", dir);
    snprintf(out, sizeof out, "%s/out.png", dir);
    write_source(src);
    pf_frame tiny;
    pf_png_meta *meta = NULL;
    CHECK(pf_png_read_meta(src, 0, &tiny, NULL, &meta, err, sizeof err) == PF_OK);
    pf_frame_free(&tiny);
    for (int bits = 8; bits <= 16; bits += 8) {
        pf_frame f;
        CHECK(pf_frame_alloc(&f, 1500, 700, bits == 16 ? PF_U16 : PF_U8, 3) == PF_OK);
        pf_rng r;
        pf_rng_seed(&r, (uint64_t)bits);
        for (int y = 0; y < f.height; y++)
            for (size_t i = 0; i < (size_t)f.width * 3; i++) {
                unsigned v = (unsigned)(i + (size_t)y * 3) % 251 + (pf_rng_u32(&r) & 3);
                if (bits == 16)
                    ((uint16_t *)((char *)f.data + (size_t)y * f.pitch))[i] =
                        (uint16_t)(v * 257 + y);
                else
                    ((uint8_t *)((char *)f.data + (size_t)y * f.pitch))[i] = (uint8_t)v;
            }
        int st = pf_png_write_meta(out, &f, 1, meta, err, sizeof err);
        CHECKF(st == PF_OK, "pf_png_write_meta: %s", err);
        pf_frame back;
        pf_png_meta *m2 = NULL;
        st = pf_png_read_meta(out, 0, &back, NULL, &m2, err, sizeof err);
        CHECKF(st == PF_OK, "reading back: %s", err);
        if (st == PF_OK) {
            CHECK(pf_test_frame_diff(&f, &back, NULL, NULL) == 0);
            pf_frame_free(&back);
        }
        /* Title's tEXt before the image data, Comment's after */
        walk(out, order, sizeof order, &seg);
        CHECKF(strcmp(order, "tItE") == 0, "%d-bit: chunks in order %s, not tItE", bits, order);
        CHECKF(seg, "%d-bit: a 1500x700 RGB frame was not written in segments", bits);
        pf_png_meta_free(m2);
        pf_frame_free(&f);
    }
    pf_png_meta_free(meta);

    /* packed forms: 200 colours as a palette (1 byte a pixel), 16 grays in 4 bits */
    static const pf_png_form forms[] = {PF_PNG_FORM_PALETTE, PF_PNG_FORM_GRAY4};
    for (int k = 0; k < 2; k++) {
        pf_frame f;
        int ch = k == 0 ? 3 : 1, w = k == 0 ? 1200 : 2400;
        CHECK(pf_frame_alloc(&f, w, 400, PF_U8, ch) == PF_OK);
        for (int y = 0; y < f.height; y++)
            for (int x = 0; x < f.width; x++) {
                int c = (x / 7 + y / 5 + (x * y) % 3) % (k == 0 ? 200 : 16);
                for (int i = 0; i < ch; i++)
                    px8(&f, x, y)[i] = (unsigned char)(k == 0 ? c * (i + 1) % 251 : c * 17);
            }
        pf_png_write_options o;
        pf_png_write_options_init(&o);
        o.zlib_level = 6;
        o.form = forms[k];
        int st = pf_png_write_opts(out, &f, &o, err, sizeof err);
        CHECKF(st == PF_OK, "form %d: %s", (int)forms[k], err);
        pf_frame back;
        pf_png_info info;
        st = pf_png_read(out, 0, &back, &info, err, sizeof err);
        CHECKF(st == PF_OK, "form %d, reading back: %s", (int)forms[k], err);
        if (st == PF_OK) {
            CHECK(info.color_type == (k == 0 ? 3 : 0) && info.bit_depth == (k == 0 ? 8 : 4));
            CHECK(pf_test_frame_diff(&f, &back, NULL, NULL) == 0);
            pf_frame_free(&back);
        }
        walk(out, order, sizeof order, &seg);
        CHECKF(strcmp(order, "IE") == 0 && seg, "form %d: chunks %s, segmented %d", (int)forms[k],
               order, seg);
        /* threads chosen, 1 or 3: the same file as one per core */
        size_t n0 = 0, n1 = 0;
        unsigned char *b0 = slurp(out, &n0);
        for (int t = 1; t <= 3; t += 2) {
            o.threads = t;
            st = pf_png_write_opts(out, &f, &o, err, sizeof err);
            CHECKF(st == PF_OK, "form %d, %d threads: %s", (int)forms[k], t, err);
            unsigned char *b1 = slurp(out, &n1);
            CHECKF(b0 && b1 && n0 == n1 && memcmp(b0, b1, n0) == 0,
                   "form %d: %zu bytes on %d threads, %zu on one per core (%d)", (int)forms[k], n1,
                   t, n0, cores);
            free(b1);
        }
        free(b0);
        o.threads = -1;
        CHECK(pf_png_write_opts(out, &f, &o, err, sizeof err) == PF_INVALID_ARGUMENT &&
              strstr(err, "threads -1 is out of range"));
        pf_frame_free(&f);
    }
}

int main(void)
{
    formats_and_filters();
    boundaries();
    segments_seen();
    segments_primed();
    failures();
    through_pf_png_write();
    return pf_test_done("png_deflate");
}
