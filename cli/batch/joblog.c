/* cli/batch/joblog.c: the joblog (escaping, lines, pending and cut lines) and --retry-failed's reading of it */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <png.h>

#include "supervisor.h"

/* A directory contributes its *.png files (not recursive), sorted by name; anything
   else is taken as a file and reported later if it cannot be read. */
int add_input(run_opts *o, const char *arg)
{
    struct stat st;
    if (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode))
        return push(&o->inputs, &o->n_inputs, arg);
    DIR *d = opendir(arg);
    if (!d) {
        fprintf(stderr, "pipefuse run: %s: %s\n", arg, strerror(errno));
        return -1;
    }
    int first = o->n_inputs, rc = 0;
    size_t al = strlen(arg);
    for (struct dirent *de; rc == 0 && (de = readdir(d));) {
        if (de->d_name[0] == '.' || !is_png_name(de->d_name))
            continue;
        char *path = malloc(al + strlen(de->d_name) + 2);
        if (!path) {
            rc = -1;
            break;
        }
        sprintf(path, "%s%s%s", arg, arg[al - 1] == '/' ? "" : "/", de->d_name);
        rc = push(&o->inputs, &o->n_inputs, path);
        free(path);
    }
    closedir(d);
    if (o->n_inputs > first)
        qsort(o->inputs + first, (size_t)(o->n_inputs - first), sizeof(char *), cmp_str);
    else
        fprintf(stderr, "pipefuse run: %s: no .png files in this directory\n", arg);
    return rc;
}

/* ---- Joblog --------------------------------------------------------------------------------------- */

/* A joblog field: tab, newline, carriage return and backslash escaped (\t \n \r \\),
   so a line is one record of tab-separated fields whatever bytes a name holds; with
   comma, a comma too (\,): in the outputs column ", " separates the names. */
void escape_field(FILE *f, const char *s, int comma)
{
    for (; s && *s; s++) {
        if (*s == '\t')
            fputs("\\t", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else if (*s == '\r')
            fputs("\\r", f);
        else if (*s == '\\' || (comma && *s == ','))
            fprintf(f, "\\%c", *s);
        else
            fputc(*s, f);
    }
}

void cli_escape(FILE *f, const char *s)
{
    escape_field(f, s, 0);
}

/* An escaped byte other than t, n and r stands for itself: \, is a comma, \\ a backslash. */
void cli_unescape(char *s)
{
    char *w = s;
    for (; *s; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *w++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s;
        } else {
            *w++ = *s;
        }
    }
    *w = 0;
}

/* The next name of a joblog outputs column at s (escaped, cut at the ", " after it
   that is not escaped, and unescaped in place); *next: the name after it, or NULL.
   Joblogs written before commas were escaped read the same unless a name held ", ". */
static char *next_output(char *s, char **next)
{
    char *p = s;
    while (*p && !(p[0] == ',' && p[1] == ' '))
        p += p[0] == '\\' && p[1] ? 2 : 1;
    *next = *p ? p + 2 : NULL;
    *p = 0;
    cli_unescape(s);
    return s;
}

/* qsort order of (claimed output, its input) pairs: by the output's name. */
static int cmp_claim(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(x[0], y[0]);
}

/* --retry-failed: the inputs whose last line in the joblog says "failed", with the
   folder and stem their outputs were named from (the name column, cli_output_key;
   NULL in joblogs older than it), and the names written for the inputs that ended ok,
   so that a retry replaces no output of another input. */
typedef struct logline {
    char *input, *key, *outputs;
    int failed, line;
} logline;

static int cmp_logline(const void *a, const void *b)
{
    const logline *x = a, *y = b;
    int c = strcmp(x->input, y->input);
    return c ? c : x->line - y->line;
}

/* Field k (0-based) of a joblog line whose tabs are now NULs, or NULL. */
static char *field(char *line, char *end, int k)
{
    for (; k > 0 && line < end; k--)
        line += strlen(line) + 1;
    return line < end ? line : NULL;
}

