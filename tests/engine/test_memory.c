/* tests/engine/test_memory.c: buffer memory known before planning allocates
 * (pf_pipeline_memory) and the max_memory option. A 164-byte pipeline with one resize
 * asks for 16 GiB of buffers: under a limit it fails at once, naming the stage and the
 * sizes, and nothing is allocated; without one, the query still answers without
 * allocating. The query's host bytes are exactly what a CPU plan then allocates.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/resource.h>

#include "testutil.h"

static const char *const resize16g =
    "{\"pipefuse\": 1, \"input\": \"x\", \"stages\": [{\"id\": \"huge\", \"op\": \"resize\", "
    "\"params\": {\"width\": 32768, \"height\": 32768}}], \"outputs\": {\"o\": \"huge\"}}";

static pf_pipeline *load(pf_engine *e, const char *json)
{
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(e, json, "mem", &p);
    CHECKF(rc == PF_OK, "load: %s", pf_engine_errmsg(e));
    if (p)
        CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    return p;
}

static void huge_resize(pf_engine *e)
{
    pf_pipeline *p = load(e, resize16g);
    if (!p)
        return;
    pf_shape s = {64, 48};
    pf_memory m;
    memset(&m, 0, sizeof m);
    m.size = sizeof m;
    int rc = pf_pipeline_memory(p, &s, 1, &m);
    CHECKF(rc == PF_OK, "memory: %s", pf_pipeline_errmsg(p));
    unsigned long long img = 32768ull * 32768ull * 16ull; /* float RGBA, 16 GiB */
    CHECKF(m.host_bytes >= img && m.host_bytes < img + (64ull << 20), "host %llu", m.host_bytes);
    CHECKF(m.device_bytes >= img, "device %llu", m.device_bytes);
    CHECK(m.largest_stage && strcmp(m.largest_stage, "huge") == 0);
    CHECKF(m.largest_bytes == img, "largest %llu", m.largest_bytes);
    CHECK(pf_pipeline_unit_count(p) == 0); /* the query left no plan behind */

    /* A bad size on the query is refused like a plan. */
    pf_memory small = {.size = 8};
    CHECK(pf_pipeline_memory(p, &s, 1, &small) == PF_INVALID_ARGUMENT);
    pf_shape empty = {0, 5};
    CHECK(pf_pipeline_memory(p, &empty, 1, &m) == PF_INVALID_ARGUMENT);

    /* Under a 1 GiB limit the plan fails before allocating: the message names the stage
       and both sizes, and no buffer was made. */
    CHECK(pf_pipeline_set_option(p, "max_memory", "1073741824") == PF_OK);
    rc = pf_pipeline_plan(p, &s, 1);
    const char *msg = pf_pipeline_errmsg(p);
    CHECKF(rc == PF_NO_MEMORY, "plan: %s (%s)", pf_status_name(rc), msg);
    CHECKF(strstr(msg, "over the memory limit of 1.0 GiB") && strstr(msg, "'huge'") &&
               strstr(msg, "stages[0]") && strstr(msg, "32768x32768") && strstr(msg, "16.0 GiB") &&
               strstr(msg, "64x48"),
           "message: %s", msg);
    pf_stats st = {.size = sizeof st};
    CHECK(pf_pipeline_stats(p, &st) == PF_OK);
    CHECKF(st.allocations == 0 && st.host_bytes == 0 && st.plans == 0,
           "allocations %llu, bytes %llu, plans %llu", st.allocations, st.host_bytes, st.plans);

    /* A limit it fits under: plans (a small input, resized to 32x32). */
    pf_pipeline_destroy(p);
    p = load(e, "{\"pipefuse\": 1, \"input\": \"x\", \"stages\": [{\"id\": \"r\", \"op\": "
                "\"resize\", \"params\": {\"width\": 32, \"height\": 32}}], \"outputs\": "
                "{\"o\": \"r\"}}");
    if (!p)
        return;
    CHECK(pf_pipeline_set_option(p, "max_memory", "1073741824") == PF_OK);
    CHECKF(pf_pipeline_plan(p, &s, 1) == PF_OK, "plan: %s", pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_set_option(p, "max_memory", "-1") == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_set_option(p, "max_memory", "lots") == PF_INVALID_ARGUMENT);
    pf_pipeline_destroy(p);
}

/* host_bytes is what the CPU plan allocates: images, scratch, tables and partials. */
static void exact(pf_engine *e)
{
    pf_pipeline *p = load(
        e, "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
           "{\"id\": \"a\", \"op\": \"brightness\", \"params\": {\"amount\": 0.1}},"
           "{\"id\": \"b\", \"op\": \"gaussian\", \"params\": {\"sigma\": 2}},"
           "{\"id\": \"c\", \"op\": \"blend\", \"inputs\": [\"b\", \"a\"]},"
           "{\"id\": \"h\", \"op\": \"histogram\", \"input\": \"c\", \"params\": {\"bins\": 64}},"
           "{\"id\": \"d\", \"op\": \"resize\", \"input\": \"c\", \"params\": {\"scale\": 0.5}}"
           "], \"outputs\": {\"o\": \"d\", \"hist\": \"h\", \"mid\": \"c\"}}");
    if (!p)
        return;
    pf_shape s = {301, 203};
    pf_memory m = {.size = sizeof m};
    CHECKF(pf_pipeline_memory(p, &s, 1, &m) == PF_OK, "memory: %s", pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    pf_stats st = {.size = sizeof st};
    CHECK(pf_pipeline_stats(p, &st) == PF_OK);
    CHECKF(m.host_bytes == st.host_bytes, "query %llu, plan allocated %llu", m.host_bytes,
           st.host_bytes);
    CHECK(strcmp(m.largest_stage, "x") == 0); /* the input, the first of the full-size ones */
    /* A limit of exactly that plans; one byte less does not. */
    char v[32];
    snprintf(v, sizeof v, "%llu", m.host_bytes);
    CHECK(pf_pipeline_set_option(p, "max_memory", v) == PF_OK);
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    snprintf(v, sizeof v, "%llu", m.host_bytes - 1);
    CHECK(pf_pipeline_set_option(p, "max_memory", v) == PF_OK);
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_NO_MEMORY);
    CHECK(strstr(pf_pipeline_errmsg(p), "over the memory limit") != NULL);
    pf_pipeline_destroy(p);
}

int main(void)
{
    /* Nothing here may allocate gigabytes: an address-space limit turns an attempt into
       a failure (with a different message) rather than a swapping machine. Not under
       the sanitizers, whose shadow memory needs the address space. */
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit rl = {4ull << 30, 4ull << 30};
    setrlimit(RLIMIT_AS, &rl);
#endif
    pf_engine *e = pf_test_engine();
    huge_resize(e);
    exact(e);
    pf_engine_destroy(e);
    return pf_test_done("test_memory");
}
