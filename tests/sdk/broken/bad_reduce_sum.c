/* tests/sdk/broken/bad_reduce_sum.c: a reduce stage declaring reduce_sum 3, a sum the
 * engine does not know (ABI 1.3 has 0, PF_REDUCE_SUM_COLUMNS and PF_REDUCE_SUM_ROWS): the
 * engine refuses it. */
#include "common.h"

COUNT_STAGE("sdk_bad_reduce_sum", 3 /* the fault */)
PF_DEFINE_PLUGIN("bad_reduce_sum", "1.0", "an unknown reduce_sum", stages)
