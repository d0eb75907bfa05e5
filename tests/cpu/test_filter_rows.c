/* tests/cpu/test_filter_rows.c: the filter family's row loops (plugins/filter/filter_rows.c)
 * give the same bits as the per-pixel forms they stand for.
 *
 * The references here are the stages' former CPU code, kept as it was: sobel and median3
 * as filter3x3_ops.h's functions on each pixel's clamped neighbourhood; gaussian, box and
 * unsharp as the two passes taken pixel by pixel (f4_scale and f4_pair in tap order, reads
 * clamped), rows premultiplied and sums normalised by premultiply.h's functions, the
 * premultiplied normalisation where a row of the band has an alpha other than 1. The
 * GPU kernels compute those forms too, so the CPU stays bit-identical to them as long as
 * the stages stay bit-identical to these references.
 *
 * Inputs: the floats that 8-bit and 16-bit frames load as (k / 255, k / 65535) and float
 * samples with NaN, infinities, signed zeros, subnormals and huge values; laid out as
 * gray, gray+alpha, RGB and RGBA frames load (gray in r, g and b; alpha 1 where the
 * frame has none); and images with alpha as files give (stage_harness.h). Odd sizes
 * from 1x1 up, widths below the radius, widths past the row loops' chunk; whole images
 * and bands. Every output bit must match.
 */
#include <math.h>
#include <string.h>

#include "filter.h"
#include "stage_harness.h"

/* ---- The former per-pixel code ---------------------------------------------------------- */

typedef struct ref_kernel {
    int r;
    float w[PF_GAUSSIAN_MAX_SIGMA * 3 + 1];
} ref_kernel;

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* the taps normalised in double, in order, then each rounded to float */
static void ref_taps(const char *stage, const void *params, ref_kernel *k)
{
    double t[PF_GAUSSIAN_MAX_SIGMA * 3 + 1], sum = 0;
    int pm, r;
    if (!strcmp(stage, "box"))
        r = box_sep(params, -1, t, &pm);
    else
        r = gaussian_sep(params, -1, t, &pm);
    for (int i = 0; i <= r; i++) {
        if (!strcmp(stage, "box"))
            box_sep(params, i, &t[i], &pm);
        else
            gaussian_sep(params, i, &t[i], &pm);
        sum += i ? 2 * t[i] : t[i];
    }
    for (int i = 0; i <= r; i++)
        k->w[i] = (float)(t[i] / sum);
    k->r = r;
}

static pf_float4 f4_scale(pf_float4 a, float s)
{
    return pf_f4(a.x * s, a.y * s, a.z * s, a.w * s);
}

static pf_float4 f4_pair(pf_float4 acc, float s, pf_float4 a, pf_float4 b)
{
    return pf_f4(acc.x + s * (a.x + b.x), acc.y + s * (a.y + b.y), acc.z + s * (a.z + b.z),
                 acc.w + s * (a.w + b.w));
}

static float ref_weight_sum(const ref_kernel *k)
{
    float h = 1.0f * k->w[0];
    for (int t = 1; t <= k->r; t++)
        h = h + k->w[t] * (1.0f + 1.0f);
    float v = h * k->w[0];
    for (int t = 1; t <= k->r; t++)
        v = v + k->w[t] * (h + h);
    return v;
}

/* The output rows [y0, y1) of the separable stage, as filter.c computed them. */
static void ref_separable(const pf_image *in, const ref_kernel *k, int alpha, pf_image *out, int y0,
                          int y1)
{
    const int w = in->width, h = in->height, r = k->r;
    const int s0 = y0 - r < 0 ? 0 : y0 - r, s1 = y1 + r > h ? h : y1 + r;
    const int pm = alpha != PF_ALPHA_STRAIGHT && r > 0;
    pf_float4 *tmp = malloc(sizeof(pf_float4) * (size_t)w * (size_t)(s1 - s0));
    pf_float4 *row = malloc(sizeof(pf_float4) * (size_t)w);
    if (!tmp || !row)
        exit(1);
    int mixed = 0;
    for (int y = s0; y < s1; y++) {
        const pf_float4 *src = pf_image_row(in, y);
        int opaque = 1;
        for (int x = 0; x < w; x++)
            opaque &= src[x].w == 1.0f;
        if (pm && !opaque) {
            mixed = 1;
            for (int x = 0; x < w; x++) {
                const float a = pf_pm_alpha(src[x].w);
                row[x] = pf_f4(pf_pm_mul(src[x].x, a), pf_pm_mul(src[x].y, a),
                               pf_pm_mul(src[x].z, a), a);
            }
            src = row;
        }
        pf_float4 *t = tmp + (size_t)(y - s0) * (size_t)w;
        for (int x = 0; x < w; x++) {
            pf_float4 acc = f4_scale(src[x], k->w[0]);
            for (int i = 1; i <= r; i++)
                acc = f4_pair(acc, k->w[i], src[clampi(x - i, 0, w - 1)],
                              src[clampi(x + i, 0, w - 1)]);
            t[x] = acc;
        }
    }
    const float wsum = ref_weight_sum(k);
    for (int y = y0; y < y1; y++) {
        pf_float4 *o = pf_image_row(out, y);
        for (int x = 0; x < w; x++) {
            pf_float4 acc = f4_scale(tmp[(size_t)(y - s0) * (size_t)w + (size_t)x], k->w[0]);
            for (int i = 1; i <= r; i++)
                acc = f4_pair(acc, k->w[i],
                              tmp[(size_t)(clampi(y - i, 0, h - 1) - s0) * (size_t)w + (size_t)x],
                              tmp[(size_t)(clampi(y + i, 0, h - 1) - s0) * (size_t)w + (size_t)x]);
            if (wsum != 1.0f || (pm && mixed)) {
                const int p = pm && mixed;
                acc = pf_f4(pf_norm_colour(acc.x, acc.w, wsum, p),
                            pf_norm_colour(acc.y, acc.w, wsum, p),
                            pf_norm_colour(acc.z, acc.w, wsum, p), acc.w / wsum);
            }
            o[x] = acc;
        }
    }
    free(row);
    free(tmp);
}

