/* engine/plan.h: the plan, pure data: what runs, in which order, on which stream, in
 * how many bands, in buffers of which sizes. The planner (plan.c) writes it from the
 * IR and the input shapes; executors (executor.h) only carry it out, with buffers and
 * state of their own. */
#ifndef PF_PLAN_H
#define PF_PLAN_H

#include "internal.h"

typedef struct pf_unit {
    pf_unit_kind kind;
    int n_nodes;
    int *nodes;       /* member nodes, in evaluation order */
    const char **ids; /* their ids, for pf_unit_info */
    int n_inputs;
    int *inputs; /* nodes outside the unit that it reads */
    int n_stores;
    int *stores;    /* members whose whole image is kept (read later or output) */
    int *member_in; /* point units: per member, PF_MAX_INPUTS sources: >= 0 is a
                           member index, < 0 is -(node + 1) of an outside buffer */
    int *slot;      /* point units: per member, its chunk buffer in the CPU scratch
                       (-1: a stored member, written to its image); a slot is reused
                       once the member last reading it has run */
    int n_slots;
    pf_shape shape; /* output shape (input shape for reduce) */
    int stream;
    int n_waits;
    int *waits;          /* units on other streams this one waits for */
    int bands;           /* launches it is split into (watchdog); 1 unless split */
    double predicted_ms; /* the cost model's time for the whole unit on the GPU */
    double bytes;        /* bytes it moves per frame, as the cost model counts them */
    int cpu_band_rows;   /* rows per CPU task; fixed per shape, so results do not
                           depend on the number of threads */
    size_t scratch;      /* per-task scratch bytes (stencil/resample) */
    size_t partial_len;  /* reduce: doubles per band */
} pf_unit;

#define PF_CPU_CHUNK 256 /* pixels per point-chain step on the CPU: stays in L1/L2 */
#define PF_ALIGN     64  /* host buffers, rows and scratch */

static inline size_t pf_align_up(size_t v)
{
    return (v + PF_ALIGN - 1) & ~(size_t)(PF_ALIGN - 1);
}

typedef struct pf_plan {
    int n_nodes;
    int device;          /* planned for an executor whose buffers are on the device */
    pf_shape *in_shapes; /* planned input shapes (n_inputs) */
    pf_shape *shapes;    /* per node: image shape, or table cols x rows for reduce */
    int *unit_of;        /* per node: unit index, -1 for inputs and unused stages */
    int *stored;         /* per node: 1 when it has a whole-image buffer */
    int *cons_first;     /* consumers of node i: cons[cons_first[i] .. cons_first[i + 1]) */
    int *cons;           /* ... ascending, one entry per (consumer, input) edge */
    char *is_out;        /* per node: a pipeline output reads it */
    pf_unit *units;
    int n_units;
    int n_unfused_units; /* launch units the frame would take without fusion */
    int n_streams;
    /* Strips (strip.c, pipefuse/bands.h): the image outputs, all out_height rows tall,
       run strip_rows rows at a time, strip s on rows [s strip_rows, (s + 1) strip_rows)
       of them; every node holds only a window of its rows, win[s * n_nodes + i] for
       node i in strip s (empty: lo == hi), its buffer win_rows[i] rows tall. A point
       unit's members share one window. strip_rows 0: whole frames. */
    int strip_rows, n_strips, out_height;
    pf_region *win;
    int *win_rows;
    double budget_ms; /* watchdog budget per launch; 0: no splitting */
    double bandwidth; /* bytes/s the cost model assumes (measured on the device) */
    int bandwidth_measured;
} pf_plan;

/* Plans p for input shapes into *out, for an executor whose buffers are on the device
   when device is set; checks the max_memory option against what the plan needs.
   With p->strip_rows, plans strips of that many output rows (the CPU's only).
   Errors in p->errmsg. Allocates no buffer. */
int pf_plan_build(pf_pipeline *p, const pf_shape *in, int n_in, int device, pf_plan **out);
/* strip.c: the windows of plan's strips of `rows` output rows (plan->win and its
   fields), after its units are made; PF_UNSUPPORTED with the reason in p->errmsg when p
   cannot run in strips, PF_NO_MEMORY. */
int pf_plan_strips(pf_pipeline *p, pf_plan *plan, int rows);
/* The window of node i in strip s (its whole image without strips). */
static inline pf_region pf_plan_window(const pf_plan *plan, int s, int i)
{
    if (!plan->strip_rows)
        return (pf_region){0, plan->shapes[i].height};
    return plan->win[(size_t)s * (size_t)plan->n_nodes + (size_t)i];
}
void pf_plan_free(pf_plan *plan);
/* The CPU executor's whole float images (every pipeline input and stored node), shared
   between nodes whose lives do not overlap: units run one at a time in plan order, so a
   buffer last read by unit r is free for what units after r store; inputs are written
   before the first unit, outputs read after the last. buf_of[i] is node i's buffer (-1:
   none) and bytes[b] buffer b's size, both of p->n_nodes entries. Returns the number of
   buffers, or -1 out of memory. */
int pf_plan_host_buffers(const pf_pipeline *p, const pf_plan *plan, int *buf_of, size_t *bytes);
/* pf_pipeline_memory: the buffers a plan for these shapes needs, nothing allocated. */
int pf_plan_memory(pf_pipeline *p, const pf_shape *inputs, int n_inputs, pf_memory *m);

/* ---- The plan as text (plan_print.c) ---- */

/* Fusion as the CUDA executor would do it, for prints and builds ahead: every unit that
   can fuse does (fused), the nodes that keep a float image (f4), and a format code per
   pipeline input (fmt) and image output (fmt_out), set by pf_fusion_view_formats (made
   for 8-bit RGBA inputs). */
typedef struct pf_fusion_view {
    int *fused;
    char *f4;
    pf_format fmt[PF_MAX_FRAMES], fmt_out[PF_MAX_FRAMES];
} pf_fusion_view;
int pf_fusion_view_make(const pf_pipeline *p, pf_fusion_view *v);
/* Inputs of this format, and outputs as `pipefuse run` writes them: the format the
   pipeline declares, else the input's sample with the channels the stages need
   (pf_pipeline_output_channels). */
void pf_fusion_view_formats(const pf_pipeline *p, pf_fusion_view *v, pf_sample sample,
                            int channels);
void pf_fusion_view_free(pf_fusion_view *v);
/* p's plan as `pipefuse check` prints it, and as Graphviz: PF_OK, PF_NOT_PLANNED, PF_IO
   (a write failed) or PF_NO_MEMORY. */
int pf_plan_print(const pf_pipeline *p, FILE *f);
int pf_plan_print_dot(const pf_pipeline *p, FILE *f);

#endif
