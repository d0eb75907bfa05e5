/* tests/png/png_conformance.c: every image of the PngSuite subset reads, in the format
 * its name promises, to the same pixels as an independent reference decoding; each
 * interlaced i*.png reads to the same pixels as its twin without the 'i'; reading from
 * memory gives the same as reading the file.
 *
 * The reference: libpng's high-level png_read_png with PNG_TRANSFORM_PACKING only, so
 * it yields the samples exactly as stored (one byte per sample below 8 bits, palette
 * indices, 16-bit big-endian), and the test expands them itself: gray scaled by
 * 255/max, palette looked up in PLTE, alpha from tRNS. Not the simplified API
 * (png_image_*): it converts to sRGB (8-bit) or linear premultiplied (16-bit)
 * according to gAMA, and the PngSuite files carry gAMA, so it is not exact: checked
 * by hand, it differs from the stored samples on 17 of the 19 basn and ftp files. Nor
 * PNG_TRANSFORM_EXPAND: those are the same libpng transforms the reader under test
 * uses, so they could not catch a wrong choice of them.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, link, dirent, rlimit under -std=c11 */
#include <dirent.h>
#include <png.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

#define SUITE PF_SOURCE_DIR "/tests/data/pngsuite"

/* ---- What a file name promises ------------------------------------------------------- */

typedef struct expect {
    int color_type, depth, trns;
    int channels, bits; /* of the frame */
} expect;

/* "basn0g04" (basic, no tRNS), "ftbbn3p08" (tRNS, b background), "ftp0n2c08" (opaque),
   "ftp1n3p08" (tRNS); a leading 'i' marks the interlaced twin. After the prefix: 'n',
   colour type digit, a letter, two-digit bit depth. Returns 0 for unknown names. */
static int parse_name(const char *name, expect *e)
{
    if (name[0] == 'i')
        name++;
    const char *p;
    if (strncmp(name, "bas", 3) == 0) {
        e->trns = 0;
        p = name + 3;
    } else if (strncmp(name, "ftb", 3) == 0) {
        e->trns = 1;
        p = name + 4;
    } else if (strncmp(name, "ftp", 3) == 0) {
        e->trns = name[3] == '1';
        p = name + 4;
    } else {
        return 0;
    }
    if (p[0] != 'n' || p[1] < '0' || p[1] > '6' || p[3] < '0' || p[3] > '9' || p[4] < '0' ||
        p[4] > '9')
        return 0;
    e->color_type = p[1] - '0';
    e->depth = (p[3] - '0') * 10 + (p[4] - '0');
    e->bits = e->depth == 16 ? 16 : 8;
    switch (e->color_type) {
    case 0:
        e->channels = 1 + e->trns;
        break;
    case 2:
        e->channels = 3 + e->trns;
        break;
    case 3:
        e->channels = 3 + e->trns;
        break;
    case 4:
        e->channels = 2;
        break;
    case 6:
        e->channels = 4;
        break;
    default:
        return 0;
    }
    return 1;
}

/* ---- The reference decoding ------------------------------------------------------------- */

typedef struct ref {
    int width, height, channels, bits;
    int color_type, depth, interlaced, has_trns;
    unsigned *px; /* width * height * channels samples */
} ref;

