/* bench/png_codec_bench.c: PNG decode and encode of single files, on this machine.
 *
 * Decode, for each file: pipefuse's reader (pf_png_read: libpng with its checks), plain
 * libpng (png_read_image, no checks of ours) and, built with -DPF_HAVE_SPNG, libspng
 * (spng_decode_image, SPNG_FMT_RAW: rows as stored); libspng's pixels are compared with
 * libpng's. Encode: libpng writing rows serially as `pipefuse run` does (cli/outfile.c:
 * png_set_compression_level, png_set_filter), then engine/png_deflate.c on 1 thread and
 * on --threads threads, each to memory; the segmented file is read back and compared.
 * The best of --repeat runs is printed: wall milliseconds, and the CPU milliseconds of
 * every thread in that run.
 *
 *   cc -O2 -o /tmp/png_codec_bench bench/png_codec_bench.c engine/png_deflate.c -Iengine \
 *      -Iengine/include -LBUILD/lib -Wl,-rpath,BUILD/lib -lpipefuse -lpng -lz -lpthread \
 *      [-DPF_HAVE_SPNG -lspng]
 *   /tmp/png_codec_bench [--threads N] [--zlib L] [--filter up|all|none|sub|avg|paeth|fast]
 *      [--grain A] [--repeat R] [--decode 0|1] FILE...
 *
 * --grain A adds uniform noise of +-A to the decoded pixels before encoding (an image
 * enlarged from a small photo is smoother than a camera's, and deflates faster). */
#define _POSIX_C_SOURCE 200809L
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef PF_HAVE_SPNG
#include <spng.h>
#endif

#include "pipefuse/png.h"
#include "png_deflate.h"

/* CPU time of the process, all threads, user and system. */
static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static int buf_write(void *ctx, const void *d, size_t n)
{
    buf *b = ctx;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 20;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    return 0;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* ---- Decoders ---------------------------------------------------------------------- */

typedef struct mem {
    const unsigned char *p;
    size_t n, at;
} mem;

static void mem_read(png_structp png, png_bytep out, size_t n)
{
    mem *m = png_get_io_ptr(png);
    if (m->at + n > m->n)
        png_error(png, "truncated");
    memcpy(out, m->p + m->at, n);
    m->at += n;
}

/* Plain libpng from memory: rows as stored (16 bits big-endian), into out. */
static int libpng_decode(const unsigned char *data, size_t n, unsigned char *out, size_t *len)
{
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_bytep *rows = NULL;
    mem m = {data, n, 0};
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(rows);
        return -1;
    }
    png_set_read_fn(png, &m, mem_read);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    png_uint_32 h = png_get_image_height(png, info);
    size_t rb = png_get_rowbytes(png, info);
    rows = malloc(h * sizeof *rows);
    for (png_uint_32 y = 0; y < h; y++)
        rows[y] = out + rb * y;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    *len = rb * h;
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    return 0;
}

#ifdef PF_HAVE_SPNG
static int spng_decode(const unsigned char *data, size_t n, unsigned char *out, size_t cap,
                       size_t *len)
{
    spng_ctx *c = spng_ctx_new(0);
    if (!c)
        return -1;
    spng_set_image_limits(c, 0x7fffffff, 0x7fffffff);
    spng_set_chunk_limits(c, 1 << 26, 1 << 28);
    int rc = spng_set_png_buffer(c, data, n);
    size_t need = 0;
    if (!rc)
        rc = spng_decoded_image_size(c, SPNG_FMT_RAW, &need);
    if (!rc && need > cap)
        rc = -1;
    if (!rc)
        rc = spng_decode_image(c, out, need, SPNG_FMT_RAW, 0);
    *len = need;
    spng_ctx_free(c);
    return rc ? -1 : 0;
}
#endif

/* ---- Encoders ---------------------------------------------------------------------- */

static void png_write_mem(png_structp png, png_bytep d, size_t n)
{
    if (buf_write(png_get_io_ptr(png), d, n) != 0)
        png_error(png, "out of memory");
}

static void png_flush_mem(png_structp png)
{
    (void)png;
}

static const int ctypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                             PNG_COLOR_TYPE_RGB_ALPHA};

