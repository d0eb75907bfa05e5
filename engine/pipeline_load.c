/* engine/pipeline_load.c: pipeline file text -> validated graph IR (pf_node, pf_output_decl).
 *
 * The format is documented in docs/pipeline-format.md (schema: pipelines/schema.json).
 * Every problem is one message: the source name, the JSON path of the value at fault,
 * what is wrong and, for a misspelt name, the closest valid one. The first problem in
 * file order wins: a quiet first pass collects the input names and stage ids (a stage
 * may name one defined further down), then the document is walked key by key in the
 * order the file gives them (jansson keeps insertion order).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "graph.h"
#include "internal.h"
#include "pipefuse/png.h"
#include "pipefuse/tools.h"

#define PATH_SIZE 320
#define ID_MAX    64 /* longest input name, stage id or output name */

/* Limits of one pipeline (docs/pipeline-format.md, "Limits"). Inputs and outputs are
   frames of one pf_pipeline_run call (PF_MAX_FRAMES, internal.h); stages keep load and
   plan within a second or so and their memory within a few hundred MB. */
#define MAX_STAGES 200000
#define MAX_TEXT   (16u << 20) /* bytes of pipeline text, as for files */

/* ---- Loader state ------------------------------------------------------------------- */

/* One entry of "stages" as validated so far. A producer reference ("ref") counts
   inputs first: input i is i, stage k is n_inputs + k. */
typedef struct stage_in {
    json_t *j;                 /* the stage object; NULL when stages[k] is not one */
    const char *id;            /* its "id" when that is a string, else NULL */
    const pf_stage_desc *desc; /* NULL while the op is unknown */
    int plugin;
    void *params; /* owned here until it moves into its node */
    int n_in;
    /* its edges for the order: the inputs, then the sources of bound params */
    int n_edges;
    int ref[PF_MAX_INPUTS + PF_MAX_BINDS];
    int n_bind;
    pf_binding *bind; /* src: a ref until build; NULL without bindings */
    char *bind_path;  /* PATH_SIZE per binding: where each is, for messages */
    int order;        /* position among the stages in topological order */
} stage_in;

typedef struct out_in {
    const char *name;
    int ref;
    int channels, bits;
    pf_table_format table_format;
    int png_form; /* pf_png_form */
} out_in;

typedef struct loader {
    pf_pipeline *p;
    pf_engine *e;
    const char *src;
    json_t *root;
    const char **inputs; /* names; NULL where the entry is bad */
    int n_inputs;
    int inputs_seen; /* "input" or "inputs" walked */
    stage_in *st;
    int n_stages;
    out_in *outs;
    int n_outs;
    char *used; /* per ref: reaches an output */
    pf_options opts;
    struct name_index *input_ix, *stage_ix; /* name -> first input / stage holding it */
} loader;

/* ---- Messages and paths ------------------------------------------------------------- */

static int failv(loader *L, int status, const char *path, const char *fmt, va_list ap)
{
    char msg[PF_ERRMSG_MAX];
    pf_verrf(msg, sizeof msg, fmt, ap);
    if (path && *path)
        pf_errf(L->p->errmsg, "%s: %s: %s", L->src, path, msg);
    else
        pf_errf(L->p->errmsg, "%s: %s", L->src, msg);
    return status;
}

static int fail(loader *L, int status, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(loader *L, int status, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(L, status, path, fmt, ap);
    va_end(ap);
    return status;
}

static int nomem(loader *L)
{
    return fail(L, PF_NO_MEMORY, NULL, "out of memory");
}

/* base.key, or base["key"] when key is not an identifier; key alone at the top. */
/* base.key, or base["key"] for a key that is no identifier, written as a JSON string
   (quotes, backslashes and control characters escaped; long keys cut). */
static void path_key(char *out, const char *base, const char *key)
{
    int n;
    if (pf_is_identifier(key)) {
        n = snprintf(out, PATH_SIZE, "%s%s%s", base, *base ? "." : "", key);
        if (n >= PATH_SIZE) /* a path too long is cut; the message still says where */
            out[PATH_SIZE - 1] = 0;
        return;
    }
    char q[96];
    size_t o = 0;
    for (const unsigned char *k = (const unsigned char *)key; *k && o < sizeof q - 8; k++) {
        if (*k == '"' || *k == '\\')
            o += (size_t)snprintf(q + o, sizeof q - o, "\\%c", *k);
        else if (*k < 0x20)
            o += (size_t)snprintf(q + o, sizeof q - o, "\\u%04x", *k);
        else
            q[o++] = (char)*k;
    }
    q[o] = 0;
    n = snprintf(out, PATH_SIZE, "%s[\"%s%s\"]", base, q, o >= sizeof q - 8 ? "..." : "");
    if (n >= PATH_SIZE)
        out[PATH_SIZE - 1] = 0;
}

static void path_index(char *out, const char *base, size_t i)
{
    snprintf(out, PATH_SIZE, "%.280s[%zu]", base, i);
}

/* A JSON value as a message shows it: an object, an array of 3, the string "x", ... */
static void show(const json_t *v, char *buf, size_t size)
{
    if (json_is_object(v)) {
        snprintf(buf, size, "an object");
    } else if (json_is_array(v)) {
        snprintf(buf, size, "an array of %zu", json_array_size(v));
    } else {
        char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        const char *kind = json_is_string(v)   ? "the string "
                           : json_is_number(v) ? "the number "
                                               : "";
        if (text && strlen(text) > 40)
            snprintf(buf, size, "%s%.37s...", kind, text);
        else
            snprintf(buf, size, "%s%s", kind, text ? text : "a value");
        free(text);
    }
}

/* "; did you mean 'x'?" or "" */
static const char *suggest(char *buf, size_t size, const char *near)
{
    if (!near)
        return "";
    snprintf(buf, size, "; did you mean '%s'?", near);
    return buf;
}

/* An error for a value of the wrong JSON type: "expected <what>, got <value>". */
static int wrong_type(loader *L, const char *path, const json_t *v, const char *what)
{
    char got[96];
    show(v, got, sizeof got);
    return fail(L, PF_PIPELINE, path, "expected %s, got %s", what, got);
}

static int check_ident(loader *L, const char *path, const char *name, const char *what)
{
    if (strlen(name) > ID_MAX)
        return fail(L, PF_PIPELINE, path, "%s '%.20s...' is longer than %d characters", what, name,
                    ID_MAX);
    if (!pf_is_identifier(name))
        return fail(L, PF_PIPELINE, path,
                    "%s '%s' is not an identifier: use letters, digits and '_', not "
                    "starting with a digit",
                    what, name);
    return PF_OK;
}

/* ---- Keys ----------------------------------------------------------------------------- */

/* Keys that would name code to load. Plugins come from the search path only. */
static int names_a_library(const char *key)
{
    static const char *const words[] = {
        "plugin", "plugins", "plugin_path", "plugin_dir", "library", "libraries", "lib",
        "load",   "path",    "dlopen",      "module",     "modules", "so",        "dll"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcasecmp(key, words[i]) == 0)
            return 1;
    return strncasecmp(key, "plugin", 6) == 0 || strncasecmp(key, "librar", 6) == 0;
}

static int key_in(const char *key, const char *const *keys, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return 0;
}

/* The error for a key that is not one of keys[0..n); where names the object kind. */
static int bad_key(loader *L, const char *base, const char *key, const char *const *keys, int n,
                   const char *where)
{
    char path[PATH_SIZE], sug[128];
    path_key(path, base, key);
    if (names_a_library(key))
        return fail(L, PF_PIPELINE, path,
                    "a pipeline file cannot name a library or plugin to load; plugins come "
                    "only from the configured search path (the built-in plugin directory, "
                    "pf_engine_config.plugin_path and PIPEFUSE_PLUGIN_PATH)");
    return fail(L, PF_PIPELINE, path, "unknown key '%s' in %s%s", key, where,
                suggest(sug, sizeof sug, pf_closest(key, keys, n)));
}

static int check_keys(loader *L, json_t *obj, const char *base, const char *const *keys, int n,
                      const char *where)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (!key_in(key, keys, n))
            return bad_key(L, base, key, keys, n, where);
    }
    return PF_OK;
}

