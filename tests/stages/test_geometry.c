/* tests/stages/test_geometry.c: the geometry family (resample stages) against plain
 * references, with the family driver (tests/lib/family_driver.h).
 *
 * resize is checked against dense per-axis weight vectors written from the formulas
 * (OpenCV's INTER_LINEAR coordinates with its own edge clamping, centre-aligned nearest,
 * exact overlap areas, Pillow's triangle widened by the factor for antialias), straight
 * on random values and premultiplied on images with alpha (harness.h's h_alpha_image);
 * crop, flip, rotate and pad against forward maps (each input pixel sent to where it
 * belongs), and against each other (four quarter turns, 180 as a flip of both axes);
 * rotate by any angle premultiplied against a bilinear sum at geometry.h's source
 * positions (tests/stages/test_stage_modes.c checks those positions against its own).
 */
#include <math.h>
#include <string.h>

#include "family_driver.h"

#include "geometry.h"

static const pf_shape sizes[] = {{1, 1}, {2, 3}, {13, 7}, {97, 61}, {5, 33}};

/* ---- Running a case ------------------------------------------------------------------- */

static void check_case(const char *name, const void *params, const pf_image *in,
                       const pf_image *want, double tol, const char *what)
{
    char label[256];
    snprintf(label, sizeof label, "%s (%s) on %dx%d", name, what, in->width, in->height);
    fd_check_image_stage(h_stage("geometry", name), params, in, want, NULL, tol, label);
}

/* out = stage(in), allocated at the stage's shape (0x0 and nonzero return on failure). */
static int run_stage(const char *name, const void *params, const pf_image *in, pf_image *out)
{
    const pf_stage_desc *d = h_stage("geometry", name);
    pf_shape s = h_out_shape(d, params, (pf_shape){in->width, in->height});
    *out = pf_test_image_poisoned(s.width ? s.width : 1, s.height ? s.height : 1);
    return s.width == 0 || h_run(d, params, in, 1, out, 0) != 0;
}

/* The shape error of a stage: non-zero and the message. */
static int shape_error(const char *name, const void *params, pf_shape in, char *err,
                       size_t err_size)
{
    pf_shape out = {0, 0};
    err[0] = 0;
    return h_stage("geometry", name)->shape(params, &in, &out, err, err_size);
}

/* ---- resize ----------------------------------------------------------------------------- */

#define TRIANGLE 3 /* bilinear with antialias, where the axis shrinks */

/* The weights of output index o over all n_in input pixels along one axis (mode: a
   PF_RESIZE_* or TRIANGLE). */
static void axis_weights(int mode, int n_in, int n_out, int o, double *w)
{
    for (int i = 0; i < n_in; i++)
        w[i] = 0;
    if (mode == TRIANGLE && n_out < n_in) { /* Pillow's: 1 - |i + 0.5 - c| / f, normalised */
        double f = (double)n_in / n_out, c = (o + 0.5) * f, sum = 0;
        for (int i = 0; i < n_in; i++)
            sum += w[i] = fmax(0, 1 - fabs(i + 0.5 - c) / f);
        for (int i = 0; i < n_in; i++)
            w[i] /= sum;
    } else if (mode == PF_RESIZE_NEAREST) {
        int i = (int)floor((o + 0.5) * n_in / n_out);
        w[i < n_in ? i : n_in - 1] = 1;
    } else if (mode == PF_RESIZE_AREA && n_out <= n_in) {
        double lo = (double)o * n_in / n_out, hi = (double)(o + 1) * n_in / n_out;
        for (int i = 0; i < n_in; i++) {
            double cover = fmin(i + 1.0, hi) - fmax((double)i, lo);
            w[i] = cover > 0 ? cover / (hi - lo) : 0;
        }
    } else { /* as OpenCV's resize computes INTER_LINEAR coordinates */
        double fx = (o + 0.5) * n_in / n_out - 0.5;
        int sx = (int)floor(fx);
        fx -= sx;
        if (sx < 0)
            sx = 0, fx = 0;
        if (sx >= n_in - 1)
            sx = n_in - 1, fx = 0;
        w[sx] += 1 - fx;
        if (fx > 0)
            w[sx + 1] += fx;
    }
}

/* resize in double from the dense weights: straight, or premultiplied (pm): colour
   sum(w a c) / sum(w a), 0 where that is 0, alpha sum(w a). */
