/* tests/cpu/test_reduce_native.c: colsum, rowsum and stats on 8- and 16-bit frames in
 * their own format (plugins/analysis/analysis_native.c) give the same partials and tables
 * as their float code, bit for bit.
 *
 * Directly: each stage's run_native on a frame against its run_cpu on the float RGBA image
 * the engine loads from it (k / 255 or k / 65535 rounded to float, gray in r, g and b,
 * alpha 1 where the frame has none), band by band, every partial double compared. The
 * frames hold every code of their format and random ones, or only codes of 256 and up
 * (whose sums rowsum and stats add in any order), in bands small and large, so that both
 * the reordered sums and the ones kept in run_cpu's order are taken. Then through the
 * engine: the table of an integer frame against that of the float frame of the same
 * values (test_cpu_fast's liar_count shows that integer frames take run_native).
 */
#include <string.h>

#include "pipefuse/png.h"
#include "stage_harness.h"

static int max_code(int s)
{
    return s ? 65535 : 255;
}

/* A frame of w x h pixels of ch channels (s: 0 8-bit, 1 16-bit): the first pixels every
   code in turn, then random codes, all at least lo; or, for lo -1, codes near the top with
   a small one every seventh sample (sums that grow past where the small ones' last bits
   still count, so that the order of the additions shows). */
static pf_frame make_frame(pf_rng *r, int s, int ch, int w, int h, int lo)
{
    pf_frame f;
    if (pf_frame_alloc(&f, w, h, s ? PF_U16 : PF_U8, ch) != PF_OK)
        exit(1);
    const int m = max_code(s);
    for (int y = 0; y < h; y++)
        for (int i = 0; i < w * ch; i++) {
            long k = (long)y * w * ch + i;
            int v = k <= m ? (int)k : (int)(pf_rng_u32(r) % (unsigned)(m + 1));
            if (lo < 0)
                v = k % 7 == 0 ? 1 + (int)(pf_rng_u32(r) % 5) : m - (int)(pf_rng_u32(r) % 3);
            else
                v = lo + v % (m + 1 - lo);
            char *row = (char *)f.data + (size_t)y * f.pitch;
            if (s)
                ((uint16_t *)row)[i] = (uint16_t)v;
            else
                ((uint8_t *)row)[i] = (uint8_t)v;
        }
    return f;
}

static float code_at(const pf_frame *f, int x, int y, int c)
{
    const char *row = (const char *)f->data + (size_t)y * f->pitch;
    size_t i = (size_t)x * (size_t)f->channels + (size_t)c;
    return f->sample == PF_U8 ? (float)((const uint8_t *)row)[i] / 255.0f
                              : (float)((const uint16_t *)row)[i] / 65535.0f;
}

/* The float RGBA image the engine loads from f. */
static pf_image loaded(const pf_frame *f)
{
    pf_image im = pf_test_image_poisoned(f->width, f->height);
    for (int y = 0; y < f->height; y++)
        for (int x = 0; x < f->width; x++) {
            const int ch = f->channels;
            const float g = code_at(f, x, y, 0);
            pf_image_row(&im, y)[x] = ch <= 2 ? pf_f4(g, g, g, ch == 2 ? code_at(f, x, y, 1) : 1.0f)
                                              : pf_f4(g, code_at(f, x, y, 1), code_at(f, x, y, 2),
                                                      ch == 4 ? code_at(f, x, y, 3) : 1.0f);
        }
    return im;
}

static long compared;

/* run_native against run_cpu on f, in bands of band rows (0: one band). */
static void check_direct(const char *name, const pf_frame *f, int band, const char *label)
{
    const pf_stage_desc *d = h_stage("analysis", name);
    CHECKF(d->run_native && d->native_ok && d->native_ok(NULL), "%s: no native path", name);
    if (!d->run_native)
        return;
    pf_image im = loaded(f);
    pf_shape in = {f->width, f->height};
    size_t len = d->partial_len(NULL, &in);
    double *want = malloc(sizeof(double) * len), *got = malloc(sizeof(double) * len);
    char err[256] = "";
    if (!want || !got)
        exit(1);
    int step = band > 0 ? band : f->height;
    for (int y0 = 0; y0 < f->height; y0 += step) {
        int y1 = y0 + step < f->height ? y0 + step : f->height;
        memset(want, 0, sizeof(double) * len);
        memset(got, 0, sizeof(double) * len);
        pf_stage_args sa;
        memset(&sa, 0, sizeof sa);
        sa.size = sizeof sa;
        sa.in = &im;
        sa.n_in = 1;
        sa.region.y0 = y0;
        sa.region.y1 = y1;
        sa.partial = want;
        sa.err = err;
        sa.err_size = sizeof err;
        pf_native_args na;
        memset(&na, 0, sizeof na);
        na.size = sizeof na;
        na.in = f->data;
        na.in_width = f->width;
        na.in_height = f->height;
        na.in_pitch = f->pitch;
        na.sample = (int)f->sample;
        na.channels = f->channels;
        na.pixel_bytes = pf_frame_pixel_bytes(f->sample, f->channels);
        na.region = sa.region;
        na.partial = got;
        na.err = err;
        na.err_size = sizeof err;
        CHECKF(d->run_cpu(&sa) == 0 && d->run_native(&na) == 0, "%s %s: %s", name, label, err);
        compared++;
        CHECKF(!memcmp(got, want, sizeof(double) * len),
               "%s %s, bands of %d: the partial of rows %d..%d differs from run_cpu's", name, label,
               band, y0, y1 - 1);
    }
    free(want);
    free(got);
    pf_test_image_free(&im);
}

