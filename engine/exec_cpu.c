/* engine/exec_cpu.c: the CPU executor. Carries out a plan on the engine's thread pool,
 * unit by unit in plan order, each unit split into row bands that run in parallel.
 *
 * A fused point unit runs band by band and, inside a row, chunk by chunk: every member
 * computes the same PF_CPU_CHUNK pixels in turn into a per-thread chunk buffer, so a
 * chain's intermediates stay in cache and only its stored members (read by other
 * units, or outputs) reach memory. Reduce units use bands of a size fixed by the plan
 * and combine partials in band order, so results do not depend on the thread count.
 *
 * Edges of point units are fused too: a pipeline input read only by point units is
 * converted chunk by chunk inside them, straight from the caller's frame, and an
 * output that only a point unit writes (and nothing reads) is stored chunk by chunk
 * into the caller's frame; neither passes through a whole float image. The same
 * conversion functions run on the same values, so the bytes are the same.
 *
 * Two paths skip the float working format where that gives the same bytes:
 * - point units of per-channel stages reading an 8- or 16-bit caller frame (or two
 *   8-bit ones) run as table lookups (cpu_lut.c), whole or for their first stages; the
 *   tables are made by running the unit's own members over every code value, here,
 *   with point_rows;
 * - resample stages that only move pixels (run_native) copy samples from a caller frame
 *   into a caller frame of the same integer format, and reduce stages with run_native
 *   (histogram) read an integer caller frame as it is.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_lut.h"
#include "exec_cpu.h"
#include "frame.h"
#include "hostmem.h"
#include "threadpool.h"
#include "watchdog.h"

typedef struct cpu_job {
    pf_pipeline *p;
    pf_plan *plan;
    pf_cpu_state *st; /* buffers and scratch (exec_cpu_state.c) */
    const pf_unit *u;
    int unit;
    const pf_frame *frames;      /* conversions: frames in or out */
    int node;                    /* conversions: the buffer's node */
    const pf_frame *inputs;      /* the frame's inputs, for point units reading them directly */
    char *direct_in;             /* per input: converted inside point units, not uploaded */
    const pf_frame **direct_out; /* per node: the output frame a point unit stores into, or
                                    NULL (the image buffer, downloaded after) */
    int run_from, run_to;        /* point units: the members run, [run_from, run_to) */
    const pf_cpu_lut *lut;       /* tables of the unit, or of members [0, run_from) */
    const pf_frame *lut_in;      /* ... the frame they read */
    const pf_frame *lut_in2;     /* ... and the second, or NULL */
    const pf_frame *lut_out;     /* ... and the frame the unit stores */
    int lut_node;                /* ... the node whose values they hold */
    pf_task_fn fn;               /* the task run_job hands the pool, behind the cancel point */
    const pf_cpu_run *run;       /* the frame's cancel count */
    int strip;                   /* the strip running (plan->strip_rows), else -1 */
    int lo, hi;                  /* the rows the unit (or conversion) runs: [lo, hi) */
    pthread_mutex_t mu;
    char err[PF_ERRMSG_MAX];
} cpu_job;

static int band_count(int rows, int band_rows)
{
    return (rows + band_rows - 1) / band_rows;
}

/* Rows [*y0, *y1) of task `band` of unit j->u: its band_rows rows from j->lo, up to j->hi. */
static void task_rows(const cpu_job *j, int band, int *y0, int *y1)
{
    const int r = j->u->cpu_band_rows;
    *y0 = j->lo + band * r;
    *y1 = *y0 + r < j->hi ? *y0 + r : j->hi;
}

static void job_fail(cpu_job *j, const char *id, const char *path, int y0, int y1, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    if (!j->err[0])
        pf_errf(j->err, "%s: %s (%s) failed on rows %d..%d: %s", j->p->source, path, id, y0, y1 - 1,
                msg[0] ? msg : "no reason given");
    pthread_mutex_unlock(&j->mu);
}

static unsigned char *worker_scratch(const pf_cpu_state *st, int worker)
{
    return st->scratch + st->worker_scratch * (size_t)worker;
}

/* ---- Units ----------------------------------------------------------------------------- */

/* The index of outside input node sn among u's inputs (it is there: u reads it). */
static int direct_index(const pf_unit *u, int sn)
{
    int k = 0;
    while (u->inputs[k] != sn)
        k++;
    return k;
}