#define KEYS(a) (a), (int)(sizeof(a) / sizeof((a)[0]))

static const char *const top_keys[] = {"$schema", "pipefuse", "name",    "description", "input",
                                       "inputs",  "stages",   "outputs", "options"};
static const char *const stage_keys[] = {"id", "op", "input", "inputs", "params"};
static const char *const input_keys[] = {"name"};
static const char *const output_keys[] = {"from", "format"};

/* ---- Names --------------------------------------------------------------------------- */

/* Names to the first index holding them, hashed (open addressing, at most half full), so
   that a generated pipeline of many thousands of stages still loads in linear time. fold
   compares ASCII letters case-insensitively (output names, which become file names). */
typedef struct name_index {
    const char **names;
    int *idx;
    size_t mask;
    int fold;
} name_index;

static name_index *index_new(int n, int fold)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n)
        cap <<= 1;
    name_index *x = malloc(sizeof *x);
    if (!x)
        return NULL;
    x->names = calloc(cap, sizeof *x->names);
    x->idx = malloc(cap * sizeof *x->idx);
    x->mask = cap - 1;
    x->fold = fold;
    if (!x->names || !x->idx) {
        free(x->names);
        free(x->idx);
        free(x);
        return NULL;
    }
    return x;
}

static void index_free(name_index *x)
{
    if (x) {
        free(x->names);
        free(x->idx);
        free(x);
    }
}

/* The index stored under name, or -1; when absent and add >= 0, stores add first. */
static int index_get(name_index *x, const char *name, int add)
{
    if (!x || !name)
        return -1;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = name; *c; c++) {
        unsigned char b = (unsigned char)*c;
        h = (h ^ (x->fold && b >= 'A' && b <= 'Z' ? b + 32u : b)) * 1099511628211ull;
    }
    size_t i = (size_t)h & x->mask;
    for (; x->names[i]; i = (i + 1) & x->mask)
        if ((x->fold ? strcasecmp(x->names[i], name) : strcmp(x->names[i], name)) == 0)
            return x->idx[i];
    if (add < 0)
        return -1;
    x->names[i] = name;
    x->idx[i] = add;
    return add;
}

static int find_input(const loader *L, const char *name)
{
    return index_get(L->input_ix, name, -1);
}

static int find_stage(const loader *L, const char *name)
{
    return index_get(L->stage_ix, name, -1);
}

/* The producer ref a name resolves to, or -1. */
static int resolve(const loader *L, const char *name)
{
    int i = find_input(L, name);
    if (i >= 0)
        return i;
    int k = find_stage(L, name);
    return k >= 0 ? L->n_inputs + k : -1;
}

static const pf_stage_desc *ref_desc(const loader *L, int ref)
{
    return ref >= L->n_inputs ? L->st[ref - L->n_inputs].desc : NULL;
}

static const char *ref_name(const loader *L, int ref)
{
    return ref < L->n_inputs ? L->inputs[ref] : L->st[ref - L->n_inputs].id;
}

/* "'x' names no input or stage; did you mean 'y'?" for a dangling reference. */
static int dangling(loader *L, const char *path, const char *name, const char *self)
{
    int n = L->n_inputs + L->n_stages, m = 0;
    const char **cands = malloc(sizeof *cands * (size_t)(n ? n : 1));
    if (!cands)
        return nomem(L);
    for (int r = 0; r < n; r++) {
        const char *c = ref_name(L, r);
        if (c && !(self && strcmp(c, self) == 0))
            cands[m++] = c;
    }
    char sug[128];
    int st = fail(L, PF_PIPELINE, path, "'%s' names no input or stage%s", name,
                  suggest(sug, sizeof sug, pf_closest(name, cands, m)));
    free(cands);
    return st;
}

static int lookup_op(loader *L, const char *path, const char *op, stage_in *s)
{
    char msg[PF_ERRMSG_MAX];
    int i = pf_engine_lookup_stage(L->e, op, msg, sizeof msg);
    if (i < 0)
        return fail(L, PF_PIPELINE, path, "%s", msg);
    s->desc = L->e->stages[i].desc;
    s->plugin = L->e->stages[i].plugin;
    return PF_OK;
}

/* ---- First pass: names only, no messages ---------------------------------------------- */

static int collect_names(loader *L)
{
    json_t *ins = json_object_get(L->root, "inputs");
    json_t *in1 = json_object_get(L->root, "input");
    if (json_is_array(ins)) {
        int n = (int)json_array_size(ins);
        L->inputs = calloc((size_t)(n ? n : 1), sizeof *L->inputs);
        if (!L->inputs)
            return nomem(L);
        L->n_inputs = n;
        for (int i = 0; i < L->n_inputs; i++) {
            json_t *v = json_array_get(ins, (size_t)i);
            if (json_is_object(v))
                v = json_object_get(v, "name");
            L->inputs[i] = json_string_value(v); /* NULL when not a string */
        }
    } else if (!ins && json_is_string(in1)) {
        L->inputs = calloc(1, sizeof *L->inputs);
        if (!L->inputs)
            return nomem(L);
        L->n_inputs = 1;
        L->inputs[0] = json_string_value(in1);
    }

    if (!(L->input_ix = index_new(L->n_inputs, 0)))
        return nomem(L);
    for (int i = 0; i < L->n_inputs; i++)
        index_get(L->input_ix, L->inputs[i], i);

    json_t *stages = json_object_get(L->root, "stages");
    if (json_is_array(stages)) {
        int n = (int)json_array_size(stages);
        L->st = calloc((size_t)(n ? n : 1), sizeof *L->st);
        if (!L->st)
            return nomem(L);
        L->n_stages = n;
        for (int k = 0; k < L->n_stages; k++) {
            stage_in *s = &L->st[k];
            json_t *j = json_array_get(stages, (size_t)k);
            s->plugin = -1;
            if (!json_is_object(j))
                continue;
            s->j = j;
            s->id = json_string_value(json_object_get(j, "id"));
            const char *op = json_string_value(json_object_get(j, "op"));
            for (int i = 0; op && i < L->e->n_stages; i++)
                if (strcmp(L->e->stages[i].desc->name, op) == 0) {
                    s->desc = L->e->stages[i].desc;
                    break;
                }
        }
    }
    if (!(L->stage_ix = index_new(L->n_stages, 0)))
        return nomem(L);
    for (int k = 0; k < L->n_stages; k++)
        index_get(L->stage_ix, L->st[k].id, k);
    return PF_OK;
}

