/* engine/cuda_layout.c: a CUDA plan, built once per shape. Which point units run as one
 * NVRTC kernel (decide_fusion); the layout of each frame slot's two pools: one device pool
 * (working images, reused by liveness; the parameter block; frame descriptors; native
 * staging; scratch; reduce partials) and one pinned host pool; the reuse of an image
 * buffer once every unit that touched its old content happens-before the new producer
 * (vector clocks over the units' streams); each slot's streams, events and pools
 * (make_slot); and the plan's free.
 * Without CUDA in the build the file is empty: exec_cuda.c has the stubs. */
#ifdef PF_HAVE_CUDA

#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_driver.h"
#include "nvrtc.h"

#define PF_DEV_ALIGN 256

static size_t align_dev(size_t v)
{
    return (v + PF_DEV_ALIGN - 1) & ~(size_t)(PF_DEV_ALIGN - 1);
}

/* The most device scratch or partials a stage may declare (PF_PLUGIN past it): sizes
   near SIZE_MAX (a negative int returned as size_t) would wrap the pool's offsets into
   a short buffer that the stage writes past. */
#define PF_DEV_SIZE_CAP (SIZE_MAX / 8)

static size_t take(size_t *top, size_t bytes)
{
    size_t off = align_dev(*top);
    *top = off + bytes;
    return off;
}

/* Happens-before between units as vector clocks: clock[u * ns + s] is the highest
   unit of stream s that has finished when u starts (-1: none). Units of one stream run
   in index order, so v happens before u exactly when clock[u][stream of v] >= v.
   Units x streams ints, linear in the units (a units x units bitset was quadratic). */
static int *unit_clocks(const pf_plan *plan, int ns)
{
    int nu = plan->n_units;
    int *clock = malloc(sizeof(int) * ((size_t)nu * (size_t)ns + 1));
    int *last = malloc(sizeof(int) * ((size_t)ns + 1)); /* per stream: its latest unit */
    if (!clock || !last) {
        free(clock), free(last);
        return NULL;
    }
    for (int s = 0; s < ns; s++)
        last[s] = -1;
    for (int u = 0; u < nu; u++) {
        const pf_unit *un = &plan->units[u];
        int *row = clock + (size_t)u * ns, su = un->stream;
        int prev = last[su];
        for (int s = 0; s < ns; s++)
            row[s] = prev >= 0 ? clock[(size_t)prev * ns + s] : -1;
        if (prev >= 0)
            row[su] = prev;
        for (int k = 0; k < un->n_waits; k++) {
            int v = un->waits[k];
            const int *vr = clock + (size_t)v * ns;
            for (int s = 0; s < ns; s++)
                row[s] = vr[s] > row[s] ? vr[s] : row[s];
            int sv = plan->units[v].stream;
            row[sv] = v > row[sv] ? v : row[sv];
        }
        last[su] = u;
    }
    free(last);
    return clock;
}

/* The unit whose launches do unit u's work: the reduce or stencil kernel that runs an
   absorbed point unit's ops (and so reads that unit's inputs), or the stencil kernel
   that runs an epilogue's (and so writes that unit's images), else u itself. */
static int runs_in(const pf_pipeline *p, const pf_cuda_plan *c, int u)
{
    if (u < 0 || (c->fused[u] != PF_FUSE_ABSORBED && c->fused[u] != PF_FUSE_EPILOGUE))
        return u;
    for (int v = 0; v < c->n_units; v++)
        if (c->fused[v] == PF_FUSE_KERNEL &&
            (c->fused[u] == PF_FUSE_ABSORBED ? c->fio[v].src_unit : c->fio[v].epi_unit) == u)
            return v;
    return u;
}

/* Device images for every node the GPU computes, reusing a buffer once every unit
   that touched its previous content happens-before the new producer: its producer and
   every unit reading it. Every reader, not only the one of the highest index: units
   on other streams are not ordered by their index (a crop on stream 1 once overwrote
   an input that a sobel on stream 0 was still reading). */
