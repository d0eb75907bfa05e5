/* tests/cli/plugins/faulty.c: a test-only plugin whose stage misbehaves on purpose, for
 * the fault isolation tests of `pipefuse run`. faulty_copy copies its input, except on
 * an input `width` pixels wide (0: every input), where it does what `mode` says:
 * 1 dereferences NULL (SIGSEGV), 2 divides by zero (SIGFPE), 3 calls abort(), 4 calls
 * exit(0), 5 never returns, 6 returns an error, 7 calls _exit(1) (no handler runs, so
 * nothing names the file), 8 writes a line to stdout and copies (a chatty plugin, which
 * must not reach `run -o -`'s image). faulty_slow copies after sleeping
 * `ms` milliseconds, so a batch can be interrupted while files are in flight. With
 * PF_TEST_GATE=FILE in the environment, a faulty_slow frame first waits while FILE
 * exists: a test closes the gate once the batch has got as far as it needs, so the
 * frames in flight when it signals or kills the run do not depend on the machine's speed
 * or load. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipefuse/plugin.h"

typedef struct faulty_params {
    int mode;
    int width;
} faulty_params;

typedef struct slow_params {
    int ms;
} slow_params;

static const pf_param_desc faulty_table[] = {
    PF_INT_PARAM(faulty_params, mode, 0, 0, 8,
                 "0 copy, 1 SIGSEGV, 2 SIGFPE, 3 abort, 4 exit(0), 5 hang, 6 error, 7 _exit(1), "
                 "8 print to stdout"),
    PF_INT_PARAM(faulty_params, width, 0, 0, 1 << 20, "misbehave on inputs this wide (0: all)")};

static const pf_param_desc slow_table[] = {
    PF_INT_PARAM(slow_params, ms, 100, 0, 100000, "milliseconds to sleep per frame")};

static int same_shape(const void *params, const pf_shape *in, pf_shape *out, char *err, size_t n)
{
    (void)params, (void)err, (void)n;
    *out = *in;
    return 0;
}

static void copy_rows(const pf_stage_args *a)
{
    for (int y = a->region.y0; y < a->region.y1; y++)
        memcpy(pf_image_row(&a->out, y), pf_image_row(&a->in[0], y),
               sizeof(pf_float4) * (size_t)a->out.width);
}

static volatile int zero;

static int faulty_cpu(const pf_stage_args *a)
{
    const faulty_params *p = a->params;
    if (p->width == 0 || p->width == a->in[0].width) {
        switch (p->mode) {
        case 1:
            *(volatile int *)(uintptr_t)zero = 1;
            break;
        case 2:
            return 100 / zero;
        case 3:
            abort();
        case 4:
            exit(0);
        case 5:
            for (;;)
                sleep(1);
        case 6:
            snprintf(a->err, a->err_size, "asked to fail");
            return 1;
        case 7:
            _exit(1);
        case 8:
            if (a->region.y0 == 0) {
                printf("faulty_copy: hello from the stage\n");
                fflush(stdout);
            }
            break;
        }
    }
    copy_rows(a);
    return 0;
}

/* Waits while the file PF_TEST_GATE names exists (no variable: at once). */
static void wait_gate(void)
{
    const char *gate = getenv("PF_TEST_GATE");
    struct timespec t = {0, 2000000};
    while (gate && *gate && access(gate, F_OK) == 0)
        nanosleep(&t, NULL);
}

static int slow_cpu(const pf_stage_args *a)
{
    const slow_params *p = a->params;
    if (a->region.y0 == 0) {
        wait_gate();
        struct timespec t = {p->ms / 1000, (long)(p->ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
    copy_rows(a);
    return 0;
}

static const pf_stage_desc faulty_desc = {.size = PF_STAGE_DESC_SIZE,
                                          .name = "faulty_copy",
                                          .doc = "a copy that misbehaves when asked",
                                          .kind = PF_STAGE_RESAMPLE,
                                          .n_inputs = 1,
                                          .params_size = sizeof(faulty_params),
                                          PF_PARAMS(faulty_table),
                                          .cost = 1,
                                          .shape = same_shape,
                                          .run_cpu = faulty_cpu};

static const pf_stage_desc slow_desc = {.size = PF_STAGE_DESC_SIZE,
                                        .name = "faulty_slow",
                                        .doc = "a copy that sleeps first",
                                        .kind = PF_STAGE_RESAMPLE,
                                        .n_inputs = 1,
                                        .params_size = sizeof(slow_params),
                                        PF_PARAMS(slow_table),
                                        .cost = 1,
                                        .shape = same_shape,
                                        .run_cpu = slow_cpu};

static const pf_stage_desc *const stages[] = {&faulty_desc, &slow_desc};
PF_DEFINE_PLUGIN("faulty", "1.0", "stages that crash, exit, hang or sleep, for tests", stages)
