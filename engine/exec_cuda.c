/* engine/exec_cuda.c: the CUDA executor.
 *
 * Planning a shape allocates everything a frame needs, once: per frame slot one device
 * pool (working images, reused by liveness; the parameter block; frame descriptors;
 * native staging; scratch; reduce partials) and one pinned host pool, plus streams and
 * events. A frame then launches its kernels: one cudaGraphLaunch in graph mode, or the
 * same calls issued eagerly. Parameters live in the device parameter block, refreshed
 * from pinned memory by one copy ahead of a frame's kernels, and only when a parameter or
 * a frame's address changed since the slot's last frame: a parameter changed between
 * frames needs neither a capture nor an instantiation, an unchanged frame copies nothing.
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
#include "cuda_driver.h"
#include "fuse.h"
#include "nvrtc.h"
#include "hostmem.h"
#include "threadpool.h"
#include "watchdog.h"

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

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <time.h>

#include "../kernels/convert.h"

#define PF_DEV_ALIGN 256

typedef struct pf_cuda_dev {
    int state; /* 0 not tried, 1 usable, -1 not */
    int device;
    int watchdog;     /* cudaDevAttrKernelExecTimeout */
    int sm_count;     /* multiprocessors */
    int arch;         /* compute capability as XY (90 for sm_90) */
    double bandwidth; /* device-to-device copy, bytes/s counting read + write */
    char why[512];
    char lost[1024]; /* a sticky error ended the context: why; every later call fails */
} pf_cuda_dev;

/* Device-to-device copy bandwidth: the floor for memory-bound work and the cost
   model's rate. Measured once per engine: 64 MiB copied 5 times after a warm-up. */
static double measure_bandwidth(void)
{
    const size_t bytes = 64u << 20;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float ms = 0;
    double bw = 0;
    if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
        cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
        cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess &&
        cudaEventRecord(e0, 0) == cudaSuccess) {
        for (int i = 0; i < 5; i++)
            cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice, 0);
        if (cudaEventRecord(e1, 0) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
            cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms > 0)
            bw = 2.0 * bytes * 5 / (ms * 1e-3);
    }
    cudaGetLastError();
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return bw > 0 ? bw : 1e12;
}

/* ---- Errors ---------------------------------------------------------------------------------- */

/* Checks a CUDA call; on failure writes "<source>: <call>: <error> at file:line" into
   p->errmsg and returns from the enclosing function with PF_CUDA (PF_NO_MEMORY for an
   allocation failure). */
#define CU(p, call)                                                                                \
    do {                                                                                           \
        cudaError_t cu_err_ = (call);                                                              \
        if (cu_err_ != cudaSuccess)                                                                \
            return cuda_fail((p), cu_err_, #call, __FILE__, __LINE__);                             \
    } while (0)

static int cuda_fail(pf_pipeline *p, cudaError_t err, const char *call, const char *file, int line)
{
    int sticky = err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure ||
                 err == cudaErrorLaunchTimeout || err == cudaErrorHardwareStackError ||
                 err == cudaErrorIllegalInstruction || err == cudaErrorMisalignedAddress ||
                 err == cudaErrorInvalidPc || err == cudaErrorECCUncorrectable;
    pf_errf(p->errmsg, "%s: CUDA %s: %s (%s) at %s:%d%s", p->source, call, cudaGetErrorString(err),
            cudaGetErrorName(err), file, line,
            sticky ? "; the CUDA context is lost: destroy the pipeline and engine" : "");
    if (sticky && p->eng->cuda && !p->eng->cuda->lost[0])
        snprintf(p->eng->cuda->lost, sizeof p->eng->cuda->lost, "%.1000s", p->errmsg);
    if (err == cudaErrorMemoryAllocation)
        return PF_NO_MEMORY;
    return PF_CUDA;
}

/* ---- The device --------------------------------------------------------------------------------- */

static int available_locked(pf_engine *e, char *why, size_t why_size)
{
    if (!e->cuda) {
        e->cuda = calloc(1, sizeof *e->cuda);
        if (!e->cuda) {
            snprintf(why, why_size, "out of memory");
            return 0;
        }
    }
    pf_cuda_dev *d = e->cuda;
    if (d->state == 0) {
        int n = 0;
        cudaError_t err = cudaGetDeviceCount(&n);
        d->state = -1;
        if (err != cudaSuccess) {
            pf_cuda_explain_no_device((int)err, d->why, sizeof d->why);
        } else if (n == 0) {
            snprintf(d->why, sizeof d->why, "no CUDA device");
        } else if ((err = cudaSetDevice(0)) != cudaSuccess ||
                   (err = cudaFree(NULL)) != cudaSuccess) {
            snprintf(d->why, sizeof d->why, "CUDA device 0 cannot be used: %s",
                     cudaGetErrorString(err));
        } else if ((err = (cudaError_t)pf_cuda_probe_image()) != cudaSuccess) {
            struct cudaDeviceProp prop;
            cudaGetDeviceProperties(&prop, 0);
            snprintf(d->why, sizeof d->why,
                     "%s (sm_%d%d) cannot run this build's kernels (%s): it carries sm_75 "
                     "to sm_90 and compute_90 PTX; the device is %s",
                     prop.name, prop.major, prop.minor, cudaGetErrorString(err),
                     prop.major * 10 + prop.minor < 75 ? "older" : "newer than the driver's PTX");
        } else {
            d->state = 1;
            d->device = 0;
            if (cudaDeviceGetAttribute(&d->watchdog, cudaDevAttrKernelExecTimeout, 0) !=
                cudaSuccess)
                d->watchdog = 0;
            if (cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, 0) !=
                cudaSuccess)
                d->sm_count = 1;
            int major = 0, minor = 0;
            if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) ==
                    cudaSuccess &&
                cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess)
                d->arch = major * 10 + minor;
            d->bandwidth = measure_bandwidth();
        }
    }
    if (d->state < 0)
        snprintf(why, why_size, "%s", d->why);
    return d->state > 0;
}

