/* tests/gpu/test_stage_kernels.c: the CUDA kernels (run_cuda) of the filter, geometry
 * and analysis families against their CPU run_cpu, stage by stage, with no engine in
 * between.
 *
 * Every stage runs on random images of odd sizes (1x1, 13x7, 97x61, 1037x519) with
 * params at and between their edges. Params are copied to device memory (the kernels
 * read them there), scratch is cuda_scratch_bytes() as the engine would size it and
 * filled with NaN, as is every output before a run. For image stages the GPU output
 * must match the CPU's (bit for bit where the arithmetic is the same, else within the
 * stage's stated tolerance), leave the pitch padding alone, be bit-identical when run
 * in bands of rows, write only its band, and be bit-identical run to run. For reduce
 * stages the partial must match the CPU's one-band partial (same layout), the combined
 * table the CPU's table, banded partials combined the whole run's table, and two runs
 * must give the same bits. Then CUDA Graph capture: a captured launcher replays to the
 * eager bits, and to the new params' bits after params change in device memory with no
 * re-capture (scratch sized for the first params). Exits 77 without a device. With
 * PF_TEST_QUICK set in the environment (for slow sanitizers) 1037x519 is left out and
 * only bands of 7 rows are run.
 *
 * Tolerances (|gpu - cpu| <= tol * max(1, |cpu|)):
 *   bit-identical: crop, flip, rotate, pad, resize (all modes: bilinear, nearest, area,
 *                  bicubic, mitchell, lanczos3, whose Lanczos sine is geometry.h's own), box,
 *                  sobel, median3,
 *                  histogram
 *   gaussian 1e-6, unsharp 1e-6 * (1 + amount): the taps come from the device's exp(),
 *     which may round a tap differently from libm's (none did on an H200)
 *   colsum, rowsum, stats 1e-10: double sums in another order (sums of these random
 *     floats happen to be exact in double, so colsum and rowsum match to the bit here)
 * A summary line per stage gives what was measured.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>

#include "analysis.h"
#include "filter.h"
#include "geometry.h"
#include "cuda_skip.h"
#include "stage_harness.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static cudaStream_t stream;

static const pf_shape sizes[] = {{1, 1}, {13, 7}, {97, 61}, {1037, 519}};
static int quick; /* PF_TEST_QUICK set (for slow sanitizers): no 1037x519, fewer bands */
#define N_SIZES  (PF_COUNTOF(sizes) - quick)
#define LARGE(s) ((s).width > 500)

/* ---- What was measured, per stage ---------------------------------------------------- */

typedef struct measure {
    const char *stage;
    long long cases, values, not_bitwise;
    double worst; /* largest |gpu - cpu| / max(1, |cpu|) */
} measure;

static measure measures[32];
static int n_measures;

static measure *measure_of(const char *stage)
{
    for (int i = 0; i < n_measures; i++)
        if (strcmp(measures[i].stage, stage) == 0)
            return &measures[i];
    measures[n_measures].stage = stage;
    return &measures[n_measures++];
}

static int same_float_bits(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static int same_double_bits(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* |got - want| / max(1, |want|); NaN against NaN is 0, against a number infinite. */
static double rel_diff(double got, double want)
{
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want) ? 0 : INFINITY;
    if (got == want)
        return 0;
    double d = fabs(got - want), s = fabs(want) > 1 ? fabs(want) : 1;
    return d / s;
}

/* ---- Device images ------------------------------------------------------------------- */

static pf_image dev_alloc(int w, int h)
{
    pf_image im;
    size_t pitch = 0;
    void *p = NULL;
    CK(cudaMallocPitch(&p, &pitch, (size_t)w * sizeof(pf_float4), (size_t)h));
    im.data = p;
    im.width = w;
    im.height = h;
    im.pitch = pitch;
    return im;
}

/* Every float of every row, padding included, NaN (0xFFFFFFFF). */
static void dev_poison(pf_image *im)
{
    CK(cudaMemset2D(im->data, im->pitch, 0xFF, im->pitch, (size_t)im->height));
}

static pf_image dev_upload(const pf_image *h)
{
    pf_image d = dev_alloc(h->width, h->height);
    dev_poison(&d);
    CK(cudaMemcpy2D(d.data, d.pitch, h->data, h->pitch, (size_t)h->width * sizeof(pf_float4),
                    (size_t)h->height, cudaMemcpyHostToDevice));
    return d;
}

/* A host copy of a device image with its pitch (padding included). */
static pf_image dev_download(const pf_image *d)
{
    pf_image h = *d;
    h.data = malloc(d->pitch * (size_t)d->height + 1);
    CK(cudaMemcpy(h.data, d->data, d->pitch * (size_t)d->height, cudaMemcpyDeviceToHost));
    return h;
}

static void dev_free(pf_image *d)
{
    cudaFree(d->data);
    d->data = NULL;
}

/* The params struct in device memory (16 bytes when the stage has none). */
static void *dev_params(const pf_stage_desc *d, const void *params)
{
    size_t n = d->params_size ? d->params_size : 16;
    void *p = NULL;
    CK(cudaMalloc(&p, n));
    CK(cudaMemset(p, 0, n));
    if (d->params_size)
        CK(cudaMemcpy(p, params, d->params_size, cudaMemcpyHostToDevice));
    return p;
}

static void *dev_scratch(size_t bytes)
{
    void *p = NULL;
    if (!bytes)
        return NULL;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0xFF, bytes)); /* NaN: a read of what was not written shows */
    return p;
}

/* ---- Running run_cuda ---------------------------------------------------------------- */

/* The image stage d over output rows [y0, y1) in bands of band_rows (0: one band), each
   band with scratch sized for it alone. Returns the first non-zero status. */
