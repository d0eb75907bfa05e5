/* cli/batch/report.c: the worker's reports to the supervisor, notices, and the engines and pipelines it makes */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "worker.h"

double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* What path is when it is no regular file (a FIFO, a device, a socket), else NULL. An
   input is opened more than once (its header, then its rows), and opening a FIFO with
   no writer never returns: such inputs fail at once, named, instead. */
const char *not_regular(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return NULL; /* the reader says why it cannot be opened */
    return S_ISFIFO(st.st_mode)   ? "a pipe or FIFO"
           : S_ISCHR(st.st_mode)  ? "a character device"
           : S_ISBLK(st.st_mode)  ? "a block device"
           : S_ISSOCK(st.st_mode) ? "a socket"
           : S_ISDIR(st.st_mode)  ? "a directory"
                                  : "not a regular file";
}

/* A byte count for a message: MB with one decimal as elsewhere, or kB or bytes where
   that would read 0.0 (a small --max-memory must not say "0.0 MB over 0.0 MB"). */
size_text size_str(unsigned long long b)
{
    size_text t;
    if (b >= 100000)
        snprintf(t.s, sizeof t.s, "%.1f MB", b / 1e6);
    else if (b >= 1000)
        snprintf(t.s, sizeof t.s, "%.1f kB", b / 1e3);
    else
        snprintf(t.s, sizeof t.s, "%llu byte%s", b, b == 1 ? "" : "s");
    return t;
}

/* The host memory a plan holds on the lanes' backend: the CPU executor's buffers, or the
   CUDA executor's pinned staging (its images live on the device). */
unsigned long long plan_host_bytes(const pf_memory *m)
{
    return W.gpu ? m->pinned_bytes : m->host_bytes;
}

/* ---- Reports ------------------------------------------------------------------------------------- */

/* One line to the supervisor, tabs and newlines in text replaced, at most 4000 bytes
   (writes up to PIPE_BUF are atomic). */
void report(const char *fmt, ...)
{
    char line[4000];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n++] = '\n';
    pthread_mutex_lock(&W.wmu);
    ssize_t w = write(W.rep_fd, line, (size_t)n);
    pthread_mutex_unlock(&W.wmu);
    if (w != n)
        _exit(5); /* the supervisor is gone */
}

/* text escaped as in the joblog (run.c's cli_unescape undoes it) into dst: a newline
   in a name or message crosses a report line as \n. Cut at n - 1 bytes. */
static void escape_text(char *dst, size_t n, const char *text)
{
    size_t o = 0;
    for (const char *c = text; *c && o + 3 < n; c++) {
        const char *e = *c == '\t'   ? "\\t"
                        : *c == '\n' ? "\\n"
                        : *c == '\r' ? "\\r"
                        : *c == '\\' ? "\\\\"
                                     : NULL;
        if (e)
            dst[o++] = e[0], dst[o++] = e[1];
        else
            dst[o++] = *c;
    }
    dst[o] = 0;
}

/* A D record: the outputs' names (for the log on stderr; the joblog has them from the
   supervisor) or the message, escaped. */
void report_done(const job *j, int failed, const char *text, const char *suffix)
{
    char esc[3600];
    escape_text(esc, sizeof esc, text);
    report("D %d %d %.1f %s%s", j->index, failed, now_ms() - j->t0, esc, suffix);
}

/* ---- Setup ------------------------------------------------------------------------------------- */

/* The engine's notices and warnings, each distinct one once: every lane plans its own
   pipelines, and "running on the CPU" once is enough. They go to the supervisor (an N
   record), which prints each once per run: a worker restarted after a crash starts
   with nothing seen. Notices are hidden by -q. */
/* Engines being created: what they log then (a --plugin-path folder that does not
   exist, a plugin skipped) was printed already by the command's own engine (inputs.c
   loads the pipeline with the same options before the batch), so it is not repeated. */
static atomic_int creating_engines;
/* The same for what loading the pipeline file logs (an unused stage or input): said by
   inputs.c's load, not again by each worker and lane; this thread is loading. */
static _Thread_local int loading_pipeline;

/* A notice or warning (level 0, 1) for the supervisor to print, once per run. */
void notice(int level, const char *msg)
{
    char esc[3600];
    escape_text(esc, sizeof esc, msg);
    report("N %d %s", level, esc);
}

static void log_once(void *user, int level, const char *msg)
{
    (void)user;
    if (atomic_load(&creating_engines) > 0 || loading_pipeline)
        return;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char *seen[32];
    static int n_seen;
    if (level == 0 && W.o->quiet)
        return;
    pthread_mutex_lock(&mu);
    int dup = 0;
    for (int i = 0; i < n_seen && !dup; i++)
        dup = strcmp(seen[i], msg) == 0;
    if (!dup && n_seen < 32)
        seen[n_seen++] = strdup(msg);
    pthread_mutex_unlock(&mu);
    if (!dup)
        notice(level, msg);
}

int load_pipeline(pf_engine *e, pf_pipeline **out, char *err, size_t errn)
{
    const run_opts *o = W.o;
    pf_pipeline *p = NULL;
    loading_pipeline = 1;
    int rc = pf_pipeline_load_file(e, o->pipeline, &p);
    loading_pipeline = 0;
    if (rc != PF_OK) {
        snprintf(err, errn, "%s", pf_engine_errmsg(e));
        return -1;
    }
    const char *backend = W.backend ? W.backend : o->backend;
    if ((backend && pf_pipeline_set_option(p, "backend", backend) != PF_OK) ||
        (o->precision && pf_pipeline_set_option(p, "precision", o->precision) != PF_OK) ||
        (o->dump_kernels && pf_pipeline_set_option(p, "dump_kernels", o->dump_kernels) != PF_OK) ||
        (o->max_launch_ms &&
         pf_pipeline_set_option(p, "max_launch_ms", o->max_launch_ms) != PF_OK) ||
        (o->profile && pf_pipeline_set_option(p, "profile", "true") != PF_OK) ||
        (o->no_fuse && pf_pipeline_set_option(p, "fusion", "false") != PF_OK)) {
        snprintf(err, errn, "%s", pf_pipeline_errmsg(p));
        pf_pipeline_destroy(p);
        return -1;
    }
    for (int i = 0; i < o->n_sets; i++)
        if (cli_apply_set(p, o->sets[i], err, errn) != 0) {
            pf_pipeline_destroy(p);
            return -1;
        }
    *out = p;
    return 0;
}

pf_engine *new_engine(int threads, char *err, size_t errn)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = W.o->common->plugin_path;
    cfg.threads = threads;
    cfg.log = log_once;
    pf_engine *e = NULL;
    atomic_fetch_add(&creating_engines, 1);
    int rc = pf_engine_create(&cfg, &e);
    atomic_fetch_sub(&creating_engines, 1);
    if (rc != PF_OK) {
        snprintf(err, errn, "%s", e ? pf_engine_errmsg(e) : pf_status_str(rc));
        pf_engine_destroy(e);
        return NULL;
    }
    return e;
}
