/* tests/png/png_form.c: output forms and pHYs through geometry (pf_png_write_opts,
 * pf_png_pack, pf_png_meta_phys). Each file written is read back twice: by pf_png_read
 * (the same pixels as the frame for every lossless form; the stated rounding for gray
 * bits and the median cut) and by libpng itself (IHDR, PLTE, tRNS as the form says).
 * Sources with a palette and with pHYs of unequal densities are made with libpng.
 */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipefuse/png.h"
#include "testutil.h"

static const char *dir;

static const char *path_of(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* What libpng reads from a file's header: IHDR, PLTE and tRNS. */
typedef struct header {
    int depth, ctype, n_pal, n_trans;
    png_color pal[256];
    unsigned char trans[256];
} header;

static int read_header(const char *path, header *h)
{
    memset(h, 0, sizeof *h);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        fclose(fp);
        return -1;
    }
    png_init_io(png, fp);
    png_read_info(png, info);
    h->depth = png_get_bit_depth(png, info);
    h->ctype = png_get_color_type(png, info);
    png_colorp pal;
    if (png_get_PLTE(png, info, &pal, &h->n_pal))
        memcpy(h->pal, pal, sizeof *pal * (size_t)h->n_pal);
    png_bytep tr;
    if (png_get_valid(png, info, PNG_INFO_tRNS) && png_get_tRNS(png, info, &tr, &h->n_trans, NULL))
        memcpy(h->trans, tr, (size_t)h->n_trans);
    png_destroy_read_struct(&png, &info, NULL);
    fclose(fp);
    return 0;
}

/* Writes f in form (meta, geometry may be NULL); the status. */
static int write_form(const char *name, const pf_frame *f, pf_png_form form,
                      const pf_png_meta *meta, const pf_png_geometry *g, char *err, size_t n)
{
    pf_png_write_options o;
    pf_png_write_options_init(&o);
    o.form = form;
    o.meta = meta;
    o.geometry = g;
    err[0] = 0;
    return pf_png_write_opts(path_of(name), f, &o, err, n);
}

/* Pixel (x, y) of f as RGBA on the 16-bit scale (gray to r = g = b, no alpha opaque). */
static void rgba16(const pf_frame *f, int x, int y, unsigned v[4])
{
    unsigned s[4];
    for (int c = 0; c < f->channels; c++) {
        const char *row = (const char *)f->data + (size_t)y * f->pitch;
        s[c] = f->sample == PF_U16 ? ((const uint16_t *)row)[(size_t)x * f->channels + c]
                                   : 257u * ((const uint8_t *)row)[(size_t)x * f->channels + c];
    }
    const int colour = f->channels >= 3, alpha = f->channels == 2 || f->channels == 4;
    v[0] = s[0], v[1] = s[colour ? 1 : 0], v[2] = s[colour ? 2 : 0];
    v[3] = alpha ? s[f->channels - 1] : 65535u;
}

/* Whether the file reads back as f's pixels, in channels channels (0: any number). */
static int reads_back(const char *name, const pf_frame *f, int channels)
{
    pf_frame g;
    char err[256];
    if (pf_png_read(path_of(name), 0, &g, NULL, err, sizeof err) != PF_OK) {
        fprintf(stderr, "%s: %s\n", name, err);
        return 0;
    }
    int same =
        g.width == f->width && g.height == f->height && (!channels || g.channels == channels);
    if (!same)
        fprintf(stderr, "%s: %dx%d of %d channels\n", name, g.width, g.height, g.channels);
    for (int y = 0; same && y < f->height; y++)
        for (int x = 0; same && x < f->width; x++) {
            unsigned a[4], b[4];
            rgba16(f, x, y, a);
            rgba16(&g, x, y, b);
            same = !memcmp(a, b, sizeof a);
            if (!same)
                fprintf(stderr, "%s: (%d, %d) reads %u %u %u %u, frame %u %u %u %u\n", name, x, y,
                        b[0], b[1], b[2], b[3], a[0], a[1], a[2], a[3]);
        }
    pf_frame_free(&g);
    return same;
}

static pf_frame make(int w, int h, pf_sample s, int c)
{
    pf_frame f;
    CHECK(pf_frame_alloc(&f, w, h, s, c) == PF_OK);
    return f;
}

