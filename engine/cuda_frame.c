/* engine/cuda_frame.c: the work of one frame on the device. Each unit band by band (a
 * fused unit is one launch of its NVRTC kernel per band, other stages call their plugin),
 * timed when the frame is measured; a whole frame recorded on a slot's streams, captured
 * as a CUDA Graph or issued eagerly; the fused kernel variant for a frame's formats.
 * Parameters live in the device parameter block, refreshed from pinned memory by one copy
 * ahead of a frame's kernels, and only when a parameter or a frame's address changed since
 * the slot's last frame: a parameter changed between frames needs neither a capture nor an
 * instantiation, an unchanged frame copies nothing.
 * Without CUDA in the build the file is empty: exec_cuda.c has the stubs. */
#ifdef PF_HAVE_CUDA

#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_driver.h"

static pf_image dev_image(const pf_cuda_plan *c, const cuda_slot *sl, const pf_plan *plan, int i)
{
    pf_image im;
    im.data = (pf_float4 *)(sl->dev + c->img_off[i]);
    im.width = plan->shapes[i].width;
    im.height = plan->shapes[i].height;
    im.pitch = c->pitch[i];
    return im;
}

/* Rows [y0, y1) of band b of n over rows. */
static void band_rows(int rows, int b, int n, int *y0, int *y1)
{
    *y0 = (int)((long long)rows * b / n);
    *y1 = (int)((long long)rows * (b + 1) / n);
}

/* Brackets one launch with timing events when this frame is measured. */
static int timed(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int u, cudaStream_t st, int begin)
{
    if (!sl->measuring)
        return PF_OK;
    if (begin) {
        if (sl->n_timed >= c->max_timed)
            return PF_OK;
        sl->timed_unit[sl->n_timed] = u;
        CU(p, cudaEventRecord(sl->tev[2 * sl->n_timed], st));
    } else if (sl->n_timed < c->max_timed) {
        CU(p, cudaEventRecord(sl->tev[2 * sl->n_timed + 1], st));
        sl->n_timed++;
    }
    return PF_OK;
}

/* Fused unit u's parameters and descriptors in the slot: the pinned block's, for the
   by-value arguments, and the device block's. */
static pf_fuse_args fuse_args(const pf_cuda_plan *c, const cuda_slot *sl, int u)
{
    size_t desc = c->desc_off + sizeof(pf_frame_desc) * c->fio_off[u];
    pf_fuse_args a = {sl->host + c->params_off + c->fio[u].param_lo, sl->dev + c->params_off,
                      sl->host + desc, sl->dev + desc};
    return a;
}

/* A summing reduce unit as its generated kernel, band by band (the point ops it absorbed
   run on the way in): its blocks leave partial tables, and the last block of each group
   adds its group's entries into the table's place in the pinned pool (mapped), by
   columns in the last band, by rows in every band (a band's rows are all its own). One
   launch a band; only the table crosses to the host, and no copy follows. A sum by
   columns in one launch of a few chunks adds them in a thread-block cluster instead. */
static int run_reduce_kernel(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int u, cudaStream_t st)
{
    const pf_plan *plan = p->plan;
    const pf_unit *un = &plan->units[u];
    const fused_kernel *k = &c->kern[u * PF_KERNEL_VARIANTS + c->cur[u]];
    const pf_fuse_unit *io = &c->fio[u];
    int node = un->nodes[0], bands = un->bands > 0 ? un->bands : 1, sms = p->eng->cuda->sm_count;
    int w = un->shape.width, h = un->shape.height, cols = io->reduce == PF_REDUCE_SUM_COLUMNS;
    int rc = PF_OK, total = 0;
    for (int b = 0; b < bands && cols; b++) {
        int y0, y1;
        band_rows(h, b, bands, &y0, &y1);
        total += pf_fuse_reduce_band_chunks(io, w, h, y0, y1, sms);
    }
    pf_reduce_args ra = {(double *)(sl->dev + c->partial_off[node]),
                         pf_fuse_reduce_rows(w, h, io->ppt, sms),
                         0,
                         cols ? total : pf_fuse_reduce_band_chunks(io, w, h, 0, h, sms),
                         NULL,
                         (unsigned int *)(sl->dev + c->done_off[node]),
                         0};
    /* A sum by columns in one launch of a few chunks: a stripe's blocks are a cluster,
       and add their sums through shared memory, not partial tables and a counter. */
    if (cols && bands == 1 && total > 1 && total <= PF_FUSE_MAX_CLUSTER && p->opts.clusters &&
        pf_fuse_clusters(c->arch))
        ra.cluster = total;
    double *table = (double *)(sl->host + c->partial_host_off[node]);
    pf_fuse_args fa = fuse_args(c, sl, u);
    char err[512];
    nvtxRangePushA(p->nodes[node].id);
    for (int b = 0; b < bands && rc == PF_OK; b++) {
        int y0, y1;
        band_rows(h, b, bands, &y0, &y1);
        ra.table = !cols || b == bands - 1 ? table : NULL;
        rc = timed(p, c, sl, u, st, 1);
        if (rc == PF_OK)
            rc =
                pf_fuse_launch_reduce(k->function, io, w, h, y0, y1, &fa, &ra, st, err, sizeof err);
        if (rc == PF_OK)
            rc = timed(p, c, sl, u, st, 0);
        else
            pf_errf(p->errmsg, "%s: reduce %s, band %d of %d: %s", p->source, p->nodes[node].id,
                    b + 1, bands, err);
        if (cols)
            ra.chunk0 += pf_fuse_reduce_band_chunks(io, w, h, y0, y1, sms);
    }
    nvtxRangePop();
    return rc;
}

