/* plugins/geometry/geometry_native.c: crop, flip, quarter turns, pad and nearest resize
 * in the frames' own format, for the CPU executor when a stage reads a caller frame and
 * writes one of the same format.
 *
 * Why the bytes are those of the float path (geometry.c's run_cpu between the engine's
 * load and store): there every output pixel is one input pixel, copied as float RGBA,
 * or pad's fill. An 8- or 16-bit sample loads as k / max and stores as
 * trunc(k / max * max + 0.5) = k, and a gray pixel's luma is its gray value exactly, so
 * the float path stores the very samples it loaded: copying the samples is the same.
 * The fill goes through the engine's own store (a->from_float4). The source of each
 * output pixel is the same one geometry.c's maps give: each output row of these stages
 * is a line through the input, (sx + x dx, sy + x dy); nearest takes the tap that
 * resize_run takes.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry.h"
#include "geometry_native.h"

static const unsigned char zero_px[4 * sizeof(float)]; /* the largest pixel, RGBA float */

/* Where output row y starts in the input and how it steps along x. */
typedef struct row_line {
    long long sx, sy;
    int dx, dy;
} row_line;

static const unsigned char *in_px(const pf_native_args *a, long long x, long long y)
{
    return (const unsigned char *)a->in + (size_t)y * a->in_pitch + (size_t)x * a->pixel_bytes;
}

/* n pixels of pb bytes from s, step bytes apart (negative: backwards), to d; a loop
   per pixel size, each copy a fixed-size move. */
static void copy_strided(unsigned char *d, const unsigned char *s, int n, size_t pb, ptrdiff_t step)
{
#define STRIDED(N)                                                                                 \
    for (int x = 0; x < n; x++)                                                                    \
        memcpy(d + (size_t)x * (N), s + (ptrdiff_t)x * step, (N));                                 \
    break
    switch (pb) {
    case 1:
        STRIDED(1);
    case 2:
        STRIDED(2);
    case 3:
        STRIDED(3);
    case 4:
        STRIDED(4);
    case 6:
        STRIDED(6);
    case 8:
        STRIDED(8);
    default:
        STRIDED(pb);
    }
#undef STRIDED
}

/* n pixels of pb bytes from s at the pixel indices idx, to d. */
static void copy_gather(unsigned char *d, const unsigned char *s, const int *idx, int n, size_t pb)
{
#define GATHER(N)                                                                                  \
    for (int x = 0; x < n; x++)                                                                    \
        memcpy(d + (size_t)x * (N), s + (size_t)idx[x] * (N), (N));                                \
    break
    switch (pb) {
    case 1:
        GATHER(1);
    case 2:
        GATHER(2);
    case 3:
        GATHER(3);
    case 4:
        GATHER(4);
    case 6:
        GATHER(6);
    case 8:
        GATHER(8);
    default:
        GATHER(pb);
    }
#undef GATHER
}

/* Whether the whole line of an output row w wide lies inside the input (its ends do). */
static int line_inside(row_line l, int w, int iw, int ih)
{
    long long ex = l.sx + (long long)l.dx * (w - 1), ey = l.sy + (long long)l.dy * (w - 1);
    return l.sx >= 0 && l.sx < iw && l.sy >= 0 && l.sy < ih && ex >= 0 && ex < iw && ey >= 0 &&
           ey < ih;
}

/* Rows taken together when their lines are neighbouring input columns (quarter turns),
   and output columns per pass: a tile reads PF_TILE_X input rows of PF_TILE_ROWS
   pixels, which stay in cache from one output row to the next. */
#define PF_TILE_ROWS 16
#define PF_TILE_X    64

/* Output rows of a->region along the lines line(y); pixels outside the input get fill
   (pixel_bytes: pad's border; zero for the others, whose lines never leave the input). */
static int run_lines(const pf_native_args *a, row_line (*line)(const pf_native_args *, int),
                     const unsigned char *fill)
{
    const size_t pb = a->pixel_bytes;
    const int w = a->out_width, iw = a->in_width, ih = a->in_height;
    const ptrdiff_t pitch = (ptrdiff_t)a->in_pitch;
    if (pb > sizeof zero_px) {
        if (a->err && a->err_size)
            snprintf(a->err, a->err_size, "%zu bytes a pixel: at most %zu", pb, sizeof zero_px);
        return -1;
    }
    for (int y = a->region.y0; y < a->region.y1; y++) {
        unsigned char *d = (unsigned char *)a->out + (size_t)y * a->out_pitch;
        row_line l = line(a, y);
        if (l.dy == 0 && l.dx == 1) { /* a run of one input row, between fills */
            long long lo = l.sx < 0 ? -l.sx : 0, hi = l.sx + w > iw ? iw - l.sx : w;
            if (l.sy < 0 || l.sy >= ih || hi < lo)
                lo = hi = w;
            for (long long x = 0; x < lo; x++)
                memcpy(d + (size_t)x * pb, fill, pb);
            if (hi > lo)
                memcpy(d + (size_t)lo * pb, in_px(a, l.sx + lo, l.sy), (size_t)(hi - lo) * pb);
            for (long long x = hi > lo ? hi : lo; x < w; x++)
                memcpy(d + (size_t)x * pb, fill, pb);
            continue;
        }
        if (!line_inside(l, w, iw, ih)) {
            for (int x = 0; x < w; x++) {
                long long sx = l.sx + (long long)l.dx * x, sy = l.sy + (long long)l.dy * x;
                if (sx >= 0 && sx < iw && sy >= 0 && sy < ih)
                    memcpy(d + (size_t)x * pb, in_px(a, sx, sy), pb);
                else
                    memcpy(d + (size_t)x * pb, fill, pb);
            }
            continue;
        }
        if (l.dx != 0) { /* along an input row (backwards: a mirror) */
            copy_strided(d, in_px(a, l.sx, l.sy), w, pb, l.dx * (ptrdiff_t)pb + l.dy * pitch);
            continue;
        }
        /* Down or up an input column: the next rows' lines are the columns beside it. */
        int g = 1;
        long long e = 0;
        while (g < PF_TILE_ROWS && y + g < a->region.y1) {
            row_line n = line(a, y + g);
            if (g == 1)
                e = n.sx - l.sx;
            if (n.dx != 0 || n.dy != l.dy || n.sy != l.sy || n.sx != l.sx + e * g ||
                !line_inside(n, w, iw, ih))
                break;
            g++;
        }
        for (int x0 = 0; x0 < w; x0 += PF_TILE_X) {
            int n = w - x0 < PF_TILE_X ? w - x0 : PF_TILE_X;
            for (int r = 0; r < g; r++)
                copy_strided(
                    (unsigned char *)a->out + (size_t)(y + r) * a->out_pitch + (size_t)x0 * pb,
                    in_px(a, l.sx + e * r, l.sy + (long long)l.dy * x0), n, pb, l.dy * pitch);
        }
        y += g - 1;
    }
    return 0;
}