/* libpng, row by row, as cli/outfile.c writes. */
static int libpng_encode(const pf_frame *f, int level, int filter, buf *out)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    png_set_write_fn(png, out, png_write_mem, png_flush_mem);
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_set_compression_level(png, level);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, filter);
    png_set_IHDR(png, info, (png_uint_32)f->width, (png_uint_32)f->height,
                 f->sample == PF_U16 ? 16 : 8, ctypes[f->channels - 1], PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    if (f->sample == PF_U16)
        png_set_swap(png);
    for (int y = 0; y < f->height; y++)
        png_write_row(png, (png_const_bytep)f->data + (size_t)y * f->pitch);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return 0;
}

/* engine/png_deflate.c on `threads` threads: IHDR, the image data, IEND. */
static int pngz_encode(const pf_frame *f, int level, int filter, int threads, buf *out)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char ihdr[13] = {0};
    for (int i = 0; i < 4; i++) {
        ihdr[i] = (unsigned char)((uint32_t)f->width >> (24 - 8 * i));
        ihdr[4 + i] = (unsigned char)((uint32_t)f->height >> (24 - 8 * i));
    }
    ihdr[8] = f->sample == PF_U16 ? 16 : 8;
    ihdr[9] = (unsigned char)ctypes[f->channels - 1];
    buf_write(out, sig, 8);
    pf_pngz_chunk(buf_write, out, "IHDR", ihdr, 13);
    pf_pngz_opts o = {f->width, f->height, ihdr[8], f->channels, level, filter, threads, 1};
    pf_pngz *z;
    char err[256];
    if (pf_pngz_begin(&o, buf_write, out, &z, err, sizeof err) != 0 ||
        pf_pngz_rows(z, f->data, f->pitch, f->height, err, sizeof err) != 0) {
        fprintf(stderr, "png_codec_bench: %s\n", err);
        pf_pngz_free(z);
        return -1;
    }
    pf_pngz_free(z);
    return pf_pngz_chunk(buf_write, out, "IEND", NULL, 0);
}

/* ---- Main ----------------------------------------------------------------------------- */

