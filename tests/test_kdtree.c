/* k-d tree: exact nearest neighbours equal brute force, the descent lands in
 * the cell that contains the query, build edge cases. Its speed is measured
 * by `kinreg bench` (the "tree build (snapshot)" stage), not here. */
#include "kr_test.h"

#include <stdint.h>
#include <stdlib.h>

#include "kinreg/frame.h"
#include "kinreg/kdtree.h"
#include "core/kdtree_layout.h"

static uint64_t rng_state = 88172645463325252ull;
static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double brute_nearest(const float *pts, size_t n, const float q[3], size_t *best_i)
{
    double best = INFINITY;
    for (size_t i = 0; i < n; i++) {
        double dx = (double)q[0] - pts[3 * i], dy = (double)q[1] - pts[3 * i + 1],
               dz = (double)q[2] - pts[3 * i + 2];
        double d = dx * dx + dy * dy + dz * dz;
        if (d < best) {
            best = d;
            *best_i = i;
        }
    }
    return best;
}

static double dist2_to(const float *pts, size_t i, const float q[3])
{
    double dx = (double)q[0] - pts[3 * i], dy = (double)q[1] - pts[3 * i + 1],
           dz = (double)q[2] - pts[3 * i + 2];
    return dx * dx + dy * dy + dz * dz;
}

/* A cloud with structure that stresses the build: uniform points, a tight
 * cluster, exact duplicates and points sharing one coordinate. */
static float *mixed_cloud(size_t n)
{
    float *p = malloc(3 * n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        double x = urand() * 2 - 1, y = urand() * 2 - 1, z = urand() * 2 - 1;
        if (i % 10 == 1) x = 0.3 + 1e-3 * x, y = -0.2 + 1e-3 * y, z = 0.5 + 1e-3 * z; /* cluster */
        if (i % 17 == 2) z = 0.25;                                                    /* a plane */
        p[3 * i] = (float)x;
        p[3 * i + 1] = (float)y;
        p[3 * i + 2] = (float)z;
        if (i % 97 == 3 && i > 3) memcpy(p + 3 * i, p + 3 * (i - 1), 3 * sizeof *p); /* duplicate */
    }
    return p;
}

KR_TEST(kdtree, build_edge_cases)
{
    kr_kdtree *t = (kr_kdtree *)(uintptr_t)1;
    float p[6] = {0.1f, 0.2f, 0.3f, NAN, 0, 0};
    CHECK_STATUS(kr_kdtree_build(&t, p, NULL, 0), KR_ERR_EMPTY);
    CHECK(t == (kr_kdtree *)(uintptr_t)1); /* failed call leaves the output alone */
    CHECK_STATUS(kr_kdtree_build(NULL, p, NULL, 1), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_kdtree_build(&t, NULL, NULL, 1), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_kdtree_build(&t, p, NULL, 2), KR_ERR_INVALID_ARG); /* NaN point */
    CHECK_CONTAINS(kr_last_error(), "point 1");

    t = NULL;
    float n1[3] = {0, 0, 2}; /* not unit: stored normalised */
    REQUIRE_OK(kr_kdtree_build(&t, p, n1, 1));
    CHECK_EQ(kr_kdtree_size(t), 1);
    float q[3] = {5, -3, 2}, d2 = -1;
    CHECK_EQ(kr_kdtree_descend(t, q), 0);
    CHECK_EQ(kr_kdtree_nearest(t, q, &d2), 0);
    CHECK_NEAR(d2, 4.9 * 4.9 + 3.2 * 3.2 + 1.7 * 1.7, 1e-4);
    float pp[3], nn[3];
    kr_kdtree_point(t, 0, pp, nn);
    CHECK(pp[1] == 0.2f);
    CHECK_NEAR(nn[2], 1.0, 1e-7);
    kr_kdtree_point(t, 1, pp, nn); /* out of range: NaN, no crash */
    CHECK(isnan(pp[0]) && isnan(nn[0]));
    kr_kdtree_destroy(&t);
    CHECK(t == NULL);
    kr_kdtree_destroy(&t);
    kr_kdtree_destroy(NULL);
}

