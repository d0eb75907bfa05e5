/* engine/exec_cpu.h: the CPU executor's state for a plan and its entry points. The
 * state is allocated once per plan (exec_cpu_state.c), so a frame allocates nothing;
 * exec_cpu.c runs frames with it. */
#ifndef PF_EXEC_CPU_H
#define PF_EXEC_CPU_H

#include "plan.h"

typedef struct pf_cpu_state {
    int n_nodes;
    pf_image *buf;    /* per node: whole float images (inputs and stored nodes),
                                 pointing into pool */
    pf_float4 **base; /* per node: its buffer's first row; in strips buf[i].data is set
                         for each strip so that row y of the image is row y - (the
                         window's first) of the buffer (exec_cpu.c) */
    void **pool;      /* the images' memory, shared (pf_plan_host_buffers) */
    int n_pool;
    double **partials;          /* per node, reduce stages: bands * partial_len */
    double **bind_tables;       /* per node, reduce stages whose table binds params: the
                                 frame's table, combined as soon as the stage has run */
    unsigned long bound_serial; /* bumped when a bound param's value changes: the point
                                   units' tables (cpu_lut.c) are made again */
    int workers;                /* threads that may run tasks at once */
    size_t worker_scratch;      /* bytes per worker */
    unsigned char *scratch;     /* workers * worker_scratch */
    int chunk;                  /* pixels per point-chain chunk (PF_CPU_CHUNK) */
    struct pf_cpu_luts *luts;   /* point units' tables, made on first use (cpu_lut.c) */
    /* A frame's bookkeeping, made here so a frame allocates nothing (exec_cpu.c's job):
       per input, per node, and the inputs a table build stands in for. */
    char *direct_in;
    const pf_frame **direct_out;
    pf_frame *lut_inputs;
    unsigned long long allocations;
    size_t bytes; /* bytes allocated */
} pf_cpu_state;

/* Allocates the state p->plan needs on the CPU into *out (set even on failure, for
   pf_cpu_state_free). PF_NO_MEMORY without a message. */
int pf_cpu_state_make(const pf_pipeline *p, pf_cpu_state **out);
void pf_cpu_state_free(pf_cpu_state *st);

/* Runs one frame on the CPU: converts inputs (one frame per pipeline input) into the
   input buffers, runs every unit, converts image outputs into outputs[o] (NULL: not
   wanted) and combines tables into p->tables. Frames are checked against the plan by
   the caller. */
int pf_exec_cpu_frame(pf_pipeline *p, pf_cpu_state *st, const pf_frame *inputs,
                      pf_frame *const *outputs);

/* How a frame runs: pf_exec_cpu_frame runs one with err = p->errmsg, the cancel count
   p->cancels had at its start, unit_ms NULL and tables 1. A frame queued by
   pf_pipeline_submit_async runs on another thread than the pipeline's caller, so it
   writes only its outputs, the plan's buffers, err and unit_ms; its caller completes it
   (pf_exec_cpu_tables, the watchdog's times). */
typedef struct pf_cpu_run {
    char *err;        /* PF_ERRMSG_MAX bytes: the message of a failed frame */
    unsigned cancel0; /* p->cancels when the frame was submitted: a frame stops (PF_CANCELLED)
                        at its next cancel point once it differs */
    double *unit_ms;  /* per unit: the measured times; NULL: pf_watchdog_unit_ran at once */
    int tables;       /* combine the reduce units' partials into p->tables */
    int strip;        /* a strip plan (plan->strip_rows): the strip to run; inputs[i] and
                         outputs[o] are then frames of the whole image's height whose rows
                         of the strip's windows (inputs) and rows (outputs) are the
                         caller's memory (pf_pipeline_run_strip) */
} pf_cpu_run;
int pf_exec_cpu_run(pf_pipeline *p, pf_cpu_state *st, const pf_frame *inputs,
                    pf_frame *const *outputs, const pf_cpu_run *run);
/* Combines the reduce units' partials of the frame that ran last into p->tables. */
void pf_exec_cpu_tables(pf_pipeline *p, pf_cpu_state *st);

#endif