static uint8_t *px8(pf_frame *f, int x, int y)
{
    return (uint8_t *)f->data + (size_t)y * f->pitch + (size_t)x * f->channels;
}

/* ---- Gray bits ---------------------------------------------------------------------- */

static void test_gray_bits(pf_rng *r)
{
    char err[256];
    header h;
    /* a thresholded page: 0 and 255 only */
    pf_frame page = make(203, 97, PF_U8, 1);
    for (int y = 0; y < page.height; y++)
        for (int x = 0; x < page.width; x++)
            *px8(&page, x, y) = ((x / 7 + y / 5) % 3 == 0 || pf_rng_range(r, 0, 30) == 0) ? 0 : 255;
    CHECK(write_form("page8.png", &page, PF_PNG_FORM_FRAME, NULL, NULL, err, sizeof err) == 0);
    CHECK(write_form("page1.png", &page, PF_PNG_FORM_GRAY1, NULL, NULL, err, sizeof err) == 0);
    CHECK(write_form("pageauto.png", &page, PF_PNG_FORM_AUTO, NULL, NULL, err, sizeof err) == 0);
    for (int i = 0; i < 2; i++) {
        const char *n = i ? "pageauto.png" : "page1.png";
        CHECKF(read_header(path_of(n), &h) == 0 && h.depth == 1 && h.ctype == PNG_COLOR_TYPE_GRAY,
               "%s: depth %d, colour type %d", n, h.depth, h.ctype);
        CHECKF(reads_back(n, &page, 1), "%s does not read back as the page", n);
        CHECKF(file_size(path_of(n)) < file_size(path_of("page8.png")), "%s: %ld bytes, 8-bit %ld",
               n, file_size(path_of(n)), file_size(path_of("page8.png")));
    }
    /* levels of 2 and 4 bits: auto finds the depth */
    const int steps[] = {85, 17};
    const int depth[] = {2, 4};
    for (int k = 0; k < 2; k++) {
        for (int y = 0; y < page.height; y++)
            for (int x = 0; x < page.width; x++)
                *px8(&page, x, y) = (uint8_t)(steps[k] * pf_rng_range(r, 0, 255 / steps[k]));
        CHECK(write_form("lev.png", &page, PF_PNG_FORM_AUTO, NULL, NULL, err, sizeof err) == 0);
        CHECKF(read_header(path_of("lev.png"), &h) == 0 && h.depth == depth[k] && h.ctype == 0,
               "levels of %d: depth %d, colour type %d", steps[k], h.depth, h.ctype);
        CHECK(reads_back("lev.png", &page, 1));
    }
    /* gray2 of any gray: each sample rounded half up to the nearest of 0, 85, 170, 255 */
    for (int y = 0; y < page.height; y++)
        for (int x = 0; x < page.width; x++)
            *px8(&page, x, y) = (uint8_t)pf_rng_range(r, 0, 255);
    CHECK(write_form("any2.png", &page, PF_PNG_FORM_GRAY2, NULL, NULL, err, sizeof err) == 0);
    pf_frame g;
    CHECK(pf_png_read(path_of("any2.png"), 0, &g, NULL, err, sizeof err) == PF_OK);
    int bad = 0;
    for (int y = 0; y < page.height; y++)
        for (int x = 0; x < page.width; x++) {
            const int v = *px8(&page, x, y), want = 85 * ((2 * v * 3 + 255) / 510);
            bad += ((uint8_t *)g.data + (size_t)y * g.pitch)[x] != want;
        }
    CHECKF(bad == 0, "gray2: %d samples not at their nearest level", bad);
    pf_frame_free(&g);
    /* gray bits pack row by row: two bands packed apart give the whole frame's rows */
    pf_png_packed whole, top, bottom;
    pf_frame ft = page, fb = page;
    ft.height = 40;
    fb.height = page.height - 40;
    fb.data = (char *)page.data + 40 * page.pitch;
    CHECK(pf_png_pack(&page, PF_PNG_FORM_GRAY2, NULL, &whole, err, sizeof err) == PF_OK);
    CHECK(pf_png_pack(&ft, PF_PNG_FORM_GRAY2, NULL, &top, err, sizeof err) == PF_OK);
    CHECK(pf_png_pack(&fb, PF_PNG_FORM_GRAY2, NULL, &bottom, err, sizeof err) == PF_OK);
    int rows_same = whole.rows && top.rows && bottom.rows && whole.row_bytes == top.row_bytes;
    for (int y = 0; rows_same && y < page.height; y++)
        rows_same = !memcmp(whole.rows + (size_t)y * whole.pitch,
                            y < 40 ? top.rows + (size_t)y * top.pitch
                                   : bottom.rows + (size_t)(y - 40) * bottom.pitch,
                            whole.row_bytes);
    CHECKF(rows_same, "gray2 packed in two bands differs from the whole frame's rows");
    pf_png_packed_free(&whole);
    pf_png_packed_free(&top);
    pf_png_packed_free(&bottom);
    /* colour is refused for gray bits, naming both; no file is left */
    pf_frame rgb = make(4, 4, PF_U8, 3);
    int st = write_form("refused.png", &rgb, PF_PNG_FORM_GRAY1, NULL, NULL, err, sizeof err);
    CHECKF(st == PF_INVALID_ARGUMENT && strstr(err, "gray1") && strstr(err, "3 channels") &&
               file_size(path_of("refused.png")) < 0,
           "gray1 of RGB: %d \"%s\"", st, err);
    pf_frame_free(&rgb);
    pf_frame_free(&page);
}

