/* tests/stages/test_edges.c: stages at the edges of their ranges, at every code value,
 * through the CPU executor with integer frames (the way files reach them):
 *   - every u8 and u16 sample loads as k / max correctly rounded, and gray stays gray;
 *   - f32 stores to u8 and u16 round half up and clamp, around every rounding tie;
 *   - point units reading and writing the caller's frames directly give the bytes of
 *     the whole-image path;
 *   - kernels/edge.h's CPU and GPU forms of each rule give the same result (the GPU's
 *     evaluated here with C's fmaf and one rounding per operation): code to float for
 *     every u8 and u16 code, float to code around every rounding boundary and at the
 *     special values, the gray-output luma (g for every gray code);
 *   - levels: a value at in_low gives out_low at any gamma, 8 and 16 bits;
 *   - threshold at level k / max: gray k is white, k - 1 black, for every k;
 *   - histogram with one bin per code value puts code k in bin k, 8 and 16 bits.
 * Built as test_edges_gpu (PF_EDGES_CUDA, label gpu) the same checks run on the CUDA
 * backend, fused and unfused, so the GPU's conversions are held to the same values.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "edge.h" /* kernels/edge.h */
#include "pipefuse/png.h"
#include "testutil.h"

#ifdef PF_EDGES_CUDA
#include "cuda_skip.h"
#define BACKEND "cuda"
#else
#define BACKEND "cpu"
#endif

static pf_engine *eng;
static const char *fusion = "true";

static pf_pipeline *load(const char *json)
{
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(eng, json, "edges", &p);
    CHECKF(rc == PF_OK, "load: %s", pf_engine_errmsg(eng));
    CHECK(!p || pf_pipeline_set_option(p, "backend", BACKEND) == PF_OK);
    CHECK(!p || pf_pipeline_set_option(p, "fusion", fusion) == PF_OK);
    return p;
}

/* A gray frame of n pixels in rows of w holding the codes first + i (clamped to max). */
static pf_frame codes(pf_sample s, int w, int n, long first)
{
    pf_frame f;
    int h = (n + w - 1) / w;
    long max = s == PF_U8 ? 255 : 65535;
    if (pf_frame_alloc(&f, w, h, s, 1) != PF_OK) {
        fprintf(stderr, "frame: no memory\n");
        exit(1);
    }
    for (int i = 0; i < w * h; i++) {
        long v = first + i < 0 ? 0 : (first + i > max ? max : first + i);
        char *row = (char *)f.data + (size_t)(i / w) * f.pitch;
        if (s == PF_U8)
            ((unsigned char *)row)[i % w] = (unsigned char)v;
        else
            ((unsigned short *)row)[i % w] = (unsigned short)v;
    }
    return f;
}

static long code_at(const pf_frame *f, int i)
{
    const char *row = (const char *)f->data + (size_t)(i / f->width) * f->pitch;
    if (f->sample == PF_U8)
        return ((const unsigned char *)row)[i % f->width];
    return ((const unsigned short *)row)[i % f->width];
}

static pf_frame like(const pf_frame *f, pf_sample s, int channels)
{
    pf_frame o;
    if (pf_frame_alloc(&o, f->width, f->height, s, channels) != PF_OK) {
        fprintf(stderr, "frame: no memory\n");
        exit(1);
    }
    memset(o.data, 0xA5, o.pitch * (size_t)o.height); /* poisoned */
    return o;
}

static int run(pf_pipeline *p, const pf_frame *in, pf_frame *out)
{
    int rc = pf_pipeline_run(p, in, 1, out, out ? 1 : 0);
    CHECKF(rc == PF_OK, "run (%s, fusion %s): %s", BACKEND, fusion, pf_pipeline_errmsg(p));
    return rc;
}

#define ONE_STAGE(op, params)                                                                      \
    "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [{\"id\": \"s\", \"op\": \"" op            \
    "\", \"params\": {" params "}}], \"outputs\": {\"o\": \"s\"}}"

/* ---- Loads ----------------------------------------------------------------------------- */

/* ---- kernels/edge.h: the CPU's and the GPU's forms of each rule --------------------------- */

/* The device forms evaluate here through edge.h's host pf_*_rn helpers (C's fmaf, one
   rounding per operation: this file builds as ISO C, without FMA contraction). */

static unsigned int bits_of(float v)
{
    unsigned int u;
    memcpy(&u, &v, 4);
    return u;
}

