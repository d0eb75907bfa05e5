/* engine/jpeg_meta.c: JPEG metadata (pipefuse/jpeg.h): the ICC profile and the EXIF
 * block a JPEG carries, the EXIF orientation tag, and the profile of a PNG's iCCP for a
 * JPEG output. Built with or without libjpeg: nothing here decodes pixels.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "internal.h"
#include "jpeg_internal.h"

#define PF_API __attribute__((visibility("default")))

/* An inflated iCCP profile larger than this is dropped: profiles are kilobytes, a few
   megabytes at most (a device link's tables). */
#define PF_ICC_MAX (32u << 20)

static void set_err(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pf_verrf(err, err_size, fmt, ap);
    va_end(ap);
}

PF_API int pf_jpeg_sniff(const void *data, size_t n)
{
    const unsigned char *p = data;
    return p && n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF;
}

/* ---- EXIF orientation ------------------------------------------------------------------- */

static unsigned rd16(const unsigned char *p, int le)
{
    return le ? (unsigned)p[0] | (unsigned)p[1] << 8 : (unsigned)p[0] << 8 | p[1];
}

static uint32_t rd32(const unsigned char *p, int le)
{
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* 1 little-endian, 0 big-endian, -1 not a TIFF header */
static int tiff_order(const unsigned char *t, size_t n)
{
    if (n < 8)
        return -1;
    if (t[0] == 'I' && t[1] == 'I' && t[2] == 42 && t[3] == 0)
        return 1;
    if (t[0] == 'M' && t[1] == 'M' && t[2] == 0 && t[3] == 42)
        return 0;
    return -1;
}

int pf_exif_orientation(const unsigned char *t, size_t n, size_t *at)
{
    int le = tiff_order(t, n);
    if (le < 0)
        return 0;
    uint32_t ifd = rd32(t + 4, le);
    if (ifd < 8 || ifd > n || n - ifd < 2)
        return 0;
    unsigned count = rd16(t + ifd, le);
    if ((size_t)count * 12 > n - ifd - 2)
        return 0;
    for (unsigned i = 0; i < count; i++) {
        const unsigned char *e = t + ifd + 2 + 12 * (size_t)i;
        if (rd16(e, le) != 0x0112)
            continue;
        /* SHORT (3), one value, held in the entry itself */
        if (rd16(e + 2, le) != 3 || rd32(e + 4, le) != 1)
            return 0;
        unsigned v = rd16(e + 8, le);
        if (v < 1 || v > 8)
            return 0;
        if (at)
            *at = (size_t)(e + 8 - t);
        return (int)v;
    }
    return 0;
}

void pf_exif_reset_orientation(unsigned char *t, size_t n, size_t at)
{
    int le = tiff_order(t, n);
    if (le < 0 || at + 2 > n)
        return;
    t[at] = le ? 1 : 0;
    t[at + 1] = le ? 0 : 1;
}

/* ---- The meta object ---------------------------------------------------------------------- */

pf_jpeg_meta *pf_jpeg_meta_make(const void *icc, size_t icc_size, const void *exif,
                                size_t exif_size)
{
    pf_jpeg_meta *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    if (icc && icc_size) {
        if (!(m->icc = malloc(icc_size))) {
            free(m);
            return NULL;
        }
        memcpy(m->icc, icc, icc_size);
        m->icc_size = icc_size;
    }
    if (exif && exif_size) {
        if (!(m->exif = malloc(exif_size))) {
            pf_jpeg_meta_free(m);
            return NULL;
        }
        memcpy(m->exif, exif, exif_size);
        m->exif_size = exif_size;
    }
    return m;
}

PF_API void pf_jpeg_meta_free(pf_jpeg_meta *m)
{
    if (!m)
        return;
    free(m->icc);
    free(m->exif);
    free(m);
}

PF_API int pf_jpeg_meta_icc(const pf_jpeg_meta *m, const void **data, size_t *size)
{
    if (!m || !m->icc_size)
        return 0;
    if (data)
        *data = m->icc;
    if (size)
        *size = m->icc_size;
    return 1;
}

PF_API int pf_jpeg_meta_exif(const pf_jpeg_meta *m, const void **data, size_t *size)
{
    if (!m || !m->exif_size)
        return 0;
    if (data)
        *data = m->exif;
    if (size)
        *size = m->exif_size;
    return 1;
}

PF_API const char *pf_jpeg_meta_icc_space(const pf_jpeg_meta *m)
{
    static const char *const known[] = {"RGB ", "GRAY", "CMYK", "Lab ", "XYZ ", NULL};
    if (!m || m->icc_size < 20)
        return "";
    for (int i = 0; known[i]; i++)
        if (memcmp(m->icc + 16, known[i], 4) == 0)
            return known[i];
    return "?";
}

PF_API int pf_jpeg_meta_new(const void *icc, size_t icc_size, const void *exif, size_t exif_size,
                            pf_jpeg_meta **out, char *err, size_t err_size)
{
    if (!out) {
        set_err(err, err_size, "pf_jpeg_meta_new: out is NULL");
        return PF_INVALID_ARGUMENT;
    }
    *out = NULL;
    const unsigned char *x = exif;
    if (x && exif_size >= 6 && memcmp(x, "Exif\0\0", 6) == 0) {
        x += 6;
        exif_size -= 6;
    }
    if (x && exif_size && tiff_order(x, exif_size) < 0) {
        set_err(err, err_size,
                "pf_jpeg_meta_new: the EXIF block is not a TIFF structure "
                "(it starts neither II*\\0 nor MM\\0*)");
        return PF_INVALID_ARGUMENT;
    }
    if (!(*out = pf_jpeg_meta_make(icc, icc_size, x, x ? exif_size : 0))) {
        set_err(err, err_size, "pf_jpeg_meta_new: out of memory");
        return PF_NO_MEMORY;
    }
    return PF_OK;
}

/* ---- Into a JPEG another encoder wrote (nvjpeg.c) ------------------------------------------ */

/* (jpeg_internal.h) A JPEG stream with the metadata after SOI: EXIF (APP1, replacing a JFIF APP0, as EXIF
   wants to come first) and the ICC profile (APP2 segments) where
   it is of the frame's kind; without EXIF the profile follows the JFIF marker. */
int pf_jpeg_splice_meta(const unsigned char *in, size_t n, const pf_jpeg_meta *m, int channels,
                        unsigned char **out, size_t *out_n)
{
    size_t jfif_end = 2;
    if (n > 6 && in[2] == 0xFF && in[3] == 0xE0 && 4 + ((size_t)in[4] << 8 | in[5]) <= n)
        jfif_end = 4 + ((size_t)in[4] << 8 | in[5]);
    int exif = m->exif_size && m->exif_size + 8 <= 65535;
    int icc =
        m->icc_size && strcmp(pf_jpeg_meta_icc_space(m), channels == 1 ? "GRAY" : "RGB ") == 0;
    size_t segs = icc ? (m->icc_size + 65518) / 65519 : 0;
    if (segs > 255)
        icc = 0, segs = 0;
    size_t head = exif ? 2 : jfif_end; /* copied before the metadata */
    size_t cap = n + (exif ? m->exif_size + 10 : 0) + (icc ? m->icc_size + segs * 18 : 0);
    unsigned char *b = malloc(cap), *p = b;
    if (!b)
        return PF_NO_MEMORY;
    memcpy(p, in, head), p += head;
    if (exif) {
        size_t len = m->exif_size + 8;
        *p++ = 0xFF, *p++ = 0xE1, *p++ = (unsigned char)(len >> 8), *p++ = (unsigned char)len;
        memcpy(p, "Exif\0\0", 6), p += 6;
        memcpy(p, m->exif, m->exif_size), p += m->exif_size;
    }
    for (size_t k = 0; k < segs; k++) {
        size_t off = k * 65519, len = m->icc_size - off < 65519 ? m->icc_size - off : 65519;
        size_t seg = len + 16;
        *p++ = 0xFF, *p++ = 0xE2, *p++ = (unsigned char)(seg >> 8), *p++ = (unsigned char)seg;
        memcpy(p, "ICC_PROFILE\0", 12), p += 12;
        *p++ = (unsigned char)(k + 1), *p++ = (unsigned char)segs;
        memcpy(p, m->icc + off, len), p += len;
    }
    memcpy(p, in + jfif_end, n - jfif_end), p += n - jfif_end;
    *out = b;
    *out_n = (size_t)(p - b);
    return PF_OK;
}

/* ---- From a PNG's metadata ------------------------------------------------------------------- */

/* iCCP: a keyword of 1-79 bytes, NUL, compression method 0, a zlib stream. The profile
   inflated into a malloc'd buffer, or NULL (malformed, too large, no memory). */
static unsigned char *inflate_iccp(const unsigned char *d, size_t n, size_t *size)
{
    const unsigned char *nul = memchr(d, 0, n < 81 ? n : 81);
    if (!nul || nul == d || (size_t)(nul - d) + 2 > n || nul[1] != 0)
        return NULL;
    const unsigned char *z = nul + 2;
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit(&s) != Z_OK)
        return NULL;
    size_t cap = 4096, len = 0;
    unsigned char *buf = malloc(cap);
    int rc = Z_OK;
    s.next_in = (unsigned char *)z;
    s.avail_in = (uInt)(n - (size_t)(z - d));
    while (buf && rc == Z_OK) {
        if (len == cap) {
            unsigned char *g = cap < PF_ICC_MAX ? realloc(buf, cap * 2) : NULL;
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
        s.next_out = buf + len;
        s.avail_out = (uInt)(cap - len);
        rc = inflate(&s, Z_NO_FLUSH);
        len = cap - s.avail_out;
        if (rc == Z_BUF_ERROR && s.avail_out) /* no progress: the stream ends early */
            break;
        if (rc == Z_BUF_ERROR)
            rc = Z_OK;
    }
    inflateEnd(&s);
    if (rc != Z_STREAM_END || !buf || len < 128) { /* a profile's header alone is 128 bytes */
        free(buf);
        return NULL;
    }
    *size = len;
    return buf;
}

PF_API int pf_jpeg_meta_from_png(const pf_png_meta *pm, pf_jpeg_meta **out, char *err,
                                 size_t err_size)
{
    if (!out) {
        set_err(err, err_size, "pf_jpeg_meta_from_png: out is NULL");
        return PF_INVALID_ARGUMENT;
    }
    *out = NULL;
    int n = pf_png_meta_count(pm);
    for (int i = 0; i < n; i++) {
        const void *data;
        size_t size;
        const char *name = pf_png_meta_chunk(pm, i, &data, &size);
        if (!name || strcmp(name, "iCCP") != 0 || !data)
            continue;
        size_t icc_size = 0;
        unsigned char *icc = inflate_iccp(data, size, &icc_size);
        if (!icc) /* a malformed profile is dropped, as a PNG reader ignores it */
            return PF_OK;
        pf_jpeg_meta *m = calloc(1, sizeof *m);
        if (!m) {
            free(icc);
            set_err(err, err_size, "out of memory for the ICC profile");
            return PF_NO_MEMORY;
        }
        m->icc = icc;
        m->icc_size = icc_size;
        *out = m;
        return PF_OK;
    }
    return PF_OK;
}
