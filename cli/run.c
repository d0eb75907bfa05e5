/* cli/run.c: `pipefuse run`: a pipeline over many PNG files, supervised.
 *
 * This process is the supervisor: it lists the inputs (directories expanded, a shard
 * taken, existing outputs skipped, a joblog's failures retried), forks a worker
 * (batch/worker.c) before touching the engine, hands it input indexes and logs the results
 * in input order. When the worker dies (a signal, exit() in a stage, a lost GPU
 * context) or a file runs past --file-timeout, the file at fault fails with its
 * stage named, the other files it held are sent again, and a fresh worker goes on.
 * A death that names no file makes the files it held suspects: each is run again
 * alone, so a second death convicts it and the innocent finish.
 */
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

#include "batch.h"

enum { ST_PENDING, ST_SENT, ST_OK, ST_FAILED, ST_SKIPPED };

typedef struct item {
    int state;
    int attempts; /* times sent to a worker */
    int suspect;  /* held by a worker that died naming no file: run alone */
    int entered;  /* the worker reported it entered the engine */
    int begun;    /* the worker reported its decode began: --file-timeout counts from then */
    double t_begun, t_engine, seconds;
    char *msg;         /* outputs, or the reason it failed */
    char *kind;        /* failures: "bad input", "crashed", ... for the summary */
    char *where;       /* cli_where, once asked */
    struct stat in_st; /* the input when the batch started (have_st), for its record */
    int have_st;
} item;

typedef struct worker {
    pid_t pid;
    int job_fd, rep_fd;
    char buf[65536];
    size_t have;
    int ready, lanes, codecs;
    int lost;         /* reported a lost GPU context */
    int crash_index;  /* from a C record; -2 none */
    char crash[4000]; /* its text */
    char where[4000]; /* a W record (hang) */
    int outstanding;
    unsigned long long plans;
    int reaped, status; /* waited for (worker_gone), and how it ended */
    int timing;         /* the input past --file-timeout being asked about ("H") */
    int timing_seen;    /* a thread answered that it is in that input's decode or encode */
    unsigned long long over_memory; /* killed for its resident memory (bytes) */
} worker;

static volatile sig_atomic_t interrupted;
static void on_interrupt(int sig)
{
    (void)sig;
    interrupted++;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- Inputs --------------------------------------------------------------------------------------- */

static int push(char ***list, int *n, const char *s)
{
    char **l = realloc(*list, sizeof(char *) * (size_t)(*n + 1));
    if (!l)
        return -1;
    *list = l;
    l[*n] = strdup(s);
    return l[(*n)++] ? 0 : -1;
}

static int is_png_name(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".png") == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory contributes its *.png files (not recursive), sorted by name; anything
   else is taken as a file and reported later if it cannot be read. */
static int add_input(run_opts *o, const char *arg)
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
static void escape_field(FILE *f, const char *s, int comma)
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

static int read_failed(run_opts *o, const char *file)
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
static int first_claim(const run_opts *o, const char *name)
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
static int take_failed(run_opts *o)
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

/* ---- Options --------------------------------------------------------------------------------------- */

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "pipefuse run: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    return PF_EXIT_USAGE;
}

/* "512M", "2G", "1000000", "1.5G": bytes; 0 on error (a sign, spaces, hex, text after
   the unit, nothing, or more than 1e18). */
static unsigned long long parse_bytes(const char *s)
{
    static const char units[] = "kmgt";
    size_t n = strlen(s);
    if (n && (s[n - 1] == 'b' || s[n - 1] == 'B'))
        n--;
    double m = 1;
    const char *u = n ? strchr(units, s[n - 1] | 0x20) : NULL;
    if (u && *u) {
        for (const char *k = units; k <= u; k++)
            m *= 1024;
        n--;
    }
    char num[64];
    double v;
    if (n == 0 || n >= sizeof num)
        return 0;
    memcpy(num, s, n);
    num[n] = 0;
    if (cli_parse_real(num, 0, 1e18, &v) != 0 || !(v > 0) || v * m > 1e18 || v * m < 1)
        return 0;
    return (unsigned long long)(v * m);
}

/* Half of the memory this process may use: physical memory, or the cgroup's limit. */
static unsigned long long default_max_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    unsigned long long mem =
        pages > 0 && psize > 0 ? (unsigned long long)pages * (unsigned long long)psize : 4ull << 30;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "re");
    if (f) {
        unsigned long long lim;
        if (fscanf(f, "%llu", &lim) == 1 && lim < mem)
            mem = lim;
        fclose(f);
    }
    return mem / 2;
}

/* --shard I/N, auto (Slurm array, or JOB_COMPLETION_INDEX with PIPEFUSE_SHARDS) or auto/N. */
static int parse_shard(const char *v, run_opts *o)
{
    if (strncmp(v, "auto", 4) == 0) {
        const char *idx = getenv("JOB_COMPLETION_INDEX"), *cnt = NULL;
        const char *idx_var = "JOB_COMPLETION_INDEX", *cnt_var = "PIPEFUSE_SHARDS";
        long base = 0;
        if (idx) {
            cnt = getenv("PIPEFUSE_SHARDS");
        } else if ((idx = getenv("SLURM_ARRAY_TASK_ID"))) {
            idx_var = "SLURM_ARRAY_TASK_ID";
            cnt_var = "SLURM_ARRAY_TASK_COUNT";
            cnt = getenv("SLURM_ARRAY_TASK_COUNT");
            const char *min = getenv("SLURM_ARRAY_TASK_MIN");
            long long b = 0;
            if (min && cli_parse_int(min, 0, INT_MAX, &b) != 0) {
                fprintf(stderr,
                        "pipefuse run: --shard %s: SLURM_ARRAY_TASK_MIN=%s is not a number\n", v,
                        min);
                return -1;
            }
            base = (long)b;
        } else {
            fprintf(stderr,
                    "pipefuse run: --shard %s: neither JOB_COMPLETION_INDEX (a Kubernetes "
                    "Indexed Job) nor SLURM_ARRAY_TASK_ID (a Slurm array) is set\n",
                    v);
            return -1;
        }
        if (v[4] == '/')
            cnt = v + 5, cnt_var = "auto/N";
        else if (v[4])
            cnt = NULL;
        if (!cnt) {
            fprintf(stderr,
                    "pipefuse run: --shard %s: the number of shards is unknown: give it "
                    "as --shard auto/N (a Kubernetes Job's completions)\n",
                    v);
            return -1;
        }
        long long i, n;
        int bad_i = cli_parse_int(idx, 0, INT_MAX, &i) != 0;
        if (bad_i || cli_parse_int(cnt, 1, 1000000, &n) != 0) {
            fprintf(stderr, "pipefuse run: --shard %s: %s='%s' is not %s\n", v,
                    bad_i ? idx_var : cnt_var, bad_i ? idx : cnt,
                    bad_i ? "a shard index (0, 1, 2...)" : "a number of shards (1 to 1000000)");
            return -1;
        }
        i -= base;
        if (i < 0 || i >= n) {
            fprintf(stderr,
                    "pipefuse run: --shard %s: index %s%s%ld of %s shards is out of range\n", v,
                    idx, base ? " - " : "", base, cnt);
            return -1;
        }
        o->shard_index = (int)i;
        o->shard_count = (int)n;
        return 0;
    }
    const char *slash = strchr(v, '/');
    char i_text[32];
    long long i, n;
    if (!slash || (size_t)(slash - v) >= sizeof i_text)
        return usage_error("--shard expects I/N (0 <= I < N) or auto, not", v), -1;
    snprintf(i_text, sizeof i_text, "%.*s", (int)(slash - v), v);
    if (cli_parse_int(i_text, 0, 999999, &i) != 0 ||
        cli_parse_int(slash + 1, 1, 1000000, &n) != 0 || i >= n)
        return usage_error("--shard expects I/N (0 <= I < N) or auto, not", v), -1;
    o->shard_index = (int)i;
    o->shard_count = (int)n;
    return 0;
}

