/* engine/fuse.c: fused point units: their inputs and outputs, the CUDA source of their
 * kernels, and a build (source, NVRTC compile through nvrtc.c). See fuse.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../kernels/frame_desc.h"
#include "fuse.h"
#include "fuse_gen.h"
#include "nvrtc.h"

/* Whether the source being generated names stages and offsets in its comments (the
   dumped source) or not (the compiled one: pf_fuse_build). One generation at a time a
   thread. */
static _Thread_local int annotate = 1;

const char *pf_fuse_note(const char *text)
{
    return annotate ? text : "";
}

int pf_fuse_annotating(void)
{
    return annotate;
}

extern const char pf_src_point_h[];
extern const char pf_src_fused_rt[];
extern const char pf_src_frame_desc[];
extern const char pf_src_edge[];
extern const char pf_src_separable_rt[];
extern const char pf_src_premultiply[];

/* ---- Layout and IO ------------------------------------------------------------------------ */

size_t pf_param_layout(const pf_pipeline *p, size_t *off)
{
    size_t top = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        off[i] = top;
        if (i >= p->n_inputs)
            top += (p->nodes[i].desc->params_size + 15) & ~(size_t)15;
    }
    return top ? top : 16;
}

void pf_fuse_buffers(const pf_pipeline *p, const int *fused_unit, char *f4)
{
    const pf_plan *plan = p->plan;
    for (int i = 0; i < p->n_nodes; i++) {
        int u = i < p->n_inputs ? -1 : plan->unit_of[i];
        if (i >= p->n_inputs && (u < 0 || p->nodes[i].desc->kind == PF_STAGE_REDUCE)) {
            f4[i] = 0; /* unused, or a table */
            continue;
        }
        if (u >= 0 && fused_unit[u] == PF_FUSE_ABSORBED) {
            f4[i] = 0; /* only the reduce kernel that runs the unit's ops reads it */
            continue;
        }
        int need = u < 0 ? plan->is_out[i] : !fused_unit[u];
        for (int e = plan->cons_first[i]; e < plan->cons_first[i + 1] && !need; e++) {
            int cu = plan->unit_of[plan->cons[e]];
            /* an epilogue reads its stencil's result in that kernel's registers */
            need =
                cu >= 0 && (cu != u || u < 0) && !(u < 0 && fused_unit[cu]) &&
                !(u >= 0 && fused_unit[cu] == PF_FUSE_EPILOGUE && fused_unit[u] == PF_FUSE_KERNEL &&
                  plan->units[u].kind == PF_UNIT_STENCIL && pf_fuse_epilogue(p, u) == cu);
        }
        f4[i] = (char)need;
    }
}

/* Node q appended to io's loads: a pipeline input in its format (in_fmt), else its float
   RGBA image. -1 when the list is full. */
static int add_load(const pf_pipeline *p, int q, const int *in_fmt, pf_fuse_unit *io)
{
    if (io->n_in >= PF_MAX_FUSED_IO)
        return -1;
    pf_fuse_io *e = &io->in[io->n_in++];
    e->node = q;
    e->native = q < p->n_inputs ? q : -1;
    e->sample = q < p->n_inputs ? pf_format_sample(in_fmt[q]) : PF_F32;
    e->channels = q < p->n_inputs ? pf_format_channels(in_fmt[q]) : 4;
    return 0;
}

/* The stores of node m appended to io's: each pipeline output it is, in that output's
   format (out_fmt), then its float RGBA image where f4 keeps one. -1 when the list is
   full. */
static int add_stores(const pf_pipeline *p, int m, const char *f4, const int *out_fmt,
                      pf_fuse_unit *io)
{
    for (int o = 0; o <= p->n_outputs; o++) {
        if (o < p->n_outputs ? p->outputs[o].node != m : !f4[m])
            continue;
        if (io->n_out >= PF_MAX_FUSED_IO)
            return -1;
        pf_fuse_io *e = &io->out[io->n_out++];
        e->node = m;
        e->native = o < p->n_outputs ? o : -1;
        e->sample = o < p->n_outputs ? pf_format_sample(out_fmt[o]) : PF_F32;
        e->channels = o < p->n_outputs ? pf_format_channels(out_fmt[o]) : 4;
    }
    return 0;
}

/* The loads of a reduce or stencil unit u reading node value: the inputs of the point
   unit it absorbs, or value itself (a pipeline input in its format, else a float RGBA
   image). Sets io->src_unit and io->value_node; -1 when there are too many. */
static int absorbed_loads(const pf_pipeline *p, int u, int value, const int *in_fmt,
                          pf_fuse_unit *io)
{
    int src = pf_fuse_absorbs(p, u);
    io->src_unit = src;
    io->value_node = value;
    const pf_unit *from = src >= 0 ? &p->plan->units[src] : NULL;
    int n = from ? from->n_inputs : 1;
    for (int k = 0; k < n; k++)
        if (add_load(p, from ? from->inputs[k] : value, in_fmt, io) != 0)
            return -1;
    return 0;
}

/* A summing reduce unit's IO: absorbed_loads; nothing stored. */
static int reduce_io(const pf_pipeline *p, int u, const int *in_fmt, pf_fuse_unit *io)
{
    const pf_node *r = &p->nodes[p->plan->units[u].nodes[0]];
    io->reduce = r->desc->reduce_sum;
    io->ppt = 4;
    return absorbed_loads(p, u, r->in[0], in_fmt, io);
}

/* A 3x3 stencil unit's IO: absorbed_loads, into its tile, then its epilogue's other
   inputs; the stores of its result and of its epilogue's members (add_stores). */
static int stencil_io(const pf_pipeline *p, int u, const char *f4, const int *in_fmt,
                      const int *out_fmt, pf_fuse_unit *io)
{
    int s = p->plan->units[u].nodes[0];
    char why[512];
    io->stencil = pf_fuse_stencil_possible(p, u, why, sizeof why);
    io->sep_rmax = io->stencil == PF_FUSE_STENCIL_SEPARABLE ? pf_fuse_sep_rmax(p, u) : 0;
    io->ppt = 1;
    if (absorbed_loads(p, u, p->nodes[s].in[0], in_fmt, io) != 0)
        return -1;
    io->epi_unit = pf_fuse_epilogue(p, u);
    io->rec_unit = io->epi_unit >= 0 ? pf_fuse_recompute(p, u) : -1;
    const pf_unit *epi = io->epi_unit >= 0 ? &p->plan->units[io->epi_unit] : NULL;
    const pf_unit *rec = io->rec_unit >= 0 ? &p->plan->units[io->rec_unit] : NULL;
    /* the epilogue's other inputs, those of the unit it recomputes in place of its
       results */
    for (int k = 0; epi && k < epi->n_inputs + (rec ? rec->n_inputs : 0); k++) {
        int q = k < epi->n_inputs ? epi->inputs[k] : rec->inputs[k - epi->n_inputs];
        int have = q == s || (rec && q >= p->n_inputs && p->plan->unit_of[q] == io->rec_unit);
        for (int j = 0; j < io->n_in && !have; j++)
            have = io->in[j].node == q;
        if (!have && add_load(p, q, in_fmt, io) != 0)
            return -1;
    }
    for (int a = -1; a < (epi ? epi->n_nodes : 0); a++) /* the result, then the epilogue's */
        if (add_stores(p, a < 0 ? s : epi->nodes[a], f4, out_fmt, io) != 0)
            return -1;
    return 0;
}

