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
    int quiet;           /* -q: no progress and no notices */
    const char *backend; /* --backend auto|cpu|cuda, or NULL */
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
    const cli_opt *opts; /* ends with a NULL lng */
    const char *notes;   /* after the options; lines starting with two spaces: examples */
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
void cli_help(const cli_command *cmd, FILE *f); /* NULL: the overview */
void cli_man(FILE *f);                          /* the man page, roff */
/* The engine's log callback; user is the cli_common (its quiet hides notices). */
void cli_log(void *user, int level, const char *msg);
/* 0, or -1 after printing why when backend is "cuda" and the CUDA backend cannot run. */
int cli_require_backend(pf_engine *e, const char *backend, const char *who);

pf_engine *cli_engine(const cli_common *c);
int cli_run(int argc, char **argv, const cli_common *c);
/* `pipefuse run` from the normalised arguments (inputs.c): inputs, names, stdin and
   stdout, then cli_run. */
int cli_run_main(int argc, char **argv, const cli_common *c);
/* `pipefuse plugin check LIB.so` (plugin_check.c); argv[0] is the subcommand. */
int cli_plugin(int argc, char **argv, const cli_common *c);
int cli_bench(int argc, char **argv, const cli_common *c);

#endif
