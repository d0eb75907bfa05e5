/* tests/stages/test_filter.c: the filter family (stencils) against plain references.
 *
 * The family driver (tests/lib/family_driver.h, shared with test_geometry.c and
 * test_analysis.c) checks the family's descriptors and param tables and runs each stage
 * whole, in bands and on one band alone against a reference image.
 *
 * The filter references are written from the definitions, in double, with no shortcut
 * the stages take: the gaussian as one 2D sum, the box as a 2D mean, the median by
 * sorting; premultiplied ones as sum(w a c) / sum(w a). Images have odd sizes, one
 * smaller than most radii. Straight references run on random values in [-0.25, 1.25);
 * premultiplied ones on images with alpha as files give (harness.h's h_alpha_image:
 * transparent pixels with garbage colour, float, 16-bit and 8-bit codes).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <string.h>

#include "family_driver.h"

#include "filter.h"
#include "pipefuse/stage_check.h"

static const pf_shape sizes[] = {{1, 1}, {2, 3}, {13, 7}, {97, 61}, {3, 2}};

/* ---- References ------------------------------------------------------------------------ */

/* One pixel's expected RGBA, and in alt what it may also be where rounding can tip a
   threshold either way (alt starts equal to v). */
typedef void (*ref_fn)(const void *params, const pf_image *in, int x, int y, double v[4],
                       double alt[4]);

static double at(const pf_image *im, int x, int y, int c)
{
    double v[4];
    fd_px(im, x, y, v);
    return v[c];
}

static void gauss2d(double sigma, const pf_image *in, int x, int y, double out[4])
{
    int r = (int)ceil(3.0 * sigma);
    double z = 0, s[4] = {0, 0, 0, 0}, v[4];
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++) {
            double w = r ? exp(-(dx * dx + dy * dy) / (2 * sigma * sigma)) : 1;
            z += w;
            fd_px(in, x + dx, y + dy, v);
            for (int c = 0; c < 4; c++)
                s[c] += w * v[c];
        }
    for (int c = 0; c < 4; c++)
        out[c] = s[c] / z;
}

static void ref_gaussian(const void *params, const pf_image *in, int x, int y, double v[4],
                         double alt[4])
{
    gauss2d(((const pf_gaussian_params *)params)->sigma, in, x, y, v);
}

static void ref_box(const void *params, const pf_image *in, int x, int y, double v[4],
                    double alt[4])
{
    int r = ((const pf_box_params *)params)->radius;
    for (int c = 0; c < 4; c++) {
        double s = 0;
        for (int dy = -r; dy <= r; dy++)
            for (int dx = -r; dx <= r; dx++)
                s += at(in, x + dx, y + dy, c);
        v[c] = s / ((2 * r + 1) * (2 * r + 1));
    }
}

static void ref_sobel(const void *params, const pf_image *in, int x, int y, double v[4],
                      double alt[4])
{
    static const int k[3][3] = {{-1, 0, 1}, {-2, 0, 2}, {-1, 0, 1}};
    for (int c = 0; c < 3; c++) {
        double gx = 0, gy = 0;
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 3; i++) {
                gx += k[j][i] * at(in, x + i - 1, y + j - 1, c);
                gy += k[i][j] * at(in, x + i - 1, y + j - 1, c);
            }
        v[c] = ((const pf_sobel_params *)params)->scale * sqrt(gx * gx + gy * gy);
    }
    v[3] = at(in, x, y, 3);
}

/* The premultiplied mean over the (2 r + 1)^2 neighbourhood, gaussian weights for
   sigma > 0, else equal: colour sum(w a c) / sum(w a) (0 where that is 0, a pixel of
   alpha 0 bringing nothing whatever its colour), alpha sum(w a) / sum(w). */
static void pm_mean2d(const pf_image *in, int x, int y, int r, double sigma, double out[4])
{
    double z = 0, s[4] = {0, 0, 0, 0}, v[4];
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++) {
            double w = sigma > 0 ? exp(-(dx * dx + dy * dy) / (2 * sigma * sigma)) : 1;
            fd_px(in, x + dx, y + dy, v);
            z += w;
            s[3] += w * v[3];
            for (int c = 0; c < 3 && v[3] != 0; c++)
                s[c] += w * v[3] * v[c];
        }
    for (int c = 0; c < 3; c++)
        out[c] = s[3] != 0 ? s[c] / s[3] : 0;
    out[3] = s[3] / z;
}

static int radius_of(double sigma)
{
    return (int)ceil(3.0 * sigma);
}

static void ref_gaussian_pm(const void *params, const pf_image *in, int x, int y, double v[4],
                            double alt[4])
{
    double sigma = ((const pf_gaussian_params *)params)->sigma;
    if (sigma == 0) /* nothing mixes: the input as it is */
        fd_px(in, x, y, v);
    else
        pm_mean2d(in, x, y, radius_of(sigma), sigma, v);
}

