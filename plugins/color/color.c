/* plugins/color/color.c: the `color` stage family, one-input point stages.
 *
 * The ops are in kernels/point/color_ops.h (embedded as pf_src_color_ops for NVRTC);
 * this file only declares them: one COLOR_STAGE line and its param rows per stage. */
#include <stdio.h>

#include "color_ops.h"
#include "pipefuse/plugin.h"

extern const char pf_src_color_ops[];

/* ---- Declaring a stage -------------------------------------------------------- */

/* Param rows: PF_FLOAT_PARAM and PF_BOOL_PARAM (pipefuse/plugin.h), and FLOATS for a
   float array with its defaults. */
#define FLOATS(T, f, defs, lo, hi, doc)                                                            \
    {                                                                                              \
#f, doc, PF_OFFSET(T, f), PF_PARAM_FLOAT_ARRAY, 0, lo, hi, NULL, PF_COUNTOF(defs), defs    \
    }

/* Where the compiler and the C library can dispatch at load time (GCC or clang on x86-64
   with ifunc), the row loops are also built for AVX2 and the CPU picks; not under the
   sanitizers (see engine/frame.c). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) &&                                \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COLOR_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define COLOR_VECTOR_CLONES
#endif

/* The CPU row function of a one-input op fn, fn##_row: PF_POINT_ROW's loop (the params
   copied to a local, fn on each pixel in turn), the pixel passed straight from the row,
   so that the compiler can vectorise the loop over pixels: the same operations on each
   pixel, the same values. */
#define COLOR_POINT_ROW(fn, T)                                                                     \
    COLOR_VECTOR_CLONES static void fn##_row(const void *params, const pf_float4 *const *in,       \
                                             int n_in, pf_float4 *out, int x0, int n, int y,       \
                                             int width, int height)                                \
    {                                                                                              \
        const T pl_ = *(const T *)params;                                                          \
        const pf_float4 *src_ = in[0];                                                             \
        pf_float4 *dst_ = out;                                                                     \
        for (int i_ = 0; i_ < n; i_++) {                                                           \
            const pf_pos pos_ = {x0 + i_, y, width, height};                                       \
            dst_[i_] = fn(&pl_, &src_[i_], pos_);                                                  \
        }                                                                                          \
    }

/* A one-input point stage fn##_desc running op fn with params T, a check chk (or NULL),
   PF_STAGE_* flags fl (PF_STAGE_PER_CHANNEL where channel c reads channel c only, as the
   op's comment in color_ops.h says) and the param rows ... . Its precompiled CUDA kernel,
   fn##_cuda, is PF_POINT_CUDA(fn, T) in a .cu of this plugin, used when the plugin is
   built with CUDA sources. COLOR_STAGE_CH also declares the channels its output needs
   (pf_stage_desc.out_channels). */
#define COLOR_STAGE(sname, fn, T, chk, fl, sdoc, ...)                                              \
    COLOR_STAGE_CH(sname, fn, T, chk, fl, 0, sdoc, __VA_ARGS__)
