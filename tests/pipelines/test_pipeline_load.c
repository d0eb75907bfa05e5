/* tests/pipelines/test_pipeline_load.c: good pipeline files through the public API, and
 * the graph IR they load into (read through internal.h): defaults, values, shorthands,
 * topological order, outputs and options, the unused-stage warning, set_param messages.
 */
#include <dirent.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"
#include "pipefuse/png.h"
#include "testutil.h"

#define GOOD_DIR PF_SOURCE_DIR "/tests/pipelines/good"

/* ---- An engine whose log is captured ---------------------------------------------------- */

static char logbuf[8192];
static int log_warnings;

static void capture(void *user, int level, const char *msg)
{
    (void)user;
    if (level == 1)
        log_warnings++;
    size_t n = strlen(logbuf);
    snprintf(logbuf + n, sizeof logbuf - n, "%d %s\n", level, msg);
}

static pf_engine *engine_with_log(void)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.log = capture;
    return pf_test_engine_with(&cfg);
}

static pf_pipeline *load_good(pf_engine *e, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", GOOD_DIR, name);
    pf_pipeline *p = NULL;
    int st = pf_pipeline_load_file(e, path, &p);
    CHECKF(st == PF_OK && p, "%s: %s", name, pf_engine_errmsg(e));
    return st == PF_OK ? p : NULL;
}

/* pf_find_node, which the library does not export */
static int find_id(const pf_pipeline *p, const char *id)
{
    for (int i = 0; i < p->n_nodes; i++)
        if (strcmp(p->nodes[i].id, id) == 0)
            return i;
    return -1;
}

static const pf_node *node(const pf_pipeline *p, const char *id)
{
    int i = find_id(p, id);
    CHECKF(i >= 0, "no node '%s'", id);
    return i >= 0 ? &p->nodes[i] : NULL;
}

static const void *field(const pf_node *n, const char *param)
{
    const pf_param_desc *pd = NULL;
    for (int i = 0; n && i < n->desc->n_params; i++)
        if (strcmp(n->desc->params[i].name, param) == 0)
            pd = &n->desc->params[i];
    CHECKF(pd != NULL, "no param '%s'", param);
    return pd ? (const char *)n->params + pd->offset : NULL;
}

static float fparam(const pf_node *n, const char *param)
{
    const void *f = field(n, param);
    return f ? *(const float *)f : -12345.0f;
}

static int iparam(const pf_node *n, const char *param)
{
    const void *f = field(n, param);
    return f ? *(const int *)f : -12345;
}

/* The IR's invariants: inputs first, producers before consumers, in range. */
static void check_ir(const pf_pipeline *p)
{
    for (int i = 0; i < p->n_nodes; i++) {
        const pf_node *n = &p->nodes[i];
        CHECK(n->id && n->path);
        CHECK((i < p->n_inputs) == (n->desc == NULL));
        CHECK(i < p->n_inputs ? n->params == NULL && n->plugin == -1 : n->params != NULL);
        for (int k = 0; k < n->n_in; k++)
            CHECKF(n->in[k] >= 0 && n->in[k] < i, "%s: input %d is node %d", n->id, k, n->in[k]);
        if (n->desc)
            CHECK(n->n_in == n->desc->n_inputs);
    }
    for (int o = 0; o < p->n_outputs; o++)
        CHECK(p->outputs[o].node >= 0 && p->outputs[o].node < p->n_nodes &&
              p->nodes[p->outputs[o].node].used);
}

/* ---- Defaults --------------------------------------------------------------------------- */