static float float_of(unsigned int u)
{
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* Code to float, every u8 and u16 code: the CPU's division, the GPU's two-part
   reciprocal product (pf_div_code) and the IEEE quotient are one float; and the low part
   is 1 / d - r as the double quotient gives it. */
static void test_forms_load(void)
{
    for (int s = 0; s < 2; s++) {
        const float d = s ? 65535.0f : 255.0f;
        long bad = 0, plain = 0;
        for (long k = 0; k <= (long)d; k++) {
            volatile float exact = (float)k / d;
            float cpu = pf_code_to_float((float)k, d),
                  gpu = pf_div_code((float)k, 1.0f / d, pf_code_recip_lo(d));
            if ((bits_of(cpu) != bits_of(exact) || bits_of(gpu) != bits_of(exact)) && bad++ < 3)
                fprintf(stderr, "code %ld / %g: cpu %a, gpu %a, quotient %a\n", k, d, cpu, gpu,
                        exact);
            plain += (float)k * (1.0f / d) != exact;
        }
        CHECKF(bad == 0, "/%g: %ld codes where the CPU and GPU forms are not the quotient", d, bad);
        float lo = (float)(1.0 / (double)d - (double)(1.0f / d));
        CHECKF(bits_of(lo) == bits_of(pf_code_recip_lo(d)), "/%g: low part %a, the quotient's %a",
               d, pf_code_recip_lo(d), lo);
        /* the reason for the correction: the plain product is off for some codes */
        CHECKF(plain > 0, "/%g: the plain reciprocal product was exact for every code", d);
    }
}

/* One float to code both ways against the rule written out here: trunc(v * max + 0.5)
   clamped to [0, max], NaN as 0; counts a disagreement in *bad, the first few printed. */
static void store_check(float v, float max, long *bad)
{
    float t = v * max + 0.5f;
    long want = isnan(t) ? 0 : (t >= max ? (long)max : (t > 0 ? (long)t : 0));
    long cpu = (long)pf_float_to_code(v, (unsigned int)max);
    long gpu = (long)pf_quant_bits(v, max, (unsigned int)max);
    if (cpu == want && gpu == want)
        return;
    if ((*bad)++ < 3)
        fprintf(stderr, "store %a (0x%08x) to %g: cpu %ld, gpu %ld, want %ld\n", v, bits_of(v), max,
                cpu, gpu, want);
}

/* Float to code: every rounding boundary (k + 0.5) / max and every code value k / max of
   both formats give or take 8 ulp, the special values (NaN of either sign and other
   payloads, infinities, zeros, subnormals, negatives, values above 1), and every 4099th
   float of the whole range. */
static void test_forms_store(void)
{
    static const float special[] = {NAN,    -NAN,    INFINITY, -INFINITY, 0.0f,      -0.0f,
                                    1e-45f, -1e-45f, 1e-40f,   -1e-40f,   1e-30f,    -1e-30f,
                                    -1e-7f, -0.5f,   -1.0f,    -FLT_MAX,  1.0f,      2.0f,
                                    1.5f,   1e30f,   FLT_MAX,  0.5f,      0.999999f, 1.0000001f};
    for (int s = 0; s < 2; s++) {
        const float max = s ? 65535.0f : 255.0f;
        long bad = 0, n = 0;
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++, n++)
            store_check(special[i], max, &bad);
        store_check(float_of(0x7fc00001u), max, &bad); /* NaNs with other payloads */
        store_check(float_of(0xffbfffffu), max, &bad);
        for (long k = -1; k <= (long)max + 1; k++)
            for (int tie = 0; tie < 2; tie++) {
                unsigned int b = bits_of((float)(((double)k + 0.5 * tie) / max));
                for (int d = -8; d <= 8; d++, n++)
                    store_check(float_of(b + (unsigned int)d), max, &bad);
            }
        for (unsigned long long u = 0; u <= 0xffffffffull; u += 4099, n++)
            store_check(float_of((unsigned int)u), max, &bad);
        CHECKF(bad == 0, "to %g: the CPU and GPU forms of the store disagree (%ld of %ld floats)",
               max, bad, n);
    }
}

/* The gray-output luma (one form for both sides) is pipefuse/point.h's pf_luma as the
   CPU computes it, and exactly g for gray pixels: every u8 and u16 code, and every
   4099th float. Gray expansion is (g, g, g, a). */
