/* cli/batch/progress.c: the log in input order, the progress line, a file's end (finish) or its return to the queue */
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

/* The extension of output k's own format (its {ext}). */
const char *out_ext(const sup *s, int k)
{
    return s->out_kind[k] == 'i'   ? "png"
           : s->out_kind[k] == 'p' ? CLI_EXT_PNG_ONLY
           : s->out_json[k]        ? "json"
                                   : "csv";
}

/* The name of output k of input i (inside OUTDIR), malloc'd. */
char *final_name(const sup *s, int i, int k)
{
    const char *ext = out_ext(s, k);
    /* names.c: --name templates, folders of --recursive, inputs of the same name */
    return cli_output_name(s->o->inputs[i], s->out_name[k], ext,
                           s->out_kind[k] != 't' && s->n_images == 1);
}

/* Removes stale temporaries (out_remove_stale) in OUTDIR and in every folder below it
   that an output of the batch is named into (-r's {dir}, a --name with '/'), where
   a killed run leaves them as well. Returns how many were removed. */
int sweep_temps(const sup *s)
{
    int removed = out_remove_stale(s->dirfd), n = 0, cap = 0;
    char **dirs = NULL;
    for (int i = 0; i < s->o->n_inputs; i++)
        for (int k = 0; k < s->n_out; k++) {
            char *f = final_name(s, i, k), *slash = f ? strrchr(f, '/') : NULL;
            if (!slash) {
                free(f);
                continue;
            }
            *slash = 0;
            if (n == cap) {
                char **g = realloc(dirs, sizeof *dirs * (size_t)(cap = cap ? 2 * cap : 16));
                if (!g) {
                    free(f);
                    goto sweep; /* out of memory: the folders found so far */
                }
                dirs = g;
            }
            dirs[n++] = f;
        }
sweep:
    if (n)
        qsort(dirs, (size_t)n, sizeof *dirs, cmp_str);
    for (int d = 0; d < n; d++)
        if (d == 0 || strcmp(dirs[d], dirs[d - 1]) != 0)
            removed += out_remove_stale_in(s->dirfd, dirs[d]);
    for (int d = 0; d < n; d++)
        free(dirs[d]);
    free(dirs);
    return removed;
}

/* Input i where it is (cli_where), computed once. */
const char *item_where(sup *s, int i)
{
    if (!s->it[i].where)
        s->it[i].where = cli_where(s->o->inputs[i]);
    return s->it[i].where;
}

/* Input i as messages and the joblog show it: stdin's spooled file is "-". */
const char *shown(const sup *s, int i)
{
    const char *p = s->o->inputs[i];
    return s->o->stdin_path && strcmp(p, s->o->stdin_path) == 0 ? "-" : p;
}

void clear_status(sup *s)
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

/* Logs every finished input at the head of the input order. */
void log_ready(sup *s)
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

void finish(sup *s, int i, int state, const char *msg, const char *kind, double ms)
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
void requeue(sup *s, int i, int suspect)
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

void joblog_line(sup *s, int i)
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