/* ---- Inputs ----------------------------------------------------------------------------- */

static int walk_inputs(loader *L, const char *key, json_t *v)
{
    if (L->inputs_seen++)
        return fail(L, PF_PIPELINE, key, "give either \"input\" or \"inputs\", not both");
    if (strcmp(key, "input") == 0) {
        if (!json_is_string(v))
            return wrong_type(L, key, v, "an input name (a string)");
        return check_ident(L, key, json_string_value(v), "input name");
    }
    if (!json_is_array(v))
        return wrong_type(L, key, v,
                          "an array of input names such as [\"src\"] (or \"input\": \"src\")");
    if (json_array_size(v) == 0)
        return fail(L, PF_PIPELINE, key, "empty; a pipeline needs at least one input");
    if (json_array_size(v) > PF_MAX_FRAMES)
        return fail(L, PF_PIPELINE, key, "%zu inputs; a pipeline takes at most %d",
                    json_array_size(v), PF_MAX_FRAMES);
    for (int i = 0; i < L->n_inputs; i++) {
        char path[PATH_SIZE], npath[PATH_SIZE];
        json_t *e = json_array_get(v, (size_t)i);
        path_index(path, key, (size_t)i);
        const char *name;
        if (json_is_object(e)) {
            int st = check_keys(L, e, path, KEYS(input_keys), "an input");
            if (st)
                return st;
            path_key(npath, path, "name");
            json_t *n = json_object_get(e, "name");
            if (!n)
                return fail(L, PF_PIPELINE, npath, "missing; an input object needs a name");
            if (!json_is_string(n))
                return wrong_type(L, npath, n, "an input name (a string)");
            name = json_string_value(n);
        } else if (json_is_string(e)) {
            name = json_string_value(e);
            snprintf(npath, sizeof npath, "%s", path);
        } else {
            return wrong_type(L, path, e, "an input name (a string, or {\"name\": ...})");
        }
        int st = check_ident(L, npath, name, "input name");
        if (st)
            return st;
        int j = find_input(L, name);
        if (j >= 0 && j != i)
            return fail(L, PF_PIPELINE, npath, "duplicate input name '%s' (also %s[%d])", name, key,
                        j);
    }
    return PF_OK;
}

/* "inputs[i]", or "input" for the one-input shorthand. */
static void input_path(const loader *L, int i, char *out)
{
    if (json_object_get(L->root, "inputs"))
        path_index(out, "inputs", (size_t)i);
    else
        snprintf(out, PATH_SIZE, "input");
}

/* ---- Stages -------------------------------------------------------------------------------- */

static int stage_id(loader *L, int k, const char *base)
{
    stage_in *s = &L->st[k];
    char path[PATH_SIZE];
    path_key(path, base, "id");
    json_t *v = json_object_get(s->j, "id");
    if (!v)
        return fail(L, PF_PIPELINE, path, "missing; every stage needs an id");
    if (!json_is_string(v))
        return wrong_type(L, path, v, "a stage id (a string)");
    int st = check_ident(L, path, s->id, "stage id");
    if (st)
        return st;
    int j = find_stage(L, s->id);
    if (j >= 0 && j != k)
        return fail(L, PF_PIPELINE, path, "duplicate stage id '%s' (also stages[%d])", s->id, j);
    int i = find_input(L, s->id);
    if (i >= 0) {
        char ipath[PATH_SIZE];
        input_path(L, i, ipath);
        return fail(L, PF_PIPELINE, path,
                    "stage id '%s' is also the name of an input (%s); stage ids and input "
                    "names share one namespace",
                    s->id, ipath);
    }
    return PF_OK;
}

static int stage_op(loader *L, int k, const char *base)
{
    char path[PATH_SIZE];
    path_key(path, base, "op");
    json_t *v = json_object_get(L->st[k].j, "op");
    if (!v)
        return fail(L, PF_PIPELINE, path,
                    "missing; every stage needs an op (a stage name such as \"gaussian\")");
    if (!json_is_string(v))
        return wrong_type(L, path, v, "an op name (a string)");
    return lookup_op(L, path, json_string_value(v), &L->st[k]);
}

/* One named producer of stage k, at path. */
static int stage_ref(loader *L, int k, const char *path, const char *name, int *ref)
{
    stage_in *s = &L->st[k];
    if (strcmp(name, s->id) == 0)
        return fail(L, PF_PIPELINE, path, "cycle: %s -> %s (a stage cannot take its own output)",
                    name, name);
    *ref = resolve(L, name);
    if (*ref < 0)
        return dangling(L, path, name, s->id);
    const pf_stage_desc *d = ref_desc(L, *ref);
    if (d && d->kind == PF_STAGE_REDUCE)
        return fail(L, PF_PIPELINE, path,
                    "'%s' is a reduce stage (%s): its result is a table, which can be an "
                    "output but not a stage's input",
                    name, d->name);
    return PF_OK;
}

static int stage_inputs(loader *L, int k, const char *base)
{
    stage_in *s = &L->st[k];
    const pf_stage_desc *d = s->desc;
    char path[PATH_SIZE], epath[PATH_SIZE];
    json_t *many = json_object_get(s->j, "inputs"), *one = json_object_get(s->j, "input");
    if (many && one) {
        path_key(path, base, "input");
        return fail(L, PF_PIPELINE, path, "give either \"input\" or \"inputs\", not both");
    }
    if (!many && !one) {
        /* a chain: the previous stage, or the pipeline's first input */
        if (d->n_inputs != 1)
            return fail(L, PF_PIPELINE, base,
                        "\"inputs\" is missing, and %s takes %d inputs (only a one-input "
                        "stage may leave it out, to take the previous stage's output)",
                        d->name, d->n_inputs);
        int ref = k == 0 ? 0 : L->n_inputs + k - 1;
        const char *name = k == 0 ? (L->n_inputs ? L->inputs[0] : NULL) : L->st[k - 1].id;
        if (!name)
            return fail(L, PF_PIPELINE, base,
                        "\"inputs\" is missing and there is no %s to take instead",
                        k == 0 ? "pipeline input" : "previous stage");
        const pf_stage_desc *pd = ref_desc(L, ref);
        if (pd && pd->kind == PF_STAGE_REDUCE)
            return fail(L, PF_PIPELINE, base,
                        "\"inputs\" is missing, so it takes the previous stage '%s', but that "
                        "is a reduce stage (%s) whose result is a table; name the image "
                        "input in \"inputs\"",
                        name, pd->name);
        s->n_in = 1;
        s->ref[0] = ref;
        return PF_OK;
    }
    if (one) {
        path_key(path, base, "input");
        if (!json_is_string(one))
            return wrong_type(L, path, one, "a stage id or input name (a string)");
        if (d->n_inputs != 1)
            return fail(L, PF_PIPELINE, path, "%s takes %d inputs, got 1 (use \"inputs\")", d->name,
                        d->n_inputs);
        s->n_in = 1;
        return stage_ref(L, k, path, json_string_value(one), &s->ref[0]);
    }
    path_key(path, base, "inputs");
    if (!json_is_array(many))
        return wrong_type(L, path, many, "an array of stage ids or input names");
    size_t n = json_array_size(many);
    if (n != (size_t)d->n_inputs)
        return fail(L, PF_PIPELINE, path, "%s takes %d input%s, got %zu", d->name, d->n_inputs,
                    d->n_inputs == 1 ? "" : "s", n);
    s->n_in = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(many, i);
        path_index(epath, path, i);
        if (!json_is_string(v))
            return wrong_type(L, epath, v, "a stage id or input name (a string)");
        int st = stage_ref(L, k, epath, json_string_value(v), &s->ref[i]);
        if (st)
            return st;
    }
    return PF_OK;
}

