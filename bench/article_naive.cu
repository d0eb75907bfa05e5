// bench/article_naive.cu: the article's launch-bound case written by hand, for comparison
// with `pipefuse bench pipelines/article.json --size 1024x1024 --format grayf`.
//
// 1024x1024 float, y = a * x + b, then the sum of every column, looped 1000 times.
//   naive:    per iteration kernel 1 (y = a*x + b), kernel 2 (column sums), cudaMemcpy of
//             the 1024 sums to (pageable) host memory and cudaDeviceSynchronize. This is
//             the form the article starts from.
//   naive_simple: the same, with the simplest column-sum kernel (one thread per column).
//   async:    the same two kernels and an async copy to pinned memory, no sync in the
//             loop (one at the end): the article's first cure, no host round trip.
//   graph:    the async iteration captured once as a CUDA Graph and replayed.
// Each variant is timed over 1000 iterations (wall clock, after a warm-up), repeated 5
// times; the median is printed in microseconds per iteration, as one JSON object.
//
// Build: nvcc -O3 -arch=sm_90 bench/article_naive.cu -o article_naive
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "article_naive: %s: %s (line %d)\n", #x, cudaGetErrorString(e_),       \
                    __LINE__);                                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const int W = 1024, H = 1024, ITERS = 1000, REPEATS = 5;

__global__ void axpb(const float4 *__restrict__ x, float4 *__restrict__ y, float a, float b, int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        y[i] = make_float4(a * v.x + b, a * v.y + b, a * v.z + b, a * v.w + b);
    }
}

// Column sums: a block of 32 columns x 32 row lanes; each thread sums every 32nd row of
// its column, then the lanes combine in shared memory. One write per column, no atomics.
__global__ void colsum(const float *__restrict__ y, float *__restrict__ sums, int w, int h)
{
    __shared__ float part[32][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0;
    if (col < w)
        for (int r = threadIdx.y; r < h; r += 32)
            s += y[(size_t)r * w + col];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < w) {
        float t = 0;
        for (int k = 0; k < 32; k++)
            t += part[k][threadIdx.x];
        sums[col] = t;
    }
}

// The simplest column sums: one thread per column walks all 1024 rows (4 blocks on a
// 132-SM GPU: the kind of kernel a first version often has).
__global__ void colsum_simple(const float *__restrict__ y, float *__restrict__ sums, int w, int h)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col < w) {
        float s = 0;
        for (int r = 0; r < h; r++)
            s += y[(size_t)r * w + col];
        sums[col] = s;
    }
}

static double now_us()
{
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main()
{
    const int n = W * H, n4 = n / 4;
    float *x, *y, *sums, *pinned;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMalloc(&sums, W * sizeof(float)));
    CK(cudaMallocHost(&pinned, W * sizeof(float)));
    std::vector<float> hx(n), pageable(W);
    for (int i = 0; i < n; i++)
        hx[i] = (float)(i % 251) / 251.0f;
    CK(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const float a = 2.0f, b = 0.5f;
    dim3 g1((n4 + 255) / 256), b1(256), g2((W + 31) / 32), b2(32, 32);

    auto naive_iter = [&]() {
        axpb<<<g1, b1>>>((const float4 *)x, (float4 *)y, a, b, n4);
        colsum<<<g2, b2>>>(y, sums, W, H);
        CK(cudaMemcpy(pageable.data(), sums, W * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaDeviceSynchronize());
    };
    auto naive_simple_iter = [&]() {
        axpb<<<g1, b1>>>((const float4 *)x, (float4 *)y, a, b, n4);
        colsum_simple<<<(W + 255) / 256, 256>>>(y, sums, W, H);
        CK(cudaMemcpy(pageable.data(), sums, W * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaDeviceSynchronize());
    };
    auto async_iter = [&](cudaStream_t s) {
        axpb<<<g1, b1, 0, s>>>((const float4 *)x, (float4 *)y, a, b, n4);
        colsum<<<g2, b2, 0, s>>>(y, sums, W, H);
        cudaMemcpyAsync(pinned, sums, W * sizeof(float), cudaMemcpyDeviceToHost, s);
    };

    std::vector<double> t_naive, t_simple, t_async, t_graph, t_gpu;
    for (int i = 0; i < 20; i++)
        naive_simple_iter();
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_us();
        for (int i = 0; i < ITERS; i++)
            naive_simple_iter();
        t_simple.push_back((now_us() - t0) / ITERS);
    }
    for (int i = 0; i < 20; i++)
        naive_iter();
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_us();
        for (int i = 0; i < ITERS; i++)
            naive_iter();
        t_naive.push_back((now_us() - t0) / ITERS);
    }
    // Check the sums once: column c of y sums a * x + b over the rows.
    double want = 0;
    for (int r = 0; r < H; r++)
        want += a * hx[(size_t)r * W + 7] + b;
    double err = fabs(pageable[7] - want) / fabs(want);

    for (int i = 0; i < 20; i++)
        async_iter(st);
    CK(cudaStreamSynchronize(st));
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_us();
        for (int i = 0; i < ITERS; i++)
            async_iter(st);
        CK(cudaStreamSynchronize(st));
        t_async.push_back((now_us() - t0) / ITERS);
    }

    // GPU time of one iteration's two kernels, from events over ITERS back to back.
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int r = 0; r < REPEATS; r++) {
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < ITERS; i++) {
            axpb<<<g1, b1, 0, st>>>((const float4 *)x, (float4 *)y, a, b, n4);
            colsum<<<g2, b2, 0, st>>>(y, sums, W, H);
        }
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t_gpu.push_back(ms * 1e3 / ITERS);
    }

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    async_iter(st);
    CK(cudaStreamEndCapture(st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 20; i++)
        CK(cudaGraphLaunch(exec, st));
    CK(cudaStreamSynchronize(st));
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_us();
        for (int i = 0; i < ITERS; i++)
            cudaGraphLaunch(exec, st);
        CK(cudaStreamSynchronize(st));
        t_graph.push_back((now_us() - t0) / ITERS);
    }
    CK(cudaGetLastError());

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf(
        "{\"device\": \"%s\", \"size\": [%d, %d], \"iterations\": %d, \"repeats\": %d,\n"
        " \"naive_us\": %.3f, \"naive_simple_us\": %.3f, \"async_us\": %.3f, \"graph_us\": %.3f,\n"
        " \"kernels_gpu_us\": %.3f,\n"
        " \"sum_rel_error\": %.3g,\n"
        " \"naive\": \"2 kernels + cudaMemcpy to pageable host + cudaDeviceSynchronize per "
        "iteration\",\n"
        " \"naive_simple\": \"the same with a one-thread-per-column column-sum kernel\",\n"
        " \"async\": \"2 kernels + cudaMemcpyAsync to pinned host per iteration, one sync at the "
        "end\",\n"
        " \"graph\": \"the async iteration captured as a CUDA Graph, replayed\",\n"
        " \"kernels_gpu\": \"GPU time of the 2 kernels per iteration (CUDA events, back to "
        "back)\"}\n",
        prop.name, W, H, ITERS, REPEATS, median(t_naive), median(t_simple), median(t_async),
        median(t_graph), median(t_gpu), err);
    return err < 1e-3 ? 0 : 2;
}
