/* tests/api/test_cancel.c: pf_pipeline_submit_async and pf_pipeline_cancel on the CPU
 * backend. The gate plugin (plugins/gate.c) holds a frame's first band until the test
 * opens pf_test_gate, so each case knows that a frame is inside the engine while it
 * polls, cancels or submits again: no case depends on timing.
 *   - submit_async returns while the frame is held; poll and a short wait say
 *     PF_NOT_READY; once opened, wait gives the right pixels and the table;
 *   - a cancel while the frame is held ends it with PF_CANCELLED at the next cancel point,
 *     keeps the last completed frame's table, and the next frame runs as usual;
 *   - a cancel from another thread ends a pf_pipeline_run in progress;
 *   - a cancel with nothing in flight touches no later frame;
 *   - a second submit completes the frame before it (whose wait then returns its status),
 *     and a parameter change waits for the frame in flight;
 *   - destroying a pipeline with a queued frame in flight completes it first. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "pipefuse/pipefuse.h"
#include "pipefuse/png.h"
#include "testutil.h"

/* Found by the gate plugin with dlsym: keep the name and layout in step with gate.c. */
struct pf_test_gate {
    atomic_int entered;
    atomic_int open;
};
__attribute__((visibility("default"))) struct pf_test_gate pf_test_gate;

static const char *json =
    "{\"pipefuse\": 1, \"inputs\": [\"in\"],"
    " \"stages\": ["
    "  {\"id\": \"g\", \"op\": \"gate_copy\", \"inputs\": [\"in\"], \"params\": {\"hold\": 1}},"
    "  {\"id\": \"inv\", \"op\": \"invert\", \"inputs\": [\"g\"]},"
    "  {\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"inv\"], \"params\": {\"bins\": "
    "4}}],"
    " \"outputs\": {\"out\": \"inv\", \"hist\": \"hist\"}}";

#define W 64
#define H 256

static void gate_close(void)
{
    atomic_store(&pf_test_gate.open, 0);
    atomic_store(&pf_test_gate.entered, 0);
}

/* Waits (a condition, not a time) until a band has reached the gate. */
static void gate_reached(void)
{
    while (atomic_load(&pf_test_gate.entered) == 0)
        sched_yield();
}

static void gate_open(void)
{
    atomic_store(&pf_test_gate.open, 1);
}

/* out == invert(in): 255 - v on RGB, alpha as it was. */
static long inverted_mismatches(const pf_frame *in, const pf_frame *out)
{
    long bad = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 4; c++) {
                unsigned v = pf_test_frame_sample(in, x, y, c);
                unsigned want = c == 3 ? v : 255 - v;
                bad += pf_test_frame_sample(out, x, y, c) != want;
            }
    return bad;
}

static void table_copy(pf_pipeline *p, double *t, int *n)
{
    pf_table tb;
    *n = 0;
    if (pf_pipeline_table(p, 1, &tb) != PF_OK)
        return;
    *n = tb.rows * tb.cols;
    memcpy(t, tb.data, sizeof(double) * (size_t)*n);
}

typedef struct runner_arg {
    pf_pipeline *p;
    pf_frame *in, *out;
    int rc;
} runner_arg;

static void *run_thread(void *arg)
{
    runner_arg *r = arg;
    pf_frame outs[2] = {*r->out, {0}};
    r->rc = pf_pipeline_run(r->p, r->in, 1, outs, 2);
    return NULL;
}

