/* engine/api.c: the pipeline half of the public API: load, parameters, plan, run,
 * reading the plan and building its kernels ahead (the printer is plan_print.c). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "exec_cuda.h"
#include "executor.h"
#include "pipefuse/bands.h"
#include "fuse.h"
#include "hostmem.h"
#include "watchdog.h"
#include "nvrtc.h"
#include "threadpool.h"

#define PF_API                __attribute__((visibility("default")))
#define PF_MAX_PIPELINE_BYTES (16u << 20)

/* ---- Threads ---------------------------------------------------------------------------------- */

/* One thread at a time inside a pipeline's calls: a second gets PF_BUSY at once and
   touches nothing (not even errmsg, which the first may be writing). */
static int enter(const pf_pipeline *p)
{
    int idle = 0;
    if (!atomic_compare_exchange_strong(&((pf_pipeline *)p)->in_use, &idle, 1))
        return 0;
    /* plugin code run from here logs to p's engine (pf_thread_context) */
    ((pf_pipeline *)p)->context_before = pf_thread_context;
    pf_thread_context = p->eng;
    return 1;
}

static void leave(const pf_pipeline *p)
{
    pf_thread_context = p->context_before;
    atomic_store(&((pf_pipeline *)p)->in_use, 0);
}

#define GUARD(p)                                                                                   \
    do {                                                                                           \
        if (!(p))                                                                                  \
            return PF_INVALID_ARGUMENT;                                                            \
        if (!enter(p))                                                                             \
            return PF_BUSY;                                                                        \
    } while (0)

/* GUARD, then lets a frame queued by pf_pipeline_submit_async complete: it reads the
   parameters, options and plan that the call may change or read. */
#define GUARD_SETTLED(p)                                                                           \
    do {                                                                                           \
        GUARD(p);                                                                                  \
        pf_pipeline_settle(p);                                                                     \
    } while (0)

/* The engine's message is written under this lock, so that it is never torn. */
static pthread_mutex_t engine_msg_mu = PTHREAD_MUTEX_INITIALIZER;

/* Each thread's latest failure on an engine (the engine by its serial, which no later
   engine at the same address shares), so that a thread reading pf_engine_errmsg after
   its own failed call reads its own message, whatever other threads fail meanwhile. */
static _Thread_local struct {
    unsigned long serial;
    char msg[PF_ERRMSG_MAX];
} thread_msg;

void pf_engine_errf(pf_engine *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pf_verrf(thread_msg.msg, PF_ERRMSG_MAX, fmt, ap);
    va_end(ap);
    thread_msg.serial = e->serial;
    pthread_mutex_lock(&engine_msg_mu);
    memcpy(e->errmsg, thread_msg.msg, strlen(thread_msg.msg) + 1);
    pthread_mutex_unlock(&engine_msg_mu);
}

const char *pf_engine_thread_msg(const pf_engine *e)
{
    return thread_msg.serial && thread_msg.serial == e->serial ? thread_msg.msg : NULL;
}

/* Loads take turns. A load's warnings reach the engine's log callback while it holds
   the turn, so a callback that loads another pipeline (on the same thread) goes on
   without waiting for itself: load_depth counts this thread's loads in progress. */
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int load_depth;

/* ---- Loading ---------------------------------------------------------------------------------- */

static int new_ticket_tag(void);

/* The loader writes its message into the new pipeline's own errmsg; only a failed load
   copies it to the engine's, so a load that succeeds leaves the last failure's message
   there for whoever reads it. */
static int load(pf_engine *e, const char *text, const char *source, pf_pipeline **out)
{
    pf_pipeline *p = calloc(1, sizeof *p);
    if (p)
        p->source = pf_strdup(source);
    if (!p || !p->source) {
        free(p);
        pf_engine_errf(e, "%s: out of memory", source);
        return PF_NO_MEMORY;
    }
    p->eng = e;
    p->ticket_tag = new_ticket_tag();
    atomic_init(&p->in_use, 0);
    if (load_depth++ == 0)
        pthread_mutex_lock(&load_mu);
    const void *context = pf_thread_context; /* params checks log to e */
    pf_thread_context = e;
    int rc = pf_load_pipeline(p, text, source);
    pf_thread_context = context;
    if (--load_depth == 0)
        pthread_mutex_unlock(&load_mu);
    if (rc == PF_OK && !(p->watchdog = pf_watchdog_create(p->n_nodes))) {
        pf_errf(p->errmsg, "%s: out of memory", source);
        rc = PF_NO_MEMORY;
    }
    if (rc != PF_OK) {
        pf_engine_errf(e, "%s", p->errmsg[0] ? p->errmsg : "the pipeline did not load");
        pf_pipeline_destroy(p);
        return rc;
    }
    p->errmsg[0] = 0;
    atomic_init(&p->units_now, 0);
    atomic_init(&p->slots_now, p->opts.slots ? p->opts.slots : 3);
    atomic_init(&p->cancels, 0u);
    *out = p;
    return PF_OK;
}

PF_API int pf_pipeline_load_string(pf_engine *e, const char *json, const char *name,
                                   pf_pipeline **out)
{
    if (!out) {
        if (e)
            pf_engine_errf(e, "pf_pipeline_load_string: NULL out (where the pipeline goes)");
        return PF_INVALID_ARGUMENT;
    }
    *out = NULL;
    if (!e || !json) {
        if (e)
            pf_engine_errf(e, "pf_pipeline_load_string: NULL text");
        return PF_INVALID_ARGUMENT;
    }
    return load(e, json, name ? name : "<string>", out);
}

PF_API int pf_pipeline_load_file(pf_engine *e, const char *path, pf_pipeline **out)
{
    if (!out) {
        if (e)
            pf_engine_errf(e, "pf_pipeline_load_file: NULL out (where the pipeline goes)");
        return PF_INVALID_ARGUMENT;
    }
    *out = NULL;
    if (!e || !path) {
        if (e)
            pf_engine_errf(e, "pf_pipeline_load_file: NULL path");
        return PF_INVALID_ARGUMENT;
    }
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (f && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        pf_engine_errf(e, "%s: is a directory, not a pipeline file", path);
        return PF_IO;
    }
    char *text = f ? malloc(PF_MAX_PIPELINE_BYTES + 1) : NULL;
    if (!f || !text) {
        int err = errno;
        if (f)
            fclose(f);
        if (f)
            pf_engine_errf(e, "%s: out of memory", path);
        else
            pf_engine_errf(e, "%s: cannot open: %s", path, strerror(err));
        return f ? PF_NO_MEMORY : PF_IO;
    }
    size_t n = fread(text, 1, PF_MAX_PIPELINE_BYTES + 1, f);
    int bad = ferror(f), read_errno = errno;
    fclose(f);
    text[n <= PF_MAX_PIPELINE_BYTES ? n : 0] = 0;
    if (bad || n > PF_MAX_PIPELINE_BYTES || strlen(text) != n) {
        free(text);
        if (bad)
            pf_engine_errf(e, "%s: read error: %s", path, strerror(read_errno));
        else if (n > PF_MAX_PIPELINE_BYTES)
            pf_engine_errf(e, "%s: larger than %u MiB; not a pipeline file", path,
                           PF_MAX_PIPELINE_BYTES >> 20);
        else
            pf_engine_errf(e, "%s: contains a NUL byte; not a pipeline file", path);
        return bad || n > PF_MAX_PIPELINE_BYTES ? PF_IO : PF_PARSE;
    }
    int rc = load(e, text, path, out);
    free(text);
    return rc;
}