/* Row y of frame f from pixel x0. */
static void *frame_at(const pf_frame *f, int y, int x0)
{
    return (char *)f->data + (size_t)y * f->pitch +
           (size_t)x0 * pf_frame_pixel_bytes(f->sample, f->channels);
}

/* Up to this many of a unit's outside inputs convert into a chunk of their own; the
   rest (rare) are uploaded as whole images. */
#define PF_DIRECT_INPUTS 4
#define PF_DIRECT_CHUNK  256 /* pixels: at least the plan's chunk (PF_CPU_CHUNK) */

/* Rows [y0, y1) of point unit j->u over an image of w x h. */
static int point_rows(cpu_job *j, int w, int h, int y0, int y1, int worker)
{
    const pf_unit *u = j->u;
    const pf_plan *plan = j->plan;
    const pf_cpu_state *st = j->st;
    const pf_node *nodes = j->p->nodes;
    int chunk = st->chunk;
    pf_float4 *chunks = (pf_float4 *)worker_scratch(st, worker);
    _Alignas(64) pf_float4 in_chunk[PF_DIRECT_INPUTS][PF_DIRECT_CHUNK], out_chunk[PF_DIRECT_CHUNK];
    if (chunk > PF_DIRECT_CHUNK)
        return PF_INTERNAL;
    for (int y = y0; y < y1; y++) {
        for (int x0 = 0; x0 < w; x0 += chunk) {
            int n = w - x0 < chunk ? w - x0 : chunk;
            if (j->run_from > 0) { /* the tabulated members' values, from the input */
                const pf_frame *f = j->lut_in;
                int last = u->nodes[j->run_from - 1];
                pf_frame src = {frame_at(f, y, x0), n, 1, f->pitch, f->sample, f->channels};
                pf_frame dst = {plan->stored[last]
                                    ? pf_image_row(&st->buf[last], y) + x0
                                    : chunks + (size_t)u->slot[j->run_from - 1] * (size_t)chunk,
                                n,
                                1,
                                sizeof(pf_float4) * (size_t)n,
                                PF_F32,
                                4};
                pf_cpu_lut_rows(j->lut, &src, NULL, &dst, 0, 1);
            }
            for (int k = 0; k < u->n_inputs && k < PF_DIRECT_INPUTS && !j->run_from; k++) {
                int sn = u->inputs[k];
                if (sn < j->p->n_inputs && j->direct_in[sn]) {
                    const pf_frame *f = &j->inputs[sn];
                    pf_row_to_float4(frame_at(f, y, x0), f->sample, f->channels, n, in_chunk[k]);
                }
            }
            for (int a = j->run_from; a < j->run_to; a++) {
                int id = u->nodes[a];
                const pf_node *node = &nodes[id];
                const pf_float4 *in[PF_MAX_INPUTS];
                for (int k = 0; k < node->n_in; k++) {
                    int src = u->member_in[a * PF_MAX_INPUTS + k];
                    int sn = src >= 0 ? u->nodes[src] : -src - 1;
                    if (src >= 0 && !plan->stored[sn])
                        in[k] = chunks + (size_t)u->slot[src] * (size_t)chunk;
                    else if (src < 0 && sn < j->p->n_inputs && j->direct_in[sn])
                        in[k] = in_chunk[direct_index(u, sn)];
                    else
                        in[k] = pf_image_row(&st->buf[sn], y) + x0;
                }
                const pf_frame *df = j->direct_out[id];
                pf_float4 *out = df                 ? out_chunk
                                 : plan->stored[id] ? pf_image_row(&st->buf[id], y) + x0
                                                    : chunks + (size_t)u->slot[a] * (size_t)chunk;
                node->desc->point_row(node->params, in, node->n_in, out, x0, n, y, w, h);
                if (df)
                    pf_row_from_float4(out_chunk, n, frame_at(df, y, x0), df->sample, df->channels);
            }
        }
    }
    return 0;
}

static int point_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    const pf_unit *u = j->u;
    int y0, y1;
    task_rows(j, band, &y0, &y1);
    return point_rows(j, u->shape.width, u->shape.height, y0, y1, worker);
}

/* ---- Point units as table lookups (cpu_lut.c) ------------------------------------------ */

/* The caller frames point unit u reads and stores when it can run through tables: one
   or two outside inputs, caller's frames; one stored member, stored straight into a
   caller's frame; every member per-channel; formats that cpu_lut.c tabulates. */