static int g_run_rows(const pf_stage_desc *d, const void *params, const void *dparams,
                      const pf_image *din, pf_image *dout, int y0, int y1, int band_rows)
{
    if (band_rows <= 0)
        band_rows = y1 - y0;
    int width = din->width > dout->width ? din->width : dout->width;
    for (int b0 = y0; b0 < y1; b0 += band_rows) {
        int b1 = b0 + band_rows < y1 ? b0 + band_rows : y1;
        size_t ss = d->cuda_scratch_bytes ? d->cuda_scratch_bytes(params, width, b1 - b0) : 0;
        void *scratch = dev_scratch(ss);
        char err[512] = "";
        pf_stage_args a = {sizeof a, dparams, din,  1,      *dout, {b0, b1},
                           scratch,  ss,      NULL, stream, err,   sizeof err};
        int rc = d->run_cuda(&a);
        CK(cudaStreamSynchronize(stream));
        cudaFree(scratch);
        if (rc != 0) {
            fprintf(stderr, "%s: run_cuda: %s\n", d->name, err);
            return rc;
        }
    }
    return 0;
}

/* The reduce stage d over input rows in bands of band_rows (0: one band): *nb partials
   of partial_len doubles each, each zeroed before its run as the engine does. */
static double *g_reduce(const pf_stage_desc *d, const void *params, const void *dparams,
                        const pf_image *din, int band_rows, int *nb)
{
    pf_shape s = {din->width, din->height};
    pf_shape t = h_out_shape(d, params, s);
    size_t plen = d->partial_len(params, &s);
    if (band_rows <= 0)
        band_rows = s.height;
    *nb = (s.height + band_rows - 1) / band_rows;
    double *host = malloc(sizeof(double) * plen * (size_t)*nb);
    double *dpart = NULL;
    CK(cudaMalloc((void **)&dpart, sizeof(double) * plen));
    int width = s.width > t.width ? s.width : t.width;
    for (int b = 0; b < *nb; b++) {
        int y0 = b * band_rows, y1 = y0 + band_rows < s.height ? y0 + band_rows : s.height;
        size_t ss = d->cuda_scratch_bytes ? d->cuda_scratch_bytes(params, width, y1 - y0) : 0;
        void *scratch = dev_scratch(ss);
        CK(cudaMemset(dpart, 0, sizeof(double) * plen));
        char err[512] = "";
        pf_stage_args a = {sizeof a, dparams, din,   1,      {0}, {y0, y1},
                           scratch,  ss,      dpart, stream, err, sizeof err};
        int rc = d->run_cuda(&a);
        CK(cudaStreamSynchronize(stream));
        cudaFree(scratch);
        CHECKF(rc == 0, "%s: run_cuda: %s", d->name, err);
        CK(cudaMemcpy(host + (size_t)b * plen, dpart, sizeof(double) * plen,
                      cudaMemcpyDeviceToHost));
    }
    cudaFree(dpart);
    return host;
}

/* ---- Image stages -------------------------------------------------------------------- */

static int same_image_bits(const pf_image *a, const pf_image *b)
{
    for (int y = 0; y < a->height; y++) {
        const float *ra = (const float *)pf_image_row(a, y);
        const float *rb = (const float *)pf_image_row(b, y);
        for (int i = 0; i < a->width * 4; i++)
            if (!same_float_bits(ra[i], rb[i]))
                return 0;
    }
    return 1;
}

/* Where a GPU value may differ from the CPU's beyond the tolerance (unsharp near its
   threshold): return 1 to accept. */
typedef int (*accept_fn)(const void *params, const pf_image *in, int x, int y, int c, float got,
                         double tol);

/* The image stage `stage` of plugin on in: every check of the file header. */
static void check_image(const char *plugin, const char *stage, const void *params,
                        const pf_image *in, double tol, accept_fn accept, const char *label)
{
    const pf_stage_desc *d = h_stage(plugin, stage);
    CHECKF(d->run_cuda != NULL, "%s: no run_cuda", stage);
    if (!d->run_cuda)
        return;
    pf_shape os = h_out_shape(d, params, (pf_shape){in->width, in->height});
    CHECKF(os.width > 0, "%s: no output shape", label);
    if (os.width <= 0)
        return;
    const int w = os.width, h = os.height;
    pf_image want = pf_test_image_poisoned(w, h);
    CHECKF(h_run(d, params, in, 1, &want, 0) == 0, "%s: CPU run failed", label);

    void *dp = dev_params(d, params);
    pf_image din = dev_upload(in), dout = dev_alloc(w, h);
    dev_poison(&dout);
    CHECKF(g_run_rows(d, params, dp, &din, &dout, 0, h, 0) == 0, "%s: GPU run failed", label);
    pf_image got = dev_download(&dout);

    /* against the CPU */
    measure *m = measure_of(stage);
    m->cases++;
    int bad = 0;
    for (int y = 0; y < h; y++) {
        const float *g = (const float *)pf_image_row(&got, y);
        const float *e = (const float *)pf_image_row(&want, y);
        for (int i = 0; i < w * 4; i++) {
            m->values++;
            if (same_float_bits(g[i], e[i]))
                continue;
            m->not_bitwise++;
            double r = rel_diff(g[i], e[i]);
            if (r <= tol || (accept && accept(params, in, i / 4, y, i % 4, g[i], tol)))
                r = r <= tol ? r : 0;
            else if (bad++ < 3)
                CHECKF(0, "%s: (%d, %d)[%d] = %.9g, CPU %.9g", label, i / 4, y, i % 4, g[i], e[i]);
            if (r > m->worst)
                m->worst = r;
        }
        CHECKF(pf_test_image_unwritten(&got, y, (size_t)w * 4, got.pitch / sizeof(float)),
               "%s: row %d written past the width", label, y);
    }
    CHECKF(bad == 0, "%s: %d values off by more than %g", label, bad, tol);

    /* run to run */
    dev_poison(&dout);
    CHECK(g_run_rows(d, params, dp, &din, &dout, 0, h, 0) == 0);
    pf_image again = dev_download(&dout);
    CHECKF(same_image_bits(&got, &again), "%s: two GPU runs differ", label);
    free(again.data);

    /* in bands */
    static const int small_bands[] = {1, 3, 7}, large_bands[] = {37, 200};
    const int *bands = h > 100 ? large_bands : small_bands;
    int nbands = h > 100 ? PF_COUNTOF(large_bands) : PF_COUNTOF(small_bands);
    for (int b = quick ? nbands - 1 : 0; b < nbands; b++) {
        if (bands[b] >= h)
            continue;
        dev_poison(&dout);
        CHECK(g_run_rows(d, params, dp, &din, &dout, 0, h, bands[b]) == 0);
        pf_image banded = dev_download(&dout);
        CHECKF(same_image_bits(&got, &banded), "%s: bands of %d rows differ from whole", label,
               bands[b]);
        free(banded.data);
    }

    /* one band alone writes its rows and nothing else */
    int y0 = h / 3, y1 = h / 3 + (h + 2) / 3;
    dev_poison(&dout);
    CHECK(g_run_rows(d, params, dp, &din, &dout, y0, y1, 0) == 0);
    pf_image alone = dev_download(&dout);
    size_t row = (size_t)w * 4, pitch = alone.pitch / sizeof(float);
    for (int y = 0; y < h; y++) {
        int inside = y >= y0 && y < y1;
        int ok = inside ? pf_test_image_unwritten(&alone, y, row, pitch) &&
                              memcmp(pf_image_row(&alone, y), pf_image_row(&got, y), row * 4) == 0
                        : pf_test_image_unwritten(&alone, y, 0, pitch);
        if (!ok) {
            CHECKF(0, "%s: band [%d, %d) alone: row %d %s", label, y0, y1, y,
                   inside ? "differs from the whole run" : "written");
            break;
        }
    }
    free(alone.data);

    free(got.data);
    dev_free(&din);
    dev_free(&dout);
    cudaFree(dp);
    pf_test_image_free(&want);
}

