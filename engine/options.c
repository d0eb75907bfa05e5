/* engine/options.c: a pipeline's options, in one table. The pipeline loader (the
 * "options" object of a file) and pf_pipeline_set_option (the C API, values as text)
 * both set options through it, so both accept the same names, types and ranges and
 * give the same messages; pipelines/schema.json lists the same options
 * (tests/pipelines/test_pipeline_load.c checks that the two agree).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"
#include "pipefuse/tools.h"

typedef enum opt_type { OPT_BOOL, OPT_INT, OPT_ENUM, OPT_MS, OPT_BYTES } opt_type;

typedef struct opt_desc {
    const char *name;
    opt_type type;
    size_t offset; /* in pf_options */
    double min, max;
    const char *const *enum_names;
    int replans; /* a change drops the plan: the next frame plans again */
    const char *doc;
} opt_desc;

static const char *const backend_names[] = {"auto", "cpu", "cuda", NULL};
static const char *const precision_names[] = {"exact", "fast", NULL};

#define OPT(name, type, field, min, max, names, replans, doc)                                      \
    {                                                                                              \
        name, type, offsetof(pf_options, field), min, max, names, replans, doc                     \
    }
static const opt_desc opts[] = {
    OPT("backend", OPT_ENUM, backend, 0, 2, backend_names, 1,
        "auto: CUDA when a device is usable, else the CPU"),
    OPT("fusion", OPT_BOOL, fusion, 0, 1, NULL, 1, "fuse adjacent point stages into one kernel"),
    OPT("graph", OPT_BOOL, graph, 0, 1, NULL, 0,
        "capture each frame as a CUDA Graph and replay it"),
    OPT("streams", OPT_INT, streams, 0, 64, NULL, 1,
        "CUDA streams for independent branches; 0: from the graph's width"),
    OPT("threads", OPT_INT, threads, 0, 1024, NULL, 0, "CPU worker threads; 0: the engine's"),
    OPT("slots", OPT_INT, slots, 0, PF_MAX_SLOTS, NULL, 1,
        "CUDA frames in flight; 0: the default (3)"),
    OPT("max_launch_ms", OPT_MS, max_launch_ms, 0, 1e9, NULL, 1,
        "launch budget for watchdog-safe splitting; 0: from the device"),
    OPT("max_memory", OPT_BYTES, max_memory, 0, 1e18, NULL, 1,
        "bytes of buffers a plan may take; 0: no limit"),
    OPT("profile", OPT_BOOL, profile, 0, 1, NULL, 0, "time every launch with CUDA events"),
    OPT("precision", OPT_ENUM, precision, 0, 1, precision_names, 1,
        "exact: the generated kernels give the CPU's values; fast: they may contract "
        "multiplies and adds into FMA and use the GPU's fast division, square root, exp, "
        "log and pow (docs/stages.md states the bound)"),
    OPT("clusters", OPT_BOOL, clusters, 0, 1, NULL, 1,
        "a sum by columns adds a stripe's blocks in a thread-block cluster (sm_90 and later)"),
};
#define N_OPTS ((int)(sizeof opts / sizeof opts[0]))

void pf_options_default(pf_options *o)
{
    memset(o, 0, sizeof *o);
    o->backend = PF_BACKEND_AUTO;
    o->fusion = 1;
    o->graph = 1;
    o->clusters = 1;
}

int pf_option_count(void)
{
    return N_OPTS;
}

const char *pf_option_name(int i)
{
    return i >= 0 && i < N_OPTS ? opts[i].name : NULL;
}

