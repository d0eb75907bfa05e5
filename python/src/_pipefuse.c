/* _pipefuse.c: the CPython extension behind `import pipefuse`.
 *
 * A thin layer over the public C API (pipefuse/pipefuse.h): it owns the handles, turns
 * Python arrays into pf_frame descriptors (without copying where a pf_frame can describe
 * the array; else through staging.c), releases the GIL while the engine works, waits in
 * slices so that Python's signal handlers run (Ctrl-C cancels the frame), and turns a
 * failed status into a pipefuse.Error subclass (errors.c) that carries the status and
 * the handle's message. The friendlier surface (dicts of inputs, outputs allocated for
 * the caller, tables as NumPy arrays, logging) is pipefuse/__init__.py.
 *
 * Arrays reach the engine in four ways, tried in this order:
 *   - torch.Tensor: read through its own accessors (data_ptr, shape, stride), the
 *     cheapest way per frame; CPU tensors through .numpy() (no copy);
 *   - the buffer protocol (NumPy and anything like it): host frames;
 *   - __dlpack__ / __dlpack_device__ (CuPy, JAX, ...): device frames, asked for on the
 *     stream the frame runs on, so the producer orders its work before ours;
 *   - __cuda_array_interface__ (Numba, ...): device frames.
 * An image is HxW (one channel) or HxWxC (C = 1..4) of uint8, uint16 or float32. Device
 * arrays need the channels and pixels of a row packed (any row pitch); host arrays may
 * have any layout, copied once through the pipeline's staging pool when needed.
 *
 * Frames in flight: host frames go through pf_pipeline_submit_async (a CPU frame is
 * queued on the engine's threads). A Ticket holds what the engine may still read or
 * write (the buffers of host frames, staging buffers, every array of device frames)
 * until the frame is known to be complete: waited for, retired by a later submit (a
 * device slot reused, or the CPU's one queued frame), or ended by a new plan. The pipeline keeps its unfinished tickets, so dropping one
 * never frees memory under the GPU.
 */
#include "binding.h"

#include <limits.h>
#include <pthread.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/png.h" /* an output's PNG form */

#define MAX_FRAMES 64 /* inputs or outputs per frame; the engine's own limit is lower */

/* Errors: errors.c (raise_status raises a status' class with a message). */
#define raise_status pf_py_raise_status

/* ---- Lazily found modules and types ------------------------------------------------------ */

static PyObject *json_dumps;      /* json.dumps */
static PyObject *np_asarray;      /* numpy.asarray, for host inputs without a buffer */
static PyObject *torch_tensor;    /* torch.Tensor once torch is imported, else NULL */
static PyObject *torch_dtypes[3]; /* torch.uint8, torch.uint16 (newer torch), torch.float32 */

/* torch.Tensor, when the program imported torch; never imports it. */
static PyObject *torch_tensor_type(void)
{
    if (torch_tensor)
        return torch_tensor;
    PyObject *torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch"); /* borrowed */
    if (!torch)
        return NULL;
    PyObject *t = PyObject_GetAttrString(torch, "Tensor");
    if (!t || !PyType_Check(t)) {
        Py_XDECREF(t);
        PyErr_Clear();
        return NULL;
    }
    static const char *const names[3] = {"uint8", "uint16", "float32"};
    for (int i = 0; i < 3; i++) {
        torch_dtypes[i] = PyObject_GetAttrString(torch, names[i]);
        if (!torch_dtypes[i])
            PyErr_Clear(); /* torch before 2.3 has no uint16 */
    }
    torch_tensor = t;
    return torch_tensor;
}

static int is_torch_tensor(PyObject *obj)
{
    PyObject *t = torch_tensor_type();
    return t && PyObject_TypeCheck(obj, (PyTypeObject *)t);
}

/* ---- Array layouts -> pf_frame ------------------------------------------------------------ */

static size_t sample_bytes(pf_sample s)
{
    return s == PF_U8 ? 1 : s == PF_U16 ? 2 : 4;
}

/* Checks a layout against what pf_frame can describe and fills f. what/name label the
   message: "input 'photo'". Raises ValueError and returns -1 when it cannot. With copy
   (host arrays), a layout of a valid image that a pf_frame cannot describe (strides,
   channels apart, misaligned) is no error: *copy is set and f describes the packed copy
   (data NULL, pitch width * pixel bytes), which the caller stages. */
static int frame_from_layout(const layout *l, const char *what, const char *name, pf_frame *f,
                             int *copy)
{
    if (l->ndim != 2 && l->ndim != 3) {
        PyErr_Format(PyExc_ValueError,
                     "%s '%s': an image is HxW or HxWxC (C = 1..4); got %d dimension(s)", what,
                     name, l->ndim);
        return -1;
    }
    Py_ssize_t h = l->shape[0], w = l->shape[1], c = l->ndim == 3 ? l->shape[2] : 1;
    if (c < 1 || c > 4) {
        PyErr_Format(PyExc_ValueError,
                     "%s '%s': %zd channels; an image has 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 "
                     "(RGBA)",
                     what, name, c);
        return -1;
    }
    if (h < 1 || w < 1 || h > INT_MAX || w > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s '%s': an image of %zdx%zd pixels (WxH) is not supported",
                     what, name, w, h);
        return -1;
    }
    Py_ssize_t item = (Py_ssize_t)sample_bytes(l->sample);
    Py_ssize_t px = item * c;
    if (copy) {
        Py_ssize_t pitch = h > 1 ? l->strides[0] : px * w;
        *copy = (l->ndim == 3 && c > 1 && l->strides[2] != item) ||
                (w > 1 && l->strides[1] != px) || pitch < px * w || pitch % item != 0 ||
                (uintptr_t)l->data % (uintptr_t)item != 0;
        if (*copy) {
            f->data = NULL;
            f->width = (int)w;
            f->height = (int)h;
            f->pitch = (size_t)(px * w);
            f->sample = l->sample;
            f->channels = (int)c;
            return 0;
        }
    }
    /* A dimension of extent 1 has no meaningful stride (NumPy and PyTorch may report any). */
    if (l->ndim == 3 && c > 1 && l->strides[2] != item) {
        PyErr_Format(PyExc_ValueError,
                     "%s '%s': the channels of a pixel must be adjacent in device memory (channel "
                     "stride %zd bytes, expected %zd); make it contiguous first (.contiguous())",
                     what, name, l->strides[2], item);
        return -1;
    }
    if (w > 1 && l->strides[1] != px) {
        PyErr_Format(
            PyExc_ValueError,
            "%s '%s': the pixels of a row must be packed in device memory (pixel stride %zd "
            "bytes, expected %zd); make it contiguous first (.contiguous())",
            what, name, l->strides[1], px);
        return -1;
    }
    Py_ssize_t row = px * w;
    Py_ssize_t pitch = h > 1 ? l->strides[0] : row;
    if (pitch < row || pitch % item != 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s '%s': a row stride of %zd bytes is not supported (rows must not overlap, "
                     "run top to bottom and be at least %zd bytes apart, a multiple of %zd)",
                     what, name, pitch, row, item);
        return -1;
    }
    if ((uintptr_t)l->data % (uintptr_t)item != 0) {
        PyErr_Format(PyExc_ValueError, "%s '%s': the data is not aligned to its %zd-byte samples",
                     what, name, item);
        return -1;
    }
    f->data = l->data;
    f->width = (int)w;
    f->height = (int)h;
    f->pitch = (size_t)pitch;
    f->sample = l->sample;
    f->channels = (int)c;
    return 0;
}

static int dtype_error(const char *what, const char *name, const char *got)
{
    PyErr_Format(PyExc_TypeError, "%s '%s': dtype must be uint8, uint16 or float32, not %s", what,
                 name, got);
    return -1;
}

/* Host array through the buffer protocol: its layout. On success the caller owns *view. */
int pf_py_buffer_layout(PyObject *obj, int writable, const char *what, const char *name,
                        Py_buffer *view, layout *out)
{
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        /* A read-only array is the right kind of object in the wrong state: ValueError, as
           for a read-only __cuda_array_interface__ or a tensor that requires grad. */
        if (writable && PyObject_GetBuffer(obj, view, flags & ~PyBUF_WRITABLE) == 0) {
            PyBuffer_Release(view);
            Py_XDECREF(t);
            Py_XDECREF(v);
            Py_XDECREF(tb);
            PyErr_Format(PyExc_ValueError,
                         "%s '%s': the array is read-only; pass a writable one (or None to skip "
                         "the output)",
                         what, name);
            return -1;
        }
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s '%s': %s; got %.200s (%S)", what, name,
                     writable ? "expected a writable array (a NumPy array, C order rows)"
                              : "expected an array (NumPy, PyTorch, CuPy, or a buffer)",
                     Py_TYPE(obj)->tp_name, v ? v : Py_None);
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        return -1;
    }
    const char *fmt = view->format ? view->format : "B";
    int little = 1;
    little = *(const char *)&little == 1;
    if (*fmt == '@' || *fmt == '=' || (*fmt == '<' && little) || (*fmt == '>' && !little) ||
        (*fmt == '!' && !little))
        fmt++;
    layout l;
    memset(&l, 0, sizeof l);
    if (strcmp(fmt, "B") == 0 && view->itemsize == 1)
        l.sample = PF_U8;
    else if (strcmp(fmt, "H") == 0 && view->itemsize == 2)
        l.sample = PF_U16;
    else if (strcmp(fmt, "f") == 0 && view->itemsize == 4)
        l.sample = PF_F32;
    else {
        /* The name a NumPy user knows the dtype by, where the format is one. */
        static const char *const known[][2] = {
            {"B", "uint8"},       {"H", "uint16"},      {"f", "float32"},  {"d", "float64"},
            {"e", "float16"},     {"b", "int8"},        {"h", "int16"},    {"i", "int32"},
            {"l", "int64"},       {"q", "int64"},       {"I", "uint32"},   {"L", "uint64"},
            {"Q", "uint64"},      {"?", "bool"},        {"g", "float128"}, {"Zf", "complex64"},
            {"Zd", "complex128"}, {"Zg", "complex256"}, {"O", "object"}};
        /* A byte order other than the machine's: the samples are the right kind, swapped. */
        int swapped = *fmt == '<' || *fmt == '>' || *fmt == '!';
        const char *base = fmt + swapped;
        char got[160];
        snprintf(got, sizeof got, "buffer format '%.20s' (%zd-byte items)", view->format,
                 view->itemsize);
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(base, known[i][0]) == 0)
                snprintf(got, sizeof got,
                         swapped ? "%s in %s byte order (convert it: "
                                   "a.astype(a.dtype.newbyteorder('=')))"
                                 : "%s",
                         known[i][1], *fmt == '<' ? "little-endian" : "big-endian");
        PyBuffer_Release(view);
        return dtype_error(what, name, got);
    }
    l.data = view->buf;
    l.ndim = view->ndim;
    for (int i = 0; i < view->ndim && i < 3; i++) {
        l.shape[i] = view->shape[i];
        l.strides[i] = view->strides ? view->strides[i] : 0;
    }
    if (!view->strides && view->ndim >= 2) { /* C-contiguous */
        Py_ssize_t s = view->itemsize;
        for (int i = view->ndim - 1; i >= 0 && i < 3; i--) {
            l.strides[i] = s;
            s *= view->shape[i];
        }
    }
    *out = l;
    return 0;
}

