/* kernels/convert.h: the edge conversions on the GPU, between a frame in its own
 * format (u8/u16/f32, 1-4 channels) and the float RGBA working format, with the same
 * rules as the CPU (engine/frame.h). The frame is described by a pf_frame_desc that
 * lives in device memory and is refreshed every frame, so a captured CUDA Graph stays
 * valid when an application hands in different pointers. */
#ifndef PF_KERNELS_CONVERT_H
#define PF_KERNELS_CONVERT_H

#include "frame_desc.h"
#include "pipefuse/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launch on stream; 0 or a cudaError_t. desc is a device pointer. */
int pf_cuda_frame_to_image(const pf_frame_desc *desc, pf_image out, void *stream);
int pf_cuda_image_to_frame(pf_image in, const pf_frame_desc *desc, void *stream);
/* Whether this binary carries code the current device can run: 0, or a cudaError_t
   (cudaErrorNoKernelImageForDevice when it does not). */
int pf_cuda_probe_image(void);

#ifdef __cplusplus
}
#endif

#endif
