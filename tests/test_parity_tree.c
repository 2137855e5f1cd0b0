/* Parity: the model k-d tree built on the device (gpu/kdtree_cuda.cu) against
 * the host build (core/kdtree.c) on the same points, and tracking against
 * either. Skips cleanly without a CUDA device (CTest label gpu).
 *
 * Tolerances. The device build orders points by coordinate, then by index
 * (CUB's radix sort is stable and takes −0 and +0 as equal, as the host's
 * comparisons do); so does its host reference, the level build in host loops
 * (tests/level_build.h). Device tree and reference must be identical on any
 * input, ties included: the same split axes and planes (bit for bit: the same
 * two floats halved), the same point in every cell, and the cells'
 * coefficients equal — the shared code rounds alike on both (products never
 * fused, IEEE sqrt and division); coefficients are checked to 1e-6 and the
 * largest difference printed. The host build (core/kdtree.c) sends tied
 * points left or right by its quickselect's history (its fastest order), so
 * against it the device tree is identical where no coordinates tie, and on
 * real scans (ties everywhere) equivalent for tracking: every point's cell
 * coefficients equal, descents reaching cells as near on average (within
 * 25 %), a frame tracked against either tree within 5e-4 m and 5e-4 rad (a
 * different tie order moved it by up to 1.8e-4 m / 1.1e-4 rad on fr1). The
 * device tree must also be a valid k-d tree on its own (nearest neighbours by
 * back-tracking equal brute force), and the CUDA tracker on one tree must
 * give the CPU tracker's pose on it within 1e-5 m and 1e-5 rad. */
#include "kr_test.h"
#include "level_build.h"
#include "parity_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_layout.h"
#include "gpu/engine.h"
#include "gpu/kdtree_cuda.h"
#include "pipeline/track/track_cuda.h"
#include "kinreg/device.h"
#include "kinreg/model.h"
#include "kinreg/preprocess.h"
#include "kinreg/source.h"
#include "kinreg/track.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

/* n points whose x, y and z are each a permutation of distinct values (no
 * ties on any axis), with normals of varying length, some zero or NaN (no
 * normal). */
static void distinct_points(size_t n, unsigned seed, float **pts, float **nrm)
{
    *pts = malloc(3 * n * sizeof **pts);
    *nrm = malloc(3 * n * sizeof **nrm);
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!*pts || !*nrm || !perm) {
        free(perm);
        return;
    }
    for (int a = 0; a < 3; a++) {
        for (size_t i = 0; i < n; i++)
            perm[i] = (uint32_t)i;
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(kr_urand(&seed) * (double)i) % i;
            uint32_t t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
        /* Integers below 2^24 scaled by a power of two: exact floats, all
         * different; a different extent per axis exercises the axis choice. */
        const float scale[3] = {1.0f / 262144, 1.0f / 524288, 1.0f / 131072};
        for (size_t i = 0; i < n; i++)
            (*pts)[3 * i + a] = ((float)perm[i] - 0.5f * (float)n) * scale[a];
    }
    for (size_t i = 0; i < n; i++) {
        float *v = *nrm + 3 * i;
        for (int a = 0; a < 3; a++)
            v[a] = (float)(2 * kr_urand(&seed) - 1) * 1.7f;
        if (i % 11 == 3) v[0] = v[1] = v[2] = 0;
        if (i % 7 == 5) v[1] = NAN;
    }
    free(perm);
}

/* The two trees are the same tree: shape, nodes, cells, maps. */
static void check_identical(const kr_kdtree *c, const kr_kdtree *g)
{
    CHECK_EQ(g->n, c->n);
    CHECK_EQ(g->n_internal, c->n_internal);
    CHECK_EQ(g->min_depth, c->min_depth);
    if (kr_test_failed()) return;
    size_t node_diff = 0, map_diff = 0;
    for (uint32_t i = 0; i < c->n_internal; i++)
        node_diff += c->nodes[i].axis != g->nodes[i].axis ||
                     memcmp(&c->nodes[i].split, &g->nodes[i].split, sizeof(float)) != 0;
    for (uint32_t k = 0; k < c->n; k++)
        map_diff += c->leaf_orig[k] != g->leaf_orig[k] || c->orig_leaf[k] != g->orig_leaf[k];
    CHECK_EQ(node_diff, 0);
    CHECK_EQ(map_diff, 0);
    double worst = 0;
    for (uint32_t k = 0; k < c->n; k++)
        for (int a = 0; a < 4; a++) {
            worst = fmax(worst, fabs((double)c->cells[k].s[a] - g->cells[k].s[a]));
            worst = fmax(worst, fabs((double)c->cells[k].n[a] - g->cells[k].n[a]));
        }
    CHECK_LE(worst, 1e-6);
    printf("    n=%u: %zu nodes and %zu leaves differ, largest cell difference %.3g\n", c->n,
           node_diff, map_diff, worst);
}