/* ---- Reduce stages ------------------------------------------------------------------- */

static void check_reduce(const char *stage, const void *params, const pf_image *in, double tol,
                         const char *label)
{
    const pf_stage_desc *d = h_stage("analysis", stage);
    CHECKF(d->run_cuda != NULL, "%s: no run_cuda", stage);
    if (!d->run_cuda)
        return;
    pf_shape s = {in->width, in->height};
    size_t plen = d->partial_len(params, &s);

    /* the CPU's partial for one band over every row, and its table */
    double *cpu_part = calloc(plen, sizeof(double));
    char err[256] = "";
    pf_stage_args a = {sizeof a, params, in,       1,    {0}, {0, s.height},
                       NULL,     0,      cpu_part, NULL, err, sizeof err};
    CHECKF(d->run_cpu(&a) == 0, "%s: CPU run: %s", label, err);
    double *cpu_tab = NULL;
    int rows = 0, cols = 0;
    CHECK(h_reduce(d, params, in, 1, 0, &cpu_tab, &rows, &cols) == 0);
    size_t tlen = (size_t)rows * (size_t)cols;

    void *dp = dev_params(d, params);
    pf_image din = dev_upload(in);
    int nb = 0;
    double *gpu_part = g_reduce(d, params, dp, &din, 0, &nb);
    measure *m = measure_of(stage);
    m->cases++;
    int bad = 0;
    for (size_t i = 0; i < plen; i++) {
        m->values++;
        if (same_double_bits(gpu_part[i], cpu_part[i]))
            continue;
        m->not_bitwise++;
        double r = rel_diff(gpu_part[i], cpu_part[i]);
        if (r > m->worst)
            m->worst = r;
        if (r > tol && bad++ < 3)
            CHECKF(0, "%s: partial[%zu] = %.17g, CPU %.17g", label, i, gpu_part[i], cpu_part[i]);
    }
    CHECKF(bad == 0, "%s: %d partial values off by more than %g", label, bad, tol);

    double *gpu_tab = malloc(sizeof(double) * tlen);
    d->combine(params, &s, gpu_part, 1, gpu_tab);
    for (size_t i = 0, nbad = 0; i < tlen; i++)
        if (rel_diff(gpu_tab[i], cpu_tab[i]) > tol && nbad++ < 3)
            CHECKF(0, "%s: table[%zu] = %.17g, CPU %.17g", label, i, gpu_tab[i], cpu_tab[i]);

    /* run to run: the same bits */
    double *again = g_reduce(d, params, dp, &din, 0, &nb);
    int same = 1;
    for (size_t i = 0; i < plen; i++)
        same &= same_double_bits(again[i], gpu_part[i]);
    CHECKF(same, "%s: two GPU runs give different partials", label);
    free(again);

    /* in bands, combined: the whole run's table (to the bit where the stage sums
       integers or each table entry comes from one band) */
    int exact = strcmp(stage, "histogram") == 0 || strcmp(stage, "rowsum") == 0;
    static const int small_bands[] = {1, 3, 7}, large_bands[] = {37, 200};
    const int *bands = s.height > 100 ? large_bands : small_bands;
    int nbands = s.height > 100 ? PF_COUNTOF(large_bands) : PF_COUNTOF(small_bands);
    for (int b = quick ? nbands - 1 : 0; b < nbands; b++) {
        if (bands[b] >= s.height)
            continue;
        double *parts = g_reduce(d, params, dp, &din, bands[b], &nb);
        double *tab = malloc(sizeof(double) * tlen);
        d->combine(params, &s, parts, nb, tab);
        int ok = 1;
        for (size_t i = 0; i < tlen; i++)
            ok &=
                exact ? same_double_bits(tab[i], gpu_tab[i]) : rel_diff(tab[i], gpu_tab[i]) <= tol;
        CHECKF(ok, "%s: bands of %d rows combine to another table", label, bands[b]);
        free(parts);
        free(tab);
    }

    free(gpu_part);
    free(gpu_tab);
    free(cpu_part);
    free(cpu_tab);
    dev_free(&din);
    cudaFree(dp);
}

