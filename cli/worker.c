/* cli/worker.c: the worker process of `pipefuse run`.
 *
 * The supervisor (run.c) starts it (executing pipefuse again, see worker_entry) and
 * sends it files; it decodes, runs and encodes them with threads and reports each
 * result. Inside:
 *
 *   job pipe -> decode (codec threads) -> engine lanes -> encode (codec threads) -> reports
 *
 * Codec threads take an encode before a decode, so finished frames leave memory
 * first; a decode waits while the frames in flight would exceed half of the memory
 * budget (a file alone is always admitted). Each engine lane has its own engine and
 * its own pipelines (a pipeline is used by one thread at a time), one per recent input
 * shape, least recently used dropped first, so a batch of mixed sizes plans each size
 * once per lane. A lane submits frames and waits for them in order, so on the GPU the
 * upload, compute and download of consecutive files overlap; on the CPU, submit runs
 * the frame at once and the lanes run whole files side by side.
 *
 * Jobs, one line each: "J index<TAB>path<TAB>name<TAB>name..." (the input and the
 * names of its outputs inside OUTDIR, escaped as in the joblog); "H" asks every
 * thread where it is (a file ran past its time limit). End of file: finish and exit.
 *
 * Reports, one line each (a single write, so lines from threads never mix):
 *   X message            setup failed (the supervisor exits 2)
 *   O kind json name     an output of the pipeline (kind i: image, t: table), then
 *   R lanes codecs       ready
 *   P width height       a lane planned the pipeline for a new shape
 *   B index              the file's decode began (its time limit starts)
 *   E index              the file entered the engine
 *   T index dec eng enc rows  milliseconds of a file done: decode, engine (submit to
 *                        wait done), encode and write; the rows of its bands (0: whole)
 *   D index 0 ms outs    done; D index 1 ms message: failed
 *   C index sig<TAB>where  a fatal signal or exit() while working on index (-1: unknown)
 *   W where              where a thread in plugin code is (answer to "H")
 *   L                    the GPU context is lost: the worker exits to get a fresh one
 *   N level message      the engine logged (escaped); the supervisor prints each once
 *   Z plans              the worker ends normally
 * A crash record is written by the signal handler with write(2) only; it names the
 * stage by the code addresses on the crashing thread's stack: each plugin's mapped
 * range and its stages' entry points are recorded at start, so the handler only
 * compares numbers. The engine offers no hook naming the stage it is running, so a
 * stage is named from the nearest entry point below the faulting address in the
 * plugin's code; stages of one op are listed together.
 */
#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <jansson.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <dlfcn.h>
#include <limits.h>

#include "batch.h"
#include "pinned.h"
#include "images.h"
#include "pipefuse/bands.h"

#define PLAN_CACHE 8 /* pipelines per lane, one per recent shape */
#define MAX_LANES  64

typedef struct job job;
struct job {
    int index;
    char *path;
    char *names[RUN_MAX_IO];   /* its outputs' names inside OUTDIR, from the supervisor */
    unsigned long long est;    /* bytes counted against the budget */
    unsigned long long pixels; /* from its PNG header (0: unreadable) */
    pf_frame in[RUN_MAX_IO];
    pf_frame out[RUN_MAX_IO];
    pf_table tab[RUN_MAX_IO]; /* copies of the table outputs */
    /* The input's colour, density and text chunks, kept by its decode (NULL with --strip),
       and its header, which says which of them still apply to an output. */
    pf_png_meta *meta;
    pf_png_info src;
    pf_jpeg_meta *jmeta; /* a JPEG input's ICC profile and EXIF (NULL with --strip) */
    cli_format fmt;      /* the input's format, by its bytes */
    char **row_names[RUN_MAX_IO];
    int status; /* 0 ok */
    int ticket;
    double t0;
    double dec_ms, eng_ms, enc_ms; /* where its time went */
    /* Banded (run_banded): rows per band (0: whole frames), the input open for rows from
       its decode on, and the outputs' names once the lane has written and committed them. */
    int band_rows;
    cli_rows *rows;
    int written;
    char outs[3000];
    char err[2048];
    job *next;
};

typedef struct queue {
    job *head, *tail;
    int n;
} queue;

typedef struct cached {
    pf_pipeline *p;
    pf_shape shape;
    int banded; /* planned for bands: every input has the band's shape */
    unsigned long long use;
    unsigned long long bytes, dev_bytes;
} cached;

typedef struct lane lane;
struct lane {
    pf_engine *e; /* its own: a lane's frames never wait on another lane's threads */
    cached c[PLAN_CACHE];
    unsigned long long clock;
    pthread_t tid;
};

static struct {
    const run_opts *o;
    int rep_fd, dirfd;
    pf_engine *e;
    pf_frame bound[RUN_MAX_IO];
    int unused[RUN_MAX_IO]; /* inputs no output uses: bound to one pixel, never banded */
    int n_in, n_out, n_images, has_tables;
    pf_output_info oi[RUN_MAX_IO];
    char *out_name[RUN_MAX_IO];
    int json[RUN_MAX_IO];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    queue decode, ready, encode;
    int input_closed;
    int decoding, in_engine, encoding; /* jobs held by threads */
    unsigned long long bytes_in_flight;
    int lanes, codecs;
    /* The backend the lanes' plans get (setup's trial plan): on the GPU a plan's host
       memory is its pinned staging, and its device memory counts against dev_budget
       (taken from the device's free memory at setup), not against --max-memory. */
    atomic_int gpu;
    atomic_ullong dev_budget;
    /* The pipeline whose trial plan tells the backend (setup loads it; the starter
       thread plans it while the codec threads already decode), and the lanes. */
    pf_pipeline *trial;
    struct lane *lane_list;
    /* --backend auto decided for the CPU before CUDA was touched (auto_backend): the
       backend every pipeline of this worker is given (NULL: the options'). */
    const char *backend;
    /* On the GPU: page-locked frames every lane's engine registered, for decoded inputs
       and for outputs, so that the lanes' frames move by DMA (NULL: none, pageable). */
    pinned_pool *pool;
    atomic_ullong plans;
    void *lane0;      /* the lane whose pipeline --profile prints */
    int lane_threads; /* engine threads of each lane */
    /* Bands: whether the pipeline runs in bands and the halo rows a band needs (setup),
       and a pipeline never planned that tells the whole-frame memory of a shape (the
       job reader's, for --band-rows auto), with the last answer. */
    int bandable, halo;
    pf_pipeline *probe;
    /* A pipeline never planned that tells each output's PNG form and its geometry from
       the input's (job_items: pHYs through resize, crop, quarter turns). */
    pf_pipeline *forms;
    pf_shape probe_shape;
    unsigned long long probe_bytes, probe_dev;
    pthread_mutex_t wmu;
    /* What a stage must leave as it found it (process_intact): this process (a child a
       stage forks reports nothing), its descriptors and its working directory. */
    pid_t pid;
    struct stat fd_st[6];
    int fd_num[6];
    int n_fds;
    struct stat cwd_st;
    char *cwd; /* relative paths are opened from here, whatever a stage did */
} W = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .cv = PTHREAD_COND_INITIALIZER,
       .wmu = PTHREAD_MUTEX_INITIALIZER};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* What path is when it is no regular file (a FIFO, a device, a socket), else NULL. An
   input is opened more than once (its header, then its rows), and opening a FIFO with
   no writer never returns: such inputs fail at once, named, instead. */
static const char *not_regular(const char *path)
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
typedef struct size_text {
    char s[32];
} size_text;
static size_text size_str(unsigned long long b)
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
static unsigned long long plan_host_bytes(const pf_memory *m)
{
    return W.gpu ? m->pinned_bytes : m->host_bytes;
}

/* ---- Reports ------------------------------------------------------------------------------------- */

/* One line to the supervisor, tabs and newlines in text replaced, at most 4000 bytes
   (writes up to PIPE_BUF are atomic). */
static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
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
static void report_done(const job *j, int failed, const char *text, const char *suffix)
{
    char esc[3600];
    escape_text(esc, sizeof esc, text);
    report("D %d %d %.1f %s%s", j->index, failed, now_ms() - j->t0, esc, suffix);
}

/* ---- Crash attribution -------------------------------------------------------------------------- */

#define MAX_ENTRIES 512
#define MAX_RANGES  64

typedef struct entry {
    uintptr_t addr;
    int what; /* index into names */
} entry;
typedef struct range {
    uintptr_t lo, hi;
    int plugin; /* index into names: "plugin NAME (FILE)" */
} range;

static struct {
    entry e[MAX_ENTRIES];
    int n_e;
    range r[MAX_RANGES];
    int n_r;
    char *names[MAX_ENTRIES + MAX_RANGES];
    int n_names;
    const char *plugin_file[MAX_RANGES]; /* the files the ranges are looked up for */
    int plugin_name[MAX_RANGES];
    int n_files;
} A;

static __thread int tls_job = -1;
static __thread const char *tls_step;
static atomic_int engine_jobs;      /* files inside pf_pipeline_submit/wait */
static atomic_int engine_last = -1; /* the last one to enter */

static int add_name(const char *s)
{
    if (A.n_names >= MAX_ENTRIES + MAX_RANGES || !(A.names[A.n_names] = strdup(s)))
        return -1;
    return A.n_names++;
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    for (int f = 0; f < A.n_files; f++) {
        if (!info->dlpi_name || strcmp(info->dlpi_name, A.plugin_file[f]) != 0)
            continue;
        for (int h = 0; h < info->dlpi_phnum && A.n_r < MAX_RANGES; h++) {
            const ElfW(Phdr) *ph = &info->dlpi_phdr[h];
            if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
                continue;
            A.r[A.n_r].lo = info->dlpi_addr + ph->p_vaddr;
            A.r[A.n_r].hi = A.r[A.n_r].lo + ph->p_memsz;
            A.r[A.n_r].plugin = A.plugin_name[f];
            A.n_r++;
        }
    }
    return 0;
}

static void add_entry(const void *fn, int what)
{
    if (fn && A.n_e < MAX_ENTRIES) {
        A.e[A.n_e].addr = (uintptr_t)fn;
        A.e[A.n_e].what = what;
        A.n_e++;
    }
}