static int lut_frames(const cpu_job *j, const pf_unit *u, const pf_frame **in, const pf_frame **in2,
                      const pf_frame **out)
{
    if (u->kind != PF_UNIT_POINT || u->n_inputs < 1 || u->n_inputs > 2 ||
        u->inputs[0] >= j->p->n_inputs || u->inputs[u->n_inputs - 1] >= j->p->n_inputs ||
        u->n_stores != 1 || !j->direct_out[u->stores[0]])
        return 0;
    for (int a = 0; a < u->n_nodes; a++)
        if (!(j->p->nodes[u->nodes[a]].desc->flags & PF_STAGE_PER_CHANNEL))
            return 0;
    *in = &j->inputs[u->inputs[0]];
    *in2 = u->n_inputs == 2 ? &j->inputs[u->inputs[1]] : NULL;
    *out = j->direct_out[u->stores[0]];
    return pf_cpu_lut_fits(*in, *in2, *out);
}

/* Where the whole unit cannot be tabulated (a cross-channel stage in it, an output in
   float buffers), its first members may be: the longest chain from the start, each
   per-channel and reading only the one before (the first: the unit's one outside input,
   a caller's frame), none stored but the unit's last member (its whole image, read by
   a stencil, say), and nothing after the chain reading the input or a member of it but
   the last. Their values are then a function of the input's code, as for a whole unit,
   tabulated as float RGBA (stored as such: exactly). The number of members in the
   chain, 0 when none. */
static int lut_prefix(const cpu_job *j, const pf_unit *u)
{
    if (u->kind != PF_UNIT_POINT || u->n_inputs != 1 || u->inputs[0] >= j->p->n_inputs)
        return 0;
    int in = -(u->inputs[0] + 1), n = 0;
    while (n < u->n_nodes) {
        const pf_node *node = &j->p->nodes[u->nodes[n]];
        if (!(node->desc->flags & PF_STAGE_PER_CHANNEL) || node->n_in != 1 ||
            u->member_in[n * PF_MAX_INPUTS] != (n ? n - 1 : in) ||
            (j->plan->stored[u->nodes[n]] && n + 1 < u->n_nodes) || j->direct_out[u->nodes[n]])
            break;
        n++;
    }
    for (int a = n; a < u->n_nodes && n > 0; a++)
        for (int k = 0; k < j->p->nodes[u->nodes[a]].n_in; k++) {
            int src = u->member_in[a * PF_MAX_INPUTS + k];
            if (src == in || (src >= 0 && src < n - 1))
                return 0;
        }
    return n;
}

/* cpu_lut.c's build: runs members [0, j->run_to) of unit j->u over row 0 of in (and
   in2: standing for its outside inputs) into out (for node j->lut_node) with
   point_rows, the code that runs frames, on this thread while no task runs (so worker
   0's scratch is free). */
static int lut_build(void *ctx, const pf_frame *in, const pf_frame *in2, const pf_frame *out)
{
    cpu_job *j = ctx;
    const pf_unit *u = j->u;
    int sn = u->inputs[0], sn2 = in2 ? u->inputs[1] : sn, id = j->lut_node;
    pf_frame *frames = j->st->lut_inputs;
    memcpy(frames, j->inputs, sizeof *frames * (size_t)j->p->n_inputs);
    frames[sn] = *in;
    if (in2)
        frames[sn2] = *in2;
    const pf_frame *inputs = j->inputs, *df = j->direct_out[id];
    char direct = j->direct_in[sn], direct2 = j->direct_in[sn2];
    j->inputs = frames;
    j->direct_out[id] = out;
    j->direct_in[sn] = j->direct_in[sn2] = 1;
    int rc = point_rows(j, in->width, 1, 0, 1, 0);
    j->inputs = inputs;
    j->direct_out[id] = df;
    j->direct_in[sn2] = direct2;
    j->direct_in[sn] = direct;
    return rc;
}

static int lut_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    int y0, y1;
    task_rows(j, band, &y0, &y1);
    pf_cpu_lut_rows(j->lut, j->lut_in, j->lut_in2, j->lut_out, y0, y1);
    return 0;
}

/* Point unit j->u through tables: the whole unit (run_task becomes lut_task) or its
   first members (point_task then runs the rest). PF_OK when neither applies. */
