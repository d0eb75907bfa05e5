/* tests/sdk/broken/gpu_mismatch.c: the stage of gpu_mismatch_ops.h. Every CPU check
 * passes; CPU against GPU fails on a machine with a CUDA device. */
#include "gpu_mismatch_ops.h"
#include "pipefuse/plugin.h"

extern const char pf_src_gpu_mismatch_ops[];
PF_POINT_ROW(mismatch_gain, mismatch_params)
int mismatch_gain_cuda(const pf_stage_args *a);

static const pf_param_desc table[] = {
    {"gain", "factor on R, G and B (plus 0.25 on the GPU: the fault)",
     PF_OFFSET(mismatch_params, gain), PF_PARAM_FLOAT, .def = 1, .min = 0, .max = 4}};
static const pf_stage_desc gain = {
    PF_POINT_DESC(mismatch_gain, mismatch_params, pf_src_gpu_mismatch_ops),
    .point_cuda = PF_CUDA(mismatch_gain_cuda),
    .name = "sdk_gpu_mismatch",
    .doc = "RGB * gain on the CPU, RGB * (gain + 0.25) on the GPU",
    .n_inputs = 1,
    PF_PARAMS(table)};
static const pf_stage_desc *const stages[] = {&gain};
PF_DEFINE_PLUGIN("gpu_mismatch", "1.0", "CPU and GPU versions that disagree", stages)
