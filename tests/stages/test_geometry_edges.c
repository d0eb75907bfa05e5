/* tests/stages/test_geometry_edges.c: the geometry family's edges, with the family
 * driver (tests/lib/family_driver.h): sizes from decimal scales and percents rounded
 * exactly (references in integers, from the decimal as written), rotate's expanded size
 * keeping the input's parity (a small turn moves pixels by the turn, not by half a
 * pixel), crop's rule for a rectangle reaching outside the input (clamp, pad) as a
 * thumbnail of an input smaller than its box needs, and resize's filters (bicubic,
 * mitchell, lanczos3) against dense weights written from the textbook kernels with
 * libm's sine, within 1e-6 (the stage rounds its double sum to float once).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "family_driver.h"

#include "geometry.h"

static int run_stage(const char *name, const void *params, const pf_image *in, pf_image *out)
{
    const pf_stage_desc *d = h_stage("geometry", name);
    pf_shape s = h_out_shape(d, params, (pf_shape){in->width, in->height});
    *out = pf_test_image_poisoned(s.width ? s.width : 1, s.height ? s.height : 1);
    return s.width == 0 || h_run(d, params, in, 1, out, 0) != 0;
}

static pf_shape shape_of(const char *name, const void *params, int w, int h, char *err,
                         size_t err_size)
{
    pf_shape in = {w, h}, out = {0, 0};
    err[0] = 0;
    if (h_stage("geometry", name)->shape(params, &in, &out, err, err_size) != 0)
        return (pf_shape){0, 0};
    return out;
}

/* ---- Decimal sizes -------------------------------------------------------------------- */

/* round_half_up(n * k / 10^d), in integers. */
static long long dec_round(long long n, long long k, int d)
{
    long long q = 1;
    while (d-- > 0)
        q *= 10;
    return (2 * n * k + q) / (2 * q);
}

static void test_decimal_sizes(pf_rng *r)
{
    char err[256];
    /* The case: 2297 x 2.867 = 6585.499 (the float 2.86700010 gave 6586), and
       products just below and at a half. */
    const struct {
        int n;
        float scale;
        int want;
    } fixed[] = {{2297, 2.867f, 6585},  {5, 0.7f, 4},          {7, 0.5f, 4},
                 {3, 0.5f, 2},          {999, 0.0005f, 1},     {1001, 0.0005f, 1},
                 {4095, 1.0001f, 4095}, {4096, 1.0005f, 4098}, {3, 0.1666667f, 1},
                 {13, 2.5f, 33}};
    for (int i = 0; i < PF_COUNTOF(fixed); i++) {
        pf_resize_params p = {0, 0, fixed[i].scale, PF_RESIZE_BILINEAR, 0, 0, 0, 0};
        pf_shape s = shape_of("resize", &p, fixed[i].n, 1, err, sizeof err);
        CHECKF(s.width == fixed[i].want, "resize %d at scale %.9g: %d wide, not %d", fixed[i].n,
               fixed[i].scale, s.width, fixed[i].want);
    }
    /* Random decimals of three places, scales and percents, against integers. */
    for (int t = 0; t < 2000; t++) {
        const int n = pf_rng_range(r, 1, 9000), k = pf_rng_range(r, 1, 30000);
        const float scale = (float)(k / 1000.0);
        pf_resize_params p = {0, 0, scale, PF_RESIZE_NEAREST, 0, 0, 0, 0};
        pf_shape s = shape_of("resize", &p, n, 3, err, sizeof err);
        long long want = dec_round(n, k, 3);
        want = want < 1 ? 1 : want;
        CHECKF(want > PF_GEOMETRY_MAX_SIDE || s.width == want,
               "resize %d at scale %d/1000: %d wide, not %lld", n, k, s.width, want);
        const int kp = pf_rng_range(r, 1, 100000); /* percent with three places */
        pf_crop_params c = {.width_pct = (float)(kp / 1000.0), .height_pct = 100};
        s = shape_of("crop", &c, n, 2, err, sizeof err);
        want = dec_round(n, kp, 5);
        want = want < 1 ? 1 : want;
        CHECKF(s.width == want && s.height == 2, "crop %d at %d/1000 %%: %dx%d, not %lldx2", n, kp,
               s.width, s.height, want);
    }
    /* One side given: the other from the aspect ratio, rounded half up exactly. */
    for (int t = 0; t < 500; t++) {
        const int w = pf_rng_range(r, 1, 5000), h = pf_rng_range(r, 1, 5000);
        const int ow = pf_rng_range(r, 1, 5000);
        pf_resize_params p = {ow, 0, 1, PF_RESIZE_BILINEAR, 0, 0, 0, 0};
        pf_shape s = shape_of("resize", &p, w, h, err, sizeof err);
        long long want = ((long long)2 * h * ow + w) / (2LL * w);
        want = want < 1 ? 1 : want;
        CHECKF(want > PF_GEOMETRY_MAX_SIDE || (s.width == ow && s.height == want),
               "resize %dx%d to width %d: %dx%d, not %dx%lld", w, h, ow, s.width, s.height, ow,
               want);
    }
}