/* ---- crop, flip, rotate, pad --------------------------------------------------------- */

static row_line crop_line(const pf_native_args *a, int y)
{
    long long x0, y0;
    pf_crop_origin((const pf_crop_params *)a->params, a->in_width, a->in_height, a->out_width,
                   a->out_height, &x0, &y0);
    return (row_line){x0, y0 + y, 1, 0};
}

static row_line flip_line(const pf_native_args *a, int y)
{
    int axis = ((const pf_flip_params *)a->params)->axis;
    long long sy = axis == PF_FLIP_HORIZONTAL ? y : a->in_height - 1 - y;
    return axis == PF_FLIP_VERTICAL ? (row_line){0, sy, 1, 0}
                                    : (row_line){a->in_width - 1, sy, -1, 0};
}

/* Clockwise, as rotate_map: 90 takes (x, y) from (y, h - 1 - x), 270 from (w - 1 - y,
   x), 180 from (w - 1 - x, h - 1 - y). */
static row_line rotate_line(const pf_native_args *a, int y)
{
    switch (((const pf_rotate_params *)a->params)->angle) {
    case PF_ROTATE_90:
        return (row_line){y, a->in_height - 1, 0, -1};
    case PF_ROTATE_270:
        return (row_line){a->in_width - 1 - y, 0, 0, 1};
    default:
        return (row_line){a->in_width - 1, a->in_height - 1 - y, -1, 0};
    }
}

static row_line pad_line(const pf_native_args *a, int y)
{
    const pf_pad_params *p = (const pf_pad_params *)a->params;
    return (row_line){-(long long)p->left, (long long)y - p->top, 1, 0};
}

int crop_native_ok(const void *params)
{
    return 1;
}

int crop_native(const pf_native_args *a)
{
    const float *c = ((const pf_crop_params *)a->params)->color; /* outside pad */
    unsigned char fill[4 * sizeof(float)];
    a->from_float4(a, pf_f4(c[0], c[1], c[2], c[3]), fill);
    return run_lines(a, crop_line, fill);
}

int flip_native_ok(const void *params)
{
    return 1;
}

int flip_native(const pf_native_args *a)
{
    return run_lines(a, flip_line, zero_px);
}

int rotate_native_ok(const void *params)
{
    return ((const pf_rotate_params *)params)->degrees == 0;
}

int rotate_native(const pf_native_args *a)
{
    return run_lines(a, rotate_line, zero_px);
}

int pad_native_ok(const void *params)
{
    return 1;
}

int pad_native(const pf_native_args *a)
{
    const float *c = ((const pf_pad_params *)a->params)->color;
    unsigned char fill[4 * sizeof(float)];
    a->from_float4(a, pf_f4(c[0], c[1], c[2], c[3]), fill);
    return run_lines(a, pad_line, fill);
}

/* ---- nearest resize ------------------------------------------------------------------- */

int resize_native_ok(const void *params)
{
    return ((const pf_resize_params *)params)->mode == PF_RESIZE_NEAREST;
}

/* The input pixel of output index o along an axis: floor((o + 0.5) * n_in / n_out) in
   double, the nearest tap of resize_run (its span for mode nearest), always inside the
   input. test_cpu_fast compares every format against the float path. */
static int nearest_tap(int n_in, int n_out, int o)
{
    int i = (int)floor(((double)o + 0.5) * (double)n_in / (double)n_out);
    return i < 0 ? 0 : (i > n_in - 1 ? n_in - 1 : i);
}

int resize_native(const pf_native_args *a)
{
    const size_t pb = a->pixel_bytes;
    const int w = a->out_width;
    int *sx = malloc(sizeof *sx * (size_t)w);
    if (!sx) {
        if (a->err && a->err_size)
            snprintf(a->err, a->err_size, "resize: out of memory for the taps of %d columns", w);
        return -1;
    }
    for (int x = 0; x < w; x++)
        sx[x] = nearest_tap(a->in_width, w, x);
    for (int y = a->region.y0; y < a->region.y1; y++) {
        int sy = nearest_tap(a->in_height, a->out_height, y);
        unsigned char *d = (unsigned char *)a->out + (size_t)y * a->out_pitch;
        const unsigned char *s = in_px(a, 0, sy);
        copy_gather(d, s, sx, w, pb);
    }
    free(sx);
    return 0;
}
