/* engine/cpu_lut.c: point units as table lookups on the CPU.
 *
 * Why it is exact. A PF_STAGE_PER_CHANNEL op computes output channel c from channel c
 * of its inputs and its params only, not from the position or the other channels. A
 * unit of such ops reading one 8- or 16-bit frame therefore gives, for output channel
 * c, a value that depends on one input code only (gray inputs expand to (g, g, g), so
 * a gray output's luma of three channels is still a function of g; a colour input to a
 * gray output is not tabulated). The executor builds the tables by running the unit
 * itself (the same load, pf_row_to_float4, the same op functions on the same floats,
 * the same store with its rounding and clamping, pf_row_from_float4) over one row whose
 * pixel k holds code k in every channel: each entry is the very value the unit stores
 * for that code, so a lookup gives the same bytes as the float chain, for every code.
 * Channels an input format lacks load as constants (alpha 1 for gray and RGB), so the
 * output channels they feed are constants too: every entry of their table is the same.
 *
 * Tables are kept per unit and rebuilt when a parameter changes (the pipeline's
 * param_version) or the frames' formats do, in the block of the previous build when it is
 * large enough (no allocation when only a parameter changed). A table set is at most 4
 * channels x 65536 codes x 4 bytes (16-bit in, float out): 1 MiB, 2.5 MiB with the
 * build's rows. Two 8-bit inputs are tabulated over all 65536 pairs of codes.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_lut.h"

/* Integer forms a table of two 8-bit codes may be, each checked on every pair. */
enum {
    PAIR_GENERIC = -1,
    PAIR_A,
    PAIR_B,
    PAIR_CONST,
    PAIR_ADD,
    PAIR_ABSDIFF,
    PAIR_MUL,
    PAIR_FORMS
};
#define PAIR_BLOCK 192 /* bytes a step of the rows: whole pixels of 1 to 4 channels */

struct pf_cpu_lut {
    int built;
    unsigned long version;     /* param_version the tables were built for */
    int in_format, out_format; /* pf_format_code of the frames */
    int codes;                 /* 256 or 65536 */
    int pairs;                 /* two 8-bit inputs: code (a << 8) | b */
    int src[4];                /* per output channel: input channel read, -1 a constant */
    size_t sample_bytes;       /* of the output */
    unsigned char *tab;        /* out channels x codes samples, channel-major */
    uint32_t *tab32;           /* RGBA8 to RGBA8: table c's bytes shifted to channel c's
                                    place in a little-endian pixel word, 4 x 256; or NULL */
    int copy;                  /* the tables are the identity on the same format */
    /* Two 8-bit inputs into 8-bit: per output channel the integer form its table is, for
       every pair of codes (PAIR_*), and with all of them known (pair_forms), the rows run
       those forms over the samples instead of looking them up: byte-wise operations the
       compiler runs 16 or 32 at a time. pair_mask[f]: a block's bytes of form f. */
    int pair_form[4], pair_forms;
    unsigned char pair_mask[PAIR_FORMS][PAIR_BLOCK];
    unsigned char pair_const[PAIR_BLOCK]; /* a block's bytes of constant channels */
    unsigned char *mem;                   /* tab, tab32 and the build's rows in one block, kept from
                                  one build to the next: a parameter changed between
                                  frames rebuilds without allocating */
    size_t mem_size;
};

struct pf_cpu_luts {
    int n;
    pf_cpu_lut *unit;
};

static int codes_of(pf_sample s)
{
    return s == PF_U8 ? 256 : s == PF_U16 ? 65536 : 0;
}

/* The input channel that output channel c of a co-channel frame reads from a ci-channel
   frame: colour from colour (or from gray), alpha from alpha; -1 where the input has no
   such channel (a constant: the op's value for alpha 1), -2 where no single channel
   feeds it (a gray output of a colour input: luma mixes three). */
