/* tests/stages/test_geometry.c: the geometry family (resample stages) against plain
 * references, with the image-stage driver of test_filter.c.
 *
 * resize is checked against dense per-axis weight vectors written from the formulas
 * (OpenCV's INTER_LINEAR coordinates with its own edge clamping, centre-aligned nearest,
 * exact overlap areas); crop, flip, rotate and pad against forward maps (each input
 * pixel sent to where it belongs), and against each other (four quarter turns, 180 as a
 * flip of both axes).
 */
#define FD_DRIVER_ONLY
#include "test_filter.c"

#include "geometry.h"

static const pf_shape sizes[] = {{1, 1}, {2, 3}, {13, 7}, {97, 61}, {5, 33}};

/* ---- Running a case ------------------------------------------------------------------- */

static void check_case(const char *name, const void *params, const pf_image *in,
                       const pf_image *want, double tol, const char *what)
{
    char label[256];
    snprintf(label, sizeof label, "%s (%s) on %dx%d", name, what, in->width, in->height);
    fd_check_image_stage(h_stage("geometry", name), params, in, want, NULL, tol, label);
}

/* out = stage(in), allocated at the stage's shape (0x0 and nonzero return on failure). */
static int run_stage(const char *name, const void *params, const pf_image *in, pf_image *out)
{
    const pf_stage_desc *d = h_stage("geometry", name);
    pf_shape s = h_out_shape(d, params, (pf_shape){in->width, in->height});
    *out = pf_test_image_poisoned(s.width ? s.width : 1, s.height ? s.height : 1);
    return s.width == 0 || h_run(d, params, in, 1, out, 0) != 0;
}

/* The shape error of a stage: non-zero and the message. */
static int shape_error(const char *name, const void *params, pf_shape in, char *err,
                       size_t err_size)
{
    pf_shape out = {0, 0};
    err[0] = 0;
    return h_stage("geometry", name)->shape(params, &in, &out, err, err_size);
}

/* ---- resize ----------------------------------------------------------------------------- */

/* The weights of output index o over all n_in input pixels along one axis. */
static void axis_weights(int mode, int n_in, int n_out, int o, double *w)
{
    for (int i = 0; i < n_in; i++)
        w[i] = 0;
    if (mode == PF_RESIZE_NEAREST) {
        int i = (int)floor((o + 0.5) * n_in / n_out);
        w[i < n_in ? i : n_in - 1] = 1;
    } else if (mode == PF_RESIZE_AREA && n_out <= n_in) {
        double lo = (double)o * n_in / n_out, hi = (double)(o + 1) * n_in / n_out;
        for (int i = 0; i < n_in; i++) {
            double cover = fmin(i + 1.0, hi) - fmax((double)i, lo);
            w[i] = cover > 0 ? cover / (hi - lo) : 0;
        }
    } else { /* as OpenCV's resize computes INTER_LINEAR coordinates */
        double fx = (o + 0.5) * n_in / n_out - 0.5;
        int sx = (int)floor(fx);
        fx -= sx;
        if (sx < 0)
            sx = 0, fx = 0;
        if (sx >= n_in - 1)
            sx = n_in - 1, fx = 0;
        w[sx] += 1 - fx;
        if (fx > 0)
            w[sx + 1] += fx;
    }
}

static pf_image ref_resize(const pf_image *in, int mode, int ow, int oh)
{
    pf_image out = pf_test_image_poisoned(ow, oh);
    double *wx = malloc(sizeof(double) * (size_t)ow * (size_t)in->width);
    double *wy = malloc(sizeof(double) * (size_t)in->height);
    for (int x = 0; x < ow; x++)
        axis_weights(mode, in->width, ow, x, wx + (size_t)x * (size_t)in->width);
    for (int y = 0; y < oh; y++) {
        axis_weights(mode, in->height, oh, y, wy);
        for (int x = 0; x < ow; x++) {
            const double *w = wx + (size_t)x * (size_t)in->width;
            double s[4] = {0, 0, 0, 0}, v[4];
            for (int j = 0; j < in->height; j++)
                for (int i = 0; wy[j] != 0 && i < in->width; i++)
                    if (w[i] != 0) {
                        fd_px(in, i, j, v);
                        for (int c = 0; c < 4; c++)
                            s[c] += wy[j] * w[i] * v[c];
                    }
            fd_set(&out, x, y, s);
        }
    }
    free(wx);
    free(wy);
    return out;
}

