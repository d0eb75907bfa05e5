/* tests/api/test_api_ownership.c: what a call keeps and whose it is, against what
 * pipefuse.h promises, without a GPU:
 * - host memory belongs to the engine that allocated or registered it: another engine's
 *   pf_frame_free_host or pf_engine_unregister_host on it is refused, naming the range,
 *   and changes nothing (both used to free or unregister another engine's memory);
 * - engines registering exactly the same range share it (each unregisters its own, in
 *   any order, the destruction of one included); other overlaps are refused, naming both
 *   ranges; an engine cannot register its own range twice, nor unregister a frame it
 *   allocated, nor free memory it registered;
 * - a pipeline takes another engine's pinned frame (as pageable) and gives the same frame;
 * - pf_pipeline_table returns the last completed frame's table, with the params it ran
 *   with, across changes that plan again (a histogram's bins, an option, a new input
 *   size) and a frame that fails, until a frame completes (the table used to vanish with
 *   the plan until the next frame);
 * - engines on several threads registering the same range and allocating frames at once
 *   (for ThreadSanitizer): every call succeeds and nothing is left registered.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

/* The engine's message names ptr (as %p writes it) and has every one of the words. */
static void expect_engine_msg(pf_engine *e, const void *ptr, const char *w1, const char *w2,
                              int line)
{
    const char *msg = pf_engine_errmsg(e);
    char at[64];
    snprintf(at, sizeof at, "%p", ptr);
    const char *words[] = {at, w1, w2};
    for (int k = 0; k < 3; k++)
        if (words[k] && !strstr(msg, words[k])) {
            fprintf(stderr, "%s:%d: engine message lacks '%s': \"%s\"\n", __FILE__, line, words[k],
                    msg);
            pf_test_failures++;
        }
}
#define EXPECT_MSG(e, ptr, w1, w2) expect_engine_msg((e), (ptr), (w1), (w2), __LINE__)

