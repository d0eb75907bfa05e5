/* engine/jpeg_none.c: pipefuse/jpeg.h in a build without libjpeg. Every codec call says
 * so (PF_UNSUPPORTED); the metadata functions (jpeg_meta.c) work as in any build.
 */
#include <string.h>

#include "internal.h"
#include "jpeg_internal.h"

#define PF_API __attribute__((visibility("default")))

#define NO_JPEG(name)                                                                              \
    do {                                                                                           \
        if (err && err_size)                                                                       \
            snprintf(err, err_size,                                                                \
                     "%s: JPEG is not supported: pipefuse was built without "                      \
                     "libjpeg",                                                                    \
                     name ? name : "<memory>");                                                    \
        return PF_UNSUPPORTED;                                                                     \
    } while (0)

PF_API int pf_jpeg_available(void)
{
    return 0;
}

PF_API int pf_jpeg_read(const char *path, const pf_jpeg_read_opts *opts, pf_frame *out,
                        pf_jpeg_info *info, pf_jpeg_meta **meta, char *err, size_t err_size)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (info)
        memset(info, 0, sizeof *info);
    if (meta)
        *meta = NULL;
    NO_JPEG(path);
}

PF_API int pf_jpeg_read_memory(const void *data, size_t size, const char *name,
                               const pf_jpeg_read_opts *opts, pf_frame *out, pf_jpeg_info *info,
                               pf_jpeg_meta **meta, char *err, size_t err_size)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (info)
        memset(info, 0, sizeof *info);
    if (meta)
        *meta = NULL;
    NO_JPEG(name);
}

PF_API int pf_jpeg_read_header(const char *path, const pf_jpeg_read_opts *opts, pf_jpeg_info *info,
                               char *err, size_t err_size)
{
    if (info)
        memset(info, 0, sizeof *info);
    NO_JPEG(path);
}

PF_API int pf_jpeg_read_header_memory(const void *data, size_t size, const char *name,
                                      const pf_jpeg_read_opts *opts, pf_jpeg_info *info, char *err,
                                      size_t err_size)
{
    if (info)
        memset(info, 0, sizeof *info);
    NO_JPEG(name);
}

PF_API int pf_jpeg_rows_open(const char *path, const pf_jpeg_read_opts *opts, pf_jpeg_rows **out,
                             pf_frame *format, pf_jpeg_info *info, pf_jpeg_meta **meta, char *err,
                             size_t err_size)
{
    if (out)
        *out = NULL;
    if (meta)
        *meta = NULL;
    NO_JPEG(path);
}

PF_API int pf_jpeg_rows_read(pf_jpeg_rows *r, pf_frame *dst, int n, char *err, size_t err_size)
{
    NO_JPEG("pf_jpeg_rows_read");
}

PF_API int pf_jpeg_rows_done(const pf_jpeg_rows *r)
{
    return 0;
}

PF_API void pf_jpeg_rows_close(pf_jpeg_rows *r) {}

PF_API int pf_jpeg_write(const char *path, const pf_frame *f, const pf_jpeg_write_opts *opts,
                         const pf_jpeg_meta *meta, char *err, size_t err_size)
{
    NO_JPEG(path);
}

PF_API int pf_jpeg_encode(const pf_frame *f, const pf_jpeg_write_opts *opts,
                          const pf_jpeg_meta *meta, void **out, size_t *out_size, char *err,
                          size_t err_size)
{
    if (out)
        *out = NULL;
    if (out_size)
        *out_size = 0;
    NO_JPEG("<memory>");
}

PF_API int pf_jpeg_writer_begin(FILE *fp, const char *name, const pf_frame *format,
                                const pf_jpeg_write_opts *opts, const pf_jpeg_meta *meta,
                                pf_jpeg_writer **out, char *err, size_t err_size)
{
    if (out)
        *out = NULL;
    NO_JPEG(name);
}

PF_API int pf_jpeg_writer_rows(pf_jpeg_writer *w, const pf_frame *rows, int n, char *err,
                               size_t err_size)
{
    NO_JPEG("pf_jpeg_writer_rows");
}

PF_API int pf_jpeg_writer_finish(pf_jpeg_writer *w, char *err, size_t err_size)
{
    NO_JPEG("pf_jpeg_writer_finish");
}

PF_API void pf_jpeg_writer_abort(pf_jpeg_writer *w) {}
