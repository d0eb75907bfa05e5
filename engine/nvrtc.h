/* engine/nvrtc.h: NVRTC, loaded with dlopen on first use (PIPEFUSE_NVRTC=off disables
 * it), compiling CUDA source to a cubin; results are cached on disk (kcache.c). */
#ifndef PF_NVRTC_H
#define PF_NVRTC_H

#include <stddef.h>

/* NVRTC: whether it can be loaded (why otherwise), and a compile to cubin for sm_<arch>
   (e.g. 90). On failure returns PF_STAGE (a compile error, the log in *log) or
   PF_UNSUPPORTED (no NVRTC); *cubin and *log are malloc'd. The disk cache is used
   unless PIPEFUSE_CACHE_DIR is "off". */
int pf_nvrtc_available(char *why, size_t why_size);
/* fast: FMA contraction and the fast maths (--use_fast_math); else --fmad=false, so the
   kernel's float arithmetic rounds as the CPU's does. */
int pf_nvrtc_compile(const char *source, const char *name, int arch, int fast, void **cubin,
                     size_t *size, char **log, int *cache_hit);
int pf_nvrtc_version(void); /* major * 1000 + minor * 10, or 0 */

#endif
