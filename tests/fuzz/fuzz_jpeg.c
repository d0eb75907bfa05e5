/* tests/fuzz/fuzz_jpeg.c: libFuzzer target for the JPEG reader and writer.
 *
 * The input is a JPEG file's bytes, read from memory with a pixel limit and a memory
 * limit, its metadata kept; one input in two (by hash) keeps the stored orientation.
 * Checked: no memory error, undefined behaviour or exit from libjpeg; every failure
 * leaves a message naming the input and an empty frame, and no metadata; a success gives
 * a frame of the size info states (turned when the orientation was applied). A frame
 * that reads is encoded (quality, subsampling and progressive from the hash) with its
 * metadata, and the result must read back at the same size and channel count, with the
 * same ICC profile when one was written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "pipefuse/jpeg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_JPEG_MAX_PIXELS (1u << 20)
#define FZ_JPEG_MAX_MEMORY (64u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!pf_jpeg_available())
        return 0;
    uint32_t h = fz_hash(data, size);
    pf_jpeg_read_opts o = {sizeof o, FZ_JPEG_MAX_PIXELS, FZ_JPEG_MAX_MEMORY, (int)(h & 1)};
    pf_frame f;
    pf_jpeg_info info;
    pf_jpeg_meta *meta = (pf_jpeg_meta *)1;
    char err[1024] = "";
    int st = pf_jpeg_read_memory(data, size, "fuzz.jpg", &o, &f, &info, &meta, err, sizeof err);
    if (st != PF_OK) {
        FZ_ASSERT(f.data == NULL && meta == NULL, "a failure left a frame or metadata");
        FZ_ASSERT(strncmp(err, "fuzz.jpg: ", 10) == 0, "a failure (%s) without a message: '%s'",
                  pf_status_name(st), err);
        return 0;
    }
    FZ_ASSERT(f.data && f.sample == PF_U8 && (f.channels == 1 || f.channels == 3),
              "a frame of %d channels", f.channels);
    FZ_ASSERT(f.width == info.width && f.height == info.height, "frame %dx%d, info %dx%d", f.width,
              f.height, info.width, info.height);
    int turned = info.applied && info.orientation >= 5;
    FZ_ASSERT(f.width == (turned ? info.stored_height : info.stored_width),
              "orientation %d: width %d of stored %dx%d", info.orientation, f.width,
              info.stored_width, info.stored_height);
    pf_jpeg_write_opts w = {sizeof w, (int)(h >> 8) % 100 + 1, (int)(h >> 16) % 4,
                            (int)(h >> 20) & 1, (int)(h >> 21) & 1};
    void *out;
    size_t out_size;
    st = pf_jpeg_encode(&f, &w, meta, &out, &out_size, err, sizeof err);
    FZ_ASSERT(st == PF_OK, "encoding what was read: %s", err);
    pf_frame g;
    pf_jpeg_meta *back = NULL;
    st = pf_jpeg_read_memory(out, out_size, "again", &o, &g, NULL, &back, err, sizeof err);
    FZ_ASSERT(st == PF_OK, "reading what was written: %s", err);
    FZ_ASSERT(g.width == f.width && g.height == f.height && g.channels == f.channels,
              "written %dx%dx%d, read back %dx%dx%d", f.width, f.height, f.channels, g.width,
              g.height, g.channels);
    const void *a, *b;
    size_t na, nb;
    const char *space = pf_jpeg_meta_icc_space(meta);
    if (pf_jpeg_meta_icc(meta, &a, &na) && strcmp(space, f.channels == 1 ? "GRAY" : "RGB ") == 0)
        FZ_ASSERT(pf_jpeg_meta_icc(back, &b, &nb) && na == nb && memcmp(a, b, na) == 0,
                  "the ICC profile of %zu bytes did not survive", na);
    pf_frame_free(&g);
    pf_jpeg_meta_free(back);
    free(out);
    pf_jpeg_meta_free(meta);
    pf_frame_free(&f);
    return 0;
}
