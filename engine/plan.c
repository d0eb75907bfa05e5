/* engine/plan.c: the planner. From the graph IR and the input shapes it infers every
 * shape, forms fusion groups, orders launch units, colours them onto streams, sizes
 * bands and allocates every buffer a frame needs, so that running a frame allocates
 * nothing.
 *
 * Fusion groups are maximal connected sets of point stages, grown greedily in
 * topological order, under one rule: a group may not both feed and depend on a unit
 * outside it (that would make the unit graph cyclic: a -> blur -> c with a -> c keeps
 * a and c apart).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec_cuda.h"
#include "plan.h"

#define PF_CPU_BAND_PIXELS 32768 /* pixels per CPU task: a few hundred KB of float4 */
#define PF_CPU_CHUNK       256   /* pixels per point-chain step: stays in L1/L2 */
#define PF_ALIGN           64

static size_t align_up(size_t v)
{
    return (v + PF_ALIGN - 1) & ~(size_t)(PF_ALIGN - 1);
}

void pf_plan_free(pf_plan *plan)
{
    if (!plan)
        return;
    pf_cuda_plan_free(plan->cu);
    for (int i = 0; i < plan->n_units; i++) {
        pf_unit *u = &plan->units[i];
        free(u->nodes);
        free(u->ids);
        free(u->inputs);
        free(u->stores);
        free(u->member_in);
        free(u->waits);
    }
    free(plan->units);
    for (int i = 0; i < plan->n_nodes; i++) {
        if (plan->buf)
            free(plan->buf[i].data);
        if (plan->tables)
            free(plan->tables[i].data);
        if (plan->partials)
            free(plan->partials[i]);
    }
    free(plan->buf);
    free(plan->tables);
    free(plan->partials);
    free(plan->in_shapes);
    free(plan->shapes);
    free(plan->unit_of);
    free(plan->stored);
    free(plan->scratch);
    free(plan);
}

/* ---- Shapes --------------------------------------------------------------------------------- */

static int infer_shapes(pf_pipeline *p, pf_plan *plan)
{
    for (int i = p->n_inputs; i < p->n_nodes; i++) {
        const pf_node *n = &p->nodes[i];
        if (!n->used)
            continue;
        const pf_shape *s0 = &plan->shapes[n->in[0]];
        for (int k = 1; k < n->n_in; k++) {
            const pf_shape *sk = &plan->shapes[n->in[k]];
            if (sk->width != s0->width || sk->height != s0->height) {
                pf_errf(p->errmsg,
                        "%s: %s (%s): input '%s' is %dx%d but input '%s' is %dx%d; the "
                        "inputs of a %s stage must have the same size",
                        p->source, n->path, n->id, p->nodes[n->in[k]].id, sk->width, sk->height,
                        p->nodes[n->in[0]].id, s0->width, s0->height, n->desc->name);
                return PF_SHAPE;
            }
        }
        pf_shape out = *s0;
        if (n->desc->kind == PF_STAGE_RESAMPLE || n->desc->kind == PF_STAGE_REDUCE) {
            char err[512] = "";
            if (n->desc->shape(n->params, s0, &out, err, sizeof err) != 0) {
                pf_errf(p->errmsg, "%s: %s (%s): %s", p->source, n->path, n->id,
                        err[0] ? err : "the stage cannot take this input size");
                return PF_SHAPE;
            }
        }
        if (out.width <= 0 || out.height <= 0 ||
            (unsigned long long)out.width * (unsigned long long)out.height > (1ull << 31)) {
            pf_errf(p->errmsg, "%s: %s (%s): output size %dx%d is empty or too large", p->source,
                    n->path, n->id, out.width, out.height);
            return PF_SHAPE;
        }
        plan->shapes[i] = out;
    }
    return PF_OK;
}

/* ---- Fusion --------------------------------------------------------------------------------- */

typedef struct bitset {
    int words;
    unsigned long long *bits; /* n_nodes rows of `words` words */
} bitset;