/* Host frame through the buffer protocol: f describes it, or with *copy set, the packed
   copy to stage (l is then the array's layout). On success the caller owns *view. */
static int frame_from_buffer(PyObject *obj, int writable, const char *what, const char *name,
                             pf_frame *f, Py_buffer *view, layout *l, int *copy)
{
    if (pf_py_buffer_layout(obj, writable, what, name, view, l) != 0)
        return -1;
    if (frame_from_layout(l, what, name, f, copy) != 0) {
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ---- Device arrays ------------------------------------------------------------------------ */

/* DLPack, as its header (dlpack.h, v0.8+) lays it out: a stable ABI. */
typedef struct {
    int32_t device_type, device_id;
} dl_device;
typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: compact row-major */
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
    dl_tensor t;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3, DL_CUDA_MANAGED = 13 };

/* The device the engine runs on (pipefuse uses CUDA device 0). */
#define PF_CUDA_DEVICE 0

static int check_device(int type, int id, const char *what, const char *name)
{
    if (type != DL_CUDA && type != DL_CUDA_MANAGED) {
        PyErr_Format(PyExc_ValueError,
                     "%s '%s': not CUDA device memory (DLPack device type %d); pass host arrays "
                     "for every frame, or device arrays for every frame",
                     what, name, type);
        return -1;
    }
    if (id != PF_CUDA_DEVICE) {
        PyErr_Format(PyExc_ValueError,
                     "%s '%s': the array is on CUDA device %d; pipefuse runs on device %d", what,
                     name, id, PF_CUDA_DEVICE);
        return -1;
    }
    return 0;
}

/* An integer as a C value: an int or anything with __index__ (NumPy's integers, say);
   -1 with an exception on failure. */
static int get_ssize(PyObject *o, Py_ssize_t *v)
{
    PyObject *i = PyNumber_Index(o);
    if (!i)
        return -1;
    *v = PyLong_AsSsize_t(i);
    Py_DECREF(i);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

static int seq_to_ssize(PyObject *seq, Py_ssize_t *out, int max, int *n)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of integers");
    if (!fast)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    *n = (int)(len > max ? max + 1 : len);
    for (Py_ssize_t i = 0; i < len && i < max; i++)
        if (get_ssize(PySequence_Fast_GET_ITEM(fast, i), &out[i]) != 0) {
            Py_DECREF(fast);
            return -1;
        }
    Py_DECREF(fast);
    return 0;
}

/* torch.Tensor on a CUDA device: its accessors, no protocol objects. */
static int frame_from_torch(PyObject *t, int writable, const char *what, const char *name,
                            pf_frame *f)
{
    layout l;
    memset(&l, 0, sizeof l);
    PyObject *dtype = PyObject_GetAttrString(t, "dtype");
    if (!dtype)
        return -1;
    int s = -1;
    for (int i = 0; i < 3; i++)
        if (torch_dtypes[i] && dtype == torch_dtypes[i])
            s = i;
    if (s < 0) {
        PyObject *str = PyObject_Str(dtype);
        Py_DECREF(dtype);
        const char *got = str ? PyUnicode_AsUTF8(str) : NULL;
        PyErr_Clear(); /* the dtype error says more than a failed str() */
        dtype_error(what, name, got ? got : "that");
        Py_XDECREF(str);
        return -1;
    }
    Py_DECREF(dtype);
    l.sample = (pf_sample)s;
    Py_ssize_t v, item = (Py_ssize_t)sample_bytes(l.sample);
    PyObject *dev = PyObject_CallMethod(t, "get_device", NULL);
    if (!dev || get_ssize(dev, &v) != 0) {
        Py_XDECREF(dev);
        return -1;
    }
    Py_DECREF(dev);
    if (check_device(DL_CUDA, (int)v, what, name) != 0)
        return -1;
    PyObject *shape = PyObject_GetAttrString(t, "shape");
    PyObject *strides = shape ? PyObject_CallMethod(t, "stride", NULL) : NULL;
    PyObject *ptr = strides ? PyObject_CallMethod(t, "data_ptr", NULL) : NULL;
    int n = 0, ns = 0, rc = -1;
    if (ptr && seq_to_ssize(shape, l.shape, 3, &n) == 0 &&
        seq_to_ssize(strides, l.strides, 3, &ns) == 0) {
        l.ndim = n;
        for (int i = 0; i < 3; i++)
            l.strides[i] *= item;
        l.data = (char *)PyLong_AsVoidPtr(ptr);
        rc = PyErr_Occurred() ? -1 : frame_from_layout(&l, what, name, f, NULL);
    }
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(ptr);
    if (rc == 0 && writable) { /* a tensor that autograd tracks must not be written */
        PyObject *rg = PyObject_GetAttrString(t, "requires_grad");
        if (!rg)
            return -1;
        int bad = PyObject_IsTrue(rg);
        Py_DECREF(rg);
        if (bad) {
            PyErr_Format(PyExc_ValueError,
                         "%s '%s': the tensor requires grad; pipefuse writes outputs in place "
                         "(pass a tensor that does not, e.g. torch.empty(...))",
                         what, name);
            return -1;
        }
    }
    return rc;
}

/* DLPack: asks the producer for a capsule on `stream` (so it orders its work before
   ours), reads the tensor. *keep receives the capsule, which owns the memory's
   reference until released. */
static int frame_from_dlpack(PyObject *obj, Py_ssize_t stream, const char *what, const char *name,
                             pf_frame *f, PyObject **keep)
{
    /* DLPack's stream convention for CUDA: 1 is the legacy default stream (0 is not
       allowed), anything else is the cudaStream_t. */
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
    if (!meth)
        return -1;
    PyObject *args = PyTuple_New(0);
    PyObject *kw = Py_BuildValue("{s:n}", "stream", stream ? stream : (Py_ssize_t)1);
    PyObject *cap = args && kw ? PyObject_Call(meth, args, kw) : NULL;
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) { /* a producer without streams */
        PyErr_Clear();
        cap = PyObject_Call(meth, args, NULL);
    }
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_DECREF(meth);
    if (!cap)
        return -1;
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) {
        Py_DECREF(cap);
        return -1;
    }
    *keep = cap;
    const dl_tensor *t = &m->t;
    if (check_device(t->device.device_type, t->device.device_id, what, name) != 0)
        return -1;
    layout l;
    memset(&l, 0, sizeof l);
    if (t->dtype.lanes != 1 ||
        !((t->dtype.code == 1 && (t->dtype.bits == 8 || t->dtype.bits == 16)) ||
          (t->dtype.code == 2 && t->dtype.bits == 32))) {
        char got[64];
        snprintf(got, sizeof got, "DLPack type code %d, %d bits x %d", t->dtype.code, t->dtype.bits,
                 t->dtype.lanes);
        return dtype_error(what, name, got);
    }
    l.sample = t->dtype.code == 2 ? PF_F32 : t->dtype.bits == 8 ? PF_U8 : PF_U16;
    Py_ssize_t item = (Py_ssize_t)sample_bytes(l.sample);
    l.ndim = t->ndim;
    if (t->ndim < 2 || t->ndim > 3)
        return frame_from_layout(&l, what, name, f, NULL); /* says what is wrong */
    Py_ssize_t s = item;
    for (int i = t->ndim - 1; i >= 0; i--) {
        l.shape[i] = (Py_ssize_t)t->shape[i];
        l.strides[i] = t->strides ? (Py_ssize_t)t->strides[i] * item : s;
        s *= l.shape[i];
    }
    l.data = (char *)t->data + t->byte_offset;
    return frame_from_layout(&l, what, name, f, NULL);
}

/* __cuda_array_interface__ (v2/v3). A producer's stream other than ours is refused:
   the interface gives no way to order its work before ours without a CUDA runtime. */
static int frame_from_cai(PyObject *obj, int writable, Py_ssize_t stream, const char *what,
                          const char *name, pf_frame *f)
{
    PyObject *d = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (!d)
        return -1;
    int rc = -1;
    layout l;
    memset(&l, 0, sizeof l);
    PyObject *shape, *typestr, *data, *strides, *mask, *pstream;
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s '%s': __cuda_array_interface__ is not a dict", what,
                     name);
        goto done;
    }
    shape = PyDict_GetItemString(d, "shape");
    typestr = PyDict_GetItemString(d, "typestr");
    data = PyDict_GetItemString(d, "data");
    strides = PyDict_GetItemString(d, "strides");
    mask = PyDict_GetItemString(d, "mask");
    pstream = PyDict_GetItemString(d, "stream");
    if (!shape || !typestr || !PyUnicode_Check(typestr) || !data || !PyTuple_Check(data) ||
        PyTuple_GET_SIZE(data) != 2) {
        PyErr_Format(PyExc_TypeError, "%s '%s': malformed __cuda_array_interface__", what, name);
        goto done;
    }
    if (mask && mask != Py_None) {
        PyErr_Format(PyExc_ValueError, "%s '%s': masked arrays are not supported", what, name);
        goto done;
    }
    const char *ts = PyUnicode_AsUTF8(typestr);
    if (!ts)
        goto done;
    if (strcmp(ts, "|u1") == 0 || strcmp(ts, "<u1") == 0)
        l.sample = PF_U8;
    else if (strcmp(ts, "<u2") == 0)
        l.sample = PF_U16;
    else if (strcmp(ts, "<f4") == 0)
        l.sample = PF_F32;
    else {
        dtype_error(what, name, ts);
        goto done;
    }
    if (writable && PyObject_IsTrue(PyTuple_GET_ITEM(data, 1))) {
        PyErr_Format(PyExc_ValueError, "%s '%s': the array is read-only", what, name);
        goto done;
    }
    if (pstream && pstream != Py_None) {
        Py_ssize_t ps;
        if (get_ssize(pstream, &ps) != 0)
            goto done;
        if (ps != stream && !(ps == 1 && stream == 0)) {
            PyErr_Format(PyExc_ValueError,
                         "%s '%s': the array's producer works on CUDA stream %zd and this frame "
                         "runs on %zd; pass stream=%zd or synchronise first",
                         what, name, ps, stream, ps);
            goto done;
        }
    }
    int n = 0, ns = 0;
    if (seq_to_ssize(shape, l.shape, 3, &n) != 0)
        goto done;
    l.ndim = n;
    Py_ssize_t item = (Py_ssize_t)sample_bytes(l.sample);
    if (strides && strides != Py_None) {
        if (seq_to_ssize(strides, l.strides, 3, &ns) != 0)
            goto done;
    } else if (n >= 2 && n <= 3) {
        Py_ssize_t s = item;
        for (int i = n - 1; i >= 0; i--) {
            l.strides[i] = s;
            s *= l.shape[i];
        }
    }
    l.data = (char *)PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (PyErr_Occurred())
        goto done;
    rc = frame_from_layout(&l, what, name, f, NULL);
done:
    Py_DECREF(d);
    return rc;
}