/* ---- Images -------------------------------------------------------------------------- */

/* Random values in [-0.25, 1.25); with nan_every > 0, about one float in nan_every NaN. */
static pf_image test_input(pf_rng *r, pf_shape s, int nan_every)
{
    pf_image im = pf_test_image(r, s.width, s.height, -0.25f, 1.25f);
    if (nan_every > 0)
        for (int y = 0; y < s.height; y++) {
            float *f = (float *)pf_image_row(&im, y);
            for (int i = 0; i < s.width * 4; i++)
                if (pf_rng_range(r, 0, nan_every - 1) == 0)
                    f[i] = NAN;
        }
    return im;
}

/* ---- filter -------------------------------------------------------------------------- */

#define GAUSS_TOL 1e-6

/* unsharp's branch may tip where |in - blur| is within rounding of the threshold: there
   either branch is right. */
static int unsharp_accept(const void *params, const pf_image *in, int x, int y, int c, float got,
                          double tol)
{
    const pf_unsharp_params *p = params;
    if (c == 3)
        return 0;
    /* the CPU's blur of this input, kept while the same input and sigma come back */
    static pf_image blur;
    static const void *blur_of;
    static float blur_sigma;
    if (!blur.data || blur_of != in->data || blur_sigma != p->sigma || blur.width != in->width ||
        blur.height != in->height) {
        pf_test_image_free(&blur);
        blur = pf_test_image_poisoned(in->width, in->height);
        h_run(h_stage("filter", "gaussian"), &(pf_gaussian_params){.sigma = p->sigma}, in, 1, &blur,
              0);
        blur_of = in->data;
        blur_sigma = p->sigma;
    }
    float s = ((const float *)pf_image_row(in, y))[x * 4 + c];
    float b = ((const float *)pf_image_row(&blur, y))[x * 4 + c];
    float dd = s - b;
    if (fabs(fabs(dd) - p->threshold) > 1e-5)
        return 0;
    return rel_diff(got, s) <= tol || rel_diff(got, s + p->amount * dd) <= tol;
}

static void test_filter(pf_rng *r)
{
    char label[256];
    for (int si = 0; si < N_SIZES; si++) {
        pf_shape s = sizes[si];
        pf_image in = test_input(r, s, 0);
        float sigmas[] = {0, 0.5f, 1, 2.5f, 4 * pf_rng_float(r), 10, PF_GAUSSIAN_MAX_SIGMA};
        for (int i = 0; i < PF_COUNTOF(sigmas); i++) {
            snprintf(label, sizeof label, "gaussian sigma %g on %dx%d", sigmas[i], s.width,
                     s.height);
            check_image("filter", "gaussian", &(pf_gaussian_params){.sigma = sigmas[i]}, &in,
                        GAUSS_TOL, NULL, label);
        }
        int radii[] = {0, 1, 2, 5, pf_rng_range(r, 0, 8), PF_BOX_MAX_RADIUS};
        for (int i = 0; i < PF_COUNTOF(radii); i++) {
            snprintf(label, sizeof label, "box radius %d on %dx%d", radii[i], s.width, s.height);
            check_image("filter", "box", &(pf_box_params){.radius = radii[i]}, &in, 0, NULL, label);
        }
        float scales[] = {1, 0, 0.5f, 1000, 10 * pf_rng_float(r)};
        for (int i = 0; i < PF_COUNTOF(scales); i++) {
            snprintf(label, sizeof label, "sobel scale %g on %dx%d", scales[i], s.width, s.height);
            check_image("filter", "sobel", &(pf_sobel_params){scales[i]}, &in, 0, NULL, label);
        }
        pf_unsharp_params cases[] = {
            {1, 1, 0, 0},
            {0, 1, 0, 0},
            {2, 0, 0, 0},
            {1.5f, 10, 0.1f, 0},
            {1, 1, 1, 0},
            {0.3f, 10, 0, 0},
            {PF_GAUSSIAN_MAX_SIGMA, 2, 0.05f, 0},
            {3 * pf_rng_float(r), 10 * pf_rng_float(r), 0.2f * pf_rng_float(r), 0},
        };
        for (int i = 0; i < PF_COUNTOF(cases); i++) {
            snprintf(label, sizeof label, "unsharp %g/%g/%g on %dx%d", cases[i].sigma,
                     cases[i].amount, cases[i].threshold, s.width, s.height);
            check_image("filter", "unsharp", &cases[i], &in, GAUSS_TOL * (1 + cases[i].amount),
                        unsharp_accept, label);
        }
        snprintf(label, sizeof label, "median3 on %dx%d", s.width, s.height);
        check_image("filter", "median3", NULL, &in, 0, NULL, label);
        pf_image nan_in = test_input(r, s, 7);
        snprintf(label, sizeof label, "median3 with NaNs on %dx%d", s.width, s.height);
        check_image("filter", "median3", NULL, &nan_in, 0, NULL, label);
        pf_test_image_free(&nan_in);
        pf_test_image_free(&in);
    }

    /* Too little scratch is an error with a message; scratch_size 0 means "as sized". */
    const pf_stage_desc *d = h_stage("filter", "gaussian");
    pf_gaussian_params gp = {.sigma = 2};
    void *dp = dev_params(d, &gp);
    pf_image in = test_input(r, (pf_shape){13, 7}, 0);
    pf_image din = dev_upload(&in), dout = dev_alloc(13, 7);
    void *scratch = dev_scratch(256);
    char err[256] = "";
    pf_stage_args a = {sizeof a, dp,  &din, 1,      dout, {0, 7},
                       scratch,  256, NULL, stream, err,  sizeof err};
    CHECKF(d->run_cuda(&a) != 0 && strstr(err, "scratch"), "too little scratch: \"%s\"", err);
    a.scratch = NULL;
    a.scratch_size = 0;
    CHECKF(d->run_cuda(&a) != 0, "no scratch accepted");
    cudaFree(scratch);
    dev_free(&din);
    dev_free(&dout);
    cudaFree(dp);
    pf_test_image_free(&in);
}

