/* tests/stages/test_stage_modes.c: the stage modes batch users reach for first, against
 * references written here from their documented meaning (double precision, libm's sin
 * and cos): resize into or over a box keeping the aspect ratio and shrink-only, crop by
 * percent and gravity, rotation by any angle (bilinear, fill, expanded or not), and an
 * overlay of another size at an offset or gravity.
 *
 *   test_stage_modes cpu|cuda
 *
 * cuda runs the same cases on the CUDA backend and exits 77 (skipped) without a usable
 * device. Frames are float RGBA, so nothing is rounded at the edges.
 */
#include <math.h>
#include <string.h>

#include "pipefuse/tools.h"
#include "testutil.h"

static const char *backend = "cpu";

typedef struct img {
    int w, h;
    float *px; /* RGBA */
} img;

static pf_rng rng = {88172645463325252ull};

static img make(int w, int h)
{
    img m = {w, h, malloc(sizeof(float) * 4 * (size_t)w * (size_t)h)};
    if (!m.px) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < 4 * (size_t)w * (size_t)h; i++)
        m.px[i] = pf_rng_float(&rng);
    return m;
}

static float *at(const img *m, int x, int y)
{
    return m->px + 4 * ((size_t)y * (size_t)m->w + (size_t)x);
}

static pf_frame frame_of(img *m)
{
    return (pf_frame){m->px, m->w, m->h, sizeof(float) * 4 * (size_t)m->w, PF_F32, 4};
}

/* Runs a pipeline of one stage "s" (op and params as JSON) on in (and in2, the
   second input when not NULL); *out is allocated at the planned size. Returns 0, or -1
   with the engine's message in err. */
static int run(pf_engine *e, const char *op, const char *params, img *in, img *in2, img *out,
               char *err, size_t errn)
{
    char json[2048];
    snprintf(json, sizeof json,
             "{\"pipefuse\": 1, \"inputs\": [\"a\"%s], \"stages\": [{\"id\": \"s\", \"op\": "
             "\"%s\", \"inputs\": [\"a\"%s], \"params\": %s}], \"outputs\": {\"o\": \"s\"}, "
             "\"options\": {\"backend\": \"%s\"}}",
             in2 ? ", \"b\"" : "", op, in2 ? ", \"b\"" : "", params, backend);
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(e, json, "case", &p) != PF_OK) {
        snprintf(err, errn, "%s", pf_engine_errmsg(e));
        return -1;
    }
    pf_shape shapes[2] = {{in->w, in->h}, {in2 ? in2->w : 0, in2 ? in2->h : 0}};
    pf_output_info oi;
    int rc = pf_pipeline_plan(p, shapes, in2 ? 2 : 1);
    if (rc == PF_OK)
        rc = pf_pipeline_output_info(p, 0, &oi);
    if (rc == PF_OK) {
        out->w = oi.shape.width, out->h = oi.shape.height;
        out->px = malloc(sizeof(float) * 4 * (size_t)out->w * (size_t)out->h);
        for (size_t i = 0; out->px && i < 4 * (size_t)out->w * (size_t)out->h; i++)
            out->px[i] = NAN; /* poisoned: unwritten pixels show */
        pf_frame fin[2] = {frame_of(in), in2 ? frame_of(in2) : frame_of(in)};
        pf_frame fout = frame_of(out);
        rc = out->px ? pf_pipeline_run(p, fin, in2 ? 2 : 1, &fout, 1) : PF_NO_MEMORY;
    }
    if (rc != PF_OK)
        snprintf(err, errn, "%s", pf_pipeline_errmsg(p));
    pf_pipeline_destroy(p);
    return rc == PF_OK ? 0 : -1;
}

/* The planned output size only. */
static int plan_size(pf_engine *e, const char *op, const char *params, int w, int h, int *ow,
                     int *oh)
{
    img in = {w, h, NULL}, out = {0, 0, NULL};
    char json[1024];
    snprintf(json, sizeof json,
             "{\"pipefuse\": 1, \"inputs\": [\"a\"], \"stages\": [{\"id\": \"s\", \"op\": "
             "\"%s\", \"params\": %s}], \"outputs\": {\"o\": \"s\"}, \"options\": "
             "{\"backend\": \"%s\"}}",
             op, params, backend);
    (void)in, (void)out;
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(e, json, "plan", &p) != PF_OK)
        return -1;
    pf_shape s = {w, h};
    pf_output_info oi;
    int rc = pf_pipeline_plan(p, &s, 1);
    if (rc == PF_OK && pf_pipeline_output_info(p, 0, &oi) == PF_OK)
        *ow = oi.shape.width, *oh = oi.shape.height;
    pf_pipeline_destroy(p);
    return rc == PF_OK ? 0 : -1;
}

