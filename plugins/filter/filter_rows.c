/* plugins/filter/filter_rows.c: the filter family's row loops on the CPU (filter_rows.h).
 *
 * Built with -fno-math-errno (plugins/filter/CMakeLists.txt), which lets sqrtf become the
 * vector square root: errno is all it changes, and the square root is IEEE's, rounded
 * once, in either form.
 */
#include <math.h>
#include <stdint.h>

#include "filter.h"
#include "filter_rows.h"

/* Where the compiler does not vectorise a loop by itself (a pixel's four floats treated
   apart), it is written with SSE2, which every x86-64 has; the plain C form is the one
   for other machines, and the definition. Each SSE2 form computes the plain form's
   operations and selects: _mm_min_ps(x, y) is x < y ? x : y, the second operand where
   either is NaN. */
#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define FILTER_SSE2 1
#else
#define FILTER_SSE2 0
#endif

/* Where the compiler and the C library can dispatch at load time (GCC or clang on x86-64
   with ifunc), the loops are also built for AVX2 and the CPU picks; not under the
   sanitizers (see frame.c). AVX2 has no FMA, and -ffp-contract=off forbids one anyway. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) &&                                \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define FILTER_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FILTER_VECTOR_CLONES
#endif

/* Floats a pass computes at a time: the sums of a chunk stay in L1 across the taps. A
   multiple of 4 (whole pixels). */
#define FILTER_CHUNK 1024

/* ---- Separable passes -------------------------------------------------------------------- */

/* o[i] += kt (a[i] + b[i]): one tap of a pass over a chunk, a loop of its own so that
   the compiler vectorises it whole (inside the loop over taps it unrolled the taps
   instead and left the floats scalar). */
static inline void add_pair(float *restrict o, float kt, const float *restrict a,
                            const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        o[i] = o[i] + kt * (a[i] + b[i]);
}

/* Where the CPU has AVX, the passes hold eight sums in a register across all the taps
   (the tap-at-a-time loops below load and store every sum once a tap, and are bound by
   that): the same operations on each float in the same order, so the same bits. AVX has
   no FMA; the intrinsics are the separate multiply and add. Not under the sanitizers'
   builds' vector clones either, but a plain CPU check: ifunc is not needed. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FILTER_AVX 1

/* o[i] = k0 c[i] + sum over t of wt (a_t[i] + b_t[i]), i in [0, n), n a multiple of 8:
   up[t] and dn[t] are a_t and b_t for t in 1..r. */
__attribute__((target("avx"))) static void sep_taps_avx(const float *c, const float *const *up,
                                                        const float *const *dn, float *o, size_t n,
                                                        const kernel1d *k)
{
    const __m256 k0 = _mm256_set1_ps(k->w[0]);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) { /* two registers of sums: two chains in flight */
        __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(c + i), k0);
        __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(c + i + 8), k0);
        for (int t = 1; t <= k->r; t++) {
            const __m256 kt = _mm256_set1_ps(k->w[t]);
            const __m256 p0 = _mm256_add_ps(_mm256_loadu_ps(up[t] + i), _mm256_loadu_ps(dn[t] + i));
            const __m256 p1 =
                _mm256_add_ps(_mm256_loadu_ps(up[t] + i + 8), _mm256_loadu_ps(dn[t] + i + 8));
            s0 = _mm256_add_ps(s0, _mm256_mul_ps(kt, p0));
            s1 = _mm256_add_ps(s1, _mm256_mul_ps(kt, p1));
        }
        _mm256_storeu_ps(o + i, s0);
        _mm256_storeu_ps(o + i + 8, s1);
    }
    for (; i < n; i += 8) {
        __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(c + i), k0);
        for (int t = 1; t <= k->r; t++) {
            const __m256 p0 = _mm256_add_ps(_mm256_loadu_ps(up[t] + i), _mm256_loadu_ps(dn[t] + i));
            s0 = _mm256_add_ps(s0, _mm256_mul_ps(_mm256_set1_ps(k->w[t]), p0));
        }
        _mm256_storeu_ps(o + i, s0);
    }
}

/* norm_chunk's FILTER_NORM_PM two pixels a step: each pixel's colours divided by its own
   alpha (0 where that is 0), its alpha by wsum, as the SSE2 form below. */
