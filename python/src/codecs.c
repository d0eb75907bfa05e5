/* codecs.c: PNG files to and from arrays at their full bit depth (pipefuse/png.h), for
 * pipefuse.read_png and pipefuse.write_png, and JPEG files (pipefuse/jpeg.h) for
 * read_jpeg and write_jpeg. A read frame is handed to NumPy without a copy:
 * the FrameBuffer exports the library's frame and frees it with the last array. */
#include "binding.h"

#include <string.h>

#include "pipefuse/jpeg.h"
#include "pipefuse/png.h"

typedef struct {
    PyObject_HEAD pf_frame f;
} FrameBufferObject;

static int FrameBuffer_getbuffer(FrameBufferObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->f.data,
                             (Py_ssize_t)(self->f.pitch * (size_t)self->f.height), 0, flags);
}

static void FrameBuffer_dealloc(FrameBufferObject *self)
{
    pf_frame_free(&self->f);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs FrameBuffer_as_buffer = {(getbufferproc)FrameBuffer_getbuffer, NULL};

PyTypeObject FrameBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pipefuse._pipefuse.FrameBuffer",
    .tp_basicsize = sizeof(FrameBufferObject),
    .tp_dealloc = (destructor)FrameBuffer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The pixels of a decoded image (pipefuse.read_png).",
    .tp_as_buffer = &FrameBuffer_as_buffer,
};

/* read_png(path, max_pixels) -> (buffer, height, width, channels, bits, pitch) */
PyObject *pf_py_read_png(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *path_obj;
    unsigned long long max_pixels = 0;
    if (!PyArg_ParseTuple(args, "O&K:read_png", PyUnicode_FSConverter, &path_obj, &max_pixels))
        return NULL;
    FrameBufferObject *b = PyObject_New(FrameBufferObject, &FrameBufferType);
    if (!b) {
        Py_DECREF(path_obj);
        return NULL;
    }
    memset(&b->f, 0, sizeof b->f);
    char err[1024] = "";
    const char *path = PyBytes_AS_STRING(path_obj);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = pf_png_read(path, max_pixels, &b->f, NULL, err, sizeof err);
    Py_END_ALLOW_THREADS Py_DECREF(path_obj);
    if (rc != PF_OK) {
        Py_DECREF(b);
        return pf_py_raise_status(rc, err);
    }
    PyObject *r = Py_BuildValue("(Oiiiin)", b, b->f.height, b->f.width, b->f.channels,
                                b->f.sample == PF_U16 ? 16 : 8, (Py_ssize_t)b->f.pitch);
    Py_DECREF(b);
    return r;
}

/* write_png's and write_jpeg's common end: the image l describes (in view, checked by the
   caller) packed into rows without gaps and written, as a JPEG with jpeg's options when
   given, else as a PNG at zlib level; both without the GIL. Releases view and path_obj
   whatever happens. */
static PyObject *pack_and_write(PyObject *path_obj, Py_buffer *view, const layout *l, int level,
                                int form, const pf_jpeg_write_opts *jpeg)
{
    int c = l->ndim == 3 ? (int)l->shape[2] : 1;
    size_t item = l->sample == PF_U8 ? 1 : l->sample == PF_U16 ? 2 : 4;
    pf_frame f = {
        NULL, (int)l->shape[1], (int)l->shape[0], (size_t)l->shape[1] * (size_t)c * item, l->sample,
        c};
    void *packed = PyMem_RawMalloc(f.pitch * (size_t)f.height);
    if (!packed) {
        PyBuffer_Release(view);
        Py_DECREF(path_obj);
        return PyErr_NoMemory();
    }
    f.data = packed;
    char err[1024] = "";
    const char *path = PyBytes_AS_STRING(path_obj);
    int rc;
    Py_BEGIN_ALLOW_THREADS pf_staging_pack(l, packed);
    pf_png_write_options po;
    pf_png_write_options_init(&po);
    po.zlib_level = level;
    po.form = (pf_png_form)form;
    rc = jpeg ? pf_jpeg_write(path, &f, jpeg, NULL, err, sizeof err)
              : pf_png_write_opts(path, &f, &po, err, sizeof err);
    Py_END_ALLOW_THREADS PyMem_RawFree(packed);
    PyBuffer_Release(view);
    Py_DECREF(path_obj);
    if (rc != PF_OK)
        return pf_py_raise_status(rc, err);
    Py_RETURN_NONE;
}

/* write_png(path, array, level[, form]): an 8- or 16-bit image of any layout NumPy
   describes (copied to packed rows first where the library could not take it), in the
   PNG form pf_png_form names (0: the frame's own). */
