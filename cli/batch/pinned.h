/* cli/batch/pinned.h: a pool of page-locked frames for the batch's GPU lanes (pinned.c).
 *
 * Frames whose memory every lane's engine registered (pf_engine_register_host) move by
 * DMA, so the lane does not copy them through staging. Thread-safe: decoders take input
 * frames, lanes take output frames, encoders give both back.
 */
#ifndef PF_CLI_PINNED_H
#define PF_CLI_PINNED_H

#include "pipefuse/pipefuse.h"

#define PINNED_MAX_ENGINES 8

typedef struct pinned_pool pinned_pool;

/* A pool registering its blocks with engines[0..n-1] and holding at most limit bytes
   of blocks (0: no limit). */
int pinned_pool_create(pf_engine *const *engines, int n, unsigned long long limit,
                       pinned_pool **out);
/* A frame (pitch = a row's bytes) in a free block or a new one: PF_OK, or PF_NO_MEMORY
   when the limit is reached with every block busy or registering fails (the caller then
   uses pageable memory). */
int pinned_frame(pinned_pool *p, int width, int height, pf_sample sample, int channels,
                 pf_frame *f);
/* Whether f's data is a busy block of p (a frame pinned_frame gave). */
int pinned_owns(pinned_pool *p, const pf_frame *f);
/* Gives f's block back and clears f. */
void pinned_release(pinned_pool *p, pf_frame *f);
/* Unregisters and frees every block; NULL does nothing. No frame may be in flight. */
void pinned_pool_destroy(pinned_pool *p);

#endif