/* The pipeline's stage ids and ops, read from its file (the engine does not list them). */
static void build_attribution(void)
{
    json_error_t je;
    json_t *root = json_load_file(W.o->pipeline, 0, &je);
    json_t *stages = root ? json_object_get(root, "stages") : NULL;
    int n_st = pf_engine_stage_count(W.e);
    for (int s = 0; s < n_st; s++) {
        const char *file, *plugin;
        const pf_stage_desc *d = pf_engine_stage(W.e, s, &file, &plugin);
        /* every stage of the pipeline with this op */
        char ids[1024] = "";
        size_t used = 0;
        int count = 0;
        for (size_t k = 0; stages && k < json_array_size(stages); k++) {
            json_t *st = json_array_get(stages, k);
            const char *op = json_string_value(json_object_get(st, "op"));
            const char *id = json_string_value(json_object_get(st, "id"));
            if (op && id && strcmp(op, d->name) == 0 && used < sizeof ids - 64) {
                used += (size_t)snprintf(ids + used, sizeof ids - used, "%s%s", count ? " or " : "",
                                         id);
                count++;
            }
        }
        if (!count)
            continue;
        int f = 0;
        while (f < A.n_files && strcmp(A.plugin_file[f], file) != 0)
            f++;
        if (f == A.n_files && f < MAX_RANGES) {
            char pn[1200];
            snprintf(pn, sizeof pn, "plugin %s (%s)", plugin, file);
            A.plugin_file[f] = file;
            A.plugin_name[f] = add_name(pn);
            A.n_files++;
        }
        char text[2048];
        snprintf(text, sizeof text, "stage %s (op %s, plugin %s: %s)", ids, d->name, plugin, file);
        int what = add_name(text);
        if (what < 0)
            continue;
        add_entry((const void *)d->point_row, what);
        add_entry((const void *)d->run_cpu, what);
        add_entry((const void *)d->run_cuda, what);
        add_entry((const void *)d->point_cuda, what);
        add_entry((const void *)d->shape, what);
        add_entry((const void *)d->check, what);
        add_entry((const void *)d->radius, what);
        add_entry((const void *)d->scratch_bytes, what);
        add_entry((const void *)d->combine, what);
        add_entry((const void *)d->partial_len, what);
    }
    json_decref(root);
    dl_iterate_phdr(phdr_cb, NULL);
    void *warm[4];
    backtrace(warm, 4); /* loads the unwinder now, not in a signal handler */
}

/* Async-signal-safe: which stage an address belongs to, or NULL. */
static const char *attribute(uintptr_t a, int *in_plugin)
{
    for (int r = 0; r < A.n_r; r++) {
        if (a < A.r[r].lo || a >= A.r[r].hi)
            continue;
        *in_plugin = A.r[r].plugin;
        const entry *best = NULL;
        for (int k = 0; k < A.n_e; k++)
            if (A.e[k].addr <= a && A.e[k].addr >= A.r[r].lo && A.e[k].addr < A.r[r].hi &&
                (!best || A.e[k].addr > best->addr))
                best = &A.e[k];
        if (!best) {
            /* below every entry point (a cold section placed first): name the op only
               when the pipeline uses one op of this plugin */
            for (int k = 0; k < A.n_e; k++)
                if (A.e[k].addr >= A.r[r].lo && A.e[k].addr < A.r[r].hi) {
                    if (best && best->what != A.e[k].what)
                        return NULL;
                    best = &A.e[k];
                }
        }
        return best ? A.names[best->what] : NULL;
    }
    return NULL;
}

/* Async-signal-safe: where this thread is, from pc and its stack, into buf. */
static size_t where_am_i(uintptr_t pc, char *buf, size_t size)
{
    void *frames[64];
    int n = backtrace(frames, 64);
    int plugin = -1;
    const char *st = pc ? attribute(pc, &plugin) : NULL;
    for (int i = 0; !st && i < n; i++) /* return addresses: the call is just before */
        st = attribute((uintptr_t)frames[i] - 1, &plugin);
    const char *text = st            ? st
                       : plugin >= 0 ? A.names[plugin]
                                     : "pipefuse's own code (no plugin code on the thread's stack)";
    size_t k = 0;
    for (; text && text[k] && k < size - 1; k++)
        buf[k] = text[k];
    buf[k] = 0;
    return plugin >= 0 ? k : 0;
}

static size_t put(char *b, size_t at, size_t size, const char *s)
{
    while (*s && at < size - 1)
        b[at++] = *s++;
    b[at] = 0;
    return at;
}

static size_t put_int(char *b, size_t at, size_t size, long v)
{
    char t[24];
    int n = 0;
    int neg = v < 0;
    unsigned long u = neg ? (unsigned long)-v : (unsigned long)v;
    do
        t[n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < 22);
    if (neg)
        t[n++] = '-';
    while (n && at < size - 1)
        b[at++] = t[--n];
    b[at] = 0;
    return at;
}

/* The file this thread is working on, else the only one in the engine, else -1. */
static int culprit(void)
{
    if (tls_job >= 0)
        return tls_job;
    return atomic_load(&engine_jobs) == 1 ? atomic_load(&engine_last) : -1;
}

static void crash_record(const char *what, uintptr_t pc)
{
    char line[3900];
    size_t n = put(line, 0, sizeof line, "C ");
    n = put_int(line, n, sizeof line, culprit());
    n = put(line, n, sizeof line, " ");
    n = put(line, n, sizeof line, what);
    n = put(line, n, sizeof line, "\t");
    if (tls_step && tls_job >= 0 && strcmp(tls_step, "engine") != 0) {
        n = put(line, n, sizeof line, "PNG ");
        n = put(line, n, sizeof line, tls_step);
    } else {
        char where[3000];
        where_am_i(pc, where, sizeof where);
        n = put(line, n, sizeof line, where);
    }
    n = put(line, n, sizeof line, "\n");
    ssize_t w = write(W.rep_fd, line, n);
    (void)w;
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    if (getpid() != W.pid) { /* a child a stage forked: its crash is not the worker's */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    uintptr_t pc = 0;
#if defined(__x86_64__)
    pc = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.pc;
#else
    (void)uc;
#endif
    const char *name = sig == SIGSEGV   ? "SIGSEGV"
                       : sig == SIGFPE  ? "SIGFPE"
                       : sig == SIGBUS  ? "SIGBUS"
                       : sig == SIGILL  ? "SIGILL"
                       : sig == SIGABRT ? "SIGABRT"
                                        : "signal";
    crash_record(name, pc);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A thread's answer to "where are you" (hang report): only threads in plugin code. */
static void on_where(int sig)
{
    (void)sig;
    char line[3900] = "W ";
    size_t k = where_am_i(0, line + 2, sizeof line - 4);
    if (!k && tls_step && tls_job >= 0) { /* no plugin code: its file's decode or encode */
        k = put(line, 2, sizeof line - 2, "#");
        k = put_int(line, k, sizeof line - 2, tls_job);
        k = put(line, k, sizeof line - 2, " ");
        k = put(line, k, sizeof line - 2, tls_step) - 2;
    }
    if (!k)
        return;
    k += 2;
    line[k++] = '\n';
    ssize_t w = write(W.rep_fd, line, k);
    (void)w;
}

/* exit() called by a stage: the process is going away with a file half done. */
static void on_exit_call(void)
{
    if (getpid() != W.pid)
        return; /* a child a stage forked ends as it likes */
    crash_record("exit() called", 0);
    _exit(4);
}

/* A stack for the crash handler on this thread: one per thread (sigaltstack is the
   thread's), or a stage that overflows its stack dies without its file and stage named. */
static void thread_altstack(void)
{
    static _Thread_local char alt[64 * 1024];
    stack_t old, ss = {.ss_sp = alt, .ss_size = sizeof alt};
    /* a thread that has one keeps it (AddressSanitizer gives every thread its own, and
       unmaps it when the thread ends) */
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE))
        return;
    sigaltstack(&ss, NULL);
}

static void install_handlers(void)
{
    thread_altstack();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    int fatal[] = {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++)
        sigaction(fatal[i], &sa, NULL);
    struct sigaction sw;
    memset(&sw, 0, sizeof sw);
    sw.sa_handler = on_where;
    sw.sa_flags = SA_RESTART;
    sigemptyset(&sw.sa_mask);
    sigaction(SIGUSR2, &sw, NULL);
    signal(SIGINT, SIG_IGN); /* Ctrl-C and SIGTERM reach the supervisor, which decides */
    signal(SIGTERM, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN); /* past ulimit -f a write fails (EFBIG): the file fails, said */
    atexit(on_exit_call);
}

/* Asks every other thread where it is (see on_where). */
static void ask_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    pid_t self = (pid_t)syscall(SYS_gettid);
    for (struct dirent *de; (de = readdir(d));) {
        long tid = strtol(de->d_name, NULL, 10);
        if (tid > 0 && tid != self)
            syscall(SYS_tgkill, getpid(), (pid_t)tid, SIGUSR2);
    }
    closedir(d);
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
static void notice(int level, const char *msg)
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

static int load_pipeline(pf_engine *e, pf_pipeline **out, char *err, size_t errn)
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

static pf_engine *new_engine(int threads, char *err, size_t errn)
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

static void set_lanes(int cpu);
static void *lane_main(void *arg);

/* ---- --backend auto ------------------------------------------------------------------------------- */

/* What the GPU costs a worker before its first frame: the CUDA context, the fused
   kernels (from the kernel cache, or NVRTC), each lane's engine and its plans. Measured
   on an H200 (docs/benchmarks.md, the batch on the GPU): 0.7 to 1.0 s more than the
   same batch on the CPU when the pipeline itself costs nothing. */
#define GPU_START_MS 1000.0

/* The CPU's time for one frame of the pipeline at 512x512 RGB8 with every engine
   thread, in ms per pixel, for a batch of batch_px pixels: the first run (which plans,
   so it is the slower) decides where it is far from GPU_START_MS either way, else the
   faster of two more; 0 when it cannot be measured. */
