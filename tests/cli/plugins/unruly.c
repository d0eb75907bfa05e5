/* tests/cli/plugins/unruly.c: a test-only plugin whose stage breaks the rules of the
 * process it runs in, for the fault tests of `pipefuse run` (batch_test.sh, section
 * unruly). unruly_copy copies its input, except on an input `width` pixels wide (0: every
 * input), where it first does what `mode` says:
 *   1 overflows its stack (SIGSEGV on a thread's guard page)
 *   2 calls _exit(0): the worker vanishes with status 0
 *   3 raise(SIGKILL): no handler can run
 *   4 writes 64 kB of garbage, no newline, to stdout
 *   5 writes 1 MB of lines to stderr
 *   6 allocates 64 MB blocks until malloc fails, then returns an error
 *   7 closes descriptors 0, 1 and 2
 *   8 closes every descriptor from 3 to 4095 (the daemon's idiom)
 *   9 forks a child that sleeps 600 s holding every inherited descriptor (its pid appended
 *     to the file $UNRULY_PIDS names, where set)
 *  10 forks a child that calls exit(0) (atexit handlers run in the child)
 *  11 changes the working directory to /
 *  12 alarm(1) (SIGALRM's default action ends the process)
 *  13 signal(SIGCHLD, SIG_IGN), setenv, system("true")
 *  14 forks a child that crashes (SIGSEGV), then copies
 *  15 starts a thread of its own that crashes (SIGSEGV), and waits for it
 * Modes 9, 10 and 14 copy correctly in the parent: their file is no fault. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipefuse/plugin.h"

/* In a forked child of a threaded process: its pid as a line appended to $UNRULY_PIDS,
   with no stdio or allocation (another thread may have held their locks at the fork). */
static void pid_file(void)
{
    const char *path = getenv("UNRULY_PIDS");
    if (!path)
        return;
    char line[24];
    int n = sizeof line;
    line[--n] = '\n';
    for (long v = (long)getpid(); v > 0 && n > 0; v /= 10)
        line[--n] = (char)('0' + v % 10);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        if (write(fd, line + n, sizeof line - (size_t)n) < 0)
            n = 0;
        close(fd);
    }
}

typedef struct unruly_params {
    int mode;
    int width;
} unruly_params;

static const pf_param_desc unruly_table[] = {
    PF_INT_PARAM(unruly_params, mode, 0, 0, 15, "0 copy; 1..15 misbehave (see unruly.c)"),
    PF_INT_PARAM(unruly_params, width, 0, 0, 1 << 20, "misbehave on inputs this wide (0: all)")};

static int same_shape(const void *params, const pf_shape *in, pf_shape *out, char *err, size_t n)
{
    (void)params, (void)err, (void)n;
    *out = *in;
    return 0;
}

static volatile int sink;

/* Endless on purpose: the stack overflows. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Winfinite-recursion"
__attribute__((noinline)) static int recurse(int depth)
{
    volatile char pad[4096];
    pad[0] = (char)depth;
    pad[4095] = (char)depth;
    return recurse(depth + 1) + pad[0] + pad[4095];
}
#pragma GCC diagnostic pop

static volatile int zero;

static void *crash_thread(void *arg)
{
    (void)arg;
    *(volatile int *)(uintptr_t)zero = 1;
    return NULL;
}

static int misbehave(const pf_stage_args *a, int mode)
{
    switch (mode) {
    case 1:
        sink = recurse(0);
        break;
    case 2:
        _exit(0);
    case 3:
        raise(SIGKILL);
        break;
    case 4: {
        static char junk[65536];
        memset(junk, 0x89, sizeof junk); /* PNG's first byte, to confuse a reader */
        fwrite(junk, 1, sizeof junk, stdout);
        fflush(stdout);
        break;
    }
    case 5:
        for (int k = 0; k < 16384; k++)
            fprintf(stderr, "unruly_copy: line %d of a stage that talks too much.........\n", k);
        break;
    case 6: {
        void **blocks = NULL;
        size_t n = 0;
        for (;;) {
            void **nb = realloc(blocks, sizeof *nb * (n + 1));
            if (!nb)
                break;
            blocks = nb;
            void *p = malloc((size_t)64 << 20);
            if (!p)
                break;
            memset(p, 1, (size_t)64 << 20);
            blocks[n++] = p;
        }
        for (size_t k = 0; k < n; k++)
            free(blocks[k]);
        free(blocks);
        snprintf(a->err, a->err_size, "out of memory after %zu blocks of 64 MB", n);
        return 1;
    }
    case 7:
        close(0), close(1), close(2);
        break;
    case 8:
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
        break;
    case 9:
        if (fork() == 0) {
            pid_file();
            sleep(600);
            _exit(0);
        }
        break;
    case 10:
        if (fork() == 0)
            exit(0);
        break;
    case 11:
        if (chdir("/") != 0)
            return 1;
        break;
    case 12:
        alarm(1);
        break;
    case 13:
        signal(SIGCHLD, SIG_IGN);
        setenv("UNRULY", "1", 1);
        if (system("true") < 0)
            sink = 1;
        break;
    case 14:
        if (fork() == 0) {
            *(volatile int *)(uintptr_t)zero = 1;
            _exit(0);
        }
        break;
    case 15: {
        pthread_t t;
        if (pthread_create(&t, NULL, crash_thread, NULL) == 0)
            pthread_join(t, NULL);
        break;
    }
    }
    return 0;
}

static int unruly_cpu(const pf_stage_args *a)
{
    const unruly_params *p = a->params;
    if ((p->width == 0 || p->width == a->in[0].width) && a->region.y0 == 0 && p->mode &&
        misbehave(a, p->mode) != 0)
        return 1;
    for (int y = a->region.y0; y < a->region.y1; y++)
        memcpy(pf_image_row(&a->out, y), pf_image_row(&a->in[0], y),
               sizeof(pf_float4) * (size_t)a->out.width);
    return 0;
}

static const pf_stage_desc unruly_desc = {.size = PF_STAGE_DESC_SIZE,
                                          .name = "unruly_copy",
                                          .doc = "a copy that breaks its process's rules",
                                          .kind = PF_STAGE_RESAMPLE,
                                          .n_inputs = 1,
                                          .params_size = sizeof(unruly_params),
                                          PF_PARAMS(unruly_table),
                                          .cost = 1,
                                          .shape = same_shape,
                                          .run_cpu = unruly_cpu};

static const pf_stage_desc *const stages[] = {&unruly_desc};
PF_DEFINE_PLUGIN("unruly", "1.0", "a stage that closes, forks, exits and floods", stages)