KR_TEST(parity_tree, identical_trees)
{
    NEED_CUDA();
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    /* Shapes: one point, a power of two and its neighbours, odd sizes, and a
     * large model (the snapshots are some 100k–500k points). */
    const size_t sizes[] = {1, 2, 3, 5, 1023, 1024, 1025, 4097, 77777, 300000};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s];
        float *pts = NULL, *nrm = NULL;
        distinct_points(n, (unsigned)(8 + s), &pts, &nrm);
        REQUIRE(pts && nrm);
        kr_kdtree *c = NULL, *g = NULL;
        CHECK_OK(kr_kdtree_build(&c, pts, nrm, n));
        kr_device_tree_times tt;
        CHECK_OK(kr_kdtree_cuda_build(kr_device_gpu(dev), pts, nrm, n, &g, &tt));
        if (c && g) {
            check_identical(c, g);
            CHECK(g->device != NULL);
            CHECK(g->serial != c->serial);
        }
        /* Without normals: far-field cells only. */
        kr_kdtree *c0 = NULL, *g0 = NULL;
        CHECK_OK(kr_kdtree_build(&c0, pts, NULL, n));
        CHECK_OK(kr_kdtree_cuda_build(kr_device_gpu(dev), pts, NULL, n, &g0, NULL));
        if (c0 && g0) check_identical(c0, g0);
        if (n == 300000)
            printf(
                "    device build of %zu points: upload %.3f ms, build %.3f ms, download %.3f ms\n",
                n, tt.upload_ms, tt.build_ms, tt.download_ms);
        kr_kdtree_destroy(&c);
        kr_kdtree_destroy(&g);
        kr_kdtree_destroy(&c0);
        kr_kdtree_destroy(&g0);
        free(pts);
        free(nrm);
    }
    kr_device_destroy(&dev);
}

/* The device copy that the tracker reads in place is the tree that came
 * down to the host. */
KR_TEST(parity_tree, device_copy_matches_host_copy)
{
    NEED_CUDA();
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    float *pts = NULL, *nrm = NULL;
    const size_t n = 5000;
    distinct_points(n, 3, &pts, &nrm);
    REQUIRE(pts && nrm);
    kr_kdtree *g = NULL;
    REQUIRE_OK(kr_kdtree_cuda_build(kr_device_gpu(dev), pts, nrm, n, &g, NULL));
    kr_kdtree_node *nodes = malloc(n * sizeof *nodes);
    kr_kdtree_cell *cells = malloc(n * sizeof *cells);
    REQUIRE(nodes && cells);
    CHECK_OK(kr_track_cuda_tree_download(kr_device_gpu(dev), g, nodes, cells));
    CHECK(memcmp(nodes, g->nodes, g->n_internal * sizeof *nodes) == 0);
    CHECK(memcmp(cells, g->cells, g->n * sizeof *cells) == 0);
    free(nodes);
    free(cells);
    free(pts);
    free(nrm);
    kr_kdtree_destroy(&g);
    kr_device_destroy(&dev);
}

KR_TEST(parity_tree, bad_input_is_refused)
{
    NEED_CUDA();
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_kdtree *g = (kr_kdtree *)(uintptr_t)1, *before = g;
    float p[6] = {0, 0, 1, NAN, 0, 1};
    CHECK_STATUS(kr_kdtree_cuda_build(kr_device_gpu(dev), p, NULL, 0, &g, NULL), KR_ERR_EMPTY);
    CHECK_STATUS(kr_kdtree_cuda_build(kr_device_gpu(dev), p, NULL, 2, &g, NULL),
                 KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "point 1 is not finite");
    CHECK(g == before);
    kr_device_destroy(&dev);
}

/* Points with normals of level `level` of a preprocessed frame: a model as
 * the voxel map would give (with the ties a real scan has). */
static size_t scan_points(const kr_cloud *c, float **pts, float **nrm)
{
    size_t n = (size_t)c->width * c->height, m = 0;
    *pts = malloc(3 * n * sizeof **pts);
    *nrm = malloc(3 * n * sizeof **nrm);
    if (!*pts || !*nrm) return 0;
    for (size_t i = 0; i < n; i++) {
        if (c->points[3 * i] != c->points[3 * i] || c->normals[3 * i] != c->normals[3 * i])
            continue;
        memcpy(*pts + 3 * m, c->points + 3 * i, 3 * sizeof(float));
        memcpy(*nrm + 3 * m, c->normals + 3 * i, 3 * sizeof(float));
        m++;
    }
    return m;
}

