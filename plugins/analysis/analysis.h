/* plugins/analysis/analysis.h: params and table layout of the analysis family (reduce
 * stages), shared by the plugin and its tests. Fields are float or int only. */
#ifndef PF_PLUGIN_ANALYSIS_H
#define PF_PLUGIN_ANALYSIS_H

#define PF_HISTOGRAM_MAX_BINS 65536

typedef struct pf_histogram_params {
    int bins; /* value v counts in bin clamp(floor(v * bins), 0, bins - 1) */
} pf_histogram_params;

/* colsum, rowsum and stats take no params. Every table has the columns r, g, b, a. */

/* Rows of the stats table. */
enum { PF_STATS_MIN, PF_STATS_MAX, PF_STATS_MEAN, PF_STATS_STDDEV, PF_STATS_ROWS };

#endif /* PF_PLUGIN_ANALYSIS_H */
