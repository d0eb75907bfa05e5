/* tests/sdk/broken/undocumented.c: a stage and a parameter without doc strings. The
 * engine loads it; `plugin check` insists on docs. */
#include "common.h"

GAIN_STAGE("sdk_undocumented", NULL, 1, NULL) /* the fault: the NULLs */
PF_DEFINE_PLUGIN("undocumented", "1.0", "no docs on the stage or its parameter", stages)
