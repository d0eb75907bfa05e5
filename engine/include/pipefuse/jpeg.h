/* pipefuse/jpeg.h: JPEG files to and from frames, with libjpeg-turbo (the libjpeg API).
 *
 * Reading gives an 8-bit frame: gray files 1 channel, colour files (YCbCr, RGB, CMYK,
 * YCCK) 3 channels RGB. Baseline, extended and progressive files, Huffman or arithmetic
 * coded, any chroma subsampling (4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1...) and restart
 * markers are read. CMYK and YCCK become RGB by R = (1 - C)(1 - K) (Adobe files, whose
 * APP14 marks them, store the inks inverted, as Photoshop writes them); their ICC
 * profile, for CMYK, is then not kept. 12-bit files are refused with PF_UNSUPPORTED.
 * Chroma is upsampled smoothly ("fancy" upsampling) and the inverse DCT is the accurate
 * integer one, so the pixels are those of djpeg's defaults.
 *
 * A corrupt or truncated file is PF_IMAGE: libjpeg's warnings that data is missing or
 * wrong (premature end of file or of a data segment, bad Huffman or arithmetic code,
 * a lost restart marker) fail the read instead of yielding a gray or smeared image.
 * Warnings about harmless oddities (extraneous bytes before a marker, an unknown
 * JFIF version) are ignored. A progressive file of more than 500 scans is refused
 * (PF_IMAGE): such files exist only to spend CPU time.
 *
 * Size limits apply to the header, before any pixel memory is allocated: width*height
 * over max_pixels is PF_TOO_LARGE (0: PF_PNG_DEFAULT_MAX_PIXELS); a sequential
 * Huffman-coded file whose data could not hold the blocks its header declares (every
 * 8x8 block costs at least 2 bits) is PF_IMAGE; max_memory bounds what libjpeg itself
 * may allocate (a progressive file's coefficients: about 2 bytes a sample).
 *
 * EXIF orientation (APP1 "Exif", IFD0 tag 0x0112) is applied by default: the frame is
 * the image as it is meant to be seen, 90-degree turns swapping width and height.
 * keep_orientation gives the rows as stored. Metadata (pf_jpeg_meta) keeps the ICC
 * profile (APP2 "ICC_PROFILE", reassembled from its segments) and the EXIF block, whose
 * orientation tag is set to 1 when the orientation was applied, so that a writer
 * carrying it does not have the image turned twice.
 *
 * Writing takes a frame of 1-4 channels, u8, u16 or f32: gray (1 channel) is written
 * as a gray JPEG, colour as YCbCr. Rules for what JPEG cannot hold: u16 samples are
 * rounded to 8 bits (v * 255 / 65535), f32 samples clamped to [0, 1] and scaled to
 * 0..255, rounded; an alpha channel (2 or 4 channels) is composited onto white,
 * c' = c * a + 1 * (1 - a), as a viewer shows a transparent image on a white page (a
 * frame whose alpha is opaque everywhere is written unchanged).
 *
 * Messages start with the file's path (the name, for memory reads). err may be NULL.
 * Every function is safe to call from several threads at once on different objects.
 * In a build without libjpeg the functions exist and return PF_UNSUPPORTED (say so in
 * err); pf_jpeg_available() tells.
 */
#ifndef PIPEFUSE_JPEG_H
#define PIPEFUSE_JPEG_H

#include <stdio.h>

#include "pipefuse/png.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PF_JPEG_DEFAULT_QUALITY 85

/* 1 when this library was built with libjpeg, else 0 (every codec call is then
   PF_UNSUPPORTED). */
int pf_jpeg_available(void);

/* Whether data starts like a JPEG file (FF D8 FF): what the reader will try. n >= 3. */
int pf_jpeg_sniff(const void *data, size_t n);

/* ---- Reading --------------------------------------------------------------------------- */

typedef struct pf_jpeg_read_opts {
    size_t size;                   /* sizeof(pf_jpeg_read_opts) */
    unsigned long long max_pixels; /* 0: PF_PNG_DEFAULT_MAX_PIXELS */
    unsigned long long max_memory; /* bytes libjpeg may allocate; 0: no limit of its own */
    int keep_orientation;          /* 1: rows as stored, EXIF orientation not applied */
} pf_jpeg_read_opts;