int main(void)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = PF_GATE_DIR;
    cfg.threads = 1; /* bands in order on one thread: the held band holds the frame */
    pf_engine *e = pf_test_engine_with(&cfg);
    pf_pipeline *p = pf_test_load_string(e, json, "cancel.json", "cpu");
    pf_rng rng;
    pf_rng_seed(&rng, 37);
    pf_frame in[2], out;
    CHECK(pf_frame_alloc(&in[0], W, H, PF_U8, 4) == PF_OK);
    CHECK(pf_frame_alloc(&in[1], W, H, PF_U8, 4) == PF_OK);
    CHECK(pf_frame_alloc(&out, W, H, PF_U8, 4) == PF_OK);
    pf_test_frame_random(&rng, &in[0]);
    pf_test_frame_random(&rng, &in[1]);
    pf_frame outs[2] = {out, {0}};
    int t1 = 0, t2 = 0;
    double table1[64], table2[64];
    int n1 = 0, n2 = 0;

    /* Queued: submit returns while the frame is held inside the engine. */
    gate_close();
    CHECK(pf_pipeline_submit_async(p, &in[0], 1, outs, 2, &t1) == PF_OK);
    gate_reached();
    CHECK(pf_pipeline_poll(p, t1) == PF_NOT_READY);
    CHECK(pf_pipeline_wait_timeout(p, t1, 1) == PF_NOT_READY);
    pf_stats st = {.size = sizeof st};
    CHECK(pf_pipeline_stats(p, &st) == PF_OK && strcmp(st.backend, "cpu") == 0);
    gate_open();
    CHECKF(pf_pipeline_wait(p, t1) == PF_OK, "%s", pf_pipeline_errmsg(p));
    CHECK(inverted_mismatches(&in[0], &out) == 0);
    CHECK(pf_pipeline_wait(p, t1) == PF_OK); /* again: complete */
    table_copy(p, table1, &n1);
    CHECK(n1 > 0);

    /* Cancelled while held: PF_CANCELLED at the next cancel point (before the invert
       unit), the table as the last completed frame left it. */
    gate_close();
    CHECK(pf_pipeline_submit_async(p, &in[1], 1, outs, 2, &t2) == PF_OK);
    gate_reached();
    CHECK(pf_pipeline_cancel(p) == PF_OK);
    gate_open();
    int rc = pf_pipeline_wait(p, t2);
    CHECKF(rc == PF_CANCELLED, "wait after cancel: %s (%s)", pf_status_name(rc),
           pf_pipeline_errmsg(p));
    CHECK(strstr(pf_pipeline_errmsg(p), "cancelled") != NULL);
    CHECK(pf_pipeline_wait(p, t2) == PF_CANCELLED); /* its status stays with its ticket */
    table_copy(p, table2, &n2);
    CHECK(n2 == n1 && memcmp(table1, table2, sizeof(double) * (size_t)n1) == 0);
    CHECK(strcmp(pf_status_name(PF_CANCELLED), "PF_CANCELLED") == 0);

    /* Usable afterwards, and a cancel with nothing in flight touches no later frame. */
    CHECK(pf_pipeline_cancel(p) == PF_OK);
    gate_close();
    gate_open();
    CHECK(pf_pipeline_submit_async(p, &in[1], 1, outs, 2, &t2) == PF_OK);
    CHECKF(pf_pipeline_wait(p, t2) == PF_OK, "%s", pf_pipeline_errmsg(p));
    CHECK(inverted_mismatches(&in[1], &out) == 0);
    CHECK(pf_pipeline_run(p, in, 1, outs, 2) == PF_OK);
    CHECK(inverted_mismatches(&in[0], &out) == 0);

    /* Another thread cancels a pf_pipeline_run in progress. */
    gate_close();
    runner_arg ra = {p, &in[1], &out, -1};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, run_thread, &ra) == 0);
    gate_reached();
    CHECK(pf_pipeline_cancel(p) == PF_OK);
    gate_open();
    pthread_join(th, NULL);
    CHECKF(ra.rc == PF_CANCELLED, "run after cancel: %s", pf_status_name(ra.rc));

    /* A second submit completes the frame before it; that frame's wait gives its status. */
    gate_close();
    CHECK(pf_pipeline_submit_async(p, &in[0], 1, outs, 2, &t1) == PF_OK);
    gate_reached();
    CHECK(pf_pipeline_cancel(p) == PF_OK);
    gate_open();
    pf_frame out2;
    CHECK(pf_frame_alloc(&out2, W, H, PF_U8, 4) == PF_OK);
    pf_frame outs2[2] = {out2, {0}};
    CHECK(pf_pipeline_submit_async(p, &in[1], 1, outs2, 2, &t2) == PF_OK);
    CHECK(pf_pipeline_wait(p, t1) == PF_CANCELLED);
    CHECKF(pf_pipeline_wait(p, t2) == PF_OK, "%s", pf_pipeline_errmsg(p));
    CHECK(inverted_mismatches(&in[1], &out2) == 0);

    /* A parameter change waits for the frame in flight, which ran with the old value. */
    gate_close();
    CHECK(pf_pipeline_submit_async(p, &in[0], 1, outs, 2, &t1) == PF_OK);
    gate_reached();
    gate_open();
    CHECK(pf_pipeline_set_float(p, "g.hold", 0) == PF_OK);
    CHECK(pf_pipeline_wait(p, t1) == PF_OK);
    CHECK(inverted_mismatches(&in[0], &out) == 0);
    CHECK(pf_pipeline_submit_async(p, &in[1], 1, outs, 2, &t2) == PF_OK);
    CHECK(pf_pipeline_wait(p, t2) == PF_OK);
    CHECK(inverted_mismatches(&in[1], &out) == 0);

    /* Destroyed with a frame in flight: it completes first (no write after the free). */
    CHECK(pf_pipeline_set_float(p, "g.hold", 1) == PF_OK);
    gate_close();
    CHECK(pf_pipeline_submit_async(p, &in[0], 1, outs, 2, &t1) == PF_OK);
    gate_reached();
    gate_open();
    pf_pipeline_destroy(p);
    CHECK(inverted_mismatches(&in[0], &out) == 0);
    CHECK(pf_pipeline_cancel(NULL) == PF_INVALID_ARGUMENT);

    pf_frame_free(&in[0]);
    pf_frame_free(&in[1]);
    pf_frame_free(&out);
    pf_frame_free(&out2);
    pf_engine_destroy(e);
    return pf_test_done("test_cancel");
}