static int lut_plan(cpu_job *j, int ui, pf_task_fn *run_task)
{
    const pf_unit *u = j->u;
    int n = 0;
    pf_frame prefix_out = {NULL, 0, 0, 0, PF_F32, 4};
    j->lut_in2 = NULL;
    if (lut_frames(j, u, &j->lut_in, &j->lut_in2, &j->lut_out)) {
        j->lut_node = u->stores[0];
        *run_task = lut_task;
    } else if ((n = lut_prefix(j, u)) > 0) {
        j->lut_in = &j->inputs[u->inputs[0]];
        prefix_out.width = j->lut_in->width;
        prefix_out.height = j->lut_in->height;
        if (!pf_cpu_lut_fits(j->lut_in, NULL, &prefix_out))
            return PF_OK;
        j->lut_out = &prefix_out; /* only its format counts */
        j->lut_node = u->nodes[n - 1];
        j->run_to = n;
    } else {
        return PF_OK;
    }
    /* the tables follow the params: those set through the API, and bound ones */
    int rc = pf_cpu_lut_get(&j->st->luts, j->plan->n_units, ui,
                            j->p->param_version + j->st->bound_serial, j->lut_in, j->lut_in2,
                            j->lut_out, lut_build, j, &j->lut);
    j->run_to = u->n_nodes;
    j->run_from = rc == PF_OK ? n : 0;
    if (n)
        j->lut_out = NULL; /* prefix_out goes out of scope */
    if (rc != PF_OK)
        pf_errf(j->err, "%s: %s: cannot build its tables (%s)", j->p->source, u->ids[0],
                pf_status_name(rc));
    return rc;
}

static int region_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    const pf_unit *u = j->u;
    const pf_cpu_state *st = j->st;
    int id = u->nodes[0];
    const pf_node *node = &j->p->nodes[id];
    pf_image in[PF_MAX_INPUTS];
    for (int k = 0; k < node->n_in; k++)
        in[k] = st->buf[node->in[k]];
    int y0, y1;
    task_rows(j, band, &y0, &y1);
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
        a.partial = st->partials[id] + (size_t)band * u->partial_len;
        memset(a.partial, 0, sizeof(double) * u->partial_len);
    } else {
        a.out = st->buf[id];
        a.scratch = u->scratch ? worker_scratch(st, worker) : NULL;
        a.scratch_size = u->scratch;
    }
    int rc = node->desc->run_cpu(&a);
    pf_plugin_msg(msg, sizeof msg);
    if (rc != 0) {
        job_fail(j, node->id, node->path, y0, y1, msg);
        return PF_STAGE;
    }
    return 0;
}

/* ---- Resample units in the frames' own format ---------------------------------------------- */

/* Whether resample or stencil node id can run from its caller frame into frame out
   without converting (the stage's run_native, for these params): its one input is a
   pipeline input, of out's format, 8- or 16-bit (where the float path stores exactly the
   samples it loaded; a float frame's gray output is a luma, which turns -0 into +0). */
static int native_fits(const cpu_job *j, int id, const pf_frame *out)
{
    const pf_node *n = &j->p->nodes[id];
    if (!n->desc || (n->desc->kind != PF_STAGE_RESAMPLE && n->desc->kind != PF_STAGE_STENCIL) ||
        !n->desc->run_native || n->n_in != 1 || n->in[0] >= j->p->n_inputs ||
        !n->desc->native_ok(n->params))
        return 0;
    const pf_frame *in = &j->inputs[n->in[0]];
    return (in->sample == PF_U8 || in->sample == PF_U16) && in->sample == out->sample &&
           in->channels == out->channels;
}

/* Whether reduce node id can count its caller frame in its own format (the stage's
   run_native, for these params): its one input is a pipeline input of 8- or 16-bit
   samples. */
static int reduce_native(const cpu_job *j, int id)
{
    const pf_node *n = &j->p->nodes[id];
    if (!n->desc || n->desc->kind != PF_STAGE_REDUCE || !n->desc->run_native || n->n_in != 1 ||
        n->in[0] >= j->p->n_inputs || !n->desc->native_ok(n->params))
        return 0;
    const pf_frame *in = &j->inputs[n->in[0]];
    return in->sample == PF_U8 || in->sample == PF_U16;
}

/* pf_native_args.from_float4: the engine's store of one pixel. */
static void native_store(const pf_native_args *a, pf_float4 v, void *px)
{
    pf_row_from_float4(&v, 1, px, (pf_sample)a->sample, a->channels);
}

