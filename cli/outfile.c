/* cli/outfile.c: an input's outputs, written safely and committed together.
 *
 * Every output goes first to "<OUTDIR>/.pftmp-<host>-<pid>-<random>", created with
 * O_CREAT|O_EXCL|O_NOFOLLOW relative to the directory's descriptor: a name planted in
 * advance (a symlink, a file) makes the create fail instead of being followed, and the
 * random part makes the name unpredictable. Each file is synced before any rename; the
 * renames then run in the caller's order, the last one being the commit point, and
 * the directory is synced. renameat replaces a link at the final name, never follows it.
 */
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
#include "images.h"
#include "png_deflate.h" /* engine/: exported, not installed */

static char host_id[16];
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void make_host_id(void)
{
    char h[256] = "";
    gethostname(h, sizeof h - 1);
    uint32_t x = 2166136261u; /* FNV-1a */
    for (const char *s = h; *s; s++)
        x = (x ^ (unsigned char)*s) * 16777619u;
    snprintf(host_id, sizeof host_id, "%08x", x);
}

/* Made once: codec threads and lanes create temporaries at the same time. */
const char *out_host_id(void)
{
    pthread_once(&host_once, make_host_id);
    return host_id;
}

static const char hexd[] = "0123456789abcdef";

/* Creates a fresh temporary in dirfd; its name goes to name (64 bytes). */
static int create_temp(int dirfd, char *name, char *err, size_t errn)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned char r[8];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
            snprintf(err, errn, "cannot get random bytes for a temporary name: %s",
                     strerror(errno));
            return -1;
        }
        char rnd[17];
        for (int i = 0; i < 8; i++) {
            rnd[2 * i] = hexd[r[i] >> 4];
            rnd[2 * i + 1] = hexd[r[i] & 15];
        }
        rnd[16] = 0;
        snprintf(name, 64, OUT_TMP_PREFIX "%s-%ld-%s", out_host_id(), (long)getpid(), rnd);
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            /* Its owner: a lock held on its open file description as long as it is open
               (until renamed), which outlives no process and sees through PID
               namespaces: out_remove_stale removes only a temporary whose lock it can
               take. A sweeper that took it between the create and this lock has removed
               the name (or holds it): another name then. */
            struct stat st;
            int locked = flock(fd, LOCK_EX | LOCK_NB);
            if ((locked != 0 && errno == EWOULDBLOCK) ||
                (fstat(fd, &st) == 0 && st.st_nlink == 0)) {
                close(fd);
                continue;
            }
            return fd; /* unlocked only where the file system has no locks */
        }
        if (errno != EEXIST) {
            snprintf(err, errn, "cannot create a temporary file %s in the output directory: %s",
                     name, strerror(errno));
            return -1;
        }
    }
    snprintf(err, errn, "cannot create a temporary file in the output directory: names taken");
    return -1;
}

/* ---- PNG ----------------------------------------------------------------------------------------- */

/* One PNG being written: libpng's state between calls. Every call into libpng sets jmp
   first (png_err_fn jumps back there) and points err at its caller's buffer. The form
   (pf_png_pack, pipefuse/png.h) is decided by png_begin: pk holds IHDR's depth and
   colour type, the palette, and for auto and palette the whole image's packed rows
   (NULL: the frame's own rows, or the gray forms, packed a band at a time into band). */
typedef struct png_out {
    char *err;
    size_t errn;
    jmp_buf jmp;
    png_structp png;
    png_infop info;
    int rows_left;
    int form;
    pf_png_packed pk, band;
    int next; /* the next row of pk.rows */
    /* A large image's data deflated in segments on several threads (png_deflate.h):
       the IDAT chunks and IEND then go to fp through z, not through libpng. */
    FILE *fp;
    pf_pngz *z;
} png_out;

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

static void png_drop(png_out *w)
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
static int whole_form(int form)
{
    return form == PF_PNG_FORM_AUTO || form == PF_PNG_FORM_PALETTE;
}