static int unit_io(const pf_pipeline *p, int u, const char *f4, const int *in_fmt,
                   const int *out_fmt, pf_fuse_unit *io)
{
    const pf_unit *un = &p->plan->units[u];
    io->n_in = io->n_out = 0;
    io->ppt = 8;
    io->reduce = io->stencil = io->sep_rmax = 0;
    io->src_unit = io->epi_unit = io->rec_unit = -1;
    io->value_node = -1;
    /* The parameters of the unit's members, or of the point unit a reduce or stencil
       absorbs (and the stencil's own, its epilogue's and the unit that recomputes). */
    int own = un->kind == PF_UNIT_STENCIL ? un->nodes[0] : -1;
    /* a summing reduce's own params where its kernel finishes the table with them */
    int fin = un->kind == PF_UNIT_REDUCE && p->nodes[un->nodes[0]].desc->reduce_finish
                  ? un->nodes[0]
                  : -1;
    int eu = own >= 0 ? pf_fuse_epilogue(p, u) : -1;
    int ru = eu >= 0 ? pf_fuse_recompute(p, u) : -1;
    int pu = un->kind == PF_UNIT_REDUCE || own >= 0 ? pf_fuse_absorbs(p, u) : u;
    int mu = u; /* the unit whose members' ops the kernel runs */
    if (pu >= 0 && pu != u) {
        un = &p->plan->units[pu];
        mu = pu;
    }
    /* The members' span of the parameter block (pf_param_layout's offsets: the running
       sum of 16-byte rounded sizes, in node order). A node is a member when the plan
       runs it in unit mu: one look-up a node, where a search of the unit's members made
       this quadratic (a 100 000-stage chain spent minutes here). */
    size_t lo = (size_t)-1, hi = 0, top = 0;
    for (int i = p->n_inputs; i < p->n_nodes; i++) {
        size_t size = (p->nodes[i].desc->params_size + 15) & ~(size_t)15;
        int of = p->plan->unit_of[i];
        if (of == mu || i == own || i == fin || (eu >= 0 && of == eu) || (ru >= 0 && of == ru)) {
            lo = top < lo ? top : lo;
            hi = top + size > hi ? top + size : hi;
        }
        top += size;
    }
    io->param_lo = lo == (size_t)-1 ? 0 : lo;
    io->param_bytes = hi > io->param_lo ? hi - io->param_lo : 16;
    io->param_arg = io->param_bytes <= PF_FUSE_PARAM_ARG_MAX;
    if (p->plan->units[u].kind == PF_UNIT_REDUCE)
        return reduce_io(p, u, in_fmt, io);
    if (own >= 0)
        return stencil_io(p, u, f4, in_fmt, out_fmt, io);
    for (int k = 0; k < un->n_inputs; k++)
        if (add_load(p, un->inputs[k], in_fmt, io) != 0)
            return -1;
    for (int a = 0; a < un->n_nodes; a++)
        if (add_stores(p, un->nodes[a], f4, out_fmt, io) != 0)
            return -1;
    return 0;
}

int pf_fuse_unit_io(const pf_pipeline *p, int u, const char *f4, const int *in_fmt,
                    const int *out_fmt, pf_fuse_unit *io)
{
    if (unit_io(p, u, f4, in_fmt, out_fmt, io) != 0)
        return -1;
    /* every argument: parameters (or their pointer), descriptors, W, H, y0, y1, and a
       summing reduce's six */
    size_t bytes = (io->param_arg ? io->param_bytes : 8) +
                   sizeof(pf_frame_desc) * (size_t)(io->n_in + io->n_out) + 16 +
                   (io->reduce ? 56 : 0) + (io->stencil == PF_FUSE_STENCIL_SEPARABLE ? 24 : 0);
    io->desc_arg = bytes <= PF_FUSE_ARG_BYTES_MAX;
    return 0;
}

int pf_fuse_possible(const pf_pipeline *p, int u, char *why, size_t why_size)
{
    const pf_unit *un = &p->plan->units[u];
    if (un->kind != PF_UNIT_POINT)
        return 0;
    if (!p->opts.fusion) {
        snprintf(why, why_size, "fusion is off");
        return 0;
    }
    for (int a = 0; a < un->n_nodes; a++) {
        const pf_node *n = &p->nodes[un->nodes[a]];
        if (!n->desc->point_source) {
            snprintf(why, why_size, "stage '%s' (%s) has no point source text", n->id,
                     n->desc->name);
            return 0;
        }
    }
    if (un->n_inputs > PF_MAX_FUSED_IO) {
        snprintf(why, why_size, "the unit has more than %d inputs", PF_MAX_FUSED_IO);
        return 0;
    }
    return 1;
}

int pf_fuse_reduce_possible(const pf_pipeline *p, int u, char *why, size_t why_size)
{
    const pf_plan *plan = p->plan;
    const pf_unit *un = &plan->units[u];
    if (un->kind != PF_UNIT_REDUCE || un->n_nodes != 1)
        return 0;
    int i = un->nodes[0];
    const pf_node *n = &p->nodes[i];
    if (!p->opts.fusion) {
        snprintf(why, why_size, "fusion is off");
        return 0;
    }
    if (!n->desc->reduce_sum || n->n_in != 1) {
        snprintf(why, why_size, "stage '%s' (%s) declares no reduce_sum", n->id, n->desc->name);
        return 0;
    }
    if (n->desc->reduce_finish && (!n->desc->point_source || !n->desc->params_type)) {
        snprintf(why, why_size,
                 "stage '%s' (%s) declares reduce_finish without point_source and params_type",
                 n->id, n->desc->name);
        return 0;
    }
    pf_shape in = plan->shapes[n->in[0]], t = plan->shapes[i];
    int rows = n->desc->reduce_sum == PF_REDUCE_SUM_COLUMNS ? in.width : in.height;
    if (t.width != 4 || t.height != rows || un->partial_len != (size_t)4 * (size_t)rows) {
        snprintf(why, why_size,
                 "stage '%s' (%s) declares a sum by %s but its table is %dx%d (partial %zu), "
                 "not 4x%d",
                 n->id, n->desc->name,
                 n->desc->reduce_sum == PF_REDUCE_SUM_COLUMNS ? "columns" : "rows", t.width,
                 t.height, un->partial_len, rows);
        return 0;
    }
    return 1;
}

int pf_fuse_stencil_possible(const pf_pipeline *p, int u, char *why, size_t why_size)
{
    const pf_unit *un = &p->plan->units[u];
    if (un->kind != PF_UNIT_STENCIL || un->n_nodes != 1)
        return 0;
    const pf_node *n = &p->nodes[un->nodes[0]];
    const pf_stage_desc *d = n->desc;
    if (!p->opts.fusion) {
        snprintf(why, why_size, "fusion is off");
        return 0;
    }
    int sep = d->separable_fn && !d->stencil_fn;
    if ((!d->stencil_fn && !sep) || !d->point_source || !d->params_type || n->n_in != 1) {
        snprintf(why, why_size, "stage '%s' (%s) declares no stencil_fn or separable_fn", n->id,
                 d->name);
        return 0;
    }
    int r = d->radius ? d->radius(n->params) : 0;
    pf_shape in = p->plan->shapes[n->in[0]], out = p->plan->shapes[un->nodes[0]];
    if (in.width != out.width || in.height != out.height) {
        snprintf(why, why_size, "stage '%s' (%s) changes the shape", n->id, d->name);
        return 0;
    }
    if (sep && (d->separable_max < 1 || d->separable_max > PF_SEPARABLE_MAX || r < 0 ||
                r > d->separable_max)) {
        snprintf(why, why_size,
                 "stage '%s' (%s) declares separable_fn but has radius %d, past its "
                 "separable_max %d (at most %d)",
                 n->id, d->name, r, d->separable_max, PF_SEPARABLE_MAX);
        return 0;
    }
    if (!sep && r != 1) {
        snprintf(why, why_size, "stage '%s' (%s) declares stencil_fn but has radius %d (not 1)",
                 n->id, d->name, r);
        return 0;
    }
    return sep ? PF_FUSE_STENCIL_SEPARABLE : PF_FUSE_STENCIL_3X3;
}

int pf_fuse_sep_rmax(const pf_pipeline *p, int u)
{
    return p->nodes[p->plan->units[u].nodes[0]].desc->separable_max;
}

size_t pf_fuse_sep_taps_at(int width, int rows, int height, int rmax)
{
    long long h = (long long)rows + 2LL * rmax;
    if (h > height)
        h = height;
    return (size_t)width * (size_t)(h > 0 ? h : 0) * 16;
}