/* Every registered stage, loaded with no params, holds its table's defaults. */
static void test_defaults(pf_engine *e)
{
    int n = pf_engine_stage_count(e);
    CHECKF(n >= 25, "only %d stages loaded", n);
    for (int s = 0; s < n; s++) {
        const pf_stage_desc *d = pf_engine_stage(e, s, NULL, NULL);
        char text[1024], ins[256] = "";
        for (int k = 0; k < d->n_inputs; k++) {
            size_t len = strlen(ins);
            snprintf(ins + len, sizeof ins - len, "%s\"src\"", k ? ", " : "");
        }
        snprintf(text, sizeof text,
                 "{\"pipefuse\": 1, \"inputs\": [\"src\"], \"stages\": [{\"id\": \"s\", "
                 "\"op\": \"%s\", \"inputs\": [%s]}], \"outputs\": {\"out\": \"s\"}}",
                 d->name, ins);
        pf_pipeline *p = NULL;
        int st = pf_pipeline_load_string(e, text, d->name, &p);
        CHECKF(st == PF_OK, "%s: %s", d->name, pf_engine_errmsg(e));
        if (st != PF_OK)
            continue;
        const pf_node *nd = &p->nodes[1];
        CHECK(nd->desc == d && nd->n_in == d->n_inputs);
        for (int i = 0; i < d->n_params; i++) {
            const pf_param_desc *pd = &d->params[i];
            const char *f = (const char *)nd->params + pd->offset;
            switch (pd->type) {
            case PF_PARAM_FLOAT:
                CHECKF(*(const float *)f == (float)pd->def, "%s.%s", d->name, pd->name);
                break;
            case PF_PARAM_INT:
            case PF_PARAM_BOOL:
            case PF_PARAM_ENUM:
                CHECKF(*(const int *)f == (int)pd->def, "%s.%s", d->name, pd->name);
                break;
            case PF_PARAM_FLOAT_ARRAY:
                for (int k = 0; k < pd->count; k++)
                    CHECKF(((const float *)f)[k] == pd->def_array[k], "%s.%s[%d]", d->name,
                           pd->name, k);
                break;
            }
        }
        pf_pipeline_destroy(p);
    }
}

/* ---- Good files ------------------------------------------------------------------------- */

static void test_chain(pf_engine *e)
{
    pf_pipeline *p = load_good(e, "chain.json");
    if (!p)
        return;
    check_ir(p);
    CHECK(pf_pipeline_input_count(p) == 1);
    CHECK(strcmp(pf_pipeline_input_name(p, 0), "src") == 0);
    CHECK(p->n_nodes == 6 && p->n_inputs == 1);
    static const char *const order[] = {"src", "warm", "punch", "soft", "mix", "out_gamma"};
    for (int i = 0; i < 6 && i < p->n_nodes; i++)
        CHECKF(strcmp(p->nodes[i].id, order[i]) == 0, "node %d is %s", i, p->nodes[i].id);
    /* no "inputs": the previous stage, or the first input for the first stage */
    CHECK(p->nodes[1].n_in == 1 && p->nodes[1].in[0] == 0);
    CHECK(p->nodes[2].in[0] == 1 && p->nodes[3].in[0] == 2);
    CHECK(p->nodes[4].n_in == 2 && p->nodes[4].in[0] == 3 && p->nodes[4].in[1] == 0);
    CHECK(p->nodes[5].in[0] == 4);
    CHECK(strcmp(p->nodes[0].path, "input") == 0);
    CHECK(strcmp(p->nodes[3].path, "stages[2]") == 0);
    CHECK(fparam(node(p, "warm"), "amount") == 0.1f);
    CHECK(fparam(node(p, "punch"), "amount") == 1.2f);
    CHECK(fparam(node(p, "punch"), "pivot") == 0.5f); /* default next to a given value */
    CHECK(fparam(node(p, "mix"), "opacity") == 0.25f);
    /* defaults of the options */
    CHECK(p->opts.backend == PF_BACKEND_AUTO && p->opts.fusion == 1 && p->opts.graph == 1);
    CHECK(p->opts.streams == 0 && p->opts.max_launch_ms == 0 && p->opts.threads == 0);
    pf_output_info info;
    CHECK(pf_pipeline_output_count(p) == 1);
    CHECK(pf_pipeline_output_info(p, 0, &info) == PF_OK);
    CHECK(strcmp(info.name, "out") == 0 && strcmp(info.stage, "out_gamma") == 0);
    CHECK(info.kind == PF_OUTPUT_IMAGE && info.channels == 0 && info.bits == 0);
    CHECK(find_id(p, "nothing") == -1);
    pf_pipeline_destroy(p);
}

