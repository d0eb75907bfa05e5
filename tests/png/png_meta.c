/* tests/png/png_meta.c: metadata chunks carried from a PNG to the PNG written from it
 * (pf_png_read_meta, pf_png_write_meta). A source made with libpng carries gAMA, cHRM,
 * iCCP, sBIT, pHYs and a tEXt before and after the image data; the copy written from
 * the same frame keeps them all, byte for byte, where libpng itself reads them back;
 * a smaller frame drops pHYs, a gray one iCCP and sBIT, a 16-bit one sBIT; plain
 * pf_png_write and pf_png_read keep none.
 */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

static const unsigned char fake_profile[] = "prof\0\0x\x9c not a real profile, copied raw";

/* A 16x12 RGB8 file with every metadata chunk. 0 on success. */
static int make_source(const char *path)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, info ? &info : NULL);
        fclose(fp);
        return -1;
    }
    png_init_io(png, fp);
    png_set_IHDR(png, info, 16, 12, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_gAMA_fixed(png, info, 45455);
    png_set_cHRM_fixed(png, info, 31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000);
    png_color_8 sbit = {.red = 5, .green = 6, .blue = 5};
    png_set_sBIT(png, info, &sbit);
    png_set_pHYs(png, info, 2835, 2835, PNG_RESOLUTION_METER);
    png_text t1 = {.compression = PNG_TEXT_COMPRESSION_NONE, .key = "Title", .text = "gravel"};
    png_set_text(png, info, &t1, 1);
    png_unknown_chunk icc;
    memset(&icc, 0, sizeof icc);
    memcpy(icc.name, "iCCP", 5);
    icc.data = (png_byte *)fake_profile;
    icc.size = sizeof fake_profile;
    icc.location = PNG_HAVE_IHDR;
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, (png_const_bytep) "iCCP", 1);
    png_set_unknown_chunks(png, info, &icc, 1);
    png_write_info(png, info);
    png_byte row[16 * 3];
    for (int y = 0; y < 12; y++) {
        for (int i = 0; i < 16 * 3; i++)
            row[i] = (png_byte)(y * 16 + i);
        png_write_row(png, row);
    }
    png_text t2 = {.compression = PNG_TEXT_COMPRESSION_NONE, .key = "Comment", .text = "after"};
    png_set_text(png, info, &t2, 1);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return fclose(fp);
}

static pf_png_meta *read_meta(const char *path, pf_frame *f)
{
    char err[512];
    pf_png_meta *m = NULL;
    int rc = pf_png_read_meta(path, 0, f, NULL, &m, err, sizeof err);
    CHECKF(rc == PF_OK && m, "%s", err);
    return m;
}

/* Whether m holds a chunk of type t with the same bytes as in ref (or any, ref NULL). */
static int has(const pf_png_meta *m, const char *t, const pf_png_meta *ref)
{
    for (int i = 0; i < pf_png_meta_count(m); i++) {
        const void *d;
        size_t n;
        if (strcmp(pf_png_meta_chunk(m, i, &d, &n), t) != 0)
            continue;
        if (!ref)
            return 1;
        for (int j = 0; j < pf_png_meta_count(ref); j++) {
            const void *rd;
            size_t rn;
            if (!strcmp(pf_png_meta_chunk(ref, j, &rd, &rn), t) && rn == n && !memcmp(rd, d, n))
                return 1;
        }
    }
    return 0;
}

/* libpng's own reading of the copy: the values, not just the bytes. */
static void check_with_libpng(const char *path)
{
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    if (!fp)
        return;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        CHECKF(0, "%s: libpng cannot read it", path);
        png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        fclose(fp);
        return;
    }
    png_init_io(png, fp);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, (png_const_bytep) "iCCP", 1);
    png_read_png(png, info, PNG_TRANSFORM_IDENTITY, NULL); /* through IEND, into info */
    png_fixed_point g = 0, wx = 0;
    CHECK(png_get_gAMA_fixed(png, info, &g) && g == 45455);
    CHECK(png_get_cHRM_fixed(png, info, &wx, NULL, NULL, NULL, NULL, NULL, NULL, NULL) &&
          wx == 31270);
    png_uint_32 rx = 0, ry = 0;
    int unit = -1;
    CHECK(png_get_pHYs(png, info, &rx, &ry, &unit) && rx == 2835 && ry == 2835 &&
          unit == PNG_RESOLUTION_METER);
    png_color_8p sbit = NULL;
    CHECK(png_get_sBIT(png, info, &sbit) && sbit->red == 5 && sbit->green == 6);
    png_textp text = NULL;
    int n = png_get_text(png, info, &text, NULL);
    CHECKF(n == 2 && !strcmp(text[0].key, "Title") && !strcmp(text[1].key, "Comment"),
           "%d text chunks", n);
    png_unknown_chunkp unk = NULL;
    int nu = png_get_unknown_chunks(png, info, &unk);
    CHECK(nu == 1 && unk[0].size == sizeof fake_profile &&
          !memcmp(unk[0].data, fake_profile, sizeof fake_profile));
    png_destroy_read_struct(&png, &info, NULL);
    fclose(fp);
}