size_t pf_fuse_sep_scratch(int width, int rows, int height, int rmax)
{
    return pf_fuse_sep_taps_at(width, rows, height, rmax) + (size_t)(rmax + 2 + 3) / 4 * 16;
}

/* Whether unit w is a reduce or stencil that can run as a generated kernel reading a
   result of point unit pu (its one stage's input), which it would then compute itself. */
static int takes_in(const pf_pipeline *p, int w, int pu)
{
    const pf_plan *plan = p->plan;
    char why[512];
    if (w < 0 || (!pf_fuse_reduce_possible(p, w, why, sizeof why) &&
                  !pf_fuse_stencil_possible(p, w, why, sizeof why)))
        return 0;
    int q = p->nodes[plan->units[w].nodes[0]].in[0];
    return q >= p->n_inputs && plan->unit_of[q] == pu;
}

/* Whether point unit eu is the epilogue of a 3x3 stencil unit that recomputes point unit
   pu in it (pf_fuse_recompute). */
static int recomputed_in_epilogue(const pf_pipeline *p, int eu, int pu)
{
    const pf_plan *plan = p->plan;
    const pf_unit *e = &plan->units[eu];
    for (int k = 0; k < e->n_inputs; k++) {
        int q = e->inputs[k], su = q < p->n_inputs ? -1 : plan->unit_of[q];
        if (su >= 0 && plan->units[su].kind == PF_UNIT_STENCIL && pf_fuse_recompute(p, su) == pu)
            return 1;
    }
    return 0;
}

int pf_fuse_absorbs(const pf_pipeline *p, int u)
{
    const pf_plan *plan = p->plan;
    char w[512];
    if (!pf_fuse_reduce_possible(p, u, w, sizeof w) && !pf_fuse_stencil_possible(p, u, w, sizeof w))
        return -1;
    int r = plan->units[u].nodes[0], q = p->nodes[r].in[0];
    int pu = q < p->n_inputs ? -1 : plan->unit_of[q];
    if (pu < 0 || plan->units[pu].kind != PF_UNIT_POINT || !pf_fuse_possible(p, pu, w, sizeof w))
        return -1;
    const pf_unit *src = &plan->units[pu];
    /* Several kernels may compute a unit of pipeline inputs only: the images a kernel
       reads are kept for the one kernel running an absorbed unit's ops (cuda_layout.c),
       and pipeline inputs are never reused within a frame. */
    int shared = src->n_nodes <= PF_FUSE_RECOMPUTE_MAX;
    for (int j = 0; j < src->n_inputs && shared; j++)
        shared = src->inputs[j] < p->n_inputs;
    for (int a = 0; a < src->n_nodes; a++) {
        int m = src->nodes[a];
        if (plan->is_out[m])
            return -1;
        for (int e = plan->cons_first[m]; e < plan->cons_first[m + 1]; e++) {
            int c = plan->cons[e], cu = plan->unit_of[c];
            if (c == r || cu == pu)
                continue;
            /* Another kernel that computes the unit itself: a reduce or stencil taking it
               in too, or a stencil's epilogue recomputing it. Else the image is stored
               anyway, and read back. */
            if (shared &&
                ((takes_in(p, cu, pu) && plan->units[cu].nodes[0] == c) ||
                 (plan->units[cu].kind == PF_UNIT_POINT && recomputed_in_epilogue(p, cu, pu))))
                continue;
            return -1;
        }
    }
    return pu;
}

/* Whether every input of point unit un other than node s is a pipeline input or a node
   s is computed from, so that it is complete before s's kernel runs. */
static int inputs_before(const pf_pipeline *p, const pf_unit *un, int s)
{
    char *up = calloc((size_t)s + 1, 1); /* up[i]: s is computed from node i */
    if (!up)
        return 0;
    up[s] = 1;
    for (int i = s; i >= p->n_inputs; i--) /* producers before consumers */
        for (int k = 0; up[i] && k < p->nodes[i].n_in; k++)
            up[p->nodes[i].in[k]] = 1;
    int ok = 1;
    for (int k = 0; k < un->n_inputs && ok; k++)
        ok = un->inputs[k] == s || un->inputs[k] < p->n_inputs ||
             (un->inputs[k] < s && up[un->inputs[k]]);
    free(up);
    return ok;
}

/* The next point unit after consumer index *e of 3x3 stencil unit u's result that could
   be its epilogue (it can fuse, and its other inputs are complete before u runs), or -1;
   *e moves past it. */
static int epilogue_candidate(const pf_pipeline *p, int u, int *e)
{
    const pf_plan *plan = p->plan;
    char w[512];
    int s = plan->units[u].nodes[0];
    for (; *e < plan->cons_first[s + 1]; (*e)++) {
        int eu = plan->unit_of[plan->cons[*e]];
        const pf_unit *un = &plan->units[eu];
        if (un->kind == PF_UNIT_POINT && pf_fuse_possible(p, eu, w, sizeof w) &&
            inputs_before(p, un, s)) {
            (*e)++;
            return eu;
        }
    }
    return -1;
}

int pf_fuse_epilogue(const pf_pipeline *p, int u)
{
    const pf_plan *plan = p->plan;
    char w[512];
    if (pf_fuse_stencil_possible(p, u, w, sizeof w) != PF_FUSE_STENCIL_3X3)
        return -1; /* a separable stencil's vertical pass stores its result as it is */
    int e = plan->cons_first[plan->units[u].nodes[0]];
    for (int eu; (eu = epilogue_candidate(p, u, &e)) >= 0;) {
        int taken = 0; /* a reduce or stencil runs its ops on the way in */
        for (int v = eu + 1; v < plan->n_units && !taken; v++)
            taken = plan->units[v].kind != PF_UNIT_POINT && pf_fuse_absorbs(p, v) == eu;
        if (!taken)
            return eu;
    }
    return -1;
}

/* pf_fuse_epilogue's answer where it does not depend on which units absorb the
   candidate (no reduce or stencil reads the candidate's results, so none can), else
   -1: the same first candidate, found without asking pf_fuse_absorbs, which asks this. */
static int sure_epilogue(const pf_pipeline *p, int u)
{
    const pf_plan *plan = p->plan;
    char w[512];
    if (pf_fuse_stencil_possible(p, u, w, sizeof w) != PF_FUSE_STENCIL_3X3)
        return -1;
    int e = plan->cons_first[plan->units[u].nodes[0]];
    int eu = epilogue_candidate(p, u, &e);
    if (eu < 0)
        return -1;
    const pf_unit *un = &plan->units[eu];
    for (int a = 0; a < un->n_nodes; a++)
        for (int c = plan->cons_first[un->nodes[a]]; c < plan->cons_first[un->nodes[a] + 1]; c++)
            if (plan->units[plan->unit_of[plan->cons[c]]].kind != PF_UNIT_POINT)
                return -1;
    return eu;
}

int pf_fuse_recompute(const pf_pipeline *p, int u)
{
    const pf_plan *plan = p->plan;
    char w[512];
    int eu = sure_epilogue(p, u);
    if (eu < 0)
        return -1;
    const pf_unit *e = &plan->units[eu];
    int s = plan->units[u].nodes[0];
    for (int k = 0; k < e->n_inputs; k++) {
        int q = e->inputs[k], xu = q < p->n_inputs ? -1 : plan->unit_of[q];
        if (q == s || xu < 0 || xu == eu)
            continue;
        const pf_unit *x = &plan->units[xu];
        if (x->kind != PF_UNIT_POINT || x->n_nodes > PF_FUSE_RECOMPUTE_MAX ||
            !pf_fuse_possible(p, xu, w, sizeof w) ||
            x->n_inputs + e->n_inputs + 8 > PF_MAX_FUSED_IO / 2)
            continue;
        int ok = 1;
        for (int j = 0; j < x->n_inputs && ok; j++)
            ok = x->inputs[j] < p->n_inputs; /* loaded at the pixel, ready before any kernel */
        for (int a = 0; a < x->n_nodes && ok; a++) {
            int m = x->nodes[a];
            ok = !plan->is_out[m];
            for (int c = plan->cons_first[m]; c < plan->cons_first[m + 1] && ok; c++) {
                int cu = plan->unit_of[plan->cons[c]];
                ok = cu == xu || cu == eu ||
                     (takes_in(p, cu, xu) && plan->units[cu].nodes[0] == plan->cons[c]);
            }
        }
        if (ok)
            return xu;
    }
    return -1;
}

