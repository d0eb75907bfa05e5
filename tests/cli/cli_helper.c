/* tests/cli/cli_helper.c: what cli_test.sh cannot do with the shell alone.
 *
 *   cli_helper pngs DIR          writes small PNGs of every colour type and depth to DIR
 *   cli_helper truncate SRC DST  writes the first half of SRC to DST (a corrupt PNG)
 *   cli_helper json FILE...      exit 0 when every FILE is one valid JSON document
 *   cli_helper png FILE          prints "WIDTHxHEIGHT CHANNELS BITS" of a PNG
 *   cli_helper image FILE W H CHANNELS BITS   writes a W x H photo-like PNG (smooth
 *                                             gradients, edges and noise) of that format
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/png.h"

static int make_png(const char *dir, const char *name, int w, int h, pf_sample s, int ch,
                    unsigned seed)
{
    pf_frame f;
    char path[4096], err[1024];
    if (pf_frame_alloc(&f, w, h, s, ch) != PF_OK)
        return 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * ch; x++) {
            seed = seed * 1103515245u + 12345u;
            unsigned v = (seed >> 8) ^ (unsigned)(x * 7 + y * 13);
            char *row = (char *)f.data + (size_t)y * f.pitch;
            if (s == PF_U8)
                ((unsigned char *)row)[x] = (unsigned char)v;
            else
                ((unsigned short *)row)[x] = (unsigned short)v;
        }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = pf_png_write(path, &f, 1, err, sizeof err);
    if (rc != PF_OK)
        fprintf(stderr, "cli_helper: %s\n", err);
    pf_frame_free(&f);
    return rc != PF_OK;
}

/* Gradients, a disc with a hard edge and noise: stencils see both smooth areas and
   edges, and every sample differs from its neighbours. */
static int make_photo(const char *path, int w, int h, int ch, int bits)
{
    pf_frame f;
    char err[1024];
    pf_sample s = bits == 16 ? PF_U16 : PF_U8;
    if (ch < 1 || ch > 4 || (bits != 8 && bits != 16) || pf_frame_alloc(&f, w, h, s, ch) != PF_OK)
        return 1;
    unsigned seed = 7, max = bits == 16 ? 65535u : 255u;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            long dx = x - w / 3, dy = y - h / 2;
            int disc = dx * dx + dy * dy < (long)(h / 3) * (h / 3);
            for (int c = 0; c < ch; c++) {
                seed = seed * 1103515245u + 12345u;
                double v = (double)(x * (c + 1) + y * (3 - c % 3)) / (w + h) / 3.0 +
                           (disc ? 0.4 : 0.0) + ((seed >> 16) % 64) / 640.0;
                unsigned q = (unsigned)((v - (int)v) * max);
                char *row = (char *)f.data + (size_t)y * f.pitch;
                if (s == PF_U8)
                    ((unsigned char *)row)[x * ch + c] = (unsigned char)q;
                else
                    ((unsigned short *)row)[x * ch + c] = (unsigned short)q;
            }
        }
    int rc = pf_png_write(path, &f, 1, err, sizeof err);
    if (rc != PF_OK)
        fprintf(stderr, "cli_helper: %s\n", err);
    pf_frame_free(&f);
    return rc != PF_OK;
}

static int truncate_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    if (!in)
        return 1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    FILE *out = fopen(dst, "wb");
    if (!out || fwrite(buf, 1, n / 2, out) != n / 2) {
        if (out)
            fclose(out);
        return 1;
    }
    return fclose(out) != 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "pngs") == 0) {
        const char *d = argv[2];
        return make_png(d, "rgb8.png", 64, 48, PF_U8, 3, 1) |
               make_png(d, "gray16.png", 33, 21, PF_U16, 1, 2) |
               make_png(d, "rgba8.png", 17, 9, PF_U8, 4, 3) |
               make_png(d, "graya8.png", 40, 40, PF_U8, 2, 4) |
               make_png(d, "rgba16.png", 31, 7, PF_U16, 4, 5);
    }
    if (argc == 7 && strcmp(argv[1], "image") == 0)
        return make_photo(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    if (argc == 4 && strcmp(argv[1], "truncate") == 0)
        return truncate_file(argv[2], argv[3]);
    if (argc >= 3 && strcmp(argv[1], "json") == 0) {
        int bad = 0;
        for (int i = 2; i < argc; i++) {
            json_error_t e;
            json_t *j = json_load_file(argv[i], 0, &e);
            if (!j) {
                fprintf(stderr, "%s:%d:%d: %s\n", argv[i], e.line, e.column, e.text);
                bad = 1;
            }
            json_decref(j);
        }
        return bad;
    }
    if (argc == 3 && strcmp(argv[1], "png") == 0) {
        pf_frame f;
        pf_png_info info;
        char err[1024];
        if (pf_png_read(argv[2], 0, &f, &info, err, sizeof err) != PF_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        printf("%dx%d %d %d\n", f.width, f.height, f.channels, f.sample == PF_U16 ? 16 : 8);
        pf_frame_free(&f);
        return 0;
    }
    fprintf(stderr,
            "usage: cli_helper pngs DIR | truncate SRC DST | json FILE... | png FILE | image "
            "FILE W H CHANNELS BITS\n");
    return 2;
}