/* Engines on several threads probe their device once each, one at a time. */
static pthread_mutex_t available_mu = PTHREAD_MUTEX_INITIALIZER;

int pf_cuda_available(pf_engine *e, char *why, size_t why_size)
{
    pthread_mutex_lock(&available_mu);
    int ok = available_locked(e, why, why_size);
    pthread_mutex_unlock(&available_mu);
    return ok;
}

const char *pf_cuda_lost(const pf_engine *e)
{
    return e->cuda && e->cuda->lost[0] ? e->cuda->lost : NULL;
}

/* Every call after a sticky error fails at once with its reason: the context cannot
   run anything again, and pretending otherwise would hang or return garbage. */
static int fail_if_lost(pf_pipeline *p)
{
    const char *lost = pf_cuda_lost(p->eng);
    if (!lost)
        return PF_OK;
    pf_errf(p->errmsg, "%s: the GPU context was lost earlier and cannot be used again: %.3000s",
            p->source, lost);
    return PF_CUDA;
}

double pf_cuda_bandwidth(const pf_engine *e)
{
    return e->cuda ? e->cuda->bandwidth : 0;
}
int pf_cuda_watchdog(const pf_engine *e)
{
    return e->cuda ? e->cuda->watchdog : 0;
}
int pf_cuda_sm_count(pf_engine *e)
{
    char why[512];
    return pf_cuda_available(e, why, sizeof why) ? e->cuda->sm_count : 0;
}

int pf_cuda_arch(pf_engine *e)
{
    char why[512];
    return pf_cuda_available(e, why, sizeof why) ? e->cuda->arch : 0;
}

void pf_cuda_engine_free(pf_engine *e)
{
    free(e->cuda);
    e->cuda = NULL;
}

/* ---- Plan-time layout -------------------------------------------------------------------------------- */

typedef struct pf_cuda_plan pf_cuda_plan;

