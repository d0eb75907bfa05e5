/* engine/plan.c: the planner. From the graph IR and the input shapes it infers every
 * shape, forms fusion groups, orders launch units, colours them onto streams, sizes
 * bands and every buffer a frame needs (the executors allocate them, once per plan).
 *
 * Fusion groups are maximal connected sets of point stages, grown greedily in
 * topological order, under one rule: a group may not both feed and depend on a unit
 * outside it (that would make the unit graph cyclic: a -> blur -> c with a -> c keeps
 * a and c apart).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "plan.h"
#include "watchdog.h"

#define PF_CPU_BAND_PIXELS 32768 /* pixels per CPU task: a few hundred KB of float4 */

/* A stencil stage with scratch (the separable passes) computes its first pass over its
   band's rows and the radius r above and below, from the whole input: each band redoes
   2 r rows, 2.5 times the work in bands of 8 rows at r = 6. Its bands take at least 8 r
   rows (the halo at most a quarter more), as long as every thread still gets two
   bands of the frame and a band's scratch stays within 8 MiB. */
#define PF_CPU_SEP_SCRATCH (8u << 20)

static int cpu_band_rows(const pf_pipeline *p, const pf_unit *u, const pf_node *n0, int width)
{
    int rows = PF_CPU_BAND_PIXELS / width;
    if (rows < 1)
        rows = 1;
    if (u->kind == PF_UNIT_STENCIL && n0->desc->scratch_bytes && n0->desc->radius) {
        const int r = n0->desc->radius(n0->params);
        int threads = p->eng->threads > 0 ? p->eng->threads : 1; /* the frame's own, if fewer */
        if (p->opts.threads > 0 && p->opts.threads < threads)
            threads = p->opts.threads;
        long want = 8L * (r > 0 ? r : 0),
             fair = ((long)u->shape.height + 2L * threads - 1) / (2L * threads);
        const long fit = (long)(PF_CPU_SEP_SCRATCH / ((size_t)width * sizeof(pf_float4))) - 2L * r;
        want = want < fair ? want : fair;
        want = want < fit ? want : fit;
        rows = want > rows ? (int)want : rows;
    }
    /* never more than the unit's rows (its output's; a reduce's input's): a band's
       scratch_bytes is asked for that many */
    return u->shape.height > 0 && rows > u->shape.height ? u->shape.height : rows;
}