static int assign_images(pf_pipeline *p, pf_cuda_plan *c, size_t *top)
{
    const pf_plan *plan = p->plan;
    int nn = p->n_nodes, nu = plan->n_units, ns = c->n_streams;
    int *clock = unit_clocks(plan, ns);
    /* the readers of node i: units rd[rs[i] .. rs[i + 1]); an output reads as unit nu */
    int *rs = calloc((size_t)nn + 2, sizeof(int)), *rd = NULL, *fill = NULL;
    size_t *cap = malloc(sizeof(size_t) * (size_t)nn), *boff = malloc(sizeof(size_t) * (size_t)nn);
    int *bnode = malloc(sizeof(int) * (size_t)nn);
    int nb = 0, rc = PF_OK;
    if (!clock || !rs || !cap || !boff || !bnode) {
        rc = PF_NO_MEMORY;
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = p->n_inputs; i < nn; i++)
            for (int k = 0; k < p->nodes[i].n_in && plan->unit_of[i] >= 0; k++) {
                int src = p->nodes[i].in[k];
                if (pass)
                    rd[rs[src] + fill[src]++] = runs_in(p, c, plan->unit_of[i]);
                else
                    rs[src + 1]++;
            }
        for (int o = 0; o < p->n_outputs; o++) {
            int src = p->outputs[o].node;
            if (pass)
                rd[rs[src] + fill[src]++] = nu;
            else
                rs[src + 1]++;
        }
        if (!pass) {
            for (int i = 0; i < nn; i++)
                rs[i + 1] += rs[i];
            rd = malloc(sizeof(int) * ((size_t)rs[nn] + 1));
            fill = calloc((size_t)nn + 1, sizeof(int));
            if (!rd || !fill) {
                rc = PF_NO_MEMORY;
                goto out;
            }
        }
    }
    for (int i = 0; i < nn; i++) {
        c->img_off[i] = SIZE_MAX;
        c->pitch[i] = align_dev((size_t)plan->shapes[i].width * sizeof(pf_float4));
    }
    /* Producers in order: inputs first (unit -1, before every unit), then each unit's
       members. */
    for (int i = 0; i < nn; i++) {
        int u = i < p->n_inputs ? -1 : runs_in(p, c, plan->unit_of[i]);
        if (!c->f4[i])
            continue;
        size_t need = c->pitch[i] * (size_t)plan->shapes[i].height;
        int pick = -1;
        const int *row = u >= 0 ? clock + (size_t)u * ns : NULL;
        for (int b = 0; b < nb && u >= 0; b++) {
            int old = bnode[b];
            if (cap[b] < need || (pick >= 0 && cap[b] >= cap[pick]))
                continue;
            int ou = old < p->n_inputs ? -1 : runs_in(p, c, plan->unit_of[old]);
            int ok = ou != u && (ou < 0 || row[plan->units[ou].stream] >= ou);
            for (int k = rs[old]; k < rs[old + 1] && ok; k++) {
                int r = rd[k];
                ok = r < nu && r != u && row[plan->units[r].stream] >= r;
            }
            if (ok)
                pick = b;
        }
        if (pick < 0) {
            pick = nb++;
            cap[pick] = need;
            boff[pick] = take(top, need);
        }
        bnode[pick] = i;
        c->img_off[i] = boff[pick];
    }
out:
    free(clock), free(rs), free(rd), free(fill), free(cap), free(boff), free(bnode);
    return rc;
}

/* Device scratch unit u's stage asks for with its current params: for the widest of its
   input and output, and all its rows (input rows for a reduce). */
static size_t scratch_need(const pf_pipeline *p, int u)
{
    const pf_plan *plan = p->plan;
    const pf_unit *un = &plan->units[u];
    const pf_node *n0 = &p->nodes[un->nodes[0]];
    if (!n0->desc->cuda_scratch_bytes)
        return 0;
    int win = plan->shapes[n0->in[0]].width, wout = plan->shapes[un->nodes[0]].width;
    int rows = un->kind == PF_UNIT_REDUCE ? un->shape.height : plan->shapes[un->nodes[0]].height;
    return n0->desc->cuda_scratch_bytes(n0->params, win > wout ? win : wout, rows);
}

