/* cli/freshness.c: what made each output of `pipefuse run`, for --skip-existing and for
 * names that stay with their input.
 *
 * A run computes a fingerprint of everything besides the input that shapes the bytes of
 * its outputs (fresh_fingerprint). Each input committed appends one line to
 * OUTDIR/.pipefuse-manifest: the input (its folder resolved, see cli_where) and the
 * identity it had (size, modification time), the folder and stem its outputs were named
 * from, the fingerprint, and each output's name with the identity it had when committed
 * (inode, size, modification time). --skip-existing skips an input only when the latest
 * line for each of its outputs is one line, about this input as it is now, with this
 * run's fingerprint, and every output is still the file that line saw: any other output
 * (one written since by another run, another program, a copy) is made again.
 *
 * Written safely: a line is appended with one write() (O_APPEND: lines of shards
 * writing into one folder never mix) and ends with a checksum, so a line cut by a full
 * disk or glued to a cut one is not believed; the worst a lost line does is make its
 * input run again. A line is appended after the input's outputs are committed: a crash
 * between the two leaves outputs without their line, which are made again.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch.h"
#include "images.h"

/* ---- Paths ---------------------------------------------------------------------------------- */

char *cli_where(const char *path)
{
    char *dir = strdup(path);
    if (!dir)
        return NULL;
    char *slash = strrchr(dir, '/');
    const char *base = slash ? path + (slash - dir) + 1 : path;
    if (slash)
        slash[slash == dir] = 0; /* "/x.png": the folder is "/" */
    char *real = realpath(slash ? dir : ".", NULL);
    free(dir);
    if (!real)
        return strdup(path); /* not there: the same path again is the same input */
    size_t len = strlen(real) + strlen(base) + 2;
    char *w = malloc(len);
    if (w)
        snprintf(w, len, "%s%s%s", real, strcmp(real, "/") == 0 ? "" : "/", base);
    free(real);
    return w;
}

/* ---- The fingerprint ------------------------------------------------------------------------ */

/* Two 64-bit FNV-1a lanes of different bases: 128 bits, for telling runs apart (no
   adversary: a user who wants an output made again removes it). */
typedef struct hash128 {
    uint64_t a, b;
} hash128;

static void h_bytes(hash128 *h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ c[i]) * 1099511628211ull;
        h->b = (h->b ^ c[i] ^ 0x5a) * 1099511628211ull;
        h->b ^= h->b >> 29;
    }
}

/* A tagged field: its tag, its length, its bytes, so that fields never run together. */
static void h_field(hash128 *h, const char *tag, const void *p, size_t n)
{
    uint64_t len = n;
    h_bytes(h, tag, strlen(tag) + 1);
    h_bytes(h, &len, sizeof len);
    h_bytes(h, p, n);
}

static void h_str(hash128 *h, const char *tag, const char *s)
{
    h_field(h, tag, s ? s : "", s ? strlen(s) : 0);
}

static void h_int(hash128 *h, const char *tag, long long v)
{
    h_field(h, tag, &v, sizeof v);
}

/* A file's whole content; -1 with errno when it cannot be read. */
static int h_file(hash128 *h, const char *tag, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL; /* a FIFO: the run itself refuses it */
        return -1;
    }
    h_bytes(h, tag, strlen(tag) + 1);
    char buf[1 << 16];
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        h_bytes(h, buf, (size_t)r);
        total += (uint64_t)r;
    }
    close(fd);
    h_bytes(h, &total, sizeof total);
    return 0;
}

/* Everything besides the input that shapes the bytes of the outputs. An option that
   changes them gets a line here; options that change only how a run goes (--jobs,
   --band-rows, --max-memory: the same bytes) get none. */
