/* binding.h: what the extension's files share (_pipefuse.c: the types and the frame
 * path; staging.c: arrays the C API cannot describe, copied through pooled buffers;
 * codecs.c: PNG and JPEG files to and from arrays; errors.c: the exception classes). */
#ifndef PF_PY_BINDING_H
#define PF_PY_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "pipefuse/pipefuse.h"

/* An array as every protocol describes it: dims, strides in bytes, sample type. */
typedef struct layout {
    char *data;
    int ndim;
    Py_ssize_t shape[3];
    Py_ssize_t strides[3];
    pf_sample sample;
} layout;

/* ---- errors.c ------------------------------------------------------------------------- */

/* Raises the pipefuse.Error subclass of status with msg (the status' own text when msg is
   empty); returns NULL. */
PyObject *pf_py_raise_status(int status, const char *msg);
/* pipefuse.ClosedError (an Error and a RuntimeError), once pf_py_errors_init ran. */
extern PyObject *pf_py_closed_error;
/* Makes Error, ClosedError, STATUS and the status classes, added to module m. -1 on
   failure, with an exception. */
int pf_py_errors_init(PyObject *m);

/* ---- staging.c ------------------------------------------------------------------------ */

/* A pipeline's pool of staging buffers: host arrays whose layout a pf_frame cannot
   describe (negative or odd strides, channels apart, misaligned) are copied into one
   (inputs, before the frame) or out of one (outputs, once the frame is complete). A
   Python object, held by the pipeline and by each ticket that holds buffers, so that a
   buffer always goes back to a live pool. */
extern PyTypeObject StagingPoolType;
PyObject *pf_staging_pool_new(void);
/* A buffer of at least bytes (64-byte aligned), the pool's own when one fits; NULL with
   MemoryError. *size is its size, for pf_staging_give. */
void *pf_staging_take(PyObject *pool, size_t bytes, size_t *size);
void pf_staging_give(PyObject *pool, void *buf, size_t size);
/* Frees the pool's idle buffers (a closed pipeline's). */
void pf_staging_trim(PyObject *pool);

/* Copies an image between an array's layout and a packed buffer (rows of width * channels
   samples, one after another). Needs no GIL. */
void pf_staging_pack(const layout *src, void *dst);
void pf_staging_unpack(const void *src, const layout *dst);

/* ---- codecs.c ------------------------------------------------------------------------- */

/* read_png(path, max_pixels) -> (buffer, height, width, channels, bits, pitch);
   write_png(path, array, level). */
PyObject *pf_py_read_png(PyObject *m, PyObject *args);
PyObject *pf_py_write_png(PyObject *m, PyObject *args);
/* jpeg_available() -> bool; read_jpeg(path, max_pixels, keep_orientation) as read_png;
   write_jpeg(path, array, quality, subsampling, progressive, optimize). */
PyObject *pf_py_jpeg_available(PyObject *m, PyObject *unused);
PyObject *pf_py_read_jpeg(PyObject *m, PyObject *args);
PyObject *pf_py_write_jpeg(PyObject *m, PyObject *args);
/* The buffer object read_png returns: owns a frame from the C library. */
extern PyTypeObject FrameBufferType;

/* Fills l from a host array through the buffer protocol (formats u8, u16, f32 as
   accepted by submit); TypeError/ValueError naming what/name on failure. The caller owns
   *view on success. */
int pf_py_buffer_layout(PyObject *obj, int writable, const char *what, const char *name,
                        Py_buffer *view, layout *l);

#endif