typedef struct cuda_slot {
    cudaStream_t *streams;  /* plan->n_streams */
    cudaEvent_t *unit_done; /* per unit */
    cudaEvent_t *joined;    /* per stream: its last unit, for the join */
    cudaEvent_t fork, start, done;
    unsigned char *dev;      /* device pool */
    unsigned char *host;     /* pinned pool */
    cudaGraphExec_t exec[2]; /* host mode, device mode */
    cudaGraph_t graph[2];    /* what exec[m] was instantiated from: names its nodes */
    /* Per mode: the kernel nodes of fused units that take their parameters by value,
       their units, and the parameter version their arguments hold. */
    cudaGraphNode_t *pnodes[2];
    int *pnode_unit[2];
    int n_pnodes[2];
    unsigned long exec_param_version[2];
    unsigned char *key[2];       /* the frame formats each exec was captured for (io_fmt) */
    int busy;                    /* holds a frame not yet waited for */
    unsigned long param_version; /* of the params in this slot's pinned block */
    int params_copied;
    unsigned long dev_param_version; /* of the params in this slot's device block */
    int dev_valid;                   /* the device block holds dev_param_version, dev_desc */
    unsigned char *dev_desc;         /* the frame descriptors the device block holds */
    int measuring;                   /* this frame's launches are timed (eager) */
    int n_timed;
    cudaEvent_t *tev; /* timing events: two per timed launch */
    int *timed_unit;
    int ticket;
    int device_mode;
    pf_frame **out;        /* host mode, per output: where wait puts it */
    char *direct_out;      /* host mode, per output: DMA'd straight into pinned memory */
    cudaEvent_t up_done;   /* host mode: this frame's inputs are on the device */
    cudaEvent_t comp_done; /* host mode: its kernels are done (downloads may start) */
} cuda_slot;

#define PF_KERNEL_VARIANTS 4 /* compiled formats kept per fused unit */

typedef struct fused_kernel {
    unsigned char *fmts; /* formats of the unit's native inputs, then outputs; NULL: empty */
    void *module, *function;
} fused_kernel;

struct pf_cuda_plan {
    int n_slots;
    int n_units;
    int arch;           /* the device's sm_XY as XY, for NVRTC */
    char *f4;           /* per node: has a float RGBA device image */
    int *fused;         /* per unit: runs as one NVRTC kernel */
    pf_fuse_unit *fio;  /* per unit: a fused unit's inputs and outputs */
    size_t *fio_off;    /* per unit: index of its first descriptor in the desc area */
    fused_kernel *kern; /* per unit: PF_KERNEL_VARIANTS compiled variants */
    int *cur;           /* per unit: the variant this frame uses */
    int *in_fmt;        /* per pipeline input, then output: this frame's format codes */
    int *out_fmt;
    unsigned char *io_fmt;      /* the same as one key: inputs, then outputs (0 for tables) */
    unsigned char *fmt_scratch; /* a unit's native formats while looking up its variant */
    int n_streams;
    int launches;
    int graph_failed; /* capture failed once: eager from then on */
    /* offsets into each slot's pools */
    size_t dev_size, host_size;
    size_t *img_off;                /* per node: device image, or SIZE_MAX */
    size_t *param_off;              /* per node: in the parameter block */
    size_t params_off, params_size; /* device block; the same offset in the pinned pool */
    size_t desc_count;              /* frame descriptors: inputs, outputs, then fused units' IO */
    size_t desc_off; /* device frame descriptors (inputs, then outputs); pinned too */
    size_t *in_dev_off, *in_host_off, *in_bytes;    /* per input: native staging */
    size_t *out_dev_off, *out_host_off, *out_bytes; /* per output */
    size_t *scratch_off;                            /* per unit */
    size_t *scratch_size;                           /* per unit */
    size_t *partial_off, *partial_host_off;         /* per node, reduce */
    size_t *pitch;                                  /* per node image pitch */
    int next_slot;
    /* Host frames: uploads and downloads of every slot run on these two streams, apart
       from the kernels (each slot's streams), ordered by the slots' events, so that the
       copies both ways and the kernels of consecutive frames overlap. */
    cudaStream_t up, down;
    int max_timed;                /* launches one frame makes, all of which may be timed */
    unsigned long frames_planned; /* frames submitted on this plan */
    int measure_frames;           /* frames still to time after planning */
    cuda_slot slots[PF_MAX_SLOTS];
};