static float ref_sharpen(float v, float blurred, float amount, float threshold)
{
    float d = v - blurred;
    return PF_FABSF(d) > threshold ? v + amount * d : v;
}

static void ref_3x3(const char *stage, const void *params, const pf_image *in, pf_image *out,
                    int y0, int y1)
{
    pf_float4 n[9];
    for (int y = y0; y < y1; y++)
        for (int x = 0; x < in->width; x++) {
            for (int j = 0; j < 3; j++)
                for (int i = 0; i < 3; i++)
                    n[j * 3 + i] = pf_image_at_clamped(in, x + i - 1, y + j - 1);
            pf_image_row(out, y)[x] =
                !strcmp(stage, "sobel") ? sobel_px(params, n) : median3_px(params, n);
        }
}

/* The reference of stage over the bands of band_rows rows (0: one band). */
static void reference(const char *stage, const void *params, const pf_image *in, pf_image *out,
                      int band_rows)
{
    int step = band_rows > 0 ? band_rows : in->height;
    for (int y0 = 0; y0 < in->height; y0 += step) {
        int y1 = y0 + step < in->height ? y0 + step : in->height;
        if (!strcmp(stage, "sobel") || !strcmp(stage, "median3")) {
            ref_3x3(stage, params, in, out, y0, y1);
            continue;
        }
        ref_kernel k;
        ref_taps(stage, params, &k);
        int alpha = !strcmp(stage, "box")       ? ((const pf_box_params *)params)->alpha
                    : !strcmp(stage, "unsharp") ? ((const pf_unsharp_params *)params)->alpha
                                                : ((const pf_gaussian_params *)params)->alpha;
        ref_separable(in, &k, alpha, out, y0, y1);
        if (!strcmp(stage, "unsharp")) {
            const pf_unsharp_params *p = params;
            for (int y = y0; y < y1; y++)
                for (int x = 0; x < in->width; x++) {
                    pf_float4 s = pf_image_row(in, y)[x], b = pf_image_row(out, y)[x];
                    pf_image_row(out, y)[x] =
                        pf_f4(ref_sharpen(s.x, b.x, p->amount, p->threshold),
                              ref_sharpen(s.y, b.y, p->amount, p->threshold),
                              ref_sharpen(s.z, b.z, p->amount, p->threshold), s.w);
                }
        }
    }
}

/* ---- Inputs ---------------------------------------------------------------------------------- */

enum { IN_U8, IN_U16, IN_F32, IN_ALPHA8, IN_ALPHA_F, IN_KINDS };
static const char *const kind_names[] = {"u8", "u16", "f32", "alpha8", "alpha-float"};

/* A float sample with the values that trip rounding and selection up now and then. */
static float odd_float(pf_rng *r)
{
    static const float specials[] = {0.0f,  -0.0f,  1.0f, -1.0f, 1e-40f, -1e-40f,
                                     1e30f, -1e30f, 0.5f, 0.25f, 1e-8f,  3.0f};
    uint32_t u = pf_rng_u32(r) % 16;
    if (u == 0)
        return NAN;
    if (u == 1)
        return pf_rng_u32(r) & 1 ? INFINITY : -INFINITY;
    if (u < 4)
        return specials[pf_rng_u32(r) % (sizeof specials / sizeof specials[0])];
    return pf_rng_float(r) * 1.5f - 0.25f;
}

/* Input of kind k laid out as a frame of ch channels loads (1 gray, 2 gray+alpha, 3 RGB,
   4 RGBA). */