void pf_plan_free(pf_plan *plan)
{
    if (!plan)
        return;
    for (int i = 0; i < plan->n_units; i++) {
        pf_unit *u = &plan->units[i];
        free(u->nodes);
        free(u->ids);
        free(u->inputs);
        free(u->stores);
        free(u->member_in);
        free(u->slot);
        free(u->waits);
    }
    free(plan->units);
    free(plan->in_shapes);
    free(plan->shapes);
    free(plan->unit_of);
    free(plan->stored);
    free(plan->cons_first);
    free(plan->cons);
    free(plan->is_out);
    free(plan->win);
    free(plan->win_rows);
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
        /* A resample stage reads each input whole at its own size (overlay's logo). */
        for (int k = 1; k < n->n_in && n->desc->kind != PF_STAGE_RESAMPLE; k++) {
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
                pf_plugin_msg(err, sizeof err);
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

/* ---- Fusion ---------------------------------------------------------------------------------

   Groups are kept in a union-find over nodes (a root holds its group's smallest member
   and its outside inputs). Node i, the newest, starts a group of its own and tries the
   candidate groups in turn. Merging two groups that are each valid keeps the rule when
   no outside input of the union is reached from the union: a backward search from each
   outside input, over nodes no earlier than the union's first member. Each node's tries
   share a budget of search steps; a merge whose check would exceed it is not made (the
   groups stay apart, which is always correct), so planning stays linear in stages
   however the graph is shaped. Ordinary graphs never come near the budget. */

#define PF_FUSE_BUDGET 4096 /* search steps per node for its merge checks */
#define PF_FUSE_CANDS  64   /* candidate groups tried per node */
/* Stages per fused kernel. NVRTC's time grows faster than linearly in the length of one
   kernel (measured here: 100 stages 1.4 s, 400 6.3 s, 1000 26 s), so longer groups
   are cut into kernels of at most this many: compile time linear in the stages, for
   one float RGBA round trip through memory per cut, nothing next to 128 ops. */
#define PF_FUSE_MAX_MEMBERS 128

typedef struct fuse_state {
    const pf_pipeline *p;
    const pf_plan *plan;
    int *parent; /* union-find over nodes */
    int *lo;     /* per root: its smallest member */
    int *size;   /* per root: its members */
    int **ext;   /* per root: outside inputs (may hold members and repeats: filtered) */
    int *n_ext, *cap_ext;
    int *mark;  /* per node: the check that visited it */
    int *stack; /* the backward search */
    int *tmp;   /* a merged outside-input list */
    int gen;
    long budget;
} fuse_state;

static int is_point(const pf_pipeline *p, int i)
{
    return i >= p->n_inputs && p->nodes[i].used && p->nodes[i].desc->kind == PF_STAGE_POINT;
}

static int uf_find(int *parent, int i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

/* Whether the union of the groups of roots a and b may form one unit: none of its
   outside inputs is reached from a member. 0 also when the budget runs out. */
static int merge_ok(fuse_state *f, int a, int b)
{
    const pf_pipeline *p = f->p;
    int lo = f->lo[a] < f->lo[b] ? f->lo[a] : f->lo[b];
    if (f->size[a] + f->size[b] > PF_FUSE_MAX_MEMBERS)
        return 0;
    f->gen++;
    for (int side = 0; side < 2; side++) {
        int r = side ? b : a;
        for (int e = 0; e < f->n_ext[r]; e++) {
            int q = f->ext[r][e];
            if (--f->budget < 0)
                return 0;
            if (q <= lo || f->mark[q] == f->gen)
                continue; /* nothing at or before the first member is reached from it */
            int rq = uf_find(f->parent, q);
            if (rq == a || rq == b)
                continue;
            int top = 0;
            f->mark[q] = f->gen;
            f->stack[top++] = q;
            while (top > 0) {
                const pf_node *n = &p->nodes[f->stack[--top]];
                for (int k = 0; k < n->n_in + n->n_bind; k++) {
                    int v = k < n->n_in ? n->in[k] : n->bind[k - n->n_in].src;
                    if (v < lo || f->mark[v] == f->gen)
                        continue;
                    if (--f->budget < 0)
                        return 0;
                    int rv = uf_find(f->parent, v);
                    if (rv == a || rv == b)
                        return 0; /* a member reaches q, which a member reads */
                    f->mark[v] = f->gen;
                    f->stack[top++] = v;
                }
            }
        }
    }
    return 1;
}

/* Joins the groups of roots a and b; the outside inputs of the union replace theirs. */
static int merge(fuse_state *f, int a, int b)
{
    int big = f->n_ext[a] >= f->n_ext[b] ? a : b, small = big == a ? b : a;
    f->parent[small] = big;
    f->size[big] += f->size[small];
    if (f->lo[small] < f->lo[big])
        f->lo[big] = f->lo[small];
    int n = 0;
    f->gen++;
    for (int side = 0; side < 2; side++) {
        int r = side ? small : big;
        for (int e = 0; e < f->n_ext[r]; e++) {
            int q = f->ext[r][e];
            if (f->mark[q] != f->gen && uf_find(f->parent, q) != big) {
                f->mark[q] = f->gen;
                f->tmp[n++] = q;
            }
        }
    }
    if (n > f->cap_ext[big]) {
        int *grown = realloc(f->ext[big], sizeof(int) * (size_t)n);
        if (!grown)
            return -1;
        f->ext[big] = grown;
        f->cap_ext[big] = n;
    }
    memcpy(f->ext[big], f->tmp, sizeof(int) * (size_t)n);
    f->n_ext[big] = n;
    free(f->ext[small]);
    f->ext[small] = NULL;
    f->n_ext[small] = f->cap_ext[small] = 0;
    return 0;
}

static void add_candidate(int *cand, int *n, int g)
{
    for (int i = 0; i < *n; i++)
        if (cand[i] == g)
            return;
    if (*n < PF_FUSE_CANDS)
        cand[(*n)++] = g;
}

/* Candidates of point node i: the groups of its point producers, then those of earlier
   point stages reading one of the same inputs (siblings share their loads), in node
   order. */
static int candidates(fuse_state *f, int i, int *cand)
{
    const pf_pipeline *p = f->p;
    const pf_plan *plan = f->plan;
    const pf_node *node = &p->nodes[i];
    int n = 0, pos[PF_MAX_INPUTS];
    for (int k = 0; k < node->n_in; k++) {
        if (is_point(p, node->in[k]))
            add_candidate(cand, &n, uf_find(f->parent, node->in[k]));
        pos[k] = plan->cons_first[node->in[k]];
    }
    /* merge the consumer lists of i's inputs (each ascending), up to i */
    for (;;) {
        int best = -1, bk = -1;
        for (int k = 0; k < node->n_in; k++) {
            if (pos[k] >= plan->cons_first[node->in[k] + 1])
                continue;
            int j = plan->cons[pos[k]];
            if (j < i && (best < 0 || j < best))
                best = j, bk = k;
        }
        if (best < 0 || n >= PF_FUSE_CANDS || --f->budget < 0)
            break;
        pos[bk]++;
        if (is_point(p, best))
            add_candidate(cand, &n, uf_find(f->parent, best));
    }
    return n;
}

/* Fills group[] (per node: group id, or -1) and returns the number of groups, numbered
   in order of their first member; -1 when out of memory. */
static int form_groups(const pf_pipeline *p, const pf_plan *plan, int *group, int fuse)
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
    fuse_state f;
    memset(&f, 0, sizeof f);
    f.p = p;
    f.plan = plan;
    size_t n = (size_t)nn;
    f.parent = malloc(sizeof(int) * n);
    f.lo = malloc(sizeof(int) * n);
    f.size = malloc(sizeof(int) * n);
    f.ext = calloc(n, sizeof(int *));
    f.n_ext = calloc(n, sizeof(int));
    f.cap_ext = calloc(n, sizeof(int));
    f.mark = calloc(n, sizeof(int));
    f.stack = malloc(sizeof(int) * n);
    f.tmp = malloc(sizeof(int) * n);
    int cand[PF_FUSE_CANDS], rc = 0;
    if (!f.parent || !f.lo || !f.size || !f.ext || !f.n_ext || !f.cap_ext || !f.mark || !f.stack ||
        !f.tmp)
        rc = -1;
    for (int i = 0; i < nn && rc == 0; i++) {
        f.parent[i] = i;
        f.lo[i] = i;
        f.size[i] = 1;
        if (!is_point(p, i))
            continue;
        const pf_node *node = &p->nodes[i];
        /* a bound param's source counts as an input: the unit runs after it */
        f.ext[i] = malloc(sizeof(int) * (PF_MAX_INPUTS + PF_MAX_BINDS));
        if (!f.ext[i]) {
            rc = -1;
            break;
        }
        f.cap_ext[i] = PF_MAX_INPUTS + PF_MAX_BINDS;
        for (int k = 0; k < node->n_in; k++)
            f.ext[i][f.n_ext[i]++] = node->in[k];
        for (int k = 0; k < node->n_bind; k++)
            f.ext[i][f.n_ext[i]++] = node->bind[k].src;
        f.budget = PF_FUSE_BUDGET;
        int nc = candidates(&f, i, cand);
        for (int c = 0; c < nc && f.budget >= 0 && rc == 0; c++) {
            int a = uf_find(f.parent, i), b = uf_find(f.parent, cand[c]);
            if (a != b && merge_ok(&f, a, b))
                rc = merge(&f, a, b);
        }
    }
    if (rc == 0) {
        /* number the groups densely in order of their first member */
        int *map = f.lo; /* reused: per root, its group id */
        for (int i = 0; i < nn; i++)
            map[i] = -1;
        for (int i = 0; i < nn; i++) {
            if (!is_point(p, i))
                continue;
            int r = uf_find(f.parent, i);
            if (map[r] < 0)
                map[r] = ngroups++;
            group[i] = map[r];
        }
    }
    for (int i = 0; f.ext && i < nn; i++)
        free(f.ext[i]);
    free(f.parent), free(f.lo), free(f.size), free(f.ext), free(f.n_ext), free(f.cap_ext),
        free(f.mark);
    free(f.stack), free(f.tmp);
    return rc == 0 ? ngroups : -1;
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

/* Consumers of every node (an edge list sorted by consumer) and which nodes are outputs. */
static int index_graph(const pf_pipeline *p, pf_plan *plan)
{
    int nn = p->n_nodes;
    size_t edges = 0;
    for (int i = 0; i < nn; i++)
        edges += (size_t)p->nodes[i].n_in;
    plan->cons_first = calloc((size_t)nn + 2, sizeof(int));
    plan->cons = malloc(sizeof(int) * (edges ? edges : 1));
    plan->is_out = calloc((size_t)nn, 1);
    if (!plan->cons_first || !plan->cons || !plan->is_out)
        return PF_NO_MEMORY;
    pf_graph g = {nn, &p->nodes[0].n_in, &p->nodes[0].in[0], sizeof(pf_node), 0};
    pf_graph_consumers(&g, plan->cons_first, plan->cons);
    for (int o = 0; o < p->n_outputs; o++)
        plan->is_out[p->outputs[o].node] = 1;
    return PF_OK;
}

static int make_units(pf_pipeline *p, pf_plan *plan)
{
    int nn = p->n_nodes;
    size_t n1 = (size_t)nn + 1;
    int *group = malloc(sizeof(int) * n1);
    int *first_unit = malloc(sizeof(int) * n1); /* raw unit id per node */
    int *head = malloc(sizeof(int) * n1);       /* raw unit: its first node */
    int *pending = calloc(n1, sizeof(int));     /* raw unit: producer edges not placed */
    int *order = malloc(sizeof(int) * n1);      /* raw unit -> unit index */
    int *heap = malloc(sizeof(int) * n1);
    int *next = malloc(sizeof(int) * n1); /* node -> the next node of its raw unit */
    int rc = PF_NO_MEMORY;
    if (!group || !first_unit || !head || !pending || !order || !heap || !next)
        goto out;
    int ngroups = form_groups(p, plan, group, p->opts.fusion);
    if (ngroups < 0)
        goto out;
    /* Raw units: groups 0..ngroups-1, then each used non-point stage. */
    int nraw = ngroups;
    for (int i = 0; i < nn; i++) {
        first_unit[i] = -1;
        if (group[i] >= 0)
            first_unit[i] = group[i];
        else if (i >= p->n_inputs && p->nodes[i].used)
            first_unit[i] = nraw++;
    }
    for (int u = 0; u < nraw; u++)
        head[u] = -1;
    for (int i = nn - 1; i >= 0; i--) {
        if (first_unit[i] >= 0) {
            next[i] = head[first_unit[i]];
            head[first_unit[i]] = i;
        }
    }
    /* Order raw units topologically, of those ready the one holding the earliest node
       first (Kahn's algorithm over a heap of first nodes). */
    int bound = 0; /* bound params: their sources' units go first */
    for (int j = p->n_inputs; j < nn; j++) {
        int u = first_unit[j];
        const pf_node *n = &p->nodes[j];
        bound |= n->n_bind > 0;
        for (int k = 0; u >= 0 && k < n->n_in + n->n_bind; k++) {
            int pu = first_unit[k < n->n_in ? n->in[k] : n->bind[k - n->n_in].src];
            pending[u] += pu >= 0 && pu != u;
        }
    }
    int nh = 0, placed = 0;
    for (int u = 0; u < nraw; u++)
        if (!pending[u])
            pf_heap_push(heap, &nh, head[u]);
    while (nh > 0) {
        int u = first_unit[pf_heap_pop(heap, &nh)];
        order[u] = placed++;
        for (int j = head[u]; j >= 0; j = next[j]) {
            for (int c = plan->cons_first[j]; c < plan->cons_first[j + 1]; c++) {
                int cu = first_unit[plan->cons[c]];
                if (cu >= 0 && cu != u && --pending[cu] == 0)
                    pf_heap_push(heap, &nh, head[cu]);
            }
            for (int c = j + 1; bound && c < nn; c++) /* units whose params j's table binds */
                for (int k = 0; k < p->nodes[c].n_bind; k++) {
                    int cu = first_unit[c];
                    if (p->nodes[c].bind[k].src == j && cu >= 0 && cu != u && --pending[cu] == 0)
                        pf_heap_push(heap, &nh, head[cu]);
                }
        }
    }
    if (placed < nraw) { /* cannot happen: groups are formed acyclic */
        pf_errf(p->errmsg, "%s: internal error: launch units form a cycle", p->source);
        rc = PF_INTERNAL;
        goto out;
    }
    plan->units = calloc((size_t)(nraw ? nraw : 1), sizeof(pf_unit));
    if (!plan->units)
        goto out;
    plan->n_units = nraw;
    for (int i = p->n_inputs; i < nn; i++)
        if (first_unit[i] >= 0)
            plan->units[order[first_unit[i]]].n_nodes++;
    for (int ui = 0; ui < nraw; ui++) {
        pf_unit *u = &plan->units[ui];
        u->nodes = malloc(sizeof(int) * (size_t)u->n_nodes);
        u->ids = malloc(sizeof(char *) * (size_t)u->n_nodes);
        if (!u->nodes || !u->ids)
            goto out;
        u->n_nodes = 0;
    }
    for (int i = p->n_inputs; i < nn; i++) {
        if (first_unit[i] < 0)
            continue;
        int ui = order[first_unit[i]];
        pf_unit *u = &plan->units[ui];
        plan->unit_of[i] = ui;
        u->kind = (pf_unit_kind)p->nodes[i].desc->kind; /* same numbering */
        u->ids[u->n_nodes] = p->nodes[i].id;
        u->nodes[u->n_nodes++] = i;
        u->shape = u->kind == PF_UNIT_REDUCE ? plan->shapes[p->nodes[i].in[0]] : plan->shapes[i];
    }
    rc = PF_OK;
out:
    free(group), free(first_unit), free(head), free(pending), free(order), free(heap);
    free(next);
    return rc;
}

/* Chunk slots of point unit u's members for the CPU executor: a member that is not
   stored takes a free slot, which returns to the free list once its last reader in
   the unit has run (a chain needs two whatever its length). */
static int assign_slots(const pf_pipeline *p, pf_plan *plan, pf_unit *u)
{
    u->slot = malloc(sizeof(int) * (size_t)u->n_nodes);
    int *last = malloc(sizeof(int) * (size_t)u->n_nodes);
    int *free_slots = malloc(sizeof(int) * (size_t)u->n_nodes);
    int *release = malloc(sizeof(int) * (size_t)u->n_nodes); /* members by last reader */
    int *rfirst = calloc((size_t)u->n_nodes + 1, sizeof(int));
    if (!u->slot || !last || !free_slots || !release || !rfirst) {
        free(last), free(free_slots), free(release), free(rfirst);
        return PF_NO_MEMORY;
    }
    /* last[a]: the last member reading member a (a itself when none does) */
    for (int a = 0; a < u->n_nodes; a++)
        last[a] = a;
    for (int a = 0; a < u->n_nodes; a++)
        for (int k = 0; k < p->nodes[u->nodes[a]].n_in; k++) {
            int src = u->member_in[a * PF_MAX_INPUTS + k];
            if (src >= 0 && last[src] < a)
                last[src] = a;
        }
    for (int a = 0; a < u->n_nodes; a++)
        rfirst[last[a] + 1]++;
    for (int a = 0; a < u->n_nodes; a++)
        rfirst[a + 1] += rfirst[a];
    for (int a = 0; a < u->n_nodes; a++)
        release[rfirst[last[a]]++] = a;
    /* rfirst[r] is now the end of reader r's list; its start is rfirst[r - 1] (0) */
    int nfree = 0;
    u->n_slots = 0;
    for (int a = 0; a < u->n_nodes; a++) {
        /* slots read last by earlier members are free: their readers have run */
        if (a > 0)
            for (int r = a > 1 ? rfirst[a - 2] : 0; r < rfirst[a - 1]; r++)
                if (u->slot[release[r]] >= 0)
                    free_slots[nfree++] = u->slot[release[r]];
        if (plan->stored[u->nodes[a]])
            u->slot[a] = -1;
        else
            u->slot[a] = nfree > 0 ? free_slots[--nfree] : u->n_slots++;
    }
    free(last), free(free_slots), free(release), free(rfirst);
    return PF_OK;
}

/* Inputs, stores, chunk slots and CPU sizing of every unit. */
static int unit_io(pf_pipeline *p, pf_plan *plan)
{
    int nn = p->n_nodes;
    int *seen = malloc(sizeof(int) * (size_t)nn); /* per node: last unit + 1 that listed it */
    int *pos = malloc(sizeof(int) * (size_t)nn);  /* per node: its index in its unit */
    int rc = PF_NO_MEMORY;
    if (!seen || !pos)
        goto out;
    for (int i = 0; i < nn; i++)
        seen[i] = 0;
    for (int ui = 0; ui < plan->n_units; ui++) {
        pf_unit *u = &plan->units[ui];
        int cap_in = 0;
        for (int a = 0; a < u->n_nodes; a++) {
            int i = u->nodes[a];
            const pf_node *n = &p->nodes[i];
            pos[i] = a;
            for (int k = 0; k < n->n_in; k++) {
                int q = n->in[k];
                if (plan->unit_of[q] == ui || seen[q] == ui + 1)
                    continue;
                seen[q] = ui + 1;
                if (u->n_inputs == cap_in) {
                    cap_in = cap_in ? 2 * cap_in : 4;
                    int *grown = realloc(u->inputs, sizeof(int) * (size_t)cap_in);
                    if (!grown)
                        goto out;
                    u->inputs = grown;
                }
                u->inputs[u->n_inputs++] = q;
            }
            int keep = u->kind != PF_UNIT_REDUCE && (u->kind != PF_UNIT_POINT || plan->is_out[i]);
            for (int c = plan->cons_first[i]; c < plan->cons_first[i + 1] && !keep; c++) {
                int cn = plan->cons[c];
                keep = p->nodes[cn].used && plan->unit_of[cn] != ui;
            }
            if (keep) {
                plan->stored[i] = 1;
                int *grown = realloc(u->stores, sizeof(int) * (size_t)(u->n_stores + 1));
                if (!grown)
                    goto out;
                u->stores = grown;
                u->stores[u->n_stores++] = i;
            }
        }
        if (u->kind == PF_UNIT_POINT) {
            u->member_in = malloc(sizeof(int) * PF_MAX_INPUTS * (size_t)u->n_nodes);
            if (!u->member_in)
                goto out;
            for (int a = 0; a < u->n_nodes; a++) {
                const pf_node *n = &p->nodes[u->nodes[a]];
                for (int k = 0; k < PF_MAX_INPUTS; k++) {
                    int q = k < n->n_in ? n->in[k] : 0;
                    u->member_in[a * PF_MAX_INPUTS + k] =
                        k < n->n_in && plan->unit_of[q] == ui ? pos[q] : -(q + 1);
                }
            }
            if (assign_slots(p, plan, u) != PF_OK)
                goto out;
        }
        const pf_node *n0 = &p->nodes[u->nodes[0]];
        int width = u->kind == PF_UNIT_REDUCE ? u->shape.width : plan->shapes[u->nodes[0]].width;
        u->cpu_band_rows = cpu_band_rows(p, u, n0, width);
        u->bands = 1;
        if (u->kind == PF_UNIT_POINT)
            u->scratch = pf_align_up((size_t)u->n_slots * PF_CPU_CHUNK * sizeof(pf_float4));
        else if (n0->desc->scratch_bytes)
            u->scratch = pf_align_up(n0->desc->scratch_bytes(n0->params, width, u->cpu_band_rows));
        if (u->kind == PF_UNIT_REDUCE)
            u->partial_len = n0->desc->partial_len(n0->params, &u->shape);
    }
    rc = PF_OK;
out:
    free(seen);
    free(pos);
    return rc;
}

/* The units unit ui reads from besides its inputs' images: the reduce units whose tables
   its members' bound parameters read. Into out (at most cap; the count returned). */
static int bound_units(const pf_pipeline *p, const pf_plan *plan, int ui, int *out, int cap)
{
    const pf_unit *u = &plan->units[ui];
    int n = 0;
    for (int a = 0; a < u->n_nodes; a++) {
        const pf_node *nd = &p->nodes[u->nodes[a]];
        for (int k = 0; k < nd->n_bind; k++) {
            const int pu = plan->unit_of[nd->bind[k].src];
            int dup = pu < 0 || pu == ui;
            for (int j = 0; j < n && !dup; j++)
                dup = out[j] == pu;
            if (!dup && n < cap)
                out[n++] = pu;
        }
    }
    return n;
}

/* Streams: a unit continues the stream of its first producer not yet continued by
   another consumer; otherwise it takes the next stream, round robin. Units reading
   another stream's results (images, or the tables their bound parameters read) wait on
   that unit's event. */
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
        int bu[PF_MAX_BINDS * 8];
        for (int k = 0, nb = bound_units(p, plan, ui, bu, PF_COUNTOF(bu)); k < nb; k++)
            if (depth[bu[k]] + 1 > depth[ui])
                depth[ui] = depth[bu[k]] + 1;
        if (depth[ui] > maxdepth)
            maxdepth = depth[ui];
    }
    int *count = calloc((size_t)maxdepth + 1, sizeof(int)); /* units per depth */
    if (!count) {
        free(depth), free(continued);
        return PF_NO_MEMORY;
    }
    for (int ui = 0; ui < nu; ui++)
        if (++count[depth[ui]] > width)
            width = count[depth[ui]];
    free(count);
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
        int bu[PF_MAX_BINDS * 8];
        for (int k = 0, nb = bound_units(p, plan, ui, bu, PF_COUNTOF(bu)); k < nb && rc == PF_OK;
             k++) {
            int dup = plan->units[bu[k]].stream == u->stream;
            for (int j = 0; j < u->n_waits && !dup; j++)
                dup = u->waits[j] == bu[k];
            if (!dup)
                rc = append(&u->waits, &u->n_waits, bu[k]) ? PF_NO_MEMORY : PF_OK;
        }
    }
    free(depth);
    free(continued);
    return rc;
}

