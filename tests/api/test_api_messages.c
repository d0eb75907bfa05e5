/* tests/api/test_api_messages.c: every failing call says why. pipefuse.h promises that
 * a call returning an error leaves its text in the handle's errmsg: each misuse here
 * first plants an unrelated message, then checks that the call replaced it with its
 * own. Also: a successful load leaves the engine's last failure message in place,
 * pf_pipeline_output_channels refuses a channel count that is no format's, and a host
 * range that wraps around the address space is refused, and pf_pipeline_input_used tells
 * an input no output needs.
 */
#define _GNU_SOURCE /* mkstemp */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipefuse/png.h" /* pf_frame_alloc */
#include "testutil.h"

static const char point_and_table[] =
    "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": ["
    "{\"id\": \"inv\", \"op\": \"invert\"},"
    "{\"id\": \"hist\", \"op\": \"histogram\", \"inputs\": [\"inv\"]}],"
    "\"outputs\": {\"out\": \"inv\", \"hist\": \"hist\"}}";

#define EXPECT PF_EXPECT_STATUS_MSG /* testutil.h */

static void test_pipeline_calls(pf_engine *e)
{
    pf_pipeline *p = NULL;
    CHECK(pf_pipeline_load_string(e, point_and_table, "msgs", &p) == PF_OK);
    if (!p)
        return;
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);

    /* Options */
    EXPECT(p, pf_pipeline_set_option(p, NULL, "1"), PF_INVALID_ARGUMENT, "NULL option name");
    EXPECT(p, pf_pipeline_set_option(p, "slots", NULL), PF_INVALID_ARGUMENT, "NULL value");
    /* a missing directory, then a file: each its own reason (no errno left over) */
    EXPECT(p, pf_pipeline_set_option(p, "dump_kernels", "/nonexistent/dir"), PF_INVALID_ARGUMENT,
           "/nonexistent/dir", "no such directory");
    char file[] = "/tmp/pf_msgs_XXXXXX";
    int fd = mkstemp(file);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    EXPECT(p, pf_pipeline_set_option(p, "dump_kernels", file), PF_INVALID_ARGUMENT,
           "not a directory");
    unlink(file);

    /* Plan and memory */
    EXPECT(p, pf_pipeline_plan(p, NULL, 1), PF_INVALID_ARGUMENT, "NULL input shapes");
    pf_shape s = {16, 8};
    EXPECT(p, pf_pipeline_memory(p, &s, 1, NULL), PF_INVALID_ARGUMENT, "NULL pf_memory");
    pf_memory m;
    memset(&m, 0, sizeof m);
    EXPECT(p, pf_pipeline_memory(p, &s, 1, &m), PF_INVALID_ARGUMENT, "size");

    /* Tables before any frame, of an image output, of no output */
    pf_table t;
    EXPECT(p, pf_pipeline_table(p, 1, &t), PF_INVALID_ARGUMENT, "hist", "before a frame");
    EXPECT(p, pf_pipeline_table(p, 0, &t), PF_INVALID_ARGUMENT, "out", "image");
    EXPECT(p, pf_pipeline_table(p, 5, &t), PF_INVALID_ARGUMENT, "no output 5");
    EXPECT(p, pf_pipeline_table(p, 1, NULL), PF_INVALID_ARGUMENT, "NULL pf_table");

    /* Submit without a ticket */
    pf_frame in, out;
    CHECK(pf_frame_alloc(&in, 16, 8, PF_U8, 4) == PF_OK);
    CHECK(pf_frame_alloc(&out, 16, 8, PF_U8, 4) == PF_OK);
    memset(in.data, 7, in.pitch * 8);
    EXPECT(p, pf_pipeline_submit(p, &in, 1, &out, 1, NULL), PF_INVALID_ARGUMENT, "NULL ticket");
    CHECK(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK);
    CHECK(pf_pipeline_table(p, 1, &t) == PF_OK && t.rows > 0);
    CHECK(pf_pipeline_unit_count(p) > 0 && pf_pipeline_slots(p) == 3);

    /* Channel counts: only 1 to 4 are formats; a table output has none */
    CHECK(pf_pipeline_output_channels(p, 0, 3) == 3);
    CHECK(pf_pipeline_output_channels(p, 0, 7) == 0);
    CHECK(pf_pipeline_output_channels(p, 0, 0) == 0);
    CHECK(pf_pipeline_output_channels(p, 1, 4) == 0);
    pf_frame_free(&in);
    pf_frame_free(&out);
    pf_pipeline_destroy(p);
}

