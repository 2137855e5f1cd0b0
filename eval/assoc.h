/* Internal helpers shared by the trajectory evaluators (ATE, RPE, plot):
 * timestamp association and error statistics. Not part of the public API. */
#ifndef KINREG_EVAL_ASSOC_H
#define KINREG_EVAL_ASSOC_H

#include <stddef.h>

#include "kinreg/trajectory.h"

/* Default association window when the caller passes 0 (TUM benchmark tools). */
#define KR_EVAL_DEFAULT_MAX_DT 0.02

/* Checks a trajectory argument and a max_dt (0 → default); writes the
 * effective max_dt. `what` names the argument in the error. */
kr_status kr_eval_check(const kr_trajectory *traj, const char *what);
kr_status kr_eval_max_dt(double max_dt, double *effective);

/* Indices of traj sorted by timestamp (files need not be ordered). The caller
 * frees *order. */
kr_status kr_eval_sort(const kr_trajectory *traj, size_t **order);

/* Index into traj of the stamp nearest to `stamp` (order from kr_eval_sort,
 * traj non-empty). */
size_t kr_eval_nearest(const kr_trajectory *traj, const size_t *order, double stamp);

/* One-to-one association, as TUM's associate.py: candidate pairs within
 * max_dt are taken greedily by increasing |Δt|, each stamp used at most once.
 * Returns the pairs ordered by estimate stamp: gt_idx[k] ↔ est_idx[k]. The
 * caller frees both arrays (NULL when *n is 0). */
kr_status kr_eval_associate(const kr_trajectory *gt, const kr_trajectory *est, double max_dt,
                            size_t **gt_idx, size_t **est_idx, size_t *n);

/* RMSE, mean, median and max of v[0..n) (n > 0); sorts v in place. */
void kr_eval_stats(double *v, size_t n, double *rmse, double *mean, double *median, double *max);

#endif
