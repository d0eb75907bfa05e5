/* plugins/filter/filter_cuda.cu: CUDA kernels of the filter family (gaussian, box,
 * sobel, unsharp, median3), the same arithmetic as filter.c in the same order.
 *
 * Params live in device memory and may change between replays of a captured graph, so
 * nothing here reads them on the host: every launch configuration, shared-memory size
 * and scratch size depends on image sizes only, and is made for the largest radius
 * (192 for gaussian and unsharp, 64 for box). Kernels read the radius and build their
 * taps on the device: each block of the horizontal pass builds them, and one of those
 * blocks stores them after the scratch rows for the vertical pass of the same launch.
 *
 * Rounding: every float sum and product goes through __fadd_rn / __fmul_rn (and
 * __fsqrt_rn, __fdiv_rn), so nvcc cannot contract them into FMAs; the CPU build (ISO C,
 * no FMA contraction) rounds each operation the same way. With equal taps a pixel is
 * bit-identical to the CPU's. Box taps are always equal; gaussian taps come from the
 * device's double exp(), which may differ from libm's in the last bit, so a gaussian
 * tap may differ by one float ulp from the CPU's.
 *
 * The separable stages run two passes through scratch, as the CPU does: the horizontal
 * pass over the band's rows plus the halo (clamped to the image), then the vertical
 * pass, which reads only rows that this band's horizontal pass wrote; so a band's
 * output does not depend on other bands, and banded runs are bit-identical.
 *
 * Alpha (premultiply.h), as filter.c: with the stage's alpha param premultiplied, the
 * horizontal pass premultiplies each pixel as it stages it (filter.c premultiplies only
 * rows holding an alpha other than 1, where c * 1 would give the same values) and the
 * vertical pass divides the colours by the summed alpha; every sum is normalised by the
 * weights' float sum taken in filter.c's order (pf_norm_colour; where every pixel read
 * is opaque the summed alpha is that sum, so filter.c's straight division of opaque
 * rows gives the same bits). The param's offset in the params struct is a kernel argument
 * (it differs between gaussian, box and unsharp); its value is read on the device.
 */
#include "pipefuse/cuda.cuh"

#include "filter.h"

#define GAUSS_RMAX 192 /* ceil(3 * PF_GAUSSIAN_MAX_SIGMA) */
#define BOX_RMAX   PF_BOX_MAX_RADIUS

enum { K_GAUSS, K_BOX };        /* where the taps come from */
enum { EPI_COPY, EPI_UNSHARP }; /* what the vertical pass does with its sum */

template <int KIND> struct kind_traits;
template <> struct kind_traits<K_GAUSS> {
    static const int rmax = GAUSS_RMAX;
};
template <> struct kind_traits<K_BOX> {
    static const int rmax = BOX_RMAX;
};

/* ---- Float4 arithmetic, rounded like the CPU ----------------------------------------- */