int pf_fuse_decide(const pf_pipeline *p, const char *no_nvrtc, int *fused, char *f4, char *why,
                   size_t why_size)
{
    const pf_plan *plan = p->plan;
    int fmt[PF_MAX_FRAMES], n = 0;
    for (int i = 0; i < PF_MAX_FRAMES; i++)
        fmt[i] = pf_format_code(PF_U8, 4); /* IO lists' lengths do not depend on formats */
    if (why_size)
        why[0] = 0;
    for (int u = 0; u < plan->n_units; u++) {
        char w[512] = "";
        fused[u] = plan->units[u].kind == PF_UNIT_POINT && pf_fuse_possible(p, u, w, sizeof w);
        if (fused[u] && no_nvrtc) {
            fused[u] = 0;
            snprintf(w, sizeof w, "%s", no_nvrtc);
        }
        if (plan->units[u].kind == PF_UNIT_POINT && !fused[u] && why_size && !why[0])
            snprintf(why, why_size, "%s", w);
    }
    /* Summing reduces: a kernel of their own, running the ops of a point unit that
       only they read. */
    for (int u = 0; u < plan->n_units && !no_nvrtc; u++) {
        char w[512];
        if (!pf_fuse_reduce_possible(p, u, w, sizeof w))
            continue;
        fused[u] = PF_FUSE_KERNEL;
        int pu = pf_fuse_absorbs(p, u);
        if (pu >= 0)
            fused[pu] = PF_FUSE_ABSORBED;
    }
    /* Stencils declaring their per-pixel function (3x3) or their taps (separable):
       kernels of their own, running the ops of a point unit that only they read on the
       tile or the rows they stage. */
    for (int u = 0; u < plan->n_units && !no_nvrtc; u++) {
        char w[512];
        if (!pf_fuse_stencil_possible(p, u, w, sizeof w))
            continue;
        fused[u] = PF_FUSE_KERNEL;
        int pu = pf_fuse_absorbs(p, u), eu = pf_fuse_epilogue(p, u), xu = pf_fuse_recompute(p, u);
        if (pu >= 0)
            fused[pu] = PF_FUSE_ABSORBED;
        if (eu >= 0)
            fused[eu] = PF_FUSE_EPILOGUE;
        if (xu >= 0) /* every kernel reading it computes it */
            fused[xu] = PF_FUSE_ABSORBED;
    }
    pf_fuse_buffers(p, fused, f4);
    pf_fuse_unit io;
    int dropped = 0;
    for (int u = 0; u < plan->n_units; u++)
        if (fused[u] == PF_FUSE_KERNEL && plan->units[u].kind != PF_UNIT_REDUCE &&
            pf_fuse_unit_io(p, u, f4, fmt, fmt, &io) != 0) {
            /* too many loads or stores for one kernel; the point units a stencil took in
               then run their own kernels again */
            int pu = plan->units[u].kind == PF_UNIT_STENCIL ? pf_fuse_absorbs(p, u) : -1;
            int eu = plan->units[u].kind == PF_UNIT_STENCIL ? pf_fuse_epilogue(p, u) : -1;
            int xu = plan->units[u].kind == PF_UNIT_STENCIL ? pf_fuse_recompute(p, u) : -1;
            /* (another kernel may still compute pu or xu itself; its image is stored for
               this unit's stages all the same) */
            if (pu >= 0)
                fused[pu] = PF_FUSE_KERNEL;
            if (eu >= 0)
                fused[eu] = PF_FUSE_KERNEL;
            if (xu >= 0)
                fused[xu] = PF_FUSE_KERNEL;
            fused[u] = 0;
            dropped = 1;
            if (why_size && !why[0])
                snprintf(why, why_size, "unit #%d would have more than %d loads or stores", u,
                         PF_MAX_FUSED_IO);
        }
    if (dropped)
        pf_fuse_buffers(p, fused, f4);
    for (int u = 0; u < plan->n_units; u++)
        n += fused[u] == PF_FUSE_KERNEL;
    return n;
}

int pf_fuse_ppt(int width, int height, int sm_count)
{
    double px = (double)width * height, want = (double)(sm_count > 0 ? sm_count : 1) * 2048.0;
    int ppt = 8;
    while (ppt > 1 && px / ppt < want)
        ppt /= 2;
    return ppt;
}

/* ---- Source generation ---------------------------------------------------------------------- */

void pf_sb_printf(pf_sb *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 65536) + (size_t)k;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* Each distinct op source lives in a namespace of its own (pf_ns<k>), so two plugins'
   helpers can share names. Returns the namespace index of node i's source. */
int pf_fuse_source_index(const pf_pipeline *p, const pf_unit *un, int a)
{
    const char *src = p->nodes[un->nodes[a]].desc->point_source;
    for (int b = 0; b < a; b++)
        if (p->nodes[un->nodes[b]].desc->point_source == src)
            return pf_fuse_source_index(p, un, b);
    return a;
}

/* Op headers are pasted one after another, but the preprocessor has no namespaces: two
   headers with the same include guard (both made from the skeleton: MY_OPS_H), or the
   same macro, would meet. So every macro a header defines (its guard too) is undefined
   before and after it, except those of the engine's own headers. */
static int engine_macro(const char *name, size_t n)
{
    const char *const texts[] = {pf_src_point_h, pf_src_fused_rt,     pf_src_frame_desc,
                                 pf_src_edge,    pf_src_separable_rt, pf_src_premultiply};
    for (int t = 0; t < 6; t++)
        for (const char *q = strstr(texts[t], "#define "); q; q = strstr(q + 1, "#define ")) {
            const char *m = q + 8;
            if (strncmp(m, name, n) == 0 &&
                !(m[n] == '_' || (m[n] >= '0' && m[n] <= '9') || (m[n] >= 'A' && m[n] <= 'Z') ||
                  (m[n] >= 'a' && m[n] <= 'z')))
                return 1;
        }
    return 0;
}

static void undef_macros(pf_sb *b, const char *src)
{
    for (const char *line = src; line && *line;
         line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *q = line;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q++ != '#')
            continue;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, "define", 6) != 0 || (q[6] != ' ' && q[6] != '\t'))
            continue;
        q += 6;
        while (*q == ' ' || *q == '\t')
            q++;
        size_t n = 0;
        while (q[n] == '_' || (q[n] >= '0' && q[n] <= '9') || (q[n] >= 'A' && q[n] <= 'Z') ||
               (q[n] >= 'a' && q[n] <= 'z'))
            n++;
        if (n && !engine_macro(q, n))
            pf_sb_printf(b, "#undef %.*s\n", (int)n, q);
    }
}

/* Lines in b so far. */
static int sb_lines(const pf_sb *b)
{
    int n = 0;
    for (size_t i = 0; b->s && i < b->n; i++)
        n += b->s[i] == '\n';
    return n;
}

/* Node n's op header inside namespace pf_ns<ns>, its macros undefined around it. Its
   lines are numbered as the author's: from its own leading #line (pipefuse_add_plugin
   embeds one naming the header), else as "<stage>.ops" of the plugin's file, so that
   NVRTC's messages point at the header's own line; the kernel's name (the program's)
   numbers what follows. */
