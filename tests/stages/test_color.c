/* tests/stages/test_color.c: the `color` stages against references written again here,
 * plainly and in double (the ops header is deliberately not included), through the
 * point-stage driver of the harness library (tests/lib/point_driver.h).
 */
#include <math.h>
#include <string.h>

#include "color_ops.h" /* color_levels_params */
#include "point_driver.h"

/* ---- References --------------------------------------------------------------- */

#define RGB for (int c = 0; c < 3; c++)

static int ref_brightness(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                          double mag[4])
{
    RGB o[c] = in[0][c] + pt_get(s, "amount");
    o[3] = in[0][3];
    return 1;
}

static int ref_contrast(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                        double mag[4])
{
    double k = pt_get(s, "amount"), pivot = pt_get(s, "pivot");
    RGB o[c] = (in[0][c] - pivot) * k + pivot;
    o[3] = in[0][3];
    return 1;
}

static int ref_gamma(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                     double mag[4])
{
    RGB o[c] = pow(in[0][c] > 0 ? in[0][c] : 0.0, 1.0 / pt_get(s, "gamma"));
    o[3] = in[0][3];
    return 1;
}

static int ref_invert(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                      double mag[4])
{
    RGB o[c] = 1.0 - in[0][c];
    o[3] = pt_get(s, "alpha") ? 1.0 - in[0][3] : in[0][3];
    return 1;
}

static int ref_grayscale(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                         double mag[4])
{
    double l = pt_luma(in[0]), t = pt_get(s, "amount");
    RGB o[c] = (1.0 - t) * in[0][c] + t * l;
    o[3] = in[0][3];
    return 1;
}

static int ref_threshold(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                         double mag[4])
{
    double l = pt_luma(in[0]), level = pt_get(s, "level");
    RGB o[c] = l >= level ? 1.0 : 0.0;
    o[3] = in[0][3];
    return fabs(l - level) > 1e-6; /* float luma may land on the other side */
}

static int ref_saturation(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                          double mag[4])
{
    double l = pt_luma(in[0]), k = pt_get(s, "amount");
    RGB o[c] = l + k * (in[0][c] - l);
    o[3] = in[0][3];
    return 1;
}

static int ref_levels(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                      double mag[4])
{
    double lo = pt_get(s, "in_low"), hi = pt_get(s, "in_high"), e = 1.0 / pt_get(s, "gamma");
    double olo = pt_get(s, "out_low"), ohi = pt_get(s, "out_high");
    RGB
    {
        double t = (in[0][c] - lo) / (hi - lo);
        t = t < 0 ? 0 : (t > 1 ? 1 : t);
        o[c] = olo + pow(t, e) * (ohi - olo);
        mag[c] = e; /* t^e multiplies t's relative rounding by e */
    }
    o[3] = in[0][3];
    return 1;
}

static int ref_linear(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                      double mag[4])
{
    double a = pt_get(s, "a"), b = pt_get(s, "b");
    for (int c = 0; c < 4; c++) {
        o[c] = a * in[0][c] + b;
        mag[c] = fabs(a * in[0][c]) + fabs(b);
    }
    return 1;
}

static int ref_color_matrix(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                            double mag[4])
{
    for (int i = 0; i < 4; i++) {
        o[i] = pt_geti(s, "offset", i);
        mag[i] = fabs(o[i]);
        for (int j = 0; j < 4; j++) {
            o[i] += pt_geti(s, "matrix", 4 * i + j) * in[0][j];
            mag[i] += fabs(pt_geti(s, "matrix", 4 * i + j) * in[0][j]);
        }
    }
    return 1;
}

static int ref_vignette(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                        double mag[4])
{
    double dx = pos.x + 0.5 - pos.width / 2.0, dy = pos.y + 0.5 - pos.height / 2.0;
    double d = hypot(dx, dy) / (hypot(pos.width, pos.height) / 2.0);
    double t = fmin(d / pt_get(s, "radius"), 1.0);
    double k = 1.0 - pt_get(s, "strength") * t * t * (3.0 - 2.0 * t);
    RGB o[c] = in[0][c] * k;
    o[3] = in[0][3];
    return 1;
}

/* ---- Hand-made cases ---------------------------------------------------------- */

/* levels refuses in_low >= in_high with a message naming both, within err_size. */
static void check_levels_check(pt_stage *s)
{
    pt_reset(s);
    char err[256];
    pt_set(s, pt_param(s, "in_low"), 0, 0.6);
    pt_set(s, pt_param(s, "in_high"), 0, 0.4);
    CHECK(s->d->check(s->params, err, sizeof err) != 0);
    CHECKF(strstr(err, "in_low") && strstr(err, "in_high") && strstr(err, "0.6"), "%s", err);
    pt_set(s, pt_param(s, "in_high"), 0, 0.6);
    CHECK(s->d->check(s->params, err, sizeof err) != 0);
    pt_set(s, pt_param(s, "in_high"), 0, 0.61);
    CHECK(s->d->check(s->params, err, sizeof err) == 0);
    pt_set(s, pt_param(s, "in_high"), 0, 0.1);
    memset(err, 'x', sizeof err);
    CHECK(s->d->check(s->params, err, 8) != 0);
    CHECK(strlen(err) == 7 && err[8] == 'x'); /* truncated, terminated, nothing past */
    CHECK(s->d->check(s->params, NULL, 0) != 0);
}

/* Vignette: the centre pixel of an odd image is untouched, corners get 1 - strength at
   radius 1 and less at radius 2, and alpha is never touched. */
