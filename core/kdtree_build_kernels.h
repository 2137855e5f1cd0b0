/* Per-node and per-leaf math of the model k-d tree build, written once for
 * the host build (core/kdtree.c) and its CUDA twin (gpu/tree_build.cu) so the
 * two produce the same tree: the complete-tree shape, the split axis and
 * plane of a node, and a leaf cell's quadratic coefficients (layout in
 * core/kdtree_internal.h). */
#ifndef KINREG_CORE_KDTREE_BUILD_KERNELS_H
#define KINREG_CORE_KDTREE_BUILD_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "core/kdtree_internal.h"
#include "core/kr_hd.h"

/* Leaves below node i in the complete tree of 2n − 1 nodes: count the nodes
 * level by level (each level of i's subtree is a contiguous index range) and
 * use leaves = (nodes + 1) / 2 of a full binary tree. */
static inline KR_HD uint32_t kr_kd_leaves_under(uint64_t i, uint64_t n)
{
    uint64_t N = 2 * n - 1, lo = i, hi = i, count = 0;
    while (lo < N) {
        count += (hi < N - 1 ? hi : N - 1) - lo + 1;
        lo = 2 * lo + 1;
        hi = 2 * hi + 2;
    }
    return (uint32_t)((count + 1) / 2);
}

/* The axis of widest extent of the box lo..hi; ties go to the lower axis. */
static inline KR_HD uint32_t kr_kd_widest_axis(const float lo[3], const float hi[3])
{
    uint32_t axis = 0;
    for (uint32_t a = 1; a < 3; a++)
        if (hi[a] - lo[a] > hi[axis] - lo[axis]) axis = a;
    return axis;
}

/* The split plane between the largest coordinate of the left group and the
 * smallest of the right one: halfway, so a query descends into the cell of
 * the nearer side. Descent goes right when v >= split, so every left point
 * stays strictly below it where the groups differ (then each model point
 * lies in its own cell). */
static inline KR_HD float kr_kd_split(float max_left, float min_right)
{
    float split = 0.5f * (max_left + min_right);
    return split > max_left ? split : min_right;
}

/* A leaf cell from a model point p and its normal nrm (NULL: none). The
 * normal is renormalised so that A = n nᵀ is a projector even if the
 * caller's normals drifted; a zero or non-finite normal counts as none
 * (far field only). Products through KR_MUL: no fused multiply-add on the
 * device, so both builds round alike. */
static inline KR_HD void kr_kd_cell_fill(kr_kd_cell *c, const float p[3], const float *nrm)
{
    c->s[0] = p[0];
    c->s[1] = p[1];
    c->s[2] = p[2];
    float nx = NAN, ny = 0, nz = 0;
    if (nrm) {
        nx = nrm[0];
        ny = nrm[1];
        nz = nrm[2];
    }
    float len = sqrtf(KR_MUL(nx, nx) + KR_MUL(ny, ny) + KR_MUL(nz, nz));
    if (isfinite(len) && len > 1e-12f) {
        c->n[0] = nx / len;
        c->n[1] = ny / len;
        c->n[2] = nz / len;
        c->n[3] = 1;
        c->s[3] = KR_MUL(c->n[0], c->s[0]) + KR_MUL(c->n[1], c->s[1]) + KR_MUL(c->n[2], c->s[2]);
    } else {
        c->n[0] = c->n[1] = c->n[2] = c->n[3] = 0;
        c->s[3] = 0;
    }
}

#endif
