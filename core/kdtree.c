/* Model k-d tree: a complete binary tree in heap order whose leaves are cells
 * of one model point each (layout in core/kdtree_layout.h).
 *
 * Build: O(n log n). Each node splits its points on the axis of widest extent
 * into the number of leaves the complete-tree shape gives its left subtree
 * (≈ the median) by quickselect; the split plane lies halfway between the two
 * groups so a query descends into the cell of the nearer side. Subtrees are
 * built as OpenMP tasks: they touch disjoint ranges. */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_build_kernels.h"
#include "core/kdtree_knn.h"

typedef struct {
    float p[3];
    uint32_t idx;
} kd_item;

/* Serials of built trees, from 1 (0 means none). */
static atomic_ullong kd_serial;

/* Subtrees at least this large are worth a task of their own. */
#define KD_TASK_MIN 32768

/* Reorders a[0..m) so that a[k] holds the k-th smallest key on `axis`, keys
 * before it are <= and keys after it >= (Hoare partition, median of three;
 * handles runs of equal keys without degrading). Points that tie on the key
 * go left or right by the partition's history: the host build keeps this
 * order, the fastest and the one its accuracy figures were taken with. The
 * device build orders ties by point index instead (gpu/kdtree_cuda.cu), so
 * the two trees are identical where no coordinates tie and differ only in
 * which of the tied points a split sends left where they do: parity_tree
 * and kdtree_levels compare them by what tracking reads (docs/DESIGN.md §4). */
static void select_nth(kd_item *a, uint32_t m, uint32_t k, int axis)
{
    int64_t lo = 0, hi = (int64_t)m - 1, kk = k;
    while (hi > lo) {
        int64_t mid = lo + (hi - lo) / 2;
        kd_item t;
#define KD_KEY(x) ((x).p[axis])
#define KD_SWAP(x, y) (t = (x), (x) = (y), (y) = t)
        if (KD_KEY(a[mid]) < KD_KEY(a[lo])) KD_SWAP(a[mid], a[lo]);
        if (KD_KEY(a[hi]) < KD_KEY(a[lo])) KD_SWAP(a[hi], a[lo]);
        if (KD_KEY(a[hi]) < KD_KEY(a[mid])) KD_SWAP(a[hi], a[mid]);
        float pivot = KD_KEY(a[mid]);
        /* a[lo] <= pivot <= a[hi] act as sentinels for the two scans. */
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (KD_KEY(a[i]) < pivot)
                i++;
            while (KD_KEY(a[j]) > pivot)
                j--;
            if (i <= j) {
                KD_SWAP(a[i], a[j]);
                i++;
                j--;
            }
        }
#undef KD_KEY
#undef KD_SWAP
        /* Now a[lo..j] <= pivot <= a[i..hi], and a[j+1..i-1] equal it. */
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            break;
    }
}

static void make_leaf(kr_kdtree *t, uint32_t node, const kd_item *it, const float *normals)
{
    uint32_t k = node - t->n_internal;
    kr_kdtree_cell_fill(&t->cells[k], it->p, normals ? normals + 3 * (size_t)it->idx : NULL);
    t->leaf_orig[k] = it->idx;
    t->orig_leaf[it->idx] = k;
}

static void build_node(kr_kdtree *t, kd_item *items, uint32_t node, uint32_t m,
                       const float *normals)
{
    while (m > 1) {
        float lo[3] = {FLT_MAX, FLT_MAX, FLT_MAX}, hi[3] = {-FLT_MAX, -FLT_MAX, -FLT_MAX};
        for (uint32_t i = 0; i < m; i++)
            for (int a = 0; a < 3; a++) {
                float v = items[i].p[a];
                lo[a] = v < lo[a] ? v : lo[a];
                hi[a] = v > hi[a] ? v : hi[a];
            }
        int axis = (int)kr_kdtree_widest_axis(lo, hi);
        uint32_t left = kr_kdtree_leaves_under(2 * (uint64_t)node + 1, t->n);
        select_nth(items, m, left, axis);
        float max_left = -FLT_MAX;
        for (uint32_t i = 0; i < left; i++)
            max_left = items[i].p[axis] > max_left ? items[i].p[axis] : max_left;
        t->nodes[node].split = kr_kdtree_split(max_left, items[left].p[axis]);
        t->nodes[node].axis = (uint32_t)axis;

        kd_item *left_items = items;
        uint32_t left_node = 2 * node + 1;
        if (left >= KD_TASK_MIN) {
#pragma omp task firstprivate(left_items, left_node, left)
            build_node(t, left_items, left_node, left, normals);
        } else {
            build_node(t, left_items, left_node, left, normals);
        }
        /* Right child in this frame: recursion depth stays bounded by the
         * number of left turns, at most log2(n). */
        items += left;
        m -= left;
        node = 2 * node + 2;
    }
    make_leaf(t, node, items, normals);
    /* The left subtrees handed to tasks are done before this returns: a
     * caller inside a parallel region of its own (kr_refine_normals builds a
     * tree per view in one) would otherwise find them deferred to its
     * region's end, after kr_kdtree_build has freed their items. */
#pragma omp taskwait
}

