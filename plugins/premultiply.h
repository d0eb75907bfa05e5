/* plugins/premultiply.h: how stages that mix neighbouring pixels (the blurs, resize,
 * rotate by any angle) treat alpha, shared by the filter and geometry families, their
 * CUDA kernels and their tests. Plain C; compiles as CUDA too.
 *
 * premultiplied (the default): each pixel's colour is multiplied by its alpha before
 * the weighted sum, a pixel of alpha 0 bringing colour 0 whatever it stores (NaN and
 * infinities included), and the summed colour is divided by the summed alpha after;
 * where that alpha is 0 the colour is 0. So the colour of transparent pixels does not
 * bleed into visible ones (as Pillow's resize and libvips' thumbnail work).
 * straight: all four channels are summed alike, the colour of transparent pixels
 * taking part.
 *
 * Where the summed alpha equals the summed weights, the case where every pixel read is
 * opaque (alpha exactly 1: always for an image without alpha), the colour is what
 * straight gives, bit for bit: pf_pm_div (resize, rotate) keeps the plain weighted sum
 * there, and pf_norm_colour (the blurs, which normalise every sum by the weights' float
 * sum) divides it by the summed alpha, which is that weight sum.
 */
#ifndef PF_PLUGIN_PREMULTIPLY_H
#define PF_PLUGIN_PREMULTIPLY_H

enum { PF_ALPHA_PREMULTIPLIED, PF_ALPHA_STRAIGHT };
#define PF_ALPHA_NAMES "premultiplied", "straight"
#define PF_ALPHA_DOC                                                                               \
    "premultiplied (colour weighted by alpha, so transparent pixels do not tint visible "          \
    "ones) or straight (every channel averaged alike)"

#ifdef __CUDACC__
#define PF_PM_HD static __host__ __device__ __forceinline__
#else
#define PF_PM_HD static inline
#endif

/* Single and double operations rounded once each, never contracted into an FMA, the
   same on the host and the device. */
#ifdef __CUDA_ARCH__
#define PF_PM_FMUL(a, b) __fmul_rn((a), (b))
#define PF_PM_FDIV(a, b) __fdiv_rn((a), (b))
#define PF_PM_DMUL(a, b) __dmul_rn((a), (b))
#define PF_PM_DDIV(a, b) __ddiv_rn((a), (b))
#define PF_PM_D2F(a)     __double2float_rn(a)
#else
#define PF_PM_FMUL(a, b) ((a) * (b))
#define PF_PM_FDIV(a, b) ((a) / (b))
#define PF_PM_DMUL(a, b) ((a) * (b))
#define PF_PM_DDIV(a, b) ((a) / (b))
#define PF_PM_D2F(a)     ((float)(a))
#endif

/* The alpha a pixel is weighted by, and the alpha it brings to the sum: its alpha
   clamped to [0, 1], NaN as 0. Premultiplied sums are then means weighted by w * alpha
   >= 0, within the colours they mix, and the same on the CPU and the GPU up to the last
   bits; an alpha outside [0, 1] (only float frames and intermediate values have one) is
   no coverage, and dividing by sums of such alphas (near 0 where they cancel) made
   results of any size. An opaque or in-range alpha is itself. */
PF_PM_HD float pf_pm_alpha(float a)
{
    return a > 0.0f ? (a < 1.0f ? a : 1.0f) : 0.0f;
}

/* A colour sample premultiplied by its alpha a: c * a rounded to float, 0 where a is 0. */
PF_PM_HD float pf_pm_mul(float c, float a)
{
    return a == 0 ? 0.0f : PF_PM_FMUL(c, a);
}

/* A summed premultiplied colour c back to straight, given the summed alpha a and the
   sum of the weights wsum taken the same way: c itself where a == wsum (every pixel
   read opaque), else c / a rounded to float, 0 where a is 0. */
PF_PM_HD float pf_pm_div(float c, float a, float wsum)
{
    return a == wsum ? c : (a != 0 ? PF_PM_FDIV(c, a) : 0.0f);
}

/* A colour channel of a convolution's sum back to a normalised straight value, given the
   summed alpha a and wsum, the sum of the float weights taken as the sum was: a straight
   sum (pm 0) divided by wsum, a premultiplied one by a (0 where a is 0). The alpha
   channel is divided by wsum. The weights so sum to exactly 1 in effect, where their
   rounding to float left them 1 or 2 ulp off: a flat image stays flat and an opaque one
   opaque (the sum of ones is wsum itself). */
PF_PM_HD float pf_norm_colour(float c, float a, float wsum, int pm)
{
    return pm ? (a != 0 ? PF_PM_FDIV(c, a) : 0.0f) : PF_PM_FDIV(c, wsum);
}

/* The same for sums in double, rounded to float once at the end. */
PF_PM_HD float pf_pm_div_d(double c, double a, double wsum)
{
    return PF_PM_D2F(a == wsum ? c : (a != 0 ? PF_PM_DDIV(c, a) : 0.0));
}

#endif /* PF_PLUGIN_PREMULTIPLY_H */
