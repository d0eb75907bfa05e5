/* staging.c: host arrays that a pf_frame cannot describe, through pooled buffers.
 *
 * A pf_frame is rows top to bottom, pixels and channels packed, aligned samples. NumPy
 * describes more: a flipped image (a[::-1], a negative row stride), an OpenCV image seen
 * as RGB (bgr[..., ::-1], a negative channel stride), every other column (a[:, ::2]),
 * three channels of four (rgba[..., :3]), a transposed or Fortran-ordered array, a
 * broadcast one (stride 0), a misaligned buffer. Such an input is copied once into a
 * staging buffer that the frame reads; such an output is written by the frame into a
 * staging buffer and copied into the array when the frame is complete. The buffers come
 * from the pipeline's pool: a loop over views of one shape allocates once.
 */
#include "binding.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define POOL_KEEP 8 /* idle buffers a pool keeps */

typedef struct {
    PyObject_HEAD void *buf[POOL_KEEP];
    size_t size[POOL_KEEP];
    int n;
} StagingPoolObject;

static void pool_dealloc(StagingPoolObject *self)
{
    for (int i = 0; i < self->n; i++)
        free(self->buf[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject StagingPoolType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pipefuse._pipefuse.StagingPool",
    .tp_basicsize = sizeof(StagingPoolObject),
    .tp_dealloc = (destructor)pool_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Staging buffers of a pipeline (arrays copied for the engine).",
};

PyObject *pf_staging_pool_new(void)
{
    StagingPoolObject *p = PyObject_New(StagingPoolObject, &StagingPoolType);
    if (p)
        p->n = 0;
    return (PyObject *)p;
}

void *pf_staging_take(PyObject *pool, size_t bytes, size_t *size)
{
    StagingPoolObject *p = (StagingPoolObject *)pool;
    int best = -1;
    for (int i = 0; i < p->n; i++) /* the smallest that fits, not more than twice the need */
        if (p->size[i] >= bytes && p->size[i] / 2 <= bytes &&
            (best < 0 || p->size[i] < p->size[best]))
            best = i;
    if (best >= 0) {
        void *b = p->buf[best];
        *size = p->size[best];
        p->n--;
        p->buf[best] = p->buf[p->n];
        p->size[best] = p->size[p->n];
        return b;
    }
    size_t n = (bytes + 63) & ~(size_t)63;
    void *b = n >= bytes ? aligned_alloc(64, n ? n : 64) : NULL;
    if (!b) {
        PyErr_Format(PyExc_MemoryError, "cannot allocate a staging buffer of %zu bytes", bytes);
        return NULL;
    }
    *size = n;
    return b;
}

void pf_staging_give(PyObject *pool, void *buf, size_t size)
{
    StagingPoolObject *p = (StagingPoolObject *)pool;
    if (!buf)
        return;
    if (p->n == POOL_KEEP) { /* drop the smallest idle one, keep the larger */
        int small = 0;
        for (int i = 1; i < p->n; i++)
            if (p->size[i] < p->size[small])
                small = i;
        if (p->size[small] >= size) {
            free(buf);
            return;
        }
        free(p->buf[small]);
        p->buf[small] = p->buf[--p->n];
        p->size[small] = p->size[p->n];
    }
    p->buf[p->n] = buf;
    p->size[p->n++] = size;
}

void pf_staging_trim(PyObject *pool)
{
    StagingPoolObject *p = (StagingPoolObject *)pool;
    for (int i = 0; i < p->n; i++)
        free(p->buf[i]);
    p->n = 0;
}

/* ---- Copies ------------------------------------------------------------------------------ */

static size_t item_bytes(pf_sample s)
{
    return s == PF_U8 ? 1 : s == PF_U16 ? 2 : 4;
}

/* One image between a strided layout and packed rows: to_packed copies the array into the
   buffer, else the buffer into the array. Rows whose pixels are packed (a flipped image)
   go by memcpy; the rest sample by sample. */
static void copy_image(const layout *l, char *packed, int to_packed)
{
    size_t item = item_bytes(l->sample);
    Py_ssize_t h = l->shape[0], w = l->shape[1], c = l->ndim == 3 ? l->shape[2] : 1;
    Py_ssize_t sy = l->strides[0], sx = l->strides[1], sc = l->ndim == 3 ? l->strides[2] : 0;
    size_t row = (size_t)w * (size_t)c * item;
    int packed_row = (c == 1 || sc == (Py_ssize_t)item) && (w == 1 || sx == (Py_ssize_t)(c * item));
    for (Py_ssize_t y = 0; y < h; y++) {
        char *a = l->data + y * sy, *b = packed + (size_t)y * row;
        if (packed_row) {
            if (to_packed)
                memcpy(b, a, row);
            else
                memcpy(a, b, row);
            continue;
        }
#define PF_COPY_SAMPLES(T)                                                                         \
    for (Py_ssize_t x = 0; x < w; x++) {                                                           \
        char *px = a + x * sx;                                                                     \
        T *q = (T *)(void *)b + x * c;                                                             \
        for (Py_ssize_t k = 0; k < c; k++) {                                                       \
            T *s = (T *)(void *)(px + k * sc);                                                     \
            if (to_packed)                                                                         \
                memcpy(&q[k], s, sizeof(T));                                                       \
            else                                                                                   \
                memcpy(s, &q[k], sizeof(T));                                                       \
        }                                                                                          \
    }
        if (item == 1) {
            PF_COPY_SAMPLES(uint8_t)
        } else if (item == 2) {
            PF_COPY_SAMPLES(uint16_t)
        } else {
            PF_COPY_SAMPLES(uint32_t)
        }
#undef PF_COPY_SAMPLES
    }
}

void pf_staging_pack(const layout *src, void *dst)
{
    copy_image(src, dst, 1);
}

void pf_staging_unpack(const void *src, const layout *dst)
{
    copy_image(dst, (char *)src, 0);
}
