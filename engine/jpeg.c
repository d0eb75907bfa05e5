/* engine/jpeg.c: JPEG files to and from frames (pipefuse/jpeg.h), with libjpeg-turbo
 * through the libjpeg API.
 *
 * libjpeg reports errors through its error manager, whose error_exit must not return:
 * ours records the message and longjmps back to the public function that called into
 * libjpeg. Every such function sets its own setjmp first and keeps all its state in a
 * struct its caller owns (dec, pf_jpeg_writer), so no local is clobbered and everything
 * is released on every path. libjpeg's warnings that data is missing or corrupt take the
 * same way out (as TurboJPEG's "stop on warning"), so a truncated file fails rather than
 * decoding to gray.
 *
 * Reading: the header first (jpeg_read_header), where the size limits and the EXIF
 * orientation are settled, then rows. A whole read of an image turned by its orientation
 * decodes into a scratch frame and turns it into the result; rows in file order are
 * decoded straight into the caller's frame.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h> /* after stdio.h, as it needs */
#include <jerror.h>

#include "internal.h"
#include "jpeg_internal.h"
#include "safefile.h"

#define PF_API __attribute__((visibility("default")))

#define PF_JPEG_MAX_SCANS 500 /* progressive scans before a file is refused */
#define PF_JPEG_OUT_BUF   (64u << 10)

PF_API int pf_jpeg_available(void)
{
    return 1;
}

/* ---- Errors --------------------------------------------------------------------------------- */

typedef struct jerr {
    struct jpeg_error_mgr pub; /* first: libjpeg's err pointer is ours */
    jmp_buf jb;
    const char *name;
    char *err;
    size_t err_size;
    int status;
    int limited; /* a max_memory was set: running out is that limit */
} jerr;

