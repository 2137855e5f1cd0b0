/* Normals of a k-d tree's points from their k nearest neighbours, oriented
 * towards a viewing direction (kr_kdtree_normals_pca, core/kdtree_layout.h):
 * for point sets that come without normals and whose sensor position is not
 * known, only the direction it looked from. The PCA is the project's one
 * (core/normals_pca.h); core/normals.h orients towards the sensor instead. */
#include <math.h>
#include <stdlib.h>

#include "core/kdtree_layout.h"
#include "core/normals_pca.h"

kr_status kr_kdtree_normals_pca(const kr_kdtree *t, size_t k, const float toward[3], float *normals)
{
    if (!t || !toward || !normals)
        return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_normals_pca: NULL argument");
    if (k < 3 || k > 64)
        return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_normals_pca: k=%zu not in 3..64", k);
    long n = (long)t->n;
#pragma omp parallel for schedule(dynamic, 256)
    for (long i = 0; i < n; i++) {
        const kr_kdtree_cell *c = &t->cells[t->orig_leaf[i]];
        uint32_t idx[64];
        size_t m = kr_kdtree_knn(t, c->s, k, idx, NULL);
        float *out = normals + 3 * i;
        float nb[3 * 64];
        for (size_t j = 0; j < m; j++)
            for (int a = 0; a < 3; a++)
                nb[3 * j + a] = t->cells[t->orig_leaf[idx[j]]].s[a];
        double mean[3], nv[3];
        /* Collinear or coincident neighbours define no plane. */
        if (!kr_normals_fit(nb, (int)m, mean, nv)) {
            out[0] = out[1] = out[2] = NAN;
            continue;
        }
        double dot = nv[0] * toward[0] + nv[1] * toward[1] + nv[2] * toward[2];
        double sgn = dot < 0 ? -1 : 1;
        for (int a = 0; a < 3; a++)
            out[a] = (float)(sgn * nv[a]);
    }
    return KR_OK;
}
