/* tests/golden/golden.c: golden checksums of the example pipelines, FATE-style.
 *
 *   golden [CHECKSUMS]            recompute every line of CHECKSUMS and compare
 *   golden --update [CHECKSUMS]   rewrite CHECKSUMS: every output of every pipeline
 * CHECKSUMS defaults to this folder's checksums.txt (in the source tree).
 *
 * A line is `<pipeline> <inputs> <output> <checksum>`: a file of pipelines/, the sample
 * images (samples/images/) for its inputs, comma-separated, an output name and the
 * FNV-1a 64 checksum (hex) of what that output holds for those inputs. Images are
 * taken as 8-bit frames straight from pf_pipeline_run, in the output's channels (its
 * format's, else the first input's), and hashed as "WIDTHxHEIGHTxCHANNELS\n" then the
 * rows' samples; 8 bits, so that a last-bit difference of powf or expf between C
 * libraries rarely shows. Tables are hashed as "ROWSxCOLS\n" then each value printed
 * "%.9g\n". Everything runs on the CPU backend, whose results do not depend on the
 * thread count.
 *
 * When an output changes on purpose, rebuild and run
 *     build/bin/golden --update
 * then review the diff of checksums.txt and commit it with the change. On a mismatch
 * the test prints the new line for each output that differs. --update keeps each
 * pipeline's inputs from its existing lines; a new pipeline gets astronaut.png (and
 * camera.png for a second input): edit its inputs and run --update again.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <string.h>

#include "pipefuse/png.h"
#include "testutil.h"

#define MAX_LINES 256
#define MAX_IO    8

typedef struct line {
    char pipeline[256], inputs[512], output[128], sum[32];
} line;

static line lines[MAX_LINES];
static int n_lines;

/* ---- Checksums ----------------------------------------------------------------------- */

typedef struct fnv {
    uint64_t h;
} fnv;

static void fnv_add(fnv *f, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        f->h = (f->h ^ p[i]) * 0x100000001b3ull;
}

static void fnv_str(fnv *f, const char *s)
{
    fnv_add(f, s, strlen(s));
}

/* ---- Running one pipeline ------------------------------------------------------------ */

/* Runs pipeline over the comma-separated inputs and writes the checksum of every output
   into sums[o] (names[o] its name); returns the number of outputs, or -1. */
