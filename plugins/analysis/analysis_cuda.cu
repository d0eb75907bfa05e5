/* plugins/analysis/analysis_cuda.cu: CUDA kernels of the analysis family (histogram,
 * colsum, rowsum, stats). Each fills a->partial exactly as one CPU band over a->region
 * would (analysis.c's layout), so the engine combines it with the stage's own combine.
 *
 * Results never depend on scheduling: every pixel goes to a thread and block fixed by
 * the sizes alone, per-thread sums run in a fixed order, blocks reduce in a fixed tree,
 * and per-block partials are combined by a second kernel in a fixed order. The only
 * atomics are integer ones (histogram counts, which are exact in any order). Launch
 * configurations depend on sizes only, never on params (they are device memory).
 *
 * Against the CPU: histogram counts and rowsum are computed the same way in
 * substance (rowsum adds in another order); colsum and stats add in another order than
 * the CPU's single sequential loop, so they agree to double rounding, not to the bit.
 */
#include <math_constants.h>

#include "pipefuse/cuda.cuh"

#include "analysis.h"

#define NT 256 /* threads per block everywhere here */

/* Walks pixels p, p + stride, ... of a w-wide band of rows as (x, y) without a division
   per step. */
struct pix_walk {
    int x, y, dx, dy, w;
    __device__ pix_walk(long long p, long long stride, int w_, int y0)
        : x((int)(p % w_)), y(y0 + (int)(p / w_)), dx((int)(stride % w_)), dy((int)(stride / w_)),
          w(w_)
    {
    }
    __device__ void next()
    {
        x += dx;
        y += dy;
        if (x >= w) {
            x -= w;
            y++;
        }
    }
};

static __device__ __forceinline__ float chan(const float4 &v, int k)
{
    return k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w));
}

/* ---- histogram ----------------------------------------------------------------------- */

/* Counts go to a per-block histogram in shared memory when the table fits (bins up to
   HIST_SH_BINS), else straight to the partial; in both cases the partial holds 64-bit
   integer counts (the engine zeroes it, and integer zero is double zero) until
   hist_finish turns them into doubles in place. */
#define HIST_SH_BINS 2048

static __device__ __forceinline__ int bins_of_d(const pf_histogram_params *p)
{
    const int bins = p->bins;
    return bins < 2 ? 2 : (bins > PF_HISTOGRAM_MAX_BINS ? PF_HISTOGRAM_MAX_BINS : bins);
}

/* analysis.c's histogram_bin: the float of a 16-bit code k / 65535 bins as that exact
   fraction; other values as floor(v * bins) in double (no overflow for inf or 1e30). */
static __device__ __forceinline__ int hist_bin(float c, int bins)
{
    if (c >= 0.0f && c <= 1.0f) {
        const int k = __float2int_rn(__fmul_rn(c, 65535.0f));
        if (__fdiv_rn((float)k, 65535.0f) == c) {
            const long long b = (long long)k * bins / 65535;
            return b >= bins ? bins - 1 : (int)b;
        }
    }
    const double b = floor(__dmul_rn((double)c, (double)bins));
    return b < 0 ? 0 : (b >= bins ? bins - 1 : (int)b);
}

__global__ void __launch_bounds__(NT)
    hist_count_kernel(const pf_histogram_params *__restrict__ p, pf_image in, int y0, int y1,
                      unsigned long long *__restrict__ cnt)
{
    __shared__ unsigned int sh[HIST_SH_BINS * 4];
    const int bins = bins_of_d(p), len = bins * 4;
    const bool shared = bins <= HIST_SH_BINS;
    if (shared) {
        for (int i = threadIdx.x; i < len; i += NT)
            sh[i] = 0;
        __syncthreads();
    }
    const long long n = (long long)(y1 - y0) * in.width;
    const long long stride = (long long)gridDim.x * NT;
    long long q = (long long)blockIdx.x * NT + threadIdx.x;
    if (q < n) {
        pix_walk it(q, stride, in.width, y0);
        for (; q < n; q += stride, it.next()) {
            const float4 v = pf_row_d(in, it.y)[it.x];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float c = chan(v, k);
                if (isnan(c))
                    continue;
                const int bin = hist_bin(c, bins);
                if (shared)
                    atomicAdd(&sh[bin * 4 + k], 1u);
                else
                    atomicAdd(&cnt[bin * 4 + k], 1ull);
            }
        }
    }
    if (shared) {
        __syncthreads();
        for (int i = threadIdx.x; i < len; i += NT)
            if (sh[i])
                atomicAdd(&cnt[i], (unsigned long long)sh[i]);
    }
}

__global__ void __launch_bounds__(NT)
    hist_finish_kernel(const pf_histogram_params *__restrict__ p, unsigned long long *cnt)
{
    const int len = bins_of_d(p) * 4;
    for (int i = blockIdx.x * NT + threadIdx.x; i < len; i += gridDim.x * NT)
        ((double *)cnt)[i] = (double)cnt[i];
}