static int parse_filter(const char *v)
{
    static const struct {
        const char *name;
        int mask;
    } f[] = {{"none", PNG_FILTER_NONE}, {"sub", PNG_FILTER_SUB},     {"up", PNG_FILTER_UP},
             {"avg", PNG_FILTER_AVG},   {"paeth", PNG_FILTER_PAETH}, {"all", PNG_ALL_FILTERS},
             {"fast", PNG_FAST_FILTERS}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (strcmp(v, f[i].name) == 0)
            return f[i].mask;
    return -1;
}

/* --band-rows and PIPEFUSE_BAND_ROWS: "auto" (-1), "off" (0) or rows per band (1 to
   1048576). -2 when v is none of them. */
static int parse_band_rows(const char *v)
{
    if (strcmp(v, "auto") == 0)
        return -1;
    if (strcmp(v, "off") == 0)
        return 0;
    long long n;
    return cli_parse_int(v, 1, 1 << 20, &n) != 0 ? -2 : (int)n;
}

static int parse_args(int argc, char **argv, run_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && v) {
            o->outdir = argv[++i];
        } else if (strcmp(a, "--backend") == 0 && v) {
            o->backend = argv[++i];
        } else if (strcmp(a, "--no-fuse") == 0) {
            o->no_fuse = 1;
        } else if (strcmp(a, "--max-launch-ms") == 0 && v) {
            double ms;
            if (cli_parse_real(v, 0, 1e9, &ms) != 0)
                return usage_error("--max-launch-ms must be milliseconds >= 0 (0: from the "
                                   "device), not",
                                   v);
            o->max_launch_ms = argv[++i];
        } else if (strcmp(a, "--profile") == 0) {
            o->profile = 1;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o->verbose = 1;
        } else if (strcmp(a, "--dump-kernels") == 0 && v) {
            o->dump_kernels = argv[++i];
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--progress") == 0) {
            o->progress = 1;
        } else if (strcmp(a, "--skip-existing") == 0) {
            o->skip_existing = 1;
        } else if (strcmp(a, "--strip") == 0) {
            o->strip = 1;
        } else if (strcmp(a, "--joblog") == 0 && v) {
            o->joblog = argv[++i];
        } else if (strcmp(a, "--retry-failed") == 0 && v) {
            o->retry_failed = argv[++i];
        } else if (strcmp(a, "--shard") == 0 && v) {
            if (parse_shard(argv[++i], o) != 0)
                return PF_EXIT_USAGE;
        } else if (strcmp(a, "--set") == 0 && v) {
            o->sets = realloc(o->sets, sizeof(char *) * (size_t)(o->n_sets + 1));
            o->sets[o->n_sets++] = argv[++i];
        } else if (strcmp(a, "--input") == 0 && v) {
            o->binds = realloc(o->binds, sizeof(char *) * (size_t)(o->n_binds + 1));
            o->binds[o->n_binds++] = argv[++i];
        } else if (strcmp(a, "--table-format") == 0 && v) {
            if (strcmp(v, "csv") && strcmp(v, "json"))
                return usage_error("--table-format must be csv or json, not", v);
            o->json_tables = strcmp(argv[++i], "json") == 0;
        } else if (strcmp(a, "--zlib") == 0 && v) {
            long long z;
            if (cli_parse_int(argv[++i], 0, 9, &z) != 0)
                return usage_error("--zlib must be 0-9, not", v);
            o->zlib = (int)z;
        } else if (strcmp(a, "--png-filter") == 0 && v) {
            o->png_filter = parse_filter(argv[++i]);
            if (o->png_filter < 0)
                return usage_error(
                    "--png-filter must be none, sub, up, avg, paeth, fast or all, not", v);
        } else if (strcmp(a, "--jobs") == 0 && v) {
            long long n;
            if (cli_parse_int(argv[++i], 1, 64, &n) != 0)
                return usage_error("--jobs must be 1-64, not", v);
            o->lanes = (int)n;
        } else if (strcmp(a, "--file-timeout") == 0 && v) {
            double t;
            if (cli_parse_real(argv[++i], 0, 1e7, &t) != 0)
                return usage_error("--file-timeout must be seconds >= 0 (0: none), not", v);
            o->file_timeout_s = t;
        } else if (strcmp(a, "--max-memory") == 0 && v) {
            o->max_memory = parse_bytes(argv[++i]);
            if (!o->max_memory)
                return usage_error("--max-memory must be a size such as 512M or 4G, not", v);
        } else if (strcmp(a, "--band-rows") == 0 && v) {
            o->band_rows = parse_band_rows(argv[++i]);
            if (o->band_rows == -2)
                return usage_error("--band-rows must be auto, off or a number of rows, not", v);
        } else if (strcmp(a, "--max-pixels") == 0 && v) {
            long long px;
            if (cli_parse_int(argv[++i], 1, 1ll << 48, &px) != 0)
                return usage_error("--max-pixels must be a number of pixels from 1 to 2^48, not",
                                   v);
            o->max_pixels = (unsigned long long)px;
        } else if (a[0] == '-' && a[1]) {
            return cli_unknown_option("run", a);
        } else if (!o->pipeline) {
            o->pipeline = a;
        } else if (add_input(o, a) != 0) {
            return PF_EXIT_USAGE;
        }
    }
    if (!o->pipeline)
        return usage_error("no pipeline file given", NULL);
    if (!o->outdir)
        return usage_error("no output directory given (-o DIR)", NULL);
    if (o->retry_failed && read_failed(o, o->retry_failed) != 0)
        return PF_EXIT_USAGE; /* take_failed picks the inputs, after the shard */
    if (!o->n_inputs && !o->retry_failed)
        return usage_error("no input files", NULL);
    if (strlen(o->outdir) >= PATH_MAX) {
        fprintf(stderr,
                "pipefuse run: -o %.60s...: the folder's name is %zu bytes, over the system's "
                "PATH_MAX of %d\n",
                o->outdir, strlen(o->outdir), PATH_MAX - 1);
        return PF_EXIT_USAGE;
    }
    return PF_EXIT_OK;
}

/* Takes every N-th input of the sorted list, starting at I. */
static void take_shard(run_opts *o)
{
    if (!o->shard_count)
        return;
    qsort(o->inputs, (size_t)o->n_inputs, sizeof(char *), cmp_str);
    int w = 0;
    for (int i = 0; i < o->n_inputs; i++) {
        if (i % o->shard_count == o->shard_index)
            o->inputs[w++] = o->inputs[i];
        else
            free(o->inputs[i]);
    }
    o->n_inputs = w;
}

/* ---- The supervisor ------------------------------------------------------------------------------ */

typedef struct sup {
    run_opts *o;
    item *it;
    int dirfd;
    worker w;
    int next;   /* the next input in order never sent */
    int *retry; /* inputs to send again, before any new one */
    int n_retry;
    int solo;   /* a suspect is running alone */
    int logged; /* inputs logged so far, in order */
    int n_ok, n_failed, n_skipped;
    int n_out; /* the pipeline's outputs */
    char out_kind[RUN_MAX_IO];
    int out_json[RUN_MAX_IO];
    char *out_name[RUN_MAX_IO];
    int n_images;
    int joblog;     /* its descriptor, appending; -1: none */
    int joblog_err; /* a write to it failed (said once): the run cannot end 0 */
    int progress;
    double t0, last_draw;
    unsigned long long bytes_done;
    unsigned long long plans;
    int restarts;
    double t_dec, t_eng, t_enc; /* ms summed over the files done */
    int n_timed;
    int n_banded;   /* files run in bands of rows */
    char **notices; /* the engine's messages said so far, by every worker (N records) */
    int n_notices;
    fresh_db *fresh; /* the output folder's records (NULL: none kept, -o -) */
    char fp[33];     /* this run's fingerprint ("": unknown, nothing skipped or recorded) */
    int fresh_err;   /* a record could not be written (said once) */
} sup;

/* The extension of output k's own format (its {ext}). */
static const char *out_ext(const sup *s, int k)
{
    return s->out_kind[k] == 'i' ? "png" : s->out_json[k] ? "json" : "csv";
}

/* The name of output k of input i (inside OUTDIR), malloc'd. */
static char *final_name(const sup *s, int i, int k)
{
    const char *ext = out_ext(s, k);
    /* names.c: --name templates, folders of --recursive, inputs of the same name */
    return cli_output_name(s->o->inputs[i], s->out_name[k], ext,
                           s->out_kind[k] == 'i' && s->n_images == 1);
}

/* Input i where it is (cli_where), computed once. */
static const char *item_where(sup *s, int i)
{
    if (!s->it[i].where)
        s->it[i].where = cli_where(s->o->inputs[i]);
    return s->it[i].where;
}

/* Input i as messages and the joblog show it: stdin's spooled file is "-". */
static const char *shown(const sup *s, int i)
{
    const char *p = s->o->inputs[i];
    return s->o->stdin_path && strcmp(p, s->o->stdin_path) == 0 ? "-" : p;
}

static void clear_status(sup *s)
{
    if (s->progress && s->last_draw > 0)
        fputs("\r\033[K", stderr);
}

static void draw_status(sup *s, int force)
{
    double t = now_ms();
    if (!s->progress || (!force && t - s->last_draw < 200))
        return;
    s->last_draw = t;
    int n = s->o->n_inputs, done = s->n_ok + s->n_failed + s->n_skipped;
    double secs = (t - s->t0) / 1e3;
    double rate = secs > 0 ? (s->n_ok + s->n_failed) / secs : 0;
    char eta[32] = "--";
    if (rate > 0 && done < n) {
        double left = (n - done) / rate;
        snprintf(eta, sizeof eta, "%d:%02d", (int)left / 60, (int)left % 60);
    }
    fprintf(stderr, "\r\033[K%d/%d files  %.1f files/s  %.1f MB/s  %d failed  ETA %s", done, n,
            rate, secs > 0 ? s->bytes_done / 1e6 / secs : 0.0, s->n_failed, eta);
    fflush(stderr);
}

