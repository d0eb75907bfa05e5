/* engine/plan_print.c: the plan as text: `pipefuse check`'s print (pf_pipeline_print_plan)
 * and Graphviz (pf_pipeline_print_dot). Fusion is shown as the CUDA executor would do
 * it, whichever executor holds the plan, so a print on a machine without a GPU says what
 * one would run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse.h"
#include "pipefuse/png.h"
#include "pipefuse/bands.h"
#include "plan.h"
#include "watchdog.h"

static int is_table_node(const pf_pipeline *p, int node)
{
    return node >= p->n_inputs && p->nodes[node].desc->kind == PF_STAGE_REDUCE;
}

/* ---- Fusion as the CUDA executor would do it --------------------------------------------- */

int pf_fusion_view_make(const pf_pipeline *p, pf_fusion_view *v)
{
    const pf_plan *plan = p->plan;
    v->fused = calloc((size_t)plan->n_units + 1, sizeof(int));
    v->f4 = calloc((size_t)p->n_nodes, 1);
    if (!v->fused || !v->f4) {
        free(v->fused), free(v->f4);
        return PF_NO_MEMORY;
    }
    /* The plan as it runs where NVRTC is: `pipefuse check` says separately when NVRTC
       is missing here. */
    pf_fuse_decide(p, NULL, v->fused, v->f4, NULL, 0);
    pf_fusion_view_formats(p, v, PF_U8, 4);
    return PF_OK;
}

void pf_fusion_view_formats(const pf_pipeline *p, pf_fusion_view *v, pf_sample sample, int channels)
{
    for (int i = 0; i < PF_MAX_FRAMES; i++) {
        v->fmt[i] = pf_format_code(sample, channels);
        v->fmt_out[i] = v->fmt[i];
    }
    for (int o = 0; o < p->n_outputs && o < PF_MAX_FRAMES; o++) {
        const pf_output_decl *d = &p->outputs[o];
        int ch = pf_pipeline_output_channels(p, o, channels);
        pf_sample s = d->bits == 8    ? PF_U8
                      : d->bits == 16 ? PF_U16
                      : d->bits == 32 ? PF_F32
                                      : sample;
        if (ch > 0)
            v->fmt_out[o] = pf_format_code(s, ch);
    }
}

/* A frame format's name as pipeline files write it: rgba8, gray16, rgbf. */
static const char *format_name(int sample, int channels, char *buf, size_t size)
{
    static const char *const layout[] = {"?", "gray", "graya", "rgb", "rgba"};
    snprintf(buf, size, "%s%s", layout[channels >= 1 && channels <= 4 ? channels : 0],
             sample == PF_U8    ? "8"
             : sample == PF_U16 ? "16"
                                : "f");
    return buf;
}

void pf_fusion_view_free(pf_fusion_view *v)
{
    free(v->fused);
    free(v->f4);
}

/* ---- Prints ---------------------------------------------------------------------------------- */

static const char *const kind_names[] = {"point", "stencil", "resample", "reduce"};

/* Bytes one frame moves through fused unit u's loads and stores. */
static double unit_bytes(const pf_pipeline *p, int u, const pf_fusion_view *v, pf_fuse_unit *io)
{
    if (pf_fuse_unit_io(p, u, v->f4, v->fmt, v->fmt_out, io) != 0)
        return 0;
    double px = (double)p->plan->units[u].shape.width * p->plan->units[u].shape.height, b = 0;
    for (int k = 0; k < io->n_in; k++)
        b += px * (double)pf_frame_pixel_bytes((pf_sample)io->in[k].sample, io->in[k].channels);
    for (int k = 0; k < io->n_out; k++)
        b += px * (double)pf_frame_pixel_bytes((pf_sample)io->out[k].sample, io->out[k].channels);
    return b;
}

/* The binding of param k of node n, or -1. */
static int bound_index(const pf_node *n, int k)
{
    for (int b = 0; b < n->n_bind; b++)
        if (n->bind[b].param == k)
            return b;
    return -1;
}

/* A bound param as the plan shows it: "{percentile 0.5 of hist rgb}", scale and offset
   where given. */
