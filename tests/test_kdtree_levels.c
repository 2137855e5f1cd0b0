/* The level-by-level tree build of the CUDA engine (gpu/kdtree_cuda.cu), run
 * on the host: the same per-element steps (core/kdtree_build_kernels.h) in
 * host loops, with a stable sort and an exclusive scan standing in for
 * CUB's, against the recursive host build (core/kdtree.c). CI has no GPU, so
 * this is where the device build's algorithm is checked on every commit;
 * parity_tree checks the kernels themselves on the GPU machine.
 *
 * Where no two points share a coordinate the two builds must give the same
 * tree bit for bit. With ties (a grid) the level build orders tied points by
 * index while the host's quickselect sends them left or right by its
 * partition's history (the host's fastest order, kept); there the trees are
 * compared by what tracking reads: the same shape and root split, every
 * point's cell coefficients equal whichever cell holds it, descents reaching
 * cells as near on average (within 25 %), and the level build a valid k-d
 * tree on its own (nearest neighbours equal brute force). */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_build_kernels.h"
#include "level_build.h"

/* Distinct coordinates on every axis (permutations of exact floats), normals
 * of varying length, some zero or NaN. */
static void distinct_points(size_t n, unsigned seed, float *pts, float *nrm)
{
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!perm) return;
    const float scale[3] = {1.0f / 4096, 1.0f / 8192, 1.0f / 2048};
    for (int a = 0; a < 3; a++) {
        for (size_t i = 0; i < n; i++)
            perm[i] = (uint32_t)i;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(kr_urand(&seed) * (double)i) % i;
            uint32_t t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
        for (size_t i = 0; i < n; i++)
            pts[3 * i + a] = ((float)perm[i] - 0.5f * (float)n) * scale[a];
    }
    for (size_t i = 0; i < 3 * n; i++)
        nrm[i] = (float)(2 * kr_urand(&seed) - 1) * 1.3f;
    for (size_t i = 0; i < n; i += 9)
        nrm[3 * i] = nrm[3 * i + 1] = nrm[3 * i + 2] = 0;
    for (size_t i = 4; i < n; i += 13)
        nrm[3 * i + 2] = NAN;
    free(perm);
}

/* The level build and the host build of the same points are one tree. */
static void check_same_as_host(const float *pts, const float *nv, size_t n)
{
    kr_kdtree *c = NULL, *g = level_build(pts, nv, n);
    REQUIRE_OK(kr_kdtree_build(&c, pts, nv, n));
    REQUIRE(g);
    CHECK_EQ(g->min_depth, c->min_depth);
    CHECK(c->n_internal == 0 || memcmp(g->nodes, c->nodes, c->n_internal * sizeof *c->nodes) == 0);
    CHECK(memcmp(g->cells, c->cells, n * sizeof *c->cells) == 0);
    CHECK(memcmp(g->leaf_orig, c->leaf_orig, n * sizeof *c->leaf_orig) == 0);
    CHECK(memcmp(g->orig_leaf, c->orig_leaf, n * sizeof *c->orig_leaf) == 0);
    if (kr_test_failed()) printf("    differs at n=%zu (normals %d)\n", n, nv != NULL);
    kr_kdtree_destroy(&c);
    kr_kdtree_destroy(&g);
}

KR_TEST(kdtree_levels, same_tree_as_host_build_without_ties)
{
    const size_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 100, 1023, 1024, 1025, 5000, 40000};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s];
        float *pts = malloc(3 * n * sizeof *pts), *nrm = malloc(3 * n * sizeof *nrm);
        REQUIRE(pts && nrm);
        distinct_points(n, (unsigned)(11 + s), pts, nrm);
        check_same_as_host(pts, NULL, n);
        check_same_as_host(pts, nrm, n);
        free(pts);
        free(nrm);
    }
}

/* The level build and the host build of points with ties: the same tree
 * for what tracking reads (see the head of this file). */
