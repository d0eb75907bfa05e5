// bench/copy_kernel.cuh: what the standalone CUDA baselines share: the 16-byte copy
// kernel that is the floor of a frame's traffic (bench/copy_bw.cu times it alone,
// bench/hand_chain.cu next to its chains, so both compare against the same kernel), and
// the median of repeated timings.
#ifndef PF_BENCH_COPY_KERNEL_CUH
#define PF_BENCH_COPY_KERNEL_CUH

#include <algorithm>
#include <vector>

// Two 16-byte elements a thread, blockDim.x apart: n elements from src to dst.
__global__ void copy16(const uint4 *__restrict__ src, uint4 *__restrict__ dst, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x * 2 + threadIdx.x;
    if (i < n)
        dst[i] = src[i];
    if (i + blockDim.x < n)
        dst[i + blockDim.x] = src[i + blockDim.x];
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

#endif
