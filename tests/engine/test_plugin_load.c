/* tests/engine/test_plugin_load.c: the plugin loader (engine/plugin_load.c) against the plugins of
 * plugins/testplug.c, one case per directory. A refused plugin is skipped: the engine
 * is still made, without its stages, with a warning that names the file and the
 * problem, and a pipeline naming one of its stages is told why; the good ones must load
 * and be listed with their file.
 *
 * Every case directory is copied under Testing/ with modes set here (0755), so that
 * the result does not depend on the umask the build ran with.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "pipefuse/stage_check.h"
#include "testutil.h"

/* ---- Setting up a case --------------------------------------------------------------- */

static int copy_file(const char *from, const char *to, mode_t mode)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        ok = 0;
    return ok && chmod(to, mode) == 0 ? 0 : -1;
}

/* A fresh directory holding the .so files of plugdirs/<name>, mode 0755 throughout.
   Returns its path (static storage, valid until the next call). */
static const char *case_dir(const char *name)
{
    char tmpname[128], src[4096], from[4096 + 256], to[4096 + 256];
    snprintf(tmpname, sizeof tmpname, "loader-%s", name);
    const char *dir = pf_test_tmpdir(tmpname);
    snprintf(src, sizeof src, "%s/%s", TP_PLUGDIRS, name);
    DIR *d = opendir(src);
    if (!d) {
        fprintf(stderr, "test_plugin_load: %s is missing (build the tp_* targets)\n", src);
        exit(1);
    }
    for (struct dirent *de; (de = readdir(d));) {
        if (!strstr(de->d_name, ".so"))
            continue;
        snprintf(from, sizeof from, "%s/%s", src, de->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, de->d_name);
        if (copy_file(from, to, 0755) != 0) {
            fprintf(stderr, "test_plugin_load: cannot copy %s to %s\n", from, to);
            exit(1);
        }
    }
    closedir(d);
    if (chmod(dir, 0755) != 0)
        exit(1);
    return dir;
}

/* ---- Creating engines ---------------------------------------------------------------- */

static char logged[8192];

static void capture_log(void *user, int level, const char *msg)
{
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%d:%s\n", level, msg);
}

static int create(const char *path, int no_builtin, pf_engine **e)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = path;
    cfg.use_env_path = 0;
    cfg.no_builtin = no_builtin;
    cfg.threads = 2;
    cfg.log = capture_log;
    logged[0] = 0;
    return pf_engine_create(&cfg, e);
}

/* pf_engine_create over dir alone must succeed with nothing from `names` (a file, or
   the directory) loaded, a warning that holds `names`, "skipped" and each of the
   NULL-terminated words, and the same reason in the message of a pipeline that names an
   op nothing defines. */
static int count_finding(void *user, const pf_check_finding *f)
{
    (void)user, (void)f;
    return 0;
}

static void expect_refused(const char *what, const char *dir, const char *names, ...)
{
    pf_engine *e = NULL;
    int rc = create(dir, 1, &e);
    CHECKF(rc == PF_OK, "%s: got %s (%s)", what, pf_status_name(rc), pf_engine_errmsg(e));
    if (rc != PF_OK) {
        pf_engine_destroy(e);
        return;
    }
    for (int i = 0; i < pf_engine_stage_count(e); i++) {
        const char *file = NULL;
        pf_engine_stage(e, i, &file, NULL);
        CHECKF(!file || strncmp(file, names, strlen(names)) != 0, "%s: %s was loaded", what, file);
    }
    CHECKF(strstr(logged, "1:") && strstr(logged, names) && strstr(logged, "; skipped"),
           "%s: no warning naming %s: %s", what, names, logged);
    va_list ap;
    va_start(ap, names);
    for (const char *w; (w = va_arg(ap, const char *));)
        CHECKF(strstr(logged, w) != NULL, "%s: warning lacks '%s': %s", what, w, logged);
    va_end(ap);
    pf_pipeline *p = NULL;
    rc = pf_pipeline_load_string(e,
                                 "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [{\"id\": "
                                 "\"s\", \"op\": \"tp_nothing\"}], \"outputs\": {\"o\": \"s\"}}",
                                 "unknown-op", &p);
    const char *msg = pf_engine_errmsg(e);
    CHECKF(rc != PF_OK && strstr(msg, "unknown op 'tp_nothing'") && strstr(msg, "not loaded") &&
               strstr(msg, names),
           "%s: the unknown op's message does not say what was not loaded: %s", what, msg);
    pf_pipeline_destroy(p);
    printf("%-14s skipped: %s", what, logged);
    pf_engine_destroy(e);
}

