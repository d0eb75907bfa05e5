/* plugins/geometry/geometry_cuda.cu: CUDA kernels of the geometry family (resize, crop,
 * flip, rotate, pad), the same coordinate maps and the same resize arithmetic as
 * geometry.c.
 *
 * Params are read on the device only (they may change between graph replays); launch
 * configurations depend on the image sizes alone. Output sizes are fixed per plan.
 *
 * crop, flip, quarter turns and pad copy pixels, so they are bit-identical to the CPU.
 * rotate by any angle computes its sin, cos and source positions with geometry.h's
 * host-and-device helpers and its bilinear sum like resize, bit-identical too. resize
 * repeats geometry.c's double arithmetic operation by operation, through __dmul_rn,
 * __dadd_rn, __dsub_rn and __ddiv_rn so that nvcc cannot contract a product and a sum
 * into an FMA (the CPU build does not contract either), in the same tap order: its
 * outputs are bit-identical to the CPU's too. The taps (pf_axis_span, pf_span_weight)
 * and the straight or premultiplied sums (pf_acc4) are geometry.h's, compiled here
 * for the device.
 */
#include "pipefuse/cuda.cuh"

#include "geometry.h"

static int too_tall(const pf_stage_args *a, const char *what, int rows, int per_block)
{
    if (a->err && a->err_size)
        snprintf(a->err, a->err_size,
                 "%s: a band of %d rows is too tall for one launch (at most %d)", what, rows,
                 65535 * per_block);
    return 1;
}

/* ---- Coordinate maps: crop, flip, pad, rotate by 180 --------------------------------- */

/* One thread per output pixel, 16-byte loads and stores; a warp covers 32 consecutive
   pixels of a row, so both sides are coalesced (flip reads its row backwards). */
#define M_X 32
#define M_Y 8

enum { MAP_CROP, MAP_FLIP, MAP_PAD };

template <int MAP>
__global__ void __launch_bounds__(M_X *M_Y)
    map_kernel(const void *__restrict__ params, pf_image in, pf_image out, int y0, int y1)
{
    const int x = blockIdx.x * M_X + threadIdx.x;
    const int y = y0 + blockIdx.y * M_Y + threadIdx.y;
    if (x >= out.width || y >= y1)
        return;
    const int w = in.width, h = in.height;
    int sx, sy;
    float4 v;
    if (MAP == MAP_CROP) {
        const pf_crop_params *p = (const pf_crop_params *)params;
        long long x0, y0; /* geometry.h: where the gravity puts the planned size */
        pf_crop_origin(p, w, h, out.width, out.height, &x0, &y0);
        sx = x + (int)x0;
        sy = y + (int)y0;
        if (sx >= 0 && sx < w && sy >= 0 && sy < h)
            v = pf_row_d(in, sy)[sx];
        else /* outside pad */
            v = make_float4(p->color[0], p->color[1], p->color[2], p->color[3]);
    } else if (MAP == MAP_FLIP) {
        const int axis = ((const pf_flip_params *)params)->axis;
        sx = axis == PF_FLIP_VERTICAL ? x : w - 1 - x;
        sy = axis == PF_FLIP_HORIZONTAL ? y : h - 1 - y;
        v = pf_at_clamped_d(in, sx, sy);
    } else {
        const pf_pad_params *p = (const pf_pad_params *)params;
        sx = x - p->left;
        sy = y - p->top;
        if (sx >= 0 && sx < w && sy >= 0 && sy < h)
            v = pf_row_d(in, sy)[sx];
        else
            v = make_float4(p->color[0], p->color[1], p->color[2], p->color[3]);
    }
    pf_row_d(out, y)[x] = v;
}

template <int MAP> static int launch_map(const pf_stage_args *a, const char *what)
{
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0 || a->out.width <= 0)
        return 0;
    const int tiles = PF_CEIL_DIV(y1 - y0, M_Y);
    if (tiles > 65535)
        return too_tall(a, what, y1 - y0, M_Y);
    dim3 b(M_X, M_Y), g(PF_CEIL_DIV(a->out.width, M_X), tiles);
    map_kernel<MAP><<<g, b, 0, (cudaStream_t)a->stream>>>(a->params, a->in[0], a->out, y0, y1);
    return pf_cuda_check(a, what);
}