static __device__ __forceinline__ int clampi_d(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static __device__ __forceinline__ float4 f4_scale(float4 a, float s)
{
    return make_float4(__fmul_rn(a.x, s), __fmul_rn(a.y, s), __fmul_rn(a.z, s), __fmul_rn(a.w, s));
}

/* acc + s * (a + b), as filter.c's f4_pair */
static __device__ __forceinline__ float4 f4_pair(float4 acc, float s, float4 a, float4 b)
{
    return make_float4(__fadd_rn(acc.x, __fmul_rn(s, __fadd_rn(a.x, b.x))),
                       __fadd_rn(acc.y, __fmul_rn(s, __fadd_rn(a.y, b.y))),
                       __fadd_rn(acc.z, __fmul_rn(s, __fadd_rn(a.z, b.z))),
                       __fadd_rn(acc.w, __fmul_rn(s, __fadd_rn(a.w, b.w))));
}

/* A failed precondition: "<what>: <message>" in a->err, and 1. */
static int fail(const pf_stage_args *a, const char *what, const char *fmt, size_t x, size_t y)
{
    if (a->err && a->err_size) {
        int n = snprintf(a->err, a->err_size, "%s: ", what);
        if (n > 0 && (size_t)n < a->err_size)
            snprintf(a->err + n, a->err_size - (size_t)n, fmt, x, y);
    }
    return 1;
}

/* ---- Taps, built on the device ------------------------------------------------------- */

/* The radius of a stage's kernel, from its params (device memory), as filter.c. */
template <int KIND> static __device__ __forceinline__ int taps_radius(const void *params);

template <> __device__ __forceinline__ int taps_radius<K_GAUSS>(const void *params)
{
    /* unsharp's sigma is its first field too (filter.c asserts it) */
    double sigma = *(const float *)params;
    sigma = sigma > 0 ? fmin(sigma, (double)PF_GAUSSIAN_MAX_SIGMA) : 0; /* NaN: 0 */
    return (int)ceil(__dmul_rn(3.0, sigma));
}

template <> __device__ __forceinline__ int taps_radius<K_BOX>(const void *params)
{
    return clampi_d(((const pf_box_params *)params)->radius, 0, PF_BOX_MAX_RADIUS);
}

/* Fills w[0..r] with the normalised taps, with the whole block; tmp holds r + 1
   doubles and may alias memory the caller uses only after this returns. The gaussian's
   normalising sum is taken in filter.c's order, by one thread. */
template <int KIND>
static __device__ void build_taps(const void *params, int r, float *w, double *tmp, double *sum_s)
{
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int nt = blockDim.x * blockDim.y;
    if (KIND == K_BOX) {
        const float v = __fdiv_rn(1.0f, (float)(2 * r + 1));
        for (int i = tid; i <= r; i += nt)
            w[i] = v;
        __syncthreads();
        return;
    }
    double sigma = *(const float *)params;
    sigma = sigma > 0 ? fmin(sigma, (double)PF_GAUSSIAN_MAX_SIGMA) : 0;
    const double den = __dmul_rn(__dmul_rn(2.0, sigma), sigma);
    for (int i = tid; i <= r; i += nt)
        tmp[i] = r ? exp(__ddiv_rn(__dmul_rn(-(double)i, (double)i), den)) : 1.0;
    __syncthreads();
    if (tid == 0) {
        double sum = 0;
        for (int i = 0; i <= r; i++)
            sum = __dadd_rn(sum, i ? __dmul_rn(2.0, tmp[i]) : tmp[i]);
        *sum_s = sum;
    }
    __syncthreads();
    for (int i = tid; i <= r; i += nt)
        w[i] = __double2float_rn(__ddiv_rn(tmp[i], *sum_s));
    __syncthreads();
}

/* ---- Alpha --------------------------------------------------------------------------- */

/* Whether the params at p ask for premultiplied alpha (the int at byte alpha_off). */
static __device__ __forceinline__ bool premultiplied(const void *params, int alpha_off)
{
    return *(const int *)((const char *)params + alpha_off) != PF_ALPHA_STRAIGHT;
}

static __device__ __forceinline__ float4 pm4(float4 v)
{
    const float a = pf_pm_alpha(v.w);
    return make_float4(pf_pm_mul(v.x, a), pf_pm_mul(v.y, a), pf_pm_mul(v.z, a), a);
}

/* filter.c's weight_sum: the taps w[0..r] summed as both passes sum alpha 1. */
static __device__ float weight_sum(const float *w, int r)
{
    float h = __fmul_rn(1.0f, w[0]);
    for (int t = 1; t <= r; t++)
        h = __fadd_rn(h, __fmul_rn(w[t], 2.0f));
    float v = __fmul_rn(h, w[0]);
    for (int t = 1; t <= r; t++)
        v = __fadd_rn(v, __fmul_rn(w[t], __fadd_rn(h, h)));
    return v;
}

/* ---- Horizontal pass ----------------------------------------------------------------- */

/* One block: H_TW columns of up to rows_per_block source rows. Each row's segment plus
   the halo (clamped to the edge, so it holds what filter.c's clamped reads see) goes to
   shared memory, where each thread sums its pixel's taps. The segments alternate between
   two buffers, and the next row's loads are issued before this row's sums, so a block
   waits on memory once, at its first row. Source rows [max(y0 - r, 0), min(y1 + r, h))
   are computed, into tmp row (y - s0), as filter.c. The block holding the first of them
   in its first column also stores the taps and their weight sum (taps_out: w[0..r],
   then the sum at RMAX + 1) for the vertical pass. */
#define H_TW  256
#define H_RPB 16 /* rows per block, doubled while the grid is too tall */

/* A thread's part of row's segment: elements tx, tx + H_TW, ... below n, clamped. */
template <int NPRE>
static __device__ __forceinline__ void seg_load(float4 (&pre)[NPRE], const pf_image &in, int row,
                                                int tx, int n, int x0, int r)
{
    const float4 *src = pf_row_d(in, row);
#pragma unroll
    for (int m = 0; m < NPRE; m++) {
        const int j = tx + m * H_TW;
        if (j < n)
            pre[m] = src[clampi_d(x0 - r + j, 0, in.width - 1)];
    }
}

template <int KIND>
__global__ void __launch_bounds__(H_TW)
    sep_h_kernel(const void *__restrict__ params, int alpha_off, pf_image in,
                 float4 *__restrict__ tmp, float *__restrict__ taps_out, int s0, int y0, int y1,
                 int rows_per_block)
{
    const int RMAX = kind_traits<KIND>::rmax;
    const int NPRE = (2 * H_TW + 2 * RMAX - 1) / H_TW; /* loads a thread makes per row */
    __shared__ float4 seg[2][H_TW + 2 * RMAX];
    __shared__ float w[RMAX + 1];
    __shared__ double sum_s;
    static_assert(sizeof(seg) >= sizeof(double) * (RMAX + 1), "taps scratch fits in seg");

    const int r = taps_radius<KIND>(params);
    const int wd = in.width, h = in.height;
    const int lo_all = max(y0 - r, 0), hi_all = min(y1 + r, h);
    const int row0 = s0 + blockIdx.y * rows_per_block;
    const int lo = max(row0, lo_all), hi = min(row0 + rows_per_block, hi_all);
    if (lo >= hi) /* rows only a larger radius needs: the same for the whole block */
        return;
    build_taps<KIND>(params, r, w, (double *)&seg[0][0], &sum_s);
    if (blockIdx.x == 0 && lo == lo_all && threadIdx.x == 0) {
        for (int i = 0; i <= r; i++)
            taps_out[i] = w[i];
        taps_out[RMAX + 1] = weight_sum(w, r);
    }
    const bool pm = r > 0 && premultiplied(params, alpha_off); /* as filter.c */

    const int x0 = blockIdx.x * H_TW, tx = threadIdx.x, x = x0 + tx;
    const int n = min(H_TW, wd - x0) + 2 * r; /* segment length */
    float4 pre[NPRE];
    seg_load<NPRE>(pre, in, lo, tx, n, x0, r);
    int b = 0;
    for (int y = lo; y < hi; y++, b ^= 1) {
        /* seg[b] was last read two rows ago, before the barrier of the row between */
#pragma unroll
        for (int m = 0; m < NPRE; m++) {
            const int j = tx + m * H_TW;
            if (j < n)
                seg[b][j] = pm ? pm4(pre[m]) : pre[m];
        }
        __syncthreads();
        if (y + 1 < hi)
            seg_load<NPRE>(pre, in, y + 1, tx, n, x0, r);
        if (x < wd) {
            const float4 *c = seg[b] + tx + r;
            float4 acc = f4_scale(c[0], w[0]);
            for (int i = 1; i <= r; i++)
                acc = f4_pair(acc, w[i], c[-i], c[i]);
            tmp[(size_t)(y - s0) * (size_t)wd + x] = acc;
        }
    }
}

/* ---- Vertical pass ------------------------------------------------------------------- */

/* One block: a tile of V_TX columns by V_TH output rows; each thread sums V_RPT
   consecutive rows of one column, reading tmp straight from memory (the block's rows
   stay in L1 for the warps that share them). For its outputs yb .. yb + V_RPT - 1 a
   thread keeps u[j] = row yb + j - i and d[j] = row yb + j + i in registers and slides
   them by one row a tap: two loads a tap for V_RPT outputs. Taps are added in filter.c's
   order (i = 1, 2, ..., r), each as acc + w_i * (up + down). The taps and their weight
   sum come from the horizontal pass (taps: w[0..r], the sum at RMAX + 1). */
#define V_TX  32
#define V_TY  8
#define V_RPT 4
#define V_TH  (V_TY * V_RPT)

template <int KIND, int EPI>
__global__ void __launch_bounds__(V_TX *V_TY)
    sep_v_kernel(const void *__restrict__ params, int alpha_off, const float4 *__restrict__ tmp,
                 const float *__restrict__ taps, int s0, pf_image in, pf_image out, int y0, int y1)
{
    const int RMAX = kind_traits<KIND>::rmax;
    __shared__ float w[RMAX + 1];
    __shared__ float wsum_s;

    const int r = taps_radius<KIND>(params);
    const int tid = threadIdx.y * V_TX + threadIdx.x;
    for (int i = tid; i <= r; i += V_TX * V_TY)
        w[i] = taps[i];
    if (tid == 0)
        wsum_s = taps[RMAX + 1];
    const bool pm = r > 0 && premultiplied(params, alpha_off); /* the same for the block */
    __syncthreads();

    const int wd = in.width, h = in.height;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = blockIdx.x * V_TX + tx, xc = min(x, wd - 1);
    const int yb = y0 + blockIdx.y * V_TH + ty * V_RPT;
    /* Rows of tmp the horizontal pass wrote. A wanted output reads only these (its
       clamped rows lie in them); clamping again keeps the rows past y1 of a tile, whose
       results are dropped, inside them too. */
    const int lo = max(y0 - r, 0), hi = min(y1 + r, h) - 1;
    const float4 *col = tmp + xc;
#define TROW(row) col[(size_t)(clampi_d(clampi_d((row), 0, h - 1), lo, hi) - s0) * (size_t)wd]

    float4 acc[V_RPT], u[V_RPT], d[V_RPT];
    {
        float4 c[V_RPT + 2]; /* rows yb - 1 .. yb + V_RPT */
#pragma unroll
        for (int j = 0; j < V_RPT + 2; j++)
            c[j] = TROW(yb - 1 + j);
#pragma unroll
        for (int j = 0; j < V_RPT; j++) {
            acc[j] = f4_scale(c[j + 1], w[0]);
            u[j] = c[j];
            d[j] = c[j + 2];
        }
    }
#pragma unroll 2
    for (int i = 1; i <= r; i++) {
        const float wi = w[i];
#pragma unroll
        for (int j = 0; j < V_RPT; j++)
            acc[j] = f4_pair(acc[j], wi, u[j], d[j]);
            /* the next tap's rows: each window moves one row outwards */
#pragma unroll
        for (int j = V_RPT - 1; j > 0; j--)
            u[j] = u[j - 1];
#pragma unroll
        for (int j = 0; j < V_RPT - 1; j++)
            d[j] = d[j + 1];
        u[0] = TROW(yb - i - 1);
        d[V_RPT - 1] = TROW(yb + V_RPT + i);
    }
#undef TROW

    if (x >= wd)
        return;
#pragma unroll
    for (int j = 0; j < V_RPT; j++) {
        const int y = yb + j;
        if (y >= y1)
            break;
        float4 o = acc[j];
        if (wsum_s != 1.0f || pm) { /* premultiply.h's pf_norm_colour, as filter.c */
            o.x = pf_norm_colour(o.x, o.w, wsum_s, pm);
            o.y = pf_norm_colour(o.y, o.w, wsum_s, pm);
            o.z = pf_norm_colour(o.z, o.w, wsum_s, pm);
            o.w = __fdiv_rn(o.w, wsum_s);
        }
        if (EPI == EPI_UNSHARP) { /* filter.c's sharpen(), RGB only; alpha passes */
            const pf_unsharp_params *p = (const pf_unsharp_params *)params;
            const float amount = p->amount, thr = p->threshold;
            const float4 s = pf_row_d(in, y)[x];
#define SHARPEN(c)                                                                                 \
    do {                                                                                           \
        const float d_ = __fsub_rn(s.c, o.c);                                                      \
        o.c = fabsf(d_) > thr ? __fadd_rn(s.c, __fmul_rn(amount, d_)) : s.c;                       \
    } while (0)
            SHARPEN(x);
            SHARPEN(y);
            SHARPEN(z);
#undef SHARPEN
            o.w = s.w;
        }
        pf_row_d(out, y)[x] = o;
    }
}

/* ---- Separable launchers ------------------------------------------------------------- */

/* Scratch: the band's rows plus the largest halo above and below, whatever the params,
   then the taps (RMAX + 2 floats, rounded up to a float4). */
template <int KIND> static size_t sep_taps_at(int width, int rows)
{
    return (size_t)width * (size_t)rows * sizeof(float4);
}
template <int KIND> static size_t separable_scratch(int width, int rows)
{
    const size_t taps = PF_CEIL_DIV(kind_traits<KIND>::rmax + 2, 4) * sizeof(float4);
    return sep_taps_at<KIND>(width, rows + 2 * kind_traits<KIND>::rmax) + taps;
}

template <int KIND, int EPI>
static int separable_launch(const pf_stage_args *a, int alpha_off, const char *what)
{
    const pf_image in = a->in[0];
    const int y0 = a->region.y0, y1 = a->region.y1, RMAX = kind_traits<KIND>::rmax;
    if (y1 <= y0 || in.width <= 0)
        return 0;
    /* Rows the horizontal pass may write for any radius up to RMAX. */
    const int s0 = max(y0 - RMAX, 0), s1 = min(y1 + RMAX, in.height);
    const size_t rows_bytes = sep_taps_at<KIND>(in.width, s1 - s0);
    const size_t need = rows_bytes + PF_CEIL_DIV(RMAX + 2, 4) * sizeof(float4);
    if (pf_cuda_scratch_short(a, what, need))
        return 1;
    const int hrows = s1 - s0;
    int rpb = H_RPB;
    while (PF_CEIL_DIV(hrows, rpb) > 65535)
        rpb *= 2;
    const int vtiles = PF_CEIL_DIV(y1 - y0, V_TH);
    if (vtiles > 65535)
        return fail(a, what, "a band of %zu rows is too tall for one launch (at most %zu)",
                    (size_t)(y1 - y0), (size_t)65535 * V_TH);
    cudaStream_t st = (cudaStream_t)a->stream;
    float4 *tmp = (float4 *)a->scratch;
    float *taps = (float *)((char *)a->scratch + rows_bytes);
    dim3 hg(PF_CEIL_DIV(in.width, H_TW), PF_CEIL_DIV(hrows, rpb));
    sep_h_kernel<KIND><<<hg, H_TW, 0, st>>>(a->params, alpha_off, in, tmp, taps, s0, y0, y1, rpb);
    if (pf_cuda_check(a, what))
        return 1;
    dim3 vb(V_TX, V_TY), vg(PF_CEIL_DIV(in.width, V_TX), vtiles);
    sep_v_kernel<KIND, EPI>
        <<<vg, vb, 0, st>>>(a->params, alpha_off, tmp, taps, s0, in, a->out, y0, y1);
    return pf_cuda_check(a, what);
}

/* ---- 3x3 stages: sobel, median3 ------------------------------------------------------ */

/* One block: a 32 x 8 tile of outputs; the tile plus a one-pixel halo, clamped to the
   edge, is staged in shared memory with coalesced loads. The per-pixel functions are
   kernels/point/filter3x3_ops.h's, which filter.c and fused kernels share. */
#define T3_X 32
#define T3_Y 8

enum { OP_SOBEL, OP_MEDIAN };

template <int OP>
__global__ void __launch_bounds__(T3_X *T3_Y)
    k3x3_kernel(const void *__restrict__ params, pf_image in, pf_image out, int y0, int y1)
{
    __shared__ float4 t[T3_Y + 2][T3_X + 2];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * T3_X + tx;
    const int X0 = blockIdx.x * T3_X, Y0 = y0 + blockIdx.y * T3_Y;
    for (int k = tid; k < (T3_Y + 2) * (T3_X + 2); k += T3_X * T3_Y) {
        const int ly = k / (T3_X + 2), lx = k - ly * (T3_X + 2);
        t[ly][lx] = pf_at_clamped_d(in, X0 + lx - 1, Y0 + ly - 1);
    }
    __syncthreads();
    const int x = X0 + tx, y = Y0 + ty;
    if (x >= out.width || y >= y1)
        return;
    /* n[j * 3 + i] of filter.c is t[ty + j][tx + i] */
    float4 n[9];
#pragma unroll
    for (int k = 0; k < 9; k++)
        n[k] = t[ty + k / 3][tx + k % 3];
    const float4 o = OP == OP_SOBEL ? sobel_px((const pf_sobel_params *)params, n)
                                    : median3_px((const pf_median3_params *)params, n);
    pf_row_d(out, y)[x] = o;
}

template <int OP> static int launch3x3(const pf_stage_args *a, const char *what)
{
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0 || a->out.width <= 0)
        return 0;
    const int tiles = PF_CEIL_DIV(y1 - y0, T3_Y);
    if (tiles > 65535)
        return fail(a, what, "a band of %zu rows is too tall for one launch (at most %zu)",
                    (size_t)(y1 - y0), (size_t)65535 * T3_Y);
    dim3 b(T3_X, T3_Y), g(PF_CEIL_DIV(a->out.width, T3_X), tiles);
    k3x3_kernel<OP><<<g, b, 0, (cudaStream_t)a->stream>>>(a->params, a->in[0], a->out, y0, y1);
    return pf_cuda_check(a, what);
}