/* The output size the params ask for, worked out again. */
static pf_shape resize_size(const pf_resize_params *p, int w, int h)
{
    double ow = p->width, oh = p->height;
    if (p->width && !p->height)
        oh = floor((double)h * p->width / w + 0.5);
    else if (!p->width && p->height)
        ow = floor((double)w * p->height / h + 0.5);
    else if (!p->width && !p->height)
        ow = floor(w * (double)p->scale + 0.5), oh = floor(h * (double)p->scale + 0.5);
    return (pf_shape){ow < 1 ? 1 : (int)ow, oh < 1 ? 1 : (int)oh};
}

static void test_resize(pf_rng *r)
{
    static const char *const modes[] = {"bilinear", "nearest", "area"};
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        for (int m = 0; m < 3; m++) {
            pf_resize_params cases[] = {
                {w, h, 1, m, 0, 0},                             /* same size */
                {0, 0, 1, m, 0, 0},                             /* scale 1 */
                {pf_rng_range(r, 1, 2 * w + 3), 0, 1, m, 0, 0}, /* width, keep aspect */
                {0, pf_rng_range(r, 1, 2 * h + 3), 1, m, 0, 0}, /* height, keep aspect */
                {pf_rng_range(r, 1, w + 2), pf_rng_range(r, 1, 2 * h), 1, m, 0, 0},
                {pf_rng_range(r, 1, w), pf_rng_range(r, 1, h), 1, m, 0, 0}, /* shrink */
                {0, 0, 0.1f + 2.9f * pf_rng_float(r), m, 0, 0},
                {0, 0, 1.0f / 1024, m, 0, 0}, /* to 1x1 */
                {0, 0, w * h <= 6 ? 64.0f : 1.5f, m, 0, 0},
            };
            for (int c = 0; c < PF_COUNTOF(cases); c++) {
                pf_shape s = resize_size(&cases[c], w, h);
                pf_image want = ref_resize(&in, m, s.width, s.height);
                char what[128];
                snprintf(what, sizeof what, "%s, %d %d %g to %dx%d", modes[m], cases[c].width,
                         cases[c].height, cases[c].scale, s.width, s.height);
                check_case("resize", &cases[c], &in, &want, 1e-6, what);
                pf_test_image_free(&want);
            }
            /* The same size is the input, to the bit, in every mode. */
            pf_image out;
            CHECK(run_stage("resize", &(pf_resize_params){w, h, 1, m, 0, 0}, &in, &out) == 0 &&
                  fd_same_bits(&in, &out));
            pf_test_image_free(&out);
        }
        pf_test_image_free(&in);
    }
    char err[256];
    pf_resize_params big = {0, 0, 64, PF_RESIZE_BILINEAR, 0, 0};
    CHECKF(shape_error("resize", &big, (pf_shape){20000, 10}, err, sizeof err) != 0 &&
               strstr(err, "20000x10") && strstr(err, "1280000x640"),
           "resize past the largest side: \"%s\"", err);
    pf_resize_params huge = {60000, 60000, 1, PF_RESIZE_BILINEAR, 0, 0};
    CHECKF(shape_error("resize", &huge, (pf_shape){10, 10}, err, sizeof err) != 0 &&
               strstr(err, "60000x60000"),
           "resize past the largest area: \"%s\"", err);
}

/* ---- crop, flip, rotate, pad ------------------------------------------------------------- */