/* Appends len bytes to the joblog as one line: written whole or not at all, so that a
   full disk or a file size limit half way through a line leaves no cut line (which a
   later line would be glued to). -1 with errno on failure. */
static int append_whole(int fd, const char *buf, size_t len)
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
static int joblog_drop_cut_line(int fd, const char *file)
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

static void joblog_line(sup *s, int i)
{
    if (s->joblog < 0)
        return;
    item *t = &s->it[i];
    static const char *const names[] = {"pending", "sent", "ok", "failed", "skipped"};
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len); /* the line, then one write */
    if (!m) {
        if (!s->joblog_err) {
            s->joblog_err = ENOMEM;
            clear_status(s);
            fprintf(stderr, "pipefuse run: --joblog %s: out of memory\n", s->o->joblog);
        }
        return;
    }
    cli_escape(m, shown(s, i));
    fprintf(m, "\t%s\t%.3f\t", names[t->state], t->seconds);
    /* the outputs column: the names, each with its commas escaped, joined by ", " (the
       names the worker wrote: send_job gave it these); with -o - the image went to
       stdout and no file stays, as the log line says: "-" */
    if (s->o->stdout_dir && t->state == ST_OK)
        fputc('-', m);
    for (int k = 0;
         k < s->n_out && !s->o->stdout_dir && (t->state == ST_OK || t->state == ST_SKIPPED); k++) {
        char *f = final_name(s, i, k);
        if (k)
            fputs(", ", m);
        escape_field(m, f, 1);
        free(f);
    }
    fputc('\t', m);
    if (t->state == ST_FAILED)
        cli_escape(m, t->msg);
    /* the name column: the folder and stem its outputs are named from (a retry names
       the input so again, whatever the command line gives it) */
    char *key = cli_output_key(s->o->inputs[i]);
    fputc('\t', m);
    cli_escape(m, key);
    free(key);
    fputc('\n', m);
    /* a line per input as it ends: a killed batch keeps its log */
    int bad = fclose(m) != 0;
    if (bad)
        errno = ENOMEM;
    else
        bad = append_whole(s->joblog, buf, len) != 0;
    free(buf);
    if (bad && !s->joblog_err) {
        s->joblog_err = errno ? errno : EIO;
        clear_status(s);
        fprintf(stderr,
                "pipefuse run: --joblog %s: cannot write: %s (the batch goes on; its lines "
                "from %s on may be missing)\n",
                s->o->joblog, strerror(s->joblog_err), shown(s, i));
    }
}

/* s on the log as one line: control bytes (a newline or tab in a file name, which
   could pass for a line of its own) as \n, \t, \r or \xHH. */
static void log_text(const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c >= 0x20 && *c != 0x7f)
            fputc(*c, stderr);
        else if (*c == '\n' || *c == '\t' || *c == '\r')
            fprintf(stderr, "\\%c", *c == '\n' ? 'n' : *c == '\t' ? 't' : 'r');
        else
            fprintf(stderr, "\\x%02x", *c);
    }
}

/* Logs every finished input at the head of the input order. */
static void log_ready(sup *s)
{
    int n = s->o->n_inputs;
    while (s->logged < n) {
        int i = s->logged;
        item *t = &s->it[i];
        if (t->state == ST_PENDING || t->state == ST_SENT)
            break;
        clear_status(s);
        int quiet = s->o->quiet && t->state != ST_FAILED;
        if (!quiet) {
            fprintf(stderr, "[%d/%d] ", i + 1, n);
            log_text(shown(s, i));
        }
        if (t->state == ST_FAILED) {
            fputs(": FAILED: ", stderr);
            log_text(t->msg);
            fputc('\n', stderr);
        } else if (!quiet && t->state == ST_OK) {
            fputs(" -> ", stderr);
            log_text(s->o->stdout_dir ? "stdout" : t->msg);
            fprintf(stderr, " (%.1f ms)\n", t->seconds * 1e3);
        } else if (!quiet) {
            fputs(": skipped, outputs exist\n", stderr);
        }
        joblog_line(s, i);
        s->logged++;
    }
    draw_status(s, 0);
}

/* -o -: copies input i's image output (in the private folder) to the real stdout and
   closes it. 0, or -1 with the reason in why: the input then failed, in the log, the
   joblog and the summary alike. */
static int copy_to_stdout(sup *s, int i, char *why, size_t whyn)
{
    int out = s->o->stdout_fd, k = 0, in = -1, rc = -1, e = EIO;
    s->o->stdout_fd = -1;
    while (k < s->n_out && s->out_kind[k] != 'i')
        k++;
    char *name = k < s->n_out ? final_name(s, i, k) : NULL;
    if (name && (in = openat(s->dirfd, name, O_RDONLY | O_CLOEXEC)) >= 0) {
        char buf[1 << 16];
        for (rc = 0; rc == 0;) {
            ssize_t r = read(in, buf, sizeof buf);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                rc = r < 0 ? (e = errno, -1) : 0;
                break;
            }
            for (ssize_t off = 0; off < r && rc == 0;) {
                ssize_t w = write(out, buf + off, (size_t)(r - off));
                if (w < 0 && errno == EINTR && interrupted < 2)
                    continue; /* a second Ctrl-C abandons a reader that does not read */
                if (w <= 0)
                    rc = -1, e = w < 0 ? errno : EIO;
                else
                    off += w;
            }
        }
    } else {
        e = name ? errno : ENOMEM;
    }
    if (in >= 0)
        close(in);
    /* a file on NFS may say a failed write only at close */
    if (close(out) != 0 && rc == 0 && errno != EINTR)
        rc = -1, e = errno;
    free(name);
    if (rc != 0)
        snprintf(why, whyn, "cannot write the output to stdout: %s", strerror(e));
    return rc;
}

static void finish(sup *s, int i, int state, const char *msg, const char *kind, double ms)
{
    item *t = &s->it[i];
    char why[256];
    if (state == ST_OK && s->o->stdout_fd >= 0 && copy_to_stdout(s, i, why, sizeof why) != 0) {
        state = ST_FAILED;
        msg = why;
        kind = "stdout";
    }
    if (t->state == ST_SENT)
        s->w.outstanding--;
    t->state = state;
    t->seconds = ms / 1e3;
    free(t->msg);
    t->msg = strdup(msg ? msg : "");
    t->kind = (char *)kind;
    if (state == ST_OK && s->fresh && s->fp[0] && t->have_st) {
        char *names[RUN_MAX_IO], *key = cli_output_key(s->o->inputs[i]);
        int nn = 0;
        for (; nn < s->n_out && (names[nn] = final_name(s, i, nn)); nn++)
            ;
        const char *w = item_where(s, i);
        if ((nn < s->n_out || !w || !key ||
             fresh_record(s->fresh, s->dirfd, w, key, s->fp, &t->in_st, names, nn) != 0) &&
            !s->fresh_err) {
            s->fresh_err = errno ? errno : ENOMEM;
            clear_status(s);
            fprintf(stderr,
                    "pipefuse run: %s/%s: cannot record what made the outputs: %s (the batch "
                    "goes on; --skip-existing will make these outputs again)\n",
                    s->o->outdir, FRESH_FILE, strerror(s->fresh_err));
        }
        for (int k = 0; k < nn; k++)
            free(names[k]);
        free(key);
    }
    if (state == ST_OK) {
        s->n_ok++;
        struct stat st;
        if (stat(s->o->inputs[i], &st) == 0)
            s->bytes_done += (unsigned long long)st.st_size;
    } else if (state == ST_FAILED) {
        s->n_failed++;
    } else {
        s->n_skipped++;
    }
    if (t->suspect)
        s->solo = 0;
}

/* Sends input i back to be done again (its worker died holding it). */
static void requeue(sup *s, int i, int suspect)
{
    item *t = &s->it[i];
    s->w.outstanding--;
    t->state = ST_PENDING;
    t->entered = 0;
    t->begun = 0;
    t->suspect |= suspect;
    if (t->attempts >= 32) { /* a bound, whatever happens */
        t->state = ST_SENT;
        s->w.outstanding++;
        finish(s, i, ST_FAILED, "its worker died 32 times while it was in flight", "crashed", 0);
        return;
    }
    s->retry[s->n_retry++] = i;
}

/* ---- The worker process ---------------------------------------------------------------------------- */

/* What a worker's stages forked and left running (a child sleeping on the worker's
   pipes, a daemon that did not leave the group) ends with the worker: its process
   group is killed, the worker with it, while the worker is not yet reaped (its pid,
   the group's id, cannot be another's until then). */
static void end_worker_group(pid_t pid)
{
    if (pid > 0)
        kill(-pid, SIGKILL);
}

/* Waits for the worker to end, kills its group, reaps it. */
static void reap_worker(pid_t pid, int *status)
{
    siginfo_t si;
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
        ;
    end_worker_group(pid);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
}

/* This program, opened once when the batch starts (see self_exe): the worker is
   started by executing it again. -1: it cannot be (no /proc and no usable path), and
   the forked copy works on its own. */
