/* cli/args.c: the pipefuse command line as batch users know it.
 *
 * Every subcommand's options are declared once, in the tables below, and everything
 * derives from them: `pipefuse CMD --help`, the man page (`pipefuse --man`, built into
 * pipefuse.1), GNU forms (`--output=DIR`, `-oDIR`), global options accepted before or
 * after the subcommand, and "did you mean" for misspelt subcommands and options. The
 * subcommands then see a normalised argv: every option as `--name VALUE` (or `-o VALUE`),
 * in the order given, and only their own options.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "pipefuse/tools.h"

/* ---- The tables ---------------------------------------------------------------------------- */

/* Options every subcommand takes, before or after its name. */
static const cli_opt global_opts[] = {
    {"--plugin-path", 0, "DIRS",
     "also load plugins from DIRS (':'-separated), after the built-in directory and before "
     "PIPEFUSE_PLUGIN_PATH"},
    {"--threads", 0, "N", "CPU worker threads; 0 (the default): one per core"},
    {"--backend", 0, "auto|cpu|cuda",
     "executor for run and check (default: the pipeline's, else auto); cuda without a usable "
     "GPU is refused before any file is read"},
    {"--precision", 0, "exact|fast",
     "the GPU's generated kernels for run, check and bench: exact (the CPU's values) or fast "
     "(FMA and fast maths, within docs/stages.md's bound); default: the pipeline's, else exact"},
    {"--quiet", 'q', NULL, "no progress lines and no notices (errors and warnings still show)"},
    {"--help", 'h', NULL, "this help, then exit"},
    {"--version", 0, NULL, "the version, then exit"},
    {NULL, 0, NULL, NULL},
};

static const cli_opt run_opts[] = {
    {"--output", 'o', "DIR",
     "where outputs go (created if missing); '-' writes the pipeline's one image output to "
     "stdout (its table outputs are not written, with a notice)"},
    {"--name", 0, "TEMPLATE",
     "output file names, relative to DIR: {stem} (the input's name without .png, .jpg or "
     ".jpeg), {output} (the pipeline output's name), {ext} (png or jpg by --format, csv or "
     "json), {dir} (the input's folder "
     "below the directory given, with --recursive: a/b, without a '/' at its end; empty at "
     "the top, where a '/' after it is dropped); may hold '/' for subfolders, e.g. "
     "--name '{dir}/thumbs/{stem}_thumb.png'; names may not start with .pftmp-"},
    {"--recursive", 'r', NULL,
     "take image files in subfolders of directory inputs too; outputs keep the tree below DIR"},
    {"--no-fuse", 0, NULL, "run every point stage on its own"},
    {"--max-launch-ms", 0, "MS", "split launches to stay under MS (GPU watchdog)"},
    {"--profile", 0, NULL,
     "time every launch and print the times per stage, with what --verbose adds"},
    {"--verbose", 'v', NULL,
     "after the summary, the plans built, the files run in bands and the time per file in "
     "decode, engine and encode"},
    {"--dump-kernels", 0, "DIR",
     "write the source of every fused kernel generated into DIR, an existing writable folder"},
    {"--set", 0, "ID.PARAM=JSON",
     "override a parameter, e.g. --set blur.sigma=2.5 or --set turn.angle='\"180\"'"},
    {"--input", 0, "NAME=FILE",
     "bind another pipeline input (a watermark, a mask) to a file; an input no output uses "
     "needs none, and one given is not read"},
    {"--table-format", 0, "csv|json", "table outputs whose pipeline names no format (default csv)"},
    {"--zlib", 0, "N", "PNG compression level 0-9 (default 1: fast, see --png-filter)"},
    {"--max-pixels", 0, "N", "refuse larger images (default 268435456)"},
    {"--jobs", 0, "N", "files in the engine at once, 1-64 (default: automatic)"},
    {"--max-memory", 0, "SIZE", "memory budget of the files in flight, e.g. 512M or 4G"},
    {"--band-rows", 0, "auto|off|N",
     "run large images in bands of rows from decode to encode, where the stages allow it "
     "(point and stencil stages; resizes, crops, turns and position-dependent ops in strips "
     "of output rows on the CPU; no table output, no vertical flip): auto (the default, or "
     "PIPEFUSE_BAND_ROWS) bands an image whose whole-frame run would hold over 64 MB, off "
     "never bands, N bands every image taller than a band, N rows a band; the output is "
     "the same bit for bit (docs/batch.md)"},
    {"--file-timeout", 0, "S",
     "give up on a file S seconds after its decode began (decode, engine, encode and write "
     "all count), restarting its worker (default 600; 0: never)"},
    {"--skip-existing", 0, NULL,
     "skip inputs whose outputs exist and were made, by the record of the run that wrote "
     "them (OUTDIR/.pipefuse-manifest), from the input as it is with this pipeline, --set, "
     "--input files, output options, plugins and version (docs/batch.md)"},
    {"--joblog", 0, "FILE",
     "append a line per input (status, time, outputs, message, name) to FILE"},
    {"--retry-failed", 0, "FILE",
     "run again the inputs a --joblog FILE records as failed or pending (never finished: "
     "killed or interrupted), with the output names they had; with inputs on the command "
     "line, those of them that failed or never finished, and those FILE does not name"},
    {"--shard", 0, "I/N|auto", "take every N-th input from the I-th (several machines)"},
    {"--progress", 0, NULL, "a progress line even when stderr is not a terminal"},
    {"--png-filter", 0, "F",
     "PNG row filters: none, sub, up (the default), avg, paeth, fast or all"},
    {"--strip", 0, NULL,
     "write no metadata; without it PNG outputs keep a PNG input's gAMA, cHRM, sRGB, "
     "text, and the iCCP, sBIT and pHYs chunks while they still hold (same colour kind, "
     "same type and depth, same size), and a JPEG input's ICC profile (iCCP) and EXIF "
     "(eXIf); JPEG outputs keep the ICC profile (of a JPEG, or a PNG's iCCP) while it is "
     "of the output's colour kind, and a JPEG input's EXIF"},
    {"--format", 0, "auto|png|jpeg",
     "the format of image outputs whose name says none (the default names' {ext} follows "
     "it; jpg is jpeg); auto (the default): the input's format. A name ending .png, .jpg "
     "or .jpeg (.jpe, .jfif, .jif) is written in that format; an output the pipeline "
     "declares gray1/2/4, palette or 16-bit is PNG"},
    {"--quality", 0, "N", "JPEG quality 1-100 (default 85)"},
    {"--subsampling", 0, "420|422|444|440",
     "JPEG chroma subsampling of colour outputs (default 420; gray has none; 4:2:0 and "
     "the like are the same)"},
    {"--progressive", 0, NULL, "write progressive JPEGs"},
    {"--optimize", 0, NULL,
     "optimised Huffman tables for JPEG outputs (smaller files, slower; progressive files "
     "always have them)"},
    {"--keep-orientation", 0, NULL,
     "take JPEG inputs as stored: their EXIF orientation is not applied (by default the "
     "image is turned as the tag says and the EXIF carried says 1)"},
    {NULL, 0, NULL, NULL},
};

