/* tests/jpeg/jpeg_codec.c: the JPEG reader and writer (engine/jpeg.c) on files made by
 * libjpeg directly (jpeg_make.c).
 *
 * - every kind of file (gray; YCbCr 4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1; RGB; progressive;
 *   restart markers; arithmetic coding; CMYK and YCCK) reads to exactly libjpeg's own
 *   decode (CMYK by the stated rule from libjpeg's CMYK), with the header facts in info;
 * - reading by rows, in uneven batches, gives the whole read's rows;
 * - EXIF orientations 1-8: the frame is the stored image turned as the tag says, the
 *   kept EXIF says 1, keep_orientation gives the rows as stored; rows refuse 3-8;
 * - the ICC profile (multi-segment) and EXIF survive a write and read; a profile of the
 *   wrong colour kind is not written;
 * - writing: gray stays gray; the subsampling, progressive and optimise options show in
 *   the file; quality 100 4:4:4 is within 1.5 steps of the frame on a smooth image; u16,
 *   f32 and alpha frames give the same bytes as their stated 8-bit conversion; the
 *   defaults are quality 85 4:2:0; memory and file encodes agree; a full disk is PF_IO
 *   naming the cause, with no file left.
 */
#define _GNU_SOURCE
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jpeg_make.h"
#include "pipefuse/jpeg.h"
#include "testutil.h"

static char dir[1024];

static int frame_equals(const pf_frame *f, const unsigned char *px, int w, int h, int ch)
{
    if (f->width != w || f->height != h || f->channels != ch || f->sample != PF_U8)
        return 0;
    for (int y = 0; y < h; y++)
        if (memcmp((const unsigned char *)f->data + (size_t)y * f->pitch, px + (size_t)y * w * ch,
                   (size_t)w * ch) != 0)
            return 0;
    return 1;
}

static void cmyk_rule(const unsigned char *in, unsigned char *out, size_t n)
{
    for (size_t i = 0; i < n; i++, in += 4, out += 3)
        for (int c = 0; c < 3; c++) /* Adobe CMYK: inverted inks */
            out[c] = (unsigned char)((in[c] * in[3] + 127) / 255);
}