static int native_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    const pf_unit *u = j->u;
    int id = u->nodes[0];
    const pf_node *node = &j->p->nodes[id];
    const pf_frame *in = &j->inputs[node->in[0]], *out = j->direct_out[id];
    int reduce = u->kind == PF_UNIT_REDUCE;
    int y0, y1;
    task_rows(j, band, &y0, &y1);
    char msg[1024] = "";
    pf_native_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.params = node->params;
    a.in = in->data;
    a.in_width = in->width;
    a.in_height = in->height;
    a.in_pitch = in->pitch;
    if (reduce) {
        a.partial = j->st->partials[id] + (size_t)band * u->partial_len;
        memset(a.partial, 0, sizeof(double) * u->partial_len);
    } else {
        a.out = out->data;
        a.out_width = out->width;
        a.out_height = out->height;
        a.out_pitch = out->pitch;
    }
    a.sample = (int)in->sample;
    a.channels = in->channels;
    a.pixel_bytes = pf_frame_pixel_bytes(in->sample, in->channels);
    a.region.y0 = y0;
    a.region.y1 = y1;
    a.from_float4 = native_store;
    a.err = msg;
    a.err_size = sizeof msg;
    if (node->desc->run_native(&a) != 0) {
        pf_plugin_msg(msg, sizeof msg);
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
    const pf_image *im = &j->st->buf[j->node];
    int y0 = j->lo + band * PF_CONVERT_ROWS;
    int y1 = y0 + PF_CONVERT_ROWS < j->hi ? y0 + PF_CONVERT_ROWS : j->hi;
    for (int y = y0; y < y1; y++)
        pf_row_to_float4((const char *)f->data + (size_t)y * f->pitch, f->sample, f->channels,
                         f->width, pf_image_row(im, y));
    return 0;
}

static int download_task(void *ctx, int band, int worker)
{
    cpu_job *j = ctx;
    const pf_frame *f = j->frames;
    const pf_image *im = &j->st->buf[j->node];
    int y0 = j->lo + band * PF_CONVERT_ROWS;
    int y1 = y0 + PF_CONVERT_ROWS < j->hi ? y0 + PF_CONVERT_ROWS : j->hi;
    for (int y = y0; y < y1; y++)
        pf_row_from_float4(pf_image_row(im, y), f->width, (char *)f->data + (size_t)y * f->pitch,
                           f->sample, f->channels);
    return 0;
}

/* ---- A frame ---------------------------------------------------------------------------------- */

/* The output rows of strip s. */
static pf_region strip_rows(const pf_plan *plan, int s)
{
    int y0 = s * plan->strip_rows;
    return (pf_region){y0, y0 + plan->strip_rows < plan->out_height ? y0 + plan->strip_rows
                                                                    : plan->out_height};
}

/* Strip s's images: each node's buffer holds its window, the image's row y at buffer
   row y - window.y0, so the image's data is the buffer moved up by that many rows
   (computed as an address: the rows above are never read). */
static void strip_images(const pf_plan *plan, pf_cpu_state *st, int s)
{
    for (int i = 0; i < st->n_nodes; i++) {
        if (!st->base[i])
            continue;
        pf_region w = pf_plan_window(plan, s, i);
        st->buf[i].data =
            (pf_float4 *)((uintptr_t)st->base[i] - (uintptr_t)w.y0 * (uintptr_t)st->buf[i].pitch);
    }
}

/* Which inputs point units convert themselves (every used consumer is a point unit
   that has it among its first PF_DIRECT_INPUTS inputs, and no output shows it), and
   which outputs they store themselves (written by a point unit, read by nothing, named
   by exactly one wanted output, sharing no memory with an input). */
