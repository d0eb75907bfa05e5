/* plugins/analysis/analysis_native.c: colsum, rowsum and stats on 8- and 16-bit frames in
 * their own format (pf_stage_desc.run_native), the same partials as run_cpu's on the
 * float image the engine would have loaded, bit for bit.
 *
 * A band's pixels are converted a chunk at a time into a float RGBA buffer that stays in
 * L1, with the engine's own load (frame.c: k / 255 or k / 65535 rounded to float, gray in
 * r, g and b, alpha 1 where the frame has none), so the floats are the ones run_cpu
 * reads and the whole float image is never written. Then:
 * - colsum adds each float into its column's double in row order, as run_cpu does;
 * - rowsum and stats's sums take the floats in another order where that cannot change
 *   the sum: every float the load makes is a multiple of the ulp of the smallest
 *   nonzero one, and is at most 1, so while the count n of them stays below
 *   2^(53 - 23) times that smallest float's power of two, every partial sum in double is
 *   exact, in whatever order (sums_exact); otherwise they are added in run_cpu's order;
 * - stats's min and max are those of the floats (no NaN comes from a code, and all are
 *   +0 or positive, so their bits order as they do: scan_chunk), its count
 *   the number of samples, and its sum of squared deviations, which rounds, is taken in
 *   run_cpu's order with run_cpu's operations.
 * tests/cpu/test_cpu_fast.c compares the tables with run_cpu's on every format.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "analysis_native.h"

/* Where the compiler and the C library can dispatch at load time (GCC or clang on x86-64
   with ifunc), the loops are also built for AVX2 and the CPU picks; not under the
   sanitizers (see engine/frame.c). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) &&                                \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define NATIVE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NATIVE_CLONES
#endif

#define NATIVE_CHUNK 256 /* pixels converted at a time: 4 KB of floats */

int analysis_native_ok(const void *params)
{
    return 1;
}

static int native_format(const pf_native_args *a, const char *stage)
{
    if ((a->sample == 0 || a->sample == 1) && a->channels >= 1 && a->channels <= 4)
        return 0;
    snprintf(a->err, a->err_size, "%s: no native path for sample type %d x%d", stage, a->sample,
             a->channels);
    return -1;
}

/* ---- The engine's load, a chunk at a time ------------------------------------------------ */

#define LOAD_CHUNK(T, MAX)                                                                         \
    NATIVE_CLONES static void load_##T(const T *restrict s, int ch, int n, float *restrict o)      \
    {                                                                                              \
        switch (ch) {                                                                              \
        case 1:                                                                                    \
            for (int x = 0; x < n; x++) {                                                          \
                const float g = (float)s[x] / MAX;                                                 \
                o[4 * x] = o[4 * x + 1] = o[4 * x + 2] = g;                                        \
                o[4 * x + 3] = 1.0f;                                                               \
            }                                                                                      \
            break;                                                                                 \
        case 2:                                                                                    \
            for (int x = 0; x < n; x++) {                                                          \
                const float g = (float)s[2 * x] / MAX;                                             \
                o[4 * x] = o[4 * x + 1] = o[4 * x + 2] = g;                                        \
                o[4 * x + 3] = (float)s[2 * x + 1] / MAX;                                          \
            }                                                                                      \
            break;                                                                                 \
        case 3:                                                                                    \
            for (int x = 0; x < n; x++) {                                                          \
                for (int c = 0; c < 3; c++)                                                        \
                    o[4 * x + c] = (float)s[3 * x + c] / MAX;                                      \
                o[4 * x + 3] = 1.0f;                                                               \
            }                                                                                      \
            break;                                                                                 \
        default:                                                                                   \
            for (int i = 0; i < 4 * n; i++)                                                        \
                o[i] = (float)s[i] / MAX;                                                          \
            break;                                                                                 \
        }                                                                                          \
    }

LOAD_CHUNK(uint8_t, 255.0f)
LOAD_CHUNK(uint16_t, 65535.0f)

/* Pixels [x0, x0 + n) of row y as float RGBA into o. */
static void load_chunk(const pf_native_args *a, int y, int x0, int n, float *o)
{
    const char *row = (const char *)a->in + (size_t)y * a->in_pitch;
    if (a->sample == 0)
        load_uint8_t((const uint8_t *)row + (size_t)x0 * (size_t)a->channels, a->channels, n, o);
    else
        load_uint16_t((const uint16_t *)row + (size_t)x0 * (size_t)a->channels, a->channels, n, o);
}

/* ---- Exact sums ------------------------------------------------------------------------------ */

/* Whether every partial sum in double of n values in [0, 1] whose nonzero ones are at
   least lo (lo above 1: none is) is exact, whatever the order: lo in [2^e, 2^(e+1)), every
   value is a multiple of 2^(e - 23), and the sums, at most n, are below 2^53 of those
   where n < 2^(30 + e). */
