// bench/copy_bw.cu: the device's copy bandwidth, the floor for memory-bound work.
// Every figure counts read + write (2 x bytes copied) and is the median of repeats.
//   memcpy_512MiB:   cudaMemcpyAsync device to device of 512 MiB, 20 times (what
//                    `pipefuse bench` measures as copy_gbps).
//   kernel_4k_same:  a 16-byte-load copy kernel over a 3840x2160 RGBA8 frame (33.2 MB),
//                    the same source and destination every launch, 200 launches back to
//                    back: the conditions of `pipefuse bench` (one input, one output;
//                    66 MB of traffic against a 60 MB L2, so some of it may hit L2).
//   kernel_4k_rotate: the same kernel rotating over 8 source/destination pairs, so the
//                    L2 does not hold the frame.
//   memcpy_4k_rotate: cudaMemcpyAsync of the 4K frame, rotating the same way.
// Build: nvcc -O3 -arch=sm_90 bench/copy_bw.cu -o copy_bw
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
            fprintf(stderr, "copy_bw: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main()
{
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto elapsed = [&]() {
        float ms;
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        return (double)ms;
    };

    // 512 MiB memcpy
    const size_t big = 512u << 20;
    void *a, *b;
    CK(cudaMalloc(&a, big));
    CK(cudaMalloc(&b, big));
    CK(cudaMemset(a, 1, big));
    CK(cudaMemcpy(b, a, big, cudaMemcpyDeviceToDevice));
    std::vector<double> t;
    for (int i = 0; i < 20; i++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, big, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e1, st));
        t.push_back(elapsed());
    }
    double memcpy_big = 2.0 * big / (median(t) * 1e-3) / 1e9;
    CK(cudaFree(a));
    CK(cudaFree(b));

    // 4K RGBA8 frame
    const size_t frame = (size_t)3840 * 2160 * 4, n16 = frame / 16;
    const int pairs = 8, launches = 200, repeats = 7;
    std::vector<void *> src(pairs), dst(pairs);
    for (int p = 0; p < pairs; p++) {
        CK(cudaMalloc(&src[p], frame));
        CK(cudaMalloc(&dst[p], frame));
        CK(cudaMemset(src[p], p, frame));
    }
    unsigned blocks = (unsigned)((n16 + 511) / 512);
    auto run = [&](int rotate, int use_memcpy) {
        std::vector<double> r;
        for (int rep = 0; rep < repeats + 1; rep++) {
            CK(cudaEventRecord(e0, st));
            for (int i = 0; i < launches; i++) {
                int p = rotate ? i % pairs : 0;
                if (use_memcpy)
                    cudaMemcpyAsync(dst[p], src[p], frame, cudaMemcpyDeviceToDevice, st);
                else
                    copy16<<<blocks, 256, 0, st>>>((const uint4 *)src[p], (uint4 *)dst[p], n16);
            }
            CK(cudaEventRecord(e1, st));
            double ms = elapsed() / launches;
            if (rep > 0) // the first is a warm-up
                r.push_back(ms);
        }
        CK(cudaGetLastError());
        double ms = median(r);
        return std::make_pair(ms * 1e3, 2.0 * frame / (ms * 1e-3) / 1e9);
    };
    auto same = run(0, 0), rot = run(1, 0), mrot = run(1, 1);

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("{\"device\": \"%s\", \"l2_mb\": %.1f,\n"
           " \"memcpy_512MiB_gbps\": %.1f,\n"
           " \"kernel_4k_same_us\": %.3f, \"kernel_4k_same_gbps\": %.1f,\n"
           " \"kernel_4k_rotate_us\": %.3f, \"kernel_4k_rotate_gbps\": %.1f,\n"
           " \"memcpy_4k_rotate_us\": %.3f, \"memcpy_4k_rotate_gbps\": %.1f}\n",
           prop.name, prop.l2CacheSize / 1e6, memcpy_big, same.first, same.second, rot.first,
           rot.second, mrot.first, mrot.second);
    return 0;
}
