/* samples/plugin/profile.h: the `profile` summing reduce's params and the function that
 * makes each entry of its table from its sum: its point source
 * (pipefuse_add_plugin(... POINT_OPS profile.h)) and its reduce_finish.
 *
 * The engine computes a summing reduce on the GPU itself: the sums of the input's pixels
 * along every row (reduce_sum PF_REDUCE_SUM_ROWS), added on the device; where the table
 * is not the sum itself but a function of it (here the mean, the sum divided by the
 * pixels of the row), the stage names that function with reduce_finish and the engine's
 * kernel applies it to each entry once the sums are complete. combine (darkroom.c) calls
 * it too, so the CPU's table and the GPU's are the same function of the same sums. It
 * follows the rules of a point-op header: only pipefuse/point.h, PF_POINT_FN.
 */
#ifndef DARKROOM_PROFILE_H
#define DARKROOM_PROFILE_H

#include "pipefuse/point.h"

typedef struct profile_params {
    int mean; /* bool: each row's mean instead of its sum */
} profile_params;

/* Entry (row, column) of the table from its sum over a row of width pixels. */
PF_POINT_FN double profile_finish(const profile_params *p, double sum, int row, int column,
                                  int width, int height)
{
    (void)row, (void)column, (void)height;
    return p->mean ? sum / (double)width : sum;
}

#endif /* DARKROOM_PROFILE_H */
