/* tests/png/png_roundtrip.c: every writable format (u8/u16 x 1-4 channels), odd sizes
 * and several zlib levels, written and read back (from the file and from memory): the
 * same format and the same pixels. Also the byte order on disk (PNG is big-endian
 * whatever the host), which a round trip alone cannot see, and frames whose pitch is
 * not the library's own.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, link, dirent, rlimit under -std=c11 */
#include <png.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

/* Random samples; a few pixels pinned to 0 and max so the extremes are always seen. */
static void fill_random(pf_frame *f, pf_rng *r)
{
    pf_test_frame_random(r, f);
    /* The first pixel all zeros, the last all max. */
    char *last = (char *)f->data + (size_t)(f->height - 1) * f->pitch;
    size_t at = (size_t)(f->width - 1) * f->channels;
    for (int c = 0; c < f->channels; c++) {
        if (f->sample == PF_U16) {
            ((uint16_t *)f->data)[c] = 0;
            ((uint16_t *)last)[at + c] = 65535;
        } else {
            ((uint8_t *)f->data)[c] = 0;
            ((uint8_t *)last)[at + c] = 255;
        }
    }
}

static int n_trips;

static void round_trip(const char *dir, const pf_frame *f, int level)
{
    static const int ctype[] = {0, 4, 2, 6};
    char path[4096], err[512] = "", label[128];
    snprintf(label, sizeof label, "%dx%d %s x%d level %d", f->width, f->height,
             f->sample == PF_U16 ? "u16" : "u8", f->channels, level);
    snprintf(path, sizeof path, "%s/rt_%dx%d_%d_%d_%d.png", dir, f->width, f->height,
             (int)f->sample, f->channels, level);

    int st = pf_png_write(path, f, level, err, sizeof err);
    CHECKF(st == PF_OK, "%s: write: %s: %s", label, pf_status_name(st), err);
    if (st != PF_OK)
        return;

    pf_frame back;
    pf_png_info info;
    st = pf_png_read(path, 0, &back, &info, err, sizeof err);
    CHECKF(st == PF_OK, "%s: read: %s: %s", label, pf_status_name(st), err);
    if (st == PF_OK) {
        long d = pf_test_frame_mismatches(f, &back);
        CHECKF(d == 0, "%s: %ld samples differ (-1: format %dx%d u%d x%d)", label, d, back.width,
               back.height, back.sample == PF_U16 ? 16 : 8, back.channels);
        CHECKF(info.width == f->width && info.height == f->height &&
                   info.bit_depth == (f->sample == PF_U16 ? 16 : 8) &&
                   info.color_type == ctype[f->channels - 1] && info.interlaced == 0,
               "%s: header %dx%d depth %d type %d interlaced %d", label, info.width, info.height,
               info.bit_depth, info.color_type, info.interlaced);
    }
    pf_frame_free(&back);

    size_t size = 0;
    void *buf = pf_test_read_file(path, &size);
    st = pf_png_read_memory(buf, size, path, 0, &back, NULL, err, sizeof err);
    CHECKF(st == PF_OK && pf_test_frame_mismatches(f, &back) == 0, "%s: memory read: %s", label,
           err);
    pf_frame_free(&back);
    free(buf);
    remove(path);
    n_trips++;
}

/* A 16-bit sample 0x1234 must be stored as the bytes 12 34, read raw by libpng. */
static void check_byte_order(const char *dir)
{
    char path[4096], err[512] = "";
    snprintf(path, sizeof path, "%s/order.png", dir);
    pf_frame f;
    CHECK(pf_frame_alloc(&f, 2, 1, PF_U16, 1) == PF_OK);
    ((uint16_t *)f.data)[0] = 0x1234;
    ((uint16_t *)f.data)[1] = 0xfe01;
    CHECKF(pf_png_write(path, &f, 0, err, sizeof err) == PF_OK, "%s", err);
    pf_frame_free(&f);

    FILE *fp = fopen(path, "rb");
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (!fp || setjmp(png_jmpbuf(png))) {
        CHECKF(0, "%s: libpng could not read it", path);
    } else {
        png_init_io(png, fp);
        png_read_png(png, info, PNG_TRANSFORM_IDENTITY, NULL);
        png_bytepp rows = png_get_rows(png, info);
        CHECKF(png_get_bit_depth(png, info) == 16 && rows[0][0] == 0x12 && rows[0][1] == 0x34 &&
                   rows[0][2] == 0xfe && rows[0][3] == 0x01,
               "16-bit samples stored as %02x %02x %02x %02x", rows[0][0], rows[0][1], rows[0][2],
               rows[0][3]);
    }
    png_destroy_read_struct(&png, &info, NULL);
    if (fp)
        fclose(fp);
}

int main(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", pf_test_tmpdir("png_roundtrip"));
    pf_rng rng;
    pf_rng_seed(&rng, 20240611);

    static const int sizes[][2] = {{1, 1}, {7, 3}, {3, 7}, {1, 33}, {64, 1}, {257, 129}};
    static const int levels[] = {-1, 0, 1, 6, 9};
    for (int s = 0; s < 2; s++) {
        for (int ch = 1; ch <= 4; ch++) {
            for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
                pf_frame f;
                int st = pf_frame_alloc(&f, sizes[z][0], sizes[z][1], s ? PF_U16 : PF_U8, ch);
                CHECK(st == PF_OK);
                if (st != PF_OK)
                    continue;
                fill_random(&f, &rng);
                for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++)
                    round_trip(dir, &f, levels[l]);
                pf_frame_free(&f);
            }
        }
    }

    /* A caller's frame: odd pitch, rows not 16-byte aligned, garbage in the padding. */
    for (int s = 0; s < 2; s++) {
        for (int ch = 1; ch <= 4; ch++) {
            size_t bpp = pf_frame_pixel_bytes(s ? PF_U16 : PF_U8, ch);
            pf_frame f = {0};
            f.width = 13;
            f.height = 5;
            f.sample = s ? PF_U16 : PF_U8;
            f.channels = ch;
            f.pitch = 13 * bpp + (s ? 6 : 3);
            unsigned char *mem = malloc(f.pitch * 5 + 2);
            for (size_t i = 0; i < f.pitch * 5 + 2; i++)
                mem[i] = (unsigned char)pf_rng_u32(&rng);
            f.data = mem + (s ? 2 : 1);
            round_trip(dir, &f, 6);
            free(mem);
        }
    }

    check_byte_order(dir);
    printf("png_roundtrip: %d round trips\n", n_trips);
    return pf_test_done("png_roundtrip");
}