static void jfail(jerr *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void jfail(jerr *e, int status, const char *fmt, ...)
{
    if (e->status != PF_OK)
        return;
    e->status = status;
    va_list ap;
    va_start(ap, fmt);
    pf_verrf(e->err, e->err_size, fmt, ap);
    va_end(ap);
}

static void on_error_exit(j_common_ptr c)
{
    jerr *e = (jerr *)c->err;
    char msg[JMSG_LENGTH_MAX];
    c->err->format_message(c, msg);
    int code = c->err->msg_code;
    if ((code == JERR_OUT_OF_MEMORY || code == JERR_NO_BACKING_STORE) && e->limited &&
        c->is_decompressor) {
        /* a progressive (multi-scan) file holds every coefficient until its last scan */
        const j_decompress_ptr d = (j_decompress_ptr)c;
        double coef = 0;
        for (int i = 0; d->comp_info && i < d->num_components; i++)
            coef += (double)d->comp_info[i].width_in_blocks *
                    (double)d->comp_info[i].height_in_blocks * 64 * sizeof(JCOEF);
        jfail(e, PF_TOO_LARGE,
              "%s: needs more memory than --max-memory allows: a %ux%u %sJPEG holds all its "
              "coefficients (%.2f MB) beside libjpeg's working memory, over the limit of "
              "%.2f MB",
              e->name, d->image_width, d->image_height,
              d->progressive_mode ? "progressive " : "multi-scan ", coef / 1e6,
              (double)c->mem->max_memory_to_use / 1e6);
    } else if ((code == JERR_OUT_OF_MEMORY || code == JERR_NO_BACKING_STORE) && e->limited)
        jfail(e, PF_TOO_LARGE, "%s: needs more memory than the limit (--max-memory) allows (%s)",
              e->name, msg);
    else if (code == JERR_OUT_OF_MEMORY)
        jfail(e, PF_NO_MEMORY, "%s: out of memory (libjpeg: %s)", e->name, msg);
    else if (code == JERR_BAD_PRECISION)
        jfail(e, PF_UNSUPPORTED, "%s: %d-bit JPEG samples are not supported (8-bit only)", e->name,
              c->err->msg_parm.i[0]);
    else if (code == JERR_SOF_UNSUPPORTED)
        jfail(e, PF_UNSUPPORTED,
              "%s: unsupported JPEG process (%s; lossless and hierarchical "
              "files are not read)",
              e->name, msg);
    else if (c->is_decompressor)
        jfail(e, PF_IMAGE, "%s: corrupt JPEG: %s", e->name, msg);
    else
        jfail(e, PF_IO, "%s: cannot write JPEG: %s", e->name, msg);
    longjmp(e->jb, 1);
}

/* Every warning of a read fails it, except the few that say nothing of the pixels (an
   unknown Adobe transform code, a JFIF version, a malformed ICC profile's segments, which
   read_markers treats as no profile): corrupt entropy-coded data often decodes as
   valid codes, and the decoder only notices at the end of the scan, as stray bytes
   before the next marker; the rows before are then already smeared. A library does not
   print. Trace messages (level >= 0) are dropped. */
static void on_emit(j_common_ptr c, int level)
{
    if (level >= 0)
        return;
    const int code = c->err->msg_code;
    if (!c->is_decompressor || code == JWRN_ADOBE_XFORM || code == JWRN_JFIF_MAJOR ||
        code == JWRN_BOGUS_ICC) {
        c->err->num_warnings++;
        return;
    }
    jerr *e = (jerr *)c->err;
    char msg[JMSG_LENGTH_MAX];
    c->err->format_message(c, msg);
    if (code == JWRN_JPEG_EOF)
        jfail(e, PF_IMAGE, "%s: corrupt JPEG: truncated (premature end of the file)", e->name);
    else if (code == JWRN_EXTRANEOUS_DATA)
        jfail(e, PF_IMAGE,
              "%s: corrupt JPEG: %d stray bytes before marker 0x%02x (the compressed data "
              "does not end where it should: damaged or cut)",
              e->name, c->err->msg_parm.i[0], c->err->msg_parm.i[1]);
    else
        jfail(e, PF_IMAGE, "%s: corrupt JPEG: %s", e->name, msg);
    longjmp(e->jb, 1);
}

static void jerr_init(jerr *e, const char *name, char *err, size_t err_size)
{
    memset(e, 0, sizeof *e);
    jpeg_std_error(&e->pub);
    e->pub.error_exit = on_error_exit;
    e->pub.emit_message = on_emit;
    e->name = name;
    e->err = err;
    e->err_size = err_size;
    e->status = PF_OK;
}

static void set_err(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pf_verrf(err, err_size, fmt, ap);
    va_end(ap);
}

/* ---- Reading ----------------------------------------------------------------------------------- */

typedef struct dec {
    jerr je;
    struct jpeg_decompress_struct ci;
    struct jpeg_progress_mgr progress;
    int created, started;
    FILE *fp;
    const unsigned char *mem;
    size_t mem_size;
    unsigned long long src_size; /* 0: not known */
    pf_jpeg_read_opts o;
    pf_jpeg_info info;
    int orient;   /* to apply: 1 none, else 2-8 */
    int channels; /* of the frame: 1 or 3 */
    int cmyk, inverted;
    unsigned char *row4; /* CMYK rows before they become RGB */
    int want_meta;
    pf_jpeg_meta *meta;
    int y;        /* rows delivered */
    int finished; /* read to the end of the file */
} dec;

static void on_progress(j_common_ptr c)
{
    j_decompress_ptr di = (j_decompress_ptr)c;
    if (di->progressive_mode && di->input_scan_number > PF_JPEG_MAX_SCANS) {
        jerr *e = (jerr *)c->err;
        jfail(e, PF_IMAGE, "%s: corrupt JPEG: more than %d progressive scans", e->name,
              PF_JPEG_MAX_SCANS);
        longjmp(e->jb, 1);
    }
}

static void dec_init(dec *d, const char *name, const pf_jpeg_read_opts *opts, char *err,
                     size_t err_size)
{
    memset(d, 0, sizeof *d);
    jerr_init(&d->je, name, err, err_size);
    if (opts) {
        size_t n = opts->size && opts->size < sizeof d->o ? opts->size : sizeof d->o;
        memcpy(&d->o, opts, n);
    }
    d->o.size = sizeof d->o;
    if (!d->o.max_pixels)
        d->o.max_pixels = PF_PNG_DEFAULT_MAX_PIXELS;
    d->orient = 1;
}

static void dec_free(dec *d)
{
    if (d->created)
        jpeg_destroy_decompress(&d->ci);
    d->created = 0;
    free(d->row4);
    d->row4 = NULL;
    pf_jpeg_meta_free(d->meta);
    d->meta = NULL;
}

/* The first format that first bytes name, for a message about a file that is no JPEG. */
static const char *other_format(const unsigned char *p, size_t n)
{
    if (n >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
        return "a PNG file";
    if (n >= 6 && (memcmp(p, "GIF87a", 6) == 0 || memcmp(p, "GIF89a", 6) == 0))
        return "a GIF file";
    if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        return "a WebP file";
    if (n >= 4 && (memcmp(p, "II*\0", 4) == 0 || memcmp(p, "MM\0*", 4) == 0))
        return "a TIFF file";
    if (n >= 2 && p[0] == 'B' && p[1] == 'M')
        return "a BMP file";
    if (n >= 12 && memcmp(p + 4, "ftyp", 4) == 0)
        return "an ISO media file (HEIF/AVIF?)";
    return NULL;
}

/* The EXIF block of the first APP1 "Exif\0\0" marker saved, and the ICC profile. */
static int read_markers(dec *d)
{
    const unsigned char *exif = NULL;
    size_t exif_size = 0;
    for (jpeg_saved_marker_ptr m = d->ci.marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length > 6 &&
            memcmp(m->data, "Exif\0\0", 6) == 0) {
            exif = m->data + 6;
            exif_size = m->data_length - 6;
            break;
        }
    size_t at = 0;
    int o = exif ? pf_exif_orientation(exif, exif_size, &at) : 0;
    d->info.orientation = o ? o : 1;
    d->info.has_exif = exif != NULL;
    if (!d->o.keep_orientation && o > 1)
        d->orient = o;
    if (!d->want_meta)
        return PF_OK;
    JOCTET *icc = NULL;
    unsigned icc_size = 0;
    /* a malformed profile is a warning (JWRN_BOGUS_ICC) and no profile */
    if (!jpeg_read_icc_profile(&d->ci, &icc, &icc_size))
        icc = NULL;
    d->info.has_icc = icc != NULL;
    /* a CMYK profile no longer describes the RGB frame */
    if (icc && d->cmyk) {
        free(icc);
        icc = NULL;
        icc_size = 0;
    }
    if (!icc && !exif)
        return PF_OK;
    d->meta = pf_jpeg_meta_make(icc, icc_size, exif, exif_size);
    free(icc);
    if (!d->meta) {
        jfail(&d->je, PF_NO_MEMORY, "%s: out of memory for its metadata", d->je.name);
        return PF_NO_MEMORY;
    }
    if (d->orient > 1 && d->meta->exif)
        pf_exif_reset_orientation(d->meta->exif, d->meta->exif_size, at);
    return PF_OK;
}

static int color_space(J_COLOR_SPACE c)
{
    switch (c) {
    case JCS_GRAYSCALE:
        return PF_JPEG_GRAY;
    case JCS_RGB:
        return PF_JPEG_RGB;
    case JCS_YCbCr:
        return PF_JPEG_YCBCR;
    case JCS_CMYK:
        return PF_JPEG_CMYK;
    case JCS_YCCK:
        return PF_JPEG_YCCK;
    default:
        return 0;
    }
}

/* Everything up to the first pixel: header, checks, metadata, output format. */
static int dec_header(dec *d)
{
    if (setjmp(d->je.jb))
        return d->je.status;
    unsigned char head[16];
    size_t got = 0;
    if (d->fp) {
        got = fread(head, 1, sizeof head, d->fp);
        if (ferror(d->fp) || fseek(d->fp, 0, SEEK_SET) != 0) {
            jfail(&d->je, PF_IO, "%s: cannot read: %s", d->je.name, strerror(errno));
            return PF_IO;
        }
    } else {
        got = d->mem_size < sizeof head ? d->mem_size : sizeof head;
        if (got)
            memcpy(head, d->mem, got);
    }
    if (got == 0) {
        jfail(&d->je, PF_IMAGE, "%s: empty file, not a JPEG", d->je.name);
        return PF_IMAGE;
    }
    if (!pf_jpeg_sniff(head, got)) {
        const char *other = other_format(head, got);
        if (got < 3 && head[0] == 0xFF && (got < 2 || head[1] == 0xD8))
            jfail(&d->je, PF_IMAGE,
                  "%s: corrupt JPEG: truncated (%zu bytes: a JPEG's start, "
                  "then nothing)",
                  d->je.name, (size_t)got);
        else if (other)
            jfail(&d->je, PF_IMAGE, "%s: not a JPEG: it is %s", d->je.name, other);
        else
            jfail(&d->je, PF_IMAGE, "%s: not a JPEG (it starts with 0x%02x 0x%02x, not FF D8 FF)",
                  d->je.name, head[0], got > 1 ? head[1] : 0);
        return PF_IMAGE;
    }
    d->ci.err = &d->je.pub;
    jpeg_create_decompress(&d->ci);
    d->created = 1;
    d->progress.progress_monitor = on_progress;
    d->ci.progress = &d->progress;
    if (d->o.max_memory) {
        d->ci.mem->max_memory_to_use =
            (long)(d->o.max_memory > LONG_MAX ? LONG_MAX : d->o.max_memory);
        d->je.limited = 1;
    }
    if (d->fp)
        jpeg_stdio_src(&d->ci, d->fp);
    else
        jpeg_mem_src(&d->ci, d->mem, (unsigned long)d->mem_size);
    jpeg_save_markers(&d->ci, JPEG_APP0 + 1, 0xFFFF); /* the orientation, even when kept */
    if (d->want_meta)
        jpeg_save_markers(&d->ci, JPEG_APP0 + 2, 0xFFFF);
    if (jpeg_read_header(&d->ci, TRUE) != JPEG_HEADER_OK) {
        jfail(&d->je, PF_IMAGE, "%s: corrupt JPEG: tables only, no image", d->je.name);
        return PF_IMAGE;
    }
    struct jpeg_decompress_struct *c = &d->ci;
    pf_jpeg_info *in = &d->info;
    in->stored_width = (int)c->image_width;
    in->stored_height = (int)c->image_height;
    in->components = c->num_components;
    in->color_space = color_space(c->jpeg_color_space);
    in->precision = c->data_precision;
    in->progressive = c->progressive_mode;
    in->arithmetic = c->arith_code;
    in->restart_interval = (int)c->restart_interval;
    if (c->num_components >= 3) {
        int hmax = 1, vmax = 1;
        for (int i = 1; i < c->num_components; i++) {
            hmax = c->comp_info[i].h_samp_factor > hmax ? c->comp_info[i].h_samp_factor : hmax;
            vmax = c->comp_info[i].v_samp_factor > vmax ? c->comp_info[i].v_samp_factor : vmax;
        }
        in->h_samp = c->comp_info[0].h_samp_factor / hmax;
        in->v_samp = c->comp_info[0].v_samp_factor / vmax;
    } else {
        in->h_samp = in->v_samp = 1;
    }
    d->cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
    d->inverted = c->saw_Adobe_marker;
    if (c->num_components != 1 && c->num_components != 3 && !d->cmyk) {
        jfail(&d->je, PF_UNSUPPORTED,
              "%s: a JPEG of %d components in an unknown colour space is "
              "not supported",
              d->je.name, c->num_components);
        return PF_UNSUPPORTED;
    }
    int st = read_markers(d);
    if (st != PF_OK)
        return st;
    int turn = d->orient >= 5;
    in->width = turn ? in->stored_height : in->stored_width;
    in->height = turn ? in->stored_width : in->stored_height;
    in->applied = d->orient > 1;
    unsigned long long px = (unsigned long long)c->image_width * c->image_height;
    if (px > d->o.max_pixels) {
        jfail(&d->je, PF_TOO_LARGE,
              "%s: image is %ux%u = %llu pixels, more than the limit of %llu "
              "(max_pixels, --max-pixels); not decoded",
              d->je.name, c->image_width, c->image_height, px, d->o.max_pixels);
        return PF_TOO_LARGE;
    }
    if (!c->progressive_mode && !c->arith_code && d->src_size) {
        /* every block of a sequential Huffman scan costs at least a DC code and an EOB */
        unsigned long long blocks = 0;
        for (int i = 0; i < c->num_components; i++)
            blocks += (unsigned long long)c->comp_info[i].width_in_blocks *
                      c->comp_info[i].height_in_blocks;
        if (blocks * 2 > d->src_size * 8) {
            jfail(&d->je, PF_IMAGE,
                  "%s: corrupt JPEG: its header claims %ux%u pixels (%llu blocks), more than its "
                  "%llu bytes can hold",
                  d->je.name, c->image_width, c->image_height, blocks, d->src_size);
            return PF_IMAGE;
        }
    }
    if (in->color_space == PF_JPEG_GRAY) {
        c->out_color_space = JCS_GRAYSCALE;
        d->channels = 1;
    } else if (d->cmyk) {
        c->out_color_space = JCS_CMYK;
        d->channels = 3;
    } else {
        c->out_color_space = JCS_RGB;
        d->channels = 3;
    }
    c->dct_method = JDCT_ISLOW;
    c->do_fancy_upsampling = TRUE;
    return PF_OK;
}

static int dec_start(dec *d)
{
    if (setjmp(d->je.jb))
        return d->je.status;
    if (d->cmyk && !(d->row4 = malloc((size_t)d->ci.image_width * 4))) {
        jfail(&d->je, PF_NO_MEMORY, "%s: out of memory", d->je.name);
        return PF_NO_MEMORY;
    }
    jpeg_start_decompress(&d->ci);
    d->started = 1;
    return PF_OK;
}

static void cmyk_to_rgb(const unsigned char *in, unsigned char *out, int w, int inverted)
{
    for (int x = 0; x < w; x++, in += 4, out += 3) {
        unsigned k = inverted ? in[3] : 255u - in[3];
        for (int i = 0; i < 3; i++) {
            unsigned v = inverted ? in[i] : 255u - in[i];
            out[i] = (unsigned char)((v * k + 127) / 255);
        }
    }
}

static void mirror_row(unsigned char *row, int w, int ch)
{
    for (int a = 0, b = w - 1; a < b; a++, b--)
        for (int i = 0; i < ch; i++) {
            unsigned char t = row[a * ch + i];
            row[a * ch + i] = row[b * ch + i];
            row[b * ch + i] = t;
        }
}

/* The next n stored rows into rows 0..n-1 of dst (mirrored for orientation 2); after the
   last, the rest of the file. */
static int dec_rows(dec *d, const pf_frame *dst, int n, int mirror)
{
    if (setjmp(d->je.jb))
        return d->je.status;
    for (int k = 0; k < n; k++) {
        unsigned char *row = (unsigned char *)dst->data + (size_t)k * dst->pitch;
        JSAMPROW rp = d->cmyk ? d->row4 : row;
        if (jpeg_read_scanlines(&d->ci, &rp, 1) != 1) {
            jfail(&d->je, PF_IMAGE, "%s: corrupt JPEG: no data for row %d", d->je.name, d->y);
            return PF_IMAGE;
        }
        if (d->cmyk)
            cmyk_to_rgb(d->row4, row, (int)d->ci.output_width, d->inverted);
        if (mirror)
            mirror_row(row, (int)d->ci.output_width, d->channels);
        d->y++;
    }
    if (d->y == (int)d->ci.output_height && !d->finished) {
        d->finished = 1;
        jpeg_finish_decompress(&d->ci); /* to EOI: a file cut in a later scan fails here */
    }
    return PF_OK;
}

/* dst (w x h of the display) from src (the stored rows) by EXIF orientation o. */
static void orient_frame(const pf_frame *src, pf_frame *dst, int o, int ch)
{
    const int w = src->width, h = src->height;
    for (int y = 0; y < dst->height; y++) {
        unsigned char *out = (unsigned char *)dst->data + (size_t)y * dst->pitch;
        for (int x = 0; x < dst->width; x++, out += ch) {
            int sx, sy;
            switch (o) {
            case 2:
                sx = w - 1 - x, sy = y;
                break;
            case 3:
                sx = w - 1 - x, sy = h - 1 - y;
                break;
            case 4:
                sx = x, sy = h - 1 - y;
                break;
            case 5:
                sx = y, sy = x;
                break;
            case 6:
                sx = y, sy = h - 1 - x;
                break;
            case 7:
                sx = w - 1 - y, sy = h - 1 - x;
                break;
            case 8:
                sx = w - 1 - y, sy = x;
                break;
            default:
                sx = x, sy = y;
                break;
            }
            const unsigned char *in =
                (const unsigned char *)src->data + (size_t)sy * src->pitch + (size_t)sx * ch;
            memcpy(out, in, (size_t)ch);
        }
    }
}

static int dec_whole(dec *d, pf_frame *out)
{
    int st = dec_header(d);
    if (st == PF_OK)
        st = dec_start(d);
    if (st != PF_OK)
        return st;
    const int w = (int)d->ci.output_width, h = (int)d->ci.output_height;
    pf_frame rows = {0};
    int direct = d->orient <= 2;
    st = pf_frame_alloc(direct ? out : &rows, w, h, PF_U8, d->channels);
    if (st == PF_OK)
        st = dec_rows(d, direct ? out : &rows, h, d->orient == 2);
    else
        jfail(&d->je, st, "%s: out of memory for a %dx%d image", d->je.name, w, h);
    if (st == PF_OK && !direct) {
        st = pf_frame_alloc(out, d->info.width, d->info.height, PF_U8, d->channels);
        if (st == PF_OK)
            orient_frame(&rows, out, d->orient, d->channels);
        else
            jfail(&d->je, st, "%s: out of memory for a %dx%d image", d->je.name, w, h);
    }
    pf_frame_free(&rows);
    if (st != PF_OK)
        pf_frame_free(out);
    return st;
}

static int read_common(dec *d, pf_frame *out, pf_jpeg_info *info, pf_jpeg_meta **meta)
{
    int st = dec_whole(d, out);
    if (info)
        *info = d->info;
    if (st == PF_OK && meta) {
        *meta = d->meta;
        d->meta = NULL;
    }
    dec_free(d);
    return st;
}

static FILE *open_source(dec *d, const char *path)
{
    FILE *fp = fopen(path, "rbe");
    if (!fp) {
        jfail(&d->je, PF_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(fp), &st) == 0 && S_ISDIR(st.st_mode)) {
        jfail(&d->je, PF_IO, "%s: cannot read: %s", path, strerror(EISDIR));
        fclose(fp);
        return NULL;
    }
    if (S_ISREG(st.st_mode))
        d->src_size = (unsigned long long)st.st_size;
    return fp;
}

PF_API int pf_jpeg_read(const char *path, const pf_jpeg_read_opts *opts, pf_frame *out,
                        pf_jpeg_info *info, pf_jpeg_meta **meta, char *err, size_t err_size)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (info)
        memset(info, 0, sizeof *info);
    if (meta)
        *meta = NULL;
    if (!path || !out) {
        set_err(err, err_size, "pf_jpeg_read: %s is NULL", path ? "out" : "path");
        return PF_INVALID_ARGUMENT;
    }
    dec d;
    dec_init(&d, path, opts, err, err_size);
    d.want_meta = meta != NULL;
    if (!(d.fp = open_source(&d, path)))
        return d.je.status;
    int st = read_common(&d, out, info, meta);
    fclose(d.fp);
    return st;
}

PF_API int pf_jpeg_read_memory(const void *data, size_t size, const char *name,
                               const pf_jpeg_read_opts *opts, pf_frame *out, pf_jpeg_info *info,
                               pf_jpeg_meta **meta, char *err, size_t err_size)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (info)
        memset(info, 0, sizeof *info);
    if (meta)
        *meta = NULL;
    if (!name)
        name = "<memory>";
    if (!out || (!data && size)) {
        set_err(err, err_size, "%s: pf_jpeg_read_memory: %s is NULL", name, out ? "data" : "out");
        return PF_INVALID_ARGUMENT;
    }
    dec d;
    dec_init(&d, name, opts, err, err_size);
    d.want_meta = meta != NULL;
    d.mem = data;
    d.mem_size = size;
    d.src_size = size;
    return read_common(&d, out, info, meta);
}