static void plan_direct(cpu_job *j, pf_frame *const *outputs)
{
    const pf_pipeline *p = j->p;
    const pf_plan *plan = j->plan;
    for (int o = 0; o < p->n_outputs; o++) {
        int id = p->outputs[o].node, ui = plan->unit_of[id], named = 0, read = 0;
        if (!outputs[o] || ui < 0 ||
            (plan->units[ui].kind != PF_UNIT_POINT && !native_fits(j, id, outputs[o])))
            continue;
        /* An output sharing memory with an input (in place, or at another offset) is
           stored last, from its buffer, once every unit has read the inputs: stored
           during the units, it would change pixels that others have yet to read. Strips'
           frames share none (pf_pipeline_run_strip), and their unit stores the output's
           rows only where its window is the strip's rows: a point unit's members share
           one window, which another member may make taller. */
        int shared = 0;
        for (int i = 0; i < p->n_inputs && !shared && j->strip < 0; i++)
            shared = pf_frames_overlap(outputs[o], &j->inputs[i]);
        if (j->strip >= 0) {
            pf_region w = pf_plan_window(plan, j->strip, id), r = strip_rows(plan, j->strip);
            shared = w.y0 != r.y0 || w.y1 != r.y1;
        }
        if (shared)
            continue;
        for (int q = 0; q < p->n_outputs; q++)
            named += p->outputs[q].node == id;
        for (int c = plan->cons_first[id]; c < plan->cons_first[id + 1]; c++)
            read += p->nodes[plan->cons[c]].used;
        if (named == 1 && !read)
            j->direct_out[id] = outputs[o];
    }
    for (int i = 0; i < p->n_inputs; i++) {
        int ok = !plan->is_out[i];
        for (int c = plan->cons_first[i]; c < plan->cons_first[i + 1] && ok; c++) {
            int cn = plan->cons[c], ui = plan->unit_of[cn];
            if (!p->nodes[cn].used)
                continue;
            if (ui >= 0 && (plan->units[ui].kind == PF_UNIT_RESAMPLE ||
                            plan->units[ui].kind == PF_UNIT_STENCIL)) {
                ok = j->direct_out[cn] != NULL; /* a native run reads the frame itself */
                continue;
            }
            if (ui >= 0 && plan->units[ui].kind == PF_UNIT_REDUCE && reduce_native(j, cn))
                continue;
            ok = ui >= 0 && plan->units[ui].kind == PF_UNIT_POINT;
            for (int k = 0; ok && plan->units[ui].inputs[k] != i; k++)
                ok = k + 1 < PF_DIRECT_INPUTS && k + 1 < plan->units[ui].n_inputs;
        }
        j->direct_in[i] = (char)ok;
    }
}

/* The cancel point: a task that starts after pf_pipeline_cancel (on any thread) stops
   its job, which hands out no further tasks; the tasks running finish their bands. */
static int cancelled(const cpu_job *j)
{
    return atomic_load_explicit(&j->p->cancels, memory_order_relaxed) != j->run->cancel0;
}

static int cancellable_task(void *ctx, int index, int worker)
{
    cpu_job *j = ctx;
    return cancelled(j) ? PF_CANCELLED : j->fn(ctx, index, worker);
}

static int run_job(cpu_job *j, int n, pf_task_fn fn)
{
    j->err[0] = 0;
    j->fn = fn;
    return pf_threadpool_run(j->p->eng->pool, n, j->p->opts.threads, cancellable_task, j);
}

int pf_exec_cpu_frame(pf_pipeline *p, pf_cpu_state *st, const pf_frame *inputs,
                      pf_frame *const *outputs)
{
    pf_cpu_run run = {.err = p->errmsg, .cancel0 = atomic_load(&p->cancels), .tables = 1};
    return pf_exec_cpu_run(p, st, inputs, outputs, &run);
}

void pf_exec_cpu_tables(pf_pipeline *p, pf_cpu_state *st)
{
    const pf_plan *plan = p->plan;
    for (int ui = 0; ui < plan->n_units; ui++) {
        const pf_unit *u = &plan->units[ui];
        if (u->kind != PF_UNIT_REDUCE)
            continue;
        int id = u->nodes[0];
        const pf_node *node = &p->nodes[id];
        node->desc->combine(node->params, &u->shape, st->partials[id],
                            band_count(u->shape.height, u->cpu_band_rows), p->tables[id].data);
    }
}

