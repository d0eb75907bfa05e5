/* engine/executor.h: the one interface every executor implements. An executor carries
 * out the pipeline's plan (p->plan, pure data); whatever it needs to do so (host
 * buffers and scratch for the CPU; device pools, streams, graphs for CUDA) is its own
 * state, made for a plan and released with it. executor.c holds the table of executors
 * and chooses one for each plan, in one place. */
#ifndef PF_EXECUTOR_H
#define PF_EXECUTOR_H

#include "plan.h"

typedef struct pf_executor {
    /* Its buffers live on the device: the memory limit counts device and pinned bytes,
       and the cost model uses the device's measured bandwidth. */
    int device;
    /* pf_stats.backend while it holds the plan. */
    const char *(*name)(const pf_pipeline *p);
    /* Makes the state for p->plan into *state (set even on failure, for release).
       Errors in p->errmsg. */
    int (*plan)(pf_pipeline *p, void **state);
    /* One frame: host frames (device 0) or device frames on the caller's stream. The
       outputs are checked against the plan; NULL ones are not wanted. */
    int (*submit)(pf_pipeline *p, void *state, const pf_frame *in, pf_frame *const *out, int device,
                  void *stream, int *ticket);
    /* Completes a ticket's frame: timeout_ms < 0 waits, 0 polls, > 0 waits at most that
       long (PF_NOT_READY while in flight). */
    int (*wait)(pf_pipeline *p, void *state, int ticket, int timeout_ms);
    /* Completes every frame in flight, as waits would, before the plan goes. */
    int (*drain)(pf_pipeline *p, void *state);
    /* Whether a frame is in flight. */
    int (*busy)(const void *state);
    /* Kernel launches (or CPU unit runs) one frame takes. */
    int (*launches)(const pf_pipeline *p, const void *state);
    /* Whether unit u's state still holds what its stage asks for with the current
       params (so a parameter change needs no new plan). */
    int (*params_fit)(const pf_pipeline *p, const void *state, int u);
    /* Frees the state (NULL: nothing); a frame still in flight finishes first. */
    void (*release)(pf_pipeline *p, void *state);
} pf_executor;

extern const pf_executor pf_executor_cpu;

/* The CPU executor's queue (pf_pipeline_submit_async): runs the frame on the plan's own
   thread and returns; its wait completes it. Frames checked as for submit. */
int pf_cpu_queue(pf_pipeline *p, void *state, const pf_frame *in, pf_frame *const *out,
                 int *ticket);
/* Runs strip s of a strip plan (plan->strip_rows) on the CPU, now: frames of the whole
   image's height whose rows of the strip are the caller's (exec_cpu.h, pf_cpu_run). */
int pf_cpu_strip(pf_pipeline *p, void *state, int s, const pf_frame *in, pf_frame *const *out);
/* Lets a queued CPU frame complete (its status kept for its wait), so that the calling
   thread may change or read what the frame reads; nothing for other executors. */
void pf_pipeline_settle(pf_pipeline *p);
extern const pf_executor pf_executor_cuda;

/* Plans p for these input shapes on the executor its options and the machine call for
   (auto: CUDA when a device is usable and every used stage has a CUDA implementation,
   else the CPU with a one-line notice), replacing the current plan once its frames in
   flight are complete. Sets p->plan, p->exec, p->exec_state and p->tables. */
int pf_pipeline_replan(pf_pipeline *p, const pf_shape *inputs, int n_inputs);
/* Completes the frames in flight on the current plan (their outputs delivered), then
   frees it as pf_pipeline_free_plan does. The first error, if any. */
int pf_pipeline_drop_plan(pf_pipeline *p);
/* Frees the current plan and its executor state (frames in flight finish first but
   their outputs are not delivered). Its tables, when a frame completed on it, become
   p->kept_tables (the last completed frame's, for pf_pipeline_table); else they go. */
void pf_pipeline_free_plan(pf_pipeline *p);
/* A frame completed on the current plan and wrote p->tables: records the params it ran
   with beside them and frees the kept tables of an earlier plan. Every executor calls it
   where a frame's tables become its result (allocates nothing). */
void pf_pipeline_tables_done(pf_pipeline *p);
/* Frees p->kept_tables (pf_pipeline_destroy, after pf_pipeline_free_plan). */
void pf_pipeline_free_tables(pf_pipeline *p);

#endif