static int run_pipeline(pf_engine *e, const char *pipeline, const char *inputs, char sums[][32],
                        const char **names, pf_pipeline **pp)
{
    char path[4096], err[1024];
    snprintf(path, sizeof path, "%s/pipelines/%s", PF_SOURCE_DIR, pipeline);
    pf_pipeline *p = NULL;
    if (pf_pipeline_load_file(e, path, &p) != PF_OK) {
        fprintf(stderr, "golden: %s\n", pf_engine_errmsg(e));
        return -1;
    }
    *pp = p;
    pf_pipeline_set_option(p, "backend", "cpu");
    pf_frame in[MAX_IO], out[MAX_IO];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    int n_in = 0, n_out = pf_pipeline_output_count(p), rc = PF_OK;
    char list[512];
    snprintf(list, sizeof list, "%s", inputs);
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name && rc == PF_OK && n_in < MAX_IO;
         name = strtok_r(NULL, ",", &save)) {
        snprintf(path, sizeof path, "%s/samples/images/%s", PF_SOURCE_DIR, name);
        rc = pf_png_read(path, 0, &in[n_in++], NULL, err, sizeof err);
        if (rc != PF_OK)
            fprintf(stderr, "golden: %s\n", err);
    }
    if (rc == PF_OK && n_in != pf_pipeline_input_count(p)) {
        fprintf(stderr, "golden: %s takes %d inputs; %d given (%s)\n", pipeline,
                pf_pipeline_input_count(p), n_in, inputs);
        rc = PF_INVALID_ARGUMENT;
    }
    pf_shape shapes[MAX_IO];
    for (int i = 0; i < n_in; i++)
        shapes[i] = (pf_shape){in[i].width, in[i].height};
    if (rc == PF_OK && (n_out > MAX_IO || pf_pipeline_plan(p, shapes, n_in) != PF_OK)) {
        fprintf(stderr, "golden: %s: %s\n", pipeline, pf_pipeline_errmsg(p));
        rc = PF_SHAPE;
    }
    for (int o = 0; o < n_out && rc == PF_OK; o++) {
        pf_output_info oi;
        pf_pipeline_output_info(p, o, &oi);
        names[o] = oi.name;
        if (oi.kind == PF_OUTPUT_IMAGE)
            rc = pf_frame_alloc(&out[o], oi.shape.width, oi.shape.height, PF_U8,
                                oi.channels ? oi.channels : in[0].channels);
    }
    if (rc == PF_OK && pf_pipeline_run(p, in, n_in, out, n_out) != PF_OK) {
        fprintf(stderr, "golden: %s: %s\n", pipeline, pf_pipeline_errmsg(p));
        rc = PF_STAGE;
    }
    for (int o = 0; o < n_out && rc == PF_OK; o++) {
        fnv f = {0xcbf29ce484222325ull};
        char buf[64];
        pf_table t;
        if (out[o].data) {
            snprintf(buf, sizeof buf, "%dx%dx%d\n", out[o].width, out[o].height, out[o].channels);
            fnv_str(&f, buf);
            for (int y = 0; y < out[o].height; y++)
                fnv_add(&f, (char *)out[o].data + (size_t)y * out[o].pitch,
                        (size_t)out[o].width * (size_t)out[o].channels);
        } else if (pf_pipeline_table(p, o, &t) == PF_OK) {
            snprintf(buf, sizeof buf, "%dx%d\n", t.rows, t.cols);
            fnv_str(&f, buf);
            for (int i = 0; i < t.rows * t.cols; i++) {
                snprintf(buf, sizeof buf, "%.9g\n", t.data[i]);
                fnv_str(&f, buf);
            }
        }
        snprintf(sums[o], 32, "%016llx", (unsigned long long)f.h);
    }
    for (int i = 0; i < MAX_IO; i++) {
        pf_frame_free(&in[i]);
        pf_frame_free(&out[i]);
    }
    return rc == PF_OK ? n_out : -1;
}

/* ---- The file ------------------------------------------------------------------------ */

/* Reads CHECKSUMS; a missing file is empty when it is about to be written. */
static int read_lines(const char *file, int missing_ok)
{
    FILE *f = fopen(file, "r");
    if (!f && missing_ok)
        return 0;
    if (!f) {
        fprintf(stderr, "golden: cannot open %s\n", file);
        return -1;
    }
    char buf[2048];
    int lineno = 0;
    while (fgets(buf, sizeof buf, f)) {
        lineno++;
        if (buf[0] == '#' || buf[0] == '\n')
            continue;
        line *l = &lines[n_lines];
        if (n_lines == MAX_LINES ||
            sscanf(buf, "%255s %511s %127s %31s", l->pipeline, l->inputs, l->output, l->sum) != 4) {
            fprintf(stderr, "%s:%d: expected <pipeline> <inputs> <output> <checksum>\n", file,
                    lineno);
            fclose(f);
            return -1;
        }
        n_lines++;
    }
    fclose(f);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The pipeline files of pipelines/, sorted; the JSON Schema there is not one. */
static int list_pipelines(char **names, int max)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/pipelines", PF_SOURCE_DIR);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d)) && n < max;) {
        size_t len = strlen(de->d_name);
        if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0 &&
            strcmp(de->d_name, "schema.json") != 0)
            names[n++] = strdup(de->d_name);
    }
    if (d)
        closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    return n;
}

static const char header[] =
    "# tests/golden/checksums.txt: golden checksums of the example pipelines (see golden.c).\n"
    "# <pipeline> <inputs (samples/images/, comma-separated)> <output> <FNV-1a 64 checksum>\n"
    "# After an intended change of output: build/bin/golden --update (and review the diff)\n";

