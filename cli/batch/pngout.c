/* cli/batch/pngout.c: a PNG output: libpng's header and metadata chunks for the output's form, its
 * rows a band at a time (large images deflated in segments, png_deflate.h), and a table
 * output's CSV or JSON. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <png.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "batch.h"
#include "pngout.h"
#include "images.h"
#include "png_deflate.h" /* engine/: exported, not installed */

/* ---- PNG ----------------------------------------------------------------------------------------- */

static void png_err_fn(png_structp png, png_const_charp msg)
{
    png_out *w = png_get_error_ptr(png);
    if (!w->err[0])
        snprintf(w->err, w->errn, "cannot write PNG: %s", msg);
    longjmp(w->jmp, 1);
}

/* libpng's own writer says only "Write Error": ours keeps the reason (a full disk, a
   file size limit), as the tables' writes do. */
static void png_write_fn(png_structp png, png_bytep data, size_t n)
{
    png_out *w = png_get_error_ptr(png);
    if (fwrite(data, 1, n, png_get_io_ptr(png)) != n) {
        if (!w->err[0])
            snprintf(w->err, w->errn, "write error: %s", strerror(errno ? errno : EIO));
        png_error(png, "write error");
    }
}

/* stdio's buffer is flushed, checked and synced when the file is committed. */
static void png_flush_fn(png_structp png)
{
    (void)png;
}

static void png_warn_fn(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* The metadata chunks an input may carry to its outputs (pf_png_read_meta keeps these),
   five bytes each as png_set_keep_unknown_chunks wants them. */
static const png_byte meta_names[] = "gAMA\0cHRM\0sRGB\0iCCP\0sBIT\0pHYs\0tEXt\0zTXt\0iTXt";
#define META_NAMES 9

/* Whether the input's chunk `name` still describes the image written (pk: its colour
   type and depth): pf_png_write_opts' rules (pipefuse/png.h). gAMA, cHRM and sRGB say how
   stored values encode colour, and stages work on stored values; text is about the
   picture: kept. An ICC profile is for gray or for colour data: kept while the output
   is of the input's kind (a palette is colour). sBIT holds for the input's colour type
   and depth: kept when those written are the same. pHYs is the density of the input's
   pixels: it->phys says whether it is kept at the same size, carried through the
   output's geometry (phys gets the chunk written) or dropped. */
static int meta_applies(const char *name, const out_item *it, const pf_png_packed *pk,
                        unsigned char phys[9])
{
    const pf_png_info *src = it->src;
    if (!memcmp(name, "iCCP", 4))
        return !(src->color_type & PNG_COLOR_MASK_COLOR) ==
               !(pk->color_type & PNG_COLOR_MASK_COLOR);
    if (!memcmp(name, "sBIT", 4))
        return src->color_type == pk->color_type && src->bit_depth == pk->bit_depth;
    if (!memcmp(name, "pHYs", 4))
        return it->phys != OUT_PHYS_DROP &&
               pf_png_meta_phys(it->meta, it->phys == OUT_PHYS_GEOMETRY ? &it->geometry : NULL,
                                pk->width, pk->height, phys);
    return 1;
}

/* Hands libpng the chunks of the input's meta that apply to the image written, all
   before the image data (text may go anywhere; colour and density must). libpng copies
   each chunk; a failure longjmps. */
static void set_meta(png_structp png, png_infop info, const out_item *it, const pf_png_packed *pk)
{
    int n = pf_png_meta_count(it->meta), any = 0;
    for (int i = 0; i < n; i++) {
        const void *data;
        size_t size;
        unsigned char phys[9];
        const char *name = pf_png_meta_chunk(it->meta, i, &data, &size);
        if (!name || !meta_applies(name, it, pk, phys))
            continue;
        if (!memcmp(name, "pHYs", 4))
            data = phys, size = sizeof phys; /* scaled or swapped */
        if (!any) /* gAMA and the others are known chunks: written only when asked for */
            png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, meta_names, META_NAMES);
        any = 1;
        png_unknown_chunk c;
        memset(&c, 0, sizeof c);
        memcpy(c.name, name, 4);
        c.data = (png_byte *)data; /* libpng copies it */
        c.size = size;
        c.location = PNG_HAVE_IHDR;
        png_set_unknown_chunks(png, info, &c, 1); /* appends */
    }
}

