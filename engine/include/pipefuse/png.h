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
   a file already at path is untouched. Rows are filtered as libpng does by default
   (8 and 16 bits: each row's cheapest of the five filters; palettes and fewer bits: no
   filter). A frame of 256 KB or more of filtered rows is deflated in segments, on one
   thread per online core (pigz's method: one zlib stream, the same pixels, other bytes
   than libpng's deflate, the same bytes whatever the threads; the calling thread waits
   for them); pf_png_write_opts' threads chooses how many. */
int pf_png_write(const char *path, const pf_frame *f, int zlib_level, char *err, size_t err_size);

/* ---- Metadata: colour, density and text chunks, carried from an input to an output ----
 *
 * pf_png_read_meta reads like pf_png_read and also keeps the file's gAMA, cHRM, sRGB,
 * iCCP, sBIT, pHYs, tEXt, zTXt and iTXt chunks, raw (nothing is parsed or inflated).
 * pf_png_write_meta writes like pf_png_write plus those of them that still describe
 * the frame written: gAMA, cHRM, sRGB and the text always (stages work on the stored,
 * encoded values, so the encoding still holds); iCCP while the frame is gray for a gray
 * source or colour for a colour source (an ICC profile is for one or the other); sBIT
 * when the colour type and bit depth written are the source's; pHYs when the size is
 * (pf_png_write_opts with a geometry: scaled and swapped, below). The source's palette
 * (PLTE, tRNS) is kept too, for PF_PNG_FORM_PALETTE and AUTO to reuse. meta NULL writes
 * none. *meta is NULL on failure; free it with pf_png_meta_free (NULL: no
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

/* ---- Density through geometry: pHYs for an output of another size or orientation ----
 *
 * pf_png_geometry says how an output's pixel grid relates to its source's: swap when
 * the output's x axis runs along the source's y (a quarter turn), and how many output
 * pixels stand for one source pixel along the output's x and y (resize: out width / in
 * width; crop, pad, flip, a half turn: 1). With it, the source's pHYs is written as
 * the density of the output's pixels: pixels per unit along x = the source's along x
 * (y when swapped) times scale_x, rounded to the nearest integer, likewise y, the unit
 * kept; a density that rounds to 0 or past 2^31 - 1 is dropped. Without it (NULL) pHYs
 * is kept when the size is the source's and dropped otherwise. */
typedef struct pf_png_geometry {
    uint32_t size;           /* sizeof(pf_png_geometry) */
    int swap;                /* the output's x runs along the source's y */
    double scale_x, scale_y; /* output pixels per source pixel, along the output's x, y */
} pf_png_geometry;

/* The identity: size set, no swap, scales 1. */
void pf_png_geometry_init(pf_png_geometry *g);
/* *g followed by next (next's source is g's output): swaps and scales composed. */
void pf_png_geometry_then(pf_png_geometry *g, const pf_png_geometry *next);
/* The 9 bytes of the pHYs chunk meta's source density takes in a w x h output by g
   (NULL: the size rule above): 1 and data filled, or 0 when no pHYs is written. */
int pf_png_meta_phys(const pf_png_meta *meta, const pf_png_geometry *g, int w, int h,
                     unsigned char data[9]);
/* The geometry of image output i of p relative to p's first input for a first input of
   width x height: 1 and *g filled, composed along the output's chain of primary inputs
   (each stage's first) from the built-in geometry plugin's stages: resize scales by
   (output width / input width, output height / input height), crop, pad, flip and a
   half turn keep the grid, a quarter turn (rotate's angle 90 or 270, or degrees an odd
   multiple of 90) swaps it; composite's overlay keeps its base's (its first input's);
   other stages keep it where they are not resample stages.
   0 (no density should be carried) for a rotation by other degrees, a resample stage of
   another plugin, a chain that starts at another input, a table output, a size a stage
   refuses, or a bad argument. Reads only the loaded pipeline (no plan needed): safe
   while other threads run it, not while its params are changed. */
int pf_pipeline_output_geometry(const pf_pipeline *p, int i, int width, int height,
                                pf_png_geometry *g);

/* ---- Output forms: palette and low-bit gray --------------------------------------------
 *
 * PF_PNG_FORM_FRAME writes the frame's own colour type and depth. PF_PNG_FORM_AUTO
 * writes the smallest lossless form: the same pixels as the frame when read back
 * (pf_png_read gives the same samples, in as many channels as the form keeps): alpha
 * dropped where every pixel is opaque, colour where every pixel is gray, 16 bits to 8
 * where every sample is a multiple of 257, gray to 1, 2 or 4 bits where every sample is
 * a level of that depth (k * 255 / (2^bits - 1)), or a palette of 1, 2, 4 or 8 bits
 * where the frame has at most 256 distinct pixels (the source's palette, in its order,
 * where the meta holds one and every pixel is in it); of these, the fewest bytes of
 * image data before compression (rows with their filter byte, plus PLTE and tRNS),
 * ties going to the form that is not a palette. Colour and gray do not trade places
 * where the meta carries an ICC profile (iCCP is for one or the other).
 * PF_PNG_FORM_PALETTE writes a palette of 8-bit pixels (16-bit samples rounded to 8
 * bits): the source's palette where every pixel is in it, else an exact one where there
 * are at most 256 distinct pixels, else up to 256 colours by median cut over a
 * histogram of 5 bits a colour channel and 3 of alpha (lossy: each pixel the mean of
 * its box); the palette is as short as the pixels need and its depth 1, 2, 4 or 8 bits.
 * PF_PNG_FORM_GRAY1, 2 and 4 write a gray frame (1 channel) with 1, 2 or 4 bits a
 * sample, each sample rounded half up to the nearest level (exact for samples already
 * on a level: a thresholded page). Gray bits on a frame of colour or alpha are
 * PF_INVALID_ARGUMENT, naming both. */