static void ref_box_pm(const void *params, const pf_image *in, int x, int y, double v[4],
                       double alt[4])
{
    int r = ((const pf_box_params *)params)->radius;
    if (r == 0)
        fd_px(in, x, y, v);
    else
        pm_mean2d(in, x, y, r, 0, v);
}

/* unsharp against blur g: v, and alt where |in - g| is within rounding of the threshold */
static void sharpen_ref(const pf_unsharp_params *p, const pf_image *in, int x, int y,
                        const double g[4], double v[4], double alt[4])
{
    for (int c = 0; c < 4; c++) {
        double s = at(in, x, y, c), d = s - g[c], sharp = s + p->amount * d;
        v[c] = c < 3 && fabs(d) > p->threshold ? sharp : s;
        alt[c] = c < 3 && fabs(fabs(d) - p->threshold) < 1e-5 ? s + sharp - v[c] : v[c];
    }
}

static void ref_unsharp(const void *params, const pf_image *in, int x, int y, double v[4],
                        double alt[4])
{
    double g[4];
    gauss2d(((const pf_unsharp_params *)params)->sigma, in, x, y, g);
    sharpen_ref(params, in, x, y, g, v, alt);
}

static void ref_unsharp_pm(const void *params, const pf_image *in, int x, int y, double v[4],
                           double alt[4])
{
    double g[4], sigma = ((const pf_unsharp_params *)params)->sigma;
    if (sigma == 0)
        fd_px(in, x, y, g);
    else
        pm_mean2d(in, x, y, radius_of(sigma), sigma, g);
    sharpen_ref(params, in, x, y, g, v, alt);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void ref_median3(const void *params, const pf_image *in, int x, int y, double v[4],
                        double alt[4])
{
    for (int c = 0; c < 4; c++) {
        double n[9];
        for (int k = 0; k < 9; k++)
            n[k] = at(in, x + k % 3 - 1, y + k / 3 - 1, c);
        qsort(n, 9, sizeof n[0], cmp_double);
        v[c] = n[4];
    }
}

/* Every test size up to max_side wide (the 2D references are slow for large radii), on
   random values (bits < 0) or h_alpha_image(bits). */
static void check_stage_on(const char *name, const void *params, ref_fn ref, double tol,
                           int max_side, pf_rng *rng, int bits)
{
    const pf_stage_desc *d = h_stage("filter", name);
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        if (w > max_side)
            continue;
        char label[128];
        snprintf(label, sizeof label, "%s on %dx%d%s", name, w, h,
                 bits < 0 ? ""
                          : (bits ? (bits == 8 ? " 8-bit alpha" : " 16-bit alpha") : " alpha"));
        pf_image in =
            bits < 0 ? pf_test_image(rng, w, h, -0.25f, 1.25f) : h_alpha_image(rng, w, h, bits);
        pf_image want = pf_test_image_poisoned(w, h), alt = pf_test_image_poisoned(w, h);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                double v[4] = {0}, a[4];
                ref(params, &in, x, y, v, a);
                if (ref != ref_unsharp && ref != ref_unsharp_pm)
                    memcpy(a, v, sizeof v);
                fd_set(&want, x, y, v);
                fd_set(&alt, x, y, a);
            }
        fd_check_image_stage(d, params, &in, &want, &alt, tol, label);
        pf_test_image_free(&in);
        pf_test_image_free(&want);
        pf_test_image_free(&alt);
    }
}

static void check_stage(const char *name, const void *params, ref_fn ref, double tol, int max_side,
                        pf_rng *rng)
{
    check_stage_on(name, params, ref, tol, max_side, rng, -1);
}

/* ---- The stages ------------------------------------------------------------------------ */

/* Float sums of up to 2 x 385 taps against double: */
#define BLUR_TOL 5e-6
/* The same, premultiplied, then divided by the summed alpha (all terms >= 0, so the
   quotient is as close as its two sums): */
#define PM_TOL 1e-5

