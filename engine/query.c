/* engine/query.c: pipefuse/tools.h, and why no CUDA device can be used, told apart:
 * no driver at all, a driver older than the runtime, no device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "exec_cuda.h"
#include "internal.h"
#include "pipefuse/tools.h"

#ifdef PF_HAVE_CUDA
#include <dlfcn.h>

#include <cuda_runtime_api.h>
#endif

#define PF_API __attribute__((visibility("default")))

PF_API const char *pf_number_text(double x, int as_float, char *buf, size_t size)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, x);
        if (isinf(x) || isnan(x) ||
            (as_float ? strtof(buf, NULL) == (float)x : strtod(buf, NULL) == x))
            break;
    }
    return buf;
}

PF_API const char *pf_closest_name(const char *name, const char *const *cands, int n)
{
    return name && cands && n > 0 ? pf_closest(name, cands, n) : NULL;
}

PF_API int pf_engine_cuda_usable(pf_engine *e, char *why, size_t why_size)
{
    if (!e) {
        snprintf(why, why_size, "no engine");
        return 0;
    }
    return pf_cuda_available(e, why, why_size);
}

#ifdef PF_HAVE_CUDA
/* cudaGetDeviceCount failed with err: the runtime says "CUDA driver version is
   insufficient" both when the driver is too old and when there is none, so look at the
   driver library itself. */
void pf_cuda_explain_no_device(int err, char *why, size_t why_size)
{
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, why_size, "no CUDA driver is installed (libcuda.so.1 not found)");
        return;
    }
    int (*get_version)(int *) = (int (*)(int *))dlsym(lib, "cuDriverGetVersion");
    int drv = 0;
    if (!get_version || get_version(&drv) != 0)
        drv = 0;
    dlclose(lib);
    if (err == cudaErrorInsufficientDriver && drv > 0 && drv < rt)
        snprintf(why, why_size,
                 "the CUDA driver (%d.%d) is older than this build's CUDA runtime (%d.%d); "
                 "update the driver",
                 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    else if (err == cudaErrorNoDevice)
        snprintf(why, why_size, "no CUDA device (driver %d.%d found)", drv / 1000, drv % 1000 / 10);
    else
        snprintf(why, why_size, "no usable CUDA device: %s", cudaGetErrorString((cudaError_t)err));
}
#endif