static pf_image ref_resize_pm(const pf_image *in, int mode, int pm, int ow, int oh)
{
    pf_image out = pf_test_image_poisoned(ow, oh);
    double *wx = malloc(sizeof(double) * (size_t)ow * (size_t)in->width);
    double *wy = malloc(sizeof(double) * (size_t)in->height);
    for (int x = 0; x < ow; x++)
        axis_weights(mode, in->width, ow, x, wx + (size_t)x * (size_t)in->width);
    for (int y = 0; y < oh; y++) {
        axis_weights(mode, in->height, oh, y, wy);
        for (int x = 0; x < ow; x++) {
            const double *w = wx + (size_t)x * (size_t)in->width;
            double s[4] = {0, 0, 0, 0}, v[4];
            for (int j = 0; j < in->height; j++)
                for (int i = 0; wy[j] != 0 && i < in->width; i++)
                    if (w[i] != 0) {
                        fd_px(in, i, j, v);
                        for (int c = 0; c < 4; c++)
                            s[c] += pm && c < 3 ? (v[3] != 0 ? wy[j] * w[i] * v[3] * v[c] : 0)
                                                : wy[j] * w[i] * v[c];
                    }
            for (int c = 0; pm && c < 3; c++)
                s[c] = s[3] != 0 ? s[c] / s[3] : 0;
            fd_set(&out, x, y, s);
        }
    }
    free(wx);
    free(wy);
    return out;
}

static pf_image ref_resize(const pf_image *in, int mode, int ow, int oh)
{
    return ref_resize_pm(in, mode, 0, ow, oh);
}

/* The output size the params ask for, worked out again. */
static pf_shape resize_size(const pf_resize_params *p, int w, int h)
{
    double ow = p->width, oh = p->height;
    if (p->width && !p->height)
        oh = floor((double)h * p->width / w + 0.5);
    else if (!p->width && p->height)
        ow = floor((double)w * p->height / h + 0.5);
    else if (!p->width && !p->height) /* a product within the float's rounding of a half
                                           counts as the half (docs/stages.md) */
        ow = floor(w * (double)p->scale + 0.5 + fabs(w * (double)p->scale) * 0x1p-23),
        oh = floor(h * (double)p->scale + 0.5 + fabs(h * (double)p->scale) * 0x1p-23);
    return (pf_shape){ow < 1 ? 1 : (int)ow, oh < 1 ? 1 : (int)oh};
}

static void test_resize(pf_rng *r)
{
    static const char *const modes[] = {"bilinear", "nearest", "area"};
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        for (int m = 0; m < 3; m++) {
            pf_resize_params cases[] = {
                {w, h, 1, m, 0, 0, PF_ALPHA_STRAIGHT, 0}, /* same size */
                {0, 0, 1, m, 0, 0, PF_ALPHA_STRAIGHT, 0}, /* scale 1 */
                {pf_rng_range(r, 1, 2 * w + 3), 0, 1, m, 0, 0, PF_ALPHA_STRAIGHT,
                 0}, /* width, keep aspect */
                {0, pf_rng_range(r, 1, 2 * h + 3), 1, m, 0, 0, PF_ALPHA_STRAIGHT,
                 0}, /* height, keep aspect */
                {pf_rng_range(r, 1, w + 2), pf_rng_range(r, 1, 2 * h), 1, m, 0, 0,
                 PF_ALPHA_STRAIGHT, 0},
                {pf_rng_range(r, 1, w), pf_rng_range(r, 1, h), 1, m, 0, 0, PF_ALPHA_STRAIGHT,
                 0}, /* shrink */
                {0, 0, 0.1f + 2.9f * pf_rng_float(r), m, 0, 0, PF_ALPHA_STRAIGHT, 0},
                {0, 0, 1.0f / 1024, m, 0, 0, PF_ALPHA_STRAIGHT, 0}, /* to 1x1 */
                {0, 0, w * h <= 6 ? 64.0f : 1.5f, m, 0, 0, PF_ALPHA_STRAIGHT, 0},
            };
            for (int c = 0; c < PF_COUNTOF(cases); c++) {
                pf_shape s = resize_size(&cases[c], w, h);
                pf_image want = ref_resize(&in, m, s.width, s.height);
                char what[128];
                snprintf(what, sizeof what, "%s, %d %d %g to %dx%d", modes[m], cases[c].width,
                         cases[c].height, cases[c].scale, s.width, s.height);
                check_case("resize", &cases[c], &in, &want, 1e-6, what);
                pf_test_image_free(&want);
            }
            /* The same size is the input, to the bit, in every mode, antialiased or not:
               straight as it is; premultiplied with its alpha clamped to [0, 1] (the
               coverage premultiplied mixing weights by) and no colour where that is 0
               (c * a / a is c itself in double). */
            pf_image pm_in = pf_test_image(r, w, h, 0, 1);
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    pf_float4 v = pf_image_row(&in, y)[x];
                    float a = pf_pm_alpha(v.w);
                    pf_image_row(&pm_in, y)[x] =
                        a > 0 ? pf_f4(v.x, v.y, v.z, a) : pf_f4(0, 0, 0, 0);
                }
            for (int k = 0; k < 4; k++) {
                pf_image out;
                pf_resize_params p = {w, h, 1, m, 0, 0, k & 1, k >> 1};
                const pf_image *want = m == 1 || (k & 1) == PF_ALPHA_STRAIGHT ? &in : &pm_in;
                CHECKF(run_stage("resize", &p, &in, &out) == 0 && fd_same_bits(want, &out),
                       "%s, same size, %s%s", modes[m], k & 1 ? "straight" : "premultiplied",
                       k >> 1 ? ", antialiased" : "");
                pf_test_image_free(&out);
            }
            pf_test_image_free(&pm_in);
        }
        pf_test_image_free(&in);
    }
    char err[256];
    pf_resize_params big = {0, 0, 64, PF_RESIZE_BILINEAR, 0, 0, 0, 0};
    CHECKF(shape_error("resize", &big, (pf_shape){20000, 10}, err, sizeof err) != 0 &&
               strstr(err, "20000x10") && strstr(err, "1280000x640"),
           "resize past the largest side: \"%s\"", err);
    pf_resize_params huge = {60000, 60000, 1, PF_RESIZE_BILINEAR, 0, 0, 0, 0};
    CHECKF(shape_error("resize", &huge, (pf_shape){10, 10}, err, sizeof err) != 0 &&
               strstr(err, "60000x60000"),
           "resize past the largest area: \"%s\"", err);
}