/* What kind of array obj is: 1 device, 0 host, -1 error. */
static int is_device_array(PyObject *obj)
{
    if (is_torch_tensor(obj)) {
        PyObject *c = PyObject_GetAttrString(obj, "is_cuda");
        if (!c)
            return -1;
        int r = PyObject_IsTrue(c);
        Py_DECREF(c);
        return r;
    }
    /* The device interfaces before the buffer protocol: a CuPy array exports a buffer
       that refuses every access from the host. */
    if (PyObject_HasAttrString(obj, "__cuda_array_interface__"))
        return 1;
    if (PyObject_HasAttrString(obj, "__dlpack_device__")) {
        PyObject *d = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
        if (!d)
            return -1;
        Py_ssize_t type = 0;
        int ok = PyTuple_Check(d) && PyTuple_GET_SIZE(d) == 2 &&
                 get_ssize(PyTuple_GET_ITEM(d, 0), &type) == 0;
        Py_DECREF(d);
        if (!ok) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "__dlpack_device__ did not return (type, id)");
            return -1;
        }
        return type == DL_CUDA || type == DL_CUDA_MANAGED;
    }
    return 0;
}

/* ---- Engine ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD pf_engine *e;
    PyObject *log;         /* callable(level, message) or NULL */
    unsigned long process; /* fork_generation when it was made */
} EngineObject;

/* fork(): the engine's threads (its pool, the pipelines' runners) are not in the child,
   and its locks may have been held. Objects made before the fork are refused in the
   child (a call would wait for a thread that is not there) and left unfreed at its end
   (freeing joins those threads). pthread_atfork bumps the generation in every child. */
static unsigned long fork_generation;

static void forked_child(void)
{
    fork_generation++;
}

static int forked_error(const char *what)
{
    PyErr_Format(PyExc_RuntimeError,
                 "this %s was made in the parent process, before fork(): an engine's threads "
                 "do not survive a fork, so make the engine and load the pipeline in this "
                 "process (multiprocessing: the spawn or forkserver start method, or an "
                 "initializer; docs/python.md)",
                 what);
    return -1;
}

static PyTypeObject EngineType, PipelineType, TicketType, HostBufferType;

/* Set while engine_log runs Python code on this thread: a pipeline called from there is
   being re-entered, whichever thread the engine logs from. */
static _Thread_local int in_log_callback;

/* The engine's log hook: may run on any thread, with or without the GIL. self->log only
   ever goes from a callable to NULL (Engine_clear), so NULL read without the GIL is final;
   a callable is read again, and held, under it. */
static void engine_log(void *user, int level, const char *msg)
{
    EngineObject *self = user;
    if (!Py_IsInitialized() || !self->log) {
        fprintf(stderr, "pipefuse: %s\n", msg);
        return;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *log = self->log;
    if (!log) {
        PyGILState_Release(g);
        fprintf(stderr, "pipefuse: %s\n", msg);
        return;
    }
    Py_INCREF(log);
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    in_log_callback++;
    PyObject *r = text ? PyObject_CallFunction(log, "iO", level, text) : NULL;
    in_log_callback--;
    Py_XDECREF(text);
    if (!r)
        PyErr_WriteUnraisable(log);
    Py_XDECREF(r);
    Py_DECREF(log);
    PyErr_Restore(t, v, tb);
    PyGILState_Release(g);
}

static int Engine_init(EngineObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"plugin_path", "use_env_path", "builtin", "threads", "log", NULL};
    const char *path = NULL;
    int use_env = 1, builtin = 1, threads = 0;
    PyObject *log = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|zppiO:Engine", names, &path, &use_env, &builtin,
                                     &threads, &log))
        return -1;
    if (self->e) {
        PyErr_SetString(PyExc_RuntimeError, "Engine is already initialised");
        return -1;
    }
    if (log != Py_None && !PyCallable_Check(log)) {
        PyErr_SetString(PyExc_TypeError, "log must be a callable(level, message) or None");
        return -1;
    }
    if (threads < 0) {
        PyErr_SetString(PyExc_ValueError, "threads must be >= 0 (0: one per core)");
        return -1;
    }
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = path;
    cfg.use_env_path = use_env;
    cfg.no_builtin = !builtin;
    cfg.threads = threads;
    if (log != Py_None) {
        Py_INCREF(log);
        Py_XSETREF(self->log, log); /* a failed __init__ may have set one */
        cfg.log = engine_log;
        cfg.log_user = self;
    }
    pf_engine *e = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = pf_engine_create(&cfg, &e);
    Py_END_ALLOW_THREADS if (rc != PF_OK)
    {
        raise_status(rc, e ? pf_engine_errmsg(e) : NULL);
        pf_engine_destroy(e);
        return -1;
    }
    self->e = e;
    self->process = fork_generation;
    return 0;
}

/* The engine holds its log callable, which may hold the engine (a bound method of the
   object that owns it): the cycle collector must see that reference. */
static int Engine_traverse(EngineObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->log);
    return 0;
}

static int Engine_clear(EngineObject *self)
{
    Py_CLEAR(self->log); /* the engine logs to stderr from now on */
    return 0;
}

/* Pipelines and host buffers hold the engine: it is freed after all of them. */
static void Engine_dealloc(EngineObject *self)
{
    PyObject_GC_UnTrack(self);
    pf_engine *e = self->e;
    self->e = NULL;
    if (e && self->process == fork_generation) { /* joins the worker threads, which may log
                                                     (and so need the GIL) */
        Py_BEGIN_ALLOW_THREADS pf_engine_destroy(e);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(self->log);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int engine_ready(EngineObject *self)
{
    if (self->e && self->process != fork_generation)
        return forked_error("engine");
    if (self->e)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "Engine is not initialised");
    return -1;
}

static const char *const param_types[] = {"float", "int", "bool", "enum", "float_array"};
static const char *const stage_kinds[] = {"point", "stencil", "resample", "reduce"};

static PyObject *str_tuple(const char *const *names, int n)
{
    if (!names)
        Py_RETURN_NONE;
    if (n < 0)
        for (n = 0; names[n];)
            n++;
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(names[i] ? names[i] : "");
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static const char *kind_name(const char *const *names, int n, int k)
{
    return k >= 0 && k < n ? names[k] : "unknown";
}

static PyObject *param_dict(const pf_param_desc *d)
{
    PyObject *def;
    if (d->type == PF_PARAM_FLOAT_ARRAY) {
        def = PyTuple_New(d->count > 0 ? d->count : 0);
        for (int i = 0; def && i < d->count; i++)
            PyTuple_SET_ITEM(def, i, PyFloat_FromDouble(d->def_array ? d->def_array[i] : 0));
    } else if (d->type == PF_PARAM_BOOL) {
        def = PyBool_FromLong(d->def != 0);
    } else if (d->type == PF_PARAM_INT) {
        def = PyLong_FromLongLong((long long)d->def);
    } else if (d->type == PF_PARAM_ENUM) {
        int n = 0;
        while (d->enum_names && d->enum_names[n])
            n++;
        int k = (int)d->def;
        def = PyUnicode_FromString(k >= 0 && k < n ? d->enum_names[k] : "");
    } else {
        def = PyFloat_FromDouble(d->def);
    }
    if (!def)
        return NULL;
    PyObject *lo = d->min <= d->max ? PyFloat_FromDouble(d->min) : (Py_INCREF(Py_None), Py_None);
    PyObject *hi = d->min <= d->max ? PyFloat_FromDouble(d->max) : (Py_INCREF(Py_None), Py_None);
    PyObject *choices =
        d->type == PF_PARAM_ENUM ? str_tuple(d->enum_names, -1) : (Py_INCREF(Py_None), Py_None);
    PyObject *r = NULL;
    if (lo && hi && choices)
        r = Py_BuildValue("{s:s,s:s,s:s,s:O,s:O,s:O,s:O,s:i}", "name", d->name, "type",
                          kind_name(param_types, 5, d->type), "doc", d->doc ? d->doc : "",
                          "default", def, "min", lo, "max", hi, "choices", choices, "count",
                          d->type == PF_PARAM_FLOAT_ARRAY ? d->count : 1);
    Py_DECREF(def);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(choices);
    return r;
}

static PyObject *Engine_stages(EngineObject *self, PyObject *unused)
{
    if (engine_ready(self) != 0)
        return NULL;
    int n = pf_engine_stage_count(self->e);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        const char *file = NULL, *plugin = NULL;
        const pf_stage_desc *d = pf_engine_stage(self->e, i, &file, &plugin);
        if (!d)
            continue;
        PyObject *params = PyList_New(0);
        for (int k = 0; params && k < d->n_params; k++) {
            PyObject *pd = param_dict(&d->params[k]);
            if (!pd || PyList_Append(params, pd) != 0)
                Py_CLEAR(params);
            Py_XDECREF(pd);
        }
        PyObject *cols = params ? str_tuple(d->columns, -1) : NULL;
        PyObject *st =
            cols ? Py_BuildValue("{s:s,s:s,s:s,s:i,s:s,s:s,s:O,s:O}", "name", d->name, "kind",
                                 kind_name(stage_kinds, 4, d->kind), "doc", d->doc ? d->doc : "",
                                 "inputs", d->n_inputs, "plugin", plugin ? plugin : "", "file",
                                 file ? file : "", "params", params, "columns", cols)
                 : NULL;
        Py_XDECREF(params);
        Py_XDECREF(cols);
        if (!st || PyList_Append(list, st) != 0)
            Py_CLEAR(list);
        Py_XDECREF(st);
    }
    return list;
}

/* Text a printing function writes to a FILE, as a str. */
static PyObject *capture_text(int (*print)(const void *, FILE *), const void *h)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PyErr_NoMemory();
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = print(h, f);
    Py_END_ALLOW_THREADS if (fclose(f) != 0 && rc == PF_OK) rc = PF_NO_MEMORY;
    PyObject *r = rc == PF_OK ? PyUnicode_DecodeUTF8(buf ? buf : "", (Py_ssize_t)len, "replace")
                              : raise_status(rc, NULL);
    free(buf);
    return r;
}

static int print_info(const void *e, FILE *f)
{
    return pf_engine_print_info((const pf_engine *)e, f);
}

static PyObject *Engine_info(EngineObject *self, PyObject *unused)
{
    if (engine_ready(self) != 0)
        return NULL;
    return capture_text(print_info, self->e);
}

/* ---- Pipeline ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD pf_pipeline *p;
    EngineObject *engine;
    PyObject *inflight;        /* list of unfinished Tickets, in submit order */
    int busy;                  /* a method is running: see pipeline_claim */
    unsigned long busy_thread; /* the thread running it */
    int held;                  /* Python-level calls (run, submit, wait) under way: hold */
    unsigned long held_thread; /* the thread making them */
    int n_tables;              /* table outputs */
    unsigned long long serial; /* this pipeline's number, which its tickets carry */
    PyObject *pool;            /* staging buffers (staging.c) */
} PipelineObject;

/* A host array copied for the engine: an input packed into buf before the frame, or an
   output the frame writes into buf, unpacked into the array once complete. */
typedef struct staged {
    void *buf;
    size_t size;
    int out;
    layout array; /* the array's own layout (its memory held by the ticket's views) */
} staged;

typedef struct {
    PyObject_HEAD int id;     /* the engine's ticket */
    unsigned long long owner; /* the serial of the pipeline that submitted it */
    unsigned long long plan;  /* the plan generation it was submitted under */
    int device;
    int done;
    int lost;          /* the plan was replaced before its host outputs were copied */
    PyObject *outputs; /* what the caller passed as outputs (tuple), kept for wait */
    PyObject *tables;  /* dict name -> (columns, row names, bytes) after completion */
    PyObject *keep;    /* list of objects the engine may still use */
    Py_buffer *views;  /* held buffers of host frames: outputs, and inputs (a queued CPU
                          frame reads them as it runs) */
    int n_views;
    PyObject *pool; /* the pool the staged buffers go back to */
    staged *staged; /* host arrays copied for the engine */
    int n_staged;
    int status;      /* once done: the frame's status (PF_OK, or the error wait raises) */
    PyObject *error; /* ... and its message */
} TicketObject;

