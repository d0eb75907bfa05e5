/* engine/hostmem.c: pinned host frames and registered application memory (see
 * hostmem.h). One registry for the process: page-locked memory belongs to the process,
 * while each entry belongs to the engine that allocated or registered it, and only that
 * engine frees, unregisters or moves frames by DMA through it. Changes (which call CUDA
 * and can take long) take turns under change_mu; the lookup of every host frame takes
 * only reg_mu, for a short scan. */
#include "hostmem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec_cuda.h"

#ifdef PF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define PF_API __attribute__((visibility("default")))

typedef enum range_kind {
    RANGE_ALLOC_PINNED = 1, /* cudaHostAlloc by pf_frame_alloc_host */
    RANGE_ALLOC_PLAIN,      /* posix_memalign: no usable device */
    RANGE_REGISTERED,       /* cudaHostRegister by pf_engine_register_host */
    RANGE_ALREADY_PINNED,   /* registered, but pinned by the application itself */
    RANGE_PLAIN             /* registered without a usable device: not pinned */
} range_kind;

typedef struct host_range {
    char *base;
    size_t bytes;
    range_kind kind;
    const pf_engine *eng;
} host_range;

static pthread_mutex_t change_mu = PTHREAD_MUTEX_INITIALIZER; /* taken before reg_mu */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static host_range *reg;
static int reg_n, reg_cap;

static int is_pinned(range_kind k)
{
    return k == RANGE_ALLOC_PINNED || k == RANGE_REGISTERED || k == RANGE_ALREADY_PINNED;
}

/* Under reg_mu. */
static int reg_add(char *base, size_t bytes, range_kind kind, const pf_engine *e)
{
    if (reg_n == reg_cap) {
        int cap = reg_cap ? reg_cap * 2 : 16;
        host_range *r = realloc(reg, sizeof *r * (size_t)cap);
        if (!r)
            return PF_NO_MEMORY;
        reg = r;
        reg_cap = cap;
    }
    reg[reg_n].base = base;
    reg[reg_n].bytes = bytes;
    reg[reg_n].kind = kind;
    reg[reg_n].eng = e;
    reg_n++;
    return PF_OK;
}

static int is_alloc(range_kind k)
{
    return k == RANGE_ALLOC_PINNED || k == RANGE_ALLOC_PLAIN;
}

/* Under reg_mu: the entry starting at base, of engine e when e is not NULL, that is an
   allocation (alloc 1) or a registration (alloc 0); or -1. */
static int reg_find(const void *base, const pf_engine *e, int alloc)
{
    for (int i = 0; i < reg_n; i++)
        if (reg[i].base == base && (!e || reg[i].eng == e) && is_alloc(reg[i].kind) == alloc)
            return i;
    return -1;
}

/* Under reg_mu: another engine's registration of exactly the range of r, which shares
   r's page-locking (cudaHostRegister takes a range once per process). */
static int reg_shared(const host_range *r)
{
    for (int i = 0; i < reg_n; i++)
        if (reg[i].base == r->base && reg[i].bytes == r->bytes && reg[i].eng != r->eng &&
            !is_alloc(reg[i].kind))
            return 1;
    return 0;
}

/* Removes entry i (under reg_mu) and returns it, to be released outside the lock. */
static host_range reg_remove(int i)
{
    host_range r = reg[i];
    reg[i] = reg[--reg_n];
    return r;
}

/* Frees a removed entry's memory or undoes its registration, unless another engine's
   registration of the same range still holds it (its owner then undoes it). Under
   change_mu, outside reg_mu: these calls can take long (cudaFreeHost may wait for the
   device), and every submit looks the registry up. */
static void range_release(host_range r)
{
    pthread_mutex_lock(&reg_mu);
    int shared = reg_shared(&r);
    pthread_mutex_unlock(&reg_mu);
    if (shared)
        return;
    switch (r.kind) {
#ifdef PF_HAVE_CUDA
    case RANGE_ALLOC_PINNED:
        cudaFreeHost(r.base);
        break;
    case RANGE_REGISTERED:
        if (cudaHostUnregister(r.base) != cudaSuccess)
            cudaGetLastError();
        break;
#endif
    case RANGE_ALLOC_PLAIN:
        free(r.base);
        break;
    default:
        break;
    }
}

