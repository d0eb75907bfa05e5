/* cli/plugin_check.c: `pipefuse plugin check LIB.so`, the plugin author's checker.
 *
 * Loads a plugin as the engine would and puts each of its stages through the contract
 * of docs/plugins.md, printing one line per check (ok, FAIL with what to fix, skip,
 * warn) and a summary. Exit status: 0 when no check failed (skipped GPU checks do not
 * fail), 1 when one did, 2 for a bad command line or a missing file.
 *
 * How the file is loaded. First the engine's safety rule: a file, or a directory
 * holding it, that other users can write to is refused before any of its code runs.
 * Then the file is opened with dlopen and its descriptor read field by field, so that
 * a plugin the engine would refuse (another ABI, a default out of range) still gets a
 * report naming the field at fault. Then an engine is created with the built-in
 * plugins (fusion with them is checked, and so are clashing stage names) and the file
 * reached through a private directory (mkdtemp, mode 0700) holding only a symbolic link
 * to it: the engine loads directories, and this one holds nothing else. Neither
 * --plugin-path nor PIPEFUSE_PLUGIN_PATH is searched. The dynamic loader recognises the
 * file behind the link as the one already open, so one copy of the plugin, static state
 * included, serves both. A file that is itself a built-in plugin is checked in place.
 *
 * Checks per stage, on random float images of odd sizes (inputs in [0, 1), outputs
 * poisoned with a NaN bit pattern first), with the default params and one random set
 * within the declared ranges (--seed):
 *   - CPU runs through a pipeline (67x45, 5x3, 1x1);
 *   - determinism: two runs, a fresh pipeline and one thread give the same bits;
 *   - regions, calling the stage directly: point rows in pieces equal whole rows;
 *     stencil and resample bands write exactly their rows (not other rows, not the
 *     pitch padding, not past their scratch), every pixel of them, and assemble to the
 *     whole run bit for bit; a stencil reads no further than its declared radius; a
 *     reduce's banded partials combine to the whole run's table, and a partial reads
 *     only its band's rows; inputs are never written;
 *   - in a pipeline between built-in stages: fused and unfused CPU runs give the same
 *     bits, a point stage fuses with its neighbours, and NVRTC compiles the fused kernel
 *     (no GPU needed);
 *   - with a CUDA device: CPU against GPU (fused and unfused, within --tolerance), fused
 *     against unfused on the GPU, banded (a tiny launch budget) against whole, graph
 *     replay against eager launches, and run-to-run bits. Without one these are
 *     reported as skipped, never as passed.
 * A crash or an exit() inside the plugin is reported with the check that was running.
 *
 * The files, each of one job (plugin_check.h holds what they share): this one the
 * command, the report, the crash guards, the engine and the checks of one stage in
 * order; check_descriptors.c the file and its descriptor; check_point_source.c what a
 * point op may call; check_params.c the parameter table and the parameter sets;
 * check_images.c the test images and their comparisons; check_run.c runs through the
 * engine on the CPU; check_regions.c calls of a stage's CPU code on regions;
 * check_gpu.c the CUDA device checks.
 */
#include "plugin_check.h"

const char *const pc_kind_names[] = {"point", "stencil", "resample", "reduce"};

/* ---- State and the report --------------------------------------------------------------- */

/* What the crash and exit() guards report, and what they clean up. Written only by
   the main thread; read by a signal handler, hence plain static buffers. */
static char g_doing[512];
static volatile sig_atomic_t g_guard;
static char g_tmpdir[PATH_MAX], g_link[PATH_MAX];

void pc_doing(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_doing, sizeof g_doing, fmt, ap);
    va_end(ap);
}

static void cleanup_tmp(void)
{
    if (g_link[0])
        unlink(g_link);
    if (g_tmpdir[0])
        rmdir(g_tmpdir);
    g_link[0] = g_tmpdir[0] = 0;
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
    cleanup_tmp();
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
    cleanup_tmp();
    _exit(PF_EXIT_FAILED);
}