static const cli_opt check_opts[] = {
    {"--size", 0, "WxH", "input size to plan for (default 1920x1080)"},
    {"--dot", 0, "FILE", "also write the graph as Graphviz dot; '-': only the dot, to stdout"},
    {"--no-fuse", 0, NULL, "plan every point stage on its own"},
    {"--max-launch-ms", 0, "MS", "split launches to stay under MS and show the bands"},
    {"--set", 0, "ID.PARAM=JSON",
     "override a parameter as run does (checked here, and planned with), e.g. --set "
     "blur.sigma=2.5"},
    {"--build", 0, NULL,
     "compile every fused kernel into the kernel cache ahead of a run (NVRTC, no GPU "
     "needed; done anyway when NVRTC is present, an error without it)"},
    {"--format", 0, "LIST",
     "frame formats to build kernels for, each taken by every input and output: "
     "gray8 graya8 rgb8 rgba8, the same with 16 or f, comma-separated (default rgba8)"},
    {"--dump-kernels", 0, "DIR",
     "generate and compile the fused kernels into DIR (NVRTC, no GPU needed)"},
    {"--arch", 0, "N",
     "compute capability to compile for, e.g. 90 for sm_90 (default: the device's, else 90)"},
    {NULL, 0, NULL, NULL},
};

static const cli_opt bench_opts[] = {
    {"--size", 0, "WxH", "frame size (default 1920x1080)"},
    {"--frames", 0, "N", "frames per mode, 3 to 1000000 (default 200)"},
    {"--format", 0, "F",
     "frame format: gray8 graya8 rgb8 rgba8, the same with 16 or f (default rgba8)"},
    {"--mode", 0, "NAME",
     "only one mode: cpu, cuda-eager-unfused, cuda-eager-fused, cuda-graph-unfused, "
     "cuda-graph-fused"},
    {"--json", 0, NULL, "print JSON instead of a table"},
    {NULL, 0, NULL, NULL},
};