#define BS_ROW(bs, i)   ((bs)->bits + (size_t)(i) * (size_t)(bs)->words)
#define BS_TEST(row, j) (((row)[(j) >> 6] >> ((j)&63)) & 1ull)
#define BS_SET(row, j)  ((row)[(j) >> 6] |= 1ull << ((j)&63))

static int is_point(const pf_pipeline *p, int i)
{
    return i >= p->n_inputs && p->nodes[i].used && p->nodes[i].desc->kind == PF_STAGE_POINT;
}

/* May the node set M (flags in inset) form one unit? Not when a member reads a node
   outside M that some member reaches. */
static int group_ok(const pf_pipeline *p, const bitset *reach, const int *members, int n,
                    const char *inset)
{
    for (int a = 0; a < n; a++) {
        const pf_node *m = &p->nodes[members[a]];
        for (int k = 0; k < m->n_in; k++) {
            int q = m->in[k];
            if (inset[q])
                continue;
            for (int b = 0; b < n; b++)
                if (BS_TEST(BS_ROW(reach, members[b]), q))
                    return 0;
        }
    }
    return 1;
}

static void add_candidate(int *cand, int *n, int g)
{
    for (int i = 0; i < *n; i++)
        if (cand[i] == g)
            return;
    cand[(*n)++] = g;
}

/* Fills group[] (per node: group id, or -1) and returns the number of groups. */
static int form_groups(const pf_pipeline *p, int *group, int fuse)
{
    int nn = p->n_nodes, ngroups = 0;
    for (int i = 0; i < nn; i++)
        group[i] = -1;
    if (!fuse) {
        for (int i = p->n_inputs; i < nn; i++)
            if (is_point(p, i))
                group[i] = ngroups++;
        return ngroups;
    }
    bitset reach = {(nn + 63) / 64, NULL};
    reach.bits = calloc((size_t)nn * (size_t)reach.words, sizeof(unsigned long long));
    int *members = malloc(sizeof(int) * (size_t)nn);
    int *trial = malloc(sizeof(int) * (size_t)nn);
    char *inset = calloc((size_t)nn, 1);
    int *cand = malloc(sizeof(int) * (size_t)nn);
    if (!reach.bits || !members || !trial || !inset || !cand) {
        free(reach.bits), free(members), free(trial), free(inset), free(cand);
        return -1;
    }
    /* reach[i]: the nodes that depend on i, transitively (consumers come later). */
    for (int i = nn - 1; i >= 0; i--) {
        for (int c = i + 1; c < nn; c++) {
            const pf_node *cn = &p->nodes[c];
            for (int k = 0; k < cn->n_in; k++) {
                if (cn->in[k] != i)
                    continue;
                unsigned long long *ri = BS_ROW(&reach, i), *rc = BS_ROW(&reach, c);
                BS_SET(ri, c);
                for (int w = 0; w < reach.words; w++)
                    ri[w] |= rc[w];
                break;
            }
        }
    }
    for (int i = p->n_inputs; i < nn; i++) {
        if (!is_point(p, i))
            continue;
        int n = 0;
        members[n++] = i;
        inset[i] = 1;
        const pf_node *node = &p->nodes[i];
        /* Candidates: the groups of point producers, then of earlier point stages
           reading one of the same inputs (siblings share their loads). */
        int ncand = 0; /* distinct groups, so at most one per earlier node */
        for (int k = 0; k < node->n_in; k++)
            if (group[node->in[k]] >= 0)
                add_candidate(cand, &ncand, group[node->in[k]]);
        for (int j = p->n_inputs; j < i; j++) {
            if (group[j] < 0)
                continue;
            for (int k = 0; k < node->n_in; k++)
                for (int kk = 0; kk < p->nodes[j].n_in; kk++)
                    if (p->nodes[j].in[kk] == node->in[k])
                        add_candidate(cand, &ncand, group[j]);
        }
        for (int c = 0; c < ncand; c++) {
            int g = cand[c];
            int taken = 0;
            for (int j = 0; j < n && !taken; j++)
                taken = group[members[j]] == g;
            if (taken)
                continue;
            /* Try adding the whole group g. */
            int t = n;
            memcpy(trial, members, sizeof(int) * (size_t)n);
            for (int j = 0; j < i; j++)
                if (group[j] == g)
                    trial[t++] = j;
            for (int j = n; j < t; j++)
                inset[trial[j]] = 1;
            if (group_ok(p, &reach, trial, t, inset)) {
                memcpy(members, trial, sizeof(int) * (size_t)t);
                n = t;
            } else {
                for (int j = n; j < t; j++)
                    inset[trial[j]] = 0;
            }
        }
        int gid = ngroups++;
        for (int j = 0; j < n; j++) {
            group[members[j]] = gid;
            inset[members[j]] = 0;
        }
    }
    free(reach.bits), free(members), free(trial), free(inset), free(cand);
    /* Renumber densely in order of first member. */
    int *map = malloc(sizeof(int) * (size_t)(ngroups ? ngroups : 1));
    if (!map)
        return -1;
    for (int g = 0; g < ngroups; g++)
        map[g] = -1;
    int next = 0;
    for (int i = 0; i < nn; i++)
        if (group[i] >= 0 && map[group[i]] < 0)
            map[group[i]] = next++;
    for (int i = 0; i < nn; i++)
        if (group[i] >= 0)
            group[i] = map[group[i]];
    free(map);
    return next;
}

