/* samples/plugin/spotlight_ops.h: the point op of the `spotlight` stage.
 *
 * A point op is written ONCE, in a header like this one, and compiled three ways:
 *
 *   1. as plain C, by darkroom.c, for the CPU executor;
 *   2. as CUDA, by darkroom_cuda.cu, for a precompiled one-stage kernel (used when
 *      fusion is off, or NVRTC is missing at run time);
 *   3. as source text: pipefuse_add_plugin(... POINT_OPS spotlight_ops.h) embeds this
 *      file's text as `const char pf_src_spotlight_ops[]`, and the engine hands it to
 *      NVRTC to build FUSED kernels: the spotlight and its neighbouring point stages
 *      (brightness, contrast, other plugins' ops...) become one kernel that reads each
 *      pixel once and writes it once.
 *
 * That is why a point-op header follows a few rules (pipefuse/point.h lists them):
 *   - include nothing but "pipefuse/point.h" (NVRTC has no C library);
 *   - declare every function PF_POINT_FN (static inline on the CPU, __device__ on CUDA);
 *   - use only pf_float4, pf_pos, the pf_* helpers and the PF_* maths macros (PF_SQRTF,
 *     PF_POWF, PF_EXPF...), which map to the right function on each side;
 *   - params structs hold only float, int and fixed-size float arrays, so that the host
 *     compiler and NVRTC lay them out identically (the engine copies the struct bytes
 *     to the GPU as they are);
 *   - no global or static variables: the same op runs on many threads at once.
 * Everything here ends up inside a namespace of its own in fused kernels, so helper
 * names cannot clash with another plugin's.
 */
#ifndef DARKROOM_SPOTLIGHT_OPS_H
#define DARKROOM_SPOTLIGHT_OPS_H

#include "pipefuse/point.h"

/* The params struct. Its fields are filled by the engine from the parameter table in
   darkroom.c (bound with offsetof), already type-checked and range-checked. */
typedef struct spotlight_params {
    float cx, cy;  /* centre of the light, as fractions of the width and height */
    float radius;  /* radius of the lit disc, as a fraction of the shorter side */
    float feather; /* soft edge, as a fraction of the radius (0: hard edge) */
    float ambient; /* factor on RGB outside the light */
    float gain;    /* factor on RGB at the centre of the light */
    float tint[3]; /* colour of the light, multiplied into lit pixels */
} spotlight_params;

/* 1 inside the inner disc, 0 outside the radius, a smoothstep in between. */
PF_POINT_FN float spotlight_light(float d, float r, float feather)
{
    float inner = r * (1.0f - feather);
    if (d <= inner)
        return 1.0f;
    if (d >= r)
        return 0.0f;
    float t = (r - d) / (r - inner); /* 1 at inner, 0 at r; r > inner here */
    return t * t * (3.0f - 2.0f * t);
}

/* The op. Its signature is fixed: the params, the stage's inputs at this pixel (in[0]
   here: the stage takes one input) and the pixel's position. pos.x and pos.y are the
   pixel's column and row in the WHOLE image, pos.width and pos.height the image's size,
   on every backend and however the engine splits the work, so position-dependent
   effects come out the same whether the image is processed in one piece or in bands.

   RGB * lerp(ambient, gain * tint, light), alpha kept. */
PF_POINT_FN pf_float4 spotlight(const spotlight_params *p, const pf_float4 *in, pf_pos pos)
{
    float w = (float)pos.width, h = (float)pos.height;
    /* Distance from the light's centre, measured from the pixel's centre (+0.5). */
    float dx = (float)pos.x + 0.5f - p->cx * w;
    float dy = (float)pos.y + 0.5f - p->cy * h;
    float d = PF_SQRTF(dx * dx + dy * dy);
    float r = p->radius * pf_minf(w, h);
    float l = spotlight_light(d, r, p->feather);
    pf_float4 c = in[0];
    return pf_f4(c.x * pf_lerpf(p->ambient, p->gain * p->tint[0], l),
                 c.y * pf_lerpf(p->ambient, p->gain * p->tint[1], l),
                 c.z * pf_lerpf(p->ambient, p->gain * p->tint[2], l), c.w);
}

#endif /* DARKROOM_SPOTLIGHT_OPS_H */