static void test_order(pf_engine *e)
{
    pf_pipeline *p = load_good(e, "out_of_order.json");
    if (!p)
        return;
    check_ir(p);
    /* ready first, and among the ready the first in the file */
    static const char *const order[] = {"src", "overlay", "base", "right", "left", "mix", "other"};
    CHECK(p->n_nodes == 7 && p->n_inputs == 2);
    for (int i = 0; i < 7 && i < p->n_nodes; i++)
        CHECKF(strcmp(p->nodes[i].id, order[i]) == 0, "node %d is %s, expected %s", i,
               p->nodes[i].id, order[i]);
    const pf_node *mix = node(p, "mix");
    if (mix) {
        CHECK(mix->in[0] == find_id(p, "left") && mix->in[1] == find_id(p, "right"));
        CHECK(strcmp(mix->path, "stages[0]") == 0);
    }
    CHECK(strcmp(p->nodes[1].path, "inputs[1]") == 0);
    pf_pipeline_destroy(p);
}

static void test_full(pf_engine *e)
{
    logbuf[0] = 0;
    log_warnings = 0;
    pf_pipeline *p = load_good(e, "full.json");
    if (!p)
        return;
    check_ir(p);
    const pf_node *n = node(p, "small");
    CHECK(iparam(n, "width") == 64 && iparam(n, "height") == 48 && iparam(n, "mode") == 2);
    CHECK(iparam(node(p, "boxed"), "radius") == 3); /* 3.0 is an integer */
    const float *m = field(node(p, "tint"), "matrix");
    const float *off = field(node(p, "tint"), "offset");
    CHECK(m && m[0] == 0.5f && m[5] == 1 && m[15] == 1 && m[1] == 0);
    CHECK(off && off[0] == 0.1f && off[3] == 0);
    CHECK(iparam(node(p, "neg"), "alpha") == 1);
    CHECK(iparam(node(p, "turned"), "angle") == 2);
    CHECK(iparam(node(p, "hist"), "bins") == 16);

    CHECK(p->opts.backend == PF_BACKEND_CPU && p->opts.fusion == 0 && p->opts.graph == 0);
    /* 3.0 and 2e0 are whole numbers: integer options take them */
    CHECK(p->opts.streams == 3 && p->opts.max_launch_ms == 2.5 && p->opts.threads == 2);

    /* outputs in file order, with formats */
    static const struct {
        const char *name, *stage;
        pf_output_kind kind;
        int channels, bits;
    } outs[] = {
        {"out", "turned", PF_OUTPUT_IMAGE, 0, 0}, {"wide", "turned", PF_OUTPUT_IMAGE, 4, 16},
        {"gray", "boxed", PF_OUTPUT_IMAGE, 1, 8}, {"same", "src", PF_OUTPUT_IMAGE, 0, 0},
        {"hist", "hist", PF_OUTPUT_TABLE, 0, 0},  {"hist_auto", "hist", PF_OUTPUT_TABLE, 0, 0}};
    CHECK(pf_pipeline_output_count(p) == 6);
    for (int i = 0; i < 6 && i < pf_pipeline_output_count(p); i++) {
        pf_output_info info;
        CHECK(pf_pipeline_output_info(p, i, &info) == PF_OK);
        CHECKF(strcmp(info.name, outs[i].name) == 0 && strcmp(info.stage, outs[i].stage) == 0 &&
                   info.kind == outs[i].kind && info.channels == outs[i].channels &&
                   info.bits == outs[i].bits,
               "output %d: %s from %s kind %d %d channels %d bits", i, info.name, info.stage,
               (int)info.kind, info.channels, info.bits);
        CHECK(strncmp(p->outputs[i].path, "outputs.", 8) == 0);
    }

    /* the unused stage: not run, and a warning naming it */
    const pf_node *u = node(p, "unused_blur");
    CHECK(u && u->used == 0);
    CHECK(node(p, "hist") && node(p, "hist")->used == 1 && p->nodes[0].used == 1);
    CHECKF(log_warnings == 1, "%d warnings: %s", log_warnings, logbuf);
    CHECKF(strstr(logbuf, "full.json: stages[6]: stage 'unused_blur' does not reach any output"),
           "log: %s", logbuf);
    pf_pipeline_destroy(p);

    /* no warning for a pipeline where everything is used */
    logbuf[0] = 0;
    log_warnings = 0;
    p = load_good(e, "chain.json");
    CHECKF(log_warnings == 0, "%s", logbuf);
    pf_pipeline_destroy(p);
}