static void check_vignette_shape(pt_stage *s)
{
    pt_reset(s);
    pf_rng r;
    pf_rng_seed(&r, 99);
    pt_images im = pt_images_new(s, &r, 9, 5, 0.5f, 1.0f);
    CHECK(h_run(s->d, s->params, im.in, 1, &im.out, 0) == 0);
    const pf_float4 *c = &pf_image_row(&im.out, 2)[4], *c0 = &pf_image_row(&im.in[0], 2)[4];
    CHECK(c->x == c0->x && c->y == c0->y && c->z == c0->z && c->w == c0->w);
    const pf_float4 *k = &pf_image_row(&im.out, 0)[0], *k0 = &pf_image_row(&im.in[0], 0)[0];
    CHECK(k->x < k0->x && k->x >= 0.5f * k0->x && k->w == k0->w);
    pt_images_free(&im);
}

static void check_hand(pt_stage *st, int n)
{
    const float px[][4] = {{0.25f, 0.5f, 1, 0.75f}};
    pt_stage *inv = pt_find(st, n, "invert"), *thr = pt_find(st, n, "threshold");
    pt_hand(inv, NULL, px, 0, (const float[4]){0.75f, 0.5f, 0, 0.75f}, 0, "alpha kept");
    pt_hand(inv, "alpha=1", px, 0, (const float[4]){0.75f, 0.5f, 0, 0.25f}, 0, "alpha too");
    /* threshold: white reaches level 1 (the luma weights sum to exactly 1 in float) and
       black reaches level 0. */
    pt_hand(thr, "level=1", (const float[][4]){{1, 1, 1, KEEP}}, 0, (const float[4]){1, 1, 1, KEEP},
            0, "white at 1");
    pt_hand(thr, "level=0", (const float[][4]){{0, 0, 0, KEEP}}, 0, (const float[4]){1, 1, 1, KEEP},
            0, "black at 0");
    pt_hand(pt_find(st, n, "gamma"), "gamma=2", (const float[][4]){{0.25f, 0.04f, -1, KEEP}}, 0,
            (const float[4]){0.5f, 0.2f, 0, KEEP}, 1e-6, "square root");
    pt_hand(pt_find(st, n, "grayscale"), NULL, (const float[][4]){{1, 0, 0, KEEP}}, 0,
            (const float[4]){0.2126f, 0.2126f, 0.2126f, KEEP}, 1e-7, "red");
    pt_hand(pt_find(st, n, "levels"), "in_low=0.25", (const float[][4]){{0.1f, 0.625f, 2, KEEP}}, 0,
            (const float[4]){0, 0.5f, 1, KEEP}, 1e-6, "clips");
    /* in_high gives out_high and in_low out_low, to the bit, at any gamma: in_low 4/255
       and in_high 0.7 made 0.99999994 with a multiply by the rounded 1 / (0.7 - 4/255) */
    const pf_stage_desc *lv = h_stage("color", "levels");
    const color_levels_params lp[] = {{4.0f / 255, 0.7f, 1, 0, 1},
                                      {0.1f, 0.3f, 2.2f, 0.2f, 0.7f},
                                      {0.0117647f, 0.6470588f, 0.45f, 0.05f, 0.95f}};
    for (int i = 0; i < PF_COUNTOF(lp); i++) {
        pf_image in = pf_test_image_poisoned(3, 1), out = pf_test_image_poisoned(3, 1);
        pf_image_row(&in, 0)[0] = pf_f4(lp[i].in_high, lp[i].in_low, lp[i].in_high, 1);
        pf_image_row(&in, 0)[1] = pf_f4(lp[i].in_high + 0.01f, lp[i].in_low - 0.01f, 2, 1);
        pf_image_row(&in, 0)[2] = pf_image_row(&in, 0)[0];
        CHECK(h_run(lv, &lp[i], &in, 1, &out, 0) == 0);
        for (int x = 0; x < 3; x++) {
            pf_float4 o = pf_image_row(&out, 0)[x];
            CHECKF(o.x == lp[i].out_high && o.y == lp[i].out_low && o.z == lp[i].out_high,
                   "levels %d, pixel %d: %.9g %.9g %.9g", i, x, o.x, o.y, o.z);
        }
        pf_test_image_free(&in);
        pf_test_image_free(&out);
    }
}

int main(void)
{
    pt_stage stages[] = {
        PT_STAGE("brightness", 1, ref_brightness, 1e-6, ""),
        PT_STAGE("contrast", 1, ref_contrast, 1e-6, ""),
        PT_STAGE("gamma", 1, ref_gamma, 1e-5, ""),
        PT_STAGE("invert", 1, ref_invert, 1e-6, NULL),
        PT_STAGE("grayscale", 1, ref_grayscale, 1e-6, "amount=0"),
        PT_STAGE("threshold", 1, ref_threshold, 0, NULL),
        PT_STAGE("saturation", 1, ref_saturation, 1e-6, ""),
        PT_STAGE("levels", 1, ref_levels, 1e-5, ""),
        PT_STAGE("linear", 1, ref_linear, 1e-6, ""),
        PT_STAGE("color_matrix", 1, ref_color_matrix, 1e-6, ""),
        PT_STAGE("vignette", 1, ref_vignette, 1e-5, "strength=0"),
    };
    int n = PF_COUNTOF(stages);
    pt_run_family("color", stages, n);
    check_levels_check(pt_find(stages, n, "levels"));
    check_vignette_shape(pt_find(stages, n, "vignette"));
    check_hand(stages, n);
    pt_free_family(stages, n);
    return pf_test_done("test_color");
}