/* One unit, band by band: each band is a launch of its own, and so its own watchdog
   window, inside the graph as outside. */
static int run_unit(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int u, cudaStream_t st)
{
    const pf_plan *plan = p->plan;
    const pf_unit *un = &plan->units[u];
    int bands = un->bands > 0 ? un->bands : 1;
    if (c->fused[u] == PF_FUSE_ABSORBED || c->fused[u] == PF_FUSE_EPILOGUE)
        return PF_OK; /* the reduce or stencil kernel reading its result (or its input,
                         for an epilogue) runs its ops */
    if (c->fused[u] && un->kind == PF_UNIT_REDUCE)
        return run_reduce_kernel(p, c, sl, u, st);
    if (c->fused[u]) {
        const fused_kernel *k = &c->kern[u * PF_KERNEL_VARIANTS + c->cur[u]];
        pf_fuse_args fa = fuse_args(c, sl, u);
        char err[512];
        nvtxRangePushA(un->ids[0]);
        int rc = PF_OK;
        for (int b = 0; b < bands && rc == PF_OK; b++) {
            int y0, y1;
            band_rows(un->shape.height, b, bands, &y0, &y1);
            rc = timed(p, c, sl, u, st, 1);
            if (rc == PF_OK && k->function_v)
                rc = pf_fuse_launch_separable(
                    k->function, k->function_v, &c->fio[u], un->shape.width, un->shape.height, y0,
                    y1, &fa, sl->dev + c->scratch_off[u], c->scratch_size[u], st, err, sizeof err);
            else if (rc == PF_OK)
                rc = pf_fuse_launch(k->function, &c->fio[u], un->shape.width, un->shape.height, y0,
                                    y1, &fa, st, err, sizeof err);
            if (rc == PF_OK)
                rc = timed(p, c, sl, u, st, 0);
            else
                pf_errf(p->errmsg, "%s: fused unit #%d (%s...), band %d of %d: %s", p->source, u,
                        un->ids[0], b + 1, bands, err);
        }
        nvtxRangePop();
        return rc;
    }
    for (int a = 0; a < un->n_nodes; a++) {
        int i = un->nodes[a];
        const pf_node *n = &p->nodes[i];
        nvtxRangePushA(n->id);
        pf_image in[PF_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++)
            in[k] = dev_image(c, sl, plan, n->in[k]);
        char msg[1024] = "";
        pf_stage_args args;
        memset(&args, 0, sizeof args);
        args.size = sizeof args;
        args.params = sl->dev + c->params_off + c->param_off[i];
        args.in = in;
        args.n_in = n->n_in;
        args.stream = st;
        args.err = msg;
        args.err_size = sizeof msg;
        args.scratch = c->scratch_off[u] != SIZE_MAX ? sl->dev + c->scratch_off[u] : NULL;
        args.scratch_size = args.scratch ? c->scratch_size[u] : 0;
        int reduce = n->desc->kind == PF_STAGE_REDUCE;
        double *partials = reduce ? (double *)(sl->dev + c->partial_off[i]) : NULL;
        size_t plen = un->partial_len ? un->partial_len : 1;
        if (reduce)
            CU(p, cudaMemsetAsync(partials, 0, sizeof(double) * plen * (size_t)bands, st));
        else
            args.out = dev_image(c, sl, plan, i);
        int rows = reduce ? un->shape.height : args.out.height, rc = 0, b = 0;
        for (; b < bands && rc == 0; b++) {
            band_rows(rows, b, bands, &args.region.y0, &args.region.y1);
            if (reduce)
                args.partial = partials + plen * (size_t)b;
            int trc = timed(p, c, sl, u, st, 1);
            if (trc != PF_OK)
                return trc;
            rc = n->desc->kind == PF_STAGE_POINT ? n->desc->point_cuda(&args)
                                                 : n->desc->run_cuda(&args);
            if (rc == 0 && (trc = timed(p, c, sl, u, st, 0)) != PF_OK)
                return trc;
        }
        if (rc == 0 && reduce)
            CU(p,
               cudaMemcpyAsync(sl->host + c->partial_host_off[i], partials,
                               sizeof(double) * plen * (size_t)bands, cudaMemcpyDeviceToHost, st));
        nvtxRangePop();
        if (rc != 0) {
            pf_plugin_msg(msg, sizeof msg);
            pf_errf(p->errmsg, "%s: %s (%s) failed on the GPU in band %d of %d: %s", p->source,
                    n->path, n->id, b, bands, msg[0] ? msg : "no reason given");
            return PF_STAGE;
        }
    }
    return PF_OK;
}

