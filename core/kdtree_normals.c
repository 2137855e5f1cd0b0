/* Normals of an unorganised point set from its k nearest neighbours (PCA: the
 * eigenvector of the smallest eigenvalue of the neighbourhood covariance),
 * oriented towards a viewing direction. Used for scans that come without
 * normals (the Stanford range data) and available to model building. */
#include <math.h>
#include <stdlib.h>

#include "kinreg/pose.h"
#include "core/kdtree_internal.h"

kr_status kr_kdtree_normals_pca(const kr_kdtree *t, size_t k, const float toward[3], float *normals)
{
    if (!t || !toward || !normals)
        return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_normals_pca: NULL argument");
    if (k < 3 || k > 64)
        return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_normals_pca: k=%zu not in 3..64", k);
    long n = (long)t->n;
#pragma omp parallel for schedule(dynamic, 256)
    for (long i = 0; i < n; i++) {
        const kr_kd_cell *c = &t->cells[t->orig_leaf[i]];
        uint32_t idx[64];
        size_t m = kr_kdtree_knn(t, c->s, k, idx, NULL);
        float *out = normals + 3 * i;
        if (m < 3) {
            out[0] = out[1] = out[2] = NAN;
            continue;
        }
        double mean[3] = {0, 0, 0}, C[9] = {0};
        for (size_t j = 0; j < m; j++)
            for (int a = 0; a < 3; a++)
                mean[a] += t->cells[t->orig_leaf[idx[j]]].s[a] / (double)m;
        for (size_t j = 0; j < m; j++) {
            const float *s = t->cells[t->orig_leaf[idx[j]]].s;
            double d[3] = {s[0] - mean[0], s[1] - mean[1], s[2] - mean[2]};
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++)
                    C[3 * a + b] += d[a] * d[b];
        }
        double ev[3], V[9];
        kr_eigen_sym(3, C, ev, V);
        /* Collinear or coincident neighbours define no plane. */
        if (!(ev[1] > 1e-12 * (ev[2] + 1e-30))) {
            out[0] = out[1] = out[2] = NAN;
            continue;
        }
        double nv[3] = {V[0], V[3], V[6]}; /* column 0: smallest eigenvalue */
        double dot = nv[0] * toward[0] + nv[1] * toward[1] + nv[2] * toward[2];
        double sgn = dot < 0 ? -1 : 1, len = sqrt(nv[0] * nv[0] + nv[1] * nv[1] + nv[2] * nv[2]);
        for (int a = 0; a < 3; a++)
            out[a] = (float)(sgn * nv[a] / len);
    }
    return KR_OK;
}