/* ---- Palettes ----------------------------------------------------------------------- */

/* A w x h frame of c channels whose pixels are drawn from n colours (alpha: some
   translucent ones). */
static pf_frame few_colours(pf_rng *r, int w, int h, int c, int n)
{
    uint8_t col[256][4];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            col[i][k] = (uint8_t)(k == 3 && i % 3 ? 255 : pf_rng_range(r, 0, 255));
    pf_frame f = make(w, h, PF_U8, c);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const int i = (x / 3 + y / 2 * 5 + pf_rng_range(r, 0, 1)) % n;
            uint8_t *p = px8(&f, x, y);
            for (int k = 0; k < c; k++)
                p[k] = c == 2 ? col[i][k ? 3 : 0] : col[i][k];
        }
    return f;
}

static void test_palettes(pf_rng *r)
{
    char err[256];
    header h;
    const int counts[] = {2, 4, 11, 200, 256};
    for (int c = 2; c <= 4; c++)
        for (int k = 0; k < PF_COUNTOF(counts); k++) {
            pf_frame f = few_colours(r, 97, 61, c, counts[k]);
            for (int form = PF_PNG_FORM_AUTO; form <= PF_PNG_FORM_PALETTE; form++) {
                CHECK(write_form("pal.png", &f, form, NULL, NULL, err, sizeof err) == 0);
                CHECK(read_header(path_of("pal.png"), &h) == 0);
                const int want = counts[k] <= 2 ? 1 : counts[k] <= 4 ? 2 : counts[k] <= 16 ? 4 : 8;
                /* auto takes the palette whenever it is smaller, as here (<= 256 colours
                   of 2 channels or more, against 16 bits a pixel at least) */
                CHECKF(h.ctype == PNG_COLOR_TYPE_PALETTE && h.depth == want && h.n_pal <= counts[k],
                       "%d channels of %d colours, form %d: colour type %d, depth %d, %d entries",
                       c, counts[k], form, h.ctype, h.depth, h.n_pal);
                /* translucent entries first, tRNS no longer than they are */
                for (int i = 0; i < h.n_trans; i++)
                    CHECKF(i + 1 == h.n_trans || h.trans[i] != 255, "tRNS entry %d of %d is opaque",
                           i, h.n_trans);
                CHECKF(reads_back("pal.png", &f, h.n_trans ? 4 : 3),
                       "%d channels of %d colours, form %d: pixels differ", c, counts[k], form);
            }
            pf_frame_free(&f);
        }
}

/* A 24x10 palette file of 20 entries in a set order, entries 0-2 translucent, with pHYs
   of unequal densities; pixels use entries 0..used-1. */