/* Nearest neighbours through the tree equal brute force: the tree is a valid
 * k-d tree over exactly the given points. */
static void check_valid(const kr_kdtree *t, const float *pts, size_t n)
{
    unsigned seed = 5;
    size_t wrong = 0;
    for (int q = 0; q < 300; q++) {
        const float *p = pts + 3 * ((size_t)(kr_urand(&seed) * (double)n) % n);
        float x[3];
        for (int a = 0; a < 3; a++)
            x[a] = p[a] + (float)(0.1 * (2 * kr_urand(&seed) - 1));
        float d2 = 0;
        kr_kdtree_nearest(t, x, &d2);
        double best = INFINITY;
        for (size_t i = 0; i < n; i++) {
            double dx = x[0] - pts[3 * i], dy = x[1] - pts[3 * i + 1], dz = x[2] - pts[3 * i + 2];
            best = fmin(best, dx * dx + dy * dy + dz * dz);
        }
        wrong += fabs(d2 - best) > 1e-6 * best + 1e-12;
    }
    CHECK_EQ(wrong, 0);
}

static void check_pose_within(const kr_track_result *a, const kr_track_result *b, double tol)
{
    kr_pose ia = kr_pose_inv(&a->pose), d = kr_pose_mul(&ia, &b->pose);
    double dt[3] = {b->pose.t[0] - a->pose.t[0], b->pose.t[1] - a->pose.t[1],
                    b->pose.t[2] - a->pose.t[2]};
    double dm = sqrt(dt[0] * dt[0] + dt[1] * dt[1] + dt[2] * dt[2]);
    CHECK_LE(kr_pose_angle(&d), tol);
    CHECK_LE(dm, tol);
    CHECK_EQ(b->state, a->state);
    if (tol > 1e-5) printf("    poses differ by %.3g m, %.3g rad\n", dm, kr_pose_angle(&d));
}

static void check_same_pose(const kr_track_result *a, const kr_track_result *b)
{
    check_pose_within(a, b, 1e-5);
}

/* A model from one frame of `uri`, the frame `later` frames on tracked
 * against the host-built and the device-built tree, on both engines. */
static void track_against_both(const char *uri, int later)
{
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = uri;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &sc));
    kr_intrinsics K = kr_source_intrinsics(src);
    kr_frame fa, fb;
    REQUIRE_OK(kr_source_read(src, &fa));
    for (int i = 0; i < later; i++) {
        if (i) kr_frame_release(&fb);
        REQUIRE_OK(kr_source_read(src, &fb));
    }
    kr_source_destroy(&src);
    kr_device *cpu = make_device(KR_BACKEND_CPU), *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(cpu && dev);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    kr_pyramid a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    REQUIRE_OK(kr_preprocess(cpu, &pc, &fa, &K, &a));
    REQUIRE_OK(kr_preprocess(cpu, &pc, &fb, &K, &b));
    float *pts = NULL, *nrm = NULL;
    size_t n = scan_points(&a.level[1], &pts, &nrm);
    REQUIRE(n > 1000);
    kr_kdtree *c = NULL, *g = NULL;
    REQUIRE_OK(kr_kdtree_build(&c, pts, nrm, n));
    REQUIRE_OK(kr_kdtree_cuda_build(kr_device_gpu(dev), pts, nrm, n, &g, NULL));
    /* A real scan has many ties (a pixel column at one depth shares x): the
     * device tree is its reference's bit for bit, the host build's for what
     * tracking reads. */
    kr_kdtree *ref = level_build(pts, nrm, n);
    REQUIRE(ref);
    check_identical(ref, g);
    kr_kdtree_destroy(&ref);
    CHECK_EQ(cells_differ_by_point(c, g), 0);
    double mc = mean_descent_d2(c, pts, n, 20000, 0.01f, 3),
           mg = mean_descent_d2(g, pts, n, 20000, 0.01f, 3);
    CHECK(mg <= 1.25 * mc && mc <= 1.25 * mg);
    printf("    mean descent distance² host %.4g, device %.4g\n", mc, mg);
    check_valid(g, pts, n);

    kr_track_config cfg;
    kr_track_config_default(&cfg);
    double w[6] = {0.004, -0.006, 0.003, 0.01, -0.008, 0.006};
    kr_pose seed = kr_pose_exp(w);
    kr_track_result rc, rg, dc, dg;
    CHECK_OK(kr_track_frame(c, &b, &seed, &cfg, &rc));
    CHECK_OK(kr_track_frame(g, &b, &seed, &cfg, &rg));
    CHECK_EQ(rc.state, KR_TRACK_GOOD);
    check_pose_within(&rc, &rg, 5e-4);
    /* The CUDA tracker: the host tree uploaded, the device tree in place. */
    CHECK_OK(kr_track_frame_on(dev, c, &b, &seed, &cfg, &dc));
    CHECK_OK(kr_track_frame_on(dev, g, &b, &seed, &cfg, &dg));
    check_same_pose(&rc, &dc);
    check_same_pose(&rg, &dg);
    free(pts);
    free(nrm);
    kr_kdtree_destroy(&c);
    kr_kdtree_destroy(&g);
    kr_pyramid_free(&a);
    kr_pyramid_free(&b);
    kr_frame_release(&fa);
    kr_frame_release(&fb);
    kr_device_destroy(&cpu);
    kr_device_destroy(&dev);
}