static void test_crop(pf_rng *r)
{
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        int x = pf_rng_range(r, 0, w - 1), y = pf_rng_range(r, 0, h - 1);
        pf_crop_params cases[] = {
            {0, 0, 0, 0, 0, 0, 0}, /* all */
            {0, 0, w, h, 0, 0, 0}, /* all */
            {x, y, 1, 1, 0, 0, 0}, /* a pixel */
            {x, y, 0, 0, 0, 0, 0}, /* to the edges */
            {x, y, pf_rng_range(r, 1, w - x), pf_rng_range(r, 1, h - y), 0, 0, 0}, /* random */
            {w - 1, h - 1, 1, 1, 0, 0, 0},                                         /* last pixel */
        };
        for (int c = 0; c < PF_COUNTOF(cases); c++) {
            const pf_crop_params *p = &cases[c];
            int cw = p->width ? p->width : w - p->x, ch = p->height ? p->height : h - p->y;
            pf_image want = pf_test_image_poisoned(cw, ch);
            double v[4];
            for (int j = 0; j < ch; j++)
                for (int i = 0; i < cw; i++) {
                    fd_px(&in, p->x + i, p->y + j, v);
                    fd_set(&want, i, j, v);
                }
            char what[64];
            snprintf(what, sizeof what, "%d %d %d %d", p->x, p->y, p->width, p->height);
            check_case("crop", p, &in, &want, 0, what);
            pf_test_image_free(&want);
        }
        /* Outside the input: an error that names both sizes. */
        pf_crop_params bad[] = {
            {w, 0, 0, 0, 0, 0, 0},         {0, h, 0, 0, 0, 0, 0}, {0, 0, w + 1, h, 0, 0, 0},
            {0, 0, w, h + 1, 0, 0, 0},     {1, 0, w, h, 0, 0, 0}, {0, h - 1, 1, 2, 0, 0, 0},
            {x, y, w - x + 1, 1, 0, 0, 0},
        };
        for (int c = 0; c < PF_COUNTOF(bad); c++) {
            char err[256], insize[32], req[64];
            snprintf(insize, sizeof insize, "%dx%d", w, h);
            snprintf(req, sizeof req, "width %d, height %d", bad[c].width, bad[c].height);
            CHECKF(shape_error("crop", &bad[c], sizes[si], err, sizeof err) != 0 &&
                       strstr(err, insize) && strstr(err, req),
                   "crop %d %d %d %d of %s: \"%s\"", bad[c].x, bad[c].y, bad[c].width,
                   bad[c].height, insize, err);
        }
        pf_test_image_free(&in);
    }
}

/* Where input pixel (i, j) of a w x h image lands: flips and clockwise turns. */
static void flip_to(int axis, int w, int h, int i, int j, int *x, int *y)
{
    *x = axis == PF_FLIP_VERTICAL ? i : w - 1 - i;
    *y = axis == PF_FLIP_HORIZONTAL ? j : h - 1 - j;
}

static void turn_to(int angle, int w, int h, int i, int j, int *x, int *y)
{
    for (int q = 0; q <= angle; q++) { /* a quarter turn at a time: (i, j) -> (h-1-j, i) */
        int t = i;
        i = h - 1 - j, j = t;
        t = w, w = h, h = t;
    }
    *x = i, *y = j;
}

typedef void (*forward_fn)(int k, int w, int h, int i, int j, int *x, int *y);

static void check_forward(const char *name, const void *params, int k, int ow, int oh,
                          forward_fn to, const pf_image *in, const char *what)
{
    pf_image want = pf_test_image_poisoned(ow, oh);
    double v[4];
    for (int j = 0; j < in->height; j++)
        for (int i = 0; i < in->width; i++) {
            int x, y;
            to(k, in->width, in->height, i, j, &x, &y);
            fd_px(in, i, j, v);
            fd_set(&want, x, y, v);
        }
    check_case(name, params, in, &want, 0, what);
    pf_test_image_free(&want);
}