static int make_palette_source(const char *path, int used)
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
    png_set_IHDR(png, info, 24, 10, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_color pal[20];
    for (int i = 0; i < 20; i++)
        pal[i] = (png_color){(png_byte)(250 - 12 * i), (png_byte)(7 * i), (png_byte)(i * i)};
    png_set_PLTE(png, info, pal, 20);
    png_byte trans[3] = {0, 100, 200};
    png_set_tRNS(png, info, trans, 3, NULL);
    png_set_pHYs(png, info, 2835, 5669, PNG_RESOLUTION_METER);
    png_write_info(png, info);
    png_byte row[24];
    for (int y = 0; y < 10; y++) {
        for (int x = 0; x < 24; x++)
            row[x] = (png_byte)((x + 3 * y) % used);
        png_write_row(png, row);
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return fclose(fp);
}

static void test_source_palette(pf_rng *r)
{
    (void)r;
    char err[256];
    header h;
    CHECK(make_palette_source(path_of("src.png"), 9) == 0);
    pf_frame f;
    pf_png_meta *m = NULL;
    CHECK(pf_png_read_meta(path_of("src.png"), 0, &f, NULL, &m, err, sizeof err) == PF_OK);
    /* pixels from 9 of the 20 entries: the source's palette, all 20 in its order */
    for (int form = PF_PNG_FORM_AUTO; form <= PF_PNG_FORM_PALETTE; form++) {
        CHECK(write_form("kept.png", &f, form, m, NULL, err, sizeof err) == 0);
        CHECK(read_header(path_of("kept.png"), &h) == 0);
        int same = h.ctype == PNG_COLOR_TYPE_PALETTE && h.n_pal == 20 && h.n_trans == 3;
        for (int i = 0; same && i < 20; i++)
            same = h.pal[i].red == 250 - 12 * i && h.pal[i].green == 7 * i &&
                   h.pal[i].blue == (png_byte)(i * i);
        CHECKF(same, "form %d: the source's palette not kept (type %d, %d entries, %d trans)", form,
               h.ctype, h.n_pal, h.n_trans);
        CHECK(reads_back("kept.png", &f, 4));
    }
    /* a pixel outside the palette: an exact palette of what is there */
    uint8_t *p = px8(&f, 5, 5);
    p[0] = 1, p[1] = 2, p[2] = 3, p[3] = 255;
    CHECK(write_form("new.png", &f, PF_PNG_FORM_PALETTE, m, NULL, err, sizeof err) == 0);
    CHECK(read_header(path_of("new.png"), &h) == 0);
    CHECKF(h.ctype == PNG_COLOR_TYPE_PALETTE && h.n_pal == 10, "new palette: type %d, %d entries",
           h.ctype, h.n_pal);
    CHECK(reads_back("new.png", &f, 4));
    pf_frame_free(&f);
    pf_png_meta_free(m);
}

/* More than 256 colours, palette asked for: a median cut, every pixel near its own. */
static void test_median_cut(pf_rng *r)
{
    char err[256];
    header h;
    pf_frame f = make(128, 96, PF_U8, 3);
    for (int y = 0; y < f.height; y++)
        for (int x = 0; x < f.width; x++) {
            uint8_t *p = px8(&f, x, y);
            p[0] = (uint8_t)(2 * x), p[1] = (uint8_t)(y * 8 / 3),
            p[2] = (uint8_t)pf_rng_range(r, 100, 140);
        }
    CHECK(write_form("mc.png", &f, PF_PNG_FORM_PALETTE, NULL, NULL, err, sizeof err) == 0);
    CHECK(read_header(path_of("mc.png"), &h) == 0);
    CHECKF(h.ctype == PNG_COLOR_TYPE_PALETTE && h.depth == 8 && h.n_pal > 128 && h.n_pal <= 256,
           "median cut: type %d, depth %d, %d entries", h.ctype, h.depth, h.n_pal);
    pf_frame g;
    CHECK(pf_png_read(path_of("mc.png"), 0, &g, NULL, err, sizeof err) == PF_OK);
    double sum = 0;
    int worst = 0;
    for (int y = 0; y < f.height; y++)
        for (int x = 0; x < f.width; x++)
            for (int c = 0; c < 3; c++) {
                int d =
                    abs(px8(&f, x, y)[c] - ((uint8_t *)g.data + (size_t)y * g.pitch)[3 * x + c]);
                sum += d;
                worst = d > worst ? d : worst;
            }
    /* 256 boxes over about 128 x 96 x 40 values are about 12 a side, the histogram's bins
       8 values a channel: a mean error of a few steps, none past a box and a bin */
    CHECKF(sum / (3.0 * f.width * f.height) < 8 && worst <= 32,
           "median cut: mean error %.2f, worst %d", sum / (3.0 * f.width * f.height), worst);
    pf_frame_free(&g);
    pf_frame_free(&f);
}

/* ---- Auto's other reductions ------------------------------------------------------------ */

static void test_auto_reductions(pf_rng *r)
{
    char err[256];
    header h;
    /* 16-bit samples that are 8-bit values, many colours: RGB8 */
    pf_frame f = make(40, 30, PF_U16, 3);
    for (int y = 0; y < f.height; y++)
        for (int x = 0; x < f.width; x++)
            for (int c = 0; c < 3; c++)
                ((uint16_t *)((char *)f.data + y * f.pitch))[3 * x + c] =
                    (uint16_t)(257 * pf_rng_range(r, 0, 255));
    CHECK(write_form("a16.png", &f, PF_PNG_FORM_AUTO, NULL, NULL, err, sizeof err) == 0);
    CHECKF(read_header(path_of("a16.png"), &h) == 0 && h.depth == 8 &&
               h.ctype == PNG_COLOR_TYPE_RGB,
           "16-bit 8-bit values: depth %d, type %d", h.depth, h.ctype);
    /* one sample off: 16 bits stay */
    ((uint16_t *)f.data)[1] = 1000;
    CHECK(write_form("b16.png", &f, PF_PNG_FORM_AUTO, NULL, NULL, err, sizeof err) == 0);
    CHECKF(read_header(path_of("b16.png"), &h) == 0 && h.depth == 16 &&
               h.ctype == PNG_COLOR_TYPE_RGB,
           "16-bit: depth %d, type %d", h.depth, h.ctype);
    CHECK(reads_back("b16.png", &f, 3));
    pf_frame_free(&f);
    /* opaque RGBA of gray pixels, many levels: gray8 */
    f = make(50, 20, PF_U8, 4);
    for (int y = 0; y < f.height; y++)
        for (int x = 0; x < f.width; x++) {
            uint8_t *p = px8(&f, x, y);
            p[0] = p[1] = p[2] = (uint8_t)(x * 5 + y), p[3] = 255;
        }
    CHECK(write_form("ga.png", &f, PF_PNG_FORM_AUTO, NULL, NULL, err, sizeof err) == 0);
    CHECKF(read_header(path_of("ga.png"), &h) == 0 && h.depth == 8 &&
               h.ctype == PNG_COLOR_TYPE_GRAY,
           "opaque gray RGBA: depth %d, type %d", h.depth, h.ctype);
    CHECK(reads_back("ga.png", &f, 1));
    pf_frame_free(&f);
}

/* ---- pHYs through geometry --------------------------------------------------------------- */

static int phys_of(const char *name, unsigned *x, unsigned *y)
{
    pf_frame f;
    pf_png_meta *m = NULL;
    char err[256];
    if (pf_png_read_meta(path_of(name), 0, &f, NULL, &m, err, sizeof err) != PF_OK)
        return -1;
    int found = 0;
    for (int i = 0; i < pf_png_meta_count(m); i++) {
        const void *d;
        size_t n;
        const char *t = pf_png_meta_chunk(m, i, &d, &n);
        if (t && !memcmp(t, "pHYs", 4) && n == 9) {
            const unsigned char *b = d;
            *x = (unsigned)b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3];
            *y = (unsigned)b[4] << 24 | b[5] << 16 | b[6] << 8 | b[7];
            found = b[8] == 1;
        }
    }
    pf_frame_free(&f);
    pf_png_meta_free(m);
    return found;
}

