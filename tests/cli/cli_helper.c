/* tests/cli/cli_helper.c: what cli_test.sh cannot do with the shell alone.
 *
 *   cli_helper pngs DIR          writes small PNGs of every colour type and depth to DIR
 *   cli_helper truncate SRC DST  writes the first half of SRC to DST (a corrupt PNG)
 *   cli_helper json FILE...      exit 0 when every FILE is one valid JSON document
 *   cli_helper png FILE          prints "WIDTHxHEIGHT CHANNELS BITS" of a PNG
 *   cli_helper image FILE W H CHANNELS BITS   writes a W x H photo-like PNG (smooth
 *                                             gradients, edges and noise) of that format
 *   cli_helper halo PIPELINE     prints "halo N" or "whole: REASON" (pf_pipeline_band_halo)
 *   cli_helper rows FILE ROWS    reads FILE with pf_png_rows, ROWS at a time, and exits 0
 *                                when rows, format and metadata equal pf_png_read_meta's;
 *                                prints "interlaced" (exit 0) for an interlaced file
 *   cli_helper near A B STEPS    exit 0 when PNGs A and B are one size and format and no
 *                                sample differs by more than STEPS of its depth
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/bands.h"
#include "pipefuse/png.h"

static int make_png(const char *dir, const char *name, int w, int h, pf_sample s, int ch,
                    unsigned seed)
{
    pf_frame f;
    char path[4096], err[1024];
    if (pf_frame_alloc(&f, w, h, s, ch) != PF_OK)
        return 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * ch; x++) {
            seed = seed * 1103515245u + 12345u;
            unsigned v = (seed >> 8) ^ (unsigned)(x * 7 + y * 13);
            char *row = (char *)f.data + (size_t)y * f.pitch;
            if (s == PF_U8)
                ((unsigned char *)row)[x] = (unsigned char)v;
            else
                ((unsigned short *)row)[x] = (unsigned short)v;
        }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = pf_png_write(path, &f, 1, err, sizeof err);
    if (rc != PF_OK)
        fprintf(stderr, "cli_helper: %s\n", err);
    pf_frame_free(&f);
    return rc != PF_OK;
}

/* Gradients, a disc with a hard edge and noise: stencils see both smooth areas and
   edges, and every sample differs from its neighbours. */
static int make_photo(const char *path, int w, int h, int ch, int bits)
{
    pf_frame f;
    char err[1024];
    pf_sample s = bits == 16 ? PF_U16 : PF_U8;
    if (ch < 1 || ch > 4 || (bits != 8 && bits != 16) || pf_frame_alloc(&f, w, h, s, ch) != PF_OK)
        return 1;
    unsigned seed = 7, max = bits == 16 ? 65535u : 255u;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            long dx = x - w / 3, dy = y - h / 2;
            int disc = dx * dx + dy * dy < (long)(h / 3) * (h / 3);
            for (int c = 0; c < ch; c++) {
                seed = seed * 1103515245u + 12345u;
                double v = (double)(x * (c + 1) + y * (3 - c % 3)) / (w + h) / 3.0 +
                           (disc ? 0.4 : 0.0) + ((seed >> 16) % 64) / 640.0;
                unsigned q = (unsigned)((v - (int)v) * max);
                char *row = (char *)f.data + (size_t)y * f.pitch;
                if (s == PF_U8)
                    ((unsigned char *)row)[x * ch + c] = (unsigned char)q;
                else
                    ((unsigned short *)row)[x * ch + c] = (unsigned short)q;
            }
        }
    int rc = pf_png_write(path, &f, 1, err, sizeof err);
    if (rc != PF_OK)
        fprintf(stderr, "cli_helper: %s\n", err);
    pf_frame_free(&f);
    return rc != PF_OK;
}