static int source_channel(int ci, int co, int c)
{
    int alpha = (co == 2 && c == 1) || (co == 4 && c == 3);
    if (alpha)
        return ci == 4 ? 3 : ci == 2 ? 1 : -1;
    if (co <= 2)
        return ci <= 2 ? 0 : -2;
    return ci >= 3 ? c : 0;
}

int pf_cpu_lut_fits(const pf_frame *in, const pf_frame *in2, const pf_frame *out)
{
    int codes = in2 ? 65536 : codes_of(in->sample);
    if (!codes || out->channels < 1 || out->channels > 4 || in->channels < 1 || in->channels > 4)
        return 0;
    if (in2 && (in->sample != PF_U8 || in2->sample != PF_U8 || in2->channels != in->channels))
        return 0;
    for (int c = 0; c < out->channels; c++)
        if (source_channel(in->channels, out->channels, c) == -2)
            return 0;
    return (double)in->width * in->height >= codes;
}

void pf_cpu_luts_free(pf_cpu_luts *luts)
{
    if (!luts)
        return;
    for (int i = 0; i < luts->n; i++) {
        free(luts->unit[i].mem);
    }
    free(luts->unit);
    free(luts);
}

/* An input row of the build: pixel k holds (k >> shift) & mask in each channel. */
static void fill_codes(unsigned char *row, pf_sample s, int channels, int codes, int shift,
                       int mask)
{
    for (int k = 0; k < codes; k++)
        for (int c = 0; c < channels; c++) {
            if (s == PF_U8)
                row[k * channels + c] = (unsigned char)((k >> shift) & mask);
            else
                ((uint16_t *)row)[k * channels + c] = (uint16_t)((k >> shift) & mask);
        }
}

/* Form f of codes a and b; the same expressions as the rows below. */
static unsigned pair_value(int f, unsigned a, unsigned b, unsigned k)
{
    switch (f) {
    case PAIR_A:
        return a;
    case PAIR_B:
        return b;
    case PAIR_CONST:
        return k;
    case PAIR_ADD:
        return a + b > 255 ? 255 : a + b;
    case PAIR_ABSDIFF:
        return a > b ? a - b : b - a;
    default: { /* round(a b / 255): x / 255 as (x + 1 + (x >> 8)) >> 8 */
        unsigned x = a * b + 127;
        return (x + 1 + (x >> 8)) >> 8;
    }
    }
}

/* Which integer form each channel's pair table is (all 65536 entries compared); 1 when
   every channel has one, with the block masks made. */
static int classify_pairs(pf_cpu_lut *l, int co)
{
    for (int c = 0; c < co; c++) {
        const unsigned char *t = l->tab + (size_t)c * 65536;
        l->pair_form[c] = PAIR_GENERIC;
        for (int f = 0; f < PAIR_FORMS && l->pair_form[c] == PAIR_GENERIC; f++) {
            int same = 1;
            for (unsigned k = 0; k < 65536 && same; k++)
                same = t[k] == pair_value(f, k >> 8, k & 255, t[0]);
            if (same)
                l->pair_form[c] = f;
        }
        if (l->pair_form[c] == PAIR_GENERIC)
            return 0;
    }
    for (int f = 0; f < PAIR_FORMS; f++)
        for (int i = 0; i < PAIR_BLOCK; i++)
            l->pair_mask[f][i] = l->pair_form[i % co] == f ? 0xff : 0;
    for (int i = 0; i < PAIR_BLOCK; i++)
        l->pair_const[i] = l->tab[(size_t)(i % co) * 65536];
    return 1;
}

