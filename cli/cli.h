/* cli/cli.h: what the pipefuse command's files share. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include "pipefuse/pipefuse.h"
#include "pipefuse/png.h"

#include <stdio.h>

/* Exit codes (documented in README.md and `pipefuse --help`). */
enum {
    PF_EXIT_OK = 0,     /* everything succeeded */
    PF_EXIT_FAILED = 1, /* some inputs failed; the others were processed */
    PF_EXIT_USAGE = 2,  /* bad command line, pipeline or plugin: nothing was processed */
};

/* Options every subcommand takes, before or after its name (args.c). */
typedef struct cli_common {
    const char *plugin_path;
    int threads;
    int quiet;             /* -q: no progress and no notices */
    const char *backend;   /* --backend auto|cpu|cuda, or NULL */
    const char *precision; /* --precision exact|fast, or NULL (the pipeline's) */
} cli_common;

/* ---- The command line (args.c) ---- */

typedef struct cli_opt {
    const char *lng;  /* "--output" */
    char shrt;        /* 'o', or 0 */
    const char *arg;  /* the value's name in help ("DIR"); NULL: a flag */
    const char *help; /* one paragraph */
} cli_opt;

typedef struct cli_command {
    const char *name, *synopsis, *summary, *description;
    const cli_opt *opts;     /* ends with a NULL lng */
    const char *notes;       /* after the options; lines starting with two spaces: examples */
    const char *exit_status; /* the command's own exit status text; NULL: the common one */
} cli_command;

/* A subcommand's normalised arguments: options as "--name" ("-o" as "--output") and
   their value as the next argument, positional arguments in order, NULL-terminated. */
typedef struct cli_args {
    const cli_command *cmd;
    int argc, cap;
    char **argv; /* points into the program's argv and the option tables */
} cli_args;

/* Parses argv (argv[0] the program) into c and r. Returns -1 when r->cmd should run,
   else the exit status (help, version, usage errors, which are printed). */
int cli_parse(int argc, char **argv, cli_common *c, cli_args *r);
void cli_args_free(cli_args *r);
const cli_command *cli_find_command(const char *name);
/* The option of cmd or the global ones named name ("--output" or "-o"), or NULL. */
const cli_opt *cli_find_option(const cli_command *cmd, const char *name);
void cli_help(const cli_command *cmd, FILE *f); /* NULL: the overview */
void cli_man(FILE *f);                          /* the man page, roff */
/* The crash guard of the pipefuse process itself (not of run's worker, which has its
   own isolation): plugin code runs here while plugins load (entry points) and while
   pipelines load and plan (a stage's check, radius and shape functions). A crash there
   prints "pipefuse: crashed (SIGSEGV) while <doing>", names the likely cause and how to
   find the plugin, and exits with PF_EXIT_USAGE. cli_doing sets <doing> (printf-like);
   cli_guard_off restores the handlers there were (a forked child that runs on). */
