/* tests/lib/point_driver.c: see point_driver.h. */
#include "point_driver.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <string.h>

const pf_param_desc *pt_param(const pt_stage *s, const char *name)
{
    for (int i = 0; i < s->d->n_params; i++)
        if (strcmp(s->d->params[i].name, name) == 0)
            return &s->d->params[i];
    fprintf(stderr, "%s: no param %s\n", s->name, name);
    exit(1);
}

/* A param's value (element i of an array) read through the stage's own table. */
double pt_geti(const pt_stage *s, const char *name, int i)
{
    const pf_param_desc *p = pt_param(s, name);
    const char *base = (const char *)s->params + p->offset;
    if (p->type == PF_PARAM_FLOAT || p->type == PF_PARAM_FLOAT_ARRAY)
        return ((const float *)base)[i];
    return *(const int *)base;
}
double pt_get(const pt_stage *s, const char *name)
{
    return pt_geti(s, name, 0);
}

void pt_set(const pt_stage *s, const pf_param_desc *p, int i, double v)
{
    char *base = (char *)s->params + p->offset;
    if (p->type == PF_PARAM_FLOAT || p->type == PF_PARAM_FLOAT_ARRAY)
        ((float *)base)[i] = (float)v;
    else
        *(int *)base = (int)v;
}

static int pt_count(const pf_param_desc *p)
{
    return p->type == PF_PARAM_FLOAT_ARRAY ? p->count : 1;
}

/* Every element of p set to v. */
static void pt_set_all(const pt_stage *s, const pf_param_desc *p, double v)
{
    for (int i = 0; i < pt_count(p); i++)
        pt_set(s, p, i, v);
}

static double pt_default(const pf_param_desc *p, int i)
{
    return p->type == PF_PARAM_FLOAT_ARRAY ? p->def_array[i] : p->def;
}

void pt_reset(pt_stage *s)
{
    free(s->params);
    s->params = h_params(s->d);
}

/* A random value in p's range: half the time from the whole range, half the time from
   its part within [-2, 2], so that huge ranges still see ordinary values. */
static double pt_random(pf_rng *r, const pf_param_desc *p)
{
    if (p->type != PF_PARAM_FLOAT && p->type != PF_PARAM_FLOAT_ARRAY)
        return pf_rng_range(r, (int)p->min, (int)p->max);
    double lo = p->min, hi = p->max;
    if (pf_rng_u32(r) & 1) {
        lo = fmax(lo, -2.0);
        hi = fmin(hi, 2.0);
    }
    return lo + (hi - lo) * pf_rng_float(r);
}

/* The params of a stage as text, for failure messages. */
static const char *pt_params_str(const pt_stage *s)
{
    static char buf[1024];
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < s->d->n_params && n < sizeof buf; i++)
        for (int k = 0; k < pt_count(&s->d->params[i]) && n < sizeof buf; k++)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s[%d]=%.9g", n ? " " : "",
                                  s->d->params[i].name, k, pt_geti(s, s->d->params[i].name, k));
    return buf;
}

/* The descriptor and its param table. */
static void pt_check_table(const pt_stage *s)
{
    const pf_stage_desc *d = s->d;
    CHECKF(d->size == PF_STAGE_DESC_SIZE && d->kind == PF_STAGE_POINT, "%s", s->name);
    CHECKF(strcmp(d->name, s->name) == 0, "%s is named %s", s->name, d->name);
    CHECKF(d->doc && d->doc[0], "%s: no doc", s->name);
    CHECKF(d->n_inputs == s->n_inputs, "%s: %d inputs", s->name, d->n_inputs);
    CHECKF(d->point_row && d->point_fn && d->params_type && d->point_source, "%s", s->name);
    if (d->point_source && d->point_fn && d->params_type)
        CHECKF(strstr(d->point_source, d->point_fn) && strstr(d->point_source, d->params_type),
               "%s: %s or %s not in its source", s->name, d->point_fn, d->params_type);
    for (int i = 0; i < d->n_params; i++) {
        const pf_param_desc *p = &d->params[i];
        CHECKF(p->name && p->name[0] && p->doc && p->doc[0], "%s param %d", s->name, i);
        for (int j = 0; j < i; j++)
            CHECKF(strcmp(p->name, d->params[j].name) != 0, "%s.%s twice", s->name, p->name);
        size_t size = p->type == PF_PARAM_FLOAT_ARRAY ? sizeof(float) * (size_t)p->count : 4;
        CHECKF(p->offset % 4 == 0 && p->offset + size <= d->params_size, "%s.%s offset", s->name,
               p->name);
        CHECKF(p->min <= p->max, "%s.%s: unbounded", s->name, p->name);
        if (p->type == PF_PARAM_BOOL)
            CHECKF(p->min == 0 && p->max == 1, "%s.%s", s->name, p->name);
        if (p->type == PF_PARAM_FLOAT_ARRAY)
            CHECKF(p->count > 0 && p->def_array, "%s.%s", s->name, p->name);
        for (int k = 0; k < pt_count(p); k++)
            CHECKF(pt_default(p, k) >= p->min && pt_default(p, k) <= p->max,
                   "%s.%s[%d]: default %g outside [%g, %g]", s->name, p->name, k, pt_default(p, k),
                   p->min, p->max);
    }
}

