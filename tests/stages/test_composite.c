/* tests/stages/test_composite.c: the `composite` stages against references written again
 * here, plainly and in double, with the point-stage driver of the harness library
 * (tests/lib/point_driver.h). */
#include <math.h>
#include <string.h>

#include "point_driver.h"

/* ---- References --------------------------------------------------------------- */

static int ref_blend(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                     double mag[4])
{
    double t = pt_get(s, "opacity");
    for (int c = 0; c < 4; c++)
        o[c] = (1.0 - t) * in[0][c] + t * in[1][c];
    return 1;
}

static int ref_add(const pt_stage *s, const double in[][4], pf_pos pos, double o[4], double mag[4])
{
    double k = pt_get(s, "scale");
    for (int c = 0; c < 3; c++) {
        o[c] = in[0][c] + k * in[1][c];
        mag[c] = fabs(in[0][c]) + fabs(k * in[1][c]);
    }
    o[3] = in[0][3];
    return 1;
}

static int ref_multiply(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                        double mag[4])
{
    for (int c = 0; c < 3; c++)
        o[c] = in[0][c] * in[1][c];
    o[3] = in[0][3];
    return 1;
}

static int ref_difference(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                          double mag[4])
{
    for (int c = 0; c < 3; c++)
        o[c] = fabs(in[0][c] - in[1][c]);
    o[3] = in[0][3];
    return 1;
}

static double clamp01(double v)
{
    return v < 0 ? 0 : (v > 1 ? 1 : v);
}

/* Porter and Duff's OVER with straight colours: premultiply, add, divide back. */
static int ref_alpha_over(const pt_stage *s, const double in[][4], pf_pos pos, double o[4],
                          double mag[4])
{
    double ab = clamp01(in[0][3]), ao = clamp01(in[1][3]);
    o[3] = ao + ab * (1.0 - ao);
    for (int c = 0; c < 3; c++)
        o[c] = o[3] > 0 ? (in[1][c] * ao + in[0][c] * ab * (1.0 - ao)) / o[3] : 0.0;
    return 1;
}

static int ref_mask(const pt_stage *s, const double in[][4], pf_pos pos, double o[4], double mag[4])
{
    double l = pt_luma(in[2]), t = clamp01(pt_get(s, "invert") ? 1.0 - l : l);
    for (int c = 0; c < 4; c++)
        o[c] = (1.0 - t) * in[0][c] + t * in[1][c];
    return 1;
}

/* ---- Hand-made cases ---------------------------------------------------------- */

static void check_hand(pt_stage *st, int n)
{
    static const float keep[4] = KEEP4;
    pt_stage *over = pt_find(st, n, "alpha_over"), *mask = pt_find(st, n, "mask");
    /* alpha_over: an opaque other hides the base; a transparent one shows it; nothing
       over nothing is (0, 0, 0, 0), not NaN; alphas outside [0, 1] count as clamped. */
    pt_hand(over, NULL, (const float[][4]){KEEP4, {KEEP, KEEP, KEEP, 1}}, 1, keep, 0, "opaque");
    pt_hand(over, NULL, (const float[][4]){{KEEP, KEEP, KEEP, 0.75f}, {KEEP, KEEP, KEEP, 0}}, 0,
            keep, 1e-6, "transparent other");
    pt_hand(over, NULL, (const float[][4]){{KEEP, KEEP, KEEP, -1}, {KEEP, KEEP, KEEP, 0}}, 0,
            (const float[4]){0, 0, 0, 0}, 0, "both transparent");
    pt_hand(over, NULL, (const float[][4]){KEEP4, {KEEP, KEEP, KEEP, 2}}, 1,
            (const float[4]){KEEP, KEEP, KEEP, 1}, 0, "other alpha 2");
    /* mask: black selects base, a mask of luma >= 1 selects other; invert swaps. */
    const float black[][4] = {KEEP4, KEEP4, {0, 0, 0, KEEP}};
    const float bright[][4] = {KEEP4, KEEP4, {3, 3, 3, KEEP}};
    pt_hand(mask, NULL, black, 0, keep, 0, "black mask");
    pt_hand(mask, NULL, bright, 1, keep, 1e-6, "bright mask");
    pt_hand(mask, "invert=1", black, 1, keep, 1e-6, "inverted black mask");
    pt_hand(mask, "invert=1", bright, 0, keep, 0, "inverted bright mask");
    /* multiply by white and difference from itself. */
    pt_hand(pt_find(st, n, "multiply"), NULL, (const float[][4]){KEEP4, {1, 1, 1, KEEP}}, 0, keep,
            0, "times white");
    pt_hand(pt_find(st, n, "difference"), NULL,
            (const float[][4]){{0.25f, 0.5f, 2, KEEP}, {0.25f, 0.5f, 2, KEEP}}, 0,
            (const float[4]){0, 0, 0, KEEP}, 0, "from itself");
}

int main(void)
{
    pt_stage stages[] = {
        PT_STAGE("blend", 2, ref_blend, 1e-6, "opacity=0"),
        PT_STAGE("add", 2, ref_add, 1e-6, "scale=0"),
        PT_STAGE("multiply", 2, ref_multiply, 1e-6, NULL),
        PT_STAGE("difference", 2, ref_difference, 1e-6, NULL),
        PT_STAGE("alpha_over", 2, ref_alpha_over, 1e-5, NULL),
        PT_STAGE("mask", 3, ref_mask, 1e-6, NULL),
    };
    int n = PF_COUNTOF(stages);
    pt_run_family("composite", stages, n);
    check_hand(stages, n);
    pt_free_family(stages, n);
    return pf_test_done("test_composite");
}
