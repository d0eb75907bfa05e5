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
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"

static char host_id[16];

const char *out_host_id(void)
{
    if (!host_id[0]) {
        char h[256] = "";
        gethostname(h, sizeof h - 1);
        uint32_t x = 2166136261u; /* FNV-1a */
        for (const char *s = h; *s; s++)
            x = (x ^ (unsigned char)*s) * 16777619u;
        snprintf(host_id, sizeof host_id, "%08x", x);
    }
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
        if (fd >= 0)
            return fd;
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

typedef struct png_out {
    FILE *fp;
    char *err;
    size_t errn;
    jmp_buf jmp;
} png_out;

static void png_err_fn(png_structp png, png_const_charp msg)
{
    png_out *w = png_get_error_ptr(png);
    if (!w->err[0])
        snprintf(w->err, w->errn, "cannot write PNG: %s", msg);
    longjmp(w->jmp, 1);
}

static void png_warn_fn(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static const int ctypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                             PNG_COLOR_TYPE_RGB_ALPHA};

/* The metadata chunks an input may carry to its outputs (pf_png_read_meta keeps these),
   five bytes each as png_set_keep_unknown_chunks wants them. */
static const png_byte meta_names[] = "gAMA\0cHRM\0sRGB\0iCCP\0sBIT\0pHYs\0tEXt\0zTXt\0iTXt";
#define META_NAMES 9

/* Whether the input's chunk `name` still describes frame f: pf_png_write_meta's rules
   (pipefuse/png.h). gAMA, cHRM and sRGB say how stored values encode colour, and stages
   work on stored values; text is about the picture: kept. An ICC profile is for gray or
   for colour data: kept while the output is of the input's kind. sBIT holds for the
   input's colour type and depth, pHYs for its pixel size: kept when those are the same. */
static int meta_applies(const char *name, const pf_png_info *src, const pf_frame *f)
{
    if (!memcmp(name, "iCCP", 4))
        return !(src->color_type & PNG_COLOR_MASK_COLOR) == (f->channels <= 2);
    if (!memcmp(name, "sBIT", 4))
        return src->color_type == ctypes[f->channels - 1] &&
               src->bit_depth == (f->sample == PF_U16 ? 16 : 8);
    if (!memcmp(name, "pHYs", 4))
        return src->width == f->width && src->height == f->height;
    return 1;
}

/* Hands libpng the chunks of meta that apply to f, all before the image data (text may
   go anywhere; colour and density must). libpng copies each chunk; a failure longjmps. */
static void set_meta(png_structp png, png_infop info, const pf_png_meta *meta,
                     const pf_png_info *src, const pf_frame *f)
{
    int n = pf_png_meta_count(meta), any = 0;
    for (int i = 0; i < n; i++) {
        const void *data;
        size_t size;
        const char *name = pf_png_meta_chunk(meta, i, &data, &size);
        if (!name || !meta_applies(name, src, f))
            continue;
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

static int write_png(FILE *fp, const pf_frame *f, int zlib, int filter, const pf_png_meta *meta,
                     const pf_png_info *src, char *err, size_t errn)
{
    if ((f->sample != PF_U8 && f->sample != PF_U16) || f->channels < 1 || f->channels > 4) {
        snprintf(err, errn, "cannot write PNG: %d channels of %s samples", f->channels,
                 f->sample == PF_F32 ? "f32" : "unknown");
        return -1;
    }
    png_out w;
    memset(&w, 0, sizeof w);
    w.fp = fp;
    w.err = err;
    w.errn = errn;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &w, png_err_fn, png_warn_fn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, NULL);
        snprintf(err, errn, "out of memory starting libpng");
        return -1;
    }
    if (setjmp(w.jmp)) {
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    png_init_io(png, fp);
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_set_compression_level(png, zlib);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, filter);
    png_set_IHDR(png, info, (png_uint_32)f->width, (png_uint_32)f->height,
                 f->sample == PF_U16 ? 16 : 8, ctypes[f->channels - 1], PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (meta && src)
        set_meta(png, info, meta, src, f);
    png_write_info(png, info);
    const uint16_t one = 1;
    if (f->sample == PF_U16 && *(const uint8_t *)&one == 1)
        png_set_swap(png); /* libpng swaps a copy of each row */
    for (int y = 0; y < f->height; y++)
        png_write_row(png, (png_const_bytep)f->data + (size_t)y * f->pitch);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
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

/* One item to a new temporary in pfd: written, flushed and synced. */
static int write_item(const out_opts *o, int pfd, const out_item *it, char *tmp, char *err,
                      size_t errn)
{
    int fd = create_temp(pfd, tmp, err, errn);
    if (fd < 0)
        return -1;
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        snprintf(err, errn, "%s", strerror(errno));
        close(fd);
        unlinkat(pfd, tmp, 0);
        return -1;
    }
    int rc = 0;
    if (it->is_png)
        rc = write_png(fp, it->frame, o->zlib, o->png_filter, it->meta, it->src, err, errn);
    else
        write_table(fp, it->table, it->json);
    if (rc == 0 && (fflush(fp) != 0 || ferror(fp))) {
        snprintf(err, errn, "write error: %s", strerror(errno));
        rc = -1;
    }
    if (rc == 0 && fsync(fileno(fp)) != 0) {
        snprintf(err, errn, "cannot sync: %s", strerror(errno));
        rc = -1;
    }
    if (fclose(fp) != 0 && rc == 0) {
        snprintf(err, errn, "write error: %s", strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        unlinkat(pfd, tmp, 0);
    return rc;
}

int out_write_set(const out_opts *o, const out_item *items, int n, char *err, size_t errn)
{
    char(*tmps)[64] = calloc((size_t)n + 1, 64);
    int *pfd = calloc((size_t)n + 1, sizeof *pfd);
    const char **base = calloc((size_t)n + 1, sizeof *base);
    if (!tmps || !pfd || !base) {
        free(tmps);
        free(pfd);
        free(base);
        snprintf(err, errn, "out of memory");
        return -1;
    }
    int written = 0, rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        char e[1024] = "";
        pfd[k] = open_parent(o->dirfd, items[k].final_name, &base[k], e, sizeof e);
        if (pfd[k] < 0) {
            snprintf(err, errn, "%s", e);
            rc = -1;
        } else if (strlen(base[k]) > NAME_MAX) {
            snprintf(err, errn, "output name %.64s... is %zu bytes, over the file system's %d",
                     base[k], strlen(base[k]), NAME_MAX);
            rc = -1;
        } else if (write_item(o, pfd[k], &items[k], tmps[k], e, sizeof e) != 0) {
            snprintf(err, errn, "%s: %s", items[k].final_name, e);
            rc = -1;
        } else {
            written = k + 1;
        }
        if (rc != 0 && pfd[k] >= 0 && pfd[k] != o->dirfd)
            close(pfd[k]);
    }
    /* All synced: now the renames, the last one committing the set. */
    for (int k = 0; k < written && rc == 0; k++) {
        if (renameat(pfd[k], tmps[k], pfd[k], base[k]) != 0) {
            snprintf(err, errn, "%s: cannot rename into place: %s", items[k].final_name,
                     strerror(errno));
            rc = -1;
        } else {
            tmps[k][0] = 0;
        }
    }
    for (int k = 0; k < written; k++) {
        if (tmps[k][0])
            unlinkat(pfd[k], tmps[k], 0);
        else if (rc == 0 && fsync(pfd[k]) != 0 && errno != EINVAL) {
            snprintf(err, errn, "cannot sync the folder of %s: %s", items[k].final_name,
                     strerror(errno));
            rc = -1;
        }
        if (pfd[k] != o->dirfd)
            close(pfd[k]);
    }
    free(tmps);
    free(pfd);
    free(base);
    return rc;
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
        if (strncmp(de->d_name, OUT_TMP_PREFIX, plen) != 0)
            continue;
        const char *p = de->d_name + plen;
        struct stat st;
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        int stale = now - st.st_mtime > 3600;
        if (!stale && strncmp(p, host, 8) == 0 && p[8] == '-') {
            long pid = strtol(p + 9, NULL, 10);
            stale = pid > 0 && process_gone((pid_t)pid);
        }
        if (stale && unlinkat(dirfd, de->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