/* ---- Memory ------------------------------------------------------------------------------------ */

/* Whether node i has a whole float image on the CPU: every pipeline input, and the
   nodes the plan stores; with every_node (the device estimate without fusion) every used
   node. */
static int has_image(const pf_pipeline *p, const pf_plan *plan, int i, int every_node)
{
    return i < p->n_inputs || plan->stored[i] ||
           (every_node && plan->unit_of[i] >= 0 && p->nodes[i].desc->kind != PF_STAGE_REDUCE);
}

/* A node's float image: its whole height, or its tallest window in strips. */
static size_t host_image_bytes(const pf_plan *plan, int i)
{
    int rows = plan->strip_rows ? plan->win_rows[i] : plan->shapes[i].height;
    return pf_align_up((size_t)plan->shapes[i].width * sizeof(pf_float4)) * (size_t)rows;
}

/* pf_plan_host_buffers, for the images has_image(.., every_node) names. */
static int share_buffers(const pf_pipeline *p, const pf_plan *plan, int every_node, int *buf_of,
                         size_t *bytes)
{
    int nn = p->n_nodes, nu = plan->n_units, n_buf = -1;
    int *death = malloc(sizeof(int) * (size_t)nn);
    int *rfirst = calloc((size_t)nu + 3, sizeof(int)); /* nodes by death + 1, counted */
    int *release = malloc(sizeof(int) * (size_t)nn);
    int *free_b = malloc(sizeof(int) * (size_t)nn);
    if (!death || !rfirst || !release || !free_b)
        goto out;
    /* death[i]: the last unit reading node i (-1: none; nu: an output, read after the
       units) */
    for (int i = 0; i < nn; i++) {
        buf_of[i] = -1;
        if (!has_image(p, plan, i, every_node))
            continue;
        int d = i < p->n_inputs ? -1 : plan->unit_of[i];
        for (int c = plan->cons_first[i]; c < plan->cons_first[i + 1]; c++) {
            int r = plan->unit_of[plan->cons[c]];
            if (p->nodes[plan->cons[c]].used && r > d)
                d = r;
        }
        death[i] = plan->is_out[i] ? nu : d;
        rfirst[death[i] + 2]++;
    }
    for (int k = 0; k < nu + 2; k++)
        rfirst[k + 1] += rfirst[k];
    for (int i = 0; i < nn; i++)
        if (has_image(p, plan, i, every_node))
            release[rfirst[death[i] + 1]++] = i;
    /* rfirst[d + 1] is now the end of the list of nodes last read by unit d; its start
       is rfirst[d] */
    n_buf = 0;
    int nfree = 0;
    for (int u = -1; u < nu; u++) {
        /* buffers last read by unit u - 1 are free for what u stores */
        for (int k = u >= 1 ? rfirst[u - 1] : 0; u >= 0 && k < rfirst[u]; k++)
            free_b[nfree++] = buf_of[release[k]];
        int n_here = u < 0 ? p->n_inputs : plan->units[u].n_nodes;
        for (int a = 0; a < n_here; a++) {
            int i = u < 0 ? a : plan->units[u].nodes[a];
            if (!has_image(p, plan, i, every_node))
                continue;
            size_t need = host_image_bytes(plan, i);
            int pick = -1; /* the smallest free buffer that holds it, else the largest */
            for (int k = 0; k < nfree; k++) {
                size_t have = bytes[free_b[k]], best = pick >= 0 ? bytes[free_b[pick]] : 0;
                int fits = have >= need, best_fits = pick >= 0 && best >= need;
                if (pick < 0 || (fits && (!best_fits || have < best)) ||
                    (!fits && !best_fits && have > best))
                    pick = k;
            }
            int b;
            if (pick >= 0) {
                b = free_b[pick];
                free_b[pick] = free_b[--nfree];
                if (bytes[b] < need)
                    bytes[b] = need;
            } else {
                b = n_buf++;
                bytes[b] = need;
            }
            buf_of[i] = b;
        }
    }
out:
    free(death), free(rfirst), free(release), free(free_b);
    return n_buf;
}

