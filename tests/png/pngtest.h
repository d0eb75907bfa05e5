/* tests/png/pngtest.h: helpers the PNG tests share: whole files in and out of
 * memory, and sample-by-sample frame comparison. */
#ifndef PF_PNGTEST_H
#define PF_PNGTEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipefuse/pipefuse.h"

static inline void *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    *size = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

static inline void spit(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static inline unsigned frame_sample(const pf_frame *f, int x, int y, int c)
{
    const char *row = (const char *)f->data + (size_t)y * f->pitch;
    size_t i = (size_t)x * f->channels + c;
    return f->sample == PF_U16 ? ((const uint16_t *)row)[i] : ((const uint8_t *)row)[i];
}

static inline long frame_diff(const pf_frame *a, const pf_frame *b)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample)
        return -1;
    long n = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++)
            for (int c = 0; c < a->channels; c++)
                n += frame_sample(a, x, y, c) != frame_sample(b, x, y, c);
    return n;
}

#endif