static const cli_opt plugin_opts[] = {
    {"--stage", 0, "NAME", "check only this stage (the descriptor checks cover all)"},
    {"--arch", 0, "N", "NVRTC target, sm_N (default 90)"},
    {"--seed", 0, "N", "seed of the random images and params (default 1)"},
    {"--tolerance", 0, "T",
     "|a - b| <= T * max(1, |a|) where results may differ by rounding (CPU against GPU, "
     "banded reduce tables; default 1e-4)"},
    {"--dump-kernels", 0, "DIR",
     "write the generated fused kernels' sources into DIR, an existing writable folder"},
    {"--verbose", 'v', NULL,
     "also show the engine's notices (every check is printed with or without it)"},
    {NULL, 0, NULL, NULL},
};

static const cli_opt no_opts[] = {{NULL, 0, NULL, NULL}};

static const cli_command commands[] = {
    {"run", "run PIPELINE INPUT... -o DIR [OPTIONS]",
     "run a pipeline over PNG and JPEG files and directories",
     "Runs PIPELINE over each INPUT: PNG and JPEG files, read by their content whatever their "
     "name, directories (their *.png, *.jpg and *.jpeg files, sorted by name; "
     "with --recursive their subfolders too) or '-' for one image on stdin. A file that fails "
     "(unreadable, corrupt, too large, a stage error) is reported and the batch goes on.",
     run_opts,
     "Output names: with one image output, INPUT.png becomes DIR/INPUT.png (INPUT.jpg "
     "DIR/INPUT.jpg, written as JPEG); otherwise "
     "DIR/INPUT.NAME.png for each image output NAME and DIR/INPUT.NAME.csv (or .json) for each "
     "table output; --name sets another template. Directory inputs keep their tree below DIR "
     "({dir}). Two inputs that would get the same name (x.png from two folders) are named "
     "apart: the later one's {stem} becomes x-2, x-3... The same file given twice (x.png "
     "./x.png, -r tree tree/a) is taken once, named as its first occurrence. When DIR is also an "
     "input directory, "
     "files there that are this pipeline's outputs of other inputs there (x.edges.png beside "
     "x.png) are not taken as inputs. Files are written whole or not at all; an input's outputs "
     "appear together; an output never replaces an input, the pipeline file, a --input file "
     "or the joblog (that input fails).\n"
     "Examples:\n"
     "  pipefuse run pipelines/thumbnail.json photos -o out\n"
     "  pipefuse run resize.json -r photos -o out --name '{dir}/thumbs/{stem}_thumb.png'\n"
     "  pipefuse run pipelines/demo.json - -o - <in.png >out.png\n"
     "  pipefuse run resize.json photos -o web --name '{stem}.jpg' --quality 80",
     NULL},
    {"check", "check PIPELINE [OPTIONS]", "validate a pipeline and print its plan",
     "Loads and validates PIPELINE, plans it for an input size and prints each stage, the "
     "fusion groups, the launch units per frame with and without fusion, and the stream each "
     "unit runs on. Exit status 0 when the pipeline is valid.",
     check_opts, NULL, NULL},
    {"bench", "bench PIPELINE [OPTIONS]", "time every execution mode side by side",
     "Runs synthetic frames through PIPELINE in every execution mode (CPU; CUDA eager and graph, "
     "each fused and unfused) and prints launches per frame, median and p99 frame time, submit "
     "cost, bandwidth against the device's copy bandwidth, and whether the pipeline is "
     "launch-bound, memory-bound or compute-bound. Modes that cannot run say why.",
     bench_opts, NULL, NULL},
    {"stages", "stages [NAME]", "list stages and their parameters",
     "Prints every stage (or the one named): its kind, inputs, plugin file, description and "
     "parameters with type, default and range. A misspelt NAME gets the closest stage's name.",
     no_opts, NULL, NULL},
    {"info", "info", "versions, plugins and CUDA devices",
     "Prints the version and plugin ABI, the library's version and file, the plugins loaded, "
     "the CUDA runtime and driver versions and each device with its compute capability, memory "
     "and watchdog.",
     no_opts, NULL, NULL},
    {"plugin", "plugin check LIB.so [OPTIONS]", "check a plugin as a stage author would want",
     "Loads a plugin as the engine would and checks it: the file's permissions, the ABI version "
     "and descriptors, the parameter tables (defaults within range, names unique, docs "
     "present), then every stage on random images: CPU runs, determinism, regions (bands "
     "against the whole image, writes outside the band), fusion with built-in point stages, the "
     "NVRTC compile of point ops (no GPU needed) and, with a CUDA device, CPU against GPU, fused "
     "against unfused and banded against whole on the GPU. Prints one line per check (ok, FAIL "
     "with what to fix, skip, warn) and a summary.",
     plugin_opts, NULL,
     "0 no check failed (GPU checks without a device are skipped, not passed); 1 a check "
     "failed; 2 bad command line or a missing file."},
};
#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static const char exit_status[] =
    "0 every input succeeded; 1 some inputs failed (each is reported and the others are "
    "processed); 2 bad command line, pipeline or plugin, or --backend cuda without a usable GPU: "
    "nothing was processed.";
