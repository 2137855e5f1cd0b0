/* Parity: tracking on the CUDA engine (pipeline/track/track_cuda.cu) against its CPU twin
 * (pipeline/track/track.c + newton.c) on the same input (DESIGN.md §4): the tree's
 * device copy, cell descent, one linearisation's F, g, h, and whole tracked
 * frames of the synthetic scan and of TUM fr1. Skips cleanly without a CUDA
 * device (CTest label gpu).
 *
 * Tolerances. The device copy of the tree and the descent are exact (same
 * floats, same comparisons). The sums: each point's terms are computed by
 * the same double code (no fused multiply-adds on either side), only the
 * order of summation differs (OpenMP threads against CUDA blocks), so they
 * agree to rounding: 1e-9 of the largest entry. A tracked frame: 1e-5 m and
 * 1e-5 rad, the same state and the same number of steps. */
#include "kr_test.h"
#include "parity_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_layout.h"
#include "gpu/engine.h"
#include "pipeline/track/track_cuda.h"
#include "kinreg/device.h"
#include "kinreg/preprocess.h"
#include "kinreg/source.h"
#include "kinreg/track.h"
#include "pipeline/track/track_internal.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

/* Two frames of a source (the first and the `later`-th after it),
 * preprocessed by `dev`. */
typedef struct {
    kr_pyramid a, b;
    kr_frame fa, fb;
    kr_intrinsics K;
} frame_pair;

static bool read_pair(const char *uri, int later, frame_pair *fp)
{
    memset(fp, 0, sizeof *fp);
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = uri;
    kr_source *src = NULL;
    if (kr_source_create(&src, &sc) != KR_OK) return false;
    fp->K = kr_source_intrinsics(src);
    bool ok = kr_source_read(src, &fp->fa) == KR_OK;
    for (int i = 0; ok && i < later; i++) {
        if (i) kr_frame_release(&fp->fb);
        ok = kr_source_read(src, &fp->fb) == KR_OK;
    }
    kr_source_destroy(&src);
    return ok;
}

static void free_pair(frame_pair *fp)
{
    kr_pyramid_free(&fp->a);
    kr_pyramid_free(&fp->b);
    kr_frame_release(&fp->fa);
    kr_frame_release(&fp->fb);
}

/* The model: the points with normals of `level` of pyramid a (world = the
 * first frame's camera). */
static kr_kdtree *model_of(const kr_pyramid *p, int level)
{
    const kr_cloud *c = &p->level[level];
    size_t n = (size_t)c->width * c->height, m = 0;
    float *pts = malloc(3 * n * sizeof *pts), *nrm = malloc(3 * n * sizeof *nrm);
    if (!pts || !nrm) goto out;
    for (size_t i = 0; i < n; i++) {
        if (c->points[3 * i] != c->points[3 * i] || c->normals[3 * i] != c->normals[3 * i])
            continue;
        memcpy(pts + 3 * m, c->points + 3 * i, 3 * sizeof(float));
        memcpy(nrm + 3 * m, c->normals + 3 * i, 3 * sizeof(float));
        m++;
    }
    kr_kdtree *t = NULL;
    if (m) kr_kdtree_build(&t, pts, nrm, m);
    free(pts);
    free(nrm);
    return t;
out:
    free(pts);
    free(nrm);
    return NULL;
}

static bool prepare(const char *uri, int later, frame_pair *fp, kr_kdtree **tree)
{
    if (!read_pair(uri, later, fp)) return false;
    kr_device *cpu = make_device(KR_BACKEND_CPU);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    bool ok = cpu && kr_preprocess(cpu, &pc, &fp->fa, &fp->K, &fp->a) == KR_OK &&
              kr_preprocess(cpu, &pc, &fp->fb, &fp->K, &fp->b) == KR_OK;
    kr_device_destroy(&cpu);
    *tree = ok ? model_of(&fp->a, 1) : NULL;
    return ok && *tree;
}

