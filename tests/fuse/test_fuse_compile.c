#define _GNU_SOURCE
/* tests/fuse/test_fuse_compile.c: every built-in point op, and random point DAGs, go
 * through code generation and compile with NVRTC for sm_90; a broken op's compile
 * error names the stages, carries NVRTC's log and points at the source. No GPU is
 * needed; skipped (77) only where NVRTC itself is missing. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static pf_engine *eng;
static const char *dump;

/* Plans json on the CPU at 67x13 and builds its fused kernels; returns the status. */
static int build(const char *json, const char *what, int *n, char *err, size_t err_size)
{
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(eng, json, what, &p) != PF_OK) {
        snprintf(err, err_size, "%s", pf_engine_errmsg(eng));
        return -1;
    }
    pf_pipeline_set_option(p, "backend", "cpu");
    pf_shape s[64];
    for (int i = 0; i < 64; i++)
        s[i] = (pf_shape){67, 13};
    int rc = pf_pipeline_plan(p, s, pf_pipeline_input_count(p));
    if (rc == PF_OK)
        rc = pf_pipeline_build_kernels(p, 90, dump, n);
    snprintf(err, err_size, "%s", pf_pipeline_errmsg(p));
    pf_pipeline_destroy(p);
    return rc;
}

int main(void)
{
    /* A fresh cache, so every kernel really goes through NVRTC. */
    char cache[4200];
    snprintf(cache, sizeof cache, "%s/Testing/tmp-fuse-cache-%d", PF_BINARY_DIR, (int)getpid());
    setenv("PIPEFUSE_CACHE_DIR", cache, 1);
    eng = pf_test_engine();
    dump = pf_test_tmpdir("fuse_compile");
    char err[8192];
    int n = 0;
    if (build("{\"pipefuse\":1,\"inputs\":[\"a\"],\"stages\":[{\"id\":\"s\",\"op\":\"invert\"}],"
              "\"outputs\":{\"o\":\"s\"}}",
              "probe", &n, err, sizeof err) == PF_UNSUPPORTED) {
        printf("test_fuse_compile: no NVRTC (%s): skipped\n", err);
        pf_engine_destroy(eng);
        return 77;
    }

    /* Every built-in point stage on its own. */
    int ops = 0;
    for (int i = 0; i < pf_engine_stage_count(eng); i++) {
        const pf_stage_desc *d = pf_engine_stage(eng, i, NULL, NULL);
        if (d->kind != PF_STAGE_POINT)
            continue;
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"pipefuse\":1,\"inputs\":[\"a\",\"b\",\"c\"],\"stages\":[{\"id\":\"s\","
                 "\"op\":\"%s\",\"inputs\":[%s]}],\"outputs\":{\"o\":\"s\"}}",
                 d->name,
                 d->n_inputs == 1   ? "\"a\""
                 : d->n_inputs == 2 ? "\"a\",\"b\""
                                    : "\"a\",\"b\",\"c\"");
        n = 0;
        int rc = build(json, d->name, &n, err, sizeof err);
        CHECKF(rc == PF_OK && n == 1, "%s: %s", d->name, err);
        ops++;
    }
    CHECKF(ops >= 17, "only %d point stages found", ops);

    /* Random DAGs of point stages: one kernel each, reading several inputs. */
    static const char *const one[] = {"brightness", "gamma",        "saturation", "vignette",
                                      "levels",     "color_matrix", "threshold",  "linear"};
    static const char *const two[] = {"blend", "alpha_over", "difference", "add", "multiply"};
    pf_rng r;
    pf_rng_seed(&r, 4242);
    for (int t = 0; t < 40; t++) {
        char json[8192];
        size_t o = (size_t)snprintf(json, sizeof json,
                                    "{\"pipefuse\":1,\"inputs\":[\"a\",\"b\"],\"stages\":[");
        int k = pf_rng_range(&r, 2, 16);
        for (int i = 0; i < k; i++) {
            char x[16], y[16];
            snprintf(x, sizeof x, i ? "s%d" : "a", i ? pf_rng_range(&r, 0, i - 1) : 0);
            snprintf(y, sizeof y, "%s", pf_rng_range(&r, 0, 1) ? "b" : "a");
            if (pf_rng_range(&r, 0, 1))
                o += (size_t)snprintf(json + o, sizeof json - o,
                                      "%s{\"id\":\"s%d\",\"op\":\"%s\",\"inputs\":[\"%s\"]}",
                                      i ? "," : "", i, one[pf_rng_u32(&r) % 8], x);
            else
                o += (size_t)snprintf(json + o, sizeof json - o,
                                      "%s{\"id\":\"s%d\",\"op\":\"%s\",\"inputs\":[\"%s\",\"%s\"]}",
                                      i ? "," : "", i, two[pf_rng_u32(&r) % 5], x, y);
        }
        snprintf(json + o, sizeof json - o, "],\"outputs\":{\"o\":\"s%d\",\"mid\":\"s%d\"}}", k - 1,
                 k / 2);
        n = 0;
        int rc = build(json, "random", &n, err, sizeof err);
        CHECKF(rc == PF_OK && n == 1, "case %d (seed 4242): %s\n%s", t, err, json);
    }
    /* Separable stencils as generated kernels: a chain run on the rows they stage (one
       unit: the chain is absorbed), or whose image is an output too (two). */
    static const char *const seps[] = {"gaussian", "box"};
    for (int k = 0; k < 4; k++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"pipefuse\":1,\"inputs\":[\"x\"],\"stages\":["
                 "{\"id\":\"a\",\"op\":\"brightness\",\"inputs\":[\"x\"]},"
                 "{\"id\":\"b\",\"op\":\"saturation\"},{\"id\":\"v\",\"op\":\"vignette\"},"
                 "{\"id\":\"s\",\"op\":\"%s\",\"inputs\":[\"v\"]}],"
                 "\"outputs\":{\"o\":\"s\"%s}}",
                 seps[k % 2], k < 2 ? "" : ",\"img\":\"v\"");
        n = 0;
        int rc = build(json, seps[k % 2], &n, err, sizeof err);
        CHECKF(rc == PF_OK && n == (k < 2 ? 1 : 2), "%s%s: %d kernels: %s", seps[k % 2],
               k < 2 ? "" : " (chain an output)", n, err);
    }
    /* The mixed bench's shape: the chain the gaussian takes in is recomputed in the
       sobel's epilogue, so two units build (the blur's passes, the sobel's kernel). */
    n = 0;
    int mrc = build("{\"pipefuse\":1,\"inputs\":[\"x\"],\"stages\":["
                    "{\"id\":\"a\",\"op\":\"brightness\",\"inputs\":[\"x\"]},"
                    "{\"id\":\"v\",\"op\":\"saturation\"},"
                    "{\"id\":\"g\",\"op\":\"gaussian\",\"inputs\":[\"v\"]},"
                    "{\"id\":\"e\",\"op\":\"sobel\",\"inputs\":[\"g\"]},"
                    "{\"id\":\"m\",\"op\":\"blend\",\"inputs\":[\"v\",\"e\"]}],"
                    "\"outputs\":{\"o\":\"m\"}}",
                    "mixed", &n, err, sizeof err);
    CHECKF(mrc == PF_OK && n == 2, "mixed: %d kernels: %s", n, err);
    /* The sources were written where asked. */
    struct stat st;
    char path[4200];
    snprintf(path, sizeof path, "%s/pf_fused_u0.cu", dump);
    CHECK(stat(path, &st) == 0 && st.st_size > 1000);

    /* Two units of the same ops (gamma then invert, on inputs x and y) under other ids
       generate one source but for names in comments: one compile, one kernel cache hit.
       So a long chain's groups of one op compile once (100 000 stages: 782 groups). */
    {
        pf_pipeline *p = NULL;
        CHECK(pf_pipeline_load_string(eng,
                                      "{\"pipefuse\":1,\"inputs\":[\"x\",\"y\"],\"stages\":["
                                      "{\"id\":\"a\",\"op\":\"gamma\",\"inputs\":[\"x\"]},{\"id\":"
                                      "\"a2\",\"op\":\"invert\"},"
                                      "{\"id\":\"b\",\"op\":\"gamma\",\"inputs\":[\"y\"]},{\"id\":"
                                      "\"b2\",\"op\":\"invert\"}],"
                                      "\"outputs\":{\"o1\":\"a2\",\"o2\":\"b2\"}}",
                                      "twins", &p) == PF_OK);
        pf_shape s[2] = {{67, 13}, {67, 13}};
        int nk = 0;
        CHECK(p && pf_pipeline_set_option(p, "backend", "cpu") == PF_OK &&
              pf_pipeline_plan(p, s, 2) == PF_OK);
        CHECKF(p && pf_pipeline_build_kernels(p, 90, NULL, &nk) == PF_OK, "%s",
               p ? pf_pipeline_errmsg(p) : "");
        pf_stats st2 = {.size = sizeof st2};
        CHECK(p && pf_pipeline_stats(p, &st2) == PF_OK);
        CHECKF(nk == 2 && st2.kernel_compiles <= 1 && st2.kernel_cache_hits >= 1,
               "twin units: %d kernels, %llu compiles, %llu cache hits", nk, st2.kernel_compiles,
               st2.kernel_cache_hits);
        pf_pipeline_destroy(p);
    }
    pf_engine_destroy(eng);

    /* A compile error: the message blames the op that fails alone (bad), not the one
       fused with it (warm), with NVRTC's log at the op header's own line. */
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = BROKEN_PLUGIN_DIR;
    eng = pf_test_engine_with(&cfg);
    dump = NULL;
    int rc =
        build("{\"pipefuse\":1,\"inputs\":[\"a\"],\"stages\":["
              "{\"id\":\"warm\",\"op\":\"brightness\"},{\"id\":\"bad\",\"op\":\"broken_scale\"}],"
              "\"outputs\":{\"o\":\"bad\"}}",
              "broken.json", &n, err, sizeof err);
    CHECKF(rc == PF_STAGE, "status %d", rc);
    CHECKF(strstr(err, "NVRTC") && strstr(err, "stage 'bad' (op broken_scale of ") &&
               !strstr(err, "warm") && strstr(err, "undefined_symbol") &&
               strstr(err, "op header of stage broken_scale(4): error"),
           "message: %s", err);
    /* The same op run inside a summing reduce's kernel and a stencil's tile (a prologue,
       and an epilogue reading the stencil): the error names it, where it used to look
       for an op header of the reduce stage itself and crash. */
    static const char *const hosts[] = {
        "{\"id\":\"t\",\"op\":\"colsum\",\"inputs\":[\"bad\"]}],\"outputs\":{\"o\":\"t\"}}",
        "{\"id\":\"t\",\"op\":\"rowsum\",\"inputs\":[\"bad\"]}],\"outputs\":{\"o\":\"t\"}}",
        "{\"id\":\"t\",\"op\":\"sobel\",\"inputs\":[\"bad\"]}],\"outputs\":{\"o\":\"t\"}}",
        "{\"id\":\"t\",\"op\":\"sobel\",\"inputs\":[\"a\"]},{\"id\":\"bad2\",\"op\":"
        "\"broken_scale\",\"inputs\":[\"t\"]}],\"outputs\":{\"o\":\"bad2\"}}",
        "{\"id\":\"t\",\"op\":\"gaussian\",\"inputs\":[\"bad\"]}],\"outputs\":{\"o\":\"t\"}}"};
    for (int h = 0; h < 5; h++) {
        char json[1024], other[4096];
        snprintf(json, sizeof json,
                 "{\"pipefuse\":1,\"inputs\":[\"a\"],\"stages\":["
                 "{\"id\":\"bad\",\"op\":\"broken_scale\",\"inputs\":[\"a\"]},%s",
                 hosts[h]);
        int hrc = build(json, "broken_host.json", &n, other, sizeof other);
        CHECKF(hrc == PF_STAGE, "host %d: status %d: %s", h, hrc, other);
        CHECKF(strstr(other, "(op broken_scale of ") && strstr(other, "undefined_symbol"),
               "host %d: message: %s", h, other);
    }
    /* Frame descriptors by value where every argument fits in 4 KB with them, else
       through a pointer: a chain of `difference` stages, each reading a new input and
       each a pipeline output, so that a kernel has k + 1 inputs and k outputs (40 bytes
       of descriptor each) and 16 bytes of parameters a stage: 40 stages take 3896 of
       the 4032 bytes allowed, 45 would take 4376. */
    dump = pf_test_tmpdir("fuse_compile_io");
    static const int lens[] = {20, 40, 45};
    for (int l = 0; l < 3; l++) {
        char json[8192], lerr[4096], kpath[4200];
        int k = lens[l];
        pf_test_difference_chain(json, sizeof json, k);
        int lrc = build(json, "many_io.json", &n, lerr, sizeof lerr);
        CHECKF(lrc == PF_OK && n == 1, "%d stages: status %d, %d kernels: %s", k, lrc, n, lerr);
        snprintf(kpath, sizeof kpath, "%s/pf_fused_u0.cu", dump);
        size_t size = 0;
        char *text = pf_test_read_file(kpath, &size);
        CHECKF(text != NULL, "%d stages: no source at %s", k, kpath);
        if (!text)
            continue;
        static const char io_arg[] = "__grid_constant__ pf_fused_io IOB",
                          param_arg[] = "__grid_constant__ pf_fused_params PB";
        int by_value = memmem(text, size, io_arg, sizeof io_arg - 1) != NULL;
        CHECKF(by_value == (k <= 40), "%d stages: descriptors %s", k,
               by_value ? "by value" : "through a pointer");
        CHECKF(memmem(text, size, param_arg, sizeof param_arg - 1) != NULL,
               "%d stages: parameters not by value", k);
        free(text);
        remove(kpath);
    }

    const char *src = strstr(err, "source in ");
    if (src) {
        char file[4096];
        sscanf(src + 10, "%4095[^:]", file);
        CHECKF(stat(file, &st) == 0, "no source at %s", file);
        remove(file);
    }
    pf_engine_destroy(eng);
    CHECK(pf_test_remove_tree(cache) == 0);
    return pf_test_done("test_fuse_compile");
}