/* ---- rotate -------------------------------------------------------------------------- */

/* One block: a 32 x 32 output tile, 32 x 8 threads, 4 rows each. A quarter turn reads
   a column of the input per output row: the block reads the matching 32 x 32 input tile
   row by row (coalesced), keeps it in shared memory transposed (33 float4 a row, so the
   transposed reads are free of bank conflicts) and writes output rows, coalesced. A half
   turn maps rows to rows and goes straight through. The angle is read on the device,
   the same for every block. */
#define R_T 32
#define R_Y 8

/* Any angle, for output column x from row y in steps of R_Y: geometry.c's
   rotate_any_run, operation for operation (bilinear in double, fill outside). */
static __device__ void rotate_any(const pf_rotate_params *__restrict__ p, const pf_image &in,
                                  const pf_image &out, int x, int y, int y1)
{
    if (x >= out.width)
        return;
    double s, c;
    pf_sincos_deg((double)p->degrees, &s, &c);
    const float4 fill = make_float4(p->fill[0], p->fill[1], p->fill[2], p->fill[3]);
    const int pm = p->alpha != PF_ALPHA_STRAIGHT;
    for (int k = 0; k < R_T / R_Y; k++, y += R_Y) {
        if (y >= y1)
            return;
        double fx, fy;
        int x0, y0;
        pf_rotate_source(s, c, out.width, out.height, in.width, in.height, x, y, &x0, &y0, &fx,
                         &fy);
        pf_acc4 acc = {{0, 0, 0, 0}, 0};
        for (int t = 0; t < 4; t++) {
            const int ix = x0 + (t & 1), iy = y0 + (t >> 1);
            const double wt =
                __dmul_rn(t & 1 ? fx : __dsub_rn(1.0, fx), t >> 1 ? fy : __dsub_rn(1.0, fy));
            if (wt == 0)
                continue;
            const float4 v =
                ix >= 0 && ix < in.width && iy >= 0 && iy < in.height ? pf_row_d(in, iy)[ix] : fill;
            pf_acc4_add(&acc, pm, wt, v.x, v.y, v.z, v.w);
        }
        pf_row_d(out, y)[x] = make_float4(pf_acc4_out(&acc, pm, 0), pf_acc4_out(&acc, pm, 1),
                                          pf_acc4_out(&acc, pm, 2), pf_acc4_out(&acc, pm, 3));
    }
}

__global__ void __launch_bounds__(R_T *R_Y)
    rotate_kernel(const pf_rotate_params *__restrict__ p, pf_image in, pf_image out, int y0, int y1)
{
    __shared__ float4 t[R_T][R_T + 1];
    const int angle = p->angle;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int X0 = blockIdx.x * R_T, Y0 = y0 + blockIdx.y * R_T;
    const int w = in.width, h = in.height;
    if (p->degrees != 0) { /* any angle: the same for every block, before any barrier */
        rotate_any(p, in, out, X0 + tx, Y0 + ty, y1);
        return;
    }
    if (angle != PF_ROTATE_90 && angle != PF_ROTATE_270) { /* geometry.c's default: 180 */
        const int x = X0 + tx;
        for (int k = ty; k < R_T; k += R_Y) {
            const int y = Y0 + k;
            if (x < out.width && y < y1)
                pf_row_d(out, y)[x] = pf_at_clamped_d(in, w - 1 - x, h - 1 - y);
        }
        return;
    }
    /* t[lx][ly] holds the source of output (X0 + lx, Y0 + ly). 90: (sx, sy) = (y,
       h - 1 - x); 270: (w - 1 - y, x). Loads run along sx, that is along ly = tx. */
    for (int lx = ty; lx < R_T; lx += R_Y) {
        const int ox = X0 + lx, oy = Y0 + tx;
        const int sx = angle == PF_ROTATE_90 ? oy : w - 1 - oy;
        const int sy = angle == PF_ROTATE_90 ? h - 1 - ox : ox;
        t[lx][tx] = pf_at_clamped_d(in, sx, sy);
    }
    __syncthreads();
    const int x = X0 + tx;
    for (int ly = ty; ly < R_T; ly += R_Y) {
        const int y = Y0 + ly;
        if (x < out.width && y < y1)
            pf_row_d(out, y)[x] = t[tx][ly];
    }
}

