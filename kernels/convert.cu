/* kernels/convert.cu: see convert.h. One thread per pixel; a row of threads reads a
 * row of the frame, so loads coalesce for every format. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "convert.h"
#include "edge.h"

#define CEIL_DIV(a, b) (((a) + (b)-1) / (b))

/* The per-sample rules are kernels/edge.h's, the same as the CPU's and the fused
   kernels'. */
static __device__ __forceinline__ float load_sample(const char *row, int sample, int i)
{
    if (sample == 0)
        return pf_code_to_float((float)((const uint8_t *)row)[i], 255.0f);
    if (sample == 1)
        return pf_code_to_float((float)((const uint16_t *)row)[i], 65535.0f);
    return ((const float *)row)[i];
}

static __device__ __forceinline__ void store_sample(char *row, int sample, int i, float v)
{
    if (sample == 0)
        ((uint8_t *)row)[i] = (uint8_t)pf_float_to_code(v, 255u);
    else if (sample == 1)
        ((uint16_t *)row)[i] = (uint16_t)pf_float_to_code(v, 65535u);
    else
        ((float *)row)[i] = v;
}

__global__ void pf_frame_to_image_kernel(const pf_frame_desc *__restrict__ d, pf_image out)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= out.width || y >= out.height)
        return;
    const char *row = (const char *)d->data + (size_t)y * d->pitch;
    int c = d->channels, s = d->sample, i = x * c;
    float4 v;
    if (c <= 2) {
        v = pf_gray_pixel(load_sample(row, s, i), c == 2 ? load_sample(row, s, i + 1) : 1.0f);
    } else {
        v.x = load_sample(row, s, i);
        v.y = load_sample(row, s, i + 1);
        v.z = load_sample(row, s, i + 2);
        v.w = c == 4 ? load_sample(row, s, i + 3) : 1.0f;
    }
    ((float4 *)((char *)out.data + (size_t)y * out.pitch))[x] = v;
}

__global__ void pf_image_to_frame_kernel(pf_image in, const pf_frame_desc *__restrict__ d)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= in.width || y >= in.height)
        return;
    float4 v = ((const float4 *)((const char *)in.data + (size_t)y * in.pitch))[x];
    char *row = (char *)d->data + (size_t)y * d->pitch;
    int c = d->channels, s = d->sample, i = x * c;
    if (c <= 2) {
        store_sample(row, s, i, pf_luma_rn(v));
        if (c == 2)
            store_sample(row, s, i + 1, v.w);
    } else {
        store_sample(row, s, i, v.x);
        store_sample(row, s, i + 1, v.y);
        store_sample(row, s, i + 2, v.z);
        if (c == 4)
            store_sample(row, s, i + 3, v.w);
    }
}

extern "C" int pf_cuda_frame_to_image(const pf_frame_desc *desc, pf_image out, void *stream)
{
    dim3 block(256), grid(CEIL_DIV(out.width, 256), out.height);
    pf_frame_to_image_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(desc, out);
    return (int)cudaGetLastError();
}

extern "C" int pf_cuda_image_to_frame(pf_image in, const pf_frame_desc *desc, void *stream)
{
    dim3 block(256), grid(CEIL_DIV(in.width, 256), in.height);
    pf_image_to_frame_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(in, desc);
    return (int)cudaGetLastError();
}

extern "C" int pf_cuda_probe_image(void)
{
    cudaFuncAttributes attr;
    return (int)cudaFuncGetAttributes(&attr, pf_frame_to_image_kernel);
}