static int sums_exact(double n, float lo)
{
    if (!(lo <= 1.0f))
        return 1;
    int e2;
    frexpf(lo, &e2); /* lo = m 2^e2, m in [0.5, 1): e = e2 - 1 */
    return n < ldexp(1.0, 30 + e2 - 1);
}

/* sums_exact for any value a frame of this sample type loads as: the least nonzero one
   is 1 / 255 or 1 / 65535. */
static int sums_exact_for(double n, int sample)
{
    return sums_exact(n, sample == 0 ? 1.0f / 255.0f : 1.0f / 65535.0f);
}

/* Sums of a chunk of n pixels into 16 accumulators (4 per channel: float i into
   acc[i % 16]). */
NATIVE_CLONES static void sum_chunk(const float *restrict v, int n, double *restrict acc)
{
    int i = 0;
    for (; i + 16 <= 4 * n; i += 16)
        for (int j = 0; j < 16; j++)
            acc[j] += v[i + j];
    for (; i < 4 * n; i++)
        acc[i & 15] += v[i];
}

/* The channel totals of sum_chunk's accumulators. */
static double acc_total(const double *acc, int c)
{
    return ((acc[c] + acc[4 + c]) + acc[8 + c]) + acc[12 + c];
}

/* The least, the least nonzero and the greatest value of each channel of a chunk, as the
   floats' bits: every float the load makes is +0 or positive, and there the order of
   the bits as unsigned integers is the order of the values (integer minima vectorise,
   float ones do not, for NaN's sake). nz1 gets the least nonzero's bits minus 1 (0 wraps
   to the greatest, so it never wins). Lane j of the 16 is channel j % 4. */
static inline void scan_one(uint32_t b, uint32_t *mn, uint32_t *nz1, uint32_t *mx)
{
    *mn = b < *mn ? b : *mn;
    *mx = b > *mx ? b : *mx;
    *nz1 = b - 1 < *nz1 ? b - 1 : *nz1;
}

NATIVE_CLONES static void scan_chunk(const float *restrict v, int n, uint32_t *restrict mn,
                                     uint32_t *restrict nz1, uint32_t *restrict mx)
{
    uint32_t lmn[16], lnz1[16], lmx[16]; /* in registers over the loop */
    memcpy(lmn, mn, sizeof lmn);
    memcpy(lnz1, nz1, sizeof lnz1);
    memcpy(lmx, mx, sizeof lmx);
    int i = 0;
    for (; i + 16 <= 4 * n; i += 16)
        for (int j = 0; j < 16; j++) {
            uint32_t b;
            memcpy(&b, v + i + j, sizeof b);
            scan_one(b, &lmn[j], &lnz1[j], &lmx[j]);
        }
    for (; i < 4 * n; i++) {
        uint32_t b;
        memcpy(&b, v + i, sizeof b);
        scan_one(b, &lmn[i & 15], &lnz1[i & 15], &lmx[i & 15]);
    }
    memcpy(mn, lmn, sizeof lmn);
    memcpy(nz1, lnz1, sizeof lnz1);
    memcpy(mx, lmx, sizeof lmx);
}

/* Lanes c, c + 4, c + 8, c + 12 of a scan: the least (greatest where max) of channel c. */
static uint32_t lanes(const uint32_t *l, int c, int max)
{
    uint32_t r = l[c];
    for (int j = c + 4; j < 16; j += 4)
        r = max ? (l[j] > r ? l[j] : r) : (l[j] < r ? l[j] : r);
    return r;
}

static float bits_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The least nonzero value of channel c after scans (above 1 where there is none). */
static float least_nonzero(const uint32_t *nz1, int c)
{
    uint32_t b = lanes(nz1, c, 0);
    return b == UINT32_MAX ? 2.0f : bits_float(b + 1);
}

static void scan_init(uint32_t *mn, uint32_t *nz1, uint32_t *mx)
{
    for (int j = 0; j < 16; j++)
        mn[j] = nz1[j] = UINT32_MAX, mx[j] = 0;
}

/* ---- colsum ----------------------------------------------------------------------------------- */

NATIVE_CLONES static void add_floats(double *restrict t, const float *restrict v, int n)
{
    for (int i = 0; i < n; i++)
        t[i] += v[i];
}

int colsum_native(const pf_native_args *a)
{
    if (native_format(a, "colsum") != 0)
        return -1;
    _Alignas(32) float buf[4 * NATIVE_CHUNK];
    for (int y = a->region.y0; y < a->region.y1; y++)
        for (int x0 = 0; x0 < a->in_width; x0 += NATIVE_CHUNK) {
            const int n = a->in_width - x0 < NATIVE_CHUNK ? a->in_width - x0 : NATIVE_CHUNK;
            load_chunk(a, y, x0, n, buf);
            add_floats(a->partial + 4 * (size_t)x0, buf, 4 * n);
        }
    return 0;
}

