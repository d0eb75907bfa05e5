/* engine/exec_cuda.c: the CUDA executor's entry points: submit, wait, drain, and the
 * copies of host frames. The plan is built in cuda_layout.c, a frame's kernels recorded
 * in cuda_frame.c, the device probed in cuda_device.c; cuda_internal.h has what they share.
 * Without CUDA in the build every entry point is a stub here that reports PF_NO_DEVICE.
 *
 * A frame launches its kernels: one cudaGraphLaunch in graph mode, or the same calls
 * issued eagerly.
 *
 * Host frames: the frame's uploads run on the plan's upload stream, its kernels (the
 * graph) on the slot's streams after the upload's event, its downloads on the download
 * stream after the kernels' event. Pinned application memory (hostmem.c) is copied by
 * DMA from and to where it is; pageable memory goes through the slot's pinned staging,
 * copied by the engine's pool, in chunks overlapping the transfers.
 *
 * Frames in flight: each slot has its own pools, streams and graph, so the uploads, the
 * kernels and the downloads of consecutive frames overlap; a slot is reused only after
 * its frame was waited for. Nothing here calls cudaDeviceSynchronize; the host waits
 * only on one slot's event.
 */
#include <stdlib.h>
#include <string.h>

#include "exec_cuda.h"
#include "executor.h"

#ifndef PF_HAVE_CUDA

int pf_cuda_available(pf_engine *e, char *why, size_t why_size)
{
    snprintf(why, why_size, "this build of pipefuse has no CUDA support");
    return 0;
}
void pf_cuda_engine_free(pf_engine *e) {}
int pf_cuda_plan_build(pf_pipeline *p, struct pf_cuda_plan **out)
{
    *out = NULL;
    pf_errf(p->errmsg, "%s: backend cuda: this build of pipefuse has no CUDA support", p->source);
    return PF_NO_DEVICE;
}
void pf_cuda_plan_free(struct pf_cuda_plan *c) {}
int pf_cuda_submit(pf_pipeline *p, struct pf_cuda_plan *c, const pf_frame *in, pf_frame *const *out,
                   int device, void *stream, int *ticket)
{
    return pf_cuda_plan_build(p, &c);
}
int pf_cuda_wait_for(pf_pipeline *p, struct pf_cuda_plan *c, int ticket, int timeout_ms)
{
    return pf_cuda_plan_build(p, &c);
}
int pf_cuda_launches(const struct pf_cuda_plan *c)
{
    return 0;
}
int pf_cuda_busy(const struct pf_cuda_plan *c)
{
    return 0;
}
int pf_cuda_drain(pf_pipeline *p, struct pf_cuda_plan *c)
{
    return PF_OK;
}
int pf_cuda_scratch_fits(const pf_pipeline *p, const struct pf_cuda_plan *c, int u)
{
    return 0;
}
const char *pf_cuda_lost(const pf_engine *e)
{
    return NULL;
}
double pf_cuda_bandwidth(const pf_engine *e)
{
    return 0;
}
int pf_cuda_watchdog(const pf_engine *e)
{
    return 0;
}
int pf_cuda_sm_count(pf_engine *e)
{
    return 0;
}
int pf_cuda_arch(pf_engine *e)
{
    return 0;
}

#else /* PF_HAVE_CUDA */

#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include "cuda_internal.h"
#include "hostmem.h"
#include "threadpool.h"
#include "watchdog.h"

/* ---- Frame descriptors and rows ---------------------------------------------------------------------------- */

static void fill_desc(pf_frame_desc *d, void *data, size_t pitch, const pf_frame *f)
{
    memset(d, 0, sizeof *d);
    d->data = data;
    d->pitch = pitch;
    d->width = f->width;
    d->height = f->height;
    d->sample = (int)f->sample;
    d->channels = f->channels;
}

