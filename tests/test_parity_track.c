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
#include "parity.h"

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
    kr_device *cpu, *gpu;
    if (!kr_parity_devices(&cpu, &gpu)) return false;
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    bool ok = cpu && kr_preprocess(cpu, &pc, &fp->fa, &fp->K, &fp->a) == KR_OK &&
              kr_preprocess(cpu, &pc, &fp->fb, &fp->K, &fp->b) == KR_OK;
    *tree = ok ? model_of(&fp->a, 1) : NULL;
    return ok && *tree;
}

/* What every case tracks: a frame pair, the model tree of the first frame,
 * and what the steps keep between them. */
typedef struct {
    frame_pair fp;
    kr_kdtree *tree;
    kr_pyramid device_pyr; /* the second frame preprocessed on the device */
    kr_pose seed;
    kr_track_config cfg;
    bool expect_good; /* of the CPU's frame: from a seed near enough */
} track_in;

static bool track_in_prepare(track_in *in, const char *uri, int later)
{
    memset(in, 0, sizeof *in);
    kr_track_config_default(&in->cfg);
    in->seed = kr_pose_identity();
    return prepare(uri, later, &in->fp, &in->tree);
}

static void track_in_free(track_in *in)
{
    kr_pyramid_free(&in->device_pyr);
    kr_kdtree_destroy(&in->tree);
    free_pair(&in->fp);
}

/* ---- the tree on the device, and the descent ------------------------------- */

static bool host_tree(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    const kr_kdtree *t = ((track_in *)fixture)->tree;
    kr_parity_put_bytes(out, "nodes", t->nodes, t->n_internal * sizeof *t->nodes);
    kr_parity_put_bytes(out, "cells", t->cells, t->n * sizeof *t->cells);
    return true;
}

static bool downloaded_tree(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    const kr_kdtree *t = ((track_in *)fixture)->tree;
    kr_kdtree_node *nodes = malloc((t->n_internal + 1) * sizeof *nodes);
    kr_kdtree_cell *cells = malloc(t->n * sizeof *cells);
    bool ok = nodes && cells;
    CHECK(ok);
    if (ok) CHECK_OK(kr_track_cuda_tree_download(kr_device_gpu(dev), t, nodes, cells));
    if (ok) {
        kr_parity_put_bytes(out, "nodes", nodes, t->n_internal * sizeof *nodes);
        kr_parity_put_bytes(out, "cells", cells, t->n * sizeof *cells);
    }
    free(nodes);
    free(cells);
    return ok;
}

/* The device copy of the tree and the descent are exact (same floats, same
 * comparisons). */
static const kr_parity_step upload_steps[] = {
    PARITY_STEP("tree upload", host_tree, downloaded_tree, NULL,
                PARITY_CHECK("nodes", KR_PARITY_BITS, 0), PARITY_CHECK("cells", KR_PARITY_BITS, 0)),
};

KR_TEST(parity_track, tree_upload_is_exact)
{
    PARITY_NEED();
    track_in in;
    REQUIRE(track_in_prepare(&in, "synthetic", 1));
    kr_parity_run(upload_steps, 1, &in);
    track_in_free(&in);
}

enum { QUERIES = 100000 };

/* Queries: the model's own points jittered by up to 5 cm, and points far
 * outside it. */
static float *descent_queries(const kr_kdtree *tree)
{
    float *q = malloc(3 * QUERIES * sizeof *q);
    unsigned seed = 8;
    for (size_t i = 0; q && i < QUERIES; i++) {
        const kr_kdtree_cell *c = &tree->cells[(size_t)(kr_urand(&seed) * tree->n) % tree->n];
        double spread = i % 10 == 0 ? 3.0 : 0.05;
        for (int k = 0; k < 3; k++)
            q[3 * i + k] = c->s[k] + (float)(spread * (2 * kr_urand(&seed) - 1));
    }
    return q;
}

static bool host_descent(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    const kr_kdtree *t = ((track_in *)fixture)->tree;
    float *q = descent_queries(t);
    double *cells = q ? kr_parity_put(out, QUERIES, 1, "cells") : NULL;
    for (size_t i = 0; cells && i < QUERIES; i++)
        cells[i] =
            kr_kdtree_descend_cell(t->nodes, t->n_internal, q[3 * i], q[3 * i + 1], q[3 * i + 2]);
    free(q);
    return cells != NULL;
}

