/* bench/cpu_bench.c: the CPU executor, stage by stage, on one RGBA8 frame (4000x3000 by
 * default): each case is a one-stage pipeline (or a chain) run from u8 frames to u8
 * frames, edge conversions included, as a batch user meets it. Prints one line per
 * case: name, threads, and in milliseconds the median and the best wall time of the
 * repeats and the best process CPU time (all threads together: with one thread, the
 * figure that stays meaningful on a machine shared with other work).
 *
 *   cpu_bench [--threads N] [--reps R] [--size WxH] [--only NAME[,NAME...]]
 *
 * --threads 0 (the default) uses one thread per core. bench/cpu_bench.py builds this
 * against a build tree, runs it with one thread and with all, and sets OpenCV's time for
 * the same operation beside each line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipefuse/pipefuse.h"
#include "pipefuse/png.h"

typedef struct bench_case {
    const char *name;
    int n_in;
    /* the JSON stages array's contents, inputs "a" and "b"; a printf format given the
       input's w / 4, h / 4, w / 2, h / 2 */
    const char *stages;
    const char *out; /* the stage id that is the output */
} bench_case;

#define S1(id, op, params) "{\"id\": \"" id "\", \"op\": \"" op "\", \"params\": {" params "}}"
#define S2(id, op, params)                                                                         \
    "{\"id\": \"" id "\", \"op\": \"" op "\", \"inputs\": [\"a\", \"b\"], \"params\": {" params "}}"

static const bench_case
    cases[] =
        {
            {"identity", 1, S1("s", "brightness", "\"amount\": 0"), "s"},
            {"brightness", 1, S1("s", "brightness", "\"amount\": 0.1"), "s"},
            {"invert", 1, S1("s", "invert", ""), "s"},
            {"contrast", 1, S1("s", "contrast", "\"amount\": 1.5"), "s"},
            {"gamma", 1, S1("s", "gamma", "\"gamma\": 2.2"), "s"},
            {"levels", 1, S1("s", "levels", "\"in_low\": 0.1, \"in_high\": 0.9, \"gamma\": 1.5"),
             "s"},
            {"linear", 1, S1("s", "linear", "\"a\": 1.8, \"b\": -0.3"), "s"},
            {"saturation", 1, S1("s", "saturation", "\"amount\": 1.5"), "s"},
            {"grayscale", 1, S1("s", "grayscale", ""), "s"},
            {"threshold", 1, S1("s", "threshold", "\"level\": 0.5"), "s"},
            {"color_matrix", 1,
             S1("s", "color_matrix",
                "\"matrix\": [0.9, 0.1, 0, 0, 0.1, 0.8, 0.1, 0, 0, 0.2, 0.8, 0, 0, 0, 0, 1]"),
             "s"},
            {"add", 2, S2("s", "add", "\"scale\": 1"), "s"},
            {"blend", 2, S2("s", "blend", "\"opacity\": 0.3"), "s"},
            {"difference", 2, S2("s", "difference", ""), "s"},
            {"multiply", 2, S2("s", "multiply", ""), "s"},
            {"chain8", 1,
             S1("c1", "brightness", "\"amount\": 0.05") ", " S1("c2", "contrast", "\"amount\": 1.2") ", " S1("c3", "gamma", "\"gamma\": 1.1") ", " S1(
                 "c4", "saturation",
                 "\"amount\": 1.2") ", " S1("c5", "linear",
                                            "\"a\": 0.9, \"b\": 0.05") ", " S1("c6", "invert",
                                                                               "") ", " S1("c7",
                                                                                           "levels",
                                                                                           "\"in_"
                                                                                           "low\": "
                                                                                           "0.05, "
                                                                                           "\"in_"
                                                                                           "high\":"
                                                                                           " 0.95") ", " S1("c8",
                                                                                                            "brightness",
                                                                                                            "\"amount\": -0.05"),
             "c8"},
            {"gaussian", 1, S1("s", "gaussian", "\"sigma\": 2"), "s"},
            /* a point stage into a stencil: the point unit stores a float image */
            {"gamma_gaussian", 1,
             S1("g", "gamma", "\"gamma\": 2.2") ", " S1("s", "gaussian", "\"sigma\": 2"), "s"},
            {"box", 1, S1("s", "box", "\"radius\": 1"), "s"},
            {"box2", 1, S1("s", "box", "\"radius\": 2"), "s"},
            {"unsharp", 1, S1("s", "unsharp", "\"sigma\": 1, \"amount\": 0.8"), "s"},
            {"sobel", 1, S1("s", "sobel", ""), "s"},
            {"median3", 1, S1("s", "median3", ""), "s"},
            {"resize_nearest", 1, S1("s", "resize", "\"scale\": 0.5, \"mode\": \"nearest\""), "s"},
            {"resize_bilinear", 1, S1("s", "resize", "\"scale\": 0.5, \"mode\": \"bilinear\""),
             "s"},
            {"resize_area", 1, S1("s", "resize", "\"scale\": 0.5, \"mode\": \"area\""), "s"},
            /* the middle quarter: x = w / 4, y = h / 4, w / 2 by h / 2 */
            {"crop", 1, S1("s", "crop", "\"x\": %d, \"y\": %d, \"width\": %d, \"height\": %d"),
             "s"},
            {"flip", 1, S1("s", "flip", "\"axis\": \"horizontal\""), "s"},
            {"rotate90", 1, S1("s", "rotate", "\"angle\": \"90\""), "s"},
            {"pad", 1, S1("s", "pad", "\"left\": 16, \"right\": 16, \"top\": 16, \"bottom\": 16"),
             "s"},
            {"histogram", 1, S1("s", "histogram", "\"bins\": 256"), "s"},
            {"colsum", 1, S1("s", "colsum", ""), "s"},
            {"rowsum", 1, S1("s", "rowsum", ""), "s"},
            {"stats", 1, S1("s", "stats", ""), "s"},
};

