/* The independent measure's per-sample step (pipeline/refine/refine_fit.c),
 * written once as KR_HD for the OpenMP loop and the CUDA kernel
 * (pipeline/refine/refine_fit_cuda.cu): a sample of view i, moved into every
 * other view j it may reach, and its squared distance to the nearest point
 * of all of them, capped. Products go through KR_MUL/KR_DMUL (no FMA on the
 * device), so both engines give the same distances bit for bit and the
 * measure's figures do not depend on where it ran. */
#ifndef KINREG_PIPELINE_REFINE_REFINE_FIT_KERNELS_H
#define KINREG_PIPELINE_REFINE_REFINE_FIT_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "core/kdtree_knn.h"
#include "core/kr_hd.h"
#include "kinreg/pose.h"

/* Which cells of a coarse grid in a view's frame lie within the radius of
 * one of its points (refine_fit.c, occupancy_build): x fastest. */
typedef struct {
    double lo[3], cell;
    int dim[3];
    const uint64_t *bits; /* NULL: no grid, every place may hold a point */
} kr_fit_occupancy;

/* One view as the measure reads it: its tree (cells NULL for a view too
 * small to pair with), bounding sphere (centre, radius; view frame) and
 * occupancy. Host pointers on the host, device pointers on a device. */
typedef struct {
    const kr_kdtree_node *nodes;
    const kr_kdtree_cell *cells;
    uint32_t n_internal;
    double sphere[4];
    kr_fit_occupancy occupied;
} kr_fit_view;

static inline KR_HD void kr_fit_apply(const kr_pose *a, const double p[3], double out[3])
{
    for (int i = 0; i < 3; i++)
        out[i] = KR_DMUL(a->R[3 * i], p[0]) + KR_DMUL(a->R[3 * i + 1], p[1]) +
                 KR_DMUL(a->R[3 * i + 2], p[2]) + a->t[i];
}

/* Can a point within the occupancy's radius of q (view frame) exist? */
static inline KR_HD int kr_fit_may_hold(const kr_fit_occupancy *g, const double q[3])
{
    if (!g->bits) return 1;
    size_t i = 0;
    for (int a = 2; a >= 0; a--) {
        double x = floor((q[a] - g->lo[a]) / g->cell);
        if (!(x >= 0 && x < g->dim[a])) return 0;
        i = i * (size_t)g->dim[a] + (size_t)x;
    }
    return (int)((g->bits[i / 64] >> (i % 64)) & 1);
}

/* The squared distance (capped at cap2) from sample p of view i at pose
 * `pose` to the nearest point of the other views at their poses, whose
 * inverses are inv[0 … n). prune: the occupancies hold for radii up to
 * sqrt(cap2). */
static inline KR_HD double kr_fit_sample(const kr_fit_view *views, int n, int i,
                                         const kr_pose *pose, const kr_pose *inv, const float p[3],
                                         double cap2, int prune)
{
    double pv[3] = {p[0], p[1], p[2]}, w[3];
    kr_fit_apply(pose, pv, w);
    double best = cap2;
    for (int j = 0; j < n; j++) {
        const kr_fit_view *v = &views[j];
        if (j == i || !v->cells) continue;
        double q[3];
        kr_fit_apply(&inv[j], w, q);
        double dc[3] = {q[0] - v->sphere[0], q[1] - v->sphere[1], q[2] - v->sphere[2]};
        double reach = v->sphere[3] + sqrt(best);
        if (KR_DMUL(dc[0], dc[0]) + KR_DMUL(dc[1], dc[1]) + KR_DMUL(dc[2], dc[2]) >
            KR_DMUL(reach, reach))
            continue;
        if (prune && !kr_fit_may_hold(&v->occupied, q)) continue;
        float qf[3] = {(float)q[0], (float)q[1], (float)q[2]}, d2;
        if (kr_kdtree_nearest_within_hd(v->nodes, v->n_internal, v->cells, qf, (float)best, &d2) !=
                UINT32_MAX &&
            d2 < best)
            best = d2;
    }
    return best;
}

#endif
