/* cli/check_run.c: `pipefuse plugin check`, runs through the engine on the CPU: the test
   pipelines, determinism, fused against unfused between built-in stages, the NVRTC compile. */
#include "plugin_check.h"

/* ---- Pipelines -------------------------------------------------------------------------- */

void pc_run_free(pc_run *r)
{
    for (int o = 0; o < PC_MAX_OUT; o++) {
        pc_img_free(&r->img[o]);
        free(r->tab[o]);
        r->tab[o] = NULL;
    }
    pf_pipeline_destroy(r->p);
    r->p = NULL;
}

/* Runs r->p on the inputs (planning for their shapes), into freshly poisoned outputs,
   and copies the tables. */
int pc_run_again(pc_run *r, const pc_img *in, int n_in)
{
    pf_frame fin[PF_MAX_INPUTS], fout[PC_MAX_OUT];
    pf_shape shapes[PF_MAX_INPUTS];
    for (int k = 0; k < n_in; k++) {
        fin[k] = pc_img_frame(&in[k]);
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
            pc_img_free(&r->img[o]);
            if (pc_img_new(&r->img[o], info.shape.width, info.shape.height) != 0) {
                snprintf(r->err, sizeof r->err, "cannot allocate a %dx%d output", info.shape.width,
                         info.shape.height);
                return r->status = PF_NO_MEMORY;
            }
        }
        pc_img_poison(&r->img[o]);
        fout[o] = pc_img_frame(&r->img[o]);
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
int pc_run_json(pc *c, pc_run *r, const char *json, const char *const *opts, const pc_img *in,
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
    return pc_run_again(r, in, n_in);
}

/* Compares every output of two runs of the same pipeline; 1 when they agree. */
int pc_runs_agree(const pc_run *a, const pc_run *b, double tol, char *why, size_t size)
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
            d = pc_table_compare(a->tab[o], b->tab[o], a->rows[o], a->cols[o], tol);
        } else {
            if (a->img[o].im.width != b->img[o].im.width ||
                a->img[o].im.height != b->img[o].im.height) {
                snprintf(why, size, "output '%s': %dx%d against %dx%d", name, a->img[o].im.width,
                         a->img[o].im.height, b->img[o].im.width, b->img[o].im.height);
                return 0;
            }
            d = pc_img_compare(&a->img[o], &b->img[o], 0, a->img[o].im.height, tol);
        }
        if (d.bad) {
            snprintf(why, size, "output '%s': %s", name,
                     pc_diff_text(&d, a->is_table[o], text, sizeof text));
            return 0;
        }
    }
    return 1;
}

/* ---- Test pipelines --------------------------------------------------------------------- */

/* The stage alone on inputs in0..in<n-1>: {"o": the stage}. */
int pc_json_single(char *buf, size_t size, const pc *c, const pf_stage_desc *d, const pc_params *ps)
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
int pc_unit_of_s(const pc_run *r, pf_unit_info *u)
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

/* ---- Runs through the engine ----------------------------------------------------------------- */

static const char *const cpu_opts[] = {"backend", "cpu", NULL};