static void print_binding(const pf_pipeline *p, const pf_binding *b, char *buf, size_t size)
{
    static const char *const rules[PF_BIND_RULES] = {"percentile", "mean",    "min",      "max",
                                                     "otsu",       "gain_to", "grey_gain"};
    static const char *const channels[] = {"r", "g", "b", "a", "rgb"};
    char arg[32] = "", mod[64] = "";
    if (b->rule == PF_BIND_PERCENTILE || b->rule == PF_BIND_GAIN_TO)
        snprintf(arg, sizeof arg, " %g", b->arg);
    int at = 0; /* "* 2 - 0.25": each part only where given, the offset's sign as a sign */
    if (b->scale != 1)
        at = snprintf(mod, sizeof mod, " * %g", b->scale);
    if (b->offset != 0 && at >= 0 && (size_t)at < sizeof mod)
        snprintf(mod + at, sizeof mod - (size_t)at, " %c %g", b->offset < 0 ? '-' : '+',
                 b->offset < 0 ? -b->offset : b->offset);
    snprintf(buf, size, "{%s%s of %s %s%s, per frame}", rules[b->rule], arg, p->nodes[b->src].id,
             channels[b->channel], mod);
}

/* The pipeline's inputs and stages with their shapes and params. */
static void print_stages(const pf_pipeline *p, FILE *f)
{
    const pf_plan *plan = p->plan;
    fprintf(f, "pipeline %s\n", p->source);
    fprintf(f, "inputs (%d):\n", p->n_inputs);
    for (int i = 0; i < p->n_inputs; i++)
        fprintf(f, "  %-16s %dx%d\n", p->nodes[i].id, plan->shapes[i].width,
                plan->shapes[i].height);
    fprintf(f, "stages (%d):\n", p->n_nodes - p->n_inputs);
    for (int i = p->n_inputs; i < p->n_nodes; i++) {
        const pf_node *n = &p->nodes[i];
        fprintf(f, "  %-16s %-12s %-8s", n->id, n->desc->name, kind_names[n->desc->kind]);
        fprintf(f, " <-");
        for (int k = 0; k < n->n_in; k++)
            fprintf(f, " %s", p->nodes[n->in[k]].id);
        if (!n->used) {
            fprintf(f, "   (unused: not run)\n");
            continue;
        }
        fprintf(f, "   %s %dx%d", n->desc->kind == PF_STAGE_REDUCE ? "table" : "",
                plan->shapes[i].width, plan->shapes[i].height);
        for (int k = 0; k < n->desc->n_params; k++) {
            char v[256];
            int b = bound_index(n, k);
            if (b >= 0)
                print_binding(p, &n->bind[b], v, sizeof v);
            else
                pf_param_format(&n->desc->params[k], n->params, v, sizeof v);
            fprintf(f, " %s=%s", n->desc->params[k].name, v);
        }
        fputc('\n', f);
    }
}

/* Unit u's stage ids joined by " + ", the first after lead. */
static void print_ids(FILE *f, const char *lead, const pf_unit *u)
{
    for (int a = 0; a < u->n_nodes; a++)
        fprintf(f, "%s%s", a ? " + " : lead, u->ids[a]);
}

/* " with <the absorbed unit's stages>" of a reduce or stencil kernel, ", then <its
   epilogue's>" of a stencil's, and on the next line what it loads. */
static void print_absorbed(const pf_pipeline *p, FILE *f, const pf_fuse_unit *io)
{
    if (io->src_unit >= 0) {
        const pf_unit *src = &p->plan->units[io->src_unit];
        fprintf(f, " with");
        print_ids(f, " ", src);
        if (io->stencil)
            fprintf(f, io->stencil == PF_FUSE_STENCIL_SEPARABLE ? " on the rows it stages"
                                                                : " on its tile");
    }
    if (io->epi_unit >= 0) {
        const pf_unit *e = &p->plan->units[io->epi_unit];
        fprintf(f, ", then");
        print_ids(f, " ", e);
        fprintf(f, " on its result");
        if (io->rec_unit >= 0) {
            const pf_unit *r = &p->plan->units[io->rec_unit];
            fprintf(f, ", recomputing");
            print_ids(f, " ", r);
            fprintf(f, " there");
        }
    }
    fprintf(f, "\n      loads");
    for (int k = 0; k < io->n_in; k++)
        fprintf(f, " %s(%s)", p->nodes[io->in[k].node].id,
                io->in[k].native >= 0 ? "native" : "float4");
}

