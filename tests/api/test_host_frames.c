/* tests/api/test_host_frames.c: host frames on the GPU against the CPU executor. Three
 * kinds of host memory (pageable, engine-allocated pinned frames, application memory
 * registered with the engine), mixed between inputs and outputs, padded pitches, 3
 * frames in flight, completion by wait, poll and wait with a timeout; every output
 * within one step of the CPU's. Pinned frames must not make the frame loop allocate.
 * Exits 77 without a device.
 */
#define _GNU_SOURCE
#include <math.h>
#include <string.h>
#include <time.h>

#include "pipefuse/png.h"
#include "testutil.h"

#define N_FRAMES 3 /* distinct inputs, all in flight at once */

typedef enum mem_kind { MEM_PAGEABLE, MEM_PINNED, MEM_REGISTERED, MEM_KINDS } mem_kind;
static const char *const mem_names[] = {"pageable", "pinned", "registered"};

static pf_engine *eng;

/* A w x h RGBA8 frame of the given kind; pageable and registered ones get a pitch
   padded by 64 bytes, so row copies must honour it. */
typedef struct frame_mem {
    pf_frame f;
    mem_kind kind;
    void *base; /* registered: the malloc'd block */
} frame_mem;

static void mem_make(frame_mem *m, mem_kind kind, int w, int h)
{
    memset(m, 0, sizeof *m);
    m->kind = kind;
    if (kind == MEM_PINNED) {
        if (pf_frame_alloc_host(eng, w, h, PF_U8, 4, &m->f) != PF_OK) {
            fprintf(stderr, "pf_frame_alloc_host: %s\n", pf_engine_errmsg(eng));
            exit(1);
        }
    } else {
        size_t pitch = (size_t)w * 4 + 64, bytes = pitch * (size_t)h;
        if (posix_memalign(&m->base, 4096, bytes) != 0)
            exit(1);
        m->f = (pf_frame){m->base, w, h, pitch, PF_U8, 4};
        if (kind == MEM_REGISTERED && pf_engine_register_host(eng, m->base, bytes) != PF_OK) {
            fprintf(stderr, "pf_engine_register_host: %s\n", pf_engine_errmsg(eng));
            exit(1);
        }
    }
    memset(m->f.data, 0xa5, m->f.pitch * (size_t)h); /* poison */
}

static void mem_free(frame_mem *m)
{
    if (m->kind == MEM_PINNED) {
        pf_frame_free_host(eng, &m->f);
        return;
    }
    if (m->kind == MEM_REGISTERED)
        CHECK(pf_engine_unregister_host(eng, m->base) == PF_OK);
    free(m->base);
}

static int max_diff(const pf_frame *a, const pf_frame *b)
{
    int d = 0;
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width * 4; x++) {
            int v = abs(((const unsigned char *)a->data)[(size_t)y * a->pitch + (size_t)x] -
                        ((const unsigned char *)b->data)[(size_t)y * b->pitch + (size_t)x]);
            d = v > d ? v : d;
        }
    return d;
}

static pf_pipeline *load(const char *file, const char *json, const char *backend)
{
    return file ? pf_test_load_file(eng, file, backend)
                : pf_test_load_string(eng, json, "invert", backend);
}

/* One pipeline, one size: CPU references, then every pairing of input and output
   memory kinds on the GPU with N_FRAMES in flight. */
static void run_case(const char *file, const char *json, int w, int h)
{
    const char *name = file ? strrchr(file, '/') + 1 : "invert";
    pf_pipeline *cpu = load(file, json, "cpu"), *gpu = load(file, json, "cuda");
    pf_rng r;
    pf_rng_seed(&r, (uint64_t)w * 7919 + (uint64_t)h);
    pf_frame src[N_FRAMES], ref[N_FRAMES];
    for (int i = 0; i < N_FRAMES; i++) {
        if (pf_frame_alloc(&src[i], w, h, PF_U8, 4) != PF_OK ||
            pf_frame_alloc(&ref[i], w, h, PF_U8, 4) != PF_OK)
            exit(1);
        pf_test_frame_random(&r, &src[i]);
        CHECK(pf_pipeline_run(cpu, &src[i], 1, &ref[i], 1) == PF_OK);
    }
    for (int ik = 0; ik < MEM_KINDS; ik++)
        for (int ok = 0; ok < MEM_KINDS; ok++) {
            frame_mem in[N_FRAMES], out[N_FRAMES];
            for (int i = 0; i < N_FRAMES; i++) {
                mem_make(&in[i], (mem_kind)ik, w, h);
                mem_make(&out[i], (mem_kind)ok, w, h);
                for (int y = 0; y < h; y++)
                    memcpy((char *)in[i].f.data + (size_t)y * in[i].f.pitch,
                           (char *)src[i].data + (size_t)y * src[i].pitch, (size_t)w * 4);
            }
            for (int round = 0; round < 3; round++) {
                int t[N_FRAMES];
                for (int i = 0; i < N_FRAMES; i++) {
                    memset(out[i].f.data, 0xa5, out[i].f.pitch * (size_t)h);
                    int rc = pf_pipeline_submit(gpu, &in[i].f, 1, &out[i].f, 1, &t[i]);
                    CHECKF(rc == PF_OK, "%s: submit: %s", name, pf_pipeline_errmsg(gpu));
                    if (rc != PF_OK)
                        goto next;
                }
                for (int i = 0; i < N_FRAMES; i++) {
                    int rc;
                    if (i == 0) {
                        rc = pf_pipeline_wait(gpu, t[i]);
                    } else if (i == 1) {
                        while ((rc = pf_pipeline_poll(gpu, t[i])) == PF_NOT_READY)
                            ;
                    } else {
                        while ((rc = pf_pipeline_wait_timeout(gpu, t[i], 1)) == PF_NOT_READY)
                            ;
                    }
                    CHECKF(rc == PF_OK, "%s: completion: %s", name, pf_pipeline_errmsg(gpu));
                    int d = max_diff(&out[i].f, &ref[i]);
                    CHECKF(d <= 1, "%s %dx%d, %s in, %s out, frame %d: %d steps from the CPU", name,
                           w, h, mem_names[ik], mem_names[ok], i, d);
                }
                pf_stats st = {.size = sizeof st};
                CHECK(pf_pipeline_stats(gpu, &st) == PF_OK);
                if (round > 0)
                    CHECKF(st.allocations_last_frame == 0, "%s: the frame loop allocated", name);
            }
        next:
            for (int i = 0; i < N_FRAMES; i++) {
                mem_free(&in[i]);
                mem_free(&out[i]);
            }
        }
    printf("%s %dx%d: pageable, pinned and registered frames match the CPU\n", name, w, h);
    for (int i = 0; i < N_FRAMES; i++) {
        pf_frame_free(&src[i]);
        pf_frame_free(&ref[i]);
    }
    pf_pipeline_destroy(cpu);
    pf_pipeline_destroy(gpu);
}

