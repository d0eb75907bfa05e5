/* tests/lib/family_driver.c: see family_driver.h. */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <string.h>

#include "family_driver.h"

/* ---- Descriptors and param tables ------------------------------------------------------ */

/* A plugin's descriptor; a failure to load counts only where the plugin is required
   (another family's plugin, half-built, is only noted). */
static const pf_plugin_desc *fd_load(const char *path, int required)
{
    static const pf_host_api host = {sizeof(pf_host_api), PF_ABI_VERSION, NULL};
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    pf_plugin_entry_fn entry = h ? (pf_plugin_entry_fn)dlsym(h, PF_PLUGIN_ENTRY_NAME) : NULL;
    if (!entry && required)
        CHECKF(0, "%s: %s", path, h ? "no entry symbol" : dlerror());
    else if (!entry)
        printf("note: %s not loadable, not checked for stage names\n", path);
    return entry ? entry(&host) : NULL;
}

/* min > max means unbounded. */
static int fd_in_range(const pf_param_desc *p, double v)
{
    return p->min > p->max || (v >= p->min && v <= p->max);
}

static void fd_check_param(const pf_stage_desc *d, const pf_param_desc *p)
{
    const char *n = p->name ? p->name : "(null)";
    CHECKF(p->name && *p->name && p->doc && *p->doc, "%s.%s: name and doc", d->name, n);
    size_t size = p->type == PF_PARAM_FLOAT_ARRAY ? sizeof(float) * (size_t)p->count : 4;
    CHECKF(p->offset % 4 == 0 && p->offset + size <= d->params_size,
           "%s.%s: outside the params struct", d->name, n);
    int n_enum = 0;
    switch (p->type) {
    case PF_PARAM_ENUM:
        for (; p->enum_names && p->enum_names[n_enum]; n_enum++)
            CHECKF(*p->enum_names[n_enum], "%s.%s: empty enum name", d->name, n);
        CHECKF(n_enum > 0 && p->def >= 0 && p->def < n_enum && p->def == floor(p->def),
               "%s.%s: default %g of %d names", d->name, n, p->def, n_enum);
        break;
    case PF_PARAM_FLOAT_ARRAY:
        CHECKF(p->count > 0 && p->def_array, "%s.%s: count and defaults", d->name, n);
        for (int i = 0; p->def_array && i < p->count; i++)
            CHECKF(fd_in_range(p, p->def_array[i]), "%s.%s[%d]: default out of range", d->name, n,
                   i);
        break;
    default:
        CHECKF(fd_in_range(p, p->def), "%s.%s: default %g outside [%g, %g]", d->name, n, p->def,
               p->min, p->max);
        CHECKF(p->type == PF_PARAM_FLOAT || p->def == floor(p->def), "%s.%s: integer default %g",
               d->name, n, p->def);
        break;
    }
}

static void fd_check_desc(const pf_stage_desc *d, pf_stage_kind kind)
{
    CHECKF(d->size == PF_STAGE_DESC_SIZE && d->name && d->doc && *d->doc, "%s: header",
           d->name ? d->name : "(null)");
    CHECKF(d->kind == kind && d->n_inputs == 1 && d->run_cpu, "%s: kind, inputs, run_cpu", d->name);
    CHECKF(d->n_params == 0 || d->params, "%s: params table", d->name);
    for (int i = 0; i < d->n_params; i++) {
        fd_check_param(d, &d->params[i]);
        for (int j = 0; j < i; j++)
            CHECKF(strcmp(d->params[i].name, d->params[j].name) != 0, "%s: param %s twice", d->name,
                   d->params[i].name);
    }
    if (kind == PF_STAGE_STENCIL)
        CHECKF(d->radius != NULL, "%s: stencil without radius", d->name);
    if (kind == PF_STAGE_RESAMPLE)
        CHECKF(d->shape != NULL, "%s: resample without shape", d->name);
    if (kind == PF_STAGE_REDUCE) {
        CHECKF(d->shape && d->partial_len && d->combine && d->columns,
               "%s: reduce functions and columns", d->name);
        for (int c = 0; d->columns && c < 5; c++)
            CHECKF((c < 4) == (d->columns[c] != NULL), "%s: columns r, g, b, a", d->name);
    }
}