/* Summing reduces that run as generated kernels: what each loads, which point ops it
   runs on the way in, and that the sums are added on the device. */
static void print_fused_reduces(const pf_pipeline *p, FILE *f, const pf_fusion_view *v)
{
    const pf_plan *plan = p->plan;
    int n = 0;
    for (int ui = 0; ui < plan->n_units; ui++)
        n += plan->units[ui].kind == PF_UNIT_REDUCE && v->fused[ui] == PF_FUSE_KERNEL;
    if (!n)
        return;
    fprintf(f, "fused reductions (%d):\n", n);
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if (u->kind != PF_UNIT_REDUCE || v->fused[ui] != PF_FUSE_KERNEL)
            continue;
        const pf_node *rn = &p->nodes[u->nodes[0]];
        pf_fuse_unit io;
        if (pf_fuse_unit_io(p, ui, v->f4, v->fmt, v->fmt_out, &io) != 0)
            continue;
        fprintf(f, "  R: %s (%s, sum by %s%s%s) in one kernel", rn->id, rn->desc->name,
                io.reduce == PF_REDUCE_SUM_COLUMNS ? "columns" : "rows",
                rn->desc->reduce_finish ? ", finished by " : "",
                rn->desc->reduce_finish ? rn->desc->reduce_finish : "");
        print_absorbed(p, f, &io);
        fprintf(f, "; partial sums added on the device, the %dx%d table copied to the host\n",
                plan->shapes[u->nodes[0]].height, plan->shapes[u->nodes[0]].width);
    }
}

/* Stencils that run as generated kernels (3x3 or separable): the point ops each runs on
   its tile or rows, what it loads and what it stores. */
static void print_fused_stencils(const pf_pipeline *p, FILE *f, const pf_fusion_view *v)
{
    const pf_plan *plan = p->plan;
    int n = 0;
    for (int ui = 0; ui < plan->n_units; ui++)
        n += plan->units[ui].kind == PF_UNIT_STENCIL && v->fused[ui] == PF_FUSE_KERNEL;
    if (!n)
        return;
    fprintf(f, "fused stencils (%d):\n", n);
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if (u->kind != PF_UNIT_STENCIL || v->fused[ui] != PF_FUSE_KERNEL)
            continue;
        const pf_node *sn = &p->nodes[u->nodes[0]];
        pf_fuse_unit io;
        double bytes = unit_bytes(p, ui, v, &io);
        if (io.stencil == PF_FUSE_STENCIL_SEPARABLE) /* + the horizontal sums, 32 B a pixel */
            bytes += 32.0 * u->shape.width * u->shape.height;
        if (io.stencil == PF_FUSE_STENCIL_SEPARABLE)
            fprintf(f, "  S: %s (%s, separable %s) in two kernels (rows, then columns)", sn->id,
                    sn->desc->name, sn->desc->separable_fn);
        else
            fprintf(f, "  S: %s (%s, 3x3 %s) in one kernel", sn->id, sn->desc->name,
                    sn->desc->stencil_fn);
        print_absorbed(p, f, &io);
        fprintf(f, ", stores");
        for (int k = 0; k < io.n_out; k++)
            fprintf(f, " %s(%s)",
                    io.out[k].native >= 0 ? p->outputs[io.out[k].native].name
                                          : p->nodes[io.out[k].node].id,
                    io.out[k].native >= 0 ? "native" : "float4");
        fprintf(f, "; %.1f MB per frame\n", bytes / 1e6);
    }
}

/* The field by which stage d declares a generated kernel of its own (a stencil's
   stencil_fn or separable_fn, a reduce's reduce_sum), or NULL. */
static const char *declared_form(const pf_stage_desc *d)
{
    if (d->kind == PF_STAGE_REDUCE && d->reduce_sum)
        return "reduce_sum";
    if (d->kind == PF_STAGE_STENCIL && d->stencil_fn)
        return "stencil_fn";
    if (d->kind == PF_STAGE_STENCIL && d->separable_fn)
        return "separable_fn";
    return NULL;
}

/* Stencils and reduces that declare a generated kernel the plan does not run, and why:
   on the GPU they run their own run_cuda. */
