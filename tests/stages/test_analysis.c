/* tests/stages/test_analysis.c: the analysis family (reduce stages) against plain
 * references, with the family driver's descriptor checks
 * (tests/lib/family_driver.h).
 *
 * References are one pass (two for stats) over the whole image in double. Every stage
 * runs on random images of odd sizes, with NaN, infinities and bin edges mixed in,
 * combined from bands of 1, 3 and 7 rows and from one band, into a poisoned table;
 * counts must match exactly, sums and statistics within a stated relative tolerance.
 */
#include <math.h>
#include <string.h>

#include "family_driver.h"

#include "analysis.h"

static const pf_shape sizes[] = {{1, 1}, {2, 3}, {13, 7}, {97, 61}, {5, 33}};

static float ch(const pf_image *im, int x, int y, int c)
{
    pf_float4 p = pf_image_row(im, y)[x];
    return c == 0 ? p.x : c == 1 ? p.y : c == 2 ? p.z : p.w;
}

static int agrees(double got, double want, double tol)
{
    if (isnan(want) || isinf(want))
        return isnan(want) ? isnan(got) : got == want;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* The table of the stage on in, from one band into a table poisoned with NaN (so an
   unwritten cell shows) and from bands of 1, 3 and 7 rows, against want (rows x 4). */
static void check_reduce(const char *name, const void *params, const pf_image *in,
                         const double *want, int rows, double tol, const char *what)
{
    const pf_stage_desc *d = h_stage("analysis", name);
    pf_shape s = {in->width, in->height};
    pf_shape t = h_out_shape(d, params, s);
    CHECKF(t.width == 4 && t.height == rows, "%s (%s): table %dx%d, want 4x%d", name, what, t.width,
           t.height, rows);
    if (t.width != 4 || t.height != rows)
        return;
    size_t len = d->partial_len(params, &s), cells = (size_t)rows * 4;
    double *partial = calloc(len, sizeof(double)), *table = malloc(cells * sizeof(double));
    for (size_t i = 0; i < cells; i++)
        table[i] = NAN;
    char err[256] = "";
    pf_stage_args a = {sizeof a, params, in,      1,    {0}, {0, in->height},
                       NULL,     0,      partial, NULL, err, sizeof err};
    CHECKF(d->run_cpu(&a) == 0, "%s: %s", name, err);
    d->combine(params, &s, partial, 1, table);

    static const int bands[] = {0, 1, 3, 7};
    for (int b = -1; b < PF_COUNTOF(bands); b++) {
        double *got = table;
        int r = rows, c = 4, bad = 0;
        if (b >= 0)
            CHECK(h_reduce(d, params, in, 1, bands[b], &got, &r, &c) == 0 && r == rows && c == 4);
        for (size_t i = 0; i < cells; i++)
            if (!agrees(got[i], want[i], tol) && bad++ < 3)
                CHECKF(0, "%s (%s) on %dx%d, bands of %d: [%zu][%zu] = %.17g, want %.17g", name,
                       what, in->width, in->height, b >= 0 ? bands[b] : in->height, i / 4, i % 4,
                       got[i], want[i]);
        if (b >= 0)
            free(got);
    }
    free(partial);
    free(table);
}

/* Random values in [-0.25, 1.25), then a few that sit on bin edges or are not finite. */
static pf_image test_input(pf_rng *r, int w, int h, int specials)
{
    static const float special[] = {NAN,  INFINITY, -INFINITY, 1.0f,    0.0f,        -0.0f,
                                    0.5f, 0.25f,    1e30f,     -1e-30f, 0.999999940f};
    pf_image im = pf_test_image(r, w, h, -0.25f, 1.25f);
    for (int k = 0; specials && k < (w * h + 3) / 4; k++) {
        pf_float4 *px = pf_image_row(&im, pf_rng_range(r, 0, h - 1)) + pf_rng_range(r, 0, w - 1);
        float *f = (float *)px;
        f[pf_rng_range(r, 0, 3)] = special[pf_rng_range(r, 0, PF_COUNTOF(special) - 1)];
    }
    return im;
}

static void test_histogram(pf_rng *r)
{
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = test_input(r, w, h, 1);
        int bins[] = {256, 2, 3, 4, PF_HISTOGRAM_MAX_BINS, pf_rng_range(r, 2, 1000)};
        for (int k = 0; k < PF_COUNTOF(bins); k++) {
            const int n = bins[k];
            double *want = calloc((size_t)n * 4, sizeof(double));
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < 4; c++) {
                        float v = ch(&in, x, y, c);
                        if (v != v)
                            continue;
                        int b = v <= 0 ? 0 : v >= 1 ? n - 1 : (int)floor((double)v * n);
                        want[(size_t)(b < n ? b : n - 1) * 4 + (size_t)c] += 1;
                    }
            char what[32];
            snprintf(what, sizeof what, "%d bins", n);
            check_reduce("histogram", &(pf_histogram_params){n}, &in, want, n, 0, what);
            free(want);
        }
        pf_test_image_free(&in);
    }
}