int pc_has_cuda(const pf_stage_desc *d)
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
int pc_check_cpu_runs(pc *c, const pf_stage_desc *d, pc_params *sets, int n_sets,
                      const char *const *set_names, pc_img *in, pc_run *cpu)
{
    char json[16384], where[256];
    int n_in = d->n_inputs, ok = 1;
    for (int s = 0; s < n_sets; s++) {
        if (!sets[s].ok)
            continue;
        pc_doing("stage %s: a CPU run with %s", d->name, set_names[s]);
        if (pc_json_single(json, sizeof json, c, d, &sets[s]) != 0) {
            fail(c, NULL, "CPU run (%s): the test pipeline does not fit in %zu bytes", set_names[s],
                 sizeof json);
            return -1;
        }
        int rc = pc_run_json(c, &cpu[s], json, cpu_opts, in, n_in);
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
            if (pc_img_new(&small[made], tiny[t][0], tiny[t][1]) != 0)
                break;
            pc_img_random(c, &small[made]);
        }
        if (made == n_in && pc_json_single(json, sizeof json, c, d, &sets[0]) == 0) {
            pc_doing("stage %s: a CPU run on a %dx%d image", d->name, tiny[t][0], tiny[t][1]);
            int rc = pc_run_json(c, &r, json, cpu_opts, small, n_in);
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
            pc_run_free(&r);
        } else {
            fail(c, NULL, "CPU run on %dx%d: out of memory", tiny[t][0], tiny[t][1]);
        }
        for (int k = 0; k < made; k++)
            pc_img_free(&small[k]);
    }
    if (ok)
        pass(c, "CPU runs: %dx%d with the default%s params%s", PC_W, PC_H,
             n_sets > 1 && sets[1].ok ? " and random" : "", sizes);
    return 0;
}