static void test_forms_luma(void)
{
    long bad = 0;
    for (int s = 0; s < 2; s++) {
        const float d = s ? 65535.0f : 255.0f;
        for (long k = 0; k <= (long)d; k++) {
            float g = pf_code_to_float((float)k, d);
            pf_float4 p = pf_gray_pixel(g, 1.0f);
            bad += p.x != g || p.y != g || p.z != g || p.w != 1.0f || pf_luma_rn(p) != g;
        }
    }
    CHECKF(bad == 0, "%ld gray codes whose luma is not the gray", bad);
    pf_rng r;
    pf_rng_seed(&r, 5);
    bad = 0;
    for (unsigned long long u = 0; u <= 0xffffffffull; u += 4099) {
        float g = float_of((unsigned int)u);
        if (isfinite(g))
            bad += bits_of(pf_luma_rn(pf_gray_pixel(g, 0.5f))) != bits_of(g + 0.0f);
        pf_float4 c = pf_f4(pf_rng_float(&r), pf_rng_float(&r), pf_rng_float(&r), 1.0f);
        bad += bits_of(pf_luma_rn(c)) != bits_of(pf_luma(c));
    }
    CHECKF(bad == 0, "%ld pixels where the luma is not g for gray or differs from pf_luma", bad);
}

static void test_loads(void)
{
    /* through the executor: gray u8/u16 to f32 gray (the luma of a gray pixel is that
       gray) and to f32 RGBA */
    pf_pipeline *p = load(ONE_STAGE("brightness", "\"amount\": 0"));
    if (!p)
        return;
    for (int s = 0; s < 2; s++) {
        pf_sample smp = s ? PF_U16 : PF_U8;
        long max = s ? 65535 : 255;
        pf_frame in = codes(smp, 256, (int)max + 1, 0);
        pf_frame gray = like(&in, PF_F32, 1), rgba = like(&in, PF_F32, 4);
        if (run(p, &in, &gray) == PF_OK && run(p, &in, &rgba) == PF_OK) {
            long bad = 0;
            for (long k = 0; k <= max; k++) {
                float want = (float)k / (float)max;
                int y = (int)(k / 256), x = (int)(k % 256);
                const float *g = (const float *)((char *)gray.data + (size_t)y * gray.pitch);
                const float *c = (const float *)((char *)rgba.data + (size_t)y * rgba.pitch);
                bad += g[x] != want || c[4 * x] != want || c[4 * x + 1] != want ||
                       c[4 * x + 2] != want || c[4 * x + 3] != 1.0f;
            }
            CHECKF(bad == 0, "%d-bit: %ld codes do not load as k / %ld", s ? 16 : 8, bad, max);
        }
        pf_frame_free(&in);
        pf_frame_free(&gray);
        pf_frame_free(&rgba);
    }
    pf_pipeline_destroy(p);
}

/* f32 to u8/u16 stores: trunc(v * max + 0.5) clamped to [0, max] with NaN as 0, for
   special values and for every rounding tie of both formats give or take 4 ulp, in
   RGBA and through the gray luma (where gray (v, v, v) stores as v). */
static void test_stores(void)
{
    const int w = 1024, h = 580;
    pf_frame in;
    if (pf_frame_alloc(&in, w, h, PF_F32, 4) != PF_OK)
        exit(1);
    size_t cap = (size_t)w * h;
    float *v = malloc(sizeof(float) * cap * 4);
    if (!v)
        exit(1);
    pf_test_store_values(v, cap);
    for (size_t i = 0; i < cap; i++) /* gray pixels, alpha the next value */
        for (int c = 0; c < 4; c++)
            ((float *)((char *)in.data + i / w * in.pitch))[i % w * 4 + c] =
                v[c == 3 ? (i + 1) % cap : i];
    pf_pipeline *p = load(ONE_STAGE("brightness", "\"amount\": 0"));
    for (int o = 0; o < 4 && p; o++) {
        pf_sample smp = o & 1 ? PF_U16 : PF_U8;
        int ch = o & 2 ? 2 : 4;
        float max = smp == PF_U16 ? 65535.0f : 255.0f;
        pf_frame out = like(&in, smp, ch);
        if (run(p, &in, &out) == PF_OK) {
            long bad = 0;
            for (size_t i = 0; i < cap; i++)
                for (int c = 0; c < ch; c++) {
                    float x = v[c == ch - 1 && c > 0 ? (i + 1) % cap : i];
                    float t = x * max + 0.5f;
                    /* the luma of an infinite gray, g + 0.2126 (inf - inf) ..., is NaN */
                    int nan = isnan(x) || (ch == 2 && c == 0 && isinf(x));
                    long want = nan ? 0 : (t >= max ? (long)max : (t > 0 ? (long)t : 0));
                    const char *row = (const char *)out.data + i / w * out.pitch;
                    long got = smp == PF_U8 ? ((const unsigned char *)row)[i % w * ch + c]
                                            : ((const unsigned short *)row)[i % w * ch + c];
                    if (got != want && bad++ < 3)
                        fprintf(stderr, "store %a to %d channels of %g: %ld, want %ld\n", x, ch,
                                max, got, want);
                }
            CHECKF(bad == 0, "f32 stores to %d-bit, %d channels: %ld samples wrong",
                   smp == PF_U16 ? 16 : 8, ch, bad);
        }
        pf_frame_free(&out);
    }
    pf_pipeline_destroy(p);
    free(v);
    pf_frame_free(&in);
}

