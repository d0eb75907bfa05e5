/* kernels/point/composite_ops.h: the `composite` family's point ops.
 *
 * in[0] is the base image, in[1] the other (and in[2] the mask, for mask). Compiled as
 * plain C by plugins/composite/composite.c, as CUDA, and handed to NVRTC as text for
 * fused kernels (see pipefuse/point.h). Values are float RGBA with straight (not
 * premultiplied) alpha, nominally [0, 1]; colour values are never clamped. Each op says
 * what it does with alpha and what it clamps: alpha_over clamps both alphas to [0, 1]
 * and mask clamps its weight to [0, 1], because those are fractions by meaning.
 */
#ifndef PF_KERNELS_POINT_COMPOSITE_OPS_H
#define PF_KERNELS_POINT_COMPOSITE_OPS_H

#include "pipefuse/point.h"

/* ---- Params ------------------------------------------------------------------- */

/* For ops without parameters: a struct cannot be empty in C and is 1 byte in C++. */
typedef struct composite_none_params {
    int unused;
} composite_none_params;
typedef struct composite_blend_params {
    float opacity;
} composite_blend_params;
typedef struct composite_add_params {
    float scale;
} composite_add_params;
typedef struct composite_mask_params {
    int invert;
} composite_mask_params;

/* ---- Helpers ------------------------------------------------------------------ */

/* lerp(a, b, t) on all four channels: exactly a when t is 0. */
PF_POINT_FN pf_float4 composite_lerp4(pf_float4 a, pf_float4 b, float t)
{
    return pf_f4(pf_lerpf(a.x, b.x, t), pf_lerpf(a.y, b.y, t), pf_lerpf(a.z, b.z, t),
                 pf_lerpf(a.w, b.w, t));
}

/* ---- Ops ---------------------------------------------------------------------- */

/* All four channels: lerp(base, other, opacity). */
PF_POINT_FN pf_float4 composite_blend(const composite_blend_params *p, const pf_float4 *in,
                                      pf_pos pos)
{
    return composite_lerp4(in[0], in[1], p->opacity);
}

/* RGB: base + scale * other; alpha of base. */
PF_POINT_FN pf_float4 composite_add(const composite_add_params *p, const pf_float4 *in, pf_pos pos)
{
    pf_float4 a = in[0], b = in[1];
    return pf_f4(a.x + p->scale * b.x, a.y + p->scale * b.y, a.z + p->scale * b.z, a.w);
}

/* RGB: base * other; alpha of base. */
PF_POINT_FN pf_float4 composite_multiply(const composite_none_params *p, const pf_float4 *in,
                                         pf_pos pos)
{
    pf_float4 a = in[0], b = in[1];
    return pf_f4(a.x * b.x, a.y * b.y, a.z * b.z, a.w);
}

/* RGB: |base - other|; alpha of base. */
PF_POINT_FN pf_float4 composite_difference(const composite_none_params *p, const pf_float4 *in,
                                           pf_pos pos)
{
    pf_float4 a = in[0], b = in[1];
    return pf_f4(PF_FABSF(a.x - b.x), PF_FABSF(a.y - b.y), PF_FABSF(a.z - b.z), a.w);
}

/* Porter-Duff other OVER base, straight alpha. With ao, ab the alphas clamped to [0, 1]:
   alpha = ao + ab * (1 - ao); RGB = (other * ao + base * ab * (1 - ao)) / alpha. A
   result with alpha <= 1e-30 (nothing visible; 1 / alpha would overflow) has RGB 0. */
PF_POINT_FN pf_float4 composite_alpha_over(const composite_none_params *p, const pf_float4 *in,
                                           pf_pos pos)
{
    pf_float4 b = in[0], o = in[1];
    float ao = pf_clampf(o.w, 0.0f, 1.0f);
    float wb = pf_clampf(b.w, 0.0f, 1.0f) * (1.0f - ao); /* base's share */
    float alpha = ao + wb;
    float inv = alpha > 1e-30f ? 1.0f / alpha : 0.0f;
    return pf_f4((o.x * ao + b.x * wb) * inv, (o.y * ao + b.y * wb) * inv,
                 (o.z * ao + b.z * wb) * inv, alpha);
}

/* All four channels: lerp(base, other, t), t = luma(mask) (1 - luma(mask) when invert)
   clamped to [0, 1]. */
PF_POINT_FN pf_float4 composite_mask(const composite_mask_params *p, const pf_float4 *in,
                                     pf_pos pos)
{
    float l = pf_luma(in[2]);
    return composite_lerp4(in[0], in[1], pf_clampf(p->invert ? 1.0f - l : l, 0.0f, 1.0f));
}

#endif /* PF_KERNELS_POINT_COMPOSITE_OPS_H */
