/* Normals of the refinement's views for signed fields (refine_internal.h):
 * the ground floor's PCA normals (core/normals.h) of each view, one view per
 * thread: the views are many and alike, and a 200-view scan has millions of
 * points, most of a signed field's cost. The CUDA engine computes the same
 * normals with the same per-point math (refine_fields_cuda.cu). */
#include <stdio.h>
#include <stdlib.h>

#include "core/normals.h"
#include "pipeline/refine/dfield_kernels.h"
#include "pipeline/refine/refine_internal.h"

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
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < n_views; k++) {
        size_t n = views[k].n;
        float *m = malloc(sizeof *m * 3 * (n ? n : 1));
        float *q = planes ? malloc(sizeof *q * 3 * (n ? n : 1)) : NULL;
        kr_status sk = m && (q || !planes)
                           ? kr_normals_estimate(views[k].xyz, n, KR_REFINE_NEIGHBOURS, m, q)
                           : kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's normals", k);
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
