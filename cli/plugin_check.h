/* cli/plugin_check.h: what the files of `pipefuse plugin check` share (plugin_check.c
   has the overview). */
#ifndef PF_CLI_PLUGIN_CHECK_H
#define PF_CLI_PLUGIN_CHECK_H

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

/* ---- Types and the report macros ---------------------------------------------------- */

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

/* One line of the report, counted: ok, FAIL with a line saying what to fix, skip, warn. */
enum { PC_OK, PC_FAIL, PC_SKIP, PC_WARN };

#define pass(c, ...)      pc_note(c, PC_OK, NULL, __VA_ARGS__)
#define fail(c, fix, ...) pc_note(c, PC_FAIL, fix, __VA_ARGS__)
#define skip(c, ...)      pc_note(c, PC_SKIP, NULL, __VA_ARGS__)
#define warn(c, ...)      pc_note(c, PC_WARN, NULL, __VA_ARGS__)
#define PC_PRINTF(f, a)   __attribute__((format(printf, f, a)))

/* A float RGBA image in 64-byte aligned memory whose pitch leaves at least three pixels
   of padding, so that pitch mistakes and writes past a row show. New images are all
   poison, padding included. */
typedef struct pc_img {
    pf_image im;
    size_t bytes;
} pc_img;

typedef struct pc_diff {
    long bad, total;
    int x, y, ch; /* first difference (tables: x = column, y = row) */
    double a, b;
} pc_diff;

/* A stage's params struct filled as the engine fills it, and the same values as the
   JSON object of a pipeline file. */
typedef struct pc_params {
    void *st;
    char json[8192];
    int ok;
} pc_params;

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

/* ---- check_report.c --------------------------------------------------------------------- */

void pc_copy_text(char *dst, size_t size, const char *src);
/* What is being done, for the crash and exit() guards to report. */
void pc_doing(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The guards on (a crash or an exit() in the plugin is reported as a failure, the private
   directory removed) and off (the handlers there were before are back). */
void pc_guards_on(void);
void pc_guards_off(void);
extern const char *const pc_kind_names[];
void pc_note(pc *c, int kind, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- check_engine.c --------------------------------------------------------------------- */

/* Removes the private directory and its link; safe in a signal handler. */
void pc_cleanup_tmp(void);
/* Creates c->eng with the built-in plugins and the file. 0 when the file loaded. */
int pc_load_engine(pc *c, const pf_plugin_desc *pd);
int pc_same_file(const char *path, const struct stat *st);
/* msg with the private link's path (how the engine names the plugin) put back to the
   file's real path. */
void pc_unlinked_message(const pc *c, const char *msg, char *out, size_t size);

/* ---- check_stage.c ---------------------------------------------------------------------- */

void pc_check_stage(pc *c, const pf_stage_desc *d);

/* ---- check_images.c --------------------------------------------------------------------- */

const char *pc_diff_text(const pc_diff *d, int table, char *buf, size_t size);
void pc_fill_poison(void *p, size_t bytes);
pc_diff pc_img_compare(const pc_img *a, const pc_img *b, int y0, int y1, double tol);
int pc_img_copy(pc_img *dst, const pc_img *src);
pf_frame pc_img_frame(const pc_img *m);
void pc_img_free(pc_img *m);
int pc_img_new(pc_img *m, int w, int h);
void pc_img_poison(pc_img *m);
void pc_img_random(pc *c, pc_img *m);
int pc_is_poison_at(const void *p);
int pc_rng_range(pc *c, int lo, int hi);
uint32_t pc_rng_u32(pc *c);
double pc_rng_unit(pc *c);
pc_diff pc_table_compare(const double *a, const double *b, int rows, int cols, double tol);

/* ---- check_params.c --------------------------------------------------------------------- */

int pc_make_params(pc *c, const pf_stage_desc *d, int random, pc_params *ps, char *why,
                   size_t why_size);
void pc_params_free(pc_params *ps);

/* ---- check_run.c ------------------------------------------------------------------------ */

int pc_check_chain(pc *c, const pf_stage_desc *d, pc_params *ps, pc_img *in, char *json,
                   size_t json_size, pc_run *chain);
int pc_check_cpu_runs(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
                      const char *const *set_names, pc_img *in, pc_run *cpu);
void pc_check_determinism(pc *c, const pf_stage_desc *d, pc_params *ps, pc_img *in, pc_run *first);
int pc_has_cuda(const pf_stage_desc *d);
int pc_json_single(char *buf, size_t size, const pc *c, const pf_stage_desc *d,
                   const pc_params *ps);
int pc_run_again(pc_run *r, const pc_img *in, int n_in);
void pc_run_free(pc_run *r);
int pc_run_json(pc *c, pc_run *r, const char *json, const char *const *opts, const pc_img *in,
                int n_in);
int pc_runs_agree(const pc_run *a, const pc_run *b, double tol, char *why, size_t size);
int pc_unit_of_s(const pc_run *r, pf_unit_info *u);

/* ---- check_regions.c -------------------------------------------------------------------- */

void pc_check_point_rows(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                         pc_img *in, int n_in);
/* A point stage declaring PF_STAGE_PER_CHANNEL: each output channel depends on the same
   channel of the inputs only, not on the others nor on the position. */
void pc_check_per_channel(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                          int n_in);
void pc_check_radius(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set, int n_in);
void pc_check_reduce(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                     pc_img *in, int n_in);
/* rows_in (resample stages that declare it): the rows it names are all a band reads. */
void pc_check_rows_in(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                      pc_img *in, int n_in);
void pc_check_regions(pc *c, const pf_stage_desc *d, const pc_params *ps, const char *set,
                      pc_img *in, int n_in);

/* ---- check_gpu.c ------------------------------------------------------------------------ */

void pc_check_gpu(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
                  const char *const *set_names, pc_img *in, pc_run *cpu, const char *chain_json,
                  pc_run *chain);

/* ---- check_fused.c ---------------------------------------------------------------------- */

/* The fused forms d declares (point op, stencil_fn, separable_fn, reduce_sum) compiled for
   the host and run against the stage's own CPU runs cpu[s]. */
void pc_check_fused_forms(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
                          const char *const *set_names, pc_img *in, pc_run *cpu);

/* ---- check_descriptors.c ---------------------------------------------------------------- */

void *pc_check_descriptor(pc *c, const pf_plugin_desc **pdo);
int pc_check_file(pc *c);

/* ---- check_point_source.c --------------------------------------------------------------- */

int pc_forbidden_call(const char *src, char *name, size_t name_size, int *line);

#endif
