/* tests/jpeg/jpeg_gpu.c: nvJPEG decode and encode (engine/nvjpeg.c) against libjpeg.
 * Label gpu: skipped (77) without a device or without libnvjpeg.
 *
 * - one batch of every kind of file: baseline colour (4:2:0, 4:2:2, 4:4:4, restart
 *   markers) to the hardware backend where the device has one, else nvJPEG's GPU
 *   backend; progressive and gray files to the GPU backend; arithmetic, CMYK and an EXIF
 *   orientation to apply to libjpeg. Each frame, copied back, is held to libjpeg's decode
 *   of the same file: exactly where libjpeg decoded it, else within the stated tolerance
 *   (nvJPEG's chroma upsampling and IDCT are not libjpeg's): mean absolute difference at
 *   most 1.5 steps, PSNR at least 38 dB, no sample more than 48 steps off;
 * - a truncated file in the batch fails alone (PF_IMAGE, named), the others decode;
 * - encode: a decoded device frame encoded at quality 95 reads back with libjpeg at its
 *   size within PSNR 35 dB of the frame, with the ICC profile and EXIF spliced in; a
 *   gray frame is written gray.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "jpeg_make.h"
#include "pipefuse/jpeg.h"
#include "testutil.h"

static int to_host(const pf_frame *d, pf_frame *h)
{
    if (pf_frame_alloc(h, d->width, d->height, PF_U8, d->channels) != PF_OK)
        return -1;
    return cudaMemcpy2D(h->data, h->pitch, d->data, d->pitch, (size_t)d->width * d->channels,
                        (size_t)d->height, cudaMemcpyDeviceToHost) == cudaSuccess
               ? 0
               : -1;
}

static void compare(const pf_frame *a, const pf_frame *b, double *mean, double *psnr, int *mx)
{
    double se = 0, sa = 0;
    *mx = 0;
    for (int y = 0; y < a->height; y++)
        for (int i = 0; i < a->width * a->channels; i++) {
            int d = ((unsigned char *)a->data)[y * a->pitch + i] -
                    ((unsigned char *)b->data)[y * b->pitch + i];
            sa += abs(d);
            se += (double)d * d;
            *mx = abs(d) > *mx ? abs(d) : *mx;
        }
    double n = (double)a->width * a->height * a->channels;
    *mean = sa / n;
    *psnr = se > 0 ? 10 * log10(255.0 * 255.0 * n / se) : 99;
}

int main(void)
{
    pf_jpeg_gpu *g;
    char err[1024];
    int st = pf_jpeg_gpu_create(16, &g, err, sizeof err);
    if (st == PF_UNSUPPORTED || st == PF_NO_DEVICE) {
        fprintf(stderr, "jpeg_gpu: skipped: %s\n", err);
        return PF_TEST_SKIPPED;
    }
    CHECKF(st == PF_OK, "%s", err);
    if (st != PF_OK)
        return pf_test_done("jpeg_gpu");
    int hw = strcmp(pf_jpeg_gpu_backend(g), "hardware") == 0;
    fprintf(stderr, "jpeg_gpu: batched backend %s\n", pf_jpeg_gpu_backend(g));
    static unsigned char icc[500];
    icc[2] = 1, icc[3] = 0xF4;
    memcpy(icc + 16, "RGB ", 4);
    memcpy(icc + 36, "acsp", 4);
    const struct {
        const char *name;
        jm_opts o;
        char want; /* 'H': hardware where present, else GPU backend */
    } k[] = {
        {"420", {.w = 640, .h = 480, .space = 3, .hs = 2, .vs = 2}, 'H'},
        {"422", {.w = 333, .h = 250, .space = 3, .hs = 2, .vs = 1}, 'H'},
        {"444", {.w = 320, .h = 241, .space = 3, .hs = 1, .vs = 1}, 'H'},
        {"restart", {.w = 512, .h = 384, .space = 3, .restart_rows = 2}, 'H'},
        {"progressive", {.w = 400, .h = 300, .space = 3, .progressive = 1}, 'g'},
        {"gray", {.w = 300, .h = 200, .space = 1}, 'g'},
        {"arithmetic", {.w = 200, .h = 150, .space = 3, .arith = 1}, 'c'},
        {"cmyk", {.w = 160, .h = 120, .space = 4}, 'c'},
        {"turned", {.w = 240, .h = 160, .space = 3, .orientation = 6}, 'c'},
        {"truncated", {.w = 256, .h = 256, .space = 3}, 'x'},
    };
    enum { N = sizeof k / sizeof k[0] };
    unsigned char *jpg[N];
    size_t size[N];
    const void *data[N];
    const char *names[N];
    for (int i = 0; i < N; i++) {
        jm_opts o = k[i].o;
        o.seed = (unsigned)i + 1;
        jpg[i] = jm_make(&o, &size[i]);
        if (k[i].want == 'x')
            size[i] = size[i] * 2 / 3;
        data[i] = jpg[i];
        names[i] = k[i].name;
    }
    pf_frame out[N];
    int status[N];
    char where[N];
    st = pf_jpeg_gpu_decode(g, data, size, names, N, NULL, NULL, out, status, where, err,
                            sizeof err);
    CHECKF(st == PF_IMAGE && strstr(err, "truncated"), "batch: %s: %s", pf_status_name(st), err);
    for (int i = 0; i < N; i++) {
        char want = k[i].want == 'H' ? (hw ? 'h' : 'g') : k[i].want;
        if (want == 'x') {
            CHECKF(status[i] == PF_IMAGE && out[i].data == NULL, "%s: %s", k[i].name,
                   pf_status_name(status[i]));
            continue;
        }
        CHECKF(status[i] == PF_OK, "%s: %s", k[i].name, pf_status_name(status[i]));
        if (status[i] != PF_OK)
            continue;
        CHECKF(where[i] == want, "%s: decoded by '%c', expected '%c'", k[i].name, where[i], want);
        pf_frame ref, got;
        CHECK(pf_jpeg_read_memory(jpg[i], size[i], k[i].name, NULL, &ref, NULL, NULL, err,
                                  sizeof err) == PF_OK);
        CHECK(to_host(&out[i], &got) == 0);
        CHECKF(got.width == ref.width && got.height == ref.height && got.channels == ref.channels,
               "%s: %dx%dx%d, libjpeg %dx%dx%d", k[i].name, got.width, got.height, got.channels,
               ref.width, ref.height, ref.channels);
        if (got.width == ref.width && got.height == ref.height && got.channels == ref.channels) {
            double mean, psnr;
            int mx;
            compare(&got, &ref, &mean, &psnr, &mx);
            fprintf(stderr, "jpeg_gpu: %-12s by '%c': mean %.3f, PSNR %.1f dB, max %d\n", k[i].name,
                    where[i], mean, psnr, mx);
            if (where[i] == 'c')
                CHECKF(mx == 0, "%s: libjpeg's frame differs on the device", k[i].name);
            else
                CHECKF(mean <= 1.5 && psnr >= 38 && mx <= 48,
                       "%s: mean %.3f, PSNR %.1f, max %d past the tolerance", k[i].name, mean, psnr,
                       mx);
        }
        /* encode the 420 and the gray frames back from the device */
        if (i == 0 || k[i].o.space == 1) {
            pf_jpeg_meta *m = NULL, *back = NULL;
            static const unsigned char exif[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 0, 0};
            CHECK(pf_jpeg_meta_new(icc, sizeof icc, exif, sizeof exif, &m, err, sizeof err) ==
                  PF_OK);
            pf_jpeg_write_opts q = {sizeof q, 95, PF_JPEG_420, 0, 1};
            void *enc;
            size_t enc_n;
            st = pf_jpeg_gpu_encode(g, &out[i], &q, m, NULL, &enc, &enc_n, err, sizeof err);
            CHECKF(st == PF_OK, "%s: encode: %s", k[i].name, err);
            pf_frame dec;
            pf_jpeg_info info;
            if (st == PF_OK && pf_jpeg_read_memory(enc, enc_n, "encoded", NULL, &dec, &info, &back,
                                                   err, sizeof err) == PF_OK) {
                double mean, psnr;
                int mx;
                CHECK(dec.width == got.width && dec.height == got.height &&
                      dec.channels == got.channels && info.components == got.channels);
                compare(&dec, &got, &mean, &psnr, &mx);
                fprintf(stderr, "jpeg_gpu: %s encoded: %zu bytes, PSNR %.1f dB\n", k[i].name, enc_n,
                        psnr);
                CHECKF(psnr >= 35, "%s: encoded PSNR %.1f", k[i].name, psnr);
                CHECK(pf_jpeg_meta_exif(back, NULL, NULL) == 1);
                CHECK(pf_jpeg_meta_icc(back, NULL, NULL) == (got.channels == 3));
                pf_frame_free(&dec);
            } else {
                CHECKF(0, "%s: the encoded file does not read: %s", k[i].name, err);
            }
            pf_jpeg_meta_free(back);
            pf_jpeg_meta_free(m);
            free(enc);
        }
        pf_frame_free(&got);
        pf_frame_free(&ref);
        pf_jpeg_gpu_frame_free(&out[i]);
    }
    for (int i = 0; i < N; i++)
        free(jpg[i]);
    pf_jpeg_gpu_destroy(g);
    return pf_test_done("jpeg_gpu");
}
