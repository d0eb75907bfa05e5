/* engine/strip.c: pipelines in strips of output rows (pipefuse/bands.h).
 *
 * A strip is a band of rows of the image outputs. Which rows of every node it needs is
 * found backwards from the outputs, unit by unit in reverse plan order: a point unit
 * needs of its inputs the rows its members compute (one window for all members), a
 * stencil its rows and radius() more on each side, cut to the image, a resample stage
 * what its rows_in() says. Each node then holds only that window of its image, in a
 * buffer as tall as its tallest window; the CPU executor runs every unit over its
 * window with images whose row y is the whole image's row y (exec_cpu.c), so each
 * stage computes, clamps and reads as on the whole frame, and the strips' rows are the
 * whole frame's, bit for bit. Reduce stages need the whole frame and keep a pipeline
 * whole, as do resample stages that cannot say which rows they read.
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "pipefuse/bands.h"

#define PF_API __attribute__((visibility("default")))

/* Why p cannot run in strips ("" when it can, as far as its stages go). */
static void strip_refusal(const pf_pipeline *p, char *why, size_t size)
{
    why[0] = 0;
    for (int i = p->n_inputs; i < p->n_nodes; i++) {
        const pf_node *n = &p->nodes[i];
        if (!n->used)
            continue;
        if (n->desc->kind == PF_STAGE_REDUCE) {
            snprintf(why, size,
                     "stage '%s' (%s) is a reduce stage: its table needs the whole frame", n->id,
                     n->desc->name);
            return;
        }
        if (n->desc->kind == PF_STAGE_RESAMPLE && !n->desc->rows_in) {
            snprintf(why, size,
                     "stage '%s' (%s) does not say which input rows a band of its output reads "
                     "(pf_stage_desc.rows_in, plugin ABI 1.6)",
                     n->id, n->desc->name);
            return;
        }
    }
}

PF_API int pf_pipeline_strips_possible(const pf_pipeline *p, char *why, size_t why_size)
{
    char buf[512];
    if (!p)
        return PF_INVALID_ARGUMENT;
    strip_refusal(p, buf, sizeof buf);
    if (why && why_size)
        snprintf(why, why_size, "%s", buf);
    return buf[0] ? PF_UNSUPPORTED : PF_OK;
}

static void region_add(pf_region *r, pf_region a)
{
    if (a.y1 <= a.y0)
        return;
    if (r->y1 <= r->y0)
        *r = a;
    else {
        r->y0 = a.y0 < r->y0 ? a.y0 : r->y0;
        r->y1 = a.y1 > r->y1 ? a.y1 : r->y1;
    }
}

/* The windows of strip s into win (n_nodes regions, zeroed by the caller). */
static int strip_windows(pf_pipeline *p, pf_plan *plan, int s, pf_region *win)
{
    const int y0 = s * plan->strip_rows;
    const int y1 =
        y0 + plan->strip_rows < plan->out_height ? y0 + plan->strip_rows : plan->out_height;
    for (int o = 0; o < p->n_outputs; o++)
        region_add(&win[p->outputs[o].node], (pf_region){y0, y1});
    for (int ui = plan->n_units - 1; ui >= 0; ui--) {
        const pf_unit *u = &plan->units[ui];
        pf_region w = {0, 0};
        for (int a = 0; a < u->n_nodes; a++)
            region_add(&w, win[u->nodes[a]]);
        for (int a = 0; a < u->n_nodes; a++)
            win[u->nodes[a]] = w;
        if (w.y1 <= w.y0)
            continue;
        const pf_node *n = &p->nodes[u->nodes[0]];
        if (u->kind == PF_UNIT_POINT) {
            for (int k = 0; k < u->n_inputs; k++)
                region_add(&win[u->inputs[k]], w);
            continue;
        }
        pf_shape ins[PF_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++)
            ins[k] = plan->shapes[n->in[k]];
        for (int k = 0; k < n->n_in; k++) {
            pf_region r = w;
            const int h = ins[k].height;
            if (u->kind == PF_UNIT_STENCIL) {
                int rad = n->desc->radius ? n->desc->radius(n->params) : 0;
                r.y0 = w.y0 - rad < 0 ? 0 : w.y0 - rad;
                r.y1 = w.y1 + rad > h ? h : w.y1 + rad;
            } else if (n->desc->rows_in(n->params, ins, &plan->shapes[u->nodes[0]], k, w, &r) !=
                           0 ||
                       r.y0 < 0 || r.y1 > h || (r.y1 < r.y0 && !(r.y0 == 0 && r.y1 == 0))) {
                pf_errf(p->errmsg,
                        "%s: %s (%s): rows_in(rows %d..%d, input %d) failed or gave rows %d..%d "
                        "of a %d-row input; running it in strips is not possible (op %s)",
                        p->source, n->path, n->id, w.y0, w.y1 - 1, k, r.y0, r.y1 - 1, h,
                        n->desc->name);
                return PF_PLUGIN;
            }
            region_add(&win[n->in[k]], r);
        }
    }
    return PF_OK;
}

int pf_plan_strips(pf_pipeline *p, pf_plan *plan, int rows)
{
    char why[512];
    strip_refusal(p, why, sizeof why);
    int first = -1;
    for (int o = 0; o < p->n_outputs && !why[0]; o++) {
        int i = p->outputs[o].node;
        if (first < 0)
            first = o;
        else if (plan->shapes[i].height != plan->shapes[p->outputs[first].node].height)
            snprintf(why, sizeof why, "outputs '%s' (%d rows) and '%s' (%d rows) differ in height",
                     p->outputs[first].name, plan->shapes[p->outputs[first].node].height,
                     p->outputs[o].name, plan->shapes[i].height);
    }
    if (!why[0] && first < 0)
        snprintf(why, sizeof why, "it has no image output");
    if (why[0]) {
        pf_errf(p->errmsg, "%s: cannot run in strips: %s", p->source, why);
        return PF_UNSUPPORTED;
    }
    if (rows <= 0) {
        pf_errf(p->errmsg, "%s: strips of %d rows: at least 1 row", p->source, rows);
        return PF_INVALID_ARGUMENT;
    }
    const int nn = p->n_nodes;
    plan->strip_rows = rows;
    plan->out_height = plan->shapes[p->outputs[first].node].height;
    plan->n_strips = (plan->out_height + rows - 1) / rows;
    plan->win = calloc((size_t)plan->n_strips * (size_t)nn, sizeof(pf_region));
    plan->win_rows = calloc((size_t)nn, sizeof(int));
    if (!plan->win || !plan->win_rows)
        return PF_NO_MEMORY;
    for (int s = 0; s < plan->n_strips; s++) {
        pf_region *w = plan->win + (size_t)s * (size_t)nn;
        int rc = strip_windows(p, plan, s, w);
        if (rc != PF_OK)
            return rc;
        for (int i = 0; i < nn; i++)
            if (w[i].y1 - w[i].y0 > plan->win_rows[i])
                plan->win_rows[i] = w[i].y1 - w[i].y0;
    }
    return PF_OK;
}
