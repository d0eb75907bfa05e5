/* kernels/frame_desc.h: a frame as the GPU's kernels find it, its one definition. The
 * CUDA executor fills these in pinned memory and copies them to the device; the edge
 * conversions (kernels/convert.cu, compiled by nvcc) and the fused kernels
 * (kernels/fused_rt.h, compiled by NVRTC, which gets this file as
 * "pipefuse/frame_desc.h") read them. The layout is fixed: 40 bytes, checked at compile
 * time on every side, so host C, nvcc and NVRTC cannot drift apart. */
#ifndef PF_FRAME_DESC_H
#define PF_FRAME_DESC_H

typedef struct pf_frame_desc {
    void *data;               /* first byte of row 0 */
    unsigned long long pitch; /* bytes from one row to the next */
    int width, height;
    int sample; /* pf_sample: 0 u8, 1 u16, 2 f32 */
    int channels;
    int pad[2];
} pf_frame_desc;

#ifdef __cplusplus
static_assert(sizeof(pf_frame_desc) == 40 && sizeof(void *) == 8,
              "pf_frame_desc is 40 bytes on every side");
#else
_Static_assert(sizeof(pf_frame_desc) == 40 && sizeof(void *) == 8,
               "pf_frame_desc is 40 bytes on every side");
#endif

#endif
