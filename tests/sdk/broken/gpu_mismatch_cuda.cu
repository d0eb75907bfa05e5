/* tests/sdk/broken/gpu_mismatch_cuda.cu: the precompiled kernel of the mismatched op. */
#include "pipefuse/cuda.cuh"

#include "gpu_mismatch_ops.h"

PF_POINT_CUDA(mismatch_gain, mismatch_params)
