/* tests/lib/stage_harness.c: see stage_harness.h. */
#include "stage_harness.h"

#include <dlfcn.h>
#include <math.h>
#include <string.h>

static const pf_host_api host = {sizeof(pf_host_api), PF_ABI_VERSION, NULL};

const pf_stage_desc *h_stage(const char *plugin, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.so", PF_PLUGIN_DIR, plugin);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    pf_plugin_entry_fn entry = (pf_plugin_entry_fn)dlsym(h, PF_PLUGIN_ENTRY_NAME);
    if (!entry) {
        fprintf(stderr, "%s: no %s\n", path, PF_PLUGIN_ENTRY_NAME);
        exit(1);
    }
    const pf_plugin_desc *pd = entry(&host);
    for (int i = 0; pd && i < pd->n_stages; i++)
        if (strcmp(pd->stages[i]->name, name) == 0)
            return pd->stages[i];
    fprintf(stderr, "%s: no stage %s\n", path, name);
    exit(1);
}

void *h_params(const pf_stage_desc *d)
{
    char *p = calloc(1, d->params_size ? d->params_size : 1);
    for (int i = 0; i < d->n_params; i++) {
        const pf_param_desc *pd = &d->params[i];
        switch (pd->type) {
        case PF_PARAM_FLOAT:
            *(float *)(p + pd->offset) = (float)pd->def;
            break;
        case PF_PARAM_FLOAT_ARRAY:
            memcpy(p + pd->offset, pd->def_array, sizeof(float) * (size_t)pd->count);
            break;
        default:
            *(int *)(p + pd->offset) = (int)pd->def;
            break;
        }
    }
    return p;
}

pf_shape h_out_shape(const pf_stage_desc *d, const void *params, pf_shape in)
{
    pf_shape out = in;
    char err[512] = "";
    if (d->shape && d->shape(params, &in, &out, err, sizeof err) != 0) {
        fprintf(stderr, "%s: shape: %s\n", d->name, err);
        out.width = out.height = 0;
    }
    return out;
}

int h_run(const pf_stage_desc *d, const void *params, const pf_image *in, int n_in, pf_image *out,
          int band_rows)
{
    if (band_rows <= 0)
        band_rows = out->height;
    if (d->kind == PF_STAGE_POINT) {
        const pf_float4 *rows[PF_MAX_INPUTS];
        for (int y = 0; y < out->height; y++) {
            for (int k = 0; k < n_in; k++)
                rows[k] = pf_image_row(&in[k], y);
            d->point_row(params, rows, n_in, pf_image_row(out, y), 0, out->width, y, out->width,
                         out->height);
        }
        return 0;
    }
    char err[512] = "";
    for (int y0 = 0; y0 < out->height; y0 += band_rows) {
        int y1 = y0 + band_rows < out->height ? y0 + band_rows : out->height;
        size_t ss = d->scratch_bytes ? d->scratch_bytes(params, out->width, y1 - y0) : 0;
        void *scratch = ss ? malloc(ss) : NULL;
        pf_stage_args a = {sizeof a, params, in,   n_in, *out, {y0, y1},
                           scratch,  ss,     NULL, NULL, err,  sizeof err};
        int rc = d->run_cpu(&a);
        free(scratch);
        if (rc != 0) {
            fprintf(stderr, "%s: %s\n", d->name, err);
            return rc;
        }
    }
    return 0;
}

int h_reduce(const pf_stage_desc *d, const void *params, const pf_image *in, int n_in,
             int band_rows, double **result, int *rows, int *cols)
{
    pf_shape s = {in[0].width, in[0].height};
    pf_shape t = h_out_shape(d, params, s);
    *rows = t.height;
    *cols = t.width;
    if (band_rows <= 0)
        band_rows = s.height;
    int nb = (s.height + band_rows - 1) / band_rows;
    size_t plen = d->partial_len(params, &s);
    double *partials = calloc((size_t)nb * plen, sizeof(double));
    *result = calloc((size_t)t.width * (size_t)t.height, sizeof(double));
    char err[512] = "";
    for (int b = 0; b < nb; b++) {
        int y0 = b * band_rows, y1 = y0 + band_rows < s.height ? y0 + band_rows : s.height;
        pf_stage_args a = {
            sizeof a, params, in,        n_in, {0}, {y0, y1}, NULL, 0, partials + (size_t)b * plen,
            NULL,     err,    sizeof err};
        int rc = d->run_cpu(&a);
        if (rc != 0) {
            fprintf(stderr, "%s: %s\n", d->name, err);
            free(partials);
            return rc;
        }
    }
    d->combine(params, &s, partials, nb, *result);
    free(partials);
    return 0;
}

pf_image h_alpha_image(pf_rng *r, int w, int h, int bits)
{
    static const float garbage[] = {1e30f, -7, 2, INFINITY, -INFINITY, NAN, 0.5f, 1};
    const double max = bits ? ldexp(1, bits) - 1 : 0;
    pf_image im = pf_test_image(r, w, h, 0, 1);
    for (int y = 0; y < h; y++) {
        float *f = (float *)pf_image_row(&im, y);
        for (int x = 0; x < w; x++, f += 4) {
            int kind = pf_rng_range(r, 0, 3); /* transparent, opaque, between, between */
            for (int c = 0; bits && c < 4; c++)
                f[c] = (float)(floor(f[c] * max + 0.5) / max);
            if (kind == 0) {
                f[3] = 0;
                for (int c = 0; c < 3; c++)
                    f[c] = garbage[pf_rng_range(r, 0, PF_COUNTOF(garbage) - 1)];
            } else if (kind == 1) {
                f[3] = 1;
            }
        }
    }
    return im;
}
