/* tests/engine/test_memory.c: buffer memory known before planning allocates
 * (pf_pipeline_memory) and the max_memory option. A 164-byte pipeline with one resize
 * asks for 16 GiB of buffers: under a limit it fails at once, naming the stage and the
 * sizes, and nothing is allocated; without one, the query still answers without
 * allocating. The query's host bytes are exactly what a CPU plan then allocates.
 * Images whose lives do not overlap share a buffer: a long chain of stencils needs as
 * many buffers as a short one, and random graphs give the same bytes as when every
 * image is an output (then none is shared).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
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

/* A chain of k stages, gaussians and flips in turn (no two fuse), in text. */
static char *stencil_chain(int k)
{
    size_t cap = 128 + (size_t)k * 128, n = 0;
    char *j = malloc(cap);
    n += (size_t)snprintf(j + n, cap - n, "{\"pipefuse\": 1, \"input\": \"x\", \"stages\": [");
    for (int i = 0; i < k; i++)
        n += (size_t)snprintf(j + n, cap - n, "%s{\"id\": \"s%d\", \"op\": \"%s\"%s}", i ? "," : "",
                              i, i % 2 ? "flip" : "gaussian",
                              i % 2 ? "" : ", \"params\": {\"sigma\": 1.5}");
    snprintf(j + n, cap - n, "], \"outputs\": {\"o\": \"s%d\"}}", k - 1);
    return j;
}

/* 40 stencils at 3840x2160 took 40 images (5.2 GB); now the input and two images,
   whatever the length, and the query still matches what the plan allocates. The device
   estimate (one stream) shares them too, and the gaussians' scratch: it was 8 GB. */
static void shared_chain(pf_engine *e)
{
    unsigned long long bytes[2] = {0, 0}, dev[2] = {0, 0};
    const int len[2] = {6, 40};
    for (int t = 0; t < 2; t++) {
        char *json = stencil_chain(len[t]);
        pf_pipeline *p = load(e, json);
        free(json);
        if (!p)
            return;
        pf_shape big = {3840, 2160}, small = {301, 203};
        pf_memory m = {.size = sizeof m};
        CHECK(pf_pipeline_memory(p, &big, 1, &m) == PF_OK);
        bytes[t] = m.host_bytes;
        size_t image = (size_t)3840 * 16 * 2160;
        CHECKF(m.host_bytes < 4 * image, "%d stencils at 3840x2160: %llu bytes of buffers", len[t],
               m.host_bytes);
        /* on the device too: the images, and one scratch block for the gaussians' row
           pass (they run on one stream) */
        dev[t] = m.device_bytes;
        CHECKF(m.device_bytes < 6 * image,
               "%d stencils at 3840x2160: %llu bytes of device buffers estimated", len[t],
               m.device_bytes);
        CHECK(pf_pipeline_memory(p, &small, 1, &m) == PF_OK);
        CHECK(pf_pipeline_plan(p, &small, 1) == PF_OK);
        pf_stats st = {.size = sizeof st};
        CHECK(pf_pipeline_stats(p, &st) == PF_OK);
        CHECKF(m.host_bytes == st.host_bytes, "query %llu, plan allocated %llu", m.host_bytes,
               st.host_bytes);
        pf_pipeline_destroy(p);
    }
    CHECKF(bytes[0] == bytes[1], "6 stencils %llu bytes, 40 stencils %llu", bytes[0], bytes[1]);
    CHECKF(dev[0] == dev[1], "device: 6 stencils %llu bytes, 40 stencils %llu", dev[0], dev[1]);
}

/* A random graph of n (<= 32) stages over two inputs, in text: stencils, point stages,
   flips, blends and a half-size resize and back, each reading earlier nodes picked at
   random (so images live long and short, and sizes differ). Outputs: the nodes no other
   reads, or with every_node all of them (nothing is shared then). */
