/* tests/cpu/test_point_rows.c: the CPU row functions of the color and composite families
 * (plugins/color/color.c's COLOR_POINT_ROW, plugins/composite/composite.c's
 * COMPOSITE_POINT_ROW: loops the compiler vectorises) give the same bits as
 * PF_POINT_ROW's form of the same op, kept here as the reference: each pixel copied
 * out, the op of kernels/point/color_ops.h or composite_ops.h called on it with its
 * position.
 *
 * Every point stage of both families, with default params and random ones in range; rows
 * of 1 to 300 pixels at random positions; samples as 8-bit and 16-bit frames load them
 * (k / 255, k / 65535) and floats with NaN, infinities, signed zeros, subnormals and
 * huge values, laid out as gray, gray+alpha, RGB and RGBA frames load. Equal bits, or
 * NaN for NaN (a NaN's payload is not a result: see test_filter_rows.c).
 */
#include <math.h>
#include <string.h>

#include "color_ops.h"
#include "composite_ops.h"
#include "stage_harness.h"

typedef void (*ref_row_fn)(const void *params, const pf_float4 *const *in, int n_in, pf_float4 *out,
                           int x0, int n, int y, int width, int height);

/* PF_POINT_ROW's loop, as the families' rows ran before. */
#define REF_ROW(fn, T)                                                                             \
    static void ref_##fn(const void *params, const pf_float4 *const *in, int n_in, pf_float4 *out, \
                         int x0, int n, int y, int width, int height)                              \
    {                                                                                              \
        const T p = *(const T *)params;                                                            \
        pf_float4 v[PF_MAX_INPUTS];                                                                \
        pf_pos pos = {x0, y, width, height};                                                       \
        for (int i = 0; i < n; i++, pos.x++) {                                                     \
            for (int k = 0; k < n_in; k++)                                                         \
                v[k] = in[k][i];                                                                   \
            out[i] = fn(&p, v, pos);                                                               \
        }                                                                                          \
    }

REF_ROW(color_brightness, color_amount_params)
REF_ROW(color_contrast, color_contrast_params)
REF_ROW(color_gamma, color_gamma_params)
REF_ROW(color_invert, color_invert_params)
REF_ROW(color_grayscale, color_amount_params)
REF_ROW(color_threshold, color_threshold_params)
REF_ROW(color_saturation, color_amount_params)
REF_ROW(color_levels, color_levels_params)
REF_ROW(color_linear, color_linear_params)
REF_ROW(color_matrix, color_matrix_params)
REF_ROW(color_vignette, color_vignette_params)
REF_ROW(composite_blend, composite_blend_params)
REF_ROW(composite_add, composite_add_params)
REF_ROW(composite_multiply, composite_none_params)
REF_ROW(composite_difference, composite_none_params)
REF_ROW(composite_alpha_over, composite_none_params)
REF_ROW(composite_mask, composite_mask_params)

static const struct {
    const char *plugin, *name;
    int n_in;
    ref_row_fn ref;
} stages[] = {
    {"color", "brightness", 1, ref_color_brightness},
    {"color", "contrast", 1, ref_color_contrast},
    {"color", "gamma", 1, ref_color_gamma},
    {"color", "invert", 1, ref_color_invert},
    {"color", "grayscale", 1, ref_color_grayscale},
    {"color", "threshold", 1, ref_color_threshold},
    {"color", "saturation", 1, ref_color_saturation},
    {"color", "levels", 1, ref_color_levels},
    {"color", "linear", 1, ref_color_linear},
    {"color", "color_matrix", 1, ref_color_matrix},
    {"color", "vignette", 1, ref_color_vignette},
    {"composite", "blend", 2, ref_composite_blend},
    {"composite", "add", 2, ref_composite_add},
    {"composite", "multiply", 2, ref_composite_multiply},
    {"composite", "difference", 2, ref_composite_difference},
    {"composite", "alpha_over", 2, ref_composite_alpha_over},
    {"composite", "mask", 3, ref_composite_mask},
};

/* A float sample with the values that trip rounding and comparisons up now and then. */
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