int fresh_fingerprint(const run_opts *o, const char *plugins, char fp[33], char *err, size_t errn)
{
    hash128 h = {14695981039346656037ull, 0x9e3779b97f4a7c15ull};
    h_str(&h, "pipefuse", PF_VERSION_STRING);
    h_str(&h, "library", pf_version_string());
    if (h_file(&h, "pipeline", o->pipeline) != 0) {
        snprintf(err, errn, "%s: %s", o->pipeline, strerror(errno));
        return -1;
    }
    for (int k = 0; k < o->n_sets; k++)
        h_str(&h, "set", o->sets[k]);
    for (int k = 0; k < o->n_binds; k++) {
        const char *eq = strchr(o->binds[k], '=');
        h_field(&h, "input", o->binds[k], eq ? (size_t)(eq - o->binds[k]) : 0);
        if (eq && h_file(&h, "input file", eq + 1) != 0) {
            snprintf(err, errn, "--input %s: %s", o->binds[k], strerror(errno));
            return -1;
        }
    }
    h_int(&h, "table format", o->json_tables);
    h_int(&h, "zlib", o->zlib);
    h_int(&h, "png filter", o->png_filter);
    h_int(&h, "strip", o->strip);
    h_str(&h, "precision", o->precision ? o->precision : "");
    h_str(&h, "images", cli_image_opts_str()); /* --format, JPEG quality and the rest */
    h_str(&h, "plugins", plugins);
    snprintf(fp, 33, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
    return 0;
}

/* ---- The manifest ------------------------------------------------------------------------- */

typedef struct file_id {
    unsigned long long ino, size;
    long long sec, nsec;
} file_id;

typedef struct record {
    char *where, *key;
    char fp[33];
    file_id in;
    int n;
    char **names;
    file_id *out;
} record;

/* name -> the index of its latest record: open addressing */
typedef struct index_map {
    const char **key;
    int *rec;
    size_t cap, n;
} index_map;

struct fresh_db {
    record *r;
    int n, cap;
    index_map by_name, by_where;
    int fd; /* appending; -1 until the first record */
    int lines;
};

static uint64_t h_name(const char *s)
{
    uint64_t x = 14695981039346656037ull;
    for (; *s; s++)
        x = (x ^ (unsigned char)*s) * 1099511628211ull;
    return x;
}

static int map_put(index_map *m, const char *key, int rec)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 256;
        const char **k = calloc(cap, sizeof *k);
        int *r = calloc(cap, sizeof *r);
        if (!k || !r) {
            free(k);
            free(r);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->key[i])
                continue;
            size_t j = h_name(m->key[i]) & (cap - 1);
            while (k[j])
                j = (j + 1) & (cap - 1);
            k[j] = m->key[i];
            r[j] = m->rec[i];
        }
        free(m->key);
        free(m->rec);
        m->key = k;
        m->rec = r;
        m->cap = cap;
    }
    size_t j = h_name(key) & (m->cap - 1);
    for (; m->key[j]; j = (j + 1) & (m->cap - 1))
        if (strcmp(m->key[j], key) == 0) {
            m->rec[j] = rec; /* a later line wins */
            return 0;
        }
    m->key[j] = key;
    m->rec[j] = rec;
    m->n++;
    return 0;
}

static int map_get(const index_map *m, const char *key)
{
    if (!m->cap)
        return -1;
    size_t j = h_name(key) & (m->cap - 1);
    for (; m->key[j]; j = (j + 1) & (m->cap - 1))
        if (strcmp(m->key[j], key) == 0)
            return m->rec[j];
    return -1;
}

static uint32_t crc_of(const char *s, size_t n)
{
    uint32_t x = 2166136261u;
    for (size_t i = 0; i < n; i++)
        x = (x ^ (unsigned char)s[i]) * 16777619u;
    return x;
}

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\t')
            fputs("\\t", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else if (*s == '\r')
            fputs("\\r", f);
        else if (*s == '\\')
            fputs("\\\\", f);
        else
            fputc(*s, f);
    }
}

static int parse_id(char **fields, file_id *id)
{
    char *end;
    errno = 0;
    id->ino = strtoull(fields[0], &end, 10);
    int bad = *end != 0;
    id->size = strtoull(fields[1], &end, 10);
    bad |= *end != 0;
    id->sec = strtoll(fields[2], &end, 10);
    bad |= *end != 0;
    id->nsec = strtoll(fields[3], &end, 10);
    bad |= *end != 0;
    return bad || errno ? -1 : 0;
}

static void free_record(record *r)
{
    free(r->where);
    free(r->key);
    for (int k = 0; r->names && k < r->n; k++)
        free(r->names[k]);
    free(r->names);
    free(r->out);
}

