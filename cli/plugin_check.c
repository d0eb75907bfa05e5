/* cli/plugin_check.c: `pipefuse plugin check LIB.so`, the plugin author's checker.
 *
 * Loads a plugin as the engine would and puts each of its stages through the contract
 * of docs/plugins.md, printing one line per check (ok, FAIL with what to fix, skip,
 * warn) and a summary. Exit status: 0 when no check failed (skipped GPU checks do not
 * fail), 1 when one did, 2 for a bad command line or a missing file.
 *
 * How the file is loaded. First the engine's safety rule: a file, or a directory
 * holding it, that other users can write to is refused before any of its code runs.
 * Then the file is opened with dlopen and its descriptor read field by field, so that
 * a plugin the engine would refuse (another ABI, a default out of range) still gets a
 * report naming the field at fault. Then an engine is created with the built-in
 * plugins (fusion with them is checked, and so are clashing stage names) and the file
 * reached through a private directory (mkdtemp, mode 0700) holding only a symbolic link
 * to it: the engine loads directories, and this one holds nothing else. Neither
 * --plugin-path nor PIPEFUSE_PLUGIN_PATH is searched. The dynamic loader recognises the
 * file behind the link as the one already open, so one copy of the plugin, static state
 * included, serves both. A file that is itself a built-in plugin is checked in place.
 *
 * Checks per stage, on random float images of odd sizes (inputs in [0, 1), outputs
 * poisoned with a NaN bit pattern first), with the default params and one random set
 * within the declared ranges (--seed):
 *   - CPU runs through a pipeline (67x45, 5x3, 1x1);
 *   - determinism: two runs, a fresh pipeline and one thread give the same bits;
 *   - regions, calling the stage directly: point rows in pieces equal whole rows;
 *     stencil and resample bands write exactly their rows (not other rows, not the
 *     pitch padding, not past their scratch), every pixel of them, and assemble to the
 *     whole run bit for bit; a stencil reads no further than its declared radius; a
 *     reduce's banded partials combine to the whole run's table, and a partial reads
 *     only its band's rows; inputs are never written;
 *   - in a pipeline between built-in stages: fused and unfused CPU runs give the same
 *     bits, a point stage fuses with its neighbours, and NVRTC compiles the fused kernel
 *     (no GPU needed);
 *   - with a CUDA device: CPU against GPU (fused and unfused, within --tolerance), fused
 *     against unfused on the GPU, banded (a tiny launch budget) against whole, graph
 *     replay against eager launches, and run-to-run bits. Without one these are
 *     reported as skipped, never as passed.
 * A crash or an exit() inside the plugin is reported with the check that was running.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define PC_W        67 /* the main test image: odd, not a multiple of any block size */
#define PC_H        45
#define PC_MAX_OUT  4
#define PC_POISON   0x7fbadbadu /* a NaN bit pattern no arithmetic produces */
#define PC_GUARD    256         /* poisoned bytes after scratch and partial buffers */
#define PC_MAX_SIDE 8192        /* larger resample outputs are not checked directly */

static const char *const kind_names[] = {"point", "stencil", "resample", "reduce"};

/* ---- State and the report ------------------------------------------------------------ */

typedef struct pc_opts {
    const char *file;
    const char *only;     /* --stage NAME */
    const char *dump_dir; /* --dump-kernels DIR */
    int arch;
    unsigned long long seed;
    double tol;
    int verbose;
} pc_opts;

typedef struct pc {
    pc_opts o;
    const cli_common *common;
    int passed, failed, skipped, warned;
    pf_engine *eng;
    struct stat st;      /* the plugin file */
    char real[PATH_MAX]; /* its real path */
    int gpu;             /* 0: not tried yet, 1: present, -1: absent */
    int gpu_skips;
    char gpu_why[512];
    uint64_t rng;
    unsigned abi_minor; /* the plugin's ABI minor version */
    char op[160];       /* the stage being checked as pipelines name it: plugin.stage */
    char refused[4096]; /* the engine's warnings about what it did not load */
} pc;

/* What the crash and exit() guards report, and what they clean up. Written only by
   the main thread; read by a signal handler, hence plain static buffers. */
static char g_doing[512];
static volatile sig_atomic_t g_guard;
static char g_tmpdir[PATH_MAX], g_link[PATH_MAX];

static void doing(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void doing(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_doing, sizeof g_doing, fmt, ap);
    va_end(ap);
}

static void cleanup_tmp(void)
{
    if (g_link[0])
        unlink(g_link);
    if (g_tmpdir[0])
        rmdir(g_tmpdir);
    g_link[0] = g_tmpdir[0] = 0;
}