int pf_hostmem_pinned(const pf_engine *e, const void *ptr, size_t bytes)
{
    const char *p = ptr;
    int hit = 0;
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < reg_n && !hit; i++)
        hit = reg[i].eng == e && is_pinned(reg[i].kind) && p >= reg[i].base &&
              bytes <= reg[i].bytes && (size_t)(p - reg[i].base) <= reg[i].bytes - bytes;
    pthread_mutex_unlock(&reg_mu);
    return hit;
}

void pf_hostmem_engine_free(const pf_engine *e)
{
    pthread_mutex_lock(&change_mu);
    for (;;) {
        host_range r = {0};
        pthread_mutex_lock(&reg_mu);
        for (int i = reg_n - 1; i >= 0 && !r.base; i--)
            if (reg[i].eng == e)
                r = reg_remove(i);
        if (!r.base && reg_n == 0) {
            free(reg);
            reg = NULL;
            reg_cap = 0;
        }
        pthread_mutex_unlock(&reg_mu);
        if (!r.base)
            break;
        range_release(r);
    }
    pthread_mutex_unlock(&change_mu);
}

size_t pf_frame_span(const pf_frame *f)
{
    size_t row = (size_t)f->width * pf_frame_pixel_bytes(f->sample, f->channels);
    return f->height > 0 ? f->pitch * (size_t)(f->height - 1) + row : 0;
}

int pf_frames_overlap(const pf_frame *a, const pf_frame *b)
{
    const char *a0 = a->data, *b0 = b->data, *b1 = b0 + pf_frame_span(b);
    if (!(a0 < b1 && b0 < a0 + pf_frame_span(a)))
        return 0;
    /* The spans meet, but rows may still fall in the gaps of the other's pitch (two
       frames side by side in one canvas): each row of a against the first row of b that
       ends after its start (b's rows are apart and in order, pitch >= row). */
    size_t ra = (size_t)a->width * pf_frame_pixel_bytes(a->sample, a->channels);
    size_t rb = (size_t)b->width * pf_frame_pixel_bytes(b->sample, b->channels);
    for (int y = 0; y < a->height; y++) {
        const char *s = a0 + (size_t)y * a->pitch;
        if (s >= b1)
            break;
        size_t k = s < b0 + rb ? 0 : (size_t)(s - b0 - rb) / b->pitch + 1;
        if (k < (size_t)b->height && b0 + k * b->pitch < s + ra)
            return 1;
    }
    return 0;
}

/* ---- The public functions ------------------------------------------------------------------ */

PF_API int pf_frame_alloc_host(pf_engine *e, int width, int height, pf_sample sample, int channels,
                               pf_frame *out)
{
    if (!out) {
        if (e)
            pf_engine_errf(e, "pf_frame_alloc_host: NULL out (the frame to fill)");
        return PF_INVALID_ARGUMENT;
    }
    memset(out, 0, sizeof *out);
    if (!e)
        return PF_INVALID_ARGUMENT;
    size_t bpp = pf_frame_pixel_bytes(sample, channels);
    if (!bpp || width <= 0 || height <= 0) {
        pf_engine_errf(e,
                       "pf_frame_alloc_host: %dx%d, sample %d, %d channel(s) is not a frame "
                       "(%s)",
                       width, height, (int)sample, channels,
                       (unsigned)sample > PF_F32 ? "sample: PF_U8, PF_U16 or PF_F32"
                       : !bpp                    ? "channels: 1 to 4"
                                                 : "an empty size");
        return PF_INVALID_ARGUMENT;
    }
    if ((size_t)width > SIZE_MAX / 16 / (size_t)height) {
        pf_engine_errf(e, "pf_frame_alloc_host: %dx%d is too large to allocate", width, height);
        return PF_TOO_LARGE;
    }
    size_t pitch = (size_t)width * bpp, bytes = pitch * (size_t)height;
    void *mem = NULL;
    range_kind kind = RANGE_ALLOC_PLAIN;
    char why[512] = "";
#ifdef PF_HAVE_CUDA
    if (pf_cuda_available(e, why, sizeof why)) {
        cudaError_t err = cudaHostAlloc(&mem, bytes, cudaHostAllocPortable);
        if (err != cudaSuccess) {
            cudaGetLastError();
            pf_engine_errf(e, "pf_frame_alloc_host: cannot allocate %.1f MiB of pinned memory: %s",
                           bytes / 1048576.0, cudaGetErrorString(err));
            return PF_NO_MEMORY;
        }
        kind = RANGE_ALLOC_PINNED;
    }
#else
    (void)why;
#endif
    if (!mem && posix_memalign(&mem, 4096, bytes) != 0) {
        pf_engine_errf(e, "pf_frame_alloc_host: cannot allocate %.1f MiB", bytes / 1048576.0);
        return PF_NO_MEMORY;
    }
    pthread_mutex_lock(&reg_mu);
    int rc = reg_add(mem, bytes, kind, e);
    pthread_mutex_unlock(&reg_mu);
    if (rc != PF_OK) {
#ifdef PF_HAVE_CUDA
        if (kind == RANGE_ALLOC_PINNED)
            cudaFreeHost(mem);
        else
#endif
            free(mem);
        pf_engine_errf(e, "pf_frame_alloc_host: out of memory");
        return rc;
    }
    *out = (pf_frame){mem, width, height, pitch, sample, channels};
    return PF_OK;
}

