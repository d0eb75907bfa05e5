/* engine/cpu_lut.h: point units run as table lookups on the CPU (cpu_lut.c).
 *
 * A fused point unit that reads one caller frame of 8- or 16-bit samples, whose members
 * are all PF_STAGE_PER_CHANNEL and which stores one caller frame is a function of one
 * input sample per output channel. The executor runs the unit once over a row holding
 * every code value and keeps what it stores as one table per output channel; frames
 * then go through the tables, native samples in, native samples out. */
#ifndef PF_CPU_LUT_H
#define PF_CPU_LUT_H

#include "internal.h"

typedef struct pf_cpu_lut pf_cpu_lut;
typedef struct pf_cpu_luts pf_cpu_luts;

/* Runs the unit over row 0 of in (width codes, one row; in2 too for two inputs, or
   NULL) into row 0 of out, the way it runs over frames: the tables are what it stores
   there. 0 or a status. */
typedef int (*pf_cpu_lut_build_fn)(void *ctx, const pf_frame *in, const pf_frame *in2,
                                   const pf_frame *out);

/* Whether a unit reading frame in (and in2, or NULL) and storing frame out can run
   through tables: 8- or 16-bit input samples (two inputs: both 8-bit of the same
   channels, tabulated over all 65536 pairs of codes), an output channel map that reads
   one input channel per output channel (no colour input to a gray output) and at least
   as many pixels as codes (so that building the tables never costs more than the frame
   itself). */
int pf_cpu_lut_fits(const pf_frame *in, const pf_frame *in2, const pf_frame *out);

/* Unit `unit`'s tables (of n_units) for the frames' formats and parameter version
   `version`: the kept ones, or built with build(ctx, ...) when missing or stale. *luts
   is created on first use (free with pf_cpu_luts_free). PF_OK with *lut set, or a
   status (PF_NO_MEMORY, or what build returned). */
int pf_cpu_lut_get(pf_cpu_luts **luts, int n_units, int unit, unsigned long version,
                   const pf_frame *in, const pf_frame *in2, const pf_frame *out,
                   pf_cpu_lut_build_fn build, void *ctx, const pf_cpu_lut **lut);

/* Rows [y0, y1) of out from the same rows of in (and in2) through the tables. */
void pf_cpu_lut_rows(const pf_cpu_lut *lut, const pf_frame *in, const pf_frame *in2,
                     const pf_frame *out, int y0, int y1);

void pf_cpu_luts_free(pf_cpu_luts *luts);

#endif