int pf_plan_host_buffers(const pf_pipeline *p, const pf_plan *plan, int *buf_of, size_t *bytes)
{
    return share_buffers(p, plan, 0, buf_of, bytes);
}

/* The bytes of the images has_image(.., every_node) names, shared as share_buffers does;
   -1 out of memory. */
static double shared_bytes(const pf_pipeline *p, const pf_plan *plan, int every_node)
{
    int *buf_of = malloc(sizeof(int) * (size_t)p->n_nodes);
    size_t *bytes = malloc(sizeof(size_t) * (size_t)p->n_nodes);
    int n_buf = buf_of && bytes ? share_buffers(p, plan, every_node, buf_of, bytes) : -1;
    double sum = n_buf < 0 ? -1 : 0;
    for (int b = 0; b < n_buf; b++)
        sum += (double)bytes[b];
    free(buf_of), free(bytes);
    return sum;
}

/* Bytes of every buffer the plan needs, from its shapes and units (nothing allocated):
   what the CPU executor allocates (exec_cpu_state.c) and the result tables, and the CUDA executor's device
   buffers and pinned staging as estimated in pipefuse.h (pf_pipeline_memory). *largest
   is the node with the largest image. */
static void plan_memory(const pf_pipeline *p, const pf_plan *plan, pf_memory *m, int *largest)
{
    double host = 0, host_sum = 0, device = 0, pinned = 0, big = -1, scratch = 0, dev_scratch = 0;
    int slots = p->opts.slots ? p->opts.slots : 3;
    *largest = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        int used = i < p->n_inputs || plan->unit_of[i] >= 0;
        if (!used || (i >= p->n_inputs && p->nodes[i].desc->kind == PF_STAGE_REDUCE))
            continue;
        double im = (double)host_image_bytes(plan, i); /* a window's rows in strips */
        if (im > big) {
            big = im;
            *largest = i;
        }
        int kept = i < p->n_inputs || plan->stored[i];
        host_sum += kept ? im : 0;
        device += kept || !p->opts.fusion ? im : 0;
        pinned += i < p->n_inputs ? im * slots : 0;
    }
    /* The images as the CPU executor shares them. On the device, with one stream, the
       CUDA executor shares them as well (in the same order: units run one after another
       there too); with several it shares fewer (not between units that may run at
       once), so the estimate is their sum, an upper bound. Sums where the sharing cannot
       be worked out (out of memory). */
    double shared = shared_bytes(p, plan, 0);
    host = shared >= 0 ? shared : host_sum;
    if (plan->n_streams <= 1) {
        shared = shared_bytes(p, plan, !p->opts.fusion);
        if (shared >= 0)
            device = shared;
    }
    for (int o = 0; o < p->n_outputs; o++) {
        pf_shape s = plan->shapes[p->outputs[o].node];
        pinned += (double)s.width * s.height * sizeof(pf_float4) * slots;
    }
    int n_streams = plan->n_streams > 0 ? plan->n_streams : 1;
    double *stream_scratch = calloc((size_t)n_streams, sizeof(double));
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        const pf_node *n0 = &p->nodes[u->nodes[0]];
        if ((double)u->scratch > scratch)
            scratch = (double)u->scratch;
        if (u->kind != PF_UNIT_POINT && n0->desc->cuda_scratch_bytes) {
            int win = plan->shapes[n0->in[0]].width, wout = plan->shapes[u->nodes[0]].width;
            int rows = plan->shapes[u->nodes[0]].height;
            if (u->kind == PF_UNIT_REDUCE)
                rows = u->shape.height;
            double s =
                (double)n0->desc->cuda_scratch_bytes(n0->params, win > wout ? win : wout, rows);
            /* the units of one stream share one block (cuda_layout.c's assign_scratch) */
            if (stream_scratch && u->stream >= 0 && u->stream < n_streams) {
                if (s > stream_scratch[u->stream])
                    stream_scratch[u->stream] = s;
            } else {
                dev_scratch += s;
            }
        }
        if (u->kind != PF_UNIT_REDUCE)
            continue;
        pf_shape t = plan->shapes[u->nodes[0]];
        double table = (double)t.width * t.height * sizeof(double);
        double bands = (u->shape.height + u->cpu_band_rows - 1) / u->cpu_band_rows;
        double partials = bands * (double)(u->partial_len ? u->partial_len : 1) * sizeof(double);
        host += table + partials;
        pinned += table;
        device += table + (double)u->shape.height * (double)(u->partial_len ? u->partial_len : 1) *
                              sizeof(double);
    }
    host += (double)pf_align_up(scratch ? (size_t)scratch : PF_ALIGN) * p->eng->threads;
    for (int st = 0; stream_scratch && st < n_streams; st++)
        dev_scratch += stream_scratch[st];
    free(stream_scratch);
    device += dev_scratch;
    m->host_bytes = (unsigned long long)host;
    m->device_bytes = (unsigned long long)device;
    m->pinned_bytes = (unsigned long long)pinned;
    m->largest_stage = p->nodes[*largest].id;
    m->largest_bytes = big > 0 ? (unsigned long long)big : 0;
}