/* ---- Units ---------------------------------------------------------------------------------- */

static int append(int **arr, int *n, int v)
{
    for (int i = 0; i < *n; i++)
        if ((*arr)[i] == v)
            return 0;
    int *a = realloc(*arr, sizeof(int) * (size_t)(*n + 1));
    if (!a)
        return -1;
    a[(*n)++] = v;
    *arr = a;
    return 0;
}

static int is_output(const pf_pipeline *p, int node)
{
    for (int o = 0; o < p->n_outputs; o++)
        if (p->outputs[o].node == node)
            return 1;
    return 0;
}

static int make_units(pf_pipeline *p, pf_plan *plan)
{
    int nn = p->n_nodes;
    int *group = malloc(sizeof(int) * (size_t)nn);
    int *first_unit = malloc(sizeof(int) * (size_t)nn); /* raw unit id per node */
    if (!group || !first_unit) {
        free(group), free(first_unit);
        return PF_NO_MEMORY;
    }
    int ngroups = form_groups(p, group, p->opts.fusion);
    if (ngroups < 0) {
        free(group), free(first_unit);
        return PF_NO_MEMORY;
    }
    /* Raw units: groups 0..ngroups-1, then each used non-point stage. */
    int nraw = ngroups;
    for (int i = 0; i < nn; i++) {
        first_unit[i] = -1;
        if (group[i] >= 0)
            first_unit[i] = group[i];
        else if (i >= p->n_inputs && p->nodes[i].used)
            first_unit[i] = nraw++;
    }
    free(group);
    /* Order raw units topologically, the one holding the earliest node first. */
    int *order = malloc(sizeof(int) * (size_t)(nraw ? nraw : 1));
    char *done = calloc((size_t)(nraw ? nraw : 1), 1);
    plan->units = calloc((size_t)(nraw ? nraw : 1), sizeof(pf_unit));
    if (!order || !done || !plan->units) {
        free(order), free(done), free(first_unit);
        return PF_NO_MEMORY;
    }
    int placed = 0;
    while (placed < nraw) {
        int pick = -1;
        for (int i = p->n_inputs; i < nn && pick < 0; i++) {
            int u = first_unit[i];
            if (u < 0 || done[u])
                continue;
            int ready = 1; /* every member's producers already placed or inside u */
            for (int j = p->n_inputs; j < nn && ready; j++) {
                if (first_unit[j] != u)
                    continue;
                for (int k = 0; k < p->nodes[j].n_in; k++) {
                    int pu = first_unit[p->nodes[j].in[k]];
                    if (pu >= 0 && pu != u && !done[pu])
                        ready = 0;
                }
            }
            if (ready)
                pick = u;
        }
        if (pick < 0) { /* cannot happen: groups are formed acyclic */
            free(order), free(done), free(first_unit);
            pf_errf(p->errmsg, "%s: internal error: launch units form a cycle", p->source);
            return PF_INTERNAL;
        }
        done[pick] = 1;
        order[pick] = placed++;
    }
    free(done);
    plan->n_units = nraw;
    int rc = PF_OK;
    for (int i = p->n_inputs; i < nn && rc == PF_OK; i++) {
        if (first_unit[i] < 0)
            continue;
        int ui = order[first_unit[i]];
        pf_unit *u = &plan->units[ui];
        plan->unit_of[i] = ui;
        u->kind = (pf_unit_kind)p->nodes[i].desc->kind; /* same numbering */
        const char **ids = realloc(u->ids, sizeof(char *) * (size_t)(u->n_nodes + 1));
        if (!ids || append(&u->nodes, &u->n_nodes, i) != 0) {
            free(ids ? ids : NULL);
            rc = PF_NO_MEMORY;
            break;
        }
        u->ids = ids;
        u->ids[u->n_nodes - 1] = p->nodes[i].id;
        u->shape = u->kind == PF_UNIT_REDUCE ? plan->shapes[p->nodes[i].in[0]] : plan->shapes[i];
    }
    free(order);
    free(first_unit);
    return rc;
}

