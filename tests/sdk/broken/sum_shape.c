/* tests/sdk/broken/sum_shape.c: a reduce stage declaring a sum by columns whose table is
 * 1x1, not 4 columns and a row per input column. The engine loads it (and never sums it
 * itself: the shape does not fit); `plugin check` fails the declaration. */
#include "common.h"

COUNT_STAGE("sdk_sum_shape", PF_REDUCE_SUM_COLUMNS /* the fault: a 1x1 table */)
PF_DEFINE_PLUGIN("sum_shape", "1.0", "a reduce_sum whose table is not a sum's", stages)
