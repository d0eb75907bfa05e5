/* tests/api/test_api_frames.c: host frames as applications hand them over, and the
 * calls around a frame loop, against what pipefuse.h promises:
 * - a host output that is its input (in place, in the same or another format) or
 *   overlaps it gives the bytes of a run into separate buffers, for every kind of
 *   stage (a flip wrote rows over rows it had yet to read: a wrong frame, no error);
 * - two image outputs sharing memory are refused, naming both; two side by side in one
 *   canvas (each row in the gaps of the other's pitch) share none and run;
 * - a frame that is not one is refused with the field at fault named, a pitch whose
 *   rows run past the end of the address space included (it crashed);
 * - n_out < 0 is refused; a refused submit is not counted in pf_stats.frames;
 * - the getters (output_info, unit, stats, print) say why they fail, with the status
 *   of a bad argument, and a failed frame leaves the last completed frame's table;
 * - pf_frame_alloc_host of an impossible size is PF_TOO_LARGE, saying so.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define EXPECT PF_EXPECT_STATUS_MSG /* testutil.h */

static const char *one_stage(const char *op, const char *params)
{
    static char json[1024];
    snprintf(json, sizeof json,
             "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": [{\"id\": \"s\", \"op\": "
             "\"%s\", \"params\": %s}], \"outputs\": {\"out\": \"s\"}}",
             op, params);
    return json;
}

/* Runs p on in (u8 RGBA, w x h) into separate memory and into memory shared with the
   input (out_sample: the output's format, at byte offset off from the input's start),
   and compares the outputs byte for byte. */
static void in_place(pf_pipeline *p, const char *what, int w, int h, pf_sample out_sample,
                     size_t off)
{
    pf_rng r;
    pf_rng_seed(&r, 7);
    size_t in_pitch = (size_t)w * 4, out_pitch = pf_frame_pixel_bytes(out_sample, 4) * (size_t)w;
    size_t in_bytes = in_pitch * (size_t)h, out_bytes = out_pitch * (size_t)h;
    size_t shared_bytes = off + (out_bytes > in_bytes ? out_bytes : in_bytes);
    unsigned char *src = malloc(in_bytes), *sep_in = malloc(in_bytes), *sep_out = malloc(out_bytes);
    float *shared_f = malloc(shared_bytes + 16); /* aligned for f32 */
    unsigned char *shared = (unsigned char *)shared_f;
    CHECK(src && sep_in && sep_out && shared);
    if (!src || !sep_in || !sep_out || !shared)
        exit(1);
    for (size_t i = 0; i < in_bytes; i++)
        src[i] = (unsigned char)pf_rng_u32(&r);
    memcpy(sep_in, src, in_bytes);
    memcpy(shared, src, in_bytes);
    pf_frame in = {sep_in, w, h, in_pitch, PF_U8, 4};
    pf_frame out = {sep_out, w, h, out_pitch, out_sample, 4};
    CHECKF(pf_pipeline_run(p, &in, 1, &out, 1) == PF_OK, "%s: %s", what, pf_pipeline_errmsg(p));
    pf_frame in2 = {shared, w, h, in_pitch, PF_U8, 4};
    pf_frame out2 = {shared + off, w, h, out_pitch, out_sample, 4};
    CHECKF(pf_pipeline_run(p, &in2, 1, &out2, 1) == PF_OK, "%s: %s", what, pf_pipeline_errmsg(p));
    size_t differ = 0;
    for (size_t i = 0; i < out_bytes; i++)
        differ += sep_out[i] != shared[off + i];
    CHECKF(differ == 0, "%s (output %s at +%zu): %zu of %zu bytes differ from separate buffers",
           what, out_sample == PF_U8 ? "u8" : "f32", off, differ, out_bytes);
    free(src);
    free(sep_in);
    free(sep_out);
    free(shared_f);
}

static void test_in_place(pf_engine *e)
{
    static const char *const ops[][2] = {
        {"flip", "{}"},         {"flip", "{\"axis\": \"both\"}"},
        {"invert", "{}"},       {"gaussian", "{\"sigma\": 2}"},
        {"median3", "{}"},      {"brightness", "{\"amount\": 0.2}"},
        {"saturation", "{}"},   {"pad", "{}"},
        {"crop", "{\"x\": 0}"},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        pf_pipeline *p = pf_test_load_string(e, one_stage(ops[k][0], ops[k][1]), ops[k][0], "cpu");
        in_place(p, ops[k][0], 37, 29, PF_U8, 0);
        in_place(p, ops[k][0], 37, 29, PF_U8, 4 * 37 * 3 + 8); /* three rows and 2 pixels on */
        in_place(p, ops[k][0], 37, 29, PF_F32, 0);             /* a wider format over it */
        pf_pipeline_destroy(p);
    }
}

static const char two_outputs[] =
    "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": ["
    "{\"id\": \"a\", \"op\": \"invert\", \"inputs\": [\"in\"]},"
    "{\"id\": \"b\", \"op\": \"flip\", \"inputs\": [\"in\"]},"
    "{\"id\": \"st\", \"op\": \"stats\", \"inputs\": [\"a\"]}],"
    "\"outputs\": {\"first\": \"a\", \"second\": \"b\", \"st\": \"st\"}}";

static void test_frames(pf_engine *e)
{
    pf_pipeline *p = pf_test_load_string(e, two_outputs, "frames", "cpu");
    enum { W = 16, H = 8 };
    static unsigned char in_buf[W * H * 4], a_buf[W * H * 4], b_buf[W * H * 4];
    pf_frame in = {in_buf, W, H, W * 4, PF_U8, 4};
    pf_frame outs[2] = {{a_buf, W, H, W * 4, PF_U8, 4}, {b_buf, W, H, W * 4, PF_U8, 4}};
    CHECK(pf_pipeline_run(p, &in, 1, outs, 2) == PF_OK);

    /* two outputs in one buffer, or overlapping by a row */
    pf_frame same[2] = {outs[0], outs[0]};
    EXPECT(p, pf_pipeline_run(p, &in, 1, same, 2), PF_INVALID_ARGUMENT, "'first'", "'second'",
           "overlap");
    static unsigned char big[(H + 1) * W * 4];
    pf_frame shifted[2] = {{big, W, H, W * 4, PF_U8, 4}, {big + W * 4, W, H, W * 4, PF_U8, 4}};
    EXPECT(p, pf_pipeline_run(p, &in, 1, shifted, 2), PF_INVALID_ARGUMENT, "overlap");
    /* two outputs side by side in one canvas (rows of one in the gaps of the other's
       pitch) share no byte: they run, as into separate buffers (they were refused); a
       pixel further left, they share one */
    static unsigned char canvas[H * 2 * W * 4];
    pf_frame side[2] = {{canvas, W, H, 2 * W * 4, PF_U8, 4},
                        {canvas + W * 4, W, H, 2 * W * 4, PF_U8, 4}};
    memset(canvas, 0, sizeof canvas);
    CHECKF(pf_pipeline_run(p, &in, 1, side, 2) == PF_OK, "%s", pf_pipeline_errmsg(p));
    for (int y = 0; y < H; y++)
        CHECKF(memcmp(canvas + y * 2 * W * 4, a_buf + y * W * 4, W * 4) == 0 &&
                   memcmp(canvas + y * 2 * W * 4 + W * 4, b_buf + y * W * 4, W * 4) == 0,
               "side by side, row %d", y);
    side[1].data = canvas + W * 4 - 4;
    EXPECT(p, pf_pipeline_run(p, &in, 1, side, 2), PF_INVALID_ARGUMENT, "overlap");
    /* both outputs over the input: each overlaps it (fine), but they overlap each other */
    pf_frame over_in[2] = {{in_buf, W, H, W * 4, PF_U8, 4}, {in_buf, W, H, W * 4, PF_U8, 4}};
    EXPECT(p, pf_pipeline_run(p, &in, 1, over_in, 2), PF_INVALID_ARGUMENT, "overlap");
    /* one output in place, the other apart: the same bytes as with separate buffers */
    memset(in_buf, 0x5a, sizeof in_buf);
    for (size_t i = 0; i < sizeof in_buf; i += 7)
        in_buf[i] = (unsigned char)i;
    static unsigned char keep[W * H * 4], ref_a[W * H * 4], ref_b[W * H * 4];
    memcpy(keep, in_buf, sizeof keep);
    CHECK(pf_pipeline_run(p, &in, 1, outs, 2) == PF_OK);
    memcpy(ref_a, a_buf, sizeof ref_a);
    memcpy(ref_b, b_buf, sizeof ref_b);
    pf_frame mixed[2] = {{b_buf, W, H, W * 4, PF_U8, 4}, {in_buf, W, H, W * 4, PF_U8, 4}};
    CHECK(pf_pipeline_run(p, &in, 1, mixed, 2) == PF_OK);
    CHECK(memcmp(b_buf, ref_a, sizeof ref_a) == 0 && memcmp(in_buf, ref_b, sizeof ref_b) == 0);
    memcpy(in_buf, keep, sizeof keep);

    /* frames that are not frames: each names the field */
    pf_frame bad = in;
    bad.data = NULL;
    EXPECT(p, pf_pipeline_run(p, &bad, 1, outs, 2), PF_INVALID_ARGUMENT, "input 'in'", "NULL");
    bad = in;
    bad.channels = 5;
    EXPECT(p, pf_pipeline_run(p, &bad, 1, outs, 2), PF_INVALID_ARGUMENT, "channels is 5");
    bad = in;
    bad.sample = (pf_sample)7;
    EXPECT(p, pf_pipeline_run(p, &bad, 1, outs, 2), PF_INVALID_ARGUMENT, "sample is 7");
    bad = in;
    bad.height = 0;
    EXPECT(p, pf_pipeline_run(p, &bad, 1, outs, 2), PF_INVALID_ARGUMENT, "16x0");
    bad = outs[1];
    bad.pitch = 10;
    pf_frame with_bad[2] = {outs[0], bad};
    EXPECT(p, pf_pipeline_run(p, &in, 1, with_bad, 2), PF_INVALID_ARGUMENT, "output 'second'",
           "pitch 10");
    bad = in;
    bad.pitch = SIZE_MAX / 2; /* rows past the end of the address space: no crash */
    EXPECT(p, pf_pipeline_run(p, &bad, 1, outs, 2), PF_INVALID_ARGUMENT, "address space");
    bad = in;
    bad.sample = PF_U16;
    bad.data = in_buf + 1;
    bad.pitch = W * 8;
    bad.height = H / 2;
    EXPECT(p, pf_pipeline_run(p, &bad, 1, outs, 2), PF_INVALID_ARGUMENT, "sample size");
    EXPECT(p, pf_pipeline_run(p, &in, 1, outs, -1), PF_INVALID_ARGUMENT, "n_out is -1");

    /* a refused frame is no frame; a good one after it runs */
    pf_stats s0 = {.size = sizeof s0}, s1 = {.size = sizeof s1};
    CHECK(pf_pipeline_stats(p, &s0) == PF_OK);
    int ticket = 0;
    CHECK(pf_pipeline_submit(p, &bad, 1, outs, 2, &ticket) == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_submit(p, &in, 1, same, 2, &ticket) == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_stats(p, &s1) == PF_OK);
    CHECKF(s1.frames == s0.frames, "refused submits counted: %llu -> %llu", s0.frames, s1.frames);
    CHECK(pf_pipeline_submit(p, &in, 1, outs, 2, &ticket) == PF_OK);
    CHECK(pf_pipeline_wait(p, ticket) == PF_OK);
    CHECK(pf_pipeline_stats(p, &s1) == PF_OK && s1.frames == s0.frames + 1);
    /* device frames on the CPU backend: refused for that, before anything else */
    EXPECT(p, pf_pipeline_submit_device(p, &in, 1, over_in, 2, NULL, &ticket), PF_UNSUPPORTED,
           "CUDA backend");
    pf_pipeline_destroy(p);
}

static void test_getters(pf_engine *e)
{
    pf_pipeline *p = pf_test_load_string(e, two_outputs, "getters", "cpu");
    pf_output_info oi;
    pf_unit_info ui;
    EXPECT(p, pf_pipeline_output_info(p, 3, &oi), PF_INVALID_ARGUMENT, "no output 3");
    EXPECT(p, pf_pipeline_output_info(p, 0, NULL), PF_INVALID_ARGUMENT, "NULL pf_output_info");
    EXPECT(p, pf_pipeline_unit(p, 0, &ui), PF_INVALID_ARGUMENT, "not planned");
    EXPECT(p, pf_pipeline_print_plan(p, stdout), PF_NOT_PLANNED, "not planned");
    pf_shape s = {16, 8};
    CHECK(pf_pipeline_plan(p, &s, 1) == PF_OK);
    EXPECT(p, pf_pipeline_unit(p, 99, &ui), PF_INVALID_ARGUMENT, "no launch unit 99");
    EXPECT(p, pf_pipeline_unit(p, 0, NULL), PF_INVALID_ARGUMENT, "NULL pf_unit_info");
    pf_stats st;
    memset(&st, 0, sizeof st);
    EXPECT(p, pf_pipeline_stats(p, &st), PF_INVALID_ARGUMENT, "pf_stats.size is 0");
    EXPECT(p, pf_pipeline_stats(p, NULL), PF_INVALID_ARGUMENT, "NULL pf_stats");
    EXPECT(p, pf_pipeline_print_plan(p, NULL), PF_INVALID_ARGUMENT, "NULL FILE");
    EXPECT(p, pf_pipeline_print_dot(p, NULL), PF_INVALID_ARGUMENT, "NULL FILE");
    CHECK(pf_pipeline_print_dot(NULL, stdout) == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_build_kernels(NULL, 0, NULL, NULL) == PF_INVALID_ARGUMENT);
    CHECK(pf_pipeline_stats(NULL, &st) == PF_INVALID_ARGUMENT);

    /* a frame that fails loses the plan, but not the last completed frame's table */
    pf_pipeline_destroy(p);
    p = pf_test_load_string(e,
                            "{\"pipefuse\": 1, \"inputs\": [\"in\"], \"stages\": ["
                            "{\"id\": \"c\", \"op\": \"crop\", \"params\": {\"width\": 8, "
                            "\"height\": 4}},"
                            "{\"id\": \"st\", \"op\": \"stats\", \"inputs\": [\"c\"]}],"
                            "\"outputs\": {\"st\": \"st\"}}",
                            "crop", "cpu");
    static unsigned char buf[16 * 8 * 4];
    pf_frame in = {buf, 16, 8, 64, PF_U8, 4};
    pf_table t;
    CHECK(pf_pipeline_run(p, &in, 1, NULL, 0) == PF_OK);
    CHECK(pf_pipeline_table(p, 0, &t) == PF_OK && t.rows > 0);
    const double *last = t.data;
    CHECK(pf_pipeline_set_param(p, "c.x", "100") == PF_OK);
    EXPECT(p, pf_pipeline_run(p, &in, 1, NULL, 0), PF_SHAPE, "outside");
    CHECK(pf_pipeline_table(p, 0, &t) == PF_OK && t.rows > 0 && t.data == last);
    CHECK(pf_pipeline_set_param(p, "c.x", "0") == PF_OK); /* usable again after the error */
    CHECK(pf_pipeline_run(p, &in, 1, NULL, 0) == PF_OK);
    CHECK(pf_pipeline_table(p, 0, &t) == PF_OK && t.rows > 0);
    pf_pipeline_destroy(p);

    /* host frames of an impossible size */
    pf_frame f;
    CHECK(pf_frame_alloc_host(e, 1 << 30, 1 << 30, PF_U8, 4, &f) == PF_TOO_LARGE && !f.data);
    CHECKF(strstr(pf_engine_errmsg(e), "too large"), "\"%s\"", pf_engine_errmsg(e));
    CHECK(pf_frame_alloc_host(e, 4, 4, PF_U8, 9, &f) == PF_INVALID_ARGUMENT);
    CHECKF(strstr(pf_engine_errmsg(e), "channels"), "\"%s\"", pf_engine_errmsg(e));
}

int main(void)
{
    pf_engine *e = pf_test_engine();
    test_in_place(e);
    test_frames(e);
    test_getters(e);
    pf_engine_destroy(e);
    return pf_test_done("test_api_frames");
}