KR_TEST(kdtree, point_order_and_missing_normals)
{
    enum { N = 257 };
    float *p = mixed_cloud(N), nrm[3 * N];
    for (int i = 0; i < N; i++) {
        nrm[3 * i] = i % 3 ? 0.0f : NAN;
        nrm[3 * i + 1] = 1;
        nrm[3 * i + 2] = 0;
    }
    kr_kdtree *t = NULL;
    REQUIRE_OK(kr_kdtree_build(&t, p, nrm, N));
    for (int i = 0; i < N; i++) {
        float pp[3], nn[3];
        kr_kdtree_point(t, (size_t)i, pp, nn);
        CHECK(pp[0] == p[3 * i] && pp[1] == p[3 * i + 1] && pp[2] == p[3 * i + 2]);
        if (i % 3)
            CHECK(nn[1] == 1.0f);
        else
            CHECK(isnan(nn[0]));
    }
    kr_kdtree_destroy(&t);
    free(p);
}

KR_TEST(kdtree, exact_matches_brute_force)
{
    /* Several sizes so that the complete-tree shapes with odd leaf counts are
     * covered, then the 10k-point cloud with 2k queries. */
    const size_t sizes[] = {2, 3, 5, 7, 31, 1000, 10000};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        float *p = mixed_cloud(n);
        kr_kdtree *t = NULL;
        REQUIRE_OK(kr_kdtree_build(&t, p, NULL, n));
        int queries = n == 10000 ? 2000 : 200, bad = 0;
        for (int k = 0; k < queries; k++) {
            float q[3];
            /* a quarter far outside the cloud (up to 100 units away) */
            double scale = k % 4 == 0 ? 100 : 1.2;
            for (int a = 0; a < 3; a++)
                q[a] = (float)((urand() * 2 - 1) * scale);
            if (k % 7 == 0)
                memcpy(q, p + 3 * (size_t)(urand() * n), sizeof q); /* on a model point */
            size_t bi = 0;
            double want = brute_nearest(p, n, q, &bi);
            float d2 = -1;
            size_t got = kr_kdtree_nearest(t, q, &d2);
            REQUIRE(got < n);
            /* ties may return another index at the same distance */
            double have = dist2_to(p, got, q);
            if (fabs(have - want) > 1e-6 * (1 + want) || fabs(d2 - want) > 1e-5 * (1 + want)) {
                if (bad++ < 5)
                    CHECK_MSG(0, "n=%zu query %d: tree %zu at %.9g, brute force %zu at %.9g", n, k,
                              got, have, bi, want);
            }
        }
        CHECK_EQ(bad, 0);
        kr_kdtree_destroy(&t);
        free(p);
    }
}

/* The bounded search finds what brute force finds within the bound, and
 * nothing (with the bound as the distance) where brute force finds nothing
 * nearer. */
