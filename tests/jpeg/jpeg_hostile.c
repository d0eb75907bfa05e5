/* tests/jpeg/jpeg_hostile.c: hostile JPEG input fails alone, with a message naming the
 * file and the reason, no crash, no frame.
 *
 * - truncated at every length (baseline, progressive, arithmetic): PF_IMAGE, never a
 *   gray-filled success; from a file too, by rows too;
 * - corrupt Huffman data (scan bytes made all ones, an invalid code): PF_IMAGE "Huffman";
 * - a header claiming 65000x65000 on a tiny file: PF_TOO_LARGE before any allocation
 *   (info holds the claim); 15000x15000 (under the pixel limit): PF_IMAGE by the
 *   data-size bound, at once; a progressive file over a small max_pixels / max_memory:
 *   PF_TOO_LARGE;
 * - zero-length segments: an empty APP1 (length 2) is read; length 0 and 1 fail;
 * - a PNG given to the JPEG reader: PF_IMAGE naming PNG; empty and garbage files;
 * - 12-bit (SOF1, precision 12) and lossless (SOF3): PF_UNSUPPORTED saying why;
 * - the EXIF parser on malformed blocks (offsets past the end, wrong type) ignores them.
 */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>

#include "jpeg_make.h"
#include "pipefuse/jpeg.h"
#include "testutil.h"

static char dir[1024];

/* Offset of the first marker m (FF m) found by walking segments; -1 when absent. */
static long find_marker(const unsigned char *p, size_t n, int m)
{
    size_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xFF)
            return -1;
        if (p[i + 1] == m)
            return (long)i;
        if (p[i + 1] == 0xDA)
            return -1;
        i += 2 + ((size_t)p[i + 2] << 8 | p[i + 3]);
    }
    return -1;
}

static int read_mem(const unsigned char *p, size_t n, const pf_jpeg_read_opts *o, char *err,
                    size_t errn, pf_jpeg_info *info)
{
    pf_frame f;
    int st = pf_jpeg_read_memory(p, n, "hostile.jpg", o, &f, info, NULL, err, errn);
    CHECK(st == PF_OK || f.data == NULL);
    pf_frame_free(&f);
    return st;
}

static void test_truncated(void)
{
    const jm_opts kinds[] = {{.w = 40, .h = 24, .space = 3},
                             {.w = 40, .h = 24, .space = 3, .progressive = 1},
                             {.w = 40, .h = 24, .space = 1, .arith = 1}};
    for (int k = 0; k < 3; k++) {
        size_t n;
        unsigned char *jpg = jm_make(&kinds[k], &n);
        char err[512];
        int ok = 0, named = 0;
        for (size_t cut = 0; cut + 2 < n; cut++) {
            int st = read_mem(jpg, cut, NULL, err, sizeof err, NULL);
            ok += st == PF_OK;
            named += strncmp(err, "hostile.jpg: ", 13) == 0;
            if (st == PF_OK)
                fprintf(stderr, "kind %d cut at %zu of %zu read\n", k, cut, n);
        }
        CHECKF(ok == 0 && named == (int)(n - 2), "kind %d: %d truncations read, %d named", k, ok,
               named);
        /* without its EOI alone: also truncated (libjpeg would say premature end) */
        CHECK(read_mem(jpg, n - 2, NULL, err, sizeof err, NULL) == PF_IMAGE);
        /* a file cut in half, read whole and by rows */
        char path[1200];
        snprintf(path, sizeof path, "%s/cut%d.jpg", dir, k);
        pf_test_write_file(path, jpg, n / 2);
        pf_frame f;
        CHECKF(pf_jpeg_read(path, NULL, &f, NULL, NULL, err, sizeof err) == PF_IMAGE &&
                   strstr(err, path) &&
                   (strstr(err, "truncated") || strstr(err, "premature") ||
                    strstr(err, "more than its")),
               "%s", err);
        pf_jpeg_rows *r;
        pf_frame fmt;
        int st = pf_jpeg_rows_open(path, NULL, &r, &fmt, NULL, NULL, err, sizeof err);
        if (st == PF_OK) {
            pf_frame rows;
            CHECK(pf_frame_alloc(&rows, fmt.width, fmt.height, PF_U8, fmt.channels) == PF_OK);
            st = pf_jpeg_rows_read(r, &rows, fmt.height, err, sizeof err);
            pf_frame_free(&rows);
            pf_jpeg_rows_close(r);
        }
        CHECKF(st == PF_IMAGE && strstr(err, path), "rows: %s", err);
        free(jpg);
    }
}