static int update(pf_engine *e, const char *file)
{
    char *pipes[128];
    int n = list_pipelines(pipes, 128), bad = 0;
    FILE *f = fopen(file, "w");
    if (!f) {
        fprintf(stderr, "golden: cannot write %s\n", file);
        return 1;
    }
    fputs(header, f);
    for (int i = 0; i < n; i++) {
        const char *inputs = NULL;
        for (int k = 0; k < n_lines && !inputs; k++)
            if (strcmp(lines[k].pipeline, pipes[i]) == 0)
                inputs = lines[k].inputs;
        char guess[64];
        if (!inputs) {
            pf_pipeline *p = NULL;
            char path[4096];
            snprintf(path, sizeof path, "%s/pipelines/%s", PF_SOURCE_DIR, pipes[i]);
            int two =
                pf_pipeline_load_file(e, path, &p) == PF_OK && pf_pipeline_input_count(p) == 2;
            pf_pipeline_destroy(p);
            snprintf(guess, sizeof guess, "%s", two ? "astronaut.png,camera.png" : "astronaut.png");
            inputs = guess;
        }
        char sums[MAX_IO][32];
        const char *names[MAX_IO];
        pf_pipeline *p = NULL;
        int n_out = run_pipeline(e, pipes[i], inputs, sums, names, &p);
        if (n_out < 0)
            bad = 1;
        for (int o = 0; o < n_out; o++)
            fprintf(f, "%s %s %s %s\n", pipes[i], inputs, names[o], sums[o]);
        pf_pipeline_destroy(p);
        free(pipes[i]);
    }
    if (fclose(f) != 0)
        bad = 1;
    printf("golden: wrote %s\n", file);
    return bad;
}

static void verify(pf_engine *e)
{
    char *pipes[128];
    int n = list_pipelines(pipes, 128);
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int k = 0; k < n_lines; k++)
            found |= strcmp(lines[k].pipeline, pipes[i]) == 0;
        CHECKF(found, "pipelines/%s has no checksum line: run golden --update", pipes[i]);
        free(pipes[i]);
    }
    for (int k = 0; k < n_lines; k++) {
        char sums[MAX_IO][32];
        const char *names[MAX_IO];
        pf_pipeline *p = NULL;
        int n_out = run_pipeline(e, lines[k].pipeline, lines[k].inputs, sums, names, &p);
        CHECKF(n_out >= 0, "%s on %s did not run", lines[k].pipeline, lines[k].inputs);
        int o = 0;
        while (o < n_out && strcmp(names[o], lines[k].output) != 0)
            o++;
        CHECKF(n_out < 0 || o < n_out, "%s has no output '%s'", lines[k].pipeline, lines[k].output);
        if (n_out >= 0 && o < n_out) {
            int same = strcmp(sums[o], lines[k].sum) == 0;
            CHECKF(same, "%s %s %s: checksum %s, expected %s; new line:\n%s %s %s %s",
                   lines[k].pipeline, lines[k].inputs, lines[k].output, sums[o], lines[k].sum,
                   lines[k].pipeline, lines[k].inputs, lines[k].output, sums[o]);
            if (same)
                printf("ok   %s %s %s\n", lines[k].pipeline, lines[k].inputs, lines[k].output);
        }
        pf_pipeline_destroy(p);
    }
}

int main(int argc, char **argv)
{
    int upd = argc > 1 && strcmp(argv[1], "--update") == 0;
    const char *file = argc > 1 + upd ? argv[1 + upd] : GOLDEN_FILE;
    if (argc > 2 + upd || (argc > 1 + upd && argv[1 + upd][0] == '-')) {
        fprintf(stderr, "usage: golden [--update] [CHECKSUMS]\n");
        return 2;
    }
    if (read_lines(file, upd) != 0)
        return 1;
    pf_engine *e = pf_test_engine();
    int rc = 0;
    if (upd)
        rc = update(e, file);
    else
        verify(e);
    pf_engine_destroy(e);
    return upd ? rc : pf_test_done("golden");
}