KR_TEST(parity_track, tree_upload_is_exact)
{
    NEED_CUDA();
    frame_pair fp;
    kr_kdtree *tree = NULL;
    REQUIRE(prepare("synthetic", 1, &fp, &tree));
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_kdtree_node *nodes = malloc((tree->n_internal + 1) * sizeof *nodes);
    kr_kdtree_cell *cells = malloc(tree->n * sizeof *cells);
    REQUIRE(nodes && cells);
    CHECK_OK(kr_track_cuda_tree_download(kr_device_gpu(dev), tree, nodes, cells));
    CHECK(memcmp(nodes, tree->nodes, tree->n_internal * sizeof *nodes) == 0);
    CHECK(memcmp(cells, tree->cells, tree->n * sizeof *cells) == 0);
    free(nodes);
    free(cells);
    kr_kdtree_destroy(&tree);
    kr_device_destroy(&dev);
    free_pair(&fp);
}

KR_TEST(parity_track, descent_cells_match)
{
    NEED_CUDA();
    frame_pair fp;
    kr_kdtree *tree = NULL;
    REQUIRE(prepare("synthetic", 1, &fp, &tree));
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    /* Queries: the model's own points jittered by up to 5 cm, and points far
     * outside it. */
    const size_t n = 100000;
    float *q = malloc(3 * n * sizeof *q);
    uint32_t *cells = malloc(n * sizeof *cells);
    REQUIRE(q && cells);
    unsigned seed = 8;
    for (size_t i = 0; i < n; i++) {
        const kr_kdtree_cell *c = &tree->cells[(size_t)(kr_urand(&seed) * tree->n) % tree->n];
        double spread = i % 10 == 0 ? 3.0 : 0.05;
        for (int k = 0; k < 3; k++)
            q[3 * i + k] = c->s[k] + (float)(spread * (2 * kr_urand(&seed) - 1));
    }
    CHECK_OK(kr_track_cuda_descend(kr_device_gpu(dev), tree, q, n, cells));
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += cells[i] != kr_kdtree_descend_cell(tree->nodes, tree->n_internal, q[3 * i],
                                                     q[3 * i + 1], q[3 * i + 2]);
    CHECK_EQ(differ, 0);
    free(q);
    free(cells);
    kr_kdtree_destroy(&tree);
    kr_device_destroy(&dev);
    free_pair(&fp);
}

static double max_abs(const double *v, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fabs(v[i]) > m ? fabs(v[i]) : m;
    return m;
}

/* F, g, h of one linearisation on both engines at `pose`. */
static void check_sums(kr_device *dev, const kr_kdtree *tree, const kr_cloud *cl,
                       const kr_pose *pose, const kr_track_config *cfg, float gate)
{
    kr_newton_sums c;
    CHECK_OK(kr_newton_linearize(tree, cl, pose, cfg, gate, &c));
    kr_track_point_params P;
    kr_newton_params(cfg, gate, &P);
    kr_track_step_result g;
    CHECK_OK(kr_track_cuda_linearize(kr_device_gpu(dev), tree, cl, pose, &P, &g));
    CHECK_EQ(g.points, c.points);
    CHECK_EQ(g.inliers, c.inliers);
    CHECK_GT(c.inliers, 1000);
    double fs = max_abs(c.F, 36), gs = max_abs(c.F, 36) * 1e-3 + max_abs(c.g, 6);
    double df = 0, dg = 0;
    for (int i = 0; i < 36; i++)
        df = fmax(df, fabs(g.F[i] - c.F[i]));
    for (int i = 0; i < 6; i++)
        dg = fmax(dg, fabs(g.g[i] - c.g[i]));
    CHECK_LE(df, 1e-9 * fs);
    CHECK_LE(dg, 1e-9 * gs);
    CHECK_NEAR(g.h, c.h, 1e-9 * fabs(c.h));
    CHECK_NEAR(g.residual, c.residual, 1e-9 * fabs(c.residual) + 1e-15);
}