static const char environment[] =
    "PIPEFUSE_PLUGIN_PATH: more plugin directories (':'-separated), searched after "
    "--plugin-path. PIPEFUSE_CACHE_DIR: where compiled fused kernels are cached (default "
    "$XDG_CACHE_HOME/pipefuse).";

/* ---- Lookup -------------------------------------------------------------------------------- */

const cli_command *cli_find_command(const char *name)
{
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* The option of table t named by a (a long name, or "-x" for a short one), or NULL. */
static const cli_opt *find_opt(const cli_opt *t, const char *a, size_t len)
{
    for (; t && t->lng; t++) {
        if (a[1] == '-' ? strlen(t->lng) == len && strncmp(t->lng, a, len) == 0
                        : len == 2 && t->shrt && a[1] == t->shrt)
            return t;
    }
    return NULL;
}

const cli_opt *cli_find_option(const cli_command *cmd, const char *name)
{
    const cli_opt *o = find_opt(global_opts, name, strlen(name));
    return o ? o : find_opt(cmd ? cmd->opts : NULL, name, strlen(name));
}

/* "(did you mean '--output'?)" for a misspelt option of cmd or the globals, or "". */
static void suggest_opt(const cli_command *cmd, const char *a, size_t len, char *out, size_t n)
{
    const char *names[64];
    int k = 0;
    for (const cli_opt *t = global_opts; t->lng && k < 64; t++)
        names[k++] = t->lng;
    for (const cli_opt *t = cmd ? cmd->opts : NULL; t && t->lng && k < 64; t++)
        names[k++] = t->lng;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(len < 127 ? len : 127), a);
    /* compare without the dashes, so "-output" and "output" find "--output" too */
    const char *bare = name + strspn(name, "-");
    const char *bares[64];
    for (int i = 0; i < k; i++)
        bares[i] = names[i] + 2;
    const char *near = *bare ? pf_closest_name(bare, bares, k) : NULL;
    if (near)
        snprintf(out, n, " (did you mean '--%s'?)", near);
    else
        out[0] = 0;
}

/* ---- Help and the man page ----------------------------------------------------------------- */

/* Prints text wrapped at 80 columns, each line indented by indent (the first by first spaces, or,
   when first <= 0, the text starts at column -first);
   '\n' in text starts a new line. */
static void wrap(FILE *f, const char *text, int first, int indent)
{
    int col = first > 0 ? indent : -first, fresh = 1;
    fprintf(f, "%*s", first > 0 ? first : 0, "");
    for (const char *s = text; *s;) {
        if (*s == ' ') {
            s++;
            continue;
        }
        if (*s == '\n') {
            fprintf(f, "\n%*s", indent, "");
            col = indent, fresh = 1;
            s++;
            continue;
        }
        size_t w = strcspn(s, " \n");
        if (!fresh && col + 1 + (int)w > 80) {
            fprintf(f, "\n%*s", indent, "");
            col = indent, fresh = 1;
        }
        if (!fresh) {
            fputc(' ', f);
            col++;
        }
        fwrite(s, 1, w, f);
        col += (int)w, fresh = 0;
        s += w;
    }
    fputc('\n', f);
}

static void print_opts(FILE *f, const cli_opt *t)
{
    for (; t->lng; t++) {
        char head[64];
        int n =
            snprintf(head, sizeof head, "  %s%c%s%s %s", t->shrt ? "-" : "",
                     t->shrt ? t->shrt : ' ', t->shrt ? ", " : "  ", t->lng, t->arg ? t->arg : "");
        if (!t->shrt)
            n = snprintf(head, sizeof head, "      %s %s", t->lng, t->arg ? t->arg : "");
        fputs(head, f);
        if (n >= 28) {
            fputc('\n', f);
            wrap(f, t->help, 28, 28);
        } else {
            wrap(f, t->help, 28 - n, 28);
        }
    }
}

