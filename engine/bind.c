/* engine/bind.c: parameters bound to a reduction (docs/pipeline-format.md, "Parameters
 * bound to a reduction"): the value each rule reads from a histogram's or a stats
 * stage's table, written into the bound stage's params before it runs in the frame.
 *
 * A histogram table has a row per bin of [0, 1] and a column per channel (counts); a
 * stats table the rows min, max, mean and stddev. Channel "rgb" reads R, G and B
 * together: their counts added, the least minimum, the greatest maximum, the mean of
 * the means. Every rule is computed in double in a fixed order, so a frame's values do
 * not depend on the executor or the threads.
 */
#include <math.h>
#include <string.h>

#include "plan.h"

/* The stats table's rows (the analysis plugin's, in its order). */
enum { STATS_MIN, STATS_MAX, STATS_MEAN };

/* Counts of bin i for channel c (PF_BIND_RGB: R + G + B). */
static double bin_count(const double *t, int i, int c)
{
    const double *row = t + (size_t)i * 4;
    return c == PF_BIND_RGB ? row[0] + row[1] + row[2] : row[c];
}

/* The counts of channel c and their bins' centres weighted by them. */
static void hist_moments(const double *t, int bins, int c, double *n, double *s)
{
    *n = *s = 0;
    for (int i = 0; i < bins; i++) {
        double k = bin_count(t, i, c);
        *n += k;
        *s += k * ((i + 0.5) / bins);
    }
}

/* The mean of channel c: the bins' centres weighted by their counts. NaN when empty. */
static double hist_mean(const double *t, int bins, int c)
{
    double n, s;
    hist_moments(t, bins, c, &n, &s);
    return n > 0 ? s / n : NAN;
}

/* The centre of the first bin where the counts reach pct percent of the total (the first
   non-empty bin at 0). */
static double hist_percentile(const double *t, int bins, int c, double pct)
{
    double total, sum, cum = 0;
    hist_moments(t, bins, c, &total, &sum);
    const double need = total * (pct / 100);
    if (!(total > 0))
        return NAN;
    for (int i = 0; i < bins; i++) {
        cum += bin_count(t, i, c);
        if (cum > 0 && cum >= need)
            return (i + 0.5) / bins;
    }
    return (bins - 0.5) / bins;
}

/* Otsu's method over the bins: the split (bins 0..i dark, i + 1.. light) that maximises
   the between-class variance w0 w1 (m0 - m1)^2, the first such i; the level is the
   upper edge of bin i, (i + 1) / bins, so "at or above the level" is the light class.
   NaN when fewer than two bins hold pixels (no split). */
static double hist_otsu(const double *t, int bins, int c)
{
    double total, sum;
    hist_moments(t, bins, c, &total, &sum);
    double w0 = 0, s0 = 0, best = -1;
    int at = -1;
    for (int i = 0; i + 1 < bins; i++) {
        double k = bin_count(t, i, c);
        w0 += k;
        s0 += k * ((i + 0.5) / bins);
        double w1 = total - w0;
        if (w0 <= 0 || w1 <= 0)
            continue;
        double d = s0 / w0 - (sum - s0) / w1, v = w0 * w1 * d * d;
        if (v > best) {
            best = v;
            at = i;
        }
    }
    return at < 0 ? NAN : (double)(at + 1) / bins;
}

/* Row r (STATS_*) of a stats table for channel c. */
static double stats_value(const double *t, int r, int c)
{
    if (c != PF_BIND_RGB)
        return t[(size_t)r * 4 + (size_t)c];
    const double *row = t + (size_t)r * 4;
    if (r == STATS_MIN)
        return fmin(fmin(row[0], row[1]), row[2]);
    if (r == STATS_MAX)
        return fmax(fmax(row[0], row[1]), row[2]);
    return (row[0] + row[1] + row[2]) / 3;
}

static double mean_of(int hist, const double *t, int rows, int c)
{
    return hist ? hist_mean(t, rows, c) : stats_value(t, STATS_MEAN, c);
}

/* The value of binding b from its source's table t (rows x 4), before scale and offset;
   NaN where the table gives none (an empty histogram, a zero mean). */
static double rule_value(const pf_binding *b, int hist, const double *t, int rows)
{
    const int c = b->channel;
    switch (b->rule) {
    case PF_BIND_PERCENTILE:
        return hist_percentile(t, rows, c, b->arg);
    case PF_BIND_MEAN:
        return mean_of(hist, t, rows, c);
    case PF_BIND_MIN:
        if (!hist)
            return stats_value(t, STATS_MIN, c);
        for (int i = 0; i < rows; i++)
            if (bin_count(t, i, c) > 0)
                return (i + 0.5) / rows;
        return NAN;
    case PF_BIND_MAX:
        if (!hist)
            return stats_value(t, STATS_MAX, c);
        for (int i = rows - 1; i >= 0; i--)
            if (bin_count(t, i, c) > 0)
                return (i + 0.5) / rows;
        return NAN;
    case PF_BIND_OTSU:
        return hist_otsu(t, rows, c);
    case PF_BIND_GAIN_TO: {
        double m = mean_of(hist, t, rows, c);
        return m > 0 ? b->arg / m : NAN;
    }
    case PF_BIND_GREY_GAIN: {
        double m = mean_of(hist, t, rows, c), g = mean_of(hist, t, rows, PF_BIND_RGB);
        return m > 0 ? g / m : NAN;
    }
    default:
        return NAN;
    }
}

int pf_bind_apply(const pf_pipeline *p, int node, const double *const *tables)
{
    const pf_node *n = &p->nodes[node];
    const pf_stage_desc *d = n->desc;
    int missing = 0;
    float vals[PF_MAX_BINDS];
    for (int i = 0; i < n->n_bind && !missing; i++) {
        const pf_binding *b = &n->bind[i];
        const pf_node *src = &p->nodes[b->src];
        const int hist = strcmp(src->desc->name, "histogram") == 0;
        const pf_param_desc *pd = &d->params[b->param];
        double v = rule_value(b, hist, tables[b->src], p->plan->shapes[b->src].height);
        v = v * b->scale + b->offset;
        if (!(v == v) || !isfinite((float)v)) {
            missing = 1;
            break;
        }
        if (!(pd->min > pd->max)) /* within the param's range (PF_NO_MIN: -inf) */
            v = v < pd->min ? pd->min : v > pd->max ? pd->max : v;
        vals[i] = (float)v;
    }
    /* A frame whose tables give no value, or values the stage's check() refuses (a flat
       image's levels: in_low == in_high), runs with the file's values of the bound params
       (the other params as they are now). */
    _Alignas(max_align_t) unsigned char params[PF_BIND_PARAMS_MAX];
    if (d->params_size > sizeof params)
        return 0; /* refused at load (pipeline_load.c) */
    memcpy(params, n->params, d->params_size);
    for (int i = 0; i < n->n_bind && !missing; i++)
        memcpy(params + d->params[n->bind[i].param].offset, &vals[i], sizeof(float));
    char err[256];
    if (!missing && d->check && d->check(params, err, sizeof err) != 0)
        missing = 1;
    for (int i = 0; i < n->n_bind && missing; i++) {
        size_t off = d->params[n->bind[i].param].offset;
        memcpy(params + off, (const unsigned char *)n->unbound + off, sizeof(float));
    }
    int changed = memcmp(n->params, params, d->params_size) != 0;
    if (changed)
        memcpy(n->params, params, d->params_size);
    return changed;
}