PyObject *pf_py_write_png(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *path_obj, *arr;
    int level = -1, form = 0;
    if (!PyArg_ParseTuple(args, "O&Oi|i:write_png", PyUnicode_FSConverter, &path_obj, &arr, &level,
                          &form))
        return NULL;
    if (form < 0 || form > PF_PNG_FORM_GRAY4) {
        Py_DECREF(path_obj);
        PyErr_Format(PyExc_ValueError, "write_png: form %d", form);
        return NULL;
    }
    Py_buffer view;
    layout l;
    if (pf_py_buffer_layout(arr, 0, "image", "write_png", &view, &l) != 0) {
        Py_DECREF(path_obj);
        return NULL;
    }
    const char *bad =
        l.ndim != 2 && l.ndim != 3 ? "an image is HxW or HxWxC (C = 1..4)"
        : l.sample == PF_F32       ? "PNG holds 8- or 16-bit samples: pass uint8 or "
                                     "uint16 (float32 is not written)"
        : l.ndim == 3 && (l.shape[2] < 1 || l.shape[2] > 4)
            ? "an image has 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels"
        : l.shape[0] < 1 || l.shape[1] < 1 || l.shape[0] > (1 << 20) || l.shape[1] > (1 << 20)
            ? "PNG images are 1 to 1048576 pixels wide and tall"
            : NULL;
    if (bad) {
        PyBuffer_Release(&view);
        Py_DECREF(path_obj);
        if (l.sample == PF_F32 && l.ndim >= 2)
            PyErr_Format(PyExc_TypeError, "write_png: %s", bad);
        else
            PyErr_Format(PyExc_ValueError, "write_png: %s; got shape (%zd%s%zd%s%zd)", bad,
                         l.ndim > 0 ? l.shape[0] : 0, l.ndim > 1 ? ", " : "",
                         l.ndim > 1 ? l.shape[1] : 0, l.ndim > 2 ? ", " : "",
                         l.ndim > 2 ? l.shape[2] : 0);
        return NULL;
    }
    return pack_and_write(path_obj, &view, &l, level, form, NULL);
}

/* ---- JPEG (pipefuse/jpeg.h) ---------------------------------------------------------------- */

PyObject *pf_py_jpeg_available(PyObject *m, PyObject *unused)
{
    (void)m, (void)unused;
    return PyBool_FromLong(pf_jpeg_available());
}

/* read_jpeg(path, max_pixels, keep_orientation) -> (buffer, height, width, channels, 8,
   pitch) */
PyObject *pf_py_read_jpeg(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *path_obj;
    unsigned long long max_pixels = 0;
    int keep = 0;
    if (!PyArg_ParseTuple(args, "O&Kp:read_jpeg", PyUnicode_FSConverter, &path_obj, &max_pixels,
                          &keep))
        return NULL;
    FrameBufferObject *b = PyObject_New(FrameBufferObject, &FrameBufferType);
    if (!b) {
        Py_DECREF(path_obj);
        return NULL;
    }
    memset(&b->f, 0, sizeof b->f);
    pf_jpeg_read_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.size = sizeof opts;
    opts.max_pixels = max_pixels;
    opts.keep_orientation = keep;
    char err[1024] = "";
    const char *path = PyBytes_AS_STRING(path_obj);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = pf_jpeg_read(path, &opts, &b->f, NULL, NULL, err, sizeof err);
    Py_END_ALLOW_THREADS Py_DECREF(path_obj);
    if (rc != PF_OK) {
        Py_DECREF(b);
        return pf_py_raise_status(rc, err);
    }
    PyObject *r = Py_BuildValue("(Oiiiin)", b, b->f.height, b->f.width, b->f.channels, 8,
                                (Py_ssize_t)b->f.pitch);
    Py_DECREF(b);
    return r;
}

/* write_jpeg(path, array, quality, subsampling, progressive, optimize): u8, u16 or f32 of
   1-4 channels, any layout (packed first). */
PyObject *pf_py_write_jpeg(PyObject *m, PyObject *args)
{
    (void)m;
    PyObject *path_obj, *arr;
    pf_jpeg_write_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.size = sizeof opts;
    if (!PyArg_ParseTuple(args, "O&Oiipp:write_jpeg", PyUnicode_FSConverter, &path_obj, &arr,
                          &opts.quality, &opts.subsampling, &opts.progressive, &opts.optimize))
        return NULL;
    Py_buffer view;
    layout l;
    if (pf_py_buffer_layout(arr, 0, "image", "write_jpeg", &view, &l) != 0) {
        Py_DECREF(path_obj);
        return NULL;
    }
    int c = l.ndim == 3 ? (int)l.shape[2] : 1;
    if ((l.ndim != 2 && l.ndim != 3) || c < 1 || c > 4 || l.shape[0] < 1 || l.shape[1] < 1 ||
        l.shape[0] > 65500 || l.shape[1] > 65500) {
        PyBuffer_Release(&view);
        Py_DECREF(path_obj);
        PyErr_SetString(PyExc_ValueError,
                        "write_jpeg: an image is HxW or HxWxC (C = 1..4), 1 to 65500 pixels wide "
                        "and tall");
        return NULL;
    }
    return pack_and_write(path_obj, &view, &l, 0, 0, &opts);
}
