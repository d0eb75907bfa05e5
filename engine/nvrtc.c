/* engine/nvrtc.c: NVRTC, found with dlopen (no link-time dependency), compiling CUDA
 * source to a cubin for one architecture, through the disk cache (kcache.c). See
 * nvrtc.h. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcache.h"
#include "nvrtc.h"

extern const char pf_src_point_h[];
extern const char pf_src_fused_rt[];
extern const char pf_src_frame_desc[];
extern const char pf_src_edge[];
extern const char pf_src_separable_rt[];
extern const char pf_src_premultiply[];

/* ---- NVRTC through dlopen ---------------------------------------------------------------------- */

typedef int (*nvrtc_create_fn)(void **, const char *, const char *, int, const char *const *,
                               const char *const *);
typedef int (*nvrtc_compile_fn)(void *, int, const char *const *);
typedef int (*nvrtc_size_fn)(void *, size_t *);
typedef int (*nvrtc_get_fn)(void *, char *);
typedef int (*nvrtc_destroy_fn)(void **);
typedef int (*nvrtc_version_fn)(int *, int *);
typedef const char *(*nvrtc_errstr_fn)(int);

static struct {
    pthread_once_t once;
    void *lib;
    char why[512];
    nvrtc_create_fn create;
    nvrtc_compile_fn compile;
    nvrtc_size_fn log_size, cubin_size;
    nvrtc_get_fn log, cubin;
    nvrtc_destroy_fn destroy;
    nvrtc_version_fn version;
    nvrtc_errstr_fn errstr;
    int major, minor;
} nv = {PTHREAD_ONCE_INIT};

static void nvrtc_load(void)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    const char *env = getenv("PIPEFUSE_NVRTC");
    if (env && strcmp(env, "off") == 0) {
        snprintf(nv.why, sizeof nv.why, "NVRTC disabled by PIPEFUSE_NVRTC=off");
        return;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !nv.lib; i++)
        nv.lib = dlopen(env && *env ? env : names[i], RTLD_NOW | RTLD_LOCAL);
    if (!nv.lib) {
        snprintf(nv.why, sizeof nv.why, "NVRTC not found (libnvrtc.so.13 or .12): %s", dlerror());
        return;
    }
#define SYM(field, sym) *(void **)&nv.field = dlsym(nv.lib, sym)
    SYM(create, "nvrtcCreateProgram");
    SYM(compile, "nvrtcCompileProgram");
    SYM(log_size, "nvrtcGetProgramLogSize");
    SYM(log, "nvrtcGetProgramLog");
    SYM(cubin_size, "nvrtcGetCUBINSize");
    SYM(cubin, "nvrtcGetCUBIN");
    SYM(destroy, "nvrtcDestroyProgram");
    SYM(version, "nvrtcVersion");
    SYM(errstr, "nvrtcGetErrorString");
#undef SYM
    if (!nv.create || !nv.compile || !nv.log_size || !nv.log || !nv.cubin_size || !nv.cubin ||
        !nv.destroy || !nv.version || !nv.errstr || nv.version(&nv.major, &nv.minor) != 0) {
        snprintf(nv.why, sizeof nv.why, "the NVRTC library found lacks symbols pipefuse needs");
        dlclose(nv.lib);
        nv.lib = NULL;
    }
}

int pf_nvrtc_available(char *why, size_t why_size)
{
    pthread_once(&nv.once, nvrtc_load);
    if (!nv.lib && why)
        snprintf(why, why_size, "%s", nv.why);
    return nv.lib != NULL;
}

int pf_nvrtc_version(void)
{
    return pf_nvrtc_available(NULL, 0) ? nv.major * 1000 + nv.minor * 10 : 0;
}

int pf_nvrtc_compile(const char *source, const char *name, int arch, int fast, void **cubin,
                     size_t *size, char **log, int *cache_hit)
{
    *cubin = NULL;
    *log = NULL;
    *size = 0;
    if (cache_hit)
        *cache_hit = 0;
    char why[512];
    if (!pf_nvrtc_available(why, sizeof why)) {
        *log = pf_strdup(why);
        return PF_UNSUPPORTED;
    }
    char opt_arch[64];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=sm_%d", arch);
    /* Exact: --fmad=false, no multiply and add contracted into an FMA, so an op's float
       arithmetic rounds as the CPU's does (ISO C, -ffp-contract=off) and the generated
       kernels give the CPU executor's values. Fast: contraction and the fast maths. */
    const char *opts[] = {opt_arch, "--std=c++17", "-default-device",
                          fast ? "--use_fast_math" : "--fmad=false"};
    int n_opts = (int)(sizeof opts / sizeof opts[0]);

    /* The key covers everything the cubin depends on. */
    pf_kcache_key key;
    pf_kcache_key_init(&key);
    pf_kcache_key_add(&key, source, strlen(source));
    pf_kcache_key_add(&key, pf_src_point_h, strlen(pf_src_point_h));
    pf_kcache_key_add(&key, pf_src_fused_rt, strlen(pf_src_fused_rt));
    pf_kcache_key_add(&key, pf_src_frame_desc, strlen(pf_src_frame_desc));
    pf_kcache_key_add(&key, pf_src_edge, strlen(pf_src_edge));
    pf_kcache_key_add(&key, pf_src_separable_rt, strlen(pf_src_separable_rt));
    pf_kcache_key_add(&key, pf_src_premultiply, strlen(pf_src_premultiply));
    for (int i = 0; i < n_opts; i++)
        pf_kcache_key_add(&key, opts[i], strlen(opts[i]) + 1);
    char ver[64];
    snprintf(ver, sizeof ver, "nvrtc %d.%d engine %s", nv.major, nv.minor, PF_VERSION_STRING);
    pf_kcache_key_add(&key, ver, strlen(ver));
    if (pf_kcache_get(&key, cubin, size) == 0) {
        if (cache_hit)
            *cache_hit = 1;
        return PF_OK;
    }

    const char *headers[] = {pf_src_point_h, pf_src_fused_rt,     pf_src_frame_desc,
                             pf_src_edge,    pf_src_separable_rt, pf_src_premultiply};
    const char *header_names[] = {"pipefuse/point.h",        "pipefuse/fused_rt.h",
                                  "pipefuse/frame_desc.h",   "pipefuse/edge.h",
                                  "pipefuse/separable_rt.h", "pipefuse/premultiply.h"};
    void *prog = NULL;
    int rc = nv.create(&prog, source, name, 6, headers, header_names);
    if (rc != 0) {
        *log = pf_strdup(nv.errstr(rc));
        return PF_STAGE;
    }
    int crc = nv.compile(prog, n_opts, opts);
    size_t log_size = 0;
    if (nv.log_size(prog, &log_size) == 0 && log_size > 1) {
        *log = malloc(log_size);
        if (*log && nv.log(prog, *log) != 0)
            (*log)[0] = 0;
    }
    int status = PF_OK;
    if (crc != 0) {
        if (!*log)
            *log = pf_strdup(nv.errstr(crc));
        status = PF_STAGE;
    } else if (nv.cubin_size(prog, size) != 0 || !(*cubin = malloc(*size)) ||
               nv.cubin(prog, *cubin) != 0) {
        free(*cubin);
        *cubin = NULL;
        status = PF_NO_MEMORY;
    }
    nv.destroy(&prog);
    if (status == PF_OK)
        pf_kcache_put(&key, *cubin, *size);
    return status;
}