static int build(pf_cpu_lut *l, unsigned long version, const pf_frame *in, const pf_frame *in2,
                 const pf_frame *out, pf_cpu_lut_build_fn fn, void *ctx)
{
    int codes = in2 ? 65536 : codes_of(in->sample), ci = in->channels, co = out->channels;
    size_t sb = pf_frame_pixel_bytes(out->sample, 1);
    size_t row_in = pf_frame_pixel_bytes(in->sample, ci) * (size_t)codes;
    size_t tab = (sb * 4 * (size_t)codes + 63) & ~(size_t)63, rin = (row_in + 63) & ~(size_t)63;
    size_t rows_in = (in2 ? 2 : 1) * rin, need = 2 * tab + rows_in + sizeof(uint32_t) * 4 * 256;
    l->built = 0;
    if (need > l->mem_size) {
        free(l->mem);
        l->mem_size = 0;
        if (posix_memalign((void **)&l->mem, 64, need) != 0) {
            l->mem = NULL;
            return PF_NO_MEMORY;
        }
        l->mem_size = need;
    }
    /* The build's rows: code k in every channel of input pixel k (pairs: the high byte
       in the first input, the low byte in the second), and what is stored. */
    l->tab = l->mem;
    unsigned char *out_row = l->mem + tab, *in_row = out_row + tab, *in_row2 = in_row + rin;
    fill_codes(in_row, in->sample, ci, codes, in2 ? 8 : 0, in2 ? 255 : 65535);
    if (in2)
        fill_codes(in_row2, in->sample, ci, codes, 0, 255);
    pf_frame fi = {in_row, codes, 1, row_in, in->sample, ci};
    pf_frame fi2 = {in_row2, codes, 1, row_in, in->sample, ci};
    pf_frame fo = {out_row, codes, 1, sb * (size_t)co * (size_t)codes, out->sample, co};
    int rc = fn(ctx, &fi, in2 ? &fi2 : NULL, &fo);
    /* Channel-major: table c holds output channel c of every code. */
    for (int c = 0; c < co && rc == PF_OK; c++) {
        l->src[c] = source_channel(ci, co, c);
        for (int k = 0; k < codes; k++)
            memcpy(l->tab + ((size_t)c * codes + k) * sb, out_row + ((size_t)k * co + c) * sb, sb);
    }
    if (rc != PF_OK)
        return rc;
    l->pairs = in2 != NULL;
    l->pair_forms = l->pairs && out->sample == PF_U8 && ci == co && classify_pairs(l, co);
    /* The identity on one format (brightness 0, say) is a row copy. */
    l->copy = !in2 && in->sample == out->sample && ci == co;
    for (int c = 0; c < co && l->copy; c++)
        for (int k = 0; k < codes && l->copy; k++)
            l->copy = sb == 1 ? l->tab[(size_t)c * codes + k] == k
                              : ((const uint16_t *)l->tab)[(size_t)c * codes + k] == k;
    l->tab32 = NULL;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (!in2 && in->sample == PF_U8 && out->sample == PF_U8 && ci == 4 && co == 4) {
        l->tab32 = (uint32_t *)(in_row + rows_in);
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 256; k++)
                l->tab32[c * 256 + k] = (uint32_t)l->tab[c * 256 + k] << (8 * c);
    }
#endif
    l->codes = codes;
    l->sample_bytes = sb;
    l->version = version;
    l->in_format = pf_format_code(in->sample, ci);
    l->out_format = pf_format_code(out->sample, co);
    l->built = 1;
    return PF_OK;
}

int pf_cpu_lut_get(pf_cpu_luts **luts, int n_units, int unit, unsigned long version,
                   const pf_frame *in, const pf_frame *in2, const pf_frame *out,
                   pf_cpu_lut_build_fn fn, void *ctx, const pf_cpu_lut **lut)
{
    *lut = NULL;
    if (!*luts) {
        pf_cpu_luts *t = calloc(1, sizeof *t);
        if (!t)
            return PF_NO_MEMORY;
        t->unit = calloc((size_t)n_units, sizeof *t->unit);
        if (!t->unit) {
            free(t);
            return PF_NO_MEMORY;
        }
        t->n = n_units;
        *luts = t;
    }
    if (unit < 0 || unit >= (*luts)->n)
        return PF_INTERNAL;
    pf_cpu_lut *l = &(*luts)->unit[unit];
    if (!l->built || l->version != version || l->pairs != (in2 != NULL) ||
        l->in_format != pf_format_code(in->sample, in->channels) ||
        l->out_format != pf_format_code(out->sample, out->channels)) {
        int rc = build(l, version, in, in2, out, fn, ctx);
        if (rc != PF_OK)
            return rc;
    }
    *lut = l;
    return PF_OK;
}

