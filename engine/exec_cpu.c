/* engine/exec_cpu.c: the CPU executor. Carries out a plan on the engine's thread pool,
 * unit by unit in plan order, each unit split into row bands that run in parallel.
 *
 * A fused point unit runs band by band and, inside a row, chunk by chunk: every member
 * computes the same PF_CPU_CHUNK pixels in turn into a per-thread chunk buffer, so a
 * chain's intermediates stay in cache and only its stored members (read by other
 * units, or outputs) reach memory. Reduce units use bands of a size fixed by the plan
 * and combine partials in band order, so results do not depend on the thread count.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "frame.h"
#include "plan.h"
#include "threadpool.h"

typedef struct cpu_job {
    pf_pipeline *p;
    pf_plan *plan;
    const pf_unit *u;
    int unit;
    const pf_frame *frames; /* conversions: frames in or out */
    int node;               /* conversions: the buffer's node */
    pthread_mutex_t mu;
    char err[PF_ERRMSG_MAX];
} cpu_job;

static int band_count(int rows, int band_rows)
{
    return (rows + band_rows - 1) / band_rows;
}

static void job_fail(cpu_job *j, const char *id, const char *path, int y0, int y1, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    if (!j->err[0])
        pf_errf(j->err, "%s: %s (%s) failed on rows %d..%d: %s", j->p->source, path, id, y0, y1 - 1,
                msg[0] ? msg : "no reason given");
    pthread_mutex_unlock(&j->mu);
}

static unsigned char *worker_scratch(const pf_plan *plan, int worker)
{
    return plan->scratch + plan->worker_scratch * (size_t)worker;
}

/* ---- Units ----------------------------------------------------------------------------- */

static int point_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    const pf_unit *u = j->u;
    const pf_plan *plan = j->plan;
    const pf_node *nodes = j->p->nodes;
    int w = u->shape.width, h = u->shape.height, chunk = plan->chunk;
    int y0 = band * u->cpu_band_rows;
    int y1 = y0 + u->cpu_band_rows < h ? y0 + u->cpu_band_rows : h;
    pf_float4 *chunks = (pf_float4 *)worker_scratch(plan, worker);
    for (int y = y0; y < y1; y++) {
        for (int x0 = 0; x0 < w; x0 += chunk) {
            int n = w - x0 < chunk ? w - x0 : chunk;
            for (int a = 0; a < u->n_nodes; a++) {
                int id = u->nodes[a];
                const pf_node *node = &nodes[id];
                const pf_float4 *in[PF_MAX_INPUTS];
                for (int k = 0; k < node->n_in; k++) {
                    int src = u->member_in[a * PF_MAX_INPUTS + k];
                    int sn = src >= 0 ? u->nodes[src] : -src - 1;
                    if (src >= 0 && !plan->stored[sn])
                        in[k] = chunks + (size_t)u->slot[src] * (size_t)chunk;
                    else
                        in[k] = pf_image_row(&plan->buf[sn], y) + x0;
                }
                pf_float4 *out = plan->stored[id] ? pf_image_row(&plan->buf[id], y) + x0
                                                  : chunks + (size_t)u->slot[a] * (size_t)chunk;
                node->desc->point_row(node->params, in, node->n_in, out, x0, n, y, w, h);
            }
        }
    }
    return 0;
}

static int region_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    const pf_unit *u = j->u;
    const pf_plan *plan = j->plan;
    int id = u->nodes[0];
    const pf_node *node = &j->p->nodes[id];
    pf_image in[PF_MAX_INPUTS];
    for (int k = 0; k < node->n_in; k++)
        in[k] = plan->buf[node->in[k]];
    int rows = u->kind == PF_UNIT_REDUCE ? u->shape.height : plan->shapes[id].height;
    int y0 = band * u->cpu_band_rows;
    int y1 = y0 + u->cpu_band_rows < rows ? y0 + u->cpu_band_rows : rows;
    char msg[1024] = "";
    pf_stage_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.params = node->params;
    a.in = in;
    a.n_in = node->n_in;
    a.region.y0 = y0;
    a.region.y1 = y1;
    a.err = msg;
    a.err_size = sizeof msg;
    if (u->kind == PF_UNIT_REDUCE) {
        a.partial = plan->partials[id] + (size_t)band * u->partial_len;
        memset(a.partial, 0, sizeof(double) * u->partial_len);
    } else {
        a.out = plan->buf[id];
        a.scratch = u->scratch ? worker_scratch(plan, worker) : NULL;
        a.scratch_size = u->scratch;
    }
    int rc = node->desc->run_cpu(&a);
    if (rc != 0) {
        job_fail(j, node->id, node->path, y0, y1, msg);
        return PF_STAGE;
    }
    return 0;
}