static PyObject *load_result(EngineObject *self, int rc, pf_pipeline *p)
{
    static unsigned long long serials; /* under the GIL */
    if (rc != PF_OK)
        return raise_status(rc, pf_engine_errmsg(self->e));
    PipelineObject *po = PyObject_GC_New(PipelineObject, &PipelineType);
    if (!po) {
        pf_pipeline_destroy(p);
        return NULL;
    }
    po->p = p;
    po->busy = 0;
    po->busy_thread = 0;
    po->held = 0;
    po->held_thread = 0;
    po->serial = ++serials;
    po->inflight = NULL;
    Py_INCREF(self);
    po->engine = self;
    po->n_tables = 0;
    po->pool = NULL;
    PyObject_GC_Track(po);
    po->inflight = PyList_New(0);
    /* The list is the pipeline's alone: the collector must never clear it on its own, which
       would free tickets of frames still running (their outputs and inputs) before the
       pipeline waits for them. The pipeline visits the tickets instead. */
    if (po->inflight)
        PyObject_GC_UnTrack(po->inflight);
    for (int i = 0; i < pf_pipeline_output_count(p); i++) {
        pf_output_info oi;
        if (pf_pipeline_output_info(p, i, &oi) == PF_OK && oi.kind == PF_OUTPUT_TABLE)
            po->n_tables++;
    }
    po->pool = po->inflight ? pf_staging_pool_new() : NULL;
    if (!po->inflight || !po->pool) {
        Py_DECREF(po);
        return NULL;
    }
    return (PyObject *)po;
}

static PyObject *Engine_load_file(EngineObject *self, PyObject *args)
{
    PyObject *path_obj;
    if (engine_ready(self) != 0 ||
        !PyArg_ParseTuple(args, "O&:load_file", PyUnicode_FSConverter, &path_obj))
        return NULL;
    pf_pipeline *p = NULL;
    int rc;
    const char *path = PyBytes_AS_STRING(path_obj);
    Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_load_file(self->e, path, &p);
    Py_END_ALLOW_THREADS Py_DECREF(path_obj);
    return load_result(self, rc, p);
}

static PyObject *Engine_load_string(EngineObject *self, PyObject *args)
{
    const char *json, *name = "<string>";
    if (engine_ready(self) != 0 || !PyArg_ParseTuple(args, "s|s:load_string", &json, &name))
        return NULL;
    pf_pipeline *p = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_load_string(self->e, json, name, &p);
    Py_END_ALLOW_THREADS return load_result(self, rc, p);
}

/* ---- Pinned host memory ----------------------------------------------------------------- */

/* A frame from pf_frame_alloc_host, exported through the buffer protocol (NumPy wraps it:
   Engine.empty_pinned). Holds the engine, which frees it. */
typedef struct {
    PyObject_HEAD EngineObject *engine;
    pf_frame f;
} HostBufferObject;

static int HostBuffer_getbuffer(HostBufferObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->f.data,
                             (Py_ssize_t)(self->f.pitch * (size_t)self->f.height), 0, flags);
}

/* Traversed, never cleared: the memory is freed through the engine, and NumPy arrays
   may still point into it; a cycle through here is broken at the engine's log. */
static int HostBuffer_traverse(HostBufferObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->engine);
    return 0;
}

static void HostBuffer_dealloc(HostBufferObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->engine) {
        if (self->engine->process == fork_generation)
            pf_frame_free_host(self->engine->e, &self->f);
        Py_DECREF(self->engine);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs HostBuffer_as_buffer = {(getbufferproc)HostBuffer_getbuffer, NULL};

static PyTypeObject HostBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pipefuse._pipefuse.HostBuffer",
    .tp_basicsize = sizeof(HostBufferObject),
    .tp_dealloc = (destructor)HostBuffer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)HostBuffer_traverse,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "Page-locked host memory of one frame (pf_frame_alloc_host).",
    .tp_as_buffer = &HostBuffer_as_buffer,
};

/* Engine.alloc_host(width, height, sample, channels) -> HostBuffer, rows packed. */
static PyObject *Engine_alloc_host(EngineObject *self, PyObject *args)
{
    int w, h, sample, c;
    if (engine_ready(self) != 0 || !PyArg_ParseTuple(args, "iiii:alloc_host", &w, &h, &sample, &c))
        return NULL;
    if (w < 1 || h < 1 || sample < PF_U8 || sample > PF_F32 || c < 1 || c > 4) {
        PyErr_Format(PyExc_ValueError,
                     "alloc_host: a %dx%d frame of %d channel(s), sample %d is not valid", w, h, c,
                     sample);
        return NULL;
    }
    HostBufferObject *b = PyObject_GC_New(HostBufferObject, &HostBufferType);
    if (!b)
        return NULL;
    b->engine = NULL;
    memset(&b->f, 0, sizeof b->f);
    PyObject_GC_Track(b);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = pf_frame_alloc_host(self->e, w, h, (pf_sample)sample, c, &b->f);
    Py_END_ALLOW_THREADS if (rc != PF_OK)
    {
        Py_DECREF(b);
        return raise_status(rc, pf_engine_errmsg(self->e));
    }
    Py_INCREF(self);
    b->engine = self;
    return (PyObject *)b;
}

