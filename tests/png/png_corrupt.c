/* tests/png/png_corrupt.c: bad input never crashes the reader, always fails with a
 * message that starts with the file's name, and leaves the frame empty (leaks show
 * under the sanitizer build).
 *
 * - truncation at every length, from memory, and at chosen lengths on disk: PF_IMAGE,
 *   "not a PNG file: it is empty" at 0 bytes, "truncated" otherwise;
 * - every byte flipped in turn: an error whenever the byte is in the signature or in a
 *   critical chunk's type, data or CRC (libpng's CRC check), anything but a crash when
 *   it is in a length field or an ancillary chunk;
 * - IHDR fields made invalid with a correct CRC, IDAT replaced by garbage with a
 *   correct CRC, CRCs broken: errors naming the problem;
 * - not a PNG at all (named when its first bytes are another format's, or a PNG's
 *   mangled by a text-mode transfer), a missing file (PF_IO), a directory (PF_IO), NULL
 *   arguments;
 * - an animated PNG (APNG): PF_UNSUPPORTED, not its first image alone as if it were all.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, link, dirent, rlimit under -std=c11 */
#include <string.h>
#include <zlib.h>

#include "pipefuse/bands.h"
#include "pipefuse/png.h"
#include "testutil.h"

#define SUITE PF_SOURCE_DIR "/tests/data/pngsuite"

/* Recomputes the CRC of the chunk starting at off (its length field). */
static void fix_crc(unsigned char *png, size_t off)
{
    uint32_t len = pf_test_get_be32(png + off);
    pf_test_put_be32(png + off + 8 + len, (uint32_t)crc32(0, png + off + 4, 4 + len));
}

/* Offset of the first chunk of the given type, or 0. */
static size_t find_chunk(const unsigned char *png, size_t size, const char *type)
{
    for (size_t off = 8; off + 12 <= size; off += 12 + pf_test_get_be32(png + off))
        if (memcmp(png + off + 4, type, 4) == 0)
            return off;
    return 0;
}

/* Reads from memory; checks the failure contract. Returns the status. */
static int read_bad(const void *data, size_t size, const char *label, int want,
                    const char *want_text)
{
    pf_frame f;
    char err[512] = "";
    memset(&f, 0x5a, sizeof f); /* poisoned: the reader must clear it */
    int st = pf_png_read_memory(data, size, label, 0, &f, NULL, err, sizeof err);
    if (st == PF_OK) {
        CHECKF(want < 0 && f.data, "%s: read OK, expected %s", label,
               want >= 0 ? pf_status_name(want) : "an error or a valid frame");
        pf_frame_free(&f);
        return st;
    }
    if (want >= 0)
        CHECKF(st == want, "%s: %s, expected %s (%s)", label, pf_status_name(st),
               pf_status_name(want), err);
    else
        CHECKF(st == PF_IMAGE, "%s: %s (%s)", label, pf_status_name(st), err);
    CHECKF(f.data == NULL && f.width == 0 && f.height == 0, "%s: frame not left empty", label);
    CHECKF(strncmp(err, label, strlen(label)) == 0, "%s: message does not start with the name: %s",
           label, err);
    if (want_text)
        CHECKF(strstr(err, want_text) != NULL, "%s: message lacks \"%s\": %s", label, want_text,
               err);
    return st;
}

static int is_critical(const unsigned char *type)
{
    return memcmp(type, "IHDR", 4) == 0 || memcmp(type, "PLTE", 4) == 0 ||
           memcmp(type, "IDAT", 4) == 0 || memcmp(type, "IEND", 4) == 0;
}

/* ---- Truncation ------------------------------------------------------------------------ */