/* ---- rotate's expanded size ------------------------------------------------------------ */

static void test_rotate_parity(pf_rng *r)
{
    char err[256];
    /* the tie at 45 degrees: |cos| = |sin|, the width's parity, the same size for every
       sign and half turn (sin and cos computed apart differ by an ulp there) */
    const float ties[] = {45, -45, 135, -135, 225, 315, 405, -225};
    const pf_shape sizes_tie[] = {{31, 20}, {20, 31}, {31, 31}, {8, 3}};
    for (int si = 0; si < PF_COUNTOF(sizes_tie); si++) {
        const int w = sizes_tie[si].width, h = sizes_tie[si].height;
        pf_rotate_params p0 = {.degrees = 45, .expand = 1};
        const pf_shape s0 = shape_of("rotate", &p0, w, h, err, sizeof err);
        CHECKF(s0.width % 2 == w % 2 && s0.height % 2 == h % 2,
               "45 degrees of %dx%d: %dx%d, not the input's parities", w, h, s0.width, s0.height);
        for (int a = 0; a < PF_COUNTOF(ties); a++) {
            pf_rotate_params p = {.degrees = ties[a], .expand = 1};
            const pf_shape s = shape_of("rotate", &p, w, h, err, sizeof err);
            CHECKF(s.width == s0.width && s.height == s0.height,
                   "%g degrees of %dx%d: %dx%d, 45: %dx%d", ties[a], w, h, s.width, s.height,
                   s0.width, s0.height);
        }
    }
    const float angles[] = {0.001f, 0.5f,  -1, 3,   10,  30,     44.9f, 45.1f,
                            60,     89.5f, 90, -90, 135, 179.9f, 181,   269.5f};
    const pf_shape sizes[] = {{13, 7}, {100, 80}, {101, 80}, {100, 81}, {1, 1}, {2, 9}, {64, 64}};
    for (int a = 0; a < PF_COUNTOF(angles); a++)
        for (int si = 0; si < PF_COUNTOF(sizes); si++) {
            const int w = sizes[si].width, h = sizes[si].height;
            pf_rotate_params p = {.degrees = angles[a], .expand = 1};
            pf_shape s = shape_of("rotate", &p, w, h, err, sizeof err);
            double sn, cs;
            pf_sincos_deg(angles[a], &sn, &cs);
            sn = fabs(sn), cs = fabs(cs);
            const double bw = w * cs + h * sn, bh = w * sn + h * cs;
            const int quarter = sn > cs;
            const int pw = quarter ? h : w, ph = quarter ? w : h;
            /* the bounding box, the parity of the side that runs along it, at most one
               pixel more than the box's ceiling */
            CHECKF(s.width >= bw - 1e-6 && s.height >= bh - 1e-6 && (s.width - pw) % 2 == 0 &&
                       (s.height - ph) % 2 == 0 && s.width <= ceil(bw - 1e-9) + 1 &&
                       s.height <= ceil(bh - 1e-9) + 1,
                   "rotate %g of %dx%d: %dx%d (box %.3fx%.3f)", angles[a], w, h, s.width, s.height,
                   bw, bh);
        }
    /* A small turn with expand moves each pixel by the turn only: the output's pixel
       (x + 1, y + 1) is the input's (x, y) nearly (a grid shifted by half a pixel made
       each a 2x2 mean, off by a quarter of the image's contrast). */
    pf_image in = pf_test_image(r, 31, 20, 0, 1), out;
    pf_rotate_params p = {.degrees = 0.001f, .expand = 1, .alpha = PF_ALPHA_STRAIGHT};
    CHECK(run_stage("rotate", &p, &in, &out) == 0);
    CHECKF(out.width == 33 && out.height == 22, "rotate 0.001 of 31x20: %dx%d, not 33x22",
           out.width, out.height);
    double worst = 0;
    for (int y = 0; y < in.height && out.width == 33; y++)
        for (int x = 0; x < in.width; x++) {
            pf_float4 a = pf_image_row(&in, y)[x], b = pf_image_row(&out, y + 1)[x + 1];
            worst = fmax(worst, fabs(a.x - b.x) + fabs(a.y - b.y) + fabs(a.z - b.z));
        }
    CHECKF(worst < 2e-3, "rotate 0.001 of 31x20: pixels moved (largest difference %g)", worst);
    pf_test_image_free(&out);
    pf_test_image_free(&in);
}

