/* engine/hostmem.h: host memory the GPU can reach by DMA: frames the engine allocated
 * pinned (pf_frame_alloc_host) and application memory registered with
 * pf_engine_register_host. The CUDA executor asks here whether a host frame can be
 * copied straight from or to the application's buffer. */
#ifndef PF_HOSTMEM_H
#define PF_HOSTMEM_H

#include "internal.h"

/* 1 when [ptr, ptr + bytes) lies inside one pinned range that engine e allocated or
   registered; 0 otherwise, another engine's memory included (its owner may free or
   unregister it while e's frame is in flight: e copies such a frame as pageable).
   Thread-safe. */
int pf_hostmem_pinned(const pf_engine *e, const void *ptr, size_t bytes);

/* Frees what e allocated and unregisters what e registered (pf_engine_destroy). */
void pf_hostmem_engine_free(const pf_engine *e);

/* Bytes a frame of this shape spans from its first byte to the end of its last row. */
size_t pf_frame_span(const pf_frame *f);

/* 1 when two valid frames share a byte of their rows (a frame overlaps itself); rows
   in the gaps of another frame's pitch do not overlap it. */
int pf_frames_overlap(const pf_frame *a, const pf_frame *b);

#endif