int read_failed(run_opts *o, const char *file)
{
    FILE *f = fopen(file, "re");
    if (!f) {
        fprintf(stderr, "pipefuse run: --retry-failed %s: %s\n", file, strerror(errno));
        return -1;
    }
    logline *l = NULL;
    int n = 0, cap = 0, rc = 0, lineno = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&line, &lcap, f)) > 0) {
        lineno++;
        if (line[len - 1] != '\n') {
            /* only the last line can lack its newline: the joblog's writing stopped in it
               (a full disk, a file size limit, a kill), so its fields may be cut */
            char *tab = lineno == 1 && strncmp(line, "input\t", 6) == 0
                            ? NULL /* the header */
                            : memchr(line, '\t', (size_t)len);
            if (tab)
                *tab = 0;
            fprintf(stderr,
                    "pipefuse run: --retry-failed %s:%d: the last line is cut short (no "
                    "newline at its end: the joblog's writing stopped there%s%s%s); skipped\n",
                    file, lineno, tab ? "; its input " : "", tab ? line : "",
                    tab ? " is judged by its earlier lines" : "");
            break;
        }
        if (lineno == 1 && strncmp(line, "input\t", 6) == 0)
            continue;
        line[--len] = 0;
        if (len > 0 && line[len - 1] == '\r') /* a joblog edited on Windows */
            line[--len] = 0;
        if (!len) /* a blank line (an editor's last newline) */
            continue;
        if (!strchr(line, '\t')) {
            fprintf(stderr, "pipefuse run: --retry-failed %s:%d: not a joblog line\n", file,
                    lineno);
            rc = -2; /* said */
            break;
        }
        for (char *t = line; (t = strchr(t, '\t'));)
            *t++ = 0;
        char *end = line + len, *status = field(line, end, 1), *outs = field(line, end, 3);
        char *key = field(line, end, 5);
        if (n == cap) {
            logline *nl = realloc(l, sizeof *l * (size_t)(cap = cap ? 2 * cap : 256));
            if (!nl) {
                rc = -1;
                break;
            }
            l = nl;
        }
        /* "pending": written for every input a run was about to run; its last line still
           pending, the run ended (killed, interrupted, a crash of its own) before it */
        int failed = status && (strcmp(status, "failed") == 0 || strcmp(status, "pending") == 0);
        if (failed && strcmp(line, "-") == 0) { /* stdin: no file to run again */
            fprintf(stderr,
                    "pipefuse run: --retry-failed %s:%d: the failed input was standard input, "
                    "which a retry cannot read again; skipped\n",
                    file, lineno);
            failed = 0;
        }
        int ok = status && strcmp(status, "ok") == 0;
        cli_unescape(line);
        if (key)
            cli_unescape(key);
        /* outs is unescaped name by name (next_output): an escaped comma is no separator */
        l[n] = (logline){strdup(line), failed && key && *key ? strdup(key) : NULL,
                         ok && outs && *outs && strcmp(outs, "-") != 0 ? strdup(outs) : NULL,
                         failed, lineno}; /* "-": -o -, no file written */
        if (!l[n++].input)
            rc = -1;
    }
    free(line);
    fclose(f);
    if (rc == 0 && lineno == 0 && !o->n_inputs) {
        /* a run killed before it wrote its header: nothing recorded, nothing to pick */
        fprintf(stderr,
                "pipefuse run: --retry-failed %s: the joblog is empty (its run ended before "
                "it wrote a line); give the inputs, and those never run are run\n",
                file);
        rc = -2;
    }
    if (rc == 0 && n)
        qsort(l, (size_t)n, sizeof *l, cmp_logline);
    for (int k = 0; k < n; k++) {
        int last = k + 1 == n || strcmp(l[k].input, l[k + 1].input) != 0;
        if (rc == 0 && last)
            rc = push(&o->logged, &o->n_logged, l[k].input);
        if (rc == 0 && last && l[k].failed) {
            rc = push(&o->failed, &o->n_failed, l[k].input) ||
                 push(&o->failed_key, &o->n_failed_key, l[k].key ? l[k].key : "");
        } else if (rc == 0 && last && l[k].outputs) { /* "a.png, a.hist.csv": the names */
            for (char *c = l[k].outputs, *next; c && rc == 0; c = next)
                rc = push(&o->claimed, &o->n_claimed, next_output(c, &next)) ||
                     push(&o->claimed_by, &o->n_claimed_by, l[k].input);
        }
        free(l[k].input);
        free(l[k].key);
        free(l[k].outputs);
    }
    free(l);
    /* the outputs the joblog says were written, sorted by name (with their inputs), for
       precheck's binary search: a scan per output was quadratic in the joblog's size */
    if (rc == 0 && o->n_claimed > 1) {
        char **pairs = malloc(sizeof(char *) * 2 * (size_t)o->n_claimed);
        if (!pairs) {
            rc = -1;
        } else {
            for (int k = 0; k < o->n_claimed; k++)
                pairs[2 * k] = o->claimed[k], pairs[2 * k + 1] = o->claimed_by[k];
            qsort(pairs, (size_t)o->n_claimed, 2 * sizeof(char *), cmp_claim);
            for (int k = 0; k < o->n_claimed; k++)
                o->claimed[k] = pairs[2 * k], o->claimed_by[k] = pairs[2 * k + 1];
            free(pairs);
        }
    }
    if (rc == -1)
        fprintf(stderr, "pipefuse run: --retry-failed %s: out of memory\n", file);
    return rc ? -1 : 0;
}