static void copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t row_bytes,
                      int rows)
{
    if (dpitch == spitch && dpitch == row_bytes) {
        memcpy(dst, src, row_bytes * (size_t)rows);
        return;
    }
    for (int y = 0; y < rows; y++)
        memcpy((char *)dst + (size_t)y * dpitch, (const char *)src + (size_t)y * spitch, row_bytes);
}

/* ---- Host frame copies ----------------------------------------------------------------------------- */

/* Pageable frames go through pinned staging; the host copies are split by rows across
   the engine's pool (copy_threads of it), since one core cannot keep up with the bus. */
typedef struct copy_job {
    char *dst;
    const char *src;
    size_t dpitch, spitch, row;
    int rows, per_task;
} copy_job;

#define PF_COPY_TASK_BYTES (256u << 10) /* smaller pieces are not worth a thread */
#define PF_UPLOAD_CHUNK    (4u << 20)   /* staged while the previous chunk is on the bus */

static int copy_task(void *ctx, int i, int worker)
{
    const copy_job *j = ctx;
    int y0 = i * j->per_task, n = j->rows - y0 < j->per_task ? j->rows - y0 : j->per_task;
    copy_rows(j->dst + (size_t)y0 * j->dpitch, j->dpitch, j->src + (size_t)y0 * j->spitch,
              j->spitch, j->row, n);
    return 0;
}

static void copy_rows_parallel(pf_engine *e, void *dst, size_t dpitch, const void *src,
                               size_t spitch, size_t row, int rows)
{
    size_t tasks = row * (size_t)rows / PF_COPY_TASK_BYTES;
    if (tasks > (size_t)e->copy_threads)
        tasks = (size_t)e->copy_threads;
    if (tasks > (size_t)rows)
        tasks = (size_t)rows;
    if (tasks < 2) {
        copy_rows(dst, dpitch, src, spitch, row, rows);
        return;
    }
    copy_job j = {dst, src, dpitch, spitch, row, rows, (int)(((size_t)rows + tasks - 1) / tasks)};
    pf_threadpool_run(e->pool, (rows + j.per_task - 1) / j.per_task, e->copy_threads, copy_task,
                      &j);
}

/* A frame's inputs to the device, on the upload stream: pinned ones by DMA from where
   they are; pageable ones through the slot's pinned staging, chunk by chunk, each
   chunk staged by the pool while the one before is on the bus. Then up_done. */
static int upload(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, const pf_frame *in)
{
    for (int i = 0; i < p->n_inputs; i++) {
        const pf_frame *f = &in[i];
        size_t row = pf_frame_pixel_bytes(f->sample, f->channels) * (size_t)f->width;
        unsigned char *dst = sl->dev + c->in_dev_off[i];
        if (pf_hostmem_pinned(p->eng, f->data, pf_frame_span(f))) {
            CU(p, cudaMemcpy2DAsync(dst, row, f->data, f->pitch, row, (size_t)f->height,
                                    cudaMemcpyHostToDevice, c->up));
            continue;
        }
        unsigned char *stage = sl->host + c->in_host_off[i];
        int chunk = row < PF_UPLOAD_CHUNK ? (int)(PF_UPLOAD_CHUNK / row) : 1;
        for (int y = 0; y < f->height; y += chunk) {
            int n = f->height - y < chunk ? f->height - y : chunk;
            copy_rows_parallel(p->eng, stage + (size_t)y * row, row,
                               (const char *)f->data + (size_t)y * f->pitch, f->pitch, row, n);
            CU(p, cudaMemcpyAsync(dst + (size_t)y * row, stage + (size_t)y * row, row * (size_t)n,
                                  cudaMemcpyHostToDevice, c->up));
        }
    }
    CU(p, cudaEventRecord(sl->up_done, c->up));
    return PF_OK;
}

/* A frame's image outputs back, on the download stream once its kernels on s0 are done:
   into pinned application memory directly, else into the slot's staging (copied out
   by finish). Then done. */
