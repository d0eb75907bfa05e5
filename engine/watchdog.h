/* engine/watchdog.h: the watchdog cost model, in one place: prediction (how long a
 * launch unit takes, and so into how many bands the planner splits it), measurement
 * (the times executors report for their launches) and refinement (a band measured over
 * budget scales that unit's prediction and asks for a new plan). Its state belongs to
 * the pipeline and outlives plans, so what one plan learnt shapes the next. */
#ifndef PF_WATCHDOG_H
#define PF_WATCHDOG_H

#include "plan.h"

typedef struct pf_watchdog pf_watchdog;

/* The state for a pipeline of n_nodes nodes; NULL when out of memory. */
pf_watchdog *pf_watchdog_create(int n_nodes);
void pf_watchdog_free(pf_watchdog *w);

/* ---- Prediction (the planner) ---- */

/* Sets plan's budget and bandwidth, and for every unit the bytes it moves, its
   predicted time and its bands. The budget is max_launch_ms, else the default where
   the device has a kernel watchdog, else none (bands 1). */
void pf_watchdog_predict(const pf_pipeline *p, pf_plan *plan);
/* The predicted time of one band of unit u of p's plan, refinements included. */
double pf_watchdog_band_ms(const pf_pipeline *p, int u);
/* Into buf: where a launch that ran past the watchdog most likely was (the unit with
   the longest predicted band), "" without units. */
void pf_watchdog_longest(const pf_pipeline *p, char *buf, size_t size);

/* ---- Measurement and refinement (the executors) ---- */

/* A new plan: no unit measured yet. */
void pf_watchdog_plan_started(pf_pipeline *p);
/* A timed frame starts: its units' times so far are cleared. */
void pf_watchdog_frame_begin(pf_pipeline *p);
/* One timed launch of unit u took ms (counted in p->stats against the budget). */
void pf_watchdog_launch(pf_pipeline *p, int u, double ms);
/* Unit u ran in ms in all, ms at most per launch (an executor timing whole units). */
void pf_watchdog_unit_ran(pf_pipeline *p, int u, double ms, double band_ms);
/* After a timed frame: a unit whose band ran over 90% of the budget has its prediction
   scaled by the measured ratio (at most 8x a round, PF_MAX_REFINES rounds) and a new
   plan is asked for; past the rounds it is reported once. */
void pf_watchdog_refine(pf_pipeline *p);
/* Whether a refinement asked for a new plan; pf_watchdog_replanned clears it. */
int pf_watchdog_wants_plan(const pf_pipeline *p);
void pf_watchdog_replanned(pf_pipeline *p);
/* Unit u's times in the last measured frame: in all, and its longest launch. */
void pf_watchdog_measured(const pf_pipeline *p, int u, double *ms, double *band_ms);

#endif
