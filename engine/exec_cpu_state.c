/* engine/exec_cpu_state.c: what the CPU executor allocates for a plan, once, so that
 * running a frame allocates nothing: a whole float image (in strips, a window of rows)
 * for every pipeline input and stored node (nodes whose lives do not overlap share
 * one), the reduce stages' partials (one row per band) and per-worker scratch (stencil
 * and resample tasks, point-chain chunks). */
#include <stdlib.h>

#include "cpu_lut.h"
#include "exec_cpu.h"

/* The whole float images, shared between nodes whose lives do not overlap
   (pf_plan_host_buffers): each node's pf_image points into its buffer. */
static int alloc_images(const pf_pipeline *p, pf_cpu_state *st)
{
    const pf_plan *plan = p->plan;
    int *buf_of = malloc(sizeof(int) * (size_t)p->n_nodes);
    size_t *bytes = malloc(sizeof(size_t) * (size_t)p->n_nodes);
    int n = buf_of && bytes ? pf_plan_host_buffers(p, plan, buf_of, bytes) : -1;
    st->pool = n > 0 ? calloc((size_t)n, sizeof(void *)) : NULL;
    int rc = n < 0 || (n > 0 && !st->pool) ? PF_NO_MEMORY : PF_OK;
    for (int b = 0; b < n && rc == PF_OK; b++) {
        st->allocations++;
        if (posix_memalign(&st->pool[b], PF_ALIGN, bytes[b]) != 0) {
            st->pool[b] = NULL;
            rc = PF_NO_MEMORY;
        } else {
            st->n_pool = b + 1;
            st->bytes += bytes[b];
        }
    }
    for (int i = 0; i < p->n_nodes && rc == PF_OK; i++) {
        if (buf_of[i] < 0)
            continue;
        pf_image *im = &st->buf[i];
        im->width = plan->shapes[i].width;
        im->height = plan->shapes[i].height;
        im->pitch = pf_align_up((size_t)im->width * sizeof(pf_float4));
        im->data = st->base[i] = st->pool[buf_of[i]];
    }
    free(buf_of), free(bytes);
    return rc;
}

static int alloc_all(const pf_pipeline *p, pf_cpu_state *st)
{
    const pf_plan *plan = p->plan;
    if (alloc_images(p, st) != PF_OK)
        return PF_NO_MEMORY;
    size_t scratch = 0;
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if (u->scratch > scratch)
            scratch = u->scratch;
        if (u->kind != PF_UNIT_REDUCE)
            continue;
        int i = u->nodes[0];
        size_t bands = (size_t)((u->shape.height + u->cpu_band_rows - 1) / u->cpu_band_rows);
        size_t len = bands * (u->partial_len ? u->partial_len : 1);
        st->partials[i] = calloc(len, sizeof(double));
        st->allocations++;
        if (!st->partials[i])
            return PF_NO_MEMORY;
        st->bytes += len * sizeof(double);
        for (int c = i + 1; c < p->n_nodes && !st->bind_tables[i]; c++)
            for (int k = 0; k < p->nodes[c].n_bind && !st->bind_tables[i]; k++)
                if (p->nodes[c].used && p->nodes[c].bind[k].src == i) {
                    size_t cells = (size_t)plan->shapes[i].width * (size_t)plan->shapes[i].height;
                    st->bind_tables[i] = calloc(cells ? cells : 1, sizeof(double));
                    st->allocations++;
                    if (!st->bind_tables[i])
                        return PF_NO_MEMORY;
                    st->bytes += cells * sizeof(double);
                }
    }
    st->workers = p->eng->threads;
    st->worker_scratch = pf_align_up(scratch ? scratch : PF_ALIGN);
    st->chunk = PF_CPU_CHUNK;
    st->allocations++;
    if (posix_memalign((void **)&st->scratch, PF_ALIGN, st->worker_scratch * (size_t)st->workers) !=
        0) {
        st->scratch = NULL;
        return PF_NO_MEMORY;
    }
    st->bytes += st->worker_scratch * (size_t)st->workers;
    return PF_OK;
}

int pf_cpu_state_make(const pf_pipeline *p, pf_cpu_state **out)
{
    pf_cpu_state *st = calloc(1, sizeof *st);
    *out = st;
    if (!st)
        return PF_NO_MEMORY;
    st->n_nodes = p->n_nodes;
    st->buf = calloc((size_t)p->n_nodes, sizeof(pf_image));
    st->base = calloc((size_t)p->n_nodes, sizeof(pf_float4 *));
    st->partials = calloc((size_t)p->n_nodes, sizeof(double *));
    st->bind_tables = calloc((size_t)p->n_nodes, sizeof(double *));
    st->direct_in = calloc((size_t)p->n_inputs + 1, 1);
    st->direct_out = calloc((size_t)p->n_nodes, sizeof *st->direct_out);
    st->lut_inputs = calloc((size_t)p->n_inputs + 1, sizeof *st->lut_inputs);
    if (!st->buf || !st->base || !st->partials || !st->bind_tables || !st->direct_in ||
        !st->direct_out || !st->lut_inputs)
        return PF_NO_MEMORY;
    return alloc_all(p, st);
}

void pf_cpu_state_free(pf_cpu_state *st)
{
    if (!st)
        return;
    for (int b = 0; b < st->n_pool; b++)
        free(st->pool[b]);
    free(st->pool);
    for (int i = 0; i < st->n_nodes && st->partials; i++)
        free(st->partials[i]);
    for (int i = 0; i < st->n_nodes && st->bind_tables; i++)
        free(st->bind_tables[i]);
    free(st->bind_tables);
    free(st->buf);
    free(st->base);
    free(st->partials);
    free(st->direct_in);
    free(st->direct_out);
    free(st->lut_inputs);
    free(st->scratch);
    pf_cpu_luts_free(st->luts);
    free(st);
}
