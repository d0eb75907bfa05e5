/* cli/images.h: the image files of `pipefuse run`: which reader a file gets (by its
 * bytes), decoding PNG and JPEG inputs whole or by rows, the JPEG and --format options,
 * and which encoder an output gets.
 *
 * An input is read by what its first bytes say, whatever its name: a PNG named .jpg is
 * read as the PNG it is, and the reverse. A file that is neither goes to the reader its
 * name's extension suggests, which fails naming what the file is when it knows.
 *
 * An image output is written in the format its name's extension says (.png, .jpg,
 * .jpeg: cli_format_of_name); a name that says none takes --format, and --format auto
 * (the default) the input's format. The default names follow the same rule: {ext} of an
 * image output is png or jpg by --format, or by the input's name under auto.
 */
#ifndef PF_CLI_IMAGES_H
#define PF_CLI_IMAGES_H

#include "cli.h"
#include "pipefuse/jpeg.h"

typedef struct cli_image_opts {
    cli_format format;       /* CLI_FMT_NONE (auto), CLI_FMT_PNG or CLI_FMT_JPEG */
    pf_jpeg_write_opts jpeg; /* --quality, --subsampling, --progressive, --optimize */
    int keep_orientation;    /* --keep-orientation */
    const char *jpeg_option; /* the first JPEG-only option given (a notice where no output
                                can be JPEG); the supervisor's only */
} cli_image_opts;

/* The batch's settings: set by the command line (cli_image_option) in the supervisor,
   inherited by a forked worker and passed to an executed one (cli_image_opts_str and
   cli_image_opts_load, batch/config.c's configuration). */
extern cli_image_opts cli_images;

/* opt (and its value v, NULL for a flag) when it is one of ours: 1 taken, 0 not ours,
   -1 a bad value (why in err). */
int cli_image_option(const char *opt, const char *v, char *err, size_t errn);
const char *cli_image_opts_str(void); /* a static buffer */
void cli_image_opts_load(const char *s);

/* The format of a file by its first bytes: CLI_FMT_PNG, CLI_FMT_JPEG, or CLI_FMT_NONE
   (neither, unreadable). */
cli_format cli_image_sniff(const char *path);

/* The extension an image output of input gets in default names: "png" or "jpg". */
const char *cli_image_ext(const char *input);

/* Whether image output k of p is one only PNG holds: a declared form of 1, 2 or 4 bits
   of gray or a palette, or samples of more than 8 bits. Such an output's {ext} is png
   whatever the input and --format (its extension CLI_EXT_PNG_ONLY, cli.h). */
int cli_png_only(const pf_pipeline *p, int k);

/* The format output name `name` of an input of format src is written in. */
cli_format cli_image_out_format(const char *name, cli_format src);

/* An input decoded whole: the frame, its header as a PNG's (for a JPEG: 8 bits, gray
   or RGB, its size) and its metadata unless strip (PNG chunks in *pm, JPEG ICC/EXIF in
   *jm; either NULL). *fmt gets the input's format. The message starts with the path. */
int cli_image_read(const char *path, unsigned long long max_pixels, unsigned long long max_memory,
                   int strip, pf_frame *out, pf_png_info *src, pf_png_meta **pm, pf_jpeg_meta **jm,
                   cli_format *fmt, char *err, size_t errn);

/* An input read by rows (bands): as cli_image_read, then rows as asked. open returns
   PF_UNSUPPORTED where the file cannot be read in order (an interlaced PNG, a JPEG turned
   by its EXIF orientation): read it whole. */
typedef struct cli_rows cli_rows;
int cli_rows_open(const char *path, unsigned long long max_pixels, unsigned long long max_memory,
                  int strip, cli_rows **out, pf_frame *format, pf_png_info *src, pf_png_meta **pm,
                  pf_jpeg_meta **jm, cli_format *fmt, char *err, size_t errn);
int cli_rows_read(cli_rows *r, pf_frame *dst, int n, char *err, size_t errn);
void cli_rows_close(cli_rows *r);

/* A JPEG input's header for the batch's estimates, as batch/budget.c reads a PNG's IHDR: the
   size after its orientation, depth 8, PNG colour type 0 (gray) or 2 (RGB), and
   *interlace 1 when it cannot be read by rows. 0, or -1 when path is no JPEG. */
int cli_jpeg_ihdr(const char *path, unsigned long long *w, unsigned long long *h, int *depth,
                  int *ctype, int *interlace);

#endif