static PyMethodDef Engine_methods[] = {
    {"stages", (PyCFunction)Engine_stages, METH_NOARGS,
     "Every registered stage: dicts of name, kind, doc, inputs, plugin, file, params, columns."},
    {"load_file", (PyCFunction)Engine_load_file, METH_VARARGS, "Loads a pipeline file."},
    {"load_string", (PyCFunction)Engine_load_string, METH_VARARGS,
     "Loads a pipeline from JSON text; name labels messages."},
    {"alloc_host", (PyCFunction)Engine_alloc_host, METH_VARARGS,
     "alloc_host(width, height, sample, channels) -> page-locked HostBuffer"},
    {"info", (PyCFunction)Engine_info, METH_NOARGS,
     "Versions, plugins and CUDA devices, as `pipefuse info` prints them."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pipefuse._pipefuse.Engine",
    .tp_basicsize = sizeof(EngineObject),
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Engine_traverse,
    .tp_clear = (inquiry)Engine_clear,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "Engine(plugin_path=None, use_env_path=True, builtin=True, threads=0, log=None)",
    .tp_methods = Engine_methods,
    .tp_init = (initproc)Engine_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Tickets ------------------------------------------------------------------------------- */

static void ticket_release(TicketObject *t)
{
    for (int i = 0; i < t->n_staged; i++)
        pf_staging_give(t->pool, t->staged[i].buf, t->staged[i].size);
    PyMem_Free(t->staged);
    t->staged = NULL;
    t->n_staged = 0;
    Py_CLEAR(t->pool);
    for (int i = 0; i < t->n_views; i++)
        PyBuffer_Release(&t->views[i]);
    PyMem_Free(t->views);
    t->views = NULL;
    t->n_views = 0;
    Py_CLEAR(t->keep);
}

/* What a ticket holds may hold its pipeline (an output array in an object that owns the
   pipeline): the cycle collector sees all of it. Clearing keeps what a frame in flight
   uses; the pipeline's own clear (which waits for its frames) releases that. */
static int Ticket_traverse(TicketObject *t, visitproc visit, void *arg)
{
    Py_VISIT(t->outputs);
    Py_VISIT(t->tables);
    Py_VISIT(t->keep);
    for (int i = 0; i < t->n_views; i++)
        Py_VISIT(t->views[i].obj);
    return 0;
}

static int Ticket_clear(TicketObject *t)
{
    Py_CLEAR(t->outputs);
    Py_CLEAR(t->tables);
    if (t->done)
        ticket_release(t);
    return 0;
}

static void Ticket_dealloc(TicketObject *t)
{
    PyObject_GC_UnTrack(t);
    ticket_release(t); /* only reached once the frame is complete: see pipeline_sync */
    Py_XDECREF(t->outputs);
    Py_XDECREF(t->tables);
    Py_XDECREF(t->error);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *Ticket_get_id(TicketObject *t, void *c)
{
    return PyLong_FromLong(t->id);
}
static PyObject *Ticket_get_done(TicketObject *t, void *c)
{
    return PyBool_FromLong(t->done);
}
static PyObject *Ticket_get_device(TicketObject *t, void *c)
{
    return PyBool_FromLong(t->device);
}
static PyObject *Ticket_get_outputs(TicketObject *t, void *c)
{
    PyObject *o = t->outputs ? t->outputs : Py_None;
    Py_INCREF(o);
    return o;
}
static PyObject *Ticket_get_tables(TicketObject *t, void *c)
{
    PyObject *o = t->tables ? t->tables : Py_None;
    Py_INCREF(o);
    return o;
}

static PyObject *Ticket_repr(TicketObject *t)
{
    return PyUnicode_FromFormat("<pipefuse.Ticket %d, %s frame, %s>", t->id,
                                t->device ? "device" : "host", t->done ? "complete" : "in flight");
}

static PyGetSetDef Ticket_getset[] = {
    {"id", (getter)Ticket_get_id, NULL, "the engine's ticket number", NULL},
    {"done", (getter)Ticket_get_done, NULL, "True once the frame is complete", NULL},
    {"device", (getter)Ticket_get_device, NULL, "True for a frame of device arrays", NULL},
    {"outputs", (getter)Ticket_get_outputs, NULL, "the output arrays passed to submit", NULL},
    {"tables", (getter)Ticket_get_tables, NULL,
     "table outputs once complete: name -> (columns, row names, float64 bytes)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject TicketType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pipefuse._pipefuse.Ticket",
    .tp_basicsize = sizeof(TicketObject),
    .tp_dealloc = (destructor)Ticket_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Ticket_traverse,
    .tp_clear = (inquiry)Ticket_clear,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "A frame in flight: pass it to Pipeline.wait or Pipeline.poll.",
    .tp_repr = (reprfunc)Ticket_repr,
    .tp_getset = Ticket_getset,
};

/* ---- Pipeline methods ------------------------------------------------------------------------ */

/* Claims the pipeline for the method that calls this, which releases it (busy = 0) on
   every path: first thing, before anything that can run Python code (converting an
   array, __index__, json.dumps, a garbage collection) and so let another thread in.
   The engine is then only ever called by the claiming thread. A second caller gets
   BusyError (a RuntimeError) and its message says whether it came from another thread
   or from inside the running call (a log callback, say). */
static int closed_error(void)
{
    PyErr_SetString(pf_py_closed_error, "the pipeline is closed (load it again for another one)");
    return -1;
}

static int pipeline_claim(PipelineObject *self)
{
    if (!self->p)
        return closed_error();
    if (self->engine->process != fork_generation)
        return forked_error("pipeline");
    unsigned long me = PyThread_get_thread_ident();
    if (self->busy || (self->held && self->held_thread != me)) {
        if (in_log_callback || (self->busy && self->busy_thread == me))
            raise_status(PF_BUSY,
                         "the pipeline was called again from inside one of its own calls (a log "
                         "callback, or Python code an argument ran); a pipeline cannot be "
                         "re-entered: call it once that call has returned");
        else
            raise_status(PF_BUSY, "the pipeline is in use by another thread (a pipeline serves "
                                  "one thread at a time; load one per thread)");
        return -1;
    }
    self->busy = 1;
    self->busy_thread = me;
    return 0;
}

/* _hold(), _unhold(): the Python layer's run, submit and wait are several calls here
   (plan, submit, wait, reading tables); between them another thread could get in (a
   set() that changes a size, and this thread's frame fails). Held, the pipeline is this
   thread's across them: other threads get BusyError for the whole of it. Nests. */
static PyObject *Pipeline_hold(PipelineObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->p)
        Py_RETURN_NONE; /* closed: the method says so, or reads a complete ticket */
    if (pipeline_claim(self) != 0)
        return NULL;
    self->busy = 0;
    self->held++;
    self->held_thread = self->busy_thread;
    Py_RETURN_NONE;
}

static PyObject *Pipeline_unhold(PipelineObject *self, PyObject *unused)
{
    (void)unused;
    if (self->held > 0 && self->held_thread == PyThread_get_thread_ident())
        self->held--;
    Py_RETURN_NONE;
}

typedef PyObject *(*pipeline_method)(PipelineObject *self, PyObject *args, PyObject *kw);

/* Runs fn with the pipeline claimed. */
static PyObject *claimed(PipelineObject *self, pipeline_method fn, PyObject *args, PyObject *kw)
{
    if (pipeline_claim(self) != 0)
        return NULL;
    PyObject *r = fn(self, args, kw);
    self->busy = 0;
    return r;
}

static PyObject *pipeline_error(PipelineObject *self, int rc)
{
    return raise_status(rc, pf_pipeline_errmsg(self->p));
}

/* The table outputs of the frame that completed last, as name -> (columns, row names,
   bytes of rows x cols float64). */
static PyObject *read_tables(PipelineObject *self)
{
    PyObject *d = PyDict_New();
    int n = pf_pipeline_output_count(self->p);
    for (int k = 0; d && k < n; k++) {
        pf_output_info oi;
        pf_table t;
        if (pf_pipeline_output_info(self->p, k, &oi) != PF_OK || oi.kind != PF_OUTPUT_TABLE ||
            pf_pipeline_table(self->p, k, &t) != PF_OK)
            continue;
        PyObject *cols = PyTuple_New(t.cols);
        for (int c = 0; cols && c < t.cols; c++) {
            PyObject *s = PyUnicode_FromString(t.columns && t.columns[c] ? t.columns[c] : "");
            if (!s)
                Py_CLEAR(cols);
            else
                PyTuple_SET_ITEM(cols, c, s);
        }
        PyObject *rows = Py_None;
        Py_INCREF(rows);
        if (cols && t.row_name) {
            Py_DECREF(rows);
            rows = PyTuple_New(t.rows);
            for (int r = 0; rows && r < t.rows; r++) {
                const char *rn = t.row_name(t.params, r);
                PyObject *s = PyUnicode_FromString(rn ? rn : "");
                if (!s)
                    Py_CLEAR(rows);
                else
                    PyTuple_SET_ITEM(rows, r, s);
            }
        }
        PyObject *data = cols && rows ? PyBytes_FromStringAndSize((const char *)t.data,
                                                                  (Py_ssize_t)t.rows * t.cols *
                                                                      (Py_ssize_t)sizeof(double))
                                      : NULL;
        PyObject *entry = data ? PyTuple_Pack(3, cols, rows, data) : NULL;
        if (!entry || PyDict_SetItemString(d, oi.name, entry) != 0)
            Py_CLEAR(d);
        Py_XDECREF(cols);
        Py_XDECREF(rows);
        Py_XDECREF(data);
        Py_XDECREF(entry);
    }
    return d;
}

/* Marks t complete with the frame's status: PF_OK (its staged outputs are copied into
   their arrays, and the tables the engine holds now are read), an error (kept for wait
   to raise, with the pipeline's message), or -1 (its plan went: nothing to deliver). */
static int ticket_complete(PipelineObject *self, TicketObject *t, int status)
{
    t->done = 1;
    t->status = status < 0 ? PF_OK : status;
    if (status == PF_OK && t->n_staged) {
        staged *st = t->staged;
        int n = t->n_staged;
        Py_BEGIN_ALLOW_THREADS for (int i = 0; i < n; i++) if (st[i].out)
            pf_staging_unpack(st[i].buf, &st[i].array);
        Py_END_ALLOW_THREADS
    }
    ticket_release(t);
    if (status > 0 && !t->error) {
        const char *msg = self->p ? pf_pipeline_errmsg(self->p) : "";
        t->error = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
        if (!t->error)
            return -1;
    }
    if (status == PF_OK && self->n_tables && !t->tables) {
        t->tables = read_tables(self);
        if (!t->tables)
            return -1;
    }
    return 0;
}

/* Raises the error a complete ticket's frame ended with. */
static PyObject *ticket_error(TicketObject *t)
{
    const char *msg = t->error ? PyUnicode_AsUTF8(t->error) : NULL;
    if (t->error && !msg)
        return NULL;
    return raise_status(t->status, msg);
}

/* After a call that may have planned: drops the tickets the engine has finished with on
   its own, and says whether the CPU runs the current plan. A new plan, or none after a
   failed one, ended every frame of the old plan (freeing a plan waits for its frames;
   host outputs then were never copied out: lost). A device submit of ticket `id`
   retired the frame whose slot it reused: tickets are consecutive within a plan and
   slots taken in turn, so that is ticket id - slots. On the CPU a submit completes the
   frame queued before it (pf_pipeline_submit_async): its status is asked for at once,
   while the engine still has it (and its tables). The tickets remember the plan
   generation (pf_stats.plans) they ran under. */
static int pipeline_sync(PipelineObject *self, int id, int device, unsigned long long *gen,
                         int *on_cpu)
{
    pf_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    int planned =
        pf_pipeline_stats(self->p, &st) == PF_OK && st.backend && strcmp(st.backend, "none") != 0;
    *gen = st.plans;
    *on_cpu = planned && strcmp(st.backend, "cpu") == 0;
    int slots = pf_pipeline_slots(self->p);
    Py_ssize_t n = PyList_GET_SIZE(self->inflight);
    for (Py_ssize_t i = n - 1; i >= 0; i--) {
        TicketObject *t = (TicketObject *)PyList_GET_ITEM(self->inflight, i);
        int old = !planned || t->plan != st.plans;
        int reused =
            !old && id > 0 && t->id != id && (device ? t->id == id - slots : *on_cpu && !t->device);
        if (!old && !reused)
            continue;
        t->lost = old && !t->device;
        int status = old ? -1 : PF_OK;
        if (reused && !device) {
            pf_pipeline *p = self->p;
            int tid = t->id;
            Py_BEGIN_ALLOW_THREADS status = pf_pipeline_poll(p, tid);
            Py_END_ALLOW_THREADS
        }
        if (ticket_complete(self, t, status) != 0)
            return -1;
        if (PyList_SetSlice(self->inflight, i, i + 1, NULL) != 0)
            return -1;
    }
    return 0;
}

/* Raises the pipeline's error for rc, after dropping the tickets whose plan a failed
   re-plan (a new size, say) ended. */
static PyObject *pipeline_failed(PipelineObject *self, int rc)
{
    PyObject *et, *ev, *etb;
    pipeline_error(self, rc);
    PyErr_Fetch(&et, &ev, &etb);
    unsigned long long gen;
    int on_cpu;
    if (pipeline_sync(self, 0, 0, &gen, &on_cpu) != 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, etb);
    return NULL;
}

static int parse_stream(PyObject *obj, Py_ssize_t *stream)
{
    *stream = 0;
    if (!obj || obj == Py_None)
        return 0;
    if (get_ssize(obj, stream) != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "stream must be an int (a cudaStream_t, e.g. torch's stream.cuda_stream "
                        "or CuPy's stream.ptr) or None");
        return -1;
    }
    return 0;
}

/* A host array for the frame: its view held by the ticket until the frame is complete,
   and, when a pf_frame cannot describe it, a staging buffer in its place (an input is
   packed into it by the caller, with the GIL released; an output unpacked once complete). */
static int host_frame(PipelineObject *self, TicketObject *t, PyObject *a, int is_out,
                      const char *what, const char *name, pf_frame *f)
{
    layout l;
    int copy = 0;
    if (frame_from_buffer(a, is_out, what, name, f, &t->views[t->n_views], &l, &copy) != 0)
        return -1;
    t->n_views++;
    if (!copy)
        return 0;
    staged *st = &t->staged[t->n_staged];
    st->buf = pf_staging_take(self->pool, f->pitch * (size_t)f->height, &st->size);
    if (!st->buf)
        return -1;
    st->out = is_out;
    st->array = l;
    t->n_staged++;
    if (!t->pool) {
        Py_INCREF(self->pool);
        t->pool = self->pool;
    }
    f->data = st->buf;
    return 0;
}

/* Pipeline.submit(inputs, outputs=None, stream=None) -> Ticket */
static PyObject *submit_frame(PipelineObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"inputs", "outputs", "stream", NULL};
    PyObject *in_obj, *out_obj = Py_None, *stream_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:submit", names, &in_obj, &out_obj,
                                     &stream_obj))
        return NULL;
    Py_ssize_t stream;
    if (parse_stream(stream_obj, &stream) != 0)
        return NULL;
    PyObject *ins = PySequence_Fast(in_obj, "inputs must be a sequence of arrays");
    if (!ins)
        return NULL;
    PyObject *outs = out_obj == Py_None ? PyTuple_New(0) : PySequence_Tuple(out_obj);
    if (!outs) {
        Py_DECREF(ins);
        return NULL;
    }
    Py_ssize_t n_in = PySequence_Fast_GET_SIZE(ins), n_out = PyTuple_GET_SIZE(outs);
    int want_in = pf_pipeline_input_count(self->p), have_out = pf_pipeline_output_count(self->p);
    TicketObject *t = NULL;
    pf_frame fin[MAX_FRAMES], fout[MAX_FRAMES];
    memset(fin, 0, sizeof fin);
    memset(fout, 0, sizeof fout);
    if (n_in != want_in) {
        /* [[0, 1], [2, 3]]: rows of an image given as nested lists, read as inputs. */
        PyObject *first = n_in ? PySequence_Fast_GET_ITEM(ins, 0) : NULL;
        int nested = first && (PyList_Check(first) || PyTuple_Check(first) || PyLong_Check(first) ||
                               PyFloat_Check(first));
        PyErr_Format(PyExc_ValueError,
                     "the pipeline has %d input(s); %zd given (a list or tuple holds one array "
                     "per input, in input order%s)",
                     want_in, n_in,
                     nested ? "; an image is an array, never nested lists: pass "
                              "np.asarray(rows, dtype) with dtype uint8, uint16 or float32"
                            : "");
        goto fail;
    }
    if (n_out > have_out || n_in > MAX_FRAMES || n_out > MAX_FRAMES) {
        PyErr_Format(PyExc_ValueError, "the pipeline has %d output(s); %zd array(s) given",
                     have_out, n_out);
        goto fail;
    }
    t = PyObject_GC_New(TicketObject, &TicketType);
    if (!t)
        goto fail;
    t->id = 0;
    t->owner = self->serial;
    t->plan = 0;
    t->done = t->lost = 0;
    t->outputs = outs;
    Py_INCREF(outs);
    t->tables = NULL;
    t->views = NULL;
    t->n_views = 0;
    t->keep = NULL;
    t->device = 0;
    t->pool = NULL;
    t->staged = NULL;
    t->n_staged = 0;
    t->status = PF_OK;
    t->error = NULL;
    PyObject_GC_Track(t);
    t->keep = PyList_New(0);
    if (!t->keep)
        goto fail;
    /* All host or all device: the first input decides. */
    int device = n_in ? is_device_array(PySequence_Fast_GET_ITEM(ins, 0)) : 0;
    if (device < 0)
        goto fail;
    t->device = device;
    if (!device && n_in + n_out) {
        t->views = PyMem_Calloc((size_t)(n_in + n_out), sizeof(Py_buffer));
        t->staged = PyMem_Calloc((size_t)(n_in + n_out), sizeof(staged));
        if (!t->views || !t->staged) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    for (Py_ssize_t k = 0; k < n_in + n_out; k++) {
        int is_out = k >= n_in;
        int i = (int)(is_out ? k - n_in : k);
        PyObject *a = is_out ? PyTuple_GET_ITEM(outs, i) : PySequence_Fast_GET_ITEM(ins, i);
        const char *what = is_out ? "output" : "input";
        const char *name = "?";
        pf_output_info oi;
        memset(&oi, 0, sizeof oi);
        oi.kind = PF_OUTPUT_IMAGE;
        if (is_out && pf_pipeline_output_info(self->p, i, &oi) == PF_OK)
            name = oi.name;
        else if (!is_out)
            name = pf_pipeline_input_name(self->p, i);
        pf_frame *f = is_out ? &fout[i] : &fin[i];
        if (a == Py_None) {
            if (!is_out) {
                PyErr_Format(PyExc_TypeError, "input '%s': None is not an array", name);
                goto fail;
            }
            continue; /* output not wanted */
        }
        if (is_out && oi.kind == PF_OUTPUT_TABLE) {
            PyErr_Format(PyExc_ValueError,
                         "output '%s' is a table: the pipeline makes it and wait() returns it; "
                         "pass None in its place",
                         name);
            goto fail;
        }
        if (!is_out &&
            (PyUnicode_Check(a) || PyBytes_Check(a) || PyList_Check(a) || PyTuple_Check(a))) {
            PyErr_Format(PyExc_TypeError, "input '%s': expected an array, not %.200s%s", name,
                         Py_TYPE(a)->tp_name,
                         PyList_Check(a) || PyTuple_Check(a)
                             ? " (an image is an array, never nested lists: pass "
                               "np.asarray(rows, dtype) with dtype uint8, uint16 or float32)"
                             : "");
            goto fail;
        }
        int dev = is_device_array(a);
        if (dev < 0)
            goto fail;
        if (dev != device) {
            PyErr_Format(PyExc_TypeError,
                         "%s '%s': a %s array in a frame of %s arrays; a frame is all host "
                         "(NumPy) or all CUDA device arrays",
                         what, name, dev ? "device" : "host", device ? "device" : "host");
            goto fail;
        }
        if (device) {
            PyObject *keep = NULL;
            int rc;
            if (is_torch_tensor(a))
                rc = frame_from_torch(a, is_out, what, name, f);
            else if (PyObject_HasAttrString(a, "__dlpack__"))
                rc = frame_from_dlpack(a, stream, what, name, f, &keep);
            else
                rc = frame_from_cai(a, is_out, stream, what, name, f);
            if (PyList_Append(t->keep, keep ? keep : a) != 0)
                rc = -1;
            Py_XDECREF(keep);
            if (rc != 0)
                goto fail;
            continue;
        }
        PyObject *src = a;
        Py_INCREF(src);
        if (PyObject_CheckBuffer(a) == 0 && is_torch_tensor(a)) {
            Py_SETREF(src, PyObject_CallMethod(a, "numpy", NULL)); /* shares memory */
        } else if (!is_out && !PyObject_CheckBuffer(a)) {
            /* __array_interface__, ...: NumPy makes a 0-d array of anything (a generator, a
               number): only what says it is an array goes through it. */
            if (!PyObject_HasAttrString(a, "__array_interface__") &&
                !PyObject_HasAttrString(a, "__array__") &&
                !PyObject_HasAttrString(a, "__array_struct__")) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_TypeError,
                                 "input '%s': expected an array (NumPy, a buffer, Pillow, "
                                 "PyTorch, anything with __array_interface__ or __array__), "
                                 "not %.200s",
                                 name, Py_TYPE(a)->tp_name);
                Py_DECREF(src);
                goto fail;
            }
            Py_SETREF(src, np_asarray ? PyObject_CallOneArg(np_asarray, a) : NULL);
            if (!src && !PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "input '%s': %.200s is not an array", name,
                             Py_TYPE(a)->tp_name);
        }
        if (!src)
            goto fail;
        int rc = host_frame(self, t, src, is_out, what, name, f);
        /* The frame reads inputs (pinned ones by DMA, queued CPU frames as they run) and
           writes outputs until it is complete: keep what exports them alive. */
        if (rc == 0 && PyList_Append(t->keep, src) != 0)
            rc = -1;
        Py_DECREF(src);
        if (rc != 0)
            goto fail;
    }

    int id = 0, rc;
    pf_pipeline *p = self->p;
    staged *st = t->staged;
    int n_staged = t->n_staged;
    Py_BEGIN_ALLOW_THREADS for (int i = 0; i < n_staged; i++) if (!st[i].out)
        pf_staging_pack(&st[i].array, st[i].buf);
    if (device)
        rc = pf_pipeline_submit_device(p, fin, (int)n_in, fout, (int)n_out, (void *)stream, &id);
    else
        rc = pf_pipeline_submit_async(p, fin, (int)n_in, fout, (int)n_out, &id);
    Py_END_ALLOW_THREADS int on_cpu;
    if (rc != PF_OK) {
        pipeline_failed(self, rc);
        goto fail;
    }
    t->id = id;
    if (pipeline_sync(self, id, device, &t->plan, &on_cpu) != 0)
        goto fail_submitted;
    if (PyList_Append(self->inflight, (PyObject *)t) != 0)
        goto fail_submitted;
    Py_DECREF(ins);
    Py_DECREF(outs);
    return (PyObject *)t;