/* The color_space of pf_jpeg_info, as stored. */
enum { PF_JPEG_GRAY = 1, PF_JPEG_RGB = 2, PF_JPEG_YCBCR = 3, PF_JPEG_CMYK = 4, PF_JPEG_YCCK = 5 };

typedef struct pf_jpeg_info {
    int width, height;               /* of the frame read: after the orientation */
    int stored_width, stored_height; /* as stored */
    int components;                  /* 1, 3 or 4 */
    int color_space;                 /* PF_JPEG_GRAY ... PF_JPEG_YCCK (0: unknown) */
    int precision;                   /* bits per sample: 8 (12 is refused) */
    int progressive, arithmetic;
    int restart_interval; /* MCUs between restart markers (0: none, or not known) */
    int h_samp, v_samp;   /* the first component's sampling factors over the others':
                             2x2 is 4:2:0, 2x1 4:2:2, 1x2 4:4:0, 1x1 4:4:4 or gray */
    int orientation;      /* EXIF orientation as stored, 1-8 (1: none given) */
    int applied;          /* the orientation was applied to the frame */
    int has_icc, has_exif;
} pf_jpeg_info;

/* Metadata carried from an input to an output: the ICC profile and the EXIF block. A
   meta is read-only once made; several writes may share it. */
typedef struct pf_jpeg_meta pf_jpeg_meta;

/* Reads a JPEG file into a newly allocated frame (free with pf_frame_free). opts NULL
   takes the defaults. info (may be NULL) is filled as soon as the header is read, so on
   PF_TOO_LARGE it holds the claimed size. meta NULL keeps no metadata; otherwise *meta
   gets it (NULL when the file has none, and on failure). Returns PF_OK, PF_IO (cannot
   open or read), PF_IMAGE (not a JPEG, corrupt, truncated: the reason in the message; a
   PNG or another known format is named), PF_TOO_LARGE, PF_UNSUPPORTED (12-bit or
   lossless files; no libjpeg) or PF_NO_MEMORY, with out left empty (data NULL). */
int pf_jpeg_read(const char *path, const pf_jpeg_read_opts *opts, pf_frame *out, pf_jpeg_info *info,
                 pf_jpeg_meta **meta, char *err, size_t err_size);

/* The same from memory. name labels messages (NULL: "<memory>"). */
int pf_jpeg_read_memory(const void *data, size_t size, const char *name,
                        const pf_jpeg_read_opts *opts, pf_frame *out, pf_jpeg_info *info,
                        pf_jpeg_meta **meta, char *err, size_t err_size);

/* The header only (and the EXIF orientation): info as pf_jpeg_read fills it, nothing
   decoded. opts as for reading (the orientation applies to info's width and height). */
int pf_jpeg_read_header(const char *path, const pf_jpeg_read_opts *opts, pf_jpeg_info *info,
                        char *err, size_t err_size);

/* The same from memory (name labels messages; NULL: "<memory>"). */
int pf_jpeg_read_header_memory(const void *data, size_t size, const char *name,
                               const pf_jpeg_read_opts *opts, pf_jpeg_info *info, char *err,
                               size_t err_size);

/* ---- Reading by rows (large images in bands, pipefuse/bands.h) -------------------------- */

typedef struct pf_jpeg_rows pf_jpeg_rows;

/* Opens a JPEG for reading by rows: header and metadata now, rows as asked. *format
   gets the frame format (data NULL). Fails as pf_jpeg_read does, or PF_UNSUPPORTED when
   the EXIF orientation turns or flips the image vertically (3 to 8: rows cannot come in
   order; read it whole) unless keep_orientation. A progressive file is decoded into
   libjpeg's coefficient buffer (about 2 bytes a sample) before the first row. */
int pf_jpeg_rows_open(const char *path, const pf_jpeg_read_opts *opts, pf_jpeg_rows **out,
                      pf_frame *format, pf_jpeg_info *info, pf_jpeg_meta **meta, char *err,
                      size_t err_size);
/* Reads the next n rows into rows 0..n-1 of dst (the format open gave, any pitch). After
   the last row the file is read to its end, so a truncated file fails there. */
int pf_jpeg_rows_read(pf_jpeg_rows *r, pf_frame *dst, int n, char *err, size_t err_size);
int pf_jpeg_rows_done(const pf_jpeg_rows *r);
void pf_jpeg_rows_close(pf_jpeg_rows *r); /* NULL: nothing */