static int download(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, cudaStream_t s0)
{
    CU(p, cudaEventRecord(sl->comp_done, s0));
    CU(p, cudaStreamWaitEvent(c->down, sl->comp_done, 0));
    for (int o = 0; o < p->n_outputs; o++) {
        const pf_frame *f = sl->out[o];
        sl->direct_out[o] = 0;
        if (!f || p->tables[p->outputs[o].node].data)
            continue;
        size_t row = pf_frame_pixel_bytes(f->sample, f->channels) * (size_t)f->width;
        const unsigned char *src = sl->dev + c->out_dev_off[o];
        sl->direct_out[o] = (char)pf_hostmem_pinned(p->eng, f->data, pf_frame_span(f));
        if (sl->direct_out[o])
            CU(p, cudaMemcpy2DAsync(f->data, f->pitch, src, row, row, (size_t)f->height,
                                    cudaMemcpyDeviceToHost, c->down));
        else
            CU(p, cudaMemcpyAsync(sl->host + c->out_host_off[o], src, row * (size_t)f->height,
                                  cudaMemcpyDeviceToHost, c->down));
    }
    CU(p, cudaEventRecord(sl->done, c->down));
    return PF_OK;
}

/* ---- Completion: finish, busy, drain ------------------------------------------------------------- */

/* A launch ran past the watchdog: name the likeliest launch (the longest predicted
   band) and what to do. The context is gone; nothing more runs on it. */
static int report_timeout(pf_pipeline *p, cudaError_t err)
{
    const pf_plan *plan = p->plan;
    char where[512];
    pf_watchdog_longest(p, where, sizeof where);
    pf_errf(p->errmsg,
            "%s: a launch ran past the GPU watchdog (%s)%s; the budget was %.1f ms per launch: "
            "lower it (--max-launch-ms, or options.max_launch_ms) so that the work is split "
            "into more bands. The CUDA context is lost: destroy the pipeline and the engine",
            p->source, cudaGetErrorName(err), where, plan->budget_ms);
    if (p->eng->cuda && !p->eng->cuda->lost[0])
        snprintf(p->eng->cuda->lost, sizeof p->eng->cuda->lost, "%.1000s", p->errmsg);
    return PF_CUDA;
}

/* Band times of a measured frame, to the cost model (watchdog.c), which refines its
   prediction of a unit whose band ran over budget and asks for a new plan. */
static void take_measurements(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl)
{
    pf_watchdog_frame_begin(p);
    for (int k = 0; k < sl->n_timed; k++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, sl->tev[2 * k], sl->tev[2 * k + 1]) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        pf_watchdog_launch(p, sl->timed_unit[k], ms);
    }
    pf_watchdog_refine(p);
}

static int finish(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl)
{
    p->stats.frame_waits++;
    cudaError_t err = cudaEventSynchronize(sl->done);
    sl->busy = 0;
    if (err == cudaErrorLaunchTimeout)
        return report_timeout(p, err);
    if (err != cudaSuccess)
        return pf_cu_fail(p, err, "frame", "(asynchronous error)", 0);
    pf_plan *plan = p->plan;
    if (sl->measuring)
        take_measurements(p, c, sl);
    const pf_frame_desc *h_desc = (const pf_frame_desc *)(sl->host + c->desc_off);
    /* The params the frame ran with are the slot's copy (stage_params), not the stage's:
       those may have changed since the submit, to a table of another size (a histogram's
       bins: the plan goes only after this frame completes). */
    const unsigned char *ran = sl->host + c->params_off;
    for (int o = 0; o < p->n_outputs; o++) {
        int node = p->outputs[o].node;
        if (p->tables[node].data) {
            const pf_node *n = &p->nodes[node];
            const pf_unit *un = &plan->units[plan->unit_of[node]];
            const double *part = (const double *)(sl->host + c->partial_host_off[node]);
            if (c->fused[plan->unit_of[node]]) /* a summing kernel: the table itself */
                memcpy(p->tables[node].data, part, sizeof(double) * un->partial_len);
            else
                n->desc->combine(ran + c->param_off[node], &un->shape, part, un->bands,
                                 p->tables[node].data);
            continue;
        }
        pf_frame *f = sl->out[o];
        if (!sl->device_mode && f && !sl->direct_out[o]) {
            const pf_frame_desc *d = &h_desc[p->n_inputs + o];
            copy_rows_parallel(p->eng, f->data, f->pitch, sl->host + c->out_host_off[o], d->pitch,
                               d->pitch, f->height);
        }
    }
    pf_pipeline_tables_done(p);
    for (int o = 0; o < p->n_outputs; o++) { /* the table's params: the frame's too */
        int node = p->outputs[o].node;
        if (p->tables[node].data)
            memcpy(p->tables[node].params, ran + c->param_off[node],
                   p->nodes[node].desc->params_size);
    }
    return PF_OK;
}