fail_submitted:
    /* The frame is in the engine: it must not lose what it reads and writes. Wait for it. */
    Py_BEGIN_ALLOW_THREADS pf_pipeline_wait(p, id);
    Py_END_ALLOW_THREADS fail : Py_XDECREF((PyObject *)t);
    Py_DECREF(ins);
    Py_DECREF(outs);
    return NULL;
}

static PyObject *Pipeline_submit(PipelineObject *self, PyObject *args, PyObject *kw)
{
    return claimed(self, submit_frame, args, kw);
}

static TicketObject *ticket_arg(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &TicketType)) {
        PyErr_Format(PyExc_TypeError, "expected a Ticket from Pipeline.submit, not %.200s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return (TicketObject *)obj;
}

static int inflight_remove(PipelineObject *self, TicketObject *t)
{
    Py_ssize_t n = PyList_GET_SIZE(self->inflight);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_GET_ITEM(self->inflight, i) == (PyObject *)t)
            return PyList_SetSlice(self->inflight, i, i + 1, NULL);
    return 0;
}

/* A timeout in milliseconds: None waits without one (-1); any other real number >= 0,
   whole milliseconds rounded up and at most INT_MAX (24 days). */
static int parse_timeout(PyObject *obj, int *ms)
{
    *ms = -1;
    if (obj == Py_None)
        return 0;
    double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred())
        return -1;
    if (!(v >= 0)) { /* NaN too */
        PyErr_Format(PyExc_ValueError,
                     "wait: the timeout must be None or a non-negative number, not %R", obj);
        return -1;
    }
    *ms = v >= (double)INT_MAX ? INT_MAX : (int)ceil(v);
    return 0;
}

/* How long a wait blocks in the engine before it looks at Python's signals. */
#define WAIT_SLICE_MS 50

/* Waits for t, with the pipeline claimed. The wait is cut into slices, between which the
   main thread runs Python's signal handlers: a handler that raises (KeyboardInterrupt on
   Ctrl-C) cancels the frame (pf_pipeline_cancel: a CPU frame stops at its next band),
   which then completes as cancelled, and the exception propagates; the pipeline takes
   the next frame as usual. */
static PyObject *wait_frame(PipelineObject *self, PyObject *ticket, PyObject *timeout)
{
    TicketObject *t = (TicketObject *)ticket;
    int timeout_ms = (int)PyLong_AsLong(timeout), rc;
    pf_pipeline *p = self->p;
    int id = t->id;
    int left = timeout_ms; /* < 0: no limit */
    for (;;) {
        int slice = left < 0 || left > WAIT_SLICE_MS ? WAIT_SLICE_MS : left;
        /* A poll that sees the frame complete copies its host outputs: no GIL either. */
        Py_BEGIN_ALLOW_THREADS rc =
            slice == 0 ? pf_pipeline_poll(p, id) : pf_pipeline_wait_timeout(p, id, slice);
        Py_END_ALLOW_THREADS if (rc != PF_NOT_READY || left == 0) break;
        if (left > 0)
            left -= slice;
        if (PyErr_CheckSignals() != 0) {
            PyObject *et, *ev, *etb;
            PyErr_Fetch(&et, &ev, &etb);
            pf_pipeline_cancel(p);
            Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_wait(p, id);
            Py_END_ALLOW_THREADS if (ticket_complete(self, t, rc) != 0 ||
                                     inflight_remove(self, t) != 0) PyErr_Clear();
            PyErr_Restore(et, ev, etb);
            return NULL;
        }
    }
    if (rc == PF_NOT_READY)
        return raise_status(rc, "the frame is still in flight");
    /* Complete either way: a failed wait leaves the frame out of the engine too. */
    int trc = ticket_complete(self, t, rc);
    if (inflight_remove(self, t) != 0 || trc != 0)
        return NULL;
    if (rc != PF_OK)
        return pipeline_error(self, rc);
    Py_RETURN_NONE;
}

/* Pipeline.wait(ticket, timeout_ms=None): the frame is complete when it returns; with a
   timeout (0 polls), NotReadyError when it is still in flight then. A ticket is waited
   for on the pipeline that submitted it; once complete, again and again (after close
   too), raising the error its frame ended with, if any. */
static PyObject *Pipeline_wait(PipelineObject *self, PyObject *args)
{
    PyObject *arg, *timeout = Py_None;
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "O|O:wait", &arg, &timeout))
        return NULL;
    TicketObject *t = ticket_arg(arg);
    if (!t || parse_timeout(timeout, &timeout_ms) != 0)
        return NULL;
    if (t->owner != self->serial) {
        PyErr_SetString(PyExc_ValueError,
                        "the ticket is from another pipeline; wait for it (or poll it) on the "
                        "pipeline whose submit() returned it");
        return NULL;
    }
    if (!t->done) {
        PyObject *ms = PyLong_FromLong(timeout_ms);
        PyObject *r = ms ? claimed(self, (pipeline_method)wait_frame, arg, ms) : NULL;
        Py_XDECREF(ms);
        if (!r)
            return NULL;
        Py_DECREF(r);
    } else if (t->status != PF_OK) {
        return ticket_error(t);
    }
    if (t->lost)
        return raise_status(PF_NOT_PLANNED,
                            "the frame's plan was replaced (a new input size or a re-planning "
                            "option) before it was waited for; its outputs were not written");
    Py_RETURN_NONE;
}

