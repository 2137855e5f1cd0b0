/* Node layout of the model k-d tree, exposed to the Newton hot loop (and later
 * the CUDA twin) so a descent inlines into the caller.
 *
 * The tree is a complete ("left-balanced") binary tree in heap order: n leaves
 * and n − 1 internal nodes, node i has children 2i + 1 and 2i + 2, nodes
 * 0 … n − 2 are internal and nodes n − 1 … 2n − 2 are leaves. Heap order needs
 * no child pointers (an internal node is 8 bytes) and stores the tree level by
 * level, as the paper serialises it for the GPU: the top levels that every
 * query visits share a few cache lines. Each leaf is one cell holding one model
 * point. */
#ifndef KINREG_CORE_KDTREE_LAYOUT_H
#define KINREG_CORE_KDTREE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "kinreg/kdtree.h"

#include "core/kr_hd.h"

/* Internal node: points with coordinate `axis` below `split` go left. */
typedef struct {
    float split;
    uint32_t axis;
} kr_kdtree_node;

/* One leaf cell, two float4 for aligned GPU loads:
 * s = (s*, n·s*) — the model point and the plane offset;
 * n = (n, 1) with a unit normal, or (0, 0, 0, 0) when the point has none
 * (far-field only). The quadratic coefficients follow from these:
 * near field A = n nᵀ, b = n (n·s*), c = (n·s*)²; far field A = I, b = s*,
 * c = |s*|². */
typedef struct {
    float s[4];
    float n[4];
} kr_kdtree_cell;

struct kr_kdtree {
    uint32_t n;                /* leaves = model points */
    uint32_t n_internal;       /* n − 1 */
    uint32_t min_depth;        /* depth of the shallowest leaf, floor(log2 n): all
                                  nodes above it are internal */
    kr_kdtree_node *nodes;     /* n_internal entries (NULL when n == 1) */
    kr_kdtree_cell *cells;     /* n entries, leaf order: cell k is node n − 1 + k */
    uint32_t *leaf_orig;       /* cell → caller's index */
    uint32_t *orig_leaf;       /* caller's index → cell */
    unsigned long long serial; /* unique per build in this process: a device
                                  copy of the tree is known by it */
    /* A copy of nodes and cells that lives on a device (built there:
     * gpu/kdtree_cuda.cu), or NULL; released with the tree by device_release,
     * which the builder sets (core/ knows nothing of devices). */
    void *device;
    void (*device_release)(void *device);
};

/* Asks the cache for the cell of the caller's point i (ignored past the
 * end). Walks over the points in the caller's order visit the cells in a
 * shuffled order: a strided walk over a million-point model (recovery's
 * decimation, the free-space check) waited on memory at every point.
 * Prefetching KR_KDTREE_PREFETCH_AHEAD points ahead overlaps those waits. */
#define KR_KDTREE_PREFETCH_AHEAD 16
static inline void kr_kdtree_prefetch(const kr_kdtree *tree, size_t i)
{
    if (i < tree->n) __builtin_prefetch(&tree->cells[tree->orig_leaf[i]]);
}

/* A tree of n points with its arrays allocated but not filled and a fresh
 * serial, for the builds (core/kdtree.c, gpu/kdtree_cuda.cu); NULL when out
 * of memory or n is 0 or above INT32_MAX. */
#ifdef __cplusplus
extern "C" {
#endif
kr_kdtree *kr_kdtree_alloc(size_t n);
#ifdef __cplusplus
}
#endif

/* Descent without back-tracking to the cell whose region contains q. Branch
 * free: the next node index is computed from the comparison, so the only
 * latency is the dependent node loads. */
static inline KR_HD uint32_t kr_kdtree_descend_cell(const kr_kdtree_node *nodes,
                                                    uint32_t n_internal, float qx, float qy,
                                                    float qz)
{
    /* q[axis] by indexing, not by a branch on the axis (unpredictable). */
    const float q[3] = {qx, qy, qz};
    uint32_t i = 0;
    while (i < n_internal) {
        kr_kdtree_node nd = nodes[i];
        i = 2 * i + 1 + (uint32_t)(q[nd.axis] >= nd.split);
    }
    return i - n_internal;
}

/* Descent of KR_KDTREE_BATCH queries in lockstep: the queries' node loads are
 * independent, so the CPU overlaps them instead of waiting out one dependent
 * chain per query (a complete tree has every leaf at depth min_depth or
 * min_depth + 1, so all lanes take the same number of steps). q holds x, y, z
 * per query; `count` <= KR_KDTREE_BATCH lanes are used. */
#define KR_KDTREE_BATCH 16
static inline void kr_kdtree_descend_batch(const kr_kdtree *t, const float (*q)[3], int count,
                                           uint32_t *cell)
{
    uint32_t node[KR_KDTREE_BATCH];
    for (int k = 0; k < KR_KDTREE_BATCH; k++)
        node[k] = 0;
    for (uint32_t d = 0; d < t->min_depth; d++)
        for (int k = 0; k < KR_KDTREE_BATCH; k++) {
            kr_kdtree_node nd = t->nodes[node[k]];
            node[k] = 2 * node[k] + 1 + (uint32_t)(q[k][nd.axis] >= nd.split);
        }
    for (int k = 0; k < count; k++) {
        uint32_t i = node[k];
        if (i < t->n_internal) {
            kr_kdtree_node nd = t->nodes[i];
            i = 2 * i + 1 + (uint32_t)(q[k][nd.axis] >= nd.split);
        }
        cell[k] = i - t->n_internal;
    }
}

/* Exact nearest cell (back-tracking); *dist2 gets the squared distance. */
uint32_t kr_kdtree_nearest_cell(const kr_kdtree *tree, const float q[3], float *dist2);
/* The same among the cells closer than sqrt(max_dist2): UINT32_MAX and
 * *dist2 = max_dist2 when there is none. */
uint32_t kr_kdtree_nearest_cell_within(const kr_kdtree *tree, const float q[3], float max_dist2,
                                       float *dist2);

/* The k nearest model points of q (original indices, ascending distance,
 * squared distances in d2 when not NULL). Returns how many were found
 * (min(k, size)). For normal estimation by PCA and tests. */
size_t kr_kdtree_knn(const kr_kdtree *tree, const float q[3], size_t k, uint32_t *idx, float *d2);

/* Unit normals (3 floats per point, caller's order) of the tree's own points
 * by PCA over their k nearest neighbours (3 <= k <= 64), oriented so that
 * n·toward >= 0 (toward: the direction to the sensor); NaN where the
 * neighbourhood is degenerate. Ignores the normals stored in the tree. */
kr_status kr_kdtree_normals_pca(const kr_kdtree *tree, size_t k, const float toward[3],
                                float *normals);

#endif
