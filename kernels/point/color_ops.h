/* kernels/point/color_ops.h: the `color` family's point ops, one input each.
 *
 * Compiled as plain C by plugins/color/color.c, as CUDA, and handed to NVRTC as text
 * for fused kernels (see pipefuse/point.h for what that allows). Values are float RGBA,
 * nominally [0, 1]; nothing is clamped unless the op's meaning needs it, and each op
 * says which channels it touches and what it clamps. Where a parameter value is the
 * identity, the op is written so that it is exactly the identity there (x + 0 * d
 * rather than a rearranged form that rounds).
 */
#ifndef PF_KERNELS_POINT_COLOR_OPS_H
#define PF_KERNELS_POINT_COLOR_OPS_H

#include "pipefuse/point.h"

/* ---- Params ------------------------------------------------------------------- */

typedef struct color_amount_params {
    float amount;
} color_amount_params;
typedef struct color_contrast_params {
    float amount, pivot;
} color_contrast_params;
typedef struct color_gamma_params {
    float gamma;
} color_gamma_params;
typedef struct color_invert_params {
    int alpha;
} color_invert_params;
typedef struct color_threshold_params {
    float level;
} color_threshold_params;
typedef struct color_levels_params {
    float in_low, in_high, gamma, out_low, out_high;
} color_levels_params;
typedef struct color_linear_params {
    float a, b;
} color_linear_params;
typedef struct color_gains_params {
    float r, g, b;
} color_gains_params;
typedef struct color_matrix_params {
    float matrix[16], offset[4];
} color_matrix_params;
typedef struct color_vignette_params {
    float strength, radius;
} color_vignette_params;

/* ---- Helpers ------------------------------------------------------------------ */

/* lerp(c, (l, l, l), t) on RGB, alpha kept: exactly c when t is 0. */
PF_POINT_FN pf_float4 color_towards_gray(pf_float4 c, float l, float t)
{
    return pf_f4(pf_lerpf(c.x, l, t), pf_lerpf(c.y, l, t), pf_lerpf(c.z, l, t), c.w);
}

/* v^e for v >= 0, and exactly v when e is 1 (CUDA's __powf(v, 1) is not always v). */
PF_POINT_FN float color_pow(float v, float e)
{
    return e == 1.0f ? v : PF_POWF(v, e);
}

/* max(v, 0)^e: negatives (no real power) become 0. */
PF_POINT_FN float color_pow0(float v, float e)
{
    return color_pow(pf_maxf(v, 0.0f), e);
}

/* ---- Ops ---------------------------------------------------------------------- */

/* RGB + amount; alpha kept. */
PF_POINT_FN pf_float4 color_brightness(const color_amount_params *p, const pf_float4 *in,
                                       pf_pos pos)
{
    pf_float4 c = in[0];
    return pf_f4(c.x + p->amount, c.y + p->amount, c.z + p->amount, c.w);
}

/* RGB: (x - pivot) * amount + pivot, written as x + (x - pivot) * (amount - 1); alpha
   kept. */
PF_POINT_FN pf_float4 color_contrast(const color_contrast_params *p, const pf_float4 *in,
                                     pf_pos pos)
{
    pf_float4 c = in[0];
    float k = p->amount - 1.0f;
    return pf_f4(c.x + (c.x - p->pivot) * k, c.y + (c.y - p->pivot) * k, c.z + (c.z - p->pivot) * k,
                 c.w);
}

/* RGB: max(x, 0)^(1 / gamma) (negatives clamp to 0); alpha kept. */
PF_POINT_FN pf_float4 color_gamma(const color_gamma_params *p, const pf_float4 *in, pf_pos pos)
{
    pf_float4 c = in[0];
    float e = 1.0f / p->gamma;
    return pf_f4(color_pow0(c.x, e), color_pow0(c.y, e), color_pow0(c.z, e), c.w);
}

/* RGB: 1 - x; alpha: 1 - a when p->alpha, else kept. */
PF_POINT_FN pf_float4 color_invert(const color_invert_params *p, const pf_float4 *in, pf_pos pos)
{
    pf_float4 c = in[0];
    return pf_f4(1.0f - c.x, 1.0f - c.y, 1.0f - c.z, p->alpha ? 1.0f - c.w : c.w);
}

/* RGB: lerp(x, luma, amount); alpha kept. */
PF_POINT_FN pf_float4 color_grayscale(const color_amount_params *p, const pf_float4 *in, pf_pos pos)
{
    return color_towards_gray(in[0], pf_luma(in[0]), p->amount);
}