static bool device_descent(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    const kr_kdtree *t = ((track_in *)fixture)->tree;
    float *q = descent_queries(t);
    uint32_t *cells = malloc(QUERIES * sizeof *cells);
    bool ok = q && cells;
    CHECK(ok);
    if (ok) CHECK_OK(kr_track_cuda_descend(kr_device_gpu(dev), t, q, QUERIES, cells));
    double *v = ok ? kr_parity_put(out, QUERIES, 1, "cells") : NULL;
    for (size_t i = 0; v && i < QUERIES; i++)
        v[i] = cells[i];
    free(q);
    free(cells);
    return ok;
}

static const kr_parity_step descent_steps[] = {
    PARITY_STEP("descent", host_descent, device_descent, NULL,
                PARITY_CHECK("cells", KR_PARITY_BITS, 0)),
};

KR_TEST(parity_track, descent_cells_match)
{
    PARITY_NEED();
    track_in in;
    REQUIRE(track_in_prepare(&in, "synthetic", 1));
    kr_parity_run(descent_steps, 1, &in);
    track_in_free(&in);
}

/* ---- one linearisation ------------------------------------------------------- */

/* One linearisation's setting: level, pose (moved or not), gate (× the
 * configured one), the far field's blend and the quadric. */
typedef struct {
    int level;
    bool moved;
    float gate_times;
    float far_field; /* 0: the default */
    bool point_to_point;
} linearisation;

static const double moved_w[6] = {0.01, -0.02, 0.015, 0.01, 0.005, -0.01};

static void linearisation_setting(track_in *in, const linearisation *l, kr_track_config *cfg,
                                  kr_pose *pose, float *gate, const kr_cloud **cl)
{
    *cfg = in->cfg;
    if (l->far_field > 0) cfg->far_field = l->far_field;
    if (l->point_to_point) cfg->quad = KR_QUAD_POINT;
    *pose = l->moved ? kr_pose_exp(moved_w) : kr_pose_identity();
    *gate = l->gate_times * cfg->gate;
    *cl = &in->fp.b.level[l->level];
}

static double max_abs(const double *v, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fabs(v[i]) > m ? fabs(v[i]) : m;
    return m;
}

/* F, g, h and the residual with their tolerances' scales: F to the largest
 * entry of F, g to that plus the largest of g, h and the residual to
 * themselves (the residual plus 1e-6, as 1e-9 |r| + 1e-15). */
static void put_sums(kr_parity_out *out, const double *F, const double *g, double h, double res,
                     double points, double inliers)
{
    kr_parity_put_d(out, "F", F, 36, 1);
    kr_parity_put_d(out, "g", g, 6, 1);
    kr_parity_put_scalar(out, "h", h);
    kr_parity_put_scalar(out, "residual", res);
    kr_parity_put_scalar(out, "points", points);
    kr_parity_put_scalar(out, "inliers", inliers);
    double fs = max_abs(F, 36), gs = max_abs(F, 36) * 1e-3 + max_abs(g, 6), hs = fabs(h),
           rs = fabs(res) + 1e-6;
    kr_parity_scale(out, "F", &fs, 1);
    kr_parity_scale(out, "g", &gs, 1);
    kr_parity_scale(out, "h", &hs, 1);
    kr_parity_scale(out, "residual", &rs, 1);
}

static bool host_sums(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev;
    kr_track_config cfg;
    kr_pose pose;
    float gate;
    const kr_cloud *cl;
    track_in *in = fixture;
    linearisation_setting(in, arg, &cfg, &pose, &gate, &cl);
    kr_newton_sums c;
    kr_status st = kr_newton_linearize(in->tree, cl, &pose, &cfg, gate, &c);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    CHECK_GT(c.inliers, 1000);
    put_sums(out, c.F, c.g, c.h, c.residual, c.points, c.inliers);
    return true;
}

static bool device_sums(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    kr_track_config cfg;
    kr_pose pose;
    float gate;
    const kr_cloud *cl;
    track_in *in = fixture;
    linearisation_setting(in, arg, &cfg, &pose, &gate, &cl);
    kr_track_point_params P;
    kr_newton_params(&cfg, gate, &P);
    kr_track_step_result g;
    kr_status st = kr_track_cuda_linearize(kr_device_gpu(dev), in->tree, cl, &pose, &P, &g);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    put_sums(out, g.F, g.g, g.h, g.residual, g.points, g.inliers);
    return true;
}