/* ---- antialias and alpha ------------------------------------------------------------------ */

static const char *const ref_modes[] = {"bilinear", "nearest", "area", "antialiased bilinear"};

/* The stage's params for a reference mode (TRIANGLE: bilinear with antialias). */
static pf_resize_params resize_for(int mode, int ow, int oh, int alpha)
{
    return (pf_resize_params){ow, oh, 1,     mode == TRIANGLE ? PF_RESIZE_BILINEAR : mode,
                              0,  0,  alpha, mode == TRIANGLE};
}

/* Decimal scales and percents as written: 5 x 0.7 = 3.5 rounds up to 4, though 0.7 as a
   float is 0.69999999 (the size used to come out 3). */
static void test_decimal_sizes(pf_rng *r)
{
    (void)r;
    const pf_stage_desc *rs = h_stage("geometry", "resize"), *cr = h_stage("geometry", "crop");
    const struct {
        int w, h;
        float scale;
        int ow, oh;
    } rc[] = {{5, 5, 0.7f, 4, 4}, {10, 10, 0.45f, 5, 5},  {10, 30, 0.35f, 4, 11},
              {7, 3, 0.5f, 4, 2}, {100, 1, 0.015f, 2, 1}, {1000, 999, 0.0005f, 1, 1}};
    char err[256];
    for (int i = 0; i < PF_COUNTOF(rc); i++) {
        pf_resize_params p = {0, 0, rc[i].scale, PF_RESIZE_BILINEAR, 0, 0, 0, 0};
        pf_shape in = {rc[i].w, rc[i].h}, out = {0, 0};
        CHECK(rs->shape(&p, &in, &out, err, sizeof err) == 0);
        CHECKF(out.width == rc[i].ow && out.height == rc[i].oh,
               "%dx%d at scale %g: %dx%d, not %dx%d", rc[i].w, rc[i].h, rc[i].scale, out.width,
               out.height, rc[i].ow, rc[i].oh);
    }
    pf_crop_params c = {0, 0, 0, 0, PF_GRAVITY_CENTER, 0.7f, 50, 0, {0, 0, 0, 0}};
    pf_shape in = {500, 7}, out = {0, 0};
    CHECK(cr->shape(&c, &in, &out, err, sizeof err) == 0);
    CHECKF(out.width == 4 && out.height == 4, "crop 0.7%% x 50%% of 500x7: %dx%d, not 4x4",
           out.width, out.height);
}