/* ---- crop outside the input ------------------------------------------------------------ */

static void test_crop_outside(pf_rng *r)
{
    char err[256];
    pf_image in = pf_test_image(r, 100, 80, 0, 1), out;
    /* The thumbnail: a centred 150x150 crop of a 100x80 input (resize cover with
       shrink_only kept it): an error by default, the input itself clamped (vips
       thumbnail --crop centre --size down), the input centred on color padded
       (ImageMagick's -thumbnail 150x150^ -extent 150x150). */
    pf_crop_params c = {.width = 150, .height = 150, .gravity = PF_GRAVITY_CENTER};
    pf_shape s = shape_of("crop", &c, 100, 80, err, sizeof err);
    CHECKF(s.width == 0 && strstr(err, "100x80") && strstr(err, "clamp"),
           "centred 150x150 of 100x80: \"%s\"", err);
    c.outside = PF_CROP_CLAMP;
    CHECK(run_stage("crop", &c, &in, &out) == 0);
    CHECKF(fd_same_bits(&in, &out), "clamped crop of a smaller input is not the input");
    pf_test_image_free(&out);
    c.outside = PF_CROP_PAD;
    const float col[4] = {0.25f, 0.5f, 0.75f, 1};
    memcpy(c.color, col, sizeof col);
    pf_image want = pf_test_image_poisoned(150, 150);
    for (int y = 0; y < 150; y++)
        for (int x = 0; x < 150; x++) {
            const int sx = x - 25, sy = y - 35;
            double v[4] = {col[0], col[1], col[2], col[3]};
            if (sx >= 0 && sx < 100 && sy >= 0 && sy < 80)
                fd_px(&in, sx, sy, v);
            fd_set(&want, x, y, v);
        }
    fd_check_image_stage(h_stage("geometry", "crop"), &c, &in, &want, NULL, 0, "crop pad 150x150");
    pf_test_image_free(&want);

    /* Clamp against a reference: the part of the rectangle asked for (placed by its
       gravity at its size) that lies inside the input, at every gravity, with offsets
       that push it out on either side. */
    for (int t = 0; t < 600; t++) {
        const int w = pf_rng_range(r, 1, 40), h = pf_rng_range(r, 1, 40);
        pf_crop_params q = {.x = pf_rng_range(r, -12, 12),
                            .y = pf_rng_range(r, -12, 12),
                            .width = pf_rng_range(r, 1, 60),
                            .height = pf_rng_range(r, 1, 60),
                            .gravity = pf_rng_range(r, 0, 9),
                            .outside = PF_CROP_CLAMP};
        s = shape_of("crop", &q, w, h, err, sizeof err);
        const long long ax = pf_gravity_x(q.gravity, w, q.width, q.x),
                        ay = pf_gravity_y(q.gravity, h, q.height, q.y);
        const long long ix = ax < 0 ? 0 : ax, iy = ay < 0 ? 0 : ay;
        const long long bw = (ax + q.width > w ? w : ax + q.width) - ix,
                        bh = (ay + q.height > h ? h : ay + q.height) - iy;
        if (bw < 1 || bh < 1) {
            CHECKF(s.width == 0 && strstr(err, "no part"), "clamp %d,%d %dx%d g%d of %dx%d: \"%s\"",
                   q.x, q.y, q.width, q.height, q.gravity, w, h, err);
            continue;
        }
        CHECKF(s.width == bw && s.height == bh,
               "clamp %d,%d %dx%d g%d of %dx%d: %dx%d, not %lldx%lld", q.x, q.y, q.width, q.height,
               q.gravity, w, h, s.width, s.height, bw, bh);
        if (s.width != bw || s.height != bh)
            continue;
        pf_image small = pf_test_image(r, w, h, 0, 1);
        const long long x0 = ix, y0 = iy;
        want = pf_test_image_poisoned((int)bw, (int)bh);
        for (int y = 0; y < bh; y++)
            for (int x = 0; x < bw; x++) {
                double v[4];
                fd_px(&small, (int)(x + x0), (int)(y + y0), v);
                fd_set(&want, x, y, v);
            }
        fd_check_image_stage(h_stage("geometry", "crop"), &q, &small, &want, NULL, 0, "crop clamp");
        pf_test_image_free(&want);
        pf_test_image_free(&small);
    }
    pf_test_image_free(&in);
}