/* "sigma, amount" into buf: the parameters a stage takes. */
static void param_names(const pf_stage_desc *d, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < d->n_params && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", d->params[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* ---- Parameters bound to a reduction ---- */

static const char *const bind_keys[] = {"from",      "percentile", "median", "mean",
                                        "min",       "max",        "otsu",   "gain_to",
                                        "grey_gain", "channel",    "scale",  "offset"};
/* the rule keys, in pf_bind_rule order (median is percentile 50) */
static const char *const bind_rules[PF_BIND_RULES] = {"percentile", "mean",    "min",      "max",
                                                      "otsu",       "gain_to", "grey_gain"};
static const char *const bind_channels[] = {"r", "g", "b", "a", "rgb"};

/* A bound parameter's mistakes are its parameter's (PF_PARAM), as the other values of
   params are, whichever check finds them: a key or a value of the wrong kind too. A cycle
   and a stage that does not exist are the graph's (PF_PIPELINE). */
static int as_param(int status)
{
    return status == PF_PIPELINE ? PF_PARAM : status;
}

/* A number at path that is finite (and, with lo <= hi, within them). */
static int bind_number(loader *L, const char *path, json_t *v, double lo, double hi, double *out)
{
    if (!json_is_number(v))
        return as_param(wrong_type(L, path, v, "a number"));
    *out = json_number_value(v);
    if (!(*out == *out) || *out > 1e300 || *out < -1e300 || (lo <= hi && (*out < lo || *out > hi)))
        return fail(L, PF_PARAM, path, "%g is outside [%g, %g]", *out, lo, hi);
    return PF_OK;
}

/* Param pd of stage k bound to a reduction by the object v at path: the rule and its
   source (checked once every stage is known: check_bindings). */
static int stage_binding(loader *L, int k, const char *path, const pf_param_desc *pd, json_t *v)
{
    stage_in *s = &L->st[k];
    const pf_stage_desc *d = s->desc;
    char kpath[PATH_SIZE];
    if (d->kind != PF_STAGE_POINT || !(d->flags & PF_STAGE_BINDABLE))
        return fail(L, PF_PARAM, path,
                    "%s.%s cannot be bound to a reduction: stage %s does not declare "
                    "PF_STAGE_BINDABLE (the color plugin's stages do)",
                    d->name, pd->name, d->name);
    if (pd->type != PF_PARAM_FLOAT)
        return fail(L, PF_PARAM, path,
                    "%s.%s is %s; only a float parameter can be bound to a reduction", d->name,
                    pd->name, pf_param_type_name(pd->type));
    if (d->params_size > PF_BIND_PARAMS_MAX)
        return fail(L, PF_PARAM, path,
                    "%s's params are %zu bytes; a stage with bound parameters has at most %d",
                    d->name, d->params_size, PF_BIND_PARAMS_MAX);
    int st = as_param(check_keys(L, v, path, KEYS(bind_keys), "a bound parameter"));
    if (st)
        return st;
    if (s->n_bind == PF_MAX_BINDS)
        return fail(L, PF_PARAM, path, "more than %d bound parameters in one stage", PF_MAX_BINDS);
    if (!s->bind) {
        s->bind = calloc(PF_MAX_BINDS, sizeof *s->bind);
        s->bind_path = calloc(PF_MAX_BINDS, PATH_SIZE);
        if (!s->bind || !s->bind_path)
            return nomem(L);
    }
    pf_binding *b = &s->bind[s->n_bind];
    *b = (pf_binding){.param = (int)(pd - d->params),
                      .rule = -1,
                      .channel = PF_BIND_RGB,
                      .scale = 1,
                      .offset = 0};
    json_t *from = json_object_get(v, "from");
    path_key(kpath, path, "from");
    if (!from)
        return fail(L, PF_PARAM, path,
                    "a bound parameter needs \"from\": the id of a histogram or stats stage");
    if (!json_is_string(from))
        return as_param(
            wrong_type(L, kpath, from, "the id of a histogram or stats stage (a string)"));
    const char *name = json_string_value(from);
    if (strcmp(name, s->id) == 0)
        return fail(L, PF_PIPELINE, kpath, "cycle: %s -> %s (a stage cannot read its own result)",
                    name, name);
    b->src = resolve(L, name);
    if (b->src < 0)
        return dangling(L, kpath, name, s->id);
    if (b->src < L->n_inputs)
        return fail(L, PF_PARAM, kpath,
                    "'%s' is a pipeline input; a bound parameter reads a histogram or stats "
                    "stage's table",
                    name);
    int median = 0;
    for (int r = -1; r < PF_BIND_RULES; r++) {
        const char *key = r < 0 ? "median" : bind_rules[r];
        json_t *rv = json_object_get(v, key);
        if (!rv)
            continue;
        path_key(kpath, path, key);
        if (b->rule >= 0 || median)
            return fail(L, PF_PARAM, kpath, "one rule per bound parameter: %s and %s",
                        median ? "median" : bind_rules[b->rule], key);
        if (r == PF_BIND_PERCENTILE) {
            if ((st = bind_number(L, kpath, rv, 0, 100, &b->arg)))
                return st;
        } else if (r == PF_BIND_GAIN_TO) {
            if ((st = bind_number(L, kpath, rv, 1e-9, 1e9, &b->arg)))
                return st;
        } else if (!json_is_true(rv)) {
            return as_param(wrong_type(L, kpath, rv, "true"));
        }
        if (r < 0)
            median = 1, b->arg = 50;
        b->rule = r < 0 ? PF_BIND_PERCENTILE : r;
    }
    if (b->rule < 0)
        return fail(L, PF_PARAM, path,
                    "a bound parameter needs a rule: \"percentile\": P, \"median\", "
                    "\"mean\", \"min\", \"max\", \"otsu\" (true), \"gain_to\": T or "
                    "\"grey_gain\": true");
    json_t *ch = json_object_get(v, "channel");
    if (ch) {
        path_key(kpath, path, "channel");
        int c = -1;
        for (int i = 0; json_is_string(ch) && i < 5; i++)
            if (strcmp(json_string_value(ch), bind_channels[i]) == 0)
                c = i;
        if (c < 0)
            return fail(L, PF_PARAM, kpath,
                        "channel must be \"r\", \"g\", \"b\", \"a\" or "
                        "\"rgb\" (R, G and B together)");
        b->channel = c;
    }
    if (b->rule == PF_BIND_GREY_GAIN && b->channel > 2) {
        path_key(kpath, path, "channel");
        return fail(L, PF_PARAM, ch ? kpath : path,
                    "grey_gain is the gain of one colour channel: give \"channel\": \"r\", "
                    "\"g\" or \"b\"");
    }
    json_t *sc = json_object_get(v, "scale"), *of = json_object_get(v, "offset");
    path_key(kpath, path, "scale");
    if (sc && (st = bind_number(L, kpath, sc, 1, 0, &b->scale)))
        return st;
    path_key(kpath, path, "offset");
    if (of && (st = bind_number(L, kpath, of, 1, 0, &b->offset)))
        return st;
    for (int i = 0; i < s->n_bind; i++)
        if (s->bind[i].param == b->param)
            return fail(L, PF_PARAM, path, "%s.%s is bound twice", d->name, pd->name);
    snprintf(s->bind_path + (size_t)s->n_bind * PATH_SIZE, PATH_SIZE, "%s", path);
    s->ref[s->n_in + s->n_bind] = b->src;
    s->n_bind++;
    return PF_OK;
}

/* Every binding's source is a histogram or stats stage whose table its rule reads. */
static int check_bindings(loader *L)
{
    for (int k = 0; k < L->n_stages; k++) {
        stage_in *s = &L->st[k];
        for (int i = 0; i < s->n_bind; i++) {
            const pf_binding *b = &s->bind[i];
            const pf_stage_desc *rd = ref_desc(L, b->src);
            const char *path = s->bind_path + (size_t)i * PATH_SIZE;
            char fpath[PATH_SIZE];
            path_key(fpath, path, "from");
            int hist = rd && strcmp(rd->name, "histogram") == 0;
            int stats = rd && strcmp(rd->name, "stats") == 0;
            if (!rd || rd->kind != PF_STAGE_REDUCE || !(hist || stats))
                return fail(L, PF_PARAM, fpath,
                            "'%s' is %s %s stage; a bound parameter reads a histogram or stats "
                            "stage's table",
                            ref_name(L, b->src), rd && rd->kind == PF_STAGE_REDUCE ? "a" : "not a",
                            rd ? rd->name : "reduce");
            if (stats && (b->rule == PF_BIND_PERCENTILE || b->rule == PF_BIND_OTSU))
                return fail(L, PF_PARAM, path,
                            "%s reads a histogram; '%s' is a stats stage (min, max, mean and "
                            "stddev)",
                            b->rule == PF_BIND_OTSU ? "otsu" : "a percentile", ref_name(L, b->src));
        }
    }
    return PF_OK;
}

static int stage_params(loader *L, int k, const char *base)
{
    stage_in *s = &L->st[k];
    const pf_stage_desc *d = s->desc;
    char path[PATH_SIZE], ppath[PATH_SIZE], msg[1024];
    s->params = malloc(d->params_size ? d->params_size : 1);
    if (!s->params)
        return nomem(L);
    pf_params_init(d, s->params);
    path_key(path, base, "params");
    json_t *obj = json_object_get(s->j, "params");
    if (obj && !json_is_object(obj))
        return wrong_type(L, path, obj, "an object of parameters such as {\"sigma\": 2}");
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        path_key(ppath, path, key);
        const pf_param_desc *pd = pf_param_find(d, key);
        if (!pd) {
            const char **names = malloc(sizeof *names * (size_t)(d->n_params ? d->n_params : 1));
            if (!names)
                return nomem(L);
            for (int i = 0; i < d->n_params; i++)
                names[i] = d->params[i].name;
            const char *near = pf_closest(key, names, d->n_params);
            free(names);
            if (near)
                return fail(L, PF_PARAM, ppath, "unknown parameter '%s' of %s; did you mean '%s'?",
                            key, d->name, near);
            if (d->n_params == 0)
                return fail(L, PF_PARAM, ppath, "unknown parameter '%s': %s takes no parameters",
                            key, d->name);
            param_names(d, msg, sizeof msg);
            return fail(L, PF_PARAM, ppath, "unknown parameter '%s' of %s (it takes: %s)", key,
                        d->name, msg);
        }
        if (json_is_object(v)) { /* bound to a reduction; the default until a frame */
            int st = stage_binding(L, k, ppath, pd, v);
            if (st)
                return st;
            continue;
        }
        if (pf_param_set_json(pd, v, s->params, msg, sizeof msg) != PF_OK)
            return fail(L, PF_PARAM, ppath, "%s (%s.%s)", msg, d->name, pd->name);
    }
    s->n_edges = s->n_in + s->n_bind;
    if (pf_stage_params_ok(d, s->params, msg, sizeof msg) != 0)
        return fail(L, PF_PARAM, obj ? path : base, "%s (%s)", msg, d->name);
    return PF_OK;
}