static char *random_graph(pf_rng *r, int n, int every_node, int *n_out, char *half)
{
    size_t cap = 256 + (size_t)n * 256, len = 0;
    char *j = malloc(cap);
    memset(half, 0, (size_t)n); /* per node: half size */
    char read[32] = {0};        /* per node: read by a later one */
    len += (size_t)snprintf(j + len, cap - len,
                            "{\"pipefuse\": 1, \"inputs\": [\"a\", \"b\"], \"stages\": [");
    for (int i = 0; i < n; i++) {
        /* a full-size source: an input or an earlier full-size node */
        int src[2];
        for (int k = 0; k < 2; k++) {
            do
                src[k] = pf_rng_range(r, -2, i - 1);
            while (src[k] >= 0 && half[src[k]]);
        }
        char name[2][16];
        for (int k = 0; k < 2; k++)
            snprintf(name[k], sizeof name[k], src[k] < 0 ? (src[k] == -1 ? "a" : "b") : "n%d",
                     src[k]);
        int op = pf_rng_range(r, 0, 6);
        if (i > 0 && half[i - 1]) { /* back to full size, from the half-size node */
            len += (size_t)snprintf(j + len, cap - len,
                                    ",{\"id\": \"n%d\", \"op\": \"resize\", \"input\": \"n%d\", "
                                    "\"params\": {\"width\": 97, \"height\": 61}}",
                                    i, i - 1);
            read[i - 1] = 1;
            continue;
        }
        static const char *const text[] = {
            "\"op\": \"gaussian\", \"input\": \"%s\", \"params\": {\"sigma\": 1.2}",
            "\"op\": \"flip\", \"input\": \"%s\"",
            "\"op\": \"sobel\", \"input\": \"%s\"",
            "\"op\": \"brightness\", \"input\": \"%s\", \"params\": {\"amount\": 0.05}",
            "\"op\": \"contrast\", \"input\": \"%s\", \"params\": {\"amount\": 1.1}",
            "\"op\": \"blend\", \"inputs\": [\"%s\", \"%s\"], \"params\": {\"opacity\": 0.4}",
            "\"op\": \"resize\", \"input\": \"%s\", \"params\": {\"width\": 48, \"height\": 30}",
        };
        half[i] = op == 6 && i + 1 < n;
        if (op == 6 && !half[i])
            op = 1;
        for (int k = 0; k < (op == 5 ? 2 : 1); k++)
            if (src[k] >= 0)
                read[src[k]] = 1;
        len += (size_t)snprintf(j + len, cap - len, "%s{\"id\": \"n%d\", ", i ? "," : "", i);
        len += (size_t)snprintf(j + len, cap - len, text[op], name[0], name[1]);
        len += (size_t)snprintf(j + len, cap - len, "}");
    }
    len += (size_t)snprintf(j + len, cap - len, "], \"outputs\": {\"last\": \"n%d\"", n - 1);
    *n_out = 1;
    for (int i = 0; i + 1 < n; i++)
        if (every_node || !read[i]) {
            len += (size_t)snprintf(j + len, cap - len, ", \"o%d\": \"n%d\"", i, i);
            ++*n_out;
        }
    snprintf(j + len, cap - len, "}}");
    return j;
}

static pf_frame rgba(int w, int h)
{
    pf_frame f = {0};
    f.width = w, f.height = h, f.sample = PF_U8, f.channels = 4;
    f.pitch = (size_t)w * 4;
    f.data = calloc(f.pitch, (size_t)h);
    return f;
}

static void shared_graphs(pf_engine *e)
{
    for (int g = 0; g < 30; g++) {
        pf_rng r[2];
        pf_rng_seed(&r[0], 1000 + (uint64_t)g);
        r[1] = r[0];
        int n = 4 + g % 17, n_out[2];
        char half[32];
        char *json[2] = {random_graph(&r[0], n, 0, &n_out[0], half),
                         random_graph(&r[1], n, 1, &n_out[1], half)};
        pf_pipeline *p[2] = {load(e, json[0]), load(e, json[1])};
        pf_frame in[2] = {rgba(97, 61), rgba(97, 61)};
        pf_rng data;
        pf_rng_seed(&data, 7 + (uint64_t)g);
        pf_test_frame_random(&data, &in[0]);
        pf_test_frame_random(&data, &in[1]);
        pf_frame *out[2] = {calloc((size_t)n_out[0], sizeof(pf_frame)),
                            calloc((size_t)n_out[1], sizeof(pf_frame))};
        unsigned long long bytes[2] = {0, 0};
        for (int k = 0; k < 2 && p[0] && p[1]; k++) {
            for (int o = 0; o < n_out[k]; o++) {
                pf_output_info info;
                CHECK(pf_pipeline_output_info(p[k], o, &info) == PF_OK);
                int node = info.name[0] == 'o' ? atoi(info.name + 1) : n - 1;
                out[k][o] = half[node] ? rgba(48, 30) : rgba(97, 61);
            }
            int rc = pf_pipeline_run(p[k], in, 2, out[k], n_out[k]);
            CHECKF(rc == PF_OK, "graph %d: %s", g, pf_pipeline_errmsg(p[k]));
            pf_stats st = {.size = sizeof st};
            pf_pipeline_stats(p[k], &st);
            bytes[k] = st.host_bytes;
        }
        if (p[0] && p[1]) {
            /* every output of the first is an output of the second, in the same order */
            for (int o = 0, q = 0; o < n_out[0]; o++) {
                pf_output_info a, b;
                pf_pipeline_output_info(p[0], o, &a);
                do
                    pf_pipeline_output_info(p[1], q++, &b);
                while (strcmp(a.name, b.name) != 0 && q < n_out[1]);
                long bad = pf_test_frame_mismatches(&out[0][o], &out[1][q - 1]);
                CHECKF(bad == 0, "graph %d (%d stages): %ld samples of %s differ", g, n, bad,
                       a.name);
            }
            CHECKF(bytes[0] <= bytes[1], "graph %d: %llu bytes shared, %llu not", g, bytes[0],
                   bytes[1]);
        }
        for (int k = 0; k < 2; k++) {
            for (int o = 0; o < n_out[k]; o++)
                free(out[k][o].data);
            free(out[k]);
            pf_pipeline_destroy(p[k]);
            free(json[k]);
        }
        free(in[0].data), free(in[1].data);
    }
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
    shared_chain(e);
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.log = pf_test_quiet_log; /* unused inputs of random graphs are warned about */
    pf_engine *quiet = pf_test_engine_with(&cfg);
    shared_graphs(quiet);
    pf_engine_destroy(quiet);
    pf_engine_destroy(e);
    return pf_test_done("test_memory");
}