typedef enum pf_png_form {
    PF_PNG_FORM_FRAME = 0,
    PF_PNG_FORM_AUTO = 1,
    PF_PNG_FORM_PALETTE = 2,
    PF_PNG_FORM_GRAY1 = 3,
    PF_PNG_FORM_GRAY2 = 4,
    PF_PNG_FORM_GRAY4 = 5
} pf_png_form;

/* The form's name as pipeline files write it ("palette", "gray1", ...; "auto" for AUTO,
   "" for FRAME), and back (-1: none). */
const char *pf_png_form_name(pf_png_form form);
int pf_png_form_from_name(const char *name);

/* The form a pipeline's image output i asks for (its "format" in the pipeline file:
   PF_PNG_FORM_AUTO for "auto" or none, PALETTE, GRAY1/2/4, FRAME for the formats that
   name channels and depth: gray8... rgba16); -1 for a bad index or a table. */
int pf_pipeline_output_png_form(const pf_pipeline *p, int i);

/* A frame in the form it is written: IHDR's bit depth and colour type, the palette and
   tRNS, and the rows as PNG stores them (packed below 8 bits; 16-bit samples in host
   byte order), row y at rows + y * pitch, row_bytes each. */
typedef struct pf_png_packed {
    int width, height, bit_depth, color_type;
    int n_palette, n_trans;
    unsigned char palette[256 * 3], trans[256];
    unsigned char *rows; /* NULL: the frame's own rows are written as they are */
    size_t pitch, row_bytes;
} pf_png_packed;

/* Converts f to form for writing (meta: the source's palette and iCCP, may be NULL);
   free with pf_png_packed_free. The gray forms pack each row on its own, so a writer
   working in bands of rows may pack each band as a frame of its own; AUTO and PALETTE
   look at the whole frame. PF_OK, PF_INVALID_ARGUMENT (a form that does not fit,
   message in err) or PF_NO_MEMORY. For PF_PNG_FORM_FRAME, and for AUTO where the frame's
   own form is the smallest, rows is NULL. */
int pf_png_pack(const pf_frame *f, pf_png_form form, const pf_png_meta *meta, pf_png_packed *out,
                char *err, size_t err_size);
void pf_png_packed_free(pf_png_packed *p);

/* A survey of an image's rows, band after band, for a writer that writes each band as
   it comes: pf_png_survey_auto_is_frame then says, from what the rows held, whether
   PF_PNG_FORM_AUTO keeps the frame's own form for the whole image (1: what was written
   band by band in that form is auto's file), or chooses another (0: pack the whole
   image with pf_png_pack; meta: the source's palette and iCCP, as for it). Bands must
   have one width, channel count and sample type (else PF_INVALID_ARGUMENT); a survey
   holds about 7 KB whatever the image. */
typedef struct pf_png_survey pf_png_survey;
int pf_png_survey_new(pf_png_survey **out);
int pf_png_survey_rows(pf_png_survey *s, const pf_frame *band);
int pf_png_survey_auto_is_frame(const pf_png_survey *s, const pf_png_meta *meta);
void pf_png_survey_free(pf_png_survey *s);

/* Writing with options: pf_png_write_meta's file handling and chunk rules, with a form
   and a geometry. Initialise with pf_png_write_options_init, then set what differs. */
typedef struct pf_png_write_options {
    uint32_t size;                   /* sizeof(pf_png_write_options) */
    int zlib_level;                  /* 0-9, -1 libpng's default (the default) */
    pf_png_form form;                /* PF_PNG_FORM_FRAME by default */
    const pf_png_meta *meta;         /* chunks to carry from the source; NULL none */
    const pf_png_geometry *geometry; /* for pHYs; NULL: the size rule */
    int threads; /* deflating a large image (pf_png_write): 0 one per online core (the
                    default), 1 serial, up to 1024 */
} pf_png_write_options;
void pf_png_write_options_init(pf_png_write_options *o);
int pf_png_write_opts(const char *path, const pf_frame *f, const pf_png_write_options *o, char *err,
                      size_t err_size);

/* Allocates a frame (rows 16-byte aligned, pitch a multiple of 16); free with
   pf_frame_free. Returns PF_OK, PF_INVALID_ARGUMENT or PF_NO_MEMORY. */
int pf_frame_alloc(pf_frame *f, int width, int height, pf_sample sample, int channels);
void pf_frame_free(pf_frame *f);

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_PNG_H */