static void test_kinds(void)
{
    static const struct {
        const char *name;
        jm_opts o;
        int ch, hs, vs, space;
    } kinds[] = {
        {"gray", {.w = 37, .h = 21, .space = 1}, 1, 1, 1, PF_JPEG_GRAY},
        {"444", {.w = 37, .h = 21, .space = 3, .hs = 1, .vs = 1}, 3, 1, 1, PF_JPEG_YCBCR},
        {"422", {.w = 37, .h = 21, .space = 3, .hs = 2, .vs = 1}, 3, 2, 1, PF_JPEG_YCBCR},
        {"420", {.w = 37, .h = 21, .space = 3, .hs = 2, .vs = 2}, 3, 2, 2, PF_JPEG_YCBCR},
        {"440", {.w = 37, .h = 21, .space = 3, .hs = 1, .vs = 2}, 3, 1, 2, PF_JPEG_YCBCR},
        {"411", {.w = 37, .h = 21, .space = 3, .hs = 4, .vs = 1}, 3, 4, 1, PF_JPEG_YCBCR},
        {"rgb", {.w = 30, .h = 17, .space = 6}, 3, 1, 1, PF_JPEG_RGB},
        {"progressive", {.w = 53, .h = 40, .space = 3, .progressive = 1}, 3, 2, 2, PF_JPEG_YCBCR},
        {"progressive gray",
         {.w = 53, .h = 40, .space = 1, .progressive = 1},
         1,
         1,
         1,
         PF_JPEG_GRAY},
        {"restart", {.w = 64, .h = 70, .space = 3, .restart_rows = 1}, 3, 2, 2, PF_JPEG_YCBCR},
        {"arithmetic", {.w = 40, .h = 33, .space = 3, .arith = 1}, 3, 2, 2, PF_JPEG_YCBCR},
        {"arith progressive",
         {.w = 40, .h = 33, .space = 3, .arith = 1, .progressive = 1},
         3,
         2,
         2,
         PF_JPEG_YCBCR},
        {"cmyk", {.w = 29, .h = 19, .space = 4}, 3, 1, 1, PF_JPEG_CMYK},
        {"ycck", {.w = 29, .h = 19, .space = 5, .hs = 2, .vs = 2}, 3, 1, 1, PF_JPEG_YCCK},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        jm_opts o = kinds[k].o;
        o.seed = (unsigned)k + 1;
        size_t size;
        unsigned char *jpg = jm_make(&o, &size);
        int w, h, ch;
        unsigned char *ref = jm_decode(jpg, size, &w, &h, &ch);
        CHECKF(ref != NULL, "%s: libjpeg cannot decode its own file", kinds[k].name);
        if (!ref) {
            free(jpg);
            continue;
        }
        if (ch == 4) {
            unsigned char *rgb = malloc((size_t)w * h * 3);
            cmyk_rule(ref, rgb, (size_t)w * h);
            free(ref);
            ref = rgb;
            ch = 3;
        }
        pf_frame f;
        pf_jpeg_info info;
        char err[512];
        int st =
            pf_jpeg_read_memory(jpg, size, kinds[k].name, NULL, &f, &info, NULL, err, sizeof err);
        CHECKF(st == PF_OK, "%s: %s", kinds[k].name, err);
        if (st == PF_OK) {
            CHECKF(frame_equals(&f, ref, w, h, ch), "%s: pixels differ from libjpeg's",
                   kinds[k].name);
            CHECKF(info.color_space == kinds[k].space, "%s: colour space %d", kinds[k].name,
                   info.color_space);
            CHECKF(info.precision == 8 && info.progressive == o.progressive &&
                       info.arithmetic == o.arith &&
                       (info.restart_interval > 0) == (o.restart_rows > 0),
                   "%s: info %d %d %d %d", kinds[k].name, info.precision, info.progressive,
                   info.arithmetic, info.restart_interval);
            if (kinds[k].space == PF_JPEG_YCBCR || kinds[k].space == PF_JPEG_GRAY)
                CHECKF(info.h_samp == kinds[k].hs && info.v_samp == kinds[k].vs,
                       "%s: sampling %dx%d", kinds[k].name, info.h_samp, info.v_samp);
            CHECK(info.width == o.w && info.height == o.h && info.orientation == 1);
        }
        /* by rows, 1, 2, 3... at a time, from a file */
        char path[1200];
        snprintf(path, sizeof path, "%s/kind%zu.jpg", dir, k);
        pf_test_write_file(path, jpg, size);
        pf_jpeg_rows *r;
        pf_frame fmt, rows = {0};
        st = pf_jpeg_rows_open(path, NULL, &r, &fmt, NULL, NULL, err, sizeof err);
        CHECKF(st == PF_OK, "%s rows: %s", kinds[k].name, err);
        if (st == PF_OK) {
            CHECK(pf_frame_alloc(&rows, fmt.width, fmt.height, fmt.sample, fmt.channels) == PF_OK);
            for (int y = 0, n = 1; y < fmt.height && st == PF_OK; y += n, n++) {
                if (n > fmt.height - y)
                    n = fmt.height - y;
                pf_frame dst = rows;
                dst.data = (unsigned char *)rows.data + (size_t)y * rows.pitch;
                st = pf_jpeg_rows_read(r, &dst, n, err, sizeof err);
                CHECKF(st == PF_OK, "%s rows at %d: %s", kinds[k].name, y, err);
            }
            CHECK(pf_jpeg_rows_done(r) == fmt.height);
            pf_frame none = rows; /* nothing more to read: 0 rows is no error, 1 is */
            CHECK(pf_jpeg_rows_read(r, &none, 0, err, sizeof err) == PF_OK);
            CHECK(pf_jpeg_rows_read(r, &none, 1, err, sizeof err) == PF_INVALID_ARGUMENT);
            CHECKF(frame_equals(&rows, ref, w, h, ch), "%s: rows differ", kinds[k].name);
            pf_frame_free(&rows);
            pf_jpeg_rows_close(r);
        }
        pf_frame_free(&f);
        free(ref);
        free(jpg);
    }
}

