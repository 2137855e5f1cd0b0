/* Per-node and per-leaf math of the model k-d tree build, written once for
 * the host build (core/kdtree.c) and its CUDA twin (gpu/kdtree_cuda.cu) so the
 * two produce the same tree: the complete-tree shape, the split axis and
 * plane of a node, and a leaf cell's quadratic coefficients (layout in
 * core/kdtree_layout.h). */
#ifndef KINREG_CORE_KDTREE_BUILD_KERNELS_H
#define KINREG_CORE_KDTREE_BUILD_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "core/kdtree_layout.h"
#include "core/kr_hd.h"

/* Leaves below node i in the complete tree of 2n − 1 nodes: count the nodes
 * level by level (each level of i's subtree is a contiguous index range) and
 * use leaves = (nodes + 1) / 2 of a full binary tree. */
static inline KR_HD uint32_t kr_kdtree_leaves_under(uint64_t i, uint64_t n)
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
static inline KR_HD uint32_t kr_kdtree_widest_axis(const float lo[3], const float hi[3])
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
static inline KR_HD float kr_kdtree_split(float max_left, float min_right)
{
    float split = 0.5f * (max_left + min_right);
    return split > max_left ? split : min_right;
}

/* A leaf cell from a model point p and its normal nrm (NULL: none). The
 * normal is renormalised so that A = n nᵀ is a projector even if the
 * caller's normals drifted; a zero or non-finite normal counts as none
 * (far field only). Products through KR_MUL: no fused multiply-add on the
 * device, so both builds round alike. */
static inline KR_HD void kr_kdtree_cell_fill(kr_kdtree_cell *c, const float p[3], const float *nrm)
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

/* ---- the level-by-level build (gpu/kdtree_cuda.cu) ------------------------
 *
 * One step of the level-parallel build per element; the device runs each as
 * a kernel over its elements, tests/test_kdtree_levels.c as a host loop (the
 * steps of one kernel touch disjoint outputs, so any order gives the same
 * result). The state: three index lists idx[a·n + p], each sorted by
 * coordinate a within every node's range [start, start + m) of positions;
 * node_of[p] the node that owns position p (the same in all three lists). */

/* Per internal node of the current level: its box (the ends of each list's
 * range), split axis and plane, and its children's ranges. */
static inline KR_HD void kr_kdtree_level_node(const float *pts, const uint32_t *idx, uint32_t n,
                                              uint32_t node, uint32_t *start, uint32_t *left_of,
                                              uint32_t *axis_of, kr_kdtree_node *nodes)
{
    uint32_t m = kr_kdtree_leaves_under(node, n), s = start[node];
    float lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
        lo[a] = pts[3 * (size_t)idx[(size_t)a * n + s] + a];
        hi[a] = pts[3 * (size_t)idx[(size_t)a * n + s + m - 1] + a];
    }
    uint32_t axis = kr_kdtree_widest_axis(lo, hi);
    uint32_t left = kr_kdtree_leaves_under(2 * (uint64_t)node + 1, n);
    const uint32_t *list = idx + (size_t)axis * n + s;
    float max_left = pts[3 * (size_t)list[left - 1] + axis];
    float min_right = pts[3 * (size_t)list[left] + axis];
    nodes[node].split = kr_kdtree_split(max_left, min_right);
    nodes[node].axis = axis;
    left_of[node] = left;
    axis_of[node] = axis;
    start[2 * node + 1] = s;
    start[2 * node + 2] = s + left;
}

/* Per position p of the split axis's list: the first `left` points of a
 * node's range go left (by point index). */
static inline KR_HD void kr_kdtree_level_mark(const uint32_t *idx, const uint32_t *node_of,
                                              const uint32_t *start, const uint32_t *left_of,
                                              const uint32_t *axis_of, uint32_t n,
                                              uint32_t n_internal, uint32_t p, uint32_t *goes_left)
{
    uint32_t node = node_of[p];
    if (node >= n_internal) return; /* a leaf already */
    uint32_t id = idx[(size_t)axis_of[node] * n + p];
    goes_left[id] = (p - start[node]) < left_of[node];
}

/* Per entry q = a·n + p of the three lists: whether it goes left (0 at
 * leaves), for the exclusive scan. */
static inline KR_HD void kr_kdtree_level_flag(const uint32_t *idx, const uint32_t *node_of,
                                              const uint32_t *goes_left, uint32_t n,
                                              uint32_t n_internal, size_t q, uint32_t *flags)
{
    uint32_t p = (uint32_t)(q % n);
    flags[q] = node_of[p] < n_internal ? goes_left[idx[q]] : 0;
}

/* Per entry q: the stable partition of its node's range in its list, given
 * the exclusive scan of the flags — left entries keep their order at the
 * front, right entries theirs behind them — and the new owner of the
 * position (written from list 0). */
static inline KR_HD void kr_kdtree_level_scatter(const uint32_t *idx, const uint32_t *node_of,
                                                 const uint32_t *flags, const uint32_t *scan,
                                                 const uint32_t *start, const uint32_t *left_of,
                                                 uint32_t n, uint32_t n_internal, size_t q,
                                                 uint32_t *idx_next, uint32_t *node_of_next)
{
    uint32_t a = (uint32_t)(q / n), p = (uint32_t)(q % n);
    size_t base = (size_t)a * n;
    uint32_t node = node_of[p];
    if (node >= n_internal) {
        idx_next[q] = idx[q];
        if (a == 0) node_of_next[p] = node;
        return;
    }
    uint32_t s = start[node];
    uint32_t before_left = scan[q] - scan[base + s]; /* left entries before p in the range */
    uint32_t to, child;
    if (flags[q]) {
        to = s + before_left;
        child = 2 * node + 1;
    } else {
        to = s + left_of[node] + (p - s - before_left);
        child = 2 * node + 2;
    }
    idx_next[base + to] = idx[q];
    if (a == 0) node_of_next[to] = child;
}

/* Per position p once every node is a leaf: its cell and the index maps. */
static inline KR_HD void kr_kdtree_level_leaf(const float *pts, const float *nrm,
                                              const uint32_t *idx, const uint32_t *node_of,
                                              uint32_t n_internal, uint32_t p,
                                              kr_kdtree_cell *cell_out, uint32_t *leaf_orig,
                                              uint32_t *orig_leaf)
{
    uint32_t id = idx[p], k = node_of[p] - n_internal;
    kr_kdtree_cell_fill(cell_out, pts + 3 * (size_t)id, nrm ? nrm + 3 * (size_t)id : NULL);
    leaf_orig[k] = id;
    orig_leaf[id] = k;
}

/* The cell index of position p after the build (where kr_kdtree_level_leaf's cell
 * goes). */
static inline KR_HD uint32_t kr_kdtree_level_cell_of(const uint32_t *node_of, uint32_t n_internal,
                                                     uint32_t p)
{
    return node_of[p] - n_internal;
}

#endif
