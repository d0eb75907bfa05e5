/* cli/images.c: the image files of `pipefuse run` (images.h): formats by content and by
 * name, PNG and JPEG decoding whole and by rows, and the JPEG options.
 */
#include "images.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipefuse/bands.h"

cli_image_opts cli_images = {
    .format = CLI_FMT_NONE,
    .jpeg = {sizeof(pf_jpeg_write_opts), PF_JPEG_DEFAULT_QUALITY, PF_JPEG_420, 0, 0},
};

/* ---- Options ------------------------------------------------------------------------------- */

int cli_image_option(const char *opt, const char *v, char *err, size_t errn)
{
    cli_image_opts *o = &cli_images;
    static const char *const jpeg_only[] = {"--progressive", "--optimize", "--quality",
                                            "--subsampling"};
    for (int k = 0; k < 4 && !o->jpeg_option; k++)
        if (strcmp(opt, jpeg_only[k]) == 0)
            o->jpeg_option = jpeg_only[k];
    if (strcmp(opt, "--progressive") == 0) {
        o->jpeg.progressive = 1;
    } else if (strcmp(opt, "--optimize") == 0) {
        o->jpeg.optimize = 1;
    } else if (strcmp(opt, "--keep-orientation") == 0) {
        o->keep_orientation = 1;
    } else if (strcmp(opt, "--format") == 0 && v) {
        if (strcmp(v, "auto") == 0)
            o->format = CLI_FMT_NONE;
        else if (strcmp(v, "png") == 0)
            o->format = CLI_FMT_PNG;
        else if (strcmp(v, "jpeg") == 0 || strcmp(v, "jpg") == 0)
            o->format = CLI_FMT_JPEG;
        else {
            snprintf(err, errn, "--format must be auto, png or jpeg, not '%s'", v);
            return -1;
        }
    } else if (strcmp(opt, "--quality") == 0 && v) {
        char *end;
        errno = 0;
        long q = strtol(v, &end, 10);
        if (errno || end == v || *end || q < 1 || q > 100) {
            snprintf(err, errn, "--quality must be 1-100, not '%s'", v);
            return -1;
        }
        o->jpeg.quality = (int)q;
    } else if (strcmp(opt, "--subsampling") == 0 && v) {
        static const char *const names[][2] = {
            {"420", "4:2:0"}, {"422", "4:2:2"}, {"444", "4:4:4"}, {"440", "4:4:0"}};
        int k = 0;
        while (k < 4 && strcmp(v, names[k][0]) != 0 && strcmp(v, names[k][1]) != 0)
            k++;
        if (k == 4) {
            snprintf(err, errn, "--subsampling must be 420, 422, 444 or 440, not '%s'", v);
            return -1;
        }
        o->jpeg.subsampling = k; /* PF_JPEG_420, _422, _444, _440 in that order */
    } else {
        return 0;
    }
    return 1;
}

const char *cli_image_opts_str(void)
{
    static char buf[64];
    const cli_image_opts *o = &cli_images;
    snprintf(buf, sizeof buf, "%d %d %d %d %d %d", (int)o->format, o->jpeg.quality,
             o->jpeg.subsampling, o->jpeg.progressive, o->jpeg.optimize, o->keep_orientation);
    return buf;
}

void cli_image_opts_load(const char *s)
{
    cli_image_opts *o = &cli_images;
    int f = 0;
    if (sscanf(s, "%d %d %d %d %d %d", &f, &o->jpeg.quality, &o->jpeg.subsampling,
               &o->jpeg.progressive, &o->jpeg.optimize, &o->keep_orientation) == 6)
        o->format = (cli_format)f;
}

/* ---- Formats ------------------------------------------------------------------------------------ */

cli_format cli_image_sniff(const char *path)
{
    unsigned char b[8];
    /* O_NONBLOCK: a FIFO in a file's place is not waited for (decode names it) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return CLI_FMT_NONE;
    ssize_t n = read(fd, b, sizeof b);
    close(fd);
    if (n == 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0)
        return CLI_FMT_PNG;
    if (n >= 3 && pf_jpeg_sniff(b, (size_t)n))
        return CLI_FMT_JPEG;
    return CLI_FMT_NONE;
}

const char *cli_image_ext(const char *input)
{
    cli_format f = cli_images.format;
    if (f == CLI_FMT_NONE)
        f = cli_format_of_name(input, NULL);
    /* without libjpeg a JPEG input keeps a PNG name: its decode says why it fails */
    return f == CLI_FMT_JPEG && pf_jpeg_available() ? "jpg" : "png";
}

int cli_png_only(const pf_pipeline *p, int k)
{
    pf_output_info oi;
    if (pf_pipeline_output_info(p, k, &oi) != PF_OK || oi.kind != PF_OUTPUT_IMAGE)
        return 0;
    const int form = pf_pipeline_output_png_form(p, k);
    return oi.bits > 8 || form == PF_PNG_FORM_PALETTE || form == PF_PNG_FORM_GRAY1 ||
           form == PF_PNG_FORM_GRAY2 || form == PF_PNG_FORM_GRAY4;
}