static void test_gaussian(pf_rng *r)
{
    float sigmas[] = {0, 1, 0.1f, 1.0f / 3, 0.5f, 2.5f, 0, 0, 0};
    for (int i = 6; i < PF_COUNTOF(sigmas); i++)
        sigmas[i] = 4 * pf_rng_float(r);
    for (int i = 0; i < PF_COUNTOF(sigmas); i++)
        check_stage("gaussian",
                    &(pf_gaussian_params){.sigma = sigmas[i], .alpha = PF_ALPHA_STRAIGHT},
                    ref_gaussian, BLUR_TOL, 97, r);
    check_stage("gaussian",
                &(pf_gaussian_params){.sigma = PF_GAUSSIAN_MAX_SIGMA, .alpha = PF_ALPHA_STRAIGHT},
                ref_gaussian, BLUR_TOL, 13, r);
    /* premultiplied (the default) on images with alpha; not below sigma 0.5, where the
       outer taps are under 1e-21 and a pixel whose nearest visible neighbour is a
       diagonal one sums a denormal alpha, which keeps no relative precision */
    for (int i = 0; i < PF_COUNTOF(sigmas); i++)
        if (sigmas[i] == 0 || sigmas[i] >= 0.5f)
            check_stage_on("gaussian", &(pf_gaussian_params){.sigma = sigmas[i]}, ref_gaussian_pm,
                           PM_TOL, 97, r, i % 3 == 0 ? 0 : (i % 3 == 1 ? 16 : 8));
    check_stage_on("gaussian", &(pf_gaussian_params){.sigma = PF_GAUSSIAN_MAX_SIGMA},
                   ref_gaussian_pm, PM_TOL, 13, r, 8);

    /* sigma 0 is the identity, to the bit, either way; the radius is ceil(3 sigma). */
    const pf_stage_desc *d = h_stage("filter", "gaussian");
    pf_image in = pf_test_image(r, 13, 7, -1, 2), out = pf_test_image_poisoned(13, 7);
    CHECK(h_run(d, &(pf_gaussian_params){.sigma = 0}, &in, 1, &out, 0) == 0 &&
          fd_same_bits(&in, &out));
    CHECK(h_run(d, &(pf_gaussian_params){.sigma = 0, .alpha = PF_ALPHA_STRAIGHT}, &in, 1, &out,
                0) == 0 &&
          fd_same_bits(&in, &out));
    CHECK(d->radius(&(pf_gaussian_params){.sigma = 0}) == 0);
    CHECK(d->radius(&(pf_gaussian_params){.sigma = 1}) == 3);
    CHECK(d->radius(&(pf_gaussian_params){.sigma = 0.5f}) == 2);
    CHECK(d->radius(&(pf_gaussian_params){.sigma = PF_GAUSSIAN_MAX_SIGMA}) == 192);

    /* Too little scratch is an error with a message, not a crash. */
    char err[256] = "";
    pf_float4 small[4];
    pf_stage_args a = {sizeof a, &(pf_gaussian_params){.sigma = 2},
                       &in,      1,
                       out,      {0, 7},
                       small,    sizeof small,
                       NULL,     NULL,
                       err,      sizeof err};
    CHECKF(d->run_cpu(&a) != 0 && strstr(err, "scratch"), "too little scratch: \"%s\"", err);
    pf_test_image_free(&in);
    pf_test_image_free(&out);
}

static void test_box(pf_rng *r)
{
    int radii[] = {0, 1, 2, 5, 0, 0};
    for (int i = 4; i < PF_COUNTOF(radii); i++)
        radii[i] = pf_rng_range(r, 0, 8);
    for (int i = 0; i < PF_COUNTOF(radii); i++) {
        check_stage("box", &(pf_box_params){.radius = radii[i], .alpha = PF_ALPHA_STRAIGHT},
                    ref_box, BLUR_TOL, 97, r);
        check_stage_on("box", &(pf_box_params){.radius = radii[i]}, ref_box_pm, PM_TOL, 97, r,
                       i % 3 == 0 ? 0 : (i % 3 == 1 ? 16 : 8));
    }
    check_stage("box", &(pf_box_params){.radius = PF_BOX_MAX_RADIUS, .alpha = PF_ALPHA_STRAIGHT},
                ref_box, BLUR_TOL, 13, r);
    check_stage_on("box", &(pf_box_params){.radius = PF_BOX_MAX_RADIUS}, ref_box_pm, PM_TOL, 13, r,
                   16);
    CHECK(h_stage("filter", "box")->radius(&(pf_box_params){.radius = 5}) == 5);
}

/* A flat image stays flat, to the bit: the weights are normalised by their own float sum
   (they were rounded to float one by one, and summed 1 or 2 ulp off 1, so white came
   out 0.99999988 and an opaque image lost its alpha 1). Flat values that are powers of
   two times 1, and 0, scale every product and sum exactly. */