void cli_help(const cli_command *cmd, FILE *f)
{
    if (!cmd) {
        fprintf(f, "usage: pipefuse [GLOBAL OPTIONS] COMMAND [ARGS] [OPTIONS]\n\ncommands:\n");
        for (int i = 0; i < N_COMMANDS; i++)
            fprintf(f, "  %-32s %s\n", commands[i].synopsis, commands[i].summary);
        fprintf(f, "\nglobal options (before or after the command):\n");
        print_opts(f, global_opts);
        fprintf(f, "\nOptions take GNU forms: --output DIR, --output=DIR, -o DIR, -oDIR; '--' ends "
                   "options.\n'pipefuse COMMAND --help' describes a command; 'man pipefuse' "
                   "all of them.\n\nExit status: ");
        wrap(f, exit_status, -13, 0);
        return;
    }
    fprintf(f, "usage: pipefuse %s\n\n", cmd->synopsis);
    wrap(f, cmd->description, 0, 0);
    if (cmd->opts[0].lng) {
        fprintf(f, "\noptions:\n");
        print_opts(f, cmd->opts);
    }
    fprintf(f, "\nglobal options:\n");
    print_opts(f, global_opts);
    if (cmd->notes) {
        fputc('\n', f);
        wrap(f, cmd->notes, 0, 0);
    }
    fprintf(f, "\nExit status: ");
    wrap(f, cmd->exit_status ? cmd->exit_status : exit_status, -13, 0);
}

/* roff text: a leading '.' or '\'' would be a request, '\' an escape, '-' a hyphen. */
static void roff(FILE *f, const char *s)
{
    int bol = 1;
    for (; *s; s++) {
        if (bol && (*s == '.' || *s == '\''))
            fputs("\\&", f);
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
        bol = *s == '\n';
    }
}

static void man_opts(FILE *f, const cli_opt *t)
{
    for (; t->lng; t++) {
        fputs(".TP\n\\fB", f);
        if (t->shrt)
            fprintf(f, "\\-%c\\fR, \\fB", t->shrt);
        roff(f, t->lng);
        fputs("\\fR", f);
        if (t->arg) {
            fputs(" \\fI", f);
            roff(f, t->arg);
            fputs("\\fR", f);
        }
        fputc('\n', f);
        roff(f, t->help);
        fputc('\n', f);
    }
}

void cli_man(FILE *f)
{
    fprintf(f, ".TH PIPEFUSE 1 \"\" \"pipefuse %s\" \"User Commands\"\n", PF_VERSION_STRING);
    fputs(".SH NAME\npipefuse \\- run image pipelines over PNG files, fused on the GPU\n", f);
    fputs(".SH SYNOPSIS\n", f);
    for (int i = 0; i < N_COMMANDS; i++) {
        fputs(".B pipefuse\n", f);
        roff(f, commands[i].synopsis);
        fputs("\n.br\n", f);
    }
    fputs(".SH DESCRIPTION\npipefuse reads a pipeline of image\\-processing stages from a JSON "
          "file, loads the stages from plugins, fuses adjacent elementwise stages into one pass "
          "and runs the result over PNG files, on a CUDA GPU where one is usable and on the CPU "
          "otherwise.\nOptions take GNU forms (\\fB\\-\\-output DIR\\fR, "
          "\\fB\\-\\-output=DIR\\fR, \\fB\\-o DIR\\fR, \\fB\\-oDIR\\fR) and may come before or "
          "after the command's arguments; \\fB\\-\\-\\fR ends options.\n",
          f);
    fputs(".SH GLOBAL OPTIONS\n", f);
    man_opts(f, global_opts);
    for (int i = 0; i < N_COMMANDS; i++) {
        const cli_command *c = &commands[i];
        fputs(".SH ", f);
        for (const char *s = c->name; *s; s++)
            fputc(*s - 32, f); /* section titles in capitals */
        fputs("\n.B pipefuse\n", f);
        roff(f, c->synopsis);
        fputs("\n.PP\n", f);
        roff(f, c->description);
        fputc('\n', f);
        man_opts(f, c->opts);
        if (c->notes) {
            fputs(".PP\n", f);
            for (const char *s = c->notes; *s;) { /* an example per line */
                size_t n = strcspn(s, "\n");
                char line[1024];
                snprintf(line, sizeof line, "%.*s", (int)(n < 1023 ? n : 1023), s);
                roff(f, line[0] == ' ' ? line + strspn(line, " ") : line);
                fputs(line[0] == ' ' ? "\n.br\n" : "\n.PP\n", f);
                s += n + (s[n] == '\n');
            }
        }
        if (c->exit_status) {
            fputs(".PP\nExit status: ", f);
            roff(f, c->exit_status);
            fputc('\n', f);
        }
    }
    fputs(".SH EXIT STATUS\n", f);
    roff(f, exit_status);
    fputs("\n.SH ENVIRONMENT\n", f);
    roff(f, environment);
    fputs("\n.SH FILES\nExample pipelines are installed in \\fIshare/pipefuse/pipelines\\fR and "
          "the documentation (the README, and the pipeline format, writing plugins, "
          "performance and the other guides in its \\fIdocs\\fR folder) in "
          "\\fIshare/doc/pipefuse\\fR below the installation prefix.\n",
          f);
}