/* Inputs, stores and CPU sizing of every unit. */
static int unit_io(pf_pipeline *p, pf_plan *plan)
{
    for (int ui = 0; ui < plan->n_units; ui++) {
        pf_unit *u = &plan->units[ui];
        for (int a = 0; a < u->n_nodes; a++) {
            int i = u->nodes[a];
            const pf_node *n = &p->nodes[i];
            for (int k = 0; k < n->n_in; k++)
                if (plan->unit_of[n->in[k]] != ui && append(&u->inputs, &u->n_inputs, n->in[k]))
                    return PF_NO_MEMORY;
            int keep = u->kind != PF_UNIT_REDUCE && (u->kind != PF_UNIT_POINT || is_output(p, i));
            for (int c = i + 1; c < p->n_nodes && !keep && u->kind == PF_UNIT_POINT; c++) {
                const pf_node *cn = &p->nodes[c];
                if (!cn->used || plan->unit_of[c] == ui)
                    continue;
                for (int k = 0; k < cn->n_in; k++)
                    if (cn->in[k] == i)
                        keep = 1;
            }
            if (keep) {
                plan->stored[i] = 1;
                if (append(&u->stores, &u->n_stores, i))
                    return PF_NO_MEMORY;
            }
        }
        if (u->kind == PF_UNIT_POINT) {
            u->member_in = malloc(sizeof(int) * PF_MAX_INPUTS * (size_t)u->n_nodes);
            if (!u->member_in)
                return PF_NO_MEMORY;
            for (int a = 0; a < u->n_nodes; a++) {
                const pf_node *n = &p->nodes[u->nodes[a]];
                for (int k = 0; k < n->n_in; k++) {
                    int src = -(n->in[k] + 1);
                    for (int b = 0; b < a; b++)
                        if (u->nodes[b] == n->in[k])
                            src = b;
                    u->member_in[a * PF_MAX_INPUTS + k] = src;
                }
            }
        }
        const pf_node *n0 = &p->nodes[u->nodes[0]];
        int width = u->kind == PF_UNIT_REDUCE ? u->shape.width : plan->shapes[u->nodes[0]].width;
        u->cpu_band_rows = PF_CPU_BAND_PIXELS / width;
        if (u->cpu_band_rows < 1)
            u->cpu_band_rows = 1;
        u->bands = 1;
        if (u->kind == PF_UNIT_POINT)
            u->scratch = align_up((size_t)u->n_nodes * PF_CPU_CHUNK * sizeof(pf_float4));
        else if (n0->desc->scratch_bytes)
            u->scratch = align_up(n0->desc->scratch_bytes(n0->params, width, u->cpu_band_rows));
        if (u->kind == PF_UNIT_REDUCE)
            u->partial_len = n0->desc->partial_len(n0->params, &u->shape);
    }
    return PF_OK;
}

