/* cli/batch/run.c: `pipefuse run`'s entry and the supervisor's loop: inputs, skips, the worker fed and watched, the summary */
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

/* Ctrl-C: once finishes the files in flight, twice abandons them. A second signal
   within 200 ms of the first is the same request: timeout(1) and kill(1) on a process
   group signal the run and then its group, which holds the run again. */
volatile sig_atomic_t interrupted;
static struct timespec first_interrupt;
static void on_interrupt(int sig)
{
    (void)sig;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (interrupted == 1) {
        const double dt = (double)(t.tv_sec - first_interrupt.tv_sec) +
                          (double)(t.tv_nsec - first_interrupt.tv_nsec) * 1e-9;
        if (dt < 0.2)
            return;
    }
    if (!interrupted)
        first_interrupt = t;
    interrupted++;
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
        const char *kind = "name clash"; /* or "bad name": a name the rules refuse */
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
                kind = "bad name";
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
                cli_names_mkdirs(s->dirfd, o->outdir, f, why, sizeof why) != 0) {
                snprintf(msg, sizeof msg, "%s", why);
                kind = "bad name";
            }
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
            finish(s, i, ST_FAILED, msg, kind, 0);
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
        fprintf(stderr, s->n_ok ? "; output to stdout\n" : "; nothing written to stdout\n");
    else if (said)
        fprintf(stderr, "; outputs in %s\n", o->outdir);
    if (s->n_failed) {
        static const char *const kinds[] = {"failed",     "crashed",  "timed out", "memory",
                                            "name clash", "bad name", "stdout"};
        static const char *const words[] = {"failed (bad input or pipeline)",
                                            "crashed a worker",
                                            "timed out",
                                            "over the memory bound",
                                            "clashed by name",
                                            "named as the rules refuse (format or folder)",
                                            "not written to stdout"};
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
    int swept = 0;    /* the output folders below OUTDIR, at the first start */
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
            kill(s->w.pid, SIGKILL); /* its temporaries are removed (worker_died) */
            const int abandoned = s->w.outstanding;
            worker_died(s, -1);
            clear_status(s);
            fprintf(stderr, "pipefuse: interrupted again: abandoned the %d file(s) in flight\n",
                    abandoned);
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
        /* once the outputs' names are known (the worker said its outputs): the folders
           below OUTDIR they are named into, which a killed run leaves temporaries in too
           (OUTDIR itself was swept before the start) */
        if (!swept && s->w.pid && s->n_out) {
            swept = 1;
            int removed = sweep_temps(s);
            if (removed && !o->quiet)
                fprintf(stderr,
                        "pipefuse: removed %d temporary file(s) left by an earlier run in "
                        "folders of %s\n",
                        removed, o->outdir);
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
                /* done, or into the engine, while the threads answered: its clock ran
                   from its decode and starts again there (a wait for a lane between
                   them is no fault, and where the answers say other files' threads are
                   is not where it is) */
                if (it->state != ST_SENT || now_ms() - (it->entered ? it->t_engine : it->t_begun) <
                                                o->file_timeout_s * 1e3) {
                    s->w.where[0] = 0;
                    continue;
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
                     ? open(o.joblog, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666)
                     : -1;
        if (fd < 0) /* a file that can be appended to only (/dev/full, a FIFO) */
            fd = open(o.joblog, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666);
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
            sweep_temps(&s);
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
