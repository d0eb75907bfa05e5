/* tests/png/png_palette.c: palette indices past the palette. Such a file is refused
 * (PF_IMAGE, the index, where it is and the palette size named), as the PNG
 * specification calls it an error and libpng reports it; indices within the palette
 * read as its colours at every bit depth (palettes with tRNS, and interlaced ones, are
 * in png_conformance). The files are built here byte by byte (zlib for IDAT and the
 * CRCs), since libpng will not write a bad index.
 */
#define _GNU_SOURCE
#include <string.h>
#include <zlib.h>

#include "pipefuse/png.h"
#include "testutil.h"

typedef struct buf {
    unsigned char d[4096];
    size_t n;
} buf;

static void chunk(buf *b, const char *type, const unsigned char *data, size_t len)
{
    pf_test_put_be32(b->d + b->n, (uint32_t)len);
    memcpy(b->d + b->n + 4, type, 4);
    if (len)
        memcpy(b->d + b->n + 8, data, len);
    pf_test_put_be32(b->d + b->n + 8 + len, (uint32_t)crc32(0, b->d + b->n + 4, (uInt)(4 + len)));
    b->n += 12 + len;
}

/* A w x h palette image of `depth` bits with `entries` palette colours (entry i is
   (10 i, 20 i, 30 i)) and pixel (x, y) = idx[y * w + x], not interlaced. */
static buf make(int w, int h, int depth, int entries, const unsigned char *idx)
{
    buf b = {{0}, 0};
    memcpy(b.d, "\x89PNG\r\n\x1a\n", 8);
    b.n = 8;
    unsigned char ihdr[13] = {0};
    pf_test_put_be32(ihdr, (uint32_t)w);
    pf_test_put_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = (unsigned char)depth;
    ihdr[9] = 3; /* palette */
    chunk(&b, "IHDR", ihdr, 13);
    unsigned char plte[768];
    for (int i = 0; i < entries; i++) {
        plte[3 * i] = (unsigned char)(10 * i);
        plte[3 * i + 1] = (unsigned char)(20 * i);
        plte[3 * i + 2] = (unsigned char)(30 * i);
    }
    chunk(&b, "PLTE", plte, (size_t)entries * 3);
    unsigned char raw[1024] = {0}, z[1024];
    size_t stride = 1 + ((size_t)w * (size_t)depth + 7) / 8;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int bit = x * depth, v = idx[y * w + x];
            raw[(size_t)y * stride + 1 + (size_t)bit / 8] |=
                (unsigned char)(v << (8 - depth - bit % 8));
        }
    uLongf zn = sizeof z;
    CHECK(compress(z, &zn, raw, (uLong)(stride * (size_t)h)) == Z_OK);
    chunk(&b, "IDAT", z, zn);
    chunk(&b, "IEND", NULL, 0);
    return b;
}

static void good(const char *label, int w, int h, int depth, int entries, const unsigned char *idx)
{
    buf b = make(w, h, depth, entries, idx);
    pf_frame f;
    char err[512] = "";
    int st = pf_png_read_memory(b.d, b.n, label, 0, &f, NULL, err, sizeof err);
    CHECKF(st == PF_OK, "%s: %s", label, err);
    if (st != PF_OK)
        return;
    CHECK(f.channels == 3 && f.sample == PF_U8 && f.width == w && f.height == h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const unsigned char *px = (const unsigned char *)f.data + (size_t)y * f.pitch + 3 * x;
            int i = idx[y * w + x];
            CHECKF(px[0] == 10 * i && px[1] == 20 * i && px[2] == 30 * i,
                   "%s: (%d,%d) is %d,%d,%d, expected entry %d", label, x, y, px[0], px[1], px[2],
                   i);
        }
    pf_frame_free(&f);
}

static void bad(const char *label, int w, int h, int depth, int entries, const unsigned char *idx,
                const char *want)
{
    buf b = make(w, h, depth, entries, idx);
    pf_frame f;
    memset(&f, 0x5a, sizeof f);
    char err[512] = "";
    int st = pf_png_read_memory(b.d, b.n, label, 0, &f, NULL, err, sizeof err);
    CHECKF(st == PF_IMAGE, "%s: %s, expected PF_IMAGE (%s)", label, pf_status_name(st), err);
    CHECKF(strncmp(err, label, strlen(label)) == 0 && strstr(err, want), "%s: message: %s", label,
           err);
    CHECK(st == PF_OK || f.data == NULL);
    if (st == PF_OK)
        pf_frame_free(&f);
}

int main(void)
{
    /* 8 bits, two colours */
    static const unsigned char in8[8] = {0, 1, 1, 0, 1, 0, 0, 1};
    good("in8", 4, 2, 8, 2, in8);
    static const unsigned char past8[8] = {0, 1, 1, 0, 3, 0, 0, 1};
    bad("past8", 4, 2, 8, 2, past8, "palette index 3 at (0, 1) is past the palette's 2 entries");
    static const unsigned char far8[8] = {0, 1, 255, 0, 1, 0, 0, 1};
    bad("far8", 4, 2, 8, 200, far8,
        "palette index 255 at (2, 0) is past the palette's 200 entries");

    /* 2 bits, three colours: index 3 fits the bits but not the palette */
    static const unsigned char in2[10] = {0, 1, 2, 2, 1, 2, 1, 0, 0, 1};
    good("in2", 5, 2, 2, 3, in2);
    static const unsigned char past2[10] = {0, 1, 2, 2, 1, 2, 1, 0, 0, 3};
    bad("past2", 5, 2, 2, 3, past2, "palette index 3 at (4, 1) is past the palette's 3 entries");

    /* 1 bit, one colour */
    static const unsigned char in1[3] = {0, 0, 0};
    good("in1", 3, 1, 1, 1, in1);
    static const unsigned char past1[3] = {0, 1, 0};
    bad("past1", 3, 1, 1, 1, past1, "palette index 1 at (1, 0) is past the palette's 1 entry");
    return pf_test_done("png_palette");
}