PF_API int pf_jpeg_read_header(const char *path, const pf_jpeg_read_opts *opts, pf_jpeg_info *info,
                               char *err, size_t err_size)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (!path || !info) {
        set_err(err, err_size, "pf_jpeg_read_header: %s is NULL", path ? "info" : "path");
        return PF_INVALID_ARGUMENT;
    }
    dec d;
    dec_init(&d, path, opts, err, err_size);
    if (!(d.fp = open_source(&d, path)))
        return d.je.status;
    int st = dec_header(&d);
    *info = d.info;
    dec_free(&d);
    fclose(d.fp);
    return st;
}

PF_API int pf_jpeg_read_header_memory(const void *data, size_t size, const char *name,
                                      const pf_jpeg_read_opts *opts, pf_jpeg_info *info, char *err,
                                      size_t err_size)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (!name)
        name = "<memory>";
    if (!info || (!data && size)) {
        set_err(err, err_size, "%s: pf_jpeg_read_header_memory: %s is NULL", name,
                info ? "data" : "info");
        return PF_INVALID_ARGUMENT;
    }
    dec d;
    dec_init(&d, name, opts, err, err_size);
    d.mem = data;
    d.mem_size = size;
    d.src_size = size;
    int st = dec_header(&d);
    *info = d.info;
    dec_free(&d);
    return st;
}