static void print_not_fused(const pf_pipeline *p, FILE *f, const pf_fusion_view *v)
{
    const pf_plan *plan = p->plan;
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if ((u->kind != PF_UNIT_STENCIL && u->kind != PF_UNIT_REDUCE) ||
            v->fused[ui] == PF_FUSE_KERNEL || u->n_nodes != 1)
            continue;
        const pf_node *sn = &p->nodes[u->nodes[0]];
        const char *form = declared_form(sn->desc);
        if (!form)
            continue;
        char why[512] = "";
        int possible = u->kind == PF_UNIT_REDUCE ? pf_fuse_reduce_possible(p, ui, why, sizeof why)
                                                 : pf_fuse_stencil_possible(p, ui, why, sizeof why);
        if (sn->n_in != 1)
            snprintf(why, sizeof why, "it takes %d inputs; the engine's kernels take one",
                     sn->n_in);
        else if (possible || !why[0])
            snprintf(why, sizeof why, "its kernel would have more than %d loads or stores",
                     PF_MAX_FUSED_IO);
        fprintf(f, "  %s (%s): declares %s, not fused: %s; its own run_cuda runs\n", sn->id,
                sn->desc->name, form, why);
    }
}

/* The kernels one frame launches on the GPU: per band, a generated kernel for each unit
   that fuses (two for a separable stencil's passes), none for a point unit whose ops run
   in another unit's kernel, each stage's own for a unit that does not fuse (what a
   stage's run_cuda launches counted as one); plus the conversions of pipeline inputs
   that a unit reads as float RGBA and of outputs no generated kernel stores. */
static int gpu_launches(const pf_pipeline *p, const pf_fusion_view *v)
{
    const pf_plan *plan = p->plan;
    int n = 0;
    for (int i = 0; i < p->n_inputs; i++)
        n += v->f4[i] != 0;
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if (v->fused[ui] == PF_FUSE_ABSORBED || v->fused[ui] == PF_FUSE_EPILOGUE)
            continue;
        int per_band = u->n_nodes;
        if (v->fused[ui] == PF_FUSE_KERNEL)
            per_band = u->kind == PF_UNIT_STENCIL &&
                               pf_fuse_stencil_possible(p, ui, NULL, 0) == PF_FUSE_STENCIL_SEPARABLE
                           ? 2
                           : 1;
        n += per_band * u->bands;
    }
    for (int o = 0; o < p->n_outputs; o++) {
        int node = p->outputs[o].node;
        if (is_table_node(p, node))
            continue;
        n += node < p->n_inputs || v->fused[plan->unit_of[node]] == PF_FUSE_NONE;
    }
    return n;
}

/* The stencil unit whose kernel runs point unit ui's ops on its result (an epilogue). */
static int epilogue_host(const pf_pipeline *p, int ui)
{
    for (int r = 0; r < p->plan->n_units; r++)
        if (p->plan->units[r].kind != PF_UNIT_POINT && pf_fuse_epilogue(p, r) == ui)
            return r;
    return ui;
}

/* On a unit line: a point unit whose ops run in other units' kernels (absorbed by
   stencils or reduces, recomputed in an epilogue, or an epilogue itself) is not
   launched on the GPU; which kernels run it. */
static void print_taken_in(const pf_pipeline *p, const pf_fusion_view *v, int ui, FILE *f)
{
    if (v->fused[ui] == PF_FUSE_EPILOGUE) {
        fprintf(f, "  (not launched on the GPU: its ops run in #%d)", epilogue_host(p, ui));
        return;
    }
    if (v->fused[ui] != PF_FUSE_ABSORBED)
        return;
    fprintf(f, "  (not launched on the GPU: its ops run in");
    for (int r = 0, n = 0; r < p->plan->n_units; r++)
        if (p->plan->units[r].kind != PF_UNIT_POINT && v->fused[r] == PF_FUSE_KERNEL &&
            (pf_fuse_absorbs(p, r) == ui ||
             (p->plan->units[r].kind == PF_UNIT_STENCIL && pf_fuse_recompute(p, r) == ui)))
            fprintf(f, "%s #%d", n++ ? "," : "", r);
    fputc(')', f);
}

