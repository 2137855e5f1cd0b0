/* The independent measure of a multi-view alignment (kinreg/refine.h,
 * kr_refine_fit): exact nearest neighbours between the views' points, not
 * the distance fields the refinement minimises, so that "the refinement made
 * it better" is judged by something it did not optimise.
 *
 * Every view gets a k-d tree of (at most FIT_TREE_POINTS of) its points in
 * its own frame. A sample point of view i is moved into each other view j
 * (T_j⁻¹ T_i p) whose bounding sphere it can reach, and its distance to the
 * nearest point of all of them, capped at `radius`, is kept. The score is the
 * RMS of the capped distances over all samples: a point without a partner
 * costs the cap, so sliding scans apart until few points pair up does not
 * pay, and a misaligned view raises it. */
#include "pipeline/refine/refine_fit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_layout.h"

/* Points per view in its tree and samples per view (evenly strided). */
#define FIT_TREE_POINTS 30000
#define FIT_SAMPLES 2000
/* A point counts as paired within this many median point spacings. */
#define FIT_SPACINGS 3.0

struct kr_refine_fitter {
    int n;
    kr_kdtree **trees;
    float **points; /* the tree's points (strided copies) */
    size_t *count;
    double (*sphere)[4]; /* centre (view frame) and radius of each view */
    const kr_refine_view *views;
    double spacing;
};

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void kr_refine_fitter_destroy(kr_refine_fitter **pf)
{
    if (!pf || !*pf) return;
    kr_refine_fitter *f = *pf;
    for (int k = 0; k < f->n; k++) {
        if (f->trees) kr_kdtree_destroy(&f->trees[k]);
        if (f->points) free(f->points[k]);
    }
    free(f->trees);
    free(f->points);
    free(f->count);
    free(f->sphere);
    free(f);
    *pf = NULL;
}

