/* cli/run.c: `pipefuse run`: a pipeline over many PNG files.
 *
 * Each input file is one frame. Its outputs are written to hidden temporary files
 * first and renamed into place only when every output of that input succeeded, so
 * a failure never leaves a partial set. A failing file is reported and the batch
 * goes on; the exit status tells whether any failed.
 */
#include <dirent.h>
#include <math.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_OUTPUTS 64
#define PATH_BYTES  4096

typedef struct run_opts {
    const char *pipeline;
    const char *outdir;
    const char *backend;
    const char *dump_kernels;
    const char *max_launch_ms;
    int profile;
    int no_fuse;
    int quiet;
    int json_tables;
    int zlib;
    unsigned long long max_pixels;
    const char **sets;
    int n_sets;
    const char **binds; /* NAME=FILE */
    int n_binds;
    char **inputs; /* files after expanding directories */
    int n_inputs;
} run_opts;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

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
    for (struct dirent *de; rc == 0 && (de = readdir(d));) {
        if (de->d_name[0] == '.' || !is_png_name(de->d_name))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s%s%s", arg, arg[strlen(arg) - 1] == '/' ? "" : "/",
                 de->d_name);
        rc = push(&o->inputs, &o->n_inputs, path);
    }
    closedir(d);
    qsort(o->inputs + first, (size_t)(o->n_inputs - first), sizeof(char *), cmp_str);
    if (o->n_inputs == first)
        fprintf(stderr, "pipefuse run: %s: no .png files in this directory\n", arg);
    return rc;
}

static int mkdir_p(const char *dir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(tmp, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* ---- Tables ---------------------------------------------------------------------------------- */

static int write_table(const char *path, const pf_table *t, int json, char *err, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, n, "%s: %s", path, strerror(errno));
        return -1;
    }
    int cols = t->cols;
    if (json) {
        fprintf(f, "{\n  \"columns\": [");
        for (int c = 0; c < cols; c++)
            fprintf(f, "%s\"%s\"", c ? ", " : "", t->columns && t->columns[c] ? t->columns[c] : "");
        fprintf(f, "],\n  \"rows\": [\n");
        for (int r = 0; r < t->rows; r++) {
            fprintf(f, "    {\"row\": ");
            if (t->row_name)
                fprintf(f, "\"%s\"", t->row_name(t->params, r));
            else
                fprintf(f, "%d", r);
            fprintf(f, ", \"values\": [");
            for (int c = 0; c < cols; c++) {
                double v = t->data[(size_t)r * cols + c];
                if (isfinite(v)) /* JSON has no inf or NaN: those are null */
                    fprintf(f, "%s%.17g", c ? ", " : "", v);
                else
                    fprintf(f, "%snull", c ? ", " : "");
            }
            fprintf(f, "]}%s\n", r + 1 < t->rows ? "," : "");
        }
        fprintf(f, "  ]\n}\n");
    } else {
        fprintf(f, "row");
        for (int c = 0; c < cols; c++)
            fprintf(f, ",%s", t->columns && t->columns[c] ? t->columns[c] : "");
        fputc('\n', f);
        for (int r = 0; r < t->rows; r++) {
            if (t->row_name)
                fprintf(f, "%s", t->row_name(t->params, r));
            else
                fprintf(f, "%d", r);
            for (int c = 0; c < cols; c++)
                fprintf(f, ",%.17g", t->data[(size_t)r * cols + c]);
            fputc('\n', f);
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, n, "%s: write failed", path);
        unlink(path);
        return -1;
    }
    return 0;
}

/* ---- One input --------------------------------------------------------------------------------- */

typedef struct file_id {
    dev_t dev;
    ino_t ino;
} file_id;

typedef struct batch {
    run_opts *o;
    file_id *ids; /* every input file, so that no output replaces one */
    int n_ids;
    char **made; /* output names written so far in this batch */
    int n_made;
    pf_pipeline *p;
    pf_frame bound[MAX_OUTPUTS]; /* inputs 1.. bound by --input */
    int single_image;            /* exactly one image output: INPUT.png */
} batch;