/* The first of o->claimed (sorted) that is name, or o->n_claimed. */
int first_claim(const run_opts *o, const char *name)
{
    int lo = 0, hi = o->n_claimed;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strcmp(o->claimed[mid], name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A file by identity (device and inode) and its index in o->failed. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    int index;
} file_id;

/* qsort order of file_id: by device, inode, then index, so the first of equal files
   comes first. */
static int cmp_file_id(const void *a, const void *b)
{
    const file_id *x = a, *y = b;
    return x->dev != y->dev   ? (x->dev < y->dev ? -1 : 1)
           : x->ino != y->ino ? (x->ino < y->ino ? -1 : 1)
                              : x->index - y->index;
}

/* The index in list (sorted, n names; ids: those of them that exist, sorted) of the one
   that is path, by name or else by identity (the same file written another way,
   ./x.png for x.png); -1: none. */
static int list_index(char *const *list, int n, const file_id *ids, int n_ids, const char *path)
{
    char *const *hit = n ? bsearch(&path, list, (size_t)n, sizeof *list, cmp_str) : NULL;
    if (hit)
        return (int)(hit - list);
    struct stat st;
    if (!n_ids || stat(path, &st) != 0)
        return -1;
    file_id key = {st.st_dev, st.st_ino, -1};
    int lo = 0, hi = n_ids;
    while (lo < hi) { /* the first id not below key */
        int mid = (lo + hi) / 2;
        if (cmp_file_id(&ids[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n_ids && ids[lo].dev == key.dev && ids[lo].ino == key.ino ? ids[lo].index : -1;
}

/* The identities of the names of list that exist, sorted (for list_index); NULL without
   memory. */
static file_id *list_ids(char *const *list, int n, int *n_ids)
{
    file_id *ids = calloc((size_t)n + 1, sizeof *ids);
    *n_ids = 0;
    for (int k = 0; ids && k < n; k++) {
        struct stat st;
        if (stat(list[k], &st) == 0)
            ids[(*n_ids)++] = (file_id){st.st_dev, st.st_ino, k};
    }
    if (ids && *n_ids)
        qsort(ids, (size_t)*n_ids, sizeof *ids, cmp_file_id);
    return ids;
}

/* --retry-failed, after the shard is taken: with inputs on the command line (the
   original run's, as docs/batch.md's retry form gives them), those the joblog says failed
   or never finished (pending), and those it does not name at all (never run: GNU
   parallel's --resume-failed), run, named as the command names them; without, the
   joblog's failed and pending inputs run. Either way an input named in the joblog gets
   the folder and stem it had there, so its outputs get their first run's names. */
int take_failed(run_opts *o)
{
    int rc = 0, n_ids = 0, n_lids = 0;
    file_id *ids = list_ids(o->failed, o->n_failed, &n_ids);
    file_id *lids = o->n_inputs > 0 ? list_ids(o->logged, o->n_logged, &n_lids) : NULL;
    if (!ids || (o->n_inputs > 0 && !lids)) {
        free(ids);
        free(lids);
        return -1;
    }
    if (o->n_inputs > 0) {
        int w = 0, fresh = 0;
        char *taken = calloc((size_t)o->n_failed + 1, 1);
        if (!taken) {
            free(ids);
            free(lids);
            return -1;
        }
        for (int i = 0; i < o->n_inputs; i++) {
            int k = list_index(o->failed, o->n_failed, ids, n_ids, o->inputs[i]);
            if (k < 0 && list_index(o->logged, o->n_logged, lids, n_lids, o->inputs[i]) < 0) {
                o->inputs[w++] = o->inputs[i]; /* never run: runs, named as given */
                fresh++;
                continue;
            }
            if (k < 0 || taken[k]) {
                free(o->inputs[i]);
                continue;
            }
            taken[k] = 1;
            o->inputs[w++] = o->inputs[i];
            if (*o->failed_key[k] && cli_names_fix(o->inputs[w - 1], o->failed_key[k]) != 0)
                rc = -1;
        }
        o->n_inputs = w;
        int left = 0;
        for (int k = 0; k < o->n_failed; k++)
            left += !taken[k];
        if (left && !o->quiet && !o->shard_count)
            fprintf(stderr,
                    "pipefuse run: --retry-failed %s: %d failed or unfinished input(s) of the "
                    "joblog are not among this command's inputs: not run\n",
                    o->retry_failed, left);
        if (fresh && !o->quiet)
            fprintf(stderr,
                    "pipefuse run: --retry-failed %s: %d input(s) the joblog does not name "
                    "(never run) run too\n",
                    o->retry_failed, fresh);
        free(taken);
    } else {
        for (int k = 0; k < o->n_failed && rc == 0; k++) {
            rc = push(&o->inputs, &o->n_inputs, o->failed[k]);
            if (rc == 0 && *o->failed_key[k])
                rc = cli_names_fix(o->failed[k], o->failed_key[k]);
        }
    }
    free(ids);
    free(lids);
    if (rc != 0)
        fprintf(stderr, "pipefuse run: --retry-failed: out of memory\n");
    return rc;
}

/* Appends len bytes to the joblog as one line: written whole or not at all, so that a
   full disk or a file size limit half way through a line leaves no cut line (which a
   later line would be glued to). -1 with errno on failure. */
int append_whole(int fd, const char *buf, size_t len)
{
    struct stat st;
    off_t start = fstat(fd, &st) == 0 ? st.st_size : -1;
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            if (off && start >= 0 && ftruncate(fd, start) != 0)
                e = w < 0 ? e : errno; /* else the next run's open removes the piece */
            errno = e;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}

/* Opening --joblog FILE to append: a joblog of ours (its header first) whose last line
   was cut short by an earlier run (a full disk, a file size limit, a kill in the middle
   of a write) loses that piece, said with its line, so that the next line starts a
   line of its own instead of being glued to it. Any other file is appended to as it
   is. -1 with errno when the file cannot be read or cut. */
int joblog_drop_cut_line(int fd, const char *file)
{
    char buf[1 << 16];
    off_t pos = 0, line_start = 0;
    int lines = 0, ours = 0;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDWR)
        return 0; /* a file we may only write to: appended to as it is */
    if (st.st_size == 0 || (pread(fd, buf, 1, st.st_size - 1) == 1 && buf[0] == '\n'))
        return 0; /* empty, or every line whole: nothing more to read */
    for (;;) {
        ssize_t r = pread(fd, buf, sizeof buf, pos);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        if (pos == 0)
            ours = r >= 6 && memcmp(buf, "input\t", 6) == 0;
        if (!ours)
            return 0;
        for (ssize_t k = 0; k < r; k++)
            if (buf[k] == '\n') {
                lines++;
                line_start = pos + k + 1;
            }
        pos += r;
    }
    if (pos == line_start)
        return 0; /* empty, or every line whole */
    if (ftruncate(fd, line_start) != 0)
        return -1;
    fprintf(stderr,
            "pipefuse run: --joblog %s:%d: the last line was cut short (%lld bytes without a "
            "newline: an earlier run's writing stopped there); removed before appending\n",
            file, lines + 1, (long long)(pos - line_start));
    return 0;
}

/* s on the log as one line: control bytes (a newline or tab in a file name, which
   could pass for a line of its own) as \n, \t, \r or \xHH, a backslash doubled. */
void log_text(const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '\\') /* doubled, so that "\\n" is not a newline's "\n" */
            fputs("\\\\", stderr);
        else if (*c >= 0x20 && *c != 0x7f)
            fputc(*c, stderr);
        else if (*c == '\n' || *c == '\t' || *c == '\r')
            fprintf(stderr, "\\%c", *c == '\n' ? 'n' : *c == '\t' ? 't' : 'r');
        else
            fprintf(stderr, "\\x%02x", *c);
    }
}