/* A generated chain of many stages, listed last to first: ordered back into a chain. */
static void test_many_stages(pf_engine *e)
{
    enum { N = 20000 };
    size_t size = (size_t)N * 80 + 256, used = 0;
    char *text = malloc(size);
    CHECK(text != NULL);
    if (!text)
        return;
    used += (size_t)snprintf(text, size, "{\"pipefuse\": 1, \"input\": \"src\", \"stages\": [");
    for (int i = N - 1; i >= 0; i--) {
        char prev[32];
        snprintf(prev, sizeof prev, i ? "s%d" : "src", i - 1);
        used += (size_t)snprintf(text + used, size - used,
                                 "%s{\"id\": \"s%d\", \"op\": \"invert\", \"input\": \"%s\"}",
                                 i == N - 1 ? "" : ",", i, prev);
    }
    snprintf(text + used, size - used, "], \"outputs\": {\"out\": \"s%d\"}}", N - 1);
    pf_pipeline *p = NULL;
    int st = pf_pipeline_load_string(e, text, "many", &p);
    free(text);
    CHECKF(st == PF_OK, "%s", pf_engine_errmsg(e));
    if (st != PF_OK)
        return;
    CHECK(p->n_nodes == N + 1);
    int bad = 0;
    for (int i = 1; i < p->n_nodes; i++) {
        char id[32];
        snprintf(id, sizeof id, "s%d", i - 1);
        bad += p->nodes[i].in[0] != i - 1 || strcmp(p->nodes[i].id, id) != 0 || !p->nodes[i].used;
    }
    CHECKF(bad == 0, "%d stages out of place", bad);
    pf_pipeline_destroy(p);
}

/* ---- set_param ---------------------------------------------------------------------------- */

static void expect_param_error(pf_pipeline *p, const char *key, const char *value,
                               const char *frag1, const char *frag2)
{
    int st = pf_pipeline_set_param(p, key, value);
    const char *msg = pf_pipeline_errmsg(p);
    CHECKF(st == PF_PARAM, "%s = %s: status %s", key, value, pf_status_name(st));
    CHECKF(strstr(msg, key) != NULL, "%s = %s: key not in '%s'", key, value, msg);
    CHECKF(strstr(msg, frag1) != NULL, "%s = %s: no '%s' in '%s'", key, value, frag1, msg);
    if (frag2)
        CHECKF(strstr(msg, frag2) != NULL, "%s = %s: no '%s' in '%s'", key, value, frag2, msg);
}

/* A UTF-8 byte order mark before the JSON is skipped, as RFC 8259 allows. */
static void test_bom(pf_engine *e)
{
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_string(
        e,
        "\xEF\xBB\xBF{\"pipefuse\": 1, \"inputs\": [\"a\"], \"stages\": "
        "[{\"id\": \"b\", \"op\": \"invert\"}], \"outputs\": {\"o\": \"b\"}}",
        "bom", &p);
    CHECKF(rc == PF_OK, "a BOM: %s", pf_engine_errmsg(e));
    pf_pipeline_destroy(p);
}