/* ---- Reading by rows ---------------------------------------------------------------------------- */

struct pf_jpeg_rows {
    dec d;
    char *path;
};

PF_API int pf_jpeg_rows_open(const char *path, const pf_jpeg_read_opts *opts, pf_jpeg_rows **out,
                             pf_frame *format, pf_jpeg_info *info, pf_jpeg_meta **meta, char *err,
                             size_t err_size)
{
    if (out)
        *out = NULL;
    if (format)
        memset(format, 0, sizeof *format);
    if (info)
        memset(info, 0, sizeof *info);
    if (meta)
        *meta = NULL;
    if (!path || !out || !format) {
        set_err(err, err_size, "pf_jpeg_rows_open: %s is NULL",
                !path  ? "path"
                : !out ? "out"
                       : "format");
        return PF_INVALID_ARGUMENT;
    }
    pf_jpeg_rows *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        set_err(err, err_size, "%s: out of memory", path);
        return PF_NO_MEMORY;
    }
    dec *d = &r->d;
    dec_init(d, r->path, opts, err, err_size);
    d->want_meta = meta != NULL;
    int st = (d->fp = open_source(d, path)) ? PF_OK : d->je.status;
    if (st == PF_OK)
        st = dec_header(d);
    if (st == PF_OK && d->orient > 2) {
        jfail(&d->je, PF_UNSUPPORTED,
              "%s: its EXIF orientation (%d) turns or flips the image vertically: its rows "
              "cannot be read in order (read it whole)",
              path, d->orient);
        st = PF_UNSUPPORTED;
    }
    if (st == PF_OK)
        st = dec_start(d);
    if (info)
        *info = d->info;
    if (st != PF_OK) {
        pf_jpeg_rows_close(r);
        return st;
    }
    *format = (pf_frame){NULL,  d->info.width, d->info.height, (size_t)d->info.width * d->channels,
                         PF_U8, d->channels};
    if (meta) {
        *meta = d->meta;
        d->meta = NULL;
    }
    *out = r;
    return PF_OK;
}