/* How many stages named name all built plugins hold. */
static int pt_count_name(const char *name)
{
    int n = 0;
    DIR *dir = opendir(PF_PLUGIN_DIR);
    struct dirent *e;
    static const pf_host_api host = {sizeof(pf_host_api), PF_ABI_VERSION, NULL};
    while (dir && (e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", PF_PLUGIN_DIR, e->d_name);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        pf_plugin_entry_fn entry = h ? (pf_plugin_entry_fn)dlsym(h, PF_PLUGIN_ENTRY_NAME) : NULL;
        const pf_plugin_desc *pd = entry ? entry(&host) : NULL;
        if (!pd)
            printf("note: %s not loadable, not checked for stage names\n", e->d_name);
        for (int i = 0; pd && i < pd->n_stages; i++)
            n += strcmp(pd->stages[i]->name, name) == 0;
        if (h)
            dlclose(h);
    }
    if (dir)
        closedir(dir);
    return n;
}

pt_images pt_images_new(const pt_stage *s, pf_rng *r, int w, int h, float lo, float hi)
{
    pt_images im;
    im.n = s->n_inputs;
    for (int k = 0; k < im.n; k++)
        im.in[k] = pf_test_image(r, w, h, lo, hi);
    im.out = pf_test_image_poisoned(w, h);
    return im;
}

void pt_images_free(pt_images *im)
{
    for (int k = 0; k < im->n; k++)
        pf_test_image_free(&im->in[k]);
    pf_test_image_free(&im->out);
}

/* Runs s over im and compares every pixel with the reference; one message per run. */
static void pt_compare(const pt_stage *s, pt_images *im, const char *what)
{
    CHECKF(h_run(s->d, s->params, im->in, im->n, &im->out, 0) == 0, "%s", s->name);
    int w = im->out.width, h = im->out.height, bad = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double in[PF_MAX_INPUTS][4], want[4], mag[4] = {0, 0, 0, 0};
            for (int k = 0; k < im->n; k++) {
                const float *px = (const float *)&pf_image_row(&im->in[k], y)[x];
                for (int c = 0; c < 4; c++)
                    in[k][c] = px[c];
            }
            pf_pos pos = {x, y, w, h};
            if (!s->ref(s, (const double(*)[4])in, pos, want, mag))
                continue;
            const float *got = (const float *)&pf_image_row(&im->out, y)[x];
            for (int c = 0; c < 4; c++) {
                double lim = s->tol * fmax(fmax(1.0, fabs(want[c])), mag[c]);
                if (fabs(got[c] - want[c]) <= lim || bad++)
                    continue;
                CHECKF(0, "%s (%s) %dx%d at (%d,%d) channel %d: got %.9g, want %.9g (%s)", s->name,
                       what, w, h, x, y, c, got[c], want[c], pt_params_str(s));
            }
        }
}

/* Point ops depend on nothing but the pixel: rows split into pieces at other x0, and a
   run in place over input 0, give exactly the same output. */
static void pt_check_split(const pt_stage *s, pt_images *im)
{
    int w = im->out.width, h = im->out.height;
    pf_image split = pf_test_image_poisoned(w, h), inplace = pf_test_image_poisoned(w, h);
    const pf_float4 *rows[PF_MAX_INPUTS];
    for (int y = 0; y < h; y++) {
        for (int x0 = 0, n; x0 < w; x0 += n) {
            n = 1 + (x0 * 7 + y) % 5;
            n = n < w - x0 ? n : w - x0;
            for (int k = 0; k < im->n; k++)
                rows[k] = pf_image_row(&im->in[k], y) + x0;
            s->d->point_row(s->params, rows, im->n, pf_image_row(&split, y) + x0, x0, n, y, w, h);
        }
        memcpy(pf_image_row(&inplace, y), pf_image_row(&im->in[0], y),
               sizeof(pf_float4) * (size_t)w);
        rows[0] = pf_image_row(&inplace, y);
        for (int k = 1; k < im->n; k++)
            rows[k] = pf_image_row(&im->in[k], y);
        s->d->point_row(s->params, rows, im->n, pf_image_row(&inplace, y), 0, w, y, w, h);
    }
    CHECKF(pf_test_image_maxdiff(&split, &im->out) == 0, "%s: split rows differ", s->name);
    CHECKF(pf_test_image_maxdiff(&inplace, &im->out) == 0, "%s: in place differs", s->name);
    pf_test_image_free(&split);
    pf_test_image_free(&inplace);
}

/* Sets a param (every element of an array) from "name=value"; NULL or "" set nothing. */
static void pt_apply(const pt_stage *s, const char *set)
{
    char name[64];
    double v;
    if (!set || !set[0])
        return;
    CHECKF(sscanf(set, "%63[^=]=%lf", name, &v) == 2, "%s", set);
    pt_set_all(s, pt_param(s, name), v);
}

