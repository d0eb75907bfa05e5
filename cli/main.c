/* cli/main.c: the pipefuse command: run, check, stages, info. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: pipefuse [--plugin-path DIRS] [--threads N] COMMAND ...\n"
    "\n"
    "commands:\n"
    "  run PIPELINE INPUT... -o OUTDIR   run a pipeline over PNG files and directories\n"
    "  check PIPELINE [--size WxH] [--dot FILE] [--no-fuse] [--max-launch-ms MS]\n"
    "        [--dump-kernels DIR [--arch 90]]\n"
    "                                    validate a pipeline and print its plan; with\n"
    "                                    --dump-kernels, generate and compile its fused\n"
    "                                    kernels (NVRTC, no GPU needed)\n"
    "  bench PIPELINE [--size WxH] [--frames N] [--format F] [--mode M] [--json]\n"
    "                                    time every execution mode side by side and\n"
    "                                    tell launch-bound from memory-bound\n"
    "  stages [NAME]                     list stages and their parameters\n"
    "  info                              versions, plugins and CUDA devices\n"
    "  plugin check LIB.so               check a plugin as a stage author would want\n"
    "  --help, --version\n"
    "\n"
    "run options:\n"
    "  -o, --output DIR        where outputs go (created if missing)\n"
    "  --backend auto|cpu|cuda executor (default: the pipeline's, else auto)\n"
    "  --no-fuse               run every point stage on its own\n"
    "  --max-launch-ms MS      split launches to stay under MS (GPU watchdog)\n"
    "  --profile               time every launch and print the times per stage\n"
    "  --dump-kernels DIR      write the source of every fused kernel generated\n"
    "  --set ID.PARAM=JSON     override a parameter, e.g. --set blur.sigma=2.5\n"
    "  --input NAME=FILE       bind another pipeline input to a fixed file\n"
    "  --table-format csv|json table outputs whose pipeline names no format (default csv)\n"
    "  --zlib N                PNG compression level 0-9 (default 6)\n"
    "  --max-pixels N          refuse larger images (default 268435456)\n"
    "  -q, --quiet             no per-file progress\n"
    "\n"
    "Outputs: with one image output, INPUT.png becomes OUTDIR/INPUT.png; otherwise\n"
    "OUTDIR/INPUT.NAME.png for each image output and OUTDIR/INPUT.NAME.csv (or .json)\n"
    "for each table output. Files are written whole or not at all.\n"
    "\n"
    "Exit status: 0 all inputs succeeded; 1 some inputs failed (each is reported and\n"
    "the others are processed); 2 bad command line, pipeline or plugin.\n"
    "\n"
    "Plugins come from the built-in directory, then --plugin-path, then\n"
    "PIPEFUSE_PLUGIN_PATH (both ':'-separated).\n";

pf_engine *cli_engine(const cli_common *c)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.plugin_path = c->plugin_path;
    cfg.threads = c->threads;
    pf_engine *e = NULL;
    int rc = pf_engine_create(&cfg, &e);
    if (rc != PF_OK) {
        fprintf(stderr, "pipefuse: %s\n", e ? pf_engine_errmsg(e) : pf_status_str(rc));
        pf_engine_destroy(e);
        return NULL;
    }
    return e;
}

static int parse_size(const char *s, pf_shape *out)
{
    char *end;
    long w = strtol(s, &end, 10);
    if (*end != 'x' && *end != 'X')
        return -1;
    long h = strtol(end + 1, &end, 10);
    if (*end || w <= 0 || h <= 0 || w > 1 << 20 || h > 1 << 20)
        return -1;
    out->width = (int)w;
    out->height = (int)h;
    return 0;
}

static int cmd_check(int argc, char **argv, const cli_common *c)
{
    const char *file = NULL, *dot = NULL, *dump = NULL, *max_ms = NULL;
    pf_shape size = {1920, 1080};
    int no_fuse = 0, arch = 90;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            if (parse_size(argv[++i], &size) != 0) {
                fprintf(stderr, "pipefuse check: --size %s: expected WIDTHxHEIGHT\n", argv[i]);
                return PF_EXIT_USAGE;
            }
        } else if (strcmp(argv[i], "--dot") == 0 && i + 1 < argc) {
            dot = argv[++i];
        } else if (strcmp(argv[i], "--no-fuse") == 0) {
            no_fuse = 1;
        } else if (strcmp(argv[i], "--max-launch-ms") == 0 && i + 1 < argc) {
            max_ms = argv[++i];
        } else if (strcmp(argv[i], "--dump-kernels") == 0 && i + 1 < argc) {
            dump = argv[++i];
        } else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc) {
            arch = atoi(argv[++i]);
            if (arch < 50 || arch > 200) {
                fprintf(stderr, "pipefuse check: --arch %s: expected e.g. 90 for sm_90\n", argv[i]);
                return PF_EXIT_USAGE;
            }
        } else if (argv[i][0] == '-' || file) {
            fprintf(stderr, "pipefuse check: unexpected argument '%s'\n", argv[i]);
            return PF_EXIT_USAGE;
        } else {
            file = argv[i];
        }
    }
    if (!file) {
        fprintf(stderr, "pipefuse check: no pipeline file given\n");
        return PF_EXIT_USAGE;
    }
    pf_engine *e = cli_engine(c);
    if (!e)
        return PF_EXIT_USAGE;
    pf_pipeline *p = NULL;
    int rc = pf_pipeline_load_file(e, file, &p);
    if (rc != PF_OK) {
        fprintf(stderr, "pipefuse: %s\n", pf_engine_errmsg(e));
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    if (no_fuse)
        pf_pipeline_set_option(p, "fusion", "false");
    if (max_ms && pf_pipeline_set_option(p, "max_launch_ms", max_ms) != PF_OK) {
        fprintf(stderr, "pipefuse check: --max-launch-ms %s: %s\n", max_ms, pf_pipeline_errmsg(p));
        pf_pipeline_destroy(p);
        pf_engine_destroy(e);
        return PF_EXIT_USAGE;
    }
    pf_shape shapes[64];
    int n = pf_pipeline_input_count(p);
    for (int i = 0; i < n && i < 64; i++)
        shapes[i] = size;
    rc = pf_pipeline_plan(p, shapes, n);
    if (rc == PF_OK) {
        if (dot && strcmp(dot, "-") == 0) {
            rc = pf_pipeline_print_dot(p, stdout);
        } else {
            rc = pf_pipeline_print_plan(p, stdout);
            if (dot && rc == PF_OK) {
                FILE *f = fopen(dot, "w");
                rc = f ? pf_pipeline_print_dot(p, f) : PF_IO;
                if (f && fclose(f) != 0)
                    rc = PF_IO;
                if (rc != PF_OK)
                    fprintf(stderr, "pipefuse check: cannot write %s\n", dot);
            }
        }
    } else {
        fprintf(stderr, "pipefuse: %s\n", pf_pipeline_errmsg(p));
    }
    if (rc == PF_OK && dump) {
        int built = 0;
        rc = pf_pipeline_build_kernels(p, arch, dump, &built);
        if (rc == PF_OK)
            printf("fused kernels: %d generated into %s and compiled for sm_%d\n", built, dump,
                   arch);
        else
            fprintf(stderr, "pipefuse: %s\n", pf_pipeline_errmsg(p));
    }
    pf_pipeline_destroy(p);
    pf_engine_destroy(e);
    return rc == PF_OK ? PF_EXIT_OK : PF_EXIT_USAGE;
}

static const char *const type_names[] = {"float", "int", "bool", "enum", "float[]"};
static const char *const kind_names[] = {"point", "stencil", "resample", "reduce"};

static void print_param(const pf_param_desc *pd)
{
    char def[256], range[128] = "";
    switch (pd->type) {
    case PF_PARAM_FLOAT:
        snprintf(def, sizeof def, "%g", pd->def);
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
            o += (size_t)snprintf(def + o, sizeof def - o, "%s%g", k ? ", " : "", pd->def_array[k]);
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
        snprintf(range, sizeof range, "[%g, %g]", pd->min, pd->max);
    }
    printf("    %-12s %-7s default %-12s %-16s %s\n", pd->name, type_names[pd->type], def, range,
           pd->doc ? pd->doc : "");
}

static int cmd_stages(int argc, char **argv, const cli_common *c)
{
    pf_engine *e = cli_engine(c);
    if (!e)
        return PF_EXIT_USAGE;
    const char *only = argc > 0 ? argv[0] : NULL;
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
        for (int k = 0; k < d->n_params; k++)
            print_param(&d->params[k]);
    }
    pf_engine_destroy(e);
    if (only && !found) {
        fprintf(stderr, "pipefuse stages: no stage named '%s'\n", only);
        return PF_EXIT_USAGE;
    }
    return PF_EXIT_OK;
}

int main(int argc, char **argv)
{
    cli_common c = {NULL, 0};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return PF_EXIT_OK;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("pipefuse %s (library %s, plugin ABI %d.%d)\n", PF_VERSION_STRING,
                   pf_version_string(), PF_ABI_MAJOR, PF_ABI_MINOR);
            return PF_EXIT_OK;
        } else if (strcmp(argv[i], "--plugin-path") == 0 && i + 1 < argc) {
            c.plugin_path = argv[++i];
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || t < 0 || t > 1024) {
                fprintf(stderr, "pipefuse: --threads %s: expected 0 (one per core) to 1024\n",
                        argv[i]);
                return PF_EXIT_USAGE;
            }
            c.threads = (int)t;
        } else {
            fprintf(stderr, "pipefuse: unknown option '%s' (see pipefuse --help)\n", argv[i]);
            return PF_EXIT_USAGE;
        }
    }
    if (pf_version() != PF_VERSION_NUMBER) {
        fprintf(stderr, "pipefuse: library version %s does not match the program's %s\n",
                pf_version_string(), PF_VERSION_STRING);
        return PF_EXIT_USAGE;
    }
    if (i >= argc) {
        fputs(usage, stderr);
        return PF_EXIT_USAGE;
    }
    const char *cmd = argv[i++];
    if (strcmp(cmd, "run") == 0)
        return cli_run(argc - i, argv + i, &c);
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - i, argv + i, &c);
    if (strcmp(cmd, "bench") == 0)
        return cli_bench(argc - i, argv + i, &c);
    if (strcmp(cmd, "stages") == 0)
        return cmd_stages(argc - i, argv + i, &c);
    if (strcmp(cmd, "plugin") == 0)
        return cli_plugin(argc - i, argv + i, &c);
    if (strcmp(cmd, "info") == 0) {
        pf_engine *e = cli_engine(&c); /* NULL still prints versions and devices */
        int rc = pf_engine_print_info(e, stdout);
        int ok = e != NULL && rc == PF_OK;
        pf_engine_destroy(e);
        return ok ? PF_EXIT_OK : PF_EXIT_USAGE;
    }
    fprintf(stderr, "pipefuse: unknown command '%s' (see pipefuse --help)\n", cmd);
    return PF_EXIT_USAGE;
}