kr_kdtree *kr_kdtree_alloc(size_t n)
{
    if (n == 0 || n > (size_t)INT32_MAX) return NULL;
    kr_kdtree *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->n = (uint32_t)n;
    t->n_internal = (uint32_t)n - 1;
    while ((2ull << t->min_depth) <= n)
        t->min_depth++;
    t->nodes = t->n_internal ? malloc(t->n_internal * sizeof *t->nodes) : NULL;
    t->cells = malloc(n * sizeof *t->cells);
    t->leaf_orig = malloc(n * sizeof *t->leaf_orig);
    t->orig_leaf = malloc(n * sizeof *t->orig_leaf);
    if ((t->n_internal && !t->nodes) || !t->cells || !t->leaf_orig || !t->orig_leaf) {
        kr_kdtree_destroy(&t);
        return NULL;
    }
    t->serial = atomic_fetch_add(&kd_serial, 1) + 1;
    return t;
}

kr_status kr_kdtree_build(kr_kdtree **out, const float *points, const float *normals, size_t n)
{
    if (!out || (!points && n))
        return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_build: NULL argument");
    if (n == 0) return kr_error(KR_ERR_EMPTY, "kr_kdtree_build: no model points");
    if (n > (size_t)INT32_MAX)
        return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_build: %zu points is too many", n);
    for (size_t i = 0; i < 3 * n; i++)
        if (!isfinite(points[i]))
            return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_build: point %zu is not finite", i / 3);

    kr_kdtree *t = kr_kdtree_alloc(n);
    kd_item *items = malloc(n * sizeof *items);
    if (!t || !items) goto nomem;
    for (size_t i = 0; i < n; i++) {
        memcpy(items[i].p, points + 3 * i, sizeof items[i].p);
        items[i].idx = (uint32_t)i;
    }
    if (n >= 2 * KD_TASK_MIN) {
#pragma omp parallel
#pragma omp single
        build_node(t, items, 0, (uint32_t)n, normals);
    } else {
        build_node(t, items, 0, (uint32_t)n, normals);
    }
    free(items);
    *out = t;
    return KR_OK;
nomem:
    free(items);
    kr_kdtree_destroy(&t);
    return kr_error(KR_ERR_NOMEM, "kr_kdtree_build: out of memory for %zu points", n);
}

void kr_kdtree_destroy(kr_kdtree **tree)
{
    if (!tree || !*tree) return;
    kr_kdtree *t = *tree;
    if (t->device_release) t->device_release(t->device);
    free(t->nodes);
    free(t->cells);
    free(t->leaf_orig);
    free(t->orig_leaf);
    free(t);
    *tree = NULL;
}

size_t kr_kdtree_size(const kr_kdtree *tree)
{
    return tree ? tree->n : 0;
}

void kr_kdtree_point(const kr_kdtree *tree, size_t i, float p[3], float n[3])
{
    if (!tree || i >= tree->n) {
        for (int a = 0; a < 3; a++) {
            if (p) p[a] = NAN;
            if (n) n[a] = NAN;
        }
        return;
    }
    const kr_kdtree_cell *c = &tree->cells[tree->orig_leaf[i]];
    for (int a = 0; a < 3; a++) {
        if (p) p[a] = c->s[a];
        if (n) n[a] = c->n[3] != 0 ? c->n[a] : NAN;
    }
}

size_t kr_kdtree_descend(const kr_kdtree *tree, const float q[3])
{
    if (!tree || !q) return (size_t)-1;
    return tree->leaf_orig[kr_kdtree_descend_cell(tree->nodes, tree->n_internal, q[0], q[1], q[2])];
}

uint32_t kr_kdtree_nearest_cell(const kr_kdtree *t, const float q[3], float *dist2)
{
    uint32_t cell = kr_kdtree_nearest_cell_within(t, q, INFINITY, dist2);
    return cell == UINT32_MAX ? 0 : cell; /* a NaN query: some cell, at distance inf */
}

uint32_t kr_kdtree_nearest_cell_within(const kr_kdtree *t, const float q[3], float max_dist2,
                                       float *dist2)
{
    /* The search is core/kdtree_knn.h's, shared with the device
     * (pipeline/refine/refine_fit_cuda.cu). */
    float best;
    uint32_t cell =
        kr_kdtree_nearest_within_hd(t->nodes, t->n_internal, t->cells, q, max_dist2, &best);
    if (dist2) *dist2 = best;
    return cell;
}

size_t kr_kdtree_nearest(const kr_kdtree *tree, const float q[3], float *dist2)
{
    if (!tree || !q) return (size_t)-1;
    return tree->leaf_orig[kr_kdtree_nearest_cell(tree, q, dist2)];
}

size_t kr_kdtree_nearest_within(const kr_kdtree *tree, const float q[3], float max_dist2,
                                float *dist2)
{
    if (!tree || !q) return (size_t)-1;
    uint32_t cell = kr_kdtree_nearest_cell_within(tree, q, max_dist2, dist2);
    return cell == UINT32_MAX ? (size_t)-1 : tree->leaf_orig[cell];
}

size_t kr_kdtree_knn(const kr_kdtree *t, const float q[3], size_t k, uint32_t *idx, float *d2)
{
    if (!t || !q || !idx || k == 0) return 0;
    if (k > t->n) k = t->n;
    if (k > KR_KDTREE_KNN_MAX) k = KR_KDTREE_KNN_MAX;
    /* The search is core/kdtree_knn.h's, shared with the device
     * (pipeline/refine/refine_fields_cuda.cu). */
    float bd[KR_KDTREE_KNN_MAX];
    uint32_t bc[KR_KDTREE_KNN_MAX];
    int found = kr_kdtree_knn_hd(t->nodes, t->n_internal, t->cells, q, (int)k, bd, bc);
    for (int j = 0; j < found; j++) {
        idx[j] = t->leaf_orig[bc[j]];
        if (d2) d2[j] = bd[j];
    }
    return (size_t)found;
}