static void test_flat(pf_rng *r)
{
    (void)r;
    const pf_float4 flats[] = {pf_f4(1, 1, 1, 1), pf_f4(0.5f, 0.25f, 0, 1),
                               pf_f4(1, 0.5f, 0.125f, 0.5f)};
    const struct {
        const char *stage;
        pf_unsharp_params p; /* sigma (radius for box), amount, threshold, alpha */
    } cases[] = {
        {"gaussian", {0.7f, 0, 0, 0}}, {"gaussian", {1, 0, 0, 0}}, {"gaussian", {2.5f, 0, 0, 0}},
        {"gaussian", {10, 0, 0, 0}},   {"box", {0, 0, 0, 0}},      {"unsharp", {2.5f, 10, 0, 0}},
        {"unsharp", {1, 3, 0, 0}},
    };
    const int box_radii[] = {1, 5, PF_BOX_MAX_RADIUS};
    for (int c = 0; c < PF_COUNTOF(cases); c++)
        for (int rb = 0; rb < (strcmp(cases[c].stage, "box") ? 1 : PF_COUNTOF(box_radii)); rb++)
            for (int alpha = 0; alpha < 2; alpha++)
                for (int f = 0; f < PF_COUNTOF(flats); f++) {
                    const pf_stage_desc *d = h_stage("filter", cases[c].stage);
                    pf_unsharp_params up = cases[c].p;
                    up.alpha = alpha ? PF_ALPHA_STRAIGHT : PF_ALPHA_PREMULTIPLIED;
                    pf_gaussian_params gp = {.sigma = up.sigma, .alpha = up.alpha};
                    pf_box_params bp = {.radius = box_radii[rb], .alpha = up.alpha};
                    const void *params = strcmp(cases[c].stage, "box") == 0       ? (void *)&bp
                                         : strcmp(cases[c].stage, "unsharp") == 0 ? (void *)&up
                                                                                  : (void *)&gp;
                    pf_image in = pf_test_image_poisoned(37, 23),
                             out = pf_test_image_poisoned(37, 23);
                    for (int y = 0; y < 23; y++)
                        for (int x = 0; x < 37; x++)
                            pf_image_row(&in, y)[x] = flats[f];
                    CHECK(h_run(d, params, &in, 1, &out, 0) == 0);
                    int bad = 0;
                    for (int y = 0; y < 23; y++)
                        for (int x = 0; x < 37; x++) {
                            pf_float4 v = pf_image_row(&out, y)[x], e = flats[f];
                            bad += v.x != e.x || v.y != e.y || v.z != e.z || v.w != e.w;
                        }
                    CHECKF(!bad, "%s %g (box radius %d) %s on flat %d: %d pixels changed",
                           cases[c].stage, up.sigma, box_radii[rb],
                           alpha ? "straight" : "premultiplied", f, bad);
                    pf_test_image_free(&in);
                    pf_test_image_free(&out);
                }
}

static void test_sobel(pf_rng *r)
{
    float scales[] = {1, 0, 0.5f, 1000, 10 * pf_rng_float(r), 10 * pf_rng_float(r)};
    for (int i = 0; i < PF_COUNTOF(scales); i++) /* float sums of 6 terms, times scale */
        check_stage("sobel", &(pf_sobel_params){.scale = scales[i]}, ref_sobel,
                    4e-6 * (1 + scales[i]), 97, r);
    CHECK(h_stage("filter", "sobel")->radius(&(pf_sobel_params){.scale = 1}) == 1);
}

static void test_unsharp(pf_rng *r)
{
    pf_unsharp_params cases[9] = {
        {1, 1, 0, 0},        {0, 1, 0, 0}, {2, 0, 0, 0},
        {1.5f, 10, 0.1f, 0}, {1, 1, 1, 0}, {0.3f, 10, 0, 0},
    };
    for (int i = 6; i < PF_COUNTOF(cases); i++)
        cases[i] = (pf_unsharp_params){.sigma = 3 * pf_rng_float(r),
                                       .amount = 10 * pf_rng_float(r),
                                       .threshold = 0.2f * pf_rng_float(r)};
    for (int i = 0; i < PF_COUNTOF(cases); i++) { /* amount up to 10 scales the blur's error */
        cases[i].alpha = PF_ALPHA_STRAIGHT;
        check_stage("unsharp", &cases[i], ref_unsharp, BLUR_TOL * (1 + cases[i].amount), 97, r);
        cases[i].alpha = PF_ALPHA_PREMULTIPLIED;
        if (cases[i].sigma == 0 || cases[i].sigma >= 0.5f) /* as test_gaussian says */
            check_stage_on("unsharp", &cases[i], ref_unsharp_pm, PM_TOL * (1 + cases[i].amount), 97,
                           r, i % 3 == 0 ? 0 : (i % 3 == 1 ? 16 : 8));
    }
}

static void test_median3(pf_rng *r)
{
    for (int i = 0; i < 3; i++)
        check_stage("median3", NULL, ref_median3, 0, 97, r);
    CHECK(h_stage("filter", "median3")->radius(NULL) == 1);
}

/* ---- 3x3 per-pixel functions and their fusion ------------------------------------------- */

/* sobel as filter.c computed it before its per-pixel function moved to
   kernels/point/filter3x3_ops.h: the stage must give these floats bit for bit. */
