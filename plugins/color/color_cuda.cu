/* plugins/color/color_cuda.cu: the color family's precompiled one-stage kernels, from
 * the same op header as the CPU rows and the NVRTC source. */
#include "pipefuse/cuda.cuh"

#include "color_ops.h"

PF_POINT_CUDA(color_brightness, color_amount_params)
PF_POINT_CUDA(color_contrast, color_contrast_params)
PF_POINT_CUDA(color_gamma, color_gamma_params)
PF_POINT_CUDA(color_invert, color_invert_params)
PF_POINT_CUDA(color_grayscale, color_amount_params)
PF_POINT_CUDA(color_threshold, color_threshold_params)
PF_POINT_CUDA(color_saturation, color_amount_params)
PF_POINT_CUDA(color_levels, color_levels_params)
PF_POINT_CUDA(color_linear, color_linear_params)
PF_POINT_CUDA(color_gains, color_gains_params)
PF_POINT_CUDA(color_matrix, color_matrix_params)
PF_POINT_CUDA(color_vignette, color_vignette_params)