/* Under reg_mu: why the range starting at ptr is not one of e's allocations (alloc 1) or
   registrations (alloc 0), for its message: how many bytes it spans and whose it is; NULL
   when no range starts at ptr. */
static const char *not_ours(const void *ptr, const pf_engine *e, int alloc, size_t *bytes)
{
    for (int i = 0; i < reg_n; i++) {
        if (reg[i].base != ptr)
            continue;
        *bytes = reg[i].bytes;
        if (reg[i].eng != e && is_alloc(reg[i].kind) == alloc)
            return alloc ? "were allocated through another engine, which alone frees them"
                         : "were registered through another engine, which alone unregisters "
                           "them";
        if (reg[i].eng == e)
            return alloc ? "are registered memory, not a frame from pf_frame_alloc_host "
                           "(pf_engine_unregister_host undoes it)"
                         : "are a frame from pf_frame_alloc_host, not registered memory "
                           "(pf_frame_free_host frees it)";
    }
    return NULL;
}

PF_API void pf_frame_free_host(pf_engine *e, pf_frame *f)
{
    if (!e || !f || !f->data)
        return;
    host_range r = {0};
    const char *why = NULL;
    size_t bytes = 0;
    pthread_mutex_lock(&change_mu);
    pthread_mutex_lock(&reg_mu);
    int i = reg_find(f->data, e, 1);
    if (i >= 0)
        r = reg_remove(i);
    else
        why = not_ours(f->data, e, 1, &bytes);
    pthread_mutex_unlock(&reg_mu);
    if (r.base)
        range_release(r);
    pthread_mutex_unlock(&change_mu);
    if (r.base)
        memset(f, 0, sizeof *f);
    else if (why)
        pf_engine_errf(e, "pf_frame_free_host: %p + %zu bytes %s; not freed", f->data, bytes, why);
    else
        pf_engine_errf(e,
                       "pf_frame_free_host: %p is not a frame from pf_frame_alloc_host of this "
                       "engine; not freed",
                       f->data);
}

/* Under reg_mu: whether [ptr, ptr + bytes) may be registered by e, and if so whether it
   shares another engine's registration of exactly that range (*share: its kind). A
   message in e's errmsg when not. */
static int may_register(pf_engine *e, char *ptr, size_t bytes, range_kind *share)
{
    *share = 0;
    for (int i = 0; i < reg_n; i++) {
        host_range *r = &reg[i];
        if (!(ptr < r->base + r->bytes && r->base < ptr + bytes))
            continue;
        if (r->base == ptr && r->bytes == bytes && r->eng != e && !is_alloc(r->kind)) {
            *share = r->kind;
            continue;
        }
        pf_engine_errf(e,
                       "pf_engine_register_host: %p + %zu bytes overlaps %p + %zu bytes, %s "
                       "through %s engine%s",
                       (void *)ptr, bytes, (void *)r->base, r->bytes,
                       is_alloc(r->kind) ? "allocated" : "registered",
                       r->eng == e ? "this" : "another",
                       r->eng == e ? "" : " (only exactly the same range can be shared)");
        return 0;
    }
    return 1;
}

