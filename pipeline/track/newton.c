/* One Newton linearisation on the CPU: every frame point with a normal is moved
 * to the world by the pose, finds its cell in the model tree and adds its
 * F, g, h terms (pipeline/track/newton_kernels.h). OpenMP threads sum into private
 * accumulators over contiguous chunks (schedule static), combined in thread
 * order afterwards, so a given thread count gives bit-identical results. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kinreg/track.h"
#include "core/kdtree_layout.h"
#include "pipeline/track/newton_kernels.h"
#include "pipeline/track/track_internal.h"

void kr_newton_params(const kr_track_config *cfg, float gate, kr_track_point_params *P)
{
    P->gate2 = (double)gate * gate;
    P->far = cfg->far_field;
    P->cos_normal = cos(cfg->normal_gate_deg * (M_PI / 180.0));
    /* s = gate_steps·depth_step·z²/gate: 1 where gate_steps depth steps
     * span the level's gate. */
    P->noise = cfg->depth_step > 0 && cfg->gate_steps > 0 && gate > 0
                   ? (double)cfg->gate_steps * cfg->depth_step / gate
                   : 0;
    P->mode = (int)cfg->quad;
}

/* Accumulators live on the stack: no allocation per call. */
#define NEWTON_MAX_THREADS 64

kr_status kr_newton_linearize(const kr_kdtree *model, const kr_cloud *cloud, const kr_pose *pose,
                              const kr_track_config *cfg, float gate, kr_newton_sums *out)
{
    if (!model || !cloud || !pose || !cfg || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_newton_linearize: NULL argument");
    if (cloud->width < 0 || cloud->height < 0 ||
        ((cloud->width && cloud->height) && (!cloud->points || !cloud->normals)))
        return kr_error(KR_ERR_INVALID_ARG, "kr_newton_linearize: cloud without points or normals");

    kr_track_point_params P;
    kr_newton_params(cfg, gate, &P);
    const bool exact = cfg->exact_nn;
    kr_track_real R[9], t[3];
    for (int i = 0; i < 9; i++)
        R[i] = pose->R[i];
    for (int i = 0; i < 3; i++)
        t[i] = pose->t[i];

    const long n = (long)cloud->width * cloud->height;
    const float *pts = cloud->points, *nrm = cloud->normals;
    const kr_kdtree_cell *cells = model->cells;

    int nt = omp_get_max_threads();
    if (nt > NEWTON_MAX_THREADS) nt = NEWTON_MAX_THREADS;
    /* Small clouds are not worth waking the team. */
    if (n < 4096) nt = 1;
    kr_track_acc acc[NEWTON_MAX_THREADS];
    int used = 1;
#pragma omp parallel num_threads(nt)
    {
        int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        /* Contiguous pixel ranges per thread (static schedule by hand, so the
         * loop can gather points into descent batches). */
        long lo = n * tid / nth, hi = n * (tid + 1) / nth;
        kr_track_acc a;
        kr_track_acc_zero(&a);
        float qb[KR_KDTREE_BATCH][3] = {{0}};
        kr_track_real qd[KR_KDTREE_BATCH][3];
        long ib[KR_KDTREE_BATCH];
        uint32_t cb[KR_KDTREE_BATCH];
        int m = 0;
        for (long i = lo; i < hi || m > 0; i++) {
            if (i < hi) {
                const float *p = pts + 3 * i;
                /* NaN marks a missing point or normal (x != x only for NaN). */
                if (p[0] != p[0] || nrm[3 * i] != nrm[3 * i]) continue;
                kr_track_transform(R, t, p, qd[m]);
                for (int k = 0; k < 3; k++)
                    qb[m][k] = (float)qd[m][k];
                ib[m++] = i;
                if (m < KR_KDTREE_BATCH) continue;
            }
            if (exact) {
                for (int k = 0; k < m; k++)
                    cb[k] = kr_kdtree_nearest_cell(model, qb[k], NULL);
            } else {
                /* lanes past m descend from stale coordinates, unused */
                kr_kdtree_descend_batch(model, (const float(*)[3])qb, m, cb);
            }
            for (int k = 0; k < m; k++) {
                const kr_kdtree_cell *cell = &cells[cb[k]];
                kr_track_pair_class cls;
                int kind = kr_track_classify_pair(&P, R, qd[k], pts[3 * ib[k] + 2], nrm + 3 * ib[k],
                                                  cell->s, cell->n, &cls);
                kr_track_accumulate(&a, &P, kind, &cls, qd[k], cell->s, cell->n);
            }
            m = 0;
            if (i >= hi) break;
        }
        acc[tid] = a;
        if (tid == 0) used = nth;
    }
    kr_track_acc total;
    kr_track_acc_zero(&total);
    for (int i = 0; i < used; i++)
        kr_track_acc_add(&total, &acc[i]);

    kr_track_acc_finish(&total, out->F, out->g);
    out->h = total.h;
    out->residual = total.res;
    out->points = total.points;
    out->inliers = total.inliers;
    return KR_OK;
}
