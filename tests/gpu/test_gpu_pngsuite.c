/* tests/gpu/test_gpu_pngsuite.c: every example pipeline with one input over the whole
 * PngSuite, in file order, through one CUDA pipeline and one CPU pipeline, as
 * `pipefuse run` does: each output in the input file's own format (gray, gray+alpha,
 * RGB, RGBA; 8 or 16 bits), so one pipeline sees a sequence of formats at one size
 * (the sequence that once lost the GPU context mid-batch). Outputs within one step of
 * the CPU's, tables within 1e-4 relative (histograms by cumulative counts, within 1%
 * of the pixels + 1). Exits 77 without a device.
 */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/png.h"
#include "cuda_skip.h"
#include "testutil.h"

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static pf_frame alloc_like(int w, int h, pf_sample s, int ch)
{
    pf_frame f = {0};
    f.width = w, f.height = h, f.sample = s, f.channels = ch;
    f.pitch = pf_frame_pixel_bytes(s, ch) * (size_t)w;
    f.data = calloc(f.pitch, (size_t)h);
    return f;
}

static void run_pipeline(pf_engine *eng, const char *file, char **names, int n_names,
                         const char *dir)
{
    pf_pipeline *cpu = NULL, *gpu = NULL;
    if (pf_pipeline_load_file(eng, file, &cpu) != PF_OK ||
        pf_pipeline_load_file(eng, file, &gpu) != PF_OK) {
        CHECKF(0, "%s: %s", file, pf_engine_errmsg(eng));
        pf_pipeline_destroy(cpu);
        return;
    }
    if (pf_pipeline_input_count(cpu) != 1)
        goto out;
    CHECK(pf_pipeline_set_option(cpu, "backend", "cpu") == PF_OK);
    CHECK(pf_pipeline_set_option(gpu, "backend", "cuda") == PF_OK);
    int n_out = pf_pipeline_output_count(cpu), files = 0;
    for (int k = 0; k < n_names; k++) {
        char path[8192], err[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        pf_frame in;
        if (pf_png_read(path, 0, &in, NULL, err, sizeof err) != PF_OK)
            continue; /* the suite's corrupt files: the CPU tests cover them */
        pf_shape sh = {in.width, in.height};
        int rc = pf_pipeline_plan(cpu, &sh, 1);
        CHECKF(pf_pipeline_plan(gpu, &sh, 1) == rc, "%s %s: plan cpu %d, gpu: %s", file, names[k],
               rc, pf_pipeline_errmsg(gpu));
        pf_frame ref[8] = {0}, got[8] = {0};
        for (int o = 0; o < n_out && o < 8 && rc == PF_OK; o++) {
            pf_output_info oi;
            pf_pipeline_output_info(cpu, o, &oi);
            if (oi.kind != PF_OUTPUT_IMAGE)
                continue;
            int ch = oi.channels ? oi.channels : in.channels;
            pf_sample s = oi.bits == 16 ? PF_U16 : oi.bits == 8 ? PF_U8 : in.sample;
            ref[o] = alloc_like(oi.shape.width, oi.shape.height, s, ch);
            got[o] = alloc_like(oi.shape.width, oi.shape.height, s, ch);
            memset(got[o].data, 0xA5, got[o].pitch * (size_t)got[o].height);
        }
        if (rc == PF_OK) {
            int rc_cpu = pf_pipeline_run(cpu, &in, 1, ref, n_out);
            int rc_gpu = pf_pipeline_run(gpu, &in, 1, got, n_out);
            CHECKF(rc_cpu == PF_OK, "%s %s: cpu: %s", file, names[k], pf_pipeline_errmsg(cpu));
            CHECKF(rc_gpu == PF_OK, "%s %s: gpu: %s", file, names[k], pf_pipeline_errmsg(gpu));
            for (int o = 0; o < n_out && o < 8 && rc_cpu == PF_OK && rc_gpu == PF_OK; o++) {
                pf_table tr, tg;
                if (pf_pipeline_table(cpu, o, &tr) == PF_OK &&
                    pf_pipeline_table(gpu, o, &tg) == PF_OK) {
                    /* Values within 1e-4 relative; or, for a histogram whose pixels
                       moved to a neighbouring bin by one rounding, the same totals and
                       cumulative counts within 1% of the pixels + 1. */
                    double worst = 0, cum = 0, total = 0;
                    int same_total = 1;
                    for (int c = 0; c < tr.cols; c++) {
                        double ca = 0, cb = 0;
                        for (int r = 0; r < tr.rows; r++) {
                            double a = tr.data[r * tr.cols + c], b = tg.data[r * tr.cols + c];
                            double d = fabs(a - b) / (fabs(a) + 1.0);
                            worst = d > worst ? d : worst;
                            ca += a, cb += b;
                            cum = fabs(ca - cb) > cum ? fabs(ca - cb) : cum;
                        }
                        same_total &= ca == cb;
                        total = ca > total ? ca : total;
                    }
                    CHECKF(worst < 1e-4 || (same_total && cum <= 0.01 * total + 1),
                           "%s %s: table %d off by %g (cumulative %g of %g)", file, names[k], o,
                           worst, cum, total);
                } else if (ref[o].data) {
                    double d = pf_test_frame_diff(&ref[o], &got[o], NULL, NULL);
                    CHECKF(d <= 1.0, "%s %s (%s%d): output %d differs by %g steps", file, names[k],
                           in.sample == PF_U8 ? "u8x" : "u16x", in.channels, o, d);
                }
            }
            files++;
        }
        for (int o = 0; o < 8; o++)
            free(ref[o].data), free(got[o].data);
        pf_frame_free(&in);
    }
    printf("%s: %d PngSuite files compared\n", file, files);
    CHECKF(files > 40, "%s: only %d files ran", file, files);
out:
    pf_pipeline_destroy(cpu);
    pf_pipeline_destroy(gpu);
}

int main(void)
{
    if (!pf_test_cuda_device("test_gpu_pngsuite"))
        return PF_TEST_SKIPPED;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/data/pngsuite", PF_SOURCE_DIR);
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open %s", dir);
    if (!d)
        return pf_test_done("test_gpu_pngsuite");
    char *names[256];
    int n_names = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n_names < 256) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".png") == 0)
            names[n_names++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n_names, sizeof *names, cmp_names);
    pf_engine *eng = pf_test_engine();
    static const char *const pipelines[] = {"demo",     "sharpen", "edges",  "thumbnail",
                                            "analysis", "duotone", "article"};
    for (size_t i = 0; i < sizeof pipelines / sizeof *pipelines; i++) {
        char file[4096];
        snprintf(file, sizeof file, "%s/pipelines/%s.json", PF_SOURCE_DIR, pipelines[i]);
        run_pipeline(eng, file, names, n_names, dir);
    }
    for (int i = 0; i < n_names; i++)
        free(names[i]);
    pf_engine_destroy(eng);
    return pf_test_done("test_gpu_pngsuite");
}
