/* engine/cuda_driver.c: the CUDA driver API calls fused kernels need (module load,
 * launch, the kernel nodes of a graph), reached through the runtime's entry points
 * (cudaGetDriverEntryPointByVersion), so libcuda is no link-time dependency. See
 * cuda_driver.h. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_driver.h"

/* ---- The driver API, through the runtime's entry points ------------------------------------------ */

#ifdef PF_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

static struct {
    pthread_once_t once;
    int ok;
    CUresult (*load)(CUmodule *, const void *);
    CUresult (*get)(CUfunction *, CUmodule, const char *);
    CUresult (*unload)(CUmodule);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **);
    CUresult (*errstr)(CUresult, const char **);
    CUresult (*node_type)(CUgraphNode, CUgraphNodeType *);
    CUresult (*node_get)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
    CUresult (*exec_node_set)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
    CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **); /* or NULL */
} drv = {PTHREAD_ONCE_INIT};

static void driver_load(void)
{
    enum cudaDriverEntryPointQueryResult q;
    int ok = 1;
#define ENTRY(field, sym)                                                                          \
    ok &= cudaGetDriverEntryPointByVersion(sym, (void **)&drv.field, 12000, cudaEnableDefault,     \
                                           &q) == cudaSuccess &&                                   \
          q == cudaDriverEntryPointSuccess && drv.field
    ENTRY(load, "cuModuleLoadData");
    ENTRY(get, "cuModuleGetFunction");
    ENTRY(unload, "cuModuleUnload");
    ENTRY(launch, "cuLaunchKernel");
    ENTRY(errstr, "cuGetErrorString");
    ENTRY(node_type, "cuGraphNodeGetType");
    ENTRY(node_get, "cuGraphKernelNodeGetParams");
    ENTRY(exec_node_set, "cuGraphExecKernelNodeSetParams");
#undef ENTRY
    drv.ok = ok;
    /* optional: clusters only (pf_fuse_clusters) */
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", (void **)&drv.launch_ex, 12000,
                                         cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        drv.launch_ex = NULL;
}

