/* tests/lib/gpu_frames.c: see gpu_frames.h. */
#define _GNU_SOURCE /* open_memstream */
#include "gpu_frames.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

pf_frame pf_test_frame_padded(pf_rng *r, int w, int h, pf_sample s, int ch, float lo, float hi)
{
    pf_frame f;
    memset(&f, 0, sizeof f);
    f.width = w, f.height = h, f.sample = s, f.channels = ch;
    f.pitch = pf_frame_pixel_bytes(s, ch) * (size_t)w + 4 * (size_t)(s != PF_F32);
    f.data = malloc(f.pitch * (size_t)h);
    CHECK(f.data != NULL);
    if (!f.data)
        return f;
    memset(f.data, 0xA5, f.pitch * (size_t)h);
    pf_test_frame_random(r, &f); /* floats in [0, 1), then scaled */
    for (int y = 0; s == PF_F32 && y < h; y++) {
        float *row = (float *)((char *)f.data + (size_t)y * f.pitch);
        for (int i = 0; i < w * ch; i++)
            row[i] = lo + (hi - lo) * row[i];
    }
    return f;
}

/* Device copies of n frames (data NULL stays NULL), each CHECKed; copy: their bytes too. */
static void to_device(const pf_frame *f, pf_frame *d, void **mem, int n, int copy)
{
    for (int k = 0; k < n; k++) {
        d[k] = f[k];
        mem[k] = NULL;
        if (!f[k].data)
            continue;
        size_t bytes = f[k].pitch * (size_t)f[k].height;
        CHECK(cudaMalloc(&mem[k], bytes) == cudaSuccess);
        if (copy)
            CHECK(cudaMemcpy(mem[k], f[k].data, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
        d[k].data = mem[k];
    }
}

int pf_test_run_frame(pf_pipeline *p, const pf_frame *in, int n_in, pf_frame *out, int n_out,
                      int device)
{
    if (n_in > 4 || n_out > 4) {
        CHECKF(0, "pf_test_run_frame: %d inputs, %d outputs (at most 4 each)", n_in, n_out);
        return PF_INVALID_ARGUMENT;
    }
    for (int o = 0; o < n_out; o++)
        if (out[o].data)
            memset(out[o].data, 0xA5, out[o].pitch * (size_t)out[o].height);
    if (!device)
        return pf_pipeline_run(p, in, n_in, out, n_out);
    pf_frame din[4], dout[4];
    void *imem[4], *omem[4];
    to_device(in, din, imem, n_in, 1);
    to_device(out, dout, omem, n_out, 1); /* poisoned on the device too */
    int t = -1;
    int rc = pf_pipeline_submit_device(p, din, n_in, dout, n_out, NULL, &t);
    if (rc == PF_OK)
        rc = pf_pipeline_wait(p, t);
    for (int o = 0; rc == PF_OK && o < n_out; o++)
        if (omem[o])
            CHECK(cudaMemcpy(out[o].data, omem[o], out[o].pitch * (size_t)out[o].height,
                             cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int k = 0; k < n_in; k++)
        cudaFree(imem[k]);
    for (int o = 0; o < n_out; o++)
        cudaFree(omem[o]);
    return rc;
}

char *pf_test_plan_text(const pf_pipeline *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    int rc = pf_pipeline_print_plan(p, f);
    fclose(f);
    if (rc != PF_OK) {
        free(text);
        return NULL;
    }
    return text;
}

int pf_test_frames_close(const pf_frame *cpu, const pf_frame *gpu, const char *what,
                         const char *out)
{
    int w = cpu->width, h = cpu->height, n = w * cpu->channels;
    for (int y = 0; y < h; y++)
        for (int i = 0; i < n; i++) {
            double a, b, tol;
            if (cpu->sample == PF_F32) {
                a = ((const float *)((const char *)cpu->data + (size_t)y * cpu->pitch))[i];
                b = ((const float *)((const char *)gpu->data + (size_t)y * gpu->pitch))[i];
                tol = 1e-5 * fmax(fabs(a), 1.0);
                if (isnan(a) && isnan(b))
                    continue;
            } else {
                a = pf_test_frame_sample(cpu, i / cpu->channels, y, i % cpu->channels);
                b = pf_test_frame_sample(gpu, i / cpu->channels, y, i % cpu->channels);
                tol = 1;
            }
            if (!(fabs(a - b) <= tol)) {
                CHECKF(0, "%s: output %s (%d, %d) channel %d: gpu %.9g cpu %.9g", what, out,
                       i / cpu->channels, y, i % cpu->channels, b, a);
                return 1;
            }
        }
    return 0;
}