static int halo(const char *pipeline)
{
    pf_engine *e = NULL;
    pf_pipeline *p = NULL;
    if (pf_engine_create(NULL, &e) != PF_OK || pf_pipeline_load_file(e, pipeline, &p) != PF_OK) {
        fprintf(stderr, "cli_helper: %s\n", e ? pf_engine_errmsg(e) : "no engine");
        pf_engine_destroy(e);
        return 1;
    }
    int h = -1;
    char why[512];
    int rc = pf_pipeline_band_halo(p, &h, why, sizeof why);
    if (rc == PF_OK)
        printf("halo %d\n", h);
    else if (rc == PF_UNSUPPORTED)
        printf("whole: %s\n", why);
    else
        fprintf(stderr, "cli_helper: %s\n", why);
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
    return rc != PF_OK && rc != PF_UNSUPPORTED;
}

/* pf_png_rows against pf_png_read_meta: the same format, rows and metadata chunks. */
static int rows(const char *path, int step)
{
    char err[1024];
    pf_frame whole, fmt, band;
    pf_png_info wi, ri;
    pf_png_meta *wm = NULL, *rm = NULL;
    pf_png_rows *r = NULL;
    if (pf_png_read_meta(path, 0, &whole, &wi, &wm, err, sizeof err) != PF_OK) {
        fprintf(stderr, "cli_helper: %s\n", err);
        return 1;
    }
    int rc = pf_png_rows_open(path, 0, &r, &fmt, &ri, &rm, err, sizeof err), bad = 0;
    if (rc == PF_UNSUPPORTED && wi.interlaced) {
        printf("interlaced\n");
    } else if (rc != PF_OK) {
        fprintf(stderr, "cli_helper: %s\n", err);
        bad = 1;
    } else if (fmt.width != whole.width || fmt.height != whole.height ||
               fmt.sample != whole.sample || fmt.channels != whole.channels ||
               pf_frame_alloc(&band, fmt.width, step, fmt.sample, fmt.channels) != PF_OK) {
        fprintf(stderr, "cli_helper: %s: another format, or no memory\n", path);
        bad = 1;
    } else {
        size_t rb = (size_t)fmt.width * pf_frame_pixel_bytes(fmt.sample, fmt.channels);
        for (int y = 0; y < fmt.height && !bad; y += step) {
            int n = fmt.height - y < step ? fmt.height - y : step;
            if (pf_png_rows_read(r, &band, n, err, sizeof err) != PF_OK) {
                fprintf(stderr, "cli_helper: %s\n", err);
                bad = 1;
            }
            for (int i = 0; i < n && !bad; i++)
                if (memcmp((char *)band.data + (size_t)i * band.pitch,
                           (char *)whole.data + (size_t)(y + i) * whole.pitch, rb) != 0) {
                    fprintf(stderr, "cli_helper: %s: row %d differs\n", path, y + i);
                    bad = 1;
                }
        }
        if (!bad && pf_png_rows_done(r) != fmt.height)
            bad = 1;
        int n = pf_png_meta_count(wm);
        bad |= n != pf_png_meta_count(rm);
        for (int i = 0; i < n && !bad; i++) {
            const void *a, *b;
            size_t na, nb;
            const char *ta = pf_png_meta_chunk(wm, i, &a, &na),
                       *tb = pf_png_meta_chunk(rm, i, &b, &nb);
            bad = strcmp(ta, tb) != 0 || na != nb || (na && memcmp(a, b, na) != 0);
        }
        if (bad)
            fprintf(stderr, "cli_helper: %s: the rows or the metadata differ\n", path);
        pf_frame_free(&band);
    }
    pf_png_rows_close(r);
    pf_png_meta_free(wm);
    pf_png_meta_free(rm);
    pf_frame_free(&whole);
    return bad;
}

static int truncate_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    if (!in)
        return 1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    FILE *out = fopen(dst, "wb");
    if (!out || fwrite(buf, 1, n / 2, out) != n / 2) {
        if (out)
            fclose(out);
        return 1;
    }
    return fclose(out) != 0;
}

/* Whether PNGs a and b hold images of one size and format whose samples differ by at
   most steps (of their own depth): the CPU-against-GPU contract is one step. 0: they
   do; 1: they do not, the worst sample said. */
