/* plugins/composite/composite_cuda.cu: the composite family's precompiled one-stage
 * kernels, from the same op header as the CPU rows and the NVRTC source. */
#include "pipefuse/cuda.cuh"

#include "composite_ops.h"

PF_POINT_CUDA(composite_blend, composite_blend_params)
PF_POINT_CUDA(composite_add, composite_add_params)
PF_POINT_CUDA(composite_multiply, composite_none_params)
PF_POINT_CUDA(composite_difference, composite_none_params)
PF_POINT_CUDA(composite_alpha_over, composite_none_params)
PF_POINT_CUDA(composite_mask, composite_mask_params)