KR_TEST(parity_track, sums_match)
{
    NEED_CUDA();
    frame_pair fp;
    kr_kdtree *tree = NULL;
    REQUIRE(prepare("synthetic", 3, &fp, &tree));
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    double w[6] = {0.01, -0.02, 0.015, 0.01, 0.005, -0.01};
    kr_pose moved = kr_pose_exp(w), id = kr_pose_identity();
    for (int level = 1; level <= 2; level++) {
        check_sums(dev, tree, &fp.b.level[level], &id, &cfg, cfg.gate);
        check_sums(dev, tree, &fp.b.level[level], &moved, &cfg, 2 * cfg.gate);
    }
    /* The blend of near and far field, and pure point-to-point. */
    cfg.far_field = 0.01f;
    check_sums(dev, tree, &fp.b.level[1], &moved, &cfg, cfg.gate);
    cfg.quad = KR_QUAD_POINT;
    check_sums(dev, tree, &fp.b.level[1], &moved, &cfg, cfg.gate);
    kr_kdtree_destroy(&tree);
    kr_device_destroy(&dev);
    free_pair(&fp);
}

static void check_same_result(const kr_track_result *c, const kr_track_result *g)
{
    double deg, m;
    kr_pose ic = kr_pose_inv(&c->pose), d = kr_pose_mul(&ic, &g->pose);
    deg = kr_pose_angle(&d);
    double dt[3] = {g->pose.t[0] - c->pose.t[0], g->pose.t[1] - c->pose.t[1],
                    g->pose.t[2] - c->pose.t[2]};
    m = sqrt(dt[0] * dt[0] + dt[1] * dt[1] + dt[2] * dt[2]);
    CHECK_LE(deg, 1e-5);
    CHECK_LE(m, 1e-5);
    CHECK_EQ(g->state, c->state);
    CHECK_EQ(g->iterations, c->iterations);
    CHECK_NEAR(g->inlier_fraction, c->inlier_fraction, 1e-3);
    CHECK_NEAR(g->rms, c->rms, 1e-3 * c->rms + 1e-7);
}

/* A whole frame tracked on both engines from a seed `off` away from the
 * identity: from the CPU's pyramid (uploaded), and from the CUDA engine's own
 * pyramid (left on the device by preprocessing). */
static void track_both(const char *uri, int later)
{
    frame_pair fp;
    kr_kdtree *tree = NULL;
    REQUIRE(prepare(uri, later, &fp, &tree));
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    double w[6] = {0.004, -0.006, 0.003, 0.01, -0.008, 0.006};
    kr_pose seed = kr_pose_exp(w);
    kr_track_result c, g, gr;
    CHECK_OK(kr_track_frame(tree, &fp.b, &seed, &cfg, &c));
    CHECK_EQ(c.state, KR_TRACK_GOOD);
    CHECK_GT(c.iterations, 2);
    CHECK_OK(kr_track_frame_on(dev, tree, &fp.b, &seed, &cfg, &g));
    check_same_result(&c, &g);

    kr_pyramid pg;
    memset(&pg, 0, sizeof pg);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    CHECK_OK(kr_preprocess(dev, &pc, &fp.fb, &fp.K, &pg));
    CHECK_NE(pg.device_stamp, 0);
    CHECK_OK(kr_track_frame_on(dev, tree, &pg, &seed, &cfg, &gr));
    check_same_result(&c, &gr);
    /* The same frame again: the tree is already there. */
    CHECK_OK(kr_track_frame_on(dev, tree, &pg, &seed, &cfg, &gr));
    check_same_result(&c, &gr);
    kr_pyramid_free(&pg);
    kr_kdtree_destroy(&tree);
    kr_device_destroy(&dev);
    free_pair(&fp);
}

KR_TEST(parity_track, synthetic_frame_pose)
{
    NEED_CUDA();
    track_both("synthetic", 4);
}

KR_TEST(parity_track, tum_frame_pose)
{
    NEED_CUDA();
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("no shared data tum/fr1_xyz_head (set KINREG_DATA)");
    char uri[2100];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    track_both(uri, 5);
}

/* Many seeds in one launch (kr_track_frames_on, the recovery's probes):
 * each seed's result is the one tracking from it alone gives, bit for bit on
 * the device and within the tolerances above against the CPU engine. 70
 * seeds take two launches; their offsets (up to 3 deg and 5 cm) end after
 * different numbers of steps, so seeds finish while others still run. */
