/* tests/lib/gpu_frames.h: frames through the CUDA backend as an application hands them
 * in, host or device memory (pf_testlib_cuda). */
#ifndef PF_GPU_FRAMES_H
#define PF_GPU_FRAMES_H

#include "testutil.h"

/* A random w x h frame of (s, ch) whose rows are padded (4 bytes past each row of an
   integer format), so that no pitch is tight: integer samples uniform, float samples
   uniform in [lo, hi). malloc'd data (checked). */
pf_frame pf_test_frame_padded(pf_rng *r, int w, int h, pf_sample s, int ch, float lo, float hi);

/* One frame through p into out[0..n_out): outputs with data are poisoned first (0xA5
   bytes: NaN as float, 165 as a byte); table outputs (data NULL) pass as they are. From
   host frames (pf_pipeline_run), or with device set from copies in device memory on the
   legacy stream (pf_pipeline_submit_device, then wait; outputs copied back). Returns
   the run's status; the CUDA calls are CHECKed. At most 4 inputs and 4 outputs. */
int pf_test_run_frame(pf_pipeline *p, const pf_frame *in, int n_in, pf_frame *out, int n_out,
                      int device);

/* A GPU run's frame against the CPU executor's: integer samples within one code, floats
   within 1e-5 of max(|cpu|, 1), NaN where the CPU has NaN. Reports the first sample that
   is not (CHECKF, naming `what`, output `out`, pixel and channel); returns 1 then, else
   0. The same shape and format are assumed. */
int pf_test_frames_close(const pf_frame *cpu, const pf_frame *gpu, const char *what,
                         const char *out);

/* p's printed plan (pf_pipeline_print_plan) as a malloc'd string; NULL on failure. */
char *pf_test_plan_text(const pf_pipeline *p);

#endif
