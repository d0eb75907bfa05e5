/* tests/fuzz/fuzz_util.c: the engine and the frame runner of the fuzz targets. */
#include "fuzz_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

/* Frames the fuzzers run: the sum of every unit's pixels stays under this, so one input
   takes microseconds, not seconds. Bigger plans are still built (that is fuzzed), not
   run. */
#define FZ_MAX_RUN_PIXELS (1 << 14)

/* An allocation larger than this fails (returns NULL) instead of stopping the fuzzer,
   so that a pipeline asking for a huge intermediate (resize to 200000x200000) tests the
   engine's out-of-memory path. libFuzzer's own malloc limit (-malloc_limit_mb, by
   default -rss_limit_mb, 2048) only sees allocations that succeeded. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=64";
}

void fz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    fprintf(stderr, "%s:%d: fuzz check failed: %s: ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

pf_engine *fz_engine(void)
{
    static pf_engine *e;
    if (e)
        return e;
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.threads = 1;
    cfg.log = pf_test_quiet_log;
    return e = pf_test_engine_with(&cfg);
}

uint32_t fz_hash(const void *data, size_t size)
{
    const uint8_t *b = data;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static pf_sample sample_of_bits(int bits, pf_sample like)
{
    return bits == 8 ? PF_U8 : bits == 16 ? PF_U16 : bits == 32 ? PF_F32 : like;
}

/* Output frames for the planned shapes (tables: none). */
static int alloc_outputs(pf_pipeline *p, pf_frame *out, int n_out, pf_sample sample, int channels)
{
    for (int i = 0; i < n_out; i++) {
        pf_output_info info;
        FZ_ASSERT(pf_pipeline_output_info(p, i, &info) == PF_OK, "output %d of %d", i, n_out);
        if (info.kind != PF_OUTPUT_IMAGE)
            continue;
        FZ_ASSERT(info.shape.width > 0 && info.shape.height > 0, "output %s is %dx%d", info.name,
                  info.shape.width, info.shape.height);
        int rc = pf_frame_alloc(&out[i], info.shape.width, info.shape.height,
                                sample_of_bits(info.bits, sample),
                                info.channels ? info.channels : channels);
        if (rc != PF_OK)
            return rc;
    }
    return PF_OK;
}

static void free_frames(pf_frame *f, int n)
{
    for (int i = 0; i < n; i++)
        pf_frame_free(&f[i]);
}

/* Runs one frame; tables copied into *tables (malloc'd, *n_doubles long). */
static int run_once(pf_pipeline *p, const pf_frame *in, int n_in, pf_frame *out, int n_out,
                    double **tables, size_t *n_doubles)
{
    *tables = NULL;
    *n_doubles = 0;
    int rc = pf_pipeline_run(p, in, n_in, out, n_out);
    if (rc != PF_OK) {
        FZ_ASSERT(pf_pipeline_errmsg(p)[0] != 0, "run failed with %s and no message",
                  pf_status_name(rc));
        return rc;
    }
    for (int i = 0; i < n_out; i++) {
        pf_output_info info;
        pf_table t;
        if (pf_pipeline_output_info(p, i, &info) != PF_OK || info.kind != PF_OUTPUT_TABLE)
            continue;
        FZ_ASSERT(pf_pipeline_table(p, i, &t) == PF_OK, "table %s: %s", info.name,
                  pf_pipeline_errmsg(p));
        FZ_ASSERT(t.rows >= 0 && t.cols >= 0 && (t.data || t.rows * t.cols == 0),
                  "table %s: %d x %d", info.name, t.rows, t.cols);
        size_t n = (size_t)t.rows * (size_t)t.cols;
        double *grown = realloc(*tables, sizeof(double) * (*n_doubles + n + 1));
        FZ_ASSERT(grown, "out of memory for %zu table values", *n_doubles + n);
        *tables = grown;
        if (n)
            memcpy(*tables + *n_doubles, t.data, sizeof(double) * n);
        *n_doubles += n;
        for (int c = 0; c < t.cols; c++)
            FZ_ASSERT(t.columns && t.columns[c], "table %s: column %d has no name", info.name, c);
    }
    return PF_OK;
}

static int same_frame(const pf_frame *a, const pf_frame *b)
{
    size_t row = (size_t)a->width * pf_frame_pixel_bytes(a->sample, a->channels);
    for (int y = 0; y < a->height; y++)
        if (memcmp((const char *)a->data + (size_t)y * a->pitch,
                   (const char *)b->data + (size_t)y * b->pitch, row) != 0)
            return 0;
    return 1;
}