/* ---- geometry ------------------------------------------------------------------------ */

static void test_geometry(pf_rng *r)
{
    char label[256];
    static const char *const modes[] = {"bilinear", "nearest",  "area",
                                        "bicubic",  "mitchell", "lanczos3"};
    for (int si = 0; si < N_SIZES; si++) {
        pf_shape s = sizes[si];
        const int w = s.width, h = s.height;
        pf_image in = test_input(r, s, 0);
        /* up, down, mixed per axis, same size, by a factor, from one side, to 1x1 */
        pf_resize_params rs[] = {
            {2 * w + 1, 3 * h, 1, 0, 0, 0, 0, 0},
            {w / 3 > 0 ? w / 3 : 1, h / 2 > 0 ? h / 2 : 1, 1, 0, 0, 0, 0, 0},
            {2 * w, h / 3 > 0 ? h / 3 : 1, 1, 0, 0, 0, 0, 0},
            {w > 2 ? w - 2 : 1, h + 5, 1, 0, 0, 0, 0, 0},
            {w, h, 1, 0, 0, 0, 0, 0},
            {0, 0, 0.37f, 0, 0, 0, 0, 0},
            {0, 0, 1.0f / 1024, 0, 0, 0, 0, 0},
            {7, 0, 1, 0, 0, 0, 0, 0},
        };
        for (int mode = 0; mode < PF_COUNTOF(modes); mode++)
            for (int i = 0; i < PF_COUNTOF(rs); i++) {
                pf_resize_params p = rs[i];
                p.mode = mode;
                if (LARGE(s) && p.width > 2 * w) /* the CPU reference is slow there */
                    p.width = w + 11;
                snprintf(label, sizeof label, "resize %s %dx%d scale %g on %dx%d", modes[mode],
                         p.width, p.height, p.scale, w, h);
                check_image("geometry", "resize", &p, &in, 0, NULL, label);
            }
        pf_crop_params cs[] = {
            {0, 0, 0, 0, 0, 0, 0, 0, {0}},
            {0, 0, w, h, 0, 0, 0, 0, {0}},
            {w - 1, h - 1, 1, 1, 0, 0, 0, 0, {0}},
            {w / 3, h / 4, (w + 1) / 2, (h + 1) / 2, 0, 0, 0, 0, {0}},
            {w / 2, 0, 0, 1, 0, 0, 0, 0, {0}},
        };
        for (int i = 0; i < PF_COUNTOF(cs); i++) {
            snprintf(label, sizeof label, "crop %d,%d %dx%d on %dx%d", cs[i].x, cs[i].y,
                     cs[i].width, cs[i].height, w, h);
            check_image("geometry", "crop", &cs[i], &in, 0, NULL, label);
        }
        /* gravities and percentages, rectangles reaching outside cut or padded; any angle,
           expanded or not, with a fill */
        pf_crop_params cg[] = {
            {0, 0, 0, 0, PF_GRAVITY_CENTER, 50, 50, 0, {0}},
            {0, 0, 1, 1, PF_GRAVITY_BOTTOM_RIGHT, 0, 0, 0, {0}},
            {0, 0, 0, 0, PF_GRAVITY_TOP, 100, 60, 0, {0}},
            {.width = w + 9,
             .height = h + 4,
             .gravity = PF_GRAVITY_CENTER,
             .outside = PF_CROP_CLAMP},
            {.x = 2,
             .width = w + 9,
             .height = h + 4,
             .gravity = PF_GRAVITY_CENTER,
             .outside = PF_CROP_PAD,
             .color = {0.25f, 0.5f, 0.75f, 1}},
            {.x = -3, .y = h / 2, .width = w, .height = h, .outside = PF_CROP_PAD},
        };
        for (int i = 0; i < PF_COUNTOF(cg); i++) {
            snprintf(label, sizeof label, "crop gravity %d %g%% x %g%% on %dx%d", cg[i].gravity,
                     cg[i].width_pct, cg[i].height_pct, w, h);
            check_image("geometry", "crop", &cg[i], &in, 0, NULL, label);
        }
        pf_rotate_params rd[] = {
            {.degrees = 30, .expand = 1},
            {.degrees = -12.5f, .expand = 0, .fill = {0.25f, 0.5f, 0.75f, 1}},
            {.degrees = 90, .expand = 1},
            {.degrees = 181, .expand = 1, .fill = {0, 0, 0, 1}},
        };
        for (int i = 0; i < PF_COUNTOF(rd); i++) {
            snprintf(label, sizeof label, "rotate %g degrees%s on %dx%d", rd[i].degrees,
                     rd[i].expand ? " expanded" : "", w, h);
            check_image("geometry", "rotate", &rd[i], &in, 0, NULL, label);
        }
        for (int axis = 0; axis < 3; axis++) {
            snprintf(label, sizeof label, "flip %d on %dx%d", axis, w, h);
            check_image("geometry", "flip", &(pf_flip_params){axis}, &in, 0, NULL, label);
        }
        for (int angle = 0; angle < 3; angle++) {
            snprintf(label, sizeof label, "rotate %d on %dx%d", angle, w, h);
            check_image("geometry", "rotate", &(pf_rotate_params){.angle = angle}, &in, 0, NULL,
                        label);
        }
        pf_pad_params ps[] = {
            {0, 0, 0, 0, {0, 0, 0, 1}},
            {1, 2, 3, 4, {0.25f, -1, 2, 0.5f}},
            {5, 0, 0, 37, {NAN, 1, 0, 1}},
        };
        for (int i = 0; i < PF_COUNTOF(ps); i++) {
            snprintf(label, sizeof label, "pad %d,%d,%d,%d on %dx%d", ps[i].left, ps[i].right,
                     ps[i].top, ps[i].bottom, w, h);
            check_image("geometry", "pad", &ps[i], &in, 0, NULL, label);
        }
        /* copies keep NaNs where they are */
        pf_image nan_in = test_input(r, s, 5);
        snprintf(label, sizeof label, "rotate 90 with NaNs on %dx%d", w, h);
        check_image("geometry", "rotate", &(pf_rotate_params){.angle = PF_ROTATE_90}, &nan_in, 0,
                    NULL, label);
        snprintf(label, sizeof label, "resize nearest with NaNs on %dx%d", w, h);
        check_image(
            "geometry", "resize",
            &(pf_resize_params){
                .width = w + 3, .height = h > 1 ? h - 1 : 1, .scale = 1, .mode = PF_RESIZE_NEAREST},
            &nan_in, 0, NULL, label);
        pf_test_image_free(&nan_in);
        pf_test_image_free(&in);
    }
}