/* The identity params give every input pixel back, exactly, for inputs in [0, 1). */
static void pt_check_identity(pt_stage *s, pf_rng *r)
{
    pt_reset(s);
    pt_apply(s, s->ident);
    pt_images im = pt_images_new(s, r, 37, 11, 0.0f, 1.0f);
    CHECKF(h_run(s->d, s->params, im.in, im.n, &im.out, 0) == 0, "%s", s->name);
    CHECKF(pf_test_image_maxdiff(&im.out, &im.in[0]) == 0, "%s: not the identity with %s", s->name,
           pt_params_str(s));
    pt_images_free(&im);
}

/* A hand-made case: inputs random in [0, 1) but for the channels of ov[k] that are not
   NaN; params the defaults and then `set`. The output must be input want_in with the
   channels of want that are not NaN put in, within tol (0: exactly). */
void pt_hand(pt_stage *s, const char *set, const float ov[][4], int want_in, const float want[4],
             double tol, const char *what)
{
    pf_rng r;
    pf_rng_seed(&r, 1234);
    pt_reset(s);
    pt_apply(s, set);
    pt_images im = pt_images_new(s, &r, 7, 3, 0.0f, 1.0f);
    for (int k = 0; k < im.n; k++)
        for (int y = 0; y < 3; y++)
            for (int i = 0; i < 7 * 4; i++)
                if (!isnan(ov[k][i % 4]))
                    ((float *)pf_image_row(&im.in[k], y))[i] = ov[k][i % 4];
    CHECKF(h_run(s->d, s->params, im.in, im.n, &im.out, 0) == 0, "%s", s->name);
    double m = 0;
    for (int y = 0; y < 3; y++)
        for (int i = 0; i < 7 * 4; i++) {
            double e =
                isnan(want[i % 4]) ? ((float *)pf_image_row(&im.in[want_in], y))[i] : want[i % 4];
            double d = fabs(((float *)pf_image_row(&im.out, y))[i] - e);
            if (!(d <= m))
                m = isnan(d) ? INFINITY : d;
        }
    CHECKF(m <= tol, "%s, %s: off by %g", s->name, what, m);
    pt_images_free(&im);
}

/* One set of params over every test size; returns 0 when check() refused them. */
static int pt_trial(pt_stage *s, pf_rng *r, const char *what)
{
    static const int sizes[][2] = {{1, 1}, {13, 7}, {97, 61}, {5, 33}};
    char err[256] = "";
    if (s->d->check && s->d->check(s->params, err, sizeof err) != 0) {
        CHECKF(err[0], "%s: check failed without a message", s->name);
        return 0;
    }
    for (int i = 0; i < PF_COUNTOF(sizes); i++) {
        pt_images im = pt_images_new(s, r, sizes[i][0], sizes[i][1], PT_LO, PT_HI);
        pt_compare(s, &im, what);
        if (i == 2)
            pt_check_split(s, &im);
        pt_images_free(&im);
    }
    return 1;
}

/* Defaults; each param at its min and at its max; all at min, all at max; random. */
static void pt_check_values(pt_stage *s, pf_rng *r)
{
    const pf_stage_desc *d = s->d;
    int ran = 0;
    pt_reset(s);
    ran += pt_trial(s, r, "defaults");
    for (int i = 0; i < d->n_params; i++)
        for (int end = 0; end < 2; end++) {
            pt_reset(s);
            pt_set_all(s, &d->params[i], end ? d->params[i].max : d->params[i].min);
            ran += pt_trial(s, r, end ? "one param at max" : "one param at min");
        }
    for (int end = 0; end < 2; end++) {
        for (int i = 0; i < d->n_params; i++)
            pt_set_all(s, &d->params[i], end ? d->params[i].max : d->params[i].min);
        ran += pt_trial(s, r, end ? "all at max" : "all at min");
    }
    for (int t = 0; t < 24; t++) {
        for (int i = 0; i < d->n_params; i++)
            for (int k = 0; k < pt_count(&d->params[i]); k++)
                pt_set(s, &d->params[i], k, pt_random(r, &d->params[i]));
        ran += pt_trial(s, r, "random");
    }
    CHECKF(ran >= 12, "%s: only %d param sets passed check()", s->name, ran);
}

/* Everything above, for each stage of a family. */
void pt_run_family(const char *plugin, pt_stage *stages, int n)
{
    for (int i = 0; i < n; i++) {
        pt_stage *s = &stages[i];
        pf_rng r;
        pf_rng_seed(&r, 0x5eed0000u + (uint64_t)i * 7919u);
        s->d = h_stage(plugin, s->name);
        pt_check_table(s);
        CHECKF(pt_count_name(s->name) == 1, "stage name %s is not unique over %s", s->name,
               PF_PLUGIN_DIR);
        if (s->ident)
            pt_check_identity(s, &r);
        pt_check_values(s, &r);
        printf("%s: checked\n", s->name);
    }
}

pt_stage *pt_find(pt_stage *stages, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(stages[i].name, name) == 0)
            return &stages[i];
    fprintf(stderr, "no test stage %s\n", name);
    exit(1);
}

void pt_free_family(pt_stage *stages, int n)
{
    for (int i = 0; i < n; i++)
        free(stages[i].params);
}
