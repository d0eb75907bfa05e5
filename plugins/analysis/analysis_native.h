/* plugins/analysis/analysis_native.h: colsum, rowsum and stats in the frame's own format
 * (analysis_native.c), for analysis.c's descriptors. */
#ifndef PF_PLUGIN_ANALYSIS_NATIVE_H
#define PF_PLUGIN_ANALYSIS_NATIVE_H

#include "pipefuse/plugin.h"

/* A stats band's partial: per channel, count, mean, M2 (sum of squared deviations from
   the mean), min and max of its non-NaN samples. */
enum { ST_N, ST_MEAN, ST_M2, ST_MIN, ST_MAX, ST_FIELDS };

/* pf_stage_desc.native_ok and run_native of colsum, rowsum and stats: 8- and 16-bit
   frames, the same partials as run_cpu on the float image the engine would load. */
int analysis_native_ok(const void *params);
int colsum_native(const pf_native_args *a);
int rowsum_native(const pf_native_args *a);
int stats_native(const pf_native_args *a);

#endif /* PF_PLUGIN_ANALYSIS_NATIVE_H */