static void test_frames_of_another_engine(pf_engine *e1, pf_engine *e2)
{
    pf_frame f, g;
    CHECK(pf_frame_alloc_host(e1, 32, 8, PF_U8, 4, &f) == PF_OK);
    void *data = f.data;

    /* e2 does not free e1's frame: it stays, untouched, and e1 still owns it */
    memset(data, 7, 32 * 8 * 4);
    pf_frame_free_host(e2, &f);
    CHECK(f.data == data && f.width == 32 && f.height == 8);
    EXPECT_MSG(e2, data, "another engine", "not freed");
    CHECK(((unsigned char *)data)[32 * 8 * 4 - 1] == 7); /* still ours to read */
    /* nor does an engine given as NULL */
    pf_frame_free_host(NULL, &f);
    CHECK(f.data == data);
    /* e1 neither unregisters its own frame (that is pf_frame_free_host's), nor does e2 */
    CHECK(pf_engine_unregister_host(e1, data) == PF_INVALID_ARGUMENT);
    EXPECT_MSG(e1, data, "pf_frame_alloc_host", "not unregistered");
    CHECK(pf_engine_unregister_host(e2, data) == PF_INVALID_ARGUMENT);
    /* nobody registers memory inside it */
    CHECK(pf_engine_register_host(e2, data, 256) == PF_INVALID_ARGUMENT);
    EXPECT_MSG(e2, data, "overlaps", "allocated through another engine");
    CHECK(pf_engine_register_host(e1, data, 256) == PF_INVALID_ARGUMENT);
    EXPECT_MSG(e1, data, "overlaps", "this engine");

    /* a pipeline of e2 takes e1's frame and gives what it gives from malloc'd memory */
    pf_pipeline *p = pf_test_load_string(e2,
                                         "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": ["
                                         "{\"id\": \"i\", \"op\": \"invert\"}],"
                                         "\"outputs\": {\"out\": \"i\"}}",
                                         "invert", "cpu");
    CHECK(pf_frame_alloc_host(e1, 32, 8, PF_U8, 4, &g) == PF_OK);
    pf_frame ref;
    CHECK(pf_frame_alloc(&ref, 32, 8, PF_U8, 4) == PF_OK);
    pf_rng r;
    pf_rng_seed(&r, 3);
    pf_test_frame_random(&r, &f);
    CHECK(pf_pipeline_run(p, &f, 1, &g, 1) == PF_OK);
    pf_frame in2;
    CHECK(pf_frame_alloc(&in2, 32, 8, PF_U8, 4) == PF_OK);
    for (int y = 0; y < 8; y++)
        memcpy((char *)in2.data + y * in2.pitch, (char *)f.data + y * f.pitch, 32 * 4);
    CHECK(pf_pipeline_run(p, &in2, 1, &ref, 1) == PF_OK);
    CHECK(pf_test_frame_diff(&g, &ref, NULL, NULL) == 0);
    pf_frame_free(&in2);
    pf_frame_free(&ref);
    pf_pipeline_destroy(p);

    pf_frame_free_host(e1, &g);
    pf_frame_free_host(e1, &f);
    CHECK(!f.data && !f.width && !g.data);
    /* once freed, it is nobody's */
    pf_frame h = {data, 32, 8, 128, PF_U8, 4};
    pf_frame_free_host(e1, &h);
    CHECK(h.data == data);
    EXPECT_MSG(e1, data, "not a frame from pf_frame_alloc_host", NULL);
}

static void test_ranges_of_another_engine(pf_engine *e1, pf_engine *e2)
{
    size_t size = 1 << 20;
    char *block = NULL;
    CHECK(posix_memalign((void **)&block, 4096, size) == 0);
    if (!block)
        return;

    /* e2 does not unregister e1's range */
    CHECK(pf_engine_register_host(e1, block, size) == PF_OK);
    CHECK(pf_engine_unregister_host(e2, block) == PF_INVALID_ARGUMENT);
    EXPECT_MSG(e2, block, "registered through another engine", "not unregistered");
    /* nor frees it as a frame */
    pf_frame f = {block, 64, 64, 256, PF_U8, 4};
    pf_frame_free_host(e2, &f);
    CHECK(f.data == block);
    pf_frame_free_host(e1, &f); /* e1 registered it: not a frame to free */
    CHECK(f.data == block);
    EXPECT_MSG(e1, block, "registered memory", "not freed");
    /* an engine registers a range once; another may overlap it only exactly */
    CHECK(pf_engine_register_host(e1, block, size) == PF_INVALID_ARGUMENT);
    EXPECT_MSG(e1, block, "overlaps", "this engine");
    CHECK(pf_engine_register_host(e2, block + 4096, 4096) == PF_INVALID_ARGUMENT);
    EXPECT_MSG(e2, block + 4096, "another engine", "exactly");
    CHECK(strstr(pf_engine_errmsg(e2), "1048576")); /* e1's range, named */
    CHECK(pf_engine_register_host(e2, block, size / 2) == PF_INVALID_ARGUMENT);

    /* the same range through two engines: shared, each undoes its own */
    CHECK(pf_engine_register_host(e2, block, size) == PF_OK);
    CHECK(pf_engine_register_host(e2, block, size) == PF_INVALID_ARGUMENT);
    CHECK(pf_engine_unregister_host(e1, block) == PF_OK);
    CHECK(pf_engine_unregister_host(e1, block) == PF_INVALID_ARGUMENT);
    EXPECT_MSG(e1, block, "another engine", NULL); /* e2's is still there */
    CHECK(pf_engine_register_host(e1, block, size) == PF_OK);
    CHECK(pf_engine_unregister_host(e2, block) == PF_OK);
    CHECK(pf_engine_unregister_host(e1, block) == PF_OK);
    CHECK(pf_engine_unregister_host(e1, block) == PF_INVALID_ARGUMENT);
    EXPECT_MSG(e1, block, "not the start of a registered range", NULL);

    /* an engine destroyed with a shared range leaves the other's */
    pf_engine *e3 = pf_test_engine();
    CHECK(pf_engine_register_host(e3, block, size) == PF_OK);
    CHECK(pf_engine_register_host(e2, block, size) == PF_OK);
    pf_engine_destroy(e3);
    CHECK(pf_engine_register_host(e1, block + 4096, 4096) == PF_INVALID_ARGUMENT);
    CHECK(pf_engine_unregister_host(e2, block) == PF_OK);
    CHECK(pf_engine_register_host(e1, block + 4096, 4096) == PF_OK); /* nobody's now */
    CHECK(pf_engine_unregister_host(e1, block + 4096) == PF_OK);
    free(block);
}

typedef struct racer {
    pf_engine *e;
    char *block;
    size_t size;
    int failures;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    for (int k = 0; k < 200; k++) {
        pf_frame f;
        r->failures += pf_engine_register_host(r->e, r->block, r->size) != PF_OK;
        r->failures += pf_frame_alloc_host(r->e, 16, 16, PF_U8, 4, &f) != PF_OK;
        r->failures += pf_engine_unregister_host(r->e, r->block) != PF_OK;
        pf_frame_free_host(r->e, &f);
        r->failures += f.data != NULL;
    }
    return NULL;
}

static void test_shared_ranges_threads(void)
{
    enum { N = 4 };
    size_t size = 1 << 16;
    char *block = NULL;
    CHECK(posix_memalign((void **)&block, 4096, size) == 0);
    if (!block)
        return;
    racer r[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        r[i] = (racer){pf_test_engine(), block, size, 0};
        CHECK(pthread_create(&t[i], NULL, race, &r[i]) == 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        CHECKF(r[i].failures == 0, "thread %d: %d calls failed", i, r[i].failures);
    }
    /* nobody's now: any part of it may be registered */
    CHECK(pf_engine_register_host(r[0].e, block + 4096, 4096) == PF_OK);
    for (int i = 0; i < N; i++)
        pf_engine_destroy(r[i].e);
    free(block);
}

/* The table of output 0, copied; rows 0 when there is none. */
typedef struct table_copy {
    int rc, rows, cols, bins;
    double data[1024 * 4];
} table_copy;

static void read_table(pf_pipeline *p, table_copy *c)
{
    pf_table t;
    memset(c, 0, sizeof *c);
    c->rc = pf_pipeline_table(p, 0, &t);
    if (c->rc != PF_OK)
        return;
    c->rows = t.rows;
    c->cols = t.cols;
    memcpy(&c->bins, t.params, sizeof c->bins); /* pf_histogram_params: int bins */
    if ((size_t)t.rows * (size_t)t.cols <= sizeof c->data / sizeof c->data[0])
        memcpy(c->data, t.data, sizeof(double) * (size_t)t.rows * (size_t)t.cols);
}

static int same_table(const table_copy *a, const table_copy *b)
{
    return a->rc == PF_OK && b->rc == PF_OK && a->rows == b->rows && a->cols == b->cols &&
           a->bins == b->bins &&
           memcmp(a->data, b->data, sizeof(double) * (size_t)a->rows * (size_t)a->cols) == 0;
}

static void test_tables_kept(pf_engine *e)
{
    pf_pipeline *p = pf_test_load_string(e,
                                         "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": ["
                                         "{\"id\": \"c\", \"op\": \"crop\", \"params\": "
                                         "{\"width\": 16, \"height\": 8}},"
                                         "{\"id\": \"h\", \"op\": \"histogram\", \"inputs\": "
                                         "[\"c\"], \"params\": {\"bins\": 16}}],"
                                         "\"outputs\": {\"h\": \"h\"}}",
                                         "histogram", "cpu");
    table_copy *first = malloc(sizeof *first), *now = malloc(sizeof *now);
    pf_frame in, big;
    CHECK(pf_frame_alloc(&in, 32, 16, PF_U8, 4) == PF_OK);
    CHECK(pf_frame_alloc(&big, 48, 24, PF_U8, 4) == PF_OK);
    pf_rng r;
    pf_rng_seed(&r, 9);
    pf_test_frame_random(&r, &in);
    pf_test_frame_random(&r, &big);

    /* none before a frame, a plan alone included */
    pf_shape s = {32, 16};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    read_table(p, now);
    CHECK(now->rc == PF_INVALID_ARGUMENT);
    CHECK(strstr(pf_pipeline_errmsg(p), "before a frame"));

    CHECK(pf_pipeline_run(p, &in, 1, NULL, 0) == PF_OK);
    read_table(p, first);
    CHECK(first->rc == PF_OK && first->rows == 16 && first->cols == 4 && first->bins == 16);

    /* a parameter that plans again: the table of the last frame stays, with its params */
    CHECK(pf_pipeline_set_param(p, "h.bins", "64") == PF_OK);
    CHECK(pf_pipeline_unit_count(p) == 0); /* the plan went */
    read_table(p, now);
    CHECKF(same_table(first, now), "rc %d, %d rows, bins %d", now->rc, now->rows, now->bins);
    /* so does a plan for the new params, and options that plan again */
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    read_table(p, now);
    CHECK(same_table(first, now));
    CHECK(pf_pipeline_set_option(p, "fusion", "false") == PF_OK);
    CHECK(pf_pipeline_set_option(p, "max_memory", "100000000") == PF_OK);
    read_table(p, now);
    CHECK(same_table(first, now));
    /* and a frame that fails (the crop leaves the image) */
    CHECK(pf_pipeline_set_param(p, "c.x", "100") == PF_OK);
    CHECK(pf_pipeline_run(p, &in, 1, NULL, 0) == PF_SHAPE);
    read_table(p, now);
    CHECK(same_table(first, now));
    CHECK(pf_pipeline_set_param(p, "c.x", "0") == PF_OK);

    /* the next frame completed: its table, with its params */
    CHECK(pf_pipeline_run(p, &in, 1, NULL, 0) == PF_OK);
    read_table(p, now);
    CHECK(now->rc == PF_OK && now->rows == 64 && now->bins == 64);
    double total = 0;
    for (int k = 0; k < now->rows; k++)
        total += now->data[k * 4];
    CHECKF(total == 16 * 8, "%g pixels counted", total);

    /* a new input size plans again: kept until the frame of that size completes; the
       frame that failed on the new plan, too */
    memcpy(first, now, sizeof *first);
    CHECK(pf_pipeline_set_param(p, "c.width", "40") == PF_OK);
    CHECK(pf_pipeline_run(p, &in, 1, NULL, 0) == PF_SHAPE); /* 40 > 32 */
    read_table(p, now);
    CHECK(same_table(first, now));
    CHECK(pf_pipeline_run(p, &big, 1, NULL, 0) == PF_OK);
    read_table(p, now);
    total = 0;
    for (int k = 0; k < now->rows; k++)
        total += now->data[k * 4];
    CHECKF(now->rc == PF_OK && total == 40 * 8, "rc %d, %g pixels counted", now->rc, total);

    /* submit and wait: the same */
    int ticket;
    CHECK(pf_pipeline_set_param(p, "h.bins", "8") == PF_OK);
    memcpy(first, now, sizeof *first);
    read_table(p, now);
    CHECK(same_table(first, now));
    CHECK(pf_pipeline_submit(p, &big, 1, NULL, 0, &ticket) == PF_OK);
    CHECK(pf_pipeline_wait(p, ticket) == PF_OK);
    read_table(p, now);
    CHECK(now->rc == PF_OK && now->rows == 8 && now->bins == 8);

    pf_frame_free(&in);
    pf_frame_free(&big);
    free(first);
    free(now);
    pf_pipeline_destroy(p);
}

int main(void)
{
    pf_engine *e1 = pf_test_engine(), *e2 = pf_test_engine();
    test_frames_of_another_engine(e1, e2);
    test_ranges_of_another_engine(e1, e2);
    test_tables_kept(e1);
    test_shared_ranges_threads();
    pf_engine_destroy(e2);
    pf_engine_destroy(e1);
    return pf_test_done("test_api_ownership");
}
