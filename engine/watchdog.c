/* engine/watchdog.c: the watchdog cost model (watchdog.h).

   A unit takes bytes / bandwidth plus pixels * weight * PF_NS_PER_PX, where weight sums
   the members' declared costs (1 when they declare none). Bytes count 16 per pixel of
   every image read or written (float RGBA; native edges are smaller, so this errs
   long). A unit is split into bands predicted to take at most half the budget, leaving
   room for the model's error; measured band times refine the prediction per unit (its
   first node's scale) for later plans. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "exec_cuda.h"
#include "watchdog.h"

#define PF_NS_PER_PX         0.02 /* a weight-1 op on a large GPU: 50 Gpx/s */
#define PF_BAND_FILL         0.5  /* target fraction of the budget per band */
#define PF_DEFAULT_BUDGET_MS 50.0
#define PF_ASSUMED_BANDWIDTH 1e12 /* bytes/s when no device was measured */
#define PF_MAX_REFINES       3    /* band refinements per unit after measuring */
#define PF_REFINE_AT         0.9  /* a band over this fraction of the budget refines */
#define PF_MAX_REFINE_FACTOR 8.0  /* one slow outlier must not shred the unit */

struct pf_watchdog {
    int n_nodes;
    double *band_scale;       /* per node (a unit's first): measured / predicted time */
    int *refines;             /* per node (a unit's first): refinements made so far */
    double *measured_ms;      /* per unit of the current plan (at most n_nodes) */
    double *measured_band_ms; /* ... and its longest launch */
    int replan;               /* measured bands ran over budget: plan again */
};

pf_watchdog *pf_watchdog_create(int n_nodes)
{
    pf_watchdog *w = calloc(1, sizeof *w);
    size_t n = (size_t)(n_nodes > 0 ? n_nodes : 1);
    if (!w || !(w->band_scale = malloc(sizeof(double) * n)) ||
        !(w->refines = calloc(n, sizeof(int))) || !(w->measured_ms = calloc(n, sizeof(double))) ||
        !(w->measured_band_ms = calloc(n, sizeof(double)))) {
        pf_watchdog_free(w);
        return NULL;
    }
    w->n_nodes = n_nodes;
    for (size_t i = 0; i < n; i++)
        w->band_scale[i] = 1.0;
    return w;
}

void pf_watchdog_free(pf_watchdog *w)
{
    if (!w)
        return;
    free(w->band_scale);
    free(w->refines);
    free(w->measured_ms);
    free(w->measured_band_ms);
    free(w);
}

/* ---- Prediction ---------------------------------------------------------------------------- */

static double scale_of(const pf_pipeline *p, const pf_unit *u)
{
    return p->watchdog ? p->watchdog->band_scale[u->nodes[0]] : 1.0;
}

void pf_watchdog_predict(const pf_pipeline *p, pf_plan *plan)
{
    int watchdog = 0;
    plan->bandwidth = PF_ASSUMED_BANDWIDTH;
    if (plan->device) {
        double bw = pf_cuda_bandwidth(p->eng);
        if (bw > 0) {
            plan->bandwidth = bw;
            plan->bandwidth_measured = 1;
        }
        watchdog = pf_cuda_watchdog(p->eng);
    }
    plan->budget_ms =
        p->opts.max_launch_ms > 0 ? p->opts.max_launch_ms : (watchdog ? PF_DEFAULT_BUDGET_MS : 0);
    for (int ui = 0; ui < plan->n_units; ui++) {
        pf_unit *u = &plan->units[ui];
        double px = (double)u->shape.width * u->shape.height, weight = 0;
        double images = (double)u->n_inputs + (u->kind == PF_UNIT_POINT ? u->n_stores : 1);
        for (int a = 0; a < u->n_nodes; a++) {
            const pf_node *n = &p->nodes[u->nodes[a]];
            weight += n->desc->cost > 0 ? n->desc->cost : 1.0;
            if (plan->is_out[u->nodes[a]] && u->kind == PF_UNIT_POINT && !plan->stored[u->nodes[a]])
                images += 1;
        }
        if (u->kind == PF_UNIT_RESAMPLE) /* output shape differs from the input's */
            px = (double)plan->shapes[u->nodes[0]].width * plan->shapes[u->nodes[0]].height;
        if (u->kind == PF_UNIT_REDUCE)
            images = 1;
        u->bytes = px * 16.0 * images;
        u->predicted_ms = u->bytes / plan->bandwidth * 1e3 + px * weight * PF_NS_PER_PX * 1e-6;
        double scale = scale_of(p, u);
        int rows = u->kind == PF_UNIT_REDUCE ? u->shape.height : plan->shapes[u->nodes[0]].height;
        u->bands = 1;
        if (plan->budget_ms > 0) {
            double want =
                u->predicted_ms * (scale > 0 ? scale : 1.0) / (plan->budget_ms * PF_BAND_FILL);
            if (want > 1)
                u->bands = want >= rows ? rows : (int)ceil(want);
        }
    }
}

