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
 * command line and the order of the checks; check_report.c the report and the crash
 * and exit() guards; check_descriptors.c the file and its descriptor, every stage
 * declaration put through the engine's own rules (pf_stage_check, engine/stage_check.c);
 * check_point_source.c what a point op may call; check_engine.c the plugin loaded in an
 * engine; check_stage.c the checks of one stage in order; check_params.c the parameter
 * sets; check_images.c the test images and their comparisons; check_run.c runs through
 * the engine on the CPU; check_regions.c calls of a stage's CPU code on regions;
 * check_gpu.c the CUDA device checks.
 */
#include "plugin_check.h"

/* ---- The command ------------------------------------------------------------------------------ */

/* The command's help and its man page section come from the option tables (args.c). */

static int parse_number(const char *s, double lo, double hi, double *out)
{
    return cli_parse_real(s, lo, hi, out); /* args.c: no spaces, hex, inf or trailing text */
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

    pc_guards_on();

    void *handle = NULL;
    const pf_plugin_desc *pd = NULL;
    if (pc_check_file(c) == 0)
        handle = pc_check_descriptor(c, &pd);
    if (handle && pc_load_engine(c, pd) == 0) {
        int found = 0;
        for (int i = 0; i < pf_engine_stage_count(c->eng); i++) {
            const char *file, *pname;
            const pf_stage_desc *d = pf_engine_stage(c->eng, i, &file, &pname);
            if (!pc_same_file(file, &c->st) || (c->o.only && strcmp(c->o.only, d->name) != 0))
                continue;
            found++;
            snprintf(c->op, sizeof c->op, "%s.%s", pname, d->name);
            pc_check_stage(c, d);
        }
        if (c->o.only && !found)
            fail(c, "name one of the plugin's stages (pipefuse stages lists them)",
                 "--stage %s: the plugin has no stage of that name", c->o.only);
    } else if (handle || c->failed) {
        printf("\nstages\n");
        skip(c, "stage runs: the plugin does not load");
    }
    pf_engine_destroy(c->eng);
    c->eng = NULL;
    pc_cleanup_tmp();
    pc_guards_off();
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

/* A usage error: what, then where the help is; exit status 2. */
static int plugin_usage(const char *fmt, const char *a, const char *more)
{
    fputs("pipefuse plugin", stderr);
    fprintf(stderr, fmt, a);
    fprintf(stderr, "%s (see pipefuse plugin --help)\n", more);
    return PF_EXIT_USAGE;
}

int cli_plugin(int argc, char **argv, const cli_common *common)
{
    /* `plugin [--] check [OPTIONS] [--] LIB.so`: a "--" before check ends the command's
       options (it has none), one after it check's: nothing after that is an option */
    int i = 0, ended = 0;
    if (i < argc && strcmp(argv[i], "--") == 0)
        i++;
    if (i >= argc) { /* as `pipefuse` alone: the help, on stderr */
        cli_help(cli_find_command("plugin"), stderr);
        return PF_EXIT_USAGE;
    }
    if (strcmp(argv[i], "check") != 0)
        return plugin_usage(": unknown subcommand '%s'", argv[i], "; the one there is: check");
    pc c;
    memset(&c, 0, sizeof c);
    c.common = common;
    c.o.arch = 90;
    c.o.seed = 1;
    c.o.tol = 1e-4;
    for (i++; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double num;
        if (ended || a[0] != '-' || !a[1]) {
            if (c.o.file)
                return plugin_usage(" check: unexpected argument '%s'", a,
                                    ": one plugin file at most");
            c.o.file = a;
        } else if (strcmp(a, "--") == 0) {
            ended = 1;
        } else if (strcmp(a, "--verbose") == 0) {
            c.o.verbose = 1;
        } else if (strcmp(a, "--stage") == 0 && v) {
            c.o.only = argv[++i];
        } else if (strcmp(a, "--dump-kernels") == 0 && v) {
            c.o.dump_dir = argv[++i];
        } else if (strcmp(a, "--arch") == 0 && v) {
            if (parse_number(v, 50, 200, &num) != 0 || num != floor(num))
                return plugin_usage(" check: --arch %s: expected e.g. 90 for sm_90", v, "");
            c.o.arch = (int)num;
            i++;
        } else if (strcmp(a, "--seed") == 0 && v) {
            if (parse_number(v, 0, 1e18, &num) != 0 || num != floor(num))
                return plugin_usage(" check: --seed %s: expected a whole number from 0 to 1e18", v,
                                    "");
            c.o.seed = (unsigned long long)num;
            i++;
        } else if (strcmp(a, "--tolerance") == 0 && v) {
            if (parse_number(v, 0, 1, &num) != 0)
                return plugin_usage(" check: --tolerance %s: expected a number from 0 to 1", v, "");
            c.o.tol = num;
            i++;
        } else if (!v && (strcmp(a, "--stage") == 0 || strcmp(a, "--dump-kernels") == 0 ||
                          strcmp(a, "--arch") == 0 || strcmp(a, "--seed") == 0 ||
                          strcmp(a, "--tolerance") == 0)) {
            return plugin_usage(" check: option '%s' needs a value", a, "");
        } else {
            return plugin_usage(" check: unknown option '%s'", a,
                                "; a file whose name starts with '-' goes after --");
        }
    }
    if (!c.o.file)
        return plugin_usage(" check: no plugin file given%s", "", "");
    /* Checked once, before any work, as run and check do: a missing directory would
       otherwise fail every NVRTC check with the same message. */
    if (c.o.dump_dir && cli_check_dump_dir("plugin check", c.o.dump_dir) != 0)
        return PF_EXIT_USAGE;
    c.rng = 0x9e3779b97f4a7c15ull ^ (c.o.seed * 0xbf58476d1ce4e5b9ull);
    if (!c.rng)
        c.rng = 1;
    return plugin_check(&c);
}