/* Device scratch a generated kernel needs: a separable stencil's rows of horizontal sums
   for a band of the whole image at its largest radius, and its taps; none for others. */
static size_t fused_scratch_need(const pf_pipeline *p, const pf_cuda_plan *c, int u)
{
    char why[512];
    const pf_unit *un = &p->plan->units[u];
    if (c->fused[u] != PF_FUSE_KERNEL ||
        pf_fuse_stencil_possible(p, u, why, sizeof why) != PF_FUSE_STENCIL_SEPARABLE)
        return 0;
    return pf_fuse_sep_scratch(un->shape.width, un->shape.height, un->shape.height,
                               pf_fuse_sep_rmax(p, u));
}

/* Bytes of the largest frame format (f32 RGBA) for a shape: staging is sized for it. */
static size_t max_frame_bytes(pf_shape s)
{
    return (size_t)s.width * 16 * (size_t)s.height;
}

/* Device scratch of the units (plugin.h: cuda_scratch_bytes). Units of one stream run
   one after another, and a unit's scratch is its own only while it runs, so they share
   one block, as large as the largest of their needs: a chain of twenty gaussians at
   3840x2160 took twenty 133 MB blocks, now one. Generated kernels need none, but for a
   separable stencil's. */
static int assign_scratch(pf_pipeline *p, pf_cuda_plan *c, size_t *dev)
{
    const pf_plan *plan = p->plan;
    size_t *need = calloc((size_t)c->n_streams, sizeof(size_t));
    size_t *off = calloc((size_t)c->n_streams, sizeof(size_t));
    if (!need || !off) {
        free(need), free(off);
        return PF_NO_MEMORY;
    }
    int rc = PF_OK;
    for (int u = 0; u < plan->n_units && rc == PF_OK; u++) {
        const pf_node *n0 = &p->nodes[plan->units[u].nodes[0]];
        int st = plan->units[u].stream;
        size_t s = c->fused[u] ? fused_scratch_need(p, c, u) : scratch_need(p, u);
        c->scratch_off[u] = SIZE_MAX;
        c->scratch_size[u] = s; /* the unit's own need, until its stream's block is known */
        if (s > PF_DEV_SIZE_CAP) {
            pf_errf(p->errmsg,
                    "%s: %s (%s): cuda_scratch_bytes() asks for %zu bytes, more than can be "
                    "allocated; refusing to run it (op %s)",
                    p->source, n0->path, n0->id, s, n0->desc->name);
            rc = PF_PLUGIN;
        } else if (st >= 0 && st < c->n_streams && s > need[st]) {
            need[st] = s;
        }
    }
    for (int st = 0; st < c->n_streams && rc == PF_OK; st++)
        off[st] = need[st] ? take(dev, need[st]) : SIZE_MAX;
    for (int u = 0; u < plan->n_units && rc == PF_OK; u++) {
        int st = plan->units[u].stream, has = st >= 0 && st < c->n_streams;
        if (c->scratch_size[u] && has)
            c->scratch_off[u] = off[st];
        c->scratch_size[u] = c->scratch_size[u] && has ? need[st] : 0;
    }
    free(need), free(off);
    return rc;
}