/* Largest difference over every channel; a NaN (unwritten) counts as infinite. */
static double maxdiff(const img *a, const img *b)
{
    pf_image ia = {(pf_float4 *)a->px, a->w, a->h, sizeof(float) * 4 * (size_t)a->w};
    pf_image ib = {(pf_float4 *)b->px, b->w, b->h, sizeof(float) * 4 * (size_t)b->w};
    return pf_test_image_maxdiff(&ia, &ib);
}

/* ---- resize into and over a box, shrink-only ---------------------------------------------- */

static void test_resize(pf_engine *e)
{
    static const struct {
        int w, h;
        const char *params;
        int ow, oh;
    } cases[] = {
        {4000, 3000, "{\"width\": 1200, \"height\": 1200, \"fit\": \"inside\"}", 1200, 900},
        {3000, 4000, "{\"width\": 1200, \"height\": 1200, \"fit\": \"inside\"}", 900, 1200},
        {4000, 3000, "{\"width\": 1200, \"height\": 1200, \"fit\": \"cover\"}", 1600, 1200},
        {4000, 3000, "{\"width\": 1200, \"height\": 1200}", 1200, 1200}, /* stretch */
        {512, 384, "{\"width\": 1200, \"height\": 1200, \"fit\": \"inside\"}", 1200, 900},
        {512, 384,
         "{\"width\": 1200, \"height\": 1200, \"fit\": \"inside\", \"shrink_only\": true}", 512,
         384},
        {512, 384, "{\"width\": 1200, \"shrink_only\": true}", 512, 384},
        {2048, 1536, "{\"width\": 1200, \"shrink_only\": true}", 1200, 900},
        {512, 384, "{\"scale\": 3, \"shrink_only\": true}", 512, 384},
        {512, 384, "{\"width\": 1000, \"height\": 300, \"shrink_only\": true}", 512, 300},
        {1001, 1, "{\"width\": 100, \"height\": 100, \"fit\": \"inside\"}", 100, 1},
        /* the derived side rounds as "height" alone rounds it: 11 * 15 / 22 = 7.5 is 8
           (11 * (15 / 22) in double is 7.4999999: 7 before the fix), 15 * 49 / 6 = 122.5
           is 123 */
        {11, 22, "{\"height\": 15}", 8, 15},
        {11, 22, "{\"width\": 100, \"height\": 15, \"fit\": \"inside\"}", 8, 15},
        {11, 22, "{\"width\": 1, \"height\": 15, \"fit\": \"cover\"}", 8, 15},
        {15, 6, "{\"width\": 1000, \"height\": 49, \"fit\": \"inside\"}", 123, 49},
        {22, 11, "{\"width\": 15, \"height\": 100, \"fit\": \"inside\"}", 15, 8},
        {22, 11,
         "{\"width\": 15, \"height\": 100, \"fit\": \"inside\", \"shrink_only\": "
         "true}",
         15, 8},
        {22, 11,
         "{\"width\": 30, \"height\": 100, \"fit\": \"inside\", \"shrink_only\": "
         "true}",
         22, 11},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ow = 0, oh = 0;
        int rc = plan_size(e, "resize", cases[i].params, cases[i].w, cases[i].h, &ow, &oh);
        CHECKF(rc == 0 && ow == cases[i].ow && oh == cases[i].oh,
               "resize %dx%d %s: %dx%d, expected %dx%d", cases[i].w, cases[i].h, cases[i].params,
               ow, oh, cases[i].ow, cases[i].oh);
    }
    /* fitting is only a size: the pixels are those of the plain resize to it */
    img in = make(64, 48), a = {0}, b = {0};
    char err[4096];
    CHECKF(run(e, "resize", "{\"width\": 40, \"height\": 40, \"fit\": \"inside\"}", &in, NULL, &a,
               err, sizeof err) == 0 &&
               run(e, "resize", "{\"width\": 40, \"height\": 30}", &in, NULL, &b, err,
                   sizeof err) == 0,
           "resize: %s", err);
    CHECKF(a.w == 40 && a.h == 30 && maxdiff(&a, &b) == 0, "resize inside differs from 40x30");
    free(a.px), free(b.px), free(in.px);
}

/* ---- crop by percent and gravity ---------------------------------------------------------- */