static void test_orientation(void)
{
    const int W = 13, H = 7;
    for (int o = 1; o <= 8; o++) {
        jm_opts jo = {.w = W, .h = H, .space = 3, .hs = 1, .vs = 1, .orientation = o, .seed = 7};
        size_t size;
        unsigned char *jpg = jm_make(&jo, &size);
        char err[512];
        pf_frame stored, shown;
        pf_jpeg_info info;
        pf_jpeg_meta *meta = NULL;
        pf_jpeg_read_opts keep = {sizeof keep, 0, 0, 1};
        CHECK(pf_jpeg_read_memory(jpg, size, "o", &keep, &stored, &info, NULL, err, sizeof err) ==
              PF_OK);
        CHECK(stored.width == W && stored.height == H && info.orientation == o && !info.applied);
        int st = pf_jpeg_read_memory(jpg, size, "o", NULL, &shown, &info, &meta, err, sizeof err);
        CHECKF(st == PF_OK, "orientation %d: %s", o, err);
        if (st != PF_OK) {
            pf_frame_free(&stored);
            free(jpg);
            continue;
        }
        int turn = o >= 5;
        CHECK(shown.width == (turn ? H : W) && shown.height == (turn ? W : H));
        CHECK(info.width == shown.width && info.stored_width == W && info.applied == (o > 1));
        /* where display pixel (x, y) comes from, written out per the EXIF definitions */
        int bad = 0;
        for (int y = 0; y < shown.height; y++)
            for (int x = 0; x < shown.width; x++) {
                int sx = x, sy = y;
                if (o == 2)
                    sx = W - 1 - x;
                if (o == 3)
                    sx = W - 1 - x, sy = H - 1 - y;
                if (o == 4)
                    sy = H - 1 - y;
                if (o == 5)
                    sx = y, sy = x;
                if (o == 6)
                    sx = y, sy = H - 1 - x; /* stored row 0 is the right column */
                if (o == 7)
                    sx = W - 1 - y, sy = H - 1 - x;
                if (o == 8)
                    sx = W - 1 - y, sy = x; /* stored row 0 is the left column */
                bad += memcmp((unsigned char *)shown.data + (size_t)y * shown.pitch + x * 3,
                              (unsigned char *)stored.data + (size_t)sy * stored.pitch + sx * 3,
                              3) != 0;
            }
        CHECKF(bad == 0, "orientation %d: %d pixels misplaced", o, bad);
        const void *exif;
        size_t exif_size;
        CHECK(pf_jpeg_meta_exif(meta, &exif, &exif_size) == 1);
        /* the kept EXIF: orientation 1 (entry value at TIFF offset 8 + 2 + 8) */
        CHECKF(exif_size >= 20 && ((const unsigned char *)exif)[18] == 1,
               "orientation %d: the kept EXIF still says %d", o,
               exif_size >= 20 ? ((const unsigned char *)exif)[18] : -1);
        /* rows: in order for 1 and 2, refused for the rest */
        char path[1200];
        snprintf(path, sizeof path, "%s/orient%d.jpg", dir, o);
        pf_test_write_file(path, jpg, size);
        pf_jpeg_rows *r = NULL;
        pf_frame fmt;
        st = pf_jpeg_rows_open(path, NULL, &r, &fmt, NULL, NULL, err, sizeof err);
        if (o <= 2) {
            CHECKF(st == PF_OK, "orientation %d rows: %s", o, err);
            pf_frame rows;
            if (st == PF_OK && pf_frame_alloc(&rows, fmt.width, fmt.height, PF_U8, 3) == PF_OK) {
                CHECK(pf_jpeg_rows_read(r, &rows, fmt.height, err, sizeof err) == PF_OK);
                CHECK(pf_test_frame_mismatches(&rows, &shown) == 0);
                pf_frame_free(&rows);
            }
        } else {
            CHECKF(st == PF_UNSUPPORTED && strstr(err, "orientation") && strstr(err, path),
                   "orientation %d rows: %s", o, err);
        }
        pf_jpeg_rows_close(r);
        pf_jpeg_meta_free(meta);
        pf_frame_free(&stored);
        pf_frame_free(&shown);
        free(jpg);
    }
}

static unsigned char *fake_icc(size_t n, const char *space)
{
    unsigned char *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + 7);
    p[0] = (unsigned char)(n >> 24), p[1] = (unsigned char)(n >> 16);
    p[2] = (unsigned char)(n >> 8), p[3] = (unsigned char)n;
    memcpy(p + 16, space, 4);
    memcpy(p + 36, "acsp", 4);
    return p;
}

