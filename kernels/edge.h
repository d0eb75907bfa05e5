/* kernels/edge.h: the edge conversion of one sample, between a frame's samples (u8, u16,
 * f32) and the float RGBA working format, written once for the three paths that convert:
 *   - engine/frame.c, the CPU, as plain C (row loops that the compiler vectorises);
 *   - kernels/convert.cu, the precompiled GPU conversions, through nvcc;
 *   - kernels/fused_rt.h, the fused kernels, through NVRTC, which gets this file as
 *     "pipefuse/edge.h" (embedded by engine/CMakeLists.txt like the other runtime
 *     headers, and part of the kernel cache's key).
 * The rules: a code k loads as k / max correctly rounded; a float v stores as
 * trunc(v * max + 0.5) clamped to [0, max], NaN as 0 (rounding half up); gray outputs
 * take the Rec. 709 luma, rounded step by step, which is exactly g for a gray pixel;
 * gray inputs expand to (g, g, g, 1), gray+alpha to (g, g, g, a).
 *
 * Where the fastest form differs between CPU and GPU, both forms are here, under
 * `#if defined(__CUDACC__) || defined(__CUDACC_RTC__)`, with the reason they give the
 * same float for every input. The device forms are written with the pf_*_rn helpers
 * below, which are CUDA's correctly rounded intrinsics on the device and plain float
 * operations on the host, so the host can evaluate them too: tests/stages/test_edges.c
 * compares both forms over every u8 and u16 code and every rounding boundary.
 *
 * On the host no product may be contracted into an FMA: the engine builds as ISO C11,
 * for which GCC's default is -ffp-contract=off, and each operation below is a separate
 * statement of its own function, which clang (contracting within one expression only)
 * leaves alone too.
 */
#ifndef PF_EDGE_H
#define PF_EDGE_H

#include "pipefuse/point.h" /* pf_float4, pf_f4, PF_POINT_FN */

/* ---- Correctly rounded operations ------------------------------------------------------- */

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
/* The intrinsics: never contracted into an FMA by nvcc or NVRTC. */
PF_POINT_FN float pf_add_rn(float a, float b)
{
    return __fadd_rn(a, b);
}
PF_POINT_FN float pf_sub_rn(float a, float b)
{
    return __fsub_rn(a, b);
}
PF_POINT_FN float pf_mul_rn(float a, float b)
{
    return __fmul_rn(a, b);
}
PF_POINT_FN float pf_fma_rn(float a, float b, float c)
{
    return __fmaf_rn(a, b, c);
}
/* a + b rounded toward zero */
PF_POINT_FN float pf_add_rz(float a, float b)
{
    return __fadd_rz(a, b);
}
/* v clamped to [0, 1], NaN as 0: one instruction */
PF_POINT_FN float pf_saturate(float v)
{
    return __saturatef(v);
}
PF_POINT_FN unsigned int pf_float_bits(float v)
{
    return __float_as_uint(v);
}
#else
PF_POINT_FN float pf_add_rn(float a, float b)
{
    return a + b;
}
PF_POINT_FN float pf_sub_rn(float a, float b)
{
    return a - b;
}
PF_POINT_FN float pf_mul_rn(float a, float b)
{
    return a * b;
}
PF_POINT_FN float pf_fma_rn(float a, float b, float c)
{
    return fmaf(a, b, c);
}
/* a + b rounded toward zero. The double sum is exact where the exponents of a and b are
   at most 29 apart (53 - 24 bits), which covers its one use here (pf_quant_bits: a value
   in [0.5, 65535.5] plus 2^23); the float nearest it is stepped toward zero when
   rounding went away from zero. */
PF_POINT_FN float pf_add_rz(float a, float b)
{
    double s = (double)a + (double)b;
    float f = (float)s;
    if (f > 0.0f ? (double)f > s : (double)f < s)
        f = nextafterf(f, 0.0f);
    return f;
}
PF_POINT_FN float pf_saturate(float v)
{
    return v > 0.0f ? (v < 1.0f ? v : 1.0f) : 0.0f; /* NaN compares false: 0 */
}
PF_POINT_FN unsigned int pf_float_bits(float v)
{
    union {
        float f;
        unsigned int u;
    } b;
    b.f = v;
    return b.u;
}
#endif

/* ---- Code to float ---------------------------------------------------------------------- */