void pc_note(pc *c, int kind, const char *fix, const char *fmt, ...)
{
    static const char *const tags[] = {"ok", "FAIL", "skip", "warn"};
    int *counts[] = {&c->passed, &c->failed, &c->skipped, &c->warned};
    va_list ap;
    va_start(ap, fmt);
    printf("  %-5s ", tags[kind]);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (fix)
        printf("        fix: %s\n", fix);
    (*counts[kind])++;
}

/* Engine notices (the CPU fallback and such) are expected here: shown with -v only. */
static void engine_log(void *user, int level, const char *msg)
{
    pc *c = user;
    size_t n = strlen(msg), have = strlen(c->refused);
    if (level >= 1 && n > 9 && strcmp(msg + n - 9, "; skipped") == 0 &&
        have + n < sizeof c->refused)
        snprintf(c->refused + have, sizeof c->refused - have, "%.*s\n", (int)(n - 9), msg);
    if (c->o.verbose)
        printf("        (engine: %s)\n", msg);
}

/* ---- A stage ------------------------------------------------------------------------------------ */

static void check_stage(pc *c, const pf_stage_desc *d)
{
    static const char *const set_names[2] = {"default params", "random params"};
    pc_params sets[2];
    pc_img in[PF_MAX_INPUTS];
    pc_run cpu[2], chain;
    char why[512], chain_json[16384];
    int n_in = d->n_inputs, made = 0;
    memset(cpu, 0, sizeof cpu);
    memset(&chain, 0, sizeof chain);
    memset(sets, 0, sizeof sets);
    printf("\nstage %s (%s, %d input%s)\n", d->name, pc_kind_names[d->kind], n_in,
           n_in > 1 ? "s" : "");
    for (; made < n_in; made++) {
        if (pc_img_new(&in[made], PC_W, PC_H) != 0)
            break;
        pc_img_random(c, &in[made]);
    }
    if (made < n_in) {
        fail(c, NULL, "out of memory for the test images");
        goto out;
    }
    if (pc_make_params(c, d, 0, &sets[0], why, sizeof why) != 0) {
        fail(c, "the defaults must be valid params", "default params: %s", why);
        goto out;
    }
    if (pc_make_params(c, d, 1, &sets[1], why, sizeof why) != 0 && d->n_params > 0)
        skip(c, "random params: %s", why);
    if (d->n_params == 0)
        sets[1].ok = 0; /* nothing to vary */

    if (pc_check_cpu_runs(c, d, sets, 2, set_names, in, cpu) != 0)
        goto out;
    pc_check_determinism(c, d, &sets[0], in, &cpu[0]);
    for (int s = 0; s < 2; s++) {
        if (!sets[s].ok)
            continue;
        if (d->kind == PF_STAGE_POINT)
            pc_check_point_rows(c, d, &sets[s], set_names[s], in, n_in);
        else if (d->kind == PF_STAGE_REDUCE)
            pc_check_reduce(c, d, &sets[s], set_names[s], in, n_in);
        else
            pc_check_regions(c, d, &sets[s], set_names[s], in, n_in);
        if (d->kind == PF_STAGE_STENCIL)
            pc_check_radius(c, d, &sets[s], set_names[s], n_in);
    }
    int have_chain = pc_check_chain(c, d, &sets[0], in, chain_json, sizeof chain_json, &chain) == 0;
    pc_check_gpu(c, d, sets, 2, set_names, in, cpu, have_chain ? chain_json : NULL, &chain);
out:
    pc_run_free(&cpu[0]);
    pc_run_free(&cpu[1]);
    pc_run_free(&chain);
    pc_params_free(&sets[0]);
    pc_params_free(&sets[1]);
    for (int k = 0; k < made; k++)
        pc_img_free(&in[k]);
}

/* ---- The engine ---------------------------------------------------------------------------- */

