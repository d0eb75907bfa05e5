// bench/hand_chain.cu: the point chains of `gen_chain.py chain K`, fused by hand, as the
// ceiling for pipefuse's generated kernels on the same GPU.
//
// The same ops and parameters as the pipeline files (brightness +-0.01, contrast 1.01
// about 0.5, saturation 0.99 with Rec. 709 luma, linear 0.99 x + 0.005 on all four
// channels, cycling), on a 3840x2160 RGBA8 frame, written the way a CUDA programmer
// would write one chain by hand when exactness against a CPU reference does not matter:
// one 16-byte load of 4 pixels per step, 2 steps per thread (8 pixels), conversions by
// reciprocal multiply and __float2uint_rn, FMA contraction on (nvcc's default),
// parameters as compile-time constants. The results differ from pipefuse's in the last
// bits (pipefuse rounds each op as the CPU does); the byte traffic is the same.
//
// Printed (JSON): a 16-byte copy kernel of the same frame in the same conditions (same
// buffers every launch, 200 launches back to back, median of repeats), then each chain
// length K with its time, GB/s (read + write) and its ratio to that copy kernel.
// Build: nvcc -O3 -arch=sm_90 bench/hand_chain.cu -o hand_chain
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#include "copy_kernel.cuh"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "hand_chain: %s: %s (line %d)\n", #x, cudaGetErrorString(e_),          \
                    __LINE__);                                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define PIXELS_PER_THREAD 8 /* two 16-byte loads */

struct px {
    float r, g, b, a;
};

/* Stage i of the chain, as gen_chain.py cycles them. */
template <int I> __device__ __forceinline__ void op(px &v)
{
    if (I % 4 == 0) { /* brightness, alternating sign by cycle */
        const float d = (I / 4) % 2 == 0 ? 0.01f : -0.01f;
        v.r += d, v.g += d, v.b += d;
    } else if (I % 4 == 1) { /* contrast 1.01 about 0.5 */
        v.r = (v.r - 0.5f) * 1.01f + 0.5f;
        v.g = (v.g - 0.5f) * 1.01f + 0.5f;
        v.b = (v.b - 0.5f) * 1.01f + 0.5f;
    } else if (I % 4 == 2) { /* saturation 0.99 */
        float l = 0.2126f * v.r + 0.7152f * v.g + 0.0722f * v.b;
        v.r = l + (v.r - l) * 0.99f;
        v.g = l + (v.g - l) * 0.99f;
        v.b = l + (v.b - l) * 0.99f;
    } else { /* linear on all four */
        v.r = v.r * 0.99f + 0.005f, v.g = v.g * 0.99f + 0.005f;
        v.b = v.b * 0.99f + 0.005f, v.a = v.a * 0.99f + 0.005f;
    }
}

template <int K, int I = 0> struct chain {
    static __device__ __forceinline__ void run(px &v)
    {
        op<I>(v);
        chain<K, I + 1>::run(v);
    }
};
template <int K> struct chain<K, K> {
    static __device__ __forceinline__ void run(px &) {}
};

__device__ __forceinline__ unsigned to8(float v)
{
    return __float2uint_rn(__saturatef(v) * 255.0f);
}

template <int K>
__global__ void __launch_bounds__(256)
    hand_chain(const uint4 *__restrict__ src, uint4 *__restrict__ dst, size_t n)
{
    size_t base = (size_t)blockIdx.x * blockDim.x * 2 + threadIdx.x;
#pragma unroll
    for (int s = 0; s < 2; s++) {
        size_t i = base + (size_t)s * blockDim.x;
        if (i >= n)
            return;
        uint4 w = __ldg(src + i);
        unsigned in[4] = {w.x, w.y, w.z, w.w}, out[4];
#pragma unroll
        for (int p = 0; p < 4; p++) {
            const float r255 = 1.0f / 255.0f;
            px v = {(float)(in[p] & 255) * r255, (float)((in[p] >> 8) & 255) * r255,
                    (float)((in[p] >> 16) & 255) * r255, (float)(in[p] >> 24) * r255};
            chain<K>::run(v);
            out[p] = to8(v.r) | to8(v.g) << 8 | to8(v.b) << 16 | to8(v.a) << 24;
        }
        dst[i] = make_uint4(out[0], out[1], out[2], out[3]);
    }
}

int main()
{
    const size_t frame = (size_t)3840 * 2160 * 4, n16 = frame / 16;
    const int launches = 200, repeats = 7;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    void *src, *dst;
    CK(cudaMalloc(&src, frame));
    CK(cudaMalloc(&dst, frame));
    std::vector<unsigned char> h(frame);
    for (size_t i = 0; i < frame; i++)
        h[i] = (unsigned char)((i * 2654435761u) >> 24);
    CK(cudaMemcpy(src, h.data(), frame, cudaMemcpyHostToDevice));
    unsigned blocks = (unsigned)((n16 + 511) / 512);

    /* Microseconds per launch, median over repeats of `launches` back to back. */
    auto time_us = [&](void (*kernel)(const uint4 *, uint4 *, size_t)) {
        std::vector<double> r;
        for (int rep = 0; rep < repeats + 1; rep++) {
            CK(cudaEventRecord(e0, st));
            for (int i = 0; i < launches; i++)
                kernel<<<blocks, 256, 0, st>>>((const uint4 *)src, (uint4 *)dst, n16);
            CK(cudaGetLastError());
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (rep > 0) /* the first is a warm-up */
                r.push_back(ms * 1e3 / launches);
        }
        return median(r);
    };
    auto gbps = [&](double us) { return 2.0 * frame / (us * 1e-6) / 1e9; };

    double copy_us = time_us(copy16);
    struct {
        int k;
        void (*kernel)(const uint4 *, uint4 *, size_t);
    } chains[] = {{1, hand_chain<1>}, {4, hand_chain<4>}, {8, hand_chain<8>}, {16, hand_chain<16>}};
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("{\"device\": \"%s\", \"frame\": \"3840x2160 rgba8\",\n"
           " \"copy_kernel_us\": %.3f, \"copy_kernel_gbps\": %.1f,\n \"chains\": [",
           prop.name, copy_us, gbps(copy_us));
    for (int c = 0; c < 4; c++) {
        double us = time_us(chains[c].kernel);
        printf("%s\n  {\"k\": %d, \"us\": %.3f, \"gbps\": %.1f, \"copy_ratio\": %.3f}",
               c ? "," : "", chains[c].k, us, gbps(us), copy_us / us);
    }
    printf("]}\n");
    return 0;
}