static float sobel_as_before(float scale, const pf_image *in, int x, int y, int c)
{
    float n[9];
    for (int k = 0; k < 9; k++) {
        pf_float4 v = pf_image_at_clamped(in, x + k % 3 - 1, y + k / 3 - 1);
        n[k] = c == 0 ? v.x : (c == 1 ? v.y : v.z);
    }
    float gx = (n[2] + 2 * n[5] + n[8]) - (n[0] + 2 * n[3] + n[6]);
    float gy = (n[6] + 2 * n[7] + n[8]) - (n[0] + 2 * n[1] + n[2]);
    return scale * sqrtf(gx * gx + gy * gy);
}

/* The worst level of the findings on one field (PF_CHECK_WARNING + 1: none). */
typedef struct field_worst {
    const char *field;
    int level;
} field_worst;

static int note_field(void *user, const pf_check_finding *f)
{
    field_worst *w = user;
    if (strcmp(f->field, w->field) == 0 && (int)f->level < w->level)
        w->level = (int)f->level;
    return 0;
}

/* pf_stage_check's worst finding on `field` for d. */
static int worst_on(const pf_stage_desc *d, const char *field)
{
    field_worst w = {field, PF_CHECK_WARNING + 1};
    pf_stage_check(d, PF_ABI_MINOR, note_field, &w);
    return w.level;
}

/* The validator's rules for stencil_fn: on a stencil only, with point_source and
   params_type, both named in the source. */
static void check_stencil_fn_rules(void)
{
    const pf_stage_desc *sobel = h_stage("filter", "sobel");
    CHECK(pf_stage_check(sobel, PF_ABI_MINOR, note_field, &(field_worst){"", 0}) == 0);
    CHECK(worst_on(sobel, "stencil_fn") > PF_CHECK_WARNING);
    pf_stage_desc d = *sobel;
    d.kind = PF_STAGE_POINT;
    CHECK(worst_on(&d, "stencil_fn") == PF_CHECK_ERROR);
    d = *sobel;
    d.params_type = NULL;
    CHECK(worst_on(&d, "params_type") == PF_CHECK_ERROR);
    d = *sobel;
    d.point_source = NULL;
    CHECK(worst_on(&d, "point_source") == PF_CHECK_ERROR);
    d = *sobel;
    d.stencil_fn = "no_such_px";
    CHECK(worst_on(&d, "stencil_fn") == PF_CHECK_FAULT);
}

/* The validator's rules for separable_fn: gaussian and box are clean; on a stencil
   only, named in its source, with a largest radius in 1..PF_SEPARABLE_MAX, never with
   stencil_fn. And the taps the functions give are the ones the stages use: normalised
   as plugin.h says, a box's are 1 / (2 r + 1), a gaussian of sigma 2 has radius 6. */
static void check_separable_fn_rules(void)
{
    static const char *const names[] = {"gaussian", "box"};
    for (int i = 0; i < 2; i++) {
        const pf_stage_desc *g = h_stage("filter", names[i]);
        CHECKF(g->separable_fn && g->params_type && g->point_source &&
                   strstr(g->point_source, g->separable_fn) && g->separable_max >= 64,
               "%s: separable_fn, params_type, point_source and separable_max", names[i]);
        CHECK(pf_stage_check(g, PF_ABI_MINOR, note_field, &(field_worst){"", 0}) == 0);
        CHECK(worst_on(g, "separable_fn") > PF_CHECK_WARNING);
        pf_stage_desc d = *g;
        d.kind = PF_STAGE_POINT;
        CHECK(worst_on(&d, "separable_fn") == PF_CHECK_ERROR);
        d = *g;
        d.separable_fn = "no_such_sep";
        CHECK(worst_on(&d, "separable_fn") == PF_CHECK_FAULT);
        d = *g;
        d.separable_max = 0;
        CHECK(worst_on(&d, "separable_max") == PF_CHECK_ERROR);
        d.separable_max = PF_SEPARABLE_MAX + 1;
        CHECK(worst_on(&d, "separable_max") == PF_CHECK_ERROR);
        d = *g;
        d.stencil_fn = d.separable_fn;
        CHECK(worst_on(&d, "separable_fn") == PF_CHECK_ERROR);
    }
    pf_gaussian_params gp = {2.0f, PF_ALPHA_PREMULTIPLIED};
    double t[8] = {0}, sum = 0;
    int pm = -1;
    CHECK(gaussian_sep(&gp, -1, t, &pm) == 6 && pm == 1);
    for (int i = 0; i <= 6; i++) {
        gaussian_sep(&gp, i, &t[i], &pm);
        sum += i ? 2 * t[i] : t[i];
    }
    CHECKF(t[0] == 1.0 && t[1] == exp(-1.0 / 8.0) && t[6] == exp(-36.0 / 8.0),
           "gaussian taps %.17g %.17g %.17g", t[0], t[1], t[6]);
    pf_box_params bp = {3, PF_ALPHA_STRAIGHT};
    double one = 0;
    CHECK(box_sep(&bp, 2, &one, &pm) == 3 && one == 1.0 && pm == 0);
    CHECK((float)(one / 7.0) == 1.0f / 7.0f);
    bp.radius = 1000; /* clamped, as the stage clamps it */
    CHECK(box_sep(&bp, -1, &one, &pm) == PF_BOX_MAX_RADIUS);
}

