/* plugins/geometry/geometry.h: params of the geometry family (resample stages), shared
 * by the plugin and its tests. Fields are float or int only (enums are int indices). */
#ifndef PF_PLUGIN_GEOMETRY_H
#define PF_PLUGIN_GEOMETRY_H

#include <math.h>

#include "../premultiply.h" /* PF_ALPHA_*: the alpha param of resize and rotate */

#define PF_GEOMETRY_MAX_SIDE   262144    /* largest output width or height */
#define PF_GEOMETRY_MAX_PIXELS (1 << 30) /* largest output area (16 GiB of float RGBA) */

#ifdef __CUDACC__
#define PF_GEOM_HD static __host__ __device__ __forceinline__
#else
#define PF_GEOM_HD static inline
#endif
/* Double products and sums that the device compiler may not fuse into an FMA, so the
   host and the device compute the same bits (the host build does not contract). */
#ifdef __CUDA_ARCH__
#define PF_GM(a, b) __dmul_rn((a), (b))
#define PF_GA(a, b) __dadd_rn((a), (b))
#define PF_GD(a, b) __ddiv_rn((a), (b))
#else
#define PF_GM(a, b) ((a) * (b))
#define PF_GA(a, b) ((a) + (b))
#define PF_GD(a, b) ((a) / (b))
#endif

enum {
    PF_RESIZE_BILINEAR,
    PF_RESIZE_NEAREST,
    PF_RESIZE_AREA,
    PF_RESIZE_BICUBIC,  /* Catmull-Rom (Pillow's BICUBIC, a = -0.5) */
    PF_RESIZE_MITCHELL, /* Mitchell-Netravali, B = C = 1/3 */
    PF_RESIZE_LANCZOS3
};
enum { PF_FIT_STRETCH, PF_FIT_INSIDE, PF_FIT_COVER };
typedef struct pf_resize_params {
    int width, height; /* 0: derived from the other keeping the aspect, both 0: scale */
    float scale;       /* used when width and height are both 0 */
    int mode;          /* PF_RESIZE_* */
    int fit;           /* PF_FIT_*: with width and height both given */
    int shrink_only;   /* never larger than the input */
    int alpha;         /* PF_ALPHA_* (nearest moves pixels and ignores it) */
    int antialias;     /* bilinear: widen the triangle by the factor where an axis shrinks */
} pf_resize_params;

/* The source taps of output index o along one axis of n_in input pixels (n_out output
   pixels): count taps from first, the weight of tap k from pf_span_weight. Shared by
   the CPU and the CUDA resize, so both compute the same doubles.
   - linear (bilinear, and area when enlarging): pixel centres aligned (OpenCV's
     INTER_LINEAR), output o at input coordinate (o + 0.5) * n_in / n_out - 0.5, between
     its two neighbours, clamped at the border;
   - nearest: input floor((o + 0.5) * n_in / n_out);
   - area (not enlarging): the input interval [o, o + 1) * n_in / n_out, each pixel
     weighted by its overlap;
   - filter (bilinear with antialias when shrinking, and bicubic, mitchell and lanczos3
     always): Pillow's resampling convolution. With the factor f = n_in / n_out, the
     stretch g = max(f, 1) and the filter's support r (triangle 1, cubics 2, Lanczos 3),
     output o is centred at c = (o + 0.5) * f and takes pixels [(int)(c - r g + 0.5),
     (int)(c + r g + 0.5)) cut to the image, pixel i weighted K((i + 0.5 - c) / g), the
     weights divided by their sum: the kernel widened by the shrink factor, so every
     input pixel counts (antialiasing), and the kernel itself when enlarging. */
