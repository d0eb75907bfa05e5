/* cli/check_gpu.c: `pipefuse plugin check`, CPU against GPU, fused against unfused and
   banded against whole on the GPU, and GPU determinism. */
#include "plugin_check.h"

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
    int rc = pc_run_json(c, r, json, opts, in, n_in);
    if (rc == PF_NO_DEVICE) {
        const char *why = strstr(r->err, "backend cuda: ");
        c->gpu = -1;
        pc_copy_text(c->gpu_why, sizeof c->gpu_why, why ? why + strlen("backend cuda: ") : r->err);
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
    if (!pc_runs_agree(a, b, tol, why, sizeof why))
        gpu_fail(g, which, "%s: %s", what, why);
}

static void report_gpu_skips(pc *c, const char *why)
{
    for (int i = 0; i < G_COUNT; i++)
        skip(c, "%s: skipped (%s)", gpu_check_names[i], why);
    c->gpu_skips += G_COUNT;
}

void pc_check_gpu(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
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
    if (!pc_has_cuda(d)) {
        report_gpu_skips(c, "the stage has no CUDA implementation");
        return;
    }
    pc_run a = {0}, b = {0}, e = {0};
    for (int s = 0; s < n_sets; s++) {
        if (!sets[s].ok || !cpu[s].p || pc_json_single(json, sizeof json, c, d, &sets[s]) != 0)
            continue;
        snprintf(what, sizeof what, "the stage alone, %s, unfused", set_names[s]);
        pc_doing("stage %s: GPU run, %s", d->name, what);
        int rc = gpu_run(c, &g, G_CPU, what, &a, json, unfused, in, n_in);
        if (rc == 0)
            goto no_device;
        if (rc > 0)
            gpu_compare(&g, G_CPU, what, &cpu[s], &a, tol);
        snprintf(what, sizeof what, "the stage alone, %s, fused kernel", set_names[s]);
        pc_doing("stage %s: GPU run, %s", d->name, what);
        rc = gpu_run(c, &g, G_CPU, what, &b, json, fused, in, n_in);
        if (rc > 0) {
            gpu_compare(&g, G_CPU, what, &cpu[s], &b, tol);
            if (a.status == PF_OK)
                gpu_compare(&g, G_FUSED, set_names[s], &a, &b, tol);
            /* Graph replay (the default) against eager launches, and run to run. */
            pc_doing("stage %s: GPU run, %s, eager launches", d->name, set_names[s]);
            if (gpu_run(c, &g, G_DETERMINISM, "eager launches", &e, json, eager, in, n_in) > 0)
                gpu_compare(&g, G_DETERMINISM, "graph replay against eager launches", &b, &e, -1);
            pc_run_free(&e);
            memset(&e, 0, sizeof e);
            e.p = b.p;
            e.n_out = b.n_out;
            pc_doing("stage %s: GPU run, %s, again", d->name, set_names[s]);
            if (pc_run_again(&e, in, n_in) == PF_OK)
                gpu_compare(&g, G_DETERMINISM, "a second run", &b, &e, -1);
            else
                gpu_fail(&g, G_DETERMINISM, "a second run: %s", e.err);
            e.p = NULL;
            pc_run_free(&e);
        }
        /* Bands: a tiny launch budget splits every unit into bands of rows. */
        if (s == 0 && rc > 0) {
            pc_doing("stage %s: GPU run in bands", d->name);
            if (gpu_run(c, &g, G_BANDED, "banded", &e, json, banded, in, n_in) > 0) {
                pf_unit_info u;
                if (pc_unit_of_s(&e, &u) >= 0 && u.bands > 1)
                    gpu_compare(&g, G_BANDED, "in bands against whole", &b, &e,
                                d->kind == PF_STAGE_REDUCE ? tol : -1);
                else
                    g.ran[G_BANDED] = 0;
            }
            pc_run_free(&e);
        }
        pc_run_free(&a);
        pc_run_free(&b);
    }
    /* Between built-in stages, fused and not. */
    if (chain_json && chain->p) {
        pc_doing("stage %s: GPU run between built-in stages", d->name);
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
        pc_run_free(&a);
        pc_run_free(&b);
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
    pc_run_free(&a);
    pc_run_free(&b);
    pc_run_free(&e);
    report_gpu_skips(c, "no CUDA device");
}