static pf_image make_input(pf_rng *r, int kind, int ch, int w, int h)
{
    if (kind == IN_ALPHA8 || kind == IN_ALPHA_F)
        return h_alpha_image(r, w, h, kind == IN_ALPHA8 ? 8 : 0);
    pf_image im = pf_test_image_poisoned(w, h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float s[4];
            for (int c = 0; c < 4; c++)
                s[c] = kind == IN_U8    ? (float)(pf_rng_u32(r) % 256) / 255.0f
                       : kind == IN_U16 ? (float)(pf_rng_u32(r) % 65536) / 65535.0f
                                        : odd_float(r);
            /* smooth stretches now and then: equal neighbours for the selections */
            if (x > 0 && pf_rng_u32(r) % 4 == 0)
                memcpy(s, &pf_image_row(&im, y)[x - 1], sizeof s);
            if (ch <= 2)
                s[1] = s[2] = s[0];
            if (ch == 1 || ch == 3)
                s[3] = 1.0f;
            pf_image_row(&im, y)[x] = pf_f4(s[0], s[1], s[2], s[3]);
        }
    return im;
}

/* ---- The checks -------------------------------------------------------------------------------- */

static long cases, mismatched;

/* The same bits, sample by sample, or NaN for NaN: a NaN's payload and sign are not a
   result (x86 keeps an operand's, the GPU makes its own, and which operand a compiler
   puts first is its choice: the former code's vector and per-pixel parts differed so). */
static int same_row(const pf_float4 *a, const pf_float4 *b, int w)
{
    const float *fa = (const float *)a, *fb = (const float *)b;
    for (int i = 0; i < 4 * w; i++)
        if (memcmp(&fa[i], &fb[i], sizeof(float)) && !(isnan(fa[i]) && isnan(fb[i])))
            return 0;
    return 1;
}

static void check_stage(const char *stage, const void *params, const char *label, pf_rng *r)
{
    static const pf_shape sizes[] = {{1, 1}, {2, 3},  {3, 2},   {5, 1},   {1, 5},
                                     {4, 4}, {13, 7}, {97, 61}, {301, 5}, {260, 9}};
    const pf_stage_desc *d = h_stage("filter", stage);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int kind = 0; kind < IN_KINDS; kind++)
            for (int ch = 1; ch <= 4; ch++) {
                if ((kind == IN_ALPHA8 || kind == IN_ALPHA_F) && ch != 4)
                    continue;
                const int w = sizes[s].width, h = sizes[s].height;
                pf_image in = make_input(r, kind, ch, w, h);
                for (int band = 0; band <= 3; band += 3) {
                    pf_image got = pf_test_image_poisoned(w, h),
                             want = pf_test_image_poisoned(w, h);
                    CHECK(h_run(d, params, &in, 1, &got, band) == 0);
                    reference(stage, params, &in, &want, band);
                    cases++;
                    for (int y = 0; y < h; y++)
                        if (!same_row(pf_image_row(&got, y), pf_image_row(&want, y), w)) {
                            mismatched++;
                            CHECKF(0,
                                   "%s %s: %s input, %d channels, %dx%d, bands of %d: row %d "
                                   "differs from the per-pixel form",
                                   stage, label, kind_names[kind], ch, w, h, band, y);
                            break;
                        }
                    pf_test_image_free(&got);
                    pf_test_image_free(&want);
                }
                pf_test_image_free(&in);
            }
}

int main(void)
{
    pf_rng r;
    pf_rng_seed(&r, 34);
    char label[64];

    static const float sigmas[] = {0.0f, 0.3f, 1.0f, 2.0f, 3.3f};
    for (size_t i = 0; i < sizeof sigmas / sizeof sigmas[0]; i++)
        for (int alpha = 0; alpha < 2; alpha++) {
            pf_gaussian_params g = {sigmas[i], alpha};
            snprintf(label, sizeof label, "sigma %g %s", sigmas[i], alpha ? "straight" : "pm");
            check_stage("gaussian", &g, label, &r);
        }
    static const int radii[] = {0, 1, 2, 5};
    for (size_t i = 0; i < sizeof radii / sizeof radii[0]; i++)
        for (int alpha = 0; alpha < 2; alpha++) {
            pf_box_params b = {radii[i], alpha};
            snprintf(label, sizeof label, "radius %d %s", radii[i], alpha ? "straight" : "pm");
            check_stage("box", &b, label, &r);
        }
    static const pf_unsharp_params us[] = {
        {1.0f, 0.8f, 0.0f, 0}, {2.0f, 1.5f, 0.05f, 0}, {0.7f, 3.0f, 0.01f, 1}};
    for (size_t i = 0; i < sizeof us / sizeof us[0]; i++) {
        snprintf(label, sizeof label, "sigma %g amount %g threshold %g", us[i].sigma, us[i].amount,
                 us[i].threshold);
        check_stage("unsharp", &us[i], label, &r);
    }
    static const pf_sobel_params sob[] = {{1.0f}, {0.37f}, {1000.0f}};
    for (size_t i = 0; i < sizeof sob / sizeof sob[0]; i++) {
        snprintf(label, sizeof label, "scale %g", sob[i].scale);
        check_stage("sobel", &sob[i], label, &r);
    }
    pf_median3_params m = {0};
    check_stage("median3", &m, "", &r);

    printf("test_filter_rows: %ld runs against the per-pixel forms, %ld differing\n", cases,
           mismatched);
    CHECK(cases > 0);
    return pf_test_done("test_filter_rows");
}