/* ---- Writing ---------------------------------------------------------------------------- */

/* Chroma subsampling of colour output (gray has none). */
enum { PF_JPEG_420 = 0, PF_JPEG_422 = 1, PF_JPEG_444 = 2, PF_JPEG_440 = 3 };

typedef struct pf_jpeg_write_opts {
    size_t size;     /* sizeof(pf_jpeg_write_opts) */
    int quality;     /* 1-100; 0: PF_JPEG_DEFAULT_QUALITY */
    int subsampling; /* PF_JPEG_420 (the default), _422, _444, _440 */
    int progressive; /* 1: progressive (its Huffman tables are always optimised) */
    int optimize;    /* 1: optimised Huffman tables (a second pass; smaller files) */
} pf_jpeg_write_opts;

/* Writes frame f (see the rules above) to path as "<dir>/.<name>.XXXXXX", renamed onto
   path only once complete and closed (as pf_png_write). opts NULL: the defaults. meta
   (may be NULL) adds the ICC profile when it describes the frame written (a GRAY profile
   for a gray frame, an RGB one for colour) and the EXIF block. Returns PF_OK,
   PF_INVALID_ARGUMENT (nothing created), PF_IO, PF_NO_MEMORY or PF_UNSUPPORTED. */
int pf_jpeg_write(const char *path, const pf_frame *f, const pf_jpeg_write_opts *opts,
                  const pf_jpeg_meta *meta, char *err, size_t err_size);

/* Encodes f into memory: *out (malloc'd; free with free()) of *out_size bytes. */
int pf_jpeg_encode(const pf_frame *f, const pf_jpeg_write_opts *opts, const pf_jpeg_meta *meta,
                   void **out, size_t *out_size, char *err, size_t err_size);

/* A row-at-a-time encoder onto an open stdio stream (the caller owns fp, writes it
   safely and closes it). begin writes the header and metadata for frames of format's
   size and format (its data is not read); rows appends rows 0..n-1 of rows; finish
   writes the end of the file and frees w; abort frees w after a failure or instead of
   finishing. name labels messages. A write error (a full disk) carries errno's text. */
typedef struct pf_jpeg_writer pf_jpeg_writer;
int pf_jpeg_writer_begin(FILE *fp, const char *name, const pf_frame *format,
                         const pf_jpeg_write_opts *opts, const pf_jpeg_meta *meta,
                         pf_jpeg_writer **out, char *err, size_t err_size);
int pf_jpeg_writer_rows(pf_jpeg_writer *w, const pf_frame *rows, int n, char *err, size_t err_size);
int pf_jpeg_writer_finish(pf_jpeg_writer *w, char *err, size_t err_size);
void pf_jpeg_writer_abort(pf_jpeg_writer *w);

/* ---- Metadata ----------------------------------------------------------------------------- */

void pf_jpeg_meta_free(pf_jpeg_meta *m); /* NULL: nothing */
/* The ICC profile (the whole profile, reassembled) and the EXIF block (the TIFF
   structure, "II*\0" or "MM\0*" first, without JPEG's "Exif\0\0" prefix, as PNG's eXIf
   holds it). 1 with data and size when present, else 0. */
int pf_jpeg_meta_icc(const pf_jpeg_meta *m, const void **data, size_t *size);
int pf_jpeg_meta_exif(const pf_jpeg_meta *m, const void **data, size_t *size);
/* The ICC profile's colour space from its header ("RGB ", "GRAY", "CMYK"...; "" when
   absent or too short), to say whether it describes a frame of 1 or 3 channels. */
const char *pf_jpeg_meta_icc_space(const pf_jpeg_meta *m);
/* A meta of the given profile and EXIF block (either NULL; both copied). An EXIF block
   may come with or without the "Exif\0\0" prefix; one that is not a TIFF structure is
   PF_INVALID_ARGUMENT. */
int pf_jpeg_meta_new(const void *icc, size_t icc_size, const void *exif, size_t exif_size,
                     pf_jpeg_meta **out, char *err, size_t err_size);
/* The metadata of a PNG (pf_png_read_meta) that a JPEG can hold: the iCCP profile,
   inflated. *out NULL when there is none (PF_OK). */
