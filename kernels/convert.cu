/* kernels/convert.cu: see convert.h. One thread per pixel; a row of threads reads a
 * row of the frame, so loads coalesce for every format. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "convert.h"

#define CEIL_DIV(a, b) (((a) + (b)-1) / (b))

/* v / d correctly rounded for the integers v in [0, d], d = 255 or 65535: the same
   three instructions as fused_rt.h's pf_div_code (see there why they are exact). */
static __device__ __forceinline__ float pf_div_code(float v, float d, float r)
{
    float q = __fmul_rn(v, r);
    return __fmaf_rn(__fmaf_rn(-q, d, v), r, q);
}

static __device__ __forceinline__ float load_sample(const char *row, int sample, int i)
{
    /* v / max correctly rounded, as the CPU (see pf_div_code in fused_rt.h) */
    if (sample == 0)
        return pf_div_code((float)((const uint8_t *)row)[i], 255.0f, 1.0f / 255.0f);
    if (sample == 1)
        return pf_div_code((float)((const uint16_t *)row)[i], 65535.0f, 1.0f / 65535.0f);
    return ((const float *)row)[i];
}

static __device__ __forceinline__ void store_sample(char *row, int sample, int i, float v)
{
    if (sample == 0) {
        float t = __fadd_rn(__fmul_rn(v, 255.0f), 0.5f); /* no FMA: round as the CPU does */
        ((uint8_t *)row)[i] = (uint8_t)(t >= 255.0f ? 255 : (t > 0.0f ? (int)t : 0));
    } else if (sample == 1) {
        float t = __fadd_rn(__fmul_rn(v, 65535.0f), 0.5f);
        ((uint16_t *)row)[i] = (uint16_t)(t >= 65535.0f ? 65535 : (t > 0.0f ? (int)t : 0));
    } else {
        ((float *)row)[i] = v;
    }
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
        v.x = v.y = v.z = load_sample(row, s, i);
        v.w = c == 2 ? load_sample(row, s, i + 1) : 1.0f;
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
        /* pf_luma rounded as the CPU computes it: exactly g for gray pixels */
        float luma = __fadd_rn(__fadd_rn(v.y, __fmul_rn(0.2126f, __fsub_rn(v.x, v.y))),
                               __fmul_rn(0.0722f, __fsub_rn(v.z, v.y)));
        store_sample(row, s, i, luma);
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