/* The descriptors declare the per-pixel functions the engine's fused kernels call, and
   sobel's output is the old formula's, bit for bit. */
static void test_3x3_functions(pf_rng *r)
{
    static const char *const names[] = {"sobel", "median3"};
    for (int i = 0; i < 2; i++) {
        const pf_stage_desc *d = h_stage("filter", names[i]);
        CHECKF(d->stencil_fn && d->params_type && d->point_source &&
                   strstr(d->point_source, d->stencil_fn) &&
                   strstr(d->point_source, d->params_type),
               "%s: stencil_fn, params_type and point_source", names[i]);
    }
    check_stencil_fn_rules();
    check_separable_fn_rules();
    const pf_stage_desc *d = h_stage("filter", "sobel");
    const int w = 37, h = 11;
    for (int t = 0; t < 3; t++) {
        pf_sobel_params sp = {.scale = t == 0 ? 1.0f : 10 * pf_rng_float(r)};
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f), out = pf_test_image_poisoned(w, h);
        CHECK(h_run(d, &sp, &in, 1, &out, 0) == 0);
        long bad = 0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                pf_float4 o = pf_image_row(&out, y)[x];
                float got[3] = {o.x, o.y, o.z};
                for (int c = 0; c < 3; c++) {
                    float want = sobel_as_before(sp.scale, &in, x, y, c);
                    bad += memcmp(&got[c], &want, sizeof want) != 0;
                }
                bad += memcmp(&o.w, &pf_image_row(&in, y)[x].w, sizeof o.w) != 0;
            }
        CHECKF(bad == 0, "sobel scale %g: %ld samples differ from the formula's bits", sp.scale,
               bad);
        pf_test_image_free(&in);
        pf_test_image_free(&out);
    }
}

/* pf_pipeline_print_plan's text (malloc'd), or NULL. */
static char *plan_text(pf_pipeline *p)
{
    FILE *f = tmpfile();
    char *text = NULL;
    long n = f && pf_pipeline_print_plan(p, f) == PF_OK ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1))) {
        text[fread(text, 1, (size_t)n, f)] = 0;
    }
    if (f)
        fclose(f);
    return text;
}

/* The printed plan (no device needed: it shows the plan as the CUDA executor runs it
   where NVRTC is) fuses a point chain only a 3x3 stencil reads into the stencil's kernel,
   a stencil on a pipeline input loads it natively, and a point unit reading only a
   stencil's result runs in the stencil's kernel (which stores its output). */
/* Whether the plan print's unit line of stages ids ("[a v]") contains what. */
static int unit_line_has(const char *text, const char *ids, const char *what)
{
    const char *l = text ? strstr(text, ids) : NULL;
    if (!l)
        return 0;
    const char *end = strchr(l, '\n');
    const char *w = strstr(l, what);
    return w && (!end || w < end);
}

