/* The device build's algorithm (build_levels in gpu/kdtree_cuda.cu) in host
 * loops: the same per-element steps (core/kdtree_build_kernels.h), with a
 * stable sort and an exclusive scan standing in for CUB's. Ties in a
 * coordinate go by point index, as the device's stable sorts order them, so
 * this is the device tree's exact reference on any input (parity_tree), and
 * kdtree_levels checks it against the recursive host build in CI. */
#ifndef KINREG_TESTS_LEVEL_BUILD_H
#define KINREG_TESTS_LEVEL_BUILD_H

#include <stdlib.h>
#include <string.h>

#include "core/kdtree_build_kernels.h"

typedef struct {
    float key;
    uint32_t id;
} keyed;

static inline int by_key_then_id(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The device build's driver (build_levels in gpu/kdtree_cuda.cu) on the host. */
static inline kr_kdtree *level_build(const float *pts, const float *nrm, size_t n)
{
    kr_kdtree *t = kr_kdtree_alloc(n);
    uint32_t *idx[2], *node_of[2];
    size_t N = n;
    idx[0] = malloc(3 * N * sizeof(uint32_t));
    idx[1] = malloc(3 * N * sizeof(uint32_t));
    node_of[0] = calloc(N, sizeof(uint32_t));
    node_of[1] = calloc(N, sizeof(uint32_t));
    uint32_t *goes_left = calloc(N, sizeof(uint32_t)), *flags = malloc(3 * N * sizeof(uint32_t)),
             *scan = malloc(3 * N * sizeof(uint32_t)), *start = calloc(2 * N, sizeof(uint32_t)),
             *left = calloc(N, sizeof(uint32_t)), *axis = calloc(N, sizeof(uint32_t));
    keyed *k = malloc(N * sizeof *k);
    if (!t || !idx[0] || !idx[1] || !node_of[0] || !node_of[1] || !goes_left || !flags || !scan ||
        !start || !left || !axis || !k) {
        kr_kdtree_destroy(&t);
        goto out;
    }
    for (int a = 0; a < 3; a++) {
        for (size_t i = 0; i < N; i++) {
            k[i].key = pts[3 * i + a];
            k[i].id = (uint32_t)i;
        }
        qsort(k, N, sizeof *k, by_key_then_id); /* = a stable radix sort of the ids */
        for (size_t i = 0; i < N; i++)
            idx[0][a * N + i] = k[i].id;
    }
    uint32_t ni = t->n_internal, nn = (uint32_t)n;
    int cur = 0;
    for (uint64_t first = 0; first < ni; first = 2 * first + 1) {
        uint64_t last = 2 * first + 1 < ni ? 2 * first + 1 : ni;
        for (uint64_t node = first; node < last; node++)
            kr_kdtree_level_node(pts, idx[cur], nn, (uint32_t)node, start, left, axis, t->nodes);
        for (uint32_t p = 0; p < nn; p++)
            kr_kdtree_level_mark(idx[cur], node_of[cur], start, left, axis, nn, ni, p, goes_left);
        for (size_t q = 0; q < 3 * N; q++)
            kr_kdtree_level_flag(idx[cur], node_of[cur], goes_left, nn, ni, q, flags);
        uint32_t sum = 0;
        for (size_t q = 0; q < 3 * N; q++) {
            scan[q] = sum;
            sum += flags[q];
        }
        for (size_t q = 0; q < 3 * N; q++)
            kr_kdtree_level_scatter(idx[cur], node_of[cur], flags, scan, start, left, nn, ni, q,
                                    idx[1 - cur], node_of[1 - cur]);
        cur = 1 - cur;
    }
    for (uint32_t p = 0; p < nn; p++) {
        kr_kdtree_cell c;
        kr_kdtree_level_leaf(pts, nrm, idx[cur], node_of[cur], ni, p, &c, t->leaf_orig,
                             t->orig_leaf);
        t->cells[kr_kdtree_level_cell_of(node_of[cur], ni, p)] = c;
    }
out:
    free(idx[0]);
    free(idx[1]);
    free(node_of[0]);
    free(node_of[1]);
    free(goes_left);
    free(flags);
    free(scan);
    free(start);
    free(left);
    free(axis);
    free(k);
    return t;
}

/* What tracking reads from a tree where two builds may split tied points
 * differently: each point keeps its coefficients whichever cell holds it
 * (returns the number of points whose cells differ), and a query descends
 * to a cell about as near (the mean squared distance from q queries, the
 * model points moved by up to `jitter`, to the point of the cell their
 * descent reaches). */
static inline size_t cells_differ_by_point(const kr_kdtree *a, const kr_kdtree *b)
{
    size_t bad = 0;
    for (uint32_t i = 0; i < a->n; i++)
        bad += memcmp(&a->cells[a->orig_leaf[i]], &b->cells[b->orig_leaf[i]],
                      sizeof(kr_kdtree_cell)) != 0;
    return bad;
}

static inline double mean_descent_d2(const kr_kdtree *t, const float *pts, size_t n, int q,
                                     float jitter, unsigned seed)
{
    double sum = 0;
    for (int k = 0; k < q; k++) {
        seed = seed * 1103515245u + 12345u;
        const float *p = pts + 3 * ((size_t)(seed >> 8) % n);
        float x[3];
        for (int a = 0; a < 3; a++) {
            seed = seed * 1103515245u + 12345u;
            x[a] = p[a] + jitter * ((float)(seed >> 8) / 8388608.0f - 1.0f);
        }
        const kr_kdtree_cell *c =
            &t->cells[kr_kdtree_descend_cell(t->nodes, t->n_internal, x[0], x[1], x[2])];
        double dx = x[0] - c->s[0], dy = x[1] - c->s[1], dz = x[2] - c->s[2];
        sum += dx * dx + dy * dy + dz * dz;
    }
    return sum / q;
}

#endif