static int walk_stage(loader *L, json_t *stages, int k)
{
    char base[PATH_SIZE];
    path_index(base, "stages", (size_t)k);
    json_t *j = json_array_get(stages, (size_t)k);
    if (!json_is_object(j))
        return wrong_type(L, base, j,
                          "a stage object such as {\"id\": \"blur\", \"op\": \"gaussian\"}");
    int st = check_keys(L, j, base, KEYS(stage_keys), "a stage");
    if (!st)
        st = stage_id(L, k, base);
    if (!st)
        st = stage_op(L, k, base);
    if (!st)
        st = stage_inputs(L, k, base);
    if (!st)
        st = stage_params(L, k, base);
    return st;
}

/* The stages as a graph: references below n_inputs are pipeline inputs, outside it. A
   bound param's source is an edge like an input: it runs before, and is used. */
static pf_graph stage_graph(const loader *L)
{
    pf_graph g = {L->n_stages, &L->st[0].n_edges, &L->st[0].ref[0], sizeof(stage_in), L->n_inputs};
    return g;
}

/* The ids on a cycle among the stages Kahn's algorithm could not order, named from
   the one first in the file, producer to consumer: "a -> b -> c -> a". */
static int report_cycle(loader *L, const char *done)
{
    pf_graph g = stage_graph(L);
    int *cycle = malloc(sizeof *cycle * (size_t)L->n_stages);
    int len = cycle ? pf_graph_cycle(&g, done, cycle) : -1;
    if (len < 0) {
        free(cycle);
        return nomem(L);
    }
    /* A long cycle shows its first and last ids, and its length: the message stays
       whole (not cut mid-id at the buffer's end) and readable. */
    enum { HEAD = 8, TAIL = 4 };
    char msg[PF_ERRMSG_MAX], path[PATH_SIZE];
    size_t used = 0;
    for (int i = 0; i <= len && used < sizeof msg; i++) {
        int w;
        if (len > HEAD + TAIL && i == HEAD) {
            w = snprintf(msg + used, sizeof msg - used, " -> ...");
            i = len - TAIL - 1;
        } else {
            w = snprintf(msg + used, sizeof msg - used, "%s%s", i ? " -> " : "",
                         L->st[cycle[i % len]].id);
        }
        if (w < 0)
            break;
        used += (size_t)w;
    }
    path_index(path, "stages", (size_t)cycle[0]);
    free(cycle);
    if (len > HEAD + TAIL)
        return fail(L, PF_PIPELINE, path, "cycle: %s (%d stages)", msg, len);
    return fail(L, PF_PIPELINE, path, "cycle: %s", msg);
}