/* "1.5 GiB", "12 KiB", "200 bytes" */
static const char *show_bytes(double b, char *buf, size_t size)
{
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    while (b >= 1024 && k < 4)
        b /= 1024, k++;
    snprintf(buf, size, k ? "%.1f %s" : "%.0f %s", b, unit[k]);
    return buf;
}

/* Everything but the buffers: shapes, units, streams, bands. */
static int plan_layout(pf_pipeline *p, const pf_shape *in, int n_in, int device, pf_plan **out)
{
    *out = NULL;
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
    plan->device = device;
    plan->in_shapes = calloc((size_t)n_in, sizeof(pf_shape));
    plan->shapes = calloc((size_t)nn, sizeof(pf_shape));
    plan->unit_of = malloc(sizeof(int) * (size_t)nn);
    plan->stored = calloc((size_t)nn, sizeof(int));
    int rc = PF_NO_MEMORY;
    if (plan->in_shapes && plan->shapes && plan->unit_of && plan->stored) {
        memcpy(plan->in_shapes, in, sizeof(pf_shape) * (size_t)n_in);
        memcpy(plan->shapes, in, sizeof(pf_shape) * (size_t)n_in);
        for (int i = 0; i < nn; i++)
            plan->unit_of[i] = -1;
        rc = index_graph(p, plan);
        if (rc == PF_OK)
            rc = infer_shapes(p, plan);
        if (rc == PF_OK)
            rc = make_units(p, plan);
        if (rc == PF_OK)
            rc = unit_io(p, plan);
        if (rc == PF_OK)
            rc = colour_streams(p, plan);
        if (rc == PF_OK && p->strip_rows)
            rc = pf_plan_strips(p, plan, p->strip_rows);
        if (rc == PF_OK)
            pf_watchdog_predict(p, plan); /* bands */
    }
    if (rc == PF_NO_MEMORY)
        pf_errf(p->errmsg, "%s: out of memory planning for %dx%d", p->source, in[0].width,
                in[0].height);
    if (rc != PF_OK) {
        pf_plan_free(plan);
        return rc;
    }
    *out = plan;
    return PF_OK;
}

