/* tests/png/png_limits.c: the pixel limit is enforced from IHDR, before the image is
 * decoded or its memory allocated.
 *
 * A small valid PNG is written, then its IHDR patched to claim a larger size (CRC
 * recomputed with zlib). The image data still holds only the small image, so a reader
 * that went on to decode would fail with PF_IMAGE ("Not enough image data"); PF_TOO_LARGE
 * therefore shows the decision came from the header alone. The same patched file under
 * a limit it fits is PF_IMAGE, which is the control.
 *
 * Within the pixel limit, a header that claims more pixels than the file could hold at
 * deflate's greatest ratio (1032:1) is refused from the header and the file's size too
 * (a decompression bomb: a few hundred bytes that would have a 2 GB frame allocated),
 * while a real image compressed about as far as zlib goes still reads.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, link, dirent, rlimit under -std=c11 */
#include <string.h>
#include <zlib.h>

#include "pipefuse/bands.h"
#include "pipefuse/png.h"
#include "testutil.h"

/* A copy of png whose IHDR claims w x h, with a correct CRC unless keep_crc. */
static unsigned char *patched(const unsigned char *png, size_t size, uint32_t w, uint32_t h,
                              int keep_crc)
{
    unsigned char *p = malloc(size);
    memcpy(p, png, size);
    pf_test_put_be32(p + 16, w);
    pf_test_put_be32(p + 20, h);
    if (!keep_crc)
        pf_test_put_be32(p + 29, (uint32_t)crc32(0, p + 12, 17));
    return p;
}

/* Reads from memory with max_pixels; checks status, empty frame, message fragments. */
static void expect(const unsigned char *png, size_t size, const char *label,
                   unsigned long long max_pixels, int want, const char *text1, const char *text2)
{
    pf_frame f;
    pf_png_info info;
    char err[512] = "";
    int st = pf_png_read_memory(png, size, label, max_pixels, &f, &info, err, sizeof err);
    CHECKF(st == want, "%s (limit %llu): %s, expected %s: %s", label, max_pixels,
           pf_status_name(st), pf_status_name(want), err);
    if (st == PF_OK) {
        pf_frame_free(&f);
        return;
    }
    CHECKF(f.data == NULL, "%s: frame not left empty", label);
    CHECKF(strncmp(err, label, strlen(label)) == 0, "%s: message: %s", label, err);
    if (text1)
        CHECKF(strstr(err, text1), "%s: message lacks \"%s\": %s", label, text1, err);
    if (text2)
        CHECKF(strstr(err, text2), "%s: message lacks \"%s\": %s", label, text2, err);
}