int pf_cuda_busy(const pf_cuda_plan *c)
{
    for (int s = 0; c && s < c->n_slots; s++)
        if (c->slots[s].busy)
            return 1;
    return 0;
}

int pf_cuda_drain(pf_pipeline *p, pf_cuda_plan *c)
{
    int rc = PF_OK;
    for (;;) { /* oldest ticket first, as the application would have waited */
        cuda_slot *first = NULL;
        for (int s = 0; c && s < c->n_slots; s++)
            if (c->slots[s].busy && (!first || c->slots[s].ticket - first->ticket < 0))
                first = &c->slots[s];
        if (!first)
            return rc;
        int frc = pf_cu_fail_if_lost(p) != PF_OK ? PF_CUDA : finish(p, c, first);
        first->busy = 0;
        if (rc == PF_OK)
            rc = frc;
    }
}

/* ---- Submit -------------------------------------------------------------------------------------- */

/* Refreshes the slot's pinned parameter block, only after a change: with a thousand
   stages the copy is the host's largest cost per frame. */
static void stage_params(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl)
{
    if (!sl->params_copied || sl->param_version != p->param_version) {
        for (int i = p->n_inputs; i < p->n_nodes; i++)
            memcpy(sl->host + c->params_off + c->param_off[i], p->nodes[i].params,
                   p->nodes[i].desc->params_size);
        sl->param_version = p->param_version;
        sl->params_copied = 1;
    }
}

/* Whether device output f shares memory with an input the pipeline reads: the frame's
   kernels read the inputs on several streams while others write the outputs, so such an
   output is written to the slot's staging and copied to f after them (copy_staged). */
static int overlaps_input(const pf_pipeline *p, const pf_frame *in, const pf_frame *f)
{
    for (int i = 0; i < p->n_inputs; i++)
        if (p->nodes[i].used && pf_frames_overlap(f, &in[i]))
            return 1;
    return 0;
}

/* The frame descriptors of this frame's inputs and outputs in the slot's pinned block
   (host frames: the slot's device staging; device frames: where they are, or the staging
   for an output over an input), and their formats in c->io_fmt: the formats decide the
   kernel variants a graph holds. */