/* RGB: 1 where luma >= level, else 0; alpha kept. */
PF_POINT_FN pf_float4 color_threshold(const color_threshold_params *p, const pf_float4 *in,
                                      pf_pos pos)
{
    float v = pf_luma(in[0]) >= p->level ? 1.0f : 0.0f;
    return pf_f4(v, v, v, in[0].w);
}

/* RGB: lerp(luma, x, amount), written as lerp(x, luma, 1 - amount); alpha kept. */
PF_POINT_FN pf_float4 color_saturation(const color_amount_params *p, const pf_float4 *in,
                                       pf_pos pos)
{
    return color_towards_gray(in[0], pf_luma(in[0]), 1.0f - p->amount);
}

/* RGB: t = clamp((x - in_low) / (in_high - in_low), 0, 1); out_low + t^(1 / gamma) *
   (out_high - out_low), and out_high itself where t is 1. Clamps t: black and white
   points clip, which is what levels mean. A division, not a multiply by the rounded
   reciprocal, so that in_high and above give t = 1 exactly (x / x), as in_low gives 0.
   Alpha kept. check() guarantees in_low < in_high. */
PF_POINT_FN float color_levels1(const color_levels_params *p, float v, float span, float e)
{
    float t = pf_clampf((v - p->in_low) / span, 0.0f, 1.0f);
    return t >= 1.0f ? p->out_high : p->out_low + color_pow(t, e) * (p->out_high - p->out_low);
}

PF_POINT_FN pf_float4 color_levels(const color_levels_params *p, const pf_float4 *in, pf_pos pos)
{
    pf_float4 c = in[0];
    float span = p->in_high - p->in_low, e = 1.0f / p->gamma;
    return pf_f4(color_levels1(p, c.x, span, e), color_levels1(p, c.y, span, e),
                 color_levels1(p, c.z, span, e), c.w);
}

/* All four channels: a * x + b. */
PF_POINT_FN pf_float4 color_linear(const color_linear_params *p, const pf_float4 *in, pf_pos pos)
{
    pf_float4 c = in[0];
    return pf_f4(p->a * c.x + p->b, p->a * c.y + p->b, p->a * c.z + p->b, p->a * c.w + p->b);
}

/* R, G and B each times its own gain (a white balance); alpha kept. Per channel. */
PF_POINT_FN pf_float4 color_gains(const color_gains_params *p, const pf_float4 *in, pf_pos pos)
{
    pf_float4 c = in[0];
    return pf_f4(c.x * p->r, c.y * p->g, c.z * p->b, c.w);
}

/* (r, g, b, a) = matrix * (r, g, b, a) + offset, matrix row-major 4x4. */
PF_POINT_FN float color_dot4(const float *m, float o, pf_float4 c)
{
    return m[0] * c.x + m[1] * c.y + m[2] * c.z + m[3] * c.w + o;
}

PF_POINT_FN pf_float4 color_matrix(const color_matrix_params *p, const pf_float4 *in, pf_pos pos)
{
    pf_float4 c = in[0];
    return pf_f4(color_dot4(p->matrix, p->offset[0], c), color_dot4(p->matrix + 4, p->offset[1], c),
                 color_dot4(p->matrix + 8, p->offset[2], c),
                 color_dot4(p->matrix + 12, p->offset[3], c));
}

/* RGB * (1 - strength * smoothstep(d / radius)), where d is the distance of the pixel's
   centre from the image centre over the half-diagonal (0 at the centre, 1 at the
   corners) and smoothstep(t) = 3t^2 - 2t^3 on t clamped to [0, 1]. Alpha kept. */
PF_POINT_FN pf_float4 color_vignette(const color_vignette_params *p, const pf_float4 *in,
                                     pf_pos pos)
{
    float w = (float)pos.width, h = (float)pos.height;
    float dx = (float)pos.x + 0.5f - 0.5f * w, dy = (float)pos.y + 0.5f - 0.5f * h;
    float inv_r = 2.0f / (PF_SQRTF(w * w + h * h) * p->radius); /* 1 / (half-diag * r) */
    float t = pf_clampf(PF_SQRTF(dx * dx + dy * dy) * inv_r, 0.0f, 1.0f);
    float k = 1.0f - p->strength * (t * t * (3.0f - 2.0f * t));
    return pf_f4(in[0].x * k, in[0].y * k, in[0].z * k, in[0].w);
}

#endif /* PF_KERNELS_POINT_COLOR_OPS_H */