static void test_corrupt_huffman(void)
{
    jm_opts o = {.w = 64, .h = 64, .space = 3};
    size_t n;
    unsigned char *jpg = jm_make(&o, &n);
    long sos = find_marker(jpg, n, 0xDA);
    CHECK(sos > 0);
    size_t data = (size_t)sos + 2 + ((size_t)jpg[sos + 2] << 8 | jpg[sos + 3]);
    /* all-ones bits: FF 00 (a stuffed FF) over the middle of the scan */
    for (size_t i = data + 20; i + 2 < n - 40; i += 2)
        jpg[i] = 0xFF, jpg[i + 1] = 0x00;
    char err[512];
    int st = read_mem(jpg, n, NULL, err, sizeof err, NULL);
    CHECKF(st == PF_IMAGE && strstr(err, "hostile.jpg") && strstr(err, "Huffman"), "%s: %s",
           pf_status_name(st), err);
    free(jpg);
}

/* Damage libjpeg notices only as a warning fails the read, where a lenient reader
   returns a smeared image:
   - stray bytes before a marker (the decoder ended early: damaged data, or junk written
     into the file): before the EOI, and before a restart marker;
   - scan bytes overwritten (no FF among them, so no marker appears): the decoder drifts
     and finds the next marker early or late. Huffman codes resynchronise, so some damage
     decodes without any sign (JPEG has no checksum): of 16 overwrites of each kind some
     must fail (about half do), and every failure is PF_IMAGE naming the file. */
static unsigned char *with_junk_before(const unsigned char *jpg, size_t n, size_t at, size_t *out_n)
{
    static const unsigned char junk[] = {0x12, 0x34, 0x56, 0x00, 0x7e, 0x01, 0x02, 0x03};
    unsigned char *p = malloc(n + sizeof junk);
    CHECK(p != NULL);
    if (!p)
        return NULL;
    memcpy(p, jpg, at);
    memcpy(p + at, junk, sizeof junk);
    memcpy(p + at + sizeof junk, jpg + at, n - at);
    *out_n = n + sizeof junk;
    return p;
}

static void test_corrupt_scan(void)
{
    char err[512];
    const jm_opts base = {.w = 96, .h = 64, .space = 3},
                  rst = {.w = 96, .h = 64, .space = 3, .restart_rows = 1};
    size_t n, m;
    unsigned char *jpg = jm_make(&base, &n), *bad = with_junk_before(jpg, n, n - 2, &m);
    CHECKF(bad && read_mem(bad, m, NULL, err, sizeof err, NULL) == PF_IMAGE &&
               strstr(err, "hostile.jpg: corrupt JPEG: ") &&
               strstr(err, "stray bytes before marker 0xd9"),
           "junk before the EOI: %s", err);
    free(bad);
    free(jpg);
    jpg = jm_make(&rst, &n);
    long sos = find_marker(jpg, n, 0xDA);
    size_t r = sos > 0 ? (size_t)sos + 4 : n;
    while (r + 1 < n && !(jpg[r] == 0xFF && jpg[r + 1] >= 0xD0 && jpg[r + 1] <= 0xD7))
        r++;
    CHECK(r + 1 < n);
    bad = with_junk_before(jpg, n, r, &m);
    CHECKF(bad && read_mem(bad, m, NULL, err, sizeof err, NULL) == PF_IMAGE &&
               strstr(err, "stray bytes before marker 0xd"),
           "junk before a restart marker: %s", err);
    free(bad);
    free(jpg);

    const jm_opts kinds[] = {base, {.w = 96, .h = 64, .space = 3, .progressive = 1}, rst};
    const char *names[] = {"baseline", "progressive", "restart markers"};
    for (int k = 0; k < 3; k++) {
        jpg = jm_make(&kinds[k], &n);
        sos = find_marker(jpg, n, 0xDA);
        CHECK(sos > 0);
        const size_t data = (size_t)sos + 2 + ((size_t)jpg[sos + 2] << 8 | jpg[sos + 3]);
        int failed = 0, tries = 0;
        for (int len = 3; len <= 60; len *= 2 + (len > 3))
            for (int at = 1; at <= 4; at++) {
                bad = malloc(n);
                CHECK(bad != NULL);
                if (!bad)
                    break;
                memcpy(bad, jpg, n);
                const size_t from = data + (n - data) * (size_t)at / 6;
                for (size_t i = from; i < from + (size_t)len && i + 2 < n; i++)
                    bad[i] = (unsigned char)((i * 37) & 0x7f);
                int st = read_mem(bad, n, NULL, err, sizeof err, NULL);
                tries++;
                if (st != PF_OK) {
                    failed++;
                    CHECKF(st == PF_IMAGE && strstr(err, "hostile.jpg: corrupt JPEG"), "%s: %s",
                           pf_status_name(st), err);
                }
                free(bad);
            }
        CHECKF(failed > 0, "%s: none of %d damaged scans failed", names[k], tries);
        free(jpg);
    }
}