static void test_set_param(pf_engine *e)
{
    pf_pipeline *p = load_good(e, "full.json");
    if (!p)
        return;
    expect_param_error(p, "unused_blur.sigam", "2", "did you mean 'sigma'?", NULL);
    expect_param_error(p, "unused_blr.sigma", "2", "did you mean 'unused_blur'?", NULL);
    expect_param_error(p, "unused_blur.sigma", "\"2\"", "expected a number", NULL);
    expect_param_error(p, "unused_blur.sigma", "-2", "-2 is out of range [0, 64]",
                       "(gaussian.sigma)"); /* the op and param, as a file's message */
    expect_param_error(p, "boxed.radius", "2.5", "expected an integer, got 2.5", NULL);
    expect_param_error(p, "neg.alpha", "1", "expected true or false", NULL);
    expect_param_error(p, "small.mode", "\"nearst\"", "did you mean 'nearest'?", NULL);
    expect_param_error(p, "tint.offset", "[1, 2]", "expected an array of 4 numbers, got 2", NULL);
    expect_param_error(p, "tint.offset", "[0, 0, 0, \"x\"]", "element [3]", NULL);
    expect_param_error(p, "src.sigma", "1", "'src' is a pipeline input, not a stage", NULL);
    CHECK(fparam(node(p, "unused_blur"), "sigma") == 1); /* rejected values changed nothing */
    const float *off = field(node(p, "tint"), "offset");
    CHECK(off && off[0] == 0.1f && off[3] == 0);

    CHECK(pf_pipeline_set_param(p, "unused_blur.sigma", "2.5") == PF_OK);
    CHECK(fparam(node(p, "unused_blur"), "sigma") == 2.5f);
    CHECK(pf_pipeline_set_param(p, "small.mode", "\"nearest\"") == PF_OK);
    CHECK(iparam(node(p, "small"), "mode") == 1);
    CHECK(pf_pipeline_set_param(p, "tint.offset", "[0, 0, 0.5, 0]") == PF_OK);
    CHECK(off && off[2] == 0.5f);
    CHECK(pf_pipeline_set_float(p, "boxed.radius", 5.0) == PF_OK); /* integral double */
    CHECK(iparam(node(p, "boxed"), "radius") == 5);
    CHECK(pf_pipeline_set_float(p, "boxed.radius", 5.5) == PF_PARAM);
    CHECK(iparam(node(p, "boxed"), "radius") == 5);
    /* set_float takes no JSON path, but says what set_param says of the same number written
       as a real (accepted or not, and the message), for every kind of param */
    static const struct {
        const char *key;
        double x;
        const char *text;
    } same[] = {
        {"unused_blur.sigma", -0.0, "-0.0"},
        {"unused_blur.sigma", 3.25, "3.25"},
        {"unused_blur.sigma", -2, "-2.0"},
        {"unused_blur.sigma", 1e300, "1e300"},
        {"boxed.radius", 7, "7.0"},
        {"boxed.radius", 2.5, "2.5"},
        {"boxed.radius", -4, "-4.0"},
        {"boxed.radius", 1e12, "1e12"},
        {"neg.alpha", 1, "1.0"},
        {"small.mode", 1, "1.0"},
        {"tint.offset", 0.5, "0.5"},
        {"boxed.radius", 2147483648.0, "2147483648.0"},
        {"unused_blur.nosuch", 1, "1.0"},
        {"src.sigma", 1, "1.0"},
    };
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
        int a = pf_pipeline_set_param(p, same[k].key, same[k].text);
        char ma[1024];
        snprintf(ma, sizeof ma, "%s", pf_pipeline_errmsg(p));
        int b = pf_pipeline_set_float(p, same[k].key, same[k].x);
        const char *mb = pf_pipeline_errmsg(p);
        CHECKF(a == b && (a == PF_OK || strcmp(ma, mb) == 0),
               "%s = %s: set_param %d '%s', set_float %d '%s'", same[k].key, same[k].text, a, ma, b,
               mb);
    }
    CHECK(fparam(node(p, "unused_blur"), "sigma") == 3.25f);
    CHECK(iparam(node(p, "boxed"), "radius") == 7);
    pf_pipeline_destroy(p);
}

/* ---- The schema and the examples ------------------------------------------------------------ */