/* ---- analysis ------------------------------------------------------------------------ */

#define SUM_TOL 1e-10

static void test_analysis(pf_rng *r)
{
    char label[256];
    for (int si = 0; si < N_SIZES; si++) {
        pf_shape s = sizes[si];
        for (int variant = 0; variant < 3; variant++) {
            /* plain; with NaNs; with NaNs, infinities and huge values (histogram only) */
            pf_image in = test_input(r, s, variant == 0 ? 0 : 9);
            if (variant == 2) {
                static const float special[] = {INFINITY, -INFINITY, 1e30f, -1e30f,
                                                0.0f,     -0.0f,     1.0f,  0.999999940f};
                for (int y = 0; y < s.height; y++) {
                    float *f = (float *)pf_image_row(&in, y);
                    for (int i = 0; i < s.width * 4; i += 3)
                        f[i] = special[pf_rng_range(r, 0, PF_COUNTOF(special) - 1)];
                }
            }
            const char *what = variant == 0 ? "" : (variant == 1 ? " with NaNs" : " with specials");
            int bins[] = {2, 256, 2048, 2049, PF_HISTOGRAM_MAX_BINS};
            for (int i = 0; i < PF_COUNTOF(bins); i++) {
                snprintf(label, sizeof label, "histogram %d bins on %dx%d%s", bins[i], s.width,
                         s.height, what);
                check_reduce("histogram", &(pf_histogram_params){bins[i]}, &in, 0, label);
            }
            if (variant < 2) {
                static const char *const sums[] = {"colsum", "rowsum", "stats"};
                for (int k = 0; k < 3; k++) {
                    snprintf(label, sizeof label, "%s on %dx%d%s", sums[k], s.width, s.height,
                             what);
                    check_reduce(sums[k], NULL, &in, SUM_TOL, label);
                }
            }
            pf_test_image_free(&in);
        }
    }
    /* a column of one row, a row of one column, and every value NaN */
    pf_image in = test_input(r, (pf_shape){1, 300}, 0);
    check_reduce("colsum", NULL, &in, SUM_TOL, "colsum on 1x300");
    check_reduce("stats", NULL, &in, SUM_TOL, "stats on 1x300");
    pf_test_image_free(&in);
    in = test_input(r, (pf_shape){3000, 2}, 0);
    check_reduce("rowsum", NULL, &in, SUM_TOL, "rowsum on 3000x2");
    check_reduce("stats", NULL, &in, SUM_TOL, "stats on 3000x2");
    pf_test_image_free(&in);
    in = test_input(r, (pf_shape){5, 4}, 1);
    check_reduce("stats", NULL, &in, SUM_TOL, "stats all NaN");
    check_reduce("histogram", &(pf_histogram_params){16}, &in, 0, "histogram all NaN");
    pf_test_image_free(&in);
}

/* ---- CUDA Graph capture and live params ---------------------------------------------- */

/* Captures one whole run of d (params p1) into a graph; replaying it must give the eager
   bits for p1, and, after p2 is copied over the device params with no re-capture, the
   eager bits for p2. Scratch is sized for p1: p2 must not need more. */