double pf_watchdog_band_ms(const pf_pipeline *p, int u)
{
    const pf_unit *un = &p->plan->units[u];
    return un->predicted_ms * scale_of(p, un) / un->bands;
}

void pf_watchdog_longest(const pf_pipeline *p, char *buf, size_t size)
{
    const pf_plan *plan = p->plan;
    buf[0] = 0;
    if (!plan || !plan->n_units)
        return;
    int worst = 0;
    for (int u = 1; u < plan->n_units; u++)
        if (plan->units[u].predicted_ms / plan->units[u].bands >
            plan->units[worst].predicted_ms / plan->units[worst].bands)
            worst = u;
    const pf_unit *un = &plan->units[worst];
    snprintf(buf, size,
             "; the longest predicted launch is a band of unit #%d (%s%s), "
             "%.1f ms of %.1f ms in %d band(s)",
             worst, un->ids[0], un->n_nodes > 1 ? ", ..." : "", un->predicted_ms / un->bands,
             un->predicted_ms, un->bands);
}

/* ---- Measurement and refinement ------------------------------------------------------------ */

void pf_watchdog_plan_started(pf_pipeline *p)
{
    pf_watchdog_frame_begin(p);
}

void pf_watchdog_frame_begin(pf_pipeline *p)
{
    pf_watchdog *w = p->watchdog;
    for (int u = 0; u < w->n_nodes; u++)
        w->measured_ms[u] = w->measured_band_ms[u] = 0;
}

void pf_watchdog_launch(pf_pipeline *p, int u, double ms)
{
    pf_watchdog *w = p->watchdog;
    w->measured_ms[u] += ms;
    if (ms > w->measured_band_ms[u])
        w->measured_band_ms[u] = ms;
    if (ms > p->stats.max_launch_ms)
        p->stats.max_launch_ms = ms;
    p->stats.timed_launches++;
    if (p->plan->budget_ms > 0 && ms > p->plan->budget_ms)
        p->stats.launches_over_budget++;
}

void pf_watchdog_unit_ran(pf_pipeline *p, int u, double ms, double band_ms)
{
    p->watchdog->measured_ms[u] = ms;
    p->watchdog->measured_band_ms[u] = band_ms;
}

void pf_watchdog_refine(pf_pipeline *p)
{
    pf_watchdog *w = p->watchdog;
    const pf_plan *plan = p->plan;
    for (int u = 0; u < plan->n_units && plan->budget_ms > 0; u++) {
        const pf_unit *un = &plan->units[u];
        int first = un->nodes[0];
        double predicted_band = pf_watchdog_band_ms(p, u), band = w->measured_band_ms[u];
        if (band <= plan->budget_ms * PF_REFINE_AT || un->bands >= un->shape.height ||
            predicted_band <= 0)
            continue;
        /* A unit whose band time does not fall with its height (a fixed cost per launch)
           is reported, not split forever. */
        if (w->refines[first] >= PF_MAX_REFINES) {
            if (w->refines[first]++ == PF_MAX_REFINES)
                pf_log(p->eng, 1,
                       "%s: unit #%d (%s) still takes %.2f ms per launch in %d bands, over the "
                       "%.1f ms budget; splitting it further does not help",
                       p->source, u, un->ids[0], band, un->bands, plan->budget_ms);
            continue;
        }
        double factor = band / predicted_band;
        w->refines[first]++;
        w->band_scale[first] *= factor < PF_MAX_REFINE_FACTOR ? factor : PF_MAX_REFINE_FACTOR;
        w->replan = 1;
        pf_log(p->eng, 0,
               "%s: unit #%d (%s): a launch took %.2f ms of the %.1f ms budget (%.2f ms "
               "predicted, %d bands); re-planning with more bands",
               p->source, u, un->ids[0], band, plan->budget_ms, predicted_band, un->bands);
    }
}

int pf_watchdog_wants_plan(const pf_pipeline *p)
{
    return p->watchdog->replan;
}

void pf_watchdog_replanned(pf_pipeline *p)
{
    p->watchdog->replan = 0;
}

void pf_watchdog_measured(const pf_pipeline *p, int u, double *ms, double *band_ms)
{
    *ms = p->watchdog->measured_ms[u];
    *band_ms = p->watchdog->measured_band_ms[u];
}
