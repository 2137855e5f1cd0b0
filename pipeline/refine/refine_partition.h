/* Internal: how the refinement's sums are shared among processes
 * (kr_refine_partition, include/kinreg/refine.h) and devices. Influence-based
 * partitioning (thesis ch. 4): every part holds every view's field, so any
 * grid point can be evaluated anywhere, and takes a disjoint share of each
 * view's influenced grid points; the per-pair sums are added over the parts. */
#ifndef KINREG_PIPELINE_REFINE_REFINE_PARTITION_H
#define KINREG_PIPELINE_REFINE_REFINE_PARTITION_H

#include <stddef.h>

#include "pipeline/refine/dfield_kernels.h"
#include "pipeline/refine/dfield.h"
#include "kinreg/refine.h"

/* The share [*lo, *hi) of n items that part `part` of `parts` takes:
 * contiguous slices whose sizes differ by at most one. */
static inline void kr_refine_share(size_t n, int part, int parts, size_t *lo, size_t *hi)
{
    *lo = n * (size_t)part / (size_t)parts;
    *hi = n * (size_t)(part + 1) / (size_t)parts;
}

/* Keeps part `part` of `parts` of each field's grid points (moved to the
 * front of its arrays; n_grid shrinks). The distances stay whole. */
void kr_refine_keep_share(kr_dfield *fields, int views, int part, int parts);

/* Adds n pair sums over all parts, in place. `local` is this part's status
 * so far: it travels with the sums (one more double), and when any part
 * failed every part returns an error instead of waiting for it. *bytes grows
 * by the payload. */
kr_status kr_refine_reduce_sums(const kr_refine_partition *p, kr_refine_acc *sums, int n,
                                kr_status local, double *bytes);

/* Rank 0's LM step x (n doubles) and its solve status reach every part
 * exactly (the others add zeros): every part then moves the same way even
 * where their solvers would round differently. Returns rank 0's status. */
kr_status kr_refine_broadcast_step(const kr_refine_partition *p, double *x, int n, kr_status local,
                                   double *bytes);

#endif
