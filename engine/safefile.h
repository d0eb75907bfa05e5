/* engine/safefile.h: a file written safely (safefile.c): under a hidden temporary name
 * beside its final one ("<dir>/.<base>.XXXXXX", so the rename is atomic), with the mode
 * any new file would have, renamed into place only when every write succeeded; else
 * removed. The PNG and JPEG writers (pf_png_write, pf_jpeg_write) share it. */
#ifndef PF_SAFEFILE_H
#define PF_SAFEFILE_H

#include <stddef.h>
#include <stdio.h>

/* Creates path's temporary and opens it for writing: PF_OK with *tmp (its name, the
   caller's to pass to pf_safe_close) and *fp, or PF_IO / PF_NO_MEMORY with the reason
   in err, nothing left behind, *tmp and *fp NULL. */
int pf_safe_open(const char *path, char **tmp, FILE **fp, char *err, size_t err_size);

/* Ends the file: closes fp (NULL: already closed; a failed close, such as a full disk,
   is a write error when st is PF_OK), renames tmp to path when st is still PF_OK, else
   removes it, frees tmp. Returns st, or the failure of the close or the rename with the
   reason in err. */
int pf_safe_close(const char *path, char *tmp, FILE *fp, int st, char *err, size_t err_size);

#endif