static void patch_size(unsigned char *jpg, size_t n, unsigned w, unsigned h)
{
    long sof = find_marker(jpg, n, 0xC0);
    if (sof < 0)
        sof = find_marker(jpg, n, 0xC2);
    CHECK(sof > 0);
    jpg[sof + 5] = (unsigned char)(h >> 8), jpg[sof + 6] = (unsigned char)h;
    jpg[sof + 7] = (unsigned char)(w >> 8), jpg[sof + 8] = (unsigned char)w;
}

static void test_sizes(void)
{
    char err[512];
    pf_jpeg_info info;
    jm_opts o = {.w = 16, .h = 16, .space = 3};
    size_t n;
    unsigned char *jpg = jm_make(&o, &n);
    patch_size(jpg, n, 65000, 65000);
    clock_t t0 = clock();
    int st = read_mem(jpg, n, NULL, err, sizeof err, &info);
    CHECKF(st == PF_TOO_LARGE && strstr(err, "65000x65000") && info.width == 65000, "%s: %s",
           pf_status_name(st), err);
    patch_size(jpg, n, 15000, 15000);
    st = read_mem(jpg, n, NULL, err, sizeof err, &info);
    CHECKF(st == PF_IMAGE && strstr(err, "more than its"), "%s: %s", pf_status_name(st), err);
    /* a CPU-time check, not a timing assertion: neither decoded 225M pixels */
    CHECKF((double)(clock() - t0) / CLOCKS_PER_SEC < 20, "the size checks decoded");
    free(jpg);
    /* a progressive file under a small pixel limit and a small memory limit */
    jm_opts p = {.w = 512, .h = 512, .space = 3, .progressive = 1};
    jpg = jm_make(&p, &n);
    pf_jpeg_read_opts px = {sizeof px, 512 * 511, 0, 0};
    st = read_mem(jpg, n, &px, err, sizeof err, &info);
    CHECKF(st == PF_TOO_LARGE && strstr(err, "262144 pixels"), "%s: %s", pf_status_name(st), err);
    pf_jpeg_read_opts mem = {sizeof mem, 0, 256 << 10, 0};
    st = read_mem(jpg, n, &mem, err, sizeof err, &info);
    CHECKF(st == PF_TOO_LARGE && strstr(err, "max-memory"), "%s: %s", pf_status_name(st), err);
    mem.max_memory = 64 << 20;
    st = read_mem(jpg, n, &mem, err, sizeof err, &info);
    CHECKF(st == PF_OK, "under a large enough limit: %s", err);
    free(jpg);
}

/* jpg with a segment FF E1 <len> inserted after SOI, of declared length len (and as many
   bytes after the length as it claims, up to 8) */
static unsigned char *with_segment(const unsigned char *jpg, size_t n, unsigned len, size_t *out)
{
    size_t extra = 4 + (len > 2 ? len - 2 : 0);
    unsigned char *p = malloc(n + extra);
    memcpy(p, jpg, 2);
    p[2] = 0xFF, p[3] = 0xE1, p[4] = (unsigned char)(len >> 8), p[5] = (unsigned char)len;
    memset(p + 6, 'x', extra - 4);
    memcpy(p + 2 + extra, jpg + 2, n - 2);
    *out = n + extra;
    return p;
}