/* An output may replace neither an input of the batch nor another input's output. */
static int check_collision(batch *b, const char *input, const char *final, char *err, size_t errn)
{
    struct stat st;
    if (stat(final, &st) == 0)
        for (int i = 0; i < b->n_ids; i++)
            if (b->ids[i].dev == st.st_dev && b->ids[i].ino == st.st_ino) {
                snprintf(err, errn, "output %.1024s would replace an input file; choose another -o",
                         final);
                return PF_IO;
            }
    for (int i = 0; i < b->n_made; i++)
        if (strcmp(b->made[i], final) == 0) {
            snprintf(err, errn,
                     "output %.1024s was already written for another input of the same name; "
                     "run the inputs into separate directories",
                     final);
            return PF_IO;
        }
    return PF_OK;
}

static int process(batch *b, const char *path, char *err, size_t errn, char *made, size_t maden)
{
    run_opts *o = b->o;
    pf_pipeline *p = b->p;
    pf_frame in[MAX_OUTPUTS];
    pf_png_info info;
    memset(in, 0, sizeof in);
    int rc = pf_png_read(path, o->max_pixels, &in[0], &info, err, errn);
    if (rc != PF_OK)
        return rc;
    int n_in = pf_pipeline_input_count(p);
    for (int i = 1; i < n_in; i++)
        in[i] = b->bound[i];
    int n_out = pf_pipeline_output_count(p);
    pf_frame out[MAX_OUTPUTS];
    memset(out, 0, sizeof out);
    /* Plan first (a no-op when the size is unchanged) to learn output sizes. */
    pf_shape shapes[MAX_OUTPUTS];
    for (int i = 0; i < n_in; i++) {
        shapes[i].width = in[i].width;
        shapes[i].height = in[i].height;
    }
    rc = pf_pipeline_plan(p, shapes, n_in);
    for (int k = 0; k < n_out && rc == PF_OK; k++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, k, &oi);
        if (oi.kind != PF_OUTPUT_IMAGE)
            continue;
        int ch = oi.channels ? oi.channels : in[0].channels;
        pf_sample s = oi.bits == 16 ? PF_U16 : oi.bits == 8 ? PF_U8 : in[0].sample;
        rc = pf_frame_alloc(&out[k], oi.shape.width, oi.shape.height, s, ch);
    }
    if (rc == PF_OK)
        rc = pf_pipeline_run(p, in, n_in, out, n_out);
    if (rc != PF_OK && !err[0])
        snprintf(err, errn, "%s", pf_pipeline_errmsg(p));

    /* Write every output to a hidden temporary name, then rename them all. */
    char(*finals)[PATH_BYTES] = calloc(2 * MAX_OUTPUTS, PATH_BYTES);
    char(*temps)[PATH_BYTES] = finals ? finals + MAX_OUTPUTS : NULL;
    int written = 0;
    if (!finals && rc == PF_OK) {
        snprintf(err, errn, "out of memory");
        rc = PF_NO_MEMORY;
    }
    for (int k = 0; k < n_out && rc == PF_OK; k++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, k, &oi);
        /* A table's format: the pipeline's choice, else --table-format. */
        int json = oi.table_format ? oi.table_format == 2 : o->json_tables;
        const char *ext = oi.kind == PF_OUTPUT_IMAGE ? "png" : (json ? "json" : "csv");
        if (cli_output_path(o->outdir, path, oi.name, ext,
                            oi.kind == PF_OUTPUT_IMAGE && b->single_image, finals[k], temps[k],
                            PATH_BYTES) != 0) { /* names.c: --name, folders, unique stems */
            snprintf(err, errn, "the name of output %s is too long", oi.name);
            rc = PF_IO;
        } else if (oi.kind == PF_OUTPUT_IMAGE) {
            rc = pf_png_write(temps[k], &out[k], o->zlib, err, errn);
        } else {
            pf_table t;
            rc = pf_pipeline_table(p, k, &t);
            if (rc == PF_OK && write_table(temps[k], &t, json, err, errn) != 0)
                rc = PF_IO;
        }
        if (rc == PF_OK)
            written = k + 1;
    }
    for (int k = 0; k < written && rc == PF_OK; k++)
        rc = check_collision(b, path, finals[k], err, errn);
    for (int k = 0; k < written && rc == PF_OK; k++) {
        if (rename(temps[k], finals[k]) != 0) {
            snprintf(err, errn, "%.*s: %s", 1024, finals[k], strerror(errno));
            rc = PF_IO;
        }
    }
    if (rc != PF_OK) {
        for (int k = 0; k < written; k++)
            unlink(temps[k]); /* already-renamed ones stay: they are complete */
    } else {
        for (int k = 0; k < written; k++)
            if (push(&b->made, &b->n_made, finals[k]) != 0) {
                snprintf(err, errn, "out of memory");
                rc = PF_NO_MEMORY;
            }
        size_t used = 0;
        made[0] = 0;
        for (int k = 0; k < n_out && used < maden; k++)
            used += (size_t)snprintf(made + used, maden - used, "%s%s", k ? ", " : "",
                                     strrchr(finals[k], '/') + 1);
    }
    free(finals);
    for (int k = 0; k < n_out; k++)
        pf_frame_free(&out[k]);
    pf_frame_free(&in[0]);
    return rc;
}