cli_format cli_image_out_format(const char *name, cli_format src)
{
    cli_format f = cli_format_of_name(name, NULL);
    if (f == CLI_FMT_PNG || f == CLI_FMT_JPEG)
        return f;
    if (cli_images.format != CLI_FMT_NONE)
        return cli_images.format;
    return src == CLI_FMT_JPEG && pf_jpeg_available() ? CLI_FMT_JPEG : CLI_FMT_PNG;
}

/* The reader a file gets: its bytes', else its name's (for the message), else PNG. */
static cli_format reader_of(const char *path)
{
    cli_format f = cli_image_sniff(path);
    if (f == CLI_FMT_NONE)
        f = cli_format_of_name(path, NULL) == CLI_FMT_JPEG ? CLI_FMT_JPEG : CLI_FMT_PNG;
    return f;
}

static void jpeg_src(const pf_frame *f, pf_png_info *src)
{
    memset(src, 0, sizeof *src);
    src->width = f->width;
    src->height = f->height;
    src->bit_depth = 8;
    src->color_type = f->channels == 1 ? 0 : 2;
}

static pf_jpeg_read_opts read_opts(unsigned long long max_pixels, unsigned long long max_memory)
{
    pf_jpeg_read_opts o = {sizeof o, max_pixels, max_memory, cli_images.keep_orientation};
    return o;
}

int cli_image_read(const char *path, unsigned long long max_pixels, unsigned long long max_memory,
                   int strip, pf_frame *out, pf_png_info *src, pf_png_meta **pm, pf_jpeg_meta **jm,
                   cli_format *fmt, char *err, size_t errn)
{
    *pm = NULL;
    *jm = NULL;
    *fmt = reader_of(path);
    if (*fmt == CLI_FMT_PNG)
        return strip ? pf_png_read(path, max_pixels, out, src, err, errn)
                     : pf_png_read_meta(path, max_pixels, out, src, pm, err, errn);
    pf_jpeg_read_opts o = read_opts(max_pixels, max_memory);
    int st = pf_jpeg_read(path, &o, out, NULL, strip ? NULL : jm, err, errn);
    if (st == PF_OK)
        jpeg_src(out, src);
    return st;
}

struct cli_rows {
    pf_png_rows *png;
    pf_jpeg_rows *jpeg;
};

int cli_rows_open(const char *path, unsigned long long max_pixels, unsigned long long max_memory,
                  int strip, cli_rows **out, pf_frame *format, pf_png_info *src, pf_png_meta **pm,
                  pf_jpeg_meta **jm, cli_format *fmt, char *err, size_t errn)
{
    *out = NULL;
    *pm = NULL;
    *jm = NULL;
    cli_rows *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errn, "%s: out of memory", path);
        return PF_NO_MEMORY;
    }
    *fmt = reader_of(path);
    int st;
    if (*fmt == CLI_FMT_PNG) {
        st = pf_png_rows_open(path, max_pixels, &r->png, format, src, strip ? NULL : pm, err, errn);
    } else {
        pf_jpeg_read_opts o = read_opts(max_pixels, max_memory);
        st = pf_jpeg_rows_open(path, &o, &r->jpeg, format, NULL, strip ? NULL : jm, err, errn);
        if (st == PF_OK)
            jpeg_src(format, src);
    }
    if (st != PF_OK) {
        free(r);
        return st;
    }
    *out = r;
    return PF_OK;
}

int cli_rows_read(cli_rows *r, pf_frame *dst, int n, char *err, size_t errn)
{
    return r->png ? pf_png_rows_read(r->png, dst, n, err, errn)
                  : pf_jpeg_rows_read(r->jpeg, dst, n, err, errn);
}

void cli_rows_close(cli_rows *r)
{
    if (!r)
        return;
    pf_png_rows_close(r->png);
    pf_jpeg_rows_close(r->jpeg);
    free(r);
}

int cli_jpeg_ihdr(const char *path, unsigned long long *w, unsigned long long *h, int *depth,
                  int *ctype, int *interlace)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || cli_image_sniff(path) != CLI_FMT_JPEG)
        return -1;
    pf_jpeg_read_opts o = read_opts(0, 0);
    o.max_pixels = ~0ull; /* the decoder applies the limit and says so */
    pf_jpeg_info info;
    if (pf_jpeg_read_header(path, &o, &info, NULL, 0) != PF_OK)
        return -1;
    *w = (unsigned long long)info.width;
    *h = (unsigned long long)info.height;
    *depth = 8;
    *ctype = info.components == 1 ? 0 : 2;
    *interlace = info.applied && info.orientation > 2;
    return 0;
}