PF_API int pf_jpeg_rows_read(pf_jpeg_rows *r, pf_frame *dst, int n, char *err, size_t err_size)
{
    if (!r || !dst || !dst->data || n < 0) {
        set_err(err, err_size, "pf_jpeg_rows_read: %s", !r ? "rows is NULL" : "no frame");
        return PF_INVALID_ARGUMENT;
    }
    dec *d = &r->d;
    if (d->je.status != PF_OK) {
        set_err(err, err_size, "%s: an earlier read failed", r->path);
        return d->je.status;
    }
    if (n > d->info.height - d->y || dst->width != d->info.width || dst->channels != d->channels ||
        dst->sample != PF_U8 || dst->pitch < (size_t)dst->width * d->channels) {
        set_err(err, err_size,
                "%s: pf_jpeg_rows_read: %d rows from row %d into a %dx%d frame of %d "
                "channels (the image is %dx%d, %d channels, u8)",
                r->path, n, d->y, dst->width, dst->height, dst->channels, d->info.width,
                d->info.height, d->channels);
        return PF_INVALID_ARGUMENT;
    }
    d->je.err = err;
    d->je.err_size = err_size;
    return dec_rows(d, dst, n, d->orient == 2);
}

PF_API int pf_jpeg_rows_done(const pf_jpeg_rows *r)
{
    return r ? r->d.y : 0;
}

