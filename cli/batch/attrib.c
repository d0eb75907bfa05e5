/* cli/batch/attrib.c: crash attribution (the file and stage a fatal signal or exit() belongs to) and the process a stage must leave intact */
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

__thread int tls_job = -1;
__thread const char *tls_step;
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
void build_attribution(void)
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

/* Whether the failing thread was started by plugin code (a thread a stage made): its
   outermost frames, where its start routine is, are in a plugin. Such a thread serves
   no file of the worker's, so none is blamed: the files in flight run again one at a
   time, as for other faults no file can be named for. Only a whole stack is judged (a
   deeper one's outer frames are not seen: a stage's runaway recursion). */
static int plugin_thread(void)
{
    void *frames[64];
    int n = backtrace(frames, 64);
    if (n <= 0 || n >= 64)
        return 0;
    for (int i = n - 1; i >= 0 && i >= n - 3; i--) {
        int plugin = -1;
        attribute((uintptr_t)frames[i] - 1, &plugin);
        if (plugin >= 0)
            return 1;
    }
    return 0;
}

static void crash_record(const char *what, uintptr_t pc)
{
    char line[3900];
    size_t n = put(line, 0, sizeof line, "C ");
    n = put_int(line, n, sizeof line, plugin_thread() ? -1 : culprit());
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
void thread_altstack(void)
{
    static _Thread_local char alt[64 * 1024];
    stack_t old, ss = {.ss_sp = alt, .ss_size = sizeof alt};
    /* a thread that has one keeps it (AddressSanitizer gives every thread its own, and
       unmaps it when the thread ends) */
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE))
        return;
    sigaltstack(&ss, NULL);
}

void install_handlers(void)
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
void ask_threads(void)
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

void engine_enter(job *j)
{
    atomic_store(&engine_last, j->index);
    atomic_fetch_add(&engine_jobs, 1);
    tls_job = j->index;
    tls_step = "engine";
    j->eng_ms = now_ms(); /* the start, until retire */
    report("E %d", j->index);
}

/* Descriptors 0-2 and the worker's own, and the working directory, recorded at start. */
void record_process(int job_fd)
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
void process_intact(int index)
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

int engine_count(void)
{
    return atomic_load(&engine_jobs);
}

void engine_leave(const job *j)
{
    process_intact(j->index);
    atomic_fetch_sub(&engine_jobs, 1);
    tls_job = -1;
    tls_step = NULL;
}
