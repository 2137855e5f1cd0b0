/* Absolute trajectory error (Sturm et al., IROS 2012): associate estimate and
 * ground-truth stamps, align the estimated positions rigidly onto the ground
 * truth with Horn's method (no scale: depth sensors measure metres), and
 * report statistics of the remaining translational errors. Also holds the
 * association and statistics helpers shared with RPE and the plot. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/eval.h"
#include "eval/assoc.h"

kr_status kr_eval_check(const kr_trajectory *traj, const char *what)
{
    if (!traj) return kr_error(KR_ERR_INVALID_ARG, "%s trajectory is NULL", what);
    if (traj->count && (!traj->stamps || !traj->poses))
        return kr_error(KR_ERR_INVALID_ARG, "%s trajectory has %zu poses but no arrays", what,
                        traj->count);
    for (size_t i = 0; i < traj->count; i++)
        if (!isfinite(traj->stamps[i]))
            return kr_error(KR_ERR_INVALID_ARG, "%s trajectory: timestamp %zu is not finite", what,
                            i);
    return KR_OK;
}

kr_status kr_eval_max_dt(double max_dt, double *effective)
{
    if (!(max_dt >= 0) || !isfinite(max_dt))
        return kr_error(KR_ERR_INVALID_ARG,
                        "association window max_dt = %g s (must be >= 0; 0 = %g s)", max_dt,
                        KR_EVAL_DEFAULT_MAX_DT);
    *effective = max_dt > 0 ? max_dt : KR_EVAL_DEFAULT_MAX_DT;
    return KR_OK;
}

/* qsort has no context argument; sorting (stamp, index) records avoids a
 * global. Ties keep file order through the index. */
typedef struct {
    double stamp;
    size_t index;
} stamp_rec;