/* The memory limit (the max_memory option), checked before anything is allocated: the
   host buffers of a CPU plan, the device and pinned buffers of a CUDA plan. */
static int check_memory(pf_pipeline *p, const pf_plan *plan)
{
    if (!p->opts.max_memory)
        return PF_OK;
    pf_memory m;
    int big;
    plan_memory(p, plan, &m, &big);
    unsigned long long need = plan->device ? m.device_bytes : m.host_bytes;
    const char *what = plan->device ? "of device buffers" : "of buffers";
    if (plan->device && m.pinned_bytes > need) {
        need = m.pinned_bytes;
        what = "of pinned host buffers";
    }
    if (need <= p->opts.max_memory)
        return PF_OK;
    char b1[32], b2[32], b3[32];
    const pf_node *n = &p->nodes[big];
    pf_errf(p->errmsg,
            "%s: needs %s %s for %dx%d input, over the memory limit of %s; the largest is "
            "%s '%s'%s%s%s: %dx%d, %s",
            p->source, show_bytes((double)need, b1, sizeof b1), what, plan->shapes[0].width,
            plan->shapes[0].height, show_bytes((double)p->opts.max_memory, b2, sizeof b2),
            big < p->n_inputs ? "input" : "stage", n->id, big < p->n_inputs ? "" : " (",
            big < p->n_inputs ? "" : n->path, big < p->n_inputs ? "" : ")", plan->shapes[big].width,
            plan->shapes[big].height, show_bytes((double)m.largest_bytes, b3, sizeof b3));
    return PF_NO_MEMORY;
}