/* ---- Watchdog bands --------------------------------------------------------------------------

   The cost model: a unit takes bytes / bandwidth plus pixels * weight * PF_NS_PER_PX,
   where weight sums the members' declared costs (1 when they declare none). Bytes
   count 16 per pixel of every image read or written (float RGBA; native edges are
   smaller, so this errs long). A unit is split into bands predicted to take at most
   half the budget, leaving room for the model's error; measured band times refine
   the prediction per unit (p->band_scale) for later plans. */

#define PF_NS_PER_PX         0.02 /* a weight-1 op on a large GPU: 50 Gpx/s */
#define PF_BAND_FILL         0.5  /* target fraction of the budget per band */
#define PF_DEFAULT_BUDGET_MS 50.0
#define PF_ASSUMED_BANDWIDTH 1e12 /* bytes/s when no device was measured */

static void plan_bands(pf_pipeline *p, pf_plan *plan)
{
    int watchdog = 0;
    plan->bandwidth = PF_ASSUMED_BANDWIDTH;
    if (plan->cuda) {
        double bw = pf_cuda_bandwidth(p->eng);
        if (bw > 0) {
            plan->bandwidth = bw;
            plan->bandwidth_measured = 1;
        }
        watchdog = pf_cuda_watchdog(p->eng);
    }
    plan->budget_ms =
        p->opts.max_launch_ms > 0 ? p->opts.max_launch_ms : (watchdog ? PF_DEFAULT_BUDGET_MS : 0);
    for (int ui = 0; ui < plan->n_units; ui++) {
        pf_unit *u = &plan->units[ui];
        double px = (double)u->shape.width * u->shape.height, weight = 0;
        double images = (double)u->n_inputs + (u->kind == PF_UNIT_POINT ? u->n_stores : 1);
        for (int a = 0; a < u->n_nodes; a++) {
            const pf_node *n = &p->nodes[u->nodes[a]];
            weight += n->desc->cost > 0 ? n->desc->cost : 1.0;
            if (is_output(p, u->nodes[a]) && u->kind == PF_UNIT_POINT && !plan->stored[u->nodes[a]])
                images += 1;
        }
        if (u->kind == PF_UNIT_RESAMPLE) /* output shape differs from the input's */
            px = (double)plan->shapes[u->nodes[0]].width * plan->shapes[u->nodes[0]].height;
        if (u->kind == PF_UNIT_REDUCE)
            images = 1;
        u->bytes = px * 16.0 * images;
        u->predicted_ms = u->bytes / plan->bandwidth * 1e3 + px * weight * PF_NS_PER_PX * 1e-6;
        double scale = p->band_scale ? p->band_scale[u->nodes[0]] : 1.0;
        int rows = u->kind == PF_UNIT_REDUCE ? u->shape.height : plan->shapes[u->nodes[0]].height;
        u->bands = 1;
        if (plan->budget_ms > 0) {
            double want =
                u->predicted_ms * (scale > 0 ? scale : 1.0) / (plan->budget_ms * PF_BAND_FILL);
            if (want > 1)
                u->bands = want >= rows ? rows : (int)ceil(want);
        }
    }
}

/* Streams: a unit continues the stream of its first producer not yet continued by
   another consumer; otherwise it takes the next stream, round robin. Units reading
   another stream's results wait on that unit's event. */