/* Point units convert inputs and store outputs themselves when nothing else reads them
   (engine/exec_cpu.c); the bytes must be those of the whole-image path, which runs when
   an output is named twice or a stencil also reads the input. Odd width (a ragged last
   chunk), 16-bit gray and 8-bit RGBA. */
static void test_direct_edges(void)
{
#define CHAIN                                                                                      \
    "{\"id\": \"s\", \"op\": \"contrast\", \"inputs\": [\"x\"], \"params\": {\"amount\": 1.7}}, "  \
    "{\"id\": \"t\", \"op\": \"blend\", \"inputs\": [\"s\", \"x\"], \"params\": {\"opacity\": "    \
    "0.3}}"
    static const char *const json[] = {
        "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [" CHAIN
        "], \"outputs\": {\"o\": \"t\"}}",
        "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [" CHAIN
        "], \"outputs\": {\"o\": \"t\", "
        "\"p\": \"t\"}}",
        "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [" CHAIN
        ", {\"id\": \"m\", \"op\": \"median3\", \"inputs\": [\"x\"]}], \"outputs\": {\"o\": "
        "\"t\", \"m\": \"m\"}}",
    };
#undef CHAIN
    pf_rng r;
    pf_rng_seed(&r, 17);
    for (int f = 0; f < 2; f++) {
        pf_sample smp = f ? PF_U8 : PF_U16;
        int ch = f ? 4 : 1;
        pf_frame in;
        if (pf_frame_alloc(&in, 517, 9, smp, ch) != PF_OK)
            exit(1);
        for (int y = 0; y < 9; y++)
            for (int i = 0; i < 517 * ch; i++) {
                char *row = (char *)in.data + (size_t)y * in.pitch;
                if (smp == PF_U8)
                    ((unsigned char *)row)[i] = (unsigned char)pf_rng_u32(&r);
                else
                    ((unsigned short *)row)[i] = (unsigned short)pf_rng_u32(&r);
            }
        pf_frame out[3][2];
        for (int k = 0; k < 3; k++) {
            out[k][0] = like(&in, smp, ch);
            out[k][1] = like(&in, smp, ch);
            pf_pipeline *p = load(json[k]);
            if (p) {
                int rc = pf_pipeline_run(p, &in, 1, out[k], k ? 2 : 1);
                CHECKF(rc == PF_OK, "direct edges %d: %s", k, pf_pipeline_errmsg(p));
            }
            pf_pipeline_destroy(p);
        }
        size_t row = 517 * pf_frame_pixel_bytes(smp, ch);
        for (int k = 1; k < 3; k++)
            for (int y = 0; y < 9; y++)
                CHECKF(!memcmp((char *)out[0][0].data + y * out[0][0].pitch,
                               (char *)out[k][0].data + y * out[k][0].pitch, row),
                       "%s: direct edges differ from pipeline %d, row %d", f ? "rgba8" : "gray16",
                       k, y);
        for (int y = 0; y < 9; y++)
            CHECK(!memcmp((char *)out[1][0].data + y * out[1][0].pitch,
                          (char *)out[1][1].data + y * out[1][1].pitch, row));
        for (int k = 0; k < 3; k++)
            pf_frame_free(&out[k][0]), pf_frame_free(&out[k][1]);
        pf_frame_free(&in);
    }
}