static void test_segments(void)
{
    jm_opts o = {.w = 16, .h = 16, .space = 3};
    size_t n, m;
    unsigned char *jpg = jm_make(&o, &n);
    char err[512];
    unsigned char *p = with_segment(jpg, n, 2, &m);
    pf_jpeg_info info;
    CHECKF(read_mem(p, m, NULL, err, sizeof err, &info) == PF_OK, "empty APP1: %s", err);
    CHECK(!info.has_exif);
    free(p);
    /* lengths 0 and 1 (less than the length field itself): libjpeg takes them as empty;
       read, they give the same pixels as the file without them */
    pf_frame ref, f;
    CHECK(pf_jpeg_read_memory(jpg, n, "ref", NULL, &ref, NULL, NULL, err, sizeof err) == PF_OK);
    for (unsigned len = 0; len < 2; len++) {
        p = with_segment(jpg, n, len, &m);
        err[0] = 0;
        int st = pf_jpeg_read_memory(p, m, "hostile.jpg", NULL, &f, NULL, NULL, err, sizeof err);
        CHECKF(st == PF_OK ? pf_test_frame_mismatches(&f, &ref) == 0
                           : st == PF_IMAGE && strstr(err, "hostile.jpg"),
               "APP1 of length %u: %s: %s", len, pf_status_name(st), err);
        pf_frame_free(&f);
        free(p);
    }
    /* a DQT and a DHT of no tables (length 2) before the real ones: read as before */
    for (int k = 0; k < 2; k++) {
        p = with_segment(jpg, n, 2, &m);
        p[3] = k ? 0xC4 : 0xDB;
        int st = pf_jpeg_read_memory(p, m, "hostile.jpg", NULL, &f, NULL, NULL, err, sizeof err);
        CHECKF(st == PF_OK ? pf_test_frame_mismatches(&f, &ref) == 0
                           : st == PF_IMAGE && strstr(err, "hostile.jpg"),
               "empty %s: %s: %s", k ? "DHT" : "DQT", pf_status_name(st), err);
        pf_frame_free(&f);
        free(p);
    }
    pf_frame_free(&ref);
    /* an EXIF APP1 of only its prefix, and one whose IFD offset points past its end */
    static const unsigned char bad_exif[][20] = {
        {'E', 'x', 'i', 'f', 0, 0},
        {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 0xFF, 0xFF, 0, 0, 1, 0, 0x12, 1, 3, 0},
    };
    for (int k = 0; k < 2; k++) {
        size_t len = k ? 20 : 6;
        p = with_segment(jpg, n, (unsigned)len + 2, &m);
        memcpy(p + 6, bad_exif[k], len);
        CHECKF(read_mem(p, m, NULL, err, sizeof err, &info) == PF_OK && info.orientation == 1,
               "malformed EXIF %d: %s", k, err);
        free(p);
    }
    free(jpg);
}

static void test_not_jpeg(void)
{
    char err[512], path[1200];
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    CHECK(read_mem(png, sizeof png, NULL, err, sizeof err, NULL) == PF_IMAGE && strstr(err, "PNG"));
    CHECK(read_mem(png, 0, NULL, err, sizeof err, NULL) == PF_IMAGE && strstr(err, "empty"));
    CHECK(read_mem((const unsigned char *)"garbage!", 8, NULL, err, sizeof err, NULL) == PF_IMAGE &&
          strstr(err, "not a JPEG"));
    snprintf(path, sizeof path, "%s/photo.jpg", dir);
    pf_test_write_file(path, png, sizeof png);
    pf_frame f;
    CHECK(pf_jpeg_read(path, NULL, &f, NULL, NULL, err, sizeof err) == PF_IMAGE &&
          strstr(err, path) && strstr(err, "PNG"));
    snprintf(path, sizeof path, "%s/missing.jpg", dir);
    CHECK(pf_jpeg_read(path, NULL, &f, NULL, NULL, err, sizeof err) == PF_IO && strstr(err, path));
    CHECK(pf_jpeg_read(dir, NULL, &f, NULL, NULL, err, sizeof err) == PF_IO);
}

static void test_unsupported(void)
{
    jm_opts o = {.w = 16, .h = 16, .space = 1};
    size_t n;
    unsigned char *jpg = jm_make(&o, &n);
    long sof = find_marker(jpg, n, 0xC0);
    CHECK(sof > 0);
    char err[512];
    jpg[sof + 1] = 0xC1; /* extended sequential, 12-bit */
    jpg[sof + 4] = 12;
    int st = read_mem(jpg, n, NULL, err, sizeof err, NULL);
    CHECKF(st == PF_UNSUPPORTED && strstr(err, "12-bit"), "%s: %s", pf_status_name(st), err);
    jpg[sof + 1] = 0xC3; /* lossless */
    jpg[sof + 4] = 8;
    st = read_mem(jpg, n, NULL, err, sizeof err, NULL);
    CHECKF(st == PF_UNSUPPORTED && strstr(err, "lossless"), "%s: %s", pf_status_name(st), err);
    free(jpg);
}

int main(void)
{
    if (!pf_jpeg_available())
        return PF_TEST_SKIPPED;
    snprintf(dir, sizeof dir, "%s", pf_test_tmpdir("jpeg_hostile"));
    test_truncated();
    test_corrupt_huffman();
    test_corrupt_scan();
    test_sizes();
    test_segments();
    test_not_jpeg();
    test_unsupported();
    return pf_test_done("jpeg_hostile");
}
