/* engine/executor.c: the executors behind one interface (executor.h), the choice of
 * one for each plan, and the life of a plan with its executor state and result tables.
 * Nothing else in the engine knows which executor runs a pipeline. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec_cpu.h"
#include "exec_cuda.h"
#include "executor.h"
#include "watchdog.h"

/* ---- The CPU executor ---------------------------------------------------------------------- */

static const char *cpu_name(const pf_pipeline *p)
{
    (void)p;
    return "cpu";
}

/* Host bytes a stage may ask for per band (scratch) or per frame (partials) on each of
   the engine's threads: far more than any machine has, yet small enough that aligning
   the size and multiplying it by the threads or bands cannot wrap around. A stage asking
   for more (scratch_bytes() or partial_len() returning SIZE_MAX, or a negative int cast
   to size_t) would otherwise get a wrapped, short buffer, or none, and write past it. */
static size_t cpu_size_cap(const pf_pipeline *p)
{
    int workers = p->eng->threads > 0 ? p->eng->threads : 1;
    return (SIZE_MAX / 4) / (size_t)workers;
}

/* What the stages of p->plan ask for on the CPU, before anything is allocated for it:
   PF_OK, or PF_PLUGIN naming the stage and the size. */
static int cpu_sizes_fit(pf_pipeline *p)
{
    const pf_plan *plan = p->plan;
    size_t cap = cpu_size_cap(p);
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if (u->kind == PF_UNIT_POINT)
            continue;
        const pf_node *n = &p->nodes[u->nodes[0]];
        int reduce = u->kind == PF_UNIT_REDUCE;
        int width = reduce ? u->shape.width : plan->shapes[u->nodes[0]].width;
        size_t need =
            n->desc->scratch_bytes ? n->desc->scratch_bytes(n->params, width, u->cpu_band_rows) : 0;
        if (need > cap) {
            pf_errf(p->errmsg,
                    "%s: %s (%s): scratch_bytes(params, %d, %d) asks for %zu bytes, more than can "
                    "be allocated; refusing to run it (op %s)",
                    p->source, n->path, n->id, width, u->cpu_band_rows, need, n->desc->name);
            return PF_PLUGIN;
        }
        if (!reduce)
            continue;
        size_t bands = (size_t)((u->shape.height + u->cpu_band_rows - 1) / u->cpu_band_rows);
        if (u->partial_len > cap / sizeof(double) / (bands ? bands : 1)) {
            pf_errf(p->errmsg,
                    "%s: %s (%s): partial_len() asks for %zu doubles a band (%zu bands of an "
                    "image of %dx%d), more than can be allocated; refusing to run it (op %s)",
                    p->source, n->path, n->id, u->partial_len, bands, u->shape.width,
                    u->shape.height, n->desc->name);
            return PF_PLUGIN;
        }
    }
    return PF_OK;
}

static int cpu_plan(pf_pipeline *p, void **state)
{
    *state = NULL;
    int rc = cpu_sizes_fit(p);
    if (rc != PF_OK)
        return rc;
    pf_cpu_state *st;
    rc = pf_cpu_state_make(p, &st);
    *state = st;
    if (st) {
        p->plan_host_bytes += st->bytes;
        if (rc == PF_OK)
            p->stats.allocations += st->allocations;
    }
    if (rc == PF_NO_MEMORY)
        pf_errf(p->errmsg, "%s: out of memory planning for %dx%d (%zu bytes allocated)", p->source,
                p->plan->in_shapes[0].width, p->plan->in_shapes[0].height, p->plan_host_bytes);
    return rc;
}

static int cpu_submit(pf_pipeline *p, void *state, const pf_frame *in, pf_frame *const *out,
                      int device, void *stream, int *ticket)
{
    (void)device, (void)stream; /* api.c sends device frames to device executors only */
    int rc = pf_exec_cpu_frame(p, state, in, out);
    if (rc == PF_OK) {
        pf_pipeline_tables_done(p);
        *ticket = pf_issue_ticket(p);
    }
    return rc;
}

static int cpu_wait(pf_pipeline *p, void *state, int ticket, int timeout_ms)
{
    (void)state, (void)timeout_ms;
    if (pf_ticket_issued(p, ticket))
        return PF_OK; /* the CPU ran the frame in submit */
    pf_errf(p->errmsg, "%s: ticket %d was never issued by this pipeline", p->source, ticket);
    return PF_INVALID_ARGUMENT;
}

static int cpu_drain(pf_pipeline *p, void *state)
{
    (void)p, (void)state;
    return PF_OK;
}

static int cpu_busy(const void *state)
{
    (void)state;
    return 0;
}

static int cpu_launches(const pf_pipeline *p, const void *state)
{
    (void)state;
    return p->plan->n_units;
}

static int cpu_params_fit(const pf_pipeline *p, const void *state, int u)
{
    (void)p, (void)state, (void)u;
    return 1; /* host scratch is checked against the plan's own sizes (api.c) */
}

static void cpu_release(pf_pipeline *p, void *state)
{
    (void)p;
    pf_cpu_state_free(state);
}

