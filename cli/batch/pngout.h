/* cli/batch/pngout.h: one PNG output written a band of rows at a time (pngout.c), and a
 * table output, for outfile.c's temporaries and commit. */
#ifndef PF_CLI_PNGOUT_H
#define PF_CLI_PNGOUT_H

#include <png.h>
#include <setjmp.h>
#include <stdio.h>

#include "batch.h"
#include "png_deflate.h" /* engine/: exported, not installed */

/* One PNG being written: libpng's state between calls. Every call into libpng sets jmp
   first (png_err_fn jumps back there) and points err at its caller's buffer. The form
   (pf_png_pack, pipefuse/png.h) is decided by pngout_begin: pk holds IHDR's depth and
   colour type, the palette, and for auto and palette the whole image's packed rows
   (NULL: the frame's own rows, or the gray forms, packed a band at a time into band). */
typedef struct png_out {
    char *err;
    size_t errn;
    jmp_buf jmp;
    png_structp png;
    png_infop info;
    int rows_left;
    int form;
    pf_png_packed pk, band;
    int next; /* the next row of pk.rows */
    /* A large image's data deflated in segments on several threads (png_deflate.h):
       the IDAT chunks and IEND then go to fp through z, not through libpng. */
    FILE *fp;
    pf_pngz *z;
} png_out;

void pngout_drop(png_out *w);
int whole_form(int form);
int pngout_form(png_out *w, const pf_frame *f, const out_item *it, char *err, size_t errn);
int pngout_begin(png_out *w, FILE *fp, const pf_frame *f, int zlib, int filter, int threads,
                 const out_item *it, char *err, size_t errn);
int pngout_rows(png_out *w, const pf_frame *f, int n, char *err, size_t errn);
int pngout_finish(png_out *w, char *err, size_t errn);
void write_table(FILE *f, const pf_table *t, int json);

#endif
