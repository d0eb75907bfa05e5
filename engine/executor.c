/* engine/executor.c: the executors behind one interface (executor.h), the choice of
 * one for each plan, and the life of a plan with its executor state and result tables.
 * Nothing else in the engine knows which executor runs a pipeline. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_cpu.h"
#include "exec_cuda.h"
#include "executor.h"
#include "threadpool.h"
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

/* The CPU executor's state: the plan's buffers (pf_cpu_state) and the queue of
   pf_pipeline_submit_async. A queued frame runs on the plan's runner thread (started by
   the first such frame), which drives the engine's pool as pf_pipeline_run's caller
   would; the thread that called submit goes on. One frame is queued or running at a
   time. The runner writes only the frame's outputs, the plan's buffers, err and
   unit_ms; the pipeline's own thread completes the frame (cpu_finish: its tables, unit
   times and message become the pipeline's) in the wait, or in the next call that reads
   or changes what a frame reads (pf_pipeline_settle). state moves IDLE -> QUEUED on the
   pipeline's thread, QUEUED -> RUNNING -> DONE on the runner, DONE -> IDLE on the
   pipeline's thread, always under mu. */
enum { CPU_IDLE, CPU_QUEUED, CPU_RUNNING, CPU_DONE };

typedef struct cpu_exec {
    pf_pipeline *p;
    pf_cpu_state *st;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC: state changed, or stop */
    int sync_ready;    /* mu and cv initialised */
    pthread_t runner;
    int started, stop;
    int state, ticket, status; /* the queued frame's */
    pf_cpu_run run;
    pf_frame in[PF_MAX_FRAMES], out[PF_MAX_FRAMES];
    pf_frame *outp[PF_MAX_FRAMES];
    double *unit_ms;
    char err[PF_ERRMSG_MAX];
    int last_ticket, last_status; /* the last queued frame completed, for a later wait */
    char last_err[PF_ERRMSG_MAX];
} cpu_exec;

static int cpu_plan(pf_pipeline *p, void **state)
{
    *state = NULL;
    int rc = cpu_sizes_fit(p);
    if (rc != PF_OK)
        return rc;
    cpu_exec *c = calloc(1, sizeof *c);
    double *unit_ms = calloc((size_t)p->plan->n_units + 1, sizeof(double));
    if (!c || !unit_ms) {
        free(c);
        free(unit_ms);
        pf_errf(p->errmsg, "%s: out of memory planning for %dx%d", p->source,
                p->plan->in_shapes[0].width, p->plan->in_shapes[0].height);
        return PF_NO_MEMORY;
    }
    c->p = p;
    c->unit_ms = unit_ms;
    *state = c;
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) == 0) {
        if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
            pthread_mutex_init(&c->mu, NULL) == 0) {
            if (pthread_cond_init(&c->cv, &attr) == 0)
                c->sync_ready = 1;
            else
                pthread_mutex_destroy(&c->mu);
        }
        pthread_condattr_destroy(&attr);
    }
    p->stats.allocations += 2;
    rc = pf_cpu_state_make(p, &c->st);
    if (c->st) {
        p->plan_host_bytes += c->st->bytes;
        if (rc == PF_OK)
            p->stats.allocations += c->st->allocations;
    }
    if (rc == PF_NO_MEMORY)
        pf_errf(p->errmsg, "%s: out of memory planning for %dx%d (%zu bytes allocated)", p->source,
                p->plan->in_shapes[0].width, p->plan->in_shapes[0].height, p->plan_host_bytes);
    return rc;
}

static void *cpu_runner(void *arg)
{
    cpu_exec *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->state != CPU_QUEUED)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stop)
            break;
        c->state = CPU_RUNNING;
        pthread_mutex_unlock(&c->mu);
        pf_thread_context = c->p->eng; /* plugin code logs to the pipeline's engine */
        int rc = pf_exec_cpu_run(c->p, c->st, c->in, c->outp, &c->run);
        pf_thread_context = NULL;
        pthread_mutex_lock(&c->mu);
        c->status = rc;
        c->state = CPU_DONE;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* The queued frame's state, read under mu. */
static int cpu_state_of(cpu_exec *c)
{
    if (!c || !c->sync_ready)
        return CPU_IDLE;
    pthread_mutex_lock(&c->mu);
    int s = c->state;
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* Waits for the queued frame to be DONE: timeout_ms < 0 as long as it takes, 0 not at
   all, > 0 at most that long. 1 when it is. */
static int cpu_wait_done(cpu_exec *c, int timeout_ms)
{
    struct timespec until;
    if (timeout_ms > 0) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&c->mu);
    while (c->state != CPU_DONE && timeout_ms != 0) {
        if (timeout_ms < 0)
            pthread_cond_wait(&c->cv, &c->mu);
        else if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0)
            break; /* ETIMEDOUT (the state is read once more below) */
    }
    int done = c->state == CPU_DONE;
    pthread_mutex_unlock(&c->mu);
    return done;
}

/* Completes the queued frame, which is DONE, on the pipeline's thread: what it made
   becomes the pipeline's, as for a frame run in submit. Its status. */