static int exe_fd = -1;

/* Whether fd is the file of this program: its program headers are the ones the kernel
   mapped (AT_PHDR). Run through the dynamic loader (`ld.so pipefuse ...`),
   /proc/self/exe and AT_EXECFN are the loader, which would not start a worker. */
static int is_self(int fd)
{
    ElfW(Ehdr) eh;
    const void *ph = (const void *)getauxval(AT_PHDR);
    size_t phnum = getauxval(AT_PHNUM), size = phnum * sizeof(ElfW(Phdr));
    if (!ph || !phnum || pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_phnum != phnum ||
        eh.e_phentsize != sizeof(ElfW(Phdr)))
        return 0;
    void *buf = malloc(size);
    int same = buf && pread(fd, buf, size, (off_t)eh.e_phoff) == (ssize_t)size &&
               memcmp(buf, ph, size) == 0;
    free(buf);
    return same;
}

/* Opens this program's file for executing it again: /proc/self/exe, else the path the
   kernel executed it by (AT_EXECFN; the working directory has not changed since). */
static void self_exe(void)
{
    if (exe_fd >= 0)
        return;
    const char *tries[2] = {"/proc/self/exe", (const char *)getauxval(AT_EXECFN)};
    for (int k = 0; k < 2 && exe_fd < 0; k++) {
        struct stat st;
        if (!tries[k] || (exe_fd = open(tries[k], O_RDONLY | O_CLOEXEC)) < 0)
            continue;
        if (fstat(exe_fd, &st) != 0 || !S_ISREG(st.st_mode) || !is_self(exe_fd)) {
            close(exe_fd);
            exe_fd = -1;
        }
    }
}

/* Forks and executes this program again as a worker (see batch/config.c's worker_entry): a
   fresh process, so CUDA starts clean in it whatever this one did. Where the program
   cannot be executed again, the forked copy works on its own. Either way the worker
   holds only its own ends of the pipes: one holding the job pipe's write end would
   never see it end, and the batch would never finish. */
static int start_worker(sup *s)
{
    int jp[2] = {-1, -1}, rp[2] = {-1, -1}, cp[2] = {-1, -1};
    if (pipe2(jp, O_CLOEXEC) != 0 || pipe2(rp, O_CLOEXEC) != 0 || pipe2(cp, O_CLOEXEC) != 0) {
        int e = errno;
        struct rlimit rl;
        if (e == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0)
            fprintf(stderr,
                    "pipefuse run: cannot start the worker: no descriptor left for its pipes "
                    "(ulimit -n is %llu); raise the limit\n",
                    (unsigned long long)rl.rlim_cur);
        else
            fprintf(stderr, "pipefuse run: pipe: %s\n", strerror(e));
        for (int k = 0; k < 2; k++) {
            if (jp[k] >= 0)
                close(jp[k]);
            if (rp[k] >= 0)
                close(rp[k]);
            if (cp[k] >= 0)
                close(cp[k]);
        }
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pipefuse run: fork: %s\n", strerror(errno));
        close(jp[0]), close(jp[1]), close(rp[0]), close(rp[1]), close(cp[0]), close(cp[1]);
        return -1;
    }
    if (pid == 0) {
        /* the supervisor's ends first: the worker must see the job pipe end */
        close(jp[1]);
        close(rp[0]);
        close(cp[1]);
        /* The worker leads a process group of its own, so that what its stages fork
           ends with it (end_worker_group). Ctrl-C and SIGTERM reach the supervisor's
           group (a terminal, timeout(1), kill %1); the supervisor decides, so the
           worker ignores both anyway (the ignoring survives execv) and is ended only by
           SIGKILL or the supervisor's death. */
        setpgid(0, 0);
        if (isatty(0)) { /* a background group reading the terminal would be stopped */
            int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (nul >= 0 && dup2(nul, 0) == 0)
                close(nul);
        }
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN); /* a hangup too (the terminal closed) */
        /* a background group writing to a terminal set `stty tostop` would be stopped,
           and nothing would continue it: the write goes ahead instead */
        signal(SIGTTOU, SIG_IGN);
        signal(SIGTTIN, SIG_IGN);
        signal(SIGPIPE, SIG_DFL);
        cli_guard_off(); /* a worker's crash is its supervisor's to report */
        /* the worker's descriptors keep their numbers (no fixed numbers, which a low
           ulimit -n would refuse) and lose close-on-exec in this process only */
        int fds[4] = {cp[0], jp[0], rp[1], s->dirfd}, ok = exe_fd >= 0;
        for (int k = 0; k < 4 && ok; k++)
            ok = fcntl(fds[k], F_SETFD, 0) == 0;
        char env[96];
        snprintf(env, sizeof env, "PIPEFUSE_RUN_WORKER=%d,%d,%d,%d", cp[0], jp[0], rp[1], s->dirfd);
        if (ok && putenv(env) == 0) {
            char *argv[] = {"pipefuse", "run-worker", NULL};
            fexecve(exe_fd, argv, environ);
        }
        close(cp[0]);
        worker_main(s->o, jp[0], rp[1], s->dirfd);
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    close(jp[0]);
    close(rp[1]);
    close(cp[0]);
    int wrc = run_config_write(cp[1], s->o); /* a worker that did not exec ignores it */
    close(cp[1]);
    if (wrc != 0) {
        end_worker_group(pid); /* the worker with its group */
        reap_worker(pid, NULL);
        close(jp[1]);
        close(rp[0]);
        fprintf(stderr, "pipefuse run: cannot start a worker: %s\n", strerror(errno));
        return -1;
    }
    memset(&s->w, 0, sizeof s->w);
    s->w.pid = pid;
    s->w.job_fd = jp[1];
    s->w.rep_fd = rp[0];
    s->w.crash_index = -2;
    return 0;
}

/* A message the engine of a worker logged (escaped), printed unless some worker said
   it before: each worker process starts with nothing seen. */
static void on_notice(sup *s, int level, char *msg)
{
    cli_unescape(msg);
    for (int k = 0; k < s->n_notices; k++)
        if (strcmp(s->notices[k], msg) == 0)
            return;
    char **l = realloc(s->notices, sizeof *l * (size_t)(s->n_notices + 1));
    if (l && (l[s->n_notices] = strdup(msg)))
        s->n_notices++;
    if (l)
        s->notices = l;
    clear_status(s);
    fprintf(stderr, "pipefuse: %s%s\n",
            level == 1   ? "warning: "
            : level >= 2 ? "error: "
                         : "",
            msg);
}

/* One report line from the worker. Returns -1 on a setup failure. */
static int on_line(sup *s, char *line)
{
    worker *w = &s->w;
    char *rest = strchr(line, ' ');
    rest = rest ? rest + 1 : line + strlen(line);
    switch (line[0]) {
    case 'X':
        fprintf(stderr, "pipefuse run: %s\n", rest);
        return -1;
    case 'O':
        if (s->n_out < RUN_MAX_IO) {
            s->out_kind[s->n_out] = rest[0];
            s->out_json[s->n_out] = rest[2] == '1';
            free(s->out_name[s->n_out]);
            s->out_name[s->n_out] = strdup(rest + 4);
            s->n_out++;
        }
        return 0;
    case 'R':
        w->ready = 1;
        sscanf(rest, "%d %d", &w->lanes, &w->codecs);
        return 0;
    case 'B': {
        int i = atoi(rest);
        if (i >= 0 && i < s->o->n_inputs && s->it[i].state == ST_SENT) {
            s->it[i].begun = 1;
            s->it[i].t_begun = now_ms();
        }
        return 0;
    }
    case 'E': {
        int i = atoi(rest);
        if (i >= 0 && i < s->o->n_inputs) {
            s->it[i].entered = 1;
            s->it[i].t_engine = now_ms();
        }
        return 0;
    }
    case 'D': {
        int i, failed;
        double ms;
        int used = 0;
        if (sscanf(rest, "%d %d %lf %n", &i, &failed, &ms, &used) < 3 || i < 0 ||
            i >= s->o->n_inputs || s->it[i].state != ST_SENT)
            return 0;
        char *msg = rest + used;
        cli_unescape(msg); /* the worker escapes it as in the joblog */
        finish(s, i, failed ? ST_FAILED : ST_OK, msg, failed ? "failed" : NULL, ms);
        return 0;
    }
    case 'T': {
        int i, rows = 0;
        double d, e, c;
        if (sscanf(rest, "%d %lf %lf %lf %d", &i, &d, &e, &c, &rows) >= 4) {
            s->n_banded += rows > 0;
            s->t_dec += d;
            s->t_eng += e;
            s->t_enc += c;
            s->n_timed++;
        }
        return 0;
    }
    case 'C':
        w->crash_index = atoi(rest);
        snprintf(w->crash, sizeof w->crash, "%s", strchr(rest, ' ') ? strchr(rest, ' ') + 1 : rest);
        return 0;
    case 'W':
        if (rest[0] == '#') { /* "#index step": a thread in a file's decode or encode */
            char *sp = strchr(rest, ' ');
            if (sp && atoi(rest + 1) == w->timing) {
                w->timing_seen = 1; /* a thread is still in its decode or encode */
                snprintf(w->where, sizeof w->where, "its %s (no plugin code on its thread)",
                         sp + 1);
            }
        } else if (!w->where[0]) {
            snprintf(w->where, sizeof w->where, "%s", rest);
        }
        return 0;
    case 'L':
        w->lost = 1;
        return 0;
    case 'N': { /* each once per run: a restarted worker says them again */
        char *msg = strchr(rest, ' ');
        on_notice(s, atoi(rest), msg ? msg + 1 : rest + strlen(rest));
        return 0;
    }
    case 'P':
        s->plans++;
        return 0;
    }
    return 0;
}