int main(void)
{
    char dir[1024], path[2048], err[512] = "";
    snprintf(dir, sizeof dir, "%s", pf_test_tmpdir("png_limits"));

    /* 5x4 RGBA u8: small, valid. */
    pf_frame f;
    CHECK(pf_frame_alloc(&f, 5, 4, PF_U8, 4) == PF_OK);
    memset(f.data, 0x80, f.pitch * 4);
    snprintf(path, sizeof path, "%s/small.png", dir);
    CHECKF(pf_png_write(path, &f, 9, err, sizeof err) == PF_OK, "%s", err);
    pf_frame_free(&f);
    size_t size = 0;
    unsigned char *png = pf_test_read_file(path, &size);
    if (!png)
        return pf_test_done("png_limits");

    /* max_pixels against the real size: 20 pixels. */
    expect(png, size, "small.png", 0, PF_OK, NULL, NULL);
    expect(png, size, "small.png", 20, PF_OK, NULL, NULL);
    expect(png, size, "small.png", 19, PF_TOO_LARGE, "5x4", "19");
    expect(png, size, "small.png", 1, PF_TOO_LARGE, "20 pixels", NULL);

    /* 20000x20000 = 4e8 pixels, over the default 256 Mi (268435456). */
    unsigned char *big = patched(png, size, 20000, 20000, 0);
    expect(big, size, "big.png", 0, PF_TOO_LARGE, "20000x20000", "268435456");
    expect(big, size, "big.png", 0, PF_TOO_LARGE, "400000000", NULL);
    expect(big, size, "big.png", 399999999ull, PF_TOO_LARGE, "399999999", NULL);
    {
        /* On disk too, and info reports the claimed size. */
        snprintf(path, sizeof path, "%s/big.png", dir);
        pf_test_write_file(path, big, size);
        pf_png_info info;
        int st = pf_png_read(path, 0, &f, &info, err, sizeof err);
        CHECKF(st == PF_TOO_LARGE && f.data == NULL && strncmp(err, path, strlen(path)) == 0,
               "big.png on disk: %s: %s", pf_status_name(st), err);
        CHECKF(info.width == 20000 && info.height == 20000 && info.bit_depth == 8 &&
                   info.color_type == 6,
               "big.png: info %dx%d depth %d type %d", info.width, info.height, info.bit_depth,
               info.color_type);
    }
    /* The IHDR CRC left stale: the header is corrupt, and says so; the size is not trusted. */
    unsigned char *stale = patched(png, size, 20000, 20000, 1);
    expect(stale, size, "stale.png", 0, PF_IMAGE, "CRC", NULL);
    free(stale);
    free(big);

    /* The control: 300x300 under a limit it fits is PF_IMAGE (more pixels than the file
       can hold). */
    unsigned char *mid = patched(png, size, 300, 300, 0);
    expect(mid, size, "mid.png", 1000, PF_TOO_LARGE, "300x300", "90000");
    expect(mid, size, "mid.png", 90000, PF_IMAGE, NULL, NULL);
    expect(mid, size, "mid.png", 0, PF_IMAGE, NULL, NULL);
    free(mid);

    /* Per side: at most 1 << 20 = 1048576, whatever max_pixels allows. */
    unsigned char *wide = patched(png, size, 2000000, 1, 0);
    expect(wide, size, "wide.png", 0, PF_TOO_LARGE, "2000000x1", "1048576");
    expect(wide, size, "wide.png", ~0ull, PF_TOO_LARGE, "per side", NULL);
    free(wide);
    unsigned char *tall = patched(png, size, 1, (1u << 20) + 1, 0);
    expect(tall, size, "tall.png", ~0ull, PF_TOO_LARGE, "1x1048577", NULL);
    free(tall);
    unsigned char *edge = patched(png, size, 1u << 20, 1, 0); /* allowed: decodes, short of data */
    expect(edge, size, "edge.png", 0, PF_IMAGE, NULL, NULL);
    free(edge);

    /* Within the pixel limit (256 Mi): 16000x16000 RGBA is a 1 GB frame in a file of 90
       bytes or so. Refused before allocation, saying what the header claims and the size. */
    unsigned char *bomb = patched(png, size, 16000, 16000, 0);
    expect(bomb, size, "bomb.png", 0, PF_IMAGE, "16000x16000", "greatest compression");
    {
        char sz[64];
        snprintf(sz, sizeof sz, "its %zu bytes", size);
        expect(bomb, size, "bomb.png", 0, PF_IMAGE, "1024000000 bytes of samples", sz);
        snprintf(path, sizeof path, "%s/bomb.png", dir); /* and from a file, by its size */
        pf_test_write_file(path, bomb, size);
        pf_png_info info;
        int st = pf_png_read(path, 0, &f, &info, err, sizeof err);
        CHECKF(st == PF_IMAGE && f.data == NULL && strncmp(err, path, strlen(path)) == 0 &&
                   strstr(err, "greatest compression") && strstr(err, sz),
               "bomb.png on disk: %s: %s", pf_status_name(st), err);
        CHECKF(info.width == 16000 && info.height == 16000, "bomb.png: info %dx%d", info.width,
               info.height);
        pf_frame fmt;
        pf_png_rows *rows = NULL;
        st = pf_png_rows_open(path, 0, &rows, &fmt, NULL, NULL, err, sizeof err);
        CHECKF(st == PF_IMAGE && !rows && strstr(err, "greatest compression"),
               "bomb.png by rows: %s: %s", pf_status_name(st), err);
        pf_png_rows_close(rows);
    }
    free(bomb);

    /* No false alarm at the other end: 3000x3000 of one gray value at zlib level 9 (about
       700:1, as far as zlib compresses an image) reads back. */
    CHECK(pf_frame_alloc(&f, 3000, 3000, PF_U8, 1) == PF_OK);
    memset(f.data, 0x33, f.pitch * 3000);
    snprintf(path, sizeof path, "%s/flat.png", dir);
    CHECKF(pf_png_write(path, &f, 9, err, sizeof err) == PF_OK, "%s", err);
    pf_frame_free(&f);
    unsigned char *flat = pf_test_read_file(path, &size);
    CHECKF(flat && size * 500 < 3000ull * 3000, "flat.png: %zu bytes, not compressed 500:1", size);
    CHECKF(pf_png_read(path, 0, &f, NULL, err, sizeof err) == PF_OK, "flat.png: %s", err);
    pf_frame_free(&f);
    if (flat)
        expect(flat, size, "flat.png", 0, PF_OK, NULL, NULL);
    free(flat);

    free(png);
    return pf_test_done("png_limits");
}
