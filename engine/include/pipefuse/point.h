/* pipefuse/point.h: what a point-op header may use.
 *
 * A point op is written once, in a header that compiles three ways:
 *   - as plain C, for the CPU executor (PF_POINT_FN = static inline);
 *   - as CUDA, for the precompiled one-stage kernel (__device__ inline);
 *   - as source text handed to NVRTC, where the engine places this file first and
 *     the op header inside a namespace of the plugin's own, to build fused kernels.
 * So an op header includes nothing but this file, uses only the types and helpers
 * below, and keeps every function PF_POINT_FN. Params structs hold only float and
 * int (bool and enum are int, arrays are fixed-size float arrays) so that their
 * layout is the same for the host compiler and for NVRTC.
 *
 * Functions an op may call: its own PF_POINT_FN functions, the pf_* helpers and PF_*
 * macros below, and these C99 float maths functions, which CUDA provides under the same
 * names: sqrtf cbrtf powf expf exp2f expm1f logf log2f log10f log1pf sinf cosf tanf
 * asinf acosf atanf atan2f sinhf coshf tanhf floorf ceilf roundf truncf rintf fabsf
 * fminf fmaxf fmodf copysignf hypotf fmaf. sqrtf, fmaf and the rounding, fabsf, fmin/
 * fmax, fmodf and copysignf functions give the same bits on CPU and GPU; the others
 * may differ by a few units in the last place (CUDA documents at most 4 ulp for each
 * of them, glibc 1 or 2): compare CPU and GPU results with a relative tolerance, as
 * plugin check does (--tolerance). Nothing else: no I/O (printf would print from every
 * pixel), no memory or process functions. `pipefuse plugin check` refuses an op header
 * that calls anything else.
 */
#ifndef PIPEFUSE_POINT_H
#define PIPEFUSE_POINT_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#pragma nv_diag_suppress 177 /* helpers below that an op does not use */
#define PF_POINT_FN static __device__ __forceinline__
typedef float4 pf_float4;
/* The same functions as on the CPU (not the fast __powf / __expf intrinsics, whose
   error grows with the argument). */
#define PF_SQRTF  sqrtf
#define PF_POWF   powf
#define PF_EXPF   expf
#define PF_FLOORF floorf
#define PF_FABSF  fabsf
#else
#include <math.h>
#define PF_POINT_FN static inline
typedef struct pf_float4 {
    float x, y, z, w;
} pf_float4;
#define PF_SQRTF    sqrtf
#define PF_POWF     powf
#define PF_EXPF     expf
#define PF_FLOORF   floorf
#define PF_FABSF    fabsf
#endif

/* Where the pixel being computed is, and the size of the image it belongs to. */
typedef struct pf_pos {
    int x, y, width, height;
} pf_pos;

PF_POINT_FN pf_float4 pf_f4(float x, float y, float z, float w)
{
    pf_float4 r;
    r.x = x;
    r.y = y;
    r.z = z;
    r.w = w;
    return r;
}
PF_POINT_FN float pf_clampf(float v, float lo, float hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}
PF_POINT_FN float pf_minf(float a, float b)
{
    return a < b ? a : b;
}
PF_POINT_FN float pf_maxf(float a, float b)
{
    return a > b ? a : b;
}
/* a + (b - a) * t, rounded step by step on both (the GPU's kernels are compiled without
   FMA contraction). */
PF_POINT_FN float pf_lerpf(float a, float b, float t)
{
    return a + (b - a) * t;
}
/* Rec. 709 luma weights (0.2126, 0.7152, 0.0722), the ones pipefuse uses everywhere,
   written as g + 0.2126 (r - g) + 0.0722 (b - g): the same sum (the weights add up to
   1), but exactly g for a gray pixel, with or without FMA, so a gray value compares
   equal to a parameter written as the same number (the plain weighted sum came out 1-2
   ulp low: threshold at k/255 failed for 8 of the 256 gray levels). */
PF_POINT_FN float pf_luma(pf_float4 c)
{
    return c.y + 0.2126f * (c.x - c.y) + 0.0722f * (c.z - c.y);
}

#endif /* PIPEFUSE_POINT_H */