static void describe_frames(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, const pf_frame *in,
                            pf_frame *const *out, int device)
{
    pf_plan *plan = p->plan;
    int ni = p->n_inputs, no = p->n_outputs;
    pf_frame_desc *h_desc = (pf_frame_desc *)(sl->host + c->desc_off);
    unsigned char *key = c->io_fmt;
    for (int i = 0; i < ni; i++) {
        size_t row = pf_frame_pixel_bytes(in[i].sample, in[i].channels) * (size_t)in[i].width;
        if (device) {
            fill_desc(&h_desc[i], in[i].data, in[i].pitch, &in[i]);
        } else {
            fill_desc(&h_desc[i], sl->dev + c->in_dev_off[i], row, &in[i]);
        }
        key[i] = (unsigned char)pf_format_code(in[i].sample, in[i].channels);
    }
    for (int o = 0; o < no; o++) {
        sl->out[o] = out[o];
        sl->staged_out[o] = 0;
        key[ni + o] = 0;
        if (p->tables[p->outputs[o].node].data || !out[o]) {
            pf_frame none;
            memset(&none, 0, sizeof none);
            if (!out[o] && !p->tables[p->outputs[o].node].data) {
                /* Not wanted: convert into staging in the input's format anyway, so the
                   graph stays the same whichever outputs a caller asks for. */
                none.width = plan->shapes[p->outputs[o].node].width;
                none.height = plan->shapes[p->outputs[o].node].height;
                none.sample = PF_U8;
                none.channels = 4;
                fill_desc(&h_desc[ni + o], sl->dev + c->out_dev_off[o], (size_t)none.width * 4,
                          &none);
                key[ni + o] = (unsigned char)pf_format_code(none.sample, none.channels);
            } else {
                fill_desc(&h_desc[ni + o], NULL, 0, &none);
            }
            continue;
        }
        size_t row = pf_frame_pixel_bytes(out[o]->sample, out[o]->channels) * (size_t)out[o]->width;
        if (device && !(sl->staged_out[o] = (char)overlaps_input(p, in, out[o])))
            fill_desc(&h_desc[ni + o], out[o]->data, out[o]->pitch, out[o]);
        else
            fill_desc(&h_desc[ni + o], sl->dev + c->out_dev_off[o], row, out[o]);
        key[ni + o] = (unsigned char)pf_format_code(out[o]->sample, out[o]->channels);
    }
}

/* Whether this frame's launches are timed. The first frames after planning (and every
   frame when profiling) run eagerly with each launch timed: that is where band times
   are measured. The plan's first frame is not timed: first launches include loading
   modules (CUDA loads them lazily), which would make every band look over budget. */
static void start_measuring(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl)
{
    sl->measuring = (c->measure_frames > 0 && c->frames_planned > 0) || p->opts.profile;
    sl->n_timed = 0;
    if (c->measure_frames > 0 && c->frames_planned > 0)
        c->measure_frames--;
    c->frames_planned++;
}

/* Whether slot sl needs a capture for this mode and c->io_fmt's formats. */
static int needs_capture(const pf_pipeline *p, const pf_cuda_plan *c, const cuda_slot *sl,
                         int device)
{
    size_t n_io = (size_t)(p->n_inputs + p->n_outputs);
    return !sl->exec[device] || memcmp(sl->key[device], c->io_fmt, n_io) != 0;
}

/* With graphs in use (*use_graph), captures the frame when the slot has no graph for
   this mode or had one for other formats (c->io_fmt). The other idle slots capture the
   same frame with their own buffers then: a loop's next frames go to them, and a capture
   allocates (CUDA's own host memory), which a frame loop must not. A capture that fails
   with a CUDA error turns graphs off for the plan: *use_graph becomes 0 and the frame runs
   eagerly. */
static int ensure_graph(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, const pf_frame *in,
                        pf_frame *const *out, int device, int *use_graph)
{
    const unsigned char *key = c->io_fmt;
    size_t n_io = (size_t)(p->n_inputs + p->n_outputs);
    int rc = PF_OK;
    if (*use_graph && needs_capture(p, c, sl, device)) {
        rc = pf_cu_capture(p, c, sl, device);
        for (int s = 0; rc == PF_OK && s < c->n_slots; s++) {
            cuda_slot *o = &c->slots[s];
            if (o == sl || o->busy || !needs_capture(p, c, o, device))
                continue;
            stage_params(p, c, o);
            describe_frames(p, c, o, in, out, device);
            o->measuring = 0;
            rc = pf_cu_capture(p, c, o, device);
            if (rc == PF_OK)
                memcpy(o->key[device], key, n_io);
        }
        if (rc == PF_OK) {
            memcpy(sl->key[device], key, n_io);
        } else if (rc == PF_CUDA) {
            pf_log(p->eng, 0, "%s: CUDA Graph capture failed (%s); running eagerly", p->source,
                   p->errmsg);
            c->graph_failed = 1;
            *use_graph = 0;
            rc = PF_OK;
        }
    }
    return rc;
}

