/* engine/exec_cpu_state.c: what the CPU executor allocates for a plan, once, so that
 * running a frame allocates nothing: a whole float image for every pipeline input and
 * stored node, the reduce stages' partials (one row per band) and per-worker scratch
 * (stencil and resample tasks, point-chain chunks). */
#include <stdlib.h>

#include "cpu_lut.h"
#include "exec_cpu.h"

static int alloc_image(pf_cpu_state *st, pf_image *im, pf_shape s)
{
    st->allocations++;
    im->width = s.width;
    im->height = s.height;
    im->pitch = pf_align_up((size_t)s.width * sizeof(pf_float4));
    void *data = NULL;
    if (posix_memalign(&data, PF_ALIGN, im->pitch * (size_t)s.height) != 0)
        return PF_NO_MEMORY;
    im->data = data;
    st->bytes += im->pitch * (size_t)s.height;
    return PF_OK;
}

static int alloc_all(const pf_pipeline *p, pf_cpu_state *st)
{
    const pf_plan *plan = p->plan;
    for (int i = 0; i < p->n_nodes; i++) {
        int is_input = i < p->n_inputs;
        if ((is_input || plan->stored[i]) && alloc_image(st, &st->buf[i], plan->shapes[i]))
            return PF_NO_MEMORY;
    }
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
    st->partials = calloc((size_t)p->n_nodes, sizeof(double *));
    st->direct_in = calloc((size_t)p->n_inputs + 1, 1);
    st->direct_out = calloc((size_t)p->n_nodes, sizeof *st->direct_out);
    st->lut_inputs = calloc((size_t)p->n_inputs + 1, sizeof *st->lut_inputs);
    if (!st->buf || !st->partials || !st->direct_in || !st->direct_out || !st->lut_inputs)
        return PF_NO_MEMORY;
    return alloc_all(p, st);
}

void pf_cpu_state_free(pf_cpu_state *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n_nodes; i++) {
        if (st->buf)
            free(st->buf[i].data);
        if (st->partials)
            free(st->partials[i]);
    }
    free(st->buf);
    free(st->partials);
    free(st->direct_in);
    free(st->direct_out);
    free(st->lut_inputs);
    free(st->scratch);
    pf_cpu_luts_free(st->luts);
    free(st);
}
