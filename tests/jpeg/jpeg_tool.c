/* tests/jpeg/jpeg_tool.c: JPEG files for the command-line tests (jpeg_cli.sh).
 *
 *   jpeg_tool make OUT W H SPACE [ORIENTATION [ICC_BYTES [PROGRESSIVE]]]
 *       a pattern with mild noise (jpeg_make.c); SPACE 1 gray, 3 YCbCr 4:2:0, 4 CMYK;
 *       ICC_BYTES > 0 adds a fake "RGB " (or "GRAY") profile of that size
 *   jpeg_tool info FILE
 *       "WxH components=N progressive=P samp=HxV orientation=O icc=BYTES:SPACE exif=BYTES
 *        exif_orientation=O" (as stored: nothing applied)
 *   jpeg_tool diff A B
 *       "max=M psnr=P" between two images (PNG or JPEG, 8-bit, same size and channels)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpeg_make.h"
#include "pipefuse/jpeg.h"

static int load(const char *path, pf_frame *f)
{
    char err[512];
    FILE *fp = fopen(path, "rb");
    unsigned char b[3] = {0};
    if (fp) {
        if (fread(b, 1, 3, fp) != 3)
            b[0] = 0;
        fclose(fp);
    }
    int st = pf_jpeg_sniff(b, 3) ? pf_jpeg_read(path, NULL, f, NULL, NULL, err, sizeof err)
                                 : pf_png_read(path, 0, f, NULL, err, sizeof err);
    if (st != PF_OK)
        fprintf(stderr, "jpeg_tool: %s\n", err);
    return st;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "make") == 0) {
        jm_opts o = {.w = atoi(argv[3]), .h = atoi(argv[4]), .space = atoi(argv[5]), .seed = 3};
        o.orientation = argc > 6 ? atoi(argv[6]) : 0;
        size_t icc_n = argc > 7 ? (size_t)atol(argv[7]) : 0;
        o.progressive = argc > 8 ? atoi(argv[8]) : 0;
        unsigned char *icc = NULL;
        if (icc_n >= 128) {
            icc = malloc(icc_n);
            for (size_t i = 0; i < icc_n; i++)
                icc[i] = (unsigned char)(i * 7 + 1);
            icc[0] = (unsigned char)(icc_n >> 24), icc[1] = (unsigned char)(icc_n >> 16);
            icc[2] = (unsigned char)(icc_n >> 8), icc[3] = (unsigned char)icc_n;
            memcpy(icc + 16, o.space == 1 ? "GRAY" : "RGB ", 4);
            memcpy(icc + 36, "acsp", 4);
            o.icc = icc;
            o.icc_size = icc_n;
        }
        size_t n;
        unsigned char *jpg = jm_make(&o, &n);
        FILE *f = fopen(argv[2], "wb");
        if (!f || fwrite(jpg, 1, n, f) != n || fclose(f) != 0) {
            fprintf(stderr, "jpeg_tool: cannot write %s\n", argv[2]);
            return 1;
        }
        free(jpg);
        free(icc);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "info") == 0) {
        char err[512];
        pf_frame f;
        pf_jpeg_info in;
        pf_jpeg_meta *m = NULL;
        pf_jpeg_read_opts keep = {sizeof keep, 0, 0, 1};
        if (pf_jpeg_read(argv[2], &keep, &f, &in, &m, err, sizeof err) != PF_OK) {
            fprintf(stderr, "jpeg_tool: %s\n", err);
            return 1;
        }
        size_t icc_n = 0, exif_n = 0;
        const void *exif = NULL;
        pf_jpeg_meta_icc(m, NULL, &icc_n);
        pf_jpeg_meta_exif(m, &exif, &exif_n);
        printf("%dx%d components=%d progressive=%d samp=%dx%d orientation=%d icc=%zu:%s exif=%zu\n",
               in.width, in.height, in.components, in.progressive, in.h_samp, in.v_samp,
               in.orientation, icc_n, icc_n ? pf_jpeg_meta_icc_space(m) : "", exif_n);
        pf_jpeg_meta_free(m);
        pf_frame_free(&f);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "diff") == 0) {
        pf_frame a, b;
        if (load(argv[2], &a) != PF_OK)
            return 1;
        if (load(argv[3], &b) != PF_OK) {
            pf_frame_free(&a);
            return 1;
        }
        if (a.width != b.width || a.height != b.height || a.channels != b.channels ||
            a.sample != PF_U8 || b.sample != PF_U8) {
            printf("shape %dx%dx%d vs %dx%dx%d\n", a.width, a.height, a.channels, b.width, b.height,
                   b.channels);
            pf_frame_free(&a);
            pf_frame_free(&b);
            return 1;
        }
        double se = 0;
        int mx = 0;
        for (int y = 0; y < a.height; y++)
            for (int i = 0; i < a.width * a.channels; i++) {
                int d = ((unsigned char *)a.data)[y * a.pitch + i] -
                        ((unsigned char *)b.data)[y * b.pitch + i];
                se += d * d;
                mx = abs(d) > mx ? abs(d) : mx;
            }
        double mse = se / ((double)a.width * a.height * a.channels);
        printf("max=%d psnr=%.1f\n", mx, mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99.0);
        pf_frame_free(&a);
        pf_frame_free(&b);
        return 0;
    }
    fprintf(stderr, "usage: jpeg_tool make|info|diff ...\n");
    return 2;
}