PF_API int pf_engine_register_host(pf_engine *e, void *ptr, size_t bytes)
{
    if (!e)
        return PF_INVALID_ARGUMENT;
    if (!ptr || !bytes) {
        pf_engine_errf(e, "pf_engine_register_host: NULL or empty range");
        return PF_INVALID_ARGUMENT;
    }
    if ((uintptr_t)ptr > UINTPTR_MAX - bytes) {
        pf_engine_errf(e,
                       "pf_engine_register_host: %p + %zu runs past the end of the address space",
                       ptr, bytes);
        return PF_INVALID_ARGUMENT;
    }
    char why[512] = "";
    int cuda = pf_cuda_available(e, why, sizeof why);
    /* Registrations take turns, page-locking included (it takes long, but not under
       reg_mu, which every submit takes). */
    pthread_mutex_lock(&change_mu);
    range_kind kind = RANGE_PLAIN, share;
    pthread_mutex_lock(&reg_mu);
    int ok = may_register(e, ptr, bytes, &share);
    pthread_mutex_unlock(&reg_mu);
    int rc = ok ? PF_OK : PF_INVALID_ARGUMENT;
    if (share)
        kind = share; /* the page-locking is the process's: shared, not done twice */
#ifdef PF_HAVE_CUDA
    if (rc == PF_OK && !share && cuda) {
        struct cudaPointerAttributes at;
        if (cudaPointerGetAttributes(&at, ptr) == cudaSuccess && at.type == cudaMemoryTypeHost) {
            kind = RANGE_ALREADY_PINNED; /* cudaHostAlloc'd by the application */
        } else {
            cudaGetLastError();
            cudaError_t err = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
            if (err == cudaSuccess) {
                kind = RANGE_REGISTERED;
            } else {
                cudaGetLastError();
                pf_engine_errf(e, "pf_engine_register_host: cudaHostRegister of %.1f MiB: %s",
                               bytes / 1048576.0, cudaGetErrorString(err));
                rc = err == cudaErrorMemoryAllocation ? PF_NO_MEMORY : PF_CUDA;
            }
        }
    }
#else
    (void)cuda;
#endif
    if (rc == PF_OK) {
        pthread_mutex_lock(&reg_mu);
        rc = reg_add(ptr, bytes, kind, e);
        pthread_mutex_unlock(&reg_mu);
        if (rc != PF_OK) {
            pf_engine_errf(e, "pf_engine_register_host: out of memory");
#ifdef PF_HAVE_CUDA
            if (kind == RANGE_REGISTERED && !share)
                cudaHostUnregister(ptr);
#endif
        }
    }
    pthread_mutex_unlock(&change_mu);
    return rc;
}

PF_API int pf_engine_unregister_host(pf_engine *e, void *ptr)
{
    if (!e)
        return PF_INVALID_ARGUMENT;
    host_range r = {0};
    const char *why = NULL;
    size_t bytes = 0;
    pthread_mutex_lock(&change_mu);
    pthread_mutex_lock(&reg_mu);
    int i = reg_find(ptr, e, 0);
    if (i >= 0)
        r = reg_remove(i);
    else
        why = not_ours(ptr, e, 0, &bytes);
    pthread_mutex_unlock(&reg_mu);
    if (i >= 0)
        range_release(r);
    pthread_mutex_unlock(&change_mu);
    if (i >= 0)
        return PF_OK;
    if (why)
        pf_engine_errf(e, "pf_engine_unregister_host: %p + %zu bytes %s; not unregistered", ptr,
                       bytes, why);
    else
        pf_engine_errf(e, "pf_engine_unregister_host: %p is not the start of a registered range",
                       ptr);
    return PF_INVALID_ARGUMENT;
}

/* ---- Device memory --------------------------------------------------------------------------------- */

PF_API int pf_engine_device_memory(pf_engine *e, unsigned long long *free_bytes,
                                   unsigned long long *total_bytes)
{
    if (!e || !free_bytes || !total_bytes)
        return PF_INVALID_ARGUMENT;
    *free_bytes = *total_bytes = 0;
    char why[512] = "";
#ifdef PF_HAVE_CUDA
    if (pf_cuda_available(e, why, sizeof why)) {
        size_t f = 0, t = 0;
        cudaError_t err = cudaMemGetInfo(&f, &t);
        if (err != cudaSuccess) {
            cudaGetLastError();
            pf_engine_errf(e, "pf_engine_device_memory: cudaMemGetInfo: %s",
                           cudaGetErrorString(err));
            return PF_CUDA;
        }
        *free_bytes = f;
        *total_bytes = t;
        return PF_OK;
    }
#endif
    pf_engine_errf(e, "pf_engine_device_memory: %s", why[0] ? why : "built without CUDA");
    return PF_NO_DEVICE;
}
