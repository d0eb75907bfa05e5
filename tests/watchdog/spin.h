/* tests/watchdog/spin.h: the spin plugin's CUDA launchers. */
#ifndef SPIN_H
#define SPIN_H

#include "pipefuse/plugin.h"
#include "spin_ops.h"

#ifdef __cplusplus
extern "C" {
#endif
int spin_point_cuda(const pf_stage_args *a);
int spin_stencil_cuda(const pf_stage_args *a);
int spin_resample_cuda(const pf_stage_args *a);
int spin_reduce_cuda(const pf_stage_args *a);
int spin_fault_cuda(const pf_stage_args *a);
#ifdef __cplusplus
}
#endif

#endif