static void check_capture(const char *plugin, const char *stage, const void *p1, const void *p2,
                          pf_shape s, pf_rng *r)
{
    const pf_stage_desc *d = h_stage(plugin, stage);
    if (!d->run_cuda)
        return;
    char label[256];
    snprintf(label, sizeof label, "%s captured on %dx%d", stage, s.width, s.height);
    pf_image in = test_input(r, s, 0);
    pf_image din = dev_upload(&in);
    pf_shape os = h_out_shape(d, p1, s);
    int reduce = d->kind == PF_STAGE_REDUCE;
    size_t plen = reduce ? d->partial_len(p1, &s) : 0;
    int width = s.width > os.width ? s.width : os.width;
    int rows = reduce ? s.height : os.height;
    size_t ss = d->cuda_scratch_bytes ? d->cuda_scratch_bytes(p1, width, rows) : 0;
    void *scratch = dev_scratch(ss), *dp = dev_params(d, p1);
    pf_image dout = reduce ? (pf_image){0} : dev_alloc(os.width, os.height);
    double *dpart = NULL;
    if (reduce)
        CK(cudaMalloc((void **)&dpart, sizeof(double) * plen));
    char err[256] = "";
    pf_stage_args a = {sizeof a, dp, &din,  1,      dout, {0, reduce ? s.height : os.height},
                       scratch,  ss, dpart, stream, err,  sizeof err};
    size_t bytes = reduce ? sizeof(double) * plen : dout.pitch * (size_t)dout.height;
    void *out_ptr = reduce ? (void *)dpart : (void *)dout.data;
    unsigned char *eager[2] = {malloc(bytes), malloc(bytes)}, *replay = malloc(bytes);
    const void *ps[2] = {p1, p2};

    /* eager runs, one per params */
    for (int k = 0; k < 2; k++) {
        if (d->params_size)
            CK(cudaMemcpy(dp, ps[k], d->params_size, cudaMemcpyHostToDevice));
        CK(cudaMemset(out_ptr, reduce ? 0 : 0xFF, bytes));
        CHECKF(d->run_cuda(&a) == 0, "%s: eager: %s", label, err);
        CK(cudaStreamSynchronize(stream));
        CK(cudaMemcpy(eager[k], out_ptr, bytes, cudaMemcpyDeviceToHost));
    }
    /* one capture with p1's values in place, replayed for both */
    if (d->params_size)
        CK(cudaMemcpy(dp, p1, d->params_size, cudaMemcpyHostToDevice));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    if (reduce)
        CK(cudaMemsetAsync(dpart, 0, bytes, stream));
    int rc = d->run_cuda(&a);
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    CHECKF(rc == 0 && end == cudaSuccess, "%s: capture: %s %s", label, err,
           cudaGetErrorString(end));
    if (rc == 0 && end == cudaSuccess) {
        CK(cudaGraphInstantiate(&exec, graph, 0));
        for (int k = 0; k < 2; k++) {
            if (d->params_size)
                CK(cudaMemcpy(dp, ps[k], d->params_size, cudaMemcpyHostToDevice));
            CK(cudaMemset(out_ptr, reduce ? 0 : 0xFF, bytes));
            CK(cudaGraphLaunch(exec, stream));
            CK(cudaStreamSynchronize(stream));
            CK(cudaMemcpy(replay, out_ptr, bytes, cudaMemcpyDeviceToHost));
            CHECKF(memcmp(replay, eager[k], bytes) == 0,
                   "%s: replay with params %d differs from eager", label, k + 1);
        }
        CHECKF(!d->params_size || memcmp(p1, p2, d->params_size) == 0 ||
                   memcmp(eager[0], eager[1], bytes) != 0,
               "%s: the two params give the same output", label);
        cudaGraphExecDestroy(exec);
    }
    if (graph)
        cudaGraphDestroy(graph);
    cudaGetLastError();
    free(eager[0]), free(eager[1]), free(replay);
    cudaFree(scratch), cudaFree(dp), cudaFree(dpart);
    if (!reduce)
        dev_free(&dout);
    dev_free(&din);
    pf_test_image_free(&in);
}

static void test_capture(pf_rng *r)
{
    pf_shape s = {97, 61}, sq = {61, 61};
    check_capture("filter", "gaussian", &(pf_gaussian_params){.sigma = 1},
                  &(pf_gaussian_params){.sigma = PF_GAUSSIAN_MAX_SIGMA}, s, r);
    check_capture("filter", "gaussian", &(pf_gaussian_params){.sigma = 0},
                  &(pf_gaussian_params){.sigma = 2.5f}, quick ? s : (pf_shape){1037, 519}, r);
    check_capture("filter", "box", &(pf_box_params){.radius = 1},
                  &(pf_box_params){.radius = PF_BOX_MAX_RADIUS}, s, r);
    check_capture("filter", "sobel", &(pf_sobel_params){1}, &(pf_sobel_params){3}, s, r);
    check_capture("filter", "unsharp",
                  &(pf_unsharp_params){.sigma = 1, .amount = 1, .threshold = 0},
                  &(pf_unsharp_params){.sigma = 20, .amount = 3, .threshold = 0.01f}, s, r);
    check_capture(
        "geometry", "resize",
        &(pf_resize_params){.width = 50, .height = 30, .scale = 1, .mode = PF_RESIZE_BILINEAR},
        &(pf_resize_params){.width = 50, .height = 30, .scale = 1, .mode = PF_RESIZE_AREA}, s, r);
    check_capture("geometry", "crop", &(pf_crop_params){0, 0, 40, 30, 0, 0, 0, 0, {0}},
                  &(pf_crop_params){50, 20, 40, 30, 0, 0, 0, 0, {0}}, s, r);
    check_capture("geometry", "flip", &(pf_flip_params){PF_FLIP_HORIZONTAL},
                  &(pf_flip_params){PF_FLIP_BOTH}, s, r);
    check_capture("geometry", "rotate", &(pf_rotate_params){.angle = PF_ROTATE_90},
                  &(pf_rotate_params){.angle = PF_ROTATE_270}, s, r);
    check_capture("geometry", "rotate", &(pf_rotate_params){.angle = PF_ROTATE_90},
                  &(pf_rotate_params){.angle = PF_ROTATE_180}, sq, r);
    check_capture("geometry", "pad", &(pf_pad_params){1, 2, 3, 4, {0, 0, 0, 1}},
                  &(pf_pad_params){3, 0, 7, 0, {1, 1, 1, 1}}, s, r);
    check_capture("analysis", "histogram", &(pf_histogram_params){256}, &(pf_histogram_params){256},
                  s, r);
    check_capture("analysis", "colsum", NULL, NULL, s, r);
    check_capture("analysis", "rowsum", NULL, NULL, s, r);
    check_capture("analysis", "stats", NULL, NULL, (pf_shape){1037, 519}, r);
}

/* ---- alpha --------------------------------------------------------------------------- */

/* Blurs and resamplings, premultiplied (the default) and straight, of images with alpha
   as files give it (harness.h's h_alpha_image: transparent pixels with garbage colour,
   NaN and infinities included; any float, 8-bit and 16-bit codes), and the antialiased
   shrink. The premultiplied path divides on both sides with the same rounding, so the
   tolerances are those of the straight stages. */