/* ---- Parsing ------------------------------------------------------------------------------- */

static int push_arg(cli_args *r, const char *s)
{
    if (r->argc + 2 > r->cap) {
        int cap = r->cap ? r->cap * 2 : 16;
        char **v = realloc(r->argv, sizeof(char *) * (size_t)cap);
        if (!v)
            return -1;
        r->argv = v;
        r->cap = cap;
    }
    r->argv[r->argc++] = (char *)s;
    r->argv[r->argc] = NULL;
    return 0;
}

void cli_args_free(cli_args *r)
{
    free(r->argv);
    memset(r, 0, sizeof *r);
}

/* ---- Numbers ---------------------------------------------------------------------------- */

/* strtoll and strtod take leading spaces, a '+', hex and "inf": an option's value is
   plain digits, so those are refused before they are parsed. */
int cli_parse_size(const char *s, pf_shape *out)
{
    const char *x = s ? strpbrk(s, "xX") : NULL;
    char w_text[32];
    long long w, h;
    if (!x || (size_t)(x - s) >= sizeof w_text)
        return -1;
    snprintf(w_text, sizeof w_text, "%.*s", (int)(x - s), s);
    if (cli_parse_int(w_text, 1, 1 << 20, &w) != 0 || cli_parse_int(x + 1, 1, 1 << 20, &h) != 0)
        return -1;
    out->width = (int)w;
    out->height = (int)h;
    return 0;
}

int cli_size_option(const char *who, const char *s, pf_shape *out)
{
    if (cli_parse_size(s, out) == 0)
        return 0;
    fprintf(stderr,
            "pipefuse %s: --size %s: expected WIDTHxHEIGHT, each a whole number from 1 to "
            "1048576, such as 1920x1080\n",
            who, s);
    return -1;
}

int cli_apply_set(pf_pipeline *p, const char *set, char *err, size_t err_size)
{
    char key[512];
    const char *eq = strchr(set, '=');
    if (!eq || (size_t)(eq - set) >= sizeof key) {
        snprintf(err, err_size, "--set %s: expected ID.PARAM=VALUE", set);
        return -1;
    }
    memcpy(key, set, (size_t)(eq - set));
    key[eq - set] = 0;
    if (pf_pipeline_set_param(p, key, eq + 1) != PF_OK) {
        snprintf(err, err_size, "%s", pf_pipeline_errmsg(p));
        return -1;
    }
    return 0;
}