static int colour_streams(pf_pipeline *p, pf_plan *plan)
{
    int nu = plan->n_units;
    int *depth = calloc((size_t)(nu ? nu : 1), sizeof(int));
    char *continued = calloc((size_t)(nu ? nu : 1), 1);
    if (!depth || !continued) {
        free(depth), free(continued);
        return PF_NO_MEMORY;
    }
    int width = 1, maxdepth = 0;
    for (int ui = 0; ui < nu; ui++) {
        pf_unit *u = &plan->units[ui];
        for (int k = 0; k < u->n_inputs; k++) {
            int pu = plan->unit_of[u->inputs[k]];
            if (pu >= 0 && depth[pu] + 1 > depth[ui])
                depth[ui] = depth[pu] + 1;
        }
        if (depth[ui] > maxdepth)
            maxdepth = depth[ui];
    }
    for (int d = 0; d <= maxdepth; d++) {
        int count = 0;
        for (int ui = 0; ui < nu; ui++)
            count += depth[ui] == d;
        if (count > width)
            width = count;
    }
    int ns = p->opts.streams > 0 ? p->opts.streams : (width < 8 ? width : 8);
    plan->n_streams = ns;
    int next = 0, rc = PF_OK;
    for (int ui = 0; ui < nu && rc == PF_OK; ui++) {
        pf_unit *u = &plan->units[ui];
        u->stream = -1;
        for (int k = 0; k < u->n_inputs && u->stream < 0; k++) {
            int pu = plan->unit_of[u->inputs[k]];
            if (pu >= 0 && !continued[pu]) {
                continued[pu] = 1;
                u->stream = plan->units[pu].stream;
            }
        }
        if (u->stream < 0)
            u->stream = next++ % ns;
        for (int k = 0; k < u->n_inputs && rc == PF_OK; k++) {
            int pu = plan->unit_of[u->inputs[k]];
            if (pu >= 0 && plan->units[pu].stream != u->stream)
                rc = append(&u->waits, &u->n_waits, pu) ? PF_NO_MEMORY : PF_OK;
        }
    }
    free(depth);
    free(continued);
    return rc;
}

/* ---- Memory ------------------------------------------------------------------------------------ */

static int alloc_image(pf_plan *plan, pf_image *im, pf_shape s)
{
    plan->allocations++;
    im->width = s.width;
    im->height = s.height;
    im->pitch = align_up((size_t)s.width * sizeof(pf_float4));
    void *data = NULL;
    if (posix_memalign(&data, PF_ALIGN, im->pitch * (size_t)s.height) != 0)
        return PF_NO_MEMORY;
    im->data = data;
    plan->bytes_allocated += im->pitch * (size_t)s.height;
    return PF_OK;
}

/* Host buffers: for the CPU executor every stored image, per-worker scratch and the
   reduce partials; for both executors the result tables. */
static int alloc_buffers(pf_pipeline *p, pf_plan *plan)
{
    for (int i = 0; i < p->n_nodes && !plan->cuda; i++) {
        int is_input = i < p->n_inputs;
        if ((is_input || plan->stored[i]) && alloc_image(plan, &plan->buf[i], plan->shapes[i]))
            return PF_NO_MEMORY;
    }
    size_t scratch = 0;
    for (int ui = 0; ui < plan->n_units; ui++) {
        pf_unit *u = &plan->units[ui];
        if (u->scratch > scratch)
            scratch = u->scratch;
        if (u->kind != PF_UNIT_REDUCE)
            continue;
        int i = u->nodes[0];
        int bands = (u->shape.height + u->cpu_band_rows - 1) / u->cpu_band_rows;
        pf_shape t = plan->shapes[i];
        plan->tables[i].rows = t.height;
        plan->tables[i].cols = t.width;
        plan->tables[i].data = calloc((size_t)t.width * (size_t)t.height, sizeof(double));
        plan->allocations++;
        if (!plan->tables[i].data)
            return PF_NO_MEMORY;
        if (plan->cuda)
            continue;
        plan->partials[i] =
            calloc((size_t)bands * (u->partial_len ? u->partial_len : 1), sizeof(double));
        plan->allocations++;
        if (!plan->partials[i])
            return PF_NO_MEMORY;
    }
    if (plan->cuda)
        return PF_OK;
    plan->workers = p->eng->threads;
    plan->worker_scratch = align_up(scratch ? scratch : PF_ALIGN);
    plan->chunk = PF_CPU_CHUNK;
    plan->allocations++;
    if (posix_memalign((void **)&plan->scratch, PF_ALIGN,
                       plan->worker_scratch * (size_t)plan->workers) != 0) {
        plan->scratch = NULL;
        return PF_NO_MEMORY;
    }
    return PF_OK;
}

