/* tests/fuzz/fuzz_pipeline.c: libFuzzer target for pipeline files.
 *
 * The input is a pipeline file's text. It is loaded and validated; a pipeline that loads
 * is planned for a small input size (chosen from the input's hash, as is the frame
 * format), its plan printed as text and as a Graphviz graph, and one frame run on the
 * CPU twice (see fz_run_frame). Checked: no memory error or undefined behaviour, a
 * message with every failure, and identical outputs from identical frames. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The plugins load before fuzzing starts, so libFuzzer counts their coverage. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_engine();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w")))
        abort();
    pf_engine *e = fz_engine();
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;

    pf_pipeline *p = (pf_pipeline *)1;
    int rc = pf_pipeline_load_string(e, text, "fuzz.json", &p);
    free(text);
    if (rc != PF_OK) {
        FZ_ASSERT(p == NULL, "a failed load (%s) handed back a pipeline", pf_status_name(rc));
        FZ_ASSERT(pf_engine_errmsg(e)[0] != 0, "load failed with %s and no message",
                  pf_status_name(rc));
        return 0;
    }
    FZ_ASSERT(p != NULL, "load succeeded without a pipeline");

    uint32_t h = fz_hash(data, size);
    int w = 1 + (int)(h % 9), ht = 1 + (int)(h / 9 % 9);
    pf_sample sample = (pf_sample)(h / 81 % 3);
    int channels = 1 + (int)(h / 243 % 4);
    if (fz_run_frame(p, w, ht, sample, channels, h) == PF_OK) {
        FZ_ASSERT(pf_pipeline_print_plan(p, null) == PF_OK, "print_plan: %s",
                  pf_pipeline_errmsg(p));
        FZ_ASSERT(pf_pipeline_print_dot(p, null) == PF_OK, "print_dot: %s", pf_pipeline_errmsg(p));
    }
    pf_pipeline_destroy(p);
    return 0;
}
