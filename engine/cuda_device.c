/* engine/cuda_device.c: the CUDA device of an engine: the probe (once per engine, under
 * a lock), the device-to-device bandwidth it measures, the device's attributes (watchdog,
 * multiprocessors, architecture), and the lost context: pf_cu_fail turns a failed CUDA
 * call into the pipeline's error text and marks a sticky error, after which every call
 * fails at once (pf_cu_fail_if_lost).
 * Without CUDA in the build the file is empty: exec_cuda.c has the stubs. */
#ifdef PF_HAVE_CUDA

#include <pthread.h>
#include <stdlib.h>

#include "cuda_internal.h"
#include "../kernels/convert.h"

/* Device-to-device copy bandwidth: the floor for memory-bound work and the cost
   model's rate. Measured once per engine: 64 MiB copied 5 times after a warm-up. */
static double measure_bandwidth(void)
{
    const size_t bytes = 64u << 20;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float ms = 0;
    double bw = 0;
    if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
        cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
        cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess &&
        cudaEventRecord(e0, 0) == cudaSuccess) {
        for (int i = 0; i < 5; i++)
            cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice, 0);
        if (cudaEventRecord(e1, 0) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
            cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms > 0)
            bw = 2.0 * bytes * 5 / (ms * 1e-3);
    }
    cudaGetLastError();
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return bw > 0 ? bw : 1e12;
}

/* ---- Errors ---------------------------------------------------------------------------------- */

int pf_cu_fail(pf_pipeline *p, cudaError_t err, const char *call, const char *file, int line)
{
    int sticky = err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure ||
                 err == cudaErrorLaunchTimeout || err == cudaErrorHardwareStackError ||
                 err == cudaErrorIllegalInstruction || err == cudaErrorMisalignedAddress ||
                 err == cudaErrorInvalidPc || err == cudaErrorECCUncorrectable;
    pf_errf(p->errmsg, "%s: CUDA %s: %s (%s) at %s:%d%s", p->source, call, cudaGetErrorString(err),
            cudaGetErrorName(err), file, line,
            sticky ? "; the CUDA context is lost: destroy the pipeline and engine" : "");
    if (sticky && p->eng->cuda && !p->eng->cuda->lost[0])
        snprintf(p->eng->cuda->lost, sizeof p->eng->cuda->lost, "%.1000s", p->errmsg);
    if (err == cudaErrorMemoryAllocation)
        return PF_NO_MEMORY;
    return PF_CUDA;
}

/* ---- The device --------------------------------------------------------------------------------- */

static int available_locked(pf_engine *e, char *why, size_t why_size)
{
    if (!e->cuda) {
        e->cuda = calloc(1, sizeof *e->cuda);
        if (!e->cuda) {
            snprintf(why, why_size, "out of memory");
            return 0;
        }
    }
    pf_cuda_dev *d = e->cuda;
    if (d->state == 0) {
        int n = 0;
        cudaError_t err = cudaGetDeviceCount(&n);
        d->state = -1;
        if (err != cudaSuccess) {
            pf_cuda_explain_no_device((int)err, d->why, sizeof d->why);
        } else if (n == 0) {
            snprintf(d->why, sizeof d->why, "no CUDA device");
        } else if ((err = cudaSetDevice(0)) != cudaSuccess ||
                   (err = cudaFree(NULL)) != cudaSuccess) {
            snprintf(d->why, sizeof d->why, "CUDA device 0 cannot be used: %s",
                     cudaGetErrorString(err));
        } else if ((err = (cudaError_t)pf_cuda_probe_image()) != cudaSuccess) {
            struct cudaDeviceProp prop;
            cudaGetDeviceProperties(&prop, 0);
            snprintf(d->why, sizeof d->why,
                     "%s (sm_%d%d) cannot run this build's kernels (%s): it carries sm_75 "
                     "to sm_90 and compute_90 PTX; the device is %s",
                     prop.name, prop.major, prop.minor, cudaGetErrorString(err),
                     prop.major * 10 + prop.minor < 75 ? "older" : "newer than the driver's PTX");
        } else {
            d->state = 1;
            d->device = 0;
            if (cudaDeviceGetAttribute(&d->watchdog, cudaDevAttrKernelExecTimeout, 0) !=
                cudaSuccess)
                d->watchdog = 0;
            if (cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, 0) !=
                cudaSuccess)
                d->sm_count = 1;
            int major = 0, minor = 0;
            if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) ==
                    cudaSuccess &&
                cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess)
                d->arch = major * 10 + minor;
            d->bandwidth = measure_bandwidth();
        }
    }
    if (d->state < 0)
        snprintf(why, why_size, "%s", d->why);
    return d->state > 0;
}

/* Engines on several threads probe their device once each, one at a time. */
static pthread_mutex_t available_mu = PTHREAD_MUTEX_INITIALIZER;

int pf_cuda_available(pf_engine *e, char *why, size_t why_size)
{
    pthread_mutex_lock(&available_mu);
    int ok = available_locked(e, why, why_size);
    pthread_mutex_unlock(&available_mu);
    return ok;
}

const char *pf_cuda_lost(const pf_engine *e)
{
    return e->cuda && e->cuda->lost[0] ? e->cuda->lost : NULL;
}

/* Every call after a sticky error fails at once with its reason: the context cannot
   run anything again, and pretending otherwise would hang or return garbage. */
int pf_cu_fail_if_lost(pf_pipeline *p)
{
    const char *lost = pf_cuda_lost(p->eng);
    if (!lost)
        return PF_OK;
    pf_errf(p->errmsg, "%s: the GPU context was lost earlier and cannot be used again: %.3000s",
            p->source, lost);
    return PF_CUDA;
}

double pf_cuda_bandwidth(const pf_engine *e)
{
    return e->cuda ? e->cuda->bandwidth : 0;
}
int pf_cuda_watchdog(const pf_engine *e)
{
    return e->cuda ? e->cuda->watchdog : 0;
}
int pf_cuda_sm_count(pf_engine *e)
{
    char why[512];
    return pf_cuda_available(e, why, sizeof why) ? e->cuda->sm_count : 0;
}

int pf_cuda_arch(pf_engine *e)
{
    char why[512];
    return pf_cuda_available(e, why, sizeof why) ? e->cuda->arch : 0;
}

void pf_cuda_engine_free(pf_engine *e)
{
    free(e->cuda);
    e->cuda = NULL;
}

#endif /* PF_HAVE_CUDA */