static int cmp_stamp(const void *a, const void *b)
{
    const stamp_rec *x = a, *y = b;
    if (x->stamp != y->stamp) return x->stamp < y->stamp ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

kr_status kr_eval_sort(const kr_trajectory *traj, size_t **order)
{
    size_t n = traj->count;
    stamp_rec *rec = malloc((n ? n : 1) * sizeof *rec);
    size_t *out = malloc((n ? n : 1) * sizeof *out);
    if (!rec || !out) {
        free(rec);
        free(out);
        return kr_error(KR_ERR_NOMEM, "evaluation: cannot sort %zu timestamps", n);
    }
    for (size_t i = 0; i < n; i++)
        rec[i] = (stamp_rec){traj->stamps[i], i};
    qsort(rec, n, sizeof *rec, cmp_stamp);
    for (size_t i = 0; i < n; i++)
        out[i] = rec[i].index;
    free(rec);
    *order = out;
    return KR_OK;
}

/* First position k in `order` whose stamp is >= t. */
static size_t lower_bound(const kr_trajectory *traj, const size_t *order, double t)
{
    size_t lo = 0, hi = traj->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (traj->stamps[order[mid]] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t kr_eval_nearest(const kr_trajectory *traj, const size_t *order, double stamp)
{
    size_t k = lower_bound(traj, order, stamp);
    if (k == traj->count) return order[k - 1];
    if (k == 0) return order[0];
    double after = traj->stamps[order[k]] - stamp, before = stamp - traj->stamps[order[k - 1]];
    return before <= after ? order[k - 1] : order[k];
}

typedef struct {
    double dt;
    size_t gt, est;
} candidate;

static int cmp_candidate(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->dt != y->dt) return x->dt < y->dt ? -1 : 1;
    if (x->est != y->est) return x->est < y->est ? -1 : 1;
    return (x->gt > y->gt) - (x->gt < y->gt);
}

typedef struct {
    double stamp;
    size_t gt, est;
} pair_rec;

static int cmp_pair(const void *a, const void *b)
{
    const pair_rec *x = a, *y = b;
    if (x->stamp != y->stamp) return x->stamp < y->stamp ? -1 : 1;
    return (x->est > y->est) - (x->est < y->est);
}

kr_status kr_eval_associate(const kr_trajectory *gt, const kr_trajectory *est, double max_dt,
                            size_t **gt_idx, size_t **est_idx, size_t *n)
{
    *gt_idx = *est_idx = NULL;
    *n = 0;
    if (!gt->count || !est->count) return KR_OK;
    size_t *gorder = NULL;
    kr_status st = kr_eval_sort(gt, &gorder);
    if (st != KR_OK) return st;

    /* Candidates: every (gt, est) within the window. With ground truth at
     * 100 Hz and a 20 ms window that is a handful per estimate. */
    size_t ncand = 0, cap = est->count * 4 + 16;
    candidate *cand = malloc(cap * sizeof *cand);
    if (!cand) {
        free(gorder);
        return kr_error(KR_ERR_NOMEM, "evaluation: cannot allocate association candidates");
    }
    for (size_t e = 0; e < est->count; e++) {
        double t = est->stamps[e];
        for (size_t k = lower_bound(gt, gorder, t - max_dt); k < gt->count; k++) {
            size_t g = gorder[k];
            double dt = fabs(gt->stamps[g] - t);
            if (gt->stamps[g] > t + max_dt) break;
            if (dt > max_dt) continue;
            if (ncand == cap) {
                candidate *grown = realloc(cand, 2 * cap * sizeof *cand);
                if (!grown) {
                    free(cand);
                    free(gorder);
                    return kr_error(KR_ERR_NOMEM,
                                    "evaluation: cannot allocate %zu association candidates",
                                    2 * cap);
                }
                cand = grown;
                cap *= 2;
            }
            cand[ncand++] = (candidate){dt, g, e};
        }
    }
    free(gorder);
    qsort(cand, ncand, sizeof *cand, cmp_candidate);

    unsigned char *gused = calloc(gt->count, 1), *eused = calloc(est->count, 1);
    pair_rec *pairs = malloc((ncand ? ncand : 1) * sizeof *pairs);
    if (!gused || !eused || !pairs) {
        free(gused);
        free(eused);
        free(pairs);
        free(cand);
        return kr_error(KR_ERR_NOMEM, "evaluation: cannot allocate association");
    }
    size_t np = 0;
    for (size_t c = 0; c < ncand; c++) {
        if (gused[cand[c].gt] || eused[cand[c].est]) continue;
        gused[cand[c].gt] = eused[cand[c].est] = 1;
        pairs[np++] = (pair_rec){est->stamps[cand[c].est], cand[c].gt, cand[c].est};
    }
    free(gused);
    free(eused);
    free(cand);
    qsort(pairs, np, sizeof *pairs, cmp_pair);

    size_t *gi = malloc((np ? np : 1) * sizeof *gi), *ei = malloc((np ? np : 1) * sizeof *ei);
    if (!gi || !ei) {
        free(gi);
        free(ei);
        free(pairs);
        return kr_error(KR_ERR_NOMEM, "evaluation: cannot allocate association");
    }
    for (size_t k = 0; k < np; k++) {
        gi[k] = pairs[k].gt;
        ei[k] = pairs[k].est;
    }
    free(pairs);
    if (np == 0) {
        free(gi);
        free(ei);
        gi = ei = NULL;
    }
    *gt_idx = gi;
    *est_idx = ei;
    *n = np;
    return KR_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void kr_eval_stats(double *v, size_t n, double *rmse, double *mean, double *median, double *max)
{
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        s += v[i];
        s2 += v[i] * v[i];
    }
    qsort(v, n, sizeof *v, cmp_double);
    *rmse = sqrt(s2 / (double)n);
    *mean = s / (double)n;
    *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *max = v[n - 1];
}

/* The pose that maps the estimate's earliest associated pose onto its
 * ground-truth partner (evo's --align_origin): drift shows from the start. */
static kr_pose start_alignment(const kr_trajectory *gt, const kr_trajectory *est, const size_t *gi,
                               const size_t *ei, size_t n)
{
    size_t first = 0;
    for (size_t k = 1; k < n; k++)
        if (est->stamps[ei[k]] < est->stamps[ei[first]]) first = k;
    kr_pose inv = kr_pose_inv(&est->poses[ei[first]]);
    return kr_pose_mul(&gt->poses[gi[first]], &inv);
}

static kr_status ate(const kr_trajectory *gt, const kr_trajectory *est, double max_dt, bool align_start,
                     kr_ate *out)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_eval_ate: output is NULL");
    kr_status st;
    if ((st = kr_eval_check(gt, "ground-truth")) != KR_OK) return st;
    if ((st = kr_eval_check(est, "estimated")) != KR_OK) return st;
    if ((st = kr_eval_max_dt(max_dt, &max_dt)) != KR_OK) return st;

    size_t *gi, *ei, n;
    if ((st = kr_eval_associate(gt, est, max_dt, &gi, &ei, &n)) != KR_OK) return st;
    if (n < 3) {
        free(gi);
        free(ei);
        return kr_error(
            KR_ERR_EMPTY,
            "ATE: only %zu of %zu estimated poses have a ground-truth stamp within %g s (need 3; "
            "do the files cover the same time span and use the same clock?)",
            n, est->count, max_dt);
    }

    double *src = malloc(3 * n * sizeof *src), *dst = malloc(3 * n * sizeof *dst),
           *err = malloc(n * sizeof *err);
    if (!src || !dst || !err) {
        st = kr_error(KR_ERR_NOMEM, "ATE: cannot allocate %zu pairs", n);
        goto done;
    }
    for (size_t k = 0; k < n; k++) {
        memcpy(src + 3 * k, est->poses[ei[k]].t, 3 * sizeof *src);
        memcpy(dst + 3 * k, gt->poses[gi[k]].t, 3 * sizeof *dst);
    }
    kr_pose align;
    if (align_start)
        align = start_alignment(gt, est, gi, ei, n);
    else if ((st = kr_horn(src, dst, NULL, n, &align)) != KR_OK)
        goto done;
    for (size_t k = 0; k < n; k++) {
        double p[3];
        kr_pose_apply(&align, src + 3 * k, p);
        double dx = p[0] - dst[3 * k], dy = p[1] - dst[3 * k + 1], dz = p[2] - dst[3 * k + 2];
        err[k] = sqrt(dx * dx + dy * dy + dz * dz);
    }
    kr_ate r;
    r.pairs = n;
    r.alignment = align;
    kr_eval_stats(err, n, &r.rmse, &r.mean, &r.median, &r.max);
    *out = r;
done:
    free(src);
    free(dst);
    free(err);
    free(gi);
    free(ei);
    return st;
}

kr_status kr_eval_ate(const kr_trajectory *gt, const kr_trajectory *est, double max_dt, kr_ate *out)
{
    return ate(gt, est, max_dt, false, out);
}

kr_status kr_eval_ate_start(const kr_trajectory *gt, const kr_trajectory *est, double max_dt, kr_ate *out)
{
    return ate(gt, est, max_dt, true, out);
}
