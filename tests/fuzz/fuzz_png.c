/* tests/fuzz/fuzz_png.c: libFuzzer target for the PNG reader and writer.
 *
 * The input is a PNG file's bytes, read from memory with a pixel limit. For seven
 * inputs in eight (by hash) every chunk's CRC is recomputed first, so that mutations
 * reach the chunk parser instead of stopping at libpng's CRC check. An image that
 * reads is written to a file (zlib level from the input's hash), read back and compared:
 * same size, sample type, channels and pixels. Checked: no memory error or undefined
 * behaviour, a message and an empty frame with every failure, and an exact round trip. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "fuzz_util.h"
#include "pipefuse/png.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Big enough for every PngSuite image and a wide or tall strip, small enough that a
   decode takes milliseconds. */
#define FZ_PNG_MAX_PIXELS (1u << 18)

static const char *roundtrip_path(void)
{
    static char path[4200];
    if (path[0])
        return path;
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/pf-fuzz-png.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    snprintf(path, sizeof path, "%s/roundtrip.png", dir);
    return path;
}

static void cleanup(void)
{
    const char *path = roundtrip_path();
    unlink(path);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    rmdir(dir);
}

/* Rewrites the CRC of every whole chunk after the signature. */
static void fix_crcs(uint8_t *b, size_t size)
{
    size_t at = 8;
    while (at + 12 <= size) {
        uint32_t len = (uint32_t)b[at] << 24 | (uint32_t)b[at + 1] << 16 |
                       (uint32_t)b[at + 2] << 8 | b[at + 3];
        if (len > size - at - 12)
            break;
        uLong crc = crc32(0L, b + at + 4, (uInt)len + 4);
        uint8_t *c = b + at + 8 + len;
        c[0] = (uint8_t)(crc >> 24), c[1] = (uint8_t)(crc >> 16), c[2] = (uint8_t)(crc >> 8);
        c[3] = (uint8_t)crc;
        at += 12 + (size_t)len;
    }
}