void pf_fuse_emit_op(pf_sb *b, const pf_pipeline *p, const pf_node *n, int ns, const char *kernel)
{
    const char *src = n->desc->point_source;
    undef_macros(b, src);
    pf_sb_printf(b, "namespace pf_ns%d { // %s\n", ns, n->desc->name);
    if (strncmp(src, "#line ", 6) != 0) {
        const char *file = n->plugin >= 0 ? p->eng->plugins[n->plugin].path : "?";
        pf_sb_printf(b, "#line 1 \"");
        for (const char *c = file; *c; c++) /* a file name with quotes stays one string */
            pf_sb_printf(b, "%c", *c == '"' || *c == '\\' ? '_' : *c);
        pf_sb_printf(b, ": op header of stage %s\"\n", n->desc->name);
    }
    pf_sb_printf(b, "%s\n", src);
    pf_sb_printf(b, "#line %d \"%s\"\n} // namespace pf_ns%d\n", sb_lines(b) + 2, kernel, ns);
    undef_macros(b, src);
    pf_sb_printf(b, "\n");
}

/* The kernel's signature and its parameter pointer P: the members' parameters by value
   (a __grid_constant__ argument, read from the constant bank) or through a pointer to
   the device block (io->param_arg). */
void pf_fuse_emit_signature(pf_sb *b, const pf_fuse_unit *io, const char *name)
{
    const char *extra =
        io->reduce ? ",\n   double *__restrict__ part, int rows, int chunk0, int n_part,\n"
                     "   double *__restrict__ table, unsigned int *__restrict__ done, "
                     "int cluster"
        : io->stencil == PF_FUSE_STENCIL_SEPARABLE
            ? ",\n   float4 *__restrict__ tmp, float *__restrict__ taps, int s0, int rpb"
            : "";
    if (io->param_arg)
        pf_sb_printf(b, "struct __align__(16) %s_params {\n    unsigned char b[%zu];\n};\n", name,
                     io->param_bytes);
    if (io->desc_arg)
        pf_sb_printf(b, "struct __align__(8) %s_io {\n    pf_frame_desc d[%d];\n};\n", name,
                     io->n_in + io->n_out);
    pf_sb_printf(b, "extern \"C\" __global__ void __launch_bounds__(256)\n%s(", name);
    if (io->param_arg)
        pf_sb_printf(b, "const __grid_constant__ %s_params PB", name);
    else
        pf_sb_printf(b, "const unsigned char *__restrict__ P");
    if (io->desc_arg)
        pf_sb_printf(b, ", const __grid_constant__ %s_io IOB", name);
    else
        pf_sb_printf(b, ", const pf_frame_desc *__restrict__ io");
    pf_sb_printf(b, ",\n   int W, int H, int y0, int y1%s)\n{\n", extra);
    if (io->param_arg)
        pf_sb_printf(
            b, "    const unsigned char *P = PB.b; /* offsets from byte %zu of the block */\n",
            pf_fuse_annotating() ? io->param_lo : 0); /* 0: the compiled text names none */
    if (io->desc_arg)
        pf_sb_printf(b, "    const pf_frame_desc *io = IOB.d; /* by value: the constant bank */\n");
}

/* Whether a later member of un reads member a's value. */
static int read_later(const pf_pipeline *p, const pf_unit *un, int a)
{
    for (int c = a + 1; c < un->n_nodes; c++)
        for (int k = 0; k < p->nodes[un->nodes[c]].n_in; k++)
            if (p->nodes[un->nodes[c]].in[k] == un->nodes[a])
                return 1;
    return 0;
}

/* Member a of the unit: its inputs (earlier members' values or the unit's loads), its op
   on its parameters, and its value into the outputs it feeds. A value another op of the
   kernel reads passes through pf_opaque (the NVVM workaround, kernels/fused_rt.h); one
   only stored or summed does not, so the compiler may fold the last op into the store
   or the sum (a gray pixel's equal channels converted once). In a stencil's kernel every
   value does: its tile and epilogue carry values between ops through shared memory. */
void pf_fuse_emit_member(pf_sb *b, const pf_pipeline *p, const pf_unit *un, const pf_fuse_unit *io,
                         const size_t *param_off, int a, int ns_base)
{
    int m = un->nodes[a];
    const pf_node *n = &p->nodes[m];
    pf_sb_printf(b, "        pf_float4 a%d[%d] = {", a, n->n_in);
    for (int k = 0; k < n->n_in; k++) {
        int q = n->in[k], src = -1;
        for (int c = 0; c < a && src < 0; c++)
            if (un->nodes[c] == q)
                src = c;
        int rv = -1; /* a value of the unit the epilogue recomputes: rv<index> */
        const pf_unit *rec = io->rec_unit >= 0 && un != &p->plan->units[io->rec_unit] &&
                                     q >= p->n_inputs && p->plan->unit_of[q] == io->rec_unit
                                 ? &p->plan->units[io->rec_unit]
                                 : NULL;
        for (int c = 0; rec && c < rec->n_nodes && rv < 0; c++)
            if (rec->nodes[c] == q)
                rv = c;
        if (src >= 0) {
            pf_sb_printf(b, "%sv%d", k ? ", " : "", src);
        } else if (rv >= 0) {
            pf_sb_printf(b, "%srv%d", k ? ", " : "", rv);
        } else {
            int e = 0;
            while (e < io->n_in && io->in[e].node != q)
                e++;
            pf_sb_printf(b, "%sin%d[i]", k ? ", " : "", e);
        }
    }
    int ns = ns_base + pf_fuse_source_index(p, un, a), opaque = io->stencil || read_later(p, un, a);
    pf_sb_printf(b,
                 "};\n        pf_float4 v%d = %s(pf_ns%d::%s((const pf_ns%d::%s *)(P + %zu), "
                 "a%d, pos)); // %s\n",
                 a, opaque ? "pf_opaque" : "", ns, n->desc->point_fn, ns, n->desc->params_type,
                 param_off[m] - (io->param_arg ? io->param_lo : 0), a, pf_fuse_note(n->id));
    for (int k = 0; k < io->n_out; k++)
        if (io->out[k].node == m)
            pf_sb_printf(b, "        out%d[i] = v%d;\n", k, a);
}

/* Pixels per chunk: the widest format's chunk is at most 16 bytes, and at most ppt
   pixels. */
static int chunk_pixels(const pf_fuse_unit *io, int ppt)
{
    int vp = ppt;
    for (int k = 0; k < io->n_in + io->n_out; k++) {
        const pf_fuse_io *e = k < io->n_in ? &io->in[k] : &io->out[k - io->n_in];
        int bpp = (int)pf_frame_pixel_bytes((pf_sample)e->sample, e->channels), v = 1;
        while (v * 2 <= 8 && v * 2 * bpp <= 16)
            v *= 2;
        vp = v < vp ? v : vp;
    }
    return vp;
}

/* The loads of chunk `x` of row `y` of every input, into in<k>[0..VP). */
static void emit_loads(pf_sb *b, const pf_pipeline *p, const pf_fuse_unit *io, int vp,
                       const char *indent, const char *x)
{
    for (int k = 0; k < io->n_in; k++)
        pf_sb_printf(
            b,
            "%spf_float4 in%d[%d]; /* %s */\n%spf_load_chunk<%d, %d, %d>(io[%d], y, %s, W, "
            "in%d);\n",
            indent, k, vp, pf_fuse_note(p->nodes[io->in[k].node].id), indent, io->in[k].sample,
            io->in[k].channels, vp, k, x, k);
}

/* The point ops of the absorbed unit on pixel i (members' values v<a>), and the value
   summed, into pf_float4 r. */
static void emit_reduce_value(pf_sb *b, const pf_pipeline *p, const pf_fuse_unit *io,
                              const size_t *param_off)
{
    if (io->src_unit < 0) {
        pf_sb_printf(b, "        const pf_float4 r = in0[i];\n");
        return;
    }
    const pf_unit *src = &p->plan->units[io->src_unit];
    int value = 0;
    for (int a = 0; a < src->n_nodes; a++) {
        pf_fuse_emit_member(b, p, src, io, param_off, a, 0);
        if (src->nodes[a] == io->value_node)
            value = a;
    }
    pf_sb_printf(b, "        const pf_float4 r = v%d;\n", value);
}