static void test_flip_rotate(pf_rng *r)
{
    static const char *const axes[] = {"horizontal", "vertical", "both"};
    static const char *const angles[] = {"90", "180", "270"};
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        for (int k = 0; k < 3; k++) {
            check_forward("flip", &(pf_flip_params){k}, k, w, h, flip_to, &in, axes[k]);
            check_forward("rotate", &(pf_rotate_params){.angle = k}, k, k == 1 ? w : h,
                          k == 1 ? h : w, turn_to, &in, angles[k]);
        }
        /* Four quarter turns, and 90 then 270, give the input back; 180 is both flips. */
        pf_image a, b, c, d;
        CHECK(run_stage("rotate", &(pf_rotate_params){.angle = PF_ROTATE_90}, &in, &a) == 0);
        CHECK(run_stage("rotate", &(pf_rotate_params){.angle = PF_ROTATE_90}, &a, &b) == 0);
        CHECK(run_stage("rotate", &(pf_rotate_params){.angle = PF_ROTATE_180}, &b, &c) == 0);
        CHECKF(fd_same_bits(&in, &c), "rotate %dx%d: 90 + 90 + 180 is not the identity", w, h);
        pf_test_image_free(&c);
        CHECK(run_stage("rotate", &(pf_rotate_params){.angle = PF_ROTATE_270}, &a, &c) == 0);
        CHECKF(fd_same_bits(&in, &c), "rotate %dx%d: 90 + 270 is not the identity", w, h);
        CHECK(run_stage("flip", &(pf_flip_params){PF_FLIP_BOTH}, &in, &d) == 0);
        CHECKF(pf_test_image_maxdiff(&b, &d) == 0, "rotate 180 differs from flip both");
        pf_test_image_free(&a);
        pf_test_image_free(&b);
        pf_test_image_free(&c);
        pf_test_image_free(&d);
        pf_test_image_free(&in);
    }
}

static void test_pad(pf_rng *r)
{
    for (int si = 0; si < PF_COUNTOF(sizes); si++) {
        const int w = sizes[si].width, h = sizes[si].height;
        pf_image in = pf_test_image(r, w, h, -0.25f, 1.25f);
        pf_pad_params cases[] = {
            {0, 0, 0, 0, {0, 0, 0, 1}},
            {1, 2, 3, 4, {0, 0, 0, 1}},
            {40, 0, 0, 33, {0.25f, -1, 7, 0.5f}},
            {pf_rng_range(r, 0, 9),
             pf_rng_range(r, 0, 9),
             pf_rng_range(r, 0, 9),
             pf_rng_range(r, 0, 9),
             {pf_rng_float(r), pf_rng_float(r), pf_rng_float(r), 1}},
        };
        for (int c = 0; c < PF_COUNTOF(cases); c++) {
            const pf_pad_params *p = &cases[c];
            int ow = w + p->left + p->right, oh = h + p->top + p->bottom;
            pf_image want = pf_test_image_poisoned(ow, oh);
            double v[4], fill[4] = {p->color[0], p->color[1], p->color[2], p->color[3]};
            for (int y = 0; y < oh; y++)
                for (int x = 0; x < ow; x++)
                    fd_set(&want, x, y, fill);
            for (int j = 0; j < h; j++)
                for (int i = 0; i < w; i++) {
                    fd_px(&in, i, j, v);
                    fd_set(&want, p->left + i, p->top + j, v);
                }
            char what[64];
            snprintf(what, sizeof what, "%d %d %d %d", p->left, p->right, p->top, p->bottom);
            check_case("pad", p, &in, &want, 0, what);
            pf_test_image_free(&want);
        }
        pf_test_image_free(&in);
    }
    /* The default color is opaque black; too large an output is an error. */
    pf_pad_params *def = h_params(h_stage("geometry", "pad"));
    CHECK(def->color[0] == 0 && def->color[1] == 0 && def->color[2] == 0 && def->color[3] == 1);
    free(def);
    char err[256];
    pf_pad_params big = {PF_GEOMETRY_MAX_SIDE, 0, 0, 0, {0, 0, 0, 1}};
    CHECKF(shape_error("pad", &big, (pf_shape){13, 7}, err, sizeof err) != 0 && strstr(err, "13x7"),
           "pad past the largest side: \"%s\"", err);
}

int main(void)
{
    static const char *const names[] = {"resize", "crop", "flip", "rotate", "pad"};
    static const fd_test_fn tests[] = {test_resize, test_crop, test_flip_rotate, test_pad};
    return fd_main("test_geometry", "geometry", PF_STAGE_RESAMPLE, names, PF_COUNTOF(names), tests,
                   PF_COUNTOF(tests));
}
