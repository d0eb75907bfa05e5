/* pipefuse/tools.h: helpers for programs built on the engine (the pipefuse command
 * uses them): name suggestions as the engine makes them, and whether the CUDA backend
 * can run here, with the reason when it cannot. */
#ifndef PIPEFUSE_TOOLS_H
#define PIPEFUSE_TOOLS_H

#include "pipefuse/pipefuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The name among cands[0..n) closest to name (case-insensitive edit distance with
   transpositions), or NULL when none is close enough to be a plausible typo; the rule
   the engine uses for "did you mean" in pipeline files. NULL entries are skipped. */
const char *pf_closest_name(const char *name, const char *const *cands, int n);

/* x as the shortest text that reads back as the same double (as the same float when
   as_float), in buf: a message or listing must not round 5.0000000001 to "5", nor the
   bound 0.0009765625 to %g's "0.000976562", which is below it. Returns buf. */
const char *pf_number_text(double x, int as_float, char *buf, size_t size);

/* 1 when the engine's CUDA backend can run (a driver, a device, and kernels for it);
   0 with the reason in why ("no CUDA driver is installed", "the CUDA driver (12.2) is
   older than this build's CUDA runtime (13.0)", "no CUDA device", "this build of
   pipefuse has no CUDA support", ...). Probes the device once per engine. */
int pf_engine_cuda_usable(pf_engine *e, char *why, size_t why_size);

/* C source text with its comments and string and character literals blanked: the same
   length, spaces in their place, newlines kept (so line numbers stay). malloc'd; NULL
   when out of memory. What the engine reads an op header's code with (whether it
   reads the pixel's position) and `pipefuse plugin check` too (what it calls). */
char *pf_source_blank(const char *src);

#ifdef __cplusplus
}
#endif

#endif /* PIPEFUSE_TOOLS_H */