/* The same input again, in the same pipeline, in a fresh one, and on one thread. */
void pc_check_determinism(pc *c, const pf_stage_desc *d, pc_params *ps, pc_img *in, pc_run *first)
{
    char json[16384], why[1024];
    pc_run again;
    int n_in = d->n_inputs;
    static const char *const one_thread[] = {"backend", "cpu", "threads", "1", NULL};
    const char *what[] = {"a second run of the same pipeline", "a fresh pipeline",
                          "a run on one thread"};
    if (pc_json_single(json, sizeof json, c, d, ps) != 0)
        return;
    for (int t = 0; t < 3; t++) {
        int rc;
        pc_doing("stage %s: determinism, %s", d->name, what[t]);
        if (t == 0) {
            memset(&again, 0, sizeof again);
            again.p = first->p; /* borrowed: runs into again's own outputs */
            again.n_out = first->n_out;
            rc = pc_run_again(&again, in, n_in);
            again.p = NULL;
        } else {
            rc = pc_run_json(c, &again, json, t == 1 ? cpu_opts : one_thread, in, n_in);
        }
        int same = rc == PF_OK && pc_runs_agree(first, &again, -1, why, sizeof why);
        if (rc != PF_OK)
            pc_copy_text(why, sizeof why, again.err);
        pc_run_free(&again);
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

/* The plan's line about stage s: "S: s (...)" or "R: s (...)" where it runs as a
   generated kernel, else the "s (name) declares ..., not fused: why" line. 1 when it
   fuses, 0 when not (line holds the reason), -1 when the plan cannot be printed. */
static int fused_line(const pc_run *r, char *line, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return -1;
    int rc = pf_pipeline_print_plan(r->p, f);
    if (fclose(f) != 0 || rc != PF_OK) {
        free(text);
        return -1;
    }
    int found = -1;
    line[0] = 0;
    for (char *l = text; l && *l && found < 0;) {
        char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        while (n && *l == ' ')
            l++, n--;
        if ((strncmp(l, "S: s (", 6) == 0 || strncmp(l, "R: s (", 6) == 0))
            found = 1;
        else if (strncmp(l, "s (", 3) == 0 && strstr(l, "not fused"))
            found = 0;
        if (found >= 0)
            snprintf(line, size, "%.*s", (int)n, l);
        l = nl ? nl + 1 : NULL;
    }
    free(text);
    return found < 0 ? 0 : found;
}

/* A stencil or reduce declaring a generated kernel (stencil_fn, separable_fn,
   reduce_sum): the plan runs it so, and NVRTC compiles that kernel. */
static void check_fused_kernel(pc *c, const pf_stage_desc *d, pc_run *chain, const char *label)
{
    const char *field = d->kind == PF_STAGE_REDUCE && d->reduce_sum      ? "reduce_sum"
                        : d->kind == PF_STAGE_STENCIL && d->stencil_fn   ? "stencil_fn"
                        : d->kind == PF_STAGE_STENCIL && d->separable_fn ? "separable_fn"
                                                                         : NULL;
    if (!field)
        return;
    char line[1024];
    int fused = fused_line(chain, line, sizeof line);
    if (fused < 0) {
        fail(c, NULL, "fusion: the plan of %s cannot be printed", label);
        return;
    }
    if (!fused) {
        warn(c,
             "fusion: %s declares %s, but the engine does not run it as a generated kernel in "
             "%s: %s",
             d->name, field, label, line[0] ? line : "(no reason given)");
        return;
    }
    pass(c, "fusion: in %s the GPU runs %s as the engine's kernel: %s", label, d->name, line);
    int n = 0;
    pc_doing("stage %s: NVRTC compile of %s", d->name, label);
    int rc = pf_pipeline_build_kernels(chain->p, c->o.arch, c->o.dump_dir, &n);
    if (rc == PF_OK)
        pass(c, "NVRTC compiles the generated kernels of %s for sm_%d (%d)%s%s", label, c->o.arch,
             n, c->o.dump_dir ? "; source in " : "", c->o.dump_dir ? c->o.dump_dir : "");
    else if (rc == PF_UNSUPPORTED)
        skip(c, "NVRTC compile: skipped (%s)", pf_pipeline_errmsg(chain->p));
    else
        fail(c,
             d->kind == PF_STAGE_REDUCE && !d->reduce_finish
                 ? "report this to the pipefuse developers with the plugin: a summing reduce's "
                   "kernel is the engine's own"
                 : "the header point_source holds must compile as CUDA C++ after "
                   "pipefuse/point.h alone, define the function the descriptor names with "
                   "PF_POINT_FN and the signature docs/plugins.md gives, and params_type must "
                   "name its params struct (rerun with --dump-kernels DIR to see the generated "
                   "source)",
             "%s: NVRTC cannot compile the generated kernel of %s (%s %s): %s", d->name, label,
             field,
             d->kind == PF_STAGE_REDUCE ? (d->reduce_finish ? d->reduce_finish : "")
                                        : (d->stencil_fn ? d->stencil_fn : d->separable_fn),
             pf_pipeline_errmsg(chain->p));
}

/* Between built-in stages: fused and unfused CPU runs, fusion, NVRTC. Leaves the chain's
   CPU run (fused) in *chain for the GPU checks; returns 0 when there is one. */
int pc_check_chain(pc *c, const pf_stage_desc *d, pc_params *ps, pc_img *in, char *json,
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
    pc_doing("stage %s: the pipeline %s on the CPU, fused", d->name, label);
    int rc = pc_run_json(c, chain, json, cpu_opts, in, n_in);
    if (rc != PF_OK) {
        fail(c, NULL, "in a pipeline (%s) on the CPU: %s", label, chain->err);
        return -1;
    }
    pc_run unf;
    static const char *const unfused[] = {"backend", "cpu", "fusion", "false", NULL};
    pc_doing("stage %s: the pipeline %s on the CPU, unfused", d->name, label);
    rc = pc_run_json(c, &unf, json, unfused, in, n_in);
    int same = rc == PF_OK && pc_runs_agree(chain, &unf, -1, why, sizeof why);
    if (rc != PF_OK)
        pc_copy_text(why, sizeof why, unf.err);
    pc_run_free(&unf);
    if (!same)
        fail(c, "a point op must give the same bits whichever row function piece computes it",
             "fused against unfused on the CPU (%s): %s", label, why);
    else
        pass(c, "fused against unfused on the CPU (%s): the same bits", label);
    if (d->kind != PF_STAGE_POINT) {
        check_fused_kernel(c, d, chain, label);
        return 0;
    }

    pf_unit_info u;
    if (pc_unit_of_s(chain, &u) < 0) {
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
    pc_doing("stage %s: NVRTC compile of %s", d->name, label);
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