/* ---- Filters: bicubic, mitchell, lanczos3 ------------------------------------------------ */

/* The kernels from their textbook forms, with libm's sine (geometry.h has its own). */
#define REF_PI 3.14159265358979323846

static double ref_kernel(int mode, double x)
{
    x = fabs(x);
    if (mode == PF_RESIZE_BICUBIC) { /* Keys' cubic, a = -0.5 */
        const double a = -0.5;
        return x < 1   ? (a + 2) * x * x * x - (a + 3) * x * x + 1
               : x < 2 ? a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a
                       : 0;
    }
    if (mode == PF_RESIZE_MITCHELL) {
        const double B = 1.0 / 3, C = 1.0 / 3;
        return x < 1 ? ((12 - 9 * B - 6 * C) * x * x * x + (-18 + 12 * B + 6 * C) * x * x +
                        (6 - 2 * B)) /
                           6
               : x < 2 ? ((-B - 6 * C) * x * x * x + (6 * B + 30 * C) * x * x +
                          (-12 * B - 48 * C) * x + (8 * B + 24 * C)) /
                             6
                       : 0;
    }
    if (x >= 3)
        return 0;
    const double sx = x == 0 ? 1 : sin(REF_PI * x) / (REF_PI * x);
    const double s3 = x == 0 ? 1 : sin(REF_PI * x / 3) / (REF_PI * x / 3);
    return sx * s3;
}

/* Weights of output o over all n_in inputs: the kernel stretched by the shrink factor,
   centred on o's centre, cut to the image, normalised (Pillow's resampling). */
static void ref_weights(int mode, int n_in, int n_out, int o, double *w)
{
    const double f = (double)n_in / n_out, g = f > 1 ? f : 1;
    const double r = (mode == PF_RESIZE_LANCZOS3 ? 3 : 2) * g, c = (o + 0.5) * f;
    double sum = 0;
    for (int i = 0; i < n_in; i++) {
        w[i] = 0;
        if (i >= (int)(c - r + 0.5) && i < (int)(c + r + 0.5))
            w[i] = ref_kernel(mode, (i + 0.5 - c) / g);
        sum += w[i];
    }
    for (int i = 0; i < n_in; i++)
        w[i] /= sum;
}