KR_TEST(parity_track, seeds_side_by_side)
{
    NEED_CUDA();
    frame_pair fp;
    kr_kdtree *tree = NULL;
    REQUIRE(prepare("synthetic", 4, &fp, &tree));
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    enum { SEEDS = 70 };
    kr_pose seeds[SEEDS];
    kr_track_result batch[SEEDS];
    unsigned state = 12345;
    for (int k = 0; k < SEEDS; k++) {
        double w[6];
        for (int i = 0; i < 6; i++) /* rotation (rad), then translation (m) */
            w[i] = (2 * kr_urand(&state) - 1) * 0.05 / sqrt(3);
        seeds[k] = kr_pose_exp(w);
    }
    CHECK_OK(kr_track_frames_on(dev, tree, &fp.b, seeds, SEEDS, &cfg, batch));
    int steps_min = 1 << 30, steps_max = 0;
    for (int k = 0; k < SEEDS; k++) {
        kr_track_result alone, cpu;
        CHECK_OK(kr_track_frame_on(dev, tree, &fp.b, &seeds[k], &cfg, &alone));
        CHECK(memcmp(&alone.pose, &batch[k].pose, sizeof alone.pose) == 0);
        CHECK_EQ(alone.iterations, batch[k].iterations);
        CHECK_OK(kr_track_frame(tree, &fp.b, &seeds[k], &cfg, &cpu));
        check_same_result(&cpu, &batch[k]);
        if (batch[k].iterations < steps_min) steps_min = batch[k].iterations;
        if (batch[k].iterations > steps_max) steps_max = batch[k].iterations;
    }
    CHECK_LT(steps_min, steps_max);
    kr_kdtree_destroy(&tree);
    kr_device_destroy(&dev);
    free_pair(&fp);
}

/* Out of device memory: KR_ERR_CUDA naming the failing call, the result
 * untouched, and the next frame tracks as before. */
KR_TEST(parity_track, out_of_memory_names_the_statement)
{
    NEED_CUDA();
    frame_pair fp;
    kr_kdtree *tree = NULL;
    REQUIRE(prepare("synthetic", 4, &fp, &tree));
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    kr_pose seed = kr_pose_identity();
    kr_pyramid huge = fp.b; /* claims a block far beyond any device */
    huge.storage_bytes = (size_t)1 << 50;
    huge.device_stamp = 0;
    kr_track_result g, c;
    memset(&g, 0x5a, sizeof g);
    kr_track_result before = g;
    CHECK_STATUS(kr_track_frame_on(dev, tree, &huge, &seed, &cfg, &g), KR_ERR_CUDA);
    CHECK_CONTAINS(kr_last_error(), "gpu/context.cu:");
    CHECK_CONTAINS(kr_last_error(), "cudaMalloc(");
    CHECK(memcmp(&g, &before, sizeof g) == 0);
    printf("    %s\n", kr_last_error());
    CHECK_OK(kr_track_frame(tree, &fp.b, &seed, &cfg, &c));
    CHECK_OK(kr_track_frame_on(dev, tree, &fp.b, &seed, &cfg, &g));
    check_same_result(&c, &g);
    kr_kdtree_destroy(&tree);
    kr_device_destroy(&dev);
    free_pair(&fp);
}

/* A model of one point: nothing to track against, LOST on both engines,
 * the seed returned, no fault. */
KR_TEST(parity_track, tiny_model)
{
    NEED_CUDA();
    frame_pair fp;
    kr_kdtree *big = NULL;
    REQUIRE(prepare("synthetic", 1, &fp, &big));
    kr_device *dev = make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    float p[3] = {0, 0, 2}, n[3] = {0, 0, -1};
    kr_kdtree *tree = NULL;
    REQUIRE_OK(kr_kdtree_build(&tree, p, n, 1));
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    kr_pose seed = kr_pose_identity();
    kr_track_result c, g;
    CHECK_OK(kr_track_frame(tree, &fp.b, &seed, &cfg, &c));
    CHECK_OK(kr_track_frame_on(dev, tree, &fp.b, &seed, &cfg, &g));
    CHECK_EQ(c.state, KR_TRACK_LOST);
    CHECK_EQ(g.state, KR_TRACK_LOST);
    CHECK(memcmp(&g.pose, &seed, sizeof seed) == 0);
    kr_kdtree_destroy(&tree);
    kr_kdtree_destroy(&big);
    kr_device_destroy(&dev);
    free_pair(&fp);
}