static void test_fused_plan(pf_rng *r)
{
    (void)r;
    pf_engine *e = pf_test_engine();
    const char *json =
        "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
        "{\"id\": \"a\", \"op\": \"linear\", \"inputs\": [\"x\"], \"params\": {\"a\": 2.0}},"
        "{\"id\": \"v\", \"op\": \"vignette\", \"inputs\": [\"a\"]},"
        "{\"id\": \"s\", \"op\": \"sobel\", \"inputs\": [\"v\"]},"
        "{\"id\": \"m\", \"op\": \"median3\", \"inputs\": [\"x\"]},"
        "{\"id\": \"n\", \"op\": \"invert\", \"inputs\": [\"m\"]}],"
        "\"outputs\": {\"o\": \"s\", \"med\": \"n\"}}";
    pf_pipeline *p = pf_test_load_string(e, json, "fused_plan", "cpu");
    pf_shape s = {64, 32};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    char *text = plan_text(p);
    CHECKF(text && strstr(text, "G0: a + v   (2 point stages, fused into stencil s (sobel)") &&
               strstr(text, "fused stencils (2):") &&
               strstr(text, "S: s (sobel, 3x3 sobel_px) in one kernel with a + v on its tile\n"
                            "      loads x(native), stores o(native)") &&
               strstr(text, "G1: n   (1 point stage, fused into stencil m (median3): its ops "
                            "run on the stencil's result before it stores)") &&
               strstr(text, "S: m (median3, 3x3 median3_px) in one kernel, then n on its result\n"
                            "      loads x(native), stores med(native)") &&
               unit_line_has(text, "[a v]", "(not launched on the GPU: its ops run in #") &&
               unit_line_has(text, "[n]", "(not launched on the GPU: its ops run in #") &&
               !unit_line_has(text, "[s]", "not launched") &&
               !unit_line_has(text, "[m]", "not launched"),
           "plan print:\n%s", text ? text : "");
    free(text);
    /* With fusion off nothing fuses, and the section is gone. */
    CHECK(pf_pipeline_set_option(p, "fusion", "false") == PF_OK);
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    text = plan_text(p);
    CHECKF(text && !strstr(text, "fused stencils") && !strstr(text, "fused into stencil") &&
               !strstr(text, "not launched"),
           "plan print, fusion off:\n%s", text ? text : "");
    free(text);
    pf_pipeline_destroy(p);
    /* An epilogue's other inputs: an image the stencil's input is computed from, from
       the pipeline input (the stencil takes the unit in on its tile and recomputes it in
       its epilogue, so its image is never stored), fused; one the stencil does not wait
       for (the box), not. */
    json = "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
           "{\"id\": \"a\", \"op\": \"linear\", \"inputs\": [\"x\"], \"params\": {\"a\": 2.0}},"
           "{\"id\": \"s\", \"op\": \"sobel\", \"inputs\": [\"a\"]},"
           "{\"id\": \"m\", \"op\": \"blend\", \"inputs\": [\"a\", \"s\"]},"
           "{\"id\": \"b\", \"op\": \"box\", \"inputs\": [\"x\"]},"
           "{\"id\": \"s2\", \"op\": \"median3\", \"inputs\": [\"x\"]},"
           "{\"id\": \"t\", \"op\": \"blend\", \"inputs\": [\"s2\", \"b\"]}],"
           "\"outputs\": {\"o\": \"m\", \"t\": \"t\"}}";
    p = pf_test_load_string(e, json, "fused_plan_2", "cpu");
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    text = plan_text(p);
    CHECKF(text &&
               strstr(text, "S: s (sobel, 3x3 sobel_px) in one kernel with a on its tile, then m "
                            "on its result, recomputing a there\n"
                            "      loads x(native), stores o(native)") &&
               strstr(text, "G0: a   (1 point stage, fused into stencil s (sobel): its ops run in "
                            "the stencil's tile, nothing stored)") &&
               strstr(text, "S: s2 (median3, 3x3 median3_px) in one kernel\n"
                            "      loads x(native), stores s2(float4)") &&
               strstr(text, "t   (1 point stage, one kernel)") &&
               !unit_line_has(text, "[t]", "not launched"),
           "plan print, epilogue inputs:\n%s", text ? text : "");
    free(text);
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
}

/* ---- Alpha ------------------------------------------------------------------------------ */

/* The left half of a 9x5 image transparent red (alpha 0), the right half opaque blue. */
static pf_image red_blue(void)
{
    pf_image im = pf_test_image_poisoned(9, 5);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 9; x++)
            pf_image_row(&im, y)[x] = x < 4 ? pf_f4(1, 0, 0, 0) : pf_f4(0, 0, 1, 1);
    return im;
}

/* A blur of red_blue: premultiplied, every visible pixel is pure blue (the transparent
   red does not bleed); straight, the old behaviour, some visible pixel turns red. Both
   give the same alpha, bit for bit. */
static void check_no_bleed(const char *name, const void *pm, const void *straight)
{
    const pf_stage_desc *d = h_stage("filter", name);
    pf_image in = red_blue(), a = pf_test_image_poisoned(9, 5), b = pf_test_image_poisoned(9, 5);
    CHECK(h_run(d, pm, &in, 1, &a, 0) == 0 && h_run(d, straight, &in, 1, &b, 0) == 0);
    int visible = 0, tinted = 0, blue = 1, same_alpha = 1;
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 9; x++) {
            pf_float4 p = pf_image_row(&a, y)[x], q = pf_image_row(&b, y)[x];
            same_alpha &= memcmp(&p.w, &q.w, sizeof p.w) == 0;
            if (p.w > 0) {
                visible++;
                blue &= p.x == 0 && p.y == 0 && fabsf(p.z - 1) <= 1e-6f;
            }
            tinted += q.w > 0 && fabsf(q.x) > 0.05f;
        }
    CHECKF(visible >= 5 * 5 && blue, "%s premultiplied: transparent red bleeds into %d visible",
           name, visible);
    CHECKF(tinted > 0, "%s straight: no visible pixel took the transparent red", name);
    CHECKF(same_alpha, "%s: alpha differs between premultiplied and straight", name);
    pf_test_image_free(&in);
    pf_test_image_free(&a);
    pf_test_image_free(&b);
}

/* On an opaque image (alpha exactly 1, as every image without alpha loads) premultiplied
   gives straight's result bit for bit, whole and in bands. */
