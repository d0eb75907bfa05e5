/* engine/plan.h: the plan, pure data: what runs, in which order, on which stream, in
 * how many bands, into which buffers. The planner (plan.c) writes it from the IR and
 * the input shapes; executors (exec_cpu.c) only carry it out. */
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
    int *waits;              /* units on other streams this one waits for */
    int bands;               /* launches it is split into (watchdog); 1 unless split */
    double predicted_ms;     /* the cost model's time for the whole unit on the GPU */
    double measured_ms;      /* the last measured frame: all its launches (CUDA events) */
    double measured_band_ms; /* ... and its longest launch */
    double bytes;            /* bytes it moves per frame, as the cost model counts them */
    int cpu_band_rows;       /* rows per CPU task; fixed per shape, so results do not
                           depend on the number of threads */
    size_t scratch;          /* per-task scratch bytes (stencil/resample) */
    size_t partial_len;      /* reduce: doubles per band */
} pf_unit;

typedef struct pf_table_buf {
    double *data;
    int rows, cols;
} pf_table_buf;

struct pf_cuda_plan;

typedef struct pf_plan {
    int n_nodes;
    int cuda;                /* runs on the CUDA executor */
    struct pf_cuda_plan *cu; /* its state there (exec_cuda.c) */
    pf_shape *in_shapes;     /* planned input shapes (n_inputs) */
    pf_shape *shapes;        /* per node: image shape, or table cols x rows for reduce */
    int *unit_of;            /* per node: unit index, -1 for inputs and unused stages */
    int *stored;             /* per node: 1 when it has a whole-image buffer */
    int *cons_first;         /* consumers of node i: cons[cons_first[i] .. cons_first[i + 1]) */
    int *cons;               /* ... ascending, one entry per (consumer, input) edge */
    char *is_out;            /* per node: a pipeline output reads it */
    pf_image *buf;           /* per node buffer (stored nodes and inputs) */
    pf_table_buf *tables;    /* per node, reduce stages */
    double **partials;       /* per node, reduce stages: bands * partial_len */
    pf_unit *units;
    int n_units;
    int n_unfused_units; /* launch units the frame would take without fusion */
    int n_streams;
    double budget_ms; /* watchdog budget per launch; 0: no splitting */
    double bandwidth; /* bytes/s the cost model assumes (measured on the device) */
    int bandwidth_measured;
    /* CPU executor scratch, per worker thread */
    int workers;
    size_t worker_scratch;          /* bytes per worker */
    unsigned char *scratch;         /* workers * worker_scratch */
    unsigned long long allocations; /* allocations made for this plan */
    int chunk;                      /* pixels per point-chain chunk */
    size_t bytes_allocated;
} pf_plan;

/* Plans p for input shapes, for the CUDA executor when cuda is set; replaces p->plan.
   Errors in p->errmsg. */
int pf_plan_build(pf_pipeline *p, const pf_shape *in, int n_in, int cuda);
void pf_plan_free(pf_plan *plan);
/* pf_pipeline_memory: the buffers a plan for these shapes needs, nothing allocated. */
int pf_plan_memory(pf_pipeline *p, const pf_shape *inputs, int n_inputs, pf_memory *m);

/* Runs one frame on the CPU: converts inputs (one frame per pipeline input) into the
   input buffers, runs every unit, converts image outputs into outputs[o] (NULL: not
   wanted). Frames are checked against the plan by the caller. */
int pf_exec_cpu_frame(pf_pipeline *p, const pf_frame *inputs, pf_frame *const *outputs);

#endif