PF_API void pf_jpeg_rows_close(pf_jpeg_rows *r)
{
    if (!r)
        return;
    dec_free(&r->d);
    if (r->d.fp)
        fclose(r->d.fp);
    free(r->path);
    free(r);
}

/* ---- Writing ----------------------------------------------------------------------------------- */

struct pf_jpeg_writer {
    jerr je;
    struct jpeg_compress_struct ci;
    struct jpeg_destination_mgr dest;
    int created;
    FILE *fp;           /* the output, or */
    unsigned char *mem; /* a growing buffer (pf_jpeg_encode) */
    size_t mem_len, mem_cap;
    unsigned char *buf; /* stdio: what the destination fills */
    pf_frame fmt;
    int in_ch;          /* 1 or 3 */
    int direct;         /* u8 rows of 1 or 3 channels go to libjpeg as they are */
    unsigned char *row; /* otherwise converted here */
    int y;
};

static void dest_init(j_compress_ptr c)
{
    (void)c;
}

static boolean dest_empty(j_compress_ptr c)
{
    pf_jpeg_writer *w = (pf_jpeg_writer *)c->client_data;
    if (w->fp) {
        if (fwrite(w->buf, 1, PF_JPEG_OUT_BUF, w->fp) != PF_JPEG_OUT_BUF) {
            jfail(&w->je, PF_IO, "%s: write error: %s", w->je.name, strerror(errno ? errno : EIO));
            longjmp(w->je.jb, 1);
        }
        w->dest.next_output_byte = w->buf;
        w->dest.free_in_buffer = PF_JPEG_OUT_BUF;
        return TRUE;
    }
    /* memory: the whole buffer is full; double it */
    size_t cap = w->mem_cap * 2;
    unsigned char *g = realloc(w->mem, cap);
    if (!g) {
        jfail(&w->je, PF_NO_MEMORY, "%s: out of memory", w->je.name);
        longjmp(w->je.jb, 1);
    }
    w->mem = g;
    w->dest.next_output_byte = g + w->mem_cap;
    w->dest.free_in_buffer = cap - w->mem_cap;
    w->mem_cap = cap;
    return TRUE;
}

static void dest_term(j_compress_ptr c)
{
    pf_jpeg_writer *w = (pf_jpeg_writer *)c->client_data;
    if (w->fp) {
        size_t n = PF_JPEG_OUT_BUF - w->dest.free_in_buffer;
        if (n && fwrite(w->buf, 1, n, w->fp) != n) {
            jfail(&w->je, PF_IO, "%s: write error: %s", w->je.name, strerror(errno ? errno : EIO));
            longjmp(w->je.jb, 1);
        }
    } else {
        w->mem_len = w->mem_cap - w->dest.free_in_buffer;
    }
}

static int check_frame(const char *name, const pf_frame *f, const pf_jpeg_write_opts *o, char *err,
                       size_t err_size)
{
    if (f->sample != PF_U8 && f->sample != PF_U16 && f->sample != PF_F32) {
        set_err(err, err_size, "%s: cannot write samples of type %d", name, (int)f->sample);
        return PF_INVALID_ARGUMENT;
    }
    if (f->channels < 1 || f->channels > 4) {
        set_err(err, err_size,
                "%s: cannot write %d channels: JPEG takes 1 to 4 (gray, "
                "gray+alpha, RGB, RGBA)",
                name, f->channels);
        return PF_INVALID_ARGUMENT;
    }
    if (f->width <= 0 || f->height <= 0 || f->width > JPEG_MAX_DIMENSION ||
        f->height > JPEG_MAX_DIMENSION) {
        set_err(err, err_size, "%s: cannot write a %dx%d frame: JPEG holds 1 to %d pixels a side",
                name, f->width, f->height, (int)JPEG_MAX_DIMENSION);
        return PF_INVALID_ARGUMENT;
    }
    if (o->quality < 0 || o->quality > 100) {
        set_err(err, err_size, "%s: JPEG quality %d is out of range [1, 100]", name, o->quality);
        return PF_INVALID_ARGUMENT;
    }
    if (o->subsampling < PF_JPEG_420 || o->subsampling > PF_JPEG_440) {
        set_err(err, err_size, "%s: unknown chroma subsampling %d", name, o->subsampling);
        return PF_INVALID_ARGUMENT;
    }
    return PF_OK;
}

static void write_exif(j_compress_ptr c, const pf_jpeg_meta *m)
{
    static const unsigned char prefix[6] = {'E', 'x', 'i', 'f', 0, 0};
    jpeg_write_m_header(c, JPEG_APP0 + 1, (unsigned)(m->exif_size + 6));
    for (int i = 0; i < 6; i++)
        jpeg_write_m_byte(c, prefix[i]);
    for (size_t i = 0; i < m->exif_size; i++)
        jpeg_write_m_byte(c, m->exif[i]);
}

