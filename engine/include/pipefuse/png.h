/* pipefuse/png.h: PNG files to and from frames, with libpng.
 *
 * Reading gives a frame in the file's own format: gray (1 channel), gray+alpha (2),
 * RGB (3) or RGBA (4), 8 or 16 bits per sample (16-bit samples in host byte order).
 * Palette images become RGB, or RGBA when they carry tRNS (an index past the palette
 * is PF_IMAGE: an error in the PNG specification, black to a lenient reader); a tRNS
 * colour key on gray or RGB adds an alpha channel; 1/2/4-bit gray is scaled to 8 bits
 * (0..max to 0..255).
 * Interlaced files are read whole. Gamma and colour chunks are not applied: samples
 * are returned as stored (ancillary chunks other than tRNS are skipped unread, unless
 * pf_png_read_meta keeps the metadata, below). An animated PNG (APNG, acTL of more
 * than one frame) is refused with PF_UNSUPPORTED rather than read as its first image.
 *
 * Writing takes an 8- or 16-bit frame of 1-4 channels and writes it to a temporary
 * file in the target's directory, then renames it: a file with the final name is
 * always complete. Nothing is left behind on failure.
 *
 * Messages start with the file's path (the name, for memory reads). err may be NULL.
 */
#ifndef PIPEFUSE_PNG_H
#define PIPEFUSE_PNG_H

#include "pipefuse/pipefuse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PF_PNG_DEFAULT_MAX_PIXELS (256u * 1024u * 1024u)

typedef struct pf_png_info {
    int width, height;
    int bit_depth;  /* as stored: 1, 2, 4, 8 or 16 */
    int color_type; /* PNG colour type as stored: 0 gray, 2 RGB, 3 palette, 4 GA, 6 RGBA */
    int interlaced;
} pf_png_info;

/* Reads a PNG file into a newly allocated frame (free with pf_frame_free). max_pixels
   bounds width*height (0: PF_PNG_DEFAULT_MAX_PIXELS); larger files fail with
   PF_TOO_LARGE before any pixel memory is allocated, as do files wider or taller than
   1 << 20 pixels whatever max_pixels says. info may be NULL; it is filled as soon as
   the header has been read, so on PF_TOO_LARGE it holds the claimed size. A header
   that claims more pixels than the file (or buffer) could hold at deflate's greatest
   ratio, 1032:1, is PF_IMAGE, also before any pixel memory is allocated. On failure
   returns PF_IO (cannot open or read: missing file, directory), PF_IMAGE (empty, not a
   PNG, corrupt, truncated: libpng's reason in the message; a file of another format
   is named when its first bytes are recognised), PF_TOO_LARGE, PF_UNSUPPORTED (an
   animated PNG) or PF_NO_MEMORY, with a message naming the file in err, and out left
   empty (data NULL). Warnings are not printed. Safe to call from several threads at
   once. */
int pf_png_read(const char *path, unsigned long long max_pixels, pf_frame *out, pf_png_info *info,
                char *err, size_t err_size);

/* The same from memory. name labels messages (NULL: "<memory>"); a truncated buffer
   is PF_IMAGE like a truncated file. */
int pf_png_read_memory(const void *data, size_t size, const char *name,
                       unsigned long long max_pixels, pf_frame *out, pf_png_info *info, char *err,
                       size_t err_size);

/* Writes a u8 or u16 frame of 1-4 channels (gray, gray+alpha, RGB, RGBA; any pitch);
   zlib_level 0-9, or -1 for libpng's default. The file is written as
   "<dir>/.<name>.XXXXXX", given mode 0644 & ~umask, and renamed onto path only when
   complete and closed without error (a symlink at path is replaced, not followed).
   Returns PF_OK, PF_INVALID_ARGUMENT (format, level, NULL; nothing is created), PF_IO
   or (rarely) PF_NO_MEMORY, message in err; on failure no temporary file remains and
   a file already at path is untouched. */
int pf_png_write(const char *path, const pf_frame *f, int zlib_level, char *err, size_t err_size);

/* ---- Metadata: colour, density and text chunks, carried from an input to an output ----
 *
 * pf_png_read_meta reads like pf_png_read and also keeps the file's gAMA, cHRM, sRGB,
 * iCCP, sBIT, pHYs, tEXt, zTXt and iTXt chunks, raw (nothing is parsed or inflated).
 * pf_png_write_meta writes like pf_png_write plus those of them that still describe
 * the frame written: gAMA, cHRM, sRGB and the text always (stages work on the stored,
 * encoded values, so the encoding still holds); iCCP while the frame is gray for a gray
 * source or colour for a colour source (an ICC profile is for one or the other); sBIT
 * when the colour type and bit depth are the source's; pHYs when the size is. meta
 * NULL writes none. *meta is NULL on failure; free it with pf_png_meta_free (NULL: no
 * effect). A meta is read-only once made: several writes may share it. */
typedef struct pf_png_meta pf_png_meta;
int pf_png_read_meta(const char *path, unsigned long long max_pixels, pf_frame *out,
                     pf_png_info *info, pf_png_meta **meta, char *err, size_t err_size);
int pf_png_write_meta(const char *path, const pf_frame *f, int zlib_level, const pf_png_meta *meta,
                      char *err, size_t err_size);
void pf_png_meta_free(pf_png_meta *m);
/* The number of chunks kept, and chunk i's 4-letter type (NULL past the end) with its
   data and size (either may be NULL). */
int pf_png_meta_count(const pf_png_meta *m);
const char *pf_png_meta_chunk(const pf_png_meta *m, int i, const void **data, size_t *size);

/* Allocates a frame (rows 16-byte aligned, pitch a multiple of 16); free with
   pf_frame_free. Returns PF_OK, PF_INVALID_ARGUMENT or PF_NO_MEMORY. */
int pf_frame_alloc(pf_frame *f, int width, int height, pf_sample sample, int channels);
void pf_frame_free(pf_frame *f);

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_PNG_H */
