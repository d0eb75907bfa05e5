/* engine/info.c: what `pipefuse info` reports about the build and the GPU. The CUDA
 * runtime is linked statically, so this runs (and says "no device") on machines with
 * no driver at all. */
#include <stdio.h>

#include "internal.h"

#ifdef PF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define PF_API __attribute__((visibility("default")))

static void print_devices(FILE *f)
{
#ifdef PF_HAVE_CUDA
    int rt = 0, drv = 0, n = 0;
    cudaRuntimeGetVersion(&rt);
    if (cudaDriverGetVersion(&drv) != cudaSuccess)
        drv = 0;
    fprintf(f, "cuda runtime:   %d.%d\n", rt / 1000, (rt % 1000) / 10);
    if (drv)
        fprintf(f, "cuda driver:    %d.%d\n", drv / 1000, (drv % 1000) / 10);
    else
        fprintf(f, "cuda driver:    none\n");
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        fprintf(f, "devices:        none (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "no device");
        return;
    }
    fprintf(f, "devices:        %d\n", n);
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp prop;
        int timeout = 0;
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess)
            continue;
        if (cudaDeviceGetAttribute(&timeout, cudaDevAttrKernelExecTimeout, d) != cudaSuccess)
            timeout = -1;
        fprintf(f, "  [%d] %s, compute capability %d.%d, %d SMs, %.1f GiB, watchdog %s\n", d,
                prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                (double)prop.totalGlobalMem / (1 << 30),
                timeout < 0 ? "unknown" : (timeout ? "on" : "off"));
    }
#else
    fprintf(f, "cuda:           not built (CPU-only build)\n");
#endif
}

PF_API int pf_engine_print_info(const pf_engine *e, FILE *f)
{
    if (!f)
        return PF_INVALID_ARGUMENT;
    fprintf(f, "pipefuse:       %s (plugin ABI %d.%d)\n", pf_version_string(), PF_ABI_MAJOR,
            PF_ABI_MINOR);
    if (e) {
        fprintf(f, "cpu threads:    %d\n", e->threads);
        fprintf(f, "plugins:        %d, %d stages\n", e->n_plugins, e->n_stages);
        for (int i = 0; i < e->n_plugins; i++)
            fprintf(f, "  %-10s %s\n", e->plugins[i].desc->name, e->plugins[i].path);
    }
    print_devices(f);
    return ferror(f) ? PF_IO : PF_OK;
}