/* --profile: the last frame's time per launch unit, with the stage ids inside each. */
static void print_profile(const pf_pipeline *p)
{
    static const char *const kinds[] = {"point", "stencil", "resample", "reduce"};
    pf_stats s;
    s.size = sizeof s;
    if (pf_pipeline_stats(p, &s) != PF_OK)
        return;
    fprintf(stderr, "profile of the last frame (%s; %s):\n", s.backend,
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

/* ---- The command ----------------------------------------------------------------------------------- */

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "pipefuse run: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    return PF_EXIT_USAGE;
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
            o->max_launch_ms = argv[++i];
        } else if (strcmp(a, "--profile") == 0) {
            o->profile = 1;
        } else if (strcmp(a, "--dump-kernels") == 0 && v) {
            o->dump_kernels = argv[++i];
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
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
            char *end;
            long z = strtol(argv[++i], &end, 10);
            if (*end || z < 0 || z > 9)
                return usage_error("--zlib must be 0-9, not", v);
            o->zlib = (int)z;
        } else if (strcmp(a, "--max-pixels") == 0 && v) {
            char *end;
            o->max_pixels = strtoull(argv[++i], &end, 10);
            if (*end || !o->max_pixels)
                return usage_error("--max-pixels must be a positive number, not", v);
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option (or missing value):", a);
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
    if (!o->n_inputs)
        return usage_error("no input files", NULL);
    return PF_EXIT_OK;
}

static int setup(batch *b, pf_engine *e)
{
    run_opts *o = b->o;
    if (pf_pipeline_load_file(e, o->pipeline, &b->p) != PF_OK) {
        fprintf(stderr, "pipefuse: %s\n", pf_engine_errmsg(e));
        return -1;
    }
    pf_pipeline *p = b->p;
    if ((o->backend && pf_pipeline_set_option(p, "backend", o->backend) != PF_OK) ||
        (o->dump_kernels && pf_pipeline_set_option(p, "dump_kernels", o->dump_kernels) != PF_OK) ||
        (o->max_launch_ms &&
         pf_pipeline_set_option(p, "max_launch_ms", o->max_launch_ms) != PF_OK) ||
        (o->profile && pf_pipeline_set_option(p, "profile", "true") != PF_OK) ||
        (o->no_fuse && pf_pipeline_set_option(p, "fusion", "false") != PF_OK)) {
        fprintf(stderr, "pipefuse run: %s\n", pf_pipeline_errmsg(p));
        return -1;
    }
    for (int i = 0; i < o->n_sets; i++) {
        char key[512];
        const char *eq = strchr(o->sets[i], '=');
        if (!eq || (size_t)(eq - o->sets[i]) >= sizeof key) {
            fprintf(stderr, "pipefuse run: --set %s: expected ID.PARAM=VALUE\n", o->sets[i]);
            return -1;
        }
        memcpy(key, o->sets[i], (size_t)(eq - o->sets[i]));
        key[eq - o->sets[i]] = 0;
        if (pf_pipeline_set_param(p, key, eq + 1) != PF_OK) {
            fprintf(stderr, "pipefuse: %s\n", pf_pipeline_errmsg(p));
            return -1;
        }
    }
    int n_in = pf_pipeline_input_count(p);
    if (n_in > MAX_OUTPUTS || pf_pipeline_output_count(p) > MAX_OUTPUTS) {
        fprintf(stderr, "pipefuse run: at most %d inputs and outputs\n", MAX_OUTPUTS);
        return -1;
    }
    for (int i = 1; i < n_in; i++) {
        const char *name = pf_pipeline_input_name(p, i), *file = NULL;
        for (int k = 0; k < o->n_binds; k++) {
            size_t len = strlen(name);
            if (strncmp(o->binds[k], name, len) == 0 && o->binds[k][len] == '=')
                file = o->binds[k] + len + 1;
        }
        if (!file) {
            fprintf(stderr,
                    "pipefuse run: pipeline input '%s' needs --input %s=FILE (the "
                    "files on the command line go to '%s')\n",
                    name, name, pf_pipeline_input_name(p, 0));
            return -1;
        }
        char err[1024];
        if (pf_png_read(file, o->max_pixels, &b->bound[i], NULL, err, sizeof err) != PF_OK) {
            fprintf(stderr, "pipefuse run: --input %s: %s\n", name, err);
            return -1;
        }
    }
    int images = 0;
    for (int k = 0; k < pf_pipeline_output_count(p); k++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, k, &oi);
        images += oi.kind == PF_OUTPUT_IMAGE;
    }
    b->single_image = images == 1;
    b->ids = calloc((size_t)o->n_inputs + 1, sizeof(file_id));
    if (!b->ids) {
        fprintf(stderr, "pipefuse run: out of memory\n");
        return -1;
    }
    for (int i = 0; i < o->n_inputs; i++) {
        struct stat st;
        if (stat(o->inputs[i], &st) == 0)
            b->ids[b->n_ids++] = (file_id){st.st_dev, st.st_ino};
    }
    if (mkdir_p(o->outdir) != 0) {
        fprintf(stderr, "pipefuse run: cannot create %s: %s\n", o->outdir, strerror(errno));
        return -1;
    }
    return 0;
}