/* The end of a summing reduce kernel (table != 0): each block counts itself done in
   done[g] for its group g of blocks (the blocks whose partials hold the same entries) and
   the group's last block adds every partial of its entries, k = 0 to n_part - 1 in order
   (their loads eight at a time), into the table, then sets done[g] back to 0 for the next
   frame. The entries: ENTRY(e) gives entry e of the group's, its partial k at
   part[PART(k, entry)]; the loop stops at the first e past the group's. */
static void emit_reduce_combine(pf_sb *b, const char *group, const char *members, const char *entry,
                                const char *part_at)
{
    pf_sb_printf(b,
                 "    if (!table)\n        return;\n"
                 "    __shared__ int last;\n    __threadfence();\n    __syncthreads();\n"
                 "    const int me = threadIdx.y * blockDim.x + threadIdx.x;\n"
                 "    if (me == 0)\n"
                 "        last = atomicAdd(&done[%s], 1u) == (unsigned)(%s) - 1u;\n"
                 "    __syncthreads();\n    if (!last)\n        return;\n    __threadfence();\n"
                 "    for (int e = me;; e += blockDim.x * blockDim.y) {\n"
                 "        %s\n"
                 "        double v = 0.0;\n"
                 "        for (int k0 = 0; k0 < n_part; k0 += 8) {\n"
                 "            double t[8];\n#pragma unroll\n"
                 "            for (int q = 0; q < 8; q++)\n"
                 "                t[q] = k0 + q < n_part ? __ldcg(part + (%s)) : 0.0;\n"
                 "#pragma unroll\n            for (int q = 0; q < 8; q++)\n"
                 "                if (k0 + q < n_part)\n                    v += t[q];\n"
                 "        }\n        table[j] = pf_fin(P, v, j, W, H);\n    }\n"
                 "    if (me == 0)\n        done[%s] = 0u;\n}\n",
                 group, members, entry, part_at, group);
}

/* A summing reduce by columns: a block is 4 threads of vp pixels across and 64 rows
   down, over a stripe of 4 vp pixels and a chunk of `rows` rows; each thread adds every
   64th row of the chunk (loading up to 4 of them before adding, so that their loads are
   in flight together), a warp's 8 rows add by pf_lane_sums (a fixed tree), and the 8
   warps in order in shared memory. The stripe's sums are the table's entries when the
   frame has one chunk (n_part 1: no partials, no counting); else they go to the
   chunk's partial table (table chunk0 + blockIdx.y of part), and the blocks of a stripe
   are a group: its last block adds the chunks' partials. */
static void emit_colsum_body(pf_sb *b, const pf_pipeline *p, const pf_fuse_unit *io,
                             const size_t *param_off, int vp)
{
    /* rows a thread loads ahead of their sums: 4, fewer with more inputs (registers) */
    int kr = io->n_in == 1 ? 4 : (io->n_in == 2 ? 2 : 1);
    pf_sb_printf(
        b,
        "    /* in a cluster only where the launch really made the stripe's chunks one (a\n"
        "       launch or graph node without the attribute takes the partial tables) */\n"
        "    cluster = cluster && pf_cluster_size() == (unsigned)n_part && "
        "(int)gridDim.y == n_part;\n"
        "    if (cluster) /* every block of the cluster has started by the wait below */\n"
        "        pf_cluster_arrive();\n"
        "    const int x = (blockIdx.x * 4 + threadIdx.x) * %d;\n"
        "    const int ya = y0 + blockIdx.y * rows, yb = min(ya + rows, y1);\n"
        "    double s[%d][4];\n#pragma unroll\n    for (int i = 0; i < %d; i++)\n"
        "        s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0;\n"
        "    for (int y0k = ya + threadIdx.y; y0k < yb && x < W; y0k += %d) {\n",
        vp, vp, vp, 64 * kr);
    /* kr rows' loads first, all in flight together, then their sums */
    for (int k = 0; k < io->n_in; k++)
        pf_sb_printf(b,
                     "        pf_float4 ld%d[%d][%d]; /* %s */\n#pragma unroll\n"
                     "        for (int k = 0; k < %d; k++)\n"
                     "            if (y0k + 64 * k < yb)\n"
                     "                pf_load_chunk<%d, %d, %d>(io[%d], y0k + 64 * k, x, W, "
                     "ld%d[k]);\n",
                     k, kr, vp, pf_fuse_note(p->nodes[io->in[k].node].id), kr, io->in[k].sample,
                     io->in[k].channels, vp, k, k);
    pf_sb_printf(b,
                 "#pragma unroll\n        for (int k = 0; k < %d; k++) {\n"
                 "        const int y = y0k + 64 * k;\n        if (y >= yb)\n            break;\n",
                 kr);
    for (int k = 0; k < io->n_in; k++)
        pf_sb_printf(b, "        const pf_float4 *in%d = ld%d[k];\n", k, k);
    pf_sb_printf(b,
                 "#pragma unroll\n        for (int i = 0; i < %d; i++) {\n"
                 "        pf_pos pos;\n        pos.x = x + i, pos.y = y, pos.width = W, "
                 "pos.height = H;\n",
                 vp);
    emit_reduce_value(b, p, io, param_off);
    pf_sb_printf(
        b,
        "        s[i][0] += (double)r.x, s[i][1] += (double)r.y, s[i][2] += (double)r.z, "
        "s[i][3] += (double)r.w;\n        }\n        }\n    }\n"
        "    const int tid = threadIdx.y * 4 + threadIdx.x, warp = tid >> 5;\n"
        "    __shared__ double sh[8][%d * 4][4];\n    {\n"
        "        double v[%d * 4];\n#pragma unroll\n"
        "        for (int k = 0; k < %d * 4; k++)\n            v[k] = s[k / 4][k %% 4];\n"
        "        int first, dup;\n        pf_lane_sums<%d * 4, 4>(v, tid & 31, &first, &dup);\n"
        "        if (!(tid & dup))\n#pragma unroll\n"
        "            for (int i = 0; i < pf_lane_sums_left<%d * 4, 4>(); i++)\n"
        "                sh[warp][first + i][threadIdx.x] = v[i];\n    }\n"
        "    __syncthreads();\n"
        "    __shared__ double cl[8][4 * %d * 4]; /* block 0 of a cluster: its blocks' sums */\n"
        "    const size_t len = (size_t)W * 4, base = (size_t)blockIdx.x * 4 * %d * 4;\n"
        "    const int n = min(4 * %d, W - (int)blockIdx.x * 4 * %d) * 4;\n"
        "    if (cluster)\n        pf_cluster_wait();\n"
        "    if (tid < n) {\n"
        "        const int px = tid / 4, k = (px %% %d) * 4 + tid %% 4, t = px / %d;\n"
        "        double v = sh[0][k][t];\n#pragma unroll\n"
        "        for (int r = 1; r < 8; r++)\n            v += sh[r][k][t];\n"
        "        if (table && n_part == 1)\n            table[base + tid] = pf_fin(P, v, base + "
        "tid, W, H);\n"
        "        else if (cluster)\n            pf_cluster_st(&cl[pf_cluster_rank()][tid], v, 0);\n"
        "        else\n"
        "            part[(size_t)(chunk0 + blockIdx.y) * len + base + tid] = v;\n"
        "    }\n    if (n_part == 1)\n        return;\n"
        "    if (cluster) { /* the stripe's chunks are one cluster: block 0 adds them in order */\n"
        "        pf_cluster_sync();\n"
        "        if (pf_cluster_rank() == 0 && tid < n) {\n"
        "            double v = 0.0;\n"
        "            for (int k = 0; k < n_part; k++)\n"
        "                v += cl[k][tid];\n"
        "            table[base + tid] = pf_fin(P, v, base + tid, W, H);\n"
        "        }\n"
        "        return;\n    }\n",
        vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp);
    emit_reduce_combine(b, "blockIdx.x", "gridDim.y",
                        "if (e >= n)\n            break;\n        const size_t j = base + e;",
                        "(size_t)(k0 + q) * len + j");
}