int fz_run_frame(pf_pipeline *p, int w, int h, pf_sample sample, int channels, uint32_t fill)
{
    enum { MAX_IO = 64 };
    pf_shape shapes[PF_MAX_INPUTS];
    pf_frame in[PF_MAX_INPUTS], out[2][MAX_IO];
    int n_in = pf_pipeline_input_count(p), n_out = pf_pipeline_output_count(p);
    if (n_in < 1 || n_in > PF_MAX_INPUTS || n_out > MAX_IO)
        return PF_UNSUPPORTED;
    FZ_ASSERT(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK &&
                  pf_pipeline_set_option(p, "fusion", "true") == PF_OK,
              "%s", pf_pipeline_errmsg(p));
    for (int i = 0; i < n_in; i++)
        shapes[i] = (pf_shape){w, h};
    int rc = pf_pipeline_plan(p, shapes, n_in);
    if (rc != PF_OK) {
        FZ_ASSERT(pf_pipeline_errmsg(p)[0] != 0, "plan failed with %s and no message",
                  pf_status_name(rc));
        return rc;
    }
    unsigned long long pixels = 0;
    for (int i = 0, n = pf_pipeline_unit_count(p); i < n; i++) {
        pf_unit_info u;
        FZ_ASSERT(pf_pipeline_unit(p, i, &u) == PF_OK, "unit %d of %d", i, n);
        pixels += (unsigned long long)u.shape.width * (unsigned long long)u.shape.height;
    }
    if (pixels > FZ_MAX_RUN_PIXELS)
        return PF_OK;

    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    double *tables[2] = {NULL, NULL};
    size_t n_tables[2] = {0, 0};
    uint32_t s = fill | 1;
    for (int i = 0; i < n_in && rc == PF_OK; i++) {
        rc = pf_frame_alloc(&in[i], w, h, sample, channels);
        size_t row = (size_t)w * pf_frame_pixel_bytes(sample, channels);
        for (int y = 0; rc == PF_OK && y < h; y++) {
            uint8_t *b = (uint8_t *)in[i].data + (size_t)y * in[i].pitch;
            for (size_t k = 0; k < row; k += 4) {
                s ^= s << 13, s ^= s >> 17, s ^= s << 5;
                /* floats in [-1, 3): no NaN or infinity, whose bits a comparison
                   cannot judge */
                if (sample == PF_F32)
                    *(float *)(b + k) = (float)((int)(s % 4000u) - 1000) / 1000.0f;
                else
                    memcpy(b + k, &s, row - k < 4 ? row - k : 4);
            }
        }
    }
    /* outputs poisoned differently for the two runs, so an unwritten pixel differs */
    for (int r = 0; r < 2 && rc == PF_OK; r++) {
        rc = alloc_outputs(p, out[r], n_out, sample, channels);
        for (int i = 0; rc == PF_OK && i < n_out; i++)
            if (out[r][i].data)
                memset(out[r][i].data, r ? 0x5a : 0xa5, out[r][i].pitch * (size_t)out[r][i].height);
    }
    if (rc == PF_OK) {
        /* fused, then each stage on its own: bit-exact on the CPU */
        int rc0 = run_once(p, in, n_in, out[0], n_out, &tables[0], &n_tables[0]);
        FZ_ASSERT(pf_pipeline_set_option(p, "fusion", "false") == PF_OK, "%s",
                  pf_pipeline_errmsg(p));
        int rc1 = run_once(p, in, n_in, out[1], n_out, &tables[1], &n_tables[1]);
        /* the unfused plan holds more buffers: it may be the one out of memory */
        if (rc0 != PF_NO_MEMORY && rc1 != PF_NO_MEMORY) {
            FZ_ASSERT(rc0 == rc1, "the frame ran fused with %s, unfused with %s",
                      pf_status_name(rc0), pf_status_name(rc1));
            for (int i = 0; rc0 == PF_OK && i < n_out; i++)
                FZ_ASSERT(!out[0][i].data || same_frame(&out[0][i], &out[1][i]),
                          "output %d differs between the fused and the unfused run", i);
            FZ_ASSERT(rc0 != PF_OK || (n_tables[0] == n_tables[1] &&
                                       (!n_tables[0] || memcmp(tables[0], tables[1],
                                                               sizeof(double) * n_tables[0]) == 0)),
                      "tables differ between the fused and the unfused run");
        }
        rc = rc0;
    }
    free(tables[0]);
    free(tables[1]);
    free_frames(in, n_in);
    free_frames(out[0], n_out);
    free_frames(out[1], n_out);
    return rc;
}