static void test_resize_alpha(pf_rng *r)
{
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image rnd = pf_test_image(r, w, h, -0.25f, 1.25f);
        for (int m = 0; m < 4; m++) {
            int cases[][2] = {
                {(w + 1) / 2, (h + 1) / 2},
                {pf_rng_range(r, 1, w), pf_rng_range(r, 1, h)},
                {pf_rng_range(r, 1, w), h + pf_rng_range(r, 1, 9)}, /* one axis each way */
                {2 * w + 1, 3 * h},
                {1, 1},
            };
            for (int c = 0; c < PF_COUNTOF(cases); c++) {
                const int ow = cases[c][0], oh = cases[c][1];
                char what[128];
                /* straight on random values (the antialiased triangle's first check) */
                if (m == TRIANGLE) {
                    pf_resize_params p = resize_for(m, ow, oh, PF_ALPHA_STRAIGHT);
                    pf_image want = ref_resize(&rnd, m, ow, oh);
                    snprintf(what, sizeof what, "%s straight to %dx%d", ref_modes[m], ow, oh);
                    check_case("resize", &p, &rnd, &want, 1e-6, what);
                    pf_test_image_free(&want);
                }
                /* premultiplied, the default, on alpha as files give it (nearest copies) */
                int bits = c % 3 == 0 ? 8 : (c % 3 == 1 ? 16 : 0);
                pf_image in = h_alpha_image(r, w, h, bits);
                pf_resize_params p = resize_for(m, ow, oh, PF_ALPHA_PREMULTIPLIED);
                pf_image want = ref_resize_pm(&in, m, m != PF_RESIZE_NEAREST, ow, oh);
                snprintf(what, sizeof what, "%s premultiplied to %dx%d, %d-bit alpha", ref_modes[m],
                         ow, oh, bits ? bits : 32);
                check_case("resize", &p, &in, &want, 1e-6, what);
                pf_test_image_free(&want);
                pf_test_image_free(&in);
            }
        }
        /* enlarging, antialias changes nothing: bilinear, to the bit */
        pf_image a, b;
        pf_resize_params up = {2 * w + 1, 3 * h, 1, PF_RESIZE_BILINEAR, 0, 0, 0, 0};
        CHECK(run_stage("resize", &up, &rnd, &a) == 0);
        up.antialias = 1;
        CHECK(run_stage("resize", &up, &rnd, &b) == 0);
        CHECKF(fd_same_bits(&a, &b), "resize %dx%d up: antialias changed bilinear", w, h);
        pf_test_image_free(&a);
        pf_test_image_free(&b);
        pf_test_image_free(&rnd);
    }
    /* Shrinking by 4, plain bilinear reads 2 of every 4 columns: a pattern of period 4
       (1 0 0 0) aliases to 0 or to 0.5; the antialiased shrink sees every pixel and gives
       its mean, 0.25, away from the borders. */
    pf_image stripes = pf_test_image_poisoned(64, 4);
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 64; x++) {
            float v = x % 4 == 0;
            pf_image_row(&stripes, y)[x] = pf_f4(v, v, v, 1);
        }
    pf_image plain, aa;
    CHECK(run_stage("resize", &(pf_resize_params){16, 1, 1, 0, 0, 0, 0, 0}, &stripes, &plain) == 0);
    CHECK(run_stage("resize", &(pf_resize_params){16, 1, 1, 0, 0, 0, 0, 1}, &stripes, &aa) == 0);
    for (int x = 1; x < 15; x++) {
        pf_float4 p = pf_image_row(&plain, 0)[x], q = pf_image_row(&aa, 0)[x];
        CHECKF(p.x == 0 || p.x == 0.5f, "bilinear shrink of stripes: column %d is %g", x, p.x);
        CHECKF(fabsf(q.x - 0.25f) <= 1e-6f, "antialiased shrink of stripes: column %d is %g", x,
               q.x);
    }
    pf_test_image_free(&stripes);
    pf_test_image_free(&plain);
    pf_test_image_free(&aa);
}

/* rotate by any angle, premultiplied, at the source positions geometry.h gives. */
static pf_image ref_rotate_pm(const pf_image *in, const pf_rotate_params *p, int ow, int oh)
{
    pf_image out = pf_test_image_poisoned(ow, oh);
    double s, c;
    pf_sincos_deg(p->degrees, &s, &c);
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int x0, y0;
            double fx, fy, acc[4] = {0, 0, 0, 0}, v[4];
            pf_rotate_source(s, c, ow, oh, in->width, in->height, x, y, &x0, &y0, &fx, &fy);
            for (int k = 0; k < 4; k++) {
                int ix = x0 + (k & 1), iy = y0 + (k >> 1);
                double wt = (k & 1 ? fx : 1 - fx) * (k >> 1 ? fy : 1 - fy);
                if (ix >= 0 && ix < in->width && iy >= 0 && iy < in->height)
                    fd_px(in, ix, iy, v);
                else
                    for (int i = 0; i < 4; i++)
                        v[i] = p->fill[i];
                for (int i = 0; i < 3 && v[3] != 0 && wt != 0; i++)
                    acc[i] += wt * v[3] * v[i];
                acc[3] += wt * v[3];
            }
            for (int i = 0; i < 3; i++)
                acc[i] = acc[3] != 0 ? acc[i] / acc[3] : 0;
            fd_set(&out, x, y, acc);
        }
    return out;
}

/* Output pixels with alpha > 0 of stage(params) on the red-blue image (left half
   transparent red, right half opaque blue): none may be reddish. Returns how many
   visible pixels there are and, in *tinted, how many are reddish. */
static int visible_pixels(const char *stage, const void *params, int *tinted)
{
    pf_image in = pf_test_image_poisoned(10, 6), out;
    for (int y = 0; y < 6; y++)
        for (int x = 0; x < 10; x++)
            pf_image_row(&in, y)[x] = x < 5 ? pf_f4(1, 0, 0, 0) : pf_f4(0, 0, 1, 1);
    int visible = 0;
    *tinted = 0;
    if (run_stage(stage, params, &in, &out) == 0)
        for (int y = 0; y < out.height; y++)
            for (int x = 0; x < out.width; x++) {
                pf_float4 v = pf_image_row(&out, y)[x];
                visible += v.w > 0;
                *tinted += v.w > 0 && !(v.x == 0 && v.y == 0 && fabsf(v.z - 1) <= 1e-6f);
            }
    pf_test_image_free(&in);
    pf_test_image_free(&out);
    return visible;
}