static void test_phys(pf_rng *r)
{
    (void)r;
    char err[256];
    CHECK(make_palette_source(path_of("dpi.png"), 20) == 0);
    pf_frame f;
    pf_png_meta *m = NULL;
    CHECK(pf_png_read_meta(path_of("dpi.png"), 0, &f, NULL, &m, err, sizeof err) == PF_OK);
    unsigned x = 0, y = 0;
    /* the same size, no geometry: kept */
    CHECK(write_form("p0.png", &f, PF_PNG_FORM_FRAME, m, NULL, err, sizeof err) == 0);
    CHECKF(phys_of("p0.png", &x, &y) == 1 && x == 2835 && y == 5669, "kept: %u x %u", x, y);
    /* a quarter turn (the same frame stands in for the turned one): swapped */
    pf_png_geometry g;
    pf_png_geometry_init(&g);
    g.swap = 1;
    CHECK(write_form("p1.png", &f, PF_PNG_FORM_FRAME, m, &g, err, sizeof err) == 0);
    CHECKF(phys_of("p1.png", &x, &y) == 1 && x == 5669 && y == 2835, "swapped: %u x %u", x, y);
    /* a resize to half the width and a third of the height, then a quarter turn */
    pf_png_geometry_init(&g);
    pf_png_geometry half = {sizeof half, 0, 0.5, 1.0 / 3}, turn = {sizeof turn, 1, 1, 1};
    pf_png_geometry_then(&g, &half);
    pf_png_geometry_then(&g, &turn);
    CHECK(write_form("p2.png", &f, PF_PNG_FORM_FRAME, m, &g, err, sizeof err) == 0);
    /* x: the source's y density (5669) / 3 = 1889.67 -> 1890; y: 2835 / 2 = 1417.5 -> 1418 */
    CHECKF(phys_of("p2.png", &x, &y) == 1 && x == 1890 && y == 1418, "resized, turned: %u x %u", x,
           y);
    /* another size without a geometry: dropped (crop and resize cannot be told apart) */
    pf_frame small = f;
    small.width = 10;
    CHECK(write_form("p3.png", &small, PF_PNG_FORM_FRAME, m, NULL, err, sizeof err) == 0);
    CHECKF(phys_of("p3.png", &x, &y) == 0, "another size: pHYs kept");
    /* a crop (geometry identity) at another size: kept */
    pf_png_geometry_init(&g);
    CHECK(write_form("p4.png", &small, PF_PNG_FORM_FRAME, m, &g, err, sizeof err) == 0);
    CHECKF(phys_of("p4.png", &x, &y) == 1 && x == 2835 && y == 5669, "cropped: %u x %u", x, y);
    pf_frame_free(&f);
    pf_png_meta_free(m);
}

