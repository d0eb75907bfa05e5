/* engine/nvjpeg.c: JPEG decode and encode on the GPU with nvJPEG (pipefuse/jpeg.h).
 *
 * libnvjpeg is reached through dlopen, as NVRTC is (nvrtc.c): a binary built with CUDA
 * starts on machines without it, and this file needs no nvjpeg.h at build time. The
 * few types and entry points used are declared below as the CUDA 11-13 nvjpeg.h
 * defines them (nvjpegImage_t's pitches are size_t since CUDA 11).
 *
 * Routing, per file (pipefuse/jpeg.h says why): libjpeg reads each header first (size
 * limits, orientation, coding); baseline colour files go to one batched decode on the
 * hardware backend where the device has one, progressive, gray and (without hardware)
 * all other files to nvjpegDecode on the GPU backend, and what nvJPEG cannot take or
 * fails on to libjpeg. Frames are cudaMalloc'd, interleaved (RGBI, or Y for gray).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "internal.h"
#include "jpeg_internal.h"

#define PF_API __attribute__((visibility("default")))

/* ---- nvjpeg.h, the parts used ------------------------------------------------------------- */

typedef struct nvjpegHandle *nvjpegHandle_t;
typedef struct nvjpegJpegState *nvjpegJpegState_t;
typedef struct nvjpegEncoderState *nvjpegEncoderState_t;
typedef struct nvjpegEncoderParams *nvjpegEncoderParams_t;
typedef int nvjpegStatus_t;
enum {
    NVJ_SUCCESS = 0,
    NVJ_JPEG_NOT_SUPPORTED = 4,
    NVJ_ARCH_MISMATCH = 7,
    NVJ_IMPLEMENTATION_NOT_SUPPORTED = 9
};
enum { NVJ_BACKEND_DEFAULT = 0, NVJ_BACKEND_GPU_HYBRID = 2, NVJ_BACKEND_HARDWARE = 3 };
enum { NVJ_OUTPUT_Y = 2, NVJ_OUTPUT_RGBI = 5 };
enum { NVJ_INPUT_RGBI = 5 };
enum { NVJ_CSS_444 = 0, NVJ_CSS_422 = 1, NVJ_CSS_420 = 2, NVJ_CSS_440 = 3, NVJ_CSS_GRAY = 6 };
enum { NVJ_ENCODING_BASELINE_DCT = 0xc0 };
typedef struct {
    unsigned char *channel[4];
    size_t pitch[4];
} nvjpegImage_t;

typedef struct nvjpeg_api {
    nvjpegStatus_t (*CreateEx)(int, void *, void *, unsigned, nvjpegHandle_t *);
    nvjpegStatus_t (*Destroy)(nvjpegHandle_t);
    nvjpegStatus_t (*JpegStateCreate)(nvjpegHandle_t, nvjpegJpegState_t *);
    nvjpegStatus_t (*JpegStateDestroy)(nvjpegJpegState_t);
    nvjpegStatus_t (*Decode)(nvjpegHandle_t, nvjpegJpegState_t, const unsigned char *, size_t, int,
                             nvjpegImage_t *, cudaStream_t);
    nvjpegStatus_t (*DecodeBatchedInitialize)(nvjpegHandle_t, nvjpegJpegState_t, int, int, int);
    nvjpegStatus_t (*DecodeBatched)(nvjpegHandle_t, nvjpegJpegState_t, const unsigned char *const *,
                                    const size_t *, nvjpegImage_t *, cudaStream_t);
    nvjpegStatus_t (*EncoderStateCreate)(nvjpegHandle_t, nvjpegEncoderState_t *, cudaStream_t);
    nvjpegStatus_t (*EncoderStateDestroy)(nvjpegEncoderState_t);
    nvjpegStatus_t (*EncoderParamsCreate)(nvjpegHandle_t, nvjpegEncoderParams_t *, cudaStream_t);
    nvjpegStatus_t (*EncoderParamsDestroy)(nvjpegEncoderParams_t);
    nvjpegStatus_t (*EncoderParamsSetQuality)(nvjpegEncoderParams_t, int, cudaStream_t);
    nvjpegStatus_t (*EncoderParamsSetSamplingFactors)(nvjpegEncoderParams_t, int, cudaStream_t);
    nvjpegStatus_t (*EncoderParamsSetOptimizedHuffman)(nvjpegEncoderParams_t, int, cudaStream_t);
    nvjpegStatus_t (*EncoderParamsSetEncoding)(nvjpegEncoderParams_t, int, cudaStream_t);
    nvjpegStatus_t (*EncodeImage)(nvjpegHandle_t, nvjpegEncoderState_t, nvjpegEncoderParams_t,
                                  const nvjpegImage_t *, int, int, int, cudaStream_t);
    nvjpegStatus_t (*EncodeYUV)(nvjpegHandle_t, nvjpegEncoderState_t, nvjpegEncoderParams_t,
                                const nvjpegImage_t *, int, int, int, cudaStream_t);
    nvjpegStatus_t (*EncodeRetrieveBitstream)(nvjpegHandle_t, nvjpegEncoderState_t, unsigned char *,
                                              size_t *, cudaStream_t);
} nvjpeg_api;