/* The stages names[] of plugin: exactly those, each of this kind with a sound table,
   and each name held by no other built plugin. */
static void fd_check_family(const char *plugin, pf_stage_kind kind, const char *const *names,
                            int n_names)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.so", PF_PLUGIN_DIR, plugin);
    const pf_plugin_desc *pd = fd_load(path, 1);
    if (!pd)
        return;
    CHECKF(pd->size == sizeof *pd && pd->abi_version == PF_ABI_VERSION && pd->doc &&
               pd->n_stages == n_names,
           "%s: plugin descriptor", path);
    for (int i = 0; i < pd->n_stages && i < n_names; i++) {
        CHECKF(strcmp(pd->stages[i]->name, names[i]) == 0, "%s: stage %d is %s, not %s", plugin, i,
               pd->stages[i]->name, names[i]);
        fd_check_desc(pd->stages[i], kind);
    }

    DIR *dir = opendir(PF_PLUGIN_DIR);
    CHECKF(dir != NULL, "%s: cannot list", PF_PLUGIN_DIR);
    for (struct dirent *e; dir && (e = readdir(dir));) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0 ||
            strcmp(e->d_name, strrchr(path, '/') + 1) == 0)
            continue;
        char other[4096];
        snprintf(other, sizeof other, "%s/%s", PF_PLUGIN_DIR, e->d_name);
        const pf_plugin_desc *od = fd_load(other, 0);
        for (int i = 0; od && i < od->n_stages; i++)
            for (int j = 0; j < n_names; j++)
                CHECKF(strcmp(od->stages[i]->name, names[j]) != 0,
                       "stage name %s of %s is also in %s", names[j], plugin, e->d_name);
    }
    if (dir)
        closedir(dir);
}

/* A family test's main: the family's descriptors, then each test with a seed of its own. */
int fd_main(const char *test, const char *plugin, pf_stage_kind kind, const char *const *names,
            int n_names, const fd_test_fn *tests, int n_tests)
{
    fd_check_family(plugin, kind, names, n_names);
    for (int i = 0; i < n_tests; i++) {
        pf_rng r;
        pf_rng_seed(&r, 0x5eed0000u + (uint64_t)i * 7919u);
        tests[i](&r);
    }
    return pf_test_done(test);
}

/* ---- Running an image stage every way ----------------------------------------------------- */

int fd_same_bits(const pf_image *a, const pf_image *b)
{
    for (int y = 0; y < a->height; y++)
        if (memcmp(pf_image_row(a, y), pf_image_row(b, y), sizeof(pf_float4) * (size_t)a->width))
            return 0;
    return 1;
}

/* The least and greatest colour sample (r, g, b) of im, from 0 and 0; a NaN is least. */
void fd_colour_range(const pf_image *im, float *lo, float *hi)
{
    *lo = *hi = 0;
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++) {
            const pf_float4 v = pf_image_row(im, y)[x];
            const float c[3] = {v.x, v.y, v.z};
            for (int i = 0; i < 3; i++) {
                *lo = c[i] < *lo || c[i] != c[i] ? c[i] : *lo;
                *hi = c[i] > *hi ? c[i] : *hi;
            }
        }
}

/* Runs only output rows [y0, y1) into a poisoned w x h image and checks that exactly
   those rows' pixels were written, and nothing past the width. */