/* ---- levels ------------------------------------------------------------------------------ */

/* The example of the report: gray8 [51, 52, 204], in 0.2..0.8, gamma 10. */
static void test_levels_example(void)
{
    pf_pipeline *p = load(
        ONE_STAGE("levels", "\"in_low\": 0.2, \"in_high\": 0.8, \"gamma\": 10, \"out_low\": 0, "
                            "\"out_high\": 1"));
    if (!p)
        return;
    pf_frame in = codes(PF_U8, 3, 3, 0), out = like(&in, PF_U8, 1);
    ((unsigned char *)in.data)[0] = 51;
    ((unsigned char *)in.data)[1] = 52;
    ((unsigned char *)in.data)[2] = 204;
    if (run(p, &in, &out) == PF_OK) {
        const unsigned char *o = out.data;
        CHECKF(o[0] == 0 && o[1] == 154 && o[2] == 255, "levels [51, 52, 204]: [%d, %d, %d]", o[0],
               o[1], o[2]);
    }
    pf_frame_free(&in);
    pf_frame_free(&out);
    pf_pipeline_destroy(p);
}

/* Every code through levels (in 0.2..0.8, out 0.1..0.9) against the same formula in
   double on the exact fraction: out_low exactly at and below in_low, out_high at and
   above in_high, within one step elsewhere (the float working format carries the value
   with a relative error of 2^-24, which a steep gamma near in_low amplifies). */
static void test_levels_codes(void)
{
    static const double gammas[] = {0.5, 2, 10};
    pf_pipeline *p = load(ONE_STAGE("levels", "\"in_low\": 0.2, \"in_high\": 0.8, \"gamma\": 1, "
                                              "\"out_low\": 0.1, \"out_high\": 0.9"));
    if (!p)
        return;
    for (int s = 0; s < 2; s++) {
        pf_sample smp = s ? PF_U16 : PF_U8;
        long max = s ? 65535 : 255;
        pf_frame in = codes(smp, 256, (int)max + 1, 0), out = like(&in, smp, 1);
        for (int g = 0; g < 3; g++) {
            CHECK(pf_pipeline_set_float(p, "s.gamma", gammas[g]) == PF_OK);
            if (run(p, &in, &out) != PF_OK)
                continue;
            long lo = lrint(0.1 * max), hi = lrint(0.9 * max), bad_edge = 0, bad = 0, worst = 0;
            for (long k = 0; k <= max; k++) {
                double t = ((double)k / max - 0.2) / 0.6;
                t = t < 0 ? 0 : (t > 1 ? 1 : t);
                double want = floor((0.1 + pow(t, 1 / gammas[g]) * 0.8) * max + 0.5);
                long got = code_at(&out, (int)k), d = labs(got - (long)want);
                if (k * 5 <= max || k * 5 >= 4 * max)
                    bad_edge += got != (k * 5 <= max ? lo : hi);
                else
                    bad += d > 1;
                worst = d > worst ? d : worst;
            }
            CHECKF(bad_edge == 0,
                   "%d-bit, gamma %g: %ld codes outside in_low..in_high not at "
                   "out_low/out_high",
                   s ? 16 : 8, gammas[g], bad_edge);
            CHECKF(bad == 0, "%d-bit, gamma %g: %ld codes more than a step off (worst %ld)",
                   s ? 16 : 8, gammas[g], bad, worst);
        }
        pf_frame_free(&in);
        pf_frame_free(&out);
    }
    pf_pipeline_destroy(p);
}

/* ---- threshold ---------------------------------------------------------------------------- */

/* Level k / max written in the pipeline as the decimal of the fraction: gray k is white
   (>= level), gray k - 1 black. 8 bits: every level over every code; 16 bits: every
   level over its neighbours. */