static int ref_decode(const char *path, ref *out)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(fp);
        return 0;
    }
    /* png_read_png updates info to the unpacked format (depth 8): take the stored
       depth from the IHDR bytes themselves. */
    unsigned char head[33];
    if (fread(head, 1, sizeof head, fp) != sizeof head || memcmp(head + 12, "IHDR", 4) != 0) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(fp);
        return 0;
    }
    int depth = head[24];
    rewind(fp);
    png_init_io(png, fp);
    png_read_png(png, info, PNG_TRANSFORM_PACKING, NULL);
    fclose(fp);

    png_uint_32 w, h;
    int unpacked_depth, ct, il;
    png_get_IHDR(png, info, &w, &h, &unpacked_depth, &ct, &il, NULL, NULL);
    png_bytepp rows = png_get_rows(png, info);
    png_colorp plte = NULL;
    int n_plte = 0;
    png_bytep trans_alpha = NULL;
    int n_trans = 0;
    png_color_16p key = NULL;
    int trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    if (trns)
        png_get_tRNS(png, info, &trans_alpha, &n_trans, &key);
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_get_PLTE(png, info, &plte, &n_plte);

    int in_ch = ct == 0 ? 1 : ct == 2 ? 3 : ct == 3 ? 1 : ct == 4 ? 2 : 4;
    int ch = ct == 0 ? 1 + trns : ct == 2 || ct == 3 ? 3 + trns : in_ch;
    unsigned max = depth == 16 ? 65535 : 255, raw_max = (1u << depth) - 1;
    out->px = malloc((size_t)w * h * ch * sizeof *out->px);
    for (png_uint_32 y = 0; y < h; y++) {
        for (png_uint_32 x = 0; x < w; x++) {
            unsigned s[4];
            for (int c = 0; c < in_ch; c++) {
                size_t i = (size_t)x * in_ch + c;
                s[c] =
                    depth == 16 ? (unsigned)rows[y][2 * i] << 8 | rows[y][2 * i + 1] : rows[y][i];
            }
            unsigned *o = out->px + ((size_t)y * w + x) * ch;
            if (ct == PNG_COLOR_TYPE_GRAY) {
                o[0] = depth < 8 ? s[0] * 255 / raw_max : s[0];
                if (trns)
                    o[1] = s[0] == key->gray ? 0 : max;
            } else if (ct == PNG_COLOR_TYPE_RGB) {
                for (int c = 0; c < 3; c++)
                    o[c] = s[c];
                if (trns)
                    o[3] = s[0] == key->red && s[1] == key->green && s[2] == key->blue ? 0 : max;
            } else if (ct == PNG_COLOR_TYPE_PALETTE) {
                png_color pc = (int)s[0] < n_plte ? plte[s[0]] : (png_color){0, 0, 0};
                o[0] = pc.red;
                o[1] = pc.green;
                o[2] = pc.blue;
                if (trns)
                    o[3] = (int)s[0] < n_trans ? trans_alpha[s[0]] : 255;
            } else {
                for (int c = 0; c < in_ch; c++)
                    o[c] = s[c];
            }
        }
    }
    out->width = (int)w;
    out->height = (int)h;
    out->channels = ch;
    out->bits = depth == 16 ? 16 : 8;
    out->color_type = ct;
    out->depth = depth;
    out->interlaced = il != PNG_INTERLACE_NONE;
    out->has_trns = trns;
    png_destroy_read_struct(&png, &info, NULL);
    return 1;
}

/* ---- The checks ---------------------------------------------------------------------- */

