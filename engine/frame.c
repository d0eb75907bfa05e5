/* engine/frame.c: frames in their own format, and the conversions at the edges to and
 * from the float RGBA working format. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/edge.h"
#include "frame.h"
#include "pipefuse/png.h"

#define PF_API __attribute__((visibility("default")))

PF_API size_t pf_frame_pixel_bytes(pf_sample sample, int channels)
{
    static const size_t sample_bytes[] = {1, 2, 4};
    if ((unsigned)sample > PF_F32 || channels < 1 || channels > 4)
        return 0;
    return sample_bytes[sample] * (size_t)channels;
}

PF_API int pf_frame_alloc(pf_frame *f, int width, int height, pf_sample sample, int channels)
{
    memset(f, 0, sizeof *f);
    size_t bpp = pf_frame_pixel_bytes(sample, channels);
    if (!bpp || width <= 0 || height <= 0)
        return PF_INVALID_ARGUMENT;
    size_t pitch = ((size_t)width * bpp + 15) & ~(size_t)15;
    if ((size_t)height > SIZE_MAX / pitch)
        return PF_NO_MEMORY;
    void *data = NULL;
    if (posix_memalign(&data, 64, pitch * (size_t)height) != 0)
        return PF_NO_MEMORY;
    f->data = data;
    f->width = width;
    f->height = height;
    f->pitch = pitch;
    f->sample = sample;
    f->channels = channels;
    return PF_OK;
}

PF_API void pf_frame_free(pf_frame *f)
{
    if (!f)
        return;
    free(f->data);
    f->data = NULL;
}

/* ---- Edge conversions, one row at a time ------------------------------------------------
 *
 * Written so that the compiler vectorises them (-O3 does, on SSE2 already): each format
 * has its own loop with the channel count a constant, samples convert in plain
 * elementwise loops over the row, and stores clamp with max/min, which compile to
 * maxps/minps, instead of branches. The results are the same floats and the same
 * bytes as the per-sample definitions in the comments below, for every input. */

/* Where the compiler and the C library can dispatch at load time (GCC or clang on x86-64
   with ifunc), the conversion loops are also built for AVX2 and the CPU picks: twice the
   vector width, about half the time per row; the same arithmetic, so the same results.
   Not under the sanitizers: the ifunc resolvers run before their runtimes are set up
   (a ThreadSanitizer build crashed while loading the library). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) &&                                \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define PF_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PF_VECTOR_CLONES
#endif

/* Integer samples load as k / max correctly rounded (pf_code_to_float, kernels/edge.h):
   the float nearest the fraction, which is the float a parameter written as that fraction
   parses to (0.2 for the byte 51). On the CPU that is a division, which vectorises
   (divps); the GPU computes the same floats with an FMA-corrected product. */
#define LOAD_ROW(T, MAX)                                                                           \
    PF_VECTOR_CLONES static void load_##T(const T *restrict src, int channels, int n,              \
                                          pf_float4 *restrict out)                                 \
    {                                                                                              \
        float *restrict o = (float *)out;                                                          \
        switch (channels) {                                                                        \
        case 1:                                                                                    \
            for (int x = 0; x < n; x++) {                                                          \
                out[x] = pf_gray_pixel(pf_code_to_float(src[x], MAX), 1.0f);                       \
            }                                                                                      \
            break;                                                                                 \
        case 2:                                                                                    \
            for (int x = 0; x < n; x++) {                                                          \
                out[x] = pf_gray_pixel(pf_code_to_float(src[2 * x], MAX),                          \
                                       pf_code_to_float(src[2 * x + 1], MAX));                     \
            }                                                                                      \
            break;                                                                                 \
        case 3:                                                                                    \
            for (int x = 0; x < n; x++) {                                                          \
                for (int c = 0; c < 3; c++)                                                        \
                    o[4 * x + c] = pf_code_to_float(src[3 * x + c], MAX);                          \
                o[4 * x + 3] = 1.0f;                                                               \
            }                                                                                      \
            break;                                                                                 \
        default:                                                                                   \
            for (int i = 0; i < 4 * n; i++)                                                        \
                o[i] = pf_code_to_float(src[i], MAX);                                              \
            break;                                                                                 \
        }                                                                                          \
    }