static void check_truncation(const char *name, const unsigned char *png, size_t size,
                             const char *dir)
{
    char label[256];
    for (size_t n = 0; n < size; n++) {
        snprintf(label, sizeof label, "%s[0..%zu)", name, n);
        read_bad(png, n, label, PF_IMAGE, n == 0 ? "empty" : "truncated");
    }

    /* On disk: the file reader's own path through the same code. */
    size_t lens[] = {0, 1, 8, 20, 33, 34, 41, size / 2, size - 13, size - 12, size - 5, size - 1};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char path[4096], err[512] = "";
        snprintf(path, sizeof path, "%s/trunc_%zu_%s", dir, lens[i], name);
        pf_test_write_file(path, png, lens[i]);
        pf_frame f;
        int st = pf_png_read(path, 0, &f, NULL, err, sizeof err);
        CHECKF(st == PF_IMAGE, "%s: %s (%s)", path, pf_status_name(st), err);
        CHECKF(f.data == NULL, "%s: frame not left empty", path);
        CHECKF(strncmp(err, path, strlen(path)) == 0 &&
                   strstr(err, lens[i] ? "truncated" : "empty"),
               "%s: message: %s", path, err);
        if (st == PF_OK)
            pf_frame_free(&f);
    }
}

/* ---- Corruption ------------------------------------------------------------------------ */

static void check_flips(const char *name, const unsigned char *png, size_t size)
{
    unsigned char *bad = malloc(size);
    static const unsigned char masks[] = {0xff, 0x01, 0x20, 0x80};
    int errors = 0, tries = 0;
    for (size_t pos = 0; pos < size; pos++) {
        /* Where pos lies: must a flip there be caught? */
        int must_fail = pos < 8;
        for (size_t off = 8; off + 12 <= size; off += 12 + pf_test_get_be32(png + off)) {
            size_t end = off + 12 + pf_test_get_be32(png + off);
            if (pos >= off + 4 && pos < end)
                must_fail = is_critical(png + off + 4);
            if (pos < end)
                break;
        }
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(bad, png, size);
            bad[pos] ^= masks[m];
            char label[256];
            snprintf(label, sizeof label, "%s^%02x@%zu", name, masks[m], pos);
            int st = read_bad(bad, size, label, must_fail ? PF_IMAGE : -1, NULL);
            errors += st != PF_OK;
            tries++;
        }
    }
    printf("%s: %d of %d single-byte corruptions rejected\n", name, errors, tries);
    free(bad);
}

/* IHDR fields made invalid, CRC recomputed so libpng's field checks are what fires. */
static void check_ihdr(const unsigned char *png, size_t size)
{
    static const struct {
        int at, value;
        const char *what, *text;
    } cases[] = {
        {24, 3, "bit depth 3", "bit depth"},
        {24, 0, "bit depth 0", "bit depth"},
        {25, 5, "colour type 5", "color type"},
        {25, 1, "colour type 1", "color type"},
        {26, 1, "compression method 1", "compression"},
        {27, 1, "filter method 1", "filter"},
        {28, 2, "interlace method 2", "interlace"},
    };
    unsigned char *bad = malloc(size);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, png, size);
        bad[cases[i].at] = (unsigned char)cases[i].value;
        fix_crc(bad, 8);
        char label[128];
        snprintf(label, sizeof label, "ihdr-%s.png", cases[i].what);
        read_bad(bad, size, label, PF_IMAGE, cases[i].text);
    }
    /* Zero width and height, and a palette image of depth 16. */
    memcpy(bad, png, size);
    pf_test_put_be32(bad + 16, 0);
    fix_crc(bad, 8);
    read_bad(bad, size, "ihdr-width0.png", PF_IMAGE, NULL);
    memcpy(bad, png, size);
    pf_test_put_be32(bad + 20, 0);
    fix_crc(bad, 8);
    read_bad(bad, size, "ihdr-height0.png", PF_IMAGE, NULL);
    memcpy(bad, png, size);
    pf_test_put_be32(bad + 16, 0x80000000u); /* beyond PNG's 2^31-1: corrupt, not "too large" */
    fix_crc(bad, 8);
    read_bad(bad, size, "ihdr-width2^31.png", PF_IMAGE, NULL);

    /* A CRC wrong by one bit. */
    memcpy(bad, png, size);
    bad[29] ^= 1;
    read_bad(bad, size, "ihdr-crc.png", PF_IMAGE, "CRC");
    free(bad);
}