int pf_plan_build(pf_pipeline *p, const pf_shape *in, int n_in, int device, pf_plan **out)
{
    pf_plan *plan;
    int rc = plan_layout(p, in, n_in, device, &plan);
    if (rc != PF_OK)
        return rc;
    rc = check_memory(p, plan);
    if (rc != PF_OK) {
        pf_plan_free(plan);
        return rc;
    }
    /* Without fusion every used point stage would be a launch of its own. */
    plan->n_unfused_units = 0;
    for (int ui = 0; ui < plan->n_units; ui++)
        plan->n_unfused_units +=
            plan->units[ui].kind == PF_UNIT_POINT ? plan->units[ui].n_nodes : 1;
    *out = plan;
    return PF_OK;
}

int pf_plan_memory(pf_pipeline *p, const pf_shape *inputs, int n_inputs, pf_memory *m)
{
    if (!m || m->size < sizeof(pf_memory) || (!inputs && n_inputs)) {
        pf_errf(p->errmsg, "%s: pf_pipeline_memory: %s", p->source,
                !m                            ? "NULL pf_memory"
                : m->size < sizeof(pf_memory) ? "pf_memory.size not set (pf_memory_init or sizeof)"
                                              : "NULL input shapes");
        return PF_INVALID_ARGUMENT;
    }
    pf_plan *plan;
    int rc = plan_layout(p, inputs, n_inputs, 0, &plan);
    if (rc != PF_OK)
        return rc;
    int big;
    plan_memory(p, plan, m, &big);
    m->size = sizeof(pf_memory);
    pf_plan_free(plan);
    return PF_OK;
}
