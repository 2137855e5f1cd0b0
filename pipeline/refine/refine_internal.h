/* Internal: the refinement problem as the engines see it (one grid level),
 * and the engines' evaluation entry points. refine.c runs Levenberg–Marquardt
 * and calls an engine for the sums; the engines share pipeline/refine/dfield_kernels.h. */
#ifndef KINREG_PIPELINE_REFINE_REFINE_INTERNAL_H
#define KINREG_PIPELINE_REFINE_REFINE_INTERNAL_H

#include "pipeline/refine/dfield_kernels.h"
#include "pipeline/refine/dfield.h"
#include "kinreg/device.h"
#include "kinreg/refine.h"

/* KR_ERR_INTERRUPTED when the caller asks the refinement to end
 * (kr_refine_config.interrupted), else KR_OK. */
static inline kr_status kr_refine_check_interrupted(const kr_refine_config *cfg)
{
    if (cfg->interrupted && cfg->interrupted(cfg->interrupted_user))
        return kr_error(KR_ERR_INTERRUPTED, "refine: interrupted");
    return KR_OK;
}

typedef struct {
    int views;
    const kr_dfield *fields; /* one per view, this level */
    int star;                /* 1: the thesis's form (pairs (gauge, j), common grid points only) */
    int gauge;
    float huber; /* metres; 0: plain squares */
    float cap;   /* truncation: |e| > cap costs ρ(cap) and weighs 0, metres */
    /* 0: the fields are the host's (fields[k] arrays); 1 + slot: the engine
     * built them on its devices (kr_refine_engine_build_level), and fields[k]
     * are summaries. */
    int device_level;
} kr_refine_problem;

/* Sums per pair (i, j) = (pairs[2p], pairs[2p+1]) at the given poses into
 * acc[p] (zeroed by the engine). In star mode pairs are (gauge, j) for every
 * other j, in view order. */
kr_status kr_refine_eval_cpu(const kr_refine_problem *pb, const kr_refine_posef *poses,
                             const int *pairs, int npairs, kr_refine_acc *acc);

/* Unit normals of every view's points (PCA over their nearest neighbours,
 * turned towards the view's origin, where its sensor was; NaN where the
 * neighbourhood is degenerate), for signed fields. planes (may be NULL):
 * each point moved along its normal onto the plane through its neighbours'
 * mean, which averages depth noise out of the field (free both arrays with
 * kr_refine_normals_free). */
kr_status kr_refine_normals(const kr_refine_view *views, int n_views, float ***normals,
                            float ***planes);
void kr_refine_normals_free(float **normals, int n_views);

#endif