/* Pixel (x, y) as RGBA on the 16-bit scale: gray to r = g = b, no alpha opaque. */
static void rgba16(const pf_frame *f, int x, int y, unsigned v[4])
{
    unsigned s[4];
    const char *row = (const char *)f->data + (size_t)y * f->pitch;
    for (int c = 0; c < f->channels; c++)
        s[c] = f->sample == PF_U16 ? ((const uint16_t *)row)[(size_t)x * f->channels + c]
                                   : 257u * ((const uint8_t *)row)[(size_t)x * f->channels + c];
    const int colour = f->channels >= 3, alpha = f->channels == 2 || f->channels == 4;
    v[0] = s[0], v[1] = s[colour ? 1 : 0], v[2] = s[colour ? 2 : 0];
    v[3] = alpha ? s[f->channels - 1] : 65535u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int registered;
    if (!registered) {
        atexit(cleanup);
        registered = 1;
    }
    uint32_t hash = fz_hash(data, size);
    uint8_t *png = malloc(size ? size : 1);
    FZ_ASSERT(png, "out of memory");
    memcpy(png, data, size);
    if (hash % 8 != 0)
        fix_crcs(png, size);
    char err[1024] = "";
    pf_frame f, g;
    pf_png_info info, info2;
    memset(&f, 0x5a, sizeof f);
    int rc =
        pf_png_read_memory(png, size, "fuzz.png", FZ_PNG_MAX_PIXELS, &f, &info, err, sizeof err);
    free(png);
    if (rc != PF_OK) {
        FZ_ASSERT(f.data == NULL, "a failed read (%s) left pixels", pf_status_name(rc));
        FZ_ASSERT(err[0] != 0, "read failed with %s and no message", pf_status_name(rc));
        /* PF_UNSUPPORTED: an animated PNG, refused rather than read as its first frame */
        FZ_ASSERT(rc == PF_IMAGE || rc == PF_TOO_LARGE || rc == PF_NO_MEMORY ||
                      rc == PF_UNSUPPORTED,
                  "read from memory failed with %s: %s", pf_status_name(rc), err);
        return 0;
    }
    FZ_ASSERT(f.data && f.width > 0 && f.height > 0 &&
                  (unsigned long long)f.width * (unsigned long long)f.height <= FZ_PNG_MAX_PIXELS,
              "read a %dx%d frame", f.width, f.height);
    FZ_ASSERT(f.width == info.width && f.height == info.height, "frame %dx%d, header %dx%d",
              f.width, f.height, info.width, info.height);
    FZ_ASSERT((f.sample == PF_U8 || f.sample == PF_U16) && f.channels >= 1 && f.channels <= 4,
              "sample %d, %d channels", (int)f.sample, f.channels);
    FZ_ASSERT(f.sample == (info.bit_depth == 16 ? PF_U16 : PF_U8), "bit depth %d read as sample %d",
              info.bit_depth, (int)f.sample);
    size_t row = (size_t)f.width * pf_frame_pixel_bytes(f.sample, f.channels);
    FZ_ASSERT(f.pitch >= row, "pitch %zu for rows of %zu bytes", f.pitch, row);

    const char *path = roundtrip_path();
    int level = (int)(hash / 8 % 11) - 1; /* -1 (default) to 9 */
    rc = pf_png_write(path, &f, level, err, sizeof err);
    FZ_ASSERT(rc == PF_OK, "write of a %dx%d %s %d-channel frame: %s", f.width, f.height,
              f.sample == PF_U8 ? "u8" : "u16", f.channels, err);
    memset(&g, 0, sizeof g);
    rc = pf_png_read(path, FZ_PNG_MAX_PIXELS, &g, &info2, err, sizeof err);
    FZ_ASSERT(rc == PF_OK, "reading back what was written: %s", err);
    FZ_ASSERT(g.width == f.width && g.height == f.height && g.sample == f.sample &&
                  g.channels == f.channels,
              "wrote %dx%d sample %d x%d, read back %dx%d sample %d x%d", f.width, f.height,
              (int)f.sample, f.channels, g.width, g.height, (int)g.sample, g.channels);
    FZ_ASSERT(!info2.interlaced && info2.bit_depth == (f.sample == PF_U16 ? 16 : 8),
              "written file: interlaced %d, bit depth %d", info2.interlaced, info2.bit_depth);
    for (int y = 0; y < f.height; y++)
        FZ_ASSERT(memcmp((const char *)f.data + (size_t)y * f.pitch,
                         (const char *)g.data + (size_t)y * g.pitch, row) == 0,
                  "row %d of %dx%d (bit depth %d, colour type %d) differs after the round trip", y,
                  f.width, f.height, info.bit_depth, info.color_type);
    pf_frame_free(&g);

    /* The smallest lossless form (pf_png_pack's auto: palette, low-bit gray, fewer
       channels or bits) reads back as the same pixels, in whatever channels it keeps. */
    pf_png_write_options o;
    pf_png_write_options_init(&o);
    o.zlib_level = level;
    o.form = PF_PNG_FORM_AUTO;
    rc = pf_png_write_opts(path, &f, &o, err, sizeof err);
    FZ_ASSERT(rc == PF_OK, "auto-form write of a %dx%d %d-channel frame: %s", f.width, f.height,
              f.channels, err);
    memset(&g, 0, sizeof g);
    rc = pf_png_read(path, FZ_PNG_MAX_PIXELS, &g, &info2, err, sizeof err);
    FZ_ASSERT(rc == PF_OK && g.width == f.width && g.height == f.height,
              "reading back the auto form: %s", err);
    for (int y = 0; y < f.height; y++)
        for (int x = 0; x < f.width; x++) {
            unsigned a[4], b[4];
            rgba16(&f, x, y, a);
            rgba16(&g, x, y, b);
            FZ_ASSERT(!memcmp(a, b, sizeof a),
                      "(%d, %d) of %dx%d: %u %u %u %u read back as %u %u %u %u (bit depth %d, "
                      "colour type %d written)",
                      x, y, f.width, f.height, a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3],
                      info2.bit_depth, info2.color_type);
        }
    pf_frame_free(&f);
    pf_frame_free(&g);
    return 0;
}