kr_status kr_refine_fitter_create(const kr_refine_view *views, int n, kr_refine_fitter **out)
{
    kr_refine_fitter *f = calloc(1, sizeof *f);
    if (!f) return kr_error(KR_ERR_NOMEM, "refine: no memory to measure %d views", n);
    f->n = n;
    f->views = views;
    f->trees = calloc((size_t)n, sizeof *f->trees);
    f->points = calloc((size_t)n, sizeof *f->points);
    f->count = calloc((size_t)n, sizeof *f->count);
    f->sphere = calloc((size_t)n, sizeof *f->sphere);
    kr_status s = f->trees && f->points && f->count && f->sphere
                      ? KR_OK
                      : kr_error(KR_ERR_NOMEM, "refine: no memory to measure %d views", n);
    float *spacings = s == KR_OK ? malloc(sizeof *spacings * (size_t)n * 200) : NULL;
    size_t n_spacings = 0;
    if (s == KR_OK && !spacings) s = kr_error(KR_ERR_NOMEM, "refine: no memory");
    for (int k = 0; k < n && s == KR_OK; k++) {
        size_t total = views[k].n, step = total > FIT_TREE_POINTS ? total / FIT_TREE_POINTS : 1;
        size_t m = total ? (total + step - 1) / step : 0;
        float *p = malloc(3 * (m ? m : 1) * sizeof *p);
        if (!p) {
            s = kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's points", k);
            break;
        }
        double c[3] = {0, 0, 0};
        for (size_t i = 0; i < m; i++)
            for (int a = 0; a < 3; a++) {
                p[3 * i + a] = views[k].xyz[3 * i * step + a];
                c[a] += p[3 * i + a] / (double)m;
            }
        double r2 = 0;
        for (size_t i = 0; i < m; i++) {
            double d[3] = {p[3 * i] - c[0], p[3 * i + 1] - c[1], p[3 * i + 2] - c[2]};
            r2 = fmax(r2, d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        }
        f->points[k] = p;
        f->count[k] = m;
        memcpy(f->sphere[k], c, sizeof c);
        f->sphere[k][3] = sqrt(r2);
        if (m < 2) continue; /* a view too small to pair with: no tree */
        if ((s = kr_kdtree_build(&f->trees[k], p, NULL, m)) != KR_OK) break;
        /* Its spacing: each of 200 points' nearest other point. */
        size_t sstep = m > 200 ? m / 200 : 1;
        for (size_t i = 0; i < m && n_spacings < (size_t)n * 200; i += sstep) {
            uint32_t idx[2];
            float d2[2];
            if (kr_kdtree_knn(f->trees[k], p + 3 * i, 2, idx, d2) == 2 && d2[1] > 0)
                spacings[n_spacings++] = sqrtf(d2[1]);
        }
    }
    if (s == KR_OK && n_spacings == 0)
        s = kr_error(KR_ERR_EMPTY, "refine: the views' points are all at one place");
    if (s == KR_OK) {
        qsort(spacings, n_spacings, sizeof *spacings, cmp_float);
        f->spacing = spacings[n_spacings / 2];
    }
    free(spacings);
    if (s != KR_OK) {
        kr_refine_fitter_destroy(&f);
        return s;
    }
    *out = f;
    return KR_OK;
}

double kr_refine_fitter_spacing(const kr_refine_fitter *f)
{
    return f->spacing;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kr_refine_fitter_extent(const kr_refine_fitter *f)
{
    double *r = malloc(sizeof *r * (size_t)f->n);
    if (!r) return f->sphere[0][3];
    for (int k = 0; k < f->n; k++)
        r[k] = f->sphere[k][3];
    qsort(r, (size_t)f->n, sizeof *r, cmp_double);
    double e = r[f->n / 2];
    free(r);
    return e;
}

kr_status kr_refine_fitter_eval(const kr_refine_fitter *f, const kr_pose *poses, double radius,
                                double *view_overlap, kr_refine_fit *out)
{
    const int n = f->n;
    if (!(radius > 0)) radius = FIT_SPACINGS * f->spacing;
    const double cap2 = radius * radius;
    kr_pose *inv = malloc(sizeof *inv * (size_t)n);
    double *sum = calloc((size_t)n, sizeof *sum), *paired_sq = calloc((size_t)n, sizeof *paired_sq);
    size_t *used = calloc((size_t)n, sizeof *used), *paired = calloc((size_t)n, sizeof *paired);
    if (!inv || !sum || !paired_sq || !used || !paired) {
        free(inv);
        free(sum);
        free(paired_sq);
        free(used);
        free(paired);
        return kr_error(KR_ERR_NOMEM, "refine: no memory to measure %d views", n);
    }
    for (int k = 0; k < n; k++)
        inv[k] = kr_pose_inv(&poses[k]);
        /* One view's samples per iteration; every view's sums are its own. */
#pragma omp parallel for schedule(dynamic)
    for (int i = 0; i < n; i++) {
        size_t m = f->count[i], step = m > FIT_SAMPLES ? m / FIT_SAMPLES : 1;
        for (size_t s = 0; s < m; s += step) {
            const float *p = f->points[i] + 3 * s;
            double pv[3] = {p[0], p[1], p[2]}, w[3];
            kr_pose_apply(&poses[i], pv, w);
            double best = cap2;
            for (int j = 0; j < n; j++) {
                if (j == i || !f->trees[j]) continue;
                double q[3];
                kr_pose_apply(&inv[j], w, q);
                double dc[3] = {q[0] - f->sphere[j][0], q[1] - f->sphere[j][1],
                                q[2] - f->sphere[j][2]};
                double reach = f->sphere[j][3] + sqrt(best);
                if (dc[0] * dc[0] + dc[1] * dc[1] + dc[2] * dc[2] > reach * reach) continue;
                float qf[3] = {(float)q[0], (float)q[1], (float)q[2]}, d2;
                if (kr_kdtree_nearest_within(f->trees[j], qf, (float)best, &d2) != (size_t)-1 &&
                    d2 < best)
                    best = d2;
            }
            used[i]++;
            sum[i] += best;
            if (best < cap2) {
                paired[i]++;
                paired_sq[i] += best;
            }
        }
    }
    double total = 0, total_sq = 0;
    size_t n_used = 0, n_paired = 0;
    for (int i = 0; i < n; i++) {
        total += sum[i];
        total_sq += paired_sq[i];
        n_used += used[i];
        n_paired += paired[i];
        if (view_overlap) view_overlap[i] = used[i] ? (double)paired[i] / (double)used[i] : 0;
    }
    out->spacing = f->spacing;
    out->radius = radius;
    out->score = n_used ? sqrt(total / (double)n_used) : radius;
    out->overlap = n_used ? (double)n_paired / (double)n_used : 0;
    out->residual = n_paired ? sqrt(total_sq / (double)n_paired) : 0;
    free(inv);
    free(sum);
    free(paired_sq);
    free(used);
    free(paired);
    return KR_OK;
}

kr_status kr_refine_fit_of(const kr_refine_view *views, int n_views, const kr_pose *poses,
                           double radius, double *view_overlap, kr_refine_fit *out)
{
    if (!views || !poses || !out || n_views < 2)
        return kr_error(KR_ERR_INVALID_ARG, "kr_refine_fit_of: needs 2 or more views and poses");
    kr_refine_fitter *f = NULL;
    kr_status s = kr_refine_fitter_create(views, n_views, &f);
    if (s == KR_OK) s = kr_refine_fitter_eval(f, poses, radius, view_overlap, out);
    kr_refine_fitter_destroy(&f);
    return s;
}
