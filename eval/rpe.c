/* Relative pose error (Sturm et al., IROS 2012): drift over a fixed time
 * interval, independent of any global alignment. For estimated poses P_i, P_j
 * with t_j − t_i ≈ delta and their ground-truth counterparts Q_i, Q_j,
 *     E_ij = (Q_i⁻¹ Q_j)⁻¹ (P_i⁻¹ P_j),
 * the motion error over the interval, expressed in frame j. We report the RMSE,
 * mean and median of ‖trans(E)‖ and the RMSE of angle(E) in degrees. As in the
 * TUM tool, errors are per pair and not rescaled by the actual interval. */
#include <math.h>
#include <stdlib.h>

#include "kinreg/eval.h"
#include "eval/assoc.h"

/* Rotation angle by atan2: accurate for the small angles RPE is made of,
 * where acos((tr − 1)/2) loses half the digits. */
static double rotation_angle(const double R[9])
{
    double s = 0.5 * sqrt((R[7] - R[5]) * (R[7] - R[5]) + (R[2] - R[6]) * (R[2] - R[6]) +
                          (R[3] - R[1]) * (R[3] - R[1]));
    double c = 0.5 * (R[0] + R[4] + R[8] - 1);
    return atan2(s, c);
}

kr_status kr_eval_rpe(const kr_trajectory *gt, const kr_trajectory *est, double max_dt,
                      double delta, kr_rpe *out)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_eval_rpe: output is NULL");
    kr_status st;
    if ((st = kr_eval_check(gt, "ground-truth")) != KR_OK) return st;
    if ((st = kr_eval_check(est, "estimated")) != KR_OK) return st;
    if ((st = kr_eval_max_dt(max_dt, &max_dt)) != KR_OK) return st;
    if (!(delta >= 0) || !isfinite(delta))
        return kr_error(KR_ERR_INVALID_ARG, "RPE interval delta = %g s (must be > 0; 0 = 1 s)",
                        delta);
    if (delta == 0) delta = 1.0;
    if (gt->count == 0 || est->count < 2)
        return kr_error(KR_ERR_EMPTY,
                        "RPE: %zu ground-truth and %zu estimated poses (need 1 and 2)", gt->count,
                        est->count);

    size_t *eorder = NULL, *gorder = NULL;
    double *terr = malloc(est->count * sizeof *terr), *rerr = malloc(est->count * sizeof *rerr);
    if (!terr || !rerr) {
        st = kr_error(KR_ERR_NOMEM, "RPE: cannot allocate %zu errors", est->count);
        goto done;
    }
    if ((st = kr_eval_sort(est, &eorder)) != KR_OK) goto done;
    if ((st = kr_eval_sort(gt, &gorder)) != KR_OK) goto done;

    /* The partner j is the estimate nearest to t_i + delta. Nearest-neighbour
     * sampling of a regular stream misses delta by at most half its period, so
     * we accept |t_j − t_i − delta| up to max(max_dt, 0.6 · median period):
     * any stream rate works, while a partner taken across a gap in the
     * estimate or clamped at its end (a frame or more off) is rejected rather
     * than reported as drift over the wrong interval. */
    for (size_t k = 1; k < est->count; k++)
        terr[k - 1] = est->stamps[eorder[k]] - est->stamps[eorder[k - 1]];
    double period, unused;
    kr_eval_stats(terr, est->count - 1, &unused, &unused, &period, &unused);
    double tol = fmax(max_dt, 0.6 * period);

    size_t n = 0;
    for (size_t k = 0; k < est->count; k++) {
        size_t i = eorder[k];
        size_t j = kr_eval_nearest(est, eorder, est->stamps[i] + delta);
        double interval = est->stamps[j] - est->stamps[i];
        if (j == i || !(interval > 0) || fabs(interval - delta) > tol) continue;
        /* Ground truth at both ends, each within the association window. */
        size_t gi = kr_eval_nearest(gt, gorder, est->stamps[i]);
        size_t gj = kr_eval_nearest(gt, gorder, est->stamps[j]);
        if (fabs(gt->stamps[gi] - est->stamps[i]) > max_dt ||
            fabs(gt->stamps[gj] - est->stamps[j]) > max_dt)
            continue;
        kr_pose Pi = kr_pose_inv(&est->poses[i]), Qi = kr_pose_inv(&gt->poses[gi]);
        kr_pose dP = kr_pose_mul(&Pi, &est->poses[j]), dQ = kr_pose_mul(&Qi, &gt->poses[gj]);
        kr_pose dQi = kr_pose_inv(&dQ);
        kr_pose E = kr_pose_mul(&dQi, &dP);
        terr[n] = kr_pose_translation_norm(&E);
        rerr[n] = rotation_angle(E.R);
        n++;
    }
    if (n == 0) {
        st = kr_error(
            KR_ERR_EMPTY,
            "RPE: no pair of estimated poses %g s apart with ground truth within %g s at both ends "
            "(is the trajectory shorter than the interval? try a smaller --delta)",
            delta, max_dt);
        goto done;
    }
    kr_rpe r;
    r.pairs = n;
    double maxv, rmean, rmed, rmax;
    kr_eval_stats(terr, n, &r.rmse, &r.mean, &r.median, &maxv);
    kr_eval_stats(rerr, n, &r.rot_rmse_deg, &rmean, &rmed, &rmax);
    r.rot_rmse_deg *= 180.0 / M_PI;
    *out = r;
done:
    free(terr);
    free(rerr);
    free(eorder);
    free(gorder);
    return st;
}