static void test_rotate_alpha(pf_rng *r)
{
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_rotate_params ps[] = {
            {.degrees = 30, .expand = 1},
            {.degrees = -12.5f, .fill = {0.25f, 0.5f, 0.75f, 0.5f}},
            {.degrees = 181, .expand = 1, .fill = {1, 0, 0, 0}},
        };
        for (int i = 0; i < PF_COUNTOF(ps); i++) {
            int bits = i == 0 ? 8 : (i == 1 ? 16 : 0);
            pf_image in = h_alpha_image(r, w, h, bits);
            pf_shape os = h_out_shape(h_stage("geometry", "rotate"), &ps[i], (pf_shape){w, h});
            pf_image want = ref_rotate_pm(&in, &ps[i], os.width, os.height);
            char what[128];
            snprintf(what, sizeof what, "%g degrees premultiplied, %d-bit alpha", ps[i].degrees,
                     bits ? bits : 32);
            check_case("rotate", &ps[i], &in, &want, 1e-6, what);
            pf_test_image_free(&want);
            pf_test_image_free(&in);
        }
    }
    /* No red from transparent pixels in what is visible, premultiplied; straight, some.
       On an opaque image (with an opaque fill) premultiplied is straight to the bit. */
    static const pf_resize_params rs[] = {
        {3, 2, 1, PF_RESIZE_BILINEAR, 0, 0, 0, 0}, {3, 2, 1, PF_RESIZE_AREA, 0, 0, 0, 0},
        {3, 2, 1, PF_RESIZE_BILINEAR, 0, 0, 0, 1}, {17, 9, 1, PF_RESIZE_BILINEAR, 0, 0, 0, 0},
        {17, 9, 1, PF_RESIZE_AREA, 0, 0, 0, 1},
    };
    pf_image opaque = pf_test_image(r, 37, 23, -0.25f, 1.25f);
    for (int y = 0; y < opaque.height; y++)
        for (int x = 0; x < opaque.width; x++)
            pf_image_row(&opaque, y)[x].w = 1;
    for (int i = 0; i < PF_COUNTOF(rs); i++) {
        pf_resize_params p = rs[i];
        int tinted, n = visible_pixels("resize", &p, &tinted);
        CHECKF(n > 0 && tinted == 0, "resize %dx%d mode %d antialias %d: %d of %d visible tinted",
               p.width, p.height, p.mode, p.antialias, tinted, n);
        p.alpha = PF_ALPHA_STRAIGHT;
        visible_pixels("resize", &p, &tinted);
        CHECKF(tinted > 0, "resize %dx%d mode %d straight: no tint", p.width, p.height, p.mode);
        pf_image a, b;
        CHECK(run_stage("resize", &p, &opaque, &a) == 0);
        p.alpha = PF_ALPHA_PREMULTIPLIED;
        CHECK(run_stage("resize", &p, &opaque, &b) == 0);
        CHECKF(fd_same_bits(&a, &b), "resize %dx%d mode %d: opaque premultiplied is not straight",
               p.width, p.height, p.mode);
        pf_test_image_free(&a);
        pf_test_image_free(&b);
    }
    pf_rotate_params rp = {.degrees = 30, .expand = 1};
    int tinted, n = visible_pixels("rotate", &rp, &tinted);
    CHECKF(n > 0 && tinted == 0, "rotate 30: %d of %d visible tinted", tinted, n);
    rp.alpha = PF_ALPHA_STRAIGHT;
    visible_pixels("rotate", &rp, &tinted);
    CHECKF(tinted > 0, "rotate 30 straight: no tint");
    rp.fill[3] = 1;
    pf_image a, b;
    CHECK(run_stage("rotate", &rp, &opaque, &a) == 0);
    rp.alpha = PF_ALPHA_PREMULTIPLIED;
    CHECK(run_stage("rotate", &rp, &opaque, &b) == 0);
    CHECKF(fd_same_bits(&a, &b), "rotate 30: opaque premultiplied is not straight");
    pf_test_image_free(&a);
    pf_test_image_free(&b);
    pf_test_image_free(&opaque);
}

/* ---- crop, flip, rotate, pad ------------------------------------------------------------- */