static size_t align_dev(size_t v)
{
    return (v + PF_DEV_ALIGN - 1) & ~(size_t)(PF_DEV_ALIGN - 1);
}

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
                    rd[rs[src] + fill[src]++] = plan->unit_of[i];
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
        int u = i < p->n_inputs ? -1 : plan->unit_of[i];
        if (!c->f4[i])
            continue;
        size_t need = c->pitch[i] * (size_t)plan->shapes[i].height;
        int pick = -1;
        const int *row = u >= 0 ? clock + (size_t)u * ns : NULL;
        for (int b = 0; b < nb && u >= 0; b++) {
            int old = bnode[b];
            if (cap[b] < need || (pick >= 0 && cap[b] >= cap[pick]))
                continue;
            int ou = old < p->n_inputs ? -1 : plan->unit_of[old];
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

/* Bytes of the largest frame format (f32 RGBA) for a shape: staging is sized for it. */
static size_t max_frame_bytes(pf_shape s)
{
    return (size_t)s.width * 16 * (size_t)s.height;
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
    ALLOC_OFFS(partial_host_off, nn)
#undef ALLOC_OFFS
    size_t dev = 0, host = 0;
    /* First in both pools, at the same offsets: the parameter block (every stage's
       struct, 16-byte aligned) and the frame descriptors, so one copy refreshes both. */
    c->params_size = pf_param_layout(p, c->param_off);
    size_t n_desc = (size_t)(ni + no);
    for (int u = 0; u < nu; u++) {
        c->fio_off[u] = n_desc;
        if (c->fused[u])
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
    for (int u = 0; u < nu; u++) {
        const pf_unit *un = &plan->units[u];
        c->scratch_off[u] = SIZE_MAX;
        size_t s = scratch_need(p, u);
        if (s) {
            c->scratch_off[u] = take(&dev, s);
            c->scratch_size[u] = s;
        }
        if (un->kind == PF_UNIT_REDUCE) {
            size_t bytes = sizeof(double) * (un->partial_len ? un->partial_len : 1) *
                           (size_t)(un->bands > 0 ? un->bands : 1);
            c->partial_off[un->nodes[0]] = take(&dev, bytes);
            c->partial_host_off[un->nodes[0]] = take(&host, bytes);
        }
    }
    c->dev_size = align_dev(dev);
    c->host_size = align_dev(host);
    return PF_OK;
}

/* Kernel launches one frame takes: conversions in and out, and every stage. */
static int needs_convert_out(const pf_pipeline *p, const pf_cuda_plan *c, int o)
{
    int node = p->outputs[o].node;
    if (p->tables[node].data)
        return 0;
    return node < p->n_inputs || !c->fused[p->plan->unit_of[node]];
}

static int count_launches(const pf_pipeline *p, const pf_cuda_plan *c)
{
    const pf_plan *plan = p->plan;
    int n = 0;
    for (int i = 0; i < p->n_inputs; i++)
        n += c->f4[i];
    for (int u = 0; u < plan->n_units; u++)
        n += (c->fused[u] ? 1 : plan->units[u].n_nodes) * plan->units[u].bands;
    for (int o = 0; o < p->n_outputs; o++)
        n += needs_convert_out(p, c, o);
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
        free(sl->dev_desc);
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
    sl->dev_desc = malloc(sizeof(pf_frame_desc) * c->desc_count + 1);
    if (!sl->streams || !sl->joined || !sl->unit_done || !sl->key[0] || !sl->key[1] || !sl->out ||
        !sl->direct_out || !sl->dev_desc)
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
    err = cudaHostAlloc((void **)&sl->host, c->host_size, cudaHostAllocDefault);
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
    char why[512] = "";
    int nvrtc = pf_nvrtc_available(why, sizeof why);
    for (int u = 0; u < nu; u++) {
        char w[512] = "";
        if (plan->units[u].kind != PF_UNIT_POINT)
            continue;
        if (!pf_fuse_possible(p, u, w, sizeof w) || !nvrtc) {
            if (!why[0] && w[0])
                snprintf(why, sizeof why, "%s", w);
            continue;
        }
        c->fused[u] = 1;
    }
    for (int u = 0; u < nu; u++)
        if (plan->units[u].kind == PF_UNIT_POINT && !c->fused[u] && p->opts.fusion &&
            !p->notified_unfused) {
            pf_log(p->eng, 0, "%s: point stages run as separate kernels: %s", p->source, why);
            p->notified_unfused = 1;
        }
    pf_fuse_buffers(p, c->fused, c->f4);
    /* IO lists with placeholder formats: their length does not depend on formats. */
    for (size_t i = 0; i < n_io; i++)
        c->in_fmt[i] = c->out_fmt[i] = pf_format_code(PF_U8, 4);
    for (int u = 0; u < nu; u++)
        if (c->fused[u] && pf_fuse_unit_io(p, u, c->f4, c->in_fmt, c->out_fmt, &c->fio[u]) != 0)
            c->fused[u] = 0; /* too many edges for one kernel */
    pf_fuse_buffers(p, c->fused, c->f4);
    return PF_OK;
}

int pf_cuda_plan_build(pf_pipeline *p, pf_cuda_plan **out)
{
    char why[512];
    *out = NULL;
    if (fail_if_lost(p) != PF_OK)
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
        rc = cuda_fail(p, cudaGetLastError(), "cudaStreamCreateWithFlags", __FILE__, __LINE__);
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
    return c && u >= 0 && u < c->n_units && c->scratch_size[u] >= scratch_need(p, u);
}

int pf_cuda_busy(const pf_cuda_plan *c)
{
    for (int s = 0; c && s < c->n_slots; s++)
        if (c->slots[s].busy)
            return 1;
    return 0;
}

static int finish(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl);

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
        int frc = fail_if_lost(p) != PF_OK ? PF_CUDA : finish(p, c, first);
        first->busy = 0;
        if (rc == PF_OK)
            rc = frc;
    }
}