/* Reads what the worker wrote. Returns 1 at end of file, -1 on a setup failure. */
static int read_reports(sup *s)
{
    worker *w = &s->w;
    ssize_t r = read(w->rep_fd, w->buf + w->have, sizeof w->buf - 1 - w->have);
    if (r < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : 1;
    if (r == 0)
        return 1;
    w->have += (size_t)r;
    char *line = w->buf, *nl;
    int rc = 0;
    while ((nl = memchr(line, '\n', w->have - (size_t)(line - w->buf)))) {
        *nl = 0;
        if (on_line(s, line) < 0)
            rc = -1;
        line = nl + 1;
    }
    w->have -= (size_t)(line - w->buf);
    memmove(w->buf, line, w->have);
    if (w->have == sizeof w->buf - 1)
        w->have = 0; /* a line too long to be ours */
    return rc;
}

static void describe_status(int status, char *buf, size_t n)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGILL, "SIGILL"},
                 {SIGFPE, "SIGFPE"},   {SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"},
                 {SIGALRM, "SIGALRM"}, {SIGPIPE, "SIGPIPE"}, {SIGXCPU, "SIGXCPU"},
                 {SIGTERM, "SIGTERM"}, {SIGUSR1, "SIGUSR1"}, {SIGHUP, "SIGHUP"}};
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *name = NULL;
        for (size_t k = 0; k < sizeof names / sizeof *names && !name; k++)
            name = names[k].sig == sig ? names[k].name : NULL;
        if (name)
            snprintf(buf, n, "killed by %s (%s)", name, strsignal(sig));
        else
            snprintf(buf, n, "killed by signal %d (%s)", sig, strsignal(sig));
    } else {
        snprintf(buf, n, "exit status %d", WEXITSTATUS(status));
    }
}

/* Whether the worker process has ended (it is then reaped). Its report pipe says less:
   a child a stage forked holds the pipe open after the worker is gone. */
static int worker_gone(sup *s)
{
    worker *w = &s->w;
    siginfo_t si;
    si.si_pid = 0;
    if (!w->reaped && w->pid > 0 &&
        waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == w->pid) {
        reap_worker(w->pid, &w->status);
        w->reaped = 1;
    }
    return w->reaped;
}

/* Reads the reports already in the pipe, without waiting for more. */
static void drain_reports(sup *s)
{
    struct pollfd p = {s->w.rep_fd, POLLIN, 0};
    while (poll(&p, 1, 0) > 0 && read_reports(s) == 0)
        ;
}

/* The worker's own bound: the budget --max-memory gives the files in flight, half again
   for what the budget does not count (the engine's threads, the codecs' buffers), and
   2 GB for the program, its libraries and a GPU runtime (a CUDA context and its lanes'
   page-locked staging). A stage that allocates past it (a leak) would otherwise take the
   machine until the kernel's OOM killer chose. */
static unsigned long long memory_bound(const run_opts *o)
{
    return o->max_memory + o->max_memory / 2 + (2ull << 30);
}

/* The worker's resident memory in bytes; 0 where it cannot be read (no /proc). */
static unsigned long long worker_rss(pid_t pid)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/%ld/statm", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    unsigned long long size, rss;
    if (n <= 0)
        return 0;
    buf[n] = 0;
    if (sscanf(buf, "%llu %llu", &size, &rss) != 2)
        return 0;
    return rss * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* The worker is gone (or killed for a timeout, culprit >= 0): blame, requeue, reap. */
