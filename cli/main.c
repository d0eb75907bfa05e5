/* cli/main.c: the pipefuse command: run, check, bench, stages, info, plugin. The
 * command line is parsed in args.c; this file runs check, stages and info. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pipefuse/tools.h"

/* ---- The crash guard ---------------------------------------------------------------- */

/* What the process was doing, for the handler; written by the main thread only. */
static char g_doing[600]; /* empty: not in plugin code, a crash is the usual crash */
static const int g_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static struct sigaction g_saved[sizeof g_sigs / sizeof g_sigs[0]];
static int g_on;

void cli_doing(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_doing, sizeof g_doing, fmt, ap);
    va_end(ap);
}

static void say_err(const char *s)
{
    ssize_t r = write(STDERR_FILENO, s, strlen(s));
    (void)r;
}

static void on_crash(int sig)
{
    if (!g_doing[0]) { /* pipefuse's own code: the crash as it is, for a debugger */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    say_err("pipefuse: crashed (");
    say_err(sig == SIGSEGV   ? "SIGSEGV"
            : sig == SIGBUS  ? "SIGBUS"
            : sig == SIGFPE  ? "SIGFPE"
            : sig == SIGABRT ? "SIGABRT: abort() called"
                             : "SIGILL");
    say_err(") while ");
    say_err(g_doing);
    say_err(": plugin code is the likely cause (a plugin's entry point, or a stage's check, "
            "radius or shape function); `pipefuse plugin check PLUGIN.so` runs one plugin "
            "apart and names the stage at fault\n");
    _exit(PF_EXIT_USAGE);
}

/* exit() called from plugin code (an entry point that gives up): said, as a crash is,
   with the usage status instead of whatever the plugin chose. */
static void on_exit_call(void)
{
    if (!g_on || !g_doing[0])
        return;
    say_err("pipefuse: exit() called while ");
    say_err(g_doing);
    say_err(": plugin code is the likely cause (a plugin's entry point, or a stage's check, "
            "radius or shape function); `pipefuse plugin check PLUGIN.so` runs one plugin "
            "apart and names the stage at fault\n");
    _exit(PF_EXIT_USAGE);
}

void cli_guard_on(void)
{
    static int registered;
    if (!registered)
        registered = atexit(on_exit_call) == 0;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* its own stack, so a plugin that overflows the main thread's is reported too */
    static char alt[1 << 16];
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sa.sa_flags = sigaltstack(&ss, NULL) == 0 ? SA_ONSTACK : 0;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof g_sigs / sizeof g_sigs[0]; i++)
        sigaction(g_sigs[i], &sa, &g_saved[i]);
    g_on = 1;
#endif
}

void cli_guard_off(void)
{
    for (size_t i = 0; g_on && i < sizeof g_sigs / sizeof g_sigs[0]; i++)
        sigaction(g_sigs[i], &g_saved[i], NULL);
    g_on = 0;
}

pf_engine *cli_engine(const cli_common *c)
{
    cli_doing("loading plugins (the built-in directory%s%s, then PIPEFUSE_PLUGIN_PATH)",
              c->plugin_path ? ", --plugin-path " : "", c->plugin_path ? c->plugin_path : "");
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = c->plugin_path;
    cfg.threads = c->threads;
    cfg.log = cli_log;
    cfg.log_user = (void *)c;
    pf_engine *e = NULL;
    int rc = pf_engine_create(&cfg, &e);
    g_doing[0] = 0;
    if (rc != PF_OK) {
        fprintf(stderr, "pipefuse: %s\n", e ? pf_engine_errmsg(e) : pf_status_str(rc));
        pf_engine_destroy(e);
        return NULL;
    }
    return e;
}

/* check's arguments, and where its output goes: the plan to stdout, or with --dot -
   the graph alone to dot_out (the real stdout) and the rest to stderr. */