static int same_file(const char *path, const struct stat *st)
{
    struct stat s2;
    return path && stat(path, &s2) == 0 && s2.st_dev == st->st_dev && s2.st_ino == st->st_ino;
}

/* msg with every occurrence of the private link's path replaced by the real file's. */
static void unlinked_message(const pc *c, const char *msg, char *out, size_t size)
{
    size_t o = 0, n = strlen(g_link);
    while (*msg && o + 1 < size) {
        if (n && strncmp(msg, g_link, n) == 0) {
            o += (size_t)snprintf(out + o, size - o, "%s", c->real);
            if (o >= size)
                o = size - 1;
            msg += n;
        } else {
            out[o++] = *msg++;
        }
    }
    out[o] = 0;
}

static int create_engine(pc *c, const char *path, pf_engine **out)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.use_env_path = 0;
    cfg.plugin_path = path;
    cfg.threads = c->common->threads;
    cfg.log = engine_log;
    cfg.log_user = c;
    return pf_engine_create(&cfg, out);
}

/* Creates c->eng: the built-in plugins and the file. 0 when it loaded. */
static int load_engine(pc *c, const pf_plugin_desc *pd)
{
    printf("\nengine\n");
    pf_engine *e = NULL;
    pc_doing("loading the built-in plugins");
    if (create_engine(c, NULL, &e) != PF_OK) {
        fail(c, "check the pipefuse installation (`pipefuse info`)",
             "the built-in plugins do not load: %s", pf_engine_errmsg(e));
        pf_engine_destroy(e);
        return -1;
    }
    for (int i = 0; i < pf_engine_stage_count(e); i++) {
        const char *file;
        pf_engine_stage(e, i, &file, NULL);
        if (same_file(file, &c->st)) {
            pass(c, "loads: it is one of the built-in plugins (%d stages in all)",
                 pf_engine_stage_count(e));
            c->eng = e;
            return 0;
        }
    }
    for (int i = 0; pd && i < pd->n_stages; i++) {
        const pf_stage_desc *s = pd->stages[i];
        if (!s || s->size < offsetof(pf_stage_desc, cost) || !s->name)
            continue;
        for (int k = 0; k < pf_engine_stage_count(e); k++) {
            const char *file, *plugin;
            const pf_stage_desc *b = pf_engine_stage(e, k, &file, &plugin);
            if (strcmp(b->name, s->name) == 0)
                fail(c, "rename the stage: stage names are shared by all loaded plugins",
                     "stage name '%s' is already taken by the built-in plugin %s (%s)", s->name,
                     plugin, file);
        }
    }
    pf_engine_destroy(e);
    e = NULL;

    /* The file alone in a private directory, named on the plugin path. */
    const char *tmp = getenv("TMPDIR");
    int n =
        snprintf(g_tmpdir, sizeof g_tmpdir, "%s/pipefuse-check-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof g_tmpdir || !mkdtemp(g_tmpdir)) {
        fail(c, "set TMPDIR to a directory you can write to",
             "cannot make a private directory "
             "(%s): %s",
             g_tmpdir, strerror(errno));
        g_tmpdir[0] = 0;
        return -1;
    }
    const char *base = strrchr(c->real, '/');
    base = base ? base + 1 : c->real;
    size_t bl = strlen(base);
    n = snprintf(g_link, sizeof g_link, "%s/%s%s%s", g_tmpdir, base[0] == '.' ? "p" : "", base,
                 bl > 3 && strcmp(base + bl - 3, ".so") == 0 ? "" : ".so");
    if (n < 0 || (size_t)n >= sizeof g_link || symlink(c->real, g_link) != 0) {
        fail(c, NULL, "cannot link the plugin into %s: %s", g_tmpdir, strerror(errno));
        g_link[0] = 0;
        return -1;
    }
    pc_doing("loading the plugin in the engine, next to the built-in plugins");
    c->refused[0] = 0;
    int loaded = 0;
    if (create_engine(c, g_tmpdir, &e) == PF_OK)
        for (int i = 0; i < pf_engine_stage_count(e); i++) {
            const char *file;
            pf_engine_stage(e, i, &file, NULL);
            loaded += same_file(file, &c->st);
        }
    if (!loaded) {
        /* The engine skips a plugin it refuses, with a warning that says why. */
        char msg[4096];
        size_t len = strlen(c->refused);
        if (len && c->refused[len - 1] == '\n')
            c->refused[len - 1] = 0;
        unlinked_message(c, c->refused[0] ? c->refused : pf_engine_errmsg(e), msg, sizeof msg);
        fail(c,
             "see the failures above; `pipefuse stages` skips such a plugin with this "
             "warning, and pipelines using its stages fail",
             "the engine refuses it: %s", msg);
        pf_engine_destroy(e);
        return -1;
    }
    pass(c, "loads next to the built-in plugins (%d stages in all)", pf_engine_stage_count(e));
    c->eng = e;
    return 0;
}