static void test_alpha(pf_rng *r)
{
    char label[256];
    static const char *const modes[] = {"bilinear", "nearest",  "area",
                                        "bicubic",  "mitchell", "lanczos3"};
    for (int si = 0; si < N_SIZES; si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        for (int bits = 0; bits <= 16; bits += 8) {
            pf_image in = h_alpha_image(r, w, h, bits);
            const int nb = bits ? bits : 32; /* in labels: float samples are "32-bit" */
            for (int alpha = 0; alpha < 2; alpha++) {
                const char *am = alpha == PF_ALPHA_STRAIGHT ? "straight" : "premultiplied";
                float sigmas[] = {0.5f, 1, 2.5f, 10};
                for (int i = 0; i < PF_COUNTOF(sigmas); i++) {
                    snprintf(label, sizeof label, "gaussian sigma %g %s on %dx%d %d-bit alpha",
                             sigmas[i], am, w, h, nb);
                    check_image("filter", "gaussian",
                                &(pf_gaussian_params){.sigma = sigmas[i], .alpha = alpha}, &in,
                                GAUSS_TOL, NULL, label);
                }
                int radii[] = {1, 3, PF_BOX_MAX_RADIUS};
                for (int i = 0; i < PF_COUNTOF(radii); i++) {
                    snprintf(label, sizeof label, "box radius %d %s on %dx%d %d-bit alpha",
                             radii[i], am, w, h, nb);
                    check_image("filter", "box",
                                &(pf_box_params){.radius = radii[i], .alpha = alpha}, &in, 0, NULL,
                                label);
                }
                /* threshold 0: no branch can tip */
                pf_unsharp_params up = {.sigma = 1.5f, .amount = 2, .threshold = 0, .alpha = alpha};
                snprintf(label, sizeof label, "unsharp %s on %dx%d %d-bit alpha", am, w, h, nb);
                check_image("filter", "unsharp", &up, &in, GAUSS_TOL * (1 + up.amount), NULL,
                            label);
                int rs[][2] = {
                    {(w + 1) / 2, (h + 1) / 2}, {w / 3 + 1, h + 3}, {2 * w + 1, 3 * h}, {1, 1}};
                for (int mode = 0; mode < PF_COUNTOF(modes); mode++)
                    for (int aa = 0; aa < 2; aa++)
                        for (int i = 0; i < PF_COUNTOF(rs); i++) {
                            pf_resize_params p = {.width = rs[i][0],
                                                  .height = rs[i][1],
                                                  .scale = 1,
                                                  .mode = mode,
                                                  .alpha = alpha,
                                                  .antialias = aa};
                            snprintf(label, sizeof label,
                                     "resize %s%s %s to %dx%d on %dx%d %d-bit alpha", modes[mode],
                                     aa ? " antialias" : "", am, p.width, p.height, w, h, nb);
                            check_image("geometry", "resize", &p, &in, 0, NULL, label);
                        }
                pf_rotate_params rd[] = {
                    {.degrees = 30, .expand = 1, .fill = {1, 0, 0, 0}, .alpha = alpha},
                    {.degrees = -12.5f, .fill = {0.25f, 0.5f, 0.75f, 0.5f}, .alpha = alpha},
                };
                for (int i = 0; i < PF_COUNTOF(rd); i++) {
                    snprintf(label, sizeof label, "rotate %g degrees %s on %dx%d %d-bit alpha",
                             rd[i].degrees, am, w, h, nb);
                    check_image("geometry", "rotate", &rd[i], &in, 0, NULL, label);
                }
            }
            pf_test_image_free(&in);
        }
    }
    /* the alpha param changed live, with no re-capture */
    pf_shape s = {97, 61};
    check_capture("filter", "gaussian", &(pf_gaussian_params){.sigma = 2},
                  &(pf_gaussian_params){.sigma = 2, .alpha = PF_ALPHA_STRAIGHT}, s, r);
    check_capture("filter", "unsharp", &(pf_unsharp_params){.sigma = 1, .amount = 1},
                  &(pf_unsharp_params){.sigma = 1, .amount = 1, .alpha = PF_ALPHA_STRAIGHT}, s, r);
    check_capture(
        "geometry", "resize", &(pf_resize_params){.width = 30, .height = 20, .scale = 1},
        &(pf_resize_params){
            .width = 30, .height = 20, .scale = 1, .antialias = 1, .alpha = PF_ALPHA_STRAIGHT},
        s, r);
    check_capture("geometry", "rotate", &(pf_rotate_params){.degrees = 30, .expand = 1},
                  &(pf_rotate_params){.degrees = 30, .expand = 1, .alpha = PF_ALPHA_STRAIGHT}, s,
                  r);
}

int main(void)
{
    if (!pf_test_cuda_device("test_stage_kernels"))
        return PF_TEST_SKIPPED;
    /* a blocking stream: ordered after the synchronous copies and memsets here */
    CK(cudaStreamCreate(&stream));
    quick = getenv("PF_TEST_QUICK") != NULL;
    static void (*const tests[])(pf_rng *) = {test_filter, test_geometry, test_analysis,
                                              test_capture, test_alpha};
    for (int i = 0; i < PF_COUNTOF(tests); i++) {
        pf_rng r;
        pf_rng_seed(&r, 0xC0DA0000u + (uint64_t)i * 7919u);
        tests[i](&r);
    }
    printf("%-10s %6s %10s %12s %12s\n", "stage", "cases", "values", "not bitwise", "max rel diff");
    for (int i = 0; i < n_measures; i++)
        printf("%-10s %6lld %10lld %12lld %12.3g\n", measures[i].stage, measures[i].cases,
               measures[i].values, measures[i].not_bitwise, measures[i].worst);
    cudaStreamDestroy(stream);
    return pf_test_done("test_stage_kernels");
}