/* w->pk for item it's form: for auto and palette from the whole image f, else IHDR's
   fields only (the gray forms are checked on f's first row and packed by png_rows). */
static int png_form(png_out *w, const pf_frame *f, const out_item *it, char *err, size_t errn)
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

static int png_begin(png_out *w, FILE *fp, const pf_frame *f, int zlib, int filter, int threads,
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
    if (png_form(w, f, it, err, errn) != 0)
        return -1;
    const pf_png_packed *pk = &w->pk;
    w->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, w, png_err_fn, png_warn_fn);
    w->info = w->png ? png_create_info_struct(w->png) : NULL;
    if (!w->png || !w->info) {
        png_drop(w);
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
        png_drop(w);
        return -1;
    }
    return 0;
}

/* The next n rows, from rows 0..n-1 of f (auto and palette: from the rows packed by
   png_begin, f being the same image). */
static int png_rows(png_out *w, const pf_frame *f, int n, char *err, size_t errn)
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

static int png_finish(png_out *w, char *err, size_t errn)
{
    w->err = err;
    w->errn = errn;
    if (w->rows_left) {
        snprintf(err, errn, "cannot write PNG: %d rows missing", w->rows_left);
        return -1;
    }
    if (w->z) { /* every chunk was written before the image data: IEND is left */
        int rc = pf_pngz_chunk(z_write, w, "IEND", NULL, 0);
        png_drop(w);
        if (rc != 0 && !err[0])
            snprintf(err, errn, "write error: %s", strerror(errno ? errno : EIO));
        return rc != 0 ? -1 : 0;
    }
    if (setjmp(w->jmp))
        return -1;
    png_write_end(w->png, NULL);
    png_drop(w);
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

static void write_table(FILE *f, const pf_table *t, int json)
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

/* ---- Output sets ------------------------------------------------------------------------------------ */

/* The directory a name inside OUTDIR goes to ("a/b/x.png": a/b), opened component by
   component without following links; *base is the last component. Returns a new
   descriptor, or dirfd itself for a plain name, or -1. */
static int open_parent(int dirfd, const char *name, const char **base, char *err, size_t errn)
{
    const char *slash = strrchr(name, '/');
    *base = slash ? slash + 1 : name;
    if (!slash)
        return dirfd;
    char *dir = strndup(name, (size_t)(slash - name));
    if (!dir) {
        snprintf(err, errn, "out of memory");
        return -1;
    }
    int fd = dirfd;
    for (char *save = NULL, *c = strtok_r(dir, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd != dirfd)
            close(fd);
        if (next < 0) {
            snprintf(err, errn, "%s: cannot open its folder %s: %s", name, c, strerror(errno));
            free(dir);
            return -1;
        }
        fd = next;
    }
    free(dir);
    return fd;
}

/* ---- Streams of outputs ------------------------------------------------------------------------- */

typedef struct out_file {
    const char *final_name;
    int is_png;
    int pfd; /* its folder: the output folder, or one below it (closed at the end) */
    const char *base;
    char tmp[64];
    FILE *fp;
    png_out png;
    int jpeg; /* an image written as JPEG (cli_image_out_format) */
    pf_jpeg_writer *jw;
    int lock_fd; /* the temporary's own lock (create_temp) kept until it is renamed */
    /* A PNG of form auto or palette streamed a band at a time: its item; for palette the
       image gathered here (filled rows of it) until the commit packs and writes it; for
       auto the survey of the rows written in the frame's own form, which the commit
       rewrites only where auto chooses another form. */
    out_item item;
    pf_frame whole;
    int filled;
    pf_png_survey *survey;
} out_file;

struct out_stream {
    out_opts o;
    int whole; /* out_write_set: every item's frame holds the whole image */
    int n;
    out_file *f;
};

/* Closes and removes every temporary of s, and frees s. */
void out_stream_abort(out_stream *s)
{
    if (!s)
        return;
    for (int k = 0; k < s->n; k++) {
        out_file *f = &s->f[k];
        png_drop(&f->png);
        pf_frame_free(&f->whole);
        pf_png_survey_free(f->survey);
        f->survey = NULL;
        pf_jpeg_writer_abort(f->jw);
        if (f->fp)
            fclose(f->fp);
        if (f->tmp[0])
            unlinkat(f->pfd, f->tmp, 0);
        if (f->lock_fd >= 0) /* removed or renamed: its lock goes */
            close(f->lock_fd);
        if (f->pfd >= 0 && f->pfd != s->o.dirfd)
            close(f->pfd);
    }
    free(s->f);
    free(s);
}

/* A JPEG output's header and metadata: a JPEG input's profile and EXIF, or a PNG input's
   iCCP profile (the writer keeps a profile only for its frame's colour kind). */
static int jpeg_begin(out_file *f, const out_item *it, char *err, size_t errn)
{
    pf_jpeg_meta *from_png = NULL;
    const pf_jpeg_meta *m = it->jmeta;
    if (!m && it->meta && pf_jpeg_meta_from_png(it->meta, &from_png, err, errn) != PF_OK)
        return -1;
    if (!m)
        m = from_png;
    int st = pf_jpeg_writer_begin(f->fp, "cannot write JPEG", it->frame, &cli_images.jpeg, m,
                                  &f->jw, err, errn);
    pf_jpeg_meta_free(from_png);
    return st == PF_OK ? 0 : -1;
}

/* Item k of s: its folder, a temporary there, and the image's header or the whole table. */
static int open_item(out_stream *s, int k, const out_item *it, char *err, size_t errn)
{
    out_file *f = &s->f[k];
    char e[1024] = "";
    f->final_name = it->final_name;
    f->is_png = it->is_png;
    f->pfd = open_parent(s->o.dirfd, it->final_name, &f->base, e, sizeof e);
    if (f->pfd < 0) {
        snprintf(err, errn, "%s", e);
        return -1;
    }
    if (strlen(f->base) > NAME_MAX) {
        snprintf(err, errn, "output name %.64s... is %zu bytes, over the file system's %d", f->base,
                 strlen(f->base), NAME_MAX);
        return -1;
    }
    int fd = create_temp(f->pfd, f->tmp, e, sizeof e);
    /* the lock stays with this descriptor once the FILE is closed, until the rename */
    f->lock_fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (fd < 0) {
        f->tmp[0] = 0;
        snprintf(err, errn, "%s: %s", it->final_name, e);
        return -1;
    }
    if (!(f->fp = fdopen(fd, "wb"))) {
        snprintf(err, errn, "%s: %s", it->final_name, strerror(errno));
        close(fd);
        return -1;
    }
    int rc = 0;
    f->jpeg = it->is_png && cli_image_out_format(it->final_name, it->src_fmt) == CLI_FMT_JPEG;
    if (f->jpeg)
        rc = jpeg_begin(f, it, e, sizeof e);
    else if (it->is_png && !s->whole && it->png_form == PF_PNG_FORM_AUTO) {
        f->item = *it; /* auto: the frame's form as the rows come, surveyed */
        out_item own = *it;
        own.png_form = PF_PNG_FORM_FRAME;
        if (pf_png_survey_new(&f->survey) != PF_OK) {
            snprintf(e, sizeof e, "out of memory");
            rc = -1;
        } else {
            rc = png_begin(&f->png, f->fp, it->frame, s->o.zlib, s->o.png_filter, s->o.png_threads,
                           &own, e, sizeof e);
        }
    } else if (it->is_png && !s->whole && whole_form(it->png_form)) {
        f->item = *it; /* written at the commit, from the rows gathered */
        const pf_frame *h = it->frame;
        if (pf_frame_alloc(&f->whole, h->width, h->height, h->sample, h->channels) != PF_OK) {
            snprintf(e, sizeof e, "out of memory for the %dx%d image its form (%s) looks at whole",
                     h->width, h->height, pf_png_form_name((pf_png_form)it->png_form));
            rc = -1;
        }
    } else if (it->is_png)
        rc = png_begin(&f->png, f->fp, it->frame, s->o.zlib, s->o.png_filter, s->o.png_threads, it,
                       e, sizeof e);
    else
        write_table(f->fp, it->table, it->json);
    if (rc != 0)
        snprintf(err, errn, "%s: %s", it->final_name, e);
    return rc;
}

static int stream_open(const out_opts *o, int whole, const out_item *items, int n, out_stream **out,
                       char *err, size_t errn)
{
    *out = NULL;
    out_stream *s = calloc(1, sizeof *s);
    if (s)
        s->f = calloc((size_t)n + 1, sizeof *s->f);
    if (!s || !s->f) {
        free(s);
        snprintf(err, errn, "out of memory");
        return -1;
    }
    s->o = *o;
    s->whole = whole;
    for (int k = 0; k < n; k++)
        s->f[k].pfd = s->f[k].lock_fd = -1;
    for (int k = 0; k < n; k++) {
        s->n = k + 1;
        if (open_item(s, k, &items[k], err, errn) != 0) {
            out_stream_abort(s);
            return -1;
        }
    }
    *out = s;
    return 0;
}

int out_stream_open(const out_opts *o, const out_item *items, int n, out_stream **out, char *err,
                    size_t errn)
{
    return stream_open(o, 0, items, n, out, err, errn);
}

/* n rows more of f's image, gathered in f->whole. */
static int gather(out_file *f, const pf_frame *rows, int n, char *err, size_t errn)
{
    pf_frame *w = &f->whole;
    if (n < 0 || n > w->height - f->filled || rows->width != w->width ||
        rows->channels != w->channels || rows->sample != w->sample) {
        snprintf(err, errn, "cannot write PNG: %d rows of %dx%d do not continue the image", n,
                 rows->width, rows->height);
        return -1;
    }
    size_t bytes = (size_t)w->width * (size_t)w->channels * (w->sample == PF_U16 ? 2 : 1);
    for (int y = 0; y < n; y++)
        memcpy((unsigned char *)w->data + (size_t)(f->filled + y) * w->pitch,
               (const unsigned char *)rows->data + (size_t)y * rows->pitch, bytes);
    f->filled += n;
    return 0;
}

int out_stream_rows(out_stream *s, int k, const pf_frame *rows, int n, char *err, size_t errn)
{
    char e[1024] = "";
    if (k < 0 || k >= s->n || !s->f[k].is_png) {
        snprintf(err, errn, "output %d is not an image", k);
        return -1;
    }
    if (s->f[k].jpeg         ? pf_jpeg_writer_rows(s->f[k].jw, rows, n, e, sizeof e) != PF_OK
        : s->f[k].whole.data ? gather(&s->f[k], rows, n, e, sizeof e) != 0
                             : png_rows(&s->f[k].png, rows, n, e, sizeof e) != 0) {
        snprintf(err, errn, "%s: %s", s->f[k].final_name, e);
        return -1;
    }
    pf_frame band = *rows;
    band.height = n;
    if (s->f[k].survey && n > 0 && pf_png_survey_rows(s->f[k].survey, &band) != PF_OK) {
        snprintf(e, sizeof e, "cannot survey %d rows of %dx%d", n, rows->width, rows->height);
        snprintf(err, errn, "%s: %s", s->f[k].final_name, e);
        return -1;
    }
    return 0;
}

/* An auto PNG written in the frame's own form band by band, where the survey says auto
   chooses another: read back from its temporary and written again in auto's form. */
static int rewrite_auto(out_file *f, const out_opts *o, char *e, size_t en)
{
    const pf_frame *h = f->item.frame;
    struct stat st;
    if (fflush(f->fp) != 0 || fstat(fileno(f->fp), &st) != 0) {
        snprintf(e, en, "write error: %s", strerror(errno));
        return -1;
    }
    unsigned char *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!buf) {
        snprintf(e, en, "out of memory reading it back for its smallest form");
        return -1;
    }
    /* the temporary is open for writing only: read through a descriptor of its own */
    int rfd = openat(f->pfd, f->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    size_t got = 0;
    while (rfd >= 0 && got < (size_t)st.st_size) {
        ssize_t r = pread(rfd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (r <= 0) {
            errno = r < 0 ? errno : EIO;
            break;
        }
        got += (size_t)r;
    }
    if (rfd < 0 || got < (size_t)st.st_size) {
        snprintf(e, en, "cannot read it back: %s", strerror(errno));
        if (rfd >= 0)
            close(rfd);
        free(buf);
        return -1;
    }
    close(rfd);
    pf_frame img;
    memset(&img, 0, sizeof img);
    char re[1024] = "";
    int rc = pf_png_read_memory(buf, got, f->final_name,
                                (unsigned long long)h->width * (unsigned long long)h->height, &img,
                                NULL, re, sizeof re) == PF_OK
                 ? 0
                 : -1;
    free(buf);
    if (rc != 0) {
        snprintf(e, en, "cannot read it back: %s", re);
        return -1;
    }
    if (ftruncate(fileno(f->fp), 0) != 0 || fseek(f->fp, 0, SEEK_SET) != 0) {
        snprintf(e, en, "cannot rewrite it: %s", strerror(errno));
        rc = -1;
    }
    if (rc == 0)
        rc = png_begin(&f->png, f->fp, &img, o->zlib, o->png_filter, o->png_threads, &f->item, e,
                       en);
    if (rc == 0)
        rc = png_rows(&f->png, &img, img.height, e, en);
    if (rc == 0)
        rc = png_finish(&f->png, e, en);
    pf_frame_free(&img);
    return rc;
}

/* Item k finished, flushed, synced and closed; removed on failure. */
static int close_item(out_file *f, const out_opts *o, char *err, size_t errn)
{
    char e[1024] = "";
    int rc = 0;
    if (f->whole.data) { /* gathered: now in its form */
        if (f->filled != f->whole.height) {
            snprintf(e, sizeof e, "cannot write PNG: %d rows missing", f->whole.height - f->filled);
            rc = -1;
        } else {
            rc = png_begin(&f->png, f->fp, &f->whole, o->zlib, o->png_filter, o->png_threads,
                           &f->item, e, sizeof e);
            if (rc == 0)
                rc = png_rows(&f->png, &f->whole, f->whole.height, e, sizeof e);
        }
        pf_frame_free(&f->whole);
        if (rc == 0)
            rc = png_finish(&f->png, e, sizeof e);
    } else if (f->survey) { /* auto in bands: written in the frame's form */
        rc = png_finish(&f->png, e, sizeof e);
        if (rc == 0 && !pf_png_survey_auto_is_frame(f->survey, f->item.meta))
            rc = rewrite_auto(f, o, e, sizeof e);
        pf_png_survey_free(f->survey);
        f->survey = NULL;
    } else if (f->jpeg) {
        rc = pf_jpeg_writer_finish(f->jw, e, sizeof e) == PF_OK ? 0 : -1;
        f->jw = NULL; /* freed either way */
    } else if (f->is_png) {
        rc = png_finish(&f->png, e, sizeof e);
    }
    if (rc == 0 && (fflush(f->fp) != 0 || ferror(f->fp))) {
        snprintf(e, sizeof e, "write error: %s", strerror(errno));
        rc = -1;
    }
    if (rc == 0 && fsync(fileno(f->fp)) != 0) {
        snprintf(e, sizeof e, "cannot sync: %s", strerror(errno));
        rc = -1;
    }
    if (fclose(f->fp) != 0 && rc == 0) {
        snprintf(e, sizeof e, "write error: %s", strerror(errno));
        rc = -1;
    }
    f->fp = NULL;
    if (rc != 0)
        snprintf(err, errn, "%s: %s", f->final_name, e);
    return rc;
}

int out_stream_commit(out_stream *s, char *err, size_t errn)
{
    int rc = 0;
    for (int k = 0; k < s->n && rc == 0; k++)
        rc = close_item(&s->f[k], &s->o, err, errn);
    if (rc != 0) {
        out_stream_abort(s);
        return -1;
    }
    /* All synced: now the renames, the last one committing the set. */
    for (int k = 0; k < s->n && rc == 0; k++) {
        out_file *f = &s->f[k];
        if (renameat(f->pfd, f->tmp, f->pfd, f->base) != 0) {
            snprintf(err, errn, "%s: cannot rename into place: %s", f->final_name, strerror(errno));
            rc = -1;
        } else {
            f->tmp[0] = 0;
        }
    }
    for (int k = 0; k < s->n; k++) {
        out_file *f = &s->f[k];
        if (f->tmp[0]) {
            unlinkat(f->pfd, f->tmp, 0);
            f->tmp[0] = 0;
        } else if (rc == 0 && fsync(f->pfd) != 0 && errno != EINVAL) {
            snprintf(err, errn, "cannot sync the folder of %s: %s", f->final_name, strerror(errno));
            rc = -1;
        }
    }
    out_stream_abort(s); /* nothing left to remove: closes the folders, frees */
    return rc;
}

int out_write_set(const out_opts *o, const out_item *items, int n, char *err, size_t errn)
{
    out_stream *s;
    if (stream_open(o, 1, items, n, &s, err, errn) != 0)
        return -1;
    for (int k = 0; k < n; k++)
        if (items[k].is_png &&
            out_stream_rows(s, k, items[k].frame, items[k].frame->height, err, errn) != 0) {
            out_stream_abort(s);
            return -1;
        }
    return out_stream_commit(s, err, errn);
}

/* No such process, or a zombie (a killed worker whose adopter has not reaped it yet). */
static int process_gone(pid_t pid)
{
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* n lowercase hex digits at s */
static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(hexd, s[i]))
            return 0;
    return 1;
}

/* Whether name is a temporary of create_temp: ".pftmp-" 8 hex digits (the host), '-',
   a process id, '-', 16 hex digits, nothing more; its pid goes to *pid. A user's
   ".pftmp-notes.txt" is not one, and names.c refuses outputs named like it. */
static int is_temp_name(const char *name, long *pid)
{
    size_t plen = strlen(OUT_TMP_PREFIX);
    if (strncmp(name, OUT_TMP_PREFIX, plen) != 0)
        return 0;
    const char *p = name + plen;
    if (!is_hex(p, 8) || p[8] != '-' || p[9] < '1' || p[9] > '9')
        return 0;
    char *end;
    errno = 0;
    long v = strtol(p + 9, &end, 10);
    if (errno || *end != '-' || !is_hex(end + 1, 16) || end[17])
        return 0;
    *pid = v;
    return 1;
}

int out_remove_stale(int dirfd)
{
    /* a new open of the directory: a dup would share (and leave at the end) its offset */
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    const char *host = out_host_id();
    size_t plen = strlen(OUT_TMP_PREFIX);
    int removed = 0;
    time_t now = time(NULL);
    for (struct dirent *de; (de = readdir(d));) {
        long pid;
        if (!is_temp_name(de->d_name, &pid))
            continue;
        struct stat st;
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        /* Kept while its owner's lock is held: a process holds it open, whatever its
           PID namespace (a pid in the name says nothing across containers of one host
           name) or its age. Otherwise the name says: this host's process gone, or an
           hour old. Taken, the lock is held while the name is removed, so no writer can
           take it meanwhile (create_temp then makes another). */
        int tfd = openat(dirfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (tfd < 0)
            continue;
        int lk = flock(tfd, LOCK_EX | LOCK_NB), lk_errno = errno;
        int ours = strncmp(de->d_name + plen, host, 8) == 0;
        int stale;
        if (lk != 0 && lk_errno == EWOULDBLOCK)
            stale = 0; /* its writer holds it, however old, whatever its pid says */
        else           /* another host's (a folder shared over NFS without locks) only when old */
            stale = now - st.st_mtime > 3600 || (ours && process_gone((pid_t)pid));
        if (stale && unlinkat(dirfd, de->d_name, 0) == 0)
            removed++;
        close(tfd);
    }
    closedir(d);
    return removed;
}
