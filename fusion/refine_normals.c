/* Normals of the refinement's views for signed fields (refine_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/kdtree_internal.h"
#include "fusion/refine_internal.h"

/* PCA over this many nearest neighbours: enough for a stable plane on noisy
 * depth, few enough that a neighbourhood stays smaller than a bump. */
#define NORMAL_NEIGHBOURS 10

void kr_refine_normals_free(float **normals, int n_views)
{
    if (!normals) return;
    for (int k = 0; k < n_views; k++)
        free(normals[k]);
    free(normals);
}

kr_status kr_refine_normals(const kr_refine_view *views, int n_views, float ***out)
{
    float **nrm = calloc((size_t)n_views, sizeof *nrm);
    if (!nrm) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views' normals", n_views);
    kr_status s = KR_OK;
    char why[512] = "";
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < n_views; k++) {
        size_t n = views[k].n;
        kr_kdtree *t = NULL;
        float *m = malloc(sizeof *m * 3 * (n ? n : 1));
        kr_status sk = m ? kr_kdtree_build(&t, views[k].xyz, NULL, n)
                         : kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's normals", k);
        const float toward[3] = {0, 0, -1};
        if (sk == KR_OK) sk = kr_kdtree_normals_pca(t, NORMAL_NEIGHBOURS, toward, m);
        /* A view's points are in its sensor's frame, the sensor at the
         * origin: turn each normal to the side the sensor saw. */
        for (size_t i = 0; sk == KR_OK && i < n; i++) {
            const float *p = views[k].xyz + 3 * i;
            float *q = m + 3 * i;
            if (q[0] * p[0] + q[1] * p[1] + q[2] * p[2] > 0)
                q[0] = -q[0], q[1] = -q[1], q[2] = -q[2];
        }
        kr_kdtree_destroy(&t);
        if (sk == KR_OK) {
            nrm[k] = m;
        } else {
            free(m);
#pragma omp critical(kr_refine_normals_error)
            if (s == KR_OK) {
                s = sk;
                snprintf(why, sizeof why, "%s", kr_last_error());
            }
        }
    }
    if (s != KR_OK) {
        kr_refine_normals_free(nrm, n_views);
        return kr_error(s, "%s", why);
    }
    *out = nrm;
    return KR_OK;
}