static void fill_row(pf_rng *r, pf_float4 *row, int n, int kind, int ch)
{
    for (int x = 0; x < n; x++) {
        float s[4];
        for (int c = 0; c < 4; c++)
            s[c] = kind == 0   ? (float)(pf_rng_u32(r) % 256) / 255.0f
                   : kind == 1 ? (float)(pf_rng_u32(r) % 65536) / 65535.0f
                               : odd_float(r);
        if (ch <= 2)
            s[1] = s[2] = s[0];
        if (ch == 1 || ch == 3)
            s[3] = 1.0f;
        row[x] = pf_f4(s[0], s[1], s[2], s[3]);
    }
}

/* Float params (and float-array elements) of the table drawn in their range; kept at
   their defaults where the stage's check refuses the draw. */
static void random_params(pf_rng *r, const pf_stage_desc *d, void *params)
{
    void *keep = malloc(d->params_size ? d->params_size : 1);
    if (!keep)
        exit(1);
    memcpy(keep, params, d->params_size);
    for (int i = 0; i < d->n_params; i++) {
        const pf_param_desc *pd = &d->params[i];
        int count = pd->type == PF_PARAM_FLOAT         ? 1
                    : pd->type == PF_PARAM_FLOAT_ARRAY ? pd->count
                                                       : 0;
        double lo = isfinite(pd->min) ? pd->min : -4, hi = isfinite(pd->max) ? pd->max : 4;
        for (int k = 0; k < count; k++)
            ((float *)((char *)params + pd->offset))[k] = (float)(lo + (hi - lo) * pf_rng_float(r));
    }
    char err[256];
    if (d->check && d->check(params, err, sizeof err) != 0)
        memcpy(params, keep, d->params_size);
    free(keep);
}

static int same_row(const pf_float4 *a, const pf_float4 *b, int n)
{
    const float *fa = (const float *)a, *fb = (const float *)b;
    for (int i = 0; i < 4 * n; i++)
        if (memcmp(&fa[i], &fb[i], sizeof(float)) && !(isnan(fa[i]) && isnan(fb[i])))
            return 0;
    return 1;
}

int main(void)
{
    pf_rng r;
    pf_rng_seed(&r, 34);
    static const int lengths[] = {1, 2, 7, 8, 9, 31, 256, 300};
    long runs = 0;
    pf_float4 in[3][300], got[300], want[300];
    for (size_t s = 0; s < sizeof stages / sizeof stages[0]; s++) {
        const pf_stage_desc *d = h_stage(stages[s].plugin, stages[s].name);
        const int n_in = stages[s].n_in;
        CHECKF(d->n_inputs == n_in, "%s: %d inputs", stages[s].name, d->n_inputs);
        CHECKF(d->point_row != NULL, "%s: no CPU row function", stages[s].name);
        for (int draw = 0; draw < 6 && d->point_row; draw++) {
            void *params = h_params(d);
            if (draw > 0)
                random_params(&r, d, params);
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
                for (int kind = 0; kind < 3; kind++)
                    for (int ch = 1; ch <= 4; ch++) {
                        const int n = lengths[l], width = 700, height = 500;
                        const int x0 = pf_rng_range(&r, 0, width - n),
                                  y = pf_rng_range(&r, 0, height - 1);
                        const pf_float4 *ins[3] = {in[0], in[1], in[2]};
                        for (int k = 0; k < n_in; k++)
                            fill_row(&r, in[k], n, kind, ch);
                        memset(got, 0xff, sizeof got);
                        d->point_row(params, ins, n_in, got, x0, n, y, width, height);
                        stages[s].ref(params, ins, n_in, want, x0, n, y, width, height);
                        runs++;
                        CHECKF(
                            same_row(got, want, n),
                            "%s (params draw %d): %d pixels from (%d, %d), %s samples x%d differ "
                            "from the per-pixel form",
                            stages[s].name, draw, n, x0, y,
                            kind == 0   ? "u8"
                            : kind == 1 ? "u16"
                                        : "float",
                            ch);
                    }
            free(params);
        }
    }
    printf("test_point_rows: %ld rows against the per-pixel form\n", runs);
    CHECK(runs > 0);
    return pf_test_done("test_point_rows");
}