const pf_executor pf_executor_cpu = {
    .device = 0,
    .name = cpu_name,
    .plan = cpu_plan,
    .submit = cpu_submit,
    .wait = cpu_wait,
    .drain = cpu_drain,
    .busy = cpu_busy,
    .launches = cpu_launches,
    .params_fit = cpu_params_fit,
    .release = cpu_release,
};

/* ---- The CUDA executor (exec_cuda.c) ------------------------------------------------------- */

static const char *cuda_name(const pf_pipeline *p)
{
    return p->opts.graph ? "cuda-graph" : "cuda-eager";
}

static int cuda_plan(pf_pipeline *p, void **state)
{
    struct pf_cuda_plan *c;
    int rc = pf_cuda_plan_build(p, &c);
    *state = c;
    return rc;
}

static int cuda_submit(pf_pipeline *p, void *state, const pf_frame *in, pf_frame *const *out,
                       int device, void *stream, int *ticket)
{
    return pf_cuda_submit(p, state, in, out, device, stream, ticket);
}

static int cuda_wait(pf_pipeline *p, void *state, int ticket, int timeout_ms)
{
    return pf_cuda_wait_for(p, state, ticket, timeout_ms);
}

static int cuda_drain(pf_pipeline *p, void *state)
{
    return pf_cuda_drain(p, state);
}

static int cuda_busy(const void *state)
{
    return pf_cuda_busy(state);
}

static int cuda_launches(const pf_pipeline *p, const void *state)
{
    (void)p;
    return pf_cuda_launches(state);
}

static int cuda_params_fit(const pf_pipeline *p, const void *state, int u)
{
    return pf_cuda_scratch_fits(p, state, u);
}

static void cuda_release(pf_pipeline *p, void *state)
{
    (void)p;
    pf_cuda_plan_free(state);
}

const pf_executor pf_executor_cuda = {
    .device = 1,
    .name = cuda_name,
    .plan = cuda_plan,
    .submit = cuda_submit,
    .wait = cuda_wait,
    .drain = cuda_drain,
    .busy = cuda_busy,
    .launches = cuda_launches,
    .params_fit = cuda_params_fit,
    .release = cuda_release,
};

/* ---- The choice ---------------------------------------------------------------------------- */

/* auto takes CUDA when a device is usable and every used stage has a CUDA
   implementation, else the CPU with a one-line notice. */
static const pf_executor *choose(pf_pipeline *p)
{
    int cuda = p->opts.backend == PF_BACKEND_CUDA;
    if (p->opts.backend == PF_BACKEND_AUTO && pf_cuda_lost(p->eng))
        cuda = 1; /* fail with the reason rather than switch executors silently */
    else if (p->opts.backend == PF_BACKEND_AUTO) {
        char why[512] = "";
        cuda = pf_cuda_available(p->eng, why, sizeof why);
        for (int i = p->n_inputs; i < p->n_nodes && cuda; i++) {
            const pf_node *n = &p->nodes[i];
            if (n->used && !(n->desc->kind == PF_STAGE_POINT ? n->desc->point_cuda != NULL
                                                             : n->desc->run_cuda != NULL)) {
                snprintf(why, sizeof why, "stage '%s' (%s) has no CUDA implementation", n->id,
                         n->desc->name);
                cuda = 0;
            }
        }
        if (!cuda && !p->notified_cpu) {
            pf_log(p->eng, 0, "running on the CPU: %s", why);
            p->notified_cpu = 1;
        }
    } else if (cuda) {
        /* Probe the device now: the cost model needs its measured bandwidth (an
           unusable device is reported when the CUDA side is built). */
        char why[512];
        (void)pf_cuda_available(p->eng, why, sizeof why);
    }
    if (!cuda && p->dump_dir && !p->notified_dump) {
        pf_log(p->eng, 1,
               "dump_kernels %s: the CPU backend generates no kernels, so nothing is written "
               "there (`pipefuse check --dump-kernels DIR` writes those a CUDA run would)",
               p->dump_dir);
        p->notified_dump = 1;
    }
    return cuda ? &pf_executor_cuda : &pf_executor_cpu;
}

/* ---- A plan's life ------------------------------------------------------------------------- */

static void free_tables(pf_table_buf *t, int n)
{
    for (int i = 0; t && i < n; i++) {
        free(t[i].data);
        free(t[i].params);
    }
    free(t);
}

void pf_pipeline_free_tables(pf_pipeline *p)
{
    free_tables(p->kept_tables, p->n_nodes);
    p->kept_tables = NULL;
}

void pf_pipeline_tables_done(pf_pipeline *p)
{
    for (int i = 0; p->tables && i < p->n_nodes; i++)
        if (p->tables[i].data && p->nodes[i].desc->params_size)
            memcpy(p->tables[i].params, p->nodes[i].params, p->nodes[i].desc->params_size);
    p->tables_done = 1;
    if (p->kept_tables)
        pf_pipeline_free_tables(p); /* once, on the first frame of a new plan */
}

