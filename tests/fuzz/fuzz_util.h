/* tests/fuzz/fuzz_util.h: what the libFuzzer targets share: one engine over the build
 * tree's plugins, and a checked run of one small frame through a pipeline. */
#ifndef PF_FUZZ_UTIL_H
#define PF_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "pipefuse/pipefuse.h"

/* Stops the run with a message (libFuzzer records the input as a crash). */
#define FZ_ASSERT(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                       \
    } while (0)

void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

/* The engine every input uses: built-in plugins of the build tree, one thread, no
   notices. Made on the first call. */
pf_engine *fz_engine(void);

/* A 32-bit FNV-1a hash, to derive frame shapes and formats from an input. */
uint32_t fz_hash(const void *data, size_t size);

/* Plans p (CPU backend, fused) for w x h inputs and, when the plan is small enough to
   run quickly, runs a frame of that size and format fused, then unfused, into outputs
   poisoned differently: both runs must succeed or fail alike and give the same bytes
   in every image and table output. A failing plan or run must leave a message.
   Returns the fused run's status (or the plan's). */
int fz_run_frame(pf_pipeline *p, int w, int h, pf_sample sample, int channels, uint32_t fill);

#endif