/* One line (without its newline); 0 when it is a whole record, kept in db. */
static int parse_line(fresh_db *db, char *line, size_t len)
{
    char *tab = len > 9 ? line + len - 9 : NULL; /* "\tXXXXXXXX": the checksum */
    if (!tab || *tab != '\t' || strncmp(line, "R1\t", 3) != 0)
        return -1;
    char *end;
    unsigned long crc = strtoul(tab + 1, &end, 16);
    if (*end || crc != crc_of(line, (size_t)(tab - line)))
        return -1;
    *tab = 0;
    char *f[1024];
    int nf = 0;
    for (char *s = line; nf < 1024;) {
        f[nf++] = s;
        char *t = strchr(s, '\t');
        if (!t)
            break;
        *t = 0;
        s = t + 1;
    }
    /* R1 where key fp size sec nsec n (name ino size sec nsec)... */
    if (nf < 8)
        return -1;
    long n = strtol(f[7], &end, 10);
    if (*end || n < 1 || n > RUN_MAX_IO || nf != 8 + 5 * n)
        return -1;
    record r = {0};
    r.n = (int)n;
    char *in_f[4] = {"0", f[4], f[5], f[6]};
    if (strlen(f[3]) != 32 || parse_id(in_f, &r.in) != 0)
        return -1;
    memcpy(r.fp, f[3], 33);
    cli_unescape(f[1]);
    cli_unescape(f[2]);
    r.where = strdup(f[1]);
    r.key = strdup(f[2]);
    r.names = calloc((size_t)n, sizeof *r.names);
    r.out = calloc((size_t)n, sizeof *r.out);
    int bad = !r.where || !r.key || !r.names || !r.out;
    for (int k = 0; k < n && !bad; k++) {
        char **g = f + 8 + 5 * k;
        cli_unescape(g[0]);
        bad = !(r.names[k] = strdup(g[0])) || parse_id(g + 1, &r.out[k]) != 0;
    }
    if (!bad && db->n == db->cap) {
        record *nr = realloc(db->r, sizeof *nr * (size_t)(db->cap = db->cap ? 2 * db->cap : 256));
        bad = !nr;
        if (nr)
            db->r = nr;
    }
    if (bad) {
        free_record(&r);
        return -1;
    }
    db->r[db->n] = r;
    for (int k = 0; k < r.n; k++)
        if (map_put(&db->by_name, db->r[db->n].names[k], db->n) != 0)
            return -1;
    if (map_put(&db->by_where, db->r[db->n].where, db->n) != 0)
        return -1;
    db->n++;
    return 0;
}

int fresh_open(int dirfd, fresh_db **out)
{
    fresh_db *db = calloc(1, sizeof *db);
    *out = db;
    if (!db)
        return -1;
    db->fd = -1;
    int fd = openat(dirfd, FRESH_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    char *buf = NULL;
    size_t have = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (buf = malloc((size_t)st.st_size + 1))) {
        while (have < (size_t)st.st_size) {
            ssize_t r = read(fd, buf + have, (size_t)st.st_size - have);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            have += (size_t)r;
        }
    }
    close(fd);
    if (!buf)
        return -1;
    for (char *line = buf, *nl; (nl = memchr(line, '\n', have - (size_t)(line - buf)));
         line = nl + 1) {
        *nl = 0;
        db->lines++;
        parse_line(db, line, (size_t)(nl - line)); /* a cut or foreign line: not believed */
    }
    free(buf);
    return 0;
}

void fresh_close(fresh_db *db)
{
    if (!db)
        return;
    for (int i = 0; i < db->n; i++)
        free_record(&db->r[i]);
    free(db->r);
    free(db->by_name.key);
    free(db->by_name.rec);
    free(db->by_where.key);
    free(db->by_where.rec);
    if (db->fd >= 0)
        close(db->fd);
    free(db);
}

static file_id id_of(const struct stat *st)
{
    return (file_id){(unsigned long long)st->st_ino, (unsigned long long)st->st_size,
                     (long long)st->st_mtim.tv_sec, (long long)st->st_mtim.tv_nsec};
}

static int same_id(file_id a, file_id b)
{
    return a.ino == b.ino && a.size == b.size && a.sec == b.sec && a.nsec == b.nsec;
}