static int histogram_launch(const pf_stage_args *a)
{
    const pf_image in = a->in[0];
    const int y0 = a->region.y0, y1 = a->region.y1;
    cudaStream_t st = (cudaStream_t)a->stream;
    const pf_histogram_params *p = (const pf_histogram_params *)a->params;
    unsigned long long *cnt = (unsigned long long *)a->partial;
    if (y1 > y0 && in.width > 0) {
        const long long n = (long long)(y1 - y0) * in.width;
        long long blocks = PF_CEIL_DIV(n, (long long)NT * 16);
        blocks = blocks < 1 ? 1 : (blocks > 264 ? 264 : blocks);
        hist_count_kernel<<<(int)blocks, NT, 0, st>>>(p, in, y0, y1, cnt);
        if (pf_cuda_check(a, "histogram"))
            return 1;
    }
    /* Every bin, whatever the band: an empty band still turns its zeros into doubles. */
    hist_finish_kernel<<<64, NT, 0, st>>>(p, cnt);
    return pf_cuda_check(a, "histogram");
}

/* ---- colsum -------------------------------------------------------------------------- */

/* The band's rows in chunks of at least COL_MIN_ROWS rows, at most COL_MAX_CHUNKS of
   them; one thread per (column, chunk) sums its chunk's rows in order into scratch, and
   one thread per column then adds its chunks in order. */
#define COL_MIN_ROWS   16
#define COL_MAX_CHUNKS 64
#define COL_TX         128

/* Four double sums of one column (two 16-byte stores; CUDA 13 deprecates double4). */
struct __align__(16) sum4
{
    double v[4];
};

static void col_chunks(int rows, int *chunk_rows, int *chunks)
{
    int cr = PF_CEIL_DIV(rows, COL_MAX_CHUNKS);
    cr = cr < COL_MIN_ROWS ? COL_MIN_ROWS : cr;
    *chunk_rows = cr;
    *chunks = rows > 0 ? PF_CEIL_DIV(rows, cr) : 0;
}

__global__ void __launch_bounds__(COL_TX)
    colsum_chunk_kernel(pf_image in, int y0, int y1, int chunk_rows, sum4 *__restrict__ part)
{
    const int x = blockIdx.x * COL_TX + threadIdx.x;
    if (x >= in.width)
        return;
    const int ya = y0 + blockIdx.y * chunk_rows, yb = min(ya + chunk_rows, y1);
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    const char *row = (const char *)in.data + (size_t)ya * in.pitch;
    for (int y = ya; y < yb; y++, row += in.pitch) {
        const float4 v = ((const float4 *)row)[x];
        s0 += v.x, s1 += v.y, s2 += v.z, s3 += v.w;
    }
    sum4 o = {{s0, s1, s2, s3}};
    part[(size_t)blockIdx.y * in.width + x] = o;
}

__global__ void __launch_bounds__(COL_TX)
    colsum_final_kernel(const sum4 *__restrict__ part, int chunks, int w,
                        double *__restrict__ partial)
{
    const int x = blockIdx.x * COL_TX + threadIdx.x;
    if (x >= w)
        return;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int c = 0; c < chunks; c++) {
        const sum4 v = part[(size_t)c * w + x];
        s0 += v.v[0], s1 += v.v[1], s2 += v.v[2], s3 += v.v[3];
    }
    double *t = partial + (size_t)x * 4; /* analysis.c: table row x */
    t[0] = s0, t[1] = s1, t[2] = s2, t[3] = s3;
}

static int colsum_launch(const pf_stage_args *a)
{
    const pf_image in = a->in[0];
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0 || in.width <= 0)
        return 0; /* an empty band adds nothing: the zeroed partial is right */
    int chunk_rows, chunks;
    col_chunks(y1 - y0, &chunk_rows, &chunks);
    const size_t need = (size_t)chunks * (size_t)in.width * sizeof(sum4);
    if (pf_cuda_scratch_short(a, "colsum", need))
        return 1;
    cudaStream_t st = (cudaStream_t)a->stream;
    sum4 *part = (sum4 *)a->scratch;
    dim3 g(PF_CEIL_DIV(in.width, COL_TX), chunks);
    colsum_chunk_kernel<<<g, COL_TX, 0, st>>>(in, y0, y1, chunk_rows, part);
    if (pf_cuda_check(a, "colsum"))
        return 1;
    colsum_final_kernel<<<PF_CEIL_DIV(in.width, COL_TX), COL_TX, 0, st>>>(part, chunks, in.width,
                                                                          a->partial);
    return pf_cuda_check(a, "colsum");
}

/* ---- rowsum -------------------------------------------------------------------------- */