static void test_threshold(void)
{
    pf_pipeline *p = load(ONE_STAGE("threshold", "\"level\": 0.5"));
    if (!p)
        return;
    pf_frame in = codes(PF_U8, 256, 256, 0), out = like(&in, PF_U8, 1);
    long bad = 0;
    for (int k = 0; k <= 255; k++) {
        char v[32];
        snprintf(v, sizeof v, "%.17g", k / 255.0);
        CHECK(pf_pipeline_set_param(p, "s.level", v) == PF_OK);
        if (run(p, &in, &out) != PF_OK)
            break;
        for (int j = 0; j <= 255; j++)
            bad += code_at(&out, j) != (j >= k ? 255 : 0);
        if (bad) {
            CHECKF(0, "threshold %d/255 (%s): gray %d is %ld", k, v, k, code_at(&out, k));
            break;
        }
    }
    pf_frame_free(&in);
    pf_frame_free(&out);
    pf_frame in16 = codes(PF_U16, 3, 3, 0), out16 = like(&in16, PF_U16, 1);
    bad = 0;
    for (long k = 0; k <= 65535 && bad < 10; k++) {
        pf_frame_free(&in16);
        in16 = codes(PF_U16, 3, 3, k - 1);
        char v[32];
        snprintf(v, sizeof v, "%.17g", k / 65535.0);
        CHECK(pf_pipeline_set_param(p, "s.level", v) == PF_OK);
        if (run(p, &in16, &out16) != PF_OK)
            break;
        for (int j = 0; j < 3; j++) {
            long c = code_at(&in16, j), want = c >= k ? 65535 : 0;
            if (code_at(&out16, j) != want) {
                CHECKF(0, "threshold %ld/65535: gray %ld is %ld", k, c, code_at(&out16, j));
                bad++;
            }
        }
    }
    pf_frame_free(&in16);
    pf_frame_free(&out16);
    pf_pipeline_destroy(p);
}

/* ---- histogram ---------------------------------------------------------------------------- */

/* All codes once each, bins = codes (code k in bin k), bins = codes - 1 (k in bin k, the
   top code clamped into the last bin), and 256 bins. */
static void test_histogram(void)
{
    pf_pipeline *p = load(ONE_STAGE("histogram", "\"bins\": 256"));
    if (!p)
        return;
    for (int s = 0; s < 2; s++) {
        pf_sample smp = s ? PF_U16 : PF_U8;
        long max = s ? 65535 : 255;
        pf_frame in = codes(smp, 256, (int)max + 1, 0);
        long binsv[] = {max + 1, max, 256};
        for (int b = 0; b < 3; b++) {
            long bins = binsv[b];
            char v[16];
            snprintf(v, sizeof v, "%ld", bins);
            CHECK(pf_pipeline_set_param(p, "s.bins", v) == PF_OK);
            pf_table t;
            if (run(p, &in, NULL) != PF_OK || pf_pipeline_table(p, 0, &t) != PF_OK)
                continue;
            CHECK(t.rows == bins && t.cols == 4);
            if (t.rows != bins)
                continue;
            /* code k belongs in bin floor(k / max * bins) of the exact fraction, the top
               code clamped into the last bin */
            static double want_of[65536];
            memset(want_of, 0, sizeof want_of);
            for (long k = 0; k <= max; k++) {
                long i = k * bins / max;
                want_of[i < bins ? i : bins - 1]++;
            }
            CHECK(bins != max + 1 || (want_of[0] == 1 && want_of[bins - 1] == 1));
            CHECK(bins != max || want_of[bins - 1] == 2);
            long bad = 0, first = -1;
            for (long i = 0; i < bins; i++) {
                double want = want_of[i];
                int ok =
                    t.data[i * 4] == want && t.data[i * 4 + 1] == want && t.data[i * 4 + 2] == want;
                if (!ok && first < 0)
                    first = i;
                bad += !ok;
            }
            CHECKF(bad == 0, "%d-bit, %ld bins: %ld bins wrong, first %ld (holds %g)", s ? 16 : 8,
                   bins, bad, first, first >= 0 ? t.data[first * 4] : 0.0);
        }
        pf_frame_free(&in);
    }
    pf_pipeline_destroy(p);
}

int main(void)
{
#ifdef PF_EDGES_CUDA
    if (!pf_test_cuda_device("test_edges_gpu"))
        return PF_TEST_SKIPPED;
    static const char *const fusions[] = {"true", "false"};
#else
    static const char *const fusions[] = {"true"};
#endif
    test_forms_load();
    test_forms_store();
    test_forms_luma();
    eng = pf_test_engine();
    for (size_t i = 0; i < sizeof fusions / sizeof fusions[0]; i++) {
        fusion = fusions[i];
        test_loads();
        test_stores();
        test_direct_edges();
        test_levels_example();
        test_levels_codes();
        test_threshold();
        test_histogram();
    }
    pf_engine_destroy(eng);
    return pf_test_done("test_edges");
}