struct pf_jpeg_gpu {
    void *lib;
    nvjpeg_api f;
    nvjpegHandle_t hw;  /* the hardware backend's handle (NULL: the device has none) */
    nvjpegHandle_t gpu; /* the GPU backend's */
    nvjpegJpegState_t hw_state, gpu_state;
    nvjpegEncoderState_t enc;
    nvjpegEncoderParams_t params;
    int max_batch, hw_batch; /* the batch size the hardware state was initialised for */
};

static void set_err(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pf_verrf(err, err_size, fmt, ap);
    va_end(ap);
}

static int load(pf_jpeg_gpu *g, char *err, size_t err_size)
{
    static const char *const names[] = {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so.11",
                                        "libnvjpeg.so", NULL};
    for (int i = 0; names[i] && !g->lib; i++)
        g->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!g->lib) {
        set_err(err, err_size, "nvJPEG is not available: libnvjpeg.so cannot be loaded (%s)",
                dlerror());
        return PF_UNSUPPORTED;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
#define SYM(n) {"nvjpeg" #n, (void **)&g->f.n}
        SYM(CreateEx),
        SYM(Destroy),
        SYM(JpegStateCreate),
        SYM(JpegStateDestroy),
        SYM(Decode),
        SYM(DecodeBatchedInitialize),
        SYM(DecodeBatched),
        SYM(EncoderStateCreate),
        SYM(EncoderStateDestroy),
        SYM(EncoderParamsCreate),
        SYM(EncoderParamsDestroy),
        SYM(EncoderParamsSetQuality),
        SYM(EncoderParamsSetSamplingFactors),
        SYM(EncoderParamsSetOptimizedHuffman),
        SYM(EncoderParamsSetEncoding),
        SYM(EncodeImage),
        SYM(EncodeYUV),
        SYM(EncodeRetrieveBitstream),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].slot = dlsym(g->lib, syms[i].name))) {
            set_err(err, err_size, "nvJPEG: libnvjpeg has no %s (too old)", syms[i].name);
            return PF_UNSUPPORTED;
        }
    return PF_OK;
}

PF_API void pf_jpeg_gpu_destroy(pf_jpeg_gpu *g)
{
    if (!g)
        return;
    if (g->params)
        g->f.EncoderParamsDestroy(g->params);
    if (g->enc)
        g->f.EncoderStateDestroy(g->enc);
    if (g->hw_state)
        g->f.JpegStateDestroy(g->hw_state);
    if (g->gpu_state)
        g->f.JpegStateDestroy(g->gpu_state);
    if (g->hw)
        g->f.Destroy(g->hw);
    if (g->gpu)
        g->f.Destroy(g->gpu);
    if (g->lib)
        dlclose(g->lib);
    free(g);
}

