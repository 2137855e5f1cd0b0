/* A point's normal by PCA over its neighbours — the eigenvector of the
 * neighbourhood covariance's smallest eigenvalue, found in closed form —
 * written once as KR_HD for every normal estimate of the project: the host's
 * (core/normals.c, core/kdtree_normals.c) and the device's
 * (pipeline/refine/refine_fields_cuda.cu). The PCA's double arithmetic may
 * round differently on the device (the refinement's parity test states its
 * tolerance). */
#ifndef KINREG_CORE_NORMALS_PCA_H
#define KINREG_CORE_NORMALS_PCA_H

#include <math.h>

#include "core/kr_hd.h"

/* Unit eigenvector of the smallest eigenvalue of the symmetric 3×3 matrix
 * C = [a d e; d b f; e f c]; 0 when the two smallest eigenvalues are too
 * close for a plane (collinear or coincident points). The eigenvalues are
 * the roots of the characteristic cubic, by the trigonometric form (Smith,
 * CACM 1961); the eigenvector is the longest cross product of two rows of
 * C − λI, all of which are orthogonal to it. */
static inline KR_HD int kr_normals_smallest_eigenvector(const double C[6], double out[3])
{
    const double pi = 3.14159265358979323846;
    double a = C[0], b = C[1], c = C[2], d = C[3], e = C[4], f = C[5];
    double q = (a + b + c) / 3;
    double p1 = d * d + e * e + f * f;
    double p2 = (a - q) * (a - q) + (b - q) * (b - q) + (c - q) * (c - q) + 2 * p1;
    if (!(p2 > 0)) return 0;
    double p = sqrt(p2 / 6);
    double B[6] = {(a - q) / p, (b - q) / p, (c - q) / p, d / p, e / p, f / p};
    double detB = B[0] * (B[1] * B[2] - B[5] * B[5]) - B[3] * (B[3] * B[2] - B[5] * B[4]) +
                  B[4] * (B[3] * B[5] - B[1] * B[4]);
    double r = fmin(1.0, fmax(-1.0, detB / 2)), phi = acos(r) / 3;
    double l1 = q + 2 * p * cos(phi), l3 = q + 2 * p * cos(phi + 2 * pi / 3);
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

/* The plane through m neighbours nb[3j … 3j+2]: their mean and the unit
 * normal nv (unoriented). 0 when there is no plane (m < 3, or the points are
 * collinear or coincident). */
static inline KR_HD int kr_normals_fit(const float *nb, int m, double mean[3], double nv[3])
{
    double C[6] = {0, 0, 0, 0, 0, 0};
    mean[0] = mean[1] = mean[2] = 0;
    for (int j = 0; j < m; j++)
        for (int a = 0; a < 3; a++)
            mean[a] += nb[3 * j + a] / (double)m;
    for (int j = 0; j < m; j++) {
        const float *s = nb + 3 * j;
        double x = s[0] - mean[0], y = s[1] - mean[1], z = s[2] - mean[2];
        C[0] += x * x, C[1] += y * y, C[2] += z * z;
        C[3] += x * y, C[4] += x * z, C[5] += y * z;
    }
    return m >= 3 && kr_normals_smallest_eigenvector(C, nv);
}

/* The normal of point p from its m neighbours nb[3j … 3j+2] (in the order the
 * search found them), turned towards the origin of p's frame (where its
 * sensor was): out_n gets it, or NaN when the neighbourhood is degenerate;
 * out_plane (may be NULL) gets p moved along the normal onto the plane
 * through the neighbours' mean (p itself when there is no normal). */
static inline KR_HD void kr_normals_pca(const float p[3], const float *nb, int m, float out_n[3],
                                        float *out_plane)
{
    double mean[3], nv[3] = {0, 0, 0};
    int plane = kr_normals_fit(nb, m, mean, nv);
    if (out_plane)
        for (int a = 0; a < 3; a++)
            out_plane[a] = p[a];
    if (!plane) {
        out_n[0] = out_n[1] = out_n[2] = NAN;
        return;
    }
    double sgn = nv[0] * p[0] + nv[1] * p[1] + nv[2] * p[2] > 0 ? -1 : 1;
    for (int a = 0; a < 3; a++)
        out_n[a] = (float)(sgn * nv[a]);
    if (out_plane) {
        double off = nv[0] * (p[0] - mean[0]) + nv[1] * (p[1] - mean[1]) + nv[2] * (p[2] - mean[2]);
        for (int a = 0; a < 3; a++)
            out_plane[a] = (float)(p[a] - off * nv[a]);
    }
}

#endif