/* Topological order, stable: of the stages ready, the first in the file goes first. */
static int order_stages(loader *L)
{
    pf_graph g = stage_graph(L);
    int *pos = malloc(sizeof *pos * ((size_t)L->n_stages + 1));
    char *done = calloc((size_t)L->n_stages + 1, 1);
    int ordered = pos && done ? pf_graph_order(&g, pos, done) : -1;
    int st = ordered < 0 ? nomem(L) : ordered < L->n_stages ? report_cycle(L, done) : PF_OK;
    for (int k = 0; k < L->n_stages && st == PF_OK; k++)
        L->st[k].order = pos[k];
    free(pos);
    free(done);
    return st;
}

static int walk_stages(loader *L, json_t *v)
{
    if (!json_is_array(v))
        return wrong_type(L, "stages", v, "an array of stages");
    if (json_array_size(v) == 0)
        return fail(L, PF_PIPELINE, "stages", "empty; a pipeline needs at least one stage");
    if (json_array_size(v) > MAX_STAGES)
        return fail(L, PF_PIPELINE, "stages", "%zu stages; a pipeline has at most %d",
                    json_array_size(v), MAX_STAGES);
    for (int k = 0; k < L->n_stages; k++) {
        int st = walk_stage(L, v, k);
        if (st)
            return st;
    }
    int st = check_bindings(L);
    return st ? st : order_stages(L);
}

/* ---- Outputs ----------------------------------------------------------------------------- */

typedef enum out_kind { OUT_EITHER = -1, OUT_IMAGE = 0, OUT_TABLE = 1 } out_kind;

typedef struct out_format {
    const char *name;
    out_kind kind;
    int channels, bits; /* 0, PF_BITS_LIKE_INPUT: like the primary input */
    pf_table_format table_format;
    int png_form; /* pf_png_form: auto the smallest lossless, palette, 1/2/4-bit gray */
} out_format;

static const out_format formats[] = {
    {"auto", OUT_EITHER, 0, PF_BITS_LIKE_INPUT, PF_TABLE_ANY, PF_PNG_FORM_AUTO},
    {"gray8", OUT_IMAGE, 1, 8, PF_TABLE_ANY, PF_PNG_FORM_FRAME},
    {"graya8", OUT_IMAGE, 2, 8, PF_TABLE_ANY, PF_PNG_FORM_FRAME},
    {"rgb8", OUT_IMAGE, 3, 8, PF_TABLE_ANY, PF_PNG_FORM_FRAME},
    {"rgba8", OUT_IMAGE, 4, 8, PF_TABLE_ANY, PF_PNG_FORM_FRAME},
    {"gray16", OUT_IMAGE, 1, 16, PF_TABLE_ANY, PF_PNG_FORM_FRAME},
    {"graya16", OUT_IMAGE, 2, 16, PF_TABLE_ANY, PF_PNG_FORM_FRAME},
    {"rgb16", OUT_IMAGE, 3, 16, PF_TABLE_ANY, PF_PNG_FORM_FRAME},
    {"rgba16", OUT_IMAGE, 4, 16, PF_TABLE_ANY, PF_PNG_FORM_FRAME},
    {"palette", OUT_IMAGE, 0, 8, PF_TABLE_ANY, PF_PNG_FORM_PALETTE},
    {"gray1", OUT_IMAGE, 1, 8, PF_TABLE_ANY, PF_PNG_FORM_GRAY1},
    {"gray2", OUT_IMAGE, 1, 8, PF_TABLE_ANY, PF_PNG_FORM_GRAY2},
    {"gray4", OUT_IMAGE, 1, 8, PF_TABLE_ANY, PF_PNG_FORM_GRAY4},
    {"csv", OUT_TABLE, 0, PF_BITS_LIKE_INPUT, PF_TABLE_CSV, PF_PNG_FORM_FRAME},
    {"json", OUT_TABLE, 0, PF_BITS_LIKE_INPUT, PF_TABLE_JSON, PF_PNG_FORM_FRAME},
};
#define N_FORMATS ((int)(sizeof formats / sizeof formats[0]))

static int output_format(loader *L, const char *path, json_t *v, int ref, out_in *o)
{
    /* candidates longest first, so that "rgba" suggests rgba8 before rgb8 */
    const char *names[N_FORMATS];
    for (int i = 0; i < N_FORMATS; i++)
        names[i] = formats[N_FORMATS - 1 - i].name;
    if (!json_is_string(v))
        return wrong_type(L, path, v, "a format name (a string)");
    const char *f = json_string_value(v);
    const out_format *fmt = NULL;
    for (int i = 0; i < N_FORMATS; i++)
        if (strcmp(formats[i].name, f) == 0)
            fmt = &formats[i];
    if (!fmt) {
        char sug[128];
        return fail(L, PF_PIPELINE, path,
                    "unknown format '%s' (images: auto, gray8, graya8, rgb8, rgba8, gray16, "
                    "graya16, rgb16, rgba16, palette, gray1, gray2, gray4; tables: csv, json)%s",
                    f, suggest(sug, sizeof sug, pf_closest(f, names, N_FORMATS)));
    }
    const pf_stage_desc *d = ref_desc(L, ref);
    int table = d && d->kind == PF_STAGE_REDUCE;
    /* an unknown op (d NULL, not an input) has its own message, further on in the file */
    int known = ref < L->n_inputs || d;
    if (known && fmt->kind == OUT_IMAGE && table)
        return fail(L, PF_PIPELINE, path,
                    "'%s' is an image format, but '%s' is a reduce stage (%s) whose result "
                    "is a table; use \"csv\" or \"json\"",
                    f, ref_name(L, ref), d->name);
    if (known && fmt->kind == OUT_TABLE && !table)
        return fail(L, PF_PIPELINE, path,
                    "'%s' is a table format, but '%s' makes an image; use an image format "
                    "such as \"rgb8\", or \"auto\"",
                    f, ref_name(L, ref));
    o->channels = fmt->channels;
    o->bits = fmt->bits;
    o->table_format = fmt->table_format;
    o->png_form = fmt->png_form;
    return PF_OK;
}

static int walk_output(loader *L, const char *name, json_t *v, name_index *names)
{
    out_in *o = &L->outs[L->n_outs];
    char path[PATH_SIZE], fpath[PATH_SIZE];
    path_key(path, "outputs", name);
    int st = check_ident(L, path, name, "output name");
    if (st)
        return st;
    int q = index_get(names, name, L->n_outs);
    if (q != L->n_outs)
        return fail(L, PF_PIPELINE, path,
                    "output name '%s' differs from '%s' only in case; their files would "
                    "collide on a case-insensitive file system",
                    name, L->outs[q].name);
    o->name = name;
    o->png_form = PF_PNG_FORM_AUTO; /* "auto" where no format is named */
    json_t *from = v, *format = NULL;
    const char *from_path = path;
    if (json_is_object(v)) {
        st = check_keys(L, v, path, KEYS(output_keys), "an output");
        if (st)
            return st;
        path_key(fpath, path, "from");
        from = json_object_get(v, "from");
        format = json_object_get(v, "format");
        from_path = fpath;
        if (!from)
            return fail(L, PF_PIPELINE, fpath,
                        "missing; an output object names its stage in \"from\"");
    }
    if (!json_is_string(from))
        return wrong_type(L, from_path, from,
                          from == v ? "a stage id, or {\"from\": id, \"format\": ...}"
                                    : "a stage id or input name (a string)");
    o->ref = resolve(L, json_string_value(from));
    if (o->ref < 0)
        return dangling(L, from_path, json_string_value(from), NULL);
    if (format) {
        path_key(fpath, path, "format");
        return output_format(L, fpath, format, o->ref, o);
    }
    return PF_OK;
}