int pf_plan_build(pf_pipeline *p, const pf_shape *in, int n_in, int cuda)
{
    pf_plan_free(p->plan);
    p->plan = NULL;
    if (n_in != p->n_inputs) {
        pf_errf(p->errmsg, "%s: the pipeline has %d input(s); %d shape(s) given", p->source,
                p->n_inputs, n_in);
        return PF_INVALID_ARGUMENT;
    }
    for (int i = 0; i < n_in; i++) {
        if (in[i].width <= 0 || in[i].height <= 0) {
            pf_errf(p->errmsg, "%s: input '%s': size %dx%d is empty", p->source, p->nodes[i].id,
                    in[i].width, in[i].height);
            return PF_INVALID_ARGUMENT;
        }
    }
    pf_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return PF_NO_MEMORY;
    int nn = p->n_nodes;
    plan->n_nodes = nn;
    plan->cuda = cuda;
    plan->in_shapes = calloc((size_t)n_in, sizeof(pf_shape));
    plan->shapes = calloc((size_t)nn, sizeof(pf_shape));
    plan->unit_of = malloc(sizeof(int) * (size_t)nn);
    plan->stored = calloc((size_t)nn, sizeof(int));
    plan->buf = calloc((size_t)nn, sizeof(pf_image));
    plan->tables = calloc((size_t)nn, sizeof(pf_table_buf));
    plan->partials = calloc((size_t)nn, sizeof(double *));
    int rc = PF_NO_MEMORY;
    if (plan->in_shapes && plan->shapes && plan->unit_of && plan->stored && plan->buf &&
        plan->tables && plan->partials) {
        memcpy(plan->in_shapes, in, sizeof(pf_shape) * (size_t)n_in);
        memcpy(plan->shapes, in, sizeof(pf_shape) * (size_t)n_in);
        for (int i = 0; i < nn; i++)
            plan->unit_of[i] = -1;
        rc = infer_shapes(p, plan);
        if (rc == PF_OK)
            rc = make_units(p, plan);
        if (rc == PF_OK)
            rc = unit_io(p, plan);
        if (rc == PF_OK)
            rc = colour_streams(p, plan);
        if (rc == PF_OK)
            plan_bands(p, plan);
        if (rc == PF_OK)
            rc = alloc_buffers(p, plan);
    }
    if (rc == PF_OK && cuda) {
        p->plan = plan; /* the CUDA side reads the plan through p */
        rc = pf_cuda_plan_build(p);
        p->plan = NULL;
    }
    if (rc == PF_OK) {
        /* Without fusion every used point stage would be a launch of its own. */
        plan->n_unfused_units = 0;
        for (int ui = 0; ui < plan->n_units; ui++)
            plan->n_unfused_units +=
                plan->units[ui].kind == PF_UNIT_POINT ? plan->units[ui].n_nodes : 1;
        p->plan = plan;
        p->stats.plans++;
        p->stats.allocations += plan->allocations;
        p->stats.host_bytes += plan->bytes_allocated;
        return PF_OK;
    }
    if (rc == PF_NO_MEMORY && !plan->cu)
        pf_errf(p->errmsg, "%s: out of memory planning for %dx%d (%zu bytes allocated)", p->source,
                in[0].width, in[0].height, plan->bytes_allocated);
    pf_plan_free(plan);
    return rc;
}
