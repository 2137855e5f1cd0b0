/* PCA normals of an unorganised point set (core/normals.h). */
#include "core/normals.h"

#include "core/kdtree_knn.h"
#include "core/kdtree_layout.h"
#include "core/normals_pca.h"

kr_status kr_normals_estimate(const float *xyz, size_t n, int k, float *normals, float *planes)
{
    if (!normals || (n && !xyz))
        return kr_error(KR_ERR_INVALID_ARG, "kr_normals_estimate: NULL argument");
    if (k < 3 || k > KR_KDTREE_KNN_MAX)
        return kr_error(KR_ERR_INVALID_ARG, "kr_normals_estimate: k=%d not in 3..%d", k,
                        KR_KDTREE_KNN_MAX);
    kr_kdtree *t = NULL;
    kr_status s = kr_kdtree_build(&t, xyz, NULL, n);
    if (s != KR_OK) return s;
    long count = (long)n;
#pragma omp parallel for schedule(dynamic, 256)
    for (long i = 0; i < count; i++) {
        const float *p = xyz + 3 * i;
        uint32_t idx[KR_KDTREE_KNN_MAX];
        size_t m = kr_kdtree_knn(t, p, (size_t)k, idx, NULL);
        float nb[3 * KR_KDTREE_KNN_MAX];
        for (size_t j = 0; j < m; j++)
            for (int a = 0; a < 3; a++)
                nb[3 * j + a] = xyz[3 * (size_t)idx[j] + a];
        kr_normals_pca(p, nb, (int)m, normals + 3 * i, planes ? planes + 3 * i : NULL);
    }
    kr_kdtree_destroy(&t);
    return KR_OK;
}