/* A JPEG input's ICC profile (iCCP, deflated here) while it is of f's colour kind, and
   its EXIF (eXIf), for a PNG output: written raw as the PNG chunks above are, so that a
   profile libpng would find fault with cannot fail the file. */
static void set_jpeg_meta(png_structp png, png_infop info, const pf_jpeg_meta *jm,
                          const pf_png_packed *pk)
{
    const int gray = !(pk->color_type & PNG_COLOR_MASK_COLOR);
    static const png_byte names[] = "iCCP\0eXIf";
    const void *d;
    size_t n;
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, names, 2);
    const char *space = pf_jpeg_meta_icc_space(jm);
    if (pf_jpeg_meta_icc(jm, &d, &n) && strcmp(space, gray ? "GRAY" : "RGB ") == 0) {
        static const char key[] = "ICC profile"; /* keyword, NUL, method 0, zlib data */
        uLongf zn = compressBound((uLong)n);
        png_byte *c = malloc(sizeof key + 1 + zn);
        if (c && compress2(c + sizeof key + 1, &zn, d, (uLong)n, 6) == Z_OK) {
            memcpy(c, key, sizeof key);
            c[sizeof key] = 0;
            png_unknown_chunk u = {
                .data = c, .size = sizeof key + 1 + zn, .location = PNG_HAVE_IHDR};
            memcpy(u.name, "iCCP", 5);
            png_set_unknown_chunks(png, info, &u, 1); /* copied; a failure longjmps */
        }
        free(c);
    }
    if (pf_jpeg_meta_exif(jm, &d, &n)) {
        png_unknown_chunk u = {.data = (png_byte *)d, .size = n, .location = PNG_HAVE_IHDR};
        memcpy(u.name, "eXIf", 5);
        png_set_unknown_chunks(png, info, &u, 1);
    }
}

void pngout_drop(png_out *w)
{
    pf_pngz_free(w->z);
    w->z = NULL;
    if (w->png)
        png_destroy_write_struct(&w->png, w->info ? &w->info : NULL);
    w->png = NULL;
    w->info = NULL;
    pf_png_packed_free(&w->pk);
    pf_png_packed_free(&w->band);
}

/* Forms that look at every pixel before the first row is written. */
int whole_form(int form)
{
    return form == PF_PNG_FORM_AUTO || form == PF_PNG_FORM_PALETTE;
}

/* w->pk for item it's form: for auto and palette from the whole image f, else IHDR's
   fields only (the gray forms are checked on f's first row and packed by pngout_rows). */
int pngout_form(png_out *w, const pf_frame *f, const out_item *it, char *err, size_t errn)
{
    w->form =
        it->png_form > 0 && it->png_form <= PF_PNG_FORM_GRAY4 ? it->png_form : PF_PNG_FORM_FRAME;
    pf_frame head = *f;
    if (!whole_form(w->form))
        head.height = 1;
    char e[512] = "";
    if (pf_png_pack(&head, (pf_png_form)w->form, it->meta, &w->pk, e, sizeof e) != PF_OK) {
        snprintf(err, errn, "cannot write PNG: %s", e);
        return -1;
    }
    const void *icc;
    size_t icc_n;
    if (w->form == PF_PNG_FORM_AUTO && it->jmeta && pf_jpeg_meta_icc(it->jmeta, &icc, &icc_n) &&
        !(w->pk.color_type & PNG_COLOR_MASK_COLOR) != (f->channels <= 2)) {
        /* a JPEG input's ICC profile is for gray or colour as the frame is: auto may not
           trade them (as for a PNG input's iCCP), and the frame's own form is lossless */
        pf_png_packed_free(&w->pk);
        w->form = PF_PNG_FORM_FRAME;
        if (pf_png_pack(f, PF_PNG_FORM_FRAME, NULL, &w->pk, e, sizeof e) != PF_OK) {
            snprintf(err, errn, "cannot write PNG: %s", e);
            return -1;
        }
    }
    if (!whole_form(w->form)) {
        pf_png_packed_free(&w->pk); /* the header's fields stay */
        w->pk.height = f->height;
    }
    return 0;
}