PF_API int pf_jpeg_gpu_create(int max_batch, pf_jpeg_gpu **out, char *err, size_t err_size)
{
    if (!out) {
        set_err(err, err_size, "pf_jpeg_gpu_create: out is NULL");
        return PF_INVALID_ARGUMENT;
    }
    *out = NULL;
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        set_err(err, err_size, "nvJPEG: no CUDA device (%s)",
                ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
        return PF_NO_DEVICE;
    }
    pf_jpeg_gpu *g = calloc(1, sizeof *g);
    if (!g) {
        set_err(err, err_size, "nvJPEG: out of memory");
        return PF_NO_MEMORY;
    }
    g->max_batch = max_batch > 0 ? max_batch : 32;
    int st = load(g, err, err_size);
    if (st != PF_OK) {
        pf_jpeg_gpu_destroy(g);
        return st;
    }
    /* the hardware backend where the device has JPEG engines; its absence is no error */
    if (g->f.CreateEx(NVJ_BACKEND_HARDWARE, NULL, NULL, 0, &g->hw) != NVJ_SUCCESS ||
        g->f.JpegStateCreate(g->hw, &g->hw_state) != NVJ_SUCCESS) {
        if (g->hw)
            g->f.Destroy(g->hw);
        g->hw = NULL;
        g->hw_state = NULL;
    }
    /* the default backend takes progressive files too (GPU_HYBRID is baseline only) */
    nvjpegStatus_t s = g->f.CreateEx(NVJ_BACKEND_DEFAULT, NULL, NULL, 0, &g->gpu);
    if (s != NVJ_SUCCESS)
        s = g->f.CreateEx(NVJ_BACKEND_GPU_HYBRID, NULL, NULL, 0, &g->gpu);
    if (s == NVJ_SUCCESS)
        s = g->f.JpegStateCreate(g->gpu, &g->gpu_state);
    if (s == NVJ_SUCCESS)
        s = g->f.EncoderStateCreate(g->gpu, &g->enc, NULL);
    if (s == NVJ_SUCCESS)
        s = g->f.EncoderParamsCreate(g->gpu, &g->params, NULL);
    if (s != NVJ_SUCCESS) {
        set_err(err, err_size, "nvJPEG: cannot start its GPU backend (status %d)", s);
        pf_jpeg_gpu_destroy(g);
        return s == NVJ_ARCH_MISMATCH ? PF_UNSUPPORTED : PF_CUDA;
    }
    *out = g;
    return PF_OK;
}

PF_API const char *pf_jpeg_gpu_backend(const pf_jpeg_gpu *g)
{
    return g && g->hw ? "hardware" : "gpu";
}

PF_API void pf_jpeg_gpu_frame_free(pf_frame *f)
{
    if (!f || !f->data)
        return;
    cudaFree(f->data);
    memset(f, 0, sizeof *f);
}

/* ---- Decoding -------------------------------------------------------------------------------- */

/* Whether the data ends with EOI (FF D9), trailing zeros or padding aside. */
static int has_eoi(const unsigned char *p, size_t n)
{
    while (n > 2 && (p[n - 1] == 0 || p[n - 1] == '\n' || p[n - 1] == '\r'))
        n--;
    return n >= 4 && p[n - 2] == 0xFF && p[n - 1] == 0xD9;
}

static int alloc_frame(pf_frame *f, int w, int h, int ch)
{
    void *d = NULL;
    if (cudaMalloc(&d, (size_t)w * h * ch) != cudaSuccess)
        return PF_NO_MEMORY;
    *f = (pf_frame){d, w, h, (size_t)w * ch, PF_U8, ch};
    return PF_OK;
}

/* libjpeg's decode, copied up. */
static int cpu_decode(const void *data, size_t size, const char *name, const pf_jpeg_read_opts *o,
                      pf_frame *out, char *err, size_t err_size)
{
    pf_frame h;
    int st = pf_jpeg_read_memory(data, size, name, o, &h, NULL, NULL, err, err_size);
    if (st != PF_OK)
        return st;
    st = alloc_frame(out, h.width, h.height, h.channels);
    if (st == PF_OK &&
        cudaMemcpy2D(out->data, out->pitch, h.data, h.pitch, (size_t)h.width * h.channels,
                     (size_t)h.height, cudaMemcpyHostToDevice) != cudaSuccess) {
        pf_jpeg_gpu_frame_free(out);
        st = PF_CUDA;
    }
    if (st != PF_OK)
        set_err(err, err_size, "%s: %s for its decoded frame on the device", name,
                st == PF_NO_MEMORY ? "no device memory" : "cannot copy");
    pf_frame_free(&h);
    return st;
}