static int writer_start(pf_jpeg_writer *w, const pf_jpeg_write_opts *o, const pf_jpeg_meta *meta)
{
    if (setjmp(w->je.jb))
        return w->je.status;
    struct jpeg_compress_struct *c = &w->ci;
    c->err = &w->je.pub;
    jpeg_create_compress(c);
    w->created = 1;
    c->client_data = w;
    w->dest.init_destination = dest_init;
    w->dest.empty_output_buffer = dest_empty;
    w->dest.term_destination = dest_term;
    if (w->fp) {
        w->dest.next_output_byte = w->buf;
        w->dest.free_in_buffer = PF_JPEG_OUT_BUF;
    } else {
        w->dest.next_output_byte = w->mem;
        w->dest.free_in_buffer = w->mem_cap;
    }
    c->dest = &w->dest;
    c->image_width = (JDIMENSION)w->fmt.width;
    c->image_height = (JDIMENSION)w->fmt.height;
    c->input_components = w->in_ch;
    c->in_color_space = w->in_ch == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(c);
    jpeg_set_quality(c, o->quality ? o->quality : PF_JPEG_DEFAULT_QUALITY, TRUE);
    if (w->in_ch == 3) {
        static const int hv[4][2] = {{2, 2}, {2, 1}, {1, 1}, {1, 2}};
        c->comp_info[0].h_samp_factor = hv[o->subsampling][0];
        c->comp_info[0].v_samp_factor = hv[o->subsampling][1];
        for (int i = 1; i < 3; i++)
            c->comp_info[i].h_samp_factor = c->comp_info[i].v_samp_factor = 1;
    }
    c->dct_method = JDCT_ISLOW;
    c->optimize_coding = o->optimize ? TRUE : FALSE;
    if (o->progressive)
        jpeg_simple_progression(c);
    int exif = meta && meta->exif_size && meta->exif_size + 6 <= 65533;
    c->write_JFIF_header = exif ? FALSE : TRUE; /* EXIF's APP1 comes first after SOI */
    jpeg_start_compress(c, TRUE);
    if (exif)
        write_exif(c, meta);
    const char *space = pf_jpeg_meta_icc_space(meta);
    if (meta && meta->icc_size && strcmp(space, w->in_ch == 1 ? "GRAY" : "RGB ") == 0)
        jpeg_write_icc_profile(c, meta->icc, (unsigned)meta->icc_size);
    return PF_OK;
}

/* opts->size: 0 (the whole struct) or at least through quality, the first option (an
   older caller's struct ends later, a newer one's is read as far as this one goes). */
static int write_opts_size_ok(const char *name, const pf_jpeg_write_opts *opts, char *err,
                              size_t err_size)
{
    const size_t least = offsetof(pf_jpeg_write_opts, quality) + sizeof opts->quality;
    if (!opts || !opts->size || opts->size >= least)
        return 1;
    set_err(err, err_size,
            "%s: pf_jpeg_write_opts.size is %zu, less than any such struct (%zu and more); set "
            "it to sizeof(pf_jpeg_write_opts)",
            name, opts->size, least);
    return 0;
}

static int writer_new(const char *name, const pf_frame *format, const pf_jpeg_write_opts *opts,
                      pf_jpeg_write_opts *o, pf_jpeg_writer **out, char *err, size_t err_size)
{
    if (!write_opts_size_ok(name, opts, err, err_size))
        return PF_INVALID_ARGUMENT;
    memset(o, 0, sizeof *o);
    if (opts) {
        size_t n = opts->size && opts->size < sizeof *o ? opts->size : sizeof *o;
        memcpy(o, opts, n);
    }
    o->size = sizeof *o;
    int st = check_frame(name, format, o, err, err_size);
    if (st != PF_OK)
        return st;
    pf_jpeg_writer *w = calloc(1, sizeof *w);
    if (!w) {
        set_err(err, err_size, "%s: out of memory", name);
        return PF_NO_MEMORY;
    }
    jerr_init(&w->je, name, err, err_size);
    w->fmt = *format;
    w->fmt.data = NULL;
    w->in_ch = format->channels <= 2 ? 1 : 3;
    w->direct = format->sample == PF_U8 && (format->channels == 1 || format->channels == 3);
    if (!w->direct && !(w->row = malloc((size_t)format->width * 3))) {
        free(w);
        set_err(err, err_size, "%s: out of memory", name);
        return PF_NO_MEMORY;
    }
    *out = w;
    return PF_OK;
}

PF_API void pf_jpeg_writer_abort(pf_jpeg_writer *w)
{
    if (!w)
        return;
    if (w->created)
        jpeg_destroy_compress(&w->ci);
    free(w->row);
    free(w->buf);
    free(w->mem);
    free(w);
}

PF_API int pf_jpeg_writer_begin(FILE *fp, const char *name, const pf_frame *format,
                                const pf_jpeg_write_opts *opts, const pf_jpeg_meta *meta,
                                pf_jpeg_writer **out, char *err, size_t err_size)
{
    if (out)
        *out = NULL;
    if (!name)
        name = "<stream>";
    if (!fp || !format || !out) {
        set_err(err, err_size, "%s: pf_jpeg_writer_begin: %s is NULL", name,
                !fp       ? "fp"
                : !format ? "format"
                          : "out");
        return PF_INVALID_ARGUMENT;
    }
    pf_jpeg_write_opts o;
    pf_jpeg_writer *w;
    int st = writer_new(name, format, opts, &o, &w, err, err_size);
    if (st != PF_OK)
        return st;
    w->fp = fp;
    if (!(w->buf = malloc(PF_JPEG_OUT_BUF))) {
        pf_jpeg_writer_abort(w);
        set_err(err, err_size, "%s: out of memory", name);
        return PF_NO_MEMORY;
    }
    if ((st = writer_start(w, &o, meta)) != PF_OK) {
        pf_jpeg_writer_abort(w);
        return st;
    }
    *out = w;
    return PF_OK;
}

static inline unsigned char to8(const pf_frame *f, const unsigned char *row, int i)
{
    if (f->sample == PF_U8)
        return row[i];
    if (f->sample == PF_U16) {
        uint16_t v;
        memcpy(&v, row + 2 * (size_t)i, 2);
        return (unsigned char)(((uint32_t)v * 255u + 32767u) / 65535u);
    }
    float v;
    memcpy(&v, row + 4 * (size_t)i, 4);
    if (!(v > 0.0f)) /* NaN too */
        return 0;
    if (v >= 1.0f)
        return 255;
    return (unsigned char)(v * 255.0f + 0.5f);
}

/* A row of f in libjpeg's format: 8 bits, alpha composited onto white. */
static void convert_row(const pf_frame *f, const unsigned char *in, unsigned char *out)
{
    const int ch = f->channels, cc = ch <= 2 ? 1 : 3, alpha = ch == 2 || ch == 4;
    for (int x = 0; x < f->width; x++) {
        unsigned a = alpha ? to8(f, in, x * ch + cc) : 255;
        for (int i = 0; i < cc; i++) {
            unsigned v = to8(f, in, x * ch + i);
            out[x * cc + i] =
                (unsigned char)(alpha ? (v * a + 255u * (255u - a) + 127u) / 255u : v);
        }
    }
}

