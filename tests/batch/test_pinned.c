/* tests/batch/test_pinned.c: the batch's pool of page-locked frames (cli/batch/pinned.c).
 * Without a device the engines record the ranges and lock nothing, so the pool's own
 * rules are checked on any machine: frames of the asked size and pitch, blocks reused
 * best fit and never handed out twice, a free block far larger than the frame left for
 * a frame that needs it, the byte limit (free blocks dropped first, then pageable
 * memory for the caller), every engine's registration of each block (a frame is one
 * that pf_engine_register_host recorded: registering the same range again is refused),
 * and threads taking and giving back frames at once. */
#include <pthread.h>

#include "../../cli/batch/pinned.h"
#include "testutil.h"

#define MIB (1u << 20)

static pf_engine *engine(void)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.threads = 1;
    cfg.plugin_path = "";
    pf_engine *e = NULL;
    if (pf_engine_create(&cfg, &e) != PF_OK) {
        fprintf(stderr, "cannot create an engine: %s\n", e ? pf_engine_errmsg(e) : "?");
        exit(1);
    }
    return e;
}

static void sizes_and_reuse(pf_engine *e)
{
    pinned_pool *p = NULL;
    CHECK(pinned_pool_create(&e, 1, 0, &p) == PF_OK);
    pf_frame a, b, c;
    CHECK(pinned_frame(p, 1000, 700, PF_U8, 3, &a) == PF_OK);
    CHECK(a.width == 1000 && a.height == 700 && a.pitch == 3000 && a.sample == PF_U8 &&
          a.channels == 3 && a.data);
    CHECK(pinned_owns(p, &a));
    memset(a.data, 0x5a, a.pitch * (size_t)a.height); /* the whole frame is writable */
    CHECK(pinned_frame(p, 1000, 700, PF_U8, 3, &b) == PF_OK);
    CHECK(b.data != a.data); /* a busy block is never handed out again */
    void *first = a.data;
    pinned_release(p, &a);
    CHECK(a.data == NULL && !pinned_owns(p, &a));
    /* a smaller frame takes the freed block (within twice its size) */
    CHECK(pinned_frame(p, 900, 700, PF_U8, 3, &c) == PF_OK);
    CHECK(c.data == first);
    /* a frame under half the free block's size gets a block of its own */
    pinned_release(p, &c);
    pf_frame small;
    CHECK(pinned_frame(p, 100, 100, PF_U16, 1, &small) == PF_OK);
    CHECK(small.data != first && small.pitch == 200);
    /* the freed block's range is registered with the engine: registering it again is
       refused (it overlaps a range e holds) */
    CHECK(pf_engine_register_host(e, first, MIB) == PF_INVALID_ARGUMENT);
    pinned_release(p, &b);
    pinned_release(p, &small);
    /* bad sizes are refused, not allocated */
    pf_frame bad;
    CHECK(pinned_frame(p, 0, 10, PF_U8, 3, &bad) == PF_INVALID_ARGUMENT);
    CHECK(pinned_frame(p, 10, 10, PF_U8, 7, &bad) == PF_INVALID_ARGUMENT);
    CHECK(pinned_frame(p, 1 << 30, 1 << 30, PF_F32, 4, &bad) == PF_INVALID_ARGUMENT);
    pinned_pool_destroy(p);
    pinned_pool_destroy(NULL);
}

static void limit(pf_engine *e)
{
    pinned_pool *p = NULL;
    CHECK(pinned_pool_create(&e, 1, 3 * MIB, &p) == PF_OK);
    pf_frame a, b, c;
    CHECK(pinned_frame(p, 1024, 1024, PF_U8, 1, &a) == PF_OK);  /* 1 MiB */
    CHECK(pinned_frame(p, 1024, 1024, PF_U16, 1, &b) == PF_OK); /* 2 MiB: the limit reached */
    CHECK(pinned_frame(p, 1024, 1024, PF_U8, 1, &c) == PF_NO_MEMORY);
    /* a free block is dropped to make room for a frame that fits no free block */
    pinned_release(p, &b);
    CHECK(pinned_frame(p, 1024, 1024, PF_U8, 2, &c) == PF_OK); /* 2 MiB: b's again */
    pinned_release(p, &c);
    pf_frame d;
    CHECK(pinned_frame(p, 1024, 1024, PF_U8, 1, &d) == PF_OK); /* 1 MiB: fits beside a */
    pinned_release(p, &d);
    pinned_release(p, &a);
    pf_frame big;
    CHECK(pinned_frame(p, 1024, 1024, PF_U8, 4, &big) == PF_NO_MEMORY); /* 4 MiB > limit */
    pinned_pool_destroy(p);
}

static void engines(void)
{
    pf_engine *e[3] = {engine(), engine(), engine()};
    pinned_pool *p = NULL;
    CHECK(pinned_pool_create(e, 3, 0, &p) == PF_OK);
    pf_frame f;
    CHECK(pinned_frame(p, 512, 512, PF_F32, 4, &f) == PF_OK);
    for (int i = 0; i < 3; i++) /* every engine registered the block */
        CHECK(pf_engine_register_host(e[i], f.data, MIB) == PF_INVALID_ARGUMENT);
    pinned_release(p, &f);
    pinned_pool_destroy(p);
    for (int i = 0; i < 3; i++)
        pf_engine_destroy(e[i]);
    pinned_pool *none = NULL;
    CHECK(pinned_pool_create(NULL, 0, 0, &none) == PF_INVALID_ARGUMENT && !none);
}

typedef struct worker_arg {
    pinned_pool *p;
    int id, bad;
} worker_arg;

static void *churn(void *arg)
{
    worker_arg *w = arg;
    for (int k = 0; k < 300; k++) {
        pf_frame f;
        int wdt = 200 + (k * 37 + w->id * 11) % 600;
        if (pinned_frame(w->p, wdt, 300, PF_U8, 4, &f) != PF_OK)
            continue;
        unsigned char *px = f.data;
        size_t n = f.pitch * (size_t)f.height;
        memset(px, w->id, n);
        for (size_t i = 0; i < n; i += 4093) /* nobody else wrote into it meanwhile */
            w->bad += px[i] != (unsigned char)w->id;
        pinned_release(w->p, &f);
    }
    return NULL;
}

static void threads(pf_engine *e)
{
    pinned_pool *p = NULL;
    CHECK(pinned_pool_create(&e, 1, 16 * MIB, &p) == PF_OK);
    pthread_t t[6];
    worker_arg a[6];
    for (int i = 0; i < 6; i++) {
        a[i] = (worker_arg){p, i + 1, 0};
        CHECK(pthread_create(&t[i], NULL, churn, &a[i]) == 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        CHECKF(a[i].bad == 0, "thread %d saw %d bytes of another's frame", i, a[i].bad);
    }
    pinned_pool_destroy(p);
}

int main(void)
{
    pf_engine *e = engine();
    sizes_and_reuse(e);
    limit(e);
    engines();
    threads(e);
    pf_engine_destroy(e);
    return pf_test_done("test_pinned");
}
