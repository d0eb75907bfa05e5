/* cli/batch/pinned.c: page-locked frames for the batch's GPU lanes (pinned.h).
 *
 * A frame in memory its engine registered moves by DMA: the upload reads it where the
 * decoder left it and the download writes where the encoder reads, with no copy through
 * the engine's staging on the lane's one thread. Registering (cudaHostRegister) costs
 * about a millisecond per few MB, so blocks are kept and reused: a batch has few
 * distinct frame sizes, and after its first files every frame takes a block it freed.
 * Blocks are whole MiB, taken best fit; over the pool's byte limit the free blocks go
 * first, and when none is free the caller gets pageable memory (the staging path).
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#endif
#include "pinned.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_ALIGN (1u << 20)

typedef struct block {
    void *mem;
    size_t bytes;
    int busy;
} block;

struct pinned_pool {
    pf_engine *engines[PINNED_MAX_ENGINES];
    int n_engines;
    unsigned long long limit, held;
    pthread_mutex_t mu;
    block *b;
    int n, cap;
};

int pinned_pool_create(pf_engine *const *engines, int n, unsigned long long limit,
                       pinned_pool **out)
{
    *out = NULL;
    if (n < 1 || n > PINNED_MAX_ENGINES)
        return PF_INVALID_ARGUMENT;
    pinned_pool *p = calloc(1, sizeof *p);
    if (!p)
        return PF_NO_MEMORY;
    memcpy(p->engines, engines, sizeof *engines * (size_t)n);
    p->n_engines = n;
    p->limit = limit;
    pthread_mutex_init(&p->mu, NULL);
    *out = p;
    return PF_OK;
}

/* Unregisters and frees block k (not busy) and removes it from the list. */
static void drop_block(pinned_pool *p, int k)
{
    for (int e = 0; e < p->n_engines; e++)
        pf_engine_unregister_host(p->engines[e], p->b[k].mem);
    free(p->b[k].mem);
    p->held -= p->b[k].bytes;
    p->b[k] = p->b[--p->n];
}

/* A new block of bytes, registered with every engine; -1 when none can be had. */
static int new_block(pinned_pool *p, size_t bytes)
{
    while (p->limit && p->held + bytes > p->limit) { /* free blocks go first, largest first */
        int victim = -1;
        for (int k = 0; k < p->n; k++)
            if (!p->b[k].busy && (victim < 0 || p->b[k].bytes > p->b[victim].bytes))
                victim = k;
        if (victim < 0)
            return -1;
        drop_block(p, victim);
    }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 16;
        block *nb = realloc(p->b, sizeof *nb * (size_t)cap);
        if (!nb)
            return -1;
        p->b = nb;
        p->cap = cap;
    }
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, bytes) != 0)
        return -1;
    int e = 0;
    for (; e < p->n_engines; e++)
        if (pf_engine_register_host(p->engines[e], mem, bytes) != PF_OK)
            break;
    if (e < p->n_engines) { /* page-locked memory is scarce: pageable instead */
        while (e-- > 0)
            pf_engine_unregister_host(p->engines[e], mem);
        free(mem);
        return -1;
    }
    p->b[p->n] = (block){mem, bytes, 0};
    p->held += bytes;
    return p->n++;
}

int pinned_frame(pinned_pool *p, int width, int height, pf_sample sample, int channels, pf_frame *f)
{
    size_t bpp = pf_frame_pixel_bytes(sample, channels);
    if (!p || !bpp || width <= 0 || height <= 0 ||
        (size_t)width * bpp > (SIZE_MAX - BLOCK_ALIGN) / (size_t)height)
        return PF_INVALID_ARGUMENT;
    size_t pitch = (size_t)width * bpp, need = pitch * (size_t)height;
    size_t bytes = (need + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
    pthread_mutex_lock(&p->mu);
    int best = -1;
    for (int k = 0; k < p->n; k++)
        if (!p->b[k].busy && p->b[k].bytes >= bytes &&
            (best < 0 || p->b[k].bytes < p->b[best].bytes))
            best = k;
    /* a free block more than twice the size is left for a frame that needs it */
    if (best >= 0 && p->b[best].bytes > 2 * bytes)
        best = -1;
    if (best < 0)
        best = new_block(p, bytes);
    if (best >= 0)
        p->b[best].busy = 1;
    void *mem = best >= 0 ? p->b[best].mem : NULL;
    pthread_mutex_unlock(&p->mu);
    if (!mem)
        return PF_NO_MEMORY;
    *f = (pf_frame){mem, width, height, pitch, sample, channels};
    return PF_OK;
}

int pinned_owns(pinned_pool *p, const pf_frame *f)
{
    int found = 0;
    if (!p || !f->data)
        return 0;
    pthread_mutex_lock(&p->mu);
    for (int k = 0; k < p->n && !found; k++)
        found = p->b[k].mem == f->data && p->b[k].busy;
    pthread_mutex_unlock(&p->mu);
    return found;
}

void pinned_release(pinned_pool *p, pf_frame *f)
{
    if (!p || !f->data)
        return;
    pthread_mutex_lock(&p->mu);
    for (int k = 0; k < p->n; k++)
        if (p->b[k].mem == f->data) {
            p->b[k].busy = 0;
            break;
        }
    pthread_mutex_unlock(&p->mu);
    memset(f, 0, sizeof *f);
}

void pinned_pool_destroy(pinned_pool *p)
{
    if (!p)
        return;
    while (p->n > 0) {
        p->b[p->n - 1].busy = 0;
        drop_block(p, p->n - 1);
    }
    free(p->b);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