LOAD_ROW(uint8_t, 255.0f)
LOAD_ROW(uint16_t, 65535.0f)

/* Float samples as they are, a loop per channel count that reads exactly the row's
   samples (one loop for every count let GCC 12 read 8 bytes past a gray+alpha row's
   last pixel, which valgrind showed: a fault where the frame ends at a page). */
static void load_float(const float *restrict src, int channels, int n, float *restrict out)
{
    switch (channels) {
    case 1:
        for (int x = 0; x < n; x++) {
            out[4 * x] = out[4 * x + 1] = out[4 * x + 2] = src[x];
            out[4 * x + 3] = 1.0f;
        }
        break;
    case 2:
        for (int x = 0; x < n; x++) {
            out[4 * x] = out[4 * x + 1] = out[4 * x + 2] = src[2 * x];
            out[4 * x + 3] = src[2 * x + 1];
        }
        break;
    case 3:
        for (int x = 0; x < n; x++) {
            for (int c = 0; c < 3; c++)
                out[4 * x + c] = src[3 * x + c];
            out[4 * x + 3] = 1.0f;
        }
        break;
    default:
        memcpy(out, src, sizeof(float) * 4 * (size_t)n);
        break;
    }
}

void pf_row_to_float4(const void *row, pf_sample s, int channels, int n, pf_float4 *out)
{
    float *o = (float *)out;
    if (s == PF_U8) {
        load_uint8_t(row, channels, n, out);
    } else if (s == PF_U16) {
        load_uint16_t(row, channels, n, out);
    } else {
        load_float(row, channels, n, o);
    }
}

/* Integer stores: trunc(v * max + 0.5) clamped to [0, max], NaN as 0 (pf_quant_clamp,
   kernels/edge.h: packed compares and masks, then the truncating conversion to T); gray
   outputs take pf_luma_rn. */
#define STORE_ROW(T, MAX)                                                                          \
    PF_VECTOR_CLONES static void store_##T(const float *restrict in, int n, T *restrict dst,       \
                                           int channels)                                           \
    {                                                                                              \
        switch (channels) {                                                                        \
        case 1:                                                                                    \
            for (int x = 0; x < n; x++)                                                            \
                dst[x] = (T)pf_quant_clamp(pf_luma_rn(*(const pf_float4 *)(in + 4 * x)), MAX);     \
            break;                                                                                 \
        case 2:                                                                                    \
            for (int x = 0; x < n; x++) {                                                          \
                dst[2 * x] = (T)pf_quant_clamp(pf_luma_rn(*(const pf_float4 *)(in + 4 * x)), MAX); \
                dst[2 * x + 1] = (T)pf_quant_clamp(in[4 * x + 3], MAX);                            \
            }                                                                                      \
            break;                                                                                 \
        case 3:                                                                                    \
            for (int x = 0; x < n; x++)                                                            \
                for (int c = 0; c < 3; c++)                                                        \
                    dst[3 * x + c] = (T)pf_quant_clamp(in[4 * x + c], MAX);                        \
            break;                                                                                 \
        default:                                                                                   \
            for (int i = 0; i < 4 * n; i++)                                                        \
                dst[i] = (T)pf_quant_clamp(in[i], MAX);                                            \
            break;                                                                                 \
        }                                                                                          \
    }

STORE_ROW(uint8_t, 255.0f)
STORE_ROW(uint16_t, 65535.0f)

void pf_row_from_float4(const pf_float4 *in, int n, void *row, pf_sample s, int channels)
{
    const float *f = (const float *)in;
    if (s == PF_U8) {
        store_uint8_t(f, n, row, channels);
    } else if (s == PF_U16) {
        store_uint16_t(f, n, row, channels);
    } else if (channels == 4) {
        memcpy(row, f, sizeof(float) * 4 * (size_t)n);
    } else {
        float *dst = row;
        for (int x = 0; x < n; x++) {
            float *p = dst + (size_t)x * channels;
            pf_float4 v = in[x];
            if (channels <= 2) {
                p[0] = pf_luma_rn(v);
                if (channels == 2)
                    p[1] = v.w;
            } else {
                p[0] = v.x, p[1] = v.y, p[2] = v.z;
            }
        }
    }
}