static void check_idat(const char *name, const unsigned char *png, size_t size)
{
    size_t off = find_chunk(png, size, "IDAT");
    CHECKF(off, "%s: no IDAT", name);
    if (!off)
        return;
    uint32_t len = pf_test_get_be32(png + off);
    unsigned char *bad = malloc(size);
    char label[256];

    /* The CRC wrong. */
    memcpy(bad, png, size);
    bad[off + 8 + len] ^= 0x10;
    snprintf(label, sizeof label, "%s-idat-crc", name);
    read_bad(bad, size, label, PF_IMAGE, "CRC");

    /* A broken zlib header under a correct CRC. */
    memcpy(bad, png, size);
    bad[off + 8] = 0;
    fix_crc(bad, off);
    snprintf(label, sizeof label, "%s-idat-zlib-header", name);
    read_bad(bad, size, label, PF_IMAGE, NULL);

    /* A deflate stream cut short in the middle, the chunk made consistent. */
    if (len > 8) {
        memcpy(bad, png, size);
        memset(bad + off + 8 + len / 2, 0, len - len / 2);
        fix_crc(bad, off);
        snprintf(label, sizeof label, "%s-idat-zeroed", name);
        read_bad(bad, size, label, -1, NULL);
    }

    /* Garbage bodies with correct CRCs: any result but a crash, a leak or a bad frame. */
    pf_rng rng;
    pf_rng_seed(&rng, 7);
    for (int k = 0; k < 200; k++) {
        memcpy(bad, png, size);
        int from = k < 100 ? 2 : 0; /* keep the zlib header half of the time */
        for (uint32_t i = (uint32_t)from; i < len; i++)
            if (k % 2 == 0 || pf_rng_u32(&rng) % 8 == 0)
                bad[off + 8 + i] = (unsigned char)pf_rng_u32(&rng);
        fix_crc(bad, off);
        snprintf(label, sizeof label, "%s-idat-garbage-%d", name, k);
        read_bad(bad, size, label, -1, NULL);
    }
    free(bad);
}