/* ---- Lookups ------------------------------------------------------------------------------
 *
 * One loop per input and output sample type; the channel counts are constants in the
 * common case (the same channels in and out), so each pixel is a few independent loads
 * and stores. */

#define LUT_ROWS(NAME, TI, TO)                                                                     \
    static void NAME(const pf_cpu_lut *l, const pf_frame *in, const pf_frame *out, int y0, int y1) \
    {                                                                                              \
        int ci = in->channels, co = out->channels, w = in->width;                                  \
        const TO *t[4] = {NULL, NULL, NULL, NULL};                                                 \
        TO k[4] = {0, 0, 0, 0};                                                                    \
        for (int c = 0; c < co; c++) {                                                             \
            t[c] = (const TO *)l->tab + (size_t)c * (size_t)l->codes;                              \
            k[c] = t[c][0];                                                                        \
        }                                                                                          \
        for (int y = y0; y < y1; y++) {                                                            \
            const TI *restrict s = (const TI *)((const char *)in->data + (size_t)y * in->pitch);   \
            TO *restrict d = (TO *)((char *)out->data + (size_t)y * out->pitch);                   \
            if (ci == 4 && co == 4) {                                                              \
                for (int x = 0; x < w; x++) {                                                      \
                    d[4 * x] = t[0][s[4 * x]];                                                     \
                    d[4 * x + 1] = t[1][s[4 * x + 1]];                                             \
                    d[4 * x + 2] = t[2][s[4 * x + 2]];                                             \
                    d[4 * x + 3] = t[3][s[4 * x + 3]];                                             \
                }                                                                                  \
            } else if (ci == 3 && co == 3) {                                                       \
                for (int x = 0; x < w; x++) {                                                      \
                    d[3 * x] = t[0][s[3 * x]];                                                     \
                    d[3 * x + 1] = t[1][s[3 * x + 1]];                                             \
                    d[3 * x + 2] = t[2][s[3 * x + 2]];                                             \
                }                                                                                  \
            } else if (ci == 1 && co == 1) {                                                       \
                for (int x = 0; x < w; x++)                                                        \
                    d[x] = t[0][s[x]];                                                             \
            } else {                                                                               \
                for (int x = 0; x < w; x++)                                                        \
                    for (int c = 0; c < co; c++)                                                   \
                        d[x * co + c] = l->src[c] < 0 ? k[c] : t[c][s[x * ci + l->src[c]]];        \
            }                                                                                      \
        }                                                                                          \
    }

LUT_ROWS(rows_u8_u8, uint8_t, uint8_t)
LUT_ROWS(rows_u8_u16, uint8_t, uint16_t)
LUT_ROWS(rows_u8_f32, uint8_t, float)
LUT_ROWS(rows_u16_u8, uint16_t, uint8_t)
LUT_ROWS(rows_u16_u16, uint16_t, uint16_t)
LUT_ROWS(rows_u16_f32, uint16_t, float)

/* RGBA8 to RGBA8, a pixel a word: one load, four lookups ORed together, one store
   (byte c of a little-endian word is channel c). */