/* The plan's tables outlive it when a frame completed on it (pf_pipeline_table reads the
   last completed frame's until another completes); otherwise the kept ones stay. */
void pf_pipeline_free_plan(pf_pipeline *p)
{
    if (p->exec)
        p->exec->release(p, p->exec_state);
    if (p->tables && p->tables_done) {
        pf_pipeline_free_tables(p);
        p->kept_tables = p->tables;
    } else {
        free_tables(p->tables, p->n_nodes);
    }
    pf_plan_free(p->plan);
    p->exec = NULL;
    p->exec_state = NULL;
    p->tables = NULL;
    p->tables_done = 0;
    p->plan = NULL;
    p->plan_host_bytes = 0;
    atomic_store(&p->units_now, 0);
}

int pf_pipeline_drop_plan(pf_pipeline *p)
{
    int rc = p->exec ? p->exec->drain(p, p->exec_state) : PF_OK;
    pf_pipeline_free_plan(p);
    return rc;
}

/* Whether reduce node i's table, t.width columns by t.height rows, can be read as
   pf_table promises: a name for every column (or no names at all) and a label for every
   row (or no labels). A reader walks columns[0 .. cols) and calls row_name for each row,
   so a short list or a NULL label is a read past the plugin's array or a NULL string in
   the application (`pipefuse run` crashed writing the CSV). PF_OK, or PF_PLUGIN. */
static int table_names_ok(pf_pipeline *p, int i, pf_shape t)
{
    const pf_node *n = &p->nodes[i];
    const pf_stage_desc *d = n->desc;
    int named = 0;
    while (d->columns && named < t.width && d->columns[named])
        named++;
    if (d->columns && named < t.width) {
        pf_errf(p->errmsg,
                "%s: %s (%s): the table has %d columns but the stage's columns list names %d; "
                "a plugin lists one name per column, NULL-terminated, or sets columns to NULL "
                "(op %s)",
                p->source, n->path, n->id, t.width, named, d->name);
        return PF_PLUGIN;
    }
    for (int r = 0; d->row_name && r < t.height; r++)
        if (!d->row_name(n->params, r)) {
            pf_errf(p->errmsg,
                    "%s: %s (%s): row_name() gives no name (NULL) for row %d of %d; a plugin "
                    "names every row, or sets row_name to NULL for numbered rows (op %s)",
                    p->source, n->path, n->id, r, t.height, d->name);
            return PF_PLUGIN;
        }
    return PF_OK;
}

/* The result tables of the reduce stages, which every executor writes the same way;
   *allocations counts the allocations made. */
static int alloc_tables(pf_pipeline *p, unsigned long long *allocations)
{
    const pf_plan *plan = p->plan;
    p->tables = calloc((size_t)p->n_nodes, sizeof(pf_table_buf));
    if (!p->tables)
        return PF_NO_MEMORY;
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if (u->kind != PF_UNIT_REDUCE)
            continue;
        int i = u->nodes[0];
        pf_shape t = plan->shapes[i];
        int rc = table_names_ok(p, i, t);
        if (rc != PF_OK)
            return rc;
        p->tables[i].rows = t.height;
        p->tables[i].cols = t.width;
        p->tables[i].data = calloc((size_t)t.width * (size_t)t.height, sizeof(double));
        p->tables[i].params = calloc(1, p->nodes[i].desc->params_size + 1);
        *allocations += 2;
        if (!p->tables[i].data || !p->tables[i].params)
            return PF_NO_MEMORY;
        p->plan_host_bytes += (size_t)t.width * (size_t)t.height * sizeof(double);
    }
    return PF_OK;
}

int pf_pipeline_replan(pf_pipeline *p, const pf_shape *in, int n_in)
{
    int rc = pf_pipeline_drop_plan(p); /* a new shape: frames in flight complete */
    if (rc != PF_OK)
        return rc;
    const pf_executor *ex = choose(p);
    rc = pf_plan_build(p, in, n_in, ex->device, &p->plan);
    if (rc != PF_OK)
        return rc;
    unsigned long long tables = 0;
    rc = alloc_tables(p, &tables);
    if (rc == PF_NO_MEMORY)
        pf_errf(p->errmsg, "%s: out of memory planning for %dx%d (%zu bytes allocated)", p->source,
                in[0].width, in[0].height, p->plan_host_bytes);
    if (rc == PF_OK) {
        p->exec = ex;
        rc = ex->plan(p, &p->exec_state);
    }
    if (rc == PF_NO_MEMORY && ex->device && !p->exec_state)
        pf_errf(p->errmsg, "%s: out of memory planning for %dx%d", p->source, in[0].width,
                in[0].height);
    if (rc != PF_OK) {
        pf_pipeline_free_plan(p);
        return rc;
    }
    pf_watchdog_plan_started(p);
    atomic_store(&p->units_now, p->plan->n_units);
    p->stats.plans++;
    p->stats.allocations += tables;
    p->stats.host_bytes += p->plan_host_bytes;
    return PF_OK;
}