/* Each point's terms are computed by the same double code (no fused
 * multiply-adds on either side), only the order of summation differs
 * (OpenMP threads against CUDA blocks): the same counts, and the sums
 * within 1e-9 of their scale. */
#define SAME_SUMS                                                                                  \
    PARITY_CHECK("points", KR_PARITY_BITS, 0), PARITY_CHECK("inliers", KR_PARITY_BITS, 0),         \
        PARITY_CHECK("F", KR_PARITY_ABS, 1e-9), PARITY_CHECK("g", KR_PARITY_ABS, 1e-9),            \
        PARITY_CHECK("h", KR_PARITY_ABS, 1e-9), PARITY_CHECK("residual", KR_PARITY_ABS, 1e-9)

static const linearisation settings[] = {
    {1, false, 1, 0, false}, {1, true, 2, 0, false},     {2, false, 1, 0, false},
    {2, true, 2, 0, false},  {1, true, 1, 0.01f, false}, {1, true, 1, 0.01f, true},
};

static const kr_parity_step sums_steps[] = {
    PARITY_STEP("level 1 at the identity", host_sums, device_sums, &settings[0], SAME_SUMS),
    PARITY_STEP("level 1 moved, twice the gate", host_sums, device_sums, &settings[1], SAME_SUMS),
    PARITY_STEP("level 2 at the identity", host_sums, device_sums, &settings[2], SAME_SUMS),
    PARITY_STEP("level 2 moved, twice the gate", host_sums, device_sums, &settings[3], SAME_SUMS),
    /* The blend of near and far field, and pure point-to-point. */
    PARITY_STEP("far field 0.01", host_sums, device_sums, &settings[4], SAME_SUMS),
    PARITY_STEP("point to point", host_sums, device_sums, &settings[5], SAME_SUMS),
};

KR_TEST(parity_track, sums_match)
{
    PARITY_NEED();
    track_in in;
    REQUIRE(track_in_prepare(&in, "synthetic", 3));
    kr_parity_run(sums_steps, sizeof sums_steps / sizeof *sums_steps, &in);
    track_in_free(&in);
}

/* ---- whole frames ------------------------------------------------------------- */

static void put_results(kr_parity_out *out, const kr_track_result *r, size_t n)
{
    kr_pose *poses = malloc((n ? n : 1) * sizeof *poses);
    double *state = kr_parity_put(out, n, 1, "state"), *steps = kr_parity_put(out, n, 1, "steps"),
           *inl = kr_parity_put(out, n, 1, "inlier fraction"),
           *rms = kr_parity_put(out, n, 1, "rms"), *scale = malloc((n ? n : 1) * sizeof *scale),
           *cov = kr_parity_put(out, n, 21, "covariance");
    for (size_t k = 0; poses && state && steps && inl && rms && scale && k < n; k++) {
        poses[k] = r[k].pose;
        state[k] = r[k].state;
        steps[k] = r[k].iterations;
        inl[k] = r[k].inlier_fraction;
        rms[k] = r[k].rms;
        scale[k] = r[k].rms + 1e-4; /* 1e-3 rms + 1e-7, as 1e-3 times this */
        for (int i = 0; cov && i < 21; i++)
            cov[21 * k + i] = r[k].covariance[i];
    }
    if (poses) kr_parity_put_poses(out, "pose", poses, n);
    if (scale) kr_parity_scale(out, "rms", scale, n);
    free(poses);
    free(scale);
}

/* A tracked frame: 1e-5 m and 1e-5 rad, the same state and the same number
 * of steps (the polish's included), the inlier fraction within 1e-3, the RMS
 * within 1e-3 of it and the covariance within 1e-2 of its size. */
#define SAME_RESULT                                                                                \
    PARITY_CHECK("pose", KR_PARITY_ANGLE, 1e-5), PARITY_CHECK("pose", KR_PARITY_DISTANCE, 1e-5),   \
        PARITY_CHECK("state", KR_PARITY_BITS, 0), PARITY_CHECK("steps", KR_PARITY_BITS, 0),        \
        PARITY_CHECK("inlier fraction", KR_PARITY_ABS, 1e-3),                                      \
        PARITY_CHECK("covariance", KR_PARITY_NORM, 1e-2, .nan_equal = true),                       \
        PARITY_CHECK("rms", KR_PARITY_ABS, 1e-3)

/* The CPU engine from the seed (where expected: a GOOD frame after a few
 * steps). */