/* Copies the slot's parameter block and frame descriptors (contiguous in both pools)
   to the device when they differ from what its device block holds, on st ahead of the
   frame's kernels. A frame whose parameters and frame addresses did not change copies
   nothing; the copy is not part of the graph, so a change needs no re-capture either.
   Descriptors count only where something reads them there (c->desc_on_device): fused
   kernels take theirs by value, so frames whose buffers change copy nothing either.
   The slot's previous frame was waited for, so nothing still reads the block. */
int pf_cu_upload_params(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, cudaStream_t st)
{
    size_t desc_bytes = sizeof(pf_frame_desc) * c->desc_count;
    const unsigned char *h_desc = sl->host + c->desc_off;
    if (sl->dev_valid && sl->dev_param_version == sl->param_version &&
        (!c->desc_on_device || memcmp(sl->dev_desc, h_desc, desc_bytes) == 0))
        return PF_OK;
    sl->dev_valid = 0;
    CU(p, cudaMemcpyAsync(sl->dev + c->params_off, sl->host + c->params_off,
                          c->params_size + desc_bytes, cudaMemcpyHostToDevice, st));
    memcpy(sl->dev_desc, h_desc, desc_bytes);
    sl->dev_param_version = sl->param_version;
    sl->dev_valid = 1;
    p->stats.param_uploads++;
    return PF_OK;
}

/* Issues one frame's kernels with s0 as the origin stream: under capture this becomes
   the graph; otherwise it runs eagerly. Host frames' copies are not part of it: they
   run on the plan's copy streams (upload, download), so that they overlap the kernels
   of other frames and go straight from and to pinned application memory. */
int pf_cu_record(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device, cudaStream_t s0)
{
    const pf_plan *plan = p->plan;
    int ni = p->n_inputs, no = p->n_outputs;
    const pf_frame_desc *d_desc = (const pf_frame_desc *)(sl->dev + c->desc_off);
    for (int i = 0; i < ni; i++) {
        if (c->f4[i])
            CU(p, (cudaError_t)pf_cuda_frame_to_image(&d_desc[i], dev_image(c, sl, plan, i), s0));
    }
    CU(p, cudaEventRecord(sl->fork, s0));
    for (int k = 1; k < c->n_streams; k++)
        CU(p, cudaStreamWaitEvent(sl->streams[k], sl->fork, 0));
    for (int u = 0; u < plan->n_units; u++) {
        const pf_unit *un = &plan->units[u];
        cudaStream_t st = un->stream == 0 ? s0 : sl->streams[un->stream];
        for (int k = 0; k < un->n_waits; k++)
            CU(p, cudaStreamWaitEvent(st, sl->unit_done[un->waits[k]], 0));
        int rc = run_unit(p, c, sl, u, st);
        if (rc != PF_OK)
            return rc;
        CU(p, cudaEventRecord(sl->unit_done[u], st));
    }
    for (int k = 1; k < c->n_streams; k++) {
        CU(p, cudaEventRecord(sl->joined[k], sl->streams[k]));
        CU(p, cudaStreamWaitEvent(s0, sl->joined[k], 0));
    }
    for (int o = 0; o < no; o++) {
        int node = p->outputs[o].node;
        if (p->tables[node].data)
            continue;
        if (pf_cu_needs_convert_out(p, c, o))
            CU(p, (cudaError_t)pf_cuda_image_to_frame(dev_image(c, sl, plan, node), &d_desc[ni + o],
                                                      s0));
    }
    return PF_OK;
}

