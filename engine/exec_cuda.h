/* engine/exec_cuda.h: the CUDA executor. Without CUDA in the build every entry point
 * reports PF_NO_DEVICE, so the rest of the engine needs no #ifdef. */
#ifndef PF_EXEC_CUDA_H
#define PF_EXEC_CUDA_H

#include "plan.h"

/* Whether a usable device exists (initialised once per engine). 1 yes; 0 no, with
   the reason in why. */
int pf_cuda_available(pf_engine *e, char *why, size_t why_size);
void pf_cuda_engine_free(pf_engine *e);
/* Why cudaGetDeviceCount failed with err: no driver, a driver older than the runtime,
   or no device (query.c). */
void pf_cuda_explain_no_device(int err, char *why, size_t why_size);
/* After pf_cuda_available: device-to-device bandwidth in bytes/s (read + write,
   measured once), and whether the device has a kernel watchdog. */
double pf_cuda_bandwidth(const pf_engine *e);
/* After a sticky CUDA error (illegal address, watchdog timeout, ...): its message; the
   engine's GPU is unusable from then on and every CUDA call fails with it. NULL else. */
const char *pf_cuda_lost(const pf_engine *e);
int pf_cuda_watchdog(const pf_engine *e);
/* Multiprocessors of the device, probing it if need be; 0 without one. */
int pf_cuda_sm_count(pf_engine *e);
/* The device's compute capability as XY (90 for sm_90); 0 without a usable device. */
int pf_cuda_arch(pf_engine *e);

/* The executor's entry points, reached through pf_executor_cuda (executor.c). */
struct pf_cuda_plan;
/* Builds the CUDA state for p->plan into *out (streams, pools, pinned staging; graphs
   are made on first use); *out is set even on failure, for pf_cuda_plan_free. Errors
   in p->errmsg: PF_NO_DEVICE, PF_UNSUPPORTED (a stage without a CUDA implementation),
   PF_NO_MEMORY (device or pinned memory), PF_CUDA. */
int pf_cuda_plan_build(pf_pipeline *p, struct pf_cuda_plan **out);
void pf_cuda_plan_free(struct pf_cuda_plan *c);

/* One frame: host frames (stream NULL) or device frames on stream. */
int pf_cuda_submit(pf_pipeline *p, struct pf_cuda_plan *c, const pf_frame *in, pf_frame *const *out,
                   int device, void *stream, int *ticket);
/* Completes the frame of a ticket: timeout_ms < 0 waits for it, otherwise waits at most
   that long and returns PF_NOT_READY while it is still in flight. */
int pf_cuda_wait_for(pf_pipeline *p, struct pf_cuda_plan *c, int ticket, int timeout_ms);
/* Kernel launches one frame takes; whether any slot holds a frame in flight. */
int pf_cuda_launches(const struct pf_cuda_plan *c);
int pf_cuda_busy(const struct pf_cuda_plan *c);
/* Completes every frame in flight, oldest first, as pf_pipeline_wait would (outputs
   copied out, tables combined), before the plan goes: a wait on their tickets then
   returns PF_OK with the frames delivered. The first error, if any. */
int pf_cuda_drain(pf_pipeline *p, struct pf_cuda_plan *c);
/* Whether unit u's device scratch holds what its stage asks for with its current
   params (so a parameter change needs no new plan). */
int pf_cuda_scratch_fits(const pf_pipeline *p, const struct pf_cuda_plan *c, int u);

#endif