static bool host_frame(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    track_in *in = fixture;
    kr_track_result c;
    kr_status st = kr_track_frame(in->tree, &in->fp.b, &in->seed, &in->cfg, &c);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    if (in->expect_good) {
        CHECK_EQ(c.state, KR_TRACK_GOOD);
        CHECK_GT(c.iterations, 2);
    }
    put_results(out, &c, 1);
    return true;
}

/* The CUDA engine on the CPU's pyramid (uploaded). */
static bool device_frame(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    track_in *in = fixture;
    kr_track_result g;
    kr_status st = kr_track_frame_on(dev, in->tree, &in->fp.b, &in->seed, &in->cfg, &g);
    CHECK_OK(st);
    if (st == KR_OK) put_results(out, &g, 1);
    return st == KR_OK;
}

/* The CUDA engine on its own pyramid (left on the device by
 * preprocessing the first time); the next time, the tree already there. */
static bool device_pyramid_frame(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    track_in *in = fixture;
    if (in->device_pyr.levels == 0) {
        kr_preprocess_config pc;
        kr_preprocess_config_default(&pc);
        CHECK_OK(kr_preprocess(dev, &pc, &in->fp.fb, &in->fp.K, &in->device_pyr));
        CHECK_NE(in->device_pyr.device_stamp, 0);
    }
    kr_track_result g;
    kr_status st = kr_track_frame_on(dev, in->tree, &in->device_pyr, &in->seed, &in->cfg, &g);
    CHECK_OK(st);
    if (st == KR_OK) put_results(out, &g, 1);
    return st == KR_OK;
}

/* One CPU run, compared with all three. */
static const kr_parity_step frame_steps[] = {
    PARITY_STEP("frame, the CPU's pyramid", host_frame, device_frame, NULL, SAME_RESULT),
    PARITY_STEP("frame, the device's pyramid", host_frame, device_pyramid_frame, NULL, SAME_RESULT),
    PARITY_STEP("frame again", host_frame, device_pyramid_frame, NULL, SAME_RESULT),
};

/* A whole frame tracked on both engines from a seed off the identity: from
 * the CPU's pyramid (uploaded), and from the CUDA engine's own pyramid. */
static void track_both(const char *uri, int later)
{
    track_in in;
    REQUIRE(track_in_prepare(&in, uri, later));
    double w[6] = {0.004, -0.006, 0.003, 0.01, -0.008, 0.006};
    in.seed = kr_pose_exp(w);
    in.expect_good = true;
    kr_parity_run(frame_steps, sizeof frame_steps / sizeof *frame_steps, &in);
    track_in_free(&in);
}

KR_TEST(parity_track, synthetic_frame_pose)
{
    PARITY_NEED();
    track_both("synthetic", 4);
}

KR_TEST(parity_track, tum_frame_pose)
{
    PARITY_NEED();
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("no shared data tum/fr1_xyz_head (set KINREG_DATA)");
    char uri[2100];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    track_both(uri, 5);
}

/* ---- many seeds at once --------------------------------------------------------- */

enum { SEEDS = 70 };

static void seeds_of(kr_pose *seeds)
{
    unsigned state = 12345;
    for (int k = 0; k < SEEDS; k++) {
        double w[6];
        for (int i = 0; i < 6; i++) /* rotation (rad), then translation (m) */
            w[i] = (2 * kr_urand(&state) - 1) * 0.05 / sqrt(3);
        seeds[k] = kr_pose_exp(w);
    }
}

static bool host_seeds(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    track_in *in = fixture;
    kr_pose seeds[SEEDS];
    kr_track_result r[SEEDS];
    seeds_of(seeds);
    for (int k = 0; k < SEEDS; k++) {
        kr_status st = kr_track_frame(in->tree, &in->fp.b, &seeds[k], &in->cfg, &r[k]);
        CHECK_OK(st);
        if (st != KR_OK) return false;
    }
    put_results(out, r, SEEDS);
    return true;
}

/* One launch (kr_track_frames_on, the recovery's probes); each seed's result
 * is the one tracking from it alone gives, bit for bit; the seeds end after
 * different numbers of steps, so seeds finish while others still run. */