static int layout(pf_pipeline *p, pf_cuda_plan *c)
{
    pf_plan *plan = p->plan;
    int nn = p->n_nodes, nu = plan->n_units, ni = p->n_inputs, no = p->n_outputs;
#define ALLOC_OFFS(f, n)                                                                           \
    if (!(c->f = calloc((size_t)(n) + 1, sizeof(size_t))))                                         \
        return PF_NO_MEMORY;
    ALLOC_OFFS(img_off, nn)
    ALLOC_OFFS(param_off, nn)
    ALLOC_OFFS(pitch, nn)
    ALLOC_OFFS(in_dev_off, ni)
    ALLOC_OFFS(in_host_off, ni)
    ALLOC_OFFS(in_bytes, ni)
    ALLOC_OFFS(out_dev_off, no)
    ALLOC_OFFS(out_host_off, no)
    ALLOC_OFFS(out_bytes, no)
    ALLOC_OFFS(scratch_off, nu)
    ALLOC_OFFS(scratch_size, nu)
    ALLOC_OFFS(partial_off, nn)
    ALLOC_OFFS(done_off, nn)
    ALLOC_OFFS(done_bytes, nn)
    ALLOC_OFFS(partial_host_off, nn)
#undef ALLOC_OFFS
    size_t dev = 0, host = 0;
    /* First in both pools, at the same offsets: the parameter block (every stage's
       struct, 16-byte aligned) and the frame descriptors, so one copy refreshes both. */
    c->params_size = pf_param_layout(p, c->param_off);
    size_t n_desc = (size_t)(ni + no);
    for (int u = 0; u < nu; u++) {
        c->fio_off[u] = n_desc;
        if (c->fused[u] == PF_FUSE_KERNEL)
            n_desc += (size_t)(c->fio[u].n_in + c->fio[u].n_out);
    }
    size_t desc_bytes = sizeof(pf_frame_desc) * n_desc;
    c->desc_count = n_desc;
    c->params_off = take(&dev, c->params_size + desc_bytes);
    c->desc_off = c->params_off + c->params_size;
    host = dev;
    int rc = assign_images(p, c, &dev);
    if (rc != PF_OK)
        return rc;
    for (int i = 0; i < ni; i++) {
        c->in_bytes[i] = max_frame_bytes(plan->shapes[i]);
        c->in_dev_off[i] = take(&dev, c->in_bytes[i]);
        c->in_host_off[i] = take(&host, c->in_bytes[i]);
    }
    for (int o = 0; o < no; o++) {
        int node = p->outputs[o].node;
        if (p->tables[node].data)
            continue;
        c->out_bytes[o] = max_frame_bytes(plan->shapes[node]);
        c->out_dev_off[o] = take(&dev, c->out_bytes[o]);
        c->out_host_off[o] = take(&host, c->out_bytes[o]);
    }
    rc = assign_scratch(p, c, &dev);
    if (rc != PF_OK)
        return rc;
    for (int u = 0; u < nu; u++) {
        const pf_unit *un = &plan->units[u];
        const pf_node *n0 = &p->nodes[un->nodes[0]];
        if (un->kind == PF_UNIT_REDUCE) {
            /* A band's partial each, or for a summing kernel the partial tables its
               bands leave (pf_fuse_reduce_chunks; the table is written to the pinned
               pool). */
            size_t parts = (size_t)(un->bands > 0 ? un->bands : 1), host_parts = parts;
            if (c->fused[u] == PF_FUSE_KERNEL) {
                const pf_shape in = plan->shapes[p->nodes[un->nodes[0]].in[0]];
                parts = (size_t)pf_fuse_reduce_chunks(c->fio[u].reduce, in.width, in.height,
                                                      un->bands, p->eng->cuda->sm_count);
                host_parts = 1; /* only the table comes to the host */
            }
            if (un->partial_len > PF_DEV_SIZE_CAP / sizeof(double) / parts) {
                pf_errf(p->errmsg,
                        "%s: %s (%s): partial_len() asks for %zu doubles a band (%zu bands), "
                        "more than can be allocated; refusing to run it (op %s)",
                        p->source, n0->path, n0->id, un->partial_len, parts, n0->desc->name);
                return PF_PLUGIN;
            }
            size_t len = sizeof(double) * (un->partial_len ? un->partial_len : 1);
            c->partial_off[un->nodes[0]] = take(&dev, len * parts);
            c->partial_host_off[un->nodes[0]] = take(&host, len * host_parts);
            if (c->fused[u] == PF_FUSE_KERNEL) { /* its groups' done counters, zeroed once */
                const pf_shape in = plan->shapes[p->nodes[un->nodes[0]].in[0]];
                size_t groups =
                    (size_t)pf_fuse_reduce_groups(c->fio[u].reduce, in.width, in.height);
                c->done_bytes[un->nodes[0]] = sizeof(unsigned int) * groups;
                c->done_off[un->nodes[0]] = take(&dev, sizeof(unsigned int) * groups);
            }
        }
    }
    c->dev_size = align_dev(dev);
    c->host_size = align_dev(host);
    return PF_OK;
}

