/* engine/nvjpeg_none.c: the nvJPEG functions of pipefuse/jpeg.h in a build without CUDA
 * or without libjpeg: create says so (PF_UNSUPPORTED); the rest have nothing to act on.
 */
#include <string.h>

#include "internal.h"
#include "jpeg_internal.h"

#define PF_API __attribute__((visibility("default")))

PF_API int pf_jpeg_gpu_create(int max_batch, pf_jpeg_gpu **out, char *err, size_t err_size)
{
    if (out)
        *out = NULL;
    if (err && err_size)
        snprintf(err, err_size, "nvJPEG is not available: pipefuse was built without %s",
                 pf_jpeg_available() ? "CUDA" : "libjpeg");
    return PF_UNSUPPORTED;
}

PF_API void pf_jpeg_gpu_destroy(pf_jpeg_gpu *g) {}

PF_API const char *pf_jpeg_gpu_backend(const pf_jpeg_gpu *g)
{
    return "none";
}

PF_API int pf_jpeg_gpu_decode(pf_jpeg_gpu *g, const void *const *data, const size_t *size,
                              const char *const *names, int n, const pf_jpeg_read_opts *opts,
                              void *stream, pf_frame *out, int *status, char *where, char *err,
                              size_t err_size)
{
    if (err && err_size)
        snprintf(err, err_size, "nvJPEG is not available in this build");
    return PF_UNSUPPORTED;
}

PF_API int pf_jpeg_gpu_encode(pf_jpeg_gpu *g, const pf_frame *device_frame,
                              const pf_jpeg_write_opts *opts, const pf_jpeg_meta *meta,
                              void *stream, void **out, size_t *out_size, char *err,
                              size_t err_size)
{
    if (out)
        *out = NULL;
    if (out_size)
        *out_size = 0;
    if (err && err_size)
        snprintf(err, err_size, "nvJPEG is not available in this build");
    return PF_UNSUPPORTED;
}

PF_API void pf_jpeg_gpu_frame_free(pf_frame *f) {}