/* The frame's kernels issued eagerly: device frames' run on our streams, ordered after
   the caller's s0 and before what the caller issues on it next. */
static int run_eager(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device, cudaStream_t s0)
{
    int rc;
    if (device) { /* eager work runs on our streams, ordered after the caller's */
        rc = cudaEventRecord(sl->start, s0) == cudaSuccess &&
                     cudaStreamWaitEvent(sl->streams[0], sl->start, 0) == cudaSuccess
                 ? PF_OK
                 : pf_cu_fail(p, cudaGetLastError(), "cudaStreamWaitEvent", __FILE__, __LINE__);
        if (rc == PF_OK)
            rc = pf_cu_record(p, c, sl, device, sl->streams[0]);
        if (rc == PF_OK && (cudaEventRecord(sl->done, sl->streams[0]) != cudaSuccess ||
                            cudaStreamWaitEvent(s0, sl->done, 0) != cudaSuccess))
            rc = pf_cu_fail(p, cudaGetLastError(), "cudaStreamWaitEvent", __FILE__, __LINE__);
    } else {
        rc = pf_cu_record(p, c, sl, device, s0);
    }
    return rc;
}

/* A device frame's outputs written to staging (sl->staged_out), to their frames on s0. */
static int copy_staged(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, cudaStream_t s0)
{
    for (int o = 0; o < p->n_outputs; o++) {
        const pf_frame *f = sl->out[o];
        if (!sl->staged_out[o])
            continue;
        size_t row = pf_frame_pixel_bytes(f->sample, f->channels) * (size_t)f->width;
        cudaError_t err = cudaMemcpy2DAsync(f->data, f->pitch, sl->dev + c->out_dev_off[o], row,
                                            row, (size_t)f->height, cudaMemcpyDeviceToDevice, s0);
        if (err != cudaSuccess)
            return pf_cu_fail(p, err, "cudaMemcpy2DAsync", __FILE__, __LINE__);
    }
    return PF_OK;
}

/* One frame's work in order, on s0: a host frame's uploads, the parameter block, the
   kernels (the graph, or eagerly), a host frame's downloads or a device frame's staged
   outputs; then sl->done. */
static int launch_frame(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, const pf_frame *in,
                        int device, cudaStream_t s0, int use_graph)
{
    int rc = PF_OK;
    if (!device) {
        rc = upload(p, c, sl, in);
        if (rc == PF_OK && cudaStreamWaitEvent(s0, sl->up_done, 0) != cudaSuccess)
            rc = pf_cu_fail(p, cudaGetLastError(), "cudaStreamWaitEvent", __FILE__, __LINE__);
    }
    if (rc == PF_OK)
        rc = pf_cu_upload_params(p, c, sl, s0);
    if (rc == PF_OK && use_graph)
        rc = pf_cu_update_param_nodes(p, c, sl, device);
    if (rc == PF_OK && use_graph) {
        rc = cudaGraphLaunch(sl->exec[device], s0) == cudaSuccess
                 ? PF_OK
                 : pf_cu_fail(p, cudaGetLastError(), "cudaGraphLaunch", __FILE__, __LINE__);
        p->stats.graph_launches++;
    } else if (rc == PF_OK) {
        rc = run_eager(p, c, sl, device, s0);
    }
    if (rc == PF_OK && device)
        rc = copy_staged(p, c, sl, s0);
    if (rc == PF_OK && !device)
        rc = download(p, c, sl, s0);
    else if (rc == PF_OK && cudaEventRecord(sl->done, s0) != cudaSuccess)
        rc = pf_cu_fail(p, cudaGetLastError(), "cudaEventRecord", __FILE__, __LINE__);
    return rc;
}