/* v / d correctly rounded for the integers v in [0, d], d = 255 or 65535, where r is
   1 / d rounded and r_lo the rest, 1 / d - r rounded (pf_code_recip_lo). q = v * r alone
   is one ulp off for 126 of the 256 bytes and 512 of the 65536 halves (a sample k then
   sat one ulp away from a parameter written as k / 255); v * (r + r_lo) carries 1 / d to
   about 48 bits, and the FMA adds the small product v * r_lo to the exact v * r with one
   rounding. That this gives the quotient is not a theorem for every divisor; for these
   two it holds for every v, which tests/stages/test_edges.c checks exhaustively. Two
   full-rate instructions (a multiply and an FMA) where an IEEE division on the GPU is a
   sequence with a slow path; the form before this one took three. */
PF_POINT_FN float pf_div_code(float v, float r, float r_lo)
{
    return pf_fma_rn(v, r, pf_mul_rn(v, r_lo));
}

/* 1 / max - (float)(1 / max), rounded, for max = 255 or 65535 (hexadecimal: exact); 0
   (the plain reciprocal product) for any other max, which no format has. */
PF_POINT_FN float pf_code_recip_lo(float max)
{
    return max == 255.0f ? -0x1.fdfdfep-33f : (max == 65535.0f ? 0x1.0001p-48f : 0.0f);
}

/* The sample of code v (an integer in [0, max], as a float), max = 255 or 65535:
   v / max correctly rounded. The CPU divides (divps vectorises, and is exact by
   definition); the GPU takes pf_div_code, the same float for every code. max is a
   constant where this is called, so 1 / max folds at compile time. */
PF_POINT_FN float pf_code_to_float(float v, float max)
{
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
    return pf_div_code(v, 1.0f / max, pf_code_recip_lo(max));
#else
    return v / max;
#endif
}

/* ---- Float to code ---------------------------------------------------------------------- */

/* The code of v as a float in [0, max] whose truncation is the code: trunc(v * max + 0.5)
   clamped to [0, max], NaN as 0. The CPU's form: the two selects (NaN fails t > 0 and
   gives 0) compile to packed compares and masks, and the caller's conversion to the
   integer type to the truncating cvttps2dq of a value already in range, so row loops
   vectorise. No FMA: v * max is rounded before the 0.5 is added. */
PF_POINT_FN float pf_quant_clamp(float v, float max)
{
    float t = pf_add_rn(pf_mul_rn(v, max), 0.5f);
    t = t > 0.0f ? t : 0.0f;
    return t < max ? t : max;
}

/* The same code, the GPU's form: v saturated to [0, 1] first (NaN to 0) in one
   instruction, then t = v * max + 0.5 (no FMA), and t + 2^23 rounded toward zero, which
   leaves trunc(t) in the low mantissa bits (t < 2^23), masked by max = 2^n - 1: an add
   and an AND where a float-to-integer conversion runs at a quarter of the FP32 rate.
   The same code as pf_quant_clamp for every float: v in (0, 1) takes the same two
   roundings; v <= 0 (or NaN) gives t = 0.5 here and t <= 0.5 (or NaN, clamped to 0)
   there, both code 0; v >= 1 (or +inf) gives t = max + 0.5 here and t >= max there
   (rounding is monotonic), both code max. tests/stages/test_edges.c checks it around
   every rounding boundary of both formats and at the special values. */
PF_POINT_FN unsigned int pf_quant_bits(float v, float max, unsigned int mask)
{
    float t = pf_add_rn(pf_mul_rn(pf_saturate(v), max), 0.5f);
    return pf_float_bits(pf_add_rz(t, 8388608.0f)) & mask;
}

/* The code of v for max = 255 or 65535. max is an integer: NVVM folds its conversion
   to float where it is a constant, but left a constant float's conversion to an integer
   (the mask) as an instruction. */
PF_POINT_FN unsigned int pf_float_to_code(float v, unsigned int max)
{
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
    return pf_quant_bits(v, (float)max, max);
#else
    return (unsigned int)pf_quant_clamp(v, (float)max);
#endif
}

/* ---- Pixels ----------------------------------------------------------------------------- */

/* The luma a gray output takes: pf_luma (pipefuse/point.h), g + 0.2126 (r - g) + 0.0722
   (b - g), rounded step by step and never contracted, so every path gives the same float
   and a gray pixel gives exactly g. One form on both sides. */
PF_POINT_FN float pf_luma_rn(pf_float4 v)
{
    return pf_add_rn(pf_add_rn(v.y, pf_mul_rn(0.2126f, pf_sub_rn(v.x, v.y))),
                     pf_mul_rn(0.0722f, pf_sub_rn(v.z, v.y)));
}

/* A gray sample with its alpha (1 where the frame has none) as a working pixel. */
PF_POINT_FN pf_float4 pf_gray_pixel(float g, float a)
{
    return pf_f4(g, g, g, a);
}

#endif /* PF_EDGE_H */