int pf_cu_needs_convert_out(const pf_pipeline *p, const pf_cuda_plan *c, int o)
{
    int node = p->outputs[o].node;
    if (p->tables[node].data)
        return 0;
    /* a generated kernel stores it in the output's format: its unit's, or for an
       epilogue's node the stencil kernel's */
    return node < p->n_inputs || c->fused[p->plan->unit_of[node]] == PF_FUSE_NONE;
}

/* Kernel launches one frame takes: conversions in and out, and every stage. */
static int count_launches(const pf_pipeline *p, const pf_cuda_plan *c)
{
    const pf_plan *plan = p->plan;
    int n = 0;
    for (int i = 0; i < p->n_inputs; i++)
        n += c->f4[i];
    for (int u = 0; u < plan->n_units; u++) {
        const pf_unit *un = &plan->units[u];
        if (c->fused[u] == PF_FUSE_ABSORBED || c->fused[u] == PF_FUSE_EPILOGUE)
            continue; /* its ops run in the reduce or stencil kernel */
        /* (a summing reduce adds its partial tables in its own kernel) */
        n += (c->fused[u] ? 1 : un->n_nodes) * un->bands;
    }
    for (int o = 0; o < p->n_outputs; o++)
        n += pf_cu_needs_convert_out(p, c, o);
    return n;
}

void pf_cuda_plan_free(pf_cuda_plan *c)
{
    if (!c)
        return;
    for (int s = 0; s < c->n_slots; s++) {
        cuda_slot *sl = &c->slots[s];
        /* A frame still in flight (device frames run on the caller's stream): let it
           finish before its memory goes. */
        if (sl->busy && sl->done)
            cudaEventSynchronize(sl->done);
        for (int m = 0; m < 2; m++) {
            if (sl->exec[m])
                cudaGraphExecDestroy(sl->exec[m]);
            if (sl->graph[m])
                cudaGraphDestroy(sl->graph[m]);
            free(sl->pnodes[m]);
            free(sl->pnode_unit[m]);
        }
        for (int k = 0; sl->streams && k < c->n_streams; k++) {
            if (sl->streams[k])
                cudaStreamDestroy(sl->streams[k]);
            if (sl->joined[k])
                cudaEventDestroy(sl->joined[k]);
        }
        if (sl->unit_done)
            for (int u = 0; sl->unit_done[u] != (cudaEvent_t)-1; u++)
                if (sl->unit_done[u])
                    cudaEventDestroy(sl->unit_done[u]);
        if (sl->fork)
            cudaEventDestroy(sl->fork);
        if (sl->start)
            cudaEventDestroy(sl->start);
        if (sl->done)
            cudaEventDestroy(sl->done);
        if (sl->up_done)
            cudaEventDestroy(sl->up_done);
        if (sl->comp_done)
            cudaEventDestroy(sl->comp_done);
        free(sl->direct_out);
        free(sl->staged_out);
        free(sl->dev_desc);
        free(sl->exec_desc[0]);
        free(sl->exec_desc[1]);
        for (int k = 0; sl->tev && k < 2 * c->max_timed; k++)
            if (sl->tev[k])
                cudaEventDestroy(sl->tev[k]);
        free(sl->tev);
        free(sl->timed_unit);
        free(sl->key[0]), free(sl->key[1]), free(sl->out);
        free(sl->streams);
        free(sl->joined);
        free(sl->unit_done);
        cudaFree(sl->dev);
        cudaFreeHost(sl->host);
    }
    for (int k = 0; c->kern && k < c->n_units * PF_KERNEL_VARIANTS; k++) {
        pf_fuse_unload(c->kern[k].module);
        free(c->kern[k].fmts);
    }
    free(c->in_fmt), free(c->out_fmt), free(c->io_fmt), free(c->fmt_scratch);
    free(c->kern), free(c->cur), free(c->fused), free(c->fio), free(c->fio_off), free(c->f4);
    free(c->img_off), free(c->param_off), free(c->pitch);
    free(c->in_dev_off), free(c->in_host_off), free(c->in_bytes);
    free(c->out_dev_off), free(c->out_host_off), free(c->out_bytes);
    free(c->scratch_off), free(c->scratch_size), free(c->partial_off), free(c->partial_host_off);
    free(c->done_off), free(c->done_bytes);
    if (c->up)
        cudaStreamDestroy(c->up);
    if (c->down)
        cudaStreamDestroy(c->down);
    free(c);
}