/* ---- Recording a frame ------------------------------------------------------------------------------ */

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

/* One unit, band by band: each band is a launch of its own, and so its own watchdog
   window, inside the graph as outside. */
static int run_unit(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int u, cudaStream_t st)
{
    const pf_plan *plan = p->plan;
    const pf_unit *un = &plan->units[u];
    int bands = un->bands > 0 ? un->bands : 1;
    if (c->fused[u]) {
        const fused_kernel *k = &c->kern[u * PF_KERNEL_VARIANTS + c->cur[u]];
        char err[512];
        nvtxRangePushA(un->ids[0]);
        int rc = PF_OK;
        for (int b = 0; b < bands && rc == PF_OK; b++) {
            int y0, y1;
            band_rows(un->shape.height, b, bands, &y0, &y1);
            rc = timed(p, c, sl, u, st, 1);
            if (rc == PF_OK)
                rc = pf_fuse_launch(k->function, &c->fio[u], un->shape.width, un->shape.height, y0,
                                    y1, sl->host + c->params_off + c->fio[u].param_lo,
                                    sl->dev + c->params_off,
                                    sl->dev + c->desc_off + sizeof(pf_frame_desc) * c->fio_off[u],
                                    st, err, sizeof err);
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
   The slot's previous frame was waited for, so nothing still reads the block. */
static int upload_params(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, cudaStream_t st)
{
    size_t desc_bytes = sizeof(pf_frame_desc) * c->desc_count;
    const unsigned char *h_desc = sl->host + c->desc_off;
    if (sl->dev_valid && sl->dev_param_version == sl->param_version &&
        memcmp(sl->dev_desc, h_desc, desc_bytes) == 0)
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
static int record(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device, cudaStream_t s0)
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
        if (needs_convert_out(p, c, o))
            CU(p, (cudaError_t)pf_cuda_image_to_frame(dev_image(c, sl, plan, node), &d_desc[ni + o],
                                                      s0));
    }
    return PF_OK;
}

/* The kernel nodes of a captured graph that launch a fused unit taking its parameters
   by value, into sl->pnodes[device] with their units. */
static int find_param_nodes(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device,
                            cudaGraph_t graph)
{
    sl->n_pnodes[device] = 0;
    size_t n = 0;
    CU(p, cudaGraphGetNodes(graph, NULL, &n));
    int any = 0;
    for (int u = 0; u < c->n_units && !any; u++)
        any = c->fused[u] && c->fio[u].param_arg;
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
            if (!c->fused[u] || !c->fio[u].param_arg ||
                c->kern[u * PF_KERNEL_VARIANTS + c->cur[u]].function != fn)
                continue;
            keep[sl->n_pnodes[device]] = nodes[i];
            units[sl->n_pnodes[device]++] = u;
            break;
        }
    }
    free(nodes);
    if (err != cudaSuccess)
        return cuda_fail(p, err, "cudaGraphGetNodes", __FILE__, __LINE__);
    return PF_OK;
}

/* Brings the by-value parameters of sl->exec[device]'s fused kernel nodes to the slot's
   pinned parameter block, after a parameter changed: no capture, no instantiation. */
static int update_param_nodes(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device)
{
    if (sl->exec_param_version[device] == sl->param_version)
        return PF_OK;
    for (int i = 0; i < sl->n_pnodes[device]; i++) {
        const pf_fuse_unit *io = &c->fio[sl->pnode_unit[device][i]];
        char err[512];
        if (pf_fuse_node_set_params(sl->exec[device], sl->pnodes[device][i],
                                    sl->host + c->params_off + io->param_lo, err,
                                    sizeof err) != PF_OK) {
            pf_errf(p->errmsg, "%s: %s", p->source, err);
            return PF_CUDA;
        }
    }
    sl->exec_param_version[device] = sl->param_version;
    return PF_OK;
}