__attribute__((target("avx"))) static void norm_pm_avx(float *o, size_t n, float wsum)
{
    const __m256 lane3 = _mm256_castsi256_ps(_mm256_set_epi32(-1, 0, 0, 0, -1, 0, 0, 0));
    const __m256 ws = _mm256_set1_ps(wsum), zero = _mm256_setzero_ps();
    for (size_t i = 0; i < n; i += 8) {
        const __m256 v = _mm256_loadu_ps(o + i);
        const __m256 a = _mm256_permute_ps(v, _MM_SHUFFLE(3, 3, 3, 3));
        const __m256 den = _mm256_or_ps(_mm256_andnot_ps(lane3, a), _mm256_and_ps(lane3, ws));
        const __m256 keep = _mm256_or_ps(_mm256_cmp_ps(a, zero, _CMP_NEQ_UQ), lane3);
        _mm256_storeu_ps(o + i, _mm256_and_ps(keep, _mm256_div_ps(v, den)));
    }
}

/* libgcc fills the CPU's features in before main (a load-time constructor): reading them
   is a plain load, safe from any thread. */
static int filter_has_avx(void)
{
    return __builtin_cpu_supports("avx");
}
#else
#define FILTER_AVX 0
#endif

FILTER_VECTOR_CLONES static void sep_row_h_plain(const float *restrict src, float *restrict o,
                                                 int lo, int hi, const kernel1d *k)
{
    for (int c0 = lo; c0 < hi; c0 += FILTER_CHUNK) {
        const int c1 = hi - c0 > FILTER_CHUNK ? c0 + FILTER_CHUNK : hi;
        const float k0 = k->w[0];
        for (int i = c0; i < c1; i++)
            o[i] = src[i] * k0;
        for (int t = 1; t <= k->r; t++)
            add_pair(o + c0, k->w[t], src + c0 - 4 * t, src + c0 + 4 * t, (size_t)(c1 - c0));
    }
}

void filter_sep_row_h(const float *src, float *o, int lo, int hi, const kernel1d *k)
{
#if FILTER_AVX
    if (filter_has_avx() && k->r <= FILTER_MAX_TAPS_RADIUS) {
        const float *up[FILTER_MAX_TAPS_RADIUS + 1], *dn[FILTER_MAX_TAPS_RADIUS + 1];
        for (int t = 1; t <= k->r; t++) {
            up[t] = src + lo - 4 * t;
            dn[t] = src + lo + 4 * t;
        }
        const size_t n = (size_t)(hi - lo), n8 = n & ~(size_t)7;
        sep_taps_avx(src + lo, up, dn, o + lo, n8, k);
        if (n8 < n)
            sep_row_h_plain(src, o, lo + (int)n8, hi, k);
        return;
    }
#endif
    sep_row_h_plain(src, o, lo, hi, k);
}

/* A chunk of sums back to normalised values: premultiply.h's pf_norm_colour, its
   branches as selects (the division of the unused side is computed and dropped). */
static inline void norm_chunk(float *restrict o, size_t n, int norm, float wsum)
{
    if (norm == FILTER_NORM_STRAIGHT) {
        for (size_t i = 0; i < n; i++)
            o[i] = o[i] / wsum;
    } else if (norm == FILTER_NORM_PM) {
#if FILTER_SSE2
        /* a pixel at a time: its colours divided by its alpha, its alpha by wsum */
        const __m128 lane3 = _mm_castsi128_ps(_mm_set_epi32(-1, 0, 0, 0));
        const __m128 ws = _mm_set1_ps(wsum), zero = _mm_setzero_ps();
        for (size_t i = 0; i < n; i += 4) {
            const __m128 v = _mm_loadu_ps(o + i);
            const __m128 a = _mm_shuffle_ps(v, v, _MM_SHUFFLE(3, 3, 3, 3));
            const __m128 den = _mm_or_ps(_mm_andnot_ps(lane3, a), _mm_and_ps(lane3, ws));
            const __m128 keep = _mm_or_ps(_mm_cmpneq_ps(a, zero), lane3);
            _mm_storeu_ps(o + i, _mm_and_ps(keep, _mm_div_ps(v, den)));
        }
#else
        for (size_t i = 0; i < n; i += 4) {
            const float a = o[i + 3];
            for (int c = 0; c < 3; c++) {
                const float q = o[i + c] / a;
                o[i + c] = a != 0 ? q : 0.0f;
            }
            o[i + 3] = a / wsum;
        }
#endif
    }
}