static const char *drv_err(CUresult r)
{
    const char *s = NULL;
    if (drv.errstr && drv.errstr(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown driver error";
}

int pf_fuse_load(const void *cubin, const char *name, void **module, void **function, char *err,
                 size_t err_size)
{
    pthread_once(&drv.once, driver_load);
    if (!drv.ok) {
        snprintf(err, err_size, "the CUDA driver API entry points are not available");
        return PF_UNSUPPORTED;
    }
    CUmodule m = NULL;
    CUfunction f = NULL;
    CUresult r = drv.load(&m, cubin);
    if (r == CUDA_SUCCESS && (r = drv.get(&f, m, name)) != CUDA_SUCCESS)
        drv.unload(m);
    if (r != CUDA_SUCCESS) {
        snprintf(err, err_size, "cannot load fused kernel %s: %s", name, drv_err(r));
        return PF_CUDA;
    }
    *module = m;
    *function = f;
    return PF_OK;
}

void pf_fuse_unload(void *module)
{
    if (module && drv.ok)
        drv.unload((CUmodule)module);
}

int pf_fuse_clusters(int arch)
{
    pthread_once(&drv.once, driver_load);
    return drv.ok && drv.launch_ex && arch >= 90;
}

/* A fused kernel's launch on a gx x gy grid of tx x ty blocks, in clusters of cy blocks
   along y when cy > 1; its first six arguments are every fused kernel's (parameters,
   descriptors, W, H, y0, y1), then `extra`. */
static int launch(void *function, const pf_fuse_unit *io, const pf_fuse_args *a, int width,
                  int height, int y0, int y1, void **extra, int n_extra, unsigned gx, unsigned gy,
                  unsigned tx, unsigned ty, unsigned cy, void *stream, char *err, size_t err_size)
{
    void *args[6 + PF_FUSE_MAX_EXTRA] = {io->param_arg ? (void *)a->host_params
                                                       : (void *)&a->dev_params,
                                         io->desc_arg ? (void *)a->host_desc : (void *)&a->dev_desc,
                                         &width,
                                         &height,
                                         &y0,
                                         &y1};
    for (int i = 0; i < n_extra && i < PF_FUSE_MAX_EXTRA; i++)
        args[6 + i] = extra[i];
    CUresult r;
    if (cy > 1) {
        CUlaunchAttribute at;
        memset(&at, 0, sizeof at);
        at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        at.value.clusterDim.x = 1, at.value.clusterDim.y = cy, at.value.clusterDim.z = 1;
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = gx, cfg.gridDimY = gy, cfg.gridDimZ = 1;
        cfg.blockDimX = tx, cfg.blockDimY = ty, cfg.blockDimZ = 1;
        cfg.hStream = (CUstream)stream;
        cfg.attrs = &at, cfg.numAttrs = 1;
        r = drv.launch_ex ? drv.launch_ex(&cfg, (CUfunction)function, args, NULL)
                          : CUDA_ERROR_NOT_SUPPORTED;
    } else {
        r = drv.launch((CUfunction)function, gx, gy, 1, tx, ty, 1, 0, (CUstream)stream, args, NULL);
    }
    if (r != CUDA_SUCCESS) {
        snprintf(err, err_size, "%s: %s", cy > 1 ? "cuLaunchKernelEx (clusters)" : "cuLaunchKernel",
                 drv_err(r));
        return PF_CUDA;
    }
    return PF_OK;
}

int pf_fuse_launch(void *function, const pf_fuse_unit *io, int width, int height, int y0, int y1,
                   const pf_fuse_args *a, void *stream, char *err, size_t err_size)
{
    if (y1 <= y0)
        return PF_OK;
    /* 256 threads: a row's threads (whole warps, at most 256) times as many rows as fit. */
    int ppt = io->ppt;
    unsigned row_threads = (unsigned)((width + ppt - 1) / ppt);
    unsigned tx = (row_threads + 31) / 32 * 32;
    tx = tx < 256 ? tx : 256;
    unsigned ty = 256 / tx;
    /* a stencil's thread computes PF_STENCIL_RPT pixels of a column of its block's tile */
    if (io->stencil)
        row_threads = (unsigned)width, tx = PF_STENCIL_TX, ty = PF_STENCIL_TY;
    unsigned rows = io->stencil ? ty * PF_STENCIL_RPT : ty; /* a block's rows */
    unsigned gx = (row_threads + tx - 1) / tx, gy = ((unsigned)(y1 - y0) + rows - 1) / rows;
    if (gy > 65535) {
        snprintf(err, err_size, "a band of %d rows is too tall for one launch (at most %u)",
                 y1 - y0, 65535u * rows);
        return PF_UNSUPPORTED;
    }
    return launch(function, io, a, width, height, y0, y1, NULL, 0, gx, gy, tx, ty, 1, stream, err,
                  err_size);
}

int pf_fuse_launch_reduce(void *function, const pf_fuse_unit *io, int width, int height, int y0,
                          int y1, const pf_fuse_args *a, pf_reduce_args *ra, void *stream,
                          char *err, size_t err_size)
{
    if (y1 <= y0)
        return PF_OK;
    void *extra[PF_FUSE_MAX_EXTRA] = {&ra->part,  &ra->rows, &ra->chunk0, &ra->n_part,
                                      &ra->table, &ra->done, &ra->cluster};
    unsigned gx, gy, tx, ty;
    pf_fuse_reduce_grid(io, width, y0, y1, ra->rows, &gx, &gy, &tx, &ty);
    if (ra->cluster > 1 && (gy != (unsigned)ra->cluster || ra->cluster > PF_FUSE_MAX_CLUSTER)) {
        snprintf(err, err_size, "a cluster of %d blocks for a grid %u blocks tall", ra->cluster,
                 gy);
        return PF_INTERNAL;
    }
    return launch(function, io, a, width, height, y0, y1, extra, PF_FUSE_MAX_EXTRA, gx, gy, tx, ty,
                  ra->cluster > 1 ? (unsigned)ra->cluster : 1, stream, err, err_size);
}

int pf_fuse_function(void *module, const char *name, void **function, char *err, size_t err_size)
{
    CUfunction f = NULL;
    CUresult r = drv.ok ? drv.get(&f, (CUmodule)module, name) : CUDA_ERROR_NOT_INITIALIZED;
    if (r != CUDA_SUCCESS) {
        snprintf(err, err_size, "cannot load fused kernel %s: %s", name, drv_err(r));
        return PF_CUDA;
    }
    *function = f;
    return PF_OK;
}

int pf_fuse_launch_separable(void *function, void *function_v, const pf_fuse_unit *io, int width,
                             int height, int y0, int y1, const pf_fuse_args *a, void *scratch,
                             size_t scratch_size, void *stream, char *err, size_t err_size)
{
    if (y1 <= y0 || width <= 0)
        return PF_OK;
    const int rmax = io->sep_rmax;
    const int s0 = y0 - rmax > 0 ? y0 - rmax : 0, s1 = y1 + rmax < height ? y1 + rmax : height;
    const size_t at = pf_fuse_sep_taps_at(width, y1 - y0, height, rmax);
    const size_t need = pf_fuse_sep_scratch(width, y1 - y0, height, rmax);
    if (!scratch || scratch_size < need) {
        snprintf(err, err_size, "device scratch too small: %zu bytes, %zu needed", scratch_size,
                 need);
        return PF_INTERNAL;
    }
    int rpb = PF_SEP_RPB;
    while ((s1 - s0 + rpb - 1) / rpb > 65535)
        rpb *= 2;
    unsigned vth = PF_SEP_VTY * PF_SEP_VRPT, vtiles = ((unsigned)(y1 - y0) + vth - 1) / vth;
    if (vtiles > 65535) {
        snprintf(err, err_size, "a band of %d rows is too tall for one launch (at most %u)",
                 y1 - y0, 65535u * vth);
        return PF_UNSUPPORTED;
    }
    void *tmp = scratch, *taps = (char *)scratch + at;
    void *extra[4] = {&tmp, &taps, (void *)&s0, &rpb};
    int rc = launch(function, io, a, width, height, y0, y1, extra, 4,
                    ((unsigned)width + PF_SEP_TW - 1) / PF_SEP_TW,
                    ((unsigned)(s1 - s0) + (unsigned)rpb - 1) / (unsigned)rpb, PF_SEP_TW, 1, 1,
                    stream, err, err_size);
    if (rc != PF_OK)
        return rc;
    return launch(function_v, io, a, width, height, y0, y1, extra, 4,
                  ((unsigned)width + PF_SEP_VTX - 1) / PF_SEP_VTX, vtiles, PF_SEP_VTX, PF_SEP_VTY,
                  1, stream, err, err_size);
}

int pf_fuse_node_function(void *node, void **function)
{
    *function = NULL;
    CUgraphNodeType type;
    CUDA_KERNEL_NODE_PARAMS kp;
    if (!drv.ok || drv.node_type((CUgraphNode)node, &type) != CUDA_SUCCESS)
        return PF_CUDA;
    if (type != CU_GRAPH_NODE_TYPE_KERNEL)
        return PF_OK;
    memset(&kp, 0, sizeof kp);
    if (drv.node_get((CUgraphNode)node, &kp) != CUDA_SUCCESS)
        return PF_CUDA;
    *function = (void *)kp.func;
    return PF_OK;
}

int pf_fuse_node_set_args(void *exec, void *node, const pf_fuse_unit *io, const pf_fuse_args *a,
                          char *err, size_t err_size)
{
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    CUresult r = drv.node_get((CUgraphNode)node, &kp);
    if (r == CUDA_SUCCESS) {
        /* The node's own argument list, with the by-value arguments replaced: 6
           arguments, and a reduce's or a separable stencil's own (pf_fuse_launch,
           pf_fuse_launch_reduce, pf_fuse_launch_separable). */
        void *args[6 + PF_FUSE_MAX_EXTRA];
        int n = io->reduce                                 ? 6 + PF_FUSE_MAX_EXTRA
                : io->stencil == PF_FUSE_STENCIL_SEPARABLE ? 6 + 4
                                                           : 6;
        for (int i = 0; i < n; i++)
            args[i] = kp.kernelParams[i];
        if (io->param_arg)
            args[0] = (void *)a->host_params;
        if (io->desc_arg)
            args[1] = (void *)a->host_desc;
        kp.kernelParams = args;
        kp.extra = NULL;
        r = drv.exec_node_set((CUgraphExec)exec, (CUgraphNode)node, &kp);
    }
    if (r != CUDA_SUCCESS) {
        snprintf(err, err_size, "updating a fused kernel's arguments in the graph: %s", drv_err(r));
        return PF_CUDA;
    }
    return PF_OK;
}

#else

int pf_fuse_load(const void *cubin, const char *name, void **module, void **function, char *err,
                 size_t err_size)
{
    snprintf(err, err_size, "this build has no CUDA support");
    return PF_UNSUPPORTED;
}
void pf_fuse_unload(void *module) {}
int pf_fuse_function(void *module, const char *name, void **function, char *err, size_t err_size)
{
    snprintf(err, err_size, "this build has no CUDA support");
    return PF_UNSUPPORTED;
}
int pf_fuse_launch_separable(void *function, void *function_v, const pf_fuse_unit *io, int width,
                             int height, int y0, int y1, const pf_fuse_args *a, void *scratch,
                             size_t scratch_size, void *stream, char *err, size_t err_size)
{
    return PF_UNSUPPORTED;
}
int pf_fuse_launch(void *function, const pf_fuse_unit *io, int width, int height, int y0, int y1,
                   const pf_fuse_args *a, void *stream, char *err, size_t err_size)
{
    return PF_UNSUPPORTED;
}
int pf_fuse_node_function(void *node, void **function)
{
    *function = NULL;
    return PF_UNSUPPORTED;
}
int pf_fuse_launch_reduce(void *function, const pf_fuse_unit *io, int width, int height, int y0,
                          int y1, const pf_fuse_args *a, pf_reduce_args *ra, void *stream,
                          char *err, size_t err_size)
{
    return PF_UNSUPPORTED;
}
int pf_fuse_node_set_args(void *exec, void *node, const pf_fuse_unit *io, const pf_fuse_args *a,
                          char *err, size_t err_size)
{
    return PF_UNSUPPORTED;
}
int pf_fuse_clusters(int arch)
{
    return 0;
}

#endif
