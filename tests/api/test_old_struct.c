/* tests/api/test_old_struct.c: a caller built against an older header. Its structs are
 * declared here as the 0.1 header had them (shorter than today's), with a guard after
 * each, and handed to the library as it would: the library must read and write only
 * the bytes the caller's size covers, give later fields their defaults, and run.
 * Also: status codes and enum values keep the numbers they were released with.
 */
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

/* pf_engine_config as released in 0.1. */
typedef struct config_0_1 {
    uint32_t size;
    const char *plugin_path;
    int use_env_path;
    int no_builtin;
    int threads;
    void (*log)(void *user, int level, const char *msg);
    void *log_user;
} config_0_1;

/* A pf_stats cut after `frames`, as a still older caller might have it. */
typedef struct stats_short {
    uint32_t size;
    const char *backend;
    unsigned long long frames;
} stats_short;

#define GUARD_BYTE 0x5a

typedef struct guarded_config {
    config_0_1 c;
    unsigned char guard[64];
} guarded_config;

typedef struct guarded_stats {
    stats_short s;
    unsigned char guard[64];
} guarded_stats;

static int untouched(const unsigned char *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g[i] != GUARD_BYTE)
            return 0;
    return 1;
}

int main(void)
{
    CHECK(sizeof(config_0_1) == PF_ENGINE_CONFIG_SIZE_0_1);
    CHECK(sizeof(config_0_1) < sizeof(pf_engine_config));

    /* pf_engine_config_init as a 0.1 binary calls it (the function, not today's macro):
       it writes the 0.1 fields and nothing past them. */
    guarded_config gc;
    memset(&gc, GUARD_BYTE, sizeof gc);
    (pf_engine_config_init)((pf_engine_config *)&gc.c);
    CHECK(gc.c.size == sizeof(config_0_1));
    CHECK(gc.c.use_env_path == 1 && gc.c.threads == 0 && gc.c.plugin_path == NULL);
    CHECK(untouched(gc.guard, sizeof gc.guard));
    /* The sized init as today's macro calls it with an old struct's size. */
    memset(&gc, GUARD_BYTE, sizeof gc);
    pf_engine_config_init_size((pf_engine_config *)&gc.c, sizeof gc.c);
    CHECK(gc.c.size == sizeof(config_0_1));
    CHECK(untouched(gc.guard, sizeof gc.guard));

    /* An engine from the old struct: the guard bytes where copy_threads now lies are
       not read (they would ask for 0x5a5a5a5a copy threads). */
    gc.c.use_env_path = 0;
    gc.c.threads = 2;
    pf_engine *e = NULL;
    int rc = pf_engine_create((const pf_engine_config *)&gc.c, &e);
    CHECKF(rc == PF_OK, "%s", pf_engine_errmsg(e));
    /* Too small to be any released size: refused with a message. */
    config_0_1 bad = gc.c;
    bad.size = 8;
    pf_engine *e2 = NULL;
    CHECK(pf_engine_create((const pf_engine_config *)&bad, &e2) == PF_INVALID_ARGUMENT);
    CHECK(strstr(pf_engine_errmsg(e2), "pf_engine_config.size") != NULL);
    pf_engine_destroy(e2);

    /* Run a frame, then read statistics into the short struct. */
    pf_pipeline *p = NULL;
    rc = pf_pipeline_load_string(e,
                                 "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": "
                                 "[{\"id\": \"inv\", \"op\": \"invert\"}], "
                                 "\"outputs\": {\"out\": \"inv\"}}",
                                 "old", &p);
    CHECKF(rc == PF_OK, "%s", pf_engine_errmsg(e));
    CHECK(pf_pipeline_set_option(p, "backend", "cpu") == PF_OK);
    unsigned char in_px[4 * 4 * 4], out_px[4 * 4 * 4];
    for (size_t i = 0; i < sizeof in_px; i++)
        in_px[i] = (unsigned char)(i * 7);
    pf_frame in = {in_px, 4, 4, 16, PF_U8, 4}, out = {out_px, 4, 4, 16, PF_U8, 4};
    CHECK(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK);
    CHECK(out_px[5] == 255 - in_px[5]);
    guarded_stats gs;
    memset(&gs, GUARD_BYTE, sizeof gs);
    gs.s.size = sizeof gs.s;
    CHECK(pf_pipeline_stats(p, (pf_stats *)&gs.s) == PF_OK);
    CHECK(gs.s.size == sizeof gs.s);
    CHECK(gs.s.frames == 1);
    CHECK(gs.s.backend && strcmp(gs.s.backend, "cpu") == 0);
    CHECK(untouched(gs.guard, sizeof gs.guard));
    gs.s.size = 4; /* not even the backend field */
    CHECK(pf_pipeline_stats(p, (pf_stats *)&gs.s) == PF_INVALID_ARGUMENT);
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);

    /* Released numbers never change. */
    CHECK(PF_OK == 0 && PF_INVALID_ARGUMENT == 1 && PF_NO_MEMORY == 2 && PF_IO == 3);
    CHECK(PF_PARSE == 4 && PF_PIPELINE == 5 && PF_PARAM == 6 && PF_PLUGIN == 7);
    CHECK(PF_IMAGE == 8 && PF_TOO_LARGE == 9 && PF_SHAPE == 10 && PF_NOT_PLANNED == 11);
    CHECK(PF_STAGE == 12 && PF_UNSUPPORTED == 13 && PF_NO_DEVICE == 14 && PF_CUDA == 15);
    CHECK(PF_INTERNAL == 16 && PF_BUSY == 17 && PF_NOT_READY == 18);
    CHECK(strcmp(pf_status_name(PF_BUSY), "PF_BUSY") == 0);
    CHECK(PF_U8 == 0 && PF_U16 == 1 && PF_F32 == 2);
    CHECK(PF_OUTPUT_IMAGE == 0 && PF_OUTPUT_TABLE == 1);
    CHECK(PF_TABLE_ANY == 0 && PF_TABLE_CSV == 1 && PF_TABLE_JSON == 2);
    CHECK(PF_UNIT_POINT == 0 && PF_UNIT_STENCIL == 1 && PF_UNIT_RESAMPLE == 2 &&
          PF_UNIT_REDUCE == 3);
    CHECK(PF_LOG_NOTICE == 0 && PF_LOG_WARNING == 1 && PF_LOG_ERROR == 2);
    return pf_test_done("test_old_struct");
}