static int near(const char *a, const char *b, int steps)
{
    pf_frame f[2];
    pf_png_info info;
    char err[1024];
    const char *path[2] = {a, b};
    for (int i = 0; i < 2; i++)
        if (pf_png_read(path[i], 0, &f[i], &info, err, sizeof err) != PF_OK) {
            fprintf(stderr, "%s\n", err);
            if (i)
                pf_frame_free(&f[0]);
            return 1;
        }
    int bad = 0;
    if (f[0].width != f[1].width || f[0].height != f[1].height || f[0].sample != f[1].sample ||
        f[0].channels != f[1].channels) {
        fprintf(stderr, "%s is %dx%d, %d channels, %d bits; %s is %dx%d, %d channels, %d bits\n", a,
                f[0].width, f[0].height, f[0].channels, f[0].sample == PF_U16 ? 16 : 8, b,
                f[1].width, f[1].height, f[1].channels, f[1].sample == PF_U16 ? 16 : 8);
        bad = 1;
    }
    long worst = 0;
    int wx = 0, wy = 0, wc = 0;
    for (int y = 0; !bad && y < f[0].height; y++)
        for (int x = 0; x < f[0].width * f[0].channels; x++) {
            long u, v;
            if (f[0].sample == PF_U16) {
                u = ((const uint16_t *)((const char *)f[0].data + (size_t)y * f[0].pitch))[x];
                v = ((const uint16_t *)((const char *)f[1].data + (size_t)y * f[1].pitch))[x];
            } else {
                u = ((const uint8_t *)f[0].data)[(size_t)y * f[0].pitch + (size_t)x];
                v = ((const uint8_t *)f[1].data)[(size_t)y * f[1].pitch + (size_t)x];
            }
            if (labs(u - v) > worst) {
                worst = labs(u - v);
                wx = x / f[0].channels;
                wy = y;
                wc = x % f[0].channels;
            }
        }
    if (!bad && worst > steps) {
        fprintf(stderr, "%s and %s differ by %ld steps at (%d, %d) channel %d\n", a, b, worst, wx,
                wy, wc);
        bad = 1;
    }
    pf_frame_free(&f[0]);
    pf_frame_free(&f[1]);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "near") == 0)
        return near(argv[2], argv[3], atoi(argv[4]));
    if (argc == 3 && strcmp(argv[1], "pngs") == 0) {
        const char *d = argv[2];
        return make_png(d, "rgb8.png", 64, 48, PF_U8, 3, 1) |
               make_png(d, "gray16.png", 33, 21, PF_U16, 1, 2) |
               make_png(d, "rgba8.png", 17, 9, PF_U8, 4, 3) |
               make_png(d, "graya8.png", 40, 40, PF_U8, 2, 4) |
               make_png(d, "rgba16.png", 31, 7, PF_U16, 4, 5);
    }
    if (argc == 7 && strcmp(argv[1], "image") == 0)
        return make_photo(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    if (argc == 3 && strcmp(argv[1], "halo") == 0)
        return halo(argv[2]);
    if (argc == 4 && strcmp(argv[1], "rows") == 0 && atoi(argv[3]) > 0)
        return rows(argv[2], atoi(argv[3]));
    if (argc == 4 && strcmp(argv[1], "truncate") == 0)
        return truncate_file(argv[2], argv[3]);
    if (argc >= 3 && strcmp(argv[1], "json") == 0) {
        int bad = 0;
        for (int i = 2; i < argc; i++) {
            json_error_t e;
            json_t *j = json_load_file(argv[i], 0, &e);
            if (!j) {
                fprintf(stderr, "%s:%d:%d: %s\n", argv[i], e.line, e.column, e.text);
                bad = 1;
            }
            json_decref(j);
        }
        return bad;
    }
    if (argc == 3 && strcmp(argv[1], "png") == 0) {
        pf_frame f;
        pf_png_info info;
        char err[1024];
        if (pf_png_read(argv[2], 0, &f, &info, err, sizeof err) != PF_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        printf("%dx%d %d %d\n", f.width, f.height, f.channels, f.sample == PF_U16 ? 16 : 8);
        pf_frame_free(&f);
        return 0;
    }
    fprintf(stderr,
            "usage: cli_helper pngs DIR | truncate SRC DST | json FILE... | png FILE | image "
            "FILE W H CHANNELS BITS | near A.png B.png STEPS\n");
    return 2;
}