/* ---- The command ------------------------------------------------------------------------------ */

static const char plugin_usage[] =
    "usage: pipefuse plugin check LIB.so [--stage NAME] [--arch N] [--seed N]\n"
    "                             [--tolerance T] [--dump-kernels DIR] [-v]\n"
    "\n"
    "Loads a plugin as the engine would and checks it: the file's permissions, the ABI\n"
    "version and descriptors, the parameter tables (defaults within range, names unique,\n"
    "docs present), then every stage on random images: CPU runs, determinism, regions\n"
    "(bands against the whole image, writes outside the band), fusion with built-in point\n"
    "stages, the NVRTC compile of point ops (no GPU needed) and, with a CUDA device, CPU\n"
    "against GPU, fused against unfused and banded against whole on the GPU.\n"
    "\n"
    "  --stage NAME       check only this stage (descriptor checks cover all)\n"
    "  --arch N           NVRTC target, sm_N (default 90)\n"
    "  --seed N           random images and params (default 1)\n"
    "  --tolerance T      |a - b| <= T * max(1, |a|) where results may differ by rounding\n"
    "                     (CPU against GPU, banded reduce tables; default 1e-4)\n"
    "  --dump-kernels DIR write the generated fused kernels' sources there\n"
    "  -v, --verbose      show the engine's notices\n"
    "\n"
    "Exit status: 0 no check failed (GPU checks without a device are skipped, not passed);\n"
    "1 a check failed; 2 bad command line.\n";