FILTER_VECTOR_CLONES void filter_sep_row_v(const float *const *rows, float *restrict o, size_t n,
                                           const kernel1d *k, int norm, float wsum)
{
#if FILTER_AVX
    const int avx = filter_has_avx();
#endif
    for (size_t c0 = 0; c0 < n; c0 += FILTER_CHUNK) {
        const size_t c1 = n - c0 > FILTER_CHUNK ? c0 + FILTER_CHUNK : n;
#if FILTER_AVX
        if (avx && (c1 - c0) % 8 == 0) {
            const float *up[FILTER_MAX_TAPS_RADIUS + 1], *dn[FILTER_MAX_TAPS_RADIUS + 1];
            for (int t = 1; t <= k->r; t++) {
                up[t] = rows[2 * t - 1] + c0;
                dn[t] = rows[2 * t] + c0;
            }
            sep_taps_avx(rows[0] + c0, up, dn, o + c0, c1 - c0, k);
            if (norm == FILTER_NORM_PM)
                norm_pm_avx(o + c0, c1 - c0, wsum);
            else
                norm_chunk(o + c0, c1 - c0, norm, wsum);
            continue;
        }
#endif
        const float *restrict c = rows[0];
        const float k0 = k->w[0];
        for (size_t i = c0; i < c1; i++)
            o[i] = c[i] * k0;
        for (int t = 1; t <= k->r; t++)
            add_pair(o + c0, k->w[t], rows[2 * t - 1] + c0, rows[2 * t] + c0, c1 - c0);
        norm_chunk(o + c0, c1 - c0, norm, wsum);
    }
}

/* ---- Premultiplying ---------------------------------------------------------------------- */

void filter_premultiply_row(const pf_float4 *restrict src, pf_float4 *restrict pm, int w)
{
    const float *restrict s = (const float *)src;
    float *restrict o = (float *)pm;
#if FILTER_SSE2
    /* pf_pm_alpha: a > 0 ? (a < 1 ? a : 1) : 0; colours pf_pm_mul (c a, 0 where a is 0),
       alpha that a (1 a, and 0 where a is 0, are a) */
    const __m128 one3 = _mm_set_ps(1.0f, 0.0f, 0.0f, 0.0f), one = _mm_set1_ps(1.0f);
    const __m128 colour = _mm_castsi128_ps(_mm_set_epi32(0, -1, -1, -1)), zero = _mm_setzero_ps();
    for (int x = 0; x < w; x++) {
        const __m128 v = _mm_loadu_ps(s + 4 * x);
        const __m128 raw = _mm_shuffle_ps(v, v, _MM_SHUFFLE(3, 3, 3, 3));
        const __m128 a = _mm_and_ps(_mm_cmpgt_ps(raw, zero), _mm_min_ps(raw, one));
        const __m128 m = _mm_or_ps(_mm_and_ps(colour, v), one3);
        _mm_storeu_ps(o + 4 * x, _mm_andnot_ps(_mm_cmpeq_ps(a, zero), _mm_mul_ps(m, a)));
    }
#else
    for (int x = 0; x < w; x++) {
        const float a = pf_pm_alpha(s[4 * x + 3]);
        for (int c = 0; c < 3; c++)
            o[4 * x + c] = pf_pm_mul(s[4 * x + c], a);
        o[4 * x + 3] = a;
    }
#endif
}

FILTER_VECTOR_CLONES int filter_row_opaque(const pf_float4 *src, int w)
{
    const float *s = (const float *)src;
    int all = 1;
    for (int x = 0; x < w; x++)
        all &= s[4 * x + 3] == 1.0f;
    return all;
}

/* ---- 3x3 stencils -------------------------------------------------------------------------- */

/* The compiler vectorises median9's selects as compares and blends; written as minima
   and maxima (SSE2, AVX2) the network took a fifth of the instructions and no less time:
   the stage waits on its image's memory, not on the network. */
FILTER_VECTOR_CLONES void filter_median3_inner(const float *restrict u, const float *restrict m,
                                               const float *restrict d, float *restrict o, int n)
{
    for (int k = 4; k < n - 4; k++)
        o[k] =
            median9(u[k - 4], u[k], u[k + 4], m[k - 4], m[k], m[k + 4], d[k - 4], d[k], d[k + 4]);
}