int pf_cuda_submit(pf_pipeline *p, pf_cuda_plan *c, const pf_frame *in, pf_frame *const *out,
                   int device, void *stream, int *ticket)
{
    if (pf_cu_fail_if_lost(p) != PF_OK)
        return PF_CUDA;
    cuda_slot *sl = &c->slots[c->next_slot];
    if (sl->busy) {
        if (!device && !sl->device_mode) { /* host frames are waited for by the caller */
            pf_errf(p->errmsg,
                    "%s: %d frames are in flight: wait for ticket %d before submitting more",
                    p->source, c->n_slots, sl->ticket);
            return PF_UNSUPPORTED;
        }
        /* A device frame may be fire-and-forget, whatever comes next: retire it. */
        int rc = finish(p, c, sl);
        if (rc != PF_OK)
            return rc;
    }
    nvtxRangePushA("pipefuse frame");
    stage_params(p, c, sl);
    describe_frames(p, c, sl, in, out, device);
    int rc = pf_cu_prepare_fused(p, c, sl, (pf_frame_desc *)(sl->host + c->desc_off));
    if (rc != PF_OK) {
        nvtxRangePop();
        return rc;
    }
    cudaStream_t s0 = device ? (cudaStream_t)stream : sl->streams[0];
    start_measuring(p, c, sl);
    int use_graph = p->opts.graph && !c->graph_failed && !sl->measuring;
    rc = ensure_graph(p, c, sl, in, out, device, &use_graph);
    if (rc == PF_OK)
        rc = launch_frame(p, c, sl, in, device, s0, use_graph);
    nvtxRangePop();
    if (rc != PF_OK) {
        sl->dev_valid = 0; /* what reached the device block is not known */
        return rc;
    }
    sl->busy = 1;
    sl->device_mode = device;
    sl->ticket = pf_issue_ticket(p);
    c->next_slot = (c->next_slot + 1) % c->n_slots;
    *ticket = sl->ticket;
    return PF_OK;
}

/* ---- Wait ---------------------------------------------------------------------------------------- */

/* Waits up to timeout_ms for an event by polling it, sleeping 20 us at first and up to
   1 ms between polls: the runtime has no timed wait on an event. PF_OK when it has
   completed (or failed: cudaEventSynchronize then reports the error), PF_NOT_READY. */
static int event_wait(cudaEvent_t ev, int timeout_ms)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long nap_ns = 20000;
    for (;;) {
        cudaError_t err = cudaEventQuery(ev);
        if (err != cudaErrorNotReady)
            return PF_OK;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double ms = (now.tv_sec - t0.tv_sec) * 1e3 + (now.tv_nsec - t0.tv_nsec) / 1e6;
        if (ms >= timeout_ms)
            return PF_NOT_READY;
        double left_ns = (timeout_ms - ms) * 1e6;
        struct timespec nap = {0, nap_ns < left_ns ? nap_ns : (long)left_ns};
        nanosleep(&nap, NULL);
        nap_ns = nap_ns * 2 < 1000000 ? nap_ns * 2 : 1000000;
    }
}

int pf_cuda_wait_for(pf_pipeline *p, pf_cuda_plan *c, int ticket, int timeout_ms)
{
    if (pf_cu_fail_if_lost(p) != PF_OK)
        return PF_CUDA;
    for (int s = 0; c && s < c->n_slots; s++) {
        cuda_slot *sl = &c->slots[s];
        if (!sl->busy || sl->ticket != ticket)
            continue;
        if (timeout_ms >= 0 && event_wait(sl->done, timeout_ms) == PF_NOT_READY)
            return PF_NOT_READY;
        return finish(p, c, sl);
    }
    if (pf_ticket_issued(p, ticket))
        return PF_OK; /* already retired (a later device submit reused its slot) */
    pf_errf(p->errmsg, "%s: ticket %d was never issued by this pipeline", p->source, ticket);
    return PF_INVALID_ARGUMENT;
}

#endif /* PF_HAVE_CUDA */
