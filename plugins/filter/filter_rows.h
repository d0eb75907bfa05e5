/* plugins/filter/filter_rows.h: the filter family's row loops on the CPU (filter_rows.c),
 * the elementwise inner loops of filter.c's stages, shared by filter.c and nothing else.
 *
 * Each loop computes, element by element, exactly the float operations of the per-pixel
 * form it stands for (filter3x3_ops.h's functions, premultiply.h's), in the same order:
 * branches become selects and the loops run over floats so the compiler vectorises them,
 * which changes no value (tests/cpu/test_filter_rows.c runs the per-pixel forms against
 * them on every sample format).
 */
#ifndef PF_PLUGIN_FILTER_ROWS_H
#define PF_PLUGIN_FILTER_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "pipefuse/plugin.h"

#define FILTER_MAX_TAPS_RADIUS 192 /* ceil(3 * PF_GAUSSIAN_MAX_SIGMA) */

/* A normalised symmetric kernel: w[k] is the weight at offsets +k and -k. */
typedef struct kernel1d {
    int r;
    float w[FILTER_MAX_TAPS_RADIUS + 1];
} kernel1d;

/* How a row of sums is normalised after the vertical pass (filter_sep_row_v). */
enum {
    FILTER_NORM_NONE,     /* kept as they are (a weight sum of 1, every row opaque) */
    FILTER_NORM_STRAIGHT, /* every channel divided by wsum */
    FILTER_NORM_PM        /* colours divided by their summed alpha (0 where it is 0), alpha
                             by wsum: premultiply.h's pf_norm_colour with pm 1 */
};

/* The horizontal pass over the floats [lo, hi) of a row of float RGBA: o[i] = w0 src[i],
   then for each tap t in order o[i] += wt (src[i - 4t] + src[i + 4t]). */
void filter_sep_row_h(const float *src, float *o, int lo, int hi, const kernel1d *k);

/* The vertical pass over n floats: o[i] = w0 rows[0][i], then for each tap t in order
   o[i] += wt (up[t][i] + dn[t][i]), rows[2 t - 1] being up[t] and rows[2 t] dn[t]; then
   the row normalised as norm says (n a multiple of 4: whole pixels). */
void filter_sep_row_v(const float *const *rows, float *o, size_t n, const kernel1d *k, int norm,
                      float wsum);

/* Row src premultiplied into pm: alpha pf_pm_alpha(a), colours pf_pm_mul(c, alpha). */
void filter_premultiply_row(const pf_float4 *src, pf_float4 *pm, int w);

/* Whether every alpha of the row is 1. */
int filter_row_opaque(const pf_float4 *src, int w);

/* median3 and sobel over pixels 1 .. n/4 - 2 of a row of n floats, from the rows above
   (u), at (m) and below (d): median9 of each float's neighbourhood (alpha included);
   sobel1 of each colour sample, alpha copied from m. */
void filter_median3_inner(const float *u, const float *m, const float *d, float *o, int n);
void filter_sobel_inner(const float *u, const float *m, const float *d, float *o, int n,
                        float scale);
/* median3 on 8- or 16-bit codes: samples step .. n - step - 1 of a row of n samples
   (step: the samples a pixel holds), each the median of its 3x3 neighbourhood's samples
   of the same channel in the rows above (u), at (m) and below (d). */
void filter_median3_codes8(const uint8_t *u, const uint8_t *m, const uint8_t *d, uint8_t *o, int n,
                           int step);
void filter_median3_codes16(const uint16_t *u, const uint16_t *m, const uint16_t *d, uint16_t *o,
                            int n, int step);

/* unsharp's last step over a row of w pixels: each colour v + amount (v - b) where
   |v - b| > threshold, else v; alpha v's. dst holds b and receives the result. */
void filter_sharpen_row(const pf_float4 *src, pf_float4 *dst, int w, float amount, float threshold);

#endif /* PF_PLUGIN_FILTER_ROWS_H */