static void test_filters(pf_rng *r)
{
    static const char *const names[] = {"bicubic", "mitchell", "lanczos3"};
    const pf_shape sizes[] = {{1, 1}, {2, 3}, {13, 7}, {97, 61}};
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        const pf_shape outs[] = {{w, h},     {2 * w + 1, 3 * h}, {(w + 2) / 3, (h + 1) / 2},
                                 {w + 5, 1}, {1, h + 7},         {(w + 6) / 7, 2 * h}};
        for (int m = 0; m < 3; m++)
            for (int k = 0; k < PF_COUNTOF(outs); k++) {
                const int mode = PF_RESIZE_BICUBIC + m, ow = outs[k].width, oh = outs[k].height;
                double *wx = malloc(sizeof *wx * (size_t)w * ow);
                double *wy = malloc(sizeof *wy * (size_t)h * oh);
                for (int o = 0; o < ow; o++)
                    ref_weights(mode, w, ow, o, wx + (size_t)o * w);
                for (int o = 0; o < oh; o++)
                    ref_weights(mode, h, oh, o, wy + (size_t)o * h);
                pf_image want = pf_test_image_poisoned(ow, oh);
                for (int y = 0; y < oh; y++)
                    for (int x = 0; x < ow; x++) {
                        double acc[4] = {0, 0, 0, 0}, v[4];
                        for (int j = 0; j < h; j++)
                            for (int i = 0; i < w; i++) {
                                const double wt = wy[(size_t)y * h + j] * wx[(size_t)x * w + i];
                                if (wt == 0)
                                    continue;
                                fd_px(&in, i, j, v);
                                for (int c = 0; c < 4; c++)
                                    acc[c] += wt * v[c];
                            }
                        fd_set(&want, x, y, acc);
                    }
                pf_resize_params p = {ow, oh, 1, mode, 0, 0, PF_ALPHA_STRAIGHT, 0};
                char label[96];
                snprintf(label, sizeof label, "resize %s %dx%d to %dx%d", names[m], w, h, ow, oh);
                fd_check_image_stage(h_stage("geometry", "resize"), &p, &in, &want, NULL, 1e-6,
                                     label);
                pf_test_image_free(&want);
                free(wx);
                free(wy);
            }
        pf_test_image_free(&in);
    }
    /* Catmull-Rom and Lanczos at the same size are the input, to the bit (their kernels
       are 1 at 0 and 0 at every other integer); Mitchell softens it. */
    pf_image in = pf_test_image(r, 23, 17, 0, 1), out;
    for (int m = 0; m < 3; m++) {
        pf_resize_params p = {23, 17, 1, PF_RESIZE_BICUBIC + m, 0, 0, PF_ALPHA_STRAIGHT, 0};
        CHECK(run_stage("resize", &p, &in, &out) == 0);
        const int same = fd_same_bits(&in, &out);
        CHECKF(same == (m != 1), "resize %s at the same size: %s", names[m],
               same ? "the input" : "not the input");
        pf_test_image_free(&out);
    }
    /* Opaque pixels: premultiplied sums are the straight ones. */
    pf_image opaque = pf_test_image(r, 31, 19, 0, 1), a, b;
    for (int y = 0; y < opaque.height; y++)
        for (int x = 0; x < opaque.width; x++)
            pf_image_row(&opaque, y)[x].w = 1;
    for (int m = 0; m < 3; m++) {
        pf_resize_params ps = {12, 40, 1, PF_RESIZE_BICUBIC + m, 0, 0, PF_ALPHA_STRAIGHT, 0};
        pf_resize_params pp = ps;
        pp.alpha = PF_ALPHA_PREMULTIPLIED;
        CHECK(run_stage("resize", &ps, &opaque, &a) == 0 &&
              run_stage("resize", &pp, &opaque, &b) == 0);
        CHECKF(fd_same_bits(&a, &b), "resize %s: opaque premultiplied differs from straight",
               names[m]);
        pf_test_image_free(&a);
        pf_test_image_free(&b);
    }
    pf_test_image_free(&opaque);
    pf_test_image_free(&in);
}

int main(void)
{
    static const char *const names[] = {"resize", "crop", "flip", "rotate", "pad"};
    static const fd_test_fn tests[] = {test_decimal_sizes, test_rotate_parity, test_crop_outside,
                                       test_filters};
    return fd_main("test_geometry_edges", "geometry", PF_STAGE_RESAMPLE, names, PF_COUNTOF(names),
                   tests, PF_COUNTOF(tests));
}