/* ---- rowsum ----------------------------------------------------------------------------------- */

int rowsum_native(const pf_native_args *a)
{
    if (native_format(a, "rowsum") != 0)
        return -1;
    _Alignas(32) float buf[4 * NATIVE_CHUNK];
    const int w = a->in_width;
    for (int y = a->region.y0; y < a->region.y1; y++) {
        double acc[16] = {0}, *r = a->partial + 4 * (size_t)y;
        uint32_t mn[16], nz1[16], mx[16];
        const int any = sums_exact_for(w, a->sample); /* else: look at the values */
        scan_init(mn, nz1, mx);
        for (int x0 = 0; x0 < w; x0 += NATIVE_CHUNK) {
            const int n = w - x0 < NATIVE_CHUNK ? w - x0 : NATIVE_CHUNK;
            load_chunk(a, y, x0, n, buf);
            sum_chunk(buf, n, acc);
            if (!any)
                scan_chunk(buf, n, mn, nz1, mx);
        }
        int exact = 1;
        for (int c = 0; c < 4 && !any; c++)
            exact &= sums_exact(w, least_nonzero(nz1, c));
        if (exact) {
            for (int c = 0; c < 4; c++)
                r[c] += acc_total(acc, c);
            continue;
        }
        for (int x0 = 0; x0 < w; x0 += NATIVE_CHUNK) { /* run_cpu's order */
            const int n = w - x0 < NATIVE_CHUNK ? w - x0 : NATIVE_CHUNK;
            load_chunk(a, y, x0, n, buf);
            for (int x = 0; x < n; x++)
                for (int c = 0; c < 4; c++)
                    r[c] += buf[4 * x + c];
        }
    }
    return 0;
}

/* ---- stats ------------------------------------------------------------------------------------ */

/* run_cpu's sum of squared deviations over a chunk: (c - mean)^2 in double, added in
   order. */
static void m2_chunk(const float *v, int n, const double *mean, double *m2)
{
    for (int i = 0; i < 4 * n; i += 4)
        for (int c = 0; c < 4; c++)
            m2[c] += ((double)v[i + c] - mean[c]) * ((double)v[i + c] - mean[c]);
}

int stats_native(const pf_native_args *a)
{
    if (native_format(a, "stats") != 0)
        return -1;
    _Alignas(32) float buf[4 * NATIVE_CHUNK];
    const int w = a->in_width, y0 = a->region.y0, y1 = a->region.y1;
    if (w < 1 || y1 <= y0)
        return 0; /* no sample: the partial stays empty, as run_cpu leaves it */
    const double n = (double)w * (double)(y1 - y0);
    double acc[16] = {0}, sum[4], m2[4] = {0, 0, 0, 0}, mean[4];
    uint32_t mn[16], nz1[16], mx[16];
    scan_init(mn, nz1, mx);
    for (int y = y0; y < y1; y++)
        for (int x0 = 0; x0 < w; x0 += NATIVE_CHUNK) {
            const int k = w - x0 < NATIVE_CHUNK ? w - x0 : NATIVE_CHUNK;
            load_chunk(a, y, x0, k, buf);
            sum_chunk(buf, k, acc);
            scan_chunk(buf, k, mn, nz1, mx);
        }
    int exact = 1;
    for (int c = 0; c < 4; c++) {
        exact &= sums_exact(n, least_nonzero(nz1, c));
        sum[c] = acc_total(acc, c);
    }
    if (!exact) { /* run_cpu's order */
        for (int c = 0; c < 4; c++)
            sum[c] = 0;
        for (int y = y0; y < y1; y++)
            for (int x0 = 0; x0 < w; x0 += NATIVE_CHUNK) {
                const int k = w - x0 < NATIVE_CHUNK ? w - x0 : NATIVE_CHUNK;
                load_chunk(a, y, x0, k, buf);
                for (int i = 0; i < 4 * k; i += 4)
                    for (int c = 0; c < 4; c++)
                        sum[c] += buf[i + c];
            }
    }
    for (int c = 0; c < 4; c++)
        mean[c] = sum[c] / n;
    for (int y = y0; y < y1; y++)
        for (int x0 = 0; x0 < w; x0 += NATIVE_CHUNK) {
            const int k = w - x0 < NATIVE_CHUNK ? w - x0 : NATIVE_CHUNK;
            load_chunk(a, y, x0, k, buf);
            m2_chunk(buf, k, mean, m2);
        }
    for (int c = 0; c < 4; c++) {
        double *q = a->partial + c * ST_FIELDS;
        q[ST_N] = n;
        q[ST_MEAN] = mean[c];
        q[ST_M2] = m2[c];
        q[ST_MIN] = bits_float(lanes(mn, c, 0));
        q[ST_MAX] = bits_float(lanes(mx, c, 1));
    }
    return 0;
}