static void test_crop(pf_engine *e)
{
    img in = make(37, 23);
    static const struct {
        const char *params;
        int x, y, w, h; /* the expected rectangle in the 37x23 input */
    } cases[] = {
        {"{\"gravity\": \"center\", \"width\": 11, \"height\": 5}", 13, 9, 11, 5},
        {"{\"gravity\": \"center\", \"width_pct\": 50, \"height_pct\": 50}", 9, 5, 19, 12},
        {"{\"gravity\": \"top-left\", \"width_pct\": 10, \"height\": 3}", 0, 0, 4, 3},
        {"{\"gravity\": \"bottom-right\", \"x\": 3, \"y\": 2, \"width\": 10, \"height\": 7}", 24,
         14, 10, 7},
        {"{\"gravity\": \"top-right\", \"width\": 5, \"height\": 4}", 32, 0, 5, 4},
        {"{\"gravity\": \"bottom\", \"height_pct\": 25}", 0, 17, 37, 6},
        {"{\"gravity\": \"left\", \"x\": 2, \"width\": 6, \"height\": 6}", 2, 8, 6, 6},
        {"{\"x\": 5, \"y\": 4, \"width_pct\": 20, \"height_pct\": 40}", 5, 4, 7, 9},
        {"{\"gravity\": \"center\", \"x\": -2, \"y\": 1, \"width\": 3, \"height\": 3}", 15, 11, 3,
         3},
    };
    char err[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        img out = {0};
        if (run(e, "crop", cases[i].params, &in, NULL, &out, err, sizeof err) != 0) {
            CHECKF(0, "crop %s: %s", cases[i].params, err);
            continue;
        }
        img want = {cases[i].w, cases[i].h, malloc(sizeof(float) * 4 * cases[i].w * cases[i].h)};
        for (int y = 0; y < want.h; y++)
            for (int x = 0; x < want.w; x++)
                memcpy(at(&want, x, y), at(&in, cases[i].x + x, cases[i].y + y), 4 * sizeof(float));
        CHECKF(maxdiff(&out, &want) == 0, "crop %s: %dx%d, not the %dx%d at %d,%d", cases[i].params,
               out.w, out.h, want.w, want.h, cases[i].x, cases[i].y);
        free(out.px), free(want.px);
    }
    img out = {0};
    CHECKF(run(e, "crop", "{\"gravity\": \"right\", \"x\": 30, \"width\": 10}", &in, NULL, &out,
               err, sizeof err) != 0 &&
               strstr(err, "outside the 37x23 input"),
           "crop outside the input: \"%s\"", err);
    free(out.px);
    free(in.px);
}

/* ---- rotation by any angle ---------------------------------------------------------------- */

/* The reference: output pixel centres turned back by the angle about the centres of
   both images; bilinear between the four nearest input pixels, fill outside. */
static img ref_rotate(const img *in, double deg, int expand, const float fill[4])
{
    double t = deg * 3.14159265358979323846 / 180.0, s = sin(t), c = cos(t);
    if (fmod(deg, 90.0) == 0) /* libm's cos(90 degrees) is 6e-17, not 0 */
        s = round(s), c = round(c);
    int ow = in->w, oh = in->h;
    if (expand) {
        /* the box, grown to the parity of the input side it runs along (docs/stages.md) */
        const int q = fabs(s) > fabs(c);
        ow = (int)ceil(in->w * fabs(c) + in->h * fabs(s) - 1e-9);
        oh = (int)ceil(in->w * fabs(s) + in->h * fabs(c) - 1e-9);
        ow += (ow - (q ? in->h : in->w)) & 1;
        oh += (oh - (q ? in->w : in->h)) & 1;
    }
    img out = {ow, oh, malloc(sizeof(float) * 4 * (size_t)ow * oh)};
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            double dx = x + 0.5 - ow / 2.0, dy = y + 0.5 - oh / 2.0;
            double sx = c * dx + s * dy + in->w / 2.0 - 0.5;
            double sy = -s * dx + c * dy + in->h / 2.0 - 0.5;
            int x0 = (int)floor(sx), y0 = (int)floor(sy);
            double fx = sx - x0, fy = sy - y0, acc[4] = {0, 0, 0, 0};
            for (int j = 0; j < 2; j++)
                for (int i = 0; i < 2; i++) {
                    double wgt = (i ? fx : 1 - fx) * (j ? fy : 1 - fy);
                    int ix = x0 + i, iy = y0 + j;
                    const float *v =
                        ix >= 0 && ix < in->w && iy >= 0 && iy < in->h ? at(in, ix, iy) : fill;
                    for (int k = 0; k < 4; k++)
                        acc[k] += wgt * v[k];
                }
            for (int k = 0; k < 4; k++)
                at(&out, x, y)[k] = (float)acc[k];
        }
    return out;
}