static double cpu_ms_per_pixel(unsigned long long batch_px)
{
    pf_pipeline *p = NULL;
    char err[512];
    W.backend = "cpu";
    int rc = load_pipeline(W.e, &p, err, sizeof err);
    W.backend = NULL;
    if (rc != 0)
        return 0;
    const int w = 512, h = 512;
    pf_frame in[RUN_MAX_IO], out[RUN_MAX_IO];
    pf_shape s[RUN_MAX_IO];
    memset(out, 0, sizeof out);
    memset(in, 0, sizeof in);
    double ms = 0;
    if (pf_frame_alloc(&in[0], w, h, PF_U8, 3) != PF_OK)
        goto done;
    for (int y = 0; y < h; y++) /* a gradient: no stage sees a constant image */
        for (int x = 0; x < 3 * w; x++)
            ((unsigned char *)in[0].data)[(size_t)y * in[0].pitch + (size_t)x] =
                (unsigned char)(x * 7 + y * 3);
    s[0] = (pf_shape){w, h};
    for (int i = 1; i < W.n_in; i++) {
        in[i] = W.bound[i];
        s[i] = (pf_shape){W.bound[i].width, W.bound[i].height};
    }
    if (pf_pipeline_plan(p, s, W.n_in) != PF_OK)
        goto done;
    for (int k = 0; k < W.n_out; k++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, k, &oi);
        if (oi.kind == PF_OUTPUT_IMAGE &&
            pf_frame_alloc(&out[k], oi.shape.width, oi.shape.height, PF_U8,
                           pf_pipeline_output_channels(p, k, 3)) != PF_OK)
            goto done;
    }
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now_ms();
        if (pf_pipeline_run(p, in, W.n_in, out, W.n_out) != PF_OK)
            goto done;
        double t = (now_ms() - t0) / ((double)w * h);
        best = r == 0 || t < best ? t : best;
        double batch_ms = best * (double)batch_px;
        if (r == 0 && (batch_ms < GPU_START_MS / 2 || batch_ms > GPU_START_MS * 4))
            break;
    }
    ms = best;
done:
    for (int k = 0; k < W.n_out; k++)
        pf_frame_free(&out[k]);
    pf_frame_free(&in[0]);
    pf_pipeline_destroy(p);
    return ms;
}

/* --backend auto (the default) over a batch: the CPU when the pipeline's work for every
   pixel of the batch (from the inputs' headers) takes the CPU less time than the GPU
   takes to start, decided before CUDA is touched; said once. 1: the CPU; 0: as the
   engine chooses (the GPU where there is one); -1: not auto. */
static int auto_backend(void)
{
    const run_opts *o = W.o;
    if ((o->backend && strcmp(o->backend, "auto") != 0) || !o->batch_pixels)
        return -1;
    /* no CUDA driver: nothing to choose (the engine says so); loading the library
       touches no device */
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!cuda)
        return -1;
    dlclose(cuda);
    double per_px = cpu_ms_per_pixel(o->batch_pixels);
    if (per_px <= 0)
        return 0;
    double cpu_ms = per_px * (double)o->batch_pixels;
    char msg[400];
    int cpu = cpu_ms < GPU_START_MS;
    snprintf(msg, sizeof msg,
             "--backend auto: %s: the pipeline's work for this batch's %.1f megapixels takes "
             "the CPU about %.2f s, %s than a GPU takes to start (about %.1f s)",
             cpu ? "the CPU" : "the GPU where there is one", (double)o->batch_pixels / 1e6,
             cpu_ms / 1e3, cpu ? "less" : "more", GPU_START_MS / 1e3);
    if (!o->quiet)
        notice(0, msg);
    if (cpu)
        W.backend = "cpu";
    return cpu;
}

static int setup(char *err, size_t errn)
{
    const run_opts *o = W.o;
    if (!(W.e = new_engine(o->common->threads, err, errn)))
        return -1;
    pf_pipeline *p;
    if (load_pipeline(W.e, &p, err, errn) != 0)
        return -1;
    W.n_in = pf_pipeline_input_count(p);
    W.n_out = pf_pipeline_output_count(p);
    if (W.n_in > RUN_MAX_IO || W.n_out > RUN_MAX_IO) {
        snprintf(err, errn, "at most %d inputs and outputs", RUN_MAX_IO);
        pf_pipeline_destroy(p);
        return -1;
    }
    for (int i = 1; i < W.n_in; i++) {
        const char *name = pf_pipeline_input_name(p, i), *file = NULL;
        if ((W.unused[i] = !pf_pipeline_input_used(p, i))) {
            /* no output reads it: a pixel stands in for it, with or without --input */
            static uint32_t pixel;
            W.bound[i] = (pf_frame){&pixel, 1, 1, sizeof pixel, PF_U8, 4};
            continue;
        }
        for (int k = 0; k < o->n_binds; k++) {
            size_t len = strlen(name);
            if (strncmp(o->binds[k], name, len) == 0 && o->binds[k][len] == '=')
                file = o->binds[k] + len + 1;
        }
        if (!file) {
            snprintf(err, errn,
                     "pipeline input '%s' needs --input %s=FILE (the files on the command line "
                     "go to '%s')",
                     name, name, pf_pipeline_input_name(p, 0));
            pf_pipeline_destroy(p);
            return -1;
        }
        char e2[1024];
        const char *kind = not_regular(file);
        if (kind) { /* each worker reads it again, after a restart too */
            snprintf(err, errn,
                     "--input %s: %s: not a regular file (%s): every worker reads it, a "
                     "restarted one again; copy it to a file",
                     name, file, kind);
            pf_pipeline_destroy(p);
            return -1;
        }
        pf_png_info bsrc;
        pf_png_meta *bpm;
        pf_jpeg_meta *bjm;
        cli_format bfmt;
        if (cli_image_read(file, o->max_pixels, o->max_memory, 1, &W.bound[i], &bsrc, &bpm, &bjm,
                           &bfmt, e2, sizeof e2) != PF_OK) {
            snprintf(err, errn, "--input %s: %s", name, e2);
            pf_pipeline_destroy(p);
            return -1;
        }
    }
    for (int k = 0; k < W.n_out; k++) {
        pf_pipeline_output_info(p, k, &W.oi[k]);
        W.out_name[k] = strdup(W.oi[k].name);
        W.oi[k].name = W.out_name[k];
        W.json[k] = W.oi[k].table_format ? W.oi[k].table_format == 2 : o->json_tables;
        W.n_images += W.oi[k].kind == PF_OUTPUT_IMAGE;
        W.has_tables |= W.oi[k].kind == PF_OUTPUT_TABLE;
    }
    /* Bands: decided once for the pipeline; per file only its size and interlacing. */
    char why[512] = "";
    W.bandable = o->band_rows != 0 && !W.has_tables &&
                 pf_pipeline_band_halo(p, &W.halo, why, sizeof why) == PF_OK;
    if (o->band_rows != 0 && !W.bandable && !o->quiet) {
        if (W.has_tables)
            snprintf(why, sizeof why, "the pipeline has table outputs");
        char msg[700];
        snprintf(msg, sizeof msg, "--band-rows %d: images run whole: %s", o->band_rows, why);
        if (o->band_rows > 0) /* said once per run, whatever the restarts (notice) */
            notice(0, msg);
    }
    if (load_pipeline(W.e, &W.forms, err, errn) != 0 ||
        (W.bandable && o->band_rows < 0 && load_pipeline(W.e, &W.probe, err, errn) != 0)) {
        pf_pipeline_destroy(p);
        return -1;
    }
    /* Lanes: on the CPU one per core, files side by side; on the GPU one lane keeps
       its frame slots full. A trial plan tells which backend the pipeline gets. */
    int cpu = (o->backend && strcmp(o->backend, "cpu") == 0) || auto_backend() == 1;
    /* Until the trial plan (start_lanes) says: the GPU where a CUDA driver is */
    void *cuda = cpu ? NULL : dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (cuda)
        dlclose(cuda);
    else
        cpu = 1;
    W.trial = p;
    set_lanes(cpu);
    build_attribution();
    return 0;
}

/* Lanes, codec threads and the GPU's share of memory for the backend (cpu or not). */
static void set_lanes(int cpu)
{
    const run_opts *o = W.o;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    if (o->common->threads > 0 && o->common->threads < cores)
        cores = o->common->threads;
    /* On the GPU one lane, one engine and one plan per shape keep the device's frame
       slots full, tables or not: frames are waited for in order and each frame's
       tables are copied right after its wait (retire), before the next completes. */
    W.lanes = o->lanes ? o->lanes : cpu ? (int)(cores < 8 ? cores : 8) : 1;
    if (W.lanes > MAX_LANES)
        W.lanes = MAX_LANES;
    W.codecs = (int)cores;
    W.lane_threads = (int)(cores / W.lanes > 0 ? cores / W.lanes : 1);
    /* On the GPU: a share of the device's free memory for each lane's plans (the rest
       for other work on the device), and bands only for frames that do not fit it. */
    atomic_store(&W.gpu, !cpu);
}

/* The starter thread's work, while the codec threads decode the first files: the trial
   plan tells the backend (on the GPU it creates the CUDA context and builds the fused
   kernels, the slow part of a worker's start), then the lanes' engines, the pinned pool
   on the GPU, and the lanes. Returns 0, or -1 with the message. */
static int start_lanes(char *err, size_t errn)
{
    const run_opts *o = W.o;
    pf_pipeline *p = W.trial;
    int cpu = !atomic_load(&W.gpu);
    if (!cpu) {
        pf_shape s[RUN_MAX_IO];
        for (int i = 0; i < W.n_in; i++)
            s[i] = i ? (pf_shape){W.bound[i].width, W.bound[i].height} : (pf_shape){1024, 1024};
        pf_stats st;
        st.size = sizeof st;
        if (pf_pipeline_plan(p, s, W.n_in) == PF_OK && pf_pipeline_stats(p, &st) == PF_OK)
            cpu = strcmp(st.backend, "cpu") == 0;
        else
            cpu = !(o->backend && strcmp(o->backend, "cuda") == 0);
        set_lanes(cpu);
    }
    if (!cpu) {
        /* a share of the device's free memory for each lane's plans (the rest for other
           work on the device); bands only for frames that do not fit it */
        unsigned long long dev_free = 0, dev_total = 0;
        if (pf_engine_device_memory(W.e, &dev_free, &dev_total) == PF_OK)
            atomic_store(&W.dev_budget, dev_free / 10 * 7 / (unsigned)W.lanes);
        if (!o->quiet) {
            char msg[300];
            snprintf(msg, sizeof msg,
                     "on the GPU: %d lane%s, up to %d frames in flight each, %d codec threads; "
                     "%s of device memory for the plans, whole frames unless one does not fit",
                     W.lanes, W.lanes == 1 ? "" : "s", pf_pipeline_slots(p), W.codecs,
                     size_str(atomic_load(&W.dev_budget) * (unsigned)W.lanes).s);
            notice(0, msg);
        }
    }
    pf_pipeline_destroy(p);
    W.trial = NULL;
    lane *lanes = calloc((size_t)W.lanes, sizeof *lanes);
    if (!lanes) {
        snprintf(err, errn, "out of memory");
        return -1;
    }
    for (int i = 0; i < W.lanes; i++)
        if (!(lanes[i].e = new_engine(W.lane_threads, err, errn)))
            return -1;
    if (!cpu && W.lanes <= PINNED_MAX_ENGINES) {
        /* at most the frames in flight's half of --max-memory, and 4 GiB: page-locked
           memory is the machine's */
        pf_engine *engines[PINNED_MAX_ENGINES];
        for (int i = 0; i < W.lanes; i++)
            engines[i] = lanes[i].e;
        unsigned long long lim = 4ull << 30;
        if (o->max_memory && o->max_memory / 2 < lim)
            lim = o->max_memory / 2;
        pinned_pool *pool = NULL;
        if (pinned_pool_create(engines, W.lanes, lim, &pool) == PF_OK) {
            pthread_mutex_lock(&W.mu);
            W.pool = pool;
            pthread_mutex_unlock(&W.mu);
        }
    }
    W.lane0 = lanes;
    report("R %d %d", W.lanes, W.codecs); /* the supervisor's count of files to send */
    for (int i = 0; i < W.lanes; i++)
        if (pthread_create(&lanes[i].tid, NULL, lane_main, &lanes[i]) != 0) {
            snprintf(err, errn, "cannot start a thread");
            return -1;
        }
    W.lane_list = lanes;
    return 0;
}

