/* engine/cuda_internal.h: what the CUDA executor's files share (CUDA builds only):
 *   cuda_device.c  the device probe, its bandwidth, CUDA errors and the lost context;
 *   cuda_layout.c  plan time: fusion, the pools' layout, buffer reuse, frame slots;
 *   cuda_frame.c   a frame's kernels: units, recording, graph capture, fused variants;
 *   exec_cuda.c    the entry points: submit, wait, drain, host frame copies.
 * The device state, the plan with its slots and kernel variants, the CU() check, and
 * the functions one of these files calls in another. */
#ifndef PF_CUDA_INTERNAL_H
#define PF_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>

#include "exec_cuda.h"
#include "fuse.h"
#include "../kernels/convert.h"

/* The engine's device (pf_engine.cuda), probed once by pf_cuda_available. */
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

/* ---- Errors ---------------------------------------------------------------------------------- */

/* Checks a CUDA call; on failure writes "<source>: <call>: <error> at file:line" into
   p->errmsg and returns from the enclosing function with PF_CUDA (PF_NO_MEMORY for an
   allocation failure). */
#define CU(p, call)                                                                                \
    do {                                                                                           \
        cudaError_t cu_err_ = (call);                                                              \
        if (cu_err_ != cudaSuccess)                                                                \
            return pf_cu_fail((p), cu_err_, #call, __FILE__, __LINE__);                            \
    } while (0)

/* The error text for a failed call; a sticky error marks the engine's context lost.
   PF_NO_MEMORY for an allocation failure, PF_CUDA otherwise. */
int pf_cu_fail(pf_pipeline *p, cudaError_t err, const char *call, const char *file, int line);
/* PF_OK, or PF_CUDA with the reason in p->errmsg once the engine's context is lost. */
int pf_cu_fail_if_lost(pf_pipeline *p);

/* ---- The plan ------------------------------------------------------------------------------- */

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
    /* Per mode: the kernel nodes of fused units that take their parameters or
       descriptors by value, their units, the parameter version and the descriptors
       (desc_count of them) their arguments hold. */
    cudaGraphNode_t *pnodes[2];
    int *pnode_unit[2];
    int n_pnodes[2];
    unsigned long exec_param_version[2];
    unsigned char *exec_desc[2];
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
    char *staged_out;      /* device mode, per output: it overlaps an input, so the kernels
                              write the slot's staging, copied to it after them */
    cudaEvent_t up_done;   /* host mode: this frame's inputs are on the device */
    cudaEvent_t comp_done; /* host mode: its kernels are done (downloads may start) */
} cuda_slot;

#define PF_KERNEL_VARIANTS 4 /* compiled formats kept per fused unit */

typedef struct fused_kernel {
    unsigned char *fmts; /* formats of the unit's native inputs, then outputs; NULL: empty */
    void *module, *function;
    void *function_v; /* a separable unit's vertical pass (PF_FUSED_KERNEL_V), else NULL */
    int ppt; /* the pixels per thread it was generated for (a reduce's depend on formats) */
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
    size_t desc_off;    /* device frame descriptors (inputs, then outputs); pinned too */
    int desc_on_device; /* a kernel reads descriptors from the device block (not by value) */
    size_t *in_dev_off, *in_host_off, *in_bytes;    /* per input: native staging */
    size_t *out_dev_off, *out_host_off, *out_bytes; /* per output */
    size_t *scratch_off;                            /* per unit */
    size_t *scratch_size;                           /* per unit */
    size_t *partial_off, *partial_host_off;         /* per node, reduce */
    size_t *done_off, *done_bytes; /* per node, summing reduce kernel: its done counters */
    size_t *pitch;                 /* per node image pitch */
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

/* ---- Plan queries (cuda_layout.c) ------------------------------------------------------------- */

/* Whether output o is converted from a float image by its own kernel (not a table, not
   written by a fused unit). */
int pf_cu_needs_convert_out(const pf_pipeline *p, const pf_cuda_plan *c, int o);

/* ---- A frame's kernels (cuda_frame.c) --------------------------------------------------------- */

/* Picks (compiling if need be) each fused unit's variant for the formats in h_desc and
   fills the units' frame descriptors in h_desc. */
int pf_cu_prepare_fused(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, pf_frame_desc *h_desc);
/* Captures the frame into sl->exec[device] (updated in place when it can be). */
int pf_cu_capture(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device);
/* Issues the frame's kernels on s0 (and the slot's other streams). */
int pf_cu_record(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device, cudaStream_t s0);
/* Copies the parameter block and frame descriptors to the device when they changed. */
int pf_cu_upload_params(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, cudaStream_t st);
/* Brings the by-value parameters of sl->exec[device]'s fused kernel nodes up to date. */
int pf_cu_update_param_nodes(pf_pipeline *p, pf_cuda_plan *c, cuda_slot *sl, int device);

#endif
