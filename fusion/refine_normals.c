/* Normals of the refinement's views for signed fields (refine_internal.h):
 * PCA over each point's nearest neighbours (a k-d tree per view). The plane's
 * normal is the eigenvector of the neighbourhood covariance's smallest
 * eigenvalue, found in closed form (below) rather than by Jacobi sweeps: a
 * 200-view scan has millions of points, and this is most of a signed field's
 * cost. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/kdtree_internal.h"
#include "fusion/refine_internal.h"

/* PCA over this many nearest neighbours: enough for a stable plane on noisy
 * depth, few enough that a neighbourhood stays smaller than a bump (the
 * neighbours' mean sits off a curved surface by about κr²/4, which differs
 * between views that sample it at different densities). On the 200-view room
 * (2 cm grid): 10 neighbours end at 0.354 mm without noise and 0.929 mm with
 * 2 mm of depth noise, 16 at 0.775 and 0.759 mm, 12 at 0.407 and 0.839 mm. */
#define NORMAL_NEIGHBOURS 12

/* Unit eigenvector of the smallest eigenvalue of the symmetric 3×3 matrix
 * C = [a d e; d b f; e f c]; 0 when the two smallest eigenvalues are too
 * close for a plane (collinear or coincident points). The eigenvalues are
 * the roots of the characteristic cubic, by the trigonometric form (Smith,
 * CACM 1961); the eigenvector is the longest cross product of two rows of
 * C − λI, all of which are orthogonal to it. */
static int smallest_eigenvector(const double C[6], double out[3])
{
    double a = C[0], b = C[1], c = C[2], d = C[3], e = C[4], f = C[5];
    double q = (a + b + c) / 3;
    double p1 = d * d + e * e + f * f;
    double p2 = (a - q) * (a - q) + (b - q) * (b - q) + (c - q) * (c - q) + 2 * p1;
    if (!(p2 > 0)) return 0;
    double p = sqrt(p2 / 6);
    double B[6] = {(a - q) / p, (b - q) / p, (c - q) / p, d / p, e / p, f / p};
    double detB = B[0] * (B[1] * B[2] - B[5] * B[5]) - B[3] * (B[3] * B[2] - B[5] * B[4]) +
                  B[4] * (B[3] * B[5] - B[1] * B[4]);
    double r = fmin(1, fmax(-1, detB / 2)), phi = acos(r) / 3;
    double l1 = q + 2 * p * cos(phi), l3 = q + 2 * p * cos(phi + 2 * M_PI / 3);
    double l2 = 3 * q - l1 - l3;
    if (!(l2 - l3 > 1e-12 * (fabs(l1) + 1e-30))) return 0;
    double r0[3] = {a - l3, d, e}, r1[3] = {d, b - l3, f}, r2[3] = {e, f, c - l3};
    const double *rows[3][2] = {{r0, r1}, {r0, r2}, {r1, r2}};
    double best = 0;
    for (int i = 0; i < 3; i++) {
        const double *u = rows[i][0], *v = rows[i][1];
        double x[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                       u[0] * v[1] - u[1] * v[0]};
        double n2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
        if (n2 > best) {
            best = n2;
            for (int k = 0; k < 3; k++)
                out[k] = x[k];
        }
    }
    if (!(best > 0)) return 0;
    double len = sqrt(best);
    for (int k = 0; k < 3; k++)
        out[k] /= len;
    return 1;
}

/* Normals of one view's points, turned towards its origin (the sensor), and
 * (plane not NULL) each point moved onto its neighbourhood's plane. */
static void view_normals(const kr_kdtree *t, const float *xyz, size_t n, float *normals,
                         float *plane)
{
    for (size_t i = 0; i < n; i++) {
        const float *p = xyz + 3 * i;
        float *out = normals + 3 * i;
        uint32_t idx[NORMAL_NEIGHBOURS];
        size_t m = kr_kdtree_knn(t, p, NORMAL_NEIGHBOURS, idx, NULL);
        double mean[3] = {0, 0, 0}, C[6] = {0}, nv[3] = {0, 0, 0};
        for (size_t j = 0; j < m; j++)
            for (int a = 0; a < 3; a++)
                mean[a] += xyz[3 * (size_t)idx[j] + a] / (double)m;
        for (size_t j = 0; j < m; j++) {
            const float *s = xyz + 3 * (size_t)idx[j];
            double x = s[0] - mean[0], y = s[1] - mean[1], z = s[2] - mean[2];
            C[0] += x * x, C[1] += y * y, C[2] += z * z;
            C[3] += x * y, C[4] += x * z, C[5] += y * z;
        }
        if (plane)
            for (int a = 0; a < 3; a++)
                plane[3 * i + a] = p[a];
        if (m < 3 || !smallest_eigenvector(C, nv)) {
            out[0] = out[1] = out[2] = NAN;
            continue;
        }
        double sgn = nv[0] * p[0] + nv[1] * p[1] + nv[2] * p[2] > 0 ? -1 : 1;
        for (int a = 0; a < 3; a++)
            out[a] = (float)(sgn * nv[a]);
        if (plane) {
            double off =
                nv[0] * (p[0] - mean[0]) + nv[1] * (p[1] - mean[1]) + nv[2] * (p[2] - mean[2]);
            for (int a = 0; a < 3; a++)
                plane[3 * i + a] = (float)(p[a] - off * nv[a]);
        }
    }
}

void kr_refine_normals_free(float **normals, int n_views)
{
    if (!normals) return;
    for (int k = 0; k < n_views; k++)
        free(normals[k]);
    free(normals);
}

kr_status kr_refine_normals(const kr_refine_view *views, int n_views, float ***out, float ***planes)
{
    float **nrm = calloc((size_t)n_views, sizeof *nrm);
    float **pl = planes ? calloc((size_t)n_views, sizeof *pl) : NULL;
    if (!nrm || (planes && !pl)) {
        free(nrm);
        free(pl);
        return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views' normals", n_views);
    }
    kr_status s = KR_OK;
    char why[512] = "";
    /* One thread per view: the views are many and alike. */
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < n_views; k++) {
        size_t n = views[k].n;
        kr_kdtree *t = NULL;
        float *m = malloc(sizeof *m * 3 * (n ? n : 1));
        kr_status sk = m ? kr_kdtree_build(&t, views[k].xyz, NULL, n)
                         : kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's normals", k);
        float *q = planes ? malloc(sizeof *q * 3 * (n ? n : 1)) : NULL;
        if (sk == KR_OK && planes && !q)
            sk = kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's points", k);
        if (sk == KR_OK) view_normals(t, views[k].xyz, n, m, q);
        kr_kdtree_destroy(&t);
        if (sk == KR_OK) {
            nrm[k] = m;
            if (planes) pl[k] = q;
        } else {
            free(m);
            free(q);
#pragma omp critical(kr_refine_normals_error)
            if (s == KR_OK) {
                s = sk;
                snprintf(why, sizeof why, "%s", kr_last_error());
            }
        }
    }
    if (s != KR_OK) {
        kr_refine_normals_free(nrm, n_views);
        kr_refine_normals_free(pl, n_views);
        return kr_error(s, "%s", why);
    }
    *out = nrm;
    if (planes) *planes = pl;
    return KR_OK;
}