/* Every output format and option the schema lists loads; the examples in pipelines/ load. */
static void test_schema_and_examples(pf_engine *e)
{
    json_error_t jerr;
    json_t *schema = json_load_file(PF_SOURCE_DIR "/pipelines/schema.json", 0, &jerr);
    CHECKF(schema != NULL, "pipelines/schema.json:%d:%d: %s", jerr.line, jerr.column, jerr.text);
    if (!schema)
        return;
    CHECK(strcmp(json_string_value(json_object_get(schema, "$schema")),
                 "https://json-schema.org/draft/2020-12/schema") == 0);
    json_t *defs = json_object_get(schema, "$defs");
    json_t *img = json_object_get(json_object_get(defs, "image_format"), "enum");
    json_t *tab = json_object_get(json_object_get(defs, "table_format"), "enum");
    CHECK(json_array_size(img) == 13 && json_array_size(tab) == 2);
    for (int table = 0; table < 2; table++) {
        size_t i;
        json_t *f;
        json_array_foreach(table ? tab : img, i, f)
        {
            char text[512];
            snprintf(text, sizeof text,
                     "{\"pipefuse\": 1, \"inputs\": [\"src\"], \"stages\": [{\"id\": \"s\", "
                     "\"op\": \"%s\"}], \"outputs\": {\"o\": {\"from\": \"s\", \"format\": "
                     "\"%s\"}}}",
                     table ? "histogram" : "invert", json_string_value(f));
            pf_pipeline *p = NULL;
            CHECKF(pf_pipeline_load_string(e, text, "schema", &p) == PF_OK, "%s",
                   pf_engine_errmsg(e));
            /* the PNG form a writer is asked for: the named one, auto, or the frame's */
            const char *name = json_string_value(f);
            int want = table                             ? -1
                       : !strcmp(name, "auto")           ? PF_PNG_FORM_AUTO
                       : pf_png_form_from_name(name) > 0 ? pf_png_form_from_name(name)
                                                         : PF_PNG_FORM_FRAME;
            CHECKF(!p || pf_pipeline_output_png_form(p, 0) == want, "format %s: form %d, not %d",
                   name, p ? pf_pipeline_output_png_form(p, 0) : -2, want);
            pf_pipeline_destroy(p);
        }
    }
    json_t *opts = json_object_get(
        json_object_get(json_object_get(schema, "properties"), "options"), "properties");
    /* the schema documents exactly the options the engine's table has (options.c) */
    CHECKF(json_object_size(opts) == (size_t)pf_option_count(), "schema %zu, table %d",
           json_object_size(opts), pf_option_count());
    for (int i = 0; i < pf_option_count(); i++)
        CHECKF(json_object_get(opts, pf_option_name(i)) != NULL, "options.%s not in the schema",
               pf_option_name(i));
    const char *key;
    json_t *v;
    json_object_foreach(opts, key, v)
    {
        json_t *def = json_object_get(v, "default");
        char *dv = def ? json_dumps(def, JSON_ENCODE_ANY) : NULL;
        CHECKF(dv != NULL, "options.%s has no default", key);
        char text[512];
        snprintf(text, sizeof text,
                 "{\"pipefuse\": 1, \"inputs\": [\"src\"], \"stages\": [{\"id\": \"s\", "
                 "\"op\": \"invert\"}], \"outputs\": {\"o\": \"s\"}, \"options\": {\"%s\": %s}}",
                 key, dv ? dv : "0");
        free(dv);
        pf_pipeline *p = NULL;
        CHECKF(pf_pipeline_load_string(e, text, "schema", &p) == PF_OK, "%s", pf_engine_errmsg(e));
        pf_pipeline_destroy(p);
    }
    json_decref(schema);

    DIR *d = opendir(PF_SOURCE_DIR "/pipelines");
    struct dirent *ent;
    while (d && (ent = readdir(d)) != NULL) {
        size_t n = strlen(ent->d_name);
        if (n < 5 || strcmp(ent->d_name + n - 5, ".json") != 0 ||
            strcmp(ent->d_name, "schema.json") == 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/pipelines/%s", PF_SOURCE_DIR, ent->d_name);
        pf_pipeline *p = NULL;
        CHECKF(pf_pipeline_load_file(e, path, &p) == PF_OK, "%s", pf_engine_errmsg(e));
        pf_pipeline_destroy(p);
    }
    if (d)
        closedir(d);
}

int main(void)
{
    pf_engine *e = engine_with_log();
    test_defaults(e);
    test_chain(e);
    test_order(e);
    test_full(e);
    test_many_stages(e);
    test_set_param(e);
    test_bom(e);
    test_schema_and_examples(e);
    pf_engine_destroy(e);
    return pf_test_done("test_pipeline_load");
}