#define COLOR_STAGE_CH(sname, fn, T, chk, fl, ch, sdoc, ...)                                       \
    COLOR_POINT_ROW(fn, T)                                                                         \
    int fn##_cuda(const pf_stage_args *a);                                                         \
    static const pf_param_desc fn##_table[] = {__VA_ARGS__};                                       \
    static const pf_stage_desc fn##_desc = {PF_POINT_DESC(fn, T, pf_src_color_ops),                \
                                            .point_cuda = PF_CUDA(fn##_cuda),                      \
                                            .name = sname,                                         \
                                            .doc = sdoc,                                           \
                                            .n_inputs = 1,                                         \
                                            .check = chk,                                          \
                                            .flags = (fl) | PF_STAGE_BINDABLE,                     \
                                            .out_channels = ch,                                    \
                                            PF_PARAMS(fn##_table)};

/* ---- Stages ------------------------------------------------------------------- */

COLOR_STAGE("brightness", color_brightness, color_amount_params, NULL, PF_STAGE_PER_CHANNEL,
            "Adds a constant to R, G and B; alpha kept",
            PF_FLOAT_PARAM(color_amount_params, amount, 0, -1, 1, "added to R, G and B"))

COLOR_STAGE("contrast", color_contrast, color_contrast_params, NULL, PF_STAGE_PER_CHANNEL,
            "Scales R, G and B about a pivot: (x - pivot) * amount + pivot; alpha kept",
            PF_FLOAT_PARAM(color_contrast_params, amount, 1, 0, 4,
                           "contrast factor (1: unchanged)"),
            PF_FLOAT_PARAM(color_contrast_params, pivot, 0.5, 0, 1, "value that stays fixed"))

COLOR_STAGE("gamma", color_gamma, color_gamma_params, NULL, PF_STAGE_PER_CHANNEL,
            "Gamma on R, G and B: max(x, 0)^(1 / gamma); alpha kept",
            PF_FLOAT_PARAM(color_gamma_params, gamma, 1, 0.01, 10,
                           "gamma (> 1 brightens midtones)"))

COLOR_STAGE("invert", color_invert, color_invert_params, NULL, PF_STAGE_PER_CHANNEL,
            "Negative: 1 - x on R, G and B, and on alpha when asked",
            PF_BOOL_PARAM(color_invert_params, alpha, 0, "also invert alpha"))

COLOR_STAGE("grayscale", color_grayscale, color_amount_params, NULL, 0,
            "Mixes R, G and B towards their Rec. 709 luma; alpha kept",
            PF_FLOAT_PARAM(color_amount_params, amount, 1, 0, 1,
                           "how far towards gray (1: fully gray)"))

COLOR_STAGE("threshold", color_threshold, color_threshold_params, NULL, 0,
            "R, G and B become 1 where Rec. 709 luma >= level, else 0; alpha kept",
            PF_FLOAT_PARAM(color_threshold_params, level, 0.5, 0, 1,
                           "luma at and above which white"))

COLOR_STAGE("saturation", color_saturation, color_amount_params, NULL, 0,
            "Scales R, G and B away from their Rec. 709 luma; alpha kept",
            PF_FLOAT_PARAM(color_amount_params, amount, 1, 0, 4, "factor (0: gray, 1: unchanged)"))

static int levels_check(const void *params, char *err, size_t err_size)
{
    const color_levels_params *p = params;
    if (p->in_low < p->in_high)
        return 0;
    snprintf(err, err_size, "in_low (%g) must be less than in_high (%g)", (double)p->in_low,
             (double)p->in_high);
    return 1;
}

COLOR_STAGE("levels", color_levels, color_levels_params, levels_check, PF_STAGE_PER_CHANNEL,
            "Maps [in_low, in_high] to [out_low, out_high] with a gamma, clipping, on R, G "
            "and B; alpha kept",
            PF_FLOAT_PARAM(color_levels_params, in_low, 0, 0, 1,
                           "input black point, below in_high"),
            PF_FLOAT_PARAM(color_levels_params, in_high, 1, 0, 1, "input white point"),
            PF_FLOAT_PARAM(color_levels_params, gamma, 1, 0.01, 10,
                           "gamma applied between the points"),
            PF_FLOAT_PARAM(color_levels_params, out_low, 0, 0, 1, "output for in_low and below"),
            PF_FLOAT_PARAM(color_levels_params, out_high, 1, 0, 1, "output for in_high and above"))

COLOR_STAGE("linear", color_linear, color_linear_params, NULL, PF_STAGE_PER_CHANNEL,
            "a * x + b on all four channels (the multiply-add of the article's case)",
            PF_FLOAT_PARAM(color_linear_params, a, 1, -1e6, 1e6, "factor"),
            PF_FLOAT_PARAM(color_linear_params, b, 0, -1e6, 1e6, "offset"))

COLOR_STAGE("gains", color_gains, color_gains_params, NULL, PF_STAGE_PER_CHANNEL,
            "R, G and B each times its own gain (a white balance); alpha kept",
            PF_FLOAT_PARAM(color_gains_params, r, 1, 0, 100, "factor on R"),
            PF_FLOAT_PARAM(color_gains_params, g, 1, 0, 100, "factor on G"),
            PF_FLOAT_PARAM(color_gains_params, b, 1, 0, 100, "factor on B"))

static const float color_identity44[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
static const float color_zero4[4] = {0, 0, 0, 0};

/* Colour from gray (a duotone, a sepia): a gray photo's "auto" output is written as RGB. */
COLOR_STAGE_CH("color_matrix", color_matrix, color_matrix_params, NULL, 0, 3,
               "(r, g, b, a) = matrix * (r, g, b, a) + offset",
               FLOATS(color_matrix_params, matrix, color_identity44, -1e6, 1e6,
                      "4x4 matrix, row-major: row i gives output channel i"),
               FLOATS(color_matrix_params, offset, color_zero4, -1e6, 1e6,
                      "added to (r, g, b, a) after the matrix"))

COLOR_STAGE("vignette", color_vignette, color_vignette_params, NULL, 0,
            "Darkens R, G and B smoothly from the centre towards the corners; alpha kept",
            PF_FLOAT_PARAM(color_vignette_params, strength, 0.5, 0, 1,
                           "darkening at and past radius"),
            PF_FLOAT_PARAM(color_vignette_params, radius, 1, 0.01, 2,
                           "distance of full darkening, in half-diagonals"))

/* The array sizes of the FLOATS rows' defaults must match their fields. */
_Static_assert(sizeof color_identity44 == sizeof(((color_matrix_params *)0)->matrix), "matrix");
_Static_assert(sizeof color_zero4 == sizeof(((color_matrix_params *)0)->offset), "offset");

static const pf_stage_desc *const color_stages[] = {
    &color_brightness_desc, &color_contrast_desc,  &color_gamma_desc,      &color_invert_desc,
    &color_grayscale_desc,  &color_threshold_desc, &color_saturation_desc, &color_levels_desc,
    &color_linear_desc,     &color_gains_desc,     &color_matrix_desc,     &color_vignette_desc,
};

PF_DEFINE_PLUGIN("color", "0.1.0", "Per-pixel colour adjustments (point stages, fusable)",
                 color_stages)