/* The table of a pipeline of stage `name` on f against the one on f's values as floats. */
static void check_engine(pf_engine *eng, const char *name, const pf_frame *f, const char *label)
{
    char json[512];
    snprintf(
        json, sizeof json,
        "{\"pipefuse\": 1, \"inputs\": [\"a\"], \"stages\": [{\"id\": \"s\", \"op\": \"%s\"}], "
        "\"outputs\": {\"o\": \"s\"}, \"options\": {\"backend\": \"cpu\"}}",
        name);
    pf_pipeline *p = pf_test_load_string(eng, json, "test_reduce_native", NULL);
    pf_frame ff;
    if (pf_frame_alloc(&ff, f->width, f->height, PF_F32, f->channels) != PF_OK)
        exit(1);
    for (int y = 0; y < f->height; y++)
        for (int x = 0; x < f->width; x++)
            for (int c = 0; c < f->channels; c++)
                ((float *)((char *)ff.data + (size_t)y * ff.pitch))[x * f->channels + c] =
                    code_at(f, x, y, c);
    pf_table got, want;
    double *keep = NULL;
    int rc = pf_pipeline_run(p, f, 1, NULL, 0);
    CHECKF(rc == PF_OK, "%s: %s", name, pf_pipeline_errmsg(p));
    if (rc == PF_OK && pf_pipeline_table(p, 0, &got) == PF_OK) {
        size_t n = sizeof(double) * (size_t)got.rows * (size_t)got.cols;
        keep = malloc(n);
        if (!keep)
            exit(1);
        memcpy(keep, got.data, n);
        rc = pf_pipeline_run(p, &ff, 1, NULL, 0);
        CHECKF(rc == PF_OK, "%s: %s", name, pf_pipeline_errmsg(p));
        CHECK(pf_pipeline_table(p, 0, &want) == PF_OK);
        compared++;
        CHECKF(rc == PF_OK && want.rows == got.rows && !memcmp(keep, want.data, n),
               "%s %s: the integer frame's table differs from the float frame's", name, label);
    }
    free(keep);
    pf_frame_free(&ff);
    pf_pipeline_destroy(p);
}

int main(void)
{
    static const char *const stages[] = {"colsum", "rowsum", "stats"};
    /* width, height, band rows, least code */
    static const struct {
        int w, h, band, lo;
    } shapes[] = {{256, 70, 0, 0},    {256, 70, 7, 0},   {1, 300, 0, 0},     {300, 2, 1, 0},
                  {257, 9, 4, 256},   {20000, 2, 1, 0},  {20000, 2, 1, 256}, {5, 3, 0, 0},
                  {131, 260, 0, 256}, {131, 260, 64, 1}, {20000, 2, 1, -1},  {256, 300, 0, -1}};
    pf_engine *eng = pf_test_engine();
    pf_rng r;
    pf_rng_seed(&r, 34);
    char label[96];
    for (int s = 0; s < 2; s++)
        for (int ch = 1; ch <= 4; ch++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
                int lo = shapes[i].lo > max_code(s) / 2 ? 1 : shapes[i].lo;
                pf_frame f = make_frame(&r, s, ch, shapes[i].w, shapes[i].h, lo);
                snprintf(label, sizeof label, "%s x%d %dx%d codes >= %d", s ? "u16" : "u8", ch,
                         shapes[i].w, shapes[i].h, lo);
                for (size_t k = 0; k < sizeof stages / sizeof stages[0]; k++) {
                    check_direct(stages[k], &f, shapes[i].band, label);
                    check_engine(eng, stages[k], &f, label);
                }
                pf_frame_free(&f);
            }
    /* one row of 5e6 gray samples near the top: sums past 2^22, where the additions' order
       changes the bits, so rowsum and stats must keep run_cpu's */
    for (int s = 0; s < 2; s++) {
        pf_frame f = make_frame(&r, s, 1, 5000000, 1, -1);
        check_direct("rowsum", &f, 0, s ? "u16 x1 5000000x1" : "u8 x1 5000000x1");
        check_direct("stats", &f, 0, s ? "u16 x1 5000000x1" : "u8 x1 5000000x1");
        pf_frame_free(&f);
    }
    printf("test_reduce_native: %ld comparisons\n", compared);
    CHECK(compared > 0);
    pf_engine_destroy(eng);
    return pf_test_done("test_reduce_native");
}