/* dir/file as one string (static, valid until the next call). */
static const char *file_in(const char *dir, const char *file)
{
    static char path[4096 + 64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return path;
}

/* ---- Refused plugins ----------------------------------------------------------------- */

static void test_refused(void)
{
    const char *d;
    char abi[64];
    d = case_dir("abi_major");
    expect_refused("abi_major", d, file_in(d, "abi2.so"), "ABI 2.0", NULL);

    d = case_dir("newer_minor");
    snprintf(abi, sizeof abi, "ABI %d.%d", PF_ABI_MAJOR, PF_ABI_MINOR + 1);
    expect_refused("newer_minor", d, file_in(d, "newer.so"), abi, NULL);

    d = case_dir("no_entry");
    expect_refused("no_entry", d, file_in(d, "noentry.so"), PF_PLUGIN_ENTRY_NAME, NULL);

    d = case_dir("null_entry");
    expect_refused("null_entry", d, file_in(d, "nullentry.so"), "no descriptor", NULL);

    /* The second file loaded (name order), a plugin of the same name with a stage of the
       same name, is the one refused, and names the first. */
    d = case_dir("dup");
    char first[4096 + 64];
    snprintf(first, sizeof first, "%s", file_in(d, "dup_a.so"));
    expect_refused("dup", d, file_in(d, "dup_b.so"), first, "tp_dup", "already defined", NULL);

    d = case_dir("bad_default");
    expect_refused("bad_default", d, file_in(d, "baddef.so"), "tp_bad_default.gain", "default",
                   NULL);

    /* An array default out of range is named by its element, not element 0. */
    d = case_dir("bad_array");
    expect_refused("bad_array", d, file_in(d, "badarray.so"), "tp_bad_array.v",
                   "default element [2] = 20", NULL);

    d = case_dir("bad_offset");
    expect_refused("bad_offset", d, file_in(d, "badoff.so"), "tp_bad_offset.gain", "offset 64",
                   NULL);

    d = case_dir("no_point_row");
    expect_refused("no_point_row", d, file_in(d, "norow.so"), "tp_norow", "point_row", NULL);

    d = case_dir("no_radius");
    expect_refused("no_radius", d, file_in(d, "noradius.so"), "tp_noradius", "radius", NULL);

    d = case_dir("tiny");
    expect_refused("tiny", d, file_in(d, "tiny.so"), "too small", NULL);

    /* n_stages more than the list holds: the slot past it, or a stage pointer, in memory
       the process cannot read is said, not read */
    d = case_dir("lying");
    expect_refused("lying", d, file_in(d, "lying.so"),
                   "stages[1] of 2 is memory this process cannot read", "n_stages", NULL);
    d = case_dir("lying_ptr");
    expect_refused("lying_ptr", d, file_in(d, "lying_ptr.so"),
                   "stages[1] of 3 is memory this process cannot read", NULL);
    /* a descriptor whose .size runs into unmapped memory: read as far as it can be, the
       rest unset (said), and the stage loads; one whose readable part is under the
       smallest descriptor is refused as too small, never read past */
    d = case_dir("oversize");
    pf_engine *oe = NULL;
    int orc = create(d, 1, &oe);
    CHECKF(orc == PF_OK && pf_engine_find_stage(oe, "tp_oversize") != NULL,
           "oversize: %s, stage %s (%s; log: %s)", pf_status_name(orc),
           oe && pf_engine_find_stage(oe, "tp_oversize") ? "loaded" : "missing",
           pf_engine_errmsg(oe), logged);
    CHECKF(strstr(logged, "stages[0]'s descriptor says it is") && strstr(logged, "can be read"),
           "oversize: not said: %s", logged);
    pf_pipeline *op = NULL;
    if (orc == PF_OK) {
        int prc = pf_pipeline_load_string(oe,
                                          "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": "
                                          "[{\"id\": \"s\", \"op\": \"tp_oversize\"}], "
                                          "\"outputs\": {\"o\": \"s\"}}",
                                          "oversize", &op);
        CHECKF(prc == PF_OK, "oversize: a pipeline of its stage: %s", pf_engine_errmsg(oe));
    }
    pf_pipeline_destroy(op);
    pf_engine_destroy(oe);
    d = case_dir("oversize_short");
    expect_refused("oversize_short", d, file_in(d, "oversize_short.so"), "too small", NULL);

    /* the validator (`pipefuse plugin check` walks the list when it may): not readable */
    static const char *const lying[] = {"lying", "lying.so", "lying_ptr", "lying_ptr.so"};
    for (int k = 0; k < 4; k += 2) {
        d = case_dir(lying[k]);
        void *h = dlopen(file_in(d, lying[k + 1]), RTLD_NOW | RTLD_LOCAL);
        CHECKF(h != NULL, "%s: %s", lying[k], dlerror());
        if (!h)
            continue;
        const pf_plugin_desc *(*entry)(const pf_host_api *);
        *(void **)&entry = dlsym(h, PF_PLUGIN_ENTRY_NAME);
        int readable = 1;
        int errors = entry ? pf_plugin_check(entry(NULL), &readable, count_finding, NULL) : -1;
        CHECKF(entry && errors > 0 && !readable, "%s: %d errors, readable %d", lying[k], errors,
               readable);
        dlclose(h);
    }
}

/* Plugins, or directories of them, that other users may write to are not loaded. */
static void test_permissions(void)
{
    const char *d = case_dir("good");
    CHECK(chmod(d, 0777) == 0);
    expect_refused("dir 0777", d, d, "mode 777", NULL);
    CHECK(chmod(d, 0755) == 0);

    char path[4096 + 64];
    snprintf(path, sizeof path, "%s", file_in(d, "good.so"));
    CHECK(chmod(path, 0664) == 0);
    expect_refused("file 0664", d, path, "mode 664", NULL);
    CHECK(chmod(path, 0646) == 0);
    expect_refused("file 0646", d, path, "mode 646", NULL);
    CHECK(chmod(path, 0755) == 0);

    /* Restored, the same directory loads: the refusals were for the modes alone. */
    pf_engine *e = NULL;
    int rc = create(d, 1, &e);
    CHECKF(rc == PF_OK, "good after chmod back: %s", pf_engine_errmsg(e));
    pf_engine_destroy(e);
}

/* ---- Plugins that load --------------------------------------------------------------- */

/* The index of stage name in e, with its file and plugin name; -1 when absent. */
static int stage_index(const pf_engine *e, const char *name, const char **file, const char **plugin)
{
    for (int i = 0; i < pf_engine_stage_count(e); i++)
        if (strcmp(pf_engine_stage(e, i, file, plugin)->name, name) == 0)
            return i;
    return -1;
}

static void test_good(void)
{
    const char *d = case_dir("good");
    char good[4096 + 64];
    snprintf(good, sizeof good, "%s", file_in(d, "good.so"));

    pf_engine *e = NULL;
    int rc = create(d, 1, &e);
    CHECKF(rc == PF_OK, "good: %s", pf_engine_errmsg(e));
    CHECKF(pf_engine_stage_count(e) == 2, "good alone: %d stages", pf_engine_stage_count(e));
    const char *file = NULL, *plugin = NULL;
    int i = stage_index(e, "tp_good", &file, &plugin);
    CHECK(i >= 0);
    if (i >= 0) {
        CHECKF(file && strcmp(file, good) == 0, "file %s, expected %s", file, good);
        CHECK(plugin && strcmp(plugin, "testplug") == 0);
        const pf_stage_desc *sd = pf_engine_find_stage(e, "tp_good");
        CHECK(sd == pf_engine_stage(e, i, NULL, NULL));
        CHECK(sd && sd->n_params == 1 && strcmp(sd->params[0].name, "gain") == 0);
    }
    CHECK(pf_engine_find_stage(e, "gaussian") == NULL); /* no_builtin */
    CHECK(pf_engine_stage(e, -1, NULL, NULL) == NULL);
    CHECK(pf_engine_stage(e, pf_engine_stage_count(e), NULL, NULL) == NULL);
    pf_engine_destroy(e);

    /* With the built-in plugins, first: their stages come from PF_PLUGIN_DIR. */
    rc = create(d, 0, &e);
    CHECKF(rc == PF_OK, "good + built-ins: %s", pf_engine_errmsg(e));
    CHECK(stage_index(e, "tp_good", NULL, NULL) > stage_index(e, "gaussian", &file, NULL));
    CHECKF(file && strncmp(file, PF_PLUGIN_DIR, strlen(PF_PLUGIN_DIR)) == 0, "gaussian from %s",
           file ? file : "(none)");
    pf_engine_destroy(e);

    /* An older minor (the same version when the engine is at minor 0) loads, and two
       directories in one path both load. */
    char both[2 * 4096 + 8];
    const char *older = case_dir("older_minor");
    snprintf(both, sizeof both, "%s", older);
    d = case_dir("good");
    snprintf(both + strlen(both), sizeof both - strlen(both), ":%s", d);
    rc = create(both, 1, &e);
    CHECKF(rc == PF_OK, "older minor: %s", pf_engine_errmsg(e));
    CHECK(stage_index(e, "tp_older_minor", &file, NULL) == 0);
    CHECK(file && strstr(file, "older.so"));
    CHECK(stage_index(e, "tp_good", NULL, NULL) == 1);
    pf_engine_destroy(e);

    /* A missing directory on the path is skipped with a warning that names it. */
    rc = create("/nonexistent/pipefuse-plugins", 1, &e);
    CHECKF(rc == PF_OK, "missing dir: %s", pf_engine_errmsg(e));
    CHECKF(strstr(logged, "1:") && strstr(logged, "/nonexistent/pipefuse-plugins"), "log: %s",
           logged);
    pf_engine_destroy(e);
}

/* A plugin built against an older SDK has shorter stage structs; the engine promises to
   read the fields past a struct's size as zero (here the plugin holds non-NULL junk
   there). */
static void test_short_structs(void)
{
    const char *d = case_dir("short");
    pf_engine *e = NULL;
    int rc = create(d, 1, &e);
    CHECKF(rc == PF_OK, "short: %s", pf_engine_errmsg(e));
    if (rc != PF_OK) {
        pf_engine_destroy(e);
        return;
    }
    const pf_stage_desc *pt = pf_engine_find_stage(e, "tp_short_point");
    const pf_stage_desc *rd = pf_engine_find_stage(e, "tp_short_reduce");
    CHECK(pt && rd);
    if (!pt || !rd) {
        pf_engine_destroy(e);
        return;
    }
    CHECK(pt->point_row != NULL); /* inside the struct: kept */
    CHECK(pt->point_cuda == NULL && pt->radius == NULL && pt->run_cpu == NULL &&
          pt->run_cuda == NULL && pt->columns == NULL);
    CHECK(rd->combine != NULL && rd->partial_len != NULL);
    CHECK(rd->columns == NULL && rd->row_name == NULL);

    /* And they run: x * 3, and the pixel count. */
    static const char json[] =
        "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": ["
        "{\"id\": \"s\", \"op\": \"tp_short_point\", \"params\": {\"gain\": 3}},"
        "{\"id\": \"n\", \"op\": \"tp_short_reduce\", \"inputs\": [\"s\"]}],"
        "\"outputs\": {\"img\": \"s\", \"count\": \"n\"}}";
    pf_pipeline *p = NULL;
    rc = pf_pipeline_load_string(e, json, "short", &p);
    CHECKF(rc == PF_OK, "%s", pf_engine_errmsg(e));
    if (rc == PF_OK) {
        float in[5 * 3 * 4], out[5 * 3 * 4];
        for (int k = 0; k < 60; k++)
            in[k] = (float)k / 64.0f;
        pf_frame fi = {in, 5, 3, 5 * 16, PF_F32, 4}, fo = {out, 5, 3, 5 * 16, PF_F32, 4};
        pf_frame outs[2] = {fo, {0}};
        rc = pf_pipeline_run(p, &fi, 1, outs, 2);
        CHECKF(rc == PF_OK, "%s", pf_pipeline_errmsg(p));
        for (int k = 0; rc == PF_OK && k < 60; k++)
            CHECKF(out[k] == in[k] * 3.0f, "pixel value %d: %g", k, out[k]);
        pf_table t;
        CHECK(pf_pipeline_table(p, 1, &t) == PF_OK);
        CHECK(t.rows == 1 && t.cols == 1 && t.data && t.data[0] == 15.0);
        CHECK(t.columns == NULL && t.row_name == NULL);
    }
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
}

/* A pipeline of one stage op with params (JSON text) on engine e: its load status. */
static int load_one(pf_engine *e, const char *op, const char *params, pf_pipeline **p)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [{\"id\": \"s\", \"op\": "
             "\"%s\", \"params\": %s}], \"outputs\": {\"o\": \"s\"}}",
             op, params);
    *p = NULL;
    return pf_pipeline_load_string(e, json, "one-stage", p);
}

/* Two plugins (of different names) with a stage of the same name both load: the name
   is the first on the path, with a warning naming both files; plugin.name picks. */
static void test_same_stage_name(void)
{
    char a[4096], b[4096], both[8300];
    snprintf(a, sizeof a, "%s", case_dir("dup"));
    snprintf(b, sizeof b, "%s", case_dir("dup_other"));
    snprintf(both, sizeof both, "%s:%s", a, b);
    pf_engine *e = NULL;
    int rc = create(both, 1, &e);
    CHECKF(rc == PF_OK, "dup + dup_other: %s", pf_engine_errmsg(e));
    CHECKF(strstr(logged, "stage 'tp_dup' is defined by") &&
               strstr(logged, file_in(b, "dup_c.so")) && strstr(logged, "'otherplug.tp_dup'"),
           "no warning naming both files: %s", logged);
    const char *file = NULL;
    const pf_stage_desc *first = pf_engine_find_stage(e, "tp_dup");
    const pf_stage_desc *other = pf_engine_find_stage(e, "otherplug.tp_dup");
    CHECK(first && other && first != other);
    CHECK(pf_engine_find_stage(e, "testplug.tp_dup") == first);
    CHECK(pf_engine_find_stage(e, "nosuch.tp_dup") == NULL);
    for (int i = 0; i < pf_engine_stage_count(e); i++)
        if (pf_engine_stage(e, i, &file, NULL) == other)
            CHECKF(strstr(file, "dup_c.so"), "otherplug.tp_dup from %s", file);
    pf_pipeline *p = NULL;
    rc = load_one(e, "otherplug.tp_dup", "{\"gain\": 2}", &p);
    CHECKF(rc == PF_OK, "otherplug.tp_dup: %s", pf_engine_errmsg(e));
    pf_pipeline_destroy(p);
    rc = load_one(e, "otherplug.tp_dupe", "{}", &p);
    CHECKF(rc != PF_OK && strstr(pf_engine_errmsg(e), "did you mean 'otherplug.tp_dup'"), "%s",
           pf_engine_errmsg(e));
    pf_engine_destroy(e);
}

/* Ranges: min > max is refused from ABI 1.1 and means unbounded for 1.0 plugins. */
static void test_ranges(void)
{
    const char *d = case_dir("swapped");
    expect_refused("swapped", d, file_in(d, "swapped.so"), "tp_swapped.gain",
                   "min 10 is above max 0", "PF_NO_MIN", NULL);
    d = case_dir("swapped_old");
    pf_engine *e = NULL;
    int rc = create(d, 1, &e);
    CHECKF(rc == PF_OK && pf_engine_find_stage(e, "tp_swapped"), "ABI 1.0, min > max: %s %s",
           pf_engine_errmsg(e), logged);
    pf_pipeline *p = NULL;
    rc = load_one(e, "tp_swapped", "{\"gain\": 1000}", &p);
    CHECKF(rc == PF_OK, "ABI 1.0 min > max is unbounded: %s", pf_engine_errmsg(e));
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
}

/* reduce_sum (ABI 1.3): a value the engine does not know, or one on a stage that is not
   a reduce, is refused; a sum whose table has another shape is a fault plugin check
   reports, and the engine loads the stage. */
static void test_reduce_sum(void)
{
    const char *d = case_dir("reduce_sum");
    expect_refused("reduce_sum 3", d, file_in(d, "rsum.so"), "tp_reduce_sum: declares reduce_sum 3",
                   "PF_REDUCE_SUM_COLUMNS", "PF_REDUCE_SUM_ROWS", NULL);
    d = case_dir("reduce_sum_point");
    expect_refused("reduce_sum point", d, file_in(d, "rsum_point.so"),
                   "tp_reduce_sum_point: declares reduce_sum 1 on a point stage",
                   "only reduce stages", NULL);
    d = case_dir("reduce_sum_shape");
    pf_engine *e = NULL;
    int rc = create(d, 1, &e);
    CHECKF(rc == PF_OK && pf_engine_find_stage(e, "tp_reduce_sum_shape"),
           "a sum of the wrong shape is a fault, not an error: %s %s", pf_engine_errmsg(e), logged);
    pf_engine_destroy(e);
}

/* A stage with several errors is refused with the first, in the order of its fields. */
static void test_first_error(void)
{
    const char *d = case_dir("many_faults");
    expect_refused("many faults", d, file_in(d, "many.so"),
                   "tp_many_faults: takes 0 inputs; 1 to 8 are allowed", NULL);
    CHECKF(!strstr(logged, "default 25") && !strstr(logged, "out_channels"),
           "the loader names only the first error: %s", logged);
}

/* A stencil's radius must be 0 to PF_MAX_RADIUS, with its defaults and with the params
   of a pipeline or a later change. */
static void test_radius_limit(void)
{
    const char *d = case_dir("radius_default");
    expect_refused("radius 300", d, file_in(d, "bigr.so"), "tp_radius_default",
                   "radius() return 300", "PF_MAX_RADIUS", NULL);
    d = case_dir("radius");
    pf_engine *e = NULL;
    int rc = create(d, 1, &e);
    CHECKF(rc == PF_OK, "radius: %s", pf_engine_errmsg(e));
    static const struct {
        const char *params;
        int ok;
    } cases[] = {{"{\"r\": 0}", 1},
                 {"{\"r\": 256}", 1},
                 {"{\"r\": 257}", 0},
                 {"{\"r\": -1}", 0},
                 {"{\"r\": 2147483647}", 0}};
    for (size_t i = 0; rc == PF_OK && i < sizeof cases / sizeof cases[0]; i++) {
        pf_pipeline *p = NULL;
        int st = load_one(e, "tp_radius", cases[i].params, &p);
        CHECKF((st == PF_OK) == cases[i].ok, "radius %s: %s", cases[i].params,
               st == PF_OK ? "accepted" : pf_engine_errmsg(e));
        if (!cases[i].ok)
            CHECKF(strstr(pf_engine_errmsg(e), "PF_MAX_RADIUS"), "%s", pf_engine_errmsg(e));
        if (st == PF_OK) {
            CHECK(pf_pipeline_set_param(p, "s.r", "1000") == PF_PARAM);
            CHECKF(strstr(pf_pipeline_errmsg(p), "radius"), "%s", pf_pipeline_errmsg(p));
        }
        pf_pipeline_destroy(p);
    }
    pf_engine_destroy(e);
}

/* What a stage declares its buffers and tables need, taken at its word (docs/plugins.md:
   scratch is at least scratch_bytes() bytes, a partial partial_len() doubles; pf_table
   readers walk columns[0 .. cols) and every row's row_name()): a size no machine can
   allocate, or names that fall short, refuse the plan with PF_PLUGIN naming the stage,
   where the sizes once wrapped around (the stage got no scratch, a 0-byte partial) and
   `pipefuse run` crashed writing the short table. */
static void run_expect(pf_pipeline *p, int w, int h, int want, const char *word)
{
    static unsigned char px[256 * 256 * 4];
    pf_frame in = {px, w, h, (size_t)w * 4, PF_U8, 4};
    pf_frame out = in; /* in place; tables ignore it */
    int rc = pf_pipeline_run(p, &in, 1, &out, 1);
    CHECKF(rc == want && (!word || strstr(pf_pipeline_errmsg(p), word)),
           "want %s with '%s': %s, %s", pf_status_name(want), word ? word : "", pf_status_name(rc),
           pf_pipeline_errmsg(p));
}

static void test_declared_sizes(void)
{
    const char *d = case_dir("sizes");
    pf_engine *e = NULL;
    int rc = create(d, 1, &e);
    CHECKF(rc == PF_OK, "sizes: %s", pf_engine_errmsg(e));
    if (rc != PF_OK) {
        pf_engine_destroy(e);
        return;
    }
    pf_pipeline *p = NULL;
    CHECK(load_one(e, "tp_scratch", "{}", &p) == PF_OK);
    run_expect(p, 16, 8, PF_OK, NULL);
    CHECK(pf_pipeline_set_param(p, "s.bytes", "-1") == PF_OK);
    run_expect(p, 16, 8, PF_PLUGIN, "scratch_bytes(params, 16, ");
    CHECKF(strstr(pf_pipeline_errmsg(p), "(s)") && strstr(pf_pipeline_errmsg(p), "tp_scratch"),
           "%s", pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_set_param(p, "s.bytes", "4096") == PF_OK);
    run_expect(p, 16, 8, PF_OK, NULL); /* the pipeline goes on */
    pf_pipeline_destroy(p);

    /* 256x256 is two bands of the CPU's 32768 pixels: 2 * 2^63 doubles wrap to 0 */
    CHECK(load_one(e, "tp_partial", "{}", &p) == PF_OK);
    run_expect(p, 256, 256, PF_OK, NULL);
    CHECK(pf_pipeline_set_param(p, "s.bytes", "-1") == PF_OK);
    run_expect(p, 256, 256, PF_PLUGIN, "partial_len()");
    pf_pipeline_destroy(p);

    CHECK(load_one(e, "tp_cols", "{}", &p) == PF_OK);
    run_expect(p, 16, 8, PF_PLUGIN, "the table has 3 columns but the stage's columns list names 1");
    pf_table t;
    CHECK(pf_pipeline_table(p, 0, &t) == PF_INVALID_ARGUMENT);
    pf_pipeline_destroy(p);

    CHECK(load_one(e, "tp_rows", "{}", &p) == PF_OK);
    run_expect(p, 16, 8, PF_PLUGIN, "row_name() gives no name (NULL) for row 1 of 2");
    pf_pipeline_destroy(p);

    /* a change the plan keeps is checked as planning checks: refused, nothing changed */
    CHECK(load_one(e, "tp_rows_param", "{}", &p) == PF_OK);
    run_expect(p, 16, 8, PF_OK, NULL);
    rc = pf_pipeline_set_param(p, "s.bytes", "0");
    CHECKF(rc == PF_PLUGIN &&
               strstr(pf_pipeline_errmsg(p), "row_name() gives no name (NULL) for row 1 of 2") &&
               strstr(pf_pipeline_errmsg(p), "s.bytes"),
           "%s: %s", pf_status_name(rc), pf_pipeline_errmsg(p));
    CHECK(pf_pipeline_set_float(p, "s.bytes", 0) == PF_PLUGIN);
    run_expect(p, 16, 8, PF_OK, NULL);
    CHECK(pf_pipeline_table(p, 0, &t) == PF_OK && t.rows == 2 && t.row_name &&
          t.row_name(t.params, 1) && strcmp(t.row_name(t.params, 1), "second") == 0);
    CHECK(pf_pipeline_set_param(p, "s.bytes", "7") == PF_OK);
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
}

/* A plugin's host->log reaches the log callback of the engine running its code, from
   its entry point (engine creation), its params (a load) and its bands on the engine's
   workers; it went to stderr whatever the application had set. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int plugin_lines[2];

static void count_plugin_log(void *user, int level, const char *msg)
{
    (void)user;
    pthread_mutex_lock(&log_mu);
    if (strcmp(msg, "tp_log: loaded") == 0 && level == 0)
        plugin_lines[0]++;
    if (strcmp(msg, "tp_log: ran a band") == 0 && level == 1)
        plugin_lines[1]++;
    pthread_mutex_unlock(&log_mu);
}

static void test_plugin_log(void)
{
    fflush(stderr);
    int saved = dup(2);
    char path[] = "/tmp/pf_plugin_log_XXXXXX";
    int fd = mkstemp(path);
    if (saved < 0 || fd < 0 || dup2(fd, 2) < 0) {
        CHECK(!"cannot redirect stderr");
        return;
    }
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = case_dir("log");
    cfg.no_builtin = 1;
    cfg.threads = 4;
    cfg.log = count_plugin_log;
    pf_engine *e = NULL;
    int rc = pf_engine_create(&cfg, &e);
    pf_pipeline *p = NULL;
    if (rc == PF_OK)
        rc = load_one(e, "tp_log", "{}", &p);
    for (int f = 0; f < 3 && rc == PF_OK; f++) {
        static unsigned char px[64 * 1024 * 4];
        pf_frame in = {px, 64, 1024, 64 * 4, PF_U8, 4};
        pf_frame out = in;
        rc = pf_pipeline_run(p, &in, 1, &out, 1);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECKF(rc == PF_OK, "%s", p ? pf_pipeline_errmsg(p) : pf_engine_errmsg(e));
    size_t n = 0;
    char *err = pf_test_read_file(path, &n);
    unlink(path);
    close(fd);
    CHECKF(n == 0, "the plugin's notices went to stderr: %.*s", (int)(n < 200 ? n : 200),
           err ? err : "");
    free(err);
    CHECKF(plugin_lines[0] == 1, "'loaded' reached the callback %d times", plugin_lines[0]);
    CHECKF(plugin_lines[1] >= 3, "'ran a band' reached the callback %d times", plugin_lines[1]);
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
}

/* PIPEFUSE_PLUGIN_PATH takes absolute directories only; a directory above a plugin
   directory that others can write to (not sticky) makes it refused. */
static void test_path_rules(void)
{
    pf_engine *e = NULL;
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.no_builtin = 1;
    cfg.log = capture_log;
    logged[0] = 0;
    setenv("PIPEFUSE_PLUGIN_PATH", "relative/plugins", 1);
    int rc = pf_engine_create(&cfg, &e);
    unsetenv("PIPEFUSE_PLUGIN_PATH");
    CHECKF(rc == PF_OK && strstr(logged, "refusing the relative directory 'relative/plugins'"),
           "relative entry: %s %s", pf_engine_errmsg(e), logged);
    pf_engine_destroy(e);

    char top[4096], dir[4200], so[4300];
    snprintf(top, sizeof top, "%s", pf_test_tmpdir("loader-parent"));
    snprintf(dir, sizeof dir, "%s/plugins", top);
    snprintf(so, sizeof so, "%s/good.so", dir);
    char from[4096 + 64];
    snprintf(from, sizeof from, "%s/good/good.so", TP_PLUGDIRS);
    CHECK(mkdir(dir, 0755) == 0 || chmod(dir, 0755) == 0);
    CHECK(copy_file(from, so, 0755) == 0);
    CHECK(chmod(top, 0777) == 0);
    expect_refused("parent 0777", dir, dir, "other users can write to", top, "above it", NULL);
    CHECK(chmod(top, 01777) == 0); /* sticky, as /tmp: others cannot replace what we own */
    rc = create(dir, 1, &e);
    CHECKF(rc == PF_OK && pf_engine_find_stage(e, "tp_good"), "sticky parent: %s %s",
           pf_engine_errmsg(e), logged);
    pf_engine_destroy(e);
    CHECK(chmod(top, 0755) == 0);
}

/* A stage that declares its output needs colour widens an "auto" output (gray to RGB,
   gray+alpha to RGBA), through later stages too; a declared format wins. */
static void test_out_channels(void)
{
    pf_engine *e = NULL;
    int rc = create(case_dir("colour"), 0, &e);
    CHECKF(rc == PF_OK && pf_engine_find_stage(e, "tp_sepia"), "colour: %s", pf_engine_errmsg(e));
    static const char json[] =
        "{\"pipefuse\": 1, \"inputs\": [\"x\"], \"stages\": [{\"id\": \"s\", \"op\": "
        "\"tp_sepia\"}, {\"id\": \"b\", \"op\": \"brightness\"}, {\"id\": \"plain\", \"op\": "
        "\"brightness\", \"inputs\": [\"x\"]}], \"outputs\": {\"o\": \"b\", \"gray\": {\"from\": "
        "\"b\", \"format\": \"gray8\"}, \"p\": \"plain\"}}";
    pf_pipeline *p = NULL;
    rc = rc == PF_OK ? pf_pipeline_load_string(e, json, "colour", &p) : rc;
    CHECKF(rc == PF_OK, "%s", pf_engine_errmsg(e));
    if (rc == PF_OK) {
        static const int want_o[5] = {0, 3, 4, 3, 4}, want_p[5] = {0, 1, 2, 3, 4};
        for (int ch = 1; ch <= 4; ch++) {
            CHECKF(pf_pipeline_output_channels(p, 0, ch) == want_o[ch], "o from %d: %d", ch,
                   pf_pipeline_output_channels(p, 0, ch));
            CHECK(pf_pipeline_output_channels(p, 1, ch) == 1);
            CHECKF(pf_pipeline_output_channels(p, 2, ch) == want_p[ch], "p from %d: %d", ch,
                   pf_pipeline_output_channels(p, 2, ch));
        }
        CHECK(pf_pipeline_output_channels(p, 3, 1) == 0 &&
              pf_pipeline_output_channels(NULL, 0, 1) == 0);
    }
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
}

int main(void)
{
    test_out_channels();
    test_refused();
    test_same_stage_name();
    test_ranges();
    test_radius_limit();
    test_reduce_sum();
    test_first_error();
    test_path_rules();
    test_permissions();
    test_good();
    test_short_structs();
    test_declared_sizes();
    test_plugin_log();
    return pf_test_done("test_plugin_load");
}
