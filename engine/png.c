/* engine/png.c: PNG files to and from frames (pipefuse/png.h), with libpng.
 *
 * Reading goes through our own read callback over a FILE or a memory buffer, so a
 * short file is reported as truncated (with where it ends) and not as libpng's bare
 * "Read Error". The first 33 bytes (signature and IHDR) are read and checked here
 * before libpng starts, so the pixel limit is enforced before libpng or we allocate
 * anything that grows with the image.
 *
 * libpng reports errors by longjmp. read_image() and write_image() hold no state of
 * their own across the setjmp: everything that must be released lives in a struct the
 * caller owns and frees on every path, so no local variable can be clobbered.
 *
 * Writing goes to a temporary file beside the target, renamed over it only once the
 * whole file has been written and closed without error.
 */
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "pipefuse/bands.h"
#include "pipefuse/png.h"
#include "png_deflate.h"
#include "png_form.h"
#include "safefile.h"

#define PF_API __attribute__((visibility("default")))

/* Largest width or height we read: far beyond any photograph, small enough that a
   row (8 bytes a pixel at most) stays a few MiB. */
#define PF_PNG_MAX_SIDE (1u << 20)
/* Ancillary chunks are skipped (below), but libpng still bounds what it would buffer
   for any chunk it keeps, and how many. */
#define PF_PNG_CHUNK_CACHE_MAX  128
#define PF_PNG_CHUNK_MALLOC_MAX (16u << 20)
/* Signature (8) + IHDR length, type, 13 data bytes, CRC (25). */
#define PF_PNG_HEAD 33

/* ---- Metadata ----------------------------------------------------------------------------
 *
 * The colour, density and text chunks travel raw, byte for byte: libpng is told to treat
 * them as unknown chunks, so it neither parses nor decompresses them (an iCCP profile
 * or a zTXt is copied, never inflated), and the writer emits them as they came. */

struct pf_png_meta {
    int width, height, bit_depth, color_type; /* the source's IHDR */
    int n;
    png_unknown_chunk *chunks; /* name, data (our copy), size, location as read */
    int n_palette, n_trans;    /* a palette source's PLTE and tRNS, for png_form.c */
    unsigned char palette[256 * 3], trans[256];
};

/* The chunks kept: five bytes each (name and NUL), as png_set_keep_unknown_chunks wants. */
static const png_byte meta_names[] = "gAMA\0cHRM\0sRGB\0iCCP\0sBIT\0pHYs\0tEXt\0zTXt\0iTXt";
#define PF_PNG_META_NAMES 9

/* ---- What the libpng callbacks share, reading and writing ------------------------------ */

typedef struct pngio {
    const char *name; /* starts every message */
    char *err;
    size_t err_size;
    int status;       /* PF_OK until a failure is recorded; the first one wins */
    int fail_status;  /* what a libpng error means: PF_IMAGE reading, PF_IO writing */
    const char *what; /* libpng errors read "<name>: <what>: <libpng's text>" */
    int oom;          /* an allocation failed: report PF_NO_MEMORY */
    png_uint_32 warn_chunk;
    char warning[160]; /* libpng's last warning, to explain "Invalid IHDR data" */
} pngio;

