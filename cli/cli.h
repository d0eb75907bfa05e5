/* cli/cli.h: what the pipefuse command's files share. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include "pipefuse/pipefuse.h"
#include "pipefuse/png.h"

/* Exit codes (documented in README.md and `pipefuse --help`). */
enum {
    PF_EXIT_OK = 0,     /* everything succeeded */
    PF_EXIT_FAILED = 1, /* some inputs failed; the others were processed */
    PF_EXIT_USAGE = 2,  /* bad command line, pipeline or plugin: nothing was processed */
};

/* Engine options every subcommand takes. */
typedef struct cli_common {
    const char *plugin_path;
    int threads;
} cli_common;

pf_engine *cli_engine(const cli_common *c);
int cli_run(int argc, char **argv, const cli_common *c);
/* `pipefuse plugin check LIB.so` (plugin_check.c); argv[0] is the subcommand. */
int cli_plugin(int argc, char **argv, const cli_common *c);
int cli_bench(int argc, char **argv, const cli_common *c);

#endif