typedef struct check_opts {
    const char *file, *dot, *dump, *max_ms;
    const char *sets[64]; /* --set ID.PARAM=JSON, as run takes them */
    int n_sets;
    pf_shape size;
    int no_fuse, arch, build, n_formats;
    pf_sample samples[16];
    int channels[16];
    FILE *dot_out, *report;
} check_opts;

static int cmd_check_run(check_opts *o, const cli_common *c);

static int cmd_check(int argc, char **argv, const cli_common *c)
{
    const char *file = NULL, *dot = NULL, *dump = NULL, *max_ms = NULL;
    pf_shape size = {1920, 1080};
    int no_fuse = 0, arch = 0, build = 0, n_formats = 0;
    pf_sample samples[16];
    int channels[16];
    const char *sets[64];
    int n_sets = 0;
    int ended = 0; /* after "--", every argument is the pipeline file */
    for (int i = 0; i < argc; i++) {
        if (ended || (argv[i][0] != '-' || !argv[i][1])) {
            if (file) {
                fprintf(stderr,
                        "pipefuse check: unexpected argument '%s': one pipeline file at most (see "
                        "pipefuse check --help)\n",
                        argv[i]);
                return PF_EXIT_USAGE;
            }
            file = argv[i];
        } else if (strcmp(argv[i], "--") == 0) {
            ended = 1;
        } else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            if (cli_size_option("check", argv[++i], &size) != 0)
                return PF_EXIT_USAGE;
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            if (n_sets == 64) {
                fprintf(stderr, "pipefuse check: --set: at most 64\n");
                return PF_EXIT_USAGE;
            }
            sets[n_sets++] = argv[++i];
        } else if (strcmp(argv[i], "--dot") == 0 && i + 1 < argc) {
            dot = argv[++i];
        } else if (strcmp(argv[i], "--no-fuse") == 0) {
            no_fuse = 1;
        } else if (strcmp(argv[i], "--max-launch-ms") == 0 && i + 1 < argc) {
            max_ms = argv[++i];
        } else if (strcmp(argv[i], "--dump-kernels") == 0 && i + 1 < argc) {
            dump = argv[++i];
        } else if (strcmp(argv[i], "--build") == 0) {
            build = 1;
        } else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            /* A comma-separated list, or the option again; empty items are skipped
               ("rgb8,"), but a list with no format at all ('', ',': an unset shell
               variable) is refused, not taken for the default. */
            const char *t = argv[++i];
            int listed = 0;
            for (;;) {
                size_t len = strcspn(t, ",");
                char one[16];
                if (len &&
                    (n_formats == 16 || len >= sizeof one ||
                     (memcpy(one, t, len), one[len] = 0,
                      cli_parse_format(one, &samples[n_formats], &channels[n_formats]) != 0))) {
                    fprintf(stderr,
                            "pipefuse check: --format %s: %s (formats: gray8 graya8 rgb8 rgba8, "
                            "the same with 16 or f)\n",
                            argv[i], n_formats == 16 ? "at most 16 formats" : "unknown format");
                    return PF_EXIT_USAGE;
                }
                n_formats += len > 0;
                listed += len > 0;
                if (!t[len])
                    break;
                t += len + 1;
            }
            if (!listed) {
                fprintf(stderr,
                        "pipefuse check: --format '%s': no format in the list (formats: gray8 "
                        "graya8 rgb8 rgba8, the same with 16 or f)\n",
                        argv[i]);
                return PF_EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) {
            long long a;
            if (cli_parse_int(argv[++i], 50, 200, &a) != 0) {
                fprintf(stderr, "pipefuse check: --arch %s: expected e.g. 90 for sm_90\n", argv[i]);
                return PF_EXIT_USAGE;
            }
            arch = (int)a;
        } else {
            return cli_unknown_option("check", argv[i]);
        }
    }
    if (!file) {
        fprintf(stderr, "pipefuse check: no pipeline file given (see pipefuse check --help)\n");
        return PF_EXIT_USAGE;
    }
    if (dump && cli_check_dump_dir("check", dump) != 0)
        return PF_EXIT_USAGE;
    /* --dot -: stdout holds the graph alone; the kernels' summary and anything else
       printed on the way (the engine's, a plugin's) goes to stderr. */
    FILE *dot_out = NULL, *report = stdout;
    if (dot && strcmp(dot, "-") == 0) {
        int fd = cli_take_stdout();
        if (fd < 0 || !(dot_out = fdopen(fd, "w"))) {
            fprintf(stderr, "pipefuse check: --dot -: stdout: %s\n", strerror(errno));
            if (fd >= 0)
                close(fd);
            return PF_EXIT_USAGE;
        }
        report = stderr;
    }
    check_opts o = {.file = file,
                    .dot = dot,
                    .dump = dump,
                    .max_ms = max_ms,
                    .n_sets = n_sets,
                    .size = size,
                    .no_fuse = no_fuse,
                    .arch = arch,
                    .build = build,
                    .n_formats = n_formats,
                    .dot_out = dot_out,
                    .report = report};
    memcpy(o.sets, sets, sizeof(const char *) * (size_t)n_sets);
    memcpy(o.samples, samples, sizeof samples);
    memcpy(o.channels, channels, sizeof channels);
    int status = cmd_check_run(&o, c);
    if (dot_out && fclose(dot_out) != 0 && status == PF_EXIT_OK) {
        fprintf(stderr, "pipefuse check: --dot -: writing stdout: %s\n", strerror(errno));
        status = PF_EXIT_FAILED; /* the output failed, not the command line (as run -o -) */
    }
    return status;
}

