/* cli/batch/workerproc.c: the worker process as the supervisor sees it: started, fed jobs, its reports read, its death judged */
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

/* ---- The worker process ---------------------------------------------------------------------------- */

/* What a worker's stages forked and left running (a child sleeping on the worker's
   pipes, a daemon that did not leave the group) ends with the worker: its process
   group is killed, the worker with it, while the worker is not yet reaped (its pid,
   the group's id, cannot be another's until then). */
void end_worker_group(pid_t pid)
{
    if (pid > 0)
        kill(-pid, SIGKILL);
}

/* Waits for the worker to end, kills its group, reaps it. */
void reap_worker(pid_t pid, int *status)
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
void self_exe(void)
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
    case 'L': /* "L": the file it failed lost the context; "L suspects": one in flight did */
        w->lost = strncmp(rest, "suspects", 8) == 0 ? 2 : 1;
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
int read_reports(sup *s)
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
int worker_gone(sup *s)
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
void drain_reports(sup *s)
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
unsigned long long memory_bound(const run_opts *o)
{
    return o->max_memory + o->max_memory / 2 + (2ull << 30);
}

/* The worker's resident memory in bytes; 0 where it cannot be read (no /proc). */
unsigned long long worker_rss(pid_t pid)
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
void worker_died(sup *s, int timed_out)
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
    int named = culprit >= 0 || w->lost == 1;
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
    sweep_temps(s); /* what it was writing: its process is gone */
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The next input to send, or -1. */
int next_job(sup *s)
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

int send_job(sup *s, int i)
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
int start_and_greet(sup *s)
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
        s->n_images += s->out_kind[k] != 't';
    return 0;
}