void cli_guard_on(void);
void cli_guard_off(void);
void cli_doing(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The engine's log callback; user is the cli_common (its quiet hides notices). */
void cli_log(void *user, int level, const char *msg);
/* For output a program reads from stdout (check --dot -, run -o -): points the
   process's stdout at stderr, so that nothing else (a notice, a plugin's printf) mixes
   into it, and returns a close-on-exec descriptor of the real stdout for that output
   alone; -1 on failure (errno). */
int cli_take_stdout(void);
/* 0 when dir (--dump-kernels) is an existing, writable directory; else -1 after
   printing why, as "pipefuse WHO: --dump-kernels DIR: why". */
int cli_check_dump_dir(const char *who, const char *dir);
/* 0, or -1 after printing why when backend is "cuda" and the CUDA backend cannot run. */
int cli_require_backend(pf_engine *e, const char *backend, const char *who);

pf_engine *cli_engine(const cli_common *c);
int cli_run(int argc, char **argv, const cli_common *c);
/* For messages and the joblog: the file stdin was spooled to (shown as "-") and the
   folder whose output goes to stdout (NULL: none); set before cli_run. */
void cli_run_stdio(const char *stdin_path, const char *stdout_dir);
/* `pipefuse run` from the normalised arguments (inputs.c): inputs, names, stdin and
   stdout, then cli_run. */
int cli_run_main(int argc, char **argv, const cli_common *c);

/* ---- Output names (names.c) ---- */

/* The name of an output of input (relative to -o DIR, may hold '/'), malloc'd; NULL
   without memory. single_image: the pipeline's one image output. Inputs that
   cli_names_add did not register are named from their own file name. */
char *cli_output_name(const char *input, const char *output, const char *ext, int single_image);
/* final: OUTDIR/name; temp: a hidden name in the same folder. -1 when too long. */
int cli_output_path(const char *outdir, const char *input, const char *output, const char *ext,
                    int single_image, char *final, char *temp, size_t size);
/* Sets the --name template (NULL: the default) after checking that it is relative,
   names only known fields and gives the n outputs different names. */
int cli_names_check(const char *tmpl, const char *const *outputs, const char *const *exts, int n,
                    int single_image, char *err, size_t errn);
/* Registers an input (the path batch/run.c gets, copied) and its folder below its directory
   argument ("", "a/b" or "a/b/"); cli_names_finish then makes names unique and must come
   before lookups. */
int cli_names_add(const char *input, const char *dir);
/* An input's folder and stem as its outputs are named from ("a/b/x-2", "x"), malloc'd:
   what the joblog records, so that a retry names the input as its first run did. */
char *cli_output_key(const char *input);
/* Names input from a key of cli_output_key (after cli_names_finish; never renamed). */
int cli_names_fix(const char *input, const char *key);
/* 0 when a rendered output name is relative, stays below -o DIR and is not a temporary's
   name; else -1 with why in err. */
int cli_name_check(const char *name, char *err, size_t errn);
/* What an output name's extension says (cli_format_of_name, the one place it is read,
   case-insensitive): NONE for no extension or one that names no format ("x.result"). */
typedef enum cli_format {
    CLI_FMT_NONE,
    CLI_FMT_PNG,
    CLI_FMT_JPEG, /* .jpg, .jpeg */
    CLI_FMT_CSV,
    CLI_FMT_JSON,
    CLI_FMT_OTHER /* .tif, .webp, ...: a format this program does not write */
} cli_format;
/* The format name's extension says; *ext (may be NULL) gets the extension or NULL. */
cli_format cli_format_of_name(const char *name, const char **ext);
/* 0 when name (rendered, or a template rendered with a sample stem) suits output, whose
   own format is out_ext ("png", CLI_EXT_PNG_ONLY, "csv", "json"): an image's format follows
   its name where the name says a format written here (PNG only for CLI_EXT_PNG_ONLY), a
   table's name agrees with its format; else -1 with why (naming the name, the output and
   what to write) in err. */
int cli_format_check(const char *name, const char *output, const char *out_ext, char *err,
                     size_t errn);
/* The extension of an image output only PNG holds (images.h, cli_png_only): named .png
   whatever the input's format and --format; "png" is an image output that follows them. */
#define CLI_EXT_PNG_ONLY "png!"
/* Temporary files of runs in OUTDIR start with this (batch/outfile.c); no output may. */
#define OUT_TMP_PREFIX ".pftmp-"
/* The records of what made the outputs (freshness.c), in OUTDIR; no output may take it. */
#define OUT_RECORDS ".pipefuse-manifest"
/* Gives input (added, not yet finished) the stem of key (cli_output_key, from the output
   folder's records) where it is in the key's folder: named before the others, who are
   named around it. */
int cli_names_pin(const char *input, const char *key);
/* A folder and stem (a record's key, "a/b/x" or "x") that an input not in this batch holds
   in the output folder's records: no input of the batch is named so. 0, or -1 without
   memory. Before cli_names_finish; cli_names_free forgets them. */
int cli_names_reserve(const char *key);
int cli_names_finish(int quiet);
void cli_names_free(void);
/* Creates -o DIR and the folders above it, *made counting those it made; -1 with the
   message (naming -o and the part that is in the way) in err and nothing left made.
   cli_unmake_outdir removes the made folders again while they are empty: a command
   refused after -o DIR was made leaves no folder behind. */
int cli_make_outdir(const char *dir, int *made, char *err, size_t errn);
void cli_unmake_outdir(const char *dir, int made);
/* Creates the folders below the output folder (dirfd; outdir for messages) that name
   needs, never through a symbolic link (refused, named). */
int cli_names_mkdirs(int dirfd, const char *outdir, const char *name, char *err, size_t errn);
/* `pipefuse plugin check LIB.so` (plugin_check.c); argv[0] is the subcommand. */
int cli_plugin(int argc, char **argv, const cli_common *c);
int cli_bench(int argc, char **argv, const cli_common *c);
/* "pipefuse CMD: unknown option 'ARG' (see ...; a file whose name starts with '-' goes
   after --)"; returns PF_EXIT_USAGE. For what the option tables did not take. */
int cli_unknown_option(const char *cmd, const char *arg);
/* ---- Numbers on the command line (args.c) ---- */

/* s as a whole decimal integer in [lo, hi]: digits only (a '-' only where lo < 0), no
   spaces, no text after it, no overflow. 0, or -1 (the caller names the option). */
int cli_parse_int(const char *s, long long lo, long long hi, long long *out);
/* "WIDTHxHEIGHT", each side 1 to 2^20 (cli_parse_int's rules): 0, or -1. */
int cli_parse_size(const char *s, pf_shape *out);
/* cli_parse_size for the option --size of command who: on failure "pipefuse WHO: --size S:
   expected WIDTHxHEIGHT, ..." on stderr and -1. */
int cli_size_option(const char *who, const char *s, pf_shape *out);
/* One --set ID.PARAM=VALUE applied to p as run and check take it: 0, or -1 with why in
   err ("--set S: expected ID.PARAM=VALUE", or the pipeline's message). */
int cli_apply_set(pf_pipeline *p, const char *set, char *err, size_t err_size);
/* After a message about an unknown name (a command, a mode): " (did you mean 'x'?); the
   PLURAL are a, b, c" and a newline, on stderr. */
void cli_say_names(const char *name, const char *plural, const char *const *names, int n);
/* The same for a decimal real number (no hex, inf or nan). */
int cli_parse_real(const char *s, double lo, double hi, double *out);

/* A frame format by name: gray8, graya8, rgb8, rgba8, the same with 16 or f. 0, or -1. */
int cli_parse_format(const char *s, pf_sample *sample, int *channels);

#endif