static int walk_outputs(loader *L, json_t *v)
{
    if (!json_is_object(v))
        return wrong_type(L, "outputs", v,
                          "an object of output names to stage ids, such as {\"out\": \"blur\"}");
    if (json_object_size(v) == 0)
        return fail(L, PF_PIPELINE, "outputs", "empty; a pipeline needs at least one output");
    if (json_object_size(v) > PF_MAX_FRAMES)
        return fail(L, PF_PIPELINE, "outputs", "%zu outputs; a pipeline has at most %d",
                    json_object_size(v), PF_MAX_FRAMES);
    L->outs = calloc(json_object_size(v), sizeof *L->outs);
    name_index *names = index_new((int)json_object_size(v), 1);
    if (!L->outs || !names) {
        index_free(names);
        return nomem(L);
    }
    const char *key;
    json_t *o;
    int st = PF_OK;
    json_object_foreach(v, key, o)
    {
        if ((st = walk_output(L, key, o, names)) != PF_OK)
            break;
        L->n_outs++;
    }
    index_free(names);
    return st;
}

/* ---- Options --------------------------------------------------------------------------- */

/* Options go through the table that pf_pipeline_set_option uses too (options.c). */
static int walk_options(loader *L, json_t *v)
{
    if (!json_is_object(v))
        return wrong_type(L, "options", v, "an object such as {\"backend\": \"cpu\"}");
    char path[PATH_SIZE], msg[1024];
    const char *names[32];
    int n = 0;
    while (n < 32 && pf_option_name(n))
        names[n] = pf_option_name(n), n++;
    const char *key;
    json_t *o;
    json_object_foreach(v, key, o)
    {
        path_key(path, "options", key);
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = strcmp(names[i], key) == 0;
        if (!known)
            return bad_key(L, "options", key, names, n, "options");
        if (pf_option_set(&L->opts, key, o, NULL, msg, sizeof msg) != PF_OK)
            return fail(L, PF_PIPELINE, path, "%s", msg);
    }
    return PF_OK;
}

/* ---- The document ------------------------------------------------------------------------ */

static int check_version(loader *L)
{
    json_t *v = json_object_get(L->root, "pipefuse");
    if (!v)
        return fail(L, PF_PIPELINE, "pipefuse",
                    "missing; a pipeline file starts with \"pipefuse\": 1, the format "
                    "version%s",
                    json_object_get(L->root, "version") ? " (\"version\" is not a key of "
                                                          "this format)"
                                                        : "");
    if (!json_is_number(v))
        return wrong_type(L, "pipefuse", v, "the format version 1 (a number)");
    if (json_number_value(v) != 1) {
        /* the shortest text that reads back as the value: 1.0000000000000002, not "1" */
        char text[32];
        pf_number_text(json_number_value(v), 0, text, sizeof text);
        return fail(L, PF_PIPELINE, "pipefuse",
                    "format version %s is not supported; this pipefuse reads version 1", text);
    }
    return PF_OK;
}

/* The keys a pipeline cannot do without. When one is missing, an unknown key is
   reported first: "stagse" is better named as itself than as a missing "stages". */
static int check_required(loader *L)
{
    json_t *r = L->root;
    if (!(json_object_get(r, "inputs") || json_object_get(r, "input")) ||
        !json_object_get(r, "stages") || !json_object_get(r, "outputs")) {
        const char *key;
        json_t *v;
        json_object_foreach(r, key, v)
        {
            if (!key_in(key, KEYS(top_keys)))
                return bad_key(L, "", key, KEYS(top_keys), "a pipeline");
        }
    }
    if (!json_object_get(L->root, "inputs") && !json_object_get(L->root, "input"))
        return fail(L, PF_PIPELINE, "inputs",
                    "missing; a pipeline names its inputs, such as \"inputs\": [\"src\"]");
    if (!json_object_get(L->root, "stages"))
        return fail(L, PF_PIPELINE, "stages", "missing; a pipeline needs a list of stages");
    if (!json_object_get(L->root, "outputs"))
        return fail(L, PF_PIPELINE, "outputs",
                    "missing; a pipeline needs at least one output, such as "
                    "\"outputs\": {\"out\": \"<stage id>\"}");
    return PF_OK;
}

static int is_inputs_key(const char *key)
{
    return strcmp(key, "input") == 0 || strcmp(key, "inputs") == 0;
}

static int walk_top(loader *L)
{
    const char *key;
    json_t *v;
    /* The inputs first, wherever they stand in the file: the stages' references are
       checked against them, so a mistake in them is reported as itself. */
    json_object_foreach(L->root, key, v)
    {
        int st = is_inputs_key(key) ? walk_inputs(L, key, v) : PF_OK;
        if (st)
            return st;
    }
    json_object_foreach(L->root, key, v)
    {
        int st = PF_OK;
        if (strcmp(key, "pipefuse") == 0 || is_inputs_key(key))
            continue; /* checked first */
        if (strcmp(key, "$schema") == 0 || strcmp(key, "name") == 0 ||
            strcmp(key, "description") == 0) {
            if (!json_is_string(v))
                st = wrong_type(L, key, v, "a string");
        } else if (strcmp(key, "stages") == 0) {
            st = walk_stages(L, v);
        } else if (strcmp(key, "outputs") == 0) {
            st = walk_outputs(L, v);
        } else if (strcmp(key, "options") == 0) {
            st = walk_options(L, v);
        } else {
            st = bad_key(L, "", key, KEYS(top_keys), "a pipeline");
        }
        if (st)
            return st;
    }
    return PF_OK;
}

/* Marks what reaches an output: unused stages are not run. */
static int mark_used(loader *L)
{
    int n = L->n_inputs + L->n_stages;
    int *roots = malloc(sizeof *roots * (size_t)(L->n_outs ? L->n_outs : 1));
    L->used = calloc((size_t)(n ? n : 1), 1);
    if (!roots || !L->used) {
        free(roots);
        return nomem(L);
    }
    for (int i = 0; i < L->n_outs; i++)
        roots[i] = L->outs[i].ref;
    pf_graph g = stage_graph(L);
    int st = pf_graph_reach(&g, roots, L->n_outs, L->used);
    free(roots);
    return st == PF_OK ? PF_OK : nomem(L);
}

/* ---- The IR ----------------------------------------------------------------------------- */

static int node_of(const loader *L, int ref)
{
    return ref < L->n_inputs ? ref : L->n_inputs + L->st[ref - L->n_inputs].order;
}