KR_TEST(kdtree, nearest_within_matches_brute_force)
{
    const size_t n = 5000;
    float *p = mixed_cloud(n);
    kr_kdtree *t = NULL;
    REQUIRE_OK(kr_kdtree_build(&t, p, NULL, n));
    int bad = 0, none = 0;
    for (int k = 0; k < 2000; k++) {
        float q[3];
        double scale = k % 2 ? 3 : 1.2;
        for (int a = 0; a < 3; a++)
            q[a] = (float)((urand() * 2 - 1) * scale);
        size_t bi = 0;
        double want = brute_nearest(p, n, q, &bi);
        float bound = (float)(urand() * urand()), d2 = -1;
        size_t got = kr_kdtree_nearest_within(t, q, bound, &d2);
        if (want < bound * (1 - 1e-5)) {
            bad += !(got < n) || fabs(dist2_to(p, got < n ? got : 0, q) - want) > 1e-6 * (1 + want);
        } else if (want > bound * (1 + 1e-5)) {
            none++;
            bad += got != (size_t)-1 || d2 != bound;
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_GT(none, 100); /* both branches were exercised */
    kr_kdtree_destroy(&t);
    free(p);
}

/* A tree of 49 152 - 65 535 points builds its first left subtree as an
 * OpenMP task without a parallel region of its own: built by a caller that is
 * inside one (kr_refine_normals builds a tree per view in a parallel loop),
 * the task was deferred to the caller's region's end, after the build had
 * returned and freed its items (a crash of `kinreg register --method newton`
 * on a depth frame of 60 000 points). Each of two threads builds one here and
 * checks it against brute force. */
KR_TEST(kdtree, builds_whole_inside_a_parallel_region)
{
    const size_t n = 50000;
    float *p = mixed_cloud(n);
    float q[2][64][3];
    for (int k = 0; k < 64; k++)
        for (int a = 0; a < 3; a++) {
            q[0][k][a] = (float)(urand() * 2 - 1);
            q[1][k][a] = (float)(urand() * 2 - 1);
        }
    int bad = 0, failed = 0;
#pragma omp parallel for num_threads(2) reduction(+ : bad, failed)
    for (int v = 0; v < 2; v++) {
        kr_kdtree *t = NULL;
        if (kr_kdtree_build(&t, p, NULL, n) != KR_OK) {
            failed++;
            continue;
        }
        for (int k = 0; k < 64; k++) {
            size_t bi;
            double want = brute_nearest(p, n, q[v][k], &bi);
            float d2 = -1;
            size_t got = kr_kdtree_nearest(t, q[v][k], &d2);
            bad += got >= n || fabs(dist2_to(p, got, q[v][k]) - want) > 1e-6 * (1 + want);
        }
        kr_kdtree_destroy(&t);
    }
    CHECK_EQ(failed, 0);
    CHECK_EQ(bad, 0);
    free(p);
}

KR_TEST(kdtree, knn_matches_brute_force)
{
    size_t n = 3000;
    float *p = mixed_cloud(n);
    kr_kdtree *t = NULL;
    REQUIRE_OK(kr_kdtree_build(&t, p, NULL, n));
    double *d = malloc(n * sizeof *d);
    for (int k = 0; k < 100; k++) {
        float q[3];
        for (int a = 0; a < 3; a++)
            q[a] = (float)(urand() * 2.4 - 1.2);
        for (size_t i = 0; i < n; i++)
            d[i] = dist2_to(p, i, q);
        uint32_t idx[12];
        float d2[12];
        size_t got = kr_kdtree_knn(t, q, 12, idx, d2);
        REQUIRE(got == 12);
        for (size_t j = 0; j < got; j++) {
            /* the j-th result is the j-th smallest distance: exactly j points are closer */
            double dj = dist2_to(p, idx[j], q);
            size_t closer = 0;
            for (size_t i = 0; i < n; i++)
                closer += d[i] < dj - 1e-9;
            CHECK_MSG(closer <= j, "query %d: result %zu has %zu closer points", k, j, closer);
            if (j) CHECK(d2[j] >= d2[j - 1]);
        }
    }
    free(d);
    kr_kdtree_destroy(&t);
    free(p);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Points on a sphere of radius 1 (a surface, like the model), spacing ~1 cm. */
static float *sphere_cloud(size_t n)
{
    float *p = malloc(3 * n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        double z = urand() * 2 - 1, a = urand() * 2 * M_PI, r = sqrt(1 - z * z);
        p[3 * i] = (float)(r * cos(a));
        p[3 * i + 1] = (float)(r * sin(a));
        p[3 * i + 2] = (float)z;
    }
    return p;
}

KR_TEST(kdtree, descend_lands_in_the_query_cell)
{
    size_t n = 20000;
    float *p = sphere_cloud(n);
    kr_kdtree *t = NULL;
    REQUIRE_OK(kr_kdtree_build(&t, p, NULL, n));

    /* Each model point lies in its own cell (the split plane separates distinct
     * coordinates strictly), so descending from it returns it. */
    int self = 0;
    for (size_t i = 0; i < n; i++)
        self += kr_kdtree_descend(t, p + 3 * i) == i;
    CHECK_EQ(self, (int)n);

    /* Queries near the surface (noise up to half the point spacing, as frame
     * points near a denser model): the descended point
     * shares q's cell, checked independently of the descent loop: at every
     * split on q's root-to-leaf path the point is on q's side (or on the plane). */
    enum { Q = 4000 };
    double ratio[Q], excess[Q];
    int outside = 0, exact = 0;
    double spacing = sqrt(4 * M_PI / n);
    for (int k = 0; k < Q; k++) {
        float q[3];
        size_t base = (size_t)(urand() * n);
        for (int a = 0; a < 3; a++)
            q[a] = p[3 * base + a] + (float)((urand() * 2 - 1) * 0.5 * spacing);
        size_t d = kr_kdtree_descend(t, q);
        REQUIRE(d < n);
        uint32_t node = 0;
        while (node < t->n_internal) {
            const kr_kdtree_node *nd = &t->nodes[node];
            int q_right = q[nd->axis] >= nd->split, p_right = p[3 * d + nd->axis] >= nd->split;
            if (q_right != p_right && p[3 * d + nd->axis] != nd->split) outside++;
            node = 2 * node + 1 + (uint32_t)q_right;
        }
        size_t bi = 0;
        double nn = brute_nearest(p, n, q, &bi), dd = dist2_to(p, d, q);
        CHECK_MSG(dd >= nn - 1e-9, "descent closer than the nearest neighbour");
        exact += dd <= nn + 1e-12;
        ratio[k] = sqrt(dd) / fmax(sqrt(nn), 1e-12);
        excess[k] = (sqrt(dd) - sqrt(nn)) / spacing;
    }
    CHECK_EQ(outside, 0);
    /* The cell error is a statistic, not a bound (a cell can be long and
     * thin): most queries get their true nearest neighbour and the typical
     * excess is small. */
    qsort(ratio, Q, sizeof *ratio, cmp_double);
    qsort(excess, Q, sizeof *excess, cmp_double);
    printf("    descent on a sphere (%zu pts, spacing %.1f mm): exact %.1f%%, distance ratio "
           "median %.3f; "
           "excess over the NN distance in spacings: p90 %.3f, p99 %.3f, max %.3f\n",
           n, 1e3 * spacing, 100.0 * exact / Q, ratio[Q / 2], excess[Q * 9 / 10],
           excess[Q * 99 / 100], excess[Q - 1]);
    CHECK_GE(exact, Q / 2);
    CHECK_LE(ratio[Q / 2], 1.0 + 1e-9);
    CHECK_LE(excess[Q * 9 / 10], 1.0);
    CHECK_LE(excess[Q * 99 / 100], 3.0);
    kr_kdtree_destroy(&t);
    free(p);
}

KR_TEST(kdtree, pca_normals_of_a_plane)
{
    /* Points on the plane n·x = 0.3 with n = (1, 2, 2)/3: every PCA normal is
     * ±n, oriented towards the given direction. */
    size_t n = 2000;
    float *p = malloc(3 * n * sizeof *p), *nrm = malloc(3 * n * sizeof *nrm);
    const double nv[3] = {1 / 3.0, 2 / 3.0, 2 / 3.0}, u[3] = {2 / 3.0, 1 / 3.0, -2 / 3.0},
                 v[3] = {2 / 3.0, -2 / 3.0, 1 / 3.0}; /* orthonormal frame */
    for (size_t i = 0; i < n; i++) {
        double a = urand() - 0.5, b = urand() - 0.5;
        for (int k = 0; k < 3; k++)
            p[3 * i + k] = (float)(0.3 * nv[k] + a * u[k] + b * v[k]);
    }
    kr_kdtree *t = NULL;
    REQUIRE_OK(kr_kdtree_build(&t, p, NULL, n));
    const float toward[3] = {0, 0, -1};
    REQUIRE_OK(kr_kdtree_normals_pca(t, 10, toward, nrm));
    double worst = 1;
    for (size_t i = 0; i < n; i++) {
        double d =
            -(nrm[3 * i] * nv[0] + nrm[3 * i + 1] * nv[1] + nrm[3 * i + 2] * nv[2]); /* faces −z */
        worst = fmin(worst, d);
    }
    CHECK_GT(worst, 1 - 1e-5);
    CHECK_STATUS(kr_kdtree_normals_pca(t, 2, toward, nrm), KR_ERR_INVALID_ARG);
    kr_kdtree_destroy(&t);
    free(p);
    free(nrm);
}
