// bench/launch_floor.cu: what a frame costs on this GPU besides its kernel, the floor
// under `pipefuse bench` frames of one kernel (the article, small frames, a 4K chain).
//
// One kernel a frame, issued N times back to back on one stream; wall clock per frame
// (median of repeats), and the kernel's GPU time alone from events around N launches.
// (For the two small kernels the event figure is the host's launch rate, not the kernel.)
// Each pattern adds one thing a frame of `pipefuse bench --mode cuda-graph-fused` does:
//   launch:        the kernel launched directly (cudaLaunchKernel), nothing else
//   launch_event:  + an event recorded after it (timing off)
//   launch_wait3:  + the host waits for the event of the frame 3 back (3 frames in flight)
//   graph:         the kernel as a one-node CUDA Graph, cudaGraphLaunch
//   graph_event:   + the event
//   graph_wait3:   + the wait: what a pipefuse frame does on the device side
// for three kernels: "empty" (one block, nothing), "small" (a 256x256 RGBA8 copy, 16-byte
// loads), and "4k" (a 3840x2160 RGBA8 copy, two 16-byte loads a thread, as
// bench/copy_bw.cu). Prints one JSON object, microseconds per frame. An argument (empty,
// small or 4k) runs that kernel alone, for a profiler.
//
// Build: nvcc -O3 -arch=sm_90 bench/launch_floor.cu -o launch_floor
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "copy_kernel.cuh"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "launch_floor: %s: %s (line %d)\n", #x, cudaGetErrorString(e_),        \
                    __LINE__);                                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const int FRAMES = 2000, REPEATS = 7, IN_FLIGHT = 3;

__global__ void empty_kernel(int *flag)
{
    if (threadIdx.x == 0 && flag[0] == 12345) /* never: keeps the launch real */
        flag[1] = 1;
}

static double now_us()
{
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

struct work {
    const char *name;
    void *fn;
    dim3 grid, block;
    void **args;
};

/* One pattern: graph or not, event or not, wait for the frame IN_FLIGHT back or not. */
static double run_pattern(const work &w, cudaStream_t st, int graph, int event, int wait)
{
    cudaGraphExec_t exec = nullptr;
    if (graph) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        CK(cudaLaunchKernel(w.fn, w.grid, w.block, w.args, 0, st));
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&exec, g, 0));
        CK(cudaGraphDestroy(g));
        CK(cudaGraphUpload(exec, st));
    }
    cudaEvent_t ev[IN_FLIGHT];
    for (int k = 0; k < IN_FLIGHT; k++)
        CK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming));
    std::vector<double> t;
    for (int rep = 0; rep < REPEATS + 1; rep++) {
        CK(cudaStreamSynchronize(st));
        double t0 = now_us();
        for (int i = 0; i < FRAMES; i++) {
            if (wait && i >= IN_FLIGHT)
                CK(cudaEventSynchronize(ev[i % IN_FLIGHT]));
            if (graph)
                CK(cudaGraphLaunch(exec, st));
            else
                CK(cudaLaunchKernel(w.fn, w.grid, w.block, w.args, 0, st));
            if (event)
                CK(cudaEventRecord(ev[i % IN_FLIGHT], st));
        }
        CK(cudaStreamSynchronize(st));
        if (rep > 0) /* the first is a warm-up */
            t.push_back((now_us() - t0) / FRAMES);
    }
    for (int k = 0; k < IN_FLIGHT; k++)
        CK(cudaEventDestroy(ev[k]));
    if (exec)
        CK(cudaGraphExecDestroy(exec));
    return median(t);
}

/* The kernel's GPU time a launch, by events around FRAMES direct launches. */
static double gpu_time(const work &w, cudaStream_t st)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int rep = 0; rep < REPEATS; rep++) {
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < FRAMES; i++)
            CK(cudaLaunchKernel(w.fn, w.grid, w.block, w.args, 0, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1e3 / FRAMES);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return median(t);
}

int main(int argc, char **argv)
{
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int *flag;
    CK(cudaMalloc(&flag, 2 * sizeof(int)));
    CK(cudaMemset(flag, 0, 2 * sizeof(int)));
    const size_t small = (size_t)256 * 256 * 4 / 16, big = (size_t)3840 * 2160 * 4 / 16;
    uint4 *src, *dst;
    CK(cudaMalloc(&src, big * 16));
    CK(cudaMalloc(&dst, big * 16));
    CK(cudaMemset(src, 1, big * 16));
    size_t n_small = small, n_big = big;
    void *a_empty[] = {&flag};
    void *a_small[] = {&src, &dst, &n_small};
    void *a_big[] = {&src, &dst, &n_big};
    work ws[] = {
        {"empty", (void *)empty_kernel, dim3(1), dim3(32), a_empty},
        {"small", (void *)copy16, dim3((unsigned)((small + 511) / 512)), dim3(256), a_small},
        {"4k", (void *)copy16, dim3((unsigned)((big + 511) / 512)), dim3(256), a_big},
    };
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("{\"device\": \"%s\", \"frames\": %d, \"in_flight\": %d", prop.name, FRAMES, IN_FLIGHT);
    for (const work &w : ws) {
        if (argc > 1 && strcmp(argv[1], w.name) != 0) /* only the kernel named */
            continue;
        double g = gpu_time(w, st);
        double l = run_pattern(w, st, 0, 0, 0), le = run_pattern(w, st, 0, 1, 0),
               lw = run_pattern(w, st, 0, 1, 1), gr = run_pattern(w, st, 1, 0, 0),
               ge = run_pattern(w, st, 1, 1, 0), gw = run_pattern(w, st, 1, 1, 1);
        printf(",\n \"%s\": {\"kernel_gpu_us\": %.3f, \"launch_us\": %.3f, \"launch_event_us\": "
               "%.3f, \"launch_wait3_us\": %.3f, \"graph_us\": %.3f, \"graph_event_us\": %.3f, "
               "\"graph_wait3_us\": %.3f}",
               w.name, g, l, le, lw, gr, ge, gw);
    }
    printf("}\n");
    CK(cudaGetLastError());
    return 0;
}