static int launch_rotate(const pf_stage_args *a)
{
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0 || a->out.width <= 0)
        return 0;
    const int tiles = PF_CEIL_DIV(y1 - y0, R_T);
    if (tiles > 65535)
        return too_tall(a, "rotate", y1 - y0, R_T);
    dim3 b(R_T, R_Y), g(PF_CEIL_DIV(a->out.width, R_T), tiles);
    rotate_kernel<<<g, b, 0, (cudaStream_t)a->stream>>>((const pf_rotate_params *)a->params,
                                                        a->in[0], a->out, y0, y1);
    return pf_cuda_check(a, "rotate");
}

/* ---- resize -------------------------------------------------------------------------- */

/* One thread per output pixel; its taps summed in double in geometry.c's order (rows of
   taps outer, columns inner), skipping zero weights as there. */
#define RZ_CACHE 32
__global__ void __launch_bounds__(M_X *M_Y)
    resize_kernel(const pf_resize_params *__restrict__ p, pf_image in, pf_image out, int y0, int y1)
{
    const int x = blockIdx.x * M_X + threadIdx.x;
    const int y = y0 + blockIdx.y * M_Y + threadIdx.y;
    if (x >= out.width || y >= y1)
        return;
    const int mode = p->mode, aa = p->antialias;
    const int pm = p->alpha != PF_ALPHA_STRAIGHT && mode != PF_RESIZE_NEAREST; /* as geometry.c */
    const pf_span sy = pf_axis_span(mode, aa, in.height, out.height, y);
    const pf_span sx = pf_axis_span(mode, aa, in.width, out.width, x);
    /* the column's taps computed once where they fit (a filter's weight costs a sine
       for Lanczos), else again for every row of taps: the same doubles either way */
    double wxs[RZ_CACHE];
    int ixs[RZ_CACHE];
    const int cached = sx.count <= RZ_CACHE;
    for (int i = 0; cached && i < sx.count; i++)
        wxs[i] = pf_span_weight(&sx, i, &ixs[i]);
    pf_acc4 acc = {{0, 0, 0, 0}, 0};
    for (int j = 0; j < sy.count; j++) {
        int iy, ix;
        const double wy = pf_span_weight(&sy, j, &iy);
        const float4 *src = pf_row_d(in, iy);
        for (int i = 0; i < sx.count; i++) {
            const double wx = cached ? (ix = ixs[i], wxs[i]) : pf_span_weight(&sx, i, &ix);
            const double wt = __dmul_rn(wy, wx);
            if (wt == 0)
                continue;
            const float4 v = src[ix];
            pf_acc4_add(&acc, pm, wt, v.x, v.y, v.z, v.w);
        }
    }
    pf_row_d(out, y)[x] = make_float4(pf_acc4_out(&acc, pm, 0), pf_acc4_out(&acc, pm, 1),
                                      pf_acc4_out(&acc, pm, 2), pf_acc4_out(&acc, pm, 3));
}

static int launch_resize(const pf_stage_args *a)
{
    const int y0 = a->region.y0, y1 = a->region.y1;
    if (y1 <= y0 || a->out.width <= 0)
        return 0;
    const int tiles = PF_CEIL_DIV(y1 - y0, M_Y);
    if (tiles > 65535)
        return too_tall(a, "resize", y1 - y0, M_Y);
    dim3 b(M_X, M_Y), g(PF_CEIL_DIV(a->out.width, M_X), tiles);
    resize_kernel<<<g, b, 0, (cudaStream_t)a->stream>>>((const pf_resize_params *)a->params,
                                                        a->in[0], a->out, y0, y1);
    return pf_cuda_check(a, "resize");
}

/* ---- Entry points (see geometry.c's descriptors) ------------------------------------- */

extern "C" {

int resize_cuda(const pf_stage_args *a)
{
    return launch_resize(a);
}
int crop_cuda(const pf_stage_args *a)
{
    return launch_map<MAP_CROP>(a, "crop");
}
int flip_cuda(const pf_stage_args *a)
{
    return launch_map<MAP_FLIP>(a, "flip");
}
int rotate_cuda(const pf_stage_args *a)
{
    return launch_rotate(a);
}
int pad_cuda(const pf_stage_args *a)
{
    return launch_map<MAP_PAD>(a, "pad");
}

} /* extern "C" */