/* Point units: which stages each fuses, and the edges its one kernel loads and stores. */
static int print_fusion_groups(const pf_pipeline *p, FILE *f)
{
    const pf_plan *plan = p->plan;
    int groups = 0;
    for (int ui = 0; ui < plan->n_units; ui++)
        groups += plan->units[ui].kind == PF_UNIT_POINT;
    pf_fusion_view v;
    if (pf_fusion_view_make(p, &v) != PF_OK)
        return PF_NO_MEMORY;
    fprintf(f, "fusion groups (%d)%s:\n", groups, p->opts.fusion ? "" : " [fusion off]");
    for (int ui = 0, g = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if (u->kind != PF_UNIT_POINT)
            continue;
        fprintf(f, "  G%d: ", g++);
        print_ids(f, "", u);
        if (v.fused[ui] == PF_FUSE_EPILOGUE) {
            const pf_node *sn = &p->nodes[plan->units[epilogue_host(p, ui)].nodes[0]];
            fprintf(f,
                    "   (%d point stage%s, fused into stencil %s (%s): its ops run on the "
                    "stencil's result before it stores)\n",
                    u->n_nodes, u->n_nodes > 1 ? "s" : "", sn->id, sn->desc->name);
            continue;
        }
        if (v.fused[ui] == PF_FUSE_ABSORBED) {
            /* every kernel reading its results computes them: the reduces and stencils
               taking it in, and a stencil's epilogue recomputing it */
            fprintf(f, "   (%d point stage%s, fused into", u->n_nodes, u->n_nodes > 1 ? "s" : "");
            int n = 0;
            for (int r = 0; r < plan->n_units; r++) {
                if (plan->units[r].kind == PF_UNIT_POINT || v.fused[r] != PF_FUSE_KERNEL)
                    continue;
                const pf_node *rn = &p->nodes[plan->units[r].nodes[0]];
                int stencil = plan->units[r].kind == PF_UNIT_STENCIL;
                if (pf_fuse_absorbs(p, r) == ui)
                    fprintf(f, "%s %s %s (%s): its ops run in the %s", n++ ? " and" : "",
                            stencil ? "stencil" : "reduce", rn->id, rn->desc->name,
                            stencil ? "stencil's tile" : "sum's kernel");
                else if (stencil && pf_fuse_recompute(p, r) == ui)
                    fprintf(f, "%s stencil %s (%s): recomputed in its epilogue", n++ ? " and" : "",
                            rn->id, rn->desc->name);
            }
            fprintf(f, ", nothing stored)\n");
            continue;
        }
        if (!v.fused[ui]) {
            fprintf(f, "   (%d point stage%s, not fused: %d kernel%s)\n", u->n_nodes,
                    u->n_nodes > 1 ? "s" : "", u->n_nodes, u->n_nodes > 1 ? "s" : "");
            continue;
        }
        pf_fuse_unit io;
        double bytes = unit_bytes(p, ui, &v, &io);
        fprintf(f, "   (%d point stage%s, one kernel)\n      loads", u->n_nodes,
                u->n_nodes > 1 ? "s" : "");
        char fb[16];
        for (int k = 0; k < io.n_in; k++)
            fprintf(f, " %s(%s)", p->nodes[io.in[k].node].id,
                    io.in[k].native >= 0
                        ? format_name(io.in[k].sample, io.in[k].channels, fb, sizeof fb)
                        : "float4");
        fprintf(f, ", stores");
        for (int k = 0; k < io.n_out; k++)
            fprintf(f, " %s(%s)",
                    io.out[k].native >= 0 ? p->outputs[io.out[k].native].name
                                          : p->nodes[io.out[k].node].id,
                    io.out[k].native >= 0
                        ? format_name(io.out[k].sample, io.out[k].channels, fb, sizeof fb)
                        : "float4");
        fprintf(f, "; %.1f MB per frame\n", bytes / 1e6);
    }
    print_fused_reduces(p, f, &v);
    print_fused_stencils(p, f, &v);
    int declared = 0;
    for (int ui = 0; ui < plan->n_units; ui++)
        declared +=
            (plan->units[ui].kind == PF_UNIT_STENCIL || plan->units[ui].kind == PF_UNIT_REDUCE) &&
            plan->units[ui].n_nodes == 1 && v.fused[ui] != PF_FUSE_KERNEL &&
            declared_form(p->nodes[plan->units[ui].nodes[0]].desc);
    if (declared) {
        fprintf(f, "declared but not fused (%d):\n", declared);
        print_not_fused(p, f, &v);
    }
    pf_fusion_view_free(&v);
    return PF_OK;
}