static int cpu_finish(pf_pipeline *p, cpu_exec *c)
{
    int rc = c->status;
    for (int u = 0; u < p->plan->n_units; u++)
        pf_watchdog_unit_ran(p, u, c->unit_ms[u], c->unit_ms[u]);
    if (rc == PF_OK) {
        pf_exec_cpu_tables(p, c->st);
        pf_pipeline_tables_done(p);
    } else {
        memcpy(p->errmsg, c->err, sizeof c->err);
        memcpy(c->last_err, c->err, sizeof c->err);
    }
    c->last_ticket = c->ticket;
    c->last_status = rc;
    pthread_mutex_lock(&c->mu);
    c->state = CPU_IDLE;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void cpu_settle(pf_pipeline *p, cpu_exec *c)
{
    if (cpu_state_of(c) != CPU_IDLE) {
        cpu_wait_done(c, -1);
        cpu_finish(p, c);
    }
}

void pf_pipeline_settle(pf_pipeline *p)
{
    if (p->exec == &pf_executor_cpu)
        cpu_settle(p, p->exec_state);
}

static int cpu_submit(pf_pipeline *p, void *state, const pf_frame *in, pf_frame *const *out,
                      int device, void *stream, int *ticket)
{
    (void)device, (void)stream; /* api.c sends device frames to device executors only */
    cpu_exec *c = state;
    cpu_settle(p, c);
    int rc = pf_exec_cpu_frame(p, c->st, in, out);
    if (rc == PF_OK) {
        pf_pipeline_tables_done(p);
        *ticket = pf_issue_ticket(p);
    }
    return rc;
}

int pf_cpu_strip(pf_pipeline *p, void *state, int s, const pf_frame *in, pf_frame *const *out)
{
    cpu_exec *c = state;
    cpu_settle(p, c);
    pf_cpu_run run = {.err = p->errmsg, .cancel0 = atomic_load(&p->cancels), .strip = s};
    return pf_exec_cpu_run(p, c->st, in, out, &run);
}

int pf_cpu_queue(pf_pipeline *p, void *state, const pf_frame *in, pf_frame *const *out, int *ticket)
{
    cpu_exec *c = state;
    cpu_settle(p, c);
    if (!c->started && c->sync_ready && pthread_create(&c->runner, NULL, cpu_runner, c) == 0)
        c->started = 1;
    if (!c->started) /* no thread to be had: the frame runs here, as submit runs it */
        return cpu_submit(p, state, in, out, 0, NULL, ticket);
    memcpy(c->in, in, sizeof *in * (size_t)p->n_inputs);
    for (int o = 0; o < p->n_outputs; o++) {
        if (out[o])
            c->out[o] = *out[o];
        c->outp[o] = out[o] ? &c->out[o] : NULL;
    }
    c->run.err = c->err;
    c->run.cancel0 = atomic_load(&p->cancels);
    c->run.unit_ms = c->unit_ms;
    c->run.tables = 0;
    c->err[0] = 0;
    c->ticket = *ticket = pf_issue_ticket(p);
    pthread_mutex_lock(&c->mu);
    c->state = CPU_QUEUED;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return PF_OK;
}

static int cpu_wait(pf_pipeline *p, void *state, int ticket, int timeout_ms)
{
    cpu_exec *c = state;
    if (cpu_state_of(c) != CPU_IDLE && ticket == c->ticket) {
        if (!cpu_wait_done(c, timeout_ms))
            return PF_NOT_READY;
        return cpu_finish(p, c);
    }
    if (ticket == c->last_ticket && c->last_status != PF_OK) {
        memcpy(p->errmsg, c->last_err, sizeof c->last_err);
        return c->last_status; /* a queued frame that failed, completed before */
    }
    if (pf_ticket_issued(p, ticket))
        return PF_OK; /* the CPU ran the frame in submit, or it completed before */
    pf_errf(p->errmsg, "%s: ticket %d was never issued by this pipeline", p->source, ticket);
    return PF_INVALID_ARGUMENT;
}

/* A queued frame's failure stays with its ticket (a later wait on the new plan cannot
   see it, as none can see a frame of a dropped plan): draining never fails a re-plan. */
static int cpu_drain(pf_pipeline *p, void *state)
{
    cpu_settle(p, state);
    return PF_OK;
}

static int cpu_busy(const void *state)
{
    return cpu_state_of((cpu_exec *)state) != CPU_IDLE;
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
    cpu_exec *c = state;
    if (!c)
        return;
    if (p->plan)
        cpu_settle(p, c);
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->runner, NULL);
    }
    if (c->sync_ready) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
    }
    pf_cpu_state_free(c->st);
    free(c->unit_ms);
    free(c);
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
/* The first used stage with params bound to a reduction, or -1. */
static int bound_stage(const pf_pipeline *p)
{
    for (int i = p->n_inputs; i < p->n_nodes; i++)
        if (p->nodes[i].used && p->nodes[i].n_bind)
            return i;
    return -1;
}

static const pf_executor *choose(pf_pipeline *p)
{
    if (p->strip_rows)
        return &pf_executor_cpu; /* strips run on the CPU (pipefuse/bands.h) */
    int bound = bound_stage(p);
    if (bound >= 0 && p->opts.backend == PF_BACKEND_AUTO) {
        if (!p->notified_cpu)
            pf_log(p->eng, 0,
                   "running on the CPU: stage '%s' has parameters bound to a reduction, which "
                   "the CPU backend computes",
                   p->nodes[bound].id);
        p->notified_cpu = 1;
        return &pf_executor_cpu;
    }
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
    int bound = bound_stage(p);
    if (ex->device && bound >= 0) {
        pf_errf(p->errmsg,
                "%s: %s: stage '%s' has parameters bound to a reduction, which the CPU backend "
                "computes; run it with backend auto or cpu",
                p->source, p->nodes[bound].path, p->nodes[bound].id);
        return PF_UNSUPPORTED;
    }
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