int cli_run(int argc, char **argv, const cli_common *c)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    o.zlib = 6;
    batch b;
    memset(&b, 0, sizeof b);
    b.o = &o;
    int status = parse_args(argc, argv, &o);
    pf_engine *e = NULL;
    if (status == PF_EXIT_OK) {
        e = cli_engine(c);
        status = e && setup(&b, e) == 0 ? PF_EXIT_OK : PF_EXIT_USAGE;
    }
    int failed = 0;
    double t_all = now_ms();
    for (int i = 0; i < o.n_inputs && status == PF_EXIT_OK; i++) {
        char err[4096] = "", made[4096] = "";
        double t0 = now_ms();
        int rc = process(&b, o.inputs[i], err, sizeof err, made, sizeof made);
        if (rc != PF_OK) {
            failed++;
            fprintf(stderr, "[%d/%d] %s: FAILED: %s\n", i + 1, o.n_inputs, o.inputs[i], err);
        } else if (!o.quiet) {
            fprintf(stderr, "[%d/%d] %s -> %s (%.1f ms)\n", i + 1, o.n_inputs, o.inputs[i], made,
                    now_ms() - t0);
        }
    }
    if (status == PF_EXIT_OK && o.profile && o.n_inputs > failed)
        print_profile(b.p);
    if (status == PF_EXIT_OK) {
        fprintf(stderr, "pipefuse: %d of %d input(s) done in %.2f s, %d failed; outputs in %s\n",
                o.n_inputs - failed, o.n_inputs, (now_ms() - t_all) / 1e3, failed, o.outdir);
        status = failed ? PF_EXIT_FAILED : PF_EXIT_OK;
    }
    for (int i = 1; i < MAX_OUTPUTS; i++)
        pf_frame_free(&b.bound[i]);
    for (int i = 0; i < b.n_made; i++)
        free(b.made[i]);
    free(b.made);
    free(b.ids);
    pf_pipeline_destroy(b.p);
    pf_engine_destroy(e);
    for (int i = 0; i < o.n_inputs; i++)
        free(o.inputs[i]);
    free(o.inputs);
    free(o.sets);
    free(o.binds);
    return status;
}
