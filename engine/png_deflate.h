/* engine/png_deflate.h: a PNG's image data (IDAT) deflated on several threads.
 *
 * The writer of a PNG hands over its rows (packed as PNG stores them: 1 to 16 bits a
 * sample, 16-bit samples in host order when swap16 is set) after the header and the
 * chunks before the image data have been written (libpng's png_write_info). The rows
 * are filtered here (None, Sub, Up, Average, Paeth, or libpng's choice per row among a
 * set of them, the smallest sum of absolute differences) and cut into segments of whole
 * rows, each deflated on its own thread as pigz does: primed with the 32 KB of filtered
 * data before it (deflateSetDictionary), ended with Z_SYNC_FLUSH (the last with
 * Z_FINISH), the raw deflate streams concatenated behind one zlib header and the
 * Adler-32 sums of the segments combined (adler32_combine). The bytes are not those of
 * a serial deflate, but the stream is one valid zlib stream and the image is the same.
 *
 * IDAT chunks go out through a write function of the caller's, in order, from the
 * caller's thread only; pf_pngz_chunk writes the chunks that follow (text after the
 * image data, IEND) the same way. Nothing here longjmps: libpng's error handling stays
 * with the caller, who must not call png_write_end (libpng does not know of these IDAT
 * chunks) but writes its after-IDAT chunks and IEND with pf_pngz_chunk.
 *
 * The functions are exported, so that a writer of its own (the command line's,
 * cli/outfile.c) can call them after its own png_write_info. */
#ifndef PF_PNG_DEFLATE_H
#define PF_PNG_DEFLATE_H

#include <stddef.h>

#ifndef PF_PNGZ_API
#define PF_PNGZ_API __attribute__((visibility("default")))
#endif

/* A segment's filtered bytes: about a 64th of the image's, at least MIN (a smaller one
   loses ratio to its restart), at most MAX (more, smaller segments keep the threads
   evenly loaded). The segments depend on the image alone: the bytes written are the
   same on any number of threads and however the rows are handed over. An image of
   fewer than PF_PNGZ_MIN_PARALLEL filtered bytes is better written by libpng alone
   (pf_pngz_worth). */
#define PF_PNGZ_SEG_MIN      (128u << 10)
#define PF_PNGZ_SEG_MAX      (1u << 20)
#define PF_PNGZ_MIN_PARALLEL (2 * PF_PNGZ_SEG_MIN)

/* Filter masks: libpng's PNG_FILTER_* values, so a mask for png_set_filter works here. */
#define PF_PNGZ_NONE  0x08
#define PF_PNGZ_SUB   0x10
#define PF_PNGZ_UP    0x20
#define PF_PNGZ_AVG   0x40
#define PF_PNGZ_PAETH 0x80
#define PF_PNGZ_ALL   0xf8

/* Writes n bytes; 0 on success, non-zero on failure (the caller keeps its reason). */
typedef int (*pf_pngz_write_fn)(void *ctx, const void *data, size_t n);

typedef struct pf_pngz_opts {
    int width, height; /* the image's */
    int bits;          /* bits a sample as stored: 1, 2, 4, 8 or 16 */
    int channels;      /* samples a pixel as stored: 1 (gray, palette), 2, 3 or 4 */
    int level;         /* zlib level 0 to 9, or -1 (zlib's default, 6) */
    int filter;        /* a mask of PF_PNGZ_* (0: None); several: chosen per row */
    int threads;       /* threads deflating; 0: one per online core */
    int swap16;        /* 16-bit samples come in host order and are stored big-endian */
} pf_pngz_opts;

typedef struct pf_pngz pf_pngz;

/* Whether o's image is worth segments: at least PF_PNGZ_MIN_PARALLEL filtered bytes,
   whatever the threads (the bytes do not depend on them). A writer may write the others
   as it did. */
PF_PNGZ_API int pf_pngz_worth(const pf_pngz_opts *o);

/* Starts the image data of o's image, written through write(ctx, ...). Returns 0, or -1
   with the reason in err (bad options, out of memory). */
PF_PNGZ_API int pf_pngz_begin(const pf_pngz_opts *o, pf_pngz_write_fn write, void *ctx,
                              pf_pngz **out, char *err, size_t errn);

/* The next n rows, row i at rows + i * pitch (its bytes as stored, above). Rows may come
   a few at a time or all at once; the caller's memory is read during the call only. The
   last row ends the stream (its Adler-32 written). Returns 0, or -1 with the reason in
   err: a write failed (the write function's reason is the caller's), zlib failed, out of
   memory, or more rows than the image has. After a failure every call fails. */
PF_PNGZ_API int pf_pngz_rows(pf_pngz *z, const void *rows, size_t pitch, int n, char *err,
                             size_t errn);

/* Frees z (NULL: nothing); a stream not ended is left incomplete. */
PF_PNGZ_API void pf_pngz_free(pf_pngz *z);

/* Writes one chunk: length, type (4 letters), data, CRC. 0 or the write's failure. */
PF_PNGZ_API int pf_pngz_chunk(pf_pngz_write_fn write, void *ctx, const char *type, const void *data,
                              size_t n);

#endif