static int make_slot(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl)
{
    const pf_plan *plan = p->plan;
    int nu = plan->n_units;
    sl->streams = calloc((size_t)c->n_streams, sizeof(cudaStream_t));
    sl->joined = calloc((size_t)c->n_streams, sizeof(cudaEvent_t));
    sl->unit_done = calloc((size_t)nu + 1, sizeof(cudaEvent_t));
    size_t n_io = (size_t)p->n_inputs + (size_t)p->n_outputs;
    sl->key[0] = calloc(n_io + 1, 1);
    sl->key[1] = calloc(n_io + 1, 1);
    sl->out = calloc((size_t)p->n_outputs + 1, sizeof(pf_frame *));
    sl->direct_out = calloc((size_t)p->n_outputs + 1, 1);
    sl->staged_out = calloc((size_t)p->n_outputs + 1, 1);
    sl->dev_desc = malloc(sizeof(pf_frame_desc) * c->desc_count + 1);
    sl->exec_desc[0] = calloc(c->desc_count + 1, sizeof(pf_frame_desc));
    sl->exec_desc[1] = calloc(c->desc_count + 1, sizeof(pf_frame_desc));
    if (!sl->streams || !sl->joined || !sl->unit_done || !sl->key[0] || !sl->key[1] || !sl->out ||
        !sl->direct_out || !sl->staged_out || !sl->dev_desc || !sl->exec_desc[0] ||
        !sl->exec_desc[1])
        return PF_NO_MEMORY;
    sl->unit_done[nu] = (cudaEvent_t)-1; /* end marker for pf_cuda_plan_free */
    for (int k = 0; k < c->n_streams; k++) {
        CU(p, cudaStreamCreateWithFlags(&sl->streams[k], cudaStreamNonBlocking));
        CU(p, cudaEventCreateWithFlags(&sl->joined[k], cudaEventDisableTiming));
    }
    for (int u = 0; u < nu; u++)
        CU(p, cudaEventCreateWithFlags(&sl->unit_done[u], cudaEventDisableTiming));
    sl->tev = calloc((size_t)c->max_timed * 2 + 1, sizeof(cudaEvent_t));
    sl->timed_unit = calloc((size_t)c->max_timed + 1, sizeof(int));
    if (!sl->tev || !sl->timed_unit)
        return PF_NO_MEMORY;
    for (int k = 0; k < 2 * c->max_timed; k++)
        CU(p, cudaEventCreate(&sl->tev[k]));
    CU(p, cudaEventCreateWithFlags(&sl->fork, cudaEventDisableTiming));
    CU(p, cudaEventCreateWithFlags(&sl->start, cudaEventDisableTiming));
    CU(p, cudaEventCreateWithFlags(&sl->done, cudaEventDisableTiming));
    CU(p, cudaEventCreateWithFlags(&sl->up_done, cudaEventDisableTiming));
    CU(p, cudaEventCreateWithFlags(&sl->comp_done, cudaEventDisableTiming));
    cudaError_t err = cudaMalloc((void **)&sl->dev, c->dev_size);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total_b);
        pf_errf(p->errmsg,
                "%s: out of GPU memory planning %dx%d: a frame slot needs %.1f MiB, %.1f MiB "
                "of %.1f MiB are free (%s)",
                p->source, plan->in_shapes[0].width, plan->in_shapes[0].height,
                c->dev_size / 1048576.0, free_b / 1048576.0, total_b / 1048576.0,
                cudaGetErrorString(err));
        return PF_NO_MEMORY;
    }
    for (int i = 0; i < p->n_nodes; i++) /* summing reduces' counters start at zero */
        if (c->done_bytes[i])
            CU(p, cudaMemsetAsync(sl->dev + c->done_off[i], 0, c->done_bytes[i], sl->streams[0]));
    CU(p, cudaStreamSynchronize(sl->streams[0])); /* before any stream's first frame */
    /* Mapped (as unified addressing makes it anyway): summing reduce kernels write their
       tables here. */
    err = cudaHostAlloc((void **)&sl->host, c->host_size, cudaHostAllocMapped);
    if (err != cudaSuccess) {
        cudaGetLastError();
        pf_errf(p->errmsg, "%s: cannot allocate %.1f MiB of pinned host memory: %s", p->source,
                c->host_size / 1048576.0, cudaGetErrorString(err));
        return PF_NO_MEMORY;
    }
    p->stats.allocations += 2 + (unsigned long long)c->n_streams * 2 + (unsigned long long)nu + 3;
    p->stats.device_bytes += c->dev_size;
    p->stats.pinned_bytes += c->host_size;
    return PF_OK;
}