/* Captures the frame into sl->exec[mode], updating an existing exec in place when the
   topology allows (cudaGraphExecUpdate) and instantiating only otherwise. */
static int capture(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device)
{
    cudaStream_t s0 = sl->streams[0];
    CU(p, cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
    int rc = record(p, c, sl, device, s0);
    cudaGraph_t graph = NULL;
    cudaError_t end = cudaStreamEndCapture(s0, &graph);
    if (rc != PF_OK || end != cudaSuccess) {
        if (graph)
            cudaGraphDestroy(graph);
        cudaGetLastError();
        if (rc == PF_OK)
            return cuda_fail(p, end, "cudaStreamEndCapture", __FILE__, __LINE__);
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
        return cuda_fail(p, err, "cudaGraphInstantiate", __FILE__, __LINE__);
    }
    sl->exec_param_version[device] = sl->param_version; /* captured with these */
    return PF_OK;
}

/* ---- Submit and wait ----------------------------------------------------------------------------------- */

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
        if (pf_hostmem_pinned(f->data, pf_frame_span(f))) {
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
        sl->direct_out[o] = (char)pf_hostmem_pinned(f->data, pf_frame_span(f));
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
        return cuda_fail(p, err, "frame", "(asynchronous error)", 0);
    pf_plan *plan = p->plan;
    if (sl->measuring)
        take_measurements(p, c, sl);
    const pf_frame_desc *h_desc = (const pf_frame_desc *)(sl->host + c->desc_off);
    for (int o = 0; o < p->n_outputs; o++) {
        int node = p->outputs[o].node;
        if (p->tables[node].data) {
            const pf_node *n = &p->nodes[node];
            const pf_unit *un = &plan->units[plan->unit_of[node]];
            n->desc->combine(n->params, &un->shape,
                             (const double *)(sl->host + c->partial_host_off[node]), un->bands,
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
    return PF_OK;
}

/* For every fused unit: the kernel variant for this frame's formats (generated and
   compiled on first sight, from the disk cache when it has it) and its descriptors:
   pipeline inputs and outputs as this frame has them, float images of this slot. */
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

static int prepare_fused(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, pf_frame_desc *h_desc)
{
    int ni = p->n_inputs, no = p->n_outputs;
    int *in_fmt = c->in_fmt, *out_fmt = c->out_fmt;
    for (int i = 0; i < ni; i++)
        in_fmt[i] = pf_format_code(h_desc[i].sample, h_desc[i].channels);
    for (int o = 0; o < no; o++)
        out_fmt[o] = pf_format_code(h_desc[ni + o].sample, h_desc[ni + o].channels);
    for (int u = 0; u < c->n_units; u++) {
        if (!c->fused[u])
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
                char name[64], err[512];
                snprintf(name, sizeof name, "pf_fused_u%d", u);
                rc = pf_fuse_load(cubin, name, &kv[v].module, &kv[v].function, err, sizeof err);
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
        }
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

int pf_cuda_submit(pf_pipeline *p, pf_cuda_plan *c, const pf_frame *in, pf_frame *const *out,
                   int device, void *stream, int *ticket)
{
    if (fail_if_lost(p) != PF_OK)
        return PF_CUDA;
    pf_plan *plan = p->plan;
    cuda_slot *sl = &c->slots[c->next_slot];
    if (sl->busy) {
        if (!device) {
            pf_errf(p->errmsg,
                    "%s: %d frames are in flight: wait for ticket %d before submitting more",
                    p->source, c->n_slots, sl->ticket);
            return PF_UNSUPPORTED;
        }
        /* Device frames may be fire-and-forget: retire the slot's previous frame. */
        int rc = finish(p, c, sl);
        if (rc != PF_OK)
            return rc;
    }
    nvtxRangePushA("pipefuse frame");
    int ni = p->n_inputs, no = p->n_outputs;
    /* Refresh the pinned parameter block (only after a change: with a thousand stages
       the copy is the host's largest cost per frame) and the frame descriptors. */
    if (!sl->params_copied || sl->param_version != p->param_version) {
        for (int i = ni; i < p->n_nodes; i++)
            memcpy(sl->host + c->params_off + c->param_off[i], p->nodes[i].params,
                   p->nodes[i].desc->params_size);
        sl->param_version = p->param_version;
        sl->params_copied = 1;
    }
    pf_frame_desc *h_desc = (pf_frame_desc *)(sl->host + c->desc_off);
    unsigned char *key = c->io_fmt; /* formats decide the kernel variants a graph holds */
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
        if (device)
            fill_desc(&h_desc[ni + o], out[o]->data, out[o]->pitch, out[o]);
        else
            fill_desc(&h_desc[ni + o], sl->dev + c->out_dev_off[o], row, out[o]);
        key[ni + o] = (unsigned char)pf_format_code(out[o]->sample, out[o]->channels);
    }
    int rc = prepare_fused(p, c, sl, h_desc);
    if (rc != PF_OK) {
        nvtxRangePop();
        return rc;
    }

    cudaStream_t s0 = device ? (cudaStream_t)stream : sl->streams[0];
    /* The first frames after planning (and every frame when profiling) run eagerly
       with each launch timed: that is where band times are measured. */
    /* The plan's first frame is not timed: first launches include loading modules
       (CUDA loads them lazily), which would make every band look over budget. */
    sl->measuring = (c->measure_frames > 0 && c->frames_planned > 0) || p->opts.profile;
    sl->n_timed = 0;
    if (c->measure_frames > 0 && c->frames_planned > 0)
        c->measure_frames--;
    c->frames_planned++;
    int use_graph = p->opts.graph && !c->graph_failed && !sl->measuring;
    size_t n_io = (size_t)(ni + no);
    if (use_graph && (!sl->exec[device] || memcmp(sl->key[device], key, n_io) != 0)) {
        rc = capture(p, c, sl, device);
        if (rc == PF_OK) {
            memcpy(sl->key[device], key, n_io);
        } else if (rc == PF_CUDA) {
            pf_log(p->eng, 0, "%s: CUDA Graph capture failed (%s); running eagerly", p->source,
                   p->errmsg);
            c->graph_failed = 1;
            use_graph = 0;
            rc = PF_OK;
        }
    }
    if (rc == PF_OK && !device) {
        rc = upload(p, c, sl, in);
        if (rc == PF_OK && cudaStreamWaitEvent(s0, sl->up_done, 0) != cudaSuccess)
            rc = cuda_fail(p, cudaGetLastError(), "cudaStreamWaitEvent", __FILE__, __LINE__);
    }
    if (rc == PF_OK)
        rc = upload_params(p, c, sl, s0);
    if (rc == PF_OK && use_graph)
        rc = update_param_nodes(p, c, sl, device);
    if (rc == PF_OK && use_graph) {
        rc = cudaGraphLaunch(sl->exec[device], s0) == cudaSuccess
                 ? PF_OK
                 : cuda_fail(p, cudaGetLastError(), "cudaGraphLaunch", __FILE__, __LINE__);
        p->stats.graph_launches++;
    } else if (rc == PF_OK) {
        if (device) { /* eager work runs on our streams, ordered after the caller's */
            rc = cudaEventRecord(sl->start, s0) == cudaSuccess &&
                         cudaStreamWaitEvent(sl->streams[0], sl->start, 0) == cudaSuccess
                     ? PF_OK
                     : cuda_fail(p, cudaGetLastError(), "cudaStreamWaitEvent", __FILE__, __LINE__);
            if (rc == PF_OK)
                rc = record(p, c, sl, device, sl->streams[0]);
            if (rc == PF_OK && (cudaEventRecord(sl->done, sl->streams[0]) != cudaSuccess ||
                                cudaStreamWaitEvent(s0, sl->done, 0) != cudaSuccess))
                rc = cuda_fail(p, cudaGetLastError(), "cudaStreamWaitEvent", __FILE__, __LINE__);
        } else {
            rc = record(p, c, sl, device, s0);
        }
    }
    if (rc == PF_OK && !device)
        rc = download(p, c, sl, s0);
    else if (rc == PF_OK && cudaEventRecord(sl->done, s0) != cudaSuccess)
        rc = cuda_fail(p, cudaGetLastError(), "cudaEventRecord", __FILE__, __LINE__);
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
    if (fail_if_lost(p) != PF_OK)
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
