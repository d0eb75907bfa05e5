/* cli/batch/outfile.c: an input's outputs, written safely and committed together.
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
#include "pngout.h"
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
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
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
        pngout_drop(&f->png);
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
            rc = pngout_begin(&f->png, f->fp, it->frame, s->o.zlib, s->o.png_filter,
                              s->o.png_threads, &own, e, sizeof e);
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
        rc = pngout_begin(&f->png, f->fp, it->frame, s->o.zlib, s->o.png_filter, s->o.png_threads,
                          it, e, sizeof e);
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
                             : pngout_rows(&s->f[k].png, rows, n, e, sizeof e) != 0) {
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
        rc = pngout_begin(&f->png, f->fp, &img, o->zlib, o->png_filter, o->png_threads, &f->item, e,
                          en);
    if (rc == 0)
        rc = pngout_rows(&f->png, &img, img.height, e, en);
    if (rc == 0)
        rc = pngout_finish(&f->png, e, en);
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
            rc = pngout_begin(&f->png, f->fp, &f->whole, o->zlib, o->png_filter, o->png_threads,
                              &f->item, e, sizeof e);
            if (rc == 0)
                rc = pngout_rows(&f->png, &f->whole, f->whole.height, e, sizeof e);
        }
        pf_frame_free(&f->whole);
        if (rc == 0)
            rc = pngout_finish(&f->png, e, sizeof e);
    } else if (f->survey) { /* auto in bands: written in the frame's form */
        rc = pngout_finish(&f->png, e, sizeof e);
        if (rc == 0 && !pf_png_survey_auto_is_frame(f->survey, f->item.meta))
            rc = rewrite_auto(f, o, e, sizeof e);
        pf_png_survey_free(f->survey);
        f->survey = NULL;
    } else if (f->jpeg) {
        rc = pf_jpeg_writer_finish(f->jw, e, sizeof e) == PF_OK ? 0 : -1;
        f->jw = NULL; /* freed either way */
    } else if (f->is_png) {
        rc = pngout_finish(&f->png, e, sizeof e);
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

int out_remove_stale_in(int dirfd, const char *folder)
{
    int fd = openat(dirfd, folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int removed = out_remove_stale(fd);
    close(fd);
    return removed;
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