static void *starter_main(void *arg)
{
    (void)arg;
    thread_altstack();
    char err[3000];
    if (start_lanes(err, sizeof err) != 0) {
        report("X %s", err);
        _exit(2);
    }
    return NULL;
}

/* ---- Engine lanes ------------------------------------------------------------------------------- */

static void drop(cached *c)
{
    pf_stats st;
    st.size = sizeof st;
    if (c->p && pf_pipeline_stats(c->p, &st) == PF_OK)
        atomic_fetch_add(&W.plans, st.plans);
    pf_pipeline_destroy(c->p);
    memset(c, 0, sizeof *c);
}

/* The lane's pipeline planned for primary input shape s: the job's (the other inputs'
   own shapes), or its bands' (banded: every input's). Cached, or loaded and planned. */
static pf_pipeline *pipeline_for(lane *L, job *j, pf_shape s, int banded)
{
    cached *hit = NULL, *victim = &L->c[0];
    for (int i = 0; i < PLAN_CACHE; i++) {
        if (L->c[i].p && L->c[i].shape.width == s.width && L->c[i].shape.height == s.height &&
            L->c[i].banded == banded)
            hit = &L->c[i];
        if (!L->c[i].p || (victim->p && L->c[i].use < victim->use))
            victim = &L->c[i];
    }
    if (hit) {
        hit->use = ++L->clock;
        return hit->p;
    }
    drop(victim);
    pf_pipeline *p;
    if (load_pipeline(L->e, &p, j->err, sizeof j->err) != 0)
        return NULL;
    pf_shape shapes[RUN_MAX_IO];
    shapes[0] = s;
    for (int i = 1; i < W.n_in; i++)
        shapes[i] = banded && !W.unused[i] ? s : (pf_shape){W.bound[i].width, W.bound[i].height};
    /* Before any buffer: the plan's bytes (the engine counts them from the shapes) and
       the file's frames, against --max-memory. */
    pf_memory m;
    memset(&m, 0, sizeof m);
    m.size = sizeof m;
    if (pf_pipeline_memory(p, shapes, W.n_in, &m) != PF_OK) {
        snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
        pf_pipeline_destroy(p);
        return NULL;
    }
    unsigned long long pb = plan_host_bytes(&m);
    if (W.gpu && W.dev_budget && m.device_bytes > W.dev_budget) {
        snprintf(j->err, sizeof j->err,
                 "needs %s of GPU memory for a %dx%d frame (the largest buffer, %s, %s), over "
                 "the %s this batch may take of the device",
                 size_str(m.device_bytes).s, s.width, s.height,
                 m.largest_stage ? m.largest_stage : "?", size_str(m.largest_bytes).s,
                 size_str(W.dev_budget).s);
        pf_pipeline_destroy(p);
        return NULL;
    }
    if (W.o->max_memory && pb + j->est > W.o->max_memory) {
        snprintf(j->err, sizeof j->err,
                 "needs %s: its frames %s and the pipeline's buffers %s (the largest, %s, %s), "
                 "over --max-memory %s",
                 size_str(pb + j->est).s, size_str(j->est).s, size_str(pb).s,
                 m.largest_stage ? m.largest_stage : "?", size_str(m.largest_bytes).s,
                 size_str(W.o->max_memory).s);
        pf_pipeline_destroy(p);
        return NULL;
    }
    if (pf_pipeline_plan(p, shapes, W.n_in) != PF_OK) {
        snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
        pf_pipeline_destroy(p);
        return NULL;
    }
    report("P %d %d", s.width, s.height);
    /* Plans of other shapes go while the lanes' pipelines would hold over a quarter of
       the memory budget. */
    for (;;) {
        unsigned long long held = 0;
        cached *lru = NULL;
        for (int i = 0; i < PLAN_CACHE; i++) {
            held += L->c[i].bytes;
            if (L->c[i].p && &L->c[i] != victim && (!lru || L->c[i].use < lru->use))
                lru = &L->c[i];
        }
        unsigned long long held_dev = 0;
        for (int i = 0; i < PLAN_CACHE; i++)
            held_dev += L->c[i].dev_bytes;
        int host_ok = !W.o->max_memory || held + pb <= W.o->max_memory / 4 / (unsigned)W.lanes;
        int dev_ok = !W.gpu || !W.dev_budget || held_dev + m.device_bytes <= W.dev_budget;
        if (!lru || (host_ok && dev_ok))
            break;
        drop(lru);
    }
    victim->p = p;
    victim->shape = s;
    victim->banded = banded;
    victim->use = ++L->clock;
    victim->bytes = pb;
    victim->dev_bytes = m.device_bytes;
    return p;
}

static const char *copied_row_name(const void *params, int row)
{
    return ((char *const *)params)[row];
}

/* Copies the tables of the frame just waited for, so the lane can go on. */
static int copy_tables(pf_pipeline *p, job *j)
{
    for (int k = 0; k < W.n_out; k++) {
        if (W.oi[k].kind != PF_OUTPUT_TABLE)
            continue;
        pf_table t;
        if (pf_pipeline_table(p, k, &t) != PF_OK) {
            snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
            return -1;
        }
        size_t cells = (size_t)t.rows * (size_t)t.cols;
        double *data = malloc(cells * sizeof *data + 1);
        char **cols = calloc((size_t)t.cols + 1, sizeof *cols);
        char **rows = t.row_name ? calloc((size_t)t.rows + 1, sizeof *rows) : NULL;
        if (!data || !cols || (t.row_name && !rows)) {
            free(data);
            free(cols);
            free(rows);
            snprintf(j->err, sizeof j->err, "out of memory copying a table");
            return -1;
        }
        memcpy(data, t.data, cells * sizeof *data);
        for (int c = 0; c < t.cols; c++)
            cols[c] = strdup(t.columns && t.columns[c] ? t.columns[c] : "");
        for (int r = 0; rows && r < t.rows; r++)
            rows[r] = strdup(t.row_name(t.params, r));
        j->tab[k] = (pf_table){
            data, t.rows, t.cols, (const char *const *)cols, rows ? copied_row_name : NULL, rows};
        j->row_names[k] = rows;
    }
    return 0;
}

/* Frees a frame of a job: back to the pinned pool when it came from there. */
static void free_frame(pf_frame *f)
{
    if (W.pool && pinned_owns(W.pool, f))
        pinned_release(W.pool, f);
    else
        pf_frame_free(f);
}

/* On the GPU, a decoded input moved into a pinned frame by the codec thread that decoded
   it (the codecs are many, the lane feeding the GPU one): the upload is then DMA from it.
   Where no pinned frame can be had, the input stays as it is (the engine stages it). */
static void pin_input(job *j)
{
    pf_frame *f = &j->in[0], pf;
    if (!W.pool || !f->data ||
        pinned_frame(W.pool, f->width, f->height, f->sample, f->channels, &pf) != PF_OK)
        return;
    size_t row = pf_frame_pixel_bytes(f->sample, f->channels) * (size_t)f->width;
    for (int y = 0; y < f->height; y++)
        memcpy((char *)pf.data + (size_t)y * pf.pitch, (const char *)f->data + (size_t)y * f->pitch,
               row);
    pf_frame_free(f);
    *f = pf;
}

static void free_job(job *j)
{
    for (int k = 0; k < RUN_MAX_IO; k++) {
        free_frame(&j->out[k]);
        if (j->tab[k].columns) {
            for (int c = 0; c < j->tab[k].cols; c++)
                free((char *)j->tab[k].columns[c]);
            free((void *)j->tab[k].columns);
            free((void *)j->tab[k].data);
        }
        if (j->row_names[k]) {
            for (int r = 0; r < j->tab[k].rows; r++)
                free(j->row_names[k][r]);
            free(j->row_names[k]);
        }
    }
    free_frame(&j->in[0]);
    cli_rows_close(j->rows);
    pf_png_meta_free(j->meta);
    pf_jpeg_meta_free(j->jmeta);
    for (int k = 0; k < RUN_MAX_IO; k++)
        free(j->names[k]);
    free(j->path);
    free(j);
}

static void push(queue *q, job *j)
{
    j->next = NULL;
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    q->n++;
}

static job *pop(queue *q)
{
    job *j = q->head;
    if (j) {
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        q->n--;
    }
    return j;
}

static void to_encode(job *j)
{
    pthread_mutex_lock(&W.mu);
    W.in_engine--;
    push(&W.encode, j);
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
}

/* A failure that loses the GPU context: the worker cannot go on. */
static int context_lost(int rc)
{
    return rc == PF_CUDA;
}

/* The context is the process's: other lanes fail too once it is lost. The first lane
   to see it blames its file and ends the worker; the others' files run again. */
static void lost_and_exit(job *j)
{
    static atomic_int once;
    if (atomic_exchange(&once, 1) != 0)
        for (;;)
            pause();
    report_done(j, 1, j->err, " (the GPU context is lost; the worker restarts)");
    report("L");
    _exit(3);
}

static void engine_enter(job *j)
{
    atomic_store(&engine_last, j->index);
    atomic_fetch_add(&engine_jobs, 1);
    tls_job = j->index;
    tls_step = "engine";
    j->eng_ms = now_ms(); /* the start, until retire */
    report("E %d", j->index);
}

/* Descriptors 0-2 and the worker's own, and the working directory, recorded at start. */
static void record_process(int job_fd)
{
    W.pid = getpid();
    int fds[6] = {0, 1, 2, job_fd, W.rep_fd, W.dirfd};
    for (int k = 0; k < 6; k++)
        if (fds[k] >= 0 && fstat(fds[k], &W.fd_st[W.n_fds]) == 0)
            W.fd_num[W.n_fds++] = fds[k];
    if (stat(".", &W.cwd_st) != 0)
        W.cwd_st.st_ino = 0;
    W.cwd = getcwd(NULL, 0);
}