int main(void)
{
    const char *dir = pf_test_tmpdir("png_meta");
    char src[1024], dst[1024], err[512];
    snprintf(src, sizeof src, "%s/src.png", dir);
    snprintf(dst, sizeof dst, "%s/dst.png", dir);
    CHECK(make_source(src) == 0);

    pf_frame f, g;
    pf_png_meta *m = read_meta(src, &f);
    if (!m)
        return pf_test_done("png_meta");
    static const char *const all[] = {"gAMA", "cHRM", "iCCP", "sBIT", "pHYs", "tEXt"};
    for (int i = 0; i < 6; i++)
        CHECKF(has(m, all[i], NULL), "the source's %s was not kept", all[i]);
    CHECK(pf_png_meta_count(m) == 7); /* two tEXt */

    /* The same frame: everything, byte for byte, and libpng reads the values back. */
    CHECK(pf_png_write_meta(dst, &f, -1, m, err, sizeof err) == PF_OK);
    pf_png_meta *c = read_meta(dst, &g);
    CHECK(pf_png_meta_count(c) == 7);
    for (int i = 0; i < 6; i++)
        CHECKF(has(c, all[i], m), "%s not copied byte for byte", all[i]);
    pf_png_meta_free(c);
    pf_frame_free(&g);
    check_with_libpng(dst);

    /* A smaller frame: pHYs no longer applies. */
    pf_frame small = f;
    small.width = 8;
    CHECK(pf_png_write_meta(dst, &small, -1, m, err, sizeof err) == PF_OK);
    c = read_meta(dst, &g);
    CHECK(!has(c, "pHYs", NULL) && has(c, "gAMA", m) && has(c, "iCCP", m) && has(c, "sBIT", m));
    pf_png_meta_free(c);
    pf_frame_free(&g);

    /* Gray: the RGB profile and the RGB sBIT go; gAMA and the text stay. */
    pf_frame gray;
    CHECK(pf_frame_alloc(&gray, 16, 12, PF_U8, 1) == PF_OK);
    memset(gray.data, 128, gray.pitch * 12);
    CHECK(pf_png_write_meta(dst, &gray, -1, m, err, sizeof err) == PF_OK);
    c = read_meta(dst, &g);
    CHECK(!has(c, "iCCP", NULL) && !has(c, "sBIT", NULL) && has(c, "gAMA", m) &&
          has(c, "pHYs", m) && has(c, "tEXt", m));
    pf_png_meta_free(c);
    pf_frame_free(&g);
    pf_frame_free(&gray);

    /* 16-bit RGB: the 8-bit sBIT goes. */
    pf_frame deep;
    CHECK(pf_frame_alloc(&deep, 16, 12, PF_U16, 3) == PF_OK);
    memset(deep.data, 7, deep.pitch * 12);
    CHECK(pf_png_write_meta(dst, &deep, -1, m, err, sizeof err) == PF_OK);
    c = read_meta(dst, &g);
    CHECK(!has(c, "sBIT", NULL) && has(c, "iCCP", m) && has(c, "cHRM", m));
    pf_png_meta_free(c);
    pf_frame_free(&g);
    pf_frame_free(&deep);

    /* Without meta: none written; plain reading keeps none either. */
    CHECK(pf_png_write(dst, &f, -1, err, sizeof err) == PF_OK);
    c = read_meta(dst, &g);
    CHECK(pf_png_meta_count(c) == 0);
    pf_png_meta_free(c);
    pf_frame_free(&g);
    CHECK(pf_png_write_meta(dst, &f, -1, NULL, err, sizeof err) == PF_OK);
    CHECK(pf_png_read_meta(src, 0, &g, NULL, NULL, err, sizeof err) == PF_INVALID_ARGUMENT);

    pf_png_meta_free(m);
    pf_png_meta_free(NULL);
    pf_frame_free(&f);
    return pf_test_done("png_meta");
}