static void check_opaque_same(const char *name, const void *pm, const void *straight, pf_rng *r)
{
    const pf_stage_desc *d = h_stage("filter", name);
    pf_image in = pf_test_image(r, 97, 61, -0.25f, 1.25f);
    for (int y = 0; y < in.height; y++)
        for (int x = 0; x < in.width; x++)
            pf_image_row(&in, y)[x].w = 1;
    pf_image a = pf_test_image_poisoned(97, 61), b = pf_test_image_poisoned(97, 61);
    CHECK(h_run(d, pm, &in, 1, &a, 0) == 0 && h_run(d, straight, &in, 1, &b, 7) == 0);
    CHECKF(fd_same_bits(&a, &b), "%s: premultiplied differs from straight on an opaque image",
           name);
    pf_test_image_free(&in);
    pf_test_image_free(&a);
    pf_test_image_free(&b);
}

static void test_alpha(pf_rng *r)
{
    check_no_bleed("gaussian", &(pf_gaussian_params){.sigma = 1.5f},
                   &(pf_gaussian_params){.sigma = 1.5f, .alpha = PF_ALPHA_STRAIGHT});
    check_no_bleed("box", &(pf_box_params){.radius = 2},
                   &(pf_box_params){.radius = 2, .alpha = PF_ALPHA_STRAIGHT});
    /* unsharp keeps the input's colour where the blur does not differ from it */
    check_no_bleed(
        "unsharp", &(pf_unsharp_params){.sigma = 1, .amount = 1, .threshold = 0},
        &(pf_unsharp_params){.sigma = 1, .amount = 1, .threshold = 0, .alpha = PF_ALPHA_STRAIGHT});
    float sigmas[] = {0.5f, 1, 2.5f, 10 * pf_rng_float(r)};
    for (int i = 0; i < PF_COUNTOF(sigmas); i++) {
        check_opaque_same("gaussian", &(pf_gaussian_params){.sigma = sigmas[i]},
                          &(pf_gaussian_params){.sigma = sigmas[i], .alpha = PF_ALPHA_STRAIGHT}, r);
        check_opaque_same(
            "unsharp", &(pf_unsharp_params){.sigma = sigmas[i], .amount = 2, .threshold = 0.01f},
            &(pf_unsharp_params){
                .sigma = sigmas[i], .amount = 2, .threshold = 0.01f, .alpha = PF_ALPHA_STRAIGHT},
            r);
    }
    for (int radius = 1; radius < 12; radius += 5)
        check_opaque_same("box", &(pf_box_params){.radius = radius},
                          &(pf_box_params){.radius = radius, .alpha = PF_ALPHA_STRAIGHT}, r);
    /* alphas outside [0, 1] weigh as clamped: colours of [0, 1] stay in [0, 1] (a GPU run
       found sums of cancelling alphas divided into results of any size) */
    pf_image in = pf_test_image(r, 31, 23, 0, 1);
    for (int y = 0; y < in.height; y++)
        for (int x = 0; x < in.width; x++)
            pf_image_row(&in, y)[x].w = -1.0f + 3.0f * pf_rng_float(r);
    for (int k = 0; k < 2; k++) {
        pf_image out = pf_test_image_poisoned(in.width, in.height);
        CHECK(k == 0 ? h_run(h_stage("filter", "gaussian"), &(pf_gaussian_params){.sigma = 1.7f},
                             &in, 1, &out, 0) == 0
                     : h_run(h_stage("filter", "box"), &(pf_box_params){.radius = 2}, &in, 1, &out,
                             0) == 0);
        float lo, hi;
        fd_colour_range(&out, &lo, &hi);
        CHECKF(lo >= -1e-6f && hi <= 1 + 1e-6f,
               "%s of alphas in [-1, 2]: colours of [0, 1] came out in [%g, %g]",
               k ? "box" : "gaussian", lo, hi);
        pf_test_image_free(&out);
    }
    pf_test_image_free(&in);
    /* the default is premultiplied */
    static const char *const stages[] = {"gaussian", "box", "unsharp"};
    for (int i = 0; i < PF_COUNTOF(stages); i++) {
        const pf_stage_desc *d = h_stage("filter", stages[i]);
        const pf_param_desc *p = &d->params[d->n_params - 1];
        CHECKF(strcmp(p->name, "alpha") == 0 && p->type == PF_PARAM_ENUM && p->def == 0 &&
                   strcmp(p->enum_names[0], "premultiplied") == 0 &&
                   strcmp(p->enum_names[1], "straight") == 0,
               "%s: alpha param", stages[i]);
    }
}

int main(void)
{
    static const char *const names[] = {"gaussian", "box", "sobel", "unsharp", "median3"};
    static const fd_test_fn tests[] = {test_gaussian, test_box,           test_flat,
                                       test_sobel,    test_unsharp,       test_median3,
                                       test_alpha,    test_3x3_functions, test_fused_plan};
    return fd_main("test_filter", "filter", PF_STAGE_STENCIL, names, PF_COUNTOF(names), tests,
                   PF_COUNTOF(tests));
}