static void worker_died(sup *s, int timed_out)
{
    worker *w = &s->w;
    /* The report pipe ended: the worker is ending, or a stage closed the pipe (a
       descriptor it does not own) and the worker lives on; that one is ended here. */
    int alive = 0;
    for (double until = now_ms() + 2000; !worker_gone(s) && now_ms() < until;)
        poll(NULL, 0, 10);
    if (!w->reaped) {
        alive = 1;
        end_worker_group(w->pid); /* the worker with its group */
        reap_worker(w->pid, &w->status);
        w->reaped = 1;
    }
    close(w->job_fd);
    close(w->rep_fd);
    char how[160];
    if (alive && timed_out < 0 && !interrupted)
        snprintf(how, sizeof how, "alive with its report pipe closed, so killed");
    else
        describe_status(w->status, how, sizeof how);
    int n = s->o->n_inputs;
    int culprit = timed_out >= 0 ? timed_out : w->crash_index;
    if (culprit >= 0 && culprit < n && s->it[culprit].state == ST_SENT) {
        char msg[8192];
        if (timed_out >= 0 && w->over_memory)
            snprintf(msg, sizeof msg,
                     "its worker reached %.1f MB, over the %.1f MB that --max-memory %.1f MB "
                     "bounds it to (a stage that holds memory it does not return); worker "
                     "killed",
                     w->over_memory / 1048576.0, memory_bound(s->o) / 1048576.0,
                     s->o->max_memory / 1048576.0);
        else if (timed_out >= 0)
            snprintf(msg, sizeof msg, "timed out after %g s (--file-timeout) in %s; worker killed",
                     s->o->file_timeout_s,
                     w->where[0] ? w->where
                                 : "its decode, the engine or its encode (no plugin code on any "
                                   "thread's stack)");
        else
            snprintf(msg, sizeof msg, "worker crashed: %s in %s", w->crash, how);
        /* w->crash is "SIGNAL\twhere" */
        for (char *c = msg; *c; c++)
            if (*c == '\t')
                *c = ' ';
        if (timed_out < 0) {
            char sig[64] = "", *tab = strchr(w->crash, '\t');
            snprintf(sig, sizeof sig, "%.*s", tab ? (int)(tab - w->crash) : 0, w->crash);
            snprintf(msg, sizeof msg, "%s in %s (worker %s; restarted)", sig[0] ? sig : "crash",
                     tab ? tab + 1 : "an unknown place", how);
        }
        finish(s, culprit, ST_FAILED, msg,
               timed_out >= 0 && w->over_memory ? "memory"
               : timed_out >= 0                 ? "timed out"
                                                : "crashed",
               0);
    }
    /* Everything else it held goes again; with no culprit named, the files that were
       in the engine are suspects and run alone. */
    int named = culprit >= 0 || w->lost;
    for (int i = 0; i < n; i++) {
        if (s->it[i].state != ST_SENT)
            continue;
        if (s->it[i].suspect && !named) {
            char msg[4400];
            snprintf(msg, sizeof msg, "the worker died while running it alone (%s%s%s)", how,
                     w->crash[0] ? ": " : "", w->crash);
            for (char *c = msg; *c; c++)
                if (*c == '\t')
                    *c = ' ';
            finish(s, i, ST_FAILED, msg, "crashed", 0);
            continue;
        }
        requeue(s, i, !named && s->it[i].entered);
    }
    s->w.outstanding = 0;
    s->w.pid = 0;
    out_remove_stale(s->dirfd); /* what it was writing: its process is gone */
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The next input to send, or -1. */
static int next_job(sup *s)
{
    if (s->solo)
        return -1;
    if (s->n_retry) {
        qsort(s->retry, (size_t)s->n_retry, sizeof *s->retry, cmp_int);
        int i = s->retry[0];
        if (s->it[i].suspect && s->w.outstanding)
            return -1; /* a suspect waits to run alone */
        memmove(s->retry, s->retry + 1, sizeof *s->retry * (size_t)--s->n_retry);
        if (s->it[i].suspect)
            s->solo = 1;
        return i;
    }
    while (s->next < s->o->n_inputs && s->it[s->next].state != ST_PENDING)
        s->next++;
    return s->next < s->o->n_inputs ? s->next++ : -1;
}

static int send_job(sup *s, int i)
{
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (!f)
        return -1;
    fprintf(f, "J %d\t", i);
    cli_escape(f, s->o->inputs[i]);
    for (int k = 0; k < s->n_out; k++) { /* the names of its outputs (names.c) */
        char *name = final_name(s, i, k);
        fputc('\t', f);
        cli_escape(f, name ? name : "");
        free(name);
    }
    fputc('\n', f);
    if (fclose(f) != 0) {
        free(line);
        return -1;
    }
    ssize_t w = write(s->w.job_fd, line, len);
    free(line);
    if (w != (ssize_t)len)
        return -1;
    s->it[i].state = ST_SENT;
    s->it[i].attempts++;
    s->it[i].entered = 0;
    s->it[i].begun = 0;
    s->w.outstanding++;
    return 0;
}

/* Starts a worker and reads its outputs list. Returns 0, -1 (setup failed) or -2
   (interrupted while it started; it is killed). */
static int start_and_greet(sup *s)
{
    if (start_worker(s) != 0)
        return -1;
    s->n_out = 0;
    s->n_images = 0;
    while (!s->w.ready) {
        struct pollfd p = {s->w.rep_fd, POLLIN, 0};
        int pr = poll(&p, 1, 100);
        if (pr < 0 && errno != EINTR)
            return -1;
        /* Ctrl-C while the worker starts (loading plugins, reading an --input file):
           nothing is in flight, so it is stopped at once */
        int r = interrupted ? 2 : pr > 0 ? read_reports(s) : 0;
        if (r != 0) {
            int status;
            end_worker_group(s->w.pid); /* the worker with its group */
            reap_worker(s->w.pid, &status);
            close(s->w.job_fd);
            close(s->w.rep_fd);
            s->w.pid = 0;
            if (r == 1) {
                char how[128];
                describe_status(status, how, sizeof how);
                fprintf(stderr, "pipefuse run: the worker process ended while starting (%s)\n",
                        how);
            }
            return r == 2 ? -2 : -1;
        }
    }
    for (int k = 0; k < s->n_out; k++)
        s->n_images += s->out_kind[k] == 'i';
    return 0;
}

/* --skip-existing: stdin is never skipped (its data has no time or identity), said once. */
static void skip_notes(const run_opts *o)
{
    if (o->stdin_path && !o->quiet)
        fprintf(stderr, "pipefuse run: --skip-existing: standard input is never skipped: its "
                        "data has no modification time\n");
}

/* The files a run reads or appends to besides its inputs: the pipeline, the --input
   files, the joblog and the --retry-failed joblog. An output is never written over
   one of them (a --input file replaced after the first file would be what a restarted
   worker reads). */
typedef struct guarded {
    dev_t dev;
    ino_t ino;
    const char *what, *path;
} guarded;

static int guard_files(const sup *s, guarded *g, int max)
{
    const run_opts *o = s->o;
    int n = 0;
    struct stat st;
    if (!o->pipeline_piped && n < max && stat(o->pipeline, &st) == 0)
        g[n++] = (guarded){st.st_dev, st.st_ino, "the pipeline file", o->pipeline};
    for (int b = 0; b < o->n_binds && n < max; b++) {
        const char *eq = strchr(o->binds[b], '=');
        if (eq && stat(eq + 1, &st) == 0)
            g[n++] = (guarded){st.st_dev, st.st_ino, "the --input file", eq + 1};
    }
    if (s->joblog >= 0 && n < max && fstat(s->joblog, &st) == 0)
        g[n++] = (guarded){st.st_dev, st.st_ino, "the --joblog file", o->joblog};
    if (o->retry_failed && n < max && stat(o->retry_failed, &st) == 0)
        g[n++] = (guarded){st.st_dev, st.st_ino, "the --retry-failed joblog", o->retry_failed};
    return n;
}

/* Before any work: outputs that would replace an input, a file guard_files names or
   another input's output fail their input; with --skip-existing, inputs whose outputs are all there and not older
   than the input, the pipeline and the --input files are skipped. An input that is no
   regular file (or is gone) is never skipped: it fails with its reason; nor is stdin,
   whose data has no time. */
static void precheck(sup *s)
{
    run_opts *o = s->o;
    int n = o->n_inputs;
    if (o->skip_existing)
        skip_notes(o);
    int n_other = 0, n_unrecorded = 0;
    dev_t *devs = calloc((size_t)n + 1, sizeof *devs);
    ino_t *inos = calloc((size_t)n + 1, sizeof *inos);
    char **first = calloc((size_t)n * (size_t)s->n_out + 1, sizeof *first);
    int n_first = 0;
    guarded guard[RUN_MAX_IO + 3];
    int n_guard = guard_files(s, guard, RUN_MAX_IO + 3);
    for (int i = 0; i < n && devs && inos; i++) {
        struct stat st;
        if (stat(o->inputs[i], &st) == 0) {
            devs[i] = st.st_dev;
            inos[i] = st.st_ino;
        }
    }
    for (int i = 0; i < n; i++) {
        int have_all = 1;
        char msg[8192] = "", outs[8192] = "";
        size_t used = 0;
        struct stat ist;
        if (stat(o->inputs[i], &ist) != 0 || !S_ISREG(ist.st_mode) ||
            (o->stdin_path && strcmp(o->inputs[i], o->stdin_path) == 0))
            have_all = 0;
        else /* recorded with its outputs: what they were made from */
            s->it[i].in_st = ist, s->it[i].have_st = 1;
        for (int k = 0; k < s->n_out && !msg[0]; k++) {
            char *f = final_name(s, i, k);
            if (!f)
                break;
            used += (size_t)snprintf(outs + used, used < sizeof outs ? sizeof outs - used : 0,
                                     "%s%s", k ? ", " : "", f);
            /* a rendered name passes the template's checks: {stem} or {dir} may hold what
               the template does not ("..", ".pftmp-") */
            char why[1200];
            if (cli_name_check(f, why, sizeof why) != 0 ||
                cli_format_check(f, s->out_name[k], out_ext(s, k), why, sizeof why) != 0) {
                snprintf(msg, sizeof msg, "%s", why);
                free(f);
                break;
            }
            /* an output a joblog of --retry-failed says another input wrote stays */
            for (int c = first_claim(o, f);
                 c < o->n_claimed && !msg[0] && strcmp(o->claimed[c], f) == 0; c++)
                if (strcmp(o->claimed_by[c], o->inputs[i]) != 0)
                    snprintf(msg, sizeof msg,
                             "output %.1024s was written for %.1024s (joblog %.1024s): not "
                             "replaced; give the original run's directory arguments",
                             f, o->claimed_by[c], o->retry_failed);
            if (!msg[0] && strchr(f, '/') &&
                cli_names_mkdirs(s->dirfd, o->outdir, f, why, sizeof why) != 0)
                snprintf(msg, sizeof msg, "%s", why);
            if (msg[0]) {
                free(f);
                break;
            }
            struct stat st;
            if (fstatat(s->dirfd, f, &st, 0) == 0) {
                for (int j = 0; j < n && devs && inos; j++)
                    if (inos[j] && devs[j] == st.st_dev && inos[j] == st.st_ino)
                        snprintf(msg, sizeof msg,
                                 "output %.1024s would replace an input file; choose another -o",
                                 f);
                for (int g = 0; g < n_guard && !msg[0]; g++)
                    if (guard[g].dev == st.st_dev && guard[g].ino == st.st_ino)
                        snprintf(msg, sizeof msg,
                                 "output %.1024s would replace %s %.1024s; choose another -o "
                                 "or --name",
                                 f, guard[g].what, guard[g].path);
            } else {
                have_all = 0;
            }
            /* one name per output for the whole batch: a later input of the same name fails */
            for (int j = 0; j < n_first && !msg[0]; j++)
                if (strcmp(first[j], f) == 0)
                    snprintf(msg, sizeof msg,
                             "output %.1024s was already written for another input of the same "
                             "name; run the inputs into separate directories",
                             f);
            if (first && !msg[0])
                first[n_first++] = f;
            else
                free(f);
        }
        /* outputs that exist are fresh when the manifest says this run would make them
           so from this input as it is now (freshness.c) */
        int verdict = FRESH_NO_RECORD;
        if (!msg[0] && o->skip_existing && have_all && s->n_out > 0 && s->fp[0]) {
            char *names[RUN_MAX_IO];
            int nn = 0;
            for (; nn < s->n_out && (names[nn] = final_name(s, i, nn)); nn++)
                ;
            const char *w = nn == s->n_out ? item_where(s, i) : NULL;
            verdict =
                w ? fresh_judge(s->fresh, s->dirfd, w, &ist, s->fp, names, nn) : FRESH_NO_RECORD;
            for (int k = 0; k < nn; k++)
                free(names[k]);
            n_other += verdict == FRESH_OTHER;
            n_unrecorded += verdict == FRESH_NO_RECORD;
        }
        if (msg[0]) {
            finish(s, i, ST_FAILED, msg, "name clash", 0);
        } else if (verdict == FRESH_YES) {
            finish(s, i, ST_SKIPPED, outs, NULL, 0);
        }
    }
    if (n_other && !o->quiet)
        fprintf(stderr,
                "pipefuse run: --skip-existing: %d input(s) run again: their outputs were made "
                "with another pipeline, --set, --input file, output option, plugin or pipefuse "
                "version (%s/%s)\n",
                n_other, o->outdir, FRESH_FILE);
    if (n_unrecorded && !o->quiet)
        fprintf(stderr,
                "pipefuse run: --skip-existing: %d input(s) run again: their outputs exist but "
                "no record says this input made them (written before records were kept, by "
                "another program or for another input, or by a run that stopped before "
                "recording them)\n",
                n_unrecorded);
    for (int j = 0; j < n_first; j++)
        free(first[j]);
    free(first);
    free(devs);
    free(inos);
}

/* Closes the joblog, saying a failure once. */
static void close_joblog(sup *s)
{
    if (s->joblog < 0)
        return;
    if (close(s->joblog) != 0 && errno != EINTR && !s->joblog_err) {
        s->joblog_err = errno;
        fprintf(stderr, "pipefuse run: --joblog %s: cannot write: %s\n", s->o->joblog,
                strerror(s->joblog_err));
    }
    s->joblog = -1;
}

static void summary(sup *s, int was_interrupted)
{
    run_opts *o = s->o;
    clear_status(s);
    int n = o->n_inputs;
    /* -q: nothing on success; the diagnostics of a run only with -v or --profile */
    int said = !o->quiet || s->n_failed || was_interrupted || s->joblog_err;
    int diag = o->verbose || o->profile;
    if (said)
        fprintf(stderr, "pipefuse: %d of %d input(s) done in %.2f s, %d failed",
                s->n_ok + s->n_skipped, n, (now_ms() - s->t0) / 1e3, s->n_failed);
    if (said && s->n_skipped)
        fprintf(stderr, ", %d skipped (outputs exist)", s->n_skipped);
    int not_run = n - s->n_ok - s->n_failed - s->n_skipped;
    if (said && was_interrupted)
        fprintf(stderr, ", %d not run (interrupted)", not_run);
    if (said && o->stdout_dir)
        fprintf(stderr, "; output to stdout\n");
    else if (said)
        fprintf(stderr, "; outputs in %s\n", o->outdir);
    if (s->n_failed) {
        static const char *const kinds[] = {"failed", "crashed",    "timed out",
                                            "memory", "name clash", "stdout"};
        static const char *const words[] = {
            "failed (bad input or pipeline)", "crashed a worker", "timed out",
            "over the memory bound",          "clashed by name",  "not written to stdout"};
        fprintf(stderr, "pipefuse: failures:");
        int first = 1;
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
            int c = 0;
            for (int i = 0; i < n; i++)
                c += s->it[i].state == ST_FAILED && s->it[i].kind &&
                     strcmp(s->it[i].kind, kinds[k]) == 0;
            if (c)
                fprintf(stderr, "%s %d %s", first ? "" : ",", c, words[k]);
            first &= !c;
        }
        fprintf(stderr, "\n");
    }
    if (was_interrupted && not_run && o->joblog && !s->joblog_err)
        fprintf(stderr,
                "pipefuse: the inputs not run are pending in the joblog: --retry-failed %s "
                "runs them and the failed ones\n",
                o->joblog);
    if (s->joblog_err)
        fprintf(stderr,
                "pipefuse: the joblog %s is incomplete (cannot write: %s): exit status 1 at "
                "best, since a resume from it would be wrong\n",
                o->joblog, strerror(s->joblog_err));
    if (s->restarts && (said || diag))
        fprintf(stderr, "pipefuse: the worker process was restarted %d time(s)\n", s->restarts);
    if (diag)
        fprintf(stderr, "pipefuse: %llu plan(s) built\n", s->plans);
    if (diag && s->n_banded)
        fprintf(stderr, "pipefuse: %d file(s) run in bands of rows, decode to encode\n",
                s->n_banded);
    if (diag && s->n_timed)
        fprintf(stderr,
                "pipefuse: per file, on average: decode %.1f ms, engine %.1f ms (submit to "
                "done), encode and write %.1f ms; each on its own thread, overlapping\n",
                s->t_dec / s->n_timed, s->t_eng / s->n_timed, s->t_enc / s->n_timed);
}