static void rows_rgba8(const pf_cpu_lut *l, const pf_frame *in, const pf_frame *out, int y0, int y1)
{
    const uint32_t *t0 = l->tab32, *t1 = t0 + 256, *t2 = t0 + 512, *t3 = t0 + 768;
    for (int y = y0; y < y1; y++) {
        const unsigned char *s = (const unsigned char *)in->data + (size_t)y * in->pitch;
        unsigned char *d = (unsigned char *)out->data + (size_t)y * out->pitch;
        int x = 0;
        for (; x + 2 <= in->width; x += 2) { /* two pixels a 64-bit word */
            uint64_t v, o;
            memcpy(&v, s + 4 * (size_t)x, 8);
            uint32_t lo = (uint32_t)v, hi = (uint32_t)(v >> 32);
            o = (uint64_t)(t0[lo & 255] | t1[(lo >> 8) & 255] | t2[(lo >> 16) & 255] |
                           t3[lo >> 24]) |
                (uint64_t)(t0[hi & 255] | t1[(hi >> 8) & 255] | t2[(hi >> 16) & 255] | t3[hi >> 24])
                    << 32;
            memcpy(d + 4 * (size_t)x, &o, 8);
        }
        for (; x < in->width; x++) {
            uint32_t v, o;
            memcpy(&v, s + 4 * (size_t)x, 4);
            o = t0[v & 255] | t1[(v >> 8) & 255] | t2[(v >> 16) & 255] | t3[v >> 24];
            memcpy(d + 4 * (size_t)x, &o, 4);
        }
    }
}

/* Two 8-bit inputs of the same channels: output channel c of a pixel is table c at
   (a << 8) | b of the input channels it reads. */
#define PAIR_ROWS(NAME, TO)                                                                        \
    static void NAME(const pf_cpu_lut *l, const pf_frame *in, const pf_frame *in2,                 \
                     const pf_frame *out, int y0, int y1)                                          \
    {                                                                                              \
        int ci = in->channels, co = out->channels, w = in->width;                                  \
        const TO *t[4] = {NULL, NULL, NULL, NULL};                                                 \
        TO k[4] = {0, 0, 0, 0};                                                                    \
        for (int c = 0; c < co; c++) {                                                             \
            t[c] = (const TO *)l->tab + (size_t)c * 65536;                                         \
            k[c] = t[c][0];                                                                        \
        }                                                                                          \
        for (int y = y0; y < y1; y++) {                                                            \
            const uint8_t *restrict a = (const uint8_t *)in->data + (size_t)y * in->pitch;         \
            const uint8_t *restrict b = (const uint8_t *)in2->data + (size_t)y * in2->pitch;       \
            TO *restrict d = (TO *)((char *)out->data + (size_t)y * out->pitch);                   \
            if (ci == 4 && co == 4) {                                                              \
                for (int x = 0; x < 4 * w; x += 4) {                                               \
                    d[x] = t[0][a[x] << 8 | b[x]];                                                 \
                    d[x + 1] = t[1][a[x + 1] << 8 | b[x + 1]];                                     \
                    d[x + 2] = t[2][a[x + 2] << 8 | b[x + 2]];                                     \
                    d[x + 3] = t[3][a[x + 3] << 8 | b[x + 3]];                                     \
                }                                                                                  \
            } else {                                                                               \
                for (int x = 0; x < w; x++)                                                        \
                    for (int c = 0; c < co; c++) {                                                 \
                        int sc = l->src[c], i = x * ci + sc;                                       \
                        d[x * co + c] = sc < 0 ? k[c] : t[c][a[i] << 8 | b[i]];                    \
                    }                                                                              \
            }                                                                                      \
        }                                                                                          \
    }

PAIR_ROWS(pairs_u8, uint8_t)

/* Form f over n bytes of a block, into the bytes of d that mask m selects: in 8-bit
   (16-bit for the product) lanes, the same values as pair_value. */
#define PAIR_FORM_BYTES(expr)                                                                      \
    for (int i = 0; i < n; i++) {                                                                  \
        const uint8_t a = A[i], b = B[i];                                                          \
        const uint8_t v = (uint8_t)(expr);                                                         \
        (void)a, (void)b;                                                                          \
        D[i] = (uint8_t)((v & m[i]) | (D[i] & ~m[i]));                                             \
    }

static inline uint8_t add_sat8(uint8_t a, uint8_t b)
{
    const uint8_t s = (uint8_t)(a + b);
    return (uint8_t)(s | (uint8_t) - (s < a));
}