/* What the same shapes take in strips (pipefuse/bands.h), where the pipeline can run in
   them: what `pipefuse run` holds for a large image on the CPU, in strips of 8 output
   rows (its smallest) and of 64. The message a refusal would write is not kept. */
static void print_strips(const pf_pipeline *p, FILE *f)
{
    static const int rows[2] = {8, 64};
    char why[512];
    if (p->plan->strip_rows || pf_pipeline_strips_possible(p, why, sizeof why) != PF_OK)
        return;
    pf_pipeline *w = (pf_pipeline *)p; /* pf_plan_memory plans nothing: p is as it was */
    char saved[PF_ERRMSG_MAX];
    double mib[2];
    memcpy(saved, w->errmsg, sizeof saved);
    int rc = PF_OK;
    for (int k = 0; k < 2 && rc == PF_OK; k++) {
        pf_memory m;
        memset(&m, 0, sizeof m);
        m.size = sizeof m;
        w->strip_rows = rows[k];
        rc = pf_plan_memory(w, p->plan->in_shapes, p->n_inputs, &m);
        mib[k] = (double)m.host_bytes / (1 << 20);
    }
    w->strip_rows = 0;
    memcpy(w->errmsg, saved, sizeof saved);
    if (rc == PF_OK)
        fprintf(f,
                "in strips (pipefuse run's large images, on the CPU): %.1f MiB of buffers in "
                "strips of %d output rows, %.1f MiB in strips of %d\n",
                mib[0], rows[0], mib[1], rows[1]);
}

int pf_plan_print(const pf_pipeline *p, FILE *f)
{
    if (!p->plan)
        return PF_NOT_PLANNED;
    const pf_plan *plan = p->plan;
    print_stages(p, f);
    if (print_fusion_groups(p, f) != PF_OK)
        return PF_NO_MEMORY;
    pf_fusion_view v;
    if (pf_fusion_view_make(p, &v) != PF_OK)
        return PF_NO_MEMORY;
    fprintf(f,
            "launch units per frame: %d (%d without fusion), GPU kernel launches per frame: %d, "
            "streams: %d, GPU arithmetic: %s\n",
            plan->n_units, plan->n_unfused_units, gpu_launches(p, &v), plan->n_streams,
            p->opts.precision == PF_PRECISION_FAST ? "fast (FMA, fast maths)" : "exact");
    if (plan->budget_ms > 0)
        fprintf(f, "watchdog budget: %.1f ms per launch; cost model at %.0f GB/s (%s)\n",
                plan->budget_ms, plan->bandwidth / 1e9,
                plan->bandwidth_measured ? "measured copy bandwidth" : "assumed: no device");
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        fprintf(f, "  #%-3d %-8s stream %d  bands %d", ui, kind_names[u->kind], u->stream,
                u->bands);
        if (plan->budget_ms > 0)
            fprintf(f, " (~%.2f ms each)", pf_watchdog_band_ms(p, ui));
        fprintf(f, "  %dx%d  [", u->shape.width, u->shape.height);
        for (int a = 0; a < u->n_nodes; a++)
            fprintf(f, "%s%s", a ? " " : "", u->ids[a]);
        fprintf(f, "]  reads");
        for (int k = 0; k < u->n_inputs; k++)
            fprintf(f, " %s", p->nodes[u->inputs[k]].id);
        int said[64], n_said = 0; /* the tables bound parameters read, each once */
        for (int a = 0; a < u->n_nodes; a++) {
            const pf_node *n = &p->nodes[u->nodes[a]];
            for (int k = 0; k < n->n_bind; k++) {
                int src = n->bind[k].src, dup = 0;
                for (int j = 0; j < n_said && !dup; j++)
                    dup = said[j] == src;
                if (dup || n_said == PF_COUNTOF(said))
                    continue;
                fprintf(f, "%s%s", n_said ? " " : "  tables ", p->nodes[src].id);
                said[n_said++] = src;
            }
        }
        if (u->n_stores) {
            fprintf(f, "  writes");
            for (int k = 0; k < u->n_stores; k++)
                fprintf(f, " %s", p->nodes[u->stores[k]].id);
        }
        if (u->n_waits) {
            fprintf(f, "  waits");
            for (int k = 0; k < u->n_waits; k++)
                fprintf(f, " #%d", u->waits[k]);
        }
        print_taken_in(p, &v, ui, f);
        fputc('\n', f);
    }
    pf_fusion_view_free(&v);
    fprintf(f, "outputs (%d):\n", p->n_outputs);
    for (int o = 0; o < p->n_outputs; o++) {
        const pf_output_decl *d = &p->outputs[o];
        pf_shape s = plan->shapes[d->node];
        /* the format the file asks for: "auto" follows the input (images) or the caller
           (tables, run --table-format) */
        if (is_table_node(p, d->node)) {
            fprintf(f, "  %-16s <- %-16s table %d rows x %d columns, %s\n", d->name,
                    p->nodes[d->node].id, s.height, s.width,
                    d->table_format == PF_TABLE_CSV    ? "csv"
                    : d->table_format == PF_TABLE_JSON ? "json"
                                                       : "auto");
        } else {
            char fb[16] = "auto";
            if (d->png_form > PF_PNG_FORM_AUTO) /* palette, gray1... */
                snprintf(fb, sizeof fb, "%s", pf_png_form_name(d->png_form));
            else if (d->channels > 0 && d->bits != PF_BITS_LIKE_INPUT)
                format_name(d->bits == 8    ? PF_U8
                            : d->bits == 16 ? PF_U16
                                            : PF_F32,
                            d->channels, fb, sizeof fb);
            fprintf(f, "  %-16s <- %-16s image %dx%d, %s\n", d->name, p->nodes[d->node].id, s.width,
                    s.height, fb);
        }
    }
    fprintf(f, "memory: %.1f MiB of buffers\n", (double)p->plan_host_bytes / (1 << 20));
    print_strips(p, f);
    return ferror(f) ? PF_IO : PF_OK;
}