static void check_not_png(const char *dir)
{
    static const struct {
        const char *name;
        const char *data;
        size_t size;
        const char *what; /* what the message says the file is */
    } files[] = {
        {"text.png", "hello, world\n", 13, NULL},
        {"gif.png", "GIF89a\x01\x00\x01\x00\x80\x00\x00", 13, "looks like a GIF file"},
        {"jpeg.png", "\xff\xd8\xff\xe0\x00\x10JFIF\x00", 11, "looks like a JPEG file"},
        {"one-byte.png", "\x89", 1, NULL},
        {"almost.png", "\x89PNG\r\n\x1a\x0a", 7, NULL}, /* 7 bytes of the signature */
        {"crlf-mangled.png", "\x89PNG\n\x1a\x0a\x00\x00\x00\x0dIHDR", 15, "text-mode transfer"},
        {"webp.png", "RIFF\x24\x00\x00\x00WEBPVP8 ", 16, "looks like a WebP file"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4096], err[512] = "";
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        pf_test_write_file(path, files[i].data, files[i].size);
        pf_frame f;
        int st = pf_png_read(path, 0, &f, NULL, err, sizeof err);
        const char *want = i == 3 || i == 4 ? "truncated" : "not a PNG file";
        CHECKF(st == PF_IMAGE && f.data == NULL, "%s: %s (%s)", path, pf_status_name(st), err);
        CHECKF(strncmp(err, path, strlen(path)) == 0 && strstr(err, want),
               "%s: message lacks \"%s\": %s", path, want, err);
        if (files[i].what)
            CHECKF(strstr(err, files[i].what), "%s: message lacks \"%s\": %s", path, files[i].what,
                   err);
        else
            CHECKF(!strstr(err, "looks like"), "%s: named as what it is not: %s", path, err);
        if (st == PF_OK)
            pf_frame_free(&f);
    }

    /* Missing file, directory: PF_IO. */
    char path[4096], err[512] = "";
    pf_frame f;
    snprintf(path, sizeof path, "%s/no-such-file.png", dir);
    int st = pf_png_read(path, 0, &f, NULL, err, sizeof err);
    CHECKF(st == PF_IO && f.data == NULL && strncmp(err, path, strlen(path)) == 0 &&
               strstr(err, "No such file"),
           "missing file: %s: %s", pf_status_name(st), err);
    st = pf_png_read(dir, 0, &f, NULL, err, sizeof err);
    CHECKF(st == PF_IO && f.data == NULL && strncmp(err, dir, strlen(dir)) == 0,
           "directory: %s: %s", pf_status_name(st), err);

    /* Arguments. */
    CHECK(pf_png_read(NULL, 0, &f, NULL, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(pf_png_read(path, 0, NULL, NULL, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(pf_png_read_memory(NULL, 10, "x", 0, &f, NULL, err, sizeof err) == PF_INVALID_ARGUMENT);
    CHECK(pf_png_read_memory(NULL, 0, NULL, 0, &f, NULL, err, sizeof err) == PF_IMAGE);
    CHECKF(strncmp(err, "<memory>", 8) == 0, "unnamed memory: %s", err);
    /* No error buffer at all is allowed. */
    CHECK(pf_png_read_memory("junk", 4, "junk", 0, &f, NULL, NULL, 0) == PF_IMAGE);
}

/* ---- Animation --------------------------------------------------------------------------- */

/* png with a chunk inserted at offset at (a chunk boundary); *size grows. */
static unsigned char *with_chunk(const unsigned char *png, size_t *size, size_t at,
                                 const char *type, const unsigned char *data, uint32_t len)
{
    unsigned char *p = malloc(*size + 12 + len);
    memcpy(p, png, at);
    pf_test_put_be32(p + at, len);
    memcpy(p + at + 4, type, 4);
    if (len)
        memcpy(p + at + 8, data, len);
    memcpy(p + at + 12 + len, png + at, *size - at);
    fix_crc(p, at);
    *size += 12 + len;
    return p;
}

/* An APNG of n frames made from a still PNG: acTL and fcTL before IDAT, and for each
   frame after the first an fcTL and an fdAT (the IDAT's data again) after it. */
static unsigned char *apng(const unsigned char *png, size_t *size, uint32_t n)
{
    unsigned char actl[8], fctl[26] = {0};
    pf_test_put_be32(actl, n);
    pf_test_put_be32(actl + 4, 0); /* loop forever */
    memcpy(fctl + 4, png + 16, 8); /* the whole image's width and height */
    fctl[21] = 1;                  /* delay 1/1 s */
    uint32_t seq = 0;
    size_t idat = find_chunk(png, *size, "IDAT");
    unsigned char *a = with_chunk(png, size, idat, "acTL", actl, 8);
    pf_test_put_be32(fctl, seq++);
    unsigned char *b = with_chunk(a, size, idat + 20, "fcTL", fctl, 26);
    free(a);
    for (uint32_t k = 1; k < n; k++) {
        size_t iend = find_chunk(b, *size, "IEND");
        size_t at = find_chunk(b, *size, "IDAT");
        uint32_t len = pf_test_get_be32(b + at);
        unsigned char *fdat = malloc(4 + len);
        pf_test_put_be32(fctl, seq++);
        a = with_chunk(b, size, iend, "fcTL", fctl, 26);
        free(b);
        pf_test_put_be32(fdat, seq++);
        memcpy(fdat + 4, a + at + 8, len);
        b = with_chunk(a, size, iend + 38, "fdAT", fdat, 4 + len);
        free(a);
        free(fdat);
    }
    return b;
}

static void check_apng(const unsigned char *png, size_t size, const char *dir)
{
    pf_frame f, still;
    char err[512] = "", path[4096];
    CHECKF(pf_png_read_memory(png, size, "still", 0, &still, NULL, err, sizeof err) == PF_OK, "%s",
           err);
    /* Three frames: refused, saying so, from memory, from a file, and by rows. */
    size_t n = size;
    unsigned char *anim = apng(png, &n, 3);
    read_bad(anim, n, "anim.png", PF_UNSUPPORTED, "animated PNG (APNG) of 3 frames");
    snprintf(path, sizeof path, "%s/anim.png", dir);
    pf_test_write_file(path, anim, n);
    int st = pf_png_read(path, 0, &f, NULL, err, sizeof err);
    CHECKF(st == PF_UNSUPPORTED && !f.data && strncmp(err, path, strlen(path)) == 0 &&
               strstr(err, "APNG"),
           "%s: %s: %s", path, pf_status_name(st), err);
    pf_png_meta *meta = NULL;
    st = pf_png_read_meta(path, 0, &f, NULL, &meta, err, sizeof err);
    CHECKF(st == PF_UNSUPPORTED && !f.data && !meta, "%s with meta: %s: %s", path,
           pf_status_name(st), err);
    pf_png_rows *rows = NULL;
    pf_frame fmt;
    st = pf_png_rows_open(path, 0, &rows, &fmt, NULL, NULL, err, sizeof err);
    CHECKF(st == PF_UNSUPPORTED && !rows && strstr(err, "APNG"), "%s by rows: %s: %s", path,
           pf_status_name(st), err);
    pf_png_rows_close(rows);
    free(anim);

    /* One frame is a still image: read as the PNG it was made from. */
    n = size;
    anim = apng(png, &n, 1);
    st = pf_png_read_memory(anim, n, "one-frame.png", 0, &f, NULL, err, sizeof err);
    CHECKF(st == PF_OK && pf_test_frame_mismatches(&f, &still) == 0, "one-frame.png: %s: %s",
           pf_status_name(st), err);
    pf_frame_free(&f);
    free(anim);
    pf_frame_free(&still);
}

static void run_file(const char *name, const unsigned char *png, size_t size, const char *dir)
{
    check_truncation(name, png, size, dir);
    check_flips(name, png, size);
    check_idat(name, png, size);
}

int main(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", pf_test_tmpdir("png_corrupt"));

    /* Suite files of several kinds (palette + tRNS, interlaced 16-bit, low-bit gray),
       and one of ours with several IDAT-sized rows of incompressible data. */
    static const char *suite[] = {"basn6a08.png", "ftbbn3p08.png", "ibasn6a16.png",
                                  "interlaced/ibasn0g04.png"};
    for (size_t i = 0; i < sizeof suite / sizeof suite[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", SUITE, suite[i]);
        size_t size = 0;
        unsigned char *png = pf_test_read_file(path, &size);
        CHECKF(png && size > 57, "cannot read %s", path);
        if (!png)
            continue;
        const char *base = strrchr(suite[i], '/') ? strrchr(suite[i], '/') + 1 : suite[i];
        run_file(base, png, size, dir);
        if (i == 0)
            check_ihdr(png, size);
        if (i <= 2)
            check_apng(png, size, dir);
        free(png);
    }

    pf_frame f;
    pf_rng rng;
    pf_rng_seed(&rng, 99);
    CHECK(pf_frame_alloc(&f, 61, 37, PF_U8, 4) == PF_OK);
    pf_test_frame_random(&rng, &f);
    char path[4096], err[512] = "";
    snprintf(path, sizeof path, "%s/ours.png", dir);
    CHECKF(pf_png_write(path, &f, 6, err, sizeof err) == PF_OK, "%s", err);
    pf_frame_free(&f);
    size_t size = 0;
    unsigned char *png = pf_test_read_file(path, &size);
    if (png) {
        run_file("ours.png", png, size, dir);
        free(png);
    }

    check_not_png(dir);
    return pf_test_done("png_corrupt");
}