/* One warp per row: lane l adds columns l, l + 32, ... in order, then the warp adds its
   lanes in a fixed tree (shuffle down by 16, 8, 4, 2, 1). Other rows of the partial
   stay zero, as analysis.c's band leaves them. */
__global__ void __launch_bounds__(NT)
    rowsum_kernel(pf_image in, int y0, int y1, double *__restrict__ partial)
{
    const int lane = threadIdx.x & 31;
    const int y = y0 + blockIdx.x * (NT / 32) + (threadIdx.x >> 5);
    if (y >= y1) /* a whole warp leaves together */
        return;
    const float4 *row = pf_row_d(in, y);
    double s[4] = {0, 0, 0, 0};
    for (int x = lane; x < in.width; x += 32) {
        const float4 v = row[x];
        s[0] += v.x, s[1] += v.y, s[2] += v.z, s[3] += v.w;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
#pragma unroll
        for (int k = 0; k < 4; k++)
            s[k] += __shfl_down_sync(0xffffffffu, s[k], off);
    if (lane == 0) {
        double *t = partial + (size_t)y * 4;
        t[0] = s[0], t[1] = s[1], t[2] = s[2], t[3] = s[3];
    }
}

static int rowsum_launch(const pf_stage_args *a)
{
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0)
        return 0;
    rowsum_kernel<<<PF_CEIL_DIV(y1 - y0, NT / 32), NT, 0, (cudaStream_t)a->stream>>>(
        a->in[0], y0, y1, a->partial);
    return pf_cuda_check(a, "rowsum");
}

/* ---- stats --------------------------------------------------------------------------- */

/* analysis.c's partial: per channel count, mean, M2, min, max of the non-NaN samples.
   Block b takes a contiguous chunk of the band's rows (at most ST_MAX_BLOCKS blocks)
   and computes its chunk's count, mean (sum / count) and M2 (a second pass over the
   chunk, around that mean), each thread over a fixed set of pixels and the block over a
   fixed tree; stats_merge then merges the blocks with Chan's formula in a fixed tree. */
#define ST_MAX_BLOCKS 256
enum { ST_N, ST_MEAN, ST_M2, ST_MIN, ST_MAX, ST_FIELDS };

struct st_part {
    double v[4][ST_FIELDS];
};

static void st_blocks(int rows, int *chunk_rows, int *blocks)
{
    int cr = PF_CEIL_DIV(rows, ST_MAX_BLOCKS);
    *chunk_rows = cr < 1 ? 1 : cr;
    *blocks = rows > 0 ? PF_CEIL_DIV(rows, *chunk_rows) : 0;
}

enum { RED_SUM, RED_MIN, RED_MAX };

/* Reduces v[4] over the block in a fixed tree; thread 0's v holds the result. red is
   4 x NT doubles of shared memory. */
template <int OP>
static __device__ __forceinline__ void block_reduce4(double v[4], double (*red)[NT])
{
    const int t = threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; k++)
        red[k][t] = v[k];
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if (t < s)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const double a = red[k][t], b = red[k][t + s];
                red[k][t] = OP == RED_SUM   ? a + b
                            : OP == RED_MIN ? (b < a ? b : a)
                                            : (b > a ? b : a);
            }
        __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < 4; k++)
        v[k] = red[k][0];
    __syncthreads(); /* red is reused by the next reduction */
}

__global__ void __launch_bounds__(NT)
    stats_block_kernel(pf_image in, int y0, int y1, int chunk_rows, st_part *__restrict__ part)
{
    __shared__ double red[4][NT];
    const int ya = y0 + blockIdx.x * chunk_rows, yb = min(ya + chunk_rows, y1);
    const long long n = (long long)(yb - ya) * in.width;
    double cnt[4] = {0, 0, 0, 0}, sum[4] = {0, 0, 0, 0}, mn[4], mx[4], m2[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 4; k++)
        mn[k] = CUDART_INF, mx[k] = -CUDART_INF;
    if (threadIdx.x < n) {
        pix_walk it(threadIdx.x, NT, in.width, ya);
        for (long long q = threadIdx.x; q < n; q += NT, it.next()) {
            const float4 v = pf_row_d(in, it.y)[it.x];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float c = chan(v, k);
                if (!isnan(c)) {
                    cnt[k] += 1;
                    sum[k] += c;
                    mn[k] = c < mn[k] ? c : mn[k];
                    mx[k] = c > mx[k] ? c : mx[k];
                }
            }
        }
    }
    block_reduce4<RED_SUM>(cnt, red);
    block_reduce4<RED_SUM>(sum, red);
    block_reduce4<RED_MIN>(mn, red);
    block_reduce4<RED_MAX>(mx, red);
    double mean[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        mean[k] = cnt[k] > 0 ? sum[k] / cnt[k] : 0;
    if (threadIdx.x < n) { /* second pass over the same pixels, around the chunk's mean */
        pix_walk it(threadIdx.x, NT, in.width, ya);
        for (long long q = threadIdx.x; q < n; q += NT, it.next()) {
            const float4 v = pf_row_d(in, it.y)[it.x];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float c = chan(v, k);
                if (!isnan(c))
                    m2[k] += (c - mean[k]) * (c - mean[k]);
            }
        }
    }
    block_reduce4<RED_SUM>(m2, red);
    if (threadIdx.x == 0)