static void test_crop(pf_rng *r)
{
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        int x = pf_rng_range(r, 0, w - 1), y = pf_rng_range(r, 0, h - 1);
        pf_crop_params cases[] = {
            {0, 0, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}}, /* all */
            {0, 0, w, h, 0, 0, 0, 0, {0, 0, 0, 0}}, /* all */
            {x, y, 1, 1, 0, 0, 0, 0, {0, 0, 0, 0}}, /* a pixel */
            {x, y, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}}, /* to the edges */
            {x,
             y,
             pf_rng_range(r, 1, w - x),
             pf_rng_range(r, 1, h - y),
             0,
             0,
             0,
             0,
             {0, 0, 0, 0}},                                 /* random */
            {w - 1, h - 1, 1, 1, 0, 0, 0, 0, {0, 0, 0, 0}}, /* last pixel */
        };
        for (int c = 0; c < PF_COUNTOF(cases); c++) {
            const pf_crop_params *p = &cases[c];
            int cw = p->width ? p->width : w - p->x, ch = p->height ? p->height : h - p->y;
            pf_image want = pf_test_image_poisoned(cw, ch);
            double v[4];
            for (int j = 0; j < ch; j++)
                for (int i = 0; i < cw; i++) {
                    fd_px(&in, p->x + i, p->y + j, v);
                    fd_set(&want, i, j, v);
                }
            char what[64];
            snprintf(what, sizeof what, "%d %d %d %d", p->x, p->y, p->width, p->height);
            check_case("crop", p, &in, &want, 0, what);
            pf_test_image_free(&want);
        }
        /* Outside the input: an error that names both sizes. */
        pf_crop_params bad[] = {
            {w, 0, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}},
            {0, h, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}},
            {0, 0, w + 1, h, 0, 0, 0, 0, {0, 0, 0, 0}},
            {0, 0, w, h + 1, 0, 0, 0, 0, {0, 0, 0, 0}},
            {1, 0, w, h, 0, 0, 0, 0, {0, 0, 0, 0}},
            {0, h - 1, 1, 2, 0, 0, 0, 0, {0, 0, 0, 0}},
            {x, y, w - x + 1, 1, 0, 0, 0, 0, {0, 0, 0, 0}},
        };
        for (int c = 0; c < PF_COUNTOF(bad); c++) {
            char err[256], insize[32], req[64];
            snprintf(insize, sizeof insize, "%dx%d", w, h);
            snprintf(req, sizeof req, "width %d, height %d", bad[c].width, bad[c].height);
            CHECKF(shape_error("crop", &bad[c], sizes[si], err, sizeof err) != 0 &&
                       strstr(err, insize) && strstr(err, req),
                   "crop %d %d %d %d of %s: \"%s\"", bad[c].x, bad[c].y, bad[c].width,
                   bad[c].height, insize, err);
        }
        pf_test_image_free(&in);
    }
}

/* Where input pixel (i, j) of a w x h image lands: flips and clockwise turns. */
static void flip_to(int axis, int w, int h, int i, int j, int *x, int *y)
{
    *x = axis == PF_FLIP_VERTICAL ? i : w - 1 - i;
    *y = axis == PF_FLIP_HORIZONTAL ? j : h - 1 - j;
}

static void turn_to(int angle, int w, int h, int i, int j, int *x, int *y)
{
    for (int q = 0; q <= angle; q++) { /* a quarter turn at a time: (i, j) -> (h-1-j, i) */
        int t = i;
        i = h - 1 - j, j = t;
        t = w, w = h, h = t;
    }
    *x = i, *y = j;
}

typedef void (*forward_fn)(int k, int w, int h, int i, int j, int *x, int *y);

static void check_forward(const char *name, const void *params, int k, int ow, int oh,
                          forward_fn to, const pf_image *in, const char *what)
{
    pf_image want = pf_test_image_poisoned(ow, oh);
    double v[4];
    for (int j = 0; j < in->height; j++)
        for (int i = 0; i < in->width; i++) {
            int x, y;
            to(k, in->width, in->height, i, j, &x, &y);
            fd_px(in, i, j, v);
            fd_set(&want, x, y, v);
        }
    check_case(name, params, in, &want, 0, what);
    pf_test_image_free(&want);
}

static void test_flip_rotate(pf_rng *r)
{
    static const char *const axes[] = {"horizontal", "vertical", "both"};
    static const char *const angles[] = {"90", "180", "270"};
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        for (int k = 0; k < 3; k++) {
            check_forward("flip", &(pf_flip_params){k}, k, w, h, flip_to, &in, axes[k]);
            check_forward("rotate", &(pf_rotate_params){.angle = k}, k, k == 1 ? w : h,
                          k == 1 ? h : w, turn_to, &in, angles[k]);
        }
        /* Four quarter turns, and 90 then 270, give the input back; 180 is both flips. */
        pf_image a, b, c, d;
        CHECK(run_stage("rotate", &(pf_rotate_params){.angle = PF_ROTATE_90}, &in, &a) == 0);
        CHECK(run_stage("rotate", &(pf_rotate_params){.angle = PF_ROTATE_90}, &a, &b) == 0);
        CHECK(run_stage("rotate", &(pf_rotate_params){.angle = PF_ROTATE_180}, &b, &c) == 0);
        CHECKF(fd_same_bits(&in, &c), "rotate %dx%d: 90 + 90 + 180 is not the identity", w, h);
        pf_test_image_free(&c);
        CHECK(run_stage("rotate", &(pf_rotate_params){.angle = PF_ROTATE_270}, &a, &c) == 0);
        CHECKF(fd_same_bits(&in, &c), "rotate %dx%d: 90 + 270 is not the identity", w, h);
        CHECK(run_stage("flip", &(pf_flip_params){PF_FLIP_BOTH}, &in, &d) == 0);
        CHECKF(pf_test_image_maxdiff(&b, &d) == 0, "rotate 180 differs from flip both");
        pf_test_image_free(&a);
        pf_test_image_free(&b);
        pf_test_image_free(&c);
        pf_test_image_free(&d);
        pf_test_image_free(&in);
    }
}