PF_API void pf_pipeline_destroy(pf_pipeline *p)
{
    if (!p)
        return;
    pf_pipeline_free_plan(p);
    pf_pipeline_free_tables(p);
    pf_pipeline_free_ir(p);
    free(p->dump_dir);
    pf_watchdog_free(p->watchdog);
    free(p->source);
    free(p);
}

PF_API const char *pf_pipeline_errmsg(const pf_pipeline *p)
{
    return p ? p->errmsg : "no pipeline";
}

/* ---- Parameters -------------------------------------------------------------------------------- */

/* Whether new params for node i still fit the current plan: same output shape, no
   larger scratch. Otherwise the next run plans again. */
static int plan_still_fits(const pf_pipeline *p, int i)
{
    const pf_plan *plan = p->plan;
    const pf_node *n = &p->nodes[i];
    if (!plan || plan->unit_of[i] < 0)
        return 1;
    const pf_unit *u = &plan->units[plan->unit_of[i]];
    const pf_shape *in = &plan->shapes[n->in[0]];
    /* strips: a stencil's or resample stage's params may move the rows it reads (a
       radius, a flip's axis, a crop's corner), which the windows were worked out from */
    if (plan->strip_rows && n->desc->kind != PF_STAGE_POINT)
        return 0;
    if (n->desc->shape) {
        pf_shape s;
        char err[256];
        if (n->desc->shape(n->params, in, &s, err, sizeof err) != 0 ||
            s.width != plan->shapes[i].width || s.height != plan->shapes[i].height)
            return 0;
    }
    if (n->desc->scratch_bytes &&
        n->desc->scratch_bytes(n->params, plan->shapes[i].width, u->cpu_band_rows) > u->scratch)
        return 0;
    if (n->desc->partial_len && n->desc->partial_len(n->params, in) != u->partial_len)
        return 0;
    if (!p->exec->params_fit(p, p->exec_state, plan->unit_of[i]))
        return 0; /* the executor's own scratch is too small for the new params */
    return 1;
}

/* Whether a reduce stage's row_name names every row of the table it makes with params
   (the planned input's shape): a planned table's names are read with the params its frame
   ran with, and a NULL is a crash in the application, so a change the plan keeps is
   refused here (without a plan, planning checks). PF_OK, or PF_PLUGIN with err. */
static int row_names_ok(const pf_pipeline *p, int i, const void *params, char *err, size_t err_size)
{
    const pf_node *n = &p->nodes[i];
    const pf_stage_desc *d = n->desc;
    if (!p->plan || p->plan->unit_of[i] < 0 || d->kind != PF_STAGE_REDUCE || !d->row_name ||
        !d->shape)
        return PF_OK; /* unplanned, or a stage no output needs: planning checks */
    pf_shape t;
    char why[256];
    if (d->shape(params, &p->plan->shapes[n->in[0]], &t, why, sizeof why) != 0 || t.width <= 0 ||
        t.height <= 0 || (long long)t.width * t.height > INT_MAX)
        return PF_OK; /* planning again refuses it, and says why */
    for (int r = 0; r < t.height; r++)
        if (!d->row_name(params, r)) {
            snprintf(err, err_size,
                     "with this value row_name() gives no name (NULL) for row %d of %d; a "
                     "plugin names every row, or sets row_name to NULL for numbered rows",
                     r, t.height);
            return PF_PLUGIN;
        }
    return PF_OK;
}

/* Sets stage param key ("stage_id.param") to the JSON value v, or where v is NULL to the
   number x (pf_pipeline_set_float: no JSON value made, nothing allocated). */