/* A summing reduce by rows: a block is 256 threads of vp pixels along one row, added by
   pf_lane_sums (a fixed tree) and then warp by warp, for rows blockIdx.y, + gridDim.y, ...; each
   block of a row leaves its partial in its own table of part (the table itself when the
   row takes one block). The blocks of the same rows are a group: its last block adds
   the row blocks' partials. */
static void emit_rowsum_body(pf_sb *b, const pf_pipeline *p, const pf_fuse_unit *io,
                             const size_t *param_off, int vp)
{
    pf_sb_printf(b,
                 "    const int x = (blockIdx.x * 256 + threadIdx.x) * %d;\n"
                 "    double *const out = n_part == 1 && table ? table : part;\n"
                 "    __shared__ double sh[8][4];\n"
                 "    for (int y = y0 + blockIdx.y; y < y1; y += gridDim.y) {\n"
                 "    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;\n    if (x < W) {\n",
                 vp);
    emit_loads(b, p, io, vp, "        ", "x");
    pf_sb_printf(
        b,
        "#pragma unroll\n        for (int i = 0; i < %d; i++) {\n"
        "        pf_pos pos;\n        pos.x = x + i, pos.y = y, pos.width = W, pos.height = H;\n",
        vp);
    emit_reduce_value(b, p, io, param_off);
    pf_sb_printf(
        b,
        "        if (x + i < W)\n"
        "            s0 += (double)r.x, s1 += (double)r.y, s2 += (double)r.z, s3 += (double)r.w;\n"
        "        }\n    }\n"
        "    {\n        double v[4] = {s0, s1, s2, s3};\n        int c, dup;\n"
        "        pf_lane_sums<4, 1>(v, threadIdx.x & 31, &c, &dup);\n"
        "        if (!(threadIdx.x & dup))\n            sh[threadIdx.x / 32][c] = v[0];\n    }\n"
        "    __syncthreads();\n    if (threadIdx.x < 4) {\n"
        "        double t = sh[0][threadIdx.x];\n"
        "        for (int w = 1; w < 8; w++)\n            t += sh[w][threadIdx.x];\n"
        "        const size_t j = ((size_t)(n_part == 1 ? 0 : blockIdx.x) * H + y) * 4 + "
        "threadIdx.x;\n"
        "        out[j] = out == table ? pf_fin(P, t, j, W, H) : t;\n"
        "    }\n    __syncthreads();\n    }\n"
        "    if (n_part == 1)\n        return;\n");
    emit_reduce_combine(b, "blockIdx.y", "gridDim.x",
                        "const int y = y0 + blockIdx.y + e / 4 * gridDim.y;\n"
                        "        if (y >= y1)\n            break;\n"
                        "        const size_t j = (size_t)y * 4 + e % 4;",
                        "(size_t)(k0 + q) * H * 4 + j");
}