static void test_pad(pf_rng *r)
{
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        pf_pad_params cases[] = {
            {0, 0, 0, 0, {0, 0, 0, 1}},
            {1, 2, 3, 4, {0, 0, 0, 1}},
            {40, 0, 0, 33, {0.25f, -1, 7, 0.5f}},
            {pf_rng_range(r, 0, 9),
             pf_rng_range(r, 0, 9),
             pf_rng_range(r, 0, 9),
             pf_rng_range(r, 0, 9),
             {pf_rng_float(r), pf_rng_float(r), pf_rng_float(r), 1}},
        };
        for (int c = 0; c < PF_COUNTOF(cases); c++) {
            const pf_pad_params *p = &cases[c];
            int ow = w + p->left + p->right, oh = h + p->top + p->bottom;
            pf_image want = pf_test_image_poisoned(ow, oh);
            double v[4], fill[4] = {p->color[0], p->color[1], p->color[2], p->color[3]};
            for (int y = 0; y < oh; y++)
                for (int x = 0; x < ow; x++)
                    fd_set(&want, x, y, fill);
            for (int j = 0; j < h; j++)
                for (int i = 0; i < w; i++) {
                    fd_px(&in, i, j, v);
                    fd_set(&want, p->left + i, p->top + j, v);
                }
            char what[64];
            snprintf(what, sizeof what, "%d %d %d %d", p->left, p->right, p->top, p->bottom);
            check_case("pad", p, &in, &want, 0, what);
            pf_test_image_free(&want);
        }
        pf_test_image_free(&in);
    }
    /* The default color is opaque black; too large an output is an error. */
    pf_pad_params *def = h_params(h_stage("geometry", "pad"));
    CHECK(def->color[0] == 0 && def->color[1] == 0 && def->color[2] == 0 && def->color[3] == 1);
    free(def);
    char err[256];
    pf_pad_params big = {PF_GEOMETRY_MAX_SIDE, 0, 0, 0, {0, 0, 0, 1}};
    CHECKF(shape_error("pad", &big, (pf_shape){13, 7}, err, sizeof err) != 0 && strstr(err, "13x7"),
           "pad past the largest side: \"%s\"", err);
}

/* Premultiplied mixing of alphas outside [0, 1] (float frames, intermediate values):
   they are clamped first, so every colour out is a weighted mean of colours in, never the
   quotient of sums that nearly cancel (a GPU run against the CPU found differences of
   thousands of steps there). Colours in [0, 1] stay in [0, 1]. test_filter checks the
   blurs the same way. */
static void test_alpha_out_of_range(pf_rng *r)
{
    pf_image in = pf_test_image(r, 37, 29, 0, 1);
    for (int y = 0; y < in.height; y++)
        for (int x = 0; x < in.width; x++)
            pf_image_row(&in, y)[x].w = -1.0f + 3.0f * pf_rng_float(r);
    pf_resize_params rs[] = {{13, 11, 1, 0, 0, 0, PF_ALPHA_PREMULTIPLIED, 0},
                             {13, 11, 1, 2, 0, 0, PF_ALPHA_PREMULTIPLIED, 0},
                             {13, 11, 1, 0, 0, 0, PF_ALPHA_PREMULTIPLIED, 1},
                             {71, 53, 1, 0, 0, 0, PF_ALPHA_PREMULTIPLIED, 0}};
    for (int k = 0; k < PF_COUNTOF(rs); k++) {
        pf_image out;
        int rc = run_stage("resize", &rs[k], &in, &out);
        CHECK(rc == 0);
        float lo = 0, hi = 0;
        if (rc == 0)
            fd_colour_range(&out, &lo, &hi);
        CHECKF(lo >= -1e-6f && hi <= 1 + 1e-6f,
               "case %d: premultiplied colours of [0, 1] came out in [%g, %g]", k, lo, hi);
        pf_test_image_free(&out);
    }
    pf_test_image_free(&in);
}