static int parse_filter(const char *v)
{
    static const struct {
        const char *name;
        int mask;
    } f[] = {{"none", PNG_FILTER_NONE}, {"sub", PNG_FILTER_SUB},     {"up", PNG_FILTER_UP},
             {"avg", PNG_FILTER_AVG},   {"paeth", PNG_FILTER_PAETH}, {"all", PNG_ALL_FILTERS},
             {"fast", PNG_FAST_FILTERS}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (strcmp(v, f[i].name) == 0)
            return f[i].mask;
    return -1;
}

int main(int argc, char **argv)
{
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), level = 1, filter = PNG_FILTER_UP;
    int grain = 0, repeat = 3, first = 1, decode = 1;
    for (; first < argc && argv[first][0] == '-' && first + 1 < argc; first += 2) {
        const char *a = argv[first], *v = argv[first + 1];
        if (!strcmp(a, "--threads"))
            threads = atoi(v);
        else if (!strcmp(a, "--zlib"))
            level = atoi(v);
        else if (!strcmp(a, "--filter"))
            filter = parse_filter(v);
        else if (!strcmp(a, "--grain"))
            grain = atoi(v);
        else if (!strcmp(a, "--repeat"))
            repeat = atoi(v);
        else if (!strcmp(a, "--decode"))
            decode = atoi(v);
        else
            break;
    }
    if (first >= argc || filter < 0 || threads < 1 || repeat < 1) {
        fprintf(stderr, "usage: png_codec_bench [--threads N] [--zlib L] [--filter F] "
                        "[--grain A] [--repeat R] [--decode 0|1] FILE...\n");
        return 2;
    }
    printf("file\tmegapixels\tMB\tstep\tms\tcpu_ms\tbytes\n");
    int bad = 0;
    for (int i = first; i < argc; i++) {
        size_t n;
        unsigned char *data = slurp(argv[i], &n);
        pf_frame f;
        char err[512];
        if (!data || pf_png_read(argv[i], 0, &f, NULL, err, sizeof err) != PF_OK) {
            fprintf(stderr, "png_codec_bench: %s: cannot read\n", argv[i]);
            free(data);
            bad = 1;
            continue;
        }
        double mp = (double)f.width * f.height / 1e6, mb = (double)n / 1e6;
        size_t raw = (size_t)f.height * f.pitch + (size_t)f.height;
        unsigned char *a = malloc(raw * 2), *b = malloc(raw * 2);
#define BEST(name, bytes, expr)                                                                    \
    do {                                                                                           \
        double best = 1e30, best_cpu = 0;                                                          \
        for (int r = 0; r < repeat; r++) {                                                         \
            double t0 = now_ms(), c0 = cpu_ms();                                                   \
            if ((expr) != 0) {                                                                     \
                fprintf(stderr, "png_codec_bench: %s: %s failed\n", argv[i], name);                \
                bad = 1;                                                                           \
                break;                                                                             \
            }                                                                                      \
            double t = now_ms() - t0, c = cpu_ms() - c0;                                           \
            if (t < best) {                                                                        \
                best = t;                                                                          \
                best_cpu = c;                                                                      \
            }                                                                                      \
        }                                                                                          \
        printf("%s\t%.1f\t%.1f\t%s\t%.1f\t%.1f\t%zu\n", argv[i], mp, mb, name, best, best_cpu,     \
               (size_t)(bytes));                                                                   \
    } while (0)
        pf_frame tmp;
        if (decode) {
            BEST("decode pipefuse (libpng)", n,
                 (pf_png_read_memory(data, n, argv[i], 0, &tmp, NULL, err, sizeof err) == PF_OK
                      ? (pf_frame_free(&tmp), 0)
                      : -1));
            size_t la = 0, lb = 0;
            BEST("decode libpng", n, libpng_decode(data, n, a, &la));
            (void)lb;
#ifdef PF_HAVE_SPNG
            BEST("decode libspng", n, spng_decode(data, n, b, raw * 2, &lb));
            if (la != lb || memcmp(a, b, la) != 0) {
                fprintf(stderr, "png_codec_bench: %s: libspng's pixels differ from libpng's\n",
                        argv[i]);
                bad = 1;
            }
#endif
        }
        if (grain > 0) {
            unsigned s = 12345;
            size_t rowb = (size_t)f.width * f.channels * (f.sample == PF_U16 ? 2 : 1);
            for (int y = 0; y < f.height; y++) {
                unsigned char *row = (unsigned char *)f.data + (size_t)y * f.pitch;
                for (size_t k = 0; k < rowb; k++) {
                    s = s * 1103515245u + 12345u;
                    int v = row[k] + (int)((s >> 16) % (unsigned)(2 * grain + 1)) - grain;
                    row[k] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
            }
        }
        buf o = {0};
        BEST("encode libpng, serial (pipefuse run today)", o.n,
             (o.n = 0, libpng_encode(&f, level, filter, &o)));
        BEST("encode segments, 1 thread", o.n, (o.n = 0, pngz_encode(&f, level, filter, 1, &o)));
        char label[64];
        snprintf(label, sizeof label, "encode segments, %d threads", threads);
        BEST(label, o.n, (o.n = 0, pngz_encode(&f, level, filter, threads, &o)));
        pf_frame back;
        if (pf_png_read_memory(o.p, o.n, "segmented", 0, &back, NULL, err, sizeof err) != PF_OK) {
            fprintf(stderr, "png_codec_bench: %s: the segmented file does not read: %s\n", argv[i],
                    err);
            bad = 1;
        } else {
            size_t rowb = (size_t)f.width * f.channels * (f.sample == PF_U16 ? 2 : 1);
            for (int y = 0; y < f.height; y++)
                if (memcmp((char *)f.data + (size_t)y * f.pitch,
                           (char *)back.data + (size_t)y * back.pitch, rowb) != 0) {
                    fprintf(stderr, "png_codec_bench: %s: row %d differs read back\n", argv[i], y);
                    bad = 1;
                    break;
                }
            pf_frame_free(&back);
        }
        free(o.p);
        free(a);
        free(b);
        free(data);
        pf_frame_free(&f);
    }
    return bad;
}