/* Whether unit u is a fused kernel taking its parameters or its descriptors by value:
   its graph nodes are updated in place when they change. */
static int by_value(const pf_cuda_plan *c, int u)
{
    return c->fused[u] == PF_FUSE_KERNEL && (c->fio[u].param_arg || c->fio[u].desc_arg);
}

/* The kernel nodes of a captured graph that launch a fused unit taking its parameters
   or its descriptors by value, into sl->pnodes[device] with their units. */
static int find_param_nodes(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device,
                            cudaGraph_t graph)
{
    sl->n_pnodes[device] = 0;
    size_t n = 0;
    CU(p, cudaGraphGetNodes(graph, NULL, &n));
    int any = 0;
    for (int u = 0; u < c->n_units && !any; u++)
        any = by_value(c, u);
    if (n == 0 || !any)
        return PF_OK;
    cudaGraphNode_t *nodes = malloc(sizeof(cudaGraphNode_t) * n);
    cudaGraphNode_t *keep = realloc(sl->pnodes[device], sizeof(cudaGraphNode_t) * n);
    if (keep)
        sl->pnodes[device] = keep;
    int *units = keep ? realloc(sl->pnode_unit[device], sizeof(int) * n) : NULL;
    if (units)
        sl->pnode_unit[device] = units;
    if (!nodes || !keep || !units) {
        free(nodes);
        pf_errf(p->errmsg, "%s: out of host memory capturing a frame", p->source);
        return PF_NO_MEMORY;
    }
    cudaError_t err = cudaGraphGetNodes(graph, nodes, &n);
    for (size_t i = 0; err == cudaSuccess && i < n; i++) {
        void *fn = NULL;
        if (pf_fuse_node_function(nodes[i], &fn) != PF_OK) {
            free(nodes);
            pf_errf(p->errmsg, "%s: cannot read a kernel node of the captured frame", p->source);
            return PF_CUDA;
        }
        for (int u = 0; fn && u < c->n_units; u++) {
            const fused_kernel *k = &c->kern[u * PF_KERNEL_VARIANTS + c->cur[u]];
            if (!by_value(c, u) || (k->function != fn && k->function_v != fn))
                continue;
            keep[sl->n_pnodes[device]] = nodes[i];
            units[sl->n_pnodes[device]++] = u;
            break;
        }
    }
    free(nodes);
    if (err != cudaSuccess)
        return pf_cu_fail(p, err, "cudaGraphGetNodes", __FILE__, __LINE__);
    return PF_OK;
}

/* Brings the by-value arguments of sl->exec[device]'s fused kernel nodes to the slot's
   pinned block, after a parameter changed or a frame's buffers did: no capture, no
   instantiation, no copy to the device. */
int pf_cu_update_param_nodes(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device)
{
    size_t desc_bytes = sizeof(pf_frame_desc) * c->desc_count;
    const unsigned char *h_desc = sl->host + c->desc_off;
    int params = sl->exec_param_version[device] != sl->param_version;
    if (!params && memcmp(sl->exec_desc[device], h_desc, desc_bytes) == 0)
        return PF_OK;
    for (int i = 0; i < sl->n_pnodes[device]; i++) {
        int u = sl->pnode_unit[device][i];
        if (!params && !c->fio[u].desc_arg)
            continue; /* its descriptors are read from the device block */
        pf_fuse_args fa = fuse_args(c, sl, u);
        char err[512];
        if (pf_fuse_node_set_args(sl->exec[device], sl->pnodes[device][i], &c->fio[u], &fa, err,
                                  sizeof err) != PF_OK) {
            pf_errf(p->errmsg, "%s: %s", p->source, err);
            return PF_CUDA;
        }
        p->stats.graph_node_updates++;
    }
    sl->exec_param_version[device] = sl->param_version;
    memcpy(sl->exec_desc[device], h_desc, desc_bytes);
    return PF_OK;
}