static int supervise(sup *s)
{
    run_opts *o = s->o;
    int n = o->n_inputs;
    int stopping = 0; /* Ctrl-C once: send nothing more, let files in flight finish */
    for (;;) {
        if (interrupted && !stopping) {
            stopping = 1;
            clear_status(s);
            fprintf(stderr,
                    "pipefuse: interrupted: finishing the %d file(s) in flight (Ctrl-C "
                    "again to abandon them)\n",
                    s->w.outstanding);
        }
        if (interrupted > 1 && s->w.pid) {
            kill(s->w.pid, SIGKILL); /* its temporaries are removed below */
            worker_died(s, -1);
            out_remove_stale(s->dirfd);
            break;
        }
        int work_left = s->n_retry || s->w.outstanding;
        for (int i = s->next; i < n && !work_left; i++)
            work_left = s->it[i].state == ST_PENDING;
        if (!work_left || (stopping && !s->w.outstanding))
            break;
        if (!s->w.pid) { /* counted when started again, not when abandoned */
            s->restarts++;
            int started = start_and_greet(s);
            if (started == -2)
                break; /* interrupted: what is pending is not run */
            if (started != 0) {
                for (int i = 0; i < n; i++)
                    if (s->it[i].state == ST_PENDING || s->it[i].state == ST_SENT)
                        finish(s, i, ST_FAILED, "a worker process could not be started", "crashed",
                               0);
                break;
            }
        }
        /* enough files for every codec thread and two per lane; the worker bounds
           their bytes */
        int cap = s->w.lanes * 2 + s->w.codecs + 2;
        while (!stopping && s->w.outstanding < cap) {
            int i = next_job(s);
            if (i < 0)
                break;
            if (send_job(s, i) != 0) {
                s->it[i].state = ST_PENDING;
                s->retry[s->n_retry++] = i;
                break;
            }
        }
        struct pollfd p = {s->w.rep_fd, POLLIN, 0};
        int pr = poll(&p, 1, 100);
        int eof = 0;
        if (pr > 0) {
            int r = read_reports(s);
            if (r < 0)
                return -1;
            eof = r == 1;
        }
        if (!eof && worker_gone(s)) { /* ended, its pipe held open by a child of a stage */
            drain_reports(s);
            eof = 1;
        }
        unsigned long long rss = eof ? 0 : worker_rss(s->w.pid);
        if (eof) {
            worker_died(s, -1);
        } else if (rss > memory_bound(o)) {
            /* the file in the engine when one is; else those in it run again alone */
            int culprit = -1, in_engine = 0;
            for (int i = 0; i < n; i++)
                if (s->it[i].state == ST_SENT && (s->it[i].entered || s->it[i].begun))
                    culprit = i, in_engine++;
            s->w.over_memory = rss;
            kill(s->w.pid, SIGKILL);
            worker_died(s, in_engine == 1 ? culprit : -1);
        } else if (o->file_timeout_s > 0) {
            double t = now_ms();
            for (int i = 0; i < n; i++) {
                item *it = &s->it[i];
                /* its decode from its start, its engine run, encode and write from its
                   entry into the engine (a wait for a lane between them is no fault) */
                double t0 = it->entered ? it->t_engine : it->t_begun;
                if (it->state != ST_SENT || !(it->begun || it->entered) ||
                    t - t0 < o->file_timeout_s * 1e3)
                    continue;
                /* Ask where the threads are, give them half a second, then kill. */
                s->w.timing = i;
                s->w.timing_seen = 0;
                if (write(s->w.job_fd, "H\n", 2) == 2) {
                    double until = now_ms() + 500;
                    while (!(it->entered ? s->w.where[0] : s->w.timing_seen) && now_ms() < until) {
                        struct pollfd q = {s->w.rep_fd, POLLIN, 0};
                        if (poll(&q, 1, 50) > 0 && read_reports(s) != 0)
                            break;
                    }
                }
                if (!it->entered && !s->w.timing_seen) {
                    /* no thread decodes it: decoded, it waits for a lane, timed from its
                       entry into the engine */
                    it->begun = 0;
                    s->w.where[0] = 0;
                    continue;
                }
                kill(s->w.pid, SIGKILL);
                worker_died(s, i);
                break;
            }
        }
        log_ready(s);
    }
    /* No more work: let the worker end normally (it reports its plans). */
    if (s->w.pid) {
        close(s->w.job_fd);
        s->w.job_fd = -1;
        for (;;) { /* until the pipe ends or the worker does (a stage's child may hold it) */
            struct pollfd p = {s->w.rep_fd, POLLIN, 0};
            if (poll(&p, 1, 100) > 0 && read_reports(s) != 0)
                break;
            if (worker_gone(s)) {
                drain_reports(s);
                break;
            }
        }
        if (!s->w.reaped)
            reap_worker(s->w.pid, &s->w.status);
        close(s->w.rep_fd);
        s->w.pid = 0;
    }
    log_ready(s);
    return 0;
}

static const char *stdio_in, *stdio_out;
static int stdio_fd = -1, stdio_piped;

void cli_run_stdio(const char *stdin_path, const char *stdout_dir)
{
    stdio_in = stdin_path;
    stdio_out = stdout_dir;
}

static char *run_plugins;

void cli_run_plugins(const char *ids)
{
    free(run_plugins);
    run_plugins = ids ? strdup(ids) : NULL;
}

