/* cli/batch/config.c: the options of an exec'd worker, and its entry */
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

/* ---- Entry of an exec'd worker ------------------------------------------------------------------- */

/* The supervisor starts a worker by executing this program again (a fresh process: a
   forked copy of one that has touched CUDA cannot use CUDA) with PIPEFUSE_RUN_WORKER
   set to "CONFIG_FD,JOB_FD,REPORT_FD,DIR_FD"; the options come as "key=value" strings,
   NUL-terminated, on CONFIG_FD (run_config_write). This runs before main. */
static run_opts wo;
static cli_common wc;

static const char *cfg_keys[] = {"pipeline",      "outdir",      "backend",   "dump_kernels",
                                 "max_launch_ms", "plugin_path", "precision", NULL};

static const char **cfg_str(run_opts *o, cli_common *c, int k)
{
    const char **f[] = {&o->pipeline,      &o->outdir,      &o->backend,  &o->dump_kernels,
                        &o->max_launch_ms, &c->plugin_path, &o->precision};
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
