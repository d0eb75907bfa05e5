/* cli/check_report.c: `pipefuse plugin check`, the report and its guards: one counted line
   per check (ok, FAIL with its fix, skip, warn), what is being done when the plugin
   crashes or calls exit(), and the handlers that say so. */
#include "plugin_check.h"

const char *const pc_kind_names[] = {"point", "stencil", "resample", "reduce"};

/* ---- The report ----------------------------------------------------------------------------- */

void pc_note(pc *c, int kind, const char *fix, const char *fmt, ...)
{
    static const char *const tags[] = {"ok", "FAIL", "skip", "warn"};
    int *counts[] = {&c->passed, &c->failed, &c->skipped, &c->warned};
    char msg[8192], shown[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The engine names the plugin by the path it loaded it from, the private link:
       every line names the file the author passed instead. */
    pc_unlinked_message(c, msg, shown, sizeof shown);
    printf("  %-5s %s\n", tags[kind], shown);
    if (fix)
        printf("        fix: %s\n", fix);
    (*counts[kind])++;
}

/* strncpy that always terminates, for messages cut to their buffer. */
void pc_copy_text(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* ---- The guards ------------------------------------------------------------------------------ */

/* What the crash and exit() guards report. Written only by the main thread; read by a
   signal handler, hence a plain static buffer. */
static char g_doing[512];
static volatile sig_atomic_t g_guard;
static const int g_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static struct sigaction g_saved[sizeof g_sigs / sizeof g_sigs[0]];

void pc_doing(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_doing, sizeof g_doing, fmt, ap);
    va_end(ap);
}

static void say(const char *s)
{
    ssize_t r = write(STDOUT_FILENO, s, strlen(s));
    (void)r;
}

static void on_crash(int sig)
{
    const char *name = sig == SIGSEGV  ? "SIGSEGV"
                       : sig == SIGBUS ? "SIGBUS"
                       : sig == SIGFPE ? "SIGFPE"
                       : sig == SIGILL ? "SIGILL"
                                       : "SIGABRT";
    say("  FAIL  the plugin crashed (");
    say(name);
    say(") during: ");
    say(g_doing);
    say("\n        fix: run the same pipeline under a debugger or AddressSanitizer; "
        "out-of-bounds reads and writes are the usual cause\nresult: FAIL\n");
    pc_cleanup_tmp();
    _exit(PF_EXIT_FAILED);
}

static void on_exit_call(void)
{
    if (!g_guard)
        return;
    say("  FAIL  the plugin called exit() during: ");
    say(g_doing);
    say("\n        fix: never exit from a plugin; return non-zero with a message in "
        "a->err instead\nresult: FAIL\n");
    pc_cleanup_tmp();
    _exit(PF_EXIT_FAILED);
}

void pc_guards_on(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    memset(g_saved, 0, sizeof g_saved);
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof g_sigs / sizeof g_sigs[0]; i++)
        if (sigaction(g_sigs[i], &sa, &g_saved[i]) != 0)
            fprintf(stderr, "pipefuse plugin check: cannot guard signal %d: %s\n", g_sigs[i],
                    strerror(errno));
    if (atexit(on_exit_call) != 0)
        fprintf(stderr, "pipefuse plugin check: cannot guard exit()\n");
    g_guard = 1;
}

/* The handlers there were before (a sanitizer's, say) see the rest of the process. */
void pc_guards_off(void)
{
    g_guard = 0;
    for (size_t i = 0; i < sizeof g_sigs / sizeof g_sigs[0]; i++)
        sigaction(g_sigs[i], &g_saved[i], NULL);
}