/* check's work once its arguments are known: load, plan, print, build kernels. */
static int cmd_check_run(check_opts *o, const cli_common *c)
{
    pf_engine *e = cli_engine(c);
    if (!e)
        return PF_EXIT_USAGE;
    if (cli_require_backend(e, c->backend, "check") != 0) {
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    pf_pipeline *p = NULL;
    cli_doing("loading %s", o->file);
    int rc = pf_pipeline_load_file(e, o->file, &p);
    cli_doing("%s", "");
    if (rc != PF_OK) {
        fprintf(stderr, "pipefuse: %s\n", pf_engine_errmsg(e));
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    for (int i = 0; i < o->n_sets; i++) { /* as run applies them */
        char err[1024];
        if (cli_apply_set(p, o->sets[i], err, sizeof err) != 0) {
            fprintf(stderr, "pipefuse check: %s\n", err);
            pf_pipeline_destroy(p);
            pf_engine_destroy(e);
            return PF_EXIT_USAGE;
        }
    }
    if (o->no_fuse)
        pf_pipeline_set_option(p, "fusion", "false");
    /* the flags that set an option of the pipeline, each named in its refusal */
    const struct {
        const char *flag, *option, *value;
    } set[] = {{"--precision", "precision", c->precision},
               {"--backend", "backend", c->backend},
               {"--max-launch-ms", "max_launch_ms", o->max_ms}};
    for (size_t k = 0; k < sizeof set / sizeof set[0]; k++) {
        if (set[k].value && pf_pipeline_set_option(p, set[k].option, set[k].value) != PF_OK) {
            fprintf(stderr, "pipefuse check: %s %s: %s\n", set[k].flag, set[k].value,
                    pf_pipeline_errmsg(p));
            pf_pipeline_destroy(p);
            pf_engine_destroy(e);
            return PF_EXIT_USAGE;
        }
    }
    pf_shape shapes[64];
    int n = pf_pipeline_input_count(p);
    for (int i = 0; i < n && i < 64; i++)
        shapes[i] = o->size;
    cli_doing("planning %s for %dx%d", o->file, o->size.width, o->size.height);
    rc = pf_pipeline_plan(p, shapes, n);
    cli_doing("%s", "");
    if (rc == PF_OK) {
        if (o->dot_out) {
            rc = pf_pipeline_print_dot(p, o->dot_out);
        } else {
            rc = pf_pipeline_print_plan(p, stdout);
            if (o->dot && rc == PF_OK) {
                FILE *f = fopen(o->dot, "w");
                rc = f ? pf_pipeline_print_dot(p, f) : PF_IO;
                int err = errno;
                if (f && fclose(f) != 0 && rc == PF_OK)
                    rc = PF_IO, err = errno;
                if (rc != PF_OK) /* the reason: a missing folder, a full disk, ... */
                    fprintf(stderr, "pipefuse check: --dot %s: cannot write: %s\n", o->dot,
                            strerror(err ? err : EIO));
            }
        }
    } else {
        fprintf(stderr, "pipefuse: %s\n", pf_pipeline_errmsg(p));
    }
    /* NVRTC needs no GPU: compile the fused kernels a CUDA run would, into the kernel
       cache, so that an op that does not compile fails here and the run's first frame
       compiles nothing (only without NVRTC is that skipped, and said; with --build or
       --dump-kernels that is an error). */
    if (rc == PF_OK) {
        int built = 0;
        if (o->n_formats == 0) {
            o->samples[0] = PF_U8, o->channels[0] = 4, o->n_formats = 1;
        }
        rc = pf_pipeline_build_kernels_for(p, o->arch, o->dump, o->samples, o->channels,
                                           o->n_formats, &built);
        pf_stats st;
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        pf_pipeline_stats(p, &st);
        char what[64] = "";
        if (o->arch)
            snprintf(what, sizeof what, " for sm_%d", o->arch);
        if (rc == PF_OK && o->dump)
            fprintf(o->report, "fused kernels: %d generated into %s and compiled%s\n", built,
                    o->dump, what);
        else if (rc == PF_OK && built)
            fprintf(o->report,
                    "fused kernels: %d built%s, %d format(s): %llu compiled with NVRTC, %llu from "
                    "the kernel cache\n",
                    built, what, o->n_formats, st.kernel_compiles, st.kernel_cache_hits);
        else if (rc == PF_UNSUPPORTED && !o->dump && !o->build)
            fprintf(o->report, "fused kernels: not compiled: %s\n", pf_pipeline_errmsg(p));
        else if (rc != PF_OK)
            fprintf(stderr, "pipefuse: %s\n", pf_pipeline_errmsg(p));
        if (rc == PF_UNSUPPORTED && !o->dump && !o->build)
            rc = PF_OK;
    }
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
    return rc == PF_OK ? PF_EXIT_OK : PF_EXIT_USAGE;
}

static const char *const type_names[] = {"float", "int", "bool", "enum", "float[]"};
static const char *const kind_names[] = {"point", "stencil", "resample", "reduce"};

static void print_param(const pf_param_desc *pd)
{
    char def[256], range[128] = "", a[32], b[32];
    switch (pd->type) {
    case PF_PARAM_FLOAT:
        snprintf(def, sizeof def, "%s", pf_number_text(pd->def, 0, a, sizeof a));
        break;
    case PF_PARAM_INT:
        snprintf(def, sizeof def, "%d", (int)pd->def);
        break;
    case PF_PARAM_BOOL:
        snprintf(def, sizeof def, "%s", pd->def != 0 ? "true" : "false");
        break;
    case PF_PARAM_ENUM:
        snprintf(def, sizeof def, "\"%s\"", pd->enum_names[(int)pd->def]);
        break;
    default: {
        size_t o = (size_t)snprintf(def, sizeof def, "[");
        for (int k = 0; k < pd->count && o < sizeof def - 16; k++)
            o += (size_t)snprintf(def + o, sizeof def - o, "%s%s", k ? ", " : "",
                                  pf_number_text(pd->def_array[k], 1, a, sizeof a));
        snprintf(def + o, sizeof def - o, "]");
        break;
    }
    }
    if (pd->type == PF_PARAM_ENUM) {
        size_t o = 0;
        for (int k = 0; pd->enum_names[k] && o < sizeof range - 32; k++)
            o += (size_t)snprintf(range + o, sizeof range - o, "%s%s", k ? "|" : "",
                                  pd->enum_names[k]);
    } else if (pd->type != PF_PARAM_BOOL && pd->min <= pd->max) {
        snprintf(range, sizeof range, "[%s, %s]", pf_number_text(pd->min, 0, a, sizeof a),
                 pf_number_text(pd->max, 0, b, sizeof b));
    }
    printf("    %-12s %-7s default %-12s %-16s %s\n", pd->name, type_names[pd->type], def, range,
           pd->doc ? pd->doc : "");
}

/* How the GPU runs a stage: fused into the engine's generated kernels (by what its
   descriptor declares), or in kernels of its own. */
static void print_fusion(const pf_stage_desc *d)
{
    const int sep = d->separable_fn && !d->stencil_fn;
    if (d->kind == PF_STAGE_POINT && d->point_source)
        printf("    fusion: fuses with the point stages beside it into one kernel (point op %s)\n",
               d->point_fn ? d->point_fn : "?");
    else if (d->kind == PF_STAGE_POINT)
        printf("    fusion: none (no point source): a kernel and a trip through memory of its "
               "own\n");
    else if (d->kind == PF_STAGE_STENCIL && d->point_source && d->n_inputs == 1 && sep)
        printf("    fusion: two generated passes (separable_fn %s, radius up to %d) that run the "
               "point stages producing its input as they stage the rows\n",
               d->separable_fn, d->separable_max);
    else if (d->kind == PF_STAGE_STENCIL && d->point_source && d->n_inputs == 1 && d->stencil_fn)
        printf("    fusion: a generated 3x3 kernel (stencil_fn %s, where the radius is 1) that "
               "runs the point stages producing its input on its tile and those reading its "
               "result before it stores\n",
               d->stencil_fn);
    else if (d->kind == PF_STAGE_REDUCE && d->reduce_sum && d->n_inputs == 1)
        printf("    fusion: a generated sum by %s that runs the point stages producing its input "
               "on the way in; partial tables added on the device%s%s\n",
               d->reduce_sum == PF_REDUCE_SUM_COLUMNS ? "columns" : "rows",
               d->reduce_finish ? ", each entry finished by " : "",
               d->reduce_finish ? d->reduce_finish : "");
    else if (d->run_cuda)
        printf("    fusion: none: its own kernels (run_cuda)\n");
    else
        printf("    fusion: none, and no CUDA implementation: pipelines using it run on the "
               "CPU\n");
    if (d->flags & PF_STAGE_BINDABLE)
        printf("    bound params: its float params may take each frame's value from a "
               "histogram or stats stage ({\"from\": \"hist\", \"percentile\": 0.5}; "
               "docs/pipeline-format.md)\n");
    if (d->kind == PF_STAGE_RESAMPLE && d->rows_in)
        printf("    strips: says which input rows a band of its output reads (rows_in): large "
               "images run in strips of rows\n");
}

static int cmd_stages(int argc, char **argv, const cli_common *c)
{
    /* "--" ends options: `stages -- NAME` and `stages NAME --` name NAME; before it, an
       argument starting with '-' is an option stages does not have, not a stage name */
    const char *only = NULL;
    int n_names = 0, ended = 0;
    for (int i = 0; i < argc; i++) {
        if (!ended && strcmp(argv[i], "--") == 0)
            ended = 1;
        else if (!ended && argv[i][0] == '-' && argv[i][1])
            return cli_unknown_option("stages", argv[i]);
        else
            only = argv[i], n_names++;
    }
    pf_engine *e = cli_engine(c);
    if (!e)
        return PF_EXIT_USAGE;
    if (n_names > 1) {
        fprintf(stderr, "pipefuse stages: one stage name at most (see pipefuse stages --help)\n");
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    int found = 0;
    for (int i = 0; i < pf_engine_stage_count(e); i++) {
        const char *file, *plugin;
        const pf_stage_desc *d = pf_engine_stage(e, i, &file, &plugin);
        if (only && strcmp(only, d->name) != 0)
            continue;
        found++;
        printf("%s  (%s, %d input%s%s)  from %s: %s\n", d->name, kind_names[d->kind], d->n_inputs,
               d->n_inputs > 1 ? "s" : "",
               d->kind == PF_STAGE_POINT ? (d->point_source ? ", fusable" : ", not fusable") : "",
               plugin, file);
        if (d->doc)
            printf("    %s\n", d->doc);
        print_fusion(d);
        for (int k = 0; k < d->n_params; k++)
            print_param(&d->params[k]);
    }
    if (only && !found) {
        int n = pf_engine_stage_count(e);
        const char **names = calloc((size_t)n + 1, sizeof *names);
        for (int i = 0; names && i < n; i++)
            names[i] = pf_engine_stage(e, i, NULL, NULL)->name;
        const char *near = names ? pf_closest_name(only, names, n) : NULL;
        fprintf(stderr, "pipefuse stages: no stage named '%s'", only);
        if (near)
            fprintf(stderr, " (did you mean '%s'?)", near);
        fprintf(stderr, "; 'pipefuse stages' lists them all\n");
        free(names);
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    pf_engine_destroy(e);
    return PF_EXIT_OK;
}

/* The engine's report with, after its first line (the version and plugin ABI), the
   library's version and the file it was loaded from. */
static int cmd_info(int argc, char **argv, const cli_common *c)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--") != 0 || i > 0) {
            if (argv[i][0] == '-' && argv[i][1] && (i == 0 || strcmp(argv[0], "--") != 0))
                return cli_unknown_option("info", argv[i]);
            fprintf(stderr, "pipefuse info: unexpected argument '%s' (see pipefuse info --help)\n",
                    argv[i]);
            return PF_EXIT_USAGE;
        }
    pf_engine *e = cli_engine(c); /* NULL still prints versions and devices */
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    int rc = m ? pf_engine_print_info(e, m) : PF_NO_MEMORY;
    if (m && fclose(m) != 0)
        rc = PF_NO_MEMORY;
    if (rc == PF_OK && text) {
        Dl_info where;
        const char *lib = dladdr((void *)&pf_version_string, &where) && where.dli_fname
                              ? where.dli_fname
                              : "(file unknown)";
        const char *rest = strchr(text, '\n');
        rest = rest ? rest + 1 : text + len;
        fwrite(text, 1, (size_t)(rest - text), stdout);
        printf("library:        %s (%s)\n", pf_version_string(), lib);
        fputs(rest, stdout);
    }
    free(text);
    pf_engine_destroy(e);
    return e != NULL && rc == PF_OK ? PF_EXIT_OK : PF_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (pf_version() != PF_VERSION_NUMBER) {
        fprintf(stderr, "pipefuse: library version %s does not match the program's %s\n",
                pf_version_string(), PF_VERSION_STRING);
        return PF_EXIT_USAGE;
    }
    cli_common c;
    memset(&c, 0, sizeof c);
    cli_args r;
    int status = cli_parse(argc, argv, &c, &r);
    if (status < 0) {
        const char *cmd = r.cmd->name;
        int n = r.argc;
        char **v = r.argv;
        if (strcmp(cmd, "plugin") != 0) /* plugin check guards each call itself */
            cli_guard_on();
        if (strcmp(cmd, "run") == 0) {
            status = cli_run_main(n, v, &c);
        } else if (strcmp(cmd, "check") == 0) {
            status = cmd_check(n, v, &c);
        } else if (strcmp(cmd, "bench") == 0) {
            status = cli_bench(n, v, &c);
        } else if (strcmp(cmd, "stages") == 0) {
            status = cmd_stages(n, v, &c);
        } else if (strcmp(cmd, "plugin") == 0) {
            status = cli_plugin(n, v, &c);
        } else {
            status = cmd_info(n, v, &c);
        }
    }
    cli_args_free(&r);
    return status;
}