PF_API int pf_jpeg_writer_rows(pf_jpeg_writer *w, const pf_frame *rows, int n, char *err,
                               size_t err_size)
{
    if (!w || !rows || !rows->data || n < 0) {
        set_err(err, err_size, "pf_jpeg_writer_rows: %s", !w ? "writer is NULL" : "no rows");
        return PF_INVALID_ARGUMENT;
    }
    if (w->je.status != PF_OK) {
        set_err(err, err_size, "%s: an earlier write failed", w->je.name);
        return w->je.status;
    }
    if (n > w->fmt.height - w->y || rows->width != w->fmt.width ||
        rows->channels != w->fmt.channels || rows->sample != w->fmt.sample) {
        set_err(err, err_size,
                "%s: pf_jpeg_writer_rows: %d rows of %d pixels, %d channels, "
                "from row %d (the image: %dx%d, %d channels)",
                w->je.name, n, rows->width, rows->channels, w->y, w->fmt.width, w->fmt.height,
                w->fmt.channels);
        return PF_INVALID_ARGUMENT;
    }
    w->je.err = err;
    w->je.err_size = err_size;
    if (setjmp(w->je.jb))
        return w->je.status;
    for (int k = 0; k < n; k++) {
        const unsigned char *in = (const unsigned char *)rows->data + (size_t)k * rows->pitch;
        JSAMPROW rp = (JSAMPROW)in;
        if (!w->direct) {
            convert_row(&w->fmt, in, w->row);
            rp = w->row;
        }
        jpeg_write_scanlines(&w->ci, &rp, 1);
        w->y++;
    }
    return PF_OK;
}

/* finish without freeing (pf_jpeg_encode takes the buffer after it) */
static int writer_end(pf_jpeg_writer *w)
{
    if (setjmp(w->je.jb))
        return w->je.status;
    if (w->y != w->fmt.height) {
        jfail(&w->je, PF_INVALID_ARGUMENT, "%s: finished after %d of its %d rows", w->je.name, w->y,
              w->fmt.height);
        return PF_INVALID_ARGUMENT;
    }
    jpeg_finish_compress(&w->ci);
    return PF_OK;
}

PF_API int pf_jpeg_writer_finish(pf_jpeg_writer *w, char *err, size_t err_size)
{
    if (!w) {
        set_err(err, err_size, "pf_jpeg_writer_finish: writer is NULL");
        return PF_INVALID_ARGUMENT;
    }
    w->je.err = err;
    w->je.err_size = err_size;
    int st = w->je.status != PF_OK ? w->je.status : writer_end(w);
    pf_jpeg_writer_abort(w);
    return st;
}

PF_API int pf_jpeg_encode(const pf_frame *f, const pf_jpeg_write_opts *opts,
                          const pf_jpeg_meta *meta, void **out, size_t *out_size, char *err,
                          size_t err_size)
{
    if (out)
        *out = NULL;
    if (out_size)
        *out_size = 0;
    if (!f || !f->data || !out || !out_size) {
        set_err(err, err_size, "pf_jpeg_encode: %s is NULL",
                !f         ? "frame"
                : !f->data ? "the frame's data"
                           : "out");
        return PF_INVALID_ARGUMENT;
    }
    pf_jpeg_write_opts o;
    pf_jpeg_writer *w;
    int st = writer_new("<memory>", f, opts, &o, &w, err, err_size);
    if (st != PF_OK)
        return st;
    w->mem_cap = 65536;
    if (!(w->mem = malloc(w->mem_cap))) {
        pf_jpeg_writer_abort(w);
        set_err(err, err_size, "<memory>: out of memory");
        return PF_NO_MEMORY;
    }
    st = writer_start(w, &o, meta);
    if (st == PF_OK)
        st = pf_jpeg_writer_rows(w, f, f->height, err, err_size);
    if (st == PF_OK)
        st = writer_end(w);
    if (st == PF_OK) {
        *out = w->mem;
        *out_size = w->mem_len;
        w->mem = NULL;
    }
    pf_jpeg_writer_abort(w);
    return st;
}

PF_API int pf_jpeg_write(const char *path, const pf_frame *f, const pf_jpeg_write_opts *opts,
                         const pf_jpeg_meta *meta, char *err, size_t err_size)
{
    if (!path || !f || !f->data) {
        set_err(err, err_size, "pf_jpeg_write: %s is NULL",
                !path ? "path"
                : !f  ? "frame"
                      : "the frame's data");
        return PF_INVALID_ARGUMENT;
    }
    pf_jpeg_write_opts o = {0};
    if (!write_opts_size_ok(path, opts, err, err_size))
        return PF_INVALID_ARGUMENT;
    if (opts) {
        size_t n = opts->size && opts->size < sizeof o ? opts->size : sizeof o;
        memcpy(&o, opts, n);
    }
    int st = check_frame(path, f, &o, err, err_size);
    if (st != PF_OK)
        return st;
    char *tmp = NULL;
    FILE *fp = NULL;
    st = pf_safe_open(path, &tmp, &fp, err, err_size);
    if (st != PF_OK)
        return st;
    pf_jpeg_writer *w = NULL;
    st = pf_jpeg_writer_begin(fp, path, f, &o, meta, &w, err, err_size);
    if (st == PF_OK)
        st = pf_jpeg_writer_rows(w, f, f->height, err, err_size);
    if (st == PF_OK)
        st = pf_jpeg_writer_finish(w, err, err_size);
    else
        pf_jpeg_writer_abort(w);
    st = pf_safe_close(path, tmp, fp, st, err, err_size);
    return st;
}