static int parse_number(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int plugin_check(pc *c)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (stat(c->o.file, &c->st) != 0 || !realpath(c->o.file, c->real)) {
        fprintf(stderr, "pipefuse plugin check: %s: %s\n", c->o.file, strerror(errno));
        return PF_EXIT_USAGE;
    }
    printf("pipefuse plugin check %s\n(pipefuse %s, plugin ABI %d.%d, seed %llu)\n", c->real,
           pf_version_string(), PF_ABI_MAJOR, PF_ABI_MINOR, c->o.seed);

    struct sigaction sa, saved[5];
    memset(&sa, 0, sizeof sa);
    memset(saved, 0, sizeof saved);
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], &sa, &saved[i]) != 0)
            fprintf(stderr, "pipefuse plugin check: cannot guard signal %d: %s\n", sigs[i],
                    strerror(errno));
    if (atexit(on_exit_call) != 0)
        fprintf(stderr, "pipefuse plugin check: cannot guard exit()\n");
    g_guard = 1;

    void *handle = NULL;
    const pf_plugin_desc *pd = NULL;
    if (pc_check_file(c) == 0)
        handle = pc_check_descriptor(c, &pd);
    if (handle && load_engine(c, pd) == 0) {
        int found = 0;
        for (int i = 0; i < pf_engine_stage_count(c->eng); i++) {
            const char *file, *pname;
            const pf_stage_desc *d = pf_engine_stage(c->eng, i, &file, &pname);
            if (!same_file(file, &c->st) || (c->o.only && strcmp(c->o.only, d->name) != 0))
                continue;
            found++;
            snprintf(c->op, sizeof c->op, "%s.%s", pname, d->name);
            check_stage(c, d);
        }
        if (c->o.only && !found)
            fail(c, "name one of the plugin's stages (pipefuse stages lists them)",
                 "--stage %s: the plugin has no stage of that name", c->o.only);
    } else if (handle || c->failed) {
        printf("\nstages\n");
        skip(c, "stage runs: the plugin does not load");
    }
    g_guard = 0;
    pf_engine_destroy(c->eng);
    c->eng = NULL;
    cleanup_tmp();
    /* The handlers there were before (a sanitizer's, say) see the rest of the process. */
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &saved[i], NULL);
    /* The plugin stays loaded until the process ends: its CUDA runtime, if any, may have
       registered exit handlers that must find it there. */
    (void)handle;

    printf("\nsummary: %d passed, %d failed, %d skipped, %d warning%s\n", c->passed, c->failed,
           c->skipped, c->warned, c->warned == 1 ? "" : "s");
    if (c->gpu_skips && c->gpu < 0)
        printf("GPU checks were skipped: %s.\nRun `pipefuse plugin check %s` on a machine with "
               "a CUDA device to complete them.\n",
               c->gpu_why, c->real);
    printf("result: %s\n", c->failed ? "FAIL" : "PASS");
    return c->failed ? PF_EXIT_FAILED : PF_EXIT_OK;
}

int cli_plugin(int argc, char **argv, const cli_common *common)
{
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(plugin_usage, argc < 1 ? stderr : stdout);
        return argc < 1 ? PF_EXIT_USAGE : PF_EXIT_OK;
    }
    if (strcmp(argv[0], "check") != 0) {
        fprintf(stderr, "pipefuse plugin: unknown subcommand '%s' (the one there is: check)\n",
                argv[0]);
        return PF_EXIT_USAGE;
    }
    pc c;
    memset(&c, 0, sizeof c);
    c.common = common;
    c.o.arch = 90;
    c.o.seed = 1;
    c.o.tol = 1e-4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double num;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(plugin_usage, stdout);
            return PF_EXIT_OK;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            c.o.verbose = 1;
        } else if (strcmp(a, "--stage") == 0 && v) {
            c.o.only = argv[++i];
        } else if (strcmp(a, "--dump-kernels") == 0 && v) {
            c.o.dump_dir = argv[++i];
        } else if (strcmp(a, "--arch") == 0 && v && parse_number(v, 50, 200, &num) == 0 &&
                   num == floor(num)) {
            c.o.arch = (int)num;
            i++;
        } else if (strcmp(a, "--seed") == 0 && v && parse_number(v, 0, 1e18, &num) == 0 &&
                   num == floor(num)) {
            c.o.seed = (unsigned long long)num;
            i++;
        } else if (strcmp(a, "--tolerance") == 0 && v && parse_number(v, 0, 1, &num) == 0) {
            c.o.tol = num;
            i++;
        } else if (a[0] == '-' || c.o.file) {
            fprintf(stderr, "pipefuse plugin check: unexpected argument '%s'%s\n", a,
                    a[0] == '-' && !v ? " (or its value is missing)" : "");
            fputs(plugin_usage, stderr);
            return PF_EXIT_USAGE;
        } else {
            c.o.file = a;
        }
    }
    if (!c.o.file) {
        fprintf(stderr, "pipefuse plugin check: no plugin file given\n");
        fputs(plugin_usage, stderr);
        return PF_EXIT_USAGE;
    }
    c.rng = 0x9e3779b97f4a7c15ull ^ (c.o.seed * 0xbf58476d1ce4e5b9ull);
    if (!c.rng)
        c.rng = 1;
    return plugin_check(&c);
}