int fresh_judge(const fresh_db *db, int dirfd, const char *where, const struct stat *in,
                const char *fp, char *const *names, int n)
{
    int r = n > 0 && db ? map_get(&db->by_name, names[0]) : -1;
    if (r < 0)
        return FRESH_NO_RECORD;
    const record *rec = &db->r[r];
    if (rec->n != n || strcmp(rec->where, where) != 0)
        return FRESH_NO_RECORD; /* the output was written for another input, or by another
                                   pipeline's outputs: this input's record is not there */
    file_id iid = id_of(in);
    if (iid.size != rec->in.size || iid.sec != rec->in.sec || iid.nsec != rec->in.nsec)
        return FRESH_CHANGED;
    for (int k = 0; k < n; k++) {
        struct stat st;
        if (map_get(&db->by_name, names[k]) != r || strcmp(rec->names[k], names[k]) != 0)
            return FRESH_NO_RECORD;
        if (fstatat(dirfd, names[k], &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !same_id(id_of(&st), rec->out[k]))
            return FRESH_CHANGED;
    }
    return strcmp(rec->fp, fp) == 0 ? FRESH_YES : FRESH_OTHER;
}

int fresh_each_key(const fresh_db *db, int (*fn)(void *ctx, const char *where, const char *key),
                   void *ctx)
{
    for (int r = 0; db && r < db->n; r++) {
        const record *rec = &db->r[r];
        if (!rec->where || !rec->key || map_get(&db->by_where, rec->where) != r ||
            fresh_key_of(db, rec->where) != rec->key)
            continue; /* a later record of its input, or names another input took since */
        int rc = fn(ctx, rec->where, rec->key);
        if (rc)
            return rc;
    }
    return 0;
}

const char *fresh_key_of(const fresh_db *db, const char *where)
{
    int r = db ? map_get(&db->by_where, where) : -1;
    if (r < 0)
        return NULL;
    /* only while its record still holds its outputs' names: a name another input's
       later record took belongs to that input now */
    for (int k = 0; k < db->r[r].n; k++)
        if (map_get(&db->by_name, db->r[r].names[k]) != r)
            return NULL;
    return db->r[r].key;
}

/* A record as its manifest line, checksum and newline included (malloc'd). */
static int record_line(const record *r, char **line, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return -1;
    fputs("R1\t", m);
    put_escaped(m, r->where);
    fputc('\t', m);
    put_escaped(m, r->key);
    fprintf(m, "\t%s\t%llu\t%lld\t%lld\t%d", r->fp, r->in.size, r->in.sec, r->in.nsec, r->n);
    for (int k = 0; k < r->n; k++) {
        fputc('\t', m);
        put_escaped(m, r->names[k]);
        fprintf(m, "\t%llu\t%llu\t%lld\t%lld", r->out[k].ino, r->out[k].size, r->out[k].sec,
                r->out[k].nsec);
    }
    if (fclose(m) != 0) {
        free(buf);
        return -1;
    }
    char tail[16];
    snprintf(tail, sizeof tail, "\t%08x\n", crc_of(buf, n));
    char *l = realloc(buf, n + strlen(tail) + 1);
    if (!l) {
        free(buf);
        return -1;
    }
    memcpy(l + n, tail, strlen(tail) + 1);
    *line = l;
    *len = n + strlen(tail);
    return 0;
}

/* The manifest open for appending and share-locked (fresh_compact takes it exclusively):
   reopened when a compaction replaced the file since it was opened, so that no line goes
   to the replaced one. A line an earlier run cut (a full disk) is ended first, so the
   next one starts a line of its own. 0, or -1 with errno. */
static int open_append(fresh_db *db, int dirfd)
{
    for (int tries = 0; tries < 8; tries++) {
        if (db->fd < 0) {
            db->fd = openat(dirfd, FRESH_FILE, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                            0666);
            if (db->fd < 0)
                return -1;
        }
        struct stat st, now;
        if (flock(db->fd, LOCK_SH) != 0 && errno != ENOLCK && errno != EOPNOTSUPP)
            return -1;
        if (fstat(db->fd, &st) == 0 && fstatat(dirfd, FRESH_FILE, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_ino == now.st_ino && st.st_dev == now.st_dev) {
            char last = '\n';
            if (st.st_size > 0 && pread(db->fd, &last, 1, st.st_size - 1) != 1)
                last = '\n';
            if (last != '\n' && write(db->fd, "\n", 1) != 1) {
                int e = errno;
                flock(db->fd, LOCK_UN);
                errno = e;
                return -1;
            }
            return 0;
        }
        close(db->fd); /* replaced by a compaction: the new file */
        db->fd = -1;
    }
    errno = EAGAIN;
    return -1;
}

int fresh_compact(int dirfd)
{
    int fd = openat(dirfd, FRESH_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    /* no appender while it is rewritten; one that waits reopens the new file */
    if (flock(fd, LOCK_EX) != 0) {
        close(fd);
        return 0; /* no locks here: never compacted, as appenders could not be held */
    }
    fresh_db *db = NULL;
    int rc = fresh_open(dirfd, &db), kept = 0;
    struct stat st, now;
    if (rc != 0 || fstat(fd, &st) != 0 ||
        fstatat(dirfd, FRESH_FILE, &now, AT_SYMLINK_NOFOLLOW) != 0 || st.st_ino != now.st_ino) {
        fresh_close(db); /* unreadable, or replaced meanwhile: another run compacted it */
        close(fd);
        return 0;
    }
    char *live = calloc((size_t)db->n + 1, 1);
    for (int i = 0; live && i < db->n; i++)
        for (int k = 0; k < db->r[i].n && !live[i]; k++)
            if (map_get(&db->by_name, db->r[i].names[k]) == i)
                live[i] = 1, kept++;
    /* only when most lines are superseded: a rewrite costs what the file holds */
    if (live && db->lines > 4 * kept + 64) {
        char tmp[64];
        unsigned char r[8];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            memset(r, 0, sizeof r);
        snprintf(tmp, sizeof tmp, OUT_TMP_PREFIX "%s-%ld-%02x%02x%02x%02x%02x%02x%02x%02x",
                 out_host_id(), (long)getpid(), r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
        int out = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        FILE *f = out >= 0 ? fdopen(out, "w") : NULL;
        if (out >= 0)
            flock(out, LOCK_EX); /* its owner, as batch/outfile.c's temporaries */
        int bad = !f;
        for (int i = 0; f && i < db->n; i++) {
            if (!live[i])
                continue;
            char *line = NULL;
            size_t len = 0;
            if (record_line(&db->r[i], &line, &len) != 0 || fwrite(line, 1, len, f) != len)
                bad = 1;
            free(line);
        }
        if (f && (fflush(f) != 0 || fsync(fileno(f)) != 0))
            bad = 1;
        if (!bad && renameat(dirfd, tmp, dirfd, FRESH_FILE) != 0)
            bad = 1;
        if (bad && out >= 0)
            unlinkat(dirfd, tmp, 0);
        if (f)
            fclose(f);
        else if (out >= 0)
            close(out);
        rc = bad ? -1 : 1;
    }
    free(live);
    fresh_close(db);
    close(fd); /* the lock goes: waiting appenders find the new file */
    return rc;
}

int fresh_record(fresh_db *db, int dirfd, const char *where, const char *key, const char *fp,
                 const struct stat *in, char *const *names, int n)
{
    if (!db || n < 1 || n > RUN_MAX_IO)
        return 0;
    file_id ids[RUN_MAX_IO];
    for (int k = 0; k < n; k++) {
        struct stat st;
        if (fstatat(dirfd, names[k], &st, AT_SYMLINK_NOFOLLOW) != 0)
            return 0; /* an output gone already: no record, made again next time */
        ids[k] = id_of(&st);
    }
    record r = {(char *)where, (char *)(key ? key : ""), "", id_of(in), n, (char **)names, ids};
    snprintf(r.fp, sizeof r.fp, "%s", fp);
    char *line = NULL;
    size_t len = 0;
    if (record_line(&r, &line, &len) != 0)
        return -1;
    if (open_append(db, dirfd) != 0) {
        free(line);
        return -1;
    }
    ssize_t w;
    while ((w = write(db->fd, line, len)) < 0 && errno == EINTR)
        ;
    int e = w < 0 ? errno : ENOSPC;
    if (w >= 0 && w < (ssize_t)len) { /* short: the rest once more says why (EFBIG, ENOSPC) */
        ssize_t more = write(db->fd, line + w, len - (size_t)w);
        e = more < 0 ? errno : ENOSPC;
        w += more > 0 ? more : 0;
        if (w > 0 && w < (ssize_t)len && write(db->fd, "\n", 1) != 1) /* a cut line: ended */
            e = e ? e : ENOSPC;
    }
    flock(db->fd, LOCK_UN);
    free(line);
    errno = e;
    return w == (ssize_t)len ? 0 : -1;
}
