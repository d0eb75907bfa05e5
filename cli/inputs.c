/* cli/inputs.c: `pipefuse run` as the user writes it, turned into the batch run.c
 * carries out. */
#include <string.h>

#include "cli.h"

int cli_run_main(int argc, char **argv, const cli_common *c)
{
    if (c->backend && strcmp(c->backend, "cuda") == 0) {
        pf_engine *e = cli_engine(c);
        int bad = !e || cli_require_backend(e, c->backend, "run") != 0;
        pf_engine_destroy(e);
        if (bad)
            return PF_EXIT_USAGE;
    }
    return cli_run(argc, argv, c);
}
