/* The OpenMP engine of the refinement's sums (pipeline/refine/refine_internal.h): one
 * residual per grid point and pair, reduced per thread and then per pair. */
#include <stdlib.h>

#include "pipeline/refine/refine_internal.h"

static void eval_pairs(const kr_refine_problem *pb, const kr_refine_posef *poses, const int *pairs,
                       int npairs, kr_refine_acc *acc)
{
#pragma omp parallel
    {
        for (int p = 0; p < npairs; p++) {
            int i = pairs[2 * p], j = pairs[2 * p + 1];
            const kr_dfield *fi = &pb->fields[i];
            kr_dfield_lookup fj = kr_dfield_lookup_of(&pb->fields[j]);
            kr_refine_acc local;
            kr_refine_acc_zero(&local);
            long n = (long)fi->n_grid;
#pragma omp for schedule(static) nowait
            for (long k = 0; k < n; k++) {
                float e, J[6], w, c;
                if (!kr_refine_pair_residual(&poses[i], &poses[j], &fj, fi->grid + 3 * k,
                                             fi->grid_val[k], &e, J))
                    continue;
                kr_refine_robust(e, pb->huber, pb->cap, &w, &c);
                kr_refine_accumulate(&local, J, e, w, c);
            }
#pragma omp critical(kr_refine_reduce)
            kr_refine_acc_add(&acc[p], &local);
        }
    }
}

/* The thesis's form: a gauge grid point counts only when it lands inside the
 * field of every other view; then it adds one residual to each pair. */
static kr_status eval_star(const kr_refine_problem *pb, const kr_refine_posef *poses,
                           const int *pairs, int npairs, kr_refine_acc *acc)
{
    int r = pb->gauge;
    const kr_dfield *fr = &pb->fields[r];
    kr_dfield_lookup *fields = malloc(sizeof *fields * (size_t)npairs);
    if (!fields) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d fields", npairs);
    for (int p = 0; p < npairs; p++)
        fields[p] = kr_dfield_lookup_of(&pb->fields[pairs[2 * p + 1]]);
    kr_status status = KR_OK;
#pragma omp parallel
    {
        kr_refine_acc *local = calloc((size_t)npairs, sizeof *local);
        float *rows = malloc(sizeof *rows * 7 * (size_t)npairs);
        if (!local || !rows) {
#pragma omp critical(kr_refine_reduce)
            status = KR_ERR_NOMEM;
        }
        long n = (local && rows) ? (long)fr->n_grid : 0;
#pragma omp for schedule(static)
        for (long k = 0; k < n; k++) {
            int landed = 1;
            for (int p = 0; p < npairs && landed; p++)
                landed = kr_refine_pair_residual(&poses[r], &poses[pairs[2 * p + 1]], &fields[p],
                                                 fr->grid + 3 * k, fr->grid_val[k], &rows[7 * p],
                                                 &rows[7 * p + 1]);
            if (!landed) continue;
            for (int p = 0; p < npairs; p++) {
                float w, c;
                kr_refine_robust(rows[7 * p], pb->huber, pb->cap, &w, &c);
                kr_refine_accumulate(&local[p], &rows[7 * p + 1], rows[7 * p], w, c);
            }
        }
        if (local && rows) {
#pragma omp critical(kr_refine_reduce)
            for (int p = 0; p < npairs; p++)
                kr_refine_acc_add(&acc[p], &local[p]);
        }
        free(local);
        free(rows);
    }
    free(fields);
    return status == KR_OK ? KR_OK : kr_error(status, "refine: no memory for the per-thread sums");
}

kr_status kr_refine_eval_cpu(const kr_refine_problem *pb, const kr_refine_posef *poses,
                             const int *pairs, int npairs, kr_refine_acc *acc)
{
    for (int p = 0; p < npairs; p++)
        kr_refine_acc_zero(&acc[p]);
    if (pb->star) return eval_star(pb, poses, pairs, npairs, acc);
    eval_pairs(pb, poses, pairs, npairs, acc);
    return KR_OK;
}