static bool device_seeds(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    track_in *in = fixture;
    kr_pose seeds[SEEDS];
    kr_track_result batch[SEEDS];
    seeds_of(seeds);
    kr_status st = kr_track_frames_on(dev, in->tree, &in->fp.b, seeds, SEEDS, &in->cfg, batch);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    int steps_min = 1 << 30, steps_max = 0;
    for (int k = 0; k < SEEDS; k++) {
        kr_track_result alone;
        CHECK_OK(kr_track_frame_on(dev, in->tree, &in->fp.b, &seeds[k], &in->cfg, &alone));
        CHECK(memcmp(&alone.pose, &batch[k].pose, sizeof alone.pose) == 0);
        CHECK_EQ(alone.iterations, batch[k].iterations);
        if (batch[k].iterations < steps_min) steps_min = batch[k].iterations;
        if (batch[k].iterations > steps_max) steps_max = batch[k].iterations;
    }
    CHECK_LT(steps_min, steps_max);
    put_results(out, batch, SEEDS);
    return true;
}

static const kr_parity_step seeds_steps[] = {
    PARITY_STEP("70 seeds in one launch", host_seeds, device_seeds, NULL, SAME_RESULT),
};

/* 70 seeds take two launches; their offsets (up to 3 deg and 5 cm). */
KR_TEST(parity_track, seeds_side_by_side)
{
    PARITY_NEED();
    track_in in;
    REQUIRE(track_in_prepare(&in, "synthetic", 4));
    kr_parity_run(seeds_steps, 1, &in);
    track_in_free(&in);
}

/* ---- faults and edges ------------------------------------------------------------- */

static const kr_parity_step after_fault[] = {
    PARITY_STEP("frame after the fault", host_frame, device_frame, NULL, SAME_RESULT),
};

/* Out of device memory: KR_ERR_CUDA naming the failing call, the result
 * untouched, and the next frame tracks as before. On a device of its own:
 * nothing of the fault reaches another case. */
KR_TEST(parity_track, out_of_memory_names_the_statement)
{
    kr_device *cpu, *shared;
    if (!kr_parity_devices(&cpu, &shared)) return;
    track_in in;
    REQUIRE(track_in_prepare(&in, "synthetic", 4));
    kr_device *dev = kr_parity_make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_pyramid huge = in.fp.b; /* claims a block far beyond any device */
    huge.storage_bytes = (size_t)1 << 50;
    huge.device_stamp = 0;
    kr_track_result g;
    memset(&g, 0x5a, sizeof g);
    kr_track_result before = g;
    CHECK_STATUS(kr_track_frame_on(dev, in.tree, &huge, &in.seed, &in.cfg, &g), KR_ERR_CUDA);
    CHECK_CONTAINS(kr_last_error(), "gpu/context.cu:");
    CHECK_CONTAINS(kr_last_error(), "cudaMalloc(");
    CHECK(memcmp(&g, &before, sizeof g) == 0);
    printf("    %s\n", kr_last_error());
    kr_parity_run_on(cpu, dev, after_fault, 1, &in);
    kr_device_destroy(&dev);
    track_in_free(&in);
}

/* A model of one point: nothing to track against, LOST on both engines,
 * the seed returned, no fault. */
static bool host_lost(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    track_in *in = fixture;
    kr_track_result c;
    kr_status st = kr_track_frame(in->tree, &in->fp.b, &in->seed, &in->cfg, &c);
    CHECK_OK(st);
    CHECK_EQ(c.state, KR_TRACK_LOST);
    kr_parity_put_scalar(out, "state", c.state);
    return st == KR_OK;
}

static bool device_lost(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    track_in *in = fixture;
    kr_track_result g;
    kr_status st = kr_track_frame_on(dev, in->tree, &in->fp.b, &in->seed, &in->cfg, &g);
    CHECK_OK(st);
    CHECK_EQ(g.state, KR_TRACK_LOST);
    CHECK(memcmp(&g.pose, &in->seed, sizeof in->seed) == 0);
    kr_parity_put_scalar(out, "state", g.state);
    return st == KR_OK;
}

static const kr_parity_step tiny_steps[] = {
    PARITY_STEP("a model of one point", host_lost, device_lost, NULL,
                PARITY_CHECK("state", KR_PARITY_BITS, 0)),
};

KR_TEST(parity_track, tiny_model)
{
    PARITY_NEED();
    track_in in;
    REQUIRE(track_in_prepare(&in, "synthetic", 1));
    float p[3] = {0, 0, 2}, n[3] = {0, 0, -1};
    kr_kdtree *big = in.tree;
    in.tree = NULL;
    REQUIRE_OK(kr_kdtree_build(&in.tree, p, n, 1));
    kr_parity_run(tiny_steps, 1, &in);
    kr_kdtree_destroy(&big);
    track_in_free(&in);
}