static void test_meta(void)
{
    char err[512], path[1200];
    size_t n = 150000; /* three APP2 segments */
    unsigned char *icc = fake_icc(n, "RGB ");
    static const unsigned char exif[] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0,
                                         3,   0,   0, 0,  1, 0, 6, 0, 0, 0, 0,    0,    0};
    pf_jpeg_meta *m = NULL, *back = NULL;
    CHECK(pf_jpeg_meta_new(icc, n, exif, sizeof exif, &m, err, sizeof err) == PF_OK);
    CHECK(pf_jpeg_meta_new(NULL, 0, "nonsense", 8, &back, err, sizeof err) == PF_INVALID_ARGUMENT &&
          strstr(err, "TIFF"));
    CHECK(strcmp(pf_jpeg_meta_icc_space(m), "RGB ") == 0);
    pf_frame f, g;
    pf_rng rng;
    pf_rng_seed(&rng, 5);
    CHECK(pf_frame_alloc(&f, 24, 16, PF_U8, 3) == PF_OK);
    pf_test_frame_random(&rng, &f);
    snprintf(path, sizeof path, "%s/meta.jpg", dir);
    CHECKF(pf_jpeg_write(path, &f, NULL, m, err, sizeof err) == PF_OK, "%s", err);
    pf_jpeg_info info;
    CHECK(pf_jpeg_read(path, NULL, &g, &info, &back, err, sizeof err) == PF_OK);
    const void *d;
    size_t s;
    CHECK(pf_jpeg_meta_icc(back, &d, &s) == 1 && s == n && memcmp(d, icc, n) == 0);
    /* orientation 6 applied: width and height swap, the EXIF kept says 1 (big-endian) */
    CHECK(info.orientation == 6 && g.width == 16 && g.height == 24);
    CHECK(pf_jpeg_meta_exif(back, &d, &s) == 1 && s == sizeof exif &&
          ((const unsigned char *)d)[19] == 1 && memcmp(d, exif, 18) == 0);
    pf_frame_free(&g);
    pf_jpeg_meta_free(back);
    /* a gray frame: the RGB profile does not describe it and is left out */
    pf_frame gray;
    CHECK(pf_frame_alloc(&gray, 24, 16, PF_U8, 1) == PF_OK);
    pf_test_frame_random(&rng, &gray);
    CHECK(pf_jpeg_write(path, &gray, NULL, m, err, sizeof err) == PF_OK);
    CHECK(pf_jpeg_read(path, NULL, &g, &info, &back, err, sizeof err) == PF_OK);
    CHECK(!pf_jpeg_meta_icc(back, NULL, NULL) && pf_jpeg_meta_exif(back, NULL, NULL) == 1);
    CHECK(info.components == 1 && g.channels == 1);
    pf_frame_free(&g);
    pf_jpeg_meta_free(back);
    pf_frame_free(&gray);
    pf_frame_free(&f);
    pf_jpeg_meta_free(m);
    free(icc);
}