static double clock_ms(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int selected(const char *only, const char *name)
{
    if (!only)
        return 1;
    size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
            return 1;
    return 0;
}

/* A frame of a smooth gradient with noise: realistic branch behaviour for clamps and
   the median (neither constant nor random). */
static void fill(pf_frame *f, unsigned seed)
{
    for (int y = 0; y < f->height; y++) {
        unsigned char *row = (unsigned char *)f->data + (size_t)y * f->pitch;
        for (int x = 0; x < f->width * f->channels; x++) {
            seed = seed * 1103515245u + 12345u;
            int v = (x / f->channels * 255 / f->width + y * 255 / f->height) / 2 +
                    (int)((seed >> 16) % 33) - 16;
            row[x] = (unsigned char)(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
    }
}

static int bench_one(pf_engine *e, const bench_case *c, const pf_frame *in, int threads, int reps)
{
    char stages[2048], json[4096], th[16];
    int w = in[0].width, h = in[0].height;
    snprintf(stages, sizeof stages, c->stages, w / 4, h / 4, w / 2, h / 2);
    snprintf(json, sizeof json,
             "{\"pipefuse\": 1, \"inputs\": [%s], \"stages\": [%s], \"outputs\": {\"o\": \"%s\"}}",
             c->n_in == 2 ? "\"a\", \"b\"" : "\"a\"", stages, c->out);
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_string(e, json, c->name, &p) != PF_OK) {
        fprintf(stderr, "cpu_bench: %s: %s\n", c->name, pf_engine_errmsg(e));
        return 1;
    }
    snprintf(th, sizeof th, "%d", threads);
    if (pf_pipeline_set_option(p, "backend", "cpu") != PF_OK ||
        (threads > 0 && pf_pipeline_set_option(p, "threads", th) != PF_OK)) {
        fprintf(stderr, "cpu_bench: %s: %s\n", c->name, pf_pipeline_errmsg(p));
        pf_pipeline_destroy(p);
        return 1;
    }
    pf_shape shapes[2] = {{in[0].width, in[0].height}, {in[1].width, in[1].height}};
    pf_output_info info;
    pf_frame out = {0};
    int rc = pf_pipeline_plan(p, shapes, c->n_in);
    if (rc == PF_OK)
        rc = pf_pipeline_output_info(p, 0, &info);
    int table = rc == PF_OK && info.kind == PF_OUTPUT_TABLE;
    if (rc == PF_OK && !table)
        rc = pf_frame_alloc(&out, info.shape.width, info.shape.height, PF_U8, 4);
    double *t = calloc((size_t)reps * 2, sizeof *t), *cpu = t + reps;
    if (!t)
        rc = PF_NO_MEMORY;
    for (int r = -1; r < reps && rc == PF_OK; r++) { /* one untimed run first */
        double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        rc = pf_pipeline_run(p, in, c->n_in, table ? NULL : &out, table ? 0 : 1);
        if (r >= 0) {
            t[r] = clock_ms(CLOCK_MONOTONIC) - t0;
            cpu[r] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
    }
    if (rc != PF_OK) {
        fprintf(stderr, "cpu_bench: %s: %s\n", c->name, pf_pipeline_errmsg(p));
    } else {
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        qsort(cpu, (size_t)reps, sizeof *cpu, cmp_double);
        printf("%-16s %3d %10.2f %10.2f %10.2f\n", c->name, threads, t[reps / 2], t[0], cpu[0]);
        fflush(stdout);
    }
    free(t);
    pf_frame_free(&out);
    pf_pipeline_destroy(p);
    return rc != PF_OK;
}

int main(int argc, char **argv)
{
    int threads = 0, reps = 7, w = 4000, h = 3000;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc &&
                 sscanf(argv[i + 1], "%dx%d", &w, &h) == 2)
            i++;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr,
                    "usage: cpu_bench [--threads N] [--reps R] [--size WxH] [--only A,B]\n");
            return 2;
        }
    }
    if (reps < 1 || w < 8 || h < 8 || threads < 0) {
        fprintf(stderr, "cpu_bench: reps must be >= 1, the size at least 8x8, threads >= 0\n");
        return 2;
    }
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    pf_engine *e = NULL;
    if (pf_engine_create(&cfg, &e) != PF_OK) {
        fprintf(stderr, "cpu_bench: engine: %s\n", pf_engine_errmsg(e));
        return 1;
    }
    pf_frame in[2];
    if (pf_frame_alloc(&in[0], w, h, PF_U8, 4) != PF_OK ||
        pf_frame_alloc(&in[1], w, h, PF_U8, 4) != PF_OK) {
        fprintf(stderr, "cpu_bench: no memory for two %dx%d frames\n", w, h);
        return 1;
    }
    fill(&in[0], 1);
    fill(&in[1], 2);
    printf("# %dx%d RGBA8, %d runs, ms: median wall, best wall, best CPU (all threads)\n", w, h,
           reps);
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (selected(only, cases[i].name))
            bad += bench_one(e, &cases[i], in, threads, reps);
    pf_frame_free(&in[0]);
    pf_frame_free(&in[1]);
    pf_engine_destroy(e);
    return bad ? 1 : 0;
}
