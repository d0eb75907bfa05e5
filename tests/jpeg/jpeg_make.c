/* tests/jpeg/jpeg_make.c: see jpeg_make.h. Errors exit: these are fixtures. */
#include "jpeg_make.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

typedef struct jm_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} jm_err;

static void jm_exit(j_common_ptr c)
{
    char msg[JMSG_LENGTH_MAX];
    c->err->format_message(c, msg);
    fprintf(stderr, "jpeg_make: libjpeg: %s\n", msg);
    longjmp(((jm_err *)c->err)->jb, 1);
}

static void jm_quiet(j_common_ptr c, int level)
{
    (void)c, (void)level;
}

static unsigned char *pattern(const jm_opts *o, int ch)
{
    unsigned char *p = malloc((size_t)o->w * o->h * ch);
    unsigned s = o->seed * 2654435761u + 1;
    for (int y = 0; y < o->h; y++)
        for (int x = 0; x < o->w; x++)
            for (int c = 0; c < ch; c++) {
                s = s * 1103515245u + 12345u;
                int v = (x * 255 / (o->w > 1 ? o->w - 1 : 1) * (c + 1) +
                         y * 255 / (o->h > 1 ? o->h - 1 : 1) * (3 - c % 3)) /
                            4 +
                        (int)(s >> 28) - 8;
                p[((size_t)y * o->w + x) * ch + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

unsigned char *jm_make_from(const jm_opts *o, const unsigned char *px, size_t *size)
{
    struct jpeg_compress_struct c;
    jm_err e;
    unsigned char *volatile out = NULL;
    unsigned long out_size = 0;
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = jm_exit;
    e.pub.emit_message = jm_quiet;
    if (setjmp(e.jb)) {
        jpeg_destroy_compress(&c);
        exit(1);
    }
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    jpeg_mem_dest(&c, &buf, &out_size);
    int ch = o->space == 1 ? 1 : o->space == 4 || o->space == 5 ? 4 : 3;
    c.image_width = (JDIMENSION)o->w;
    c.image_height = (JDIMENSION)o->h;
    c.input_components = ch;
    c.in_color_space = ch == 1 ? JCS_GRAYSCALE : ch == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);
    if (o->space == 5)
        jpeg_set_colorspace(&c, JCS_YCCK);
    if (o->space == 6)
        jpeg_set_colorspace(&c, JCS_RGB);
    jpeg_set_quality(&c, o->quality ? o->quality : 90, TRUE);
    if (o->space == 3 || o->space == 5) {
        c.comp_info[0].h_samp_factor = o->hs ? o->hs : 2;
        c.comp_info[0].v_samp_factor = o->vs ? o->vs : 2;
        for (int i = 1; i < c.num_components; i++)
            c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
        if (o->space == 5) /* K at full resolution, as Photoshop writes it */
            c.comp_info[3].h_samp_factor = c.comp_info[0].h_samp_factor,
            c.comp_info[3].v_samp_factor = c.comp_info[0].v_samp_factor;
    }
    if (o->progressive)
        jpeg_simple_progression(&c);
    c.restart_in_rows = o->restart_rows;
    c.arith_code = o->arith ? TRUE : FALSE;
    if (o->orientation)
        c.write_JFIF_header = FALSE;
    jpeg_start_compress(&c, TRUE);
    if (o->orientation) {
        /* Exif\0\0, TIFF (little-endian), IFD0 of one entry: Orientation SHORT 1 */
        unsigned char x[6 + 8 + 2 + 12 + 4] = {'E', 'x',  'i',  'f', 0,
                                               0,   'I',  'I',  42,  0,
                                               8,   0,    0,    0,   1,
                                               0,   0x12, 0x01, 3,   0,
                                               1,   0,    0,    0,   (unsigned char)o->orientation,
                                               0,   0,    0,    0,   0,
                                               0,   0};
        jpeg_write_marker(&c, JPEG_APP0 + 1, x, sizeof x);
    }
    if (o->icc)
        jpeg_write_icc_profile(&c, o->icc, (unsigned)o->icc_size);
    for (int y = 0; y < o->h; y++) {
        JSAMPROW r = (JSAMPROW)(px + (size_t)y * o->w * ch);
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    out = malloc(out_size);
    memcpy(out, buf, out_size);
    free(buf);
    *size = out_size;
    return out;
}

unsigned char *jm_make(const jm_opts *o, size_t *size)
{
    int ch = o->space == 1 ? 1 : o->space == 4 || o->space == 5 ? 4 : 3;
    unsigned char *px = pattern(o, ch);
    unsigned char *r = jm_make_from(o, px, size);
    free(px);
    return r;
}

unsigned char *jm_decode(const unsigned char *data, size_t size, int *w, int *h, int *ch)
{
    struct jpeg_decompress_struct d;
    jm_err e;
    unsigned char *volatile out = NULL;
    d.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = jm_exit;
    e.pub.emit_message = jm_quiet;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&d);
        free(out);
        return NULL;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)size);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = d.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE
                        : d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK
                            ? JCS_CMYK
                            : JCS_RGB;
    jpeg_start_decompress(&d);
    *w = (int)d.output_width, *h = (int)d.output_height, *ch = d.output_components;
    out = malloc((size_t)*w * *h * *ch);
    while (d.output_scanline < d.output_height) {
        JSAMPROW r = out + (size_t)d.output_scanline * *w * *ch;
        jpeg_read_scanlines(&d, &r, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return out;
}