/* strncpy that always terminates, for messages cut to their buffer. */
static void copy_text(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static void say(const char *s)
{
    ssize_t r = write(STDOUT_FILENO, s, strlen(s));
    (void)r;
}

static void on_crash(int sig)
{
    const char *name = sig == SIGSEGV  ? "SIGSEGV"
                       : sig == SIGBUS ? "SIGBUS"
                       : sig == SIGFPE ? "SIGFPE"
                       : sig == SIGILL ? "SIGILL"
                                       : "SIGABRT";
    say("  FAIL  the plugin crashed (");
    say(name);
    say(") during: ");
    say(g_doing);
    say("\n        fix: run the same pipeline under a debugger or AddressSanitizer; "
        "out-of-bounds reads and writes are the usual cause\nresult: FAIL\n");
    cleanup_tmp();
    _exit(PF_EXIT_FAILED);
}

static void on_exit_call(void)
{
    if (!g_guard)
        return;
    say("  FAIL  the plugin called exit() during: ");
    say(g_doing);
    say("\n        fix: never exit from a plugin; return non-zero with a message in "
        "a->err instead\nresult: FAIL\n");
    cleanup_tmp();
    _exit(PF_EXIT_FAILED);
}

/* One line of the report, counted: ok, FAIL with a line saying what to fix, skip, warn. */
enum { PC_OK, PC_FAIL, PC_SKIP, PC_WARN };

static void note(pc *c, int kind, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void note(pc *c, int kind, const char *fix, const char *fmt, ...)
{
    static const char *const tags[] = {"ok", "FAIL", "skip", "warn"};
    int *counts[] = {&c->passed, &c->failed, &c->skipped, &c->warned};
    va_list ap;
    va_start(ap, fmt);
    printf("  %-5s ", tags[kind]);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (fix)
        printf("        fix: %s\n", fix);
    (*counts[kind])++;
}

#define pass(c, ...)      note(c, PC_OK, NULL, __VA_ARGS__)
#define fail(c, fix, ...) note(c, PC_FAIL, fix, __VA_ARGS__)
#define skip(c, ...)      note(c, PC_SKIP, NULL, __VA_ARGS__)
#define warn(c, ...)      note(c, PC_WARN, NULL, __VA_ARGS__)
#define PC_PRINTF(f, a)   __attribute__((format(printf, f, a)))

/* Engine notices (the CPU fallback and such) are expected here: shown with -v only. */
static void engine_log(void *user, int level, const char *msg)
{
    pc *c = user;
    size_t n = strlen(msg), have = strlen(c->refused);
    if (level >= 1 && n > 9 && strcmp(msg + n - 9, "; skipped") == 0 &&
        have + n < sizeof c->refused)
        snprintf(c->refused + have, sizeof c->refused - have, "%.*s\n", (int)(n - 9), msg);
    if (c->o.verbose)
        printf("        (engine: %s)\n", msg);
}

/* ---- Random numbers and images ---------------------------------------------------------- */

static uint32_t rng_u32(pc *c)
{
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return (uint32_t)((c->rng * 2685821657736338717ull) >> 32);
}

static double rng_unit(pc *c)
{
    return rng_u32(c) / 4294967296.0;
} /* [0, 1) */

static int rng_range(pc *c, int lo, int hi)
{
    return lo + (int)(rng_u32(c) % (uint32_t)(hi - lo + 1));
}

/* A float RGBA image in 64-byte aligned memory whose pitch leaves at least three pixels
   of padding, so that pitch mistakes and writes past a row show. New images are all
   poison, padding included. */
typedef struct pc_img {
    pf_image im;
    size_t bytes;
} pc_img;

static void fill_poison(void *p, size_t bytes)
{
    uint32_t v = PC_POISON;
    for (size_t i = 0; i + 4 <= bytes; i += 4)
        memcpy((char *)p + i, &v, 4);
}

static int is_poison_at(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v == PC_POISON;
}

static void img_poison(pc_img *m)
{
    fill_poison(m->im.data, m->bytes);
}

static int img_new(pc_img *m, int w, int h)
{
    memset(m, 0, sizeof *m);
    size_t pitch = ((size_t)w * sizeof(pf_float4) + 48 + 63) / 64 * 64;
    void *p = NULL;
    if (w <= 0 || h <= 0 || posix_memalign(&p, 64, pitch * (size_t)h) != 0)
        return -1;
    m->im.data = p;
    m->im.width = w;
    m->im.height = h;
    m->im.pitch = pitch;
    m->bytes = pitch * (size_t)h;
    img_poison(m);
    return 0;
}

static void img_free(pc_img *m)
{
    free(m->im.data);
    memset(m, 0, sizeof *m);
}

static void img_random(pc *c, pc_img *m)
{
    for (int y = 0; y < m->im.height; y++) {
        float *r = (float *)pf_image_row(&m->im, y);
        for (int i = 0; i < 4 * m->im.width; i++)
            r[i] = (float)rng_unit(c);
    }
}

static int img_copy(pc_img *dst, const pc_img *src)
{
    if (img_new(dst, src->im.width, src->im.height) != 0)
        return -1;
    memcpy(dst->im.data, src->im.data, src->bytes);
    return 0;
}

static pf_frame img_frame(const pc_img *m)
{
    pf_frame f = {m->im.data, m->im.width, m->im.height, m->im.pitch, PF_F32, 4};
    return f;
}

/* ---- Comparisons -------------------------------------------------------------------------- */

typedef struct pc_diff {
    long bad, total;
    int x, y, ch; /* first difference (tables: x = column, y = row) */
    double a, b;
} pc_diff;

/* Whether a and b agree: bit for bit when tol < 0, else |a - b| <= tol * max(1, |a|),
   NaN matching NaN. */
static int same_value(float a, float b, double tol)
{
    if (tol < 0)
        return memcmp(&a, &b, sizeof a) == 0;
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (a == b)
        return 1;
    return fabs((double)a - b) <= tol * fmax(1.0, fabs((double)a));
}

static void note_diff(pc_diff *d, int x, int y, int ch, double a, double b)
{
    if (d->bad++ == 0) {
        d->x = x, d->y = y, d->ch = ch;
        d->a = a, d->b = b;
    }
}

/* Pixels [0, width) of rows [y0, y1) of a against b. */
static pc_diff img_compare(const pc_img *a, const pc_img *b, int y0, int y1, double tol)
{
    pc_diff d = {0};
    for (int y = y0; y < y1; y++) {
        const float *ra = (const float *)pf_image_row(&a->im, y);
        const float *rb = (const float *)pf_image_row(&b->im, y);
        for (int i = 0; i < 4 * a->im.width; i++, d.total++)
            if (!same_value(ra[i], rb[i], tol))
                note_diff(&d, i / 4, y, i % 4, ra[i], rb[i]);
    }
    return d;
}

static pc_diff table_compare(const double *a, const double *b, int rows, int cols, double tol)
{
    pc_diff d = {0};
    for (int i = 0; i < rows * cols; i++, d.total++) {
        int ok;
        if (tol < 0)
            ok = memcmp(&a[i], &b[i], sizeof(double)) == 0;
        else if (isnan(a[i]) || isnan(b[i]))
            ok = isnan(a[i]) && isnan(b[i]);
        else
            ok = a[i] == b[i] || fabs(a[i] - b[i]) <= tol * fmax(1.0, fabs(a[i]));
        if (!ok)
            note_diff(&d, i % cols, i / cols, 0, a[i], b[i]);
    }
    return d;
}

static const char *diff_text(const pc_diff *d, int table, char *buf, size_t size)
{
    static const char ch[] = "RGBA";
    if (table)
        snprintf(buf, size,
                 "%ld of %ld values differ; first at row %d, column %d: %.9g against %.9g", d->bad,
                 d->total, d->y, d->x, d->a, d->b);
    else
        snprintf(buf, size, "%ld of %ld values differ; first at (%d, %d) %c: %.9g against %.9g",
                 d->bad, d->total, d->x, d->y, ch[d->ch], d->a, d->b);
    return buf;
}

/* ---- Parameter sets ------------------------------------------------------------------------ */

/* A stage's params struct filled as the engine fills it, and the same values as the
   JSON object of a pipeline file. */
typedef struct pc_params {
    void *st;
    char json[8192];
    int ok;
} pc_params;

static size_t param_bytes(const pf_param_desc *pd)
{
    return pd->type == PF_PARAM_FLOAT_ARRAY
               ? sizeof(float) * (size_t)(pd->count > 0 ? pd->count : 0)
           : pd->type == PF_PARAM_FLOAT ? sizeof(float)
                                        : sizeof(int);
}

static int in_range(const pf_param_desc *pd, double v)
{
    return pd->min > pd->max || (v >= pd->min && v <= pd->max);
}

static int enum_count(const pf_param_desc *pd)
{
    int n = 0;
    while (pd->enum_names && pd->enum_names[n])
        n++;
    return n;
}

/* A random value within the row's range, kept moderate (about [-4, 4], or 8 wide at the
   range's nearer end) so that random params exercise the op without making images of
   infinities or giant resample outputs. */
static double random_value(pc *c, const pf_param_desc *pd)
{
    double lo = pd->min <= pd->max ? pd->min : -4, hi = pd->min <= pd->max ? pd->max : 4;
    double a = fmax(lo, -4), b = fmin(hi, 4);
    if (a > b) {
        a = lo > 4 ? lo : fmax(lo, hi - 8);
        b = lo > 4 ? fmin(hi, lo + 8) : hi;
    }
    if (pd->type == PF_PARAM_INT) {
        int ia = (int)ceil(a), ib = (int)floor(b);
        return ia <= ib ? rng_range(c, ia, ib) : pd->def;
    }
    return (double)(float)(a + (b - a) * rng_unit(c));
}

static int json_append(pc_params *ps, size_t *o, const char *fmt, ...) PC_PRINTF(3, 4);
static int json_append(pc_params *ps, size_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ps->json + *o, sizeof ps->json - *o, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof ps->json - *o)
        return -1;
    *o += (size_t)n;
    return 0;
}

/* Fills ps with the defaults (random 0) or one random set; the descriptor has passed
   its table checks. Returns 0, or -1 with why (out of memory, no random set found). */
static int make_params(pc *c, const pf_stage_desc *d, int random, pc_params *ps, char *why,
                       size_t why_size)
{
    size_t size = d->params_size ? d->params_size : 1;
    memset(ps, 0, sizeof *ps);
    if (posix_memalign(&ps->st, 16, (size + 15) / 16 * 16) != 0) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    for (int attempt = 0; attempt < 32; attempt++) {
        memset(ps->st, 0, size);
        size_t o = 0;
        int rc = json_append(ps, &o, "{");
        for (int i = 0; i < d->n_params && rc == 0; i++) {
            const pf_param_desc *pd = &d->params[i];
            char *field = (char *)ps->st + pd->offset;
            rc = json_append(ps, &o, "%s\"%s\": ", i ? ", " : "", pd->name);
            if (rc != 0)
                break;
            if (pd->type == PF_PARAM_FLOAT) {
                float v = (float)(random ? random_value(c, pd) : pd->def);
                memcpy(field, &v, sizeof v);
                rc = json_append(ps, &o, "%.17g", (double)v);
            } else if (pd->type == PF_PARAM_INT) {
                int v = (int)(random ? random_value(c, pd) : pd->def);
                memcpy(field, &v, sizeof v);
                rc = json_append(ps, &o, "%d", v);
            } else if (pd->type == PF_PARAM_BOOL) {
                int v = random ? (int)(rng_u32(c) & 1) : pd->def != 0;
                memcpy(field, &v, sizeof v);
                rc = json_append(ps, &o, "%s", v ? "true" : "false");
            } else if (pd->type == PF_PARAM_ENUM) {
                int v = random ? rng_range(c, 0, enum_count(pd) - 1) : (int)pd->def;
                memcpy(field, &v, sizeof v);
                rc = json_append(ps, &o, "\"%s\"", pd->enum_names[v]);
            } else {
                rc = json_append(ps, &o, "[");
                for (int k = 0; k < pd->count && rc == 0; k++) {
                    float v = (float)(random ? random_value(c, pd) : pd->def_array[k]);
                    memcpy(field + sizeof(float) * (size_t)k, &v, sizeof v);
                    rc = json_append(ps, &o, "%s%.17g", k ? ", " : "", (double)v);
                }
                if (rc == 0)
                    rc = json_append(ps, &o, "]");
            }
        }
        if (rc == 0)
            rc = json_append(ps, &o, "}");
        if (rc != 0) {
            snprintf(why, why_size, "the parameters do not fit in %zu bytes of JSON",
                     sizeof ps->json);
            return -1;
        }
        char err[512] = "";
        if (!d->check || d->check(ps->st, err, sizeof err) == 0) {
            ps->ok = 1;
            return 0;
        }
        if (!random) {
            snprintf(why, why_size, "check() rejects the defaults: %s", err);
            return -1;
        }
    }
    snprintf(why, why_size, "no random set within the ranges passed the stage's check()");
    return -1;
}

static void params_free(pc_params *ps)
{
    free(ps->st);
    ps->st = NULL;
}

/* ---- Pipelines ------------------------------------------------------------------------------ */

typedef struct pc_run {
    pf_pipeline *p;
    int status;
    int n_out;
    int is_table[PC_MAX_OUT];
    pc_img img[PC_MAX_OUT];
    double *tab[PC_MAX_OUT];
    int rows[PC_MAX_OUT], cols[PC_MAX_OUT];
    char err[4096];
} pc_run;

static void run_free(pc_run *r)
{
    for (int o = 0; o < PC_MAX_OUT; o++) {
        img_free(&r->img[o]);
        free(r->tab[o]);
        r->tab[o] = NULL;
    }
    pf_pipeline_destroy(r->p);
    r->p = NULL;
}

/* Runs r->p on the inputs (planning for their shapes), into freshly poisoned outputs,
   and copies the tables. */
static int run_again(pc_run *r, const pc_img *in, int n_in)
{
    pf_frame fin[PF_MAX_INPUTS], fout[PC_MAX_OUT];
    pf_shape shapes[PF_MAX_INPUTS];
    for (int k = 0; k < n_in; k++) {
        fin[k] = img_frame(&in[k]);
        shapes[k].width = in[k].im.width;
        shapes[k].height = in[k].im.height;
    }
    int rc = pf_pipeline_plan(r->p, shapes, n_in);
    if (rc != PF_OK) {
        snprintf(r->err, sizeof r->err, "%s", pf_pipeline_errmsg(r->p));
        return r->status = rc;
    }
    memset(fout, 0, sizeof fout);
    for (int o = 0; o < r->n_out; o++) {
        pf_output_info info;
        if (pf_pipeline_output_info(r->p, o, &info) != PF_OK)
            return r->status = PF_INTERNAL;
        r->is_table[o] = info.kind == PF_OUTPUT_TABLE;
        if (r->is_table[o])
            continue;
        if (r->img[o].im.width != info.shape.width || r->img[o].im.height != info.shape.height) {
            img_free(&r->img[o]);
            if (img_new(&r->img[o], info.shape.width, info.shape.height) != 0) {
                snprintf(r->err, sizeof r->err, "cannot allocate a %dx%d output", info.shape.width,
                         info.shape.height);
                return r->status = PF_NO_MEMORY;
            }
        }
        img_poison(&r->img[o]);
        fout[o] = img_frame(&r->img[o]);
    }
    rc = pf_pipeline_run(r->p, fin, n_in, fout, r->n_out);
    if (rc != PF_OK) {
        snprintf(r->err, sizeof r->err, "%s", pf_pipeline_errmsg(r->p));
        return r->status = rc;
    }
    for (int o = 0; o < r->n_out; o++) {
        pf_table t;
        if (!r->is_table[o])
            continue;
        if (pf_pipeline_table(r->p, o, &t) != PF_OK || t.rows < 0 || t.cols < 0)
            return r->status = PF_INTERNAL;
        free(r->tab[o]);
        r->tab[o] = malloc(sizeof(double) * (size_t)(t.rows * t.cols + 1));
        if (!r->tab[o])
            return r->status = PF_NO_MEMORY;
        memcpy(r->tab[o], t.data, sizeof(double) * (size_t)(t.rows * t.cols));
        r->rows[o] = t.rows;
        r->cols[o] = t.cols;
    }
    return r->status = PF_OK;
}

/* Loads json, sets the options (name, value pairs, NULL-terminated) and runs it. On
   failure r->err says why; r->p stays for the caller to inspect and run again. */
static int run_json(pc *c, pc_run *r, const char *json, const char *const *opts, const pc_img *in,
                    int n_in)
{
    memset(r, 0, sizeof *r);
    int rc = pf_pipeline_load_string(c->eng, json, "plugin-check", &r->p);
    if (rc != PF_OK) {
        snprintf(r->err, sizeof r->err, "%s", pf_engine_errmsg(c->eng));
        return r->status = rc;
    }
    r->n_out = pf_pipeline_output_count(r->p);
    if (r->n_out > PC_MAX_OUT)
        r->n_out = PC_MAX_OUT;
    for (int i = 0; opts && opts[i]; i += 2) {
        rc = pf_pipeline_set_option(r->p, opts[i], opts[i + 1]);
        if (rc != PF_OK) {
            snprintf(r->err, sizeof r->err, "%s", pf_pipeline_errmsg(r->p));
            return r->status = rc;
        }
    }
    return run_again(r, in, n_in);
}

/* Compares every output of two runs of the same pipeline; 1 when they agree. */
static int runs_agree(const pc_run *a, const pc_run *b, double tol, char *why, size_t size)
{
    for (int o = 0; o < a->n_out; o++) {
        pf_output_info info;
        const char *name = pf_pipeline_output_info(a->p, o, &info) == PF_OK ? info.name : "?";
        char text[512];
        pc_diff d;
        if (a->is_table[o]) {
            if (a->rows[o] != b->rows[o] || a->cols[o] != b->cols[o]) {
                snprintf(why, size, "output '%s': a %dx%d table against %dx%d", name, a->cols[o],
                         a->rows[o], b->cols[o], b->rows[o]);
                return 0;
            }
            d = table_compare(a->tab[o], b->tab[o], a->rows[o], a->cols[o], tol);
        } else {
            if (a->img[o].im.width != b->img[o].im.width ||
                a->img[o].im.height != b->img[o].im.height) {
                snprintf(why, size, "output '%s': %dx%d against %dx%d", name, a->img[o].im.width,
                         a->img[o].im.height, b->img[o].im.width, b->img[o].im.height);
                return 0;
            }
            d = img_compare(&a->img[o], &b->img[o], 0, a->img[o].im.height, tol);
        }
        if (d.bad) {
            snprintf(why, size, "output '%s': %s", name,
                     diff_text(&d, a->is_table[o], text, sizeof text));
            return 0;
        }
    }
    return 1;
}

/* ---- Test pipelines --------------------------------------------------------------------- */

/* The stage alone on inputs in0..in<n-1>: {"o": the stage}. */
static int json_single(char *buf, size_t size, const pc *c, const pf_stage_desc *d,
                       const pc_params *ps)
{
    char ins[256] = "";
    size_t o = 0;
    for (int k = 0; k < d->n_inputs; k++)
        o += (size_t)snprintf(ins + o, sizeof ins - o, "%s\"in%d\"", k ? ", " : "", k);
    int n = snprintf(buf, size,
                     "{\"pipefuse\": 1, \"inputs\": [%s], \"stages\": [{\"id\": \"s\", "
                     "\"op\": \"%s\", \"inputs\": [%s], \"params\": %s}], "
                     "\"outputs\": {\"o\": \"s\"}}",
                     ins, c->op, ins, ps->json);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* The stage between built-in point stages: pre (brightness) -> s -> post (linear), s
   reading pre and its other inputs from the pipeline; a point stage's chain goes on to
   mix (multiply of post and pre), an op of another built-in header (composite_ops.h,
   where brightness and linear are color_ops.h), so that the fused kernel holds op headers
   of three sources side by side. A reduce ends the chain. */
static int json_chain(char *buf, size_t size, const pc *c, const pf_stage_desc *d,
                      const pc_params *ps)
{
    char ins[256] = "", sin[256] = "\"pre\"";
    size_t o = 0, so = strlen(sin);
    for (int k = 0; k < d->n_inputs; k++) {
        o += (size_t)snprintf(ins + o, sizeof ins - o, "%s\"in%d\"", k ? ", " : "", k);
        if (k)
            so += (size_t)snprintf(sin + so, sizeof sin - so, ", \"in%d\"", k);
    }
    const char *tail =
        d->kind == PF_STAGE_REDUCE ? "], \"outputs\": {\"t\": \"s\"}}"
        : d->kind == PF_STAGE_POINT
            ? ", {\"id\": \"post\", \"op\": \"linear\", \"inputs\": [\"s\"], "
              "\"params\": {\"a\": 0.9, \"b\": 0.03}}, {\"id\": \"mix\", \"op\": "
              "\"multiply\", \"inputs\": [\"post\", \"pre\"]}], "
              "\"outputs\": {\"o\": \"mix\", \"so\": \"s\"}}"
            : ", {\"id\": \"post\", \"op\": \"linear\", \"inputs\": [\"s\"], "
              "\"params\": {\"a\": 0.9, \"b\": 0.03}}], \"outputs\": {\"o\": \"post\"}}";
    int n =
        snprintf(buf, size,
                 "{\"pipefuse\": 1, \"inputs\": [%s], \"stages\": [{\"id\": \"pre\", "
                 "\"op\": \"brightness\", \"inputs\": [\"in0\"], \"params\": {\"amount\": 0.05}}, "
                 "{\"id\": \"s\", \"op\": \"%s\", \"inputs\": [%s], \"params\": %s}%s",
                 ins, c->op, sin, ps->json, tail);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* The unit of r's plan holding stage id "s", or -1. */
static int unit_of_s(const pc_run *r, pf_unit_info *u)
{
    for (int i = 0; i < pf_pipeline_unit_count(r->p); i++) {
        if (pf_pipeline_unit(r->p, i, u) != PF_OK)
            return -1;
        for (int k = 0; k < u->n_stages; k++)
            if (strcmp(u->stages[k], "s") == 0)
                return i;
    }
    return -1;
}

/* ---- Calling a stage directly, as the CPU executor does ----------------------------------------- */

typedef struct pc_scratch {
    unsigned char *p;
    size_t size;
} pc_scratch;

/* size bytes of poisoned scratch and PC_GUARD guard bytes after them. */
static int scratch_new(pc_scratch *s, size_t size)
{
    void *p = NULL;
    s->p = NULL;
    s->size = size;
    if (size > ((size_t)1 << 34) || posix_memalign(&p, 64, size + PC_GUARD) != 0)
        return -1;
    s->p = p;
    fill_poison(s->p, size);
    memset(s->p + size, 0xa5, PC_GUARD);
    return 0;
}

static int scratch_guard_ok(const pc_scratch *s)
{
    for (size_t i = 0; i < PC_GUARD; i++)
        if (s->p[s->size + i] != 0xa5)
            return 0;
    return 1;
}

static size_t scratch_size_for(const pf_stage_desc *d, const void *params, int width, int rows)
{
    return d->scratch_bytes ? d->scratch_bytes(params, width, rows) : 0;
}

static int call_stage(const pf_stage_desc *d, const void *params, const pf_image *in, int n_in,
                      const pf_image *out, int y0, int y1, pc_scratch *s, double *partial,
                      char *err, size_t err_size)
{
    pf_stage_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.params = params;
    a.in = in;
    a.n_in = n_in;
    if (out)
        a.out = *out;
    a.region.y0 = y0;
    a.region.y1 = y1;
    a.scratch = s && s->size ? s->p : NULL;
    a.scratch_size = s ? s->size : 0;
    a.partial = partial;
    a.err = err;
    a.err_size = err_size;
    err[0] = 0;
    return d->run_cpu(&a);
}

/* Counts pixels of row y still poisoned (unwritten), and poison words of its padding
   that changed. */
static void row_state(const pc_img *m, int y, int *unwritten, int *padding)
{
    const unsigned char *r = (const unsigned char *)pf_image_row(&m->im, y);
    size_t data = (size_t)m->im.width * sizeof(pf_float4);
    for (size_t i = 0; i < data; i += 4)
        *unwritten += is_poison_at(r + i);
    for (size_t i = data; i + 4 <= m->im.pitch; i += 4)
        *padding += !is_poison_at(r + i);
}

static int row_untouched(const pc_img *m, int y)
{
    const unsigned char *r = (const unsigned char *)pf_image_row(&m->im, y);
    for (size_t i = 0; i + 4 <= m->im.pitch; i += 4)
        if (!is_poison_at(r + i))
            return 0;
    return 1;
}

/* A random split of rows [0, rows) into at most max bands of 1 to rows / 4 rows:
   band b is [y0s[b], y0s[b + 1]); returns the count. y0s holds max + 1 entries. */
static int make_bands(pc *c, int rows, int *y0s, int max)
{
    int n = 0, top = rows / 4 > 1 ? rows / 4 : 1;
    for (int y = 0; y < rows; n++) {
        y0s[n] = y;
        if (n == max - 1) { /* the last band takes the rest */
            n++;
            break;
        }
        y += rng_range(c, 1, top);
    }
    y0s[n] = rows;
    return n;
}

static int inputs_unchanged(const pc_img *in, const pc_img *copy, int n_in)
{
    for (int k = 0; k < n_in; k++)
        if (memcmp(in[k].im.data, copy[k].im.data, in[k].bytes) != 0)
            return 0;
    return 1;
}

static const char *const fix_region =
    "write only the rows a->region.y0 .. a->region.y1 - 1 of a->out: the engine runs other "
    "bands of the same image at the same time";
static const char *const fix_padding =
    "write only x in [0, a->out.width) of a row; rows are a->out.pitch bytes apart and the "
    "bytes past the width belong to nobody";
static const char *const fix_unwritten =
    "write every pixel of every row of the region: outputs are not cleared beforehand";
static const char *const fix_banding =
    "compute each output row from the inputs (and the scratch of this call) only, never "
    "from output rows or state left by another band";
static const char *const fix_inputs =
    "never write to a->in: inputs are shared with other stages that run at the same time";
static const char *const fix_scratch =
    "make scratch_bytes(params, width, rows) return what a band of that many rows needs";

/* Stencil and resample stages: bands against the whole image, writes outside bands,
   unwritten pixels, scratch overruns, input writes, and a stencil's radius. */
static void check_regions(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                          pc_img *in, int n_in)
{
    pf_image ims[PF_MAX_INPUTS];
    pf_shape ins[PF_MAX_INPUTS], os = {in[0].im.width, in[0].im.height};
    pc_img copy[PF_MAX_INPUTS], whole = {0}, band = {0}, assembled = {0};
    pc_scratch s = {0};
    char err[1024] = "", text[512];
    int nk = 0, y0s[65];
    for (int k = 0; k < n_in; k++) {
        ims[k] = in[k].im;
        ins[k].width = in[k].im.width;
        ins[k].height = in[k].im.height;
    }
    doing("stage %s: shape() with %s", d->name, set);
    if (d->kind == PF_STAGE_RESAMPLE && d->shape(ps->st, ins, &os, err, sizeof err) != 0) {
        skip(c, "regions (%s): shape() refuses a %dx%d input: %s", set, ins[0].width, ins[0].height,
             err);
        return;
    }
    if (os.width <= 0 || os.height <= 0 || os.width > PC_MAX_SIDE || os.height > PC_MAX_SIDE) {
        skip(c, "regions (%s): output shape %dx%d is not checked directly", set, os.width,
             os.height);
        return;
    }
    for (nk = 0; nk < n_in; nk++)
        if (img_copy(&copy[nk], &in[nk]) != 0)
            goto oom;
    if (img_new(&whole, os.width, os.height) != 0 || img_new(&band, os.width, os.height) != 0 ||
        img_new(&assembled, os.width, os.height) != 0 ||
        scratch_new(&s, scratch_size_for(d, ps->st, os.width, os.height)) != 0)
        goto oom;

    /* The whole image in one region. */
    doing("stage %s: run_cpu on rows 0..%d (the whole image) with %s", d->name, os.height - 1, set);
    if (call_stage(d, ps->st, ims, n_in, &whole.im, 0, os.height, &s, NULL, err, sizeof err) != 0) {
        fail(c, "return 0 on success; on failure write the reason into a->err",
             "regions (%s): run_cpu failed on the whole image (rows 0..%d): %s", set, os.height - 1,
             err[0] ? err : "no message in a->err");
        goto out;
    }
    int unwritten = 0, padding = 0, bad = 0;
    for (int y = 0; y < os.height; y++)
        row_state(&whole, y, &unwritten, &padding);
    if (!scratch_guard_ok(&s))
        fail(c, fix_scratch,
             "regions (%s): wrote past the end of its scratch (%zu bytes for %d rows)", set, s.size,
             os.height),
            bad++;
    if (unwritten)
        fail(c, fix_unwritten, "regions (%s): left %d values of the whole image unwritten", set,
             unwritten),
            bad++;
    if (padding)
        fail(c, fix_padding, "regions (%s): wrote into the pitch padding past the rows' width",
             set),
            bad++;
    free(s.p);
    s.p = NULL;

    /* Bands, in reverse order, each into a freshly poisoned image. */
    int n = make_bands(c, os.height, y0s, 64);
    int outside = 0, out_lo = INT_MAX, out_hi = -1, bad_y0 = 0, bad_y1 = 0;
    int band_unwritten = 0, band_padding = 0, scratch_over = 0;
    for (int b = n - 1; b >= 0; b--) {
        int y0 = y0s[b], y1 = y0s[b + 1];
        img_poison(&band);
        if (scratch_new(&s, scratch_size_for(d, ps->st, os.width, y1 - y0)) != 0)
            goto oom;
        doing("stage %s: run_cpu on rows %d..%d with %s", d->name, y0, y1 - 1, set);
        if (call_stage(d, ps->st, ims, n_in, &band.im, y0, y1, &s, NULL, err, sizeof err) != 0) {
            fail(c, "a stage must run on any band of rows; return non-zero only for real errors",
                 "regions (%s): run_cpu failed on rows %d..%d: %s", set, y0, y1 - 1,
                 err[0] ? err : "no message in a->err");
            bad++;
            goto out;
        }
        scratch_over += !scratch_guard_ok(&s);
        free(s.p);
        s.p = NULL;
        for (int y = 0; y < os.height; y++) {
            if (y >= y0 && y < y1) {
                row_state(&band, y, &band_unwritten, &band_padding);
                memcpy(pf_image_row(&assembled.im, y), pf_image_row(&band.im, y), band.im.pitch);
            } else if (!row_untouched(&band, y)) {
                if (!outside++)
                    bad_y0 = y0, bad_y1 = y1;
                if (y < out_lo && y0 == bad_y0)
                    out_lo = y;
                if (y > out_hi && y0 == bad_y0)
                    out_hi = y;
            }
        }
    }
    if (outside)
        fail(c, fix_region,
             "regions (%s): writes outside its region: asked for rows %d..%d of %d, it also "
             "changed rows between %d and %d",
             set, bad_y0, bad_y1 - 1, os.height, out_lo, out_hi),
            bad++;
    if (scratch_over)
        fail(c, fix_scratch, "regions (%s): wrote past the end of its scratch on %d band(s)", set,
             scratch_over),
            bad++;
    if (band_unwritten && !unwritten)
        fail(c, fix_unwritten, "regions (%s): left %d values unwritten when run in %d bands", set,
             band_unwritten, n),
            bad++;
    if (band_padding && !padding)
        fail(c, fix_padding, "regions (%s): wrote into the pitch padding when run in bands", set),
            bad++;
    if (!outside && !band_unwritten && !unwritten) {
        pc_diff df = img_compare(&whole, &assembled, 0, os.height, -1);
        if (df.bad)
            fail(c, fix_banding, "regions (%s): %d bands differ from the whole image: %s", set, n,
                 diff_text(&df, 0, text, sizeof text)),
                bad++;
    }
    if (!inputs_unchanged(in, copy, n_in))
        fail(c, fix_inputs, "regions (%s): wrote into its input image", set), bad++;

    if (!bad)
        pass(c,
             "regions (%s): %d band%s, run in reverse order, write%s exactly their rows "
             "and match the whole image bit for bit; inputs untouched",
             set, n, n == 1 ? "" : "s", n == 1 ? "s" : "");
    goto out;
oom:
    fail(c, NULL, "regions (%s): out of memory for a %dx%d check", set, os.width, os.height);
out:
    free(s.p);
    for (int k = 0; k < nk; k++)
        img_free(&copy[k]);
    img_free(&whole);
    img_free(&band);
    img_free(&assembled);
}

/* A stencil's radius: the centre pixel of an image just large enough to have pixels
   farther than the radius on every side must not change when only those change. The
   image is sized from the radius (so every declared radius up to PF_MAX_RADIUS is
   checked), and a radius outside [0, PF_MAX_RADIUS] fails: the engine refuses it. */
static void check_radius(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                         int n_in)
{
    int r = d->radius(ps->st);
    if (r < 0 || r > PF_MAX_RADIUS) {
        fail(c,
             "return the farthest distance the stage reads, 0 to PF_MAX_RADIUS; refuse params "
             "that need more in check()",
             "radius (%s): radius() returns %d; the engine allows 0 to %d (PF_MAX_RADIUS)", set, r,
             PF_MAX_RADIUS);
        return;
    }
    int side = 2 * r + 5, w = side + 2, h = side, cx = w / 2, cy = h / 2, made = 0;
    pc_img near[PF_MAX_INPUTS], far[PF_MAX_INPUTS], whole = {0}, row = {0};
    pf_image nim[PF_MAX_INPUTS], fim[PF_MAX_INPUTS];
    pc_scratch sw = {0}, sr = {0};
    char err[1024] = "";
    for (; made < n_in; made++) {
        if (img_new(&near[made], w, h) != 0)
            break;
        img_random(c, &near[made]);
        if (img_copy(&far[made], &near[made]) != 0) {
            img_free(&near[made]);
            break;
        }
        for (int y = 0; y < h; y++) {
            pf_float4 *px = pf_image_row(&far[made].im, y);
            for (int x = 0; x < w; x++)
                if (abs(x - cx) > r || abs(y - cy) > r)
                    px[x] = pf_f4((float)rng_unit(c), (float)rng_unit(c), (float)rng_unit(c),
                                  (float)rng_unit(c));
        }
        nim[made] = near[made].im;
        fim[made] = far[made].im;
    }
    if (made < n_in || img_new(&whole, w, h) != 0 || img_new(&row, w, h) != 0 ||
        scratch_new(&sw, scratch_size_for(d, ps->st, w, h)) != 0 ||
        scratch_new(&sr, scratch_size_for(d, ps->st, w, 1)) != 0) {
        fail(c, NULL, "radius (%s): out of memory for a %dx%d check", set, w, h);
        goto out;
    }
    doing("stage %s: run_cpu on a %dx%d image for its radius %d", d->name, w, h, r);
    int rc = call_stage(d, ps->st, nim, n_in, &whole.im, 0, h, &sw, NULL, err, sizeof err);
    if (rc == 0) {
        doing("stage %s: run_cpu on row %d with inputs changed beyond radius %d", d->name, cy, r);
        rc = call_stage(d, ps->st, fim, n_in, &row.im, cy, cy + 1, &sr, NULL, err, sizeof err);
    }
    if (rc != 0) {
        fail(c, "a stage must run on any image and band of rows",
             "radius (%s): run_cpu failed on a %dx%d image: %s", set, w, h,
             err[0] ? err : "no message in a->err");
        goto out;
    }
    pf_float4 a = pf_image_row(&whole.im, cy)[cx], b = pf_image_row(&row.im, cy)[cx];
    if (memcmp(&a, &b, sizeof a) != 0)
        fail(c,
             "make radius() return the farthest distance the stage reads: the planner sizes "
             "halos from it",
             "reads beyond its declared radius %d (%s): pixel (%d, %d) of a %dx%d image changed "
             "from (%.6g, %.6g, %.6g, %.6g) to (%.6g, %.6g, %.6g, %.6g) when only inputs more "
             "than %d pixel%s away changed",
             r, set, cx, cy, w, h, a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, r, r == 1 ? "" : "s");
    else
        pass(c,
             "radius (%s): reads within its declared radius %d (a %dx%d image, all inputs "
             "farther away changed)",
             set, r, w, h);
out:
    free(sw.p);
    free(sr.p);
    img_free(&whole);
    img_free(&row);
    for (int k = 0; k < made; k++) {
        img_free(&near[k]);
        img_free(&far[k]);
    }
}

/* Point stages: point_row over pieces of rows, in reverse order, against whole rows. */
static void check_point_rows(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                             pc_img *in, int n_in)
{
    enum { G = 8 };
    const int w = in[0].im.width, h = in[0].im.height;
    pf_float4 *whole = malloc(sizeof(pf_float4) * (size_t)(w + 2 * G));
    pf_float4 *piece = malloc(sizeof(pf_float4) * (size_t)(w + 2 * G));
    pf_float4 *assembled = malloc(sizeof(pf_float4) * (size_t)(w + 2 * G));
    int *starts = malloc(sizeof(int) * (size_t)(w + 1));
    pc_img copy[PF_MAX_INPUTS];
    int nk = 0, outside = 0, unwritten = 0, differ = 0, dx = 0, dy = 0;
    size_t rowb = sizeof(pf_float4) * (size_t)(w + 2 * G);
    for (nk = 0; nk < n_in; nk++)
        if (img_copy(&copy[nk], &in[nk]) != 0)
            break;
    if (!whole || !piece || !assembled || !starts || nk < n_in) {
        fail(c, NULL, "point rows (%s): out of memory", set);
        goto out;
    }
    const int rows[3] = {0, h / 2, h - 1};
    for (int ri = 0; ri < 3; ri++) {
        int y = rows[ri];
        const pf_float4 *ptr[PF_MAX_INPUTS];
        for (int k = 0; k < n_in; k++)
            ptr[k] = pf_image_row(&in[k].im, y);
        fill_poison(whole, rowb);
        doing("stage %s: point_row on row %d with %s", d->name, y, set);
        d->point_row(ps->st, ptr, n_in, whole + G, 0, w, y, w, h);
        for (int x = 0; x < w + 2 * G; x++) {
            int in_row = x >= G && x < G + w;
            int p = is_poison_at(&whole[x].x) + is_poison_at(&whole[x].y) +
                    is_poison_at(&whole[x].z) + is_poison_at(&whole[x].w);
            unwritten += in_row && p;
            outside += !in_row && p != 4;
        }
        /* Pieces of 1 to 16 pixels, last piece first. */
        int n = 0;
        for (int x = 0; x < w; n++) {
            starts[n] = x;
            x += rng_range(c, 1, 16);
        }
        starts[n] = w;
        fill_poison(assembled, rowb);
        for (int b = n - 1; b >= 0; b--) {
            int x0 = starts[b], cnt = starts[b + 1] - x0;
            if (cnt <= 0)
                continue;
            const pf_float4 *pp[PF_MAX_INPUTS];
            for (int k = 0; k < n_in; k++)
                pp[k] = ptr[k] + x0;
            fill_poison(piece, rowb);
            doing("stage %s: point_row on pixels %d..%d of row %d with %s", d->name, x0,
                  x0 + cnt - 1, y, set);
            d->point_row(ps->st, pp, n_in, piece + G + x0, x0, cnt, y, w, h);
            for (int x = 0; x < w + 2 * G; x++) {
                int mine = x >= G + x0 && x < G + x0 + cnt;
                int p = is_poison_at(&piece[x].x) + is_poison_at(&piece[x].y) +
                        is_poison_at(&piece[x].z) + is_poison_at(&piece[x].w);
                outside += !mine && p != 4;
                if (mine)
                    assembled[x] = piece[x];
            }
        }
        for (int x = 0; x < w && !differ; x++)
            if (memcmp(&whole[G + x], &assembled[G + x], sizeof(pf_float4)) != 0)
                differ = 1, dx = x, dy = y;
    }
    if (outside)
        fail(c, "write out[0] .. out[n - 1] only (use PF_POINT_ROW to define the row function)",
             "point rows (%s): point_row writes outside the n pixels it is given", set);
    if (unwritten)
        fail(c, "write every one of the n pixels",
             "point rows (%s): point_row leaves pixels unwritten", set);
    if (differ)
        fail(c,
             "compute pixel x0 + i from in[k][i] and the position (x0 + i, y) only (use "
             "PF_POINT_ROW to define the row function)",
             "point rows (%s): pieces of row %d differ from the whole row at x = %d", set, dy, dx);
    if (!inputs_unchanged(in, copy, n_in)) {
        fail(c, fix_inputs, "point rows (%s): wrote into its input image", set);
        outside++;
    }
    if (!outside && !unwritten && !differ)
        pass(c, "point rows (%s): pieces of rows, in reverse order, equal whole rows bit for bit",
             set);
out:
    for (int k = 0; k < nk; k++)
        img_free(&copy[k]);
    free(whole);
    free(piece);
    free(assembled);
    free(starts);
}

static int doubles_poisoned(const double *v, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += is_poison_at(&v[i]) && is_poison_at((const char *)&v[i] + 4);
    return (int)bad;
}

/* Reduce stages: banded partials combined against one whole partial; a partial reads
   only its band's rows; buffers are not overrun; inputs untouched. */
static void check_reduce(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                         pc_img *in, int n_in)
{
    pf_image ims[PF_MAX_INPUTS];
    pf_shape ins[PF_MAX_INPUTS], ts;
    pc_img copy[PF_MAX_INPUTS];
    pc_scratch s = {0};
    double *whole = NULL, *parts = NULL, *res1 = NULL, *resn = NULL, *lone = NULL;
    char err[1024] = "", text[512];
    int nk = 0, bad = 0, y0s[65];
    const int h = in[0].im.height, w = in[0].im.width;
    for (int k = 0; k < n_in; k++) {
        ims[k] = in[k].im;
        ins[k].width = w;
        ins[k].height = h;
    }
    doing("stage %s: shape() and partial_len() with %s", d->name, set);
    if (d->shape(ps->st, ins, &ts, err, sizeof err) != 0) {
        skip(c, "regions (%s): shape() refuses a %dx%d input: %s", set, w, h, err);
        return;
    }
    size_t len = d->partial_len(ps->st, ins), cells = (size_t)ts.width * (size_t)ts.height;
    if (ts.width <= 0 || ts.height <= 0 || len == 0 || len > ((size_t)1 << 26) ||
        cells > ((size_t)1 << 26)) {
        fail(c,
             "shape() gives the table's columns x rows; partial_len() the doubles of one "
             "band's partial (both > 0)",
             "regions (%s): table %dx%d, partial of %zu doubles: not a usable size", set, ts.width,
             ts.height, len);
        return;
    }
    int n = make_bands(c, h, y0s, 64);
    size_t gd = PC_GUARD / sizeof(double);
    whole = calloc(len + gd, sizeof(double));
    lone = calloc(len + gd, sizeof(double));
    parts = calloc(len * (size_t)n + gd, sizeof(double));
    res1 = malloc(sizeof(double) * (cells + gd));
    resn = malloc(sizeof(double) * (cells + gd));
    for (nk = 0; nk < n_in; nk++)
        if (img_copy(&copy[nk], &in[nk]) != 0)
            break;
    if (!whole || !lone || !parts || !res1 || !resn || nk < n_in ||
        scratch_new(&s, scratch_size_for(d, ps->st, w, h)) != 0) {
        fail(c, NULL, "regions (%s): out of memory", set);
        goto out;
    }
    memset(whole + len, 0xa5, PC_GUARD);
    memset(parts + len * (size_t)n, 0xa5, PC_GUARD);
    fill_poison(res1, sizeof(double) * cells);
    fill_poison(resn, sizeof(double) * cells);
    memset(res1 + cells, 0xa5, PC_GUARD);
    memset(resn + cells, 0xa5, PC_GUARD);

    doing("stage %s: run_cpu (reduce) on rows 0..%d with %s", d->name, h - 1, set);
    if (call_stage(d, ps->st, ims, n_in, NULL, 0, h, &s, whole, err, sizeof err) != 0) {
        fail(c, "return 0 on success; on failure write the reason into a->err",
             "regions (%s): run_cpu failed on the whole image: %s", set,
             err[0] ? err : "no message");
        bad++;
        goto out;
    }
    int over = !scratch_guard_ok(&s);
    free(s.p);
    s.p = NULL;
    doing("stage %s: combine() of one partial with %s", d->name, set);
    d->combine(ps->st, ins, whole, 1, res1);
    for (int b = n - 1; b >= 0; b--) {
        if (scratch_new(&s, scratch_size_for(d, ps->st, w, y0s[b + 1] - y0s[b])) != 0) {
            fail(c, NULL, "regions (%s): out of memory", set);
            goto out;
        }
        doing("stage %s: run_cpu (reduce) on rows %d..%d with %s", d->name, y0s[b], y0s[b + 1] - 1,
              set);
        if (call_stage(d, ps->st, ims, n_in, NULL, y0s[b], y0s[b + 1], &s, parts + len * (size_t)b,
                       err, sizeof err) != 0) {
            fail(c, "a stage must run on any band of rows",
                 "regions (%s): run_cpu failed on rows "
                 "%d..%d: %s",
                 set, y0s[b], y0s[b + 1] - 1, err[0] ? err : "no message");
            bad++;
            goto out;
        }
        over += !scratch_guard_ok(&s);
        free(s.p);
        s.p = NULL;
    }
    doing("stage %s: combine() of %d partials with %s", d->name, n, set);
    d->combine(ps->st, ins, parts, n, resn);
    for (size_t i = 0; i < PC_GUARD; i++) {
        int g = ((unsigned char *)(whole + len))[i] != 0xa5 ||
                ((unsigned char *)(parts + len * (size_t)n))[i] != 0xa5;
        int r = ((unsigned char *)(res1 + cells))[i] != 0xa5 ||
                ((unsigned char *)(resn + cells))[i] != 0xa5;
        if (g || r) {
            fail(c,
                 g ? "fill partial_len() doubles of a->partial, no more"
                   : "write rows x columns doubles of the result, no more",
                 "regions (%s): %s writes past the end of its buffer (%zu doubles)", set,
                 g ? "run_cpu" : "combine()", g ? len : cells);
            bad++;
            goto out;
        }
    }
    if (over)
        fail(c, fix_scratch, "regions (%s): wrote past the end of its scratch", set), bad++;
    int unset = doubles_poisoned(res1, cells);
    if (unset)
        fail(c, "combine() must write every entry of the result table (it is not cleared)",
             "regions (%s): combine() left %d of %zu table entries unwritten", set, unset, cells),
            bad++;
    pc_diff df = table_compare(res1, resn, ts.height, ts.width, c->o.tol);
    if (!unset && df.bad)
        fail(c,
             "partials must cover only their band's rows and combine() must fold them in "
             "order, so that the table does not depend on the banding beyond rounding",
             "regions (%s): %d bands combined differ from the whole image beyond %g: %s", set, n,
             c->o.tol, diff_text(&df, 1, text, sizeof text)),
            bad++;

    if (!inputs_unchanged(in, copy, n_in))
        fail(c, fix_inputs, "regions (%s): wrote into its input image", set), bad++;

    /* A band's partial must not read other rows: they become NaN, the partial must not
       change. */
    int mid = n / 2, y0 = y0s[mid], y1 = y0s[mid + 1];
    for (int k = 0; k < n_in; k++)
        for (int y = 0; y < h; y++)
            if (y < y0 || y >= y1) {
                float *row = (float *)pf_image_row(&copy[k].im, y);
                for (int i = 0; i < 4 * w; i++)
                    row[i] = NAN;
            }
    pf_image nanned[PF_MAX_INPUTS];
    for (int k = 0; k < n_in; k++)
        nanned[k] = copy[k].im;
    if (scratch_new(&s, scratch_size_for(d, ps->st, w, y1 - y0)) != 0) {
        fail(c, NULL, "regions (%s): out of memory", set);
        goto out;
    }
    doing("stage %s: run_cpu (reduce) on rows %d..%d with the other rows NaN", d->name, y0, y1 - 1);
    if (call_stage(d, ps->st, nanned, n_in, NULL, y0, y1, &s, lone, err, sizeof err) == 0 &&
        memcmp(lone, parts + len * (size_t)mid, sizeof(double) * len) != 0)
        fail(c,
             "a reduce stage's region is a band of INPUT rows: compute the partial from "
             "those rows only",
             "regions (%s): the partial of rows %d..%d changes when other rows change: it reads "
             "outside its region",
             set, y0, y1 - 1),
            bad++;
    if (!bad)
        pass(c,
             "regions (%s): %d banded partials combine to the whole image's table within %g; "
             "each reads only its rows; no buffer overrun",
             set, n, c->o.tol);
out:
    free(s.p);
    for (int k = 0; k < nk; k++)
        img_free(&copy[k]);
    free(whole);
    free(lone);
    free(parts);
    free(res1);
    free(resn);
}

/* ---- Runs through the engine ----------------------------------------------------------------- */

static const char *const cpu_opts[] = {"backend", "cpu", NULL};

static int has_cuda(const pf_stage_desc *d)
{
    return d->kind == PF_STAGE_POINT ? d->point_cuda != NULL : d->run_cuda != NULL;
}

static int first_nonfinite(const pc_run *r, char *where, size_t size)
{
    for (int o = 0; o < r->n_out; o++) {
        if (r->is_table[o])
            continue; /* tables may hold NaN legitimately (the mean of no pixels) */
        const pc_img *m = &r->img[o];
        for (int y = 0; y < m->im.height; y++) {
            const float *row = (const float *)pf_image_row(&m->im, y);
            for (int i = 0; i < 4 * m->im.width; i++)
                if (!isfinite(row[i])) {
                    snprintf(where, size, "(%d, %d) channel %d is %g", i / 4, y, i % 4, row[i]);
                    return 1;
                }
        }
    }
    return 0;
}

/* CPU runs of the stage alone: the main image with each param set, then tiny images.
   Fills cpu[s] for the sets that ran; returns 0 when the default set ran. */
static int check_cpu_runs(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
                          const char *const *set_names, pc_img *in, pc_run *cpu)
{
    char json[16384], where[256];
    int n_in = d->n_inputs, ok = 1;
    for (int s = 0; s < n_sets; s++) {
        if (!sets[s].ok)
            continue;
        doing("stage %s: a CPU run with %s", d->name, set_names[s]);
        if (json_single(json, sizeof json, c, d, &sets[s]) != 0) {
            fail(c, NULL, "CPU run (%s): the test pipeline does not fit in %zu bytes", set_names[s],
                 sizeof json);
            return -1;
        }
        int rc = run_json(c, &cpu[s], json, cpu_opts, in, n_in);
        if (rc != PF_OK) {
            if (s > 0 && (rc == PF_PARAM || rc == PF_SHAPE || rc == PF_PIPELINE)) {
                skip(c, "CPU run (%s): the engine refuses this set: %s", set_names[s], cpu[s].err);
                sets[s].ok = 0;
                continue;
            }
            fail(c,
                 rc == PF_STAGE ? "run_cpu must return 0 on success; the text after the "
                                  "rows is what it wrote into a->err"
                                : NULL,
                 "CPU run (%s) on %dx%d: %s (%s)", set_names[s], PC_W, PC_H, cpu[s].err,
                 pf_status_name(rc));
            if (s == 0)
                return -1;
            sets[s].ok = 0;
            ok = 0;
            continue;
        }
        if (first_nonfinite(&cpu[s], where, sizeof where))
            warn(c, "CPU run (%s): inputs in [0, 1) give a non-finite output at %s", set_names[s],
                 where);
    }
    /* Tiny images: borders everywhere. */
    static const int tiny[][2] = {{5, 3}, {1, 1}};
    char sizes[64] = "";
    for (int t = 0; t < 2; t++) {
        pc_img small[PF_MAX_INPUTS];
        pc_run r;
        int made = 0;
        for (; made < n_in; made++) {
            if (img_new(&small[made], tiny[t][0], tiny[t][1]) != 0)
                break;
            img_random(c, &small[made]);
        }
        if (made == n_in && json_single(json, sizeof json, c, d, &sets[0]) == 0) {
            doing("stage %s: a CPU run on a %dx%d image", d->name, tiny[t][0], tiny[t][1]);
            int rc = run_json(c, &r, json, cpu_opts, small, n_in);
            if (rc == PF_OK) {
                size_t o = strlen(sizes);
                snprintf(sizes + o, sizeof sizes - o, ", %dx%d", tiny[t][0], tiny[t][1]);
            } else if (rc == PF_SHAPE || rc == PF_PIPELINE) {
                skip(c, "CPU run on %dx%d: refused: %s", tiny[t][0], tiny[t][1], r.err);
            } else {
                fail(c, "stages must handle images down to 1x1 (reads clamp at the borders)",
                     "CPU run on %dx%d: %s (%s)", tiny[t][0], tiny[t][1], r.err,
                     pf_status_name(rc));
                ok = 0;
            }
            run_free(&r);
        } else {
            fail(c, NULL, "CPU run on %dx%d: out of memory", tiny[t][0], tiny[t][1]);
        }
        for (int k = 0; k < made; k++)
            img_free(&small[k]);
    }
    if (ok)
        pass(c, "CPU runs: %dx%d with the default%s params%s", PC_W, PC_H,
             n_sets > 1 && sets[1].ok ? " and random" : "", sizes);
    return 0;
}

/* The same input again, in the same pipeline, in a fresh one, and on one thread. */
static void check_determinism(pc *c, const pf_stage_desc *d, pc_params *ps, pc_img *in,
                              pc_run *first)
{
    char json[16384], why[1024];
    pc_run again;
    int n_in = d->n_inputs;
    static const char *const one_thread[] = {"backend", "cpu", "threads", "1", NULL};
    const char *what[] = {"a second run of the same pipeline", "a fresh pipeline",
                          "a run on one thread"};
    if (json_single(json, sizeof json, c, d, ps) != 0)
        return;
    for (int t = 0; t < 3; t++) {
        int rc;
        doing("stage %s: determinism, %s", d->name, what[t]);
        if (t == 0) {
            memset(&again, 0, sizeof again);
            again.p = first->p; /* borrowed: runs into again's own outputs */
            again.n_out = first->n_out;
            rc = run_again(&again, in, n_in);
            again.p = NULL;
        } else {
            rc = run_json(c, &again, json, t == 1 ? cpu_opts : one_thread, in, n_in);
        }
        int same = rc == PF_OK && runs_agree(first, &again, -1, why, sizeof why);
        if (rc != PF_OK)
            copy_text(why, sizeof why, again.err);
        run_free(&again);
        if (!same) {
            fail(c,
                 "keep no state between calls (no static or global variables that change), "
                 "and do not depend on which thread runs which band",
                 "deterministic: %s differs from the first run: %s", what[t], why);
            return;
        }
    }
    pass(c, "deterministic: a second run, a fresh pipeline and one thread give the same bits");
}

/* Between built-in stages: fused and unfused CPU runs, fusion, NVRTC. Leaves the chain's
   CPU run (fused) in *chain for the GPU checks; returns 0 when there is one. */
static int check_chain(pc *c, const pf_stage_desc *d, pc_params *ps, pc_img *in, char *json,
                       size_t json_size, pc_run *chain)
{
    char why[1024];
    int n_in = d->n_inputs;
    memset(chain, 0, sizeof *chain);
    if (!pf_engine_find_stage(c->eng, "brightness") || !pf_engine_find_stage(c->eng, "linear") ||
        !pf_engine_find_stage(c->eng, "multiply")) {
        skip(c, "in a pipeline: the built-in stages brightness, linear and multiply are not "
                "loaded");
        return -1;
    }
    if (json_chain(json, json_size, c, d, ps) != 0)
        return -1;
    const char *chain_name = d->kind == PF_STAGE_REDUCE  ? "brightness -> %s"
                             : d->kind == PF_STAGE_POINT ? "brightness -> %s -> linear -> multiply"
                                                         : "brightness -> %s -> linear";
    char label[256];
    snprintf(label, sizeof label, chain_name, d->name);
    doing("stage %s: the pipeline %s on the CPU, fused", d->name, label);
    int rc = run_json(c, chain, json, cpu_opts, in, n_in);
    if (rc != PF_OK) {
        fail(c, NULL, "in a pipeline (%s) on the CPU: %s", label, chain->err);
        return -1;
    }
    pc_run unf;
    static const char *const unfused[] = {"backend", "cpu", "fusion", "false", NULL};
    doing("stage %s: the pipeline %s on the CPU, unfused", d->name, label);
    rc = run_json(c, &unf, json, unfused, in, n_in);
    int same = rc == PF_OK && runs_agree(chain, &unf, -1, why, sizeof why);
    if (rc != PF_OK)
        copy_text(why, sizeof why, unf.err);
    run_free(&unf);
    if (!same)
        fail(c, "a point op must give the same bits whichever row function piece computes it",
             "fused against unfused on the CPU (%s): %s", label, why);
    else
        pass(c, "fused against unfused on the CPU (%s): the same bits", label);
    if (d->kind != PF_STAGE_POINT)
        return 0;

    pf_unit_info u;
    if (unit_of_s(chain, &u) < 0) {
        fail(c, NULL, "fusion: stage s is in no launch unit of the plan");
    } else if (!d->point_source) {
        warn(c,
             "fusion: no point source, so on the GPU the stage cannot join the fused kernel "
             "of %s: it costs a launch of its own and a trip through memory",
             label);
    } else if (u.n_stages == 4 && u.fused) {
        pass(c, "fusion: %s is one launch unit", label);
    } else {
        fail(c, "report this to the pipefuse developers with the plugin",
             "fusion: %s did not fuse (the unit holding it has %d stage(s))", label, u.n_stages);
    }
    if (!d->point_source)
        return 0;
    int n = 0;
    doing("stage %s: NVRTC compile of %s", d->name, label);
    rc = pf_pipeline_build_kernels(chain->p, c->o.arch, c->o.dump_dir, &n);
    if (rc == PF_OK)
        pass(c, "NVRTC compiles the fused kernel of %s for sm_%d%s%s", label, c->o.arch,
             c->o.dump_dir ? "; source in " : "", c->o.dump_dir ? c->o.dump_dir : "");
    else if (rc == PF_UNSUPPORTED)
        skip(c, "NVRTC compile: skipped (%s)", pf_pipeline_errmsg(chain->p));
    else
        fail(c,
             "the op header must compile as CUDA C++ after pipefuse/point.h alone: include "
             "nothing else, declare every function PF_POINT_FN, use the PF_* maths macros, "
             "and keep point_fn and params_type equal to the names in the header (rerun with "
             "--dump-kernels DIR to see the generated source)",
             "NVRTC cannot compile the fused kernel of %s: %s", label,
             pf_pipeline_errmsg(chain->p));
    return 0;
}

/* ---- GPU ----------------------------------------------------------------------------------- */

enum { G_CPU, G_FUSED, G_BANDED, G_DETERMINISM, G_COUNT };
static const char *const gpu_check_names[G_COUNT] = {
    "CPU against GPU", "fused against unfused on the GPU", "banded against whole on the GPU",
    "GPU determinism (graph replay, eager launches, run to run)"};
static const char *const gpu_fixes[G_COUNT] = {
    "make the CUDA code compute what the CPU code does: share the per-pixel maths in a "
    "PF_POINT_FN header both include, and keep #ifdef __CUDACC__ out of op headers",
    "the precompiled kernel (PF_POINT_CUDA) and the NVRTC one come from the same op header; "
    "make the op free of #ifdef __CUDACC_RTC__ and of reads of anything but its arguments",
    "a launch covers rows a->region.y0 .. y1 - 1 only; compute each row from the inputs, "
    "never from output rows of another launch",
    "launch on a->stream only, never synchronise or allocate in run_cuda (the launches are "
    "captured into a CUDA Graph), read params from a->params (device memory), and combine "
    "reduce partials in a fixed order, without floating-point atomics"};

typedef struct gpu_result {
    int failed[G_COUNT], ran[G_COUNT];
    char why[G_COUNT][1200];
} gpu_result;

static void gpu_fail(gpu_result *g, int which, const char *fmt, ...) PC_PRINTF(3, 4);
static void gpu_fail(gpu_result *g, int which, const char *fmt, ...)
{
    g->ran[which] = 1;
    if (g->failed[which]++)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->why[which], sizeof g->why[which], fmt, ap);
    va_end(ap);
}

/* Runs json on the GPU with opts; 1 when it ran, 0 when there is no device (c->gpu is
   then -1), -1 when it failed (recorded against check `which`). */
static int gpu_run(pc *c, gpu_result *g, int which, const char *what, pc_run *r, const char *json,
                   const char *const *opts, const pc_img *in, int n_in)
{
    int rc = run_json(c, r, json, opts, in, n_in);
    if (rc == PF_NO_DEVICE) {
        const char *why = strstr(r->err, "backend cuda: ");
        c->gpu = -1;
        copy_text(c->gpu_why, sizeof c->gpu_why, why ? why + strlen("backend cuda: ") : r->err);
        return 0;
    }
    if (rc != PF_OK) {
        gpu_fail(g, which, "%s: %s (%s)", what, r->err, pf_status_name(rc));
        return -1;
    }
    c->gpu = 1;
    return 1;
}

static void gpu_compare(gpu_result *g, int which, const char *what, const pc_run *a,
                        const pc_run *b, double tol)
{
    char why[1024];
    g->ran[which] = 1;
    if (!runs_agree(a, b, tol, why, sizeof why))
        gpu_fail(g, which, "%s: %s", what, why);
}

static void report_gpu_skips(pc *c, const char *why)
{
    for (int i = 0; i < G_COUNT; i++)
        skip(c, "%s: skipped (%s)", gpu_check_names[i], why);
    c->gpu_skips += G_COUNT;
}

static void check_gpu(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
                      const char *const *set_names, pc_img *in, pc_run *cpu, const char *chain_json,
                      pc_run *chain)
{
    static const char *const unfused[] = {"backend", "cuda", "fusion", "false", NULL};
    static const char *const fused[] = {"backend", "cuda", "fusion", "true", NULL};
    static const char *const eager[] = {"backend", "cuda", "graph", "false", NULL};
    static const char *const banded[] = {"backend", "cuda", "max_launch_ms", "0.0001", NULL};
    char json[16384], what[256];
    const int n_in = d->n_inputs;
    const double tol = c->o.tol;
    gpu_result g;
    memset(&g, 0, sizeof g);
    if (c->gpu < 0) {
        report_gpu_skips(c, "no CUDA device");
        return;
    }
    if (!has_cuda(d)) {
        report_gpu_skips(c, "the stage has no CUDA implementation");
        return;
    }
    pc_run a = {0}, b = {0}, e = {0};
    for (int s = 0; s < n_sets; s++) {
        if (!sets[s].ok || !cpu[s].p || json_single(json, sizeof json, c, d, &sets[s]) != 0)
            continue;
        snprintf(what, sizeof what, "the stage alone, %s, unfused", set_names[s]);
        doing("stage %s: GPU run, %s", d->name, what);
        int rc = gpu_run(c, &g, G_CPU, what, &a, json, unfused, in, n_in);
        if (rc == 0)
            goto no_device;
        if (rc > 0)
            gpu_compare(&g, G_CPU, what, &cpu[s], &a, tol);
        snprintf(what, sizeof what, "the stage alone, %s, fused kernel", set_names[s]);
        doing("stage %s: GPU run, %s", d->name, what);
        rc = gpu_run(c, &g, G_CPU, what, &b, json, fused, in, n_in);
        if (rc > 0) {
            gpu_compare(&g, G_CPU, what, &cpu[s], &b, tol);
            if (a.status == PF_OK)
                gpu_compare(&g, G_FUSED, set_names[s], &a, &b, tol);
            /* Graph replay (the default) against eager launches, and run to run. */
            doing("stage %s: GPU run, %s, eager launches", d->name, set_names[s]);
            if (gpu_run(c, &g, G_DETERMINISM, "eager launches", &e, json, eager, in, n_in) > 0)
                gpu_compare(&g, G_DETERMINISM, "graph replay against eager launches", &b, &e, -1);
            run_free(&e);
            memset(&e, 0, sizeof e);
            e.p = b.p;
            e.n_out = b.n_out;
            doing("stage %s: GPU run, %s, again", d->name, set_names[s]);
            if (run_again(&e, in, n_in) == PF_OK)
                gpu_compare(&g, G_DETERMINISM, "a second run", &b, &e, -1);
            else
                gpu_fail(&g, G_DETERMINISM, "a second run: %s", e.err);
            e.p = NULL;
            run_free(&e);
        }
        /* Bands: a tiny launch budget splits every unit into bands of rows. */
        if (s == 0 && rc > 0) {
            doing("stage %s: GPU run in bands", d->name);
            if (gpu_run(c, &g, G_BANDED, "banded", &e, json, banded, in, n_in) > 0) {
                pf_unit_info u;
                if (unit_of_s(&e, &u) >= 0 && u.bands > 1)
                    gpu_compare(&g, G_BANDED, "in bands against whole", &b, &e,
                                d->kind == PF_STAGE_REDUCE ? tol : -1);
                else
                    g.ran[G_BANDED] = 0;
            }
            run_free(&e);
        }
        run_free(&a);
        run_free(&b);
    }
    /* Between built-in stages, fused and not. */
    if (chain_json && chain->p) {
        doing("stage %s: GPU run between built-in stages", d->name);
        int rc = gpu_run(c, &g, G_CPU, "between built-in stages, fused", &a, chain_json, fused, in,
                         n_in);
        if (rc == 0)
            goto no_device;
        if (rc > 0)
            gpu_compare(&g, G_CPU, "between built-in stages, fused", chain, &a, tol);
        if (gpu_run(c, &g, G_CPU, "between built-in stages, unfused", &b, chain_json, unfused, in,
                    n_in) > 0) {
            gpu_compare(&g, G_CPU, "between built-in stages, unfused", chain, &b, tol);
            if (a.status == PF_OK)
                gpu_compare(&g, G_FUSED, "between built-in stages", &a, &b, tol);
        }
        run_free(&a);
        run_free(&b);
    }
    for (int i = 0; i < G_COUNT; i++) {
        if (g.failed[i])
            fail(c, gpu_fixes[i], "%s: %s", gpu_check_names[i], g.why[i]);
        else if (!g.ran[i])
            skip(c, "%s: skipped (%s)", gpu_check_names[i],
                 i == G_BANDED ? "the planner did not split this stage into bands"
                               : "nothing to compare");
        else
            pass(c, "%s%s", gpu_check_names[i],
                 i == G_CPU || i == G_FUSED ? " (within the tolerance)" : ": the same bits");
    }
    return;
no_device:
    run_free(&a);
    run_free(&b);
    run_free(&e);
    report_gpu_skips(c, "no CUDA device");
}

/* ---- A stage ------------------------------------------------------------------------------------ */

static void check_stage(pc *c, const pf_stage_desc *d)
{
    static const char *const set_names[2] = {"default params", "random params"};
    pc_params sets[2];
    pc_img in[PF_MAX_INPUTS];
    pc_run cpu[2], chain;
    char why[512], chain_json[16384];
    int n_in = d->n_inputs, made = 0;
    memset(cpu, 0, sizeof cpu);
    memset(&chain, 0, sizeof chain);
    memset(sets, 0, sizeof sets);
    printf("\nstage %s (%s, %d input%s)\n", d->name, kind_names[d->kind], n_in,
           n_in > 1 ? "s" : "");
    for (; made < n_in; made++) {
        if (img_new(&in[made], PC_W, PC_H) != 0)
            break;
        img_random(c, &in[made]);
    }
    if (made < n_in) {
        fail(c, NULL, "out of memory for the test images");
        goto out;
    }
    if (make_params(c, d, 0, &sets[0], why, sizeof why) != 0) {
        fail(c, "the defaults must be valid params", "default params: %s", why);
        goto out;
    }
    if (make_params(c, d, 1, &sets[1], why, sizeof why) != 0 && d->n_params > 0)
        skip(c, "random params: %s", why);
    if (d->n_params == 0)
        sets[1].ok = 0; /* nothing to vary */

    if (check_cpu_runs(c, d, sets, 2, set_names, in, cpu) != 0)
        goto out;
    check_determinism(c, d, &sets[0], in, &cpu[0]);
    for (int s = 0; s < 2; s++) {
        if (!sets[s].ok)
            continue;
        if (d->kind == PF_STAGE_POINT)
            check_point_rows(c, d, &sets[s], set_names[s], in, n_in);
        else if (d->kind == PF_STAGE_REDUCE)
            check_reduce(c, d, &sets[s], set_names[s], in, n_in);
        else
            check_regions(c, d, &sets[s], set_names[s], in, n_in);
        if (d->kind == PF_STAGE_STENCIL)
            check_radius(c, d, &sets[s], set_names[s], n_in);
    }
    int have_chain = check_chain(c, d, &sets[0], in, chain_json, sizeof chain_json, &chain) == 0;
    check_gpu(c, d, sets, 2, set_names, in, cpu, have_chain ? chain_json : NULL, &chain);
out:
    run_free(&cpu[0]);
    run_free(&cpu[1]);
    run_free(&chain);
    params_free(&sets[0]);
    params_free(&sets[1]);
    for (int k = 0; k < made; k++)
        img_free(&in[k]);
}

/* ---- The file and its descriptor ----------------------------------------------------------- */

static int is_identifier(const char *s)
{
    if (!s || !*s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

static int unsafe_mode(const struct stat *st)
{
    return (st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_uid != 0 && st->st_uid != geteuid());
}

/* The engine's rule for plugin files and their directories. 0 when safe to load. */
static int check_file(pc *c)
{
    char dir[PATH_MAX];
    struct stat ds;
    printf("\nfile\n");
    if (!S_ISREG(c->st.st_mode)) {
        fail(c, "pass the plugin's .so file", "%s is not a regular file", c->real);
        return -1;
    }
    if (unsafe_mode(&c->st)) {
        char fix[PATH_MAX + 64];
        snprintf(fix, sizeof fix, "chmod go-w %s (and own the file yourself)", c->real);
        fail(c, fix,
             "%s: other users can write to it (mode %03o, owner uid %u): the engine "
             "refuses such a plugin, and this check does not load it",
             c->real, (unsigned)(c->st.st_mode & 0777), (unsigned)c->st.st_uid);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s", c->real);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    if (stat(dir, &ds) != 0) {
        fail(c, NULL, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (unsafe_mode(&ds)) {
        char fix[PATH_MAX + 128];
        snprintf(fix, sizeof fix,
                 "chmod go-w %s, or move the plugin to a directory only you "
                 "can write to",
                 dir);
        fail(c, fix,
             "%s: other users can write to the plugin's directory (mode %03o, owner uid "
             "%u): the engine refuses it, and this check does not load the plugin",
             dir, (unsigned)(ds.st_mode & 0777), (unsigned)ds.st_uid);
        return -1;
    }
    pass(c, "%s: only its owner can write to it or its directory (mode %03o)", c->real,
         (unsigned)(c->st.st_mode & 0777));
    return 0;
}

static void plugin_host_log(int level, const char *msg)
{
    printf("        (plugin log: %s)\n", msg ? msg : "");
}

static const char *const fix_table =
    "correct the row in the parameter table; the engine refuses the plugin otherwise";

/* The parameter table of stage label (d copied to full size). Returns failures found. */
static int check_params(pc *c, const char *label, const pf_stage_desc *d)
{
    int bad = 0;
    if (d->n_params < 0 || (d->n_params > 0 && !d->params)) {
        fail(c, "use PF_PARAMS(table) to set .params and .n_params together",
             "%s: bad parameter table (n_params %d, params %s)", label, d->n_params,
             d->params ? "set" : "NULL");
        return 1;
    }
    for (int i = 0; i < d->n_params; i++) {
        const pf_param_desc *pd = &d->params[i];
        char pn[128];
        snprintf(pn, sizeof pn, "%s.%s", label, is_identifier(pd->name) ? pd->name : "?");
        if (!is_identifier(pd->name)) {
            fail(c, "name parameters as C identifiers (letters, digits, _)",
                 "%s: parameter %d has no valid name ('%s')", label, i,
                 pd->name ? pd->name : "NULL");
            bad++;
            continue;
        }
        for (int j = 0; j < i; j++)
            if (d->params[j].name && strcmp(d->params[j].name, pd->name) == 0) {
                fail(c, "give each parameter its own name", "%s: declared twice (rows %d and %d)",
                     pn, j, i);
                bad++;
            }
        if (!pd->doc || !pd->doc[0]) {
            fail(c, "add a doc string to the row: `pipefuse stages` shows it to users",
                 "%s: no doc string", pn);
            bad++;
        }
        if ((unsigned)pd->type > PF_PARAM_FLOAT_ARRAY) {
            fail(c, fix_table, "%s: unknown type %d", pn, (int)pd->type);
            bad++;
            continue;
        }
        size_t bytes = param_bytes(pd);
        if (pd->offset + bytes > d->params_size || pd->offset % 4) {
            fail(c,
                 "bind the row with PF_OFFSET(struct, field) and set .params_size = "
                 "sizeof(struct) (PF_POINT_DESC does both for point stages)",
                 "%s: its field (offset %zu, %zu bytes) does not fit the %zu-byte params struct",
                 pn, pd->offset, bytes, d->params_size);
            bad++;
            continue;
        }
        for (int j = 0; j < i; j++) {
            const pf_param_desc *q = &d->params[j];
            if ((unsigned)q->type <= PF_PARAM_FLOAT_ARRAY && q->name &&
                pd->offset < q->offset + param_bytes(q) && q->offset < pd->offset + bytes) {
                fail(c, "each row needs a field of its own (a copied PF_OFFSET?)",
                     "%s and %s.%s share bytes of the params struct", pn, label, q->name);
                bad++;
            }
        }
        int ranged = pd->type == PF_PARAM_FLOAT || pd->type == PF_PARAM_INT ||
                     pd->type == PF_PARAM_FLOAT_ARRAY;
        if (ranged && (isnan(pd->min) || isnan(pd->max))) {
            fail(c, "write PF_NO_MIN or PF_NO_MAX for a side without a bound",
                 "%s: a bound of its range is NaN", pn);
            bad++;
            continue;
        }
        if (ranged && pd->min > pd->max && c->abi_minor >= 1) {
            fail(c,
                 "swap the bounds, or write PF_NO_MIN / PF_NO_MAX for a side without one (min > "
                 "max no longer means unbounded; the engine refuses the plugin)",
                 "%s: min %g is above max %g", pn, pd->min, pd->max);
            bad++;
            continue;
        }
        if (ranged && pd->min > pd->max)
            warn(c,
                 "%s: min %g > max %g means unbounded for a plugin built for ABI 1.0; rebuilt "
                 "against this pipefuse it is refused: write PF_NO_MIN / PF_NO_MAX",
                 pn, pd->min, pd->max);
        if (pd->type == PF_PARAM_ENUM) {
            int n = enum_count(pd);
            if (n == 0 || pd->def < 0 || pd->def >= n || pd->def != floor(pd->def)) {
                fail(c, fix_table, "%s: enum default %g is not an index into its %d choices", pn,
                     pd->def, n);
                bad++;
            }
        } else if (pd->type == PF_PARAM_FLOAT_ARRAY) {
            if (pd->count <= 0 || !pd->def_array) {
                fail(c, "set .count and .def_array (count defaults)",
                     "%s: float array without count or defaults", pn);
                bad++;
            } else {
                for (int k = 0; k < pd->count; k++)
                    if (!in_range(pd, pd->def_array[k])) {
                        fail(c, fix_table, "%s: default[%d] = %g is outside its range [%g, %g]", pn,
                             k, pd->def_array[k], pd->min, pd->max);
                        bad++;
                        break;
                    }
            }
        } else if (!in_range(pd, pd->def)) {
            fail(c, fix_table, "%s: default %g is outside its range [%g, %g]", pn, pd->def, pd->min,
                 pd->max);
            bad++;
        } else if (pd->type == PF_PARAM_BOOL && pd->def != 0 && pd->def != 1) {
            warn(c, "%s: a bool default of %g (taken as true)", pn, pd->def);
        } else if (pd->type == PF_PARAM_INT && pd->def != floor(pd->def)) {
            warn(c, "%s: an int default of %g (truncated to %d)", pn, pd->def, (int)pd->def);
        }
    }
    return bad;
}

/* ---- What a point op may call ---------------------------------------------------------------- */

/* The maths functions an op may call besides the pf_* helpers and PF_* macros of point.h:
   the C99 float functions that CUDA provides under the same names (docs/plugins.md lists
   them with how closely CPU and GPU agree). */
static const char *const op_maths[] = {
    "sqrtf",  "cbrtf", "powf",      "expf",   "exp2f",  "expm1f", "logf",  "log2f",  "log10f",
    "log1pf", "sinf",  "cosf",      "tanf",   "asinf",  "acosf",  "atanf", "atan2f", "sinhf",
    "coshf",  "tanhf", "floorf",    "ceilf",  "roundf", "truncf", "rintf", "fabsf",  "fminf",
    "fmaxf",  "fmodf", "copysignf", "hypotf", "fmaf",   NULL};

/* Words followed by '(' that are not calls. */
static const char *const op_keywords[] = {"if",      "for", "while", "switch",   "return", "sizeof",
                                          "defined", "do",  "case",  "_Alignof", NULL};

static int in_list(const char *const *list, const char *w, size_t n)
{
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == n && strncmp(list[i], w, n) == 0)
            return 1;
    return 0;
}

static int ident_char(char ch)
{
    return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9');
}

/* The first call in an op header's text to a function it may not use: one that is not
   defined in the text itself (as a function, or a macro), not a pf_ or PF_ name of
   point.h and not in op_maths. Comments and literals are skipped. Returns 1 with the name
   and its line (of the header, not counting a leading #line) in *name / *line, else 0. */
static int forbidden_call(const char *src, char *name, size_t name_size, int *line)
{
    size_t len = strlen(src);
    char *t = malloc(len + 1);
    if (!t)
        return 0;
    /* The text with comments and literals blanked (newlines kept, for line numbers). */
    for (size_t i = 0; i <= len; i++) {
        if (src[i] == '/' && src[i + 1] == '/') {
            while (i < len && src[i] != '\n')
                t[i++] = ' ';
            t[i] = src[i];
        } else if (src[i] == '/' && src[i + 1] == '*') {
            t[i] = t[i + 1] = ' ';
            for (i += 2; i < len && !(src[i] == '*' && src[i + 1] == '/'); i++)
                t[i] = src[i] == '\n' ? '\n' : ' ';
            if (i < len)
                t[i] = t[i + 1] = ' ', i++;
        } else if (src[i] == '"' || src[i] == '\'') {
            char q = src[i];
            t[i] = ' ';
            for (i++; i < len && src[i] != q && src[i] != '\n'; i++) {
                t[i] = ' ';
                if (src[i] == '\\' && i + 1 < len)
                    t[++i] = ' ';
            }
            if (i < len)
                t[i] = src[i] == '\n' ? '\n' : ' ';
        } else {
            t[i] = src[i];
        }
    }
    /* Pass 1: names defined here (a name followed by its parameter list and then '{' or
       ';' at file scope, or after #define). Pass 2: calls of anything else. */
    int found = 0, first_line = strncmp(t, "#line", 5) == 0 ? 0 : 1;
    char(*defined)[64] = calloc(512, sizeof *defined);
    int n_def = 0;
    for (int pass = 0; pass < 2 && defined && !found; pass++) {
        int depth = 0, ln = first_line;
        for (size_t i = 0; i < len && !found; i++) {
            char ch = t[i];
            if (ch == '\n')
                ln++;
            else if (ch == '{')
                depth++;
            else if (ch == '}')
                depth--;
            if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) ||
                (i > 0 && ident_char(t[i - 1])))
                continue;
            size_t n = 0;
            while (ident_char(t[i + n]))
                n++;
            size_t j = i + n;
            int after_define = 0;
            for (size_t k = i; k > 0 && t[k - 1] != '\n'; k--)
                if (t[k - 1] == '#') {
                    after_define = strncmp(t + k, "define", 6) == 0 && k + 6 <= i;
                    break;
                }
            while (t[j] == ' ' || t[j] == '\t')
                j++;
            if (t[j] != '(') {
                if (pass == 0 && after_define && n < 64 && n_def < 512)
                    snprintf(defined[n_def++], 64, "%.*s", (int)n, t + i);
                i += n - 1;
                continue;
            }
            /* past the parentheses */
            size_t k = j;
            for (int par = 0; t[k]; k++) {
                par += t[k] == '(';
                par -= t[k] == ')';
                if (par == 0)
                    break;
            }
            for (k++; t[k] == ' ' || t[k] == '\t' || t[k] == '\n'; k++)
                ;
            int definition = after_define || (depth == 0 && (t[k] == '{' || t[k] == ';'));
            if (pass == 0 && definition && n < 64 && n_def < 512)
                snprintf(defined[n_def++], 64, "%.*s", (int)n, t + i);
            if (pass == 1 && !definition && !in_list(op_keywords, t + i, n) &&
                !in_list(op_maths, t + i, n) && strncmp(t + i, "pf_", 3) != 0 &&
                strncmp(t + i, "PF_", 3) != 0) {
                int known = 0;
                for (int d = 0; d < n_def && !known; d++)
                    known = strlen(defined[d]) == n && strncmp(defined[d], t + i, n) == 0;
                if (!known) {
                    snprintf(name, name_size, "%.*s", (int)n, t + i);
                    *line = ln;
                    found = 1;
                }
            }
            i += n - 1;
        }
    }
    free(defined);
    free(t);
    return found;
}

/* One stage descriptor, as the engine reads it. */
static void check_stage_decl(pc *c, const pf_stage_desc *src, int index, const pf_plugin_desc *pd)
{
    char label[96];
    if (!src) {
        fail(c, "list only defined stages", "stage %d of %d is NULL", index + 1, pd->n_stages);
        return;
    }
    if (src->size < offsetof(pf_stage_desc, cost)) {
        fail(c, "set .size = PF_STAGE_DESC_SIZE in every stage descriptor",
             "stage %d: descriptor too small (%u bytes)", index + 1, src->size);
        return;
    }
    pf_stage_desc d;
    memset(&d, 0, sizeof d);
    memcpy(&d, src, src->size < sizeof d ? src->size : sizeof d);
    snprintf(label, sizeof label, "%s", is_identifier(d.name) ? d.name : "?");
    int before = c->failed;
    if (!is_identifier(d.name))
        fail(c, "name stages as C identifiers (letters, digits, _): pipeline files refer to them",
             "stage %d: name '%s' is not an identifier", index + 1, d.name ? d.name : "NULL");
    for (int j = 0; j < index && is_identifier(d.name); j++) {
        const pf_stage_desc *o = pd->stages[j];
        if (o && o->size >= offsetof(pf_stage_desc, cost) && o->name &&
            strcmp(o->name, d.name) == 0)
            fail(c, "give each stage its own name", "%s: two stages of the plugin have this name",
                 label);
    }
    if (!d.doc || !d.doc[0])
        fail(c, "set .doc: `pipefuse stages` shows it to users", "%s: no doc string", label);
    if ((unsigned)d.kind > PF_STAGE_REDUCE) {
        fail(c, "set .kind to PF_STAGE_POINT, _STENCIL, _RESAMPLE or _REDUCE",
             "%s: unknown kind %d", label, (int)d.kind);
        return;
    }
    if (d.n_inputs < 1 || d.n_inputs > PF_MAX_INPUTS)
        fail(c, "set .n_inputs", "%s: takes %d inputs; 1 to %d are allowed", label, d.n_inputs,
             PF_MAX_INPUTS);
    const char *missing = NULL;
    switch (d.kind) {
    case PF_STAGE_POINT:
        missing = !d.point_row ? "point_row" : NULL;
        break;
    case PF_STAGE_STENCIL:
        missing = !d.run_cpu ? "run_cpu" : !d.radius ? "radius" : NULL;
        break;
    case PF_STAGE_RESAMPLE:
        missing = !d.run_cpu ? "run_cpu" : !d.shape ? "shape" : NULL;
        break;
    case PF_STAGE_REDUCE:
        missing = !d.run_cpu       ? "run_cpu"
                  : !d.shape       ? "shape"
                  : !d.partial_len ? "partial_len"
                  : !d.combine     ? "combine"
                                   : NULL;
        break;
    }
    if (missing)
        fail(c, "every stage of this kind needs it (docs/plugins.md lists what each kind needs)",
             "%s: a %s stage without %s", label, kind_names[d.kind], missing);
    if (d.kind == PF_STAGE_POINT && d.point_source) {
        if (!d.point_fn || !d.params_type)
            fail(c, "use PF_POINT_DESC(fn, T, source), which sets all three",
                 "%s: point_source without point_fn or params_type", label);
        else if (!strstr(d.point_source, d.point_fn) || !strstr(d.point_source, d.params_type))
            fail(c,
                 "point_fn and params_type must name the op and its params struct as the "
                 "header spells them",
                 "%s: the point source does not mention %s", label,
                 !strstr(d.point_source, d.point_fn) ? d.point_fn : d.params_type);
        char callee[64];
        int line = 0;
        if (forbidden_call(d.point_source, callee, sizeof callee, &line))
            fail(c,
                 "a point op may call only its own PF_POINT_FN functions, the pf_* helpers and "
                 "PF_* macros of pipefuse/point.h, and the maths functions docs/plugins.md "
                 "lists (no I/O, memory or process functions: the op runs once per pixel, on "
                 "the GPU too)",
                 "%s: the op header calls %s() (line %d), which a point op may not use", label,
                 callee, line);
    }
    int bad_params = check_params(c, label, &d);
    if (!bad_params && (d.check || (d.kind == PF_STAGE_STENCIL && d.radius))) {
        pc_params ps;
        char why[512];
        doing("stage %s: check() on its defaults", label);
        if (make_params(c, &d, 0, &ps, why, sizeof why) != 0) {
            fail(c, "make the defaults pass the stage's own check()", "%s: %s", label, why);
        } else if (d.kind == PF_STAGE_STENCIL && d.radius) {
            doing("stage %s: radius() on its defaults", label);
            int r = d.radius(ps.st);
            if (r < 0 || r > PF_MAX_RADIUS)
                fail(c,
                     "return the farthest distance the stage reads, 0 to PF_MAX_RADIUS; a "
                     "stage needing more must work another way (a resample, or passes)",
                     "%s: radius() returns %d with the default params; the engine allows 0 to "
                     "%d (PF_MAX_RADIUS)",
                     label, r, PF_MAX_RADIUS);
        }
        params_free(&ps);
    }
    if (c->failed == before && d.n_params == 0)
        pass(c, "%s: %s, %d input%s, no parameters", label, kind_names[d.kind], d.n_inputs,
             d.n_inputs > 1 ? "s" : "");
    else if (c->failed == before)
        pass(c,
             "%s: %s, %d input%s, %d parameter%s: documented, names unique, defaults in "
             "range",
             label, kind_names[d.kind], d.n_inputs, d.n_inputs > 1 ? "s" : "", d.n_params,
             d.n_params == 1 ? "" : "s");
    if (d.kind == PF_STAGE_POINT && !d.point_source)
        warn(c,
             "%s: no point source (point_source is NULL): it cannot fuse, so each use costs a "
             "launch and a trip through memory",
             label);
    if (!has_cuda(&d))
        warn(c, "%s: no CUDA implementation (%s is NULL): pipelines using it run on the CPU%s",
             label, d.kind == PF_STAGE_POINT ? "point_cuda" : "run_cuda",
             " (was the plugin built without its CUDA sources?)");
    if (d.kind == PF_STAGE_REDUCE && !d.columns)
        warn(c, "%s: no column names (columns is NULL): table outputs get numbered columns", label);
}

/* Opens the file and checks its descriptor. Returns the dlopen handle (to close at the
   end) when the engine can be asked to load it, NULL when not; *pdo gets the descriptor. */
static void *check_descriptor(pc *c, const pf_plugin_desc **pdo)
{
    static const pf_host_api host = {sizeof(pf_host_api), PF_ABI_VERSION, plugin_host_log};
    printf("\ndescriptor\n");
    *pdo = NULL;
    doing("loading %s (its constructors run)", c->real);
    void *h = dlopen(c->real, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fail(c,
             "an undefined symbol usually means a function declared but not defined, or a "
             "library not linked; `ldd -r FILE` lists them",
             "cannot load it: %s", dlerror());
        return NULL;
    }
    pf_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, PF_PLUGIN_ENTRY_NAME);
    if (!entry) {
        fail(c,
             "define the entry with PF_DEFINE_PLUGIN(name, version, doc, stages) in one "
             "source file (it is exported even when everything else is hidden)",
             "not a pipefuse plugin: it exports no %s", PF_PLUGIN_ENTRY_NAME);
        dlclose(h);
        return NULL;
    }
    doing("calling %s", PF_PLUGIN_ENTRY_NAME);
    const pf_plugin_desc *pd = entry(&host);
    if (!pd) {
        fail(c, "return the address of a static pf_plugin_desc", "%s returned NULL",
             PF_PLUGIN_ENTRY_NAME);
        dlclose(h);
        return NULL;
    }
    if (pd->size < offsetof(pf_plugin_desc, n_stages) + sizeof(int)) {
        fail(c, "set .size = sizeof(pf_plugin_desc) (PF_DEFINE_PLUGIN does)",
             "plugin descriptor too small (%u bytes)", pd->size);
        dlclose(h);
        return NULL;
    }
    unsigned major = pd->abi_version >> 16, minor = pd->abi_version & 0xffff;
    c->abi_minor = minor;
    if (major != PF_ABI_MAJOR || minor > PF_ABI_MINOR) {
        fail(c,
             "rebuild the plugin against this pipefuse's headers (find_package(pipefuse) or "
             "pkg-config pipefuse finds them): a plugin built for ABI M.m loads in engines "
             "of the same major M and minor m or newer",
             "built for plugin ABI %u.%u; this pipefuse supports ABI %d.0 to %d.%d", major, minor,
             PF_ABI_MAJOR, PF_ABI_MAJOR, PF_ABI_MINOR);
        dlclose(h);
        return NULL;
    }
    if (!pd->name || !pd->name[0] || pd->n_stages <= 0 || !pd->stages) {
        fail(c,
             "PF_DEFINE_PLUGIN(name, version, doc, stages) with a name and a non-empty "
             "array of stages",
             "the plugin descriptor has %s", !pd->name || !pd->name[0] ? "no name" : "no stages");
        dlclose(h);
        return NULL;
    }
    pass(c, "exports %s: plugin '%s' %s, built for ABI %u.%u (this pipefuse: %d.%d), %d stage%s",
         PF_PLUGIN_ENTRY_NAME, pd->name, pd->version ? pd->version : "(no version)", major, minor,
         PF_ABI_MAJOR, PF_ABI_MINOR, pd->n_stages, pd->n_stages > 1 ? "s" : "");
    if (!pd->version || !pd->version[0])
        warn(c, "the plugin has no version string");
    if (!pd->doc || !pd->doc[0])
        warn(c, "the plugin has no doc string (`pipefuse info` shows it)");
    for (int i = 0; i < pd->n_stages; i++)
        check_stage_decl(c, pd->stages[i], i, pd);
    *pdo = pd;
    return h;
}

/* ---- The engine ---------------------------------------------------------------------------- */

static int same_file(const char *path, const struct stat *st)
{
    struct stat s2;
    return path && stat(path, &s2) == 0 && s2.st_dev == st->st_dev && s2.st_ino == st->st_ino;
}

/* msg with every occurrence of the private link's path replaced by the real file's. */
static void unlinked_message(const pc *c, const char *msg, char *out, size_t size)
{
    size_t o = 0, n = strlen(g_link);
    while (*msg && o + 1 < size) {
        if (n && strncmp(msg, g_link, n) == 0) {
            o += (size_t)snprintf(out + o, size - o, "%s", c->real);
            if (o >= size)
                o = size - 1;
            msg += n;
        } else {
            out[o++] = *msg++;
        }
    }
    out[o] = 0;
}

static int create_engine(pc *c, const char *path, pf_engine **out)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.use_env_path = 0;
    cfg.plugin_path = path;
    cfg.threads = c->common->threads;
    cfg.log = engine_log;
    cfg.log_user = c;
    return pf_engine_create(&cfg, out);
}

/* Creates c->eng: the built-in plugins and the file. 0 when it loaded. */
static int load_engine(pc *c, const pf_plugin_desc *pd)
{
    printf("\nengine\n");
    pf_engine *e = NULL;
    doing("loading the built-in plugins");
    if (create_engine(c, NULL, &e) != PF_OK) {
        fail(c, "check the pipefuse installation (`pipefuse info`)",
             "the built-in plugins do not load: %s", pf_engine_errmsg(e));
        pf_engine_destroy(e);
        return -1;
    }
    for (int i = 0; i < pf_engine_stage_count(e); i++) {
        const char *file;
        pf_engine_stage(e, i, &file, NULL);
        if (same_file(file, &c->st)) {
            pass(c, "loads: it is one of the built-in plugins (%d stages in all)",
                 pf_engine_stage_count(e));
            c->eng = e;
            return 0;
        }
    }
    for (int i = 0; pd && i < pd->n_stages; i++) {
        const pf_stage_desc *s = pd->stages[i];
        if (!s || s->size < offsetof(pf_stage_desc, cost) || !s->name)
            continue;
        for (int k = 0; k < pf_engine_stage_count(e); k++) {
            const char *file, *plugin;
            const pf_stage_desc *b = pf_engine_stage(e, k, &file, &plugin);
            if (strcmp(b->name, s->name) == 0)
                fail(c, "rename the stage: stage names are shared by all loaded plugins",
                     "stage name '%s' is already taken by the built-in plugin %s (%s)", s->name,
                     plugin, file);
        }
    }
    pf_engine_destroy(e);
    e = NULL;

    /* The file alone in a private directory, named on the plugin path. */
    const char *tmp = getenv("TMPDIR");
    int n =
        snprintf(g_tmpdir, sizeof g_tmpdir, "%s/pipefuse-check-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof g_tmpdir || !mkdtemp(g_tmpdir)) {
        fail(c, "set TMPDIR to a directory you can write to",
             "cannot make a private directory "
             "(%s): %s",
             g_tmpdir, strerror(errno));
        g_tmpdir[0] = 0;
        return -1;
    }
    const char *base = strrchr(c->real, '/');
    base = base ? base + 1 : c->real;
    size_t bl = strlen(base);
    n = snprintf(g_link, sizeof g_link, "%s/%s%s%s", g_tmpdir, base[0] == '.' ? "p" : "", base,
                 bl > 3 && strcmp(base + bl - 3, ".so") == 0 ? "" : ".so");
    if (n < 0 || (size_t)n >= sizeof g_link || symlink(c->real, g_link) != 0) {
        fail(c, NULL, "cannot link the plugin into %s: %s", g_tmpdir, strerror(errno));
        g_link[0] = 0;
        return -1;
    }
    doing("loading the plugin in the engine, next to the built-in plugins");
    c->refused[0] = 0;
    int loaded = 0;
    if (create_engine(c, g_tmpdir, &e) == PF_OK)
        for (int i = 0; i < pf_engine_stage_count(e); i++) {
            const char *file;
            pf_engine_stage(e, i, &file, NULL);
            loaded += same_file(file, &c->st);
        }
    if (!loaded) {
        /* The engine skips a plugin it refuses, with a warning that says why. */
        char msg[4096];
        size_t len = strlen(c->refused);
        if (len && c->refused[len - 1] == '\n')
            c->refused[len - 1] = 0;
        unlinked_message(c, c->refused[0] ? c->refused : pf_engine_errmsg(e), msg, sizeof msg);
        fail(c,
             "see the failures above; `pipefuse stages` skips such a plugin with this "
             "warning, and pipelines using its stages fail",
             "the engine refuses it: %s", msg);
        pf_engine_destroy(e);
        return -1;
    }
    pass(c, "loads next to the built-in plugins (%d stages in all)", pf_engine_stage_count(e));
    c->eng = e;
    return 0;
}

/* ---- The command ------------------------------------------------------------------------------ */

static const char plugin_usage[] =
    "usage: pipefuse plugin check LIB.so [--stage NAME] [--arch N] [--seed N]\n"
    "                             [--tolerance T] [--dump-kernels DIR] [-v]\n"
    "\n"
    "Loads a plugin as the engine would and checks it: the file's permissions, the ABI\n"
    "version and descriptors, the parameter tables (defaults within range, names unique,\n"
    "docs present), then every stage on random images: CPU runs, determinism, regions\n"
    "(bands against the whole image, writes outside the band), fusion with built-in point\n"
    "stages, the NVRTC compile of point ops (no GPU needed) and, with a CUDA device, CPU\n"
    "against GPU, fused against unfused and banded against whole on the GPU.\n"
    "\n"
    "  --stage NAME       check only this stage (descriptor checks cover all)\n"
    "  --arch N           NVRTC target, sm_N (default 90)\n"
    "  --seed N           random images and params (default 1)\n"
    "  --tolerance T      |a - b| <= T * max(1, |a|) where results may differ by rounding\n"
    "                     (CPU against GPU, banded reduce tables; default 1e-4)\n"
    "  --dump-kernels DIR write the generated fused kernels' sources there\n"
    "  -v, --verbose      show the engine's notices\n"
    "\n"
    "Exit status: 0 no check failed (GPU checks without a device are skipped, not passed);\n"
    "1 a check failed; 2 bad command line.\n";

static int parse_number(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int plugin_check(pc *c)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (stat(c->o.file, &c->st) != 0 || !realpath(c->o.file, c->real)) {
        fprintf(stderr, "pipefuse plugin check: %s: %s\n", c->o.file, strerror(errno));
        return PF_EXIT_USAGE;
    }
    printf("pipefuse plugin check %s\n(pipefuse %s, plugin ABI %d.%d, seed %llu)\n", c->real,
           pf_version_string(), PF_ABI_MAJOR, PF_ABI_MINOR, c->o.seed);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            fprintf(stderr, "pipefuse plugin check: cannot guard signal %d: %s\n", sigs[i],
                    strerror(errno));
    if (atexit(on_exit_call) != 0)
        fprintf(stderr, "pipefuse plugin check: cannot guard exit()\n");
    g_guard = 1;

    void *handle = NULL;
    const pf_plugin_desc *pd = NULL;
    if (check_file(c) == 0)
        handle = check_descriptor(c, &pd);
    if (handle && load_engine(c, pd) == 0) {
        int found = 0;
        for (int i = 0; i < pf_engine_stage_count(c->eng); i++) {
            const char *file, *pname;
            const pf_stage_desc *d = pf_engine_stage(c->eng, i, &file, &pname);
            if (!same_file(file, &c->st) || (c->o.only && strcmp(c->o.only, d->name) != 0))
                continue;
            found++;
            snprintf(c->op, sizeof c->op, "%s.%s", pname, d->name);
            check_stage(c, d);
        }
        if (c->o.only && !found)
            fail(c, "name one of the plugin's stages (pipefuse stages lists them)",
                 "--stage %s: the plugin has no stage of that name", c->o.only);
    } else if (handle || c->failed) {
        printf("\nstages\n");
        skip(c, "stage runs: the plugin does not load");
    }
    g_guard = 0;
    pf_engine_destroy(c->eng);
    c->eng = NULL;
    cleanup_tmp();
    /* The plugin stays loaded until the process ends: its CUDA runtime, if any, may have
       registered exit handlers that must find it there. */
    (void)handle;

    printf("\nsummary: %d passed, %d failed, %d skipped, %d warning%s\n", c->passed, c->failed,
           c->skipped, c->warned, c->warned == 1 ? "" : "s");
    if (c->gpu_skips && c->gpu < 0)
        printf("GPU checks were skipped: %s.\nRun `pipefuse plugin check %s` on a machine with "
               "a CUDA device to complete them.\n",
               c->gpu_why, c->real);
    printf("result: %s\n", c->failed ? "FAIL" : "PASS");
    return c->failed ? PF_EXIT_FAILED : PF_EXIT_OK;
}

int cli_plugin(int argc, char **argv, const cli_common *common)
{
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(plugin_usage, argc < 1 ? stderr : stdout);
        return argc < 1 ? PF_EXIT_USAGE : PF_EXIT_OK;
    }
    if (strcmp(argv[0], "check") != 0) {
        fprintf(stderr, "pipefuse plugin: unknown subcommand '%s' (the one there is: check)\n",
                argv[0]);
        return PF_EXIT_USAGE;
    }
    pc c;
    memset(&c, 0, sizeof c);
    c.common = common;
    c.o.arch = 90;
    c.o.seed = 1;
    c.o.tol = 1e-4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double num;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(plugin_usage, stdout);
            return PF_EXIT_OK;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            c.o.verbose = 1;
        } else if (strcmp(a, "--stage") == 0 && v) {
            c.o.only = argv[++i];
        } else if (strcmp(a, "--dump-kernels") == 0 && v) {
            c.o.dump_dir = argv[++i];
        } else if (strcmp(a, "--arch") == 0 && v && parse_number(v, 50, 200, &num) == 0 &&
                   num == floor(num)) {
            c.o.arch = (int)num;
            i++;
        } else if (strcmp(a, "--seed") == 0 && v && parse_number(v, 0, 1e18, &num) == 0 &&
                   num == floor(num)) {
            c.o.seed = (unsigned long long)num;
            i++;
        } else if (strcmp(a, "--tolerance") == 0 && v && parse_number(v, 0, 1, &num) == 0) {
            c.o.tol = num;
            i++;
        } else if (a[0] == '-' || c.o.file) {
            fprintf(stderr, "pipefuse plugin check: unexpected argument '%s'%s\n", a,
                    a[0] == '-' && !v ? " (or its value is missing)" : "");
            fputs(plugin_usage, stderr);
            return PF_EXIT_USAGE;
        } else {
            c.o.file = a;
        }
    }
    if (!c.o.file) {
        fprintf(stderr, "pipefuse plugin check: no plugin file given\n");
        fputs(plugin_usage, stderr);
        return PF_EXIT_USAGE;
    }
    c.rng = 0x9e3779b97f4a7c15ull ^ (c.o.seed * 0xbf58476d1ce4e5b9ull);
    if (!c.rng)
        c.rng = 1;
    return plugin_check(&c);
}
