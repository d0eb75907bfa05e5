/* engine/geometry_meta.c: how an image output's pixel grid relates to its primary
 * input's, for the density (pHYs) an output carries (pipefuse/png.h).
 *
 * The plugin ABI says nothing of geometry, so the engine composes it from what it knows:
 * the stages of the built-in geometry plugin by name and params (and composite's overlay,
 * which keeps its base's grid), along the chain of
 * primary inputs (each stage's first) from the output back to the pipeline's first
 * input. Point, stencil and other non-resample stages keep the grid; a resample stage
 * of another plugin, or an arbitrary rotation, leaves it unknown, and then no density
 * is carried rather than a wrong one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipefuse/png.h"

#define PF_API __attribute__((visibility("default")))

/* Param name of n's stage as a float or an int (enums are indices); 0 when absent. */
static double param_value(const pf_node *n, const char *name, int *found)
{
    const pf_param_desc *pd = pf_param_find(n->desc, name);
    *found = pd && n->params;
    if (!*found)
        return 0;
    const char *base = (const char *)n->params + pd->offset;
    switch (pd->type) {
    case PF_PARAM_FLOAT: {
        float v;
        memcpy(&v, base, sizeof v);
        return v;
    }
    case PF_PARAM_INT:
    case PF_PARAM_BOOL:
    case PF_PARAM_ENUM: {
        int v;
        memcpy(&v, base, sizeof v);
        return v;
    }
    default:
        *found = 0;
        return 0;
    }
}

/* The step of one built-in resample stage (plugin's) from a grid of size in to one of
   size out: 1 and *g set, or 0 where it is not known. */
static int geometry_step(const char *plugin, const pf_node *n, pf_shape in, pf_shape out,
                         pf_png_geometry *g)
{
    const char *name = n->desc->name;
    pf_png_geometry_init(g);
    if (strcmp(plugin, "composite") == 0) /* a logo laid over the base: the base's grid */
        return strcmp(name, "overlay") == 0;
    if (strcmp(plugin, "geometry") != 0)
        return 0;
    if (strcmp(name, "crop") == 0 || strcmp(name, "pad") == 0 || strcmp(name, "flip") == 0)
        return 1;
    if (strcmp(name, "resize") == 0) {
        g->scale_x = (double)out.width / in.width;
        g->scale_y = (double)out.height / in.height;
        return 1;
    }
    if (strcmp(name, "rotate") == 0) {
        int has_deg, has_angle;
        const double deg = param_value(n, "degrees", &has_deg);
        const double angle = param_value(n, "angle", &has_angle); /* 0: 90, 1: 180, 2: 270 */
        if (!has_deg || !has_angle)
            return 0;
        if (deg != 0) { /* a whole number of quarter turns is one, whatever the canvas */
            const double q = deg / 90;
            if (q != floor(q))
                return 0;
            g->swap = fmod(fabs(q), 2) == 1;
            return 1;
        }
        g->swap = angle == 0 || angle == 2;
        return 1;
    }
    return 0;
}

PF_API int pf_pipeline_output_geometry(const pf_pipeline *p, int i, int width, int height,
                                       pf_png_geometry *g)
{
    if (!p || !g || i < 0 || i >= p->n_outputs || width <= 0 || height <= 0)
        return 0;
    /* the chain, output first (each producer comes before its consumers: no cycle) */
    int *chain = malloc(sizeof *chain * (size_t)(p->n_nodes + 1)), n = 0, k;
    if (!chain)
        return 0;
    for (k = p->outputs[i].node; k >= p->n_inputs && p->nodes[k].n_in >= 1; k = p->nodes[k].in[0])
        chain[n++] = k;
    int ok = k == 0; /* the first input's grid (not another input's, nor a source stage's) */
    pf_png_geometry acc;
    pf_png_geometry_init(&acc);
    pf_shape s = {width, height};
    for (int c = n - 1; ok && c >= 0; c--) {
        const pf_node *nd = &p->nodes[chain[c]];
        if (nd->desc->kind == PF_STAGE_REDUCE) {
            ok = 0; /* a table */
            break;
        }
        if (nd->desc->kind != PF_STAGE_RESAMPLE)
            continue; /* the same grid */
        const pf_plugin *pl =
            nd->plugin >= 0 && nd->plugin < p->eng->n_plugins ? &p->eng->plugins[nd->plugin] : NULL;
        pf_shape out = s;
        char err[256] = "";
        pf_png_geometry step;
        ok = pl && pl->desc && pl->desc->name && nd->desc->shape &&
             nd->desc->shape(nd->params, &s, &out, err, sizeof err) == 0 && out.width > 0 &&
             out.height > 0 && geometry_step(pl->desc->name, nd, s, out, &step);
        if (ok)
            pf_png_geometry_then(&acc, &step);
        s = out;
    }
    free(chain);
    if (ok)
        *g = acc;
    return ok;
}