/* Captures the frame into sl->exec[mode], updating an existing exec in place when the
   topology allows (cudaGraphExecUpdate) and instantiating only otherwise. */
int pf_cu_capture(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device)
{
    cudaStream_t s0 = sl->streams[0];
    CU(p, cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
    int rc = pf_cu_record(p, c, sl, device, s0);
    cudaGraph_t graph = NULL;
    cudaError_t end = cudaStreamEndCapture(s0, &graph);
    if (rc != PF_OK || end != cudaSuccess) {
        if (graph)
            cudaGraphDestroy(graph);
        cudaGetLastError();
        if (rc == PF_OK)
            return pf_cu_fail(p, end, "cudaStreamEndCapture", __FILE__, __LINE__);
        return rc;
    }
    p->stats.graph_captures++;
    rc = find_param_nodes(p, c, sl, device, graph);
    if (rc != PF_OK) {
        cudaGraphDestroy(graph);
        return rc;
    }
    /* An exec whose kernel nodes are updated later is instantiated from the graph kept
       with it (cudaGraphExecUpdate would leave it paired with another graph's nodes). */
    if (sl->exec[device] && sl->n_pnodes[device] > 0) {
        cudaGraphExecDestroy(sl->exec[device]);
        sl->exec[device] = NULL;
    }
    cudaError_t err = cudaErrorUnknown;
    if (sl->exec[device]) {
        cudaGraphExecUpdateResultInfo info;
        err = cudaGraphExecUpdate(sl->exec[device], graph, &info);
        if (err == cudaSuccess) {
            p->stats.graph_updates++;
        } else {
            cudaGetLastError();
            cudaGraphExecDestroy(sl->exec[device]);
            sl->exec[device] = NULL;
        }
    }
    if (!sl->exec[device]) {
        err = cudaGraphInstantiate(&sl->exec[device], graph, 0);
        if (err == cudaSuccess)
            p->stats.graph_instantiations++;
    }
    if (sl->graph[device])
        cudaGraphDestroy(sl->graph[device]);
    sl->graph[device] = graph;
    if (err != cudaSuccess) {
        sl->n_pnodes[device] = 0;
        return pf_cu_fail(p, err, "cudaGraphInstantiate", __FILE__, __LINE__);
    }
    sl->exec_param_version[device] = sl->param_version; /* captured with these */
    memcpy(sl->exec_desc[device], sl->host + c->desc_off, sizeof(pf_frame_desc) * c->desc_count);
    return PF_OK;
}

/* Every slot's captured graphs, after a fused variant they may launch was unloaded:
   frames still running them finish first (their own events, not a device sync). */
static void drop_graphs(pf_cuda_plan *c)
{
    for (int s = 0; s < c->n_slots; s++) {
        cuda_slot *sl = &c->slots[s];
        if (sl->busy && sl->done)
            cudaEventSynchronize(sl->done);
        for (int m = 0; m < 2; m++) {
            if (sl->exec[m]) {
                cudaGraphExecDestroy(sl->exec[m]);
                sl->exec[m] = NULL;
            }
            if (sl->graph[m]) {
                cudaGraphDestroy(sl->graph[m]);
                sl->graph[m] = NULL;
            }
            sl->n_pnodes[m] = 0;
        }
    }
}

/* The variant of unit u compiled for the formats in fmts[0..n), or -1. */
static int find_variant(const fused_kernel *kv, const unsigned char *fmts, int n)
{
    for (int v = 0; v < PF_KERNEL_VARIANTS; v++)
        if (kv[v].fmts && (n == 0 || memcmp(kv[v].fmts, fmts, (size_t)n) == 0))
            return v;
    return -1;
}

/* For every fused unit: the kernel variant for this frame's formats (generated and
   compiled on first sight, from the disk cache when it has it) and its descriptors:
   pipeline inputs and outputs as this frame has them, float images of this slot. */
int pf_cu_prepare_fused(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, pf_frame_desc *h_desc)
{
    int ni = p->n_inputs, no = p->n_outputs;
    int *in_fmt = c->in_fmt, *out_fmt = c->out_fmt;
    for (int i = 0; i < ni; i++)
        in_fmt[i] = pf_format_code(h_desc[i].sample, h_desc[i].channels);
    for (int o = 0; o < no; o++)
        out_fmt[o] = pf_format_code(h_desc[ni + o].sample, h_desc[ni + o].channels);
    for (int u = 0; u < c->n_units; u++) {
        if (c->fused[u] != PF_FUSE_KERNEL)
            continue;
        pf_fuse_unit *io = &c->fio[u];
        /* The variant is keyed by every native format the unit reads and writes: the
           whole list, compared exactly (a packed integer overflowed past ten). */
        unsigned char *fmts = c->fmt_scratch;
        int n = 0;
        for (int k = 0; k < io->n_in; k++)
            if (io->in[k].native >= 0)
                fmts[n++] = (unsigned char)in_fmt[io->in[k].native];
        for (int k = 0; k < io->n_out; k++)
            if (io->out[k].native >= 0)
                fmts[n++] = (unsigned char)out_fmt[io->out[k].native];
        fused_kernel *kv = &c->kern[u * PF_KERNEL_VARIANTS];
        int v = find_variant(kv, fmts, n);
        if (v < 0) {
            v = 0; /* a new variant; replace the last slot when all are taken */
            while (v < PF_KERNEL_VARIANTS - 1 && kv[v].fmts)
                v++;
            if (kv[v].module) {
                /* Graphs captured with the old variant launch its function: they go
                   before its module does (this was the PngSuite fault: a graph kept for
                   an earlier format ran a kernel of an unloaded module). */
                drop_graphs(c);
                pf_fuse_unload(kv[v].module);
            }
            free(kv[v].fmts);
            memset(&kv[v], 0, sizeof kv[v]);
            void *cubin = NULL;
            size_t size = 0;
            int rc = pf_fuse_build(p, u, c->f4, in_fmt, out_fmt, c->arch, p->eng->cuda->sm_count,
                                   p->dump_dir, io, &cubin, &size);
            if (rc == PF_OK) {
                char err[512];
                rc = pf_fuse_load(cubin, PF_FUSED_KERNEL, &kv[v].module, &kv[v].function, err,
                                  sizeof err);
                if (rc == PF_OK && io->stencil == PF_FUSE_STENCIL_SEPARABLE &&
                    (rc = pf_fuse_function(kv[v].module, PF_FUSED_KERNEL_V, &kv[v].function_v, err,
                                           sizeof err)) != PF_OK) {
                    pf_fuse_unload(kv[v].module);
                    memset(&kv[v], 0, sizeof kv[v]);
                }
                if (rc != PF_OK)
                    pf_errf(p->errmsg, "%s: %s", p->source, err);
            }
            free(cubin);
            if (rc == PF_OK && !(kv[v].fmts = malloc((size_t)n + 1))) {
                pf_fuse_unload(kv[v].module);
                memset(&kv[v], 0, sizeof kv[v]);
                pf_errf(p->errmsg, "%s: out of host memory", p->source);
                rc = PF_NO_MEMORY;
            }
            if (rc != PF_OK)
                return rc;
            memcpy(kv[v].fmts, fmts, (size_t)n);
            kv[v].ppt = io->ppt;
        }
        /* The build wrote this variant's formats into io; a variant built earlier brings
           back what its launches depend on: a reduce's pixels per thread follow the
           format (one chunk of a row), and a grid sized for another variant's would sum
           only a part of the columns. */
        io->ppt = kv[v].ppt;
        c->cur[u] = v;
        pf_frame_desc *d = h_desc + c->fio_off[u];
        for (int k = 0; k < io->n_in; k++) {
            const pf_fuse_io *e = &io->in[k];
            if (e->native >= 0) {
                d[k] = h_desc[e->native];
            } else {
                memset(&d[k], 0, sizeof d[k]);
                d[k].data = sl->dev + c->img_off[e->node];
                d[k].pitch = c->pitch[e->node];
                d[k].width = p->plan->shapes[e->node].width;
                d[k].height = p->plan->shapes[e->node].height;
                d[k].sample = PF_F32;
                d[k].channels = 4;
            }
        }
        for (int k = 0; k < io->n_out; k++) {
            const pf_fuse_io *e = &io->out[k];
            pf_frame_desc *o = &d[io->n_in + k];
            if (e->native >= 0) {
                *o = h_desc[ni + e->native];
            } else {
                memset(o, 0, sizeof *o);
                o->data = sl->dev + c->img_off[e->node];
                o->pitch = c->pitch[e->node];
                o->width = p->plan->shapes[e->node].width;
                o->height = p->plan->shapes[e->node].height;
                o->sample = PF_F32;
                o->channels = 4;
            }
        }
    }
    return PF_OK;
}

#endif /* PF_HAVE_CUDA */
