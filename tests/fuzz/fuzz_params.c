/* tests/fuzz/fuzz_params.c: libFuzzer target for parameters set at run time.
 *
 * The input is lines of text:
 *
 *     gaussian.sigma=2.5          pf_pipeline_set_param(p, "gaussian.sigma", "2.5")
 *     f:resize.width=3            pf_pipeline_set_float(p, "resize.width", strtod("3"))
 *     o:fusion=false              pf_pipeline_set_option(p, "fusion", "false")
 *
 * The pipeline holds every registered stage that a key names (id = op name; brightness
 * when none does), each reading the pipeline inputs it needs and each an output, so a
 * key naming no stage still meets stages to be compared with. Lines before the first
 * empty line are set before the first frame; the rest between the first and a second
 * frame (shapes may change there). Frames are small and run on the CPU twice each
 * (fz_run_frame). Checked: no memory error or undefined behaviour, a message with every
 * refusal, and identical frames giving identical outputs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The plugins load before fuzzing starts, so libFuzzer counts their coverage. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_engine();
    return 0;
}

#define MAX_STAGES 8

/* Appends to a fixed buffer; the caller checks the length at the end. */
static void put(char *s, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *s, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    *len += (size_t)vsnprintf(s + *len, cap - *len, fmt, ap);
    va_end(ap);
}

/* The stages the keys of text name, in order of first mention, without repeats. */
static int named_stages(pf_engine *e, const char *text, const pf_stage_desc **out)
{
    int n = 0;
    for (const char *line = text, *next; line && *line; line = next ? next + 1 : NULL) {
        next = strchr(line, '\n');
        if (strncmp(line, "o:", 2) == 0)
            continue;
        if (strncmp(line, "f:", 2) == 0)
            line += 2;
        size_t len = strcspn(line, ".=\n");
        if (line[len] != '.' || len == 0 || len > 63)
            continue;
        char name[64];
        memcpy(name, line, len);
        name[len] = 0;
        const pf_stage_desc *d = pf_engine_find_stage(e, name);
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= out[i] == d;
        if (d && !seen && n < MAX_STAGES)
            out[n++] = d;
    }
    if (n == 0 && (out[0] = pf_engine_find_stage(e, "brightness")))
        n = 1;
    return n;
}

/* {"pipefuse": 1, "inputs": [...], "stages": [...], "outputs": {...}} */
static void pipeline_json(const pf_stage_desc *const *st, int n, char *s, size_t cap)
{
    size_t len = 0;
    int max_in = 1;
    for (int i = 0; i < n; i++)
        if (st[i]->n_inputs > max_in)
            max_in = st[i]->n_inputs;
    put(s, cap, &len, "{\"pipefuse\": 1, \"inputs\": [");
    for (int k = 0; k < max_in; k++)
        put(s, cap, &len, "%s\"in%d\"", k ? ", " : "", k);
    put(s, cap, &len, "], \"stages\": [");
    for (int i = 0; i < n; i++) {
        put(s, cap, &len, "%s{\"id\": \"%s\", \"op\": \"%s\", \"inputs\": [", i ? ", " : "",
            st[i]->name, st[i]->name);
        for (int k = 0; k < st[i]->n_inputs; k++)
            put(s, cap, &len, "%s\"in%d\"", k ? ", " : "", k);
        put(s, cap, &len, "]}");
    }
    put(s, cap, &len, "], \"outputs\": {");
    for (int i = 0; i < n; i++)
        put(s, cap, &len, "%s\"%s\": \"%s\"", i ? ", " : "", st[i]->name, st[i]->name);
    put(s, cap, &len, "}}");
    FZ_ASSERT(len < cap, "pipeline text of %zu bytes", len);
}

/* Applies one "key=value" line; a refusal must say why. */
static void apply(pf_pipeline *p, char *line)
{
    char *eq = strchr(line, '=');
    if (!eq)
        return;
    *eq = 0;
    const char *key = line, *value = eq + 1;
    int rc;
    if (strncmp(key, "o:", 2) == 0) {
        /* dump_kernels names a directory to write to: not from fuzzed text */
        if (strcmp(key + 2, "dump_kernels") == 0)
            return;
        rc = pf_pipeline_set_option(p, key + 2, value);
    } else if (strncmp(key, "f:", 2) == 0) {
        rc = pf_pipeline_set_float(p, key + 2, strtod(value, NULL));
    } else {
        rc = pf_pipeline_set_param(p, key, value);
    }
    if (rc != PF_OK)
        FZ_ASSERT(pf_pipeline_errmsg(p)[0] != 0, "%s=%s refused with %s and no message", key, value,
                  pf_status_name(rc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pf_engine *e = fz_engine();
    char *text = malloc(size + 1);
    FZ_ASSERT(text, "out of memory");
    memcpy(text, data, size);
    text[size] = 0;

    const pf_stage_desc *st[MAX_STAGES];
    char json[8192];
    pipeline_json(st, named_stages(e, text, st), json, sizeof json);
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(e, json, "params", &p) != PF_OK) {
        fprintf(stderr, "fuzz: the pipeline does not load: %s\n%s\n", pf_engine_errmsg(e), json);
        abort();
    }

    uint32_t h = fz_hash(data, size);
    int w = 1 + (int)(h % 7), ht = 1 + (int)(h / 7 % 7);
    pf_sample sample = (pf_sample)(h / 49 % 3);
    int channels = 1 + (int)(h / 147 % 4);
    int frames = 0;
    char *line = text;
    while (line) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        if (line[0] == 0 && frames == 0) {
            fz_run_frame(p, w, ht, sample, channels, h);
            frames++;
        } else {
            apply(p, line);
        }
        line = next;
    }
    fz_run_frame(p, w, ht, sample, channels, h);
    free(text);
    pf_pipeline_destroy(p);
    return 0;
}