static void check_equivalent_to_host(const float *pts, size_t n)
{
    kr_kdtree *c = NULL, *g = level_build(pts, NULL, n);
    REQUIRE_OK(kr_kdtree_build(&c, pts, NULL, n));
    REQUIRE(g);
    CHECK_EQ(g->min_depth, c->min_depth);
    CHECK_EQ(g->nodes[0].axis, c->nodes[0].axis);
    CHECK(memcmp(&g->nodes[0].split, &c->nodes[0].split, sizeof(float)) == 0);
    CHECK_EQ(cells_differ_by_point(c, g), 0);
    size_t node_diff = 0;
    for (uint32_t i = 0; i < c->n_internal; i++)
        node_diff += memcmp(&c->nodes[i], &g->nodes[i], sizeof c->nodes[i]) != 0;
    double dc = mean_descent_d2(c, pts, n, 4000, 0.02f, 7),
           dg = mean_descent_d2(g, pts, n, 4000, 0.02f, 7);
    CHECK(dg <= 1.25 * dc && dc <= 1.25 * dg);
    printf("    n=%zu with ties: %zu of %u nodes differ; mean descent distance² %.4g / %.4g\n", n,
           node_diff, c->n_internal, dc, dg);
    kr_kdtree_destroy(&c);
    kr_kdtree_destroy(&g);
}

KR_TEST(kdtree_levels, equivalent_valid_tree_with_ties)
{
    /* A jittered-free grid: every coordinate repeats many times. */
    const size_t side = 23, n = side * side * 11;
    float *pts = malloc(3 * n * sizeof *pts);
    REQUIRE(pts);
    size_t i = 0;
    for (size_t z = 0; z < 11; z++)
        for (size_t y = 0; y < side; y++)
            for (size_t x = 0; x < side; x++, i++) {
                pts[3 * i] = 0.01f * (float)x;
                pts[3 * i + 1] = 0.02f * (float)y;
                pts[3 * i + 2] = 1.0f + 0.015f * (float)z;
            }
    check_equivalent_to_host(pts, n);
    /* Duplicated points too: every point of the first layer twice. */
    float *dup = malloc(3 * (n + side * side) * sizeof *dup);
    REQUIRE(dup);
    memcpy(dup, pts, 3 * n * sizeof *dup);
    memcpy(dup + 3 * n, pts, 3 * side * side * sizeof *dup);
    check_equivalent_to_host(dup, n + side * side);
    free(dup);
    kr_kdtree *g = level_build(pts, NULL, n);
    REQUIRE(g);
    /* Each point in exactly one cell, holding that point. */
    size_t bad_map = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t id = g->leaf_orig[k];
        bad_map += g->orig_leaf[id] != k || memcmp(g->cells[k].s, pts + 3 * (size_t)id, 12) != 0;
    }
    CHECK_EQ(bad_map, 0);
    /* Left points lie at or below each split and right points at or above:
     * nearest neighbours by back-tracking equal brute force. */
    unsigned seed = 3;
    size_t wrong = 0;
    for (int q = 0; q < 400; q++) {
        float x[3] = {(float)(0.3 * kr_urand(&seed) - 0.03), (float)(0.5 * kr_urand(&seed) - 0.03),
                      (float)(0.95 + 0.25 * kr_urand(&seed))};
        if (q % 4 == 0) memcpy(x, pts + 3 * (size_t)(kr_urand(&seed) * (double)n), sizeof x);
        float d2 = 0;
        kr_kdtree_nearest(g, x, &d2);
        double best = INFINITY;
        for (size_t j = 0; j < n; j++) {
            double dx = x[0] - pts[3 * j], dy = x[1] - pts[3 * j + 1], dz = x[2] - pts[3 * j + 2];
            best = fmin(best, dx * dx + dy * dy + dz * dz);
        }
        wrong += fabs(d2 - best) > 1e-6 * best + 1e-12;
    }
    CHECK_EQ(wrong, 0);
    kr_kdtree_destroy(&g);
    free(pts);
}