/* The median of nine codes by minima and maxima (the 19-exchange network of Paeth's
   median of nine), elementwise over a row so that the compiler runs it on 16 or 32 codes
   at once. */
#define MED_SORT(a, b)                                                                             \
    do {                                                                                           \
        const __typeof__(a) lo_ = a < b ? a : b, hi_ = a < b ? b : a;                              \
        a = lo_;                                                                                   \
        b = hi_;                                                                                   \
    } while (0)
#define MEDIAN9_CODES(name, T)                                                                     \
    FILTER_VECTOR_CLONES void name(const T *restrict u, const T *restrict m, const T *restrict d,  \
                                   T *restrict o, int n, int step)                                 \
    {                                                                                              \
        for (int k = step; k < n - step; k++) {                                                    \
            T p0 = u[k - step], p1 = u[k], p2 = u[k + step], p3 = m[k - step], p4 = m[k],          \
              p5 = m[k + step], p6 = d[k - step], p7 = d[k], p8 = d[k + step];                     \
            MED_SORT(p1, p2);                                                                      \
            MED_SORT(p4, p5);                                                                      \
            MED_SORT(p7, p8);                                                                      \
            MED_SORT(p0, p1);                                                                      \
            MED_SORT(p3, p4);                                                                      \
            MED_SORT(p6, p7);                                                                      \
            MED_SORT(p1, p2);                                                                      \
            MED_SORT(p4, p5);                                                                      \
            MED_SORT(p7, p8);                                                                      \
            MED_SORT(p0, p3);                                                                      \
            MED_SORT(p5, p8);                                                                      \
            MED_SORT(p4, p7);                                                                      \
            MED_SORT(p3, p6);                                                                      \
            MED_SORT(p1, p4);                                                                      \
            MED_SORT(p2, p5);                                                                      \
            MED_SORT(p4, p7);                                                                      \
            MED_SORT(p4, p2);                                                                      \
            MED_SORT(p6, p4);                                                                      \
            MED_SORT(p4, p2);                                                                      \
            o[k] = p4;                                                                             \
        }                                                                                          \
    }
MEDIAN9_CODES(filter_median3_codes8, uint8_t)
MEDIAN9_CODES(filter_median3_codes16, uint16_t)

FILTER_VECTOR_CLONES void filter_sobel_inner(const float *restrict u, const float *restrict m,
                                             const float *restrict d, float *restrict o, int n,
                                             float scale)
{
    /* every float, alpha's included (computed and then replaced: no trap is enabled) */
    for (int k = 4; k < n - 4; k++)
        o[k] =
            sobel1(scale, u[k - 4], u[k], u[k + 4], m[k - 4], m[k + 4], d[k - 4], d[k], d[k + 4]);
    for (int k = 7; k < n - 4; k += 4)
        o[k] = m[k];
}

/* ---- unsharp ------------------------------------------------------------------------------- */

void filter_sharpen_row(const pf_float4 *restrict src, pf_float4 *restrict dst, int w, float amount,
                        float threshold)
{
    const float *restrict s = (const float *)src;
    float *restrict o = (float *)dst;
#if FILTER_SSE2
    /* colours where |d| > threshold (fabsf: the sign bit cleared), alpha v's */
    const __m128 colour = _mm_castsi128_ps(_mm_set_epi32(0, -1, -1, -1));
    const __m128 sign = _mm_set1_ps(-0.0f), am = _mm_set1_ps(amount), th = _mm_set1_ps(threshold);
    for (int x = 0; x < w; x++) {
        const __m128 v = _mm_loadu_ps(s + 4 * x), d = _mm_sub_ps(v, _mm_loadu_ps(o + 4 * x));
        const __m128 q = _mm_add_ps(v, _mm_mul_ps(am, d));
        const __m128 take = _mm_and_ps(colour, _mm_cmpgt_ps(_mm_andnot_ps(sign, d), th));
        _mm_storeu_ps(o + 4 * x, _mm_or_ps(_mm_and_ps(take, q), _mm_andnot_ps(take, v)));
    }
#else
    for (int x = 0; x < w; x++) {
        for (int c = 0; c < 3; c++) {
            const float v = s[4 * x + c], d = v - o[4 * x + c];
            o[4 * x + c] = PF_FABSF(d) > threshold ? v + amount * d : v;
        }
        o[4 * x + 3] = s[4 * x + 3];
    }
#endif
}