static void fail(pngio *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records the first failure and its message; later ones are consequences. */
static void fail(pngio *c, int status, const char *fmt, ...)
{
    if (c->status != PF_OK)
        return;
    c->status = status;
    if (c->err && c->err_size) {
        va_list ap;
        va_start(ap, fmt);
        pf_verrf(c->err, c->err_size, fmt, ap);
        va_end(ap);
    }
}

static void on_png_error(png_structp png, png_const_charp msg)
{
    pngio *c = png_get_error_ptr(png);
    if (c->oom) {
        fail(c, PF_NO_MEMORY, "%s: out of memory (libpng: %s)", c->name, msg);
    } else if (c->warning[0] && c->warn_chunk == png_get_io_chunk_type(png)) {
        /* libpng explains a bad IHDR in warnings, then fails with "Invalid IHDR data". */
        fail(c, c->fail_status, "%s: %s: %s (%s)", c->name, c->what, msg, c->warning);
    } else {
        fail(c, c->fail_status, "%s: %s: %s", c->name, c->what, msg);
    }
    png_longjmp(png, 1);
}

/* Warnings never reach stderr: a library must not print. They are about ancillary
   chunks we do not use, or they precede an error that reports them. */
static void on_png_warning(png_structp png, png_const_charp msg)
{
    pngio *c = png_get_error_ptr(png);
    c->warn_chunk = png_get_io_chunk_type(png);
    snprintf(c->warning, sizeof c->warning, "%s", msg);
}

/* Our allocator only so that an allocation failure becomes PF_NO_MEMORY rather than a
   "corrupt PNG" with libpng's out-of-memory text in it. */
static png_voidp png_alloc(png_structp png, png_alloc_size_t size)
{
    void *p = malloc(size);
    if (!p) {
        pngio *c = png_get_mem_ptr(png);
        c->oom = 1;
    }
    return p;
}

static void png_dealloc(png_structp png, png_voidp p)
{
    free(p);
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static png_uint_32 be32(const unsigned char *p)
{
    return (png_uint_32)p[0] << 24 | (png_uint_32)p[1] << 16 | (png_uint_32)p[2] << 8 | p[3];
}

/* CRC-32 of the PNG spec, bitwise: only ever run over the 17 bytes of IHDR. */
static png_uint_32 crc32_small(const unsigned char *p, size_t n)
{
    png_uint_32 c = 0xffffffffu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

/* ---- Reading ----------------------------------------------------------------------------- */

typedef struct reader {
    pngio io;
    FILE *fp;                 /* the source: a file, or */
    const unsigned char *mem; /* a memory buffer */
    size_t mem_size;
    size_t pos; /* bytes taken from the source so far */
    unsigned char head[PF_PNG_HEAD];
    size_t head_len, head_pos; /* head bytes read, and handed to libpng */
    unsigned long long max_pixels;
    png_structp png;
    png_infop info;
    png_bytep *rows;
    unsigned char *index; /* palette images: the indices, expanded by expand_palette */
    pf_frame frame;
    pf_png_info hdr;
    int want_meta;     /* keep the metadata chunks (pf_png_read_meta) */
    pf_png_meta *meta; /* and here they are, after a successful read */
    int pal;           /* palette indices come one a byte, expanded by expand_palette_row */
    unsigned long long src_size; /* the whole source's size in bytes; 0: not known (a pipe) */
    int actl;                    /* an APNG acTL chunk came before the image data ... */
    png_uint_32 actl_frames;     /* ... and said this many frames */
} reader;

/* Up to n bytes from the source; fewer at its end. A read error is recorded as PF_IO. */
static size_t source_read(reader *r, void *buf, size_t n)
{
    size_t got;
    if (r->fp) {
        got = fread(buf, 1, n, r->fp);
        if (got < n && ferror(r->fp))
            fail(&r->io, PF_IO, "%s: read error: %s", r->io.name, strerror(errno));
    } else {
        size_t left = r->mem_size - r->pos;
        got = n < left ? n : left;
        if (got)
            memcpy(buf, r->mem + r->pos, got);
    }
    r->pos += got;
    return got;
}

static void chunk_name(png_uint_32 type, char name[5])
{
    for (int i = 0; i < 4; i++) {
        unsigned char ch = (unsigned char)(type >> (24 - 8 * i));
        name[i] = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ? (char)ch : '?';
    }
    name[4] = '\0';
}

static void fail_truncated(reader *r)
{
    const char *src = r->fp ? "file" : "data";
    png_uint_32 type = r->png ? png_get_io_chunk_type(r->png) : 0;
    if (!type) {
        fail(&r->io, PF_IMAGE, "%s: truncated PNG: the %s ends after %zu bytes", r->io.name, src,
             r->pos);
        return;
    }
    char name[5];
    chunk_name(type, name);
    /* While libpng reads a chunk header, its chunk is still the previous one. */
    int in_header = (png_get_io_state(r->png) & PNG_IO_MASK_LOC) == PNG_IO_CHUNK_HDR;
    fail(&r->io, PF_IMAGE, "%s: truncated PNG: the %s ends after %zu bytes, %s the %s chunk",
         r->io.name, src, r->pos, in_header ? "after" : "inside", name);
}

/* libpng skips an APNG's acTL (animation control) as an unknown ancillary chunk, and
   would hand us the default image alone. Its frame count is taken here, in passing, as
   libpng reads the chunk's first data bytes; read_info refuses an animation. */
static void note_actl(reader *r, png_structp png, const unsigned char *buf, size_t n)
{
    if (r->actl || png_get_io_chunk_type(png) != 0x6163544cu /* acTL */ ||
        (png_get_io_state(png) & PNG_IO_MASK_LOC) != PNG_IO_CHUNK_DATA || n < 4)
        return;
    r->actl = 1;
    r->actl_frames = be32(buf);
}

static void read_callback(png_structp png, png_bytep buf, size_t n)
{
    reader *r = png_get_io_ptr(png);
    size_t got = 0;
    if (r->head_pos < r->head_len) {
        got = r->head_len - r->head_pos < n ? r->head_len - r->head_pos : n;
        memcpy(buf, r->head + r->head_pos, got);
        r->head_pos += got;
    }
    if (got < n)
        got += source_read(r, buf + got, n - got);
    if (got < n) {
        fail_truncated(r); /* no-op after a read error, which was recorded first */
        png_error(png, "truncated");
    }
    note_actl(r, png, buf, n);
}

/* Width and height against the per-side limit and max_pixels. */
static int check_size(reader *r, png_uint_32 w, png_uint_32 h)
{
    if (w > PF_PNG_MAX_SIDE || h > PF_PNG_MAX_SIDE) {
        fail(&r->io, PF_TOO_LARGE,
             "%s: image is %lux%lu, larger than the limit of %u pixels per side", r->io.name,
             (unsigned long)w, (unsigned long)h, PF_PNG_MAX_SIDE);
        return PF_TOO_LARGE;
    }
    unsigned long long n = (unsigned long long)w * h;
    if (n > r->max_pixels) {
        fail(&r->io, PF_TOO_LARGE,
             "%s: image is %lux%lu = %llu pixels, more than the limit of %llu "
             "(max_pixels, --max-pixels); not decoded",
             r->io.name, (unsigned long)w, (unsigned long)h, n, r->max_pixels);
        return PF_TOO_LARGE;
    }
    return PF_OK;
}

/* The most that deflate can expand: a run of 258 bytes coded in 2 bits (zlib's FAQ). */
#define PF_PNG_ZLIB_MAX_RATIO 1032u

/* Whether a source of r->src_size bytes can hold the pixels that IHDR declares, even
   compressed at deflate's greatest ratio. A decompression bomb is a tiny file whose
   header claims a huge image: without this, the frame is allocated (gigabytes, within
   max_pixels) before libpng finds "Not enough image data". The bound counts the packed
   samples alone, no filter bytes, so it is below the true size, interlaced or not. */
static int check_data(reader *r, png_uint_32 w, png_uint_32 h, int depth, int ctype)
{
    if (!r->src_size || r->src_size > ~0ull / (2 * PF_PNG_ZLIB_MAX_RATIO))
        return PF_OK; /* not known (a pipe), or too big for the product to matter */
    unsigned samples = ctype == PNG_COLOR_TYPE_RGB_ALPHA ? 4
                       : ctype == PNG_COLOR_TYPE_RGB     ? 3
                       : ctype == PNG_COLOR_TYPE_GA      ? 2
                                                         : 1;
    /* at most 2^20 * 2^20 * 4 * 16 bits: no overflow */
    unsigned long long need = (unsigned long long)w * h * samples * (unsigned)depth / 8;
    if (need <= r->src_size * PF_PNG_ZLIB_MAX_RATIO + 65536)
        return PF_OK;
    fail(&r->io, PF_IMAGE,
         "%s: truncated or corrupt PNG: its header declares %lux%lu pixels (%llu bytes of "
         "samples), more than its %llu bytes can hold at deflate's greatest compression "
         "(%u:1)",
         r->io.name, (unsigned long)w, (unsigned long)h, need, r->src_size, PF_PNG_ZLIB_MAX_RATIO);
    return PF_IMAGE;
}

/* What a file that is not a PNG seems to be, from its first bytes: the usual reason is
   another format under a .png name, or a PNG mangled by a text-mode transfer. NULL when
   nothing is recognised. */
static const char *other_format(const unsigned char *p, size_t n)
{
    static const struct {
        size_t off, len;
        const char *magic, *what;
    } known[] = {
        {0, 3, "\xff\xd8\xff", "it looks like a JPEG file"},
        {0, 6, "GIF87a", "it looks like a GIF file"},
        {0, 6, "GIF89a", "it looks like a GIF file"},
        {8, 4, "WEBP", "it looks like a WebP file"},
        {0, 4, "II*\0", "it looks like a TIFF file"},
        {0, 4, "MM\0*", "it looks like a TIFF file"},
        {0, 2, "BM", "it looks like a BMP file"},
        {4, 8, "ftypavif", "it looks like an AVIF file"},
        {4, 8, "ftypheic", "it looks like a HEIC file"},
        {0, 4, "qoif", "it looks like a QOI file"},
        {0, 12, "\0\0\0\x0cJXL \r\n\x87\n", "it looks like a JPEG XL file"},
        {0, 2, "\xff\x0a", "it looks like a JPEG XL file"},
        /* line ends converted: CR LF to LF, or LF to CR LF */
        {0, 7, "\x89PNG\n\x1a\n",
         "it looks like a PNG damaged by a text-mode transfer (line ends converted)"},
        {0, 9, "\x89PNG\r\r\n\x1a\r\n",
         "it looks like a PNG damaged by a text-mode transfer (line ends converted)"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (n >= known[i].off + known[i].len &&
            memcmp(p + known[i].off, known[i].magic, known[i].len) == 0)
            return known[i].what;
    return NULL;
}

/* Reads the signature and IHDR ourselves: the plain cases (empty, not a PNG, cut short
   in the header) get plain messages, and a well-formed IHDR is held to the limits
   before libpng is even created. A malformed IHDR is left for libpng to describe. */
static int read_head(reader *r)
{
    r->head_len = source_read(r, r->head, PF_PNG_HEAD);
    if (r->io.status != PF_OK)
        return r->io.status;
    if (r->head_len == 0) {
        fail(&r->io, PF_IMAGE, "%s: not a PNG file: it is empty", r->io.name);
        return PF_IMAGE;
    }
    size_t sig = r->head_len < 8 ? r->head_len : 8;
    if (png_sig_cmp(r->head, 0, sig) != 0) {
        const char *what = other_format(r->head, r->head_len);
        if (what)
            fail(&r->io, PF_IMAGE, "%s: not a PNG file (no PNG signature): %s", r->io.name, what);
        else
            fail(&r->io, PF_IMAGE, "%s: not a PNG file (no PNG signature)", r->io.name);
        return PF_IMAGE;
    }
    if (r->head_len < PF_PNG_HEAD) {
        fail(&r->io, PF_IMAGE, "%s: truncated PNG: the %s ends after %zu bytes, inside the header",
             r->io.name, r->fp ? "file" : "data", r->head_len);
        return PF_IMAGE;
    }
    /* The source's size, for check_data: a regular file's (not /proc's, which says 0),
       or the buffer's. */
    struct stat st;
    if (!r->fp)
        r->src_size = r->mem_size;
    else if (fstat(fileno(r->fp), &st) == 0 && S_ISREG(st.st_mode) &&
             (unsigned long long)st.st_size >= r->head_len)
        r->src_size = (unsigned long long)st.st_size;
    const unsigned char *c = r->head + 8;
    png_uint_32 w = be32(c + 8), h = be32(c + 12);
    if (be32(c) != 13 || memcmp(c + 4, "IHDR", 4) != 0 || crc32_small(c + 4, 17) != be32(c + 21) ||
        w == 0 || h == 0 || w > PNG_UINT_31_MAX || h > PNG_UINT_31_MAX)
        return PF_OK;
    r->hdr.width = (int)w;
    r->hdr.height = (int)h;
    r->hdr.bit_depth = c[16];
    r->hdr.color_type = c[17];
    r->hdr.interlaced = c[20] != 0;
    return check_size(r, w, h);
}

/* Palette images are expanded here rather than by libpng, which turns an index past
   the palette into black without a word. Such an index is an error in the PNG
   specification (libpng's own "palette index exceeding num_palette"): the file is
   refused, naming the index and where it is. tRNS gives alpha as libpng would. Row y
   of indices in goes to out, r->frame.channels (3 or 4) bytes a pixel. */
static int expand_palette_row(reader *r, const unsigned char *in, unsigned char *out, int y)
{
    png_colorp pal = NULL;
    int entries = 0, n_trans = 0;
    png_bytep trans = NULL;
    png_get_PLTE(r->png, r->info, &pal, &entries);
    if (png_get_valid(r->png, r->info, PNG_INFO_tRNS))
        png_get_tRNS(r->png, r->info, &trans, &n_trans, NULL);
    const pf_frame *f = &r->frame;
    for (int x = 0; x < f->width; x++, out += f->channels) {
        int i = in[x];
        if (i >= entries) {
            fail(&r->io, PF_IMAGE,
                 "%s: corrupt PNG: palette index %d at (%d, %d) is past the palette's %d "
                 "entr%s (PLTE)",
                 r->io.name, i, x, y, entries, entries == 1 ? "y" : "ies");
            return PF_IMAGE;
        }
        out[0] = pal[i].red;
        out[1] = pal[i].green;
        out[2] = pal[i].blue;
        if (f->channels == 4)
            out[3] = i < n_trans ? trans[i] : 255;
    }
    return PF_OK;
}

static int expand_palette(reader *r)
{
    const pf_frame *f = &r->frame;
    for (int y = 0; y < f->height; y++)
        if (expand_palette_row(r, r->index + (size_t)y * (size_t)f->width,
                               (unsigned char *)f->data + (size_t)y * f->pitch, y) != PF_OK)
            return PF_IMAGE;
    return PF_OK;
}

/* libpng set up and the header read, through png_read_update_info: r->frame gets the
   rows' format (no data yet), r->pal whether they come as palette indices. */
static int read_info(reader *r)
{
    png_structp png = r->png;
    png_infop info = r->info;

    if (setjmp(png_jmpbuf(png)))
        return r->io.status != PF_OK ? r->io.status : PF_IMAGE;

    png_set_read_fn(png, r, read_callback);
    png_set_sig_bytes(png, 8); /* checked by read_head; the callback replays the rest */
    r->head_pos = 8;
    png_set_user_limits(png, PF_PNG_MAX_SIDE, PF_PNG_MAX_SIDE);
    png_set_chunk_cache_max(png, PF_PNG_CHUNK_CACHE_MAX);
    png_set_chunk_malloc_max(png, PF_PNG_CHUNK_MALLOC_MAX);
#ifdef PNG_HANDLE_AS_UNKNOWN_SUPPORTED
    /* Skip every ancillary chunk but tRNS (a negative count means exactly that): we
       apply none of them, so decompressing iCCP or zTXt would be wasted work and risk. */
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
    /* ... except the metadata when it was asked for, kept raw (see Metadata above) */
    if (r->want_meta)
        png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, meta_names, PF_PNG_META_NAMES);
#endif

    png_read_info(png, info);

    png_uint_32 w, h;
    int depth, ctype, interlace;
    if (!png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL)) {
        fail(&r->io, PF_IMAGE, "%s: corrupt PNG: no IHDR", r->io.name);
        return PF_IMAGE;
    }
    r->hdr.width = (int)w;
    r->hdr.height = (int)h;
    r->hdr.bit_depth = depth;
    r->hdr.color_type = ctype;
    r->hdr.interlaced = interlace != PNG_INTERLACE_NONE;
    /* Again, for a file whose IHDR read_head left to libpng. */
    if (check_size(r, w, h) != PF_OK)
        return PF_TOO_LARGE;
    if (check_data(r, w, h, depth, ctype) != PF_OK)
        return PF_IMAGE;
    /* An animation's default image is one frame of many (or none of them): read alone,
       it would go on as if it were the whole file. One frame is a still image. */
    if (r->actl && r->actl_frames > 1) {
        fail(&r->io, PF_UNSUPPORTED,
             "%s: animated PNG (APNG) of %lu frames: only still images are read, and its "
             "first image alone would lose the animation",
             r->io.name, (unsigned long)r->actl_frames);
        return PF_UNSUPPORTED;
    }

    /* To the file's own format, 8 or 16 bits, as the header promises. No gamma. Palette
       indices come one a byte, for expand_palette. */
    int pal = ctype == PNG_COLOR_TYPE_PALETTE;
    int pal_channels = png_get_valid(png, info, PNG_INFO_tRNS) ? 4 : 3;
    if (pal)
        png_set_packing(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (!pal && png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_tRNS_to_alpha(png);
    if (depth == 16 && host_is_little_endian())
        png_set_swap(png);
    if (interlace != PNG_INTERLACE_NONE)
        png_set_interlace_handling(png);
    png_read_update_info(png, info);

    int channels = png_get_channels(png, info);
    int bits = png_get_bit_depth(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if (channels < 1 || channels > 4 || (bits != 8 && bits != 16) || (pal && channels != 1) ||
        rowbytes != (size_t)w * (size_t)channels * (size_t)(bits / 8)) {
        fail(&r->io, PF_INTERNAL,
             "%s: libpng gave %d channels of %d bits, %zu bytes a row, for colour type %d of "
             "depth %d",
             r->io.name, channels, bits, rowbytes, ctype, depth);
        return PF_INTERNAL;
    }
    r->pal = pal;
    r->frame.width = (int)w;
    r->frame.height = (int)h;
    r->frame.sample = bits == 16 ? PF_U16 : PF_U8;
    r->frame.channels = pal ? pal_channels : channels;
    return PF_OK;
}

static int read_image(reader *r)
{
    int st = read_info(r);
    if (st != PF_OK)
        return st;
    png_structp png = r->png;
    if (setjmp(png_jmpbuf(png)))
        return r->io.status != PF_OK ? r->io.status : PF_IMAGE;

    png_uint_32 w = (png_uint_32)r->frame.width, h = (png_uint_32)r->frame.height;
    int pal = r->pal;
    st = pf_frame_alloc(&r->frame, (int)w, (int)h, r->frame.sample, r->frame.channels);
    if (st == PF_OK) {
        r->rows = malloc((size_t)h * sizeof *r->rows);
        if (pal)
            r->index = malloc((size_t)w * (size_t)h);
        if (!r->rows || (pal && !r->index))
            st = PF_NO_MEMORY;
    }
    if (st != PF_OK) {
        fail(&r->io, st, "%s: out of memory for a %lux%lu image", r->io.name, (unsigned long)w,
             (unsigned long)h);
        return st;
    }
    for (png_uint_32 y = 0; y < h; y++)
        r->rows[y] =
            pal ? r->index + (size_t)y * w : (png_bytep)r->frame.data + (size_t)y * r->frame.pitch;

    png_read_image(png, r->rows);
    if (pal && expand_palette(r) != PF_OK)
        return PF_IMAGE;
    /* Through IEND: a file cut after its image data is still truncated, and the CRCs of
       the last chunks are checked. */
    png_read_end(png, r->want_meta ? r->info : NULL); /* text may follow the image data */
    return PF_OK;
}

PF_API void pf_png_meta_free(pf_png_meta *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        free(m->chunks[i].data);
    free(m->chunks);
    free(m);
}

/* Copies the chunks libpng kept into r->meta. */
static int collect_meta(reader *r)
{
    png_unknown_chunkp unk = NULL;
    int n = png_get_unknown_chunks(r->png, r->info, &unk);
    pf_png_meta *m = calloc(1, sizeof *m);
    if (m && n > 0)
        m->chunks = calloc((size_t)n, sizeof *m->chunks);
    if (!m || (n > 0 && !m->chunks)) {
        free(m);
        fail(&r->io, PF_NO_MEMORY, "%s: out of memory for its metadata", r->io.name);
        return PF_NO_MEMORY;
    }
    m->width = r->hdr.width;
    m->height = r->hdr.height;
    m->bit_depth = r->hdr.bit_depth;
    m->color_type = r->hdr.color_type;
    png_colorp pal = NULL;
    png_bytep trans = NULL;
    int n_pal = 0, n_trans = 0;
    if (m->color_type == PNG_COLOR_TYPE_PALETTE && png_get_PLTE(r->png, r->info, &pal, &n_pal)) {
        m->n_palette = n_pal < 0 ? 0 : n_pal > 256 ? 256 : n_pal;
        for (int i = 0; i < m->n_palette; i++) {
            m->palette[3 * i] = pal[i].red;
            m->palette[3 * i + 1] = pal[i].green;
            m->palette[3 * i + 2] = pal[i].blue;
        }
        if (png_get_valid(r->png, r->info, PNG_INFO_tRNS) &&
            png_get_tRNS(r->png, r->info, &trans, &n_trans, NULL) && trans)
            m->n_trans = n_trans < 0 ? 0 : n_trans > m->n_palette ? m->n_palette : n_trans;
        memcpy(m->trans, trans ? trans : m->trans, (size_t)m->n_trans);
    }
    for (int i = 0; i < n; i++) {
        png_unknown_chunk *c = &m->chunks[m->n];
        memcpy(c->name, unk[i].name, sizeof c->name);
        c->size = unk[i].size;
        c->location = unk[i].location;
        if (c->size) {
            c->data = malloc(c->size);
            if (!c->data) {
                pf_png_meta_free(m);
                fail(&r->io, PF_NO_MEMORY, "%s: out of memory for its %.4s chunk", r->io.name,
                     (const char *)unk[i].name);
                return PF_NO_MEMORY;
            }
            memcpy(c->data, unk[i].data, c->size);
        }
        m->n++;
    }
    r->meta = m;
    return PF_OK;
}

/* Both entry points: r has its source and message fields set. */
static int read_png(reader *r, pf_frame *out, pf_png_info *info)
{
    int st = read_head(r);
    if (st == PF_OK) {
        r->png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, &r->io, on_png_error,
                                          on_png_warning, &r->io, png_alloc, png_dealloc);
        if (r->png)
            r->info = png_create_info_struct(r->png);
        if (!r->png || !r->info) {
            fail(&r->io, PF_NO_MEMORY, "%s: out of memory starting libpng", r->io.name);
            st = PF_NO_MEMORY;
        } else {
            st = read_image(r);
            if (st == PF_OK && r->want_meta)
                st = collect_meta(r);
        }
    }
    if (r->png)
        png_destroy_read_struct(&r->png, r->info ? &r->info : NULL, NULL);
    free(r->rows);
    free(r->index);
    if (info)
        *info = r->hdr;
    if (st != PF_OK) {
        pf_frame_free(&r->frame);
        return st;
    }
    *out = r->frame;
    return PF_OK;
}

static void reader_init(reader *r, const char *name, unsigned long long max_pixels, char *err,
                        size_t err_size)
{
    memset(r, 0, sizeof *r);
    r->io.name = name;
    r->io.err = err;
    r->io.err_size = err_size;
    r->io.status = PF_OK;
    r->io.fail_status = PF_IMAGE;
    r->io.what = "corrupt PNG";
    r->max_pixels = max_pixels ? max_pixels : PF_PNG_DEFAULT_MAX_PIXELS;
}

static void set_err(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pf_verrf(err, err_size, fmt, ap);
    va_end(ap);
}

static int read_file(const char *fn, const char *path, unsigned long long max_pixels, pf_frame *out,
                     pf_png_info *info, pf_png_meta **meta, char *err, size_t err_size)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (info)
        memset(info, 0, sizeof *info);
    if (meta)
        *meta = NULL;
    if (!path || !out) {
        set_err(err, err_size, "%s: %s is NULL", fn, path ? "out" : "path");
        return PF_INVALID_ARGUMENT;
    }
    reader r;
    reader_init(&r, path, max_pixels, err, err_size);
    r.want_meta = meta != NULL;
    /* "e": close-on-exec, so a plugin or application that forks does not inherit it. */
    r.fp = fopen(path, "rbe");
    if (!r.fp) {
        set_err(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return PF_IO;
    }
    int st = read_png(&r, out, info);
    fclose(r.fp); /* read-only: nothing to lose if closing fails */
    if (st == PF_OK && meta)
        *meta = r.meta;
    else
        pf_png_meta_free(r.meta);
    return st;
}

PF_API int pf_png_read(const char *path, unsigned long long max_pixels, pf_frame *out,
                       pf_png_info *info, char *err, size_t err_size)
{
    return read_file("pf_png_read", path, max_pixels, out, info, NULL, err, err_size);
}

PF_API int pf_png_read_meta(const char *path, unsigned long long max_pixels, pf_frame *out,
                            pf_png_info *info, pf_png_meta **meta, char *err, size_t err_size)
{
    if (!meta) {
        set_err(err, err_size, "pf_png_read_meta: meta is NULL");
        return PF_INVALID_ARGUMENT;
    }
    return read_file("pf_png_read_meta", path, max_pixels, out, info, meta, err, err_size);
}

void pf_png_meta_source(const pf_png_meta *m, pf_png_source *src)
{
    memset(src, 0, sizeof *src);
    src->width = m->width, src->height = m->height;
    src->bit_depth = m->bit_depth, src->color_type = m->color_type;
    for (int i = 0; i < m->n; i++)
        src->has_iccp |= !memcmp(m->chunks[i].name, "iCCP", 4);
    src->n_palette = m->n_palette, src->n_trans = m->n_trans;
    src->palette = m->palette, src->trans = m->trans;
}

PF_API int pf_png_meta_count(const pf_png_meta *m)
{
    return m ? m->n : 0;
}

PF_API const char *pf_png_meta_chunk(const pf_png_meta *m, int i, const void **data, size_t *size)
{
    if (!m || i < 0 || i >= m->n)
        return NULL;
    if (data)
        *data = m->chunks[i].data;
    if (size)
        *size = m->chunks[i].size;
    return (const char *)m->chunks[i].name;
}

PF_API int pf_png_read_memory(const void *data, size_t size, const char *name,
                              unsigned long long max_pixels, pf_frame *out, pf_png_info *info,
                              char *err, size_t err_size)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (info)
        memset(info, 0, sizeof *info);
    if (!name)
        name = "<memory>";
    if (!out || (!data && size)) {
        set_err(err, err_size, "%s: pf_png_read_memory: %s is NULL", name, out ? "data" : "out");
        return PF_INVALID_ARGUMENT;
    }
    reader r;
    reader_init(&r, name, max_pixels, err, err_size);
    r.mem = data;
    r.mem_size = size;
    return read_png(&r, out, info);
}

/* ---- Reading by rows (pipefuse/bands.h) -----------------------------------------------------
 *
 * The reader of pf_png_read kept open between calls: read_info once, then png_read_row
 * per row, palette rows expanded one at a time. The metadata must be known before the
 * first output row is written (pipefuse run writes every kept chunk before the image
 * data, as it does for whole frames), so chunks stored after the image data are found
 * by walking the chunk list first and, when there are any, by one more decode. */

struct pf_png_rows {
    reader r;
    char *path;
    unsigned char *index; /* one row of palette indices */
    int done;
};

/* Whether a metadata chunk follows the first IDAT: the chunk list walked by lengths,
   no data read. 0 when none does or the list cannot be walked (the decode says why). */
static int meta_after_idat(const char *path)
{
    FILE *f = fopen(path, "rbe");
    if (!f)
        return 0;
    unsigned char h[8];
    int idat = 0, found = 0;
    if (fseek(f, 8, SEEK_SET) == 0) {
        while (!found && fread(h, 1, 8, f) == 8) {
            png_uint_32 len = be32(h);
            if (len > PNG_UINT_31_MAX || !memcmp(h + 4, "IEND", 4))
                break;
            if (!memcmp(h + 4, "IDAT", 4))
                idat = 1;
            else if (idat)
                for (int i = 0; i < PF_PNG_META_NAMES && !found; i++)
                    found = !memcmp(h + 4, meta_names + 5 * i, 4);
            if (fseek(f, (long)len + 4, SEEK_CUR) != 0)
                break;
        }
    }
    fclose(f);
    return found;
}

/* Starts r on path: opened, header checked, libpng created, info read. */
static int rows_start(reader *r, const char *path, unsigned long long max_pixels, int want_meta,
                      char *err, size_t err_size)
{
    reader_init(r, path, max_pixels, err, err_size);
    r->want_meta = want_meta;
    r->fp = fopen(path, "rbe");
    if (!r->fp) {
        set_err(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return PF_IO;
    }
    int st = read_head(r);
    if (st != PF_OK)
        return st;
    r->png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, &r->io, on_png_error, on_png_warning,
                                      &r->io, png_alloc, png_dealloc);
    if (r->png)
        r->info = png_create_info_struct(r->png);
    if (!r->png || !r->info) {
        fail(&r->io, PF_NO_MEMORY, "%s: out of memory starting libpng", r->io.name);
        return PF_NO_MEMORY;
    }
    st = read_info(r);
    if (st == PF_OK && r->hdr.interlaced) {
        fail(&r->io, PF_UNSUPPORTED,
             "%s: interlaced (Adam7) PNG: its rows cannot be read in one pass; read it whole",
             r->io.name);
        st = PF_UNSUPPORTED;
    }
    return st;
}

static void rows_stop(reader *r)
{
    if (r->png)
        png_destroy_read_struct(&r->png, r->info ? &r->info : NULL, NULL);
    if (r->fp)
        fclose(r->fp);
    r->fp = NULL;
}

/* n rows into dst (palette rows through index, one row long); the end of the file after
   the last row. s->done counts the rows read. */
static int rows_next(pf_png_rows *s, const pf_frame *dst, int n, int want_end_meta)
{
    reader *r = &s->r;
    if (setjmp(png_jmpbuf(r->png)))
        return r->io.status != PF_OK ? r->io.status : PF_IMAGE;
    for (int i = 0; i < n; i++) {
        unsigned char *row = (unsigned char *)dst->data + (size_t)i * dst->pitch;
        png_read_row(r->png, r->pal ? s->index : row, NULL);
        if (r->pal && expand_palette_row(r, s->index, row, s->done) != PF_OK)
            return PF_IMAGE;
        s->done++;
    }
    if (n > 0 && s->done == r->frame.height) /* the last row: on to IEND, once */
        png_read_end(r->png, want_end_meta ? r->info : NULL);
    return PF_OK;
}

/* After a failure in the rows: which row it was, after the message. */
static void note_row(const pf_png_rows *s, char *err, size_t err_size)
{
    if (!err || !err_size)
        return;
    size_t len = strlen(err);
    if (s->done < s->r.frame.height)
        snprintf(err + len, err_size - len, " (reading row %d of %d)", s->done, s->r.frame.height);
    else
        snprintf(err + len, err_size - len, " (after the last row)");
}

/* All the metadata of path by one more decode, rows thrown away one at a time. */
static int meta_by_decode(const char *path, unsigned long long max_pixels, pf_png_meta **meta,
                          char *err, size_t err_size)
{
    pf_png_rows s;
    memset(&s, 0, sizeof s);
    int st = rows_start(&s.r, path, max_pixels, 1, err, err_size);
    pf_frame row = s.r.frame;
    row.height = 1;
    row.pitch = (size_t)row.width * pf_frame_pixel_bytes(row.sample, row.channels);
    if (st == PF_OK) {
        row.data = malloc(row.pitch);
        s.index = malloc((size_t)row.width);
        if (!row.data || !s.index) {
            fail(&s.r.io, PF_NO_MEMORY, "%s: out of memory", path);
            st = PF_NO_MEMORY;
        }
    }
    while (st == PF_OK && s.done < s.r.frame.height)
        if ((st = rows_next(&s, &row, 1, 1)) != PF_OK)
            note_row(&s, err, err_size);
    if (st == PF_OK)
        st = collect_meta(&s.r);
    if (st == PF_OK)
        *meta = s.r.meta;
    rows_stop(&s.r);
    free(row.data);
    free(s.index);
    return st;
}

PF_API int pf_png_rows_open(const char *path, unsigned long long max_pixels, pf_png_rows **out,
                            pf_frame *format, pf_png_info *info, pf_png_meta **meta, char *err,
                            size_t err_size)
{
    if (out)
        *out = NULL;
    if (format)
        memset(format, 0, sizeof *format);
    if (info)
        memset(info, 0, sizeof *info);
    if (meta)
        *meta = NULL;
    if (!path || !out || !format) {
        set_err(err, err_size, "pf_png_rows_open: %s is NULL",
                !path  ? "path"
                : !out ? "out"
                       : "format");
        return PF_INVALID_ARGUMENT;
    }
    pf_png_rows *s = calloc(1, sizeof *s);
    char *p = strdup(path);
    if (!s || !p) {
        free(s);
        free(p);
        set_err(err, err_size, "%s: out of memory", path);
        return PF_NO_MEMORY;
    }
    s->path = p;
    int st = rows_start(&s->r, s->path, max_pixels, meta != NULL, err, err_size);
    if (info)
        *info = s->r.hdr;
    if (st == PF_OK && s->r.pal && !(s->index = malloc((size_t)s->r.frame.width))) {
        fail(&s->r.io, PF_NO_MEMORY, "%s: out of memory", path);
        st = PF_NO_MEMORY;
    }
    if (st == PF_OK && meta) {
        if (meta_after_idat(path))
            st = meta_by_decode(path, max_pixels, meta, err, err_size);
        else
            st = collect_meta(&s->r) == PF_OK ? (*meta = s->r.meta, PF_OK) : s->r.io.status;
        s->r.meta = NULL;
    }
    if (st != PF_OK) {
        if (meta) {
            pf_png_meta_free(*meta);
            *meta = NULL;
        }
        pf_png_rows_close(s);
        return st;
    }
    *format = s->r.frame;
    format->data = NULL;
    format->pitch = 0;
    *out = s;
    return PF_OK;
}

PF_API int pf_png_rows_read(pf_png_rows *s, pf_frame *dst, int n, char *err, size_t err_size)
{
    if (!s || !dst || !dst->data || n < 0) {
        set_err(err, err_size, "pf_png_rows_read: %s", !s ? "no reader" : "no frame");
        return PF_INVALID_ARGUMENT;
    }
    reader *r = &s->r;
    if (r->io.status != PF_OK) {
        set_err(err, err_size, "%s: reading stopped at row %d after an error", r->io.name, s->done);
        return r->io.status;
    }
    if (dst->width != r->frame.width || dst->sample != r->frame.sample ||
        dst->channels != r->frame.channels || n > dst->height || n > r->frame.height - s->done) {
        set_err(err, err_size, "%s: pf_png_rows_read: %d rows of a %dx%d frame at row %d of %d",
                r->io.name, n, dst->width, dst->height, s->done, r->frame.height);
        return PF_INVALID_ARGUMENT;
    }
    r->io.err = err;
    r->io.err_size = err_size;
    int st = rows_next(s, dst, n, 0);
    if (st != PF_OK)
        note_row(s, err, err_size);
    return st;
}

PF_API int pf_png_rows_done(const pf_png_rows *s)
{
    return s ? s->done : 0;
}

PF_API void pf_png_rows_close(pf_png_rows *s)
{
    if (!s)
        return;
    rows_stop(&s->r);
    pf_png_meta_free(s->r.meta);
    free(s->index);
    free(s->path);
    free(s);
}

/* ---- Writing ----------------------------------------------------------------------------- */

typedef struct writer {
    pngio io;
    FILE *fp;
    png_structp png;
    png_infop info;
    const pf_frame *frame;
    int level;
    png_unknown_chunk *keep; /* the metadata chunks written (into the source's array) */
    int n_keep;
    const pf_png_write_options *opts; /* the form and geometry asked for */
    pf_png_packed packed;             /* the frame in the form written (png_form.c) */
    unsigned char phys[9];            /* the pHYs written, by the geometry */
    int threads;                      /* deflating the image data: 0 one per core (png_deflate.c) */
    pf_pngz_opts idat;                /* and how, when it is worth the threads */
} writer;

/* Whether chunk c of the source still describes the image w writes. gAMA, cHRM and
   sRGB say how the stored values encode colour, which stages keep (they work on stored
   values), and text is about the picture: kept. An ICC profile is for gray or for colour
   data (kept while the image written is of the same kind; a palette is colour), sBIT
   for the source's colour type and depth (kept when those written are the same), pHYs
   for its pixel grid (pf_png_meta_phys: kept at the same size, or through a geometry). */
static int meta_applies(const pf_png_meta *m, const png_unknown_chunk *c, writer *w)
{
    const pf_png_packed *p = &w->packed;
    int in_gray = !(m->color_type & PNG_COLOR_MASK_COLOR);
    int out_gray = !(p->color_type & PNG_COLOR_MASK_COLOR);
    if (!memcmp(c->name, "iCCP", 4))
        return in_gray == out_gray;
    if (!memcmp(c->name, "sBIT", 4))
        return m->color_type == p->color_type && m->bit_depth == p->bit_depth;
    if (!memcmp(c->name, "pHYs", 4))
        return pf_png_meta_phys(m, w->opts->geometry, p->width, p->height, w->phys);
    return 1;
}

/* Fills w->keep from meta for w->frame: the chunks that apply, where PNG wants them
   (colour and density before PLTE and the image data, text where it was). */
static int select_meta(writer *w, const pf_png_meta *meta)
{
    if (!meta || meta->n == 0)
        return PF_OK;
    w->keep = calloc((size_t)meta->n, sizeof *w->keep);
    if (!w->keep)
        return PF_NO_MEMORY;
    for (int i = 0; i < meta->n; i++) {
        const png_unknown_chunk *c = &meta->chunks[i];
        if (!meta_applies(meta, c, w))
            continue;
        png_unknown_chunk *k = &w->keep[w->n_keep++];
        *k = *c; /* data shared with meta, which outlives the write */
        if (!memcmp(c->name, "pHYs", 4))
            k->data = w->phys, k->size = sizeof w->phys; /* scaled or swapped */
        int text = c->name[0] == 't' || c->name[0] == 'z' || c->name[0] == 'i';
        text = text && memcmp(c->name, "iCCP", 4) != 0;
        k->location = text && (c->location & PNG_AFTER_IDAT) ? PNG_AFTER_IDAT : PNG_HAVE_IHDR;
    }
    return PF_OK;
}

static void write_callback(png_structp png, png_bytep data, size_t n)
{
    writer *w = png_get_io_ptr(png);
    if (fwrite(data, 1, n, w->fp) != n) {
        fail(&w->io, PF_IO, "%s: write error: %s", w->io.name, strerror(errno));
        png_error(png, "write error");
    }
}

/* Nothing to do: fclose flushes, and its result is checked. */
static void flush_callback(png_structp png)
{
    (void)png;
}

/* ---- The image data on several threads (png_deflate.c) --------------------------------
 *
 * A large image's rows are filtered and deflated in segments on w->threads threads; the
 * chunks before the image data are libpng's (png_write_info), the IDAT chunks and those
 * after (text kept after the image data, IEND) are written here, so png_write_end is not
 * called: libpng does not know of the image data. */

static int idat_write(void *ctx, const void *data, size_t n)
{
    writer *w = ctx;
    if (fwrite(data, 1, n, w->fp) == n)
        return 0;
    fail(&w->io, PF_IO, "%s: write error: %s", w->io.name, strerror(errno));
    return -1;
}

/* The options of w's image data, as packed (w->packed: the frame's own rows, or rows
   converted to a palette, low-bit gray or another form), when it is large enough for
   segments; 0 otherwise. */
static int idat_threaded(writer *w)
{
    const pf_png_packed *pk = &w->packed;
    int ct = pk->color_type, depth = pk->bit_depth;
    int channels = ct == PNG_COLOR_TYPE_RGB_ALPHA ? 4
                   : ct == PNG_COLOR_TYPE_RGB     ? 3
                   : ct == PNG_COLOR_TYPE_GA      ? 2
                                                  : 1;
    if (png_get_bit_depth(w->png, w->info) != depth || png_get_color_type(w->png, w->info) != ct ||
        png_get_interlace_type(w->png, w->info) != PNG_INTERLACE_NONE)
        return 0;
    /* libpng's filters: none for a palette or below 8 bits, else all five, the cheapest
       chosen per row */
    int filter = ct == PNG_COLOR_TYPE_PALETTE || depth < 8 ? PF_PNGZ_NONE : PF_PNGZ_ALL;
    w->idat =
        (pf_pngz_opts){w->frame->width, w->frame->height, depth,      channels,
                       w->level,        filter,           w->threads, host_is_little_endian()};
    return pf_pngz_worth(&w->idat);
}

static int write_idat_threaded(writer *w)
{
    pf_pngz *z = NULL;
    char e[256] = "";
    const pf_frame *f = w->frame;
    const pf_png_packed *pk = &w->packed;
    int rc = pf_pngz_begin(&w->idat, idat_write, w, &z, e, sizeof e);
    if (rc == 0) /* the packed rows, or the frame's own */
        rc = pf_pngz_rows(z, pk->rows ? (const void *)pk->rows : f->data,
                          pk->rows ? pk->pitch : f->pitch, f->height, e, sizeof e);
    pf_pngz_free(z);
    for (int i = 0; rc == 0 && i < w->n_keep; i++)
        if (w->keep[i].location & PNG_AFTER_IDAT)
            rc = pf_pngz_chunk(idat_write, w, (const char *)w->keep[i].name, w->keep[i].data,
                               w->keep[i].size);
    if (rc == 0)
        rc = pf_pngz_chunk(idat_write, w, "IEND", NULL, 0);
    if (rc == 0)
        return PF_OK;
    /* a write error was recorded by idat_write; this is zlib's or memory's */
    fail(&w->io, strstr(e, "out of memory") ? PF_NO_MEMORY : PF_IO, "%s: cannot write PNG: %s",
         w->io.name, e);
    return w->io.status;
}

static int write_image(writer *w)
{
    png_structp png = w->png;
    png_infop info = w->info;
    const pf_frame *f = w->frame;

    if (setjmp(png_jmpbuf(png)))
        return w->io.status != PF_OK ? w->io.status : PF_IO;

    const pf_png_packed *pk = &w->packed;
    png_set_write_fn(png, w, write_callback, flush_callback);
    /* libpng's default write limit is 1000000 per side; frames may be wider. */
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    if (w->level >= 0)
        png_set_compression_level(png, w->level);
    png_set_IHDR(png, info, (png_uint_32)f->width, (png_uint_32)f->height, pk->bit_depth,
                 pk->color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (pk->n_palette) { /* libpng copies both */
        png_color pal[256];
        for (int i = 0; i < pk->n_palette; i++)
            pal[i] =
                (png_color){pk->palette[3 * i], pk->palette[3 * i + 1], pk->palette[3 * i + 2]};
        png_set_PLTE(png, info, pal, pk->n_palette);
        if (pk->n_trans)
            png_set_tRNS(png, info, pk->trans, pk->n_trans, NULL);
    }
    if (w->n_keep) {
        /* gAMA and the others are critical-to-copy names: written only when asked for */
        png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, meta_names, PF_PNG_META_NAMES);
        png_set_unknown_chunks(png, info, w->keep, w->n_keep);
    }
    png_write_info(png, info);
    if (idat_threaded(w))
        return write_idat_threaded(w);
    /* libpng swaps a copy of each row, never the caller's frame. */
    if (pk->bit_depth == 16 && host_is_little_endian())
        png_set_swap(png);
    for (int y = 0; y < f->height; y++) /* the packed rows, or the frame's own */
        png_write_row(png, pk->rows ? pk->rows + (size_t)y * pk->pitch
                                    : (png_const_bytep)f->data + (size_t)y * f->pitch);
    png_write_end(png, info); /* the text chunks that came after the image data */
    return PF_OK;
}

/* Whether a frame can be written as a PNG at path with zlib_level: PF_OK, or the reason. */
static int check_write(const char *path, const pf_frame *f, int zlib_level, char *err,
                       size_t err_size)
{
    if (!path || !f) {
        set_err(err, err_size, "pf_png_write: %s is NULL", path ? "frame" : "path");
        return PF_INVALID_ARGUMENT;
    }
    if (f->sample != PF_U8 && f->sample != PF_U16) {
        set_err(err, err_size, "%s: cannot write %s samples: PNG takes u8 or u16", path,
                f->sample == PF_F32 ? "f32" : "unknown");
        return PF_INVALID_ARGUMENT;
    }
    if (f->channels < 1 || f->channels > 4) {
        set_err(err, err_size,
                "%s: cannot write %d channels: PNG takes 1 to 4 (gray, gray+alpha, RGB, RGBA)",
                path, f->channels);
        return PF_INVALID_ARGUMENT;
    }
    if (f->width <= 0 || f->height <= 0 || !f->data ||
        f->pitch < (size_t)f->width * pf_frame_pixel_bytes(f->sample, f->channels)) {
        set_err(err, err_size, "%s: cannot write a %dx%d frame with %s and pitch %zu", path,
                f->width, f->height, f->data ? "data" : "no data", f->pitch);
        return PF_INVALID_ARGUMENT;
    }
    if (zlib_level < -1 || zlib_level > 9) {
        set_err(err, err_size, "%s: zlib level %d is out of range [-1, 9]", path, zlib_level);
        return PF_INVALID_ARGUMENT;
    }
    return PF_OK;
}

static int write_file(const char *path, const pf_frame *f, const pf_png_write_options *o, char *err,
                      size_t err_size)
{
    const int zlib_level = o->zlib_level;
    const pf_png_meta *meta = o->meta;
    int st = check_write(path, f, zlib_level, err, err_size);
    if (st != PF_OK)
        return st;

    writer w;
    memset(&w, 0, sizeof w);
    w.io.name = path;
    w.io.err = err;
    w.io.err_size = err_size;
    w.io.status = PF_OK;
    w.io.fail_status = PF_IO;
    w.io.what = "cannot write PNG";
    w.frame = f;
    w.level = zlib_level;
    w.opts = o;
    w.threads = o->threads;

    /* the form first: the chunks that apply depend on it */
    char perr[256] = "";
    char *tmp = NULL;
    st = pf_png_pack(f, o->form, meta, &w.packed, perr, sizeof perr);
    if (st != PF_OK)
        fail(&w.io, st, "%s: cannot write PNG: %s", path, perr);
    else if ((st = select_meta(&w, meta)) != PF_OK)
        fail(&w.io, st, "%s: out of memory for its metadata", path);
    else
        st = pf_safe_open(path, &tmp, &w.fp, err, err_size);

    if (st == PF_OK) {
        w.png = png_create_write_struct_2(PNG_LIBPNG_VER_STRING, &w.io, on_png_error,
                                          on_png_warning, &w.io, png_alloc, png_dealloc);
        if (w.png)
            w.info = png_create_info_struct(w.png);
        if (!w.png || !w.info) {
            fail(&w.io, PF_NO_MEMORY, "%s: out of memory starting libpng", path);
            st = PF_NO_MEMORY;
        } else {
            st = write_image(&w);
        }
        if (w.png)
            png_destroy_write_struct(&w.png, w.info ? &w.info : NULL);
        st = pf_safe_close(path, tmp, w.fp, st, err, err_size);
    }
    free(w.keep);
    pf_png_packed_free(&w.packed);
    return st;
}

PF_API void pf_png_write_options_init(pf_png_write_options *o)
{
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->zlib_level = -1;
}

PF_API int pf_png_write(const char *path, const pf_frame *f, int zlib_level, char *err,
                        size_t err_size)
{
    pf_png_write_options o;
    pf_png_write_options_init(&o);
    o.zlib_level = zlib_level;
    return write_file(path, f, &o, err, err_size);
}

PF_API int pf_png_write_meta(const char *path, const pf_frame *f, int zlib_level,
                             const pf_png_meta *meta, char *err, size_t err_size)
{
    pf_png_write_options o;
    pf_png_write_options_init(&o);
    o.zlib_level = zlib_level;
    o.meta = meta;
    return write_file(path, f, &o, err, err_size);
}

PF_API int pf_png_write_opts(const char *path, const pf_frame *f, const pf_png_write_options *o,
                             char *err, size_t err_size)
{
    /* an older, smaller struct: the fields it has, defaults for the rest */
    pf_png_write_options full;
    pf_png_write_options_init(&full);
    if (!o || o->size < offsetof(pf_png_write_options, form)) {
        set_err(err, err_size, "pf_png_write_opts: %s",
                o ? "options too small (set size)" : "options are NULL");
        return PF_INVALID_ARGUMENT;
    }
    memcpy(&full, o, o->size < sizeof full ? o->size : sizeof full);
    full.size = sizeof full;
    if ((int)full.form < PF_PNG_FORM_FRAME || full.form > PF_PNG_FORM_GRAY4) {
        set_err(err, err_size, "%s: unknown PNG form %d", path ? path : "pf_png_write_opts",
                (int)full.form);
        return PF_INVALID_ARGUMENT;
    }
    if (full.threads < 0 || full.threads > 1024) {
        set_err(err, err_size, "%s: threads %d is out of range [0, 1024]",
                path ? path : "pf_png_write_opts", full.threads);
        return PF_INVALID_ARGUMENT;
    }
    return write_file(path, f, &full, err, err_size);
}