static int same_file_bytes(const pf_frame *a, const pf_frame *b, const pf_jpeg_write_opts *o)
{
    void *x, *y;
    size_t nx, ny;
    char err[256];
    if (pf_jpeg_encode(a, o, NULL, &x, &nx, err, sizeof err) != PF_OK)
        return 0;
    if (pf_jpeg_encode(b, o, NULL, &y, &ny, err, sizeof err) != PF_OK) {
        free(x);
        return 0;
    }
    int same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

static void test_write(void)
{
    char err[512], path[1200];
    const int W = 45, H = 31;
    pf_frame rgb, back;
    CHECK(pf_frame_alloc(&rgb, W, H, PF_U8, 3) == PF_OK);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                ((unsigned char *)rgb.data)[(size_t)y * rgb.pitch + x * 3 + c] =
                    (unsigned char)(40 + x * 3 + y * 2 + c * 20);
    /* quality 100 4:4:4 of a smooth image: within 4 steps (colour conversion and the
       DCT's rounding), 1 on average */
    pf_jpeg_write_opts hi = {sizeof hi, 100, PF_JPEG_444, 0, 0};
    void *buf;
    size_t n;
    CHECK(pf_jpeg_encode(&rgb, &hi, NULL, &buf, &n, err, sizeof err) == PF_OK);
    pf_jpeg_info info;
    CHECK(pf_jpeg_read_memory(buf, n, "hi", NULL, &back, &info, NULL, err, sizeof err) == PF_OK);
    double diff = pf_test_frame_diff(&rgb, &back, NULL, NULL), sum = 0;
    for (int y = 0; y < H; y++)
        for (int i = 0; i < W * 3; i++)
            sum += abs(((unsigned char *)rgb.data)[y * rgb.pitch + i] -
                       ((unsigned char *)back.data)[y * back.pitch + i]);
    CHECKF(diff <= 4 && sum / (W * H * 3) <= 1, "quality 100 4:4:4: %.1f steps off, %.2f mean",
           diff, sum / (W * H * 3));
    CHECK(info.h_samp == 1 && info.v_samp == 1 && !info.progressive);
    pf_frame_free(&back);
    /* the file and memory encodes are the same bytes */
    snprintf(path, sizeof path, "%s/w.jpg", dir);
    CHECK(pf_jpeg_write(path, &rgb, &hi, NULL, err, sizeof err) == PF_OK);
    size_t fn;
    void *file = pf_test_read_file(path, &fn);
    CHECK(file && fn == n && memcmp(file, buf, n) == 0);
    free(file);
    free(buf);
    struct stat st;
    mode_t um = umask(0);
    umask(um);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == (0666 & ~um));
    /* subsampling, progressive, optimise */
    static const int hs[4] = {2, 2, 1, 1}, vs[4] = {2, 1, 1, 2};
    size_t plain = 0;
    for (int s = 0; s < 4; s++) {
        pf_jpeg_write_opts o = {sizeof o, 90, s, s == 1, 0};
        CHECK(pf_jpeg_encode(&rgb, &o, NULL, &buf, &n, err, sizeof err) == PF_OK);
        CHECK(pf_jpeg_read_memory(buf, n, "s", NULL, &back, &info, NULL, err, sizeof err) == PF_OK);
        CHECKF(info.h_samp == hs[s] && info.v_samp == vs[s] && info.progressive == (s == 1),
               "subsampling %d: %dx%d progressive %d", s, info.h_samp, info.v_samp,
               info.progressive);
        if (s == 0)
            plain = n;
        pf_frame_free(&back);
        free(buf);
    }
    pf_jpeg_write_opts opt = {sizeof opt, 90, PF_JPEG_420, 0, 1};
    CHECK(pf_jpeg_encode(&rgb, &opt, NULL, &buf, &n, err, sizeof err) == PF_OK);
    CHECKF(n < plain, "optimised Huffman tables: %zu bytes, not under %zu", n, plain);
    free(buf);
    /* defaults: quality 85, 4:2:0, and NULL opts the same as zeroed ones */
    pf_jpeg_write_opts d85 = {sizeof d85, 85, PF_JPEG_420, 0, 0}, zero = {0};
    pf_frame tmp = rgb;
    CHECK(same_file_bytes(&rgb, &tmp, &d85));
    void *a, *b;
    size_t na, nb;
    CHECK(pf_jpeg_encode(&rgb, NULL, NULL, &a, &na, err, sizeof err) == PF_OK);
    CHECK(pf_jpeg_encode(&rgb, &d85, NULL, &b, &nb, err, sizeof err) == PF_OK);
    CHECK(na == nb && memcmp(a, b, na) == 0);
    free(b);
    CHECK(pf_jpeg_encode(&rgb, &zero, NULL, &b, &nb, err, sizeof err) == PF_OK);
    CHECK(na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    /* u16 and f32 frames: the same bytes as their 8-bit conversions */
    pf_frame u16, f32, rgba, ga, gray8;
    CHECK(pf_frame_alloc(&u16, W, H, PF_U16, 3) == PF_OK);
    CHECK(pf_frame_alloc(&f32, W, H, PF_F32, 3) == PF_OK);
    pf_rng rng;
    pf_rng_seed(&rng, 9);
    pf_test_frame_random(&rng, &u16);
    pf_test_frame_random(&rng, &f32);
    pf_frame u8a, u8b;
    CHECK(pf_frame_alloc(&u8a, W, H, PF_U8, 3) == PF_OK);
    CHECK(pf_frame_alloc(&u8b, W, H, PF_U8, 3) == PF_OK);
    for (int y = 0; y < H; y++)
        for (int i = 0; i < W * 3; i++) {
            uint16_t v = ((uint16_t *)((char *)u16.data + y * u16.pitch))[i];
            ((unsigned char *)u8a.data)[y * u8a.pitch + i] =
                (unsigned char)(((unsigned)v * 255u + 32767u) / 65535u);
            float fv = ((float *)((char *)f32.data + y * f32.pitch))[i];
            ((unsigned char *)u8b.data)[y * u8b.pitch + i] = (unsigned char)(fv * 255.0f + 0.5f);
        }
    CHECK(same_file_bytes(&u16, &u8a, NULL));
    CHECK(same_file_bytes(&f32, &u8b, NULL));
    /* alpha: composited onto white; gray+alpha stays gray */
    CHECK(pf_frame_alloc(&rgba, W, H, PF_U8, 4) == PF_OK);
    CHECK(pf_frame_alloc(&ga, W, H, PF_U8, 2) == PF_OK);
    CHECK(pf_frame_alloc(&gray8, W, H, PF_U8, 1) == PF_OK);
    pf_test_frame_random(&rng, &rgba);
    pf_test_frame_random(&rng, &ga);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            unsigned char *p = (unsigned char *)rgba.data + y * rgba.pitch + x * 4;
            unsigned char *q = (unsigned char *)u8a.data + y * u8a.pitch + x * 3;
            for (int c = 0; c < 3; c++)
                q[c] = (unsigned char)((p[c] * p[3] + 255 * (255 - p[3]) + 127) / 255);
            unsigned char *g2 = (unsigned char *)ga.data + y * ga.pitch + x * 2;
            ((unsigned char *)gray8.data)[y * gray8.pitch + x] =
                (unsigned char)((g2[0] * g2[1] + 255 * (255 - g2[1]) + 127) / 255);
        }
    CHECK(same_file_bytes(&rgba, &u8a, NULL));
    CHECK(same_file_bytes(&ga, &gray8, NULL));
    CHECK(pf_jpeg_encode(&ga, NULL, NULL, &buf, &n, err, sizeof err) == PF_OK);
    CHECK(pf_jpeg_read_memory(buf, n, "ga", NULL, &back, &info, NULL, err, sizeof err) == PF_OK);
    CHECK(info.components == 1 && info.color_space == PF_JPEG_GRAY && back.channels == 1);
    pf_frame_free(&back);
    free(buf);
    /* invalid: quality 101, 5 channels, a side over 65500; nothing created */
    pf_jpeg_write_opts q101 = {sizeof q101, 101, 0, 0, 0};
    snprintf(path, sizeof path, "%s/invalid.jpg", dir);
    CHECK(pf_jpeg_write(path, &rgb, &q101, NULL, err, sizeof err) == PF_INVALID_ARGUMENT &&
          strstr(err, "quality"));
    pf_frame five = rgb;
    five.channels = 5;
    CHECK(pf_jpeg_write(path, &five, NULL, NULL, err, sizeof err) == PF_INVALID_ARGUMENT);
    pf_frame wide = rgb;
    wide.width = 70000;
    CHECK(pf_jpeg_encode(&wide, NULL, NULL, &buf, &n, err, sizeof err) == PF_INVALID_ARGUMENT &&
          strstr(err, "65500"));
    CHECK(access(path, F_OK) != 0);
    /* a full disk: PF_IO with the cause; the stream writer reports it */
    FILE *full = fopen("/dev/full", "wb");
    if (full) {
        setvbuf(full, NULL, _IONBF, 0);
        pf_jpeg_writer *w;
        int rc = pf_jpeg_writer_begin(full, "/dev/full", &rgb, &hi, NULL, &w, err, sizeof err);
        if (rc == PF_OK)
            rc = pf_jpeg_writer_rows(w, &rgb, H, err, sizeof err);
        if (rc == PF_OK)
            rc = pf_jpeg_writer_finish(w, err, sizeof err);
        else
            pf_jpeg_writer_abort(w);
        CHECKF(rc == PF_IO && strstr(err, "/dev/full") && strstr(err, "No space"), "%s: %s",
               pf_status_name(rc), err);
        fclose(full);
    }
    pf_frame_free(&u16);
    pf_frame_free(&f32);
    pf_frame_free(&u8a);
    pf_frame_free(&u8b);
    pf_frame_free(&rgba);
    pf_frame_free(&ga);
    pf_frame_free(&gray8);
    pf_frame_free(&rgb);
}

int main(void)
{
    if (!pf_jpeg_available()) {
        fprintf(stderr, "jpeg_codec: built without libjpeg\n");
        return PF_TEST_SKIPPED;
    }
    snprintf(dir, sizeof dir, "%s", pf_test_tmpdir("jpeg_codec"));
    test_kinds();
    test_orientation();
    test_meta();
    test_write();
    return pf_test_done("jpeg_codec");
}