int pf_jpeg_meta_from_png(const pf_png_meta *pm, pf_jpeg_meta **out, char *err, size_t err_size);

/* ---- On the GPU: nvJPEG ---------------------------------------------------------------------
 *
 * libnvjpeg is loaded at run time (dlopen of libnvjpeg.so.13, .12, .11), so a binary built
 * with CUDA starts where it is missing; there, and in a build without CUDA, create says
 * PF_UNSUPPORTED (no device: PF_NO_DEVICE). A decoder serves one thread at a time.
 *
 * Decoding takes files in host memory and gives device frames (cudaMalloc'd, u8, gray 1
 * channel or RGB 3, pitch width * channels; free with pf_jpeg_gpu_frame_free), the same
 * formats as pf_jpeg_read. Each file goes where it can be decoded: baseline colour files
 * to one batched call of nvJPEG's hardware backend where the device has JPEG engines
 * (NVJPEG_BACKEND_HARDWARE, A100, H100, H200...), else to the GPU/hybrid backend;
 * progressive and gray files to the GPU/hybrid backend; files nvJPEG does not take
 * (arithmetic coding, CMYK/YCCK, 12-bit, an EXIF orientation to apply, a file nvJPEG
 * refuses or fails on) to libjpeg, whose frame is copied up. A file without its EOI
 * marker is refused as truncated before nvJPEG sees it; corrupt data inside a scan is
 * reported as nvJPEG reports it (libjpeg then reads the file and names the reason). The
 * pixels differ from libjpeg's by the chroma upsampling and IDCT rounding: a few steps
 * at most (tests/jpeg/jpeg_gpu.c states the bound). Metadata is not read here (read it
 * with pf_jpeg_read_header_memory and pf_jpeg_read_memory where it is wanted). */
typedef struct pf_jpeg_gpu pf_jpeg_gpu;

/* Opens nvJPEG on the calling thread's current CUDA device, for batches of up to
   max_batch files (0: 32). Returns PF_OK, PF_UNSUPPORTED (no libnvjpeg, no CUDA in this
   build, no libjpeg), PF_NO_DEVICE or PF_CUDA, with the reason in err. */
int pf_jpeg_gpu_create(int max_batch, pf_jpeg_gpu **out, char *err, size_t err_size);
void pf_jpeg_gpu_destroy(pf_jpeg_gpu *g); /* NULL: nothing */
/* "hardware" or "gpu": the backend of the batched decode. */
const char *pf_jpeg_gpu_backend(const pf_jpeg_gpu *g);

/* Decodes n files (data[i], size[i]; names[i] labels messages, may be NULL) on stream (a
   cudaStream_t; NULL: the default stream), waiting for it before returning. out[i] gets
   file i's device frame, status[i] its PF_ status; where[i] (may be NULL) says who decoded
   it: 'h' hardware, 'g' nvJPEG's GPU backend, 'c' libjpeg. Returns PF_OK when every file
   decoded, else the first failure's status with its message in err (the others' frames
   are still given). opts: as pf_jpeg_read's (NULL: the defaults). */
int pf_jpeg_gpu_decode(pf_jpeg_gpu *g, const void *const *data, const size_t *size,
                       const char *const *names, int n, const pf_jpeg_read_opts *opts, void *stream,
                       pf_frame *out, int *status, char *where, char *err, size_t err_size);

/* Encodes a device frame (u8, 1 or 3 channels; gray written gray) with nvJPEG on stream:
   quality and subsampling as opts says (NULL: the defaults), optimised Huffman tables
   when asked, baseline (progressive is written by pf_jpeg_encode on the CPU). *out is
   host memory (malloc'd; free with free()). meta: the ICC profile and EXIF are spliced
   in after SOI as pf_jpeg_encode writes them. */
int pf_jpeg_gpu_encode(pf_jpeg_gpu *g, const pf_frame *device_frame, const pf_jpeg_write_opts *opts,
                       const pf_jpeg_meta *meta, void *stream, void **out, size_t *out_size,
                       char *err, size_t err_size);

/* Frees a frame pf_jpeg_gpu_decode gave (cudaFree) and empties it; NULL data: nothing. */
void pf_jpeg_gpu_frame_free(pf_frame *f);

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_JPEG_H */