/* Frames in flight when an option change drops the plan are completed first: their
   waits return PF_OK with the outputs delivered, never stale buffers. */
static void test_drain(const char *json)
{
    pf_pipeline *cpu = load(NULL, json, "cpu"), *gpu = load(NULL, json, "cuda");
    pf_rng r;
    pf_rng_seed(&r, 11);
    pf_frame in[2], out[2], ref[2];
    int t[2];
    for (int i = 0; i < 2; i++) {
        if (pf_frame_alloc(&in[i], 640, 360, PF_U8, 4) != PF_OK ||
            pf_frame_alloc(&out[i], 640, 360, PF_U8, 4) != PF_OK ||
            pf_frame_alloc(&ref[i], 640, 360, PF_U8, 4) != PF_OK)
            exit(1);
        pf_test_frame_random(&r, &in[i]);
        memset(out[i].data, 0xa5, out[i].pitch * 360);
        CHECK(pf_pipeline_run(cpu, &in[i], 1, &ref[i], 1) == PF_OK);
        CHECK(pf_pipeline_submit(gpu, &in[i], 1, &out[i], 1, &t[i]) == PF_OK);
    }
    CHECK(pf_pipeline_set_option(gpu, "fusion", "false") == PF_OK); /* drops the plan */
    for (int i = 0; i < 2; i++) {
        CHECK(pf_pipeline_wait(gpu, t[i]) == PF_OK);
        CHECKF(max_diff(&out[i], &ref[i]) <= 1, "frame %d in flight across a re-plan", i);
        pf_frame_free(&in[i]), pf_frame_free(&out[i]), pf_frame_free(&ref[i]);
    }
    CHECK(pf_pipeline_wait(gpu, t[1] + 1) == PF_INVALID_ARGUMENT);
    pf_pipeline_destroy(cpu);
    pf_pipeline_destroy(gpu);
}

/* The registry's own rules: overlaps refused, unknown pointers refused. */
static void test_registry(void)
{
    char *block = malloc(1 << 20);
    CHECK(pf_engine_register_host(eng, block, 1 << 20) == PF_OK);
    CHECK(pf_engine_register_host(eng, block + 4096, 4096) == PF_INVALID_ARGUMENT);
    CHECK(pf_engine_unregister_host(eng, block + 1) == PF_INVALID_ARGUMENT);
    CHECK(pf_engine_unregister_host(eng, block) == PF_OK);
    CHECK(pf_engine_unregister_host(eng, block) == PF_INVALID_ARGUMENT);
    free(block);
    pf_frame f;
    CHECK(pf_frame_alloc_host(eng, 0, 10, PF_U8, 4, &f) == PF_INVALID_ARGUMENT);
    CHECK(f.data == NULL);
    CHECK(pf_frame_alloc_host(eng, 64, 32, PF_U16, 3, &f) == PF_OK);
    CHECK(f.pitch == 64 * 6 && f.data != NULL);
    pf_frame_free_host(eng, &f);
    CHECK(f.data == NULL);
    pf_frame_free_host(eng, &f); /* an empty frame: nothing */
}

int main(void)
{
    eng = pf_test_engine();
    static const char invert[] = "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": "
                                 "[{\"id\": \"inv\", \"op\": \"invert\"}], "
                                 "\"outputs\": {\"out\": \"inv\"}}";
    pf_pipeline *probe = load(NULL, invert, "cuda");
    pf_shape s = {16, 16};
    int rc = pf_pipeline_plan(probe, &s, 1);
    pf_pipeline_destroy(probe);
    test_registry(); /* works with or without a device */
    if (rc == PF_NO_DEVICE) {
        printf("SKIPPED: no CUDA device\n");
        pf_engine_destroy(eng);
        return pf_test_failures ? 1 : 77;
    }
    test_drain(invert);
    run_case(NULL, invert, 1920, 1080);
    run_case(NULL, invert, 333, 217);
    run_case(PF_SOURCE_DIR "/pipelines/demo.json", NULL, 1920, 1080);
    run_case(PF_SOURCE_DIR "/pipelines/demo.json", NULL, 257, 131);
    pf_engine_destroy(eng);
    return pf_test_done("test_host_frames");
}