int cli_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    const char *d = s && *s == '-' && lo < 0 ? s + 1 : s;
    if (!d || !isdigit((unsigned char)*d))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_real(const char *s, double lo, double hi, double *out)
{
    const char *d = s && *s == '-' && lo < 0 ? s + 1 : s;
    if (!d || !(isdigit((unsigned char)*d) || (*d == '.' && isdigit((unsigned char)d[1]))))
        return -1;
    for (const char *c = d; *c; c++)
        if (*c == 'x' || *c == 'X')
            return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno == ERANGE || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int usage(const cli_command *cmd, const char *fmt, const char *a, size_t len,
                 const char *hint)
{
    fprintf(stderr, "pipefuse%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
    fprintf(stderr, fmt, (int)len, a);
    fprintf(stderr, "%s (see pipefuse %s%s--help)\n", hint, cmd ? cmd->name : "", cmd ? " " : "");
    return PF_EXIT_USAGE;
}

int cli_unknown_option(const char *cmd, const char *arg)
{
    fprintf(stderr, "pipefuse %s: unknown option '%s'%s (see pipefuse %s --help)\n", cmd, arg,
            strcmp(cmd, "check") == 0 || strcmp(cmd, "bench") == 0
                ? "; a pipeline file whose name starts with '-' goes after --"
            : strcmp(cmd, "run") == 0 ? "; a file whose name starts with '-' goes after --"
                                      : "",
            cmd);
    return PF_EXIT_USAGE;
}

static int set_global(const cli_opt *o, const char *v, cli_common *c)
{
    if (strcmp(o->lng, "--plugin-path") == 0) {
        c->plugin_path = v;
    } else if (strcmp(o->lng, "--threads") == 0) {
        long long t;
        if (cli_parse_int(v, 0, 1024, &t) != 0) {
            fprintf(stderr, "pipefuse: --threads %s: expected 0 (one per core) to 1024\n", v);
            return PF_EXIT_USAGE;
        }
        c->threads = (int)t;
    } else if (strcmp(o->lng, "--backend") == 0) {
        if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda")) {
            fprintf(stderr, "pipefuse: --backend %s: expected auto, cpu or cuda\n", v);
            return PF_EXIT_USAGE;
        }
        c->backend = v;
    } else if (strcmp(o->lng, "--precision") == 0) {
        if (strcmp(v, "exact") && strcmp(v, "fast")) {
            fprintf(stderr, "pipefuse: --precision %s: expected exact or fast\n", v);
            return PF_EXIT_USAGE;
        }
        c->precision = v;
    } else if (strcmp(o->lng, "--quiet") == 0) {
        c->quiet = 1;
    }
    return -1;
}

/* One option argument a (of argv[*i]) with its value, if it takes one, from "=value",
   the rest of a short option, or the next argument. */
static int take_option(const cli_command *cmd, int argc, char **argv, int *i, cli_common *c,
                       cli_args *r, int *want)
{
    const char *a = argv[*i];
    int is_long = a[1] == '-';
    size_t len = is_long ? strcspn(a, "=") : 2;
    const cli_opt *o = find_opt(global_opts, a, len), *g = o;
    if (!o && cmd)
        o = find_opt(cmd->opts, a, len);
    if (!o) {
        char hint[160];
        suggest_opt(cmd, a, is_long ? len : strlen(a), hint, sizeof hint);
        if (!hint[0] && cmd) { /* not a typo of a known one: the subcommand's parser decides */
            if (is_long && a[len] == '=') { /* "--opt=value": split in place */
                argv[*i][len] = 0;
                return push_arg(r, a) == 0 && push_arg(r, a + len + 1) == 0 ? -1 : PF_EXIT_USAGE;
            }
            return push_arg(r, a) == 0 ? -1 : PF_EXIT_USAGE;
        }
        return usage(cmd, "unknown option '%.*s'", a, is_long ? len : strlen(a), hint);
    }
    const char *v = NULL;
    if (is_long && a[len] == '=') {
        if (!o->arg)
            return usage(cmd, "option '%.*s' takes no value", a, len, "");
        v = a + len + 1;
    } else if (!is_long && a[2]) {
        if (o->arg) {
            v = a + 2;
        } else { /* -qr: flags together */
            for (const char *s = a + 1; *s; s++) {
                char one[3] = {'-', *s, 0};
                const cli_opt *f = find_opt(global_opts, one, 2);
                const cli_opt *fg = f;
                if (!f && cmd)
                    f = find_opt(cmd->opts, one, 2);
                if (!f || f->arg)
                    return usage(cmd, "unknown option '%.*s'", a, strlen(a),
                                 f ? ": only flags can be written together" : "");
                if (fg && strcmp(f->lng, "--help") == 0)
                    *want = *want ? *want : 'h';
                else if (fg)
                    set_global(f, NULL, c);
                else if (push_arg(r, f->lng) != 0)
                    return PF_EXIT_USAGE;
            }
            return -1;
        }
    } else if (o->arg) {
        if (*i + 1 >= argc)
            return usage(cmd, "option '%.*s' needs a value", o->lng, strlen(o->lng), "");
        v = argv[++*i];
    }
    if (g && (strcmp(g->lng, "--help") == 0 || strcmp(g->lng, "--version") == 0)) {
        if (!*want) /* the first of --help and --version wins */
            *want = g->lng[2] == 'h' ? 'h' : 'v';
        return -1;
    }
    if (g) /* run gets -q and --backend back at the end (cli_parse) */
        return set_global(g, v, c);
    if (push_arg(r, o->lng) != 0 || (v && push_arg(r, v) != 0))
        return PF_EXIT_USAGE;
    return -1;
}

/* "pipefuse: unknown command 'rn' (did you mean 'run'?); the commands are ...", exit 2. */
static int unknown_command(const char *a)
{
    const char *names[N_COMMANDS];
    for (int k = 0; k < N_COMMANDS; k++)
        names[k] = commands[k].name;
    fprintf(stderr, "pipefuse: unknown command '%s'", a);
    cli_say_names(a, "commands", names, N_COMMANDS);
    return PF_EXIT_USAGE;
}

void cli_say_names(const char *name, const char *plural, const char *const *names, int n)
{
    const char *near = pf_closest_name(name, names, n);
    if (near)
        fprintf(stderr, " (did you mean '%s'?)", near);
    fprintf(stderr, "; the %s are", plural);
    for (int k = 0; k < n; k++)
        fprintf(stderr, "%s %s", k ? "," : "", names[k]);
    fputc('\n', stderr);
}

int cli_parse(int argc, char **argv, cli_common *c, cli_args *r)
{
    memset(r, 0, sizeof *r);
    const cli_command *cmd = NULL;
    int want = 0, ended = 0; /* want: 'h' --help, 'v' --version, the first given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!ended && strcmp(a, "--") == 0) {
            ended = 1;
            if (cmd && push_arg(r, "--") != 0)
                return PF_EXIT_USAGE;
        } else if (!ended && a[0] == '-' && a[1]) {
            if (!cmd && strcmp(a, "--man") == 0) {
                cli_man(stdout);
                return PF_EXIT_OK;
            }
            int rc = take_option(cmd, argc, argv, &i, c, r, &want);
            if (rc >= 0)
                return rc;
        } else if (!cmd) {
            if (strcmp(a, "help") == 0) { /* pipefuse help [COMMAND] */
                want = 'h';
                if (i + 1 < argc && !(cmd = r->cmd = cli_find_command(argv[i + 1])))
                    return unknown_command(argv[i + 1]);
                break;
            }
            cmd = cli_find_command(a);
            if (!cmd)
                return unknown_command(a);
            r->cmd = cmd;
            /* `pipefuse -- run ...`: what follows is the command's, and no option either */
            if (ended && push_arg(r, "--") != 0)
                return PF_EXIT_USAGE;
        } else if (push_arg(r, a) != 0) {
            return PF_EXIT_USAGE;
        }
    }
    if (want == 'v') {
        printf("pipefuse %s (library %s, plugin ABI %d.%d)\n", PF_VERSION_STRING,
               pf_version_string(), PF_ABI_MAJOR, PF_ABI_MINOR);
        return PF_EXIT_OK;
    }
    if (want == 'h') {
        cli_help(cmd, stdout);
        return PF_EXIT_OK;
    }
    if (!cmd) {
        cli_help(NULL, stderr);
        return PF_EXIT_USAGE;
    }
    /* run takes the global -q (no progress either), --backend and --precision as its own
       options, first (before a "--") */
    int first = r->argc;
    if (strcmp(cmd->name, "run") == 0 &&
        ((c->quiet && push_arg(r, "--quiet") != 0) ||
         (c->backend && (push_arg(r, "--backend") != 0 || push_arg(r, c->backend) != 0)) ||
         (c->precision && (push_arg(r, "--precision") != 0 || push_arg(r, c->precision) != 0))))
        return PF_EXIT_USAGE;
    for (int k = first; k < r->argc; k++) { /* rotate them to the front */
        char *a = r->argv[k];
        memmove(r->argv + (k - first) + 1, r->argv + (k - first), sizeof(char *) * (size_t)first);
        r->argv[k - first] = a;
    }
    if (!r->argv && !(r->argv = calloc(1, sizeof(char *)))) /* an empty argv */
        return PF_EXIT_USAGE;
    return -1;
}