/* Which point units run as one NVRTC kernel, and so which nodes need float images. */
static int decide_fusion(pf_pipeline *p, pf_cuda_plan *c)
{
    const pf_plan *plan = p->plan;
    int nu = plan->n_units;
    c->n_units = nu;
    c->fused = calloc((size_t)nu + 1, sizeof(int));
    c->fio = calloc((size_t)nu + 1, sizeof(pf_fuse_unit));
    c->fio_off = calloc((size_t)nu + 1, sizeof(size_t));
    c->kern = calloc((size_t)(nu + 1) * PF_KERNEL_VARIANTS, sizeof(fused_kernel));
    c->cur = calloc((size_t)nu + 1, sizeof(int));
    c->f4 = calloc((size_t)p->n_nodes, 1);
    size_t n_io = (size_t)p->n_inputs + (size_t)p->n_outputs;
    c->in_fmt = calloc(n_io + 1, sizeof(int));
    c->out_fmt = c->in_fmt ? calloc(n_io + 1, sizeof(int)) : NULL;
    c->io_fmt = calloc(n_io + 1, 1);
    c->fmt_scratch = calloc(n_io + 1, 1);
    if (!c->fused || !c->fio || !c->fio_off || !c->kern || !c->cur || !c->f4 || !c->in_fmt ||
        !c->out_fmt || !c->io_fmt || !c->fmt_scratch)
        return PF_NO_MEMORY;
    struct cudaDeviceProp prop;
    CU(p, cudaGetDeviceProperties(&prop, p->eng->cuda->device));
    c->arch = prop.major * 10 + prop.minor;
    char why[512] = "", nv_why[512] = "";
    int nvrtc = pf_nvrtc_available(nv_why, sizeof nv_why);
    pf_fuse_decide(p, nvrtc ? NULL : nv_why, c->fused, c->f4, why, sizeof why);
    for (int u = 0; u < nu; u++)
        if (plan->units[u].kind == PF_UNIT_POINT && !c->fused[u] && p->opts.fusion &&
            !p->notified_unfused) {
            pf_log(p->eng, 0, "%s: point stages run as separate kernels: %s", p->source, why);
            p->notified_unfused = 1;
        }
    /* IO lists with placeholder formats: their length does not depend on formats, and
       pf_fuse_decide kept only units whose lists fit. */
    for (size_t i = 0; i < n_io; i++)
        c->in_fmt[i] = c->out_fmt[i] = pf_format_code(PF_U8, 4);
    for (int u = 0; u < nu; u++)
        if (c->fused[u] == PF_FUSE_KERNEL &&
            pf_fuse_unit_io(p, u, c->f4, c->in_fmt, c->out_fmt, &c->fio[u]) != 0)
            return PF_UNSUPPORTED; /* cannot happen: decided above */
    /* Who reads frame descriptors from the device block: the conversions of inputs and
       outputs, and fused kernels whose arguments had no room for them. */
    c->desc_on_device = 0;
    for (int i = 0; i < p->n_inputs; i++)
        c->desc_on_device |= c->f4[i] != 0;
    for (int o = 0; o < p->n_outputs; o++)
        c->desc_on_device |= pf_cu_needs_convert_out(p, c, o);
    for (int u = 0; u < nu; u++)
        c->desc_on_device |= c->fused[u] == PF_FUSE_KERNEL && !c->fio[u].desc_arg;
    return PF_OK;
}

