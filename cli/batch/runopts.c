/* cli/batch/runopts.c: `pipefuse run`'s options (parse_args, sizes, shards, filters, band rows) */
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
unsigned long long default_max_memory(void)
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
int parse_band_rows(const char *v)
{
    if (strcmp(v, "auto") == 0)
        return -1;
    if (strcmp(v, "off") == 0)
        return 0;
    long long n;
    return cli_parse_int(v, 1, 1 << 20, &n) != 0 ? -2 : (int)n;
}

int parse_args(int argc, char **argv, run_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && v) {
            o->outdir = argv[++i];
        } else if (strcmp(a, "--backend") == 0 && v) {
            o->backend = argv[++i];
        } else if (strcmp(a, "--precision") == 0 && v) {
            o->precision = argv[++i];
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
void take_shard(run_opts *o)
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
