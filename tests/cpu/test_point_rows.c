/* tests/cpu/test_color_rows.c: the color family's CPU row functions (plugins/color/color.c,
 * COLOR_POINT_ROW: a loop the compiler vectorises) give the same bits as PF_POINT_ROW's
 * form of the same op, kept here as the reference: each pixel copied out, the op of
 * kernels/point/color_ops.h called on it with its position.
 *
 * Every stage of the family, with its default params and with random ones in range; rows
 * of 1 to 300 pixels at random positions; samples as 8-bit and 16-bit frames load them
 * (k / 255, k / 65535) and floats with NaN, infinities, signed zeros, subnormals and
 * huge values, laid out as gray, gray+alpha, RGB and RGBA frames load. Equal bits, or
 * NaN for NaN (a NaN's payload is not a result: see test_filter_rows.c).
 */
#include <math.h>
#include <string.h>

#include "color_ops.h"
#include "stage_harness.h"

typedef void (*ref_row_fn)(const void *params, const pf_float4 *in, pf_float4 *out, int x0, int n,
                           int y, int width, int height);

/* PF_POINT_ROW's loop, as the family's rows ran before. */
#define REF_ROW(fn, T)                                                                             \
    static void ref_##fn(const void *params, const pf_float4 *in, pf_float4 *out, int x0, int n,   \
                         int y, int width, int height)                                             \
    {                                                                                              \
        const T p = *(const T *)params;                                                            \
        pf_float4 v[1];                                                                            \
        pf_pos pos = {x0, y, width, height};                                                       \
        for (int i = 0; i < n; i++, pos.x++) {                                                     \
            v[0] = in[i];                                                                          \
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

static const struct {
    const char *name;
    ref_row_fn ref;
} stages[] = {
    {"brightness", ref_color_brightness}, {"contrast", ref_color_contrast},
    {"gamma", ref_color_gamma},           {"invert", ref_color_invert},
    {"grayscale", ref_color_grayscale},   {"threshold", ref_color_threshold},
    {"saturation", ref_color_saturation}, {"levels", ref_color_levels},
    {"linear", ref_color_linear},         {"color_matrix", ref_color_matrix},
    {"vignette", ref_color_vignette},
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
    pf_float4 in[300], got[300], want[300];
    for (size_t s = 0; s < sizeof stages / sizeof stages[0]; s++) {
        const pf_stage_desc *d = h_stage("color", stages[s].name);
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
                        fill_row(&r, in, n, kind, ch);
                        const pf_float4 *ins[1] = {in};
                        memset(got, 0xff, sizeof got);
                        d->point_row(params, ins, 1, got, x0, n, y, width, height);
                        stages[s].ref(params, in, want, x0, n, y, width, height);
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
    printf("test_color_rows: %ld rows against the per-pixel form\n", runs);
    CHECK(runs > 0);
    return pf_test_done("test_color_rows");
}