/* Whether the code that ran a frame left the process as it found it. A stage that closes
   a descriptor it does not own (stdout, the report pipe: the next file opened takes its
   number, and a stage's printf lands in it) or changes the working directory breaks the
   files beside its own; its file fails, said so, and a fresh worker runs the rest. The
   file whose frame returned is to blame only when no other file's frame was in the
   engine with it: another's stage may have done it, and the check runs at whichever
   frame returns first. Then no file is named, and the supervisor runs the files that
   were in the engine again, one at a time, which convicts the culprit. */
static void process_intact(int index)
{
    static const char *const what[] = {"stdin", "stdout", "stderr"};
    char why[200] = "";
    for (int k = 0; k < W.n_fds && !why[0]; k++) {
        struct stat st;
        int fd = W.fd_num[k];
        if (fstat(fd, &st) != 0 || st.st_dev != W.fd_st[k].st_dev || st.st_ino != W.fd_st[k].st_ino)
            snprintf(why, sizeof why, "closed or replaced descriptor %d (%s)", fd,
                     fd < 3           ? what[fd]
                     : fd == W.dirfd  ? "the worker's output folder"
                     : fd == W.rep_fd ? "the worker's report pipe"
                                      : "the worker's job pipe");
    }
    struct stat st;
    if (!why[0] && W.cwd_st.st_ino &&
        (stat(".", &st) != 0 || st.st_dev != W.cwd_st.st_dev || st.st_ino != W.cwd_st.st_ino))
        snprintf(why, sizeof why, "changed the working directory");
    if (!why[0])
        return;
    /* index -1: seen by a file that failed for it (a write to a descriptor a stage closed),
       or by a frame returning while others were in the engine; the supervisor runs the
       files held again, one at a time, and convicts the culprit */
    const char *seen = "its frame returned";
    if (index < 0)
        seen = "another file failed for it";
    else if (atomic_load(&engine_jobs) > 1)
        seen = "a frame returned while other files' frames were in the engine", index = -1;
    report("C %d %s\tthe pipeline's stages (seen when %s)", index, why, seen);
    _exit(6);
}

static void engine_leave(const job *j)
{
    process_intact(j->index);
    atomic_fetch_sub(&engine_jobs, 1);
    tls_job = -1;
    tls_step = NULL;
}

/* A frame that failed in the engine: its message, and the worker's end when the GPU
   context is lost. */
static void engine_failed(job *j, pf_pipeline *p, int rc)
{
    snprintf(j->err, sizeof j->err, "%s", pf_pipeline_errmsg(p));
    j->status = 1;
    engine_leave(j);
    if (context_lost(rc))
        lost_and_exit(j);
}

/* Waits for the oldest submitted frame of the lane and hands it to the encoders. */
static void retire(job **fifo, pf_pipeline **fp, int *n)
{
    job *j = fifo[0];
    pf_pipeline *p = fp[0];
    tls_job = j->index;
    int rc = pf_pipeline_wait(p, j->ticket);
    j->eng_ms = now_ms() - j->eng_ms;
    if (rc != PF_OK) {
        engine_failed(j, p, rc);
    } else {
        if (W.has_tables && copy_tables(p, j) != 0)
            j->status = 1;
        engine_leave(j);
    }
    memmove(fifo, fifo + 1, sizeof *fifo * (size_t)(*n - 1));
    memmove(fp, fp + 1, sizeof *fp * (size_t)(*n - 1));
    (*n)--;
    to_encode(j);
}

/* --profile: the last frame's time per launch unit of the first lane, with the stage
   ids inside each. */
static void print_profile(const pf_pipeline *p)
{
    static const char *const kinds[] = {"point", "stencil", "resample", "reduce"};
    pf_stats s;
    s.size = sizeof s;
    if (pf_pipeline_stats(p, &s) != PF_OK)
        return;
    fprintf(stderr, "profile of the last frame of lane 0 (%s; %s):\n", s.backend,
            strcmp(s.backend, "cpu") ? "GPU time from CUDA events" : "wall time per unit");
    fprintf(stderr, "  %-4s %-8s %6s %10s %10s %9s %8s  %s\n", "unit", "kind", "bands", "time ms",
            "model ms", "MB", "GB/s", "stages");
    double total = 0;
    for (int i = 0; i < pf_pipeline_unit_count(p); i++) {
        pf_unit_info u;
        pf_pipeline_unit(p, i, &u);
        total += u.measured_ms;
        fprintf(stderr, "  #%-3d %-8s %6d %10.3f %10.3f %9.1f %8.1f  ", i, kinds[u.kind], u.bands,
                u.measured_ms, u.predicted_ms, u.bytes / 1e6,
                u.measured_ms > 0 ? u.bytes / (u.measured_ms * 1e6) : 0.0);
        for (int k = 0; k < u.n_stages; k++)
            fprintf(stderr, "%s%s", k ? (u.fused ? " + " : ", ") : "", u.stages[k]);
        fputc('\n', stderr);
    }
    fprintf(stderr, "  total %.3f ms in %d launch(es)", total, s.launches_per_frame);
    if (s.timed_launches)
        fprintf(stderr, "; longest launch %.3f ms", s.max_launch_ms);
    fputc('\n', stderr);
    if (s.budget_ms > 0)
        fprintf(stderr, "  watchdog budget %.1f ms: %llu of %llu timed launches over it\n",
                s.budget_ms, s.launches_over_budget, s.timed_launches);
}

/* ---- Bands ------------------------------------------------------------------------------------- */

static int job_items(job *j, const pf_frame *frames, out_item *items, int *order);
static void job_outs(job *j, const out_item *items, const int *order, int n);
static void reader_error(job *j, const char *err);

static pf_frame frame_rows(const pf_frame *f, int y, int n)
{
    pf_frame v = *f;
    v.data = (char *)f->data + (size_t)y * f->pitch;
    v.height = n;
    return v;
}

/* The encoder of a banded file: on a thread of its own it writes the output rows of one
   band while the lane reads and runs the next. Two sets of output frames alternate:
   band i is computed into set i % 2 once band i - 2 has been written from it. */
typedef struct band_writer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    out_stream *os;
    pf_frame (*out)[RUN_MAX_IO]; /* [2][RUN_MAX_IO] */
    const int *item_of;
    int index;                   /* the job's, for crash reports */
    int posted, written;         /* bands handed over, bands written */
    int y0[2], y1[2], a[2];      /* the output rows in each set, and its first input row */
    int finish, abandon, failed; /* no more bands; stop now; a write failed */
    double ms;
    char err[2048];
} band_writer;

static void *band_writer_main(void *arg)
{
    thread_altstack();
    band_writer *bw = arg;
    tls_job = bw->index;
    tls_step = "encode";
    char e[2048];
    pthread_mutex_lock(&bw->mu);
    for (;;) {
        while (bw->written == bw->posted && !bw->finish && !bw->abandon)
            pthread_cond_wait(&bw->cv, &bw->mu);
        if (bw->abandon || bw->written == bw->posted)
            break;
        int b = bw->written % 2, y0 = bw->y0[b], y1 = bw->y1[b], a = bw->a[b], rc = 0;
        pthread_mutex_unlock(&bw->mu);
        double t = now_ms();
        for (int k = 0; k < W.n_out && rc == 0; k++) {
            if (W.oi[k].kind != PF_OUTPUT_IMAGE)
                continue;
            pf_frame v = frame_rows(&bw->out[b][k], y0 - a, y1 - y0);
            rc = out_stream_rows(bw->os, bw->item_of[k], &v, y1 - y0, e, sizeof e);
        }
        pthread_mutex_lock(&bw->mu);
        bw->ms += now_ms() - t;
        if (rc != 0) {
            bw->failed = 1;
            snprintf(bw->err, sizeof bw->err, "%s", e);
            pthread_cond_broadcast(&bw->cv);
            break;
        }
        bw->written++;
        pthread_cond_broadcast(&bw->cv);
    }
    pthread_mutex_unlock(&bw->mu);
    tls_job = -1;
    tls_step = NULL;
    return NULL;
}

/* A large image in bands (docs/batch.md), from the input decode opened to the outputs'
   commit: output rows [y0, y0 + R) come from a frame of the input's rows [a, a + R + 2
   halo), a = y0 - halo kept inside the image, so every band is one shape (one plan) and
   a band at the top or bottom edge holds that edge, where stages clamp their reads as
   on the whole frame. Consecutive windows overlap: the rows kept move up, the rest are
   read. The lane reads and runs a band while band_writer_main encodes the one before.
   Nothing is written under the final names unless every row was. */