static inline uint8_t mul255_8(uint8_t a, uint8_t b)
{
    const uint16_t x = (uint16_t)(a * b + 127);
    return (uint8_t)((uint16_t)(x + 1 + (x >> 8)) >> 8);
}

static void pair_form_bytes(int f, const uint8_t *restrict A, const uint8_t *restrict B,
                            uint8_t *restrict D, const uint8_t *restrict m, int n,
                            const uint8_t *restrict K)
{
    switch (f) {
    case PAIR_A:
        PAIR_FORM_BYTES(a)
        break;
    case PAIR_B:
        PAIR_FORM_BYTES(b)
        break;
    case PAIR_CONST:
        for (int i = 0; i < n; i++)
            D[i] = (uint8_t)((K[i] & m[i]) | (D[i] & ~m[i]));
        break;
    case PAIR_ADD:
        PAIR_FORM_BYTES(add_sat8(a, b))
        break;
    case PAIR_ABSDIFF:
        PAIR_FORM_BYTES(a > b ? a - b : b - a)
        break;
    default:
        PAIR_FORM_BYTES(mul255_8(a, b))
        break;
    }
}

/* Two 8-bit inputs into 8-bit where every channel's table is an integer form
   (classify_pairs): the same bytes as the lookups, block by block. */
static void pairs_forms_u8(const pf_cpu_lut *l, const pf_frame *in, const pf_frame *in2,
                           const pf_frame *out, int y0, int y1)
{
    const int n = in->width * out->channels;
    int used[PAIR_FORMS] = {0};
    for (int c = 0; c < out->channels; c++)
        used[l->pair_form[c]] = 1;
    for (int y = y0; y < y1; y++) {
        const uint8_t *a = (const uint8_t *)in->data + (size_t)y * in->pitch;
        const uint8_t *b = (const uint8_t *)in2->data + (size_t)y * in2->pitch;
        uint8_t *d = (uint8_t *)out->data + (size_t)y * out->pitch;
        for (int i = 0; i < n; i += PAIR_BLOCK) {
            int len = n - i < PAIR_BLOCK ? n - i : PAIR_BLOCK;
            for (int f = 0; f < PAIR_FORMS; f++)
                if (used[f])
                    pair_form_bytes(f, a + i, b + i, d + i, l->pair_mask[f], len, l->pair_const);
        }
    }
}
PAIR_ROWS(pairs_u16, uint16_t)
PAIR_ROWS(pairs_f32, float)

void pf_cpu_lut_rows(const pf_cpu_lut *l, const pf_frame *in, const pf_frame *in2,
                     const pf_frame *out, int y0, int y1)
{
    if (l->pairs && l->pair_forms) {
        pairs_forms_u8(l, in, in2, out, y0, y1);
        return;
    }
    if (l->pairs) {
        (out->sample == PF_U8    ? pairs_u8
         : out->sample == PF_U16 ? pairs_u16
                                 : pairs_f32)(l, in, in2, out, y0, y1);
        return;
    }
    int u16 = in->sample == PF_U16;
    if (l->copy) {
        size_t row = (size_t)in->width * pf_frame_pixel_bytes(in->sample, in->channels);
        for (int y = y0; y < y1; y++)
            memcpy((char *)out->data + (size_t)y * out->pitch,
                   (const char *)in->data + (size_t)y * in->pitch, row);
        return;
    }
    if (l->tab32) {
        rows_rgba8(l, in, out, y0, y1);
        return;
    }
    switch (out->sample) {
    case PF_U8:
        (u16 ? rows_u16_u8 : rows_u8_u8)(l, in, out, y0, y1);
        break;
    case PF_U16:
        (u16 ? rows_u16_u16 : rows_u8_u16)(l, in, out, y0, y1);
        break;
    default:
        (u16 ? rows_u16_f32 : rows_u8_f32)(l, in, out, y0, y1);
        break;
    }
}