PF_API int pf_jpeg_gpu_decode(pf_jpeg_gpu *g, const void *const *data, const size_t *size,
                              const char *const *names, int n, const pf_jpeg_read_opts *opts,
                              void *stream_, pf_frame *out, int *status, char *where, char *err,
                              size_t err_size)
{
    if (!g || (n > 0 && (!data || !size || !out || !status)) || n < 0) {
        set_err(err, err_size, "pf_jpeg_gpu_decode: %s",
                !g ? "decoder is NULL" : "an array is NULL");
        return PF_INVALID_ARGUMENT;
    }
    cudaStream_t stream = (cudaStream_t)stream_;
    int first = PF_OK;
    char msg[1024];
    /* route: -1 libjpeg, 0 nvJPEG GPU backend, 1 hardware batch */
    int *route = calloc((size_t)n + 1, sizeof *route);
    const unsigned char **bd = calloc((size_t)n + 1, sizeof *bd);
    size_t *bs = calloc((size_t)n + 1, sizeof *bs);
    nvjpegImage_t *bi = calloc((size_t)n + 1, sizeof *bi);
    int *bk = calloc((size_t)n + 1, sizeof *bk);
    if (!route || !bd || !bs || !bi || !bk) {
        free(route), free(bd), free(bs), free(bi), free(bk);
        set_err(err, err_size, "pf_jpeg_gpu_decode: out of memory");
        return PF_NO_MEMORY;
    }
    int nb = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names && names[i] ? names[i] : "<memory>";
        memset(&out[i], 0, sizeof out[i]);
        status[i] = PF_OK;
        if (where)
            where[i] = 'c';
        pf_jpeg_info in;
        int st = pf_jpeg_read_header_memory(data[i], size[i], name, opts, &in, msg, sizeof msg);
        route[i] = -1;
        if (st != PF_OK) {
            status[i] = st;
        } else if (!has_eoi(data[i], size[i])) {
            status[i] = PF_IMAGE;
            snprintf(msg, sizeof msg, "%s: corrupt JPEG: truncated (no end of image marker)", name);
        } else if (!in.arithmetic && in.precision == 8 && !in.applied &&
                   (in.color_space == PF_JPEG_YCBCR || in.color_space == PF_JPEG_GRAY)) {
            route[i] = 0;
            if (g->hw && !in.progressive && in.color_space == PF_JPEG_YCBCR && nb < g->max_batch)
                route[i] = 1;
            if (alloc_frame(&out[i], in.width, in.height, in.components == 1 ? 1 : 3) != PF_OK)
                route[i] = -1; /* libjpeg says the same, or succeeds where memory came back */
        }
        if (status[i] != PF_OK) {
            if (first == PF_OK) {
                first = status[i];
                set_err(err, err_size, "%s", msg);
            }
            continue;
        }
        if (route[i] == 1) {
            bd[nb] = data[i];
            bs[nb] = size[i];
            bi[nb].channel[0] = out[i].data;
            bi[nb].pitch[0] = out[i].pitch;
            bk[nb++] = i;
        }
    }
    /* the hardware batch; on failure its files go to the GPU backend one by one */
    if (nb > 0) {
        int ok =
            (g->hw_batch == nb || g->f.DecodeBatchedInitialize(g->hw, g->hw_state, nb, 1,
                                                               NVJ_OUTPUT_RGBI) == NVJ_SUCCESS) &&
            (g->hw_batch = nb) &&
            g->f.DecodeBatched(g->hw, g->hw_state, bd, bs, bi, stream) == NVJ_SUCCESS &&
            cudaStreamSynchronize(stream) == cudaSuccess;
        for (int k = 0; k < nb; k++) {
            route[bk[k]] = ok ? 2 : 0;
            if (ok && where)
                where[bk[k]] = 'h';
        }
        if (!ok)
            g->hw_batch = 0;
    }
    for (int i = 0; i < n; i++) {
        const char *name = names && names[i] ? names[i] : "<memory>";
        if (status[i] != PF_OK || route[i] == 2)
            continue;
        if (route[i] == 0) {
            nvjpegImage_t img = {{out[i].data}, {out[i].pitch}};
            if (g->f.Decode(g->gpu, g->gpu_state, data[i], size[i],
                            out[i].channels == 1 ? NVJ_OUTPUT_Y : NVJ_OUTPUT_RGBI, &img,
                            stream) == NVJ_SUCCESS &&
                cudaStreamSynchronize(stream) == cudaSuccess) {
                if (where)
                    where[i] = 'g';
                continue;
            }
            pf_jpeg_gpu_frame_free(&out[i]); /* libjpeg's turn: it names what is wrong */
            cudaGetLastError();
        }
        status[i] = cpu_decode(data[i], size[i], name, opts, &out[i], msg, sizeof msg);
        if (status[i] != PF_OK && first == PF_OK) {
            first = status[i];
            set_err(err, err_size, "%s", msg);
        }
    }
    for (int i = 0; i < n; i++)
        if (status[i] != PF_OK)
            pf_jpeg_gpu_frame_free(&out[i]);
    free(route), free(bd), free(bs), free(bi), free(bk);
    return first;
}