static void run_banded(lane *L, job *j)
{
    const int w = j->in[0].width, h = j->in[0].height, R = j->band_rows, halo = W.halo;
    const int hb = R + 2 * halo; /* below h: plan_job bands only taller images */
    pf_frame in, out[2][RUN_MAX_IO], hdr[RUN_MAX_IO];
    out_item items[RUN_MAX_IO];
    int order[RUN_MAX_IO], item_of[RUN_MAX_IO], n = 0, entered = 0, started = 0;
    char err[2048] = "";
    band_writer bw;
    pthread_t writer;
    memset(&in, 0, sizeof in);
    memset(out, 0, sizeof out);
    memset(hdr, 0, sizeof hdr);
    memset(&bw, 0, sizeof bw);
    pthread_mutex_init(&bw.mu, NULL);
    pthread_cond_init(&bw.cv, NULL);
    bw.out = out;
    bw.item_of = item_of;
    bw.index = j->index;
    j->eng_ms = 0;
    pf_pipeline *p = pipeline_for(L, j, (pf_shape){w, hb}, 1);
    if (!p) {
        j->status = 1;
        goto done;
    }
    if (pf_frame_alloc(&in, w, hb, j->in[0].sample, j->in[0].channels) != PF_OK) {
        snprintf(j->err, sizeof j->err, "out of memory for a band of %dx%d", w, hb);
        j->status = 1;
        goto done;
    }
    for (int k = 0; k < W.n_out; k++) {
        if (W.oi[k].kind != PF_OUTPUT_IMAGE)
            continue;
        pf_output_info oi;
        pf_pipeline_output_info(p, k, &oi);
        int ch = pf_pipeline_output_channels(p, k, j->in[0].channels);
        pf_sample smp = oi.bits == 16 ? PF_U16 : oi.bits == 8 ? PF_U8 : j->in[0].sample;
        for (int b = 0; b < 2; b++)
            if (pf_frame_alloc(&out[b][k], oi.shape.width, oi.shape.height, smp, ch) != PF_OK) {
                snprintf(j->err, sizeof j->err, "out of memory for a band of %dx%d", w, hb);
                j->status = 1;
                goto done;
            }
        hdr[k] = out[0][k]; /* the header's: the whole image's size */
        hdr[k].height = h;
    }
    if ((n = job_items(j, hdr, items, order)) < 0) {
        j->status = 1;
        goto done;
    }
    for (int i = 0; i < n; i++)
        item_of[order[i]] = i;
    out_opts oo = {W.dirfd, W.o->zlib, W.o->png_filter};
    double t = now_ms();
    if (out_stream_open(&oo, items, n, &bw.os, j->err, sizeof j->err) != 0) {
        j->status = 1;
        goto done;
    }
    j->enc_ms += now_ms() - t;
    if (pthread_create(&writer, NULL, band_writer_main, &bw) != 0) {
        snprintf(j->err, sizeof j->err, "cannot start a thread");
        j->status = 1;
        goto done;
    }
    started = 1;
    engine_enter(j);
    entered = 1;
    j->eng_ms = 0;
    for (int y0 = 0, a = 0, have = 0, i = 0; y0 < h; y0 += R, i++) {
        int y1 = y0 + R < h ? y0 + R : h, b = i % 2;
        int na = y0 - halo < 0 ? 0 : y0 - halo > h - hb ? h - hb : y0 - halo;
        t = now_ms();
        int keep = a + have - na; /* rows of the last window in this one */
        if (keep > 0 && na > a)
            memmove(in.data, (char *)in.data + (size_t)(na - a) * in.pitch,
                    (size_t)keep * in.pitch);
        have = keep > 0 ? keep : 0;
        a = na;
        pf_frame dst = frame_rows(&in, have, hb - have);
        if (have < hb && cli_rows_read(j->rows, &dst, hb - have, err, sizeof err) != PF_OK) {
            reader_error(j, err);
            goto done;
        }
        have = hb;
        j->dec_ms += now_ms() - t;
        /* output set b is free once band i - 2 is written */
        pthread_mutex_lock(&bw.mu);
        while (bw.written < i - 1 && !bw.failed)
            pthread_cond_wait(&bw.cv, &bw.mu);
        int failed = bw.failed;
        pthread_mutex_unlock(&bw.mu);
        if (failed)
            break;
        double t1 = now_ms();
        pf_frame ins[RUN_MAX_IO]; /* the other inputs (--input): the same rows of each */
        ins[0] = in;
        for (int k = 1; k < W.n_in; k++)
            ins[k] = W.unused[k] ? W.bound[k] : frame_rows(&W.bound[k], a, hb);
        int rc = pf_pipeline_run(p, ins, W.n_in, out[b], W.n_out);
        j->eng_ms += now_ms() - t1;
        if (rc != PF_OK) {
            entered = 0;
            engine_failed(j, p, rc);
            goto done;
        }
        pthread_mutex_lock(&bw.mu);
        bw.y0[b] = y0;
        bw.y1[b] = y1;
        bw.a[b] = a;
        bw.posted = i + 1;
        pthread_cond_broadcast(&bw.cv);
        pthread_mutex_unlock(&bw.mu);
    }
    /* the last bands written (or a failure), then the commit */
    pthread_mutex_lock(&bw.mu);
    bw.finish = 1;
    pthread_cond_broadcast(&bw.cv);
    pthread_mutex_unlock(&bw.mu);
    pthread_join(writer, NULL);
    started = 0;
    j->enc_ms += bw.ms;
    if (bw.failed) {
        snprintf(j->err, sizeof j->err, "%s", bw.err);
        j->status = 1;
        goto done;
    }
    t = now_ms();
    if (out_stream_commit(bw.os, j->err, sizeof j->err) != 0)
        j->status = 1;
    else
        job_outs(j, items, order, n);
    bw.os = NULL;
    j->enc_ms += now_ms() - t;
    j->written = j->status == 0;
done:
    if (started) { /* a failure on the lane: the writer stops where it is */
        pthread_mutex_lock(&bw.mu);
        bw.abandon = 1;
        pthread_cond_broadcast(&bw.cv);
        pthread_mutex_unlock(&bw.mu);
        pthread_join(writer, NULL);
    }
    if (entered)
        engine_leave(j);
    out_stream_abort(bw.os);
    pthread_mutex_destroy(&bw.mu);
    pthread_cond_destroy(&bw.cv);
    pf_frame_free(&in);
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < W.n_out; k++)
            pf_frame_free(&out[b][k]);
    cli_rows_close(j->rows);
    j->rows = NULL;
}

static void *lane_main(void *arg)
{
    thread_altstack();
    lane *L = arg;
    job *fifo[8];
    pf_pipeline *fp[8];
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&W.mu);
        while (!W.ready.n && !(W.input_closed && !W.decode.n && !W.decoding) && !n)
            pthread_cond_wait(&W.cv, &W.mu);
        job *j = pop(&W.ready);
        if (j)
            W.in_engine++;
        int done = !j && !n && W.input_closed && !W.decode.n && !W.decoding;
        pthread_mutex_unlock(&W.mu);
        if (done)
            break;
        if (!j) {
            retire(fifo, fp, &n);
            continue;
        }
        if (j->rows) { /* a large image in bands: the lane runs it from decode to commit */
            while (n)
                retire(fifo, fp, &n);
            run_banded(L, j);
            to_encode(j);
            continue;
        }
        pf_pipeline *p = pipeline_for(L, j, (pf_shape){j->in[0].width, j->in[0].height}, 0);
        if (!p) {
            j->status = 1;
            to_encode(j);
            continue;
        }
        /* On the CPU submit runs the frame: retire it at once. On the GPU up to the
           pipeline's slots in flight, waited for in order (tables are copied after each
           frame's own wait, before a later frame can complete). */
        pf_stats st;
        st.size = sizeof st;
        int cpu = pf_pipeline_stats(p, &st) == PF_OK && strcmp(st.backend, "cpu") == 0;
        int depth = cpu ? 1 : pf_pipeline_slots(p);
        if (depth > 8)
            depth = 8;
        while (n && n >= depth)
            retire(fifo, fp, &n);
        int rc = PF_OK;
        for (int k = 0; k < W.n_out && rc == PF_OK; k++) {
            pf_output_info oi;
            pf_pipeline_output_info(p, k, &oi);
            if (oi.kind != PF_OUTPUT_IMAGE)
                continue;
            /* "auto" channels: the input's, widened where a stage's output needs more */
            int ch = pf_pipeline_output_channels(p, k, j->in[0].channels);
            pf_sample s = oi.bits == 16 ? PF_U16 : oi.bits == 8 ? PF_U8 : j->in[0].sample;
            if (!W.pool ||
                pinned_frame(W.pool, oi.shape.width, oi.shape.height, s, ch, &j->out[k]) != PF_OK)
                rc = pf_frame_alloc(&j->out[k], oi.shape.width, oi.shape.height, s, ch);
            if (rc != PF_OK)
                snprintf(j->err, sizeof j->err, "out of memory for a %dx%d output", oi.shape.width,
                         oi.shape.height);
        }
        if (rc != PF_OK) {
            j->status = 1;
            to_encode(j);
            continue;
        }
        pf_frame in[RUN_MAX_IO];
        in[0] = j->in[0];
        for (int i = 1; i < W.n_in; i++)
            in[i] = W.bound[i];
        engine_enter(j);
        for (;;) {
            rc = pf_pipeline_submit(p, in, W.n_in, j->out, W.n_out, &j->ticket);
            if (rc != PF_UNSUPPORTED || !n)
                break;
            retire(fifo, fp, &n); /* every slot busy */
            tls_job = j->index;
        }
        tls_job = -1;
        if (rc != PF_OK) {
            engine_failed(j, p, rc);
            to_encode(j);
            continue;
        }
        /* A pageable input was copied by submit; a pinned one is read by DMA while the
           frame runs, and goes back to the pool with the job. */
        if (!W.pool || !pinned_owns(W.pool, &j->in[0]))
            pf_frame_free(&j->in[0]);
        fifo[n] = j;
        fp[n] = p;
        n++;
        if (depth == 1)
            retire(fifo, fp, &n);
    }
    if (W.o->profile && L == W.lane0) {
        cached *last = NULL;
        for (int i = 0; i < PLAN_CACHE; i++)
            if (L->c[i].p && (!last || L->c[i].use > last->use))
                last = &L->c[i];
        if (last)
            print_profile(last->p);
    }
    for (int i = 0; i < PLAN_CACHE; i++)
        drop(&L->c[i]);
    return NULL;
}

/* ---- Codec threads --------------------------------------------------------------------------------- */

/* The items of j's outputs, frames[k] being output k's frame (for bands, one of the
   image's size whose data is not read), the first image output last: its appearance
   commits the set. order[i] is item i's output. The count, or -1 with the message. */
static int job_items(job *j, const pf_frame *frames, out_item *items, int *order)
{
    int n = 0, commit = -1;
    for (int k = 0; k < W.n_out; k++) {
        int img = W.oi[k].kind == PF_OUTPUT_IMAGE;
        if (!j->names[k] || !j->names[k][0])
            break;
        items[n] = (out_item){j->names[k], img,     &frames[k], &j->tab[k], W.json[k],
                              j->meta,     &j->src, j->jmeta,   j->fmt,     .phys = OUT_PHYS_DROP};
        /* its form, and the input's density through its geometry */
        if (img && pf_pipeline_output_png_form(W.forms, k) > 0)
            items[n].png_form = pf_pipeline_output_png_form(W.forms, k);
        if (img && pf_pipeline_output_geometry(W.forms, k, j->src.width, j->src.height,
                                               &items[n].geometry))
            items[n].phys = OUT_PHYS_GEOMETRY;
        order[n] = k;
        if (img && commit < 0)
            commit = n;
        n++;
    }
    if (n < W.n_out) {
        snprintf(j->err, sizeof j->err, "no name for output %d", n);
        return -1;
    }
    if (commit < 0)
        commit = 0;
    if (n > 0) {
        out_item c = items[commit];
        int ck = order[commit];
        memmove(items + commit, items + commit + 1, sizeof *items * (size_t)(n - commit - 1));
        memmove(order + commit, order + commit + 1, sizeof *order * (size_t)(n - commit - 1));
        items[n - 1] = c;
        order[n - 1] = ck;
    }
    return n;
}