/* Pipeline.cancel(): pf_pipeline_cancel. Any thread, at any time, without the claim: the
   frames submitted before it stop at their next cancel point. */
static PyObject *Pipeline_cancel(PipelineObject *self, PyObject *unused)
{
    (void)unused;
    if (self->p && self->engine->process == fork_generation)
        pf_pipeline_cancel(self->p);
    Py_RETURN_NONE;
}

/* Pipeline.set(key, value): numbers go through pf_pipeline_set_float, anything else as
   the JSON that json.dumps makes of it (so a str is a JSON string). */
static PyObject *set_impl(PipelineObject *self, PyObject *args, PyObject *kw)
{
    const char *key;
    PyObject *value;
    if (!PyArg_ParseTuple(args, "sO:set", &key, &value))
        return NULL;
    int rc;
    if ((PyFloat_Check(value) || PyLong_Check(value)) && !PyBool_Check(value)) {
        double v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred())
            return NULL;
        pf_pipeline *p = self->p;
        Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_set_float(p, key, v);
        Py_END_ALLOW_THREADS
    } else {
        if (!json_dumps) {
            PyObject *json = PyImport_ImportModule("json");
            json_dumps = json ? PyObject_GetAttrString(json, "dumps") : NULL;
            Py_XDECREF(json);
            if (!json_dumps)
                return NULL;
        }
        PyObject *text = PyObject_CallOneArg(json_dumps, value);
        if (!text)
            return NULL;
        const char *s = PyUnicode_AsUTF8(text);
        pf_pipeline *p = self->p;
        rc = PF_OK;
        if (s) {
            Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_set_param(p, key, s);
            Py_END_ALLOW_THREADS
        }
        Py_DECREF(text);
        if (!s)
            return NULL;
    }
    if (rc != PF_OK)
        return pipeline_error(self, rc);
    Py_RETURN_NONE;
}

/* Pipeline.set_json(key, text): the value as JSON text, as `pipefuse run --set` takes it. */
static PyObject *set_json_impl(PipelineObject *self, PyObject *args, PyObject *kw)
{
    const char *key, *text;
    if (!PyArg_ParseTuple(args, "ss:set_json", &key, &text))
        return NULL;
    int rc;
    pf_pipeline *p = self->p;
    Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_set_param(p, key, text);
    Py_END_ALLOW_THREADS if (rc != PF_OK) return pipeline_error(self, rc);
    Py_RETURN_NONE;
}

/* Pipeline.set_option(name, value): bools as true/false, None as "", else str(value). */
static PyObject *set_option_impl(PipelineObject *self, PyObject *args, PyObject *kw)
{
    const char *name;
    PyObject *value;
    if (!PyArg_ParseTuple(args, "sO:set_option", &name, &value))
        return NULL;
    PyObject *text = PyBool_Check(value) ? PyUnicode_FromString(value == Py_True ? "true" : "false")
                     : value == Py_None  ? PyUnicode_FromString("")
                     : PyUnicode_Check(value) ? (Py_INCREF(value), value)
                     : PyNumber_Check(value)  ? PyObject_Str(value)
                                              : PyOS_FSPath(value);
    if (!text && PyErr_ExceptionMatches(PyExc_TypeError)) { /* say which option */
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "option %s: a bool, number, str or path, not %.200s", name,
                     Py_TYPE(value)->tp_name);
    }
    if (text && PyBytes_Check(text)) /* a bytes path */
        Py_SETREF(text, PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(text),
                                                         PyBytes_GET_SIZE(text)));
    if (!text)
        return NULL;
    const char *s = PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : NULL;
    if (!s) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "option %s: a bool, number, str or path, not %.200s",
                         name, Py_TYPE(value)->tp_name);
        Py_DECREF(text);
        return NULL;
    }
    int rc;
    pf_pipeline *p = self->p;
    Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_set_option(p, name, s);
    Py_END_ALLOW_THREADS Py_DECREF(text);
    if (rc != PF_OK)
        return pipeline_error(self, rc);
    Py_RETURN_NONE;
}