/* ---- Entry points (see filter.c's descriptors) --------------------------------------- */

extern "C" {

int gaussian_cuda(const pf_stage_args *a)
{
    return separable_launch<K_GAUSS, EPI_COPY>(a, offsetof(pf_gaussian_params, alpha), "gaussian");
}
int box_cuda(const pf_stage_args *a)
{
    return separable_launch<K_BOX, EPI_COPY>(a, offsetof(pf_box_params, alpha), "box");
}
int unsharp_cuda(const pf_stage_args *a)
{
    return separable_launch<K_GAUSS, EPI_UNSHARP>(a, offsetof(pf_unsharp_params, alpha), "unsharp");
}
int sobel_cuda(const pf_stage_args *a)
{
    return launch3x3<OP_SOBEL>(a, "sobel");
}
int median3_cuda(const pf_stage_args *a)
{
    return launch3x3<OP_MEDIAN>(a, "median3");
}

/* Sized for the largest radius, so a changed sigma or radius never needs more. */
size_t gaussian_cuda_scratch(const void *params, int width, int rows)
{
    return separable_scratch<K_GAUSS>(width, rows);
}
size_t box_cuda_scratch(const void *params, int width, int rows)
{
    return separable_scratch<K_BOX>(width, rows);
}

} /* extern "C" */