int pf_cuda_plan_build(pf_pipeline *p, pf_cuda_plan **out)
{
    char why[512];
    *out = NULL;
    if (pf_cu_fail_if_lost(p) != PF_OK)
        return PF_CUDA;
    if (!pf_cuda_available(p->eng, why, sizeof why)) {
        pf_errf(p->errmsg, "%s: backend cuda: %s", p->source, why);
        return PF_NO_DEVICE;
    }
    pf_plan *plan = p->plan;
    for (int i = p->n_inputs; i < p->n_nodes; i++) {
        const pf_node *n = &p->nodes[i];
        if (!n->used)
            continue;
        int has = n->desc->kind == PF_STAGE_POINT ? n->desc->point_cuda != NULL
                                                  : n->desc->run_cuda != NULL;
        if (!has) {
            pf_errf(p->errmsg, "%s: %s (%s): stage '%s' has no CUDA implementation", p->source,
                    n->path, n->id, n->desc->name);
            return PF_UNSUPPORTED;
        }
    }
    pf_cuda_plan *c = calloc(1, sizeof *c);
    if (!c)
        return PF_NO_MEMORY;
    *out = c;
    c->n_streams = plan->n_streams > 0 ? plan->n_streams : 1;
    c->n_slots =
        p->opts.slots > 0 ? (p->opts.slots < PF_MAX_SLOTS ? p->opts.slots : PF_MAX_SLOTS) : 3;
    int rc = decide_fusion(p, c);
    if (rc != PF_OK)
        return rc;
    c->launches = count_launches(p, c);
    c->max_timed = c->launches;
    c->measure_frames = plan->budget_ms > 0 || p->opts.profile ? 2 : 0;
    rc = layout(p, c);
    if (rc == PF_NO_MEMORY)
        pf_errf(p->errmsg, "%s: out of host memory planning", p->source);
    if (rc == PF_OK && (cudaStreamCreateWithFlags(&c->up, cudaStreamNonBlocking) != cudaSuccess ||
                        cudaStreamCreateWithFlags(&c->down, cudaStreamNonBlocking) != cudaSuccess))
        rc = pf_cu_fail(p, cudaGetLastError(), "cudaStreamCreateWithFlags", __FILE__, __LINE__);
    for (int s = 0; s < c->n_slots && rc == PF_OK; s++)
        rc = make_slot(p, c, &c->slots[s]);
    return rc; /* on failure the caller frees the plan, and c with it */
}

int pf_cuda_launches(const pf_cuda_plan *c)
{
    return c ? c->launches : 0;
}

int pf_cuda_scratch_fits(const pf_pipeline *p, const pf_cuda_plan *c, int u)
{
    if (!c || u < 0 || u >= c->n_units)
        return 0;
    return c->scratch_size[u] >= (c->fused[u] ? fused_scratch_need(p, c, u) : scratch_need(p, u));
}

#endif /* PF_HAVE_CUDA */