/* ---- Edge conversions ---------------------------------------------------------------------- */

#define PF_CONVERT_ROWS 16

static int upload_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    const pf_frame *f = j->frames;
    const pf_image *im = &j->plan->buf[j->node];
    int y1 = (band + 1) * PF_CONVERT_ROWS < f->height ? (band + 1) * PF_CONVERT_ROWS : f->height;
    for (int y = band * PF_CONVERT_ROWS; y < y1; y++)
        pf_row_to_float4((const char *)f->data + (size_t)y * f->pitch, f->sample, f->channels,
                         f->width, pf_image_row(im, y));
    return 0;
}

static int download_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    const pf_frame *f = j->frames;
    const pf_image *im = &j->plan->buf[j->node];
    int y1 = (band + 1) * PF_CONVERT_ROWS < f->height ? (band + 1) * PF_CONVERT_ROWS : f->height;
    for (int y = band * PF_CONVERT_ROWS; y < y1; y++)
        pf_row_from_float4(pf_image_row(im, y), f->width, (char *)f->data + (size_t)y * f->pitch,
                           f->sample, f->channels);
    return 0;
}

/* ---- A frame ---------------------------------------------------------------------------------- */

static int run_job(cpu_job *j, int n, pf_task_fn fn)
{
    j->err[0] = 0;
    return pf_threadpool_run(j->p->eng->pool, n, j->p->opts.threads, fn, j);
}

int pf_exec_cpu_frame(pf_pipeline *p, const pf_frame *inputs, pf_frame *const *outputs)
{
    pf_plan *plan = p->plan;
    cpu_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.plan = plan;
    if (pthread_mutex_init(&j.mu, NULL) != 0) {
        pf_errf(p->errmsg, "%s: cannot create a mutex", p->source);
        return PF_INTERNAL;
    }
    int rc = PF_OK;
    for (int i = 0; i < p->n_inputs && rc == PF_OK; i++) {
        j.frames = &inputs[i];
        j.node = i;
        rc = run_job(&j, band_count(inputs[i].height, PF_CONVERT_ROWS), upload_task);
    }
    for (int ui = 0; ui < plan->n_units && rc == PF_OK; ui++) {
        const pf_unit *u = &plan->units[ui];
        j.u = u;
        j.unit = ui;
        int rows = u->kind == PF_UNIT_POINT || u->kind == PF_UNIT_REDUCE
                       ? u->shape.height
                       : plan->shapes[u->nodes[0]].height;
        int bands = band_count(rows, u->cpu_band_rows);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = run_job(&j, bands, u->kind == PF_UNIT_POINT ? point_task : region_task);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        plan->units[ui].measured_ms = plan->units[ui].measured_band_ms =
            (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (rc == PF_OK && u->kind == PF_UNIT_REDUCE) {
            int id = u->nodes[0];
            const pf_node *node = &p->nodes[id];
            node->desc->combine(node->params, &u->shape, plan->partials[id], bands,
                                plan->tables[id].data);
        }
    }
    for (int o = 0; o < p->n_outputs && rc == PF_OK; o++) {
        const pf_frame *f = outputs[o];
        if (!f || plan->tables[p->outputs[o].node].data)
            continue;
        j.frames = f;
        j.node = p->outputs[o].node;
        rc = run_job(&j, band_count(f->height, PF_CONVERT_ROWS), download_task);
    }
    if (rc != PF_OK)
        pf_errf(p->errmsg, "%s", j.err[0] ? j.err : "a CPU task failed");
    pthread_mutex_destroy(&j.mu);
    return rc;
}