/* j->outs: the names written, in output order. */
static void job_outs(job *j, const out_item *items, const int *order, int n)
{
    size_t used = 0;
    j->outs[0] = 0;
    for (int k = 0; k < W.n_out && used < sizeof j->outs; k++)
        for (int i = 0; i < n; i++)
            if (order[i] == k && used < sizeof j->outs)
                used += (size_t)snprintf(j->outs + used, sizeof j->outs - used, "%s%s",
                                         used ? ", " : "", items[i].final_name);
}

static void encode(job *j)
{
    double enc_start = now_ms();
    tls_job = j->index;
    tls_step = "encode";
    if (j->status == 0 && !j->written) { /* a banded job was written by its lane */
        out_item items[RUN_MAX_IO];
        int order[RUN_MAX_IO];
        int n = job_items(j, j->out, items, order);
        out_opts oo = {W.dirfd, W.o->zlib, W.o->png_filter};
        if (n < 0 || out_write_set(&oo, items, n, j->err, sizeof j->err) != 0)
            j->status = 1;
        else
            job_outs(j, items, order, n);
        j->enc_ms = now_ms() - enc_start;
    }
    if (j->status == 0) {
        report("T %d %.3f %.3f %.3f %d", j->index, j->dec_ms, j->eng_ms, j->enc_ms,
               j->written ? j->band_rows : 0);
        report_done(j, 0, j->outs, "");
    } else {
        /* Its failure may be another file's stage's doing: a descriptor closed under it
           (EBADF never happens to a descriptor nobody else closed) */
        process_intact(-1);
        if (strstr(j->err, strerror(EBADF))) {
            report("C -1 a descriptor of the worker's closed under a file's write\tthe "
                   "pipeline's stages (seen when %s failed for it)",
                   j->path);
            _exit(6);
        }
        report_done(j, 1, j->err, "");
    }
    tls_job = -1;
    tls_step = NULL;
}

/* A reader's message without the input's path in front: the log names the input. */
static void reader_error(job *j, const char *err)
{
    size_t pl = strlen(j->path);
    const char *m = strncmp(err, j->path, pl) == 0 && err[pl] == ':' ? err + pl + 2 : err;
    snprintf(j->err, sizeof j->err, "%s", m);
    j->status = 1;
}

static void decode(job *j)
{
    tls_job = j->index;
    tls_step = "decode";
    report("B %d", j->index); /* its time limit starts (run.c) */
    j->t0 = now_ms();
    double dec_start = j->t0;
    char err[2048] = "";
    unsigned long long max_px = W.o->max_pixels ? W.o->max_pixels : PF_PNG_DEFAULT_MAX_PIXELS;
    const char *kind = not_regular(j->path);
    if (kind) {
        snprintf(j->err, sizeof j->err,
                 "not a regular file (%s): inputs are read more than once; give one image "
                 "on stdin as '-', or copy it to a file",
                 kind);
        j->status = 1;
    } else if (j->pixels > max_px) {
        /* the smaller limit first: a file over --max-pixels is named so, whatever its bytes */
        snprintf(j->err, sizeof j->err,
                 "image is %llu pixels, more than the limit of %llu (--max-pixels); not decoded",
                 j->pixels, max_px);
        j->status = 1;
    } else if (W.o->max_memory && j->est > W.o->max_memory) {
        snprintf(j->err, sizeof j->err,
                 "its frames need %s (from the PNG header), over --max-memory %s; not decoded",
                 size_str(j->est).s, size_str(W.o->max_memory).s);
        j->status = 1;
    } else if (j->band_rows) {
        /* bands: the header and metadata now, the rows as the lane runs them */
        int rc = cli_rows_open(j->path, W.o->max_pixels, W.o->max_memory, W.o->strip, &j->rows,
                               &j->in[0], &j->src, &j->meta, &j->jmeta, &j->fmt, err, sizeof err);
        if (rc == PF_UNSUPPORTED) { /* interlaced, or turned by its EXIF: whole */
            j->band_rows = 0;
            decode(j);
            return;
        }
        if (rc != PF_OK)
            reader_error(j, err);
    } else if (cli_image_read(j->path, W.o->max_pixels, W.o->max_memory, W.o->strip, &j->in[0],
                              &j->src, &j->meta, &j->jmeta, &j->fmt, err, sizeof err) != PF_OK) {
        reader_error(j, err); /* the reader's messages start with the path */
    }
    j->dec_ms = now_ms() - dec_start;
    tls_job = -1;
    tls_step = NULL;
}