/* ---- Surveys: auto's choice from bands ------------------------------------------------ */

/* A random frame of n colours, of a kind auto reduces or not: gray, opaque, on the levels
   of some depth, 16-bit samples that are 8-bit values, or none of these. */
static pf_frame survey_frame(pf_rng *r)
{
    static const int counts[] = {1, 2, 3, 5, 16, 17, 200, 256, 257, 1000};
    const int w = pf_rng_range(r, 1, 40), h = pf_rng_range(r, 1, 30), c = pf_rng_range(r, 1, 4);
    const int wide = pf_rng_range(r, 0, 1), gray = pf_rng_range(r, 0, 1);
    const int opaque = pf_rng_range(r, 0, 1), can8 = pf_rng_range(r, 0, 3) > 0;
    const int levels = pf_rng_range(r, 0, 4); /* 1, 2, 4 bits, or any */
    const int n = counts[pf_rng_range(r, 0, 9)];
    pf_frame f = make(w, h, wide ? PF_U16 : PF_U8, c);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            pf_rng pick; /* colour i: the same samples wherever it is drawn */
            pf_rng_seed(&pick, (uint64_t)pf_rng_range(r, 0, n - 1) + 1000u * (uint64_t)n);
            unsigned v[4];
            for (int k = 0; k < 4; k++) {
                int s = pf_rng_range(&pick, 0, 255);
                if (levels < 3) {
                    const int top = (1 << (1 << levels)) - 1; /* 1, 3 or 15 */
                    s = s % (top + 1) * 255 / top;
                }
                v[k] = wide ? (can8 ? 257u * (unsigned)s : (unsigned)pf_rng_range(&pick, 0, 65535))
                            : (unsigned)s;
            }
            if (gray)
                v[1] = v[2] = v[0];
            if (opaque)
                v[3] = wide ? 65535u : 255u;
            for (int k = 0; k < c; k++) {
                const unsigned s = c == 2 && k == 1 ? v[3] : v[k];
                if (wide)
                    ((uint16_t *)((char *)f.data + (size_t)y * f.pitch))[c * x + k] = (uint16_t)s;
                else
                    px8(&f, x, y)[k] = (uint8_t)s;
            }
        }
    return f;
}