int pf_plan_print_dot(const pf_pipeline *p, FILE *f)
{
    if (!p->plan)
        return PF_NOT_PLANNED;
    const pf_plan *plan = p->plan;
    fprintf(f, "digraph pipefuse {\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n");
    for (int i = 0; i < p->n_inputs; i++)
        fprintf(f, "  \"%s\" [shape=invhouse];\n", p->nodes[i].id);
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        fprintf(f, "  subgraph cluster_u%d {\n    label=\"#%d %s, stream %d\";\n", ui, ui,
                kind_names[u->kind], u->stream);
        if (u->kind == PF_UNIT_POINT && u->n_nodes > 1)
            fprintf(f, "    style=filled; color=lightblue;\n");
        for (int a = 0; a < u->n_nodes; a++) {
            const pf_node *n = &p->nodes[u->nodes[a]];
            fprintf(f, "    \"%s\" [label=\"%s\\n%s\"%s];\n", n->id, n->id, n->desc->name,
                    n->desc->kind == PF_STAGE_REDUCE ? ", shape=box3d" : ", shape=box");
        }
        fprintf(f, "  }\n");
    }
    for (int i = p->n_inputs; i < p->n_nodes; i++) {
        const pf_node *n = &p->nodes[i];
        if (!n->used)
            fprintf(f, "  \"%s\" [label=\"%s\\n%s (unused)\", style=dashed];\n", n->id, n->id,
                    n->desc->name);
        for (int k = 0; k < n->n_in; k++)
            fprintf(f, "  \"%s\" -> \"%s\";\n", p->nodes[n->in[k]].id, n->id);
        for (int k = 0; k < n->n_bind; k++) /* a table a bound parameter reads */
            fprintf(f, "  \"%s\" -> \"%s\" [style=dashed, label=\"%s\"];\n",
                    p->nodes[n->bind[k].src].id, n->id, n->desc->params[n->bind[k].param].name);
    }
    for (int o = 0; o < p->n_outputs; o++)
        fprintf(f, "  \"out:%s\" [label=\"%s\", shape=house];\n  \"%s\" -> \"out:%s\";\n",
                p->outputs[o].name, p->outputs[o].name, p->nodes[p->outputs[o].node].id,
                p->outputs[o].name);
    fprintf(f, "}\n");
    return ferror(f) ? PF_IO : PF_OK;
}