static const opt_desc *find(const char *name)
{
    for (int i = 0; i < N_OPTS; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

static void describe(const json_t *v, char *buf, size_t size)
{
    char t[32];
    if (json_is_number(v))
        snprintf(buf, size, "the number %s", pf_number_text(json_number_value(v), 0, t, sizeof t));
    else if (json_is_string(v))
        snprintf(buf, size, "\"%.40s\"", json_string_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, size, "%s", json_is_true(v) ? "true" : "false");
    else
        snprintf(buf, size, "%s",
                 json_is_null(v)    ? "null"
                 : json_is_array(v) ? "an array"
                                    : "an object");
}

static void unknown(const char *name, char *err, size_t err_size)
{
    const char *names[N_OPTS];
    for (int i = 0; i < N_OPTS; i++)
        names[i] = opts[i].name;
    const char *near = pf_closest(name, names, N_OPTS);
    char hint[96] = "";
    if (near)
        snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
    snprintf(err, err_size, "unknown key '%s'%s", name, hint);
}

int pf_option_set(pf_options *o, const char *name, const json_t *v, int *replan, char *err,
                  size_t err_size)
{
    const opt_desc *d = find(name);
    if (!d) {
        unknown(name, err, err_size);
        return PF_PIPELINE;
    }
    char got[64];
    describe(v, got, sizeof got);
    void *field = (char *)o + d->offset;
    int changed = 0;
    switch (d->type) {
    case OPT_BOOL:
        if (!json_is_boolean(v)) {
            snprintf(err, err_size, "expected true or false, got %s", got);
            return PF_PIPELINE;
        }
        changed = *(int *)field != json_is_true(v);
        *(int *)field = json_is_true(v);
        break;
    case OPT_INT: {
        double x = json_number_value(v);
        if (!json_is_number(v) || x != floor(x)) { /* 2.0 and 1e2 are whole numbers too */
            snprintf(err, err_size, "expected an integer, got %s", got);
            return PF_PIPELINE;
        }
        if (x < d->min || x > d->max) {
            char a[32];
            snprintf(err, err_size, "%s is out of range [%g, %g]",
                     pf_number_text(x, 0, a, sizeof a), d->min, d->max);
            return PF_PIPELINE;
        }
        changed = *(int *)field != (int)x;
        *(int *)field = (int)x;
        break;
    }
    case OPT_ENUM: {
        const char *s = json_string_value(v);
        int k = -1, n = 0;
        while (d->enum_names[n])
            n++;
        for (int i = 0; s && i < n; i++)
            if (strcmp(d->enum_names[i], s) == 0)
                k = i;
        if (k < 0) {
            char list[128] = "";
            for (int i = 0; i < n; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", i ? ", " : "",
                         d->enum_names[i]);
            const char *near = s ? pf_closest(s, d->enum_names, n) : NULL;
            char hint[64] = "";
            if (near)
                snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
            if (s)
                snprintf(err, err_size, "unknown value '%.40s' (one of %s)%s", s, list, hint);
            else
                snprintf(err, err_size, "expected one of %s, got %s", list, got);
            return PF_PIPELINE;
        }
        changed = *(int *)field != k;
        *(int *)field = k;
        break;
    }
    case OPT_MS:
    case OPT_BYTES: {
        double x = json_number_value(v);
        int whole = d->type == OPT_BYTES;
        if (!json_is_number(v) || !(x >= d->min && x <= d->max) || (whole && x != floor(x))) {
            snprintf(err, err_size, "expected %s >= %g and <= %g (0: %s), got %s",
                     whole ? "a whole number of bytes" : "a number of milliseconds", d->min, d->max,
                     whole ? "no limit" : "from the device", got);
            return PF_PIPELINE;
        }
        if (whole) {
            changed = *(size_t *)field != (size_t)x;
            *(size_t *)field = (size_t)x;
        } else {
            changed = *(double *)field != x;
            *(double *)field = x;
        }
        break;
    }
    }
    if (replan)
        *replan = changed && d->replans;
    return PF_OK;
}

int pf_option_set_text(pf_options *o, const char *name, const char *text, int *replan, char *err,
                       size_t err_size)
{
    if (!text) {
        snprintf(err, err_size, "no value");
        return PF_PIPELINE;
    }
    /* The value as the JSON it would be in a file ("2.5", "true", "\"cuda\""), or a bare
       word as a string ("cuda"). */
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!v) /* any bytes: a value that is not UTF-8 is refused by name, not as no memory */
        v = json_string_nocheck(text);
    if (!v) {
        snprintf(err, err_size, "out of memory");
        return PF_NO_MEMORY;
    }
    int rc = pf_option_set(o, name, v, replan, err, err_size);
    json_decref(v);
    return rc;
}