/* Whether the survey of f's rows in random bands says what pf_png_pack's auto on the
   whole frame does: the frame's own form (rows NULL) or another; *own gets the latter. */
static int survey_agrees(pf_rng *r, const pf_frame *f, const pf_png_meta *m, int *own)
{
    char err[256];
    pf_png_packed pk;
    CHECK(pf_png_pack(f, PF_PNG_FORM_AUTO, m, &pk, err, sizeof err) == PF_OK);
    *own = pk.rows == NULL;
    pf_png_packed_free(&pk);
    pf_png_survey *s = NULL;
    CHECK(pf_png_survey_new(&s) == PF_OK);
    for (int y = 0; y < f->height;) {
        pf_frame band = *f;
        band.data = (char *)f->data + (size_t)y * f->pitch;
        band.height = pf_rng_range(r, 1, 7);
        if (band.height > f->height - y)
            band.height = f->height - y;
        CHECK(pf_png_survey_rows(s, &band) == PF_OK);
        y += band.height;
    }
    const int said = pf_png_survey_auto_is_frame(s, m);
    pf_frame other = *f; /* a band of another width */
    other.width = f->width > 1 ? f->width - 1 : 2;
    if (other.width < f->width)
        CHECK(pf_png_survey_rows(s, &other) == PF_INVALID_ARGUMENT);
    pf_png_survey_free(s);
    return said == *own;
}

/* The survey of a frame's rows in random bands says auto keeps the frame's form exactly
   when pf_png_pack's auto on the whole frame does, with a source palette too; bands of
   another width are refused. */
static void test_survey(pf_rng *r)
{
    char err[256];
    int kept = 0, other = 0, own;
    for (int t = 0; t < 400; t++) {
        pf_frame f = survey_frame(r);
        CHECKF(survey_agrees(r, &f, NULL, &own),
               "frame %d (%dx%d, %d channels, %s): the survey differs from auto on the frame (%d)",
               t, f.width, f.height, f.channels, f.sample == PF_U16 ? "u16" : "u8", own);
        kept += own, other += !own;
        pf_frame_free(&f);
    }
    CHECKF(kept > 20 && other > 20, "the frames tried: %d kept their form, %d did not", kept,
           other);
    /* a palette source (test_source_palette's): its pixels fit its palette; one pixel off
       does not; a frame of its size with many colours keeps RGBA */
    pf_frame f;
    pf_png_meta *m = NULL;
    CHECK(pf_png_read_meta(path_of("src.png"), 0, &f, NULL, &m, err, sizeof err) == PF_OK);
    CHECKF(survey_agrees(r, &f, m, &own) && !own, "source palette: survey or auto (%d) wrong", own);
    uint8_t *p = px8(&f, 5, 5);
    p[0] = 1, p[1] = 2, p[2] = 3, p[3] = 255;
    CHECKF(survey_agrees(r, &f, m, &own), "a pixel off the source palette (auto %d)", own);
    for (int y = 0; y < f.height; y++)
        for (int x = 0; x < f.width; x++) {
            p = px8(&f, x, y);
            p[0] = (uint8_t)(x * 9), p[1] = (uint8_t)(y * 7), p[2] = (uint8_t)(x ^ y), p[3] = 200;
        }
    CHECKF(survey_agrees(r, &f, m, &own), "many colours, a palette source (auto %d)", own);
    pf_frame_free(&f);
    pf_png_meta_free(m);
    pf_png_survey *s = NULL;
    CHECK(pf_png_survey_new(&s) == PF_OK);
    CHECK(pf_png_survey_auto_is_frame(s, NULL) == 0); /* no rows: nothing known */
    pf_png_survey_free(s);
    pf_png_survey_free(NULL);
}

int main(void)
{
    dir = pf_test_tmpdir("png_form");
    pf_rng r;
    pf_rng_seed(&r, 39);
    test_gray_bits(&r);
    test_palettes(&r);
    test_source_palette(&r);
    test_median_cut(&r);
    test_auto_reductions(&r);
    test_phys(&r);
    test_survey(&r);
    return pf_test_done("png_form");
}
