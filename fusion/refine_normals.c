/* Normals of the refinement's views for signed fields (refine_internal.h):
 * PCA over each point's nearest neighbours (a k-d tree per view). The plane's
 * normal is the eigenvector of the neighbourhood covariance's smallest
 * eigenvalue, found in closed form rather than by Jacobi sweeps: a 200-view
 * scan has millions of points, and this is most of a signed field's cost.
 * The per-point math is core/refine_field_kernels.h, shared with the CUDA
 * engine's normals (gpu/refine_fields.cu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/kdtree_internal.h"
#include "core/refine_field_kernels.h"
#include "fusion/refine_internal.h"

/* Normals of one view's points, turned towards its origin (the sensor), and
 * (plane not NULL) each point moved onto its neighbourhood's plane. */
static void view_normals(const kr_kdtree *t, const float *xyz, size_t n, float *normals,
                         float *plane)
{
    for (size_t i = 0; i < n; i++) {
        const float *p = xyz + 3 * i;
        float *out = normals + 3 * i;
        uint32_t idx[KR_RF_NEIGHBOURS];
        size_t m = kr_kdtree_knn(t, p, KR_RF_NEIGHBOURS, idx, NULL);
        float nb[3 * KR_RF_NEIGHBOURS];
        for (size_t j = 0; j < m; j++)
            for (int a = 0; a < 3; a++)
                nb[3 * j + a] = xyz[3 * (size_t)idx[j] + a];
        kr_rf_normal(p, nb, (int)m, out, plane ? plane + 3 * i : NULL);
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