/* resize against the per-pixel form of its formula (geometry_cuda.cu's resize_kernel:
   pf_axis_span's taps, rows outer and columns inner, pf_acc4 premultiplied wherever the
   params say, zero weights skipped), bit for bit: the row loops (the straight rows of
   opaque input, the vector sums) must give the formula's floats exactly. Colours hold
   NaN, infinities and -0 in opaque and in mixed rows; a NaN matches any NaN. */
static pf_float4 ref_resize_px(const pf_resize_params *p, const pf_image *in, int ow, int oh, int x,
                               int y)
{
    const int pm = p->alpha != PF_ALPHA_STRAIGHT && p->mode != PF_RESIZE_NEAREST;
    const pf_span sy = pf_axis_span(p->mode, p->antialias, in->height, oh, y);
    const pf_span sx = pf_axis_span(p->mode, p->antialias, in->width, ow, x);
    pf_acc4 acc = {{0, 0, 0, 0}, 0};
    for (int j = 0; j < sy.count; j++) {
        int iy, ix;
        const double wy = pf_span_weight(&sy, j, &iy);
        for (int i = 0; i < sx.count; i++) {
            const double wt = wy * pf_span_weight(&sx, i, &ix);
            if (wt == 0)
                continue;
            const pf_float4 v = pf_image_row(in, iy)[ix];
            pf_acc4_add(&acc, pm, wt, v.x, v.y, v.z, v.w);
        }
    }
    return pf_f4(pf_acc4_out(&acc, pm, 0), pf_acc4_out(&acc, pm, 1), pf_acc4_out(&acc, pm, 2),
                 pf_acc4_out(&acc, pm, 3));
}

static int same_float(float a, float b)
{
    return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0;
}

static void test_resize_formula(pf_rng *r)
{
    static const char *const mode_names[] = {"bilinear", "nearest",  "area",
                                             "bicubic",  "mitchell", "lanczos3"};
    static const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e30f, -3.5f};
    const pf_shape outs[] = {{48, 30}, {33, 20}, {150, 90}, {1, 1}, {97, 1}, {20, 61}};
    for (int kind = 0; kind < 3; kind++) { /* opaque, opaque with specials, mixed alpha */
        pf_image in = pf_test_image(r, 97, 61, -0.25f, 1.25f);
        for (int y = 0; y < in.height; y++)
            for (int x = 0; x < in.width; x++) {
                pf_float4 *v = &pf_image_row(&in, y)[x];
                v->w = kind < 2 ? 1.0f : (pf_rng_float(r) < 0.3f ? 1.0f : pf_rng_float(r));
                if (kind > 0 && pf_rng_float(r) < 0.02f)
                    v->y = specials[(x + y) % PF_COUNTOF(specials)];
            }
        for (int m = 0; m < PF_COUNTOF(mode_names); m++)
            for (int k = 0; k < 4; k++)
                for (int o = 0; o < PF_COUNTOF(outs); o++) {
                    const int alpha = k & 1 ? PF_ALPHA_STRAIGHT : PF_ALPHA_PREMULTIPLIED;
                    pf_resize_params p = {outs[o].width, outs[o].height, 1, m, 0, 0, alpha, k >> 1};
                    pf_image out;
                    int bad = run_stage("resize", &p, &in, &out), bx = -1, by = -1;
                    for (int y = 0; !bad && y < out.height; y++)
                        for (int x = 0; !bad && x < out.width; x++) {
                            const pf_float4 g = pf_image_row(&out, y)[x],
                                            w = ref_resize_px(&p, &in, out.width, out.height, x, y);
                            if (!same_float(g.x, w.x) || !same_float(g.y, w.y) ||
                                !same_float(g.z, w.z) || !same_float(g.w, w.w))
                                bad = 1, bx = x, by = y;
                        }
                    CHECKF(!bad,
                           "resize %s%s, %s, input %s, 97x61 to %dx%d: differs from the "
                           "per-pixel formula at (%d, %d)",
                           mode_names[m], k >> 1 ? " antialiased" : "",
                           alpha == PF_ALPHA_STRAIGHT ? "straight" : "premultiplied",
                           kind == 0   ? "opaque"
                           : kind == 1 ? "opaque with NaN and infinities"
                                       : "with mixed alpha",
                           outs[o].width, outs[o].height, bx, by);
                    pf_test_image_free(&out);
                }
        pf_test_image_free(&in);
    }
}

int main(void)
{
    static const char *const names[] = {"resize", "crop", "flip", "rotate", "pad"};
    static const fd_test_fn tests[] = {
        test_resize,        test_crop,         test_flip_rotate,        test_pad,
        test_resize_alpha,  test_rotate_alpha, test_alpha_out_of_range, test_decimal_sizes,
        test_resize_formula};
    return fd_main("test_geometry", "geometry", PF_STAGE_RESAMPLE, names, PF_COUNTOF(names), tests,
                   PF_COUNTOF(tests));
}
