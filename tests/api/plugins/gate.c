/* tests/api/plugins/gate.c: a test-only plugin for test_cancel. Its stage gate_copy
 * copies its input; with hold set, the band that starts at row 0 first says so and then
 * waits until the test opens the gate, so that the test knows a frame is inside the
 * engine, and where, without timing anything. The gate is the test program's
 * pf_test_gate, found with dlsym (a plugin never links against its host); without it
 * the stage only copies. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "pipefuse/plugin.h"

typedef struct gate_params {
    int hold;
} gate_params;

static const pf_param_desc gate_table[] = {
    PF_INT_PARAM(gate_params, hold, 0, 0, 1, "1: the first band waits for the test's gate")};

/* As test_cancel.c defines it. */
struct pf_test_gate {
    atomic_int entered; /* bands that reached the gate */
    atomic_int open;    /* the test lets them through */
};

static int same_shape(const void *params, const pf_shape *in, pf_shape *out, char *err, size_t n)
{
    (void)params, (void)err, (void)n;
    *out = *in;
    return 0;
}

static int gate_cpu(const pf_stage_args *a)
{
    const gate_params *p = a->params;
    if (p->hold && a->region.y0 == 0) {
        struct pf_test_gate *g = dlsym(RTLD_DEFAULT, "pf_test_gate");
        if (g) {
            atomic_fetch_add(&g->entered, 1);
            while (!atomic_load(&g->open))
                sched_yield();
        }
    }
    for (int y = a->region.y0; y < a->region.y1; y++)
        memcpy(pf_image_row(&a->out, y), pf_image_row(&a->in[0], y),
               sizeof(pf_float4) * (size_t)a->out.width);
    return 0;
}

static const pf_stage_desc gate_desc = {.size = PF_STAGE_DESC_SIZE,
                                        .name = "gate_copy",
                                        .doc = "a copy whose first band can wait for the test",
                                        .kind = PF_STAGE_RESAMPLE,
                                        .n_inputs = 1,
                                        .params_size = sizeof(gate_params),
                                        PF_PARAMS(gate_table),
                                        .cost = 1,
                                        .shape = same_shape,
                                        .run_cpu = gate_cpu};

static const pf_stage_desc *const stages[] = {&gate_desc};
PF_DEFINE_PLUGIN("gate", "1.0", "a copy that waits for the test, for test_cancel", stages)