static void *codec_main(void *arg)
{
    (void)arg;
    thread_altstack();
    unsigned long long half = W.o->max_memory / 2;
    pthread_mutex_lock(&W.mu);
    for (;;) {
        job *j = pop(&W.encode);
        if (j) {
            W.encoding++;
            pthread_mutex_unlock(&W.mu);
            encode(j);
            unsigned long long est = j->est;
            free_job(j);
            pthread_mutex_lock(&W.mu);
            W.encoding--;
            W.bytes_in_flight -= est;
            pthread_cond_broadcast(&W.cv);
            continue;
        }
        j = W.decode.head;
        int busy = W.bytes_in_flight > 0;
        if (j && (!busy || !half || W.bytes_in_flight + j->est <= half)) {
            pop(&W.decode);
            W.decoding++;
            W.bytes_in_flight += j->est;
            pthread_mutex_unlock(&W.mu);
            decode(j);
            pthread_mutex_lock(&W.mu);
            W.decoding--;
            if (!j->status && !j->rows && W.pool) {
                pthread_mutex_unlock(&W.mu);
                pin_input(j);
                pthread_mutex_lock(&W.mu);
            }
            if (j->status) {
                W.in_engine++; /* to_encode counts it out */
                pthread_mutex_unlock(&W.mu);
                to_encode(j);
                pthread_mutex_lock(&W.mu);
            } else {
                push(&W.ready, j);
            }
            pthread_cond_broadcast(&W.cv);
            continue;
        }
        if (W.input_closed && !W.decode.n && !W.decoding && !W.ready.n && !W.in_engine &&
            !W.encode.n)
            break;
        pthread_cond_wait(&W.cv, &W.mu);
    }
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

/* ---- Memory estimate ------------------------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A PNG's IHDR fields: 0, or -1 when the file does not start with a PNG header. */
static int read_ihdr(const char *path, unsigned long long *w, unsigned long long *h, int *depth,
                     int *ctype, int *interlace)
{
    if (cli_jpeg_ihdr(path, w, h, depth, ctype, interlace) == 0) /* a JPEG's header */
        return 0;
    unsigned char b[33];
    /* O_NONBLOCK: a FIFO put in a file's place is not waited for (decode names it) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, b, sizeof b);
    close(fd);
    static const unsigned char sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    if (n != (ssize_t)sizeof b || memcmp(b, sig, 8) != 0 || memcmp(b + 12, "IHDR", 4) != 0)
        return -1;
    *w = be32(b + 16);
    *h = be32(b + 20);
    *depth = b[24];
    *ctype = b[25];
    *interlace = b[28];
    return 0;
}

unsigned long long worker_estimate_bytes(const char *path, int n_image_outputs,
                                         unsigned long long *pixels)
{
    unsigned long long w, ht;
    int depth, ctype, interlace;
    if (read_ihdr(path, &w, &ht, &depth, &ctype, &interlace) != 0)
        return 0;
    /* channels after expansion: palette and tRNS may become RGBA */
    int ch = ctype == 0 ? 2 : ctype == 4 ? 2 : 4;
    int bytes = depth == 16 ? 2 : 1;
    if (pixels)
        *pixels = w * ht;
    unsigned long long in = w * ht * (unsigned long long)(ch * bytes);
    /* outputs: at most RGBA u16 each, bounded below by the input's size */
    unsigned long long out = w * ht * (unsigned long long)(ch * bytes);
    return in + out * (unsigned long long)(n_image_outputs > 0 ? n_image_outputs : 0);
}

/* Rows of a float RGBA band when --band-rows is auto (8 MiB), and the whole-frame
   memory (frames and the plan's buffers) above which auto bands an image. */
#define BAND_BYTES      (8u << 20)
#define BAND_AUTO_BYTES (64ull << 20)

/* A new job's bytes against the budget and whether it runs in bands: the pipeline can
   (setup), the file is not interlaced, it is taller than a band, and --band-rows asks
   for bands or (auto) its whole-frame run would hold over BAND_AUTO_BYTES, or over
   --max-memory when that is less (where it would fail whole, bands fit). */
/* What a band of `rows` output rows of an image w x h holds: its share of the file's
   frames (est counts the whole image) and the pipeline's buffers for the band's shape,
   from the probe as a lane will count them (0: the engine cannot say). */
static unsigned long long band_need(unsigned long long est, unsigned long long h, int w, int rows)
{
    pf_shape s = {w, rows + 2 * W.halo};
    pf_shape shapes[RUN_MAX_IO];
    for (int i = 0; i < W.n_in; i++)
        shapes[i] = W.unused[i] ? (pf_shape){W.bound[i].width, W.bound[i].height} : s;
    pf_memory m;
    memset(&m, 0, sizeof m);
    m.size = sizeof m;
    if (pf_pipeline_memory(W.probe, shapes, W.n_in, &m) != PF_OK)
        return 0;
    if (W.gpu && W.dev_budget && m.device_bytes > W.dev_budget)
        return ULLONG_MAX;
    return est / h * (unsigned long long)s.height + 1 + plan_host_bytes(&m);
}

static void plan_job(job *j)
{
    j->est = worker_estimate_bytes(j->path, W.n_images, &j->pixels);
    unsigned long long w, h;
    int depth, ctype, interlace;
    if (!W.bandable || !j->est || read_ihdr(j->path, &w, &h, &depth, &ctype, &interlace) != 0 ||
        interlace || w == 0 || h == 0 || w > (1u << 20) || h > (1u << 20))
        return;
    for (int i = 1; i < W.n_in; i++) /* other inputs are cut into the same bands */
        if (!W.unused[i] && ((unsigned long long)W.bound[i].width != w ||
                             (unsigned long long)W.bound[i].height != h))
            return;
    long long rows = W.o->band_rows;
    const long long min_rows = 4ll * W.halo > 16 ? 4ll * W.halo : 16;
    if (rows < 0 && min_rows + 2ll * W.halo >= (long long)h)
        return; /* no band of auto's smallest is shorter than the image */
    if (rows < 0) {
        pf_shape s = {(int)w, (int)h};
        if (s.width != W.probe_shape.width || s.height != W.probe_shape.height) {
            pf_memory m;
            memset(&m, 0, sizeof m);
            m.size = sizeof m;
            pf_shape shapes[RUN_MAX_IO];
            for (int i = 0; i < W.n_in; i++)
                shapes[i] = i ? (pf_shape){W.bound[i].width, W.bound[i].height} : s;
            if (pf_pipeline_memory(W.probe, shapes, W.n_in, &m) != PF_OK)
                return; /* the lane says why, on the whole frame */
            W.probe_shape = s;
            W.probe_bytes = plan_host_bytes(&m);
            W.probe_dev = m.device_bytes;
        }
        const unsigned long long need = j->est + W.probe_bytes, budget = W.o->max_memory;
        /* On the CPU, bands above BAND_AUTO_BYTES: a band in the cache beats a frame out of
           it, and memory stays small. On the GPU bands only when the frame does not fit:
           host memory under --max-memory, device memory under its budget. */
        if (W.gpu ? (!budget || need <= budget) && (!W.dev_budget || W.probe_dev <= W.dev_budget)
                  : need <= (budget && budget < BAND_AUTO_BYTES ? budget : BAND_AUTO_BYTES))
            return;
        /* the GPU wants few large bands: from half the image down, until one fits */
        rows = W.gpu ? ((long long)h - 2ll * W.halo) / 2 : (long long)(BAND_BYTES / (16 * w));
        /* under --max-memory, bands that take at most half of it, in proportion */
        if (budget && need > budget / 2) {
            long long fit =
                (long long)((double)h * (double)(budget / 2) / (double)need) - 2ll * W.halo;
            rows = fit < rows ? fit : rows;
        }
        rows = rows < min_rows ? min_rows : rows;
        /* The proportion above leaves out what does not shrink with the rows (scratch per
           engine thread, slots, tables): check the band's own need and shrink the band
           until it fits, so that only a budget below the smallest band fails the file. */
        while ((budget || W.gpu) && rows > min_rows && rows + 2ll * W.halo < (long long)h) {
            unsigned long long band = band_need(j->est, h, (int)w, (int)rows);
            if (band && band != ULLONG_MAX && (!budget || band <= budget))
                break;
            rows = rows * 3 / 4 > min_rows ? rows * 3 / 4 : min_rows;
        }
    }
    if (rows + 2ll * W.halo >= (long long)h)
        return;
    j->band_rows = (int)rows;
    /* the frames of one band: the input's rows with the halo, and the outputs' */
    j->est = j->est / h * (unsigned long long)(rows + 2 * W.halo) + 1;
}

/* ---- Main ------------------------------------------------------------------------------------------ */

void worker_main(const run_opts *o, int job_fd, int rep_fd, int dirfd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the supervisor killed: so is the worker */
    W.o = o;
    W.rep_fd = rep_fd;
    W.dirfd = dirfd;
    char err[3000];
    install_handlers();
    record_process(job_fd);
    if (setup(err, sizeof err) != 0) {
        report("X %s", err);
        _exit(2);
    }

    /* codec threads for the most cores either backend uses: the lanes' backend is
       known once the starter's trial plan is done, while these decode */
    int n_codecs = W.codecs;
    pthread_t *codecs = calloc((size_t)n_codecs, sizeof *codecs);
    pthread_t starter;
    if (!codecs) {
        report("X out of memory");
        _exit(2);
    }
    for (int k = 0; k < W.n_out; k++)
        report("O %c %d %s", W.oi[k].kind == PF_OUTPUT_IMAGE ? 'i' : 't', W.json[k], W.oi[k].name);
    /* ready for files now, with the lanes the backend will likely have (the starter
       says again when it knows) */
    report("R %d %d", W.lanes, W.codecs);
    for (int i = 0; i < n_codecs; i++)
        if (pthread_create(&codecs[i], NULL, codec_main, NULL) != 0) {
            report("X cannot start a thread");
            _exit(2);
        }
    if (pthread_create(&starter, NULL, starter_main, NULL) != 0) {
        report("X cannot start a thread");
        _exit(2);
    }

    /* Jobs: "J index\tpath" lines (the path escaped as in the joblog); "H" asks where
       the threads are; end of file ends. */
    char buf[16384];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(job_fd, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
            *nl = 0;
            char *tab = strchr(line, '\t');
            if (line[0] == 'J' && tab) {
                int idx = atoi(line + 2);
                job *j = calloc(1, sizeof *j);
                if (!j || !(j->path = strdup(tab + 1))) {
                    report("X out of memory");
                    _exit(2);
                }
                /* path, then a name per output, tab-separated */
                char *field = j->path;
                for (int k = 0; k <= W.n_out; k++) {
                    char *next = strchr(field, '\t');
                    if (next)
                        *next++ = 0;
                    cli_unescape(field);
                    if (k && !(j->names[k - 1] = strdup(field))) {
                        report("X out of memory");
                        _exit(2);
                    }
                    if (!next)
                        break;
                    field = next;
                }
                /* a relative path from the starting directory, whatever a stage did */
                char *abs = NULL;
                if (j->path[0] != '/' && strcmp(j->path, "-") != 0 && W.cwd &&
                    asprintf(&abs, "%s/%s", W.cwd, j->path) > 0) {
                    free(j->path);
                    j->path = abs;
                }
                j->index = idx;
                plan_job(j);
                pthread_mutex_lock(&W.mu);
                push(&W.decode, j);
                pthread_cond_broadcast(&W.cv);
                pthread_mutex_unlock(&W.mu);
            } else if (line[0] == 'H') {
                ask_threads();
            }
            line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
    }
    pthread_mutex_lock(&W.mu);
    W.input_closed = 1;
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
    pthread_join(starter, NULL);
    for (int i = 0; i < n_codecs; i++)
        pthread_join(codecs[i], NULL);
    for (int i = 0; i < W.lanes; i++)
        pthread_join(W.lane_list[i].tid, NULL);
    report("Z %llu", (unsigned long long)atomic_load(&W.plans));
    _exit(0);
}

/* ---- Entry of an exec'd worker ------------------------------------------------------------------- */

/* The supervisor starts a worker by executing this program again (a fresh process: a
   forked copy of one that has touched CUDA cannot use CUDA) with PIPEFUSE_RUN_WORKER
   set to "CONFIG_FD,JOB_FD,REPORT_FD,DIR_FD"; the options come as "key=value" strings,
   NUL-terminated, on CONFIG_FD (run_config_write). This runs before main. */
static run_opts wo;
static cli_common wc;

static const char *cfg_keys[] = {"pipeline",      "outdir",      "backend", "dump_kernels",
                                 "max_launch_ms", "plugin_path", NULL};

static const char **cfg_str(run_opts *o, cli_common *c, int k)
{
    const char **f[] = {&o->pipeline,     &o->outdir,        &o->backend,
                        &o->dump_kernels, &o->max_launch_ms, &c->plugin_path};
    return f[k];
}

int run_config_write(int fd, const run_opts *o)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    int rc = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int need_ = snprintf(NULL, 0, __VA_ARGS__) + 1;                                            \
        if (n + (size_t)need_ > cap) {                                                             \
            char *nb_ = b ? realloc(b, (cap = (n + (size_t)need_) * 2)) : NULL;                    \
            if (!nb_) {                                                                            \
                free(b);                                                                           \
                return -1;                                                                         \
            }                                                                                      \
            b = nb_;                                                                               \
        }                                                                                          \
        n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__) + 1;                                    \
    } while (0)
    if (!b)
        return -1;
    cli_common c = *o->common;
    run_opts copy = *o;
    for (int k = 0; cfg_keys[k]; k++) {
        const char *v = *cfg_str(&copy, &c, k);
        if (v)
            PUT("%s=%s", cfg_keys[k], v);
    }
    PUT("ints=%d %d %d %d %d %d %d %d %d %d", o->profile, o->no_fuse, o->quiet, o->json_tables,
        o->zlib, o->png_filter, o->lanes, o->common->threads, o->strip, o->band_rows);
    PUT("sizes=%llu %llu %llu", o->max_pixels, o->max_memory, o->batch_pixels);
    PUT("images=%s", cli_image_opts_str());
    for (int i = 0; i < o->n_sets; i++)
        PUT("set=%s", o->sets[i]);
    for (int i = 0; i < o->n_binds; i++)
        PUT("bind=%s", o->binds[i]);
#undef PUT
    for (size_t off = 0; off < n && rc == 0;) {
        ssize_t w = write(fd, b + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = -1;
        else
            off += (size_t)w;
    }
    free(b);
    return rc;
}

static void read_config(int fd)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b)
            _exit(2);
        if (n + 1 >= cap && !(b = realloc(b, cap *= 2)))
            _exit(2);
        ssize_t r = read(fd, b + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    wo.common = &wc;
    for (size_t off = 0, len; off < n; off += len + 1) {
        char *kv = b + off, *eq = strchr(kv, '=');
        len = strlen(kv);
        if (!eq)
            continue;
        *eq = 0;
        const char *v = eq + 1;
        for (int k = 0; cfg_keys[k]; k++)
            if (strcmp(kv, cfg_keys[k]) == 0)
                *cfg_str(&wo, &wc, k) = v;
        if (strcmp(kv, "ints") == 0)
            sscanf(v, "%d %d %d %d %d %d %d %d %d %d", &wo.profile, &wo.no_fuse, &wo.quiet,
                   &wo.json_tables, &wo.zlib, &wo.png_filter, &wo.lanes, &wc.threads, &wo.strip,
                   &wo.band_rows);
        else if (strcmp(kv, "sizes") == 0)
            sscanf(v, "%llu %llu %llu", &wo.max_pixels, &wo.max_memory, &wo.batch_pixels);
        else if (strcmp(kv, "images") == 0)
            cli_image_opts_load(v);
        else if (strcmp(kv, "set") == 0 || strcmp(kv, "bind") == 0) {
            const char ***list = kv[0] == 's' ? &wo.sets : &wo.binds;
            int *count = kv[0] == 's' ? &wo.n_sets : &wo.n_binds;
            const char **l = realloc((void *)*list, sizeof *l * (size_t)(*count + 1));
            if (!l)
                _exit(2);
            l[(*count)++] = v;
            *list = l;
        }
    }
}

__attribute__((constructor)) static void worker_entry(void)
{
    const char *v = getenv("PIPEFUSE_RUN_WORKER");
    int cfg, jobs, reps, dir;
    if (!v || sscanf(v, "%d,%d,%d,%d", &cfg, &jobs, &reps, &dir) != 4)
        return;
    unsetenv("PIPEFUSE_RUN_WORKER");
    read_config(cfg);
    worker_main(&wo, jobs, reps, dir);
}