static int check_file(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    expect e;
    if (!parse_name(name, &e)) {
        CHECKF(0, "%s: unexpected name in the PngSuite subset", name);
        return 0;
    }

    pf_frame f;
    pf_png_info info;
    char err[512] = "";
    int st = pf_png_read(path, 0, &f, &info, err, sizeof err);
    CHECKF(st == PF_OK, "%s: %s: %s", name, pf_status_name(st), err);
    if (st != PF_OK)
        return 0;

    /* The format the name promises. */
    CHECKF(f.channels == e.channels, "%s: %d channels, expected %d", name, f.channels, e.channels);
    CHECKF(f.sample == (e.bits == 16 ? PF_U16 : PF_U8), "%s: sample %d, expected %d bits", name,
           f.sample, e.bits);
    CHECKF(f.width == 32 && f.height == 32, "%s: %dx%d", name, f.width, f.height);
    CHECKF(info.color_type == e.color_type && info.bit_depth == e.depth,
           "%s: info says colour type %d depth %d", name, info.color_type, info.bit_depth);
    CHECKF(f.pitch % 16 == 0 && ((uintptr_t)f.data & 15) == 0, "%s: pitch %zu", name, f.pitch);

    /* The pixels of the reference. */
    ref r;
    CHECKF(ref_decode(path, &r), "%s: reference decoding failed", name);
    if (r.px) {
        CHECKF(r.has_trns == e.trns, "%s: tRNS %d in the file, %d from the name", name, r.has_trns,
               e.trns);
        CHECKF(info.interlaced == r.interlaced, "%s: interlaced %d, file says %d", name,
               info.interlaced, r.interlaced);
        CHECKF(r.channels == f.channels && r.width == f.width && r.height == f.height,
               "%s: reference is %dx%dx%d", name, r.width, r.height, r.channels);
        long bad = 0;
        if (r.channels == f.channels && r.width == f.width && r.height == f.height) {
            for (int y = 0; y < f.height; y++)
                for (int x = 0; x < f.width; x++)
                    for (int c = 0; c < f.channels; c++) {
                        unsigned want = r.px[((size_t)y * r.width + x) * r.channels + c];
                        unsigned got = pf_test_frame_sample(&f, x, y, c);
                        if (got != want && bad++ < 3)
                            fprintf(stderr, "%s: (%d,%d)[%d] = %u, reference %u\n", name, x, y, c,
                                    got, want);
                    }
        }
        CHECKF(bad == 0, "%s: %ld samples differ from the reference", name, bad);
        free(r.px);
    }

    /* From memory: the same frame and header. */
    size_t size = 0;
    void *buf = pf_test_read_file(path, &size);
    pf_frame m;
    pf_png_info minfo;
    st = pf_png_read_memory(buf, size, name, 0, &m, &minfo, err, sizeof err);
    CHECKF(st == PF_OK, "%s from memory: %s: %s", name, pf_status_name(st), err);
    if (st == PF_OK) {
        CHECKF(pf_test_frame_mismatches(&f, &m) == 0, "%s: memory read differs from the file read",
               name);
        CHECKF(memcmp(&info, &minfo, sizeof info) == 0, "%s: memory read info differs", name);
    }
    pf_frame_free(&m);
    free(buf);
    pf_frame_free(&f);
    return 1;
}

/* An interlaced file against its twin, the same name without the leading 'i'. */
static void check_twin(const char *dir, const char *name)
{
    char ipath[4096], tpath[4096], err[512] = "";
    snprintf(ipath, sizeof ipath, "%s/%s", dir, name);
    snprintf(tpath, sizeof tpath, "%s/%s", SUITE, name + 1);
    pf_frame a, b;
    pf_png_info ia, ib;
    int sa = pf_png_read(ipath, 0, &a, &ia, err, sizeof err);
    CHECKF(sa == PF_OK, "%s", err);
    int sb = pf_png_read(tpath, 0, &b, &ib, err, sizeof err);
    CHECKF(sb == PF_OK, "%s", err);
    if (sa == PF_OK && sb == PF_OK) {
        CHECKF(ib.interlaced == 0, "%s: the twin is interlaced", name + 1);
        CHECKF(ia.color_type == ib.color_type && ia.bit_depth == ib.bit_depth,
               "%s: header differs from its twin", name);
        long d = pf_test_frame_mismatches(&a, &b);
        CHECKF(d == 0, "%s: %ld samples differ from %s", name, d, name + 1);
    }
    pf_frame_free(&a);
    pf_frame_free(&b);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .png names of dir, sorted; returns the count. */
static int list_png(const char *dir, char ***names)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    *names = NULL;
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".png") != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            *names = realloc(*names, (size_t)cap * sizeof **names);
        }
        (*names)[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(*names, (size_t)n, sizeof **names, by_name);
    return n;
}

static void run_dir(const char *dir, int min_files, int *read, int *twins)
{
    char **names;
    int n = list_png(dir, &names);
    CHECKF(n >= min_files, "%s: %d PNG files, expected at least %d", dir, n, min_files);
    for (int i = 0; i < n; i++) {
        *read += check_file(dir, names[i]);
        if (names[i][0] == 'i') {
            check_twin(dir, names[i]);
            ++*twins;
        }
        free(names[i]);
    }
    free(names);
}

int main(void)
{
    int read = 0, twins = 0;
    run_dir(SUITE, 50, &read, &twins);
    run_dir(SUITE "/interlaced", 9, &read, &twins);
    printf("png_conformance: %d files read and matched, %d interlaced twins compared\n", read,
           twins);
    return pf_test_done("png_conformance");
}