static int build(loader *L)
{
    pf_pipeline *p = L->p;
    int ni = L->n_inputs, n = ni + L->n_stages;
    p->nodes = calloc((size_t)n, sizeof *p->nodes);
    if (!p->nodes)
        return nomem(L);
    p->n_nodes = n;
    p->n_inputs = ni;
    for (int i = 0; i < ni; i++) {
        pf_node *nd = &p->nodes[i];
        char path[PATH_SIZE];
        input_path(L, i, path);
        nd->id = pf_strdup(L->inputs[i]);
        nd->path = pf_strdup(path);
        nd->plugin = -1;
        nd->used = L->used[i];
        if (!nd->id || !nd->path)
            return nomem(L);
    }
    for (int k = 0; k < L->n_stages; k++) {
        stage_in *s = &L->st[k];
        pf_node *nd = &p->nodes[ni + s->order];
        nd->desc = s->desc;
        nd->plugin = s->plugin;
        nd->params = s->params;
        s->params = NULL;
        nd->n_in = s->n_in;
        for (int i = 0; i < s->n_in; i++)
            nd->in[i] = node_of(L, s->ref[i]);
        if (s->n_bind) { /* the params as given, bound ones at their defaults */
            nd->n_bind = s->n_bind;
            nd->bind = s->bind;
            s->bind = NULL;
            for (int i = 0; i < nd->n_bind; i++)
                nd->bind[i].src = node_of(L, nd->bind[i].src);
            nd->unbound = malloc(s->desc->params_size ? s->desc->params_size : 1);
            if (!nd->unbound)
                return nomem(L);
            memcpy(nd->unbound, nd->params, s->desc->params_size);
        }
        nd->used = L->used[ni + k];
        char path[PATH_SIZE];
        path_index(path, "stages", (size_t)k);
        nd->id = pf_strdup(s->id);
        nd->path = pf_strdup(path);
        if (!nd->id || !nd->path)
            return nomem(L);
    }
    p->outputs = calloc((size_t)(L->n_outs ? L->n_outs : 1), sizeof *p->outputs);
    if (!p->outputs)
        return nomem(L);
    p->n_outputs = L->n_outs;
    for (int i = 0; i < L->n_outs; i++) {
        pf_output_decl *o = &p->outputs[i];
        char path[PATH_SIZE];
        path_key(path, "outputs", L->outs[i].name);
        o->name = pf_strdup(L->outs[i].name);
        o->path = pf_strdup(path);
        o->node = node_of(L, L->outs[i].ref);
        o->channels = L->outs[i].channels;
        o->bits = L->outs[i].bits;
        o->table_format = L->outs[i].table_format;
        o->png_form = L->outs[i].png_form;
        if (!o->name || !o->path)
            return nomem(L);
    }
    p->opts = L->opts;
    return PF_OK;
}

static void warn_unused(const loader *L)
{
    for (int i = 0; i < L->n_inputs; i++)
        if (!L->used[i])
            pf_log(L->e, 1, "%s: %s: input '%s' is not used by any output", L->src,
                   L->p->nodes[i].path, L->inputs[i]);
    for (int k = 0; k < L->n_stages; k++)
        if (!L->used[L->n_inputs + k])
            pf_log(L->e, 1,
                   "%s: stages[%d]: stage '%s' does not reach any output; it will "
                   "not run",
                   L->src, k, L->st[k].id);
}

/* Whether jansson stopped at a ']' or '}' that follows a comma. position is the byte
   offset just after the token it stopped at. */
static int trailing_comma(const char *text, int position)
{
    if (position < 2 || (size_t)position > strlen(text))
        return 0;
    char c = text[position - 1];
    if (c != ']' && c != '}')
        return 0;
    int i = position - 2;
    while (i >= 0 && strchr(" \t\r\n", text[i]))
        i--;
    return i >= 0 && text[i] == ',';
}

int pf_load_pipeline(pf_pipeline *p, const char *text, const char *source)
{
    loader L;
    memset(&L, 0, sizeof L);
    L.p = p;
    L.e = p->eng;
    L.src = source ? source : "(pipeline)";
    pf_options_default(&L.opts);
    if (!text)
        return fail(&L, PF_INVALID_ARGUMENT, NULL, "no pipeline text");
    if (strnlen(text, MAX_TEXT + 1) > MAX_TEXT)
        return fail(&L, PF_INVALID_ARGUMENT, NULL, "larger than %u MiB; not a pipeline",
                    MAX_TEXT >> 20);

    /* A UTF-8 byte order mark, as some editors write: JSON (RFC 8259) lets a parser
       ignore it. Line and column numbers count from after it. */
    if (strncmp(text, "\xEF\xBB\xBF", 3) == 0)
        text += 3;
    json_error_t jerr;
    L.root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!L.root) {
        /* jansson's words for a \u0000 name its own flag; a user wrote a string */
        char what[sizeof jerr.text];
        const char *near = strstr(jerr.text, " near ");
        if (strstr(jerr.text, "JSON_ALLOW_NUL") || strstr(jerr.text, "NUL byte in object key"))
            snprintf(what, sizeof what, "a string or key cannot hold \\u0000%s", near ? near : "");
        else
            snprintf(what, sizeof what, "%s", jerr.text);
        pf_errf(L.p->errmsg, "%s:%d:%d: %s%s", L.src, jerr.line, jerr.column, what,
                trailing_comma(text, jerr.position) ? " (JSON allows no comma before it)"
                : near && strcmp(near, " near '/'") == 0
                    ? " (JSON allows no comments: remove // and /* */, or use \"description\")"
                    : "");
        pf_pipeline_free_ir(p);
        return PF_PARSE;
    }
    int st;
    if (!json_is_object(L.root))
        st = wrong_type(&L, NULL, L.root, "an object at the top level");
    else if (!(st = check_version(&L)) && !(st = check_required(&L)) && !(st = collect_names(&L)) &&
             !(st = walk_top(&L)) && !(st = mark_used(&L)))
        st = build(&L);
    if (st == PF_OK)
        warn_unused(&L);
    else
        pf_pipeline_free_ir(p);

    for (int k = 0; k < L.n_stages; k++) {
        free(L.st[k].params);
        free(L.st[k].bind);
        free(L.st[k].bind_path);
    }
    free(L.st);
    free(L.inputs);
    free(L.outs);
    free(L.used);
    index_free(L.input_ix);
    index_free(L.stage_ix);
    json_decref(L.root);
    return st;
}

/* Frees what pf_load_pipeline filled in; p->source and p->plan are the caller's. */
void pf_pipeline_free_ir(pf_pipeline *p)
{
    if (!p)
        return;
    for (int i = 0; p->nodes && i < p->n_nodes; i++) {
        free(p->nodes[i].id);
        free(p->nodes[i].params);
        free(p->nodes[i].path);
        free(p->nodes[i].bind);
        free(p->nodes[i].unbound);
    }
    free(p->nodes);
    p->nodes = NULL;
    p->n_nodes = p->n_inputs = 0;
    for (int i = 0; p->outputs && i < p->n_outputs; i++) {
        free(p->outputs[i].name);
        free(p->outputs[i].path);
    }
    free(p->outputs);
    p->outputs = NULL;
    p->n_outputs = 0;
    memset(&p->opts, 0, sizeof p->opts);
}

int pf_find_node(const pf_pipeline *p, const char *id)
{
    for (int i = 0; id && i < p->n_nodes; i++)
        if (p->nodes[i].id && strcmp(p->nodes[i].id, id) == 0)
            return i;
    return -1;
}