int pf_exec_cpu_run(pf_pipeline *p, pf_cpu_state *st, const pf_frame *inputs,
                    pf_frame *const *outputs, const pf_cpu_run *run)
{
    pf_plan *plan = p->plan;
    cpu_job j;
    memset(&j, 0, sizeof j);
    j.p = p;
    j.plan = plan;
    j.st = st;
    j.run = run;
    if (pthread_mutex_init(&j.mu, NULL) != 0) {
        pf_errf(run->err, "%s: cannot create a mutex", p->source);
        return PF_INTERNAL;
    }
    int rc = PF_OK;
    j.strip = plan->strip_rows ? run->strip : -1;
    if (j.strip >= 0)
        strip_images(plan, st, j.strip);
    j.inputs = inputs;
    j.direct_in = st->direct_in;
    j.direct_out = st->direct_out;
    memset(j.direct_in, 0, (size_t)p->n_inputs);
    memset(j.direct_out, 0, sizeof *j.direct_out * (size_t)p->n_nodes);
    plan_direct(&j, outputs);
    for (int i = 0; i < p->n_inputs && rc == PF_OK; i++) {
        if (j.direct_in[i])
            continue;
        j.frames = &inputs[i];
        j.node = i;
        pf_region w =
            j.strip >= 0 ? pf_plan_window(plan, j.strip, i) : (pf_region){0, inputs[i].height};
        j.lo = w.y0;
        j.hi = w.y1;
        rc = run_job(&j, band_count(w.y1 - w.y0, PF_CONVERT_ROWS), upload_task);
    }
    for (int ui = 0; ui < plan->n_units && rc == PF_OK; ui++) {
        const pf_unit *u = &plan->units[ui];
        j.u = u;
        j.unit = ui;
        if (cancelled(&j)) {
            rc = PF_CANCELLED;
            break;
        }
        pf_region w = {0, u->kind == PF_UNIT_POINT || u->kind == PF_UNIT_REDUCE
                              ? u->shape.height
                              : plan->shapes[u->nodes[0]].height};
        if (j.strip >= 0)
            w = pf_plan_window(plan, j.strip, u->nodes[0]);
        j.lo = w.y0;
        j.hi = w.y1;
        int bands = w.y1 > w.y0 ? band_count(w.y1 - w.y0, u->cpu_band_rows) : 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pf_task_fn fn = u->kind == PF_UNIT_POINT ? point_task : region_task;
        if (((u->kind == PF_UNIT_RESAMPLE || u->kind == PF_UNIT_STENCIL) &&
             j.direct_out[u->nodes[0]]) ||
            (u->kind == PF_UNIT_REDUCE && reduce_native(&j, u->nodes[0])))
            fn = native_task;
        j.run_from = 0;
        j.run_to = u->n_nodes;
        for (int a = 0; a < u->n_nodes; a++) /* params bound to tables made earlier */
            if (p->nodes[u->nodes[a]].n_bind &&
                pf_bind_apply(p, u->nodes[a], (const double *const *)st->bind_tables))
                st->bound_serial++;
        if (u->kind == PF_UNIT_POINT)
            rc = lut_plan(&j, ui, &fn);
        if (rc == PF_OK)
            rc = run_job(&j, bands, fn);
        if (rc == PF_OK && u->kind == PF_UNIT_REDUCE && st->bind_tables[u->nodes[0]]) {
            const pf_node *rn = &p->nodes[u->nodes[0]];
            rn->desc->combine(rn->params, &u->shape, st->partials[u->nodes[0]],
                              band_count(u->shape.height, u->cpu_band_rows),
                              st->bind_tables[u->nodes[0]]);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (run->unit_ms)
            run->unit_ms[ui] = ms;
        else
            pf_watchdog_unit_ran(p, ui, ms, ms);
    }
    for (int o = 0; o < p->n_outputs && rc == PF_OK; o++) {
        const pf_frame *f = outputs[o];
        if (!f || p->tables[p->outputs[o].node].data || j.direct_out[p->outputs[o].node])
            continue;
        j.frames = f;
        j.node = p->outputs[o].node;
        pf_region w = j.strip >= 0 ? strip_rows(plan, j.strip) : (pf_region){0, f->height};
        j.lo = w.y0;
        j.hi = w.y1;
        rc = run_job(&j, band_count(w.y1 - w.y0, PF_CONVERT_ROWS), download_task);
    }
    /* Tables last, from the partials the reduce units left: a frame that fails leaves the
       last completed frame's tables as they were (pf_pipeline_table). */
    if (rc == PF_OK && run->tables)
        pf_exec_cpu_tables(p, st);
    if (rc == PF_CANCELLED)
        pf_errf(run->err, "%s: frame cancelled (pf_pipeline_cancel); its outputs are incomplete",
                p->source);
    else if (rc != PF_OK)
        pf_errf(run->err, "%s", j.err[0] ? j.err : "a CPU task failed");
    pthread_mutex_destroy(&j.mu);
    return rc;
}
