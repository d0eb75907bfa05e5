/* cli/batch/supervisor.h: what the supervisor's files share (batch.h is what the supervisor
 * and the worker share; batch/worker.h is the worker's).
 *
 * The supervisor, a file a mechanism: run.c (the entry and the loop), runopts.c (options),
 * joblog.c (the joblog and --retry-failed), progress.c (the log in input order and a
 * file's end), workerproc.c (the worker process: started, fed, read, its death judged).
 * Calls go one way: run.c calls the others, workerproc.c calls progress.c, progress.c
 * calls joblog.c.
 *
 * `pipefuse run`: a pipeline over many image files, supervised.
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
#ifndef PF_CLI_SUPERVISOR_H
#define PF_CLI_SUPERVISOR_H

#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

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
    int lost;         /* reported a lost GPU context: 1 by its file, 2 by one in flight */
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
    int n_out;                 /* the pipeline's outputs */
    char out_kind[RUN_MAX_IO]; /* i: an image, p: an image only PNG holds, t: a table */
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

/* Set by SIGINT, SIGTERM and SIGHUP (run.c): the batch stops taking files. */
extern volatile sig_atomic_t interrupted;

static inline double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- Inputs --------------------------------------------------------------------------------------- */

static inline int push(char ***list, int *n, const char *s)
{
    char **l = realloc(*list, sizeof(char *) * (size_t)(*n + 1));
    if (!l)
        return -1;
    *list = l;
    l[*n] = strdup(s);
    return l[(*n)++] ? 0 : -1;
}

static inline int is_png_name(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".png") == 0;
}

static inline int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* joblog.c */
void escape_field(FILE *f, const char *s, int comma);
int add_input(run_opts *o, const char *arg);
int append_whole(int fd, const char *buf, size_t len);
int first_claim(const run_opts *o, const char *name);
int joblog_drop_cut_line(int fd, const char *file);
void log_text(const char *s);
int read_failed(run_opts *o, const char *file);
int take_failed(run_opts *o);

/* runopts.c */
unsigned long long default_max_memory(void);
int parse_args(int argc, char **argv, run_opts *o);
int parse_band_rows(const char *v);
void take_shard(run_opts *o);

/* progress.c */
void joblog_line(sup *s, int i);
void clear_status(sup *s);
char *final_name(const sup *s, int i, int k);
int sweep_temps(const sup *s);
void finish(sup *s, int i, int state, const char *msg, const char *kind, double ms);
const char *item_where(sup *s, int i);
void log_ready(sup *s);
const char *out_ext(const sup *s, int k);
void requeue(sup *s, int i, int suspect);
const char *shown(const sup *s, int i);

/* workerproc.c */
void drain_reports(sup *s);
void end_worker_group(pid_t pid);
unsigned long long memory_bound(const run_opts *o);
int next_job(sup *s);
int read_reports(sup *s);
void reap_worker(pid_t pid, int *status);
void self_exe(void);
int send_job(sup *s, int i);
int start_and_greet(sup *s);
void worker_died(sup *s, int timed_out);
int worker_gone(sup *s);
unsigned long long worker_rss(pid_t pid);

#endif