/* colsum (by_row 0) or rowsum (1). */
static void test_sums(pf_rng *r, int by_row)
{
    const char *name = by_row ? "rowsum" : "colsum";
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height, rows = by_row ? h : w;
        for (int specials = 0; specials < 2; specials++) {
            pf_image in = test_input(r, w, h, specials);
            double *want = calloc((size_t)rows * 4, sizeof(double));
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < 4; c++)
                        want[(size_t)(by_row ? y : x) * 4 + (size_t)c] += ch(&in, x, y, c);
            check_reduce(name, NULL, &in, want, rows, 1e-13, specials ? "specials" : "plain");
            free(want);
            pf_test_image_free(&in);
        }
    }
}

static void ref_stats(const pf_image *in, double want[16])
{
    for (int c = 0; c < 4; c++) {
        double n = 0, sum = 0, ss = 0, mn = INFINITY, mx = -INFINITY;
        for (int y = 0; y < in->height; y++)
            for (int x = 0; x < in->width; x++) {
                double v = ch(in, x, y, c);
                if (v == v)
                    n++, sum += v, mn = fmin(mn, v), mx = fmax(mx, v);
            }
        double mean = sum / n;
        for (int y = 0; y < in->height; y++)
            for (int x = 0; x < in->width; x++) {
                double v = ch(in, x, y, c);
                if (v == v)
                    ss += (v - mean) * (v - mean);
            }
        want[PF_STATS_MIN * 4 + c] = n ? mn : NAN;
        want[PF_STATS_MAX * 4 + c] = n ? mx : NAN;
        want[PF_STATS_MEAN * 4 + c] = n ? mean : NAN;
        want[PF_STATS_STDDEV * 4 + c] = n ? sqrt(ss / n) : NAN;
    }
}

static void test_stats(pf_rng *r)
{
    double want[16];
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        /* plain; NaN mixed in; far from 0 (where a sum of squares cancels); all NaN in
           one channel */
        for (int kind = 0; kind < 4; kind++) {
            pf_image in = kind == 2 ? pf_test_image(r, w, h, 1000.0f, 1000.01f)
                                    : pf_test_image(r, w, h, -0.25f, 1.25f);
            for (int k = 0; kind == 1 && k < (w * h + 2) / 3; k++)
                pf_image_row(&in, pf_rng_range(r, 0, h - 1))[pf_rng_range(r, 0, w - 1)].y = NAN;
            for (int y = 0; kind == 3 && y < h; y++)
                for (int x = 0; x < w; x++)
                    pf_image_row(&in, y)[x].z = NAN;
            ref_stats(&in, want);
            static const char *const what[] = {"plain", "with NaN", "near 1000", "all NaN"};
            check_reduce("stats", NULL, &in, want, PF_STATS_ROWS, 1e-9, what[kind]);
            pf_test_image_free(&in);
        }
    }
    const pf_stage_desc *d = h_stage("analysis", "stats");
    static const char *const rows[] = {"min", "max", "mean", "stddev"};
    for (int i = 0; i < PF_STATS_ROWS; i++)
        CHECKF(d->row_name && strcmp(d->row_name(NULL, i), rows[i]) == 0, "stats row %d", i);
    CHECK(d->row_name(NULL, PF_STATS_ROWS) == NULL);
}

static void test_colsum(pf_rng *r)
{
    test_sums(r, 0);
}
static void test_rowsum(pf_rng *r)
{
    test_sums(r, 1);
}

int main(void)
{
    static const char *const names[] = {"histogram", "colsum", "rowsum", "stats"};
    static const fd_test_fn tests[] = {test_histogram, test_colsum, test_rowsum, test_stats};
    return fd_main("test_analysis", "analysis", PF_STAGE_REDUCE, names, PF_COUNTOF(names), tests,
                   PF_COUNTOF(tests));
}