static void test_engine_calls(pf_engine *e)
{
    pf_pipeline *p = NULL;
    /* a failed load's message stays through later successful loads */
    CHECK(pf_pipeline_load_string(e, "{\"pipefuse\": 1, \"stages\": [", "broken", &p) == PF_PARSE);
    CHECK(strstr(pf_engine_errmsg(e), "broken") != NULL);
    CHECK(pf_pipeline_load_string(e, point_and_table, "good", &p) == PF_OK);
    CHECKF(strstr(pf_engine_errmsg(e), "broken") != NULL, "after a good load: \"%s\"",
           pf_engine_errmsg(e));
    pf_pipeline_destroy(p);
    /* an input no output needs */
    CHECK(pf_pipeline_load_string(e,
                                  "{\"pipefuse\": 1, \"inputs\": [\"a\", \"b\"], \"stages\": "
                                  "[{\"id\": \"s\", \"op\": \"invert\", \"inputs\": [\"a\"]}], "
                                  "\"outputs\": {\"o\": \"s\"}}",
                                  "unused", &p) == PF_OK);
    CHECK(pf_pipeline_input_used(p, 0) == 1 && pf_pipeline_input_used(p, 1) == 0 &&
          pf_pipeline_input_used(p, 2) == 0 && pf_pipeline_input_used(NULL, 0) == 0);
    pf_pipeline_destroy(p);
    /* stages that make colour from gray (color_matrix's duotone, overlay's logo) make an
       "auto" output of a gray input RGB, and of gray+alpha RGBA */
    static const char *const colour_makers[] = {PF_SOURCE_DIR "/pipelines/duotone.json",
                                                PF_SOURCE_DIR "/pipelines/watermark.json"};
    for (int i = 0; i < 2; i++) {
        CHECK(pf_pipeline_load_file(e, colour_makers[i], &p) == PF_OK);
        CHECKF(p && pf_pipeline_output_channels(p, 0, 1) == 3 &&
                   pf_pipeline_output_channels(p, 0, 2) == 4 &&
                   pf_pipeline_output_channels(p, 0, 3) == 3,
               "%s: gray gives %d channels", colour_makers[i],
               p ? pf_pipeline_output_channels(p, 0, 1) : -1);
        pf_pipeline_destroy(p);
    }
    /* a NULL path says so */
    CHECK(pf_pipeline_load_file(e, NULL, &p) == PF_INVALID_ARGUMENT && !p);
    CHECKF(strstr(pf_engine_errmsg(e), "NULL path") != NULL, "\"%s\"", pf_engine_errmsg(e));
    /* a host range running past the end of the address space */
    CHECK(pf_engine_register_host(e, (void *)(UINTPTR_MAX - 15), 64) == PF_INVALID_ARGUMENT);
    CHECKF(strstr(pf_engine_errmsg(e), "address space") != NULL, "\"%s\"", pf_engine_errmsg(e));
}

/* Engine configs out of range are refused by field and value, never taken silently. */
static void test_engine_config(void)
{
    static const struct {
        int threads, copy_threads;
        const char *words;
    } bad[] = {{-1, 0, "threads is -1"},
               {2000, 0, "threads is 2000"},
               {0, -3, "copy_threads is -3"},
               {0, 100000, "copy_threads is 100000"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pf_engine_config cfg;
        pf_engine_config_init(&cfg);
        cfg.use_env_path = 0;
        cfg.no_builtin = 1;
        cfg.threads = bad[i].threads;
        cfg.copy_threads = bad[i].copy_threads;
        pf_engine *e = NULL;
        int rc = pf_engine_create(&cfg, &e);
        CHECKF(rc == PF_INVALID_ARGUMENT && e && strstr(pf_engine_errmsg(e), bad[i].words),
               "threads %d copy_threads %d: %s, \"%s\"", bad[i].threads, bad[i].copy_threads,
               pf_status_name(rc), e ? pf_engine_errmsg(e) : "(no engine)");
        pf_engine_destroy(e);
    }
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.use_env_path = 0;
    cfg.no_builtin = 1;
    cfg.threads = 2;
    cfg.copy_threads = 3;
    pf_engine *e = NULL;
    CHECK(pf_engine_create(&cfg, &e) == PF_OK);
    pf_engine_destroy(e);
}

/* A log callback that loads a pipeline while a load is warning (an unused input): the
   nested load runs on the same thread, where it waited for itself for ever. */
static pf_engine *nested_engine;
static int nested_loads, nested_ok;

static void load_from_log(void *user, int level, const char *msg)
{
    (void)user, (void)level, (void)msg;
    if (nested_loads++ > 0)
        return;
    pf_pipeline *q = NULL;
    nested_ok = pf_pipeline_load_string(nested_engine,
                                        "{\"pipefuse\": 1, \"inputs\": [\"a\", \"b\"], "
                                        "\"stages\": [{\"id\": \"s\", \"op\": \"invert\", "
                                        "\"inputs\": [\"a\"]}], \"outputs\": {\"o\": \"s\"}}",
                                        "inner", &q) == PF_OK;
    pf_pipeline_destroy(q);
}

static void test_load_from_log(void)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.log = load_from_log;
    nested_engine = pf_test_engine_with(&cfg);
    pf_pipeline *p = NULL;
    CHECK(pf_pipeline_load_string(nested_engine,
                                  "{\"pipefuse\": 1, \"inputs\": [\"a\", \"b\"], \"stages\": "
                                  "[{\"id\": \"s\", \"op\": \"invert\", \"inputs\": [\"a\"]}], "
                                  "\"outputs\": {\"o\": \"s\"}}",
                                  "outer", &p) == PF_OK);
    CHECKF(nested_loads >= 2 && nested_ok, "%d warnings, the nested load %s", nested_loads,
           nested_ok ? "loaded" : "failed");
    pf_pipeline_destroy(p);
    pf_engine_destroy(nested_engine);
}

int main(void)
{
    test_engine_config();
    test_load_from_log();
    pf_engine *e = pf_test_engine();
    test_pipeline_calls(e);
    test_engine_calls(e);
    pf_engine_destroy(e);
    return pf_test_done("test_api_messages");
}