/* ---- What the engine logs, kept ------------------------------------------------------------ */

/* The engine has no query for an input that no output uses; it says so when the
   pipeline loads ("...: input 'x' is not used by any output"), and such an input needs
   no file. Kept from every log callback (this process's loads are of one pipeline). */
/* ---- Checks made before any work ----------------------------------------------------------- */

int cli_take_stdout(void)
{
    fflush(stdout);
    int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return -1;
    if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int cli_check_dump_dir(const char *who, const char *dir)
{
    struct stat st;
    const char *why = NULL;
    if (!*dir)
        why = "an empty name";
    else if (stat(dir, &st) != 0)
        why = errno == ENOENT ? "no such directory (create it first)" : strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = "not a directory";
    else if (access(dir, W_OK | X_OK) != 0)
        why = errno == EACCES || errno == EROFS ? "the directory is not writable" : strerror(errno);
    if (!why)
        return 0;
    fprintf(stderr, "pipefuse %s: --dump-kernels %s: %s\n", who, dir, why);
    return -1;
}

/* The notices the engine prints (level 0) are hidden by -q. */
void cli_log(void *user, int level, const char *msg)
{
    const cli_common *c = user;
    if (level == 0 && c && c->quiet)
        return;
    static const char *const prefix[] = {"", "warning: ", "error: "};
    fprintf(stderr, "pipefuse: %s%s\n", prefix[level < 0 ? 0 : (level > 2 ? 2 : level)], msg);
}

/* `--backend cuda` where the CUDA backend cannot run: refused once, before any file. */
int cli_require_backend(pf_engine *e, const char *backend, const char *who)
{
    char why[512];
    if (!backend || strcmp(backend, "cuda") != 0 || pf_engine_cuda_usable(e, why, sizeof why))
        return 0;
    fprintf(stderr,
            "pipefuse %s: --backend cuda: %s; use --backend auto or cpu to run on the CPU\n", who,
            why);
    return -1;
}