/* ---- Encoding -------------------------------------------------------------------------------- */

PF_API int pf_jpeg_gpu_encode(pf_jpeg_gpu *g, const pf_frame *f, const pf_jpeg_write_opts *opts,
                              const pf_jpeg_meta *meta, void *stream_, void **out, size_t *out_size,
                              char *err, size_t err_size)
{
    if (out)
        *out = NULL;
    if (out_size)
        *out_size = 0;
    if (!g || !f || !f->data || !out || !out_size) {
        set_err(err, err_size, "pf_jpeg_gpu_encode: %s is NULL",
                !g ? "the encoder" : "an argument");
        return PF_INVALID_ARGUMENT;
    }
    if (f->sample != PF_U8 || (f->channels != 1 && f->channels != 3)) {
        set_err(err, err_size,
                "pf_jpeg_gpu_encode: a device frame of u8 gray or RGB is taken, "
                "not %d channels of type %d (pf_jpeg_encode converts on the CPU)",
                f->channels, (int)f->sample);
        return PF_INVALID_ARGUMENT;
    }
    pf_jpeg_write_opts o = {sizeof o, 0, 0, 0, 0};
    if (opts)
        memcpy(&o, opts, opts->size && opts->size < sizeof o ? opts->size : sizeof o);
    if (o.quality < 0 || o.quality > 100 || o.subsampling < 0 || o.subsampling > 3) {
        set_err(err, err_size, "pf_jpeg_gpu_encode: quality %d or subsampling %d out of range",
                o.quality, o.subsampling);
        return PF_INVALID_ARGUMENT;
    }
    static const int css[4] = {NVJ_CSS_420, NVJ_CSS_422, NVJ_CSS_444, NVJ_CSS_440};
    cudaStream_t stream = (cudaStream_t)stream_;
    nvjpegImage_t img = {{f->data}, {f->pitch}};
    nvjpegStatus_t s = g->f.EncoderParamsSetQuality(
        g->params, o.quality ? o.quality : PF_JPEG_DEFAULT_QUALITY, stream);
    if (s == NVJ_SUCCESS)
        s = g->f.EncoderParamsSetSamplingFactors(
            g->params, f->channels == 1 ? NVJ_CSS_GRAY : css[o.subsampling], stream);
    if (s == NVJ_SUCCESS)
        s = g->f.EncoderParamsSetOptimizedHuffman(g->params, o.optimize ? 1 : 0, stream);
    if (s == NVJ_SUCCESS)
        s = g->f.EncoderParamsSetEncoding(g->params, NVJ_ENCODING_BASELINE_DCT, stream);
    if (s == NVJ_SUCCESS)
        s = f->channels == 1 ? g->f.EncodeYUV(g->gpu, g->enc, g->params, &img, NVJ_CSS_GRAY,
                                              f->width, f->height, stream)
                             : g->f.EncodeImage(g->gpu, g->enc, g->params, &img, NVJ_INPUT_RGBI,
                                                f->width, f->height, stream);
    size_t n = 0;
    if (s == NVJ_SUCCESS)
        s = g->f.EncodeRetrieveBitstream(g->gpu, g->enc, NULL, &n, stream);
    unsigned char *b = s == NVJ_SUCCESS ? malloc(n ? n : 1) : NULL;
    if (s == NVJ_SUCCESS && !b) {
        set_err(err, err_size, "pf_jpeg_gpu_encode: out of memory");
        return PF_NO_MEMORY;
    }
    if (s == NVJ_SUCCESS)
        s = g->f.EncodeRetrieveBitstream(g->gpu, g->enc, b, &n, stream);
    if (s == NVJ_SUCCESS && cudaStreamSynchronize(stream) != cudaSuccess)
        s = -1;
    if (s != NVJ_SUCCESS) {
        free(b);
        set_err(err, err_size, "nvJPEG: cannot encode a %dx%d frame (status %d)", f->width,
                f->height, s);
        return PF_CUDA;
    }
    if (meta && (meta->exif_size || meta->icc_size)) {
        unsigned char *m;
        size_t mn;
        int st = pf_jpeg_splice_meta(b, n, meta, f->channels, &m, &mn);
        free(b);
        if (st != PF_OK) {
            set_err(err, err_size, "pf_jpeg_gpu_encode: out of memory");
            return st;
        }
        b = m, n = mn;
    }
    *out = b;
    *out_size = n;
    return PF_OK;
}