static void test_rotate(pf_engine *e)
{
    img in = make(37, 23);
    static const float fill[4] = {0.25f, 0.5f, 0.75f, 1};
    static const double angles[] = {30, -45, 90, 180, 270, 12.5, 359, -170.25, 1};
    char err[4096], params[256];
    for (size_t i = 0; i < sizeof angles / sizeof angles[0]; i++)
        for (int expand = 0; expand < 2; expand++) {
            snprintf(params, sizeof params,
                     "{\"degrees\": %.17g, \"expand\": %s, \"fill\": [0.25, 0.5, 0.75, 1], "
                     "\"alpha\": \"straight\"}", /* the reference mixes straight */
                     angles[i], expand ? "true" : "false");
            img out = {0}, want = ref_rotate(&in, angles[i], expand, fill);
            if (run(e, "rotate", params, &in, NULL, &out, err, sizeof err) != 0) {
                CHECKF(0, "rotate %s: %s", params, err);
            } else {
                double d = maxdiff(&out, &want);
                CHECKF(d <= 2e-6, "rotate %s: %dx%d (reference %dx%d), largest difference %g",
                       params, out.w, out.h, want.w, want.h, d);
            }
            free(out.px), free(want.px);
        }
    /* 90 degrees by any-angle is the quarter turn, bit for bit */
    img a = {0}, b = {0};
    CHECKF(run(e, "rotate", "{\"degrees\": 90}", &in, NULL, &a, err, sizeof err) == 0 &&
               run(e, "rotate", "{\"angle\": \"90\"}", &in, NULL, &b, err, sizeof err) == 0 &&
               maxdiff(&a, &b) == 0,
           "rotate degrees 90 differs from angle 90 (%s)", err);
    free(a.px), free(b.px), free(in.px);
}

/* ---- overlay ------------------------------------------------------------------------------- */

static void test_overlay(pf_engine *e)
{
    img base = make(40, 30), logo = make(9, 7), big = make(50, 35);
    static const struct {
        const char *params;
        int x, y; /* the overlay's top left in the base */
        double opacity;
        int use_big;
    } cases[] = {
        {"{\"x\": 4, \"y\": 6}", 4, 6, 1, 0},
        {"{\"gravity\": \"bottom-right\", \"x\": 2, \"y\": 3, \"opacity\": 0.5}", 29, 20, 0.5, 0},
        {"{\"gravity\": \"center\"}", 15, 11, 1, 0},
        {"{\"gravity\": \"top\", \"y\": -3}", 15, -3, 1, 0},               /* partly outside */
        {"{\"x\": 35, \"y\": 27, \"opacity\": 0.25}", 35, 27, 0.25, 0},    /* clipped */
        {"{\"x\": 100}", 100, 0, 1, 0},                                    /* wholly outside */
        {"{\"gravity\": \"center\", \"opacity\": 0.75}", -5, -3, 0.75, 1}, /* larger than base */
    };
    char err[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        img *o = cases[i].use_big ? &big : &logo, out = {0};
        if (run(e, "overlay", cases[i].params, &base, o, &out, err, sizeof err) != 0) {
            CHECKF(0, "overlay %s: %s", cases[i].params, err);
            continue;
        }
        img want = {base.w, base.h, malloc(sizeof(float) * 4 * base.w * base.h)};
        memcpy(want.px, base.px, sizeof(float) * 4 * base.w * base.h);
        for (int y = 0; y < o->h; y++)
            for (int x = 0; x < o->w; x++) {
                int bx = cases[i].x + x, by = cases[i].y + y;
                if (bx < 0 || by < 0 || bx >= base.w || by >= base.h)
                    continue;
                const float *b = at(&base, bx, by), *v = at(o, x, y);
                double ao = fmin(fmax(v[3] * cases[i].opacity, 0), 1);
                double ab = fmin(fmax(b[3], 0), 1) * (1 - ao), alpha = ao + ab;
                float *w = at(&want, bx, by);
                for (int k = 0; k < 3; k++)
                    w[k] = alpha > 1e-30 ? (float)((v[k] * ao + b[k] * ab) / alpha) : 0;
                w[3] = (float)alpha;
            }
        double d = maxdiff(&out, &want);
        CHECKF(d <= 1e-6, "overlay %s: largest difference %g", cases[i].params, d);
        free(out.px), free(want.px);
    }
    free(base.px), free(logo.px), free(big.px);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "cpu") && strcmp(argv[1], "cuda"))) {
        fprintf(stderr, "usage: test_stage_modes cpu|cuda\n");
        return 2;
    }
    backend = argv[1];
    pf_engine *e = pf_test_engine();
    char why[512];
    if (strcmp(backend, "cuda") == 0 && !pf_engine_cuda_usable(e, why, sizeof why)) {
        printf("test_stage_modes cuda: skipped: %s\n", why);
        pf_engine_destroy(e);
        return PF_TEST_SKIPPED;
    }
    test_resize(e);
    test_crop(e);
    test_rotate(e);
    test_overlay(e);
    pf_engine_destroy(e);
    return pf_test_done(strcmp(backend, "cuda") == 0 ? "test_stage_modes cuda"
                                                     : "test_stage_modes cpu");
}