enum { PF_SPAN_LINEAR, PF_SPAN_NEAREST, PF_SPAN_AREA, PF_SPAN_FILTER };
/* The kernels K of PF_SPAN_FILTER */
enum { PF_FILTER_TRIANGLE, PF_FILTER_CATROM, PF_FILTER_MITCHELL, PF_FILTER_LANCZOS3 };
typedef struct pf_span {
    int kind, first, count, n;
    double lo, hi, f;    /* area: the interval; linear: the fraction past first */
    double c, inv, norm; /* filter: the centre, 1 / g, the weights' sum */
    int filter;          /* filter: PF_FILTER_* */
} pf_span;

/* sin(pi x) / (pi x), 1 at 0, with geometry.h's own sine (the same bits on the device). */
PF_GEOM_HD double pf_sinc(double x);

/* K(x): each operation rounded on its own, in this order, on the host and the device.
   Catmull-Rom is Pillow's bicubic (a = -0.5); Mitchell-Netravali has B = C = 1/3;
   Lanczos-3 is sinc(x) sinc(x / 3) on (-3, 3) (Pillow's LANCZOS, vips' lanczos3). */
PF_GEOM_HD double pf_filter(int filter, double x)
{
    x = x < 0 ? -x : x;
    switch (filter) {
    case PF_FILTER_CATROM: /* ((a + 2) x - (a + 3)) x^2 + 1; ((x - 5) x + 8) x - 4) a */
        if (x < 1)
            return PF_GA(PF_GM(PF_GM(PF_GA(PF_GM(1.5, x), -2.5), x), x), 1.0);
        if (x < 2)
            return PF_GM(PF_GA(PF_GM(PF_GA(PF_GM(PF_GA(x, -5.0), x), 8.0), x), -4.0), -0.5);
        return 0.0;
    case PF_FILTER_MITCHELL: /* ((12 - 9B - 6C) x^3 + (-18 + 12B + 6C) x^2 + (6 - 2B)) / 6 */
        if (x < 1)
            return PF_GD(PF_GA(PF_GM(PF_GM(PF_GA(PF_GM(7.0, x), -12.0), x), x), 16.0 / 3.0), 6.0);
        if (x < 2) /* ((-B - 6C) x^3 + (6B + 30C) x^2 + (-12B - 48C) x + (8B + 24C)) / 6 */
            return PF_GD(PF_GA(PF_GM(PF_GA(PF_GM(PF_GA(PF_GM(-7.0 / 3.0, x), 12.0), x), -20.0), x),
                               32.0 / 3.0),
                         6.0);
        return 0.0;
    case PF_FILTER_LANCZOS3:
        return x < 3 ? PF_GM(pf_sinc(x), pf_sinc(PF_GD(x, 3.0))) : 0.0;
    default:
        return x < 1 ? PF_GA(1.0, -x) : 0.0;
    }
}

/* Filter weight of input pixel i before normalising. */
PF_GEOM_HD double pf_span_kernel(const pf_span *s, int i)
{
    return pf_filter(s->filter, PF_GM(PF_GA(PF_GA((double)i, -s->c), 0.5), s->inv));
}

/* The filter a resize mode sums with where it is one (-1: none). */
PF_GEOM_HD int pf_mode_filter(int mode, int antialias, int n_in, int n_out)
{
    switch (mode) {
    case PF_RESIZE_BICUBIC:
        return PF_FILTER_CATROM;
    case PF_RESIZE_MITCHELL:
        return PF_FILTER_MITCHELL;
    case PF_RESIZE_LANCZOS3:
        return PF_FILTER_LANCZOS3;
    case PF_RESIZE_BILINEAR:
        return antialias && n_out < n_in ? PF_FILTER_TRIANGLE : -1;
    default:
        return -1;
    }
}