#pragma unroll
        for (int k = 0; k < 4; k++) { /* constant k: the arrays stay in registers */
            double *q = part[blockIdx.x].v[k];
            q[ST_N] = cnt[k], q[ST_MEAN] = mean[k], q[ST_M2] = m2[k];
            q[ST_MIN] = mn[k], q[ST_MAX] = mx[k];
        }
}

/* Merges b into a (either may be empty), Chan, Golub and LeVeque as analysis.c. */
static __device__ void chan_merge(double *a, const double *b)
{
    const double na = a[ST_N], nb = b[ST_N];
    if (nb == 0)
        return;
    if (na == 0) {
        for (int f = 0; f < ST_FIELDS; f++)
            a[f] = b[f];
        return;
    }
    const double n = na + nb, d = b[ST_MEAN] - a[ST_MEAN];
    a[ST_MEAN] += d * nb / n;
    a[ST_M2] += b[ST_M2] + d * d * na * nb / n;
    a[ST_MIN] = b[ST_MIN] < a[ST_MIN] ? b[ST_MIN] : a[ST_MIN];
    a[ST_MAX] = b[ST_MAX] > a[ST_MAX] ? b[ST_MAX] : a[ST_MAX];
    a[ST_N] = n;
}

/* One block of ST_MAX_BLOCKS threads: slot t starts as block t's partial (or empty);
   then slot t merges slot t + s for s = 128, 64, ..., 1. */
__global__ void __launch_bounds__(ST_MAX_BLOCKS)
    stats_merge_kernel(const st_part *__restrict__ part, int blocks, double *__restrict__ partial)
{
    __shared__ st_part slot[ST_MAX_BLOCKS];
    const int t = threadIdx.x;
    for (int k = 0; k < 4; k++)
        for (int f = 0; f < ST_FIELDS; f++)
            slot[t].v[k][f] = t < blocks ? part[t].v[k][f] : 0;
    __syncthreads();
    for (int s = ST_MAX_BLOCKS / 2; s > 0; s >>= 1) {
        if (t < s)
            for (int k = 0; k < 4; k++)
                chan_merge(slot[t].v[k], slot[t + s].v[k]);
        __syncthreads();
    }
    if (t < 4 && slot[0].v[t][ST_N] > 0) /* analysis.c leaves an empty channel at zero */
        for (int f = 0; f < ST_FIELDS; f++)
            partial[t * ST_FIELDS + f] = slot[0].v[t][f];
}

static int stats_launch(const pf_stage_args *a)
{
    const pf_image in = a->in[0];
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0 || in.width <= 0)
        return 0;
    int chunk_rows, blocks;
    st_blocks(y1 - y0, &chunk_rows, &blocks);
    const size_t need = sizeof(st_part) * (size_t)blocks;
    if (pf_cuda_scratch_short(a, "stats", need))
        return 1;
    cudaStream_t st = (cudaStream_t)a->stream;
    st_part *part = (st_part *)a->scratch;
    stats_block_kernel<<<blocks, NT, 0, st>>>(in, y0, y1, chunk_rows, part);
    if (pf_cuda_check(a, "stats"))
        return 1;
    stats_merge_kernel<<<1, ST_MAX_BLOCKS, 0, st>>>(part, blocks, a->partial);
    return pf_cuda_check(a, "stats");
}

/* ---- Entry points (see analysis.c's descriptors) ------------------------------------- */

extern "C" {

int histogram_cuda(const pf_stage_args *a)
{
    return histogram_launch(a);
}
int colsum_cuda(const pf_stage_args *a)
{
    return colsum_launch(a);
}
int rowsum_cuda(const pf_stage_args *a)
{
    return rowsum_launch(a);
}
int stats_cuda(const pf_stage_args *a)
{
    return stats_launch(a);
}

/* rows: input rows of the largest band. */
size_t colsum_cuda_scratch(const void *params, int width, int rows)
{
    int chunk_rows, chunks;
    col_chunks(rows, &chunk_rows, &chunks);
    return (size_t)chunks * (size_t)width * sizeof(sum4);
}
size_t stats_cuda_scratch(const void *params, int width, int rows)
{
    int chunk_rows, blocks;
    st_blocks(rows, &chunk_rows, &blocks);
    return sizeof(st_part) * (size_t)blocks;
}

} /* extern "C" */