static void fd_check_band_alone(const pf_stage_desc *d, const void *params, const pf_image *in,
                                int w, int h, int y0, int y1, const char *label)
{
    pf_image out = pf_test_image_poisoned(w, h);
    size_t ss = d->scratch_bytes ? d->scratch_bytes(params, w, y1 - y0) : 0;
    void *scratch = ss ? malloc(ss) : NULL;
    char err[256] = "";
    pf_stage_args a = {sizeof a, params, in,   1,    out, {y0, y1},
                       scratch,  ss,     NULL, NULL, err, sizeof err};
    CHECKF(d->run_cpu(&a) == 0, "%s: %s", label, err);
    size_t row = (size_t)w * 4, pitch = out.pitch / sizeof(float);
    for (int y = 0; y < h; y++) {
        int inside = y >= y0 && y < y1;
        CHECKF(inside ? !pf_test_image_unwritten(&out, y, 0, row) &&
                            pf_test_image_unwritten(&out, y, row, pitch)
                      : pf_test_image_unwritten(&out, y, 0, pitch),
               "%s: band [%d, %d) of %d rows: row %d %s", label, y0, y1, h, y,
               inside ? "not written, or written past the width" : "written");
    }
    free(scratch);
    pf_test_image_free(&out);
}

/* |got - want| within tol, relative where |want| > 1; the same infinity, or NaN for NaN. */
int fd_close(double got, double want, double tol)
{
    if (got == want || (isnan(got) && isnan(want)))
        return 1;
    return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1);
}

/* Runs d on in every way (see the file header). The whole run must match want, or alt
   where a pixel may round either way across a threshold (alt NULL: none). */
void fd_check_image_stage(const pf_stage_desc *d, const void *params, const pf_image *in,
                          const pf_image *want, const pf_image *alt, double tol, const char *label)
{
    const int w = want->width, h = want->height;
    pf_shape s = h_out_shape(d, params, (pf_shape){in->width, in->height});
    CHECKF(s.width == w && s.height == h, "%s: shape %dx%d, want %dx%d", label, s.width, s.height,
           w, h);
    if (s.width != w || s.height != h)
        return;
    pf_image whole = pf_test_image_poisoned(w, h);
    CHECKF(h_run(d, params, in, 1, &whole, 0) == 0, "%s: run failed", label);
    int bad = 0;
    for (int y = 0; y < h; y++) {
        const float *g = (const float *)pf_image_row(&whole, y);
        const float *e = (const float *)pf_image_row(want, y);
        const float *e2 = (const float *)pf_image_row(alt ? alt : want, y);
        for (int i = 0; i < w * 4; i++)
            if (!fd_close(g[i], e[i], tol) && !fd_close(g[i], e2[i], tol) && bad++ < 3)
                CHECKF(0, "%s: (%d, %d)[%d] = %.9g, want %.9g", label, i / 4, y, i % 4, g[i], e[i]);
        CHECKF(pf_test_image_unwritten(&whole, y, (size_t)w * 4, whole.pitch / sizeof(float)),
               "%s: row %d written past the width", label, y);
    }
    CHECKF(bad == 0, "%s: %d values off by more than %g", label, bad, tol);

    static const int bands[] = {1, 3, 7};
    for (int b = 0; b < PF_COUNTOF(bands); b++) {
        pf_image banded = pf_test_image_poisoned(w, h);
        CHECK(h_run(d, params, in, 1, &banded, bands[b]) == 0);
        CHECKF(fd_same_bits(&whole, &banded), "%s: bands of %d rows differ from whole", label,
               bands[b]);
        pf_test_image_free(&banded);
    }
    fd_check_band_alone(d, params, in, w, h, h / 3, h / 3 + (h + 2) / 3, label);
    pf_test_image_free(&whole);
}

/* RGBA of the pixel at (x, y), clamped to the edge, in double. */
void fd_px(const pf_image *im, int x, int y, double v[4])
{
    pf_float4 p = pf_image_at_clamped(im, x, y);
    v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w;
}

void fd_set(pf_image *im, int x, int y, const double v[4])
{
    pf_image_row(im, y)[x] = pf_f4((float)v[0], (float)v[1], (float)v[2], (float)v[3]);
}