KR_TEST(parity_tree, synthetic_frame_same_pose)
{
    NEED_CUDA();
    track_against_both("synthetic", 4);
}

KR_TEST(parity_tree, tum_frame_same_pose)
{
    NEED_CUDA();
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("no shared data tum/fr1_xyz_head (set KINREG_DATA)");
    char uri[2100];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    track_against_both(uri, 5);
}

/* The model's snapshots built on the device (as the CUDA pipeline does, in
 * the background): the snapshot tree carries its device copy, is a valid
 * k-d tree over the voxels, and tracks the next frame to the pose the host
 * tracker gives on it, and near the pose the host build of the voxels gives. */
KR_TEST(parity_tree, model_snapshot_on_device)
{
    NEED_CUDA();
    kr_source_config sc;
    kr_source_config_default(&sc);
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &sc)); /* synthetic */
    kr_intrinsics K = kr_source_intrinsics(src);
    kr_frame fa, fb;
    REQUIRE_OK(kr_source_read(src, &fa));
    REQUIRE_OK(kr_source_read(src, &fb));
    kr_source_destroy(&src);
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    kr_pyramid a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    REQUIRE_OK(kr_preprocess(dev, &pc, &fa, &K, &a));
    REQUIRE_OK(kr_preprocess(dev, &pc, &fb, &K, &b));
    kr_model_config mc;
    kr_model_config_default(&mc);
    kr_model *model = NULL;
    REQUIRE_OK(kr_model_create(&model, &mc));
    REQUIRE_OK(kr_model_build_trees_on(model, dev));
    kr_pose id = kr_pose_identity();
    REQUIRE_OK(kr_model_integrate(model, &a.level[1], &id, 0));
    REQUIRE_OK(kr_model_request_snapshot(model, 0));
    kr_model_wait_idle(model);
    kr_model_snapshot *snap = kr_model_snapshot_acquire(model);
    REQUIRE(snap);
    const kr_kdtree *g = kr_model_snapshot_tree(snap);
    CHECK(g->device != NULL);
    kr_model_device_times mt;
    kr_model_last_device_times(model, &mt);
    kr_device_tree_times tt = mt.tree;
    CHECK_GT(tt.build_ms, 0);
    size_t n = kr_kdtree_size(g);
    float *pts = malloc(3 * n * sizeof *pts), *nrm = malloc(3 * n * sizeof *nrm);
    REQUIRE(pts && nrm);
    for (size_t i = 0; i < n; i++)
        kr_kdtree_point(g, i, pts + 3 * i, nrm + 3 * i);
    check_valid(g, pts, n);
    kr_kdtree *c = NULL;
    REQUIRE_OK(kr_kdtree_build(&c, pts, nrm, n));
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    double w[6] = {0.002, -0.003, 0.002, 0.005, -0.004, 0.003};
    kr_pose seed = kr_pose_exp(w);
    kr_track_result rc, rg, dg;
    CHECK_OK(kr_track_frame(c, &b, &seed, &cfg, &rc));
    CHECK_OK(kr_track_frame(g, &b, &seed, &cfg, &rg));
    CHECK_OK(kr_track_frame_on(dev, g, &b, &seed, &cfg, &dg));
    CHECK_EQ(rc.state, KR_TRACK_GOOD);
    /* Voxel means may tie on a coordinate: the host build of them is the
     * device's for tracking (see the head of this file). */
    check_pose_within(&rc, &dg, 5e-4);
    check_same_pose(&rg, &dg);
    printf("    snapshot of %zu voxels: device build %.3f ms\n", n, tt.build_ms);
    free(pts);
    free(nrm);
    kr_kdtree_destroy(&c);
    kr_model_snapshot_release(&snap);
    kr_model_destroy(&model);
    kr_pyramid_free(&a);
    kr_pyramid_free(&b);
    kr_frame_release(&fa);
    kr_frame_release(&fb);
    kr_device_destroy(&dev);
}