/* Starts a PNG of f's size and format on fp in item it's form: header and metadata
   chunks. For auto and palette f's data is the whole image, read now. */
/* The segments' writes (png_deflate.h): to the file, the reason kept as png_write_fn's. */
static int z_write(void *ctx, const void *data, size_t n)
{
    png_out *w = ctx;
    if (fwrite(data, 1, n, w->fp) == n)
        return 0;
    if (!w->err[0])
        snprintf(w->err, w->errn, "write error: %s", strerror(errno ? errno : EIO));
    return -1;
}

/* PNG's samples a pixel for a colour type. */
static int png_channels(int color_type)
{
    return color_type == PNG_COLOR_TYPE_RGB_ALPHA ? 4
           : color_type == PNG_COLOR_TYPE_RGB     ? 3
           : color_type == PNG_COLOR_TYPE_GA      ? 2
                                                  : 1;
}

int pngout_begin(png_out *w, FILE *fp, const pf_frame *f, int zlib, int filter, int threads,
                 const out_item *it, char *err, size_t errn)
{
    if ((f->sample != PF_U8 && f->sample != PF_U16) || f->channels < 1 || f->channels > 4) {
        snprintf(err, errn, "cannot write PNG: %d channels of %s samples", f->channels,
                 f->sample == PF_F32 ? "f32" : "unknown");
        return -1;
    }
    memset(w, 0, sizeof *w);
    w->err = err;
    w->errn = errn;
    if (pngout_form(w, f, it, err, errn) != 0)
        return -1;
    const pf_png_packed *pk = &w->pk;
    w->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, w, png_err_fn, png_warn_fn);
    w->info = w->png ? png_create_info_struct(w->png) : NULL;
    if (!w->png || !w->info) {
        pngout_drop(w);
        snprintf(err, errn, "out of memory starting libpng");
        return -1;
    }
    if (setjmp(w->jmp))
        return -1;
    png_set_write_fn(w->png, fp, png_write_fn, png_flush_fn);
    png_set_user_limits(w->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_set_compression_level(w->png, zlib);
    png_set_filter(w->png, PNG_FILTER_TYPE_BASE, filter);
    png_set_IHDR(w->png, w->info, (png_uint_32)f->width, (png_uint_32)f->height, pk->bit_depth,
                 pk->color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (pk->n_palette) { /* libpng copies both */
        png_color pal[256];
        for (int i = 0; i < pk->n_palette; i++)
            pal[i] =
                (png_color){pk->palette[3 * i], pk->palette[3 * i + 1], pk->palette[3 * i + 2]};
        png_set_PLTE(w->png, w->info, pal, pk->n_palette);
        if (pk->n_trans)
            png_set_tRNS(w->png, w->info, pk->trans, pk->n_trans, NULL);
    }
    if (it->meta && it->src)
        set_meta(w->png, w->info, it, pk);
    if (it->jmeta)
        set_jpeg_meta(w->png, w->info, it->jmeta, pk);
    png_write_info(w->png, w->info);
    const uint16_t one = 1;
    int little = *(const uint8_t *)&one == 1;
    if (pk->bit_depth == 16 && little)
        png_set_swap(w->png); /* libpng swaps a copy of each row */
    w->rows_left = f->height;
    /* A large image: its data deflated in segments, on several threads where the batch
       has them to spare (the bytes are the same on any number) */
    w->fp = fp;
    pf_pngz_opts zo = {f->width,
                       f->height,
                       pk->bit_depth,
                       png_channels(pk->color_type),
                       zlib,
                       filter,
                       threads > 1 ? threads : 1,
                       pk->bit_depth == 16 && little};
    if (pf_pngz_worth(&zo) && pf_pngz_begin(&zo, z_write, w, &w->z, err, errn) != 0) {
        pngout_drop(w);
        return -1;
    }
    return 0;
}

/* The next n rows, from rows 0..n-1 of f (auto and palette: from the rows packed by
   pngout_begin, f being the same image). */
int pngout_rows(png_out *w, const pf_frame *f, int n, char *err, size_t errn)
{
    w->err = err;
    w->errn = errn;
    if (n > w->rows_left) {
        snprintf(err, errn, "cannot write PNG: %d rows more than its height", n - w->rows_left);
        return -1;
    }
    const unsigned char *rows = f->data;
    size_t pitch = f->pitch;
    if (w->pk.rows) {
        rows = w->pk.rows + (size_t)w->next * w->pk.pitch;
        pitch = w->pk.pitch;
    } else if (w->form >= PF_PNG_FORM_GRAY1 && w->form <= PF_PNG_FORM_GRAY4 && n > 0) {
        pf_frame band = *f; /* each row packs on its own */
        band.height = n;
        char e[512] = "";
        if (pf_png_pack(&band, (pf_png_form)w->form, NULL, &w->band, e, sizeof e) != PF_OK) {
            snprintf(err, errn, "cannot write PNG: %s", e);
            return -1;
        }
        rows = w->band.rows;
        pitch = w->band.pitch;
    }
    if (w->z) {
        char zerr[512] = "";
        int rc = pf_pngz_rows(w->z, rows, pitch, n, zerr, sizeof zerr);
        pf_png_packed_free(&w->band);
        if (rc != 0) { /* a failed write's reason (z_write's) before the deflater's */
            if (!err[0])
                snprintf(err, errn, "cannot write PNG: %s", zerr);
            return -1;
        }
        w->rows_left -= n;
        w->next += n;
        return 0;
    }
    if (setjmp(w->jmp))
        return -1;
    for (int y = 0; y < n; y++)
        png_write_row(w->png, (png_const_bytep)rows + (size_t)y * pitch);
    pf_png_packed_free(&w->band);
    w->rows_left -= n;
    w->next += n;
    return 0;
}

int pngout_finish(png_out *w, char *err, size_t errn)
{
    w->err = err;
    w->errn = errn;
    if (w->rows_left) {
        snprintf(err, errn, "cannot write PNG: %d rows missing", w->rows_left);
        return -1;
    }
    if (w->z) { /* every chunk was written before the image data: IEND is left */
        int rc = pf_pngz_chunk(z_write, w, "IEND", NULL, 0);
        pngout_drop(w);
        if (rc != 0 && !err[0])
            snprintf(err, errn, "write error: %s", strerror(errno ? errno : EIO));
        return rc != 0 ? -1 : 0;
    }
    if (setjmp(w->jmp))
        return -1;
    png_write_end(w->png, NULL);
    pngout_drop(w);
    return 0;
}

/* ---- Tables ---------------------------------------------------------------------------------------- */

/* A JSON string: quotes and control characters escaped. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void write_table(FILE *f, const pf_table *t, int json)
{
    int cols = t->cols;
    if (json) {
        fprintf(f, "{\n  \"columns\": [");
        for (int c = 0; c < cols; c++) {
            fputs(c ? ", " : "", f);
            json_str(f, t->columns && t->columns[c] ? t->columns[c] : "");
        }
        fprintf(f, "],\n  \"rows\": [\n");
        for (int r = 0; r < t->rows; r++) {
            fprintf(f, "    {\"row\": ");
            if (t->row_name)
                json_str(f, t->row_name(t->params, r));
            else
                fprintf(f, "%d", r);
            fprintf(f, ", \"values\": [");
            for (int c = 0; c < cols; c++) {
                double v = t->data[(size_t)r * cols + c];
                if (isfinite(v)) /* JSON has no inf or NaN: those are null */
                    fprintf(f, "%s%.17g", c ? ", " : "", v);
                else
                    fprintf(f, "%snull", c ? ", " : "");
            }
            fprintf(f, "]}%s\n", r + 1 < t->rows ? "," : "");
        }
        fprintf(f, "  ]\n}\n");
    } else {
        fprintf(f, "row");
        for (int c = 0; c < cols; c++)
            fprintf(f, ",%s", t->columns && t->columns[c] ? t->columns[c] : "");
        fputc('\n', f);
        for (int r = 0; r < t->rows; r++) {
            if (t->row_name)
                fprintf(f, "%s", t->row_name(t->params, r));
            else
                fprintf(f, "%d", r);
            for (int c = 0; c < cols; c++)
                fprintf(f, ",%.17g", t->data[(size_t)r * cols + c]);
            fputc('\n', f);
        }
    }
}
