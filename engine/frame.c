/* engine/frame.c: frames in their own format, and the conversions at the edges to and
 * from the float RGBA working format. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- Edge conversions, one row at a time ------------------------------------------------ */

/* Integer samples load as k / max correctly rounded: the float nearest the fraction,
   which is the float a parameter written as that fraction parses to (0.2 for the byte
   51). A multiply by the rounded reciprocal 1 / max is one ulp off for 126 of the 256
   bytes and 512 of the 65536 halves, which put levels, threshold and histogram one step
   off at their edges. The GPU computes the same floats (kernels/fused_rt.h). */
static inline float load_sample(const void *row, pf_sample s, int i)
{
    switch (s) {
    case PF_U8:
        return (float)((const uint8_t *)row)[i] / 255.0f;
    case PF_U16:
        return (float)((const uint16_t *)row)[i] / 65535.0f;
    default:
        return ((const float *)row)[i];
    }
}

void pf_row_to_float4(const void *row, pf_sample s, int channels, int n, pf_float4 *out)
{
    for (int x = 0; x < n; x++) {
        int i = x * channels;
        pf_float4 v;
        switch (channels) {
        case 1:
            v.x = v.y = v.z = load_sample(row, s, i);
            v.w = 1.0f;
            break;
        case 2:
            v.x = v.y = v.z = load_sample(row, s, i);
            v.w = load_sample(row, s, i + 1);
            break;
        case 3:
            v.x = load_sample(row, s, i);
            v.y = load_sample(row, s, i + 1);
            v.z = load_sample(row, s, i + 2);
            v.w = 1.0f;
            break;
        default:
            v.x = load_sample(row, s, i);
            v.y = load_sample(row, s, i + 1);
            v.z = load_sample(row, s, i + 2);
            v.w = load_sample(row, s, i + 3);
            break;
        }
        out[x] = v;
    }
}

/* Round to nearest, clamp to [0, max]; NaN becomes 0. */
static inline void store_sample(void *row, pf_sample s, int i, float v)
{
    switch (s) {
    case PF_U8: {
        float t = v * 255.0f + 0.5f;
        ((uint8_t *)row)[i] = (uint8_t)(t >= 255.0f ? 255 : (t > 0.0f ? (int)t : 0));
        break;
    }
    case PF_U16: {
        float t = v * 65535.0f + 0.5f;
        ((uint16_t *)row)[i] = (uint16_t)(t >= 65535.0f ? 65535 : (t > 0.0f ? (int)t : 0));
        break;
    }
    default:
        ((float *)row)[i] = v;
        break;
    }
}

void pf_row_from_float4(const pf_float4 *in, int n, void *row, pf_sample s, int channels)
{
    for (int x = 0; x < n; x++) {
        int i = x * channels;
        pf_float4 v = in[x];
        switch (channels) {
        case 1:
            store_sample(row, s, i, pf_luma(v));
            break;
        case 2:
            store_sample(row, s, i, pf_luma(v));
            store_sample(row, s, i + 1, v.w);
            break;
        case 3:
            store_sample(row, s, i, v.x);
            store_sample(row, s, i + 1, v.y);
            store_sample(row, s, i + 2, v.z);
            break;
        default:
            store_sample(row, s, i, v.x);
            store_sample(row, s, i + 1, v.y);
            store_sample(row, s, i + 2, v.z);
            store_sample(row, s, i + 3, v.w);
            break;
        }
    }
}