void cli_run_streams(int stdout_fd, int pipeline_piped)
{
    stdio_fd = stdout_fd;
    stdio_piped = pipeline_piped;
}

int cli_run(int argc, char **argv, const cli_common *c)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    /* The PNG defaults a batch wants: zlib 1 with the Up filter wrote the sample photos
       4x faster than zlib 6 with every filter, 16% larger (docs/benchmarks.md). */
    o.zlib = 1;
    o.png_filter = PNG_FILTER_UP;
    o.file_timeout_s = 600;
    o.progress = -1;
    o.common = c;
    o.band_rows = -1;
    o.stdin_path = stdio_in;
    o.stdout_dir = stdio_out;
    o.stdout_fd = stdio_fd;
    o.pipeline_piped = stdio_piped;
    stdio_fd = -1; /* ours now: closed below */
    const char *band_env = getenv("PIPEFUSE_BAND_ROWS");
    if (band_env && band_env[0] && (o.band_rows = parse_band_rows(band_env)) == -2) {
        fprintf(stderr,
                "pipefuse run: PIPEFUSE_BAND_ROWS must be auto, off or a number of rows, not "
                "'%s'\n",
                band_env);
        return PF_EXIT_USAGE;
    }
    int status = parse_args(argc, argv, &o);
    sup s;
    memset(&s, 0, sizeof s);
    s.o = &o;
    s.dirfd = -1;
    s.joblog = -1;
    if (status == PF_EXIT_OK) {
        if (!o.max_memory)
            o.max_memory = default_max_memory();
        take_shard(&o);
        if (o.retry_failed && take_failed(&o) != 0)
            status = PF_EXIT_USAGE;
    }
    int made_out = 0; /* folders of -o made by this run: removed again if it is refused */
    if (status == PF_EXIT_OK) {
        char err[8400];
        if (cli_make_outdir(o.outdir, &made_out, err, sizeof err) != 0) {
            fprintf(stderr, "pipefuse run: %s\n", err);
            status = PF_EXIT_USAGE;
        } else if ((s.dirfd = open(o.outdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
            fprintf(stderr, "pipefuse run: -o %s: cannot open the folder: %s\n", o.outdir,
                    strerror(errno));
            status = PF_EXIT_USAGE;
        }
    }
    if (status == PF_EXIT_OK) {
        s.it = calloc((size_t)o.n_inputs + 1, sizeof *s.it);
        s.retry = calloc((size_t)o.n_inputs + 1, sizeof *s.retry);
        if (!s.it || !s.retry) {
            fprintf(stderr, "pipefuse run: out of memory\n");
            status = PF_EXIT_USAGE;
        }
    }
    /* a write to a pipe whose reader is gone (a --joblog FIFO, -o -) fails with EPIPE,
       said, from the joblog's header on */
    signal(SIGPIPE, SIG_IGN);
    if (status == PF_EXIT_OK && o.joblog) {
        static const char header[] = "input\tstatus\tseconds\toutputs\tmessage\tname\n";
        /* read back (a cut last line) only a regular file or a new one: a FIFO opened
           for reading too would hold its own reader, so lines no one reads would vanish
           into it without an error, and a reader gone would never be said (EPIPE) */
        struct stat pre;
        int fd = stat(o.joblog, &pre) != 0 || S_ISREG(pre.st_mode)
                     ? open(o.joblog, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644)
                     : -1;
        if (fd < 0) /* a file that can be appended to only (/dev/full, a FIFO) */
            fd = open(o.joblog, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
        struct stat st;
        if (fd < 0 || (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                       joblog_drop_cut_line(fd, o.joblog) != 0)) {
            fprintf(stderr, "pipefuse run: --joblog %s: %s\n", o.joblog, strerror(errno));
            if (fd >= 0)
                close(fd);
            status = PF_EXIT_USAGE;
        } else if ((s.joblog = fd) >= 0 && fstat(fd, &st) == 0 && st.st_size == 0 &&
                   append_whole(fd, header, sizeof header - 1) != 0) {
            /* a full disk is found before any work, not after the batch */
            fprintf(stderr, "pipefuse run: --joblog %s: cannot write: %s\n", o.joblog,
                    strerror(errno));
            status = PF_EXIT_USAGE;
        }
    }
    if (status == PF_EXIT_OK) {
        int removed = out_remove_stale(s.dirfd);
        if (removed && !o.quiet)
            fprintf(stderr, "pipefuse: removed %d temporary file(s) left by an earlier run in %s\n",
                    removed, o.outdir);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_interrupt;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        /* A hangup (the terminal or ssh session closed) stops the batch as SIGTERM does:
           the files in flight finish and commit. Under nohup it stays ignored. */
        struct sigaction hup;
        if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN)
            sigaction(SIGHUP, &sa, NULL);
        /* past a file size limit (ulimit -f) a write fails with EFBIG, said and counted
           as any failed write, instead of the signal killing the batch half way through a
           line of its joblog (the worker inherits this) */
        signal(SIGXFSZ, SIG_IGN);
        s.progress = o.progress == 1 || (o.progress < 0 && !o.quiet && isatty(2));
        s.t0 = now_ms();
        self_exe();
        if (!o.backend || strcmp(o.backend, "auto") == 0)
            for (int i = 0; i < o.n_inputs; i++) {
                unsigned long long px = 0;
                worker_estimate_bytes(o.inputs[i], 0, &px);
                o.batch_pixels += px ? px : 1000000;
            }
        int started = start_and_greet(&s);
        if (started == -2) {
            summary(&s, 1);
            status = 130;
        } else if (started != 0) {
            status = PF_EXIT_USAGE;
        } else {
            char ferr[1200];
            if (!o.stdout_dir) {
                if (fresh_fingerprint(&o, run_plugins ? run_plugins : "", s.fp, ferr,
                                      sizeof ferr) != 0)
                    s.fp[0] = 0; /* the worker says what cannot be read */
                if (fresh_open(s.dirfd, &s.fresh) != 0 && !o.quiet)
                    fprintf(stderr,
                            "pipefuse run: %s/%s: cannot read the records of earlier runs: "
                            "%s; --skip-existing judges no output fresh\n",
                            o.outdir, FRESH_FILE, strerror(errno));
            }
            precheck(&s);
            /* every input about to run is "pending" in the joblog until its own line: a run
               killed or interrupted leaves the ones it never finished findable, and
               --retry-failed runs them (with the failed) */
            for (int i = 0; i < o.n_inputs && s.joblog >= 0 && !s.joblog_err; i++)
                if (s.it[i].state == ST_PENDING)
                    joblog_line(&s, i);
            int rc = supervise(&s);
            /* again at the end: a process of an earlier run may have been dying at the start */
            out_remove_stale(s.dirfd);
            if (s.fresh && fresh_compact(s.dirfd) < 0 && !o.quiet)
                fprintf(stderr,
                        "pipefuse run: %s/%s: cannot rewrite it without its old lines: %s\n",
                        o.outdir, FRESH_FILE, strerror(errno));
            close_joblog(&s); /* before the summary, which says when it is incomplete */
            if (rc != 0)
                status = PF_EXIT_USAGE;
            else
                summary(&s, interrupted > 0);
            if (status == PF_EXIT_OK)
                status = interrupted ? 130 : s.n_failed ? PF_EXIT_FAILED : PF_EXIT_OK;
        }
        if (s.w.pid && !s.w.reaped) {
            end_worker_group(s.w.pid); /* the worker with its group */
            reap_worker(s.w.pid, NULL);
        }
    }
    close_joblog(&s);
    if (o.stdout_fd >= 0)
        close(o.stdout_fd); /* its input failed or never ran */
    if (s.joblog_err && status == PF_EXIT_OK)
        status = PF_EXIT_FAILED; /* a resume from this joblog would be wrong */
    if (s.dirfd >= 0)
        close(s.dirfd);
    if (status == PF_EXIT_USAGE) /* nothing ran: no empty folder of ours stays */
        cli_unmake_outdir(o.outdir, made_out);
    for (int i = 0; s.it && i < o.n_inputs; i++) {
        free(s.it[i].msg);
        free(s.it[i].where);
    }
    fresh_close(s.fresh);
    for (int k = 0; k < RUN_MAX_IO; k++)
        free(s.out_name[k]);
    for (int k = 0; k < s.n_notices; k++)
        free(s.notices[k]);
    free(s.notices);
    free(s.it);
    free(s.retry);
    for (int i = 0; i < o.n_inputs; i++)
        free(o.inputs[i]);
    free(o.inputs);
    char **lists[] = {o.failed, o.failed_key, o.claimed, o.claimed_by, o.logged};
    int counts[] = {o.n_failed, o.n_failed_key, o.n_claimed, o.n_claimed_by, o.n_logged};
    for (int l = 0; l < 5; l++) {
        for (int i = 0; i < counts[l]; i++)
            free(lists[l][i]);
        free(lists[l]);
    }
    free(o.sets);
    free(o.binds);
    return status;
}