/* The kernel of a summing reduce unit (see emit_colsum_body, emit_rowsum_body). */
static char *reduce_source(const pf_pipeline *p, int u, const pf_fuse_unit *io,
                           const size_t *param_off, const char *name)
{
    const pf_unit *src = io->src_unit >= 0 ? &p->plan->units[io->src_unit] : NULL;
    const pf_node *r = &p->nodes[p->plan->units[u].nodes[0]];
    pf_sb b = {0};
    pf_sb_printf(&b, "// pipefuse fused kernel %s: %s [", name, p->source);
    for (int a = 0; src && a < src->n_nodes; a++)
        pf_sb_printf(&b, "%s + ", src->ids[a]);
    int vp = chunk_pixels(io, io->ppt);
    pf_sb_printf(&b,
                 "%s, a sum by %s]\n#define PF_PPT %d\n#include \"pipefuse/point.h\"\n"
                 "#include \"pipefuse/fused_rt.h\"\n\n",
                 r->id, io->reduce == PF_REDUCE_SUM_COLUMNS ? "columns" : "rows", vp);
    for (int a = 0; src && a < src->n_nodes; a++)
        if (pf_fuse_source_index(p, src, a) == a)
            pf_fuse_emit_op(&b, p, &p->nodes[src->nodes[a]], a, name);
    /* Each entry of the table from its sum (j: row j / 4, column j % 4): the stage's
       reduce_finish on its params, in a namespace after the absorbed unit's, or the sum. */
    const int rn = p->plan->units[u].nodes[0], ns = src ? src->n_nodes : 0;
    if (r->desc->reduce_finish) {
        pf_fuse_emit_op(&b, p, r, ns, name);
        pf_sb_printf(&b,
                     "static __device__ __forceinline__ double pf_fin(const unsigned char *P, "
                     "double v, size_t j, int W, int H)\n{\n"
                     "    return pf_ns%d::%s((const pf_ns%d::%s *)(P + %zu), v, (int)(j / 4), "
                     "(int)(j %% 4), W, H); // %s\n}\n\n",
                     ns, r->desc->reduce_finish, ns, r->desc->params_type,
                     param_off[rn] - (io->param_arg ? io->param_lo : 0), pf_fuse_note(r->id));
    } else {
        pf_sb_printf(&b, "static __device__ __forceinline__ double pf_fin(const unsigned char *, "
                         "double v, size_t, int, int)\n{\n    return v;\n}\n\n");
    }
    pf_fuse_emit_signature(&b, io, name);
    if (io->reduce == PF_REDUCE_SUM_COLUMNS)
        emit_colsum_body(&b, p, io, param_off, vp);
    else
        emit_rowsum_body(&b, p, io, param_off, vp);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *pf_fuse_source(const pf_pipeline *p, int u, const pf_fuse_unit *io, const size_t *param_off,
                     const char *name)
{
    if (io->reduce)
        return reduce_source(p, u, io, param_off, name);
    if (io->stencil)
        return pf_fuse_stencil_source(p, u, io, param_off, name);
    const pf_unit *un = &p->plan->units[u];
    pf_sb b = {0};
    pf_sb_printf(&b, "// pipefuse fused kernel %s: %s", name, p->source);
    for (int a = 0; a < un->n_nodes; a++)
        pf_sb_printf(&b, "%s%s", a ? " + " : " [", un->ids[a]);
    int ppt = io->ppt;
    pf_sb_printf(
        &b,
        "]\n#define PF_PPT %d\n#include \"pipefuse/point.h\"\n#include \"pipefuse/fused_rt.h\"\n\n",
        ppt);
    for (int a = 0; a < un->n_nodes; a++) {
        if (pf_fuse_source_index(p, un, a) != a)
            continue;
        pf_fuse_emit_op(&b, p, &p->nodes[un->nodes[a]], a, name);
    }
    int vp = chunk_pixels(io, ppt);
    pf_fuse_emit_signature(&b, io, name);
    pf_sb_printf(&b,
                 "    const int y = y0 + blockIdx.y * blockDim.y + threadIdx.y;\n"
                 "    if (y >= y1 || PF_PX_X(%d, 0) >= W)\n        return;\n",
                 vp);
    for (int k = 0; k < io->n_in; k++)
        pf_sb_printf(
            &b,
            "    pf_float4 in%d[PF_PPT]; /* %s */\n#pragma unroll\n"
            "    for (int c = 0; c < PF_PPT / %d; c++)\n"
            "        pf_load_chunk<%d, %d, %d>(io[%d], y, PF_PX_X(%d, c * %d), W, in%d + c * "
            "%d);\n",
            k, pf_fuse_note(p->nodes[io->in[k].node].id), vp, io->in[k].sample, io->in[k].channels,
            vp, k, vp, vp, k, vp);
    for (int k = 0; k < io->n_out; k++)
        pf_sb_printf(&b, "    pf_float4 out%d[PF_PPT];\n", k);
    pf_sb_printf(&b,
                 "#pragma unroll\n    for (int i = 0; i < PF_PPT; i++) {\n"
                 "        pf_pos pos;\n        pos.x = PF_PX_X(%d, i), pos.y = y, pos.width = W, "
                 "pos.height = H;\n",
                 vp);
    for (int a = 0; a < un->n_nodes; a++)
        pf_fuse_emit_member(&b, p, un, io, param_off, a, 0);
    pf_sb_printf(&b, "    }\n");
    for (int k = 0; k < io->n_out; k++)
        pf_sb_printf(
            &b,
            "#pragma unroll\n    for (int c = 0; c < PF_PPT / %d; c++) /* %s%s */\n"
            "        pf_store_chunk<%d, %d, %d>(io[%d], y, PF_PX_X(%d, c * %d), W, out%d + c "
            "* %d);\n",
            vp, pf_fuse_note(p->nodes[io->out[k].node].id),
            pf_fuse_note(io->out[k].native >= 0 ? ", pipeline output" : ""), io->out[k].sample,
            io->out[k].channels, vp, io->n_in + k, vp, vp, k, vp);
    pf_sb_printf(&b, "}\n");
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* After a failed compile of unit u: each distinct op header the kernel holds (the
   unit's, and those of the point units it absorbs or takes as an epilogue; a summing
   reduce has one only where it declares reduce_finish) compiled alone, after pipefuse/point.h as in the kernel.
   Those that fail are named in p->errmsg, each with its stage, plugin file and NVRTC's
   log (which points at the header's own lines). Returns how many failed (0: only their
   combination fails). */
static int blame_ops(pf_pipeline *p, int u, const pf_fuse_unit *io, int arch)
{
    int units[3] = {u, io->reduce || io->stencil ? io->src_unit : -1,
                    io->stencil ? io->epi_unit : -1};
    int failed = 0;
    size_t o = (size_t)snprintf(p->errmsg, PF_ERRMSG_MAX, "%s: ", p->source);
    for (int k = 0; k < 3; k++) {
        const pf_unit *un = units[k] >= 0 ? &p->plan->units[units[k]] : NULL;
        for (int a = 0; un && a < un->n_nodes; a++) {
            const pf_node *n = &p->nodes[un->nodes[a]];
            if (!n->desc->point_source || pf_fuse_source_index(p, un, a) != a)
                continue;
            pf_sb b = {0};
            pf_sb_printf(&b, "#include \"pipefuse/point.h\"\n");
            pf_fuse_emit_op(&b, p, n, a, "pf_op_alone");
            void *cubin = NULL;
            size_t size = 0;
            char *log = NULL;
            int rc = b.failed ? PF_NO_MEMORY
                              : pf_nvrtc_compile(b.s, "pf_op_alone", arch,
                                                 p->opts.precision == PF_PRECISION_FAST, &cubin,
                                                 &size, &log, NULL);
            free(cubin);
            free(b.s);
            if (rc == PF_STAGE && o < PF_ERRMSG_MAX) {
                const char *file = n->plugin >= 0 ? p->eng->plugins[n->plugin].path : "?";
                o += (size_t)snprintf(p->errmsg + o, PF_ERRMSG_MAX - o,
                                      "%sstage '%s' (op %s of %s): its op header does not "
                                      "compile with NVRTC:\n%s",
                                      failed ? "\n" : "", n->id, n->desc->name, file,
                                      log ? log : "(no log)");
                failed++;
            }
            free(log);
        }
    }
    return failed;
}

int pf_fuse_build(pf_pipeline *p, int u, const char *f4, const int *in_fmt, const int *out_fmt,
                  int arch, int sm_count, const char *dump_dir, pf_fuse_unit *io, void **cubin,
                  size_t *size)
{
    const pf_unit *un = &p->plan->units[u];
    char name[64], ids[1024] = "";
    snprintf(name, sizeof name, "pf_fused_u%d", u); /* the dumped source's file name */
    for (int a = 0, o = 0; a < un->n_nodes && o < (int)sizeof ids - 64; a++)
        o += snprintf(ids + o, sizeof ids - (size_t)o, "%s%s", a ? ", " : "", un->ids[a]);
    if (pf_fuse_unit_io(p, u, f4, in_fmt, out_fmt, io) != 0) {
        pf_errf(p->errmsg, "%s: fused unit #%d (%s) has more than %d inputs or outputs", p->source,
                u, ids, PF_MAX_FUSED_IO);
        return PF_UNSUPPORTED;
    }
    /* A reduce's thread takes one chunk of a row at a time: pixels per thread = chunk; a
       stencil's thread one pixel of its tile. */
    io->ppt = io->stencil  ? 1
              : io->reduce ? chunk_pixels(io, 4)
                           : pf_fuse_ppt(un->shape.width, un->shape.height, sm_count);
    size_t *off = malloc(sizeof(size_t) * (size_t)p->n_nodes);
    if (!off)
        return PF_NO_MEMORY;
    pf_param_layout(p, off);
    /* The source as dumped names stages and offsets in its comments; the source compiled
       leaves them out (the same lines, so NVRTC's line numbers are the dump's), so that
       units of the same ops compile the same text. */
    char *src = pf_fuse_source(p, u, io, off, PF_FUSED_KERNEL);
    annotate = 0;
    char *plain = src ? pf_fuse_source(p, u, io, off, PF_FUSED_KERNEL) : NULL;
    annotate = 1;
    free(off);
    if (!src || !plain) {
        free(src);
        free(plain);
        pf_errf(p->errmsg, "%s: out of memory generating fused kernel #%d", p->source, u);
        return PF_NO_MEMORY;
    }
    if (dump_dir && pf_fuse_dump(dump_dir, name, src) != 0) {
        pf_errf(p->errmsg, "%s: cannot write the fused kernel's source %s/%s.cu: %s", p->source,
                dump_dir, name, strerror(errno));
        free(src);
        return PF_IO;
    }
    char *log = NULL;
    int hit = 0;
    /* The first line names the pipeline file and stage ids, for a dumped kernel; the
       compile (and so the kernel cache's key) starts after it, in the source without
       the names and offsets in comments, so the same ops in another file, under other
       ids or in another unit of the plan (a long chain's groups) find the same cached
       kernel. The #line directives keep NVRTC's line numbers those of the dumped
       source. */
    const char *body = plain + strcspn(plain, "\n");
    body += *body == '\n';
    int rc = pf_nvrtc_compile(body, name, arch, p->opts.precision == PF_PRECISION_FAST, cubin, size,
                              &log, &hit);
    free(plain);
    if (rc == PF_OK && hit)
        p->stats.kernel_cache_hits++;
    else if (rc == PF_OK)
        p->stats.kernel_compiles++;
    if (rc == PF_STAGE && blame_ops(p, u, io, arch) > 0) {
        /* the message names the ops that fail alone */
    } else if (rc == PF_STAGE) {
        /* Keep the source where the user can read it next to NVRTC's message. */
        char path[4200] = "";
        const char *dir = dump_dir;
        char tmpdir[4096];
        if (!dir) {
            const char *t = getenv("TMPDIR");
            snprintf(tmpdir, sizeof tmpdir, "%s", t && *t ? t : "/tmp");
            dir = tmpdir;
            snprintf(name, sizeof name, "pipefuse-%ld-u%d", (long)getpid(), u);
            if (pf_fuse_dump(dir, name, src) != 0)
                dir = NULL;
        }
        if (dir)
            snprintf(path, sizeof path, "%s/%s.cu", dir, name);
        pf_errf(p->errmsg, "%s: NVRTC failed to compile the fused kernel of stages %s%s%s:\n%s",
                p->source, ids, path[0] ? "; source in " : "", path, log ? log : "(no log)");
    } else if (rc != PF_OK) {
        pf_errf(p->errmsg, "%s: fused kernel of stages %s: %s", p->source, ids,
                log ? log : pf_status_str(rc));
    }
    free(log);
    free(src);
    return rc;
}

int pf_fuse_dump(const char *dir, const char *name, const char *source)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s.cu", dir, name) >= (int)sizeof path)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bad = fputs(source, f) < 0;
    return fclose(f) != 0 || bad ? -1 : 0;
}