static int set_param_value(pf_pipeline *p, const char *key, const json_t *v, double x)
{
    const char *dot = key ? strchr(key, '.') : NULL;
    char id[256];
    if (!dot || (size_t)(dot - key) >= sizeof id) {
        pf_errf(p->errmsg, "%s: parameter key '%s' is not of the form stage_id.param", p->source,
                key ? key : "(null)");
        return PF_PARAM;
    }
    memcpy(id, key, (size_t)(dot - key));
    id[dot - key] = 0;
    int i = pf_find_node(p, id);
    if (i >= 0 && i < p->n_inputs) {
        pf_errf(p->errmsg,
                "%s: %s: '%s' is a pipeline input, not a stage; inputs have no "
                "parameters",
                p->source, key, id);
        return PF_PARAM;
    }
    if (i < p->n_inputs) {
        const char **ids = malloc(sizeof(char *) * (size_t)p->n_nodes);
        for (int k = 0; ids && k < p->n_nodes; k++)
            ids[k] = k < p->n_inputs ? NULL : p->nodes[k].id;
        const char *near = ids ? pf_closest(id, ids, p->n_nodes) : NULL;
        pf_errf(p->errmsg, "%s: %s: no stage '%s'%s%s%s", p->source, key, id,
                near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        free(ids);
        return PF_PARAM;
    }
    pf_node *n = &p->nodes[i];
    const pf_param_desc *pd = pf_param_find(n->desc, dot + 1);
    if (!pd) {
        const char **names = malloc(sizeof(char *) * (size_t)(n->desc->n_params + 1));
        for (int k = 0; names && k < n->desc->n_params; k++)
            names[k] = n->desc->params[k].name;
        const char *near = names ? pf_closest(dot + 1, names, n->desc->n_params) : NULL;
        pf_errf(p->errmsg, "%s: %s: stage '%s' (%s) has no parameter '%s'%s%s%s", p->source, key,
                id, n->desc->name, dot + 1, near ? "; did you mean '" : "", near ? near : "",
                near ? "'?" : "");
        free(names);
        return PF_PARAM;
    }
    for (int b = 0; b < n->n_bind; b++)
        if (&n->desc->params[n->bind[b].param] == pd) {
            pf_errf(p->errmsg,
                    "%s: %s: bound to a reduction of stage '%s' in the pipeline file; its value "
                    "comes from each frame's table",
                    p->source, key, p->nodes[n->bind[b].src].id);
            return PF_PARAM;
        }
    /* Validate on a copy, so that a rejected value changes nothing; a frame loop changes
       params, so the copy is on the stack unless the struct is larger than its buffer. */
    _Alignas(max_align_t) unsigned char stack[4096];
    const size_t size = n->desc->params_size;
    void *copy = size <= sizeof stack ? stack : malloc(size);
    if (!copy)
        return PF_NO_MEMORY;
    memcpy(copy, n->params, size);
    char err[1024] = "";
    int rc = v ? pf_param_set_json(pd, v, copy, err, sizeof err)
               : pf_param_set_real(pd, x, copy, err, sizeof err);
    if (rc == PF_OK && pf_stage_params_ok(n->desc, copy, err, sizeof err) != 0)
        rc = PF_PARAM;
    if (rc == PF_OK)
        rc = row_names_ok(p, i, copy, err, sizeof err);
    if (rc != PF_OK) { /* as a pipeline file's message: the op and param in brackets */
        pf_errf(p->errmsg, "%s: %s: %s (%s.%s)", p->source, key, err, n->desc->name, pd->name);
        if (copy != stack)
            free(copy);
        return rc;
    }
    memcpy(n->params, copy, size);
    if (copy != stack)
        free(copy);
    p->param_version++;
    /* Otherwise the plan goes after the frames in flight on it complete (their outputs
       delivered, their tickets then waited for at once): a change never loses a
       submitted frame. */
    if (!plan_still_fits(p, i)) {
        rc = pf_pipeline_drop_plan(p);
        if (rc != PF_OK)
            return rc;
    }
    return PF_OK;
}

PF_API int pf_pipeline_set_param(pf_pipeline *p, const char *key, const char *json_value)
{
    GUARD_SETTLED(p);
    json_error_t jerr;
    json_t *v = json_value ? json_loads(json_value, JSON_DECODE_ANY, &jerr) : NULL;
    if (!v) {
        pf_errf(p->errmsg, "%s: %s: value '%s' is not JSON: %s", p->source, key ? key : "",
                json_value ? json_value : "(null)", json_value ? jerr.text : "NULL");
        leave(p);
        return PF_PARAM;
    }
    int rc = set_param_value(p, key, v, 0);
    json_decref(v);
    leave(p);
    return rc;
}

PF_API int pf_pipeline_set_float(pf_pipeline *p, const char *key, double value)
{
    GUARD_SETTLED(p);
    if (!isfinite(value)) {
        pf_errf(p->errmsg, "%s: %s: %g is not a finite number", p->source, key ? key : "", value);
        leave(p);
        return PF_PARAM;
    }
    int rc = set_param_value(p, key, NULL, value);
    leave(p);
    return rc;
}

/* ---- Inputs and outputs ----------------------------------------------------------------------- */

PF_API int pf_pipeline_input_count(const pf_pipeline *p)
{
    return p ? p->n_inputs : 0;
}

PF_API const char *pf_pipeline_input_name(const pf_pipeline *p, int i)
{
    return p && i >= 0 && i < p->n_inputs ? p->nodes[i].id : NULL;
}

PF_API int pf_pipeline_input_used(const pf_pipeline *p, int i)
{
    return p && i >= 0 && i < p->n_inputs && p->nodes[i].used;
}

PF_API int pf_pipeline_output_count(const pf_pipeline *p)
{
    return p ? p->n_outputs : 0;
}

/* The message of a getter given a NULL result pointer (null: what it is) or an index
   out of range. */
static void bad_index(const pf_pipeline *p, const char *fn, const char *null, const char *what,
                      int i, int n)
{
    char *msg = ((pf_pipeline *)p)->errmsg; /* ours while inside */
    if (*null)
        pf_errf(msg, "%s: %s: %s", p->source, fn, null);
    else
        pf_errf(msg, "%s: %s: no %s %d (%d in all, from 0)", p->source, fn, what, i, n);
}

static int is_table_node(const pf_pipeline *p, int node)
{
    return node >= p->n_inputs && p->nodes[node].desc->kind == PF_STAGE_REDUCE;
}

PF_API int pf_pipeline_output_info(const pf_pipeline *p, int i, pf_output_info *info)
{
    if (!p)
        return PF_INVALID_ARGUMENT;
    if (!enter(p))
        return PF_BUSY;
    if (!info || i < 0 || i >= p->n_outputs) {
        bad_index(p, "pf_pipeline_output_info", info ? "" : "NULL pf_output_info", "output", i,
                  p->n_outputs);
        leave(p);
        return PF_INVALID_ARGUMENT;
    }
    const pf_output_decl *o = &p->outputs[i];
    memset(info, 0, sizeof *info);
    info->name = o->name;
    info->stage = p->nodes[o->node].id;
    info->kind = is_table_node(p, o->node) ? PF_OUTPUT_TABLE : PF_OUTPUT_IMAGE;
    info->channels = o->channels;
    info->bits = o->bits;
    info->table_format = o->table_format;
    if (p->plan)
        info->shape = p->plan->shapes[o->node];
    leave(p);
    return PF_OK;
}

/* ---- Options ------------------------------------------------------------------------------------ */

/* Why path is not a usable directory, or NULL when it is one. */
static const char *not_a_dir(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? "no such directory" : strerror(errno);
    return S_ISDIR(st.st_mode) ? NULL : "not a directory";
}

static int set_option(pf_pipeline *p, const char *name, const char *value)
{
    if (!name || !value) {
        pf_errf(p->errmsg, "%s: pf_pipeline_set_option: NULL %s", p->source,
                !name ? "option name" : "value");
        return PF_INVALID_ARGUMENT;
    }
    if (strcmp(name, "dump_kernels") == 0) { /* a directory, not a value: only here */
        const char *why = *value ? not_a_dir(value) : NULL;
        if (why) {
            pf_errf(p->errmsg, "dump_kernels %s: %s", value, why);
            return PF_INVALID_ARGUMENT;
        }
        char *d = *value ? pf_strdup(value) : NULL;
        if (*value && !d)
            return PF_NO_MEMORY;
        free(p->dump_dir);
        p->dump_dir = d;
        return PF_OK;
    }
    /* Every other option: the table the pipeline loader uses too (options.c). */
    char msg[512];
    int replan = 0;
    int rc = pf_option_set_text(&p->opts, name, value, &replan, msg, sizeof msg);
    if (rc != PF_OK) {
        pf_errf(p->errmsg, "option %s: %s", name, msg);
        return rc == PF_NO_MEMORY ? rc : PF_INVALID_ARGUMENT;
    }
    atomic_store(&p->slots_now, p->opts.slots ? p->opts.slots : 3);
    /* A change that re-plans first completes the frames in flight on the old plan
       (their waits then deliver their outputs), as a parameter change does. */
    return replan ? pf_pipeline_drop_plan(p) : PF_OK;
}

PF_API int pf_pipeline_set_option(pf_pipeline *p, const char *name, const char *value)
{
    GUARD_SETTLED(p);
    int rc = set_option(p, name, value);
    leave(p);
    return rc;
}

/* ---- Plan and run --------------------------------------------------------------------------------- */

static int plan_shapes(pf_pipeline *p, const pf_shape *inputs, int n_inputs)
{
    if (!inputs && n_inputs) {
        pf_errf(p->errmsg, "%s: NULL input shapes for %d input(s)", p->source, n_inputs);
        return PF_INVALID_ARGUMENT;
    }
    int same = p->plan && !p->plan->strip_rows && n_inputs == p->n_inputs;
    for (int i = 0; same && i < n_inputs; i++)
        same = p->plan->in_shapes[i].width == inputs[i].width &&
               p->plan->in_shapes[i].height == inputs[i].height;
    return same ? PF_OK : pf_pipeline_replan(p, inputs, n_inputs);
}

PF_API int pf_pipeline_plan(pf_pipeline *p, const pf_shape *inputs, int n_inputs)
{
    GUARD_SETTLED(p);
    int rc = plan_shapes(p, inputs, n_inputs);
    leave(p);
    return rc;
}

PF_API int pf_pipeline_memory(pf_pipeline *p, const pf_shape *inputs, int n_inputs, pf_memory *m)
{
    GUARD_SETTLED(p);
    int rc = pf_plan_memory(p, inputs, n_inputs, m);
    leave(p);
    return rc;
}

/* Why frame f is not a frame, written into why (empty when it is one): the field at
   fault and its value, so that a caller sees which of its fields to fix. */
static void frame_fault(const pf_frame *f, char *why, size_t size)
{
    size_t bpp = pf_frame_pixel_bytes(f->sample, f->channels);
    why[0] = 0;
    if (!f->data)
        snprintf(why, size, "data is NULL");
    else if ((unsigned)f->sample > PF_F32)
        snprintf(why, size, "sample is %d; expected PF_U8 (0), PF_U16 (1) or PF_F32 (2)",
                 (int)f->sample);
    else if (!bpp)
        snprintf(why, size, "channels is %d; expected 1 to 4", f->channels);
    else if (f->width <= 0 || f->height <= 0)
        snprintf(why, size, "size %dx%d is empty", f->width, f->height);
    else if (f->pitch < (size_t)f->width * bpp)
        snprintf(why, size, "pitch %zu is less than a row (%d pixels of %zu bytes: %zu bytes)",
                 f->pitch, f->width, bpp, (size_t)f->width * bpp);
    else if (f->pitch > (UINTPTR_MAX - (uintptr_t)f->data) / (size_t)f->height)
        /* pitch * height past the end of the address space: no buffer is that large */
        snprintf(why, size, "pitch %zu times %d rows runs past the end of the address space",
                 f->pitch, f->height);
    else if ((uintptr_t)f->data % (bpp / (size_t)f->channels) ||
             f->pitch % (bpp / (size_t)f->channels))
        /* Samples are read as whole u16 or f32 values (on the GPU too, where a misaligned
           access is a fault): the data and every row start on a sample boundary. */
        snprintf(why, size,
                 "data and pitch must be multiples of the sample size (%zu bytes); data is %p, "
                 "pitch is %zu",
                 bpp / (size_t)f->channels, f->data, f->pitch);
}

static int check_frame(pf_pipeline *p, const pf_frame *f, const char *what, const char *name)
{
    char why[256];
    frame_fault(f, why, sizeof why);
    if (why[0]) {
        pf_errf(p->errmsg, "%s: %s '%s': not a valid frame: %s", p->source, what, name, why);
        return PF_INVALID_ARGUMENT;
    }
    return PF_OK;
}

/* Frames that share memory where that cannot give the right frame: two image outputs
   (whichever is written last wins). An output overlapping an input is fine: the
   executors write such an output only after the frame has read its inputs (exec_cpu.c
   for host frames; host frames on CUDA go through the engine's own buffers, and a device
   output over an input is written to them and copied after the frame's kernels,
   exec_cuda.c). */
static int check_overlaps(pf_pipeline *p, pf_frame *const *outs)
{
    for (int o = 0; o < p->n_outputs; o++) {
        if (!outs[o])
            continue;
        for (int q = o + 1; q < p->n_outputs; q++)
            if (outs[q] && pf_frames_overlap(outs[o], outs[q])) {
                pf_errf(p->errmsg,
                        "%s: output '%s' and output '%s' overlap in memory (%p and %p); each "
                        "image output needs its own buffer",
                        p->source, p->outputs[o].name, p->outputs[q].name, outs[o]->data,
                        outs[q]->data);
                return PF_INVALID_ARGUMENT;
            }
    }
    return PF_OK;
}

/* Checks frames against the pipeline, plans when the input shapes changed, and
   collects output pointers (NULL for tables and unwanted outputs). */
static int prepare(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs, int n_out,
                   pf_frame **outs)
{
    if (n_in != p->n_inputs || !inputs) {
        pf_errf(p->errmsg, "%s: the pipeline has %d input(s); %d frame(s) given", p->source,
                p->n_inputs, inputs ? n_in : 0);
        return PF_INVALID_ARGUMENT;
    }
    if (n_out < 0) { /* entries past the outputs' count are not read (pipefuse.h) */
        pf_errf(p->errmsg, "%s: n_out is %d; expected 0 to the %d output(s) of the pipeline",
                p->source, n_out, p->n_outputs);
        return PF_INVALID_ARGUMENT;
    }

    if (p->n_inputs > PF_MAX_FRAMES || p->n_outputs > PF_MAX_FRAMES) {
        pf_errf(p->errmsg, "%s: at most %d inputs and outputs per frame", p->source, PF_MAX_FRAMES);
        return PF_UNSUPPORTED;
    }
    pf_shape shapes[PF_MAX_FRAMES];
    for (int i = 0; i < n_in; i++) {
        int rc = check_frame(p, &inputs[i], "input", p->nodes[i].id);
        if (rc != PF_OK)
            return rc;
        shapes[i].width = inputs[i].width;
        shapes[i].height = inputs[i].height;
    }
    /* Measured bands ran over budget: plan this shape again with the refined model,
       once no frame is in flight. */
    if (p->plan && pf_watchdog_wants_plan(p) && !p->exec->busy(p->exec_state)) {
        pf_pipeline_free_plan(p);
        pf_watchdog_replanned(p);
    }
    int rc = plan_shapes(p, shapes, n_in);
    if (rc != PF_OK)
        return rc;
    for (int o = 0; o < p->n_outputs; o++) {
        outs[o] = outputs && o < n_out && outputs[o].data ? &outputs[o] : NULL;
        if (!outs[o] || is_table_node(p, p->outputs[o].node)) {
            outs[o] = NULL;
            continue;
        }
        rc = check_frame(p, outs[o], "output", p->outputs[o].name);
        if (rc != PF_OK)
            return rc;
        pf_shape s = p->plan->shapes[p->outputs[o].node];
        if (outs[o]->width != s.width || outs[o]->height != s.height) {
            pf_errf(p->errmsg, "%s: output '%s': frame is %dx%d; the plan makes %dx%d", p->source,
                    p->outputs[o].name, outs[o]->width, outs[o]->height, s.width, s.height);
            return PF_SHAPE;
        }
    }
    return PF_OK;
}

/* Frame bookkeeping around a submission: allocation and synchronisation counts of the
   frame, so a test can assert that the steady state has none. Only a frame submitted
   counts: a refused one (a bad frame, a plan that failed) is no frame. */
static void frame_begin(pf_pipeline *p, unsigned long long *alloc0, unsigned long long *sync0)
{
    *alloc0 = p->stats.allocations;
    *sync0 = p->stats.device_syncs;
}

static void frame_end(pf_pipeline *p, unsigned long long alloc0, unsigned long long sync0)
{
    p->stats.frames++;
    p->stats.allocations_last_frame = p->stats.allocations - alloc0;
    p->stats.device_syncs_last_frame = p->stats.device_syncs - sync0;
}

/* The next ticket: positive, unique until the counter wraps after INT_MAX frames. */
/* A ticket is the pipeline's tag (1 to 1023, given out in turn as pipelines load) over
   a sequence number of PF_TICKET_SEQ_BITS bits, so that one pipeline's ticket is not
   taken for another's (PF_INVALID_ARGUMENT). The sequence starts again at 1 after
   2^21 - 1 frames; from then on every ticket with the pipeline's tag counts as issued. */
#define PF_TICKET_SEQ_BITS 21
#define PF_TICKET_SEQ_MASK ((1 << PF_TICKET_SEQ_BITS) - 1)

static _Atomic unsigned ticket_tags;

static int new_ticket_tag(void)
{
    return (int)(atomic_fetch_add(&ticket_tags, 1) % 1023u) + 1;
}

int pf_issue_ticket(pf_pipeline *p)
{
    if (p->last_ticket == PF_TICKET_SEQ_MASK) {
        p->last_ticket = 0;
        p->tickets_wrapped = 1;
    }
    return p->ticket_tag << PF_TICKET_SEQ_BITS | ++p->last_ticket;
}

int pf_ticket_issued(const pf_pipeline *p, int ticket)
{
    int seq = ticket & PF_TICKET_SEQ_MASK;
    return ticket > 0 && ticket >> PF_TICKET_SEQ_BITS == p->ticket_tag && seq > 0 &&
           (p->tickets_wrapped || seq <= p->last_ticket);
}

/* async: pf_pipeline_submit_async (a CPU frame is queued). */
static int submit(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs, int n_out,
                  int device, int async, void *stream, int *ticket)
{
    if (!ticket) {
        pf_errf(p->errmsg, "%s: submit: NULL ticket pointer", p->source);
        return PF_INVALID_ARGUMENT;
    }
    unsigned long long a0, s0;
    frame_begin(p, &a0, &s0);
    pf_frame *outs[PF_MAX_FRAMES];
    int rc = prepare(p, inputs, n_in, outputs, n_out, outs);
    if (rc == PF_OK && device && !p->exec->device) {
        pf_errf(p->errmsg,
                "%s: device frames need the CUDA backend; this pipeline runs on the "
                "CPU",
                p->source);
        rc = PF_UNSUPPORTED;
    }
    if (rc == PF_OK)
        rc = check_overlaps(p, outs);
    if (rc == PF_OK && async && p->exec == &pf_executor_cpu)
        rc = pf_cpu_queue(p, p->exec_state, inputs, outs, ticket);
    else if (rc == PF_OK)
        rc = p->exec->submit(p, p->exec_state, inputs, outs, device, stream, ticket);
    if (rc == PF_OK)
        frame_end(p, a0, s0);
    return rc;
}

PF_API int pf_pipeline_submit(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs,
                              int n_out, int *ticket)
{
    GUARD(p);
    int rc = submit(p, inputs, n_in, outputs, n_out, 0, 0, NULL, ticket);
    leave(p);
    return rc;
}

PF_API int pf_pipeline_submit_async(pf_pipeline *p, const pf_frame *inputs, int n_in,
                                    pf_frame *outputs, int n_out, int *ticket)
{
    GUARD(p);
    int rc = submit(p, inputs, n_in, outputs, n_out, 0, 1, NULL, ticket);
    leave(p);
    return rc;
}

PF_API int pf_pipeline_submit_device(pf_pipeline *p, const pf_frame *inputs, int n_in,
                                     pf_frame *outputs, int n_out, void *stream, int *ticket)
{
    GUARD(p);
    int rc = submit(p, inputs, n_in, outputs, n_out, 1, 0, stream, ticket);
    leave(p);
    return rc;
}

/* Completion of a ticket: timeout_ms < 0 waits, 0 polls, > 0 waits at most that long. */
static int complete(pf_pipeline *p, int ticket, int timeout_ms)
{
    if (p->plan)
        return p->exec->wait(p, p->exec_state, ticket, timeout_ms);
    if (pf_ticket_issued(p, ticket))
        return PF_OK; /* completed before its plan went */
    pf_errf(p->errmsg, "%s: ticket %d was never issued by this pipeline", p->source, ticket);
    return PF_INVALID_ARGUMENT;
}

PF_API int pf_pipeline_wait(pf_pipeline *p, int ticket)
{
    GUARD(p);
    int rc = complete(p, ticket, -1);
    leave(p);
    return rc;
}

PF_API int pf_pipeline_poll(pf_pipeline *p, int ticket)
{
    GUARD(p);
    int rc = complete(p, ticket, 0);
    leave(p);
    return rc;
}

PF_API int pf_pipeline_wait_timeout(pf_pipeline *p, int ticket, int timeout_ms)
{
    GUARD(p);
    int rc = complete(p, ticket, timeout_ms);
    leave(p);
    return rc;
}

/* ---- Strips (pipefuse/bands.h, strip.c) --------------------------------------------------- */

PF_API int pf_pipeline_plan_strips(pf_pipeline *p, const pf_shape *inputs, int n_inputs, int rows,
                                   int *n_strips)
{
    GUARD_SETTLED(p);
    if (n_strips)
        *n_strips = 0;
    int rc = PF_OK;
    if (!inputs || rows <= 0) {
        pf_errf(p->errmsg, "%s: pf_pipeline_plan_strips: %s", p->source,
                !inputs ? "NULL input shapes" : "rows must be at least 1");
        rc = PF_INVALID_ARGUMENT;
    }
    int same = rc == PF_OK && p->plan && p->plan->strip_rows == rows && n_inputs == p->n_inputs;
    for (int i = 0; same && i < n_inputs; i++)
        same = p->plan->in_shapes[i].width == inputs[i].width &&
               p->plan->in_shapes[i].height == inputs[i].height;
    if (rc == PF_OK && !same) {
        p->strip_rows = rows;
        rc = pf_pipeline_replan(p, inputs, n_inputs);
        p->strip_rows = 0;
    }
    if (rc == PF_OK && n_strips)
        *n_strips = p->plan->n_strips;
    leave(p);
    return rc;
}

/* The strip plan's strip s, or a message. */
static int strip_check(pf_pipeline *p, int s, const char *call)
{
    if (!p->plan || !p->plan->strip_rows) {
        pf_errf(p->errmsg, "%s: %s: no strip plan (pf_pipeline_plan_strips first)", p->source,
                call);
        return PF_NOT_PLANNED;
    }
    if (s < 0 || s >= p->plan->n_strips) {
        pf_errf(p->errmsg, "%s: %s: strip %d; the plan has strips 0 to %d", p->source, call, s,
                p->plan->n_strips - 1);
        return PF_INVALID_ARGUMENT;
    }
    return PF_OK;
}

PF_API int pf_pipeline_strip(pf_pipeline *p, int s, int *y0, int *y1, pf_region *in_rows,
                             int n_inputs)
{
    GUARD(p);
    int rc = strip_check(p, s, "pf_pipeline_strip");
    if (rc == PF_OK) {
        const pf_plan *plan = p->plan;
        int a = s * plan->strip_rows, b = a + plan->strip_rows;
        if (y0)
            *y0 = a;
        if (y1)
            *y1 = b < plan->out_height ? b : plan->out_height;
        for (int i = 0; in_rows && i < n_inputs && i < p->n_inputs; i++)
            in_rows[i] = pf_plan_window(plan, s, i);
    }
    leave(p);
    return rc;
}

PF_API int pf_pipeline_strip_memory(pf_pipeline *p, const pf_shape *inputs, int n_inputs, int rows,
                                    pf_memory *m)
{
    GUARD_SETTLED(p);
    int rc = PF_INVALID_ARGUMENT;
    if (rows <= 0)
        pf_errf(p->errmsg, "%s: pf_pipeline_strip_memory: rows must be at least 1", p->source);
    else {
        p->strip_rows = rows;
        rc = pf_plan_memory(p, inputs, n_inputs, m);
        p->strip_rows = 0;
    }
    leave(p);
    return rc;
}

/* Frame f holding rows r of an image `height` rows tall, as the executor reads it: a
   frame of the whole height whose row y is f's row y - r.y0 (an address computed, the
   rows outside r never read). */
static pf_frame strip_frame(const pf_frame *f, pf_region r, int height)
{
    pf_frame v = *f;
    v.data = (void *)((uintptr_t)f->data - (uintptr_t)r.y0 * (uintptr_t)f->pitch);
    v.height = height;
    return v;
}

static int run_strip(pf_pipeline *p, int s, const pf_frame *inputs, int n_in, pf_frame *outputs,
                     int n_out)
{
    int rc = strip_check(p, s, "pf_pipeline_run_strip");
    if (rc != PF_OK)
        return rc;
    const pf_plan *plan = p->plan;
    if (n_in != p->n_inputs || !inputs || n_out < 0 || n_out > p->n_outputs ||
        (n_out && !outputs)) {
        pf_errf(p->errmsg,
                "%s: pf_pipeline_run_strip: %d input and %d output frame(s) given; "
                "the pipeline has %d and %d",
                p->source, inputs ? n_in : 0, outputs ? n_out : 0, p->n_inputs, p->n_outputs);
        return PF_INVALID_ARGUMENT;
    }
    pf_frame vin[PF_MAX_FRAMES], vout[PF_MAX_FRAMES], *outs[PF_MAX_FRAMES];
    const pf_region rows = {s * plan->strip_rows, (s + 1) * plan->strip_rows < plan->out_height
                                                      ? (s + 1) * plan->strip_rows
                                                      : plan->out_height};
    for (int i = 0; i < n_in; i++) {
        const pf_frame *f = &inputs[i];
        pf_region w = pf_plan_window(plan, s, i);
        if (w.y1 <= w.y0) { /* the strip reads none of it: only its format counts */
            static unsigned char none[16];
            if ((unsigned)f->sample > PF_F32 || f->channels < 1 || f->channels > 4) {
                pf_errf(p->errmsg, "%s: input '%s': sample %d, %d channels: not a frame format",
                        p->source, p->nodes[i].id, (int)f->sample, f->channels);
                return PF_INVALID_ARGUMENT;
            }
            vin[i] = (pf_frame){
                none,       plan->in_shapes[i].width, plan->in_shapes[i].height, 0, f->sample,
                f->channels};
            continue;
        }
        rc = check_frame(p, f, "input", p->nodes[i].id);
        if (rc != PF_OK)
            return rc;
        if (f->width != plan->in_shapes[i].width || f->height != w.y1 - w.y0) {
            pf_errf(p->errmsg,
                    "%s: input '%s': strip %d reads rows %d..%d of the %dx%d image: a %dx%d frame "
                    "expected, %dx%d given",
                    p->source, p->nodes[i].id, s, w.y0, w.y1 - 1, plan->in_shapes[i].width,
                    plan->in_shapes[i].height, plan->in_shapes[i].width, w.y1 - w.y0, f->width,
                    f->height);
            return PF_SHAPE;
        }
        vin[i] = strip_frame(f, w, plan->in_shapes[i].height);
    }
    for (int o = 0; o < p->n_outputs; o++) {
        outs[o] = NULL;
        if (o >= n_out || !outputs[o].data)
            continue;
        const pf_frame *f = &outputs[o];
        pf_shape sh = plan->shapes[p->outputs[o].node];
        rc = check_frame(p, f, "output", p->outputs[o].name);
        if (rc == PF_OK && (f->width != sh.width || f->height != rows.y1 - rows.y0)) {
            pf_errf(p->errmsg,
                    "%s: output '%s': strip %d makes rows %d..%d of the %dx%d image: a %dx%d "
                    "frame expected, %dx%d given",
                    p->source, p->outputs[o].name, s, rows.y0, rows.y1 - 1, sh.width, sh.height,
                    sh.width, rows.y1 - rows.y0, f->width, f->height);
            rc = PF_SHAPE;
        }
        for (int q = 0; q < n_in && rc == PF_OK; q++)
            if (vin[q].pitch && pf_frames_overlap(f, &inputs[q])) {
                pf_errf(p->errmsg,
                        "%s: output '%s' and input '%s' overlap in memory; a strip's "
                        "outputs need memory of their own",
                        p->source, p->outputs[o].name, p->nodes[q].id);
                rc = PF_INVALID_ARGUMENT;
            }
        for (int q = 0; q < o && rc == PF_OK; q++)
            if (q < n_out && outputs[q].data && pf_frames_overlap(f, &outputs[q])) {
                pf_errf(p->errmsg,
                        "%s: output '%s' and output '%s' overlap in memory; each "
                        "image output needs its own buffer",
                        p->source, p->outputs[q].name, p->outputs[o].name);
                rc = PF_INVALID_ARGUMENT;
            }
        if (rc != PF_OK)
            return rc;
        vout[o] = strip_frame(f, rows, sh.height);
        outs[o] = &vout[o];
    }
    unsigned long long a0, s0;
    frame_begin(p, &a0, &s0);
    rc = pf_cpu_strip(p, p->exec_state, s, vin, outs);
    if (rc == PF_OK)
        frame_end(p, a0, s0);
    return rc;
}

PF_API int pf_pipeline_run_strip(pf_pipeline *p, int s, const pf_frame *inputs, int n_in,
                                 pf_frame *outputs, int n_out)
{
    GUARD_SETTLED(p);
    int rc = run_strip(p, s, inputs, n_in, outputs, n_out);
    leave(p);
    return rc;
}

PF_API int pf_pipeline_run(pf_pipeline *p, const pf_frame *inputs, int n_in, pf_frame *outputs,
                           int n_out)
{
    GUARD(p);
    int ticket = 0;
    int rc = submit(p, inputs, n_in, outputs, n_out, 0, 0, NULL, &ticket);
    if (rc == PF_OK)
        rc = complete(p, ticket, -1);
    leave(p);
    return rc;
}

/* No guard: any thread, any time, a signal handler too (an atomic increment). The
   CPU executor's cancel points compare the count with the one their frame started with. */
PF_API int pf_pipeline_cancel(pf_pipeline *p)
{
    if (!p)
        return PF_INVALID_ARGUMENT;
    atomic_fetch_add(&p->cancels, 1u);
    return PF_OK;
}

/* These two read a copy kept for them, so that any thread may ask at any time (the plan
   and options they describe may be changing on another thread). */
PF_API int pf_pipeline_slots(const pf_pipeline *p)
{
    return p ? atomic_load(&((pf_pipeline *)p)->slots_now) : 0;
}

/* The smallest pf_stats accepted: up to `backend`, as no caller can want less. */
#define PF_STATS_MIN_SIZE (offsetof(pf_stats, backend) + sizeof(const char *))

PF_API int pf_pipeline_stats(const pf_pipeline *p, pf_stats *s)
{
    if (!p)
        return PF_INVALID_ARGUMENT;
    if (!enter(p))
        return PF_BUSY;
    if (!s || s->size < PF_STATS_MIN_SIZE) {
        if (!s)
            pf_errf(((pf_pipeline *)p)->errmsg, "%s: pf_pipeline_stats: NULL pf_stats", p->source);
        else
            pf_errf(((pf_pipeline *)p)->errmsg,
                    "%s: pf_pipeline_stats: pf_stats.size is %u; set it to sizeof(pf_stats) (%zu)",
                    p->source, s->size, sizeof(pf_stats));
        leave(p);
        return PF_INVALID_ARGUMENT;
    }
    /* An older caller's smaller struct gets the fields it has room for. */
    size_t size = s->size < sizeof(pf_stats) ? s->size : sizeof(pf_stats);
    pf_stats full = p->stats;
    full.size = (uint32_t)size;
    const pf_plan *plan = p->plan;
    full.backend = plan ? p->exec->name(p) : "none";
    full.units_per_frame = plan ? plan->n_units : 0;
    full.launches_per_frame = plan ? p->exec->launches(p, p->exec_state) : 0;
    full.streams = plan ? plan->n_streams : 0;
    full.budget_ms = plan ? plan->budget_ms : 0;
    full.precision = p->opts.precision == PF_PRECISION_FAST ? "fast" : "exact";
    leave(p);
    memcpy(s, &full, size);
    return PF_OK;
}

PF_API int pf_pipeline_table(const pf_pipeline *p, int output, pf_table *t)
{
    if (!p)
        return PF_INVALID_ARGUMENT;
    if (!enter(p))
        return PF_BUSY;
    char *msg = ((pf_pipeline *)p)->errmsg; /* ours while inside */
    if (!t || output < 0 || output >= p->n_outputs || !is_table_node(p, p->outputs[output].node)) {
        if (!t)
            pf_errf(msg, "%s: pf_pipeline_table: NULL pf_table", p->source);
        else if (output < 0 || output >= p->n_outputs)
            pf_errf(msg, "%s: pf_pipeline_table: no output %d (the pipeline has %d)", p->source,
                    output, p->n_outputs);
        else
            pf_errf(msg, "%s: pf_pipeline_table: output '%s' is an image, not a table", p->source,
                    p->outputs[output].name);
        leave(p);
        return PF_INVALID_ARGUMENT;
    }
    int node = p->outputs[output].node;
    /* The last completed frame's: on the current plan, or kept from an earlier one that
       a parameter, option or shape change dropped before a frame completed on this one. */
    const pf_table_buf *tb = p->tables_done   ? &p->tables[node]
                             : p->kept_tables ? &p->kept_tables[node]
                                              : NULL;
    if (!tb || !tb->data) {
        pf_errf(msg,
                "%s: pf_pipeline_table: output '%s' has no table before a frame has completed "
                "(none has since the pipeline was loaded)",
                p->source, p->outputs[output].name);
        leave(p);
        return PF_INVALID_ARGUMENT;
    }
    t->data = tb->data;
    t->rows = tb->rows;
    t->cols = tb->cols;
    t->columns = p->nodes[node].desc->columns;
    t->row_name = p->nodes[node].desc->row_name;
    t->params = tb->params;
    leave(p);
    return PF_OK;
}

/* ---- Reading the plan ------------------------------------------------------------------------------ */

PF_API int pf_pipeline_unit_count(const pf_pipeline *p)
{
    return p ? atomic_load(&((pf_pipeline *)p)->units_now) : 0;
}

PF_API int pf_pipeline_unit(const pf_pipeline *p, int i, pf_unit_info *info)
{
    if (!p)
        return PF_INVALID_ARGUMENT;
    if (!enter(p))
        return PF_BUSY;
    pf_pipeline_settle((pf_pipeline *)p); /* its measured times */
    if (!info || !p->plan || i < 0 || i >= p->plan->n_units) {
        if (info && !p->plan)
            pf_errf(((pf_pipeline *)p)->errmsg,
                    "%s: pf_pipeline_unit: no launch unit %d: the pipeline is not planned "
                    "(pf_pipeline_plan)",
                    p->source, i);
        else
            bad_index(p, "pf_pipeline_unit", info ? "" : "NULL pf_unit_info", "launch unit", i,
                      info ? p->plan->n_units : 0);
        leave(p);
        return PF_INVALID_ARGUMENT;
    }
    const pf_unit *u = &p->plan->units[i];
    info->kind = u->kind;
    info->n_stages = u->n_nodes;
    info->stages = u->ids;
    info->shape = u->shape;
    info->stream = u->stream;
    info->bands = u->bands;
    info->fused = u->kind == PF_UNIT_POINT && u->n_nodes > 1;
    info->predicted_ms = u->predicted_ms;
    pf_watchdog_measured(p, i, &info->measured_ms, &info->measured_band_ms);
    info->bytes = u->bytes;
    leave(p);
    return PF_OK;
}

static int build_kernels(pf_pipeline *p, int arch, const char *dump_dir, const pf_sample *samples,
                         const int *channels, int n_formats, int *n_kernels)
{
    if (n_kernels)
        *n_kernels = 0;
    if (!p->plan) {
        pf_errf(p->errmsg, "%s: build kernels: the pipeline is not planned (pf_pipeline_plan)",
                p->source);
        return PF_NOT_PLANNED;
    }
    if (n_formats < 1 || !samples || !channels || arch < 0) {
        pf_errf(p->errmsg, "%s: build kernels: %s", p->source,
                arch < 0 ? "negative architecture" : "no frame formats given");
        return PF_INVALID_ARGUMENT;
    }
    for (int f = 0; f < n_formats; f++)
        if ((int)samples[f] < PF_U8 || (int)samples[f] > PF_F32 || channels[f] < 1 ||
            channels[f] > 4) {
            pf_errf(p->errmsg,
                    "%s: build kernels: format %d (sample %d, %d channels) is not a frame "
                    "format",
                    p->source, f, (int)samples[f], channels[f]);
            return PF_INVALID_ARGUMENT;
        }
    const char *why_dir = dump_dir ? not_a_dir(dump_dir) : NULL;
    if (why_dir) {
        pf_errf(p->errmsg, "%s: dump directory %s: %s", p->source, dump_dir, why_dir);
        return PF_IO;
    }
    char why[512];
    if (!pf_nvrtc_available(why, sizeof why)) {
        pf_errf(p->errmsg, "%s: %s", p->source, why);
        return PF_UNSUPPORTED;
    }
    pf_fusion_view v;
    if (pf_fusion_view_make(p, &v) != PF_OK)
        return PF_NO_MEMORY;
    /* Architecture and pixels per thread as the CUDA executor picks them: for this
       device, or without one for sm_90 with 132 multiprocessors (H100, H200), so a
       cache filled here serves those. */
    int sms = pf_cuda_sm_count(p->eng), rc = PF_OK, n = 0;
    if (arch == 0)
        arch = pf_cuda_arch(p->eng) > 0 ? pf_cuda_arch(p->eng) : 90;
    for (int f = 0; f < n_formats && rc == PF_OK; f++) {
        pf_fusion_view_formats(p, &v, samples[f], channels[f]);
        for (int u = 0; u < p->plan->n_units && rc == PF_OK; u++) {
            if (v.fused[u] != PF_FUSE_KERNEL)
                continue;
            pf_fuse_unit io;
            void *cubin = NULL;
            size_t size = 0;
            rc = pf_fuse_build(p, u, v.f4, v.fmt, v.fmt_out, arch, sms > 0 ? sms : 132, dump_dir,
                               &io, &cubin, &size);
            free(cubin);
            n += rc == PF_OK;
        }
    }
    pf_fusion_view_free(&v);
    if (n_kernels)
        *n_kernels = n;
    return rc;
}

PF_API int pf_pipeline_build_kernels_for(pf_pipeline *p, int arch, const char *dump_dir,
                                         const pf_sample *samples, const int *channels,
                                         int n_formats, int *n_kernels)
{
    if (!p)
        return PF_INVALID_ARGUMENT;
    if (!enter(p))
        return PF_BUSY;
    pf_pipeline_settle(p);
    int rc = build_kernels(p, arch, dump_dir, samples, channels, n_formats, n_kernels);
    leave(p);
    return rc;
}

PF_API int pf_pipeline_build_kernels(pf_pipeline *p, int arch, const char *dump_dir, int *n_kernels)
{
    const pf_sample sample = PF_U8;
    const int channels = 4;
    return pf_pipeline_build_kernels_for(p, arch, dump_dir, &sample, &channels, 1, n_kernels);
}

/* A print of the plan, inside the pipeline's one-thread-at-a-time guard. */
static int guarded_print(const pf_pipeline *p, FILE *f, int (*print)(const pf_pipeline *, FILE *),
                         const char *fn)
{
    if (!p)
        return PF_INVALID_ARGUMENT;
    if (!enter(p))
        return PF_BUSY;
    pf_pipeline_settle((pf_pipeline *)p);   /* the frame's unit times */
    char *msg = ((pf_pipeline *)p)->errmsg; /* ours while inside */
    int rc = f ? print(p, f) : PF_INVALID_ARGUMENT;
    if (!f)
        pf_errf(msg, "%s: %s: NULL FILE", p->source, fn);
    else if (rc == PF_NOT_PLANNED)
        pf_errf(msg, "%s: %s: the pipeline is not planned (pf_pipeline_plan)", p->source, fn);
    else if (rc == PF_OK && ferror(f)) {
        pf_errf(msg, "%s: %s: write error", p->source, fn);
        rc = PF_IO;
    } else if (rc != PF_OK)
        pf_errf(msg, "%s: %s: %s", p->source, fn, pf_status_str(rc));
    leave(p);
    return rc;
}

PF_API int pf_pipeline_print_plan(const pf_pipeline *p, FILE *f)
{
    return guarded_print(p, f, pf_plan_print, "pf_pipeline_print_plan");
}

PF_API int pf_pipeline_print_dot(const pf_pipeline *p, FILE *f)
{
    return guarded_print(p, f, pf_plan_print_dot, "pf_pipeline_print_dot");
}