PF_GEOM_HD pf_span pf_axis_span(int mode, int antialias, int n_in, int n_out, int o)
{
    pf_span s = {PF_SPAN_LINEAR, 0, 2, n_in, 0, 0, 0, 0, 0, 0, 0};
    const int filter = pf_mode_filter(mode, antialias, n_in, n_out);
    const double din = (double)n_in, dout = (double)n_out;
    if (mode == PF_RESIZE_AREA && n_out <= n_in) {
        s.kind = PF_SPAN_AREA;
        s.lo = PF_GD(PF_GM((double)o, din), dout);
        s.hi = PF_GD(PF_GM((double)(o + 1), din), dout);
        s.first = (int)floor(s.lo);
        s.count = (int)ceil(s.hi) - s.first;
    } else if (mode == PF_RESIZE_NEAREST) {
        s.kind = PF_SPAN_NEAREST;
        s.first = (int)floor(PF_GD(PF_GM(PF_GA((double)o, 0.5), din), dout));
        s.count = 1;
    } else if (filter >= 0) {
        s.kind = PF_SPAN_FILTER;
        s.filter = filter;
        const double f = PF_GD(din, dout), g = f > 1 ? f : 1.0;
        const double r = PF_GM(filter == PF_FILTER_TRIANGLE   ? 1.0
                               : filter == PF_FILTER_LANCZOS3 ? 3.0
                                                              : 2.0,
                               g);
        s.c = PF_GM(PF_GA((double)o, 0.5), f);
        s.inv = PF_GD(1.0, g);
        int lo = (int)PF_GA(PF_GA(s.c, -r), 0.5), hi = (int)PF_GA(PF_GA(s.c, r), 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = hi > n_in ? n_in : hi;
        s.first = lo;
        s.count = hi - lo;
        for (int i = lo; i < hi; i++)
            s.norm = PF_GA(s.norm, pf_span_kernel(&s, i));
    } else {
        const double c = PF_GA(PF_GD(PF_GM(PF_GA((double)o, 0.5), din), dout), -0.5);
        s.first = (int)floor(c);
        s.f = PF_GA(c, -(double)s.first);
    }
    return s;
}

/* The weight of tap k of s, and its source index clamped to the image. */
PF_GEOM_HD double pf_span_weight(const pf_span *s, int k, int *idx)
{
    const int i = s->first + k;
    *idx = i < 0 ? 0 : (i > s->n - 1 ? s->n - 1 : i);
    switch (s->kind) {
    case PF_SPAN_AREA:
        return PF_GD(PF_GA(fmin(PF_GA((double)i, 1.0), s->hi), -fmax((double)i, s->lo)),
                     PF_GA(s->hi, -s->lo));
    case PF_SPAN_NEAREST:
        return 1;
    case PF_SPAN_FILTER: /* a zero sum (not reached: the centre tap weighs) gives 0 */
        return s->norm != 0 ? PF_GD(pf_span_kernel(s, i), s->norm) : 0.0;
    default:
        return k ? s->f : PF_GA(1.0, -s->f);
    }
}

/* Where a rectangle goes by gravity: none (x, y from the top left, as given), or an
   anchor with x, y measured inward from it. */
enum {
    PF_GRAVITY_NONE,
    PF_GRAVITY_CENTER,
    PF_GRAVITY_TOP,
    PF_GRAVITY_BOTTOM,
    PF_GRAVITY_LEFT,
    PF_GRAVITY_RIGHT,
    PF_GRAVITY_TOP_LEFT,
    PF_GRAVITY_TOP_RIGHT,
    PF_GRAVITY_BOTTOM_LEFT,
    PF_GRAVITY_BOTTOM_RIGHT
};
#define PF_GRAVITY_NAMES                                                                           \
    "none", "center", "top", "bottom", "left", "right", "top-left", "top-right", "bottom-left",    \
        "bottom-right"

/* floor(d / 2): centring rounds towards the top left also when the rectangle is larger. */
PF_GEOM_HD long long pf_half_floor(long long d)
{
    return d >= 0 ? d / 2 : -((1 - d) / 2);
}

/* The left (top) edge of a w (h) wide rectangle in an n wide space by gravity g, moved
   inward by off. */
PF_GEOM_HD long long pf_gravity_x(int g, long long n, long long w, long long off)
{
    if (g == PF_GRAVITY_CENTER || g == PF_GRAVITY_TOP || g == PF_GRAVITY_BOTTOM)
        return pf_half_floor(n - w) + off;
    if (g == PF_GRAVITY_RIGHT || g == PF_GRAVITY_TOP_RIGHT || g == PF_GRAVITY_BOTTOM_RIGHT)
        return n - w - off;
    return off;
}
PF_GEOM_HD long long pf_gravity_y(int g, long long n, long long h, long long off)
{
    if (g == PF_GRAVITY_CENTER || g == PF_GRAVITY_LEFT || g == PF_GRAVITY_RIGHT)
        return pf_half_floor(n - h) + off;
    if (g == PF_GRAVITY_BOTTOM || g == PF_GRAVITY_BOTTOM_LEFT || g == PF_GRAVITY_BOTTOM_RIGHT)
        return n - h - off;
    return off;
}

/* What crop does with a rectangle that reaches outside the input: fail (the default),
   cut it to what the input holds at its place, or fill what lies outside with color. */
enum { PF_CROP_ERROR, PF_CROP_CLAMP, PF_CROP_PAD };

typedef struct pf_crop_params {
    int x, y;          /* top left corner in the input; with a gravity, the offset inward */
    int width, height; /* 0: up to the right (bottom) edge, or from the percentages */
    int gravity;       /* PF_GRAVITY_* */
    float width_pct;   /* percent of the input's width, when width is 0; 0: unused */
    float height_pct;  /* percent of the input's height, when height is 0; 0: unused */
    int outside;       /* PF_CROP_*: a rectangle reaching outside the input */
    float color[4];    /* PF_CROP_PAD: RGBA of the pixels outside the input */
} pf_crop_params;

/* The top left corner, in the input, of crop's ow x oh output (its planned size) in a
   w x h input: where the gravity puts a rectangle of that size, kept inside the input
   under outside clamp. The host works the size out (pf_crop_size); kernels take it from
   the output they write, so they need no decimal arithmetic. Under clamp the output is
   the part of the rectangle asked for that lies inside the input, and this corner is
   that part's: where it is cut on the left (top), at 0, which the clamp to [0, w - ow]
   gives, since the gravity puts the smaller output at most at 0 there; where it is cut
   on the right only, at the asked rectangle's own corner, which the gravity puts the
   smaller output at or right of, and w - ow is. */
PF_GEOM_HD void pf_crop_origin(const pf_crop_params *p, int w, int h, int ow, int oh, long long *x,
                               long long *y)
{
    *x = pf_gravity_x(p->gravity, w, ow, p->x);
    *y = pf_gravity_y(p->gravity, h, oh, p->y);
    if (p->outside == PF_CROP_CLAMP) {
        *x = *x < 0 ? 0 : *x > (long long)w - ow ? (long long)w - ow : *x;
        *y = *y < 0 ? 0 : *y > (long long)h - oh ? (long long)h - oh : *y;
    }
}

#ifndef __CUDACC__
/* geometry_size.c, host only. round_half_up(n * f), f taken as the decimal written:
   the shortest decimal that reads back as the float f (2.867, not 2.86700010...), the
   product computed exactly in integers; percent divides it by 100 first, exactly too.
   So 2297 x 2.867 = 6585.499 gives 6585 and 5 x 0.7 = 3.5 gives 4. A result beyond
   2^53 is returned as a double that large (the caller refuses it). */
double pf_decimal_size(long long n, float f, int percent);

/* crop's output size for a w x h input by the params (pixels, percents rounded by
   pf_decimal_size, at least 1), after p->outside's rule, and its top left corner in the
   input (pf_crop_origin). 0, or -1 when the rectangle is not fully inside the input and
   outside is PF_CROP_ERROR, or when PF_CROP_CLAMP leaves nothing: *cw, *ch, *x and *y
   are then the rectangle asked for. */
int pf_crop_size(const pf_crop_params *p, int w, int h, long long *x, long long *y, long long *cw,
                 long long *ch);
#endif

enum { PF_FLIP_HORIZONTAL, PF_FLIP_VERTICAL, PF_FLIP_BOTH };
typedef struct pf_flip_params {
    int axis; /* PF_FLIP_* */
} pf_flip_params;

enum { PF_ROTATE_90, PF_ROTATE_180, PF_ROTATE_270 };
typedef struct pf_rotate_params {
    int angle;     /* PF_ROTATE_*, clockwise */
    float degrees; /* any angle, clockwise; 0: angle */
    int expand;    /* the output holds the whole rotated input; else the input's size */
    float fill[4]; /* RGBA where no input pixel lands */
    int alpha;     /* PF_ALPHA_*, with degrees */
} pf_rotate_params;

/* sin and cos of a clockwise turn of deg degrees, computed the same way on the host and
   the device (no library call, no contraction): the angle is reduced to [-45, 45] by
   quarter turns, exact for multiples of 90, then Taylor series to degree 17 and 16
   (truncation error below 1e-16 there). */
PF_GEOM_HD void pf_sincos_deg(double deg, double *s, double *c)
{
    double a = PF_GA(deg, -PF_GM(360.0, floor(deg / 360.0))); /* [0, 360) */
    int q = (int)floor(PF_GA(a, 45.0) / 90.0);
    double r = PF_GM(PF_GA(a, -PF_GM(90.0, (double)q)), 0.017453292519943295); /* |r| <= pi/4 */
    double r2 = PF_GM(r, r);
    double sp = PF_GM(r2, 1.0 / 355687428096000.0), cp = PF_GM(r2, 1.0 / 20922789888000.0);
#define PF_SC_STEP(ks, kc) sp = PF_GM(r2, PF_GA(ks, sp)), cp = PF_GM(r2, PF_GA(kc, cp))
    PF_SC_STEP(-1.0 / 1307674368000.0, -1.0 / 87178291200.0); /* Horner in r^2 */
    PF_SC_STEP(1.0 / 6227020800.0, 1.0 / 479001600.0);
    PF_SC_STEP(-1.0 / 39916800.0, -1.0 / 3628800.0);
    PF_SC_STEP(1.0 / 362880.0, 1.0 / 40320.0);
    PF_SC_STEP(-1.0 / 5040.0, -1.0 / 720.0);
    PF_SC_STEP(1.0 / 120.0, 1.0 / 24.0);
    PF_SC_STEP(-1.0 / 6.0, -1.0 / 2.0);
#undef PF_SC_STEP
    double sn = PF_GA(r, PF_GM(r, sp)), cs = PF_GA(1.0, cp);
    switch (q & 3) {
    case 0:
        *s = sn, *c = cs;
        break;
    case 1:
        *s = cs, *c = -sn;
        break;
    case 2:
        *s = -sn, *c = -cs;
        break;
    default:
        *s = -cs, *c = sn;
        break;
    }
}

PF_GEOM_HD double pf_sinc(double x)
{
    if (x == 0)
        return 1.0;
    double s, c;
    pf_sincos_deg(PF_GM(180.0, x), &s, &c);
    return PF_GD(s, PF_GM(x, 3.141592653589793));
}

/* Output pixel (x, y) of an ow x oh turn by (s, c) of an iw x ih input: where its
   centre comes from, as x0 + fx, y0 + fy with fx, fy in [0, 1) (pixel centres at
   integers). Centres map to centres; 90 degrees gives exact integers. */
PF_GEOM_HD void pf_rotate_source(double s, double c, int ow, int oh, int iw, int ih, int x, int y,
                                 int *x0, int *y0, double *fx, double *fy)
{
    double dx = PF_GA((double)x + 0.5, -0.5 * ow), dy = PF_GA((double)y + 0.5, -0.5 * oh);
    double sx = PF_GA(PF_GA(PF_GM(c, dx), PF_GM(s, dy)), 0.5 * iw - 0.5);
    double sy = PF_GA(PF_GA(PF_GM(-s, dx), PF_GM(c, dy)), 0.5 * ih - 0.5);
    double lx = floor(sx), ly = floor(sy);
    *x0 = (int)lx, *y0 = (int)ly;
    *fx = PF_GA(sx, -lx), *fy = PF_GA(sy, -ly);
}

/* The output size of a turn by deg of a w x h input: the bounding box, each side grown
   to the next integer of the parity that keeps the pixel grid (centres on centres near
   the centre): the input's width for the output's width while the turn is nearer a
   half turn than a quarter (|cos| >= |sin|), its height nearer a quarter turn, and the
   other way for the height. A one-pixel margin on one side only would shift every
   pixel by half a pixel and make each a 2x2 mean. */
PF_GEOM_HD void pf_rotated_size(double deg, int w, int h, double *ow, double *oh)
{
    double s, c;
    pf_sincos_deg(deg, &s, &c);
    s = fabs(s), c = fabs(c);
    /* the output's x runs along the input's y: |sin| > |cos|, decided on the angle (exact
       in double) so that a tie at 45 degrees is one for every sign and half turn, which
       sin and cos of their own may break by an ulp either way */
    const double a = fmod(fmod(deg, 180.0) + 180.0, 180.0);
    const int quarter = a > 45.0 && a < 135.0;
    const double pw = quarter ? h : w, ph = quarter ? w : h;
    /* a box edge within 1e-9 of an integer is that integer (no sliver from rounding) */
    double bw = ceil((double)w * c + (double)h * s - 1e-9);
    double bh = ceil((double)w * s + (double)h * c - 1e-9);
    *ow = bw + (fmod(bw + pw, 2.0) != 0);
    *oh = bh + (fmod(bh + ph, 2.0) != 0);
}

/* A weighted sum of pixels in double, for resize and rotate by any angle, shared by the
   CPU and CUDA: straight, each channel times its weight; premultiplied (premultiply.h),
   the colour times w * alpha (none where alpha is 0), w summed apart. */
typedef struct pf_acc4 {
    double v[4], w;
} pf_acc4;

PF_GEOM_HD void pf_acc4_add(pf_acc4 *s, int pm, double w, float x, float y, float z, float a)
{
    if (!pm) {
        s->v[0] = PF_GA(s->v[0], PF_GM(w, (double)x));
        s->v[1] = PF_GA(s->v[1], PF_GM(w, (double)y));
        s->v[2] = PF_GA(s->v[2], PF_GM(w, (double)z));
        s->v[3] = PF_GA(s->v[3], PF_GM(w, (double)a));
        return;
    }
    a = pf_pm_alpha(a);
    const double wa = PF_GM(w, (double)a); /* w itself where a is 1 */
    if (a != 0) {
        s->v[0] = PF_GA(s->v[0], PF_GM(wa, (double)x));
        s->v[1] = PF_GA(s->v[1], PF_GM(wa, (double)y));
        s->v[2] = PF_GA(s->v[2], PF_GM(wa, (double)z));
    }
    s->v[3] = PF_GA(s->v[3], wa);
    s->w = PF_GA(s->w, w);
}

/* Channel c (0-3) of the sum, rounded to float. */
PF_GEOM_HD float pf_acc4_out(const pf_acc4 *s, int pm, int c)
{
    return pm && c < 3 ? pf_pm_div_d(s->v[c], s->v[3], s->w) : PF_PM_D2F(s->v[c]);
}

typedef struct pf_pad_params {
    int left, right, top, bottom; /* pixels added on each side */
    float color[4];               /* RGBA of the added pixels */
} pf_pad_params;

#endif /* PF_PLUGIN_GEOMETRY_H */