/* Pipeline.plan(shapes): one (height, width[, channels]) per input, NumPy order. */
static PyObject *plan_impl(PipelineObject *self, PyObject *arg, PyObject *kw)
{
    PyObject *seq = PySequence_Fast(arg, "plan() takes a sequence of shapes, one per input");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    pf_shape shapes[MAX_FRAMES];
    if (n > MAX_FRAMES) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "too many input shapes");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t dims[3];
        int nd = 0;
        if (seq_to_ssize(PySequence_Fast_GET_ITEM(seq, i), dims, 3, &nd) != 0 || nd < 2 || nd > 3 ||
            dims[0] < 1 || dims[1] < 1 || dims[0] > INT_MAX || dims[1] > INT_MAX) {
            Py_DECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "shape %zd: expected (height, width) or (height, width, channels) of "
                         "positive ints",
                         i);
            return NULL;
        }
        if (nd == 3 && (dims[2] < 1 || dims[2] > 4)) { /* as run() takes frames */
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError,
                         "shape %zd: %zd channels; frames have 1 (gray), 2 (gray and alpha), 3 "
                         "(RGB) or 4 (RGBA)",
                         i, dims[2]);
            return NULL;
        }
        shapes[i].height = (int)dims[0];
        shapes[i].width = (int)dims[1];
    }
    Py_DECREF(seq);
    int rc;
    pf_pipeline *p = self->p;
    Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_plan(p, shapes, (int)n);
    Py_END_ALLOW_THREADS unsigned long long gen;
    int on_cpu;
    if (rc != PF_OK)
        return pipeline_failed(self, rc);
    if (pipeline_sync(self, 0, 0, &gen, &on_cpu) != 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Pipeline_get_inputs(PipelineObject *self, void *c)
{
    if (!self->p)
        return PyTuple_New(0);
    int n = pf_pipeline_input_count(self->p);
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(pf_pipeline_input_name(self->p, i));
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

/* Pipeline.output_info() -> list of dicts (shape: (height, width) of an image,
   (rows, columns) of a table; (0, 0) before a plan). */
static PyObject *output_info_impl(PipelineObject *self, PyObject *unused, PyObject *kw)
{
    int n = pf_pipeline_output_count(self->p);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        pf_output_info oi;
        int rc = pf_pipeline_output_info(self->p, i, &oi);
        if (rc != PF_OK) {
            Py_DECREF(list);
            return pipeline_error(self, rc);
        }
        /* the form it is written in as a PNG: "" (the frame's own), auto, palette, gray1.. */
        const int form = pf_pipeline_output_png_form(self->p, i);
        const char *form_name = form > 0 ? pf_png_form_name((pf_png_form)form) : "";
        PyObject *d = Py_BuildValue(
            "{s:s,s:s,s:s,s:i,s:i,s:s,s:(ii),s:s}", "name", oi.name, "stage",
            oi.stage ? oi.stage : "", "kind", oi.kind == PF_OUTPUT_IMAGE ? "image" : "table",
            "channels", oi.channels, "bits", oi.bits, "table_format",
            oi.table_format == 1   ? "csv"
            : oi.table_format == 2 ? "json"
                                   : "",
            "shape", oi.shape.height, oi.shape.width, "form", form_name ? form_name : "");
        if (!d || PyList_Append(list, d) != 0)
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

static PyObject *stats_impl(PipelineObject *self, PyObject *unused, PyObject *kw)
{
    pf_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    int rc = pf_pipeline_stats(self->p, &s);
    if (rc != PF_OK)
        return pipeline_error(self, rc);
    return Py_BuildValue(
        "{s:s,s:K,s:i,s:i,s:i,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,"
        "s:d,s:d,s:s}",
        "backend", s.backend ? s.backend : "none", "frames", s.frames, "launches_per_frame",
        s.launches_per_frame, "units_per_frame", s.units_per_frame, "streams", s.streams,
        "allocations", s.allocations, "allocations_last_frame", s.allocations_last_frame,
        "device_syncs", s.device_syncs, "device_syncs_last_frame", s.device_syncs_last_frame,
        "frame_waits", s.frame_waits, "plans", s.plans, "graph_captures", s.graph_captures,
        "graph_instantiations", s.graph_instantiations, "graph_updates", s.graph_updates,
        "graph_launches", s.graph_launches, "device_bytes", s.device_bytes, "pinned_bytes",
        s.pinned_bytes, "host_bytes", s.host_bytes, "timed_launches", s.timed_launches,
        "launches_over_budget", s.launches_over_budget, "max_launch_ms", s.max_launch_ms,
        "budget_ms", s.budget_ms, "precision", s.precision ? s.precision : "exact");
}

static PyObject *units_impl(PipelineObject *self, PyObject *unused, PyObject *kw)
{
    int n = pf_pipeline_unit_count(self->p);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        pf_unit_info u;
        int rc;
        pf_pipeline *p = self->p;
        Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_unit(p, i, &u);
        Py_END_ALLOW_THREADS if (rc != PF_OK)
        {
            Py_DECREF(list);
            return pipeline_error(self, rc);
        }
        PyObject *stages = str_tuple(u.stages, u.n_stages);
        PyObject *d =
            stages ? Py_BuildValue("{s:s,s:O,s:(ii),s:i,s:i,s:O,s:d,s:d,s:d,s:d}", "kind",
                                   kind_name(stage_kinds, 4, u.kind), "stages", stages, "shape",
                                   u.shape.height, u.shape.width, "stream", u.stream, "bands",
                                   u.bands, "fused", u.fused ? Py_True : Py_False, "predicted_ms",
                                   u.predicted_ms, "measured_ms", u.measured_ms, "measured_band_ms",
                                   u.measured_band_ms, "bytes", u.bytes)
                   : NULL;
        Py_XDECREF(stages);
        if (!d || PyList_Append(list, d) != 0)
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

static int print_plan(const void *p, FILE *f)
{
    return pf_pipeline_print_plan((const pf_pipeline *)p, f);
}
static int print_dot(const void *p, FILE *f)
{
    return pf_pipeline_print_dot((const pf_pipeline *)p, f);
}

static PyObject *plan_text_impl(PipelineObject *self, PyObject *unused, PyObject *kw)
{
    return capture_text(print_plan, self->p);
}

static PyObject *dot_text_impl(PipelineObject *self, PyObject *unused, PyObject *kw)
{
    return capture_text(print_dot, self->p);
}

static PyObject *build_kernels_impl(PipelineObject *self, PyObject *args, PyObject *kw)
{
    int arch;
    PyObject *dir_obj = NULL;
    if (!PyArg_ParseTuple(args, "i|O&:build_kernels", &arch, PyUnicode_FSConverter, &dir_obj))
        return NULL;
    int n = 0, rc;
    pf_pipeline *p = self->p;
    const char *dir = dir_obj ? PyBytes_AS_STRING(dir_obj) : NULL;
    Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_build_kernels(p, arch, dir, &n);
    Py_END_ALLOW_THREADS Py_XDECREF(dir_obj);
    if (rc != PF_OK)
        return pipeline_error(self, rc);
    return PyLong_FromLong(n);
}

/* The methods, each with the pipeline claimed. */
static PyObject *Pipeline_set(PipelineObject *self, PyObject *args)
{
    return claimed(self, set_impl, args, NULL);
}

static PyObject *Pipeline_set_json(PipelineObject *self, PyObject *args)
{
    return claimed(self, set_json_impl, args, NULL);
}

static PyObject *Pipeline_set_option(PipelineObject *self, PyObject *args)
{
    return claimed(self, set_option_impl, args, NULL);
}

static PyObject *Pipeline_plan(PipelineObject *self, PyObject *arg)
{
    return claimed(self, plan_impl, arg, NULL);
}

static PyObject *Pipeline_output_info(PipelineObject *self, PyObject *unused)
{
    return claimed(self, output_info_impl, unused, NULL);
}

/* output_channels(i, in_channels): the channels output i is written with for inputs of
   in_channels, as `pipefuse run` writes it (pf_pipeline_output_channels: the declared
   layout, else the input's widened where a stage needs colour or alpha); 0 for a table.
   It reads only what the load fixed, so it needs no claim. */
static PyObject *Pipeline_output_channels(PipelineObject *self, PyObject *args)
{
    int i = 0, in_ch = 0;
    if (!PyArg_ParseTuple(args, "ii", &i, &in_ch))
        return NULL;
    if (!self->p) {
        closed_error();
        return NULL;
    }
    return PyLong_FromLong(pf_pipeline_output_channels(self->p, i, in_ch));
}

static PyObject *Pipeline_stats(PipelineObject *self, PyObject *unused)
{
    return claimed(self, stats_impl, unused, NULL);
}

static PyObject *Pipeline_units(PipelineObject *self, PyObject *unused)
{
    return claimed(self, units_impl, unused, NULL);
}

static PyObject *Pipeline_plan_text(PipelineObject *self, PyObject *unused)
{
    return claimed(self, plan_text_impl, unused, NULL);
}

static PyObject *Pipeline_dot_text(PipelineObject *self, PyObject *unused)
{
    return claimed(self, dot_text_impl, unused, NULL);
}

static PyObject *Pipeline_build_kernels(PipelineObject *self, PyObject *args)
{
    return claimed(self, build_kernels_impl, args, NULL);
}

static PyObject *Pipeline_get_slots(PipelineObject *self, void *c)
{
    return PyLong_FromLong(self->p ? pf_pipeline_slots(self->p) : 0);
}

static PyObject *Pipeline_get_inflight(PipelineObject *self, void *c)
{
    return PyList_GetSlice(self->inflight, 0, PY_SSIZE_T_MAX);
}

/* Waits for every frame in flight, then frees the pipeline. */
static void pipeline_close(PipelineObject *self)
{
    if (!self->p)
        return;
    pf_pipeline *p = self->p;
    Py_ssize_t n = self->inflight ? PyList_GET_SIZE(self->inflight) : 0;
    if (self->engine->process != fork_generation) { /* the parent's: left as it is */
        for (Py_ssize_t i = 0; i < n; i++) {
            TicketObject *t = (TicketObject *)PyList_GET_ITEM(self->inflight, i);
            t->done = t->lost = 1;
            ticket_release(t);
        }
        if (self->inflight)
            PyList_SetSlice(self->inflight, 0, n, NULL);
        self->p = NULL;
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        TicketObject *t = (TicketObject *)PyList_GET_ITEM(self->inflight, i);
        int id = t->id, rc;
        Py_BEGIN_ALLOW_THREADS rc = pf_pipeline_wait(p, id);
        Py_END_ALLOW_THREADS if (ticket_complete(self, t, rc) != 0) PyErr_Clear();
    }
    if (self->inflight)
        PyList_SetSlice(self->inflight, 0, n, NULL);
    if (self->pool)
        pf_staging_trim(self->pool);
    self->p = NULL;
    Py_BEGIN_ALLOW_THREADS pf_pipeline_destroy(p);
    Py_END_ALLOW_THREADS
}

static PyObject *Pipeline_close(PipelineObject *self, PyObject *unused)
{
    if (!self->p) /* closing twice is fine */
        Py_RETURN_NONE;
    if (pipeline_claim(self) != 0)
        return NULL;
    pipeline_close(self);
    self->busy = 0;
    Py_RETURN_NONE;
}

/* A pipeline holds its engine and its tickets (which hold arrays): the cycle collector
   sees them. Clearing closes the pipeline first (waiting for its frames), so that the
   engine, whatever the order the collector takes, is freed after its pipelines. */
static int Pipeline_traverse(PipelineObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->engine);
    for (Py_ssize_t i = 0; self->inflight && i < PyList_GET_SIZE(self->inflight); i++)
        Py_VISIT(PyList_GET_ITEM(self->inflight, i));
    return 0;
}

static int Pipeline_clear(PipelineObject *self)
{
    pipeline_close(self);
    Py_CLEAR(self->pool);
    Py_CLEAR(self->inflight);
    Py_CLEAR(self->engine);
    return 0;
}

static void Pipeline_dealloc(PipelineObject *self)
{
    PyObject_GC_UnTrack(self);
    pipeline_close(self);
    Py_CLEAR(self->pool);
    Py_CLEAR(self->inflight);
    Py_CLEAR(self->engine);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Pipeline_methods[] = {
    {"_hold", (PyCFunction)Pipeline_hold, METH_NOARGS,
     "_hold(): this thread's until _unhold (run, submit, wait)"},
    {"_unhold", (PyCFunction)Pipeline_unhold, METH_NOARGS, "_unhold()"},
    {"submit", (PyCFunction)(void (*)(void))Pipeline_submit, METH_VARARGS | METH_KEYWORDS,
     "submit(inputs, outputs=None, stream=None) -> Ticket"},
    {"wait", (PyCFunction)Pipeline_wait, METH_VARARGS,
     "wait(ticket, timeout_ms=None): the frame is complete (NotReadyError after a timeout)"},
    {"set", (PyCFunction)Pipeline_set, METH_VARARGS, "set('stage.param', value)"},
    {"set_json", (PyCFunction)Pipeline_set_json, METH_VARARGS, "set_json('stage.param', text)"},
    {"set_option", (PyCFunction)Pipeline_set_option, METH_VARARGS, "set_option(name, value)"},
    {"plan", (PyCFunction)Pipeline_plan, METH_O, "plan([(height, width), ...])"},
    {"output_info", (PyCFunction)Pipeline_output_info, METH_NOARGS, "the outputs, as dicts"},
    {"output_channels", (PyCFunction)Pipeline_output_channels, METH_VARARGS,
     "output_channels(i, in_channels): the channels output i is written with"},
    {"stats", (PyCFunction)Pipeline_stats, METH_NOARGS, "counters, as a dict"},
    {"units", (PyCFunction)Pipeline_units, METH_NOARGS, "the plan's launch units, as dicts"},
    {"plan_text", (PyCFunction)Pipeline_plan_text, METH_NOARGS, "the plan, as pipefuse check"},
    {"dot_text", (PyCFunction)Pipeline_dot_text, METH_NOARGS, "the plan as a Graphviz digraph"},
    {"build_kernels", (PyCFunction)Pipeline_build_kernels, METH_VARARGS,
     "build_kernels(arch, dump_dir=None) -> number of fused kernels compiled"},
    {"close", (PyCFunction)Pipeline_close, METH_NOARGS, "wait for frames in flight, free"},
    {"cancel", (PyCFunction)Pipeline_cancel, METH_NOARGS,
     "cancel(): frames submitted so far stop at their next cancel point (any thread)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Pipeline_getset[] = {
    {"inputs", (getter)Pipeline_get_inputs, NULL, "input names, in order", NULL},
    {"slots", (getter)Pipeline_get_slots, NULL, "frames that can be in flight", NULL},
    {"inflight", (getter)Pipeline_get_inflight, NULL, "tickets not yet complete", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject PipelineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pipefuse._pipefuse.Pipeline",
    .tp_basicsize = sizeof(PipelineObject),
    .tp_dealloc = (destructor)Pipeline_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Pipeline_traverse,
    .tp_clear = (inquiry)Pipeline_clear,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "A loaded pipeline (Engine.load_file / load_string).",
    .tp_methods = Pipeline_methods,
    .tp_getset = Pipeline_getset,
};

/* ---- Module ------------------------------------------------------------------------------- */

static PyObject *mod_version(PyObject *m, PyObject *unused)
{
    return PyUnicode_FromString(pf_version_string());
}

static PyMethodDef module_methods[] = {
    {"version", mod_version, METH_NOARGS, "the library's version string"},
    {"read_png", pf_py_read_png, METH_VARARGS,
     "read_png(path, max_pixels) -> (buffer, height, width, channels, bits, pitch)"},
    {"write_png", pf_py_write_png, METH_VARARGS, "write_png(path, array, level)"},
    {"jpeg_available", pf_py_jpeg_available, METH_NOARGS, "whether JPEG files can be read"},
    {"read_jpeg", pf_py_read_jpeg, METH_VARARGS,
     "read_jpeg(path, max_pixels, keep_orientation) -> (buffer, height, width, channels, 8, "
     "pitch)"},
    {"write_jpeg", pf_py_write_jpeg, METH_VARARGS,
     "write_jpeg(path, array, quality, subsampling, progressive, optimize)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                                        "_pipefuse",
                                        "pipefuse's C API for Python (see pipefuse)",
                                        -1,
                                        module_methods,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL};

PyMODINIT_FUNC PyInit__pipefuse(void)
{
    static int atfork;
    if (!atfork && pthread_atfork(NULL, NULL, forked_child) == 0)
        atfork = 1;
    if (pf_version() != PF_VERSION_NUMBER) {
        PyErr_Format(PyExc_ImportError,
                     "pipefuse: the extension was built for library %s but loaded %s",
                     PF_VERSION_STRING, pf_version_string());
        return NULL;
    }
    if (PyType_Ready(&EngineType) < 0 || PyType_Ready(&PipelineType) < 0 ||
        PyType_Ready(&TicketType) < 0 || PyType_Ready(&HostBufferType) < 0 ||
        PyType_Ready(&StagingPoolType) < 0 || PyType_Ready(&FrameBufferType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (pf_py_errors_init(m) != 0)
        goto fail;
    PyObject *np = PyImport_ImportModule("numpy");
    if (np) {
        np_asarray = PyObject_GetAttrString(np, "asarray");
        Py_DECREF(np);
    }
    PyErr_Clear(); /* NumPy is optional here: only inputs without a buffer need it */
    if (PyModule_AddObjectRef(m, "Engine", (PyObject *)&EngineType) < 0 ||
        PyModule_AddObjectRef(m, "Pipeline", (PyObject *)&PipelineType) < 0 ||
        PyModule_AddObjectRef(m, "Ticket", (PyObject *)&TicketType) < 0 ||
        PyModule_AddObjectRef(m, "HostBuffer", (PyObject *)&HostBufferType) < 0 ||
        PyModule_AddIntConstant(m, "CUDA_DEVICE", PF_CUDA_DEVICE) < 0 ||
        PyModule_AddStringConstant(m, "__version__", pf_version_string()) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
