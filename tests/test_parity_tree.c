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
#include "parity.h"

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

/* The tree as quantities: its shape (points, internal nodes, least depth),
 * the split axes and planes, the maps between points and leaves, and the
 * cells' coefficients (one float an element). */
static void put_tree(kr_parity_out *out, const kr_kdtree *t)
{
    double *shape = kr_parity_put(out, 1, 3, "shape");
    if (shape) shape[0] = t->n, shape[1] = t->n_internal, shape[2] = t->min_depth;
    double *axes = kr_parity_put(out, t->n_internal, 1, "split axes"),
           *planes = kr_parity_put(out, t->n_internal, 1, "split planes");
    for (uint32_t i = 0; axes && planes && i < t->n_internal; i++) {
        axes[i] = t->nodes[i].axis;
        planes[i] = t->nodes[i].split;
    }
    double *maps = kr_parity_put(out, t->n, 2, "maps"),
           *cells = kr_parity_put(out, (size_t)t->n * 8, 1, "cells");
    for (uint32_t k = 0; maps && cells && k < t->n; k++) {
        maps[2 * k] = t->leaf_orig[k];
        maps[2 * k + 1] = t->orig_leaf[k];
        for (int a = 0; a < 4; a++) {
            cells[8 * (size_t)k + a] = t->cells[k].s[a];
            cells[8 * (size_t)k + 4 + a] = t->cells[k].n[a];
        }
    }
}

/* The two trees are the same tree: shape, nodes (the same split axes and
 * planes, bit for bit), maps, and cells within 1e-6 (0 expected; the
 * largest difference printed). */
#define SAME_TREE                                                                                  \
    PARITY_CHECK("shape", KR_PARITY_BITS, 0), PARITY_CHECK("split axes", KR_PARITY_BITS, 0),       \
        PARITY_CHECK("split planes", KR_PARITY_BITS, 0), PARITY_CHECK("maps", KR_PARITY_BITS, 0),  \
        PARITY_CHECK("cells", KR_PARITY_ABS, 1e-6, .nan_equal = true)

/* ---- identical trees without ties --------------------------------------------- */

/* Shapes: one point, a power of two and its neighbours, odd sizes, and a
 * large model (the snapshots are some 100k–500k points). */
static const size_t sizes[] = {1, 2, 3, 5, 1023, 1024, 1025, 4097, 77777, 300000};
enum { SIZES = sizeof sizes / sizeof *sizes };

typedef struct {
    size_t index; /* into sizes */
    float *pts, *nrm;
    kr_kdtree *c, *g;
} distinct_in;

/* The points of size index *arg (made once for both runs); with normals
 * when arg is even. */
static bool distinct_of(distinct_in *in, size_t index)
{
    if (!in->pts || in->index != index) {
        free(in->pts);
        free(in->nrm);
        in->pts = in->nrm = NULL;
        in->index = index;
        distinct_points(sizes[index], (unsigned)(8 + index), &in->pts, &in->nrm);
    }
    CHECK(in->pts && in->nrm);
    return in->pts && in->nrm;
}

static bool host_build(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev;
    distinct_in *in = fixture;
    size_t step = *(const size_t *)arg, index = step / 2;
    if (!distinct_of(in, index)) return false;
    kr_kdtree_destroy(&in->c);
    kr_status st = kr_kdtree_build(&in->c, in->pts, step % 2 ? NULL : in->nrm, sizes[index]);
    CHECK_OK(st);
    if (st == KR_OK) put_tree(out, in->c);
    return st == KR_OK;
}

static bool device_build(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    distinct_in *in = fixture;
    size_t step = *(const size_t *)arg, index = step / 2;
    if (!distinct_of(in, index)) return false;
    kr_kdtree_destroy(&in->g);
    kr_device_tree_times tt;
    kr_status st = kr_kdtree_cuda_build(kr_device_gpu(dev), in->pts, step % 2 ? NULL : in->nrm,
                                        sizes[index], &in->g, step % 2 ? NULL : &tt);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    if (step % 2 == 0) CHECK(in->g->device != NULL);
    put_tree(out, in->g);
    return true;
}

/* With normals, the device tree is a tree of its own (its own serial). */
static void own_serial(const kr_parity_step *step, const kr_parity_out *a, const kr_parity_out *b,
                       void *fixture)
{
    (void)step;
    (void)a, (void)b;
    distinct_in *in = fixture;
    if (in->c && in->g) CHECK(in->g->serial != in->c->serial);
}

KR_TEST(parity_tree, identical_trees)
{
    PARITY_NEED();
    /* Each size with normals, then without (far-field cells only). */
    static size_t args[2 * SIZES];
    kr_parity_step steps[2 * SIZES];
    static char names[2 * SIZES][48];
    for (size_t k = 0; k < 2 * SIZES; k++) {
        args[k] = k;
        snprintf(names[k], sizeof names[k], "n=%zu%s", sizes[k / 2],
                 k % 2 ? " without normals" : "");
        steps[k] = (kr_parity_step){.name = names[k],
                                    .cpu = host_build,
                                    .cuda = device_build,
                                    .arg = &args[k],
                                    .checks = {SAME_TREE},
                                    .also = k % 2 ? NULL : own_serial};
    }
    distinct_in in = {0};
    kr_parity_run(steps, 2 * SIZES, &in);
    kr_kdtree_destroy(&in.c);
    kr_kdtree_destroy(&in.g);
    free(in.pts);
    free(in.nrm);
}

/* ---- the device copy ------------------------------------------------------------- */

static bool host_copy(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    const kr_kdtree *g = fixture;
    kr_parity_put_bytes(out, "nodes", g->nodes, g->n_internal * sizeof *g->nodes);
    kr_parity_put_bytes(out, "cells", g->cells, g->n * sizeof *g->cells);
    return true;
}

static bool device_copy(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    const kr_kdtree *g = fixture;
    kr_kdtree_node *nodes = malloc(g->n * sizeof *nodes);
    kr_kdtree_cell *cells = malloc(g->n * sizeof *cells);
    bool ok = nodes && cells;
    CHECK(ok);
    if (ok) CHECK_OK(kr_track_cuda_tree_download(kr_device_gpu(dev), g, nodes, cells));
    if (ok) {
        kr_parity_put_bytes(out, "nodes", nodes, g->n_internal * sizeof *nodes);
        kr_parity_put_bytes(out, "cells", cells, g->n * sizeof *cells);
    }
    free(nodes);
    free(cells);
    return ok;
}

static const kr_parity_step copy_steps[] = {
    {.name = "device copy",
     .cpu = host_copy,
     .cuda = device_copy,
     .checks = {PARITY_CHECK("nodes", KR_PARITY_BITS, 0), PARITY_CHECK("cells", KR_PARITY_BITS, 0)},
     .cpu_name = "host copy",
     .cuda_name = "device copy"},
};

/* The device copy that the tracker reads in place is the tree that came
 * down to the host. */
KR_TEST(parity_tree, device_copy_matches_host_copy)
{
    kr_device *cpu, *dev;
    if (!kr_parity_devices(&cpu, &dev)) return;
    float *pts = NULL, *nrm = NULL;
    const size_t n = 5000;
    distinct_points(n, 3, &pts, &nrm);
    REQUIRE(pts && nrm);
    kr_kdtree *g = NULL;
    REQUIRE_OK(kr_kdtree_cuda_build(kr_device_gpu(dev), pts, nrm, n, &g, NULL));
    kr_parity_run(copy_steps, 1, g);
    free(pts);
    free(nrm);
    kr_kdtree_destroy(&g);
}

KR_TEST(parity_tree, bad_input_is_refused)
{
    kr_device *cpu, *dev;
    if (!kr_parity_devices(&cpu, &dev)) return;
    kr_kdtree *g = (kr_kdtree *)(uintptr_t)1, *before = g;
    float p[6] = {0, 0, 1, NAN, 0, 1};
    CHECK_STATUS(kr_kdtree_cuda_build(kr_device_gpu(dev), p, NULL, 0, &g, NULL), KR_ERR_EMPTY);
    CHECK_STATUS(kr_kdtree_cuda_build(kr_device_gpu(dev), p, NULL, 2, &g, NULL),
                 KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "point 1 is not finite");
    CHECK(g == before);
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

/* ---- trees of real scans, and tracking against them ------------------------------- */

/* What the tracking cases share: the model's points, the trees built from
 * them, the frame tracked and each tracking result, made once. */
typedef struct {
    float *pts, *nrm;
    size_t n;
    kr_kdtree *c, *g; /* the host build; the device's (or the snapshot's) */
    const kr_pyramid *frame;
    kr_pose seed;
    kr_track_config cfg;
    kr_track_result rc, rg, dg;
    bool have_rc, have_rg, have_dg;
} scan_in;

/* The level build on the host (the device build's algorithm), and the
 * device build itself: bit for bit the same tree, ties included. */
static bool reference_build(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    scan_in *in = fixture;
    kr_kdtree *ref = level_build(in->pts, in->nrm, in->n);
    bool ok = ref != NULL;
    CHECK(ok);
    if (ok) put_tree(out, ref);
    kr_kdtree_destroy(&ref);
    return ok;
}

static bool scan_device_build(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    scan_in *in = fixture;
    kr_status st = kr_kdtree_cuda_build(kr_device_gpu(dev), in->pts, in->nrm, in->n, &in->g, NULL);
    CHECK_OK(st);
    if (st == KR_OK) put_tree(out, in->g);
    return st == KR_OK;
}

/* Each point's cell coefficients, whichever cell holds it. */
static void put_cells_by_point(kr_parity_out *out, const kr_kdtree *t)
{
    const size_t bytes = sizeof(kr_kdtree_cell);
    double *v = kr_parity_put(out, t->n, (int)bytes, "cells by point");
    for (uint32_t i = 0; v && i < t->n; i++) {
        const unsigned char *b = (const unsigned char *)&t->cells[t->orig_leaf[i]];
        for (size_t k = 0; k < bytes; k++)
            v[i * bytes + k] = b[k];
    }
}

static bool scan_host_build(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    scan_in *in = fixture;
    kr_status st = kr_kdtree_build(&in->c, in->pts, in->nrm, in->n);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    put_cells_by_point(out, in->c);
    kr_parity_put_scalar(out, "mean descent d2",
                         mean_descent_d2(in->c, in->pts, in->n, 20000, 0.01f, 3));
    return true;
}

/* The device tree (already built) must also be a valid k-d tree on its
 * own: nearest neighbours by back-tracking equal brute force. */
static bool built_device_tree(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    scan_in *in = fixture;
    if (!in->g) return false;
    put_cells_by_point(out, in->g);
    kr_parity_put_scalar(out, "mean descent d2",
                         mean_descent_d2(in->g, in->pts, in->n, 20000, 0.01f, 3));
    check_valid(in->g, in->pts, in->n);
    return true;
}

/* Descents reach cells as near on average: within 25 % either way. */
static void descents_as_near(const kr_parity_step *step, const kr_parity_out *a,
                             const kr_parity_out *b, void *fixture)
{
    (void)step;
    (void)fixture;
    const kr_parity_quantity *qc = kr_parity_get(a, "mean descent d2"),
                             *qg = kr_parity_get(b, "mean descent d2");
    REQUIRE(qc && qg);
    double mc = qc->v[0], mg = qg->v[0];
    CHECK(mg <= 1.25 * mc && mc <= 1.25 * mg);
    printf("    mean descent distance² host %.4g, device %.4g\n", mc, mg);
}

static void put_track(kr_parity_out *out, const kr_track_result *r)
{
    kr_parity_put_poses(out, "pose", &r->pose, 1);
    kr_parity_put_scalar(out, "state", r->state);
}

/* The CPU tracker on the host build (once): a GOOD frame. */
static bool track_host_tree(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    scan_in *in = fixture;
    if (!in->have_rc) {
        kr_status st = kr_track_frame(in->c, in->frame, &in->seed, &in->cfg, &in->rc);
        CHECK_OK(st);
        if (st != KR_OK) return false;
        CHECK_EQ(in->rc.state, KR_TRACK_GOOD);
        in->have_rc = true;
    }
    put_track(out, &in->rc);
    return true;
}

/* The CPU tracker on the device's tree (once). */
static bool track_device_tree(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    scan_in *in = fixture;
    if (!in->have_rg) {
        kr_status st = kr_track_frame(in->g, in->frame, &in->seed, &in->cfg, &in->rg);
        CHECK_OK(st);
        if (st != KR_OK) return false;
        in->have_rg = true;
    }
    put_track(out, &in->rg);
    return true;
}

/* The CUDA tracker: on the host tree (uploaded), on the device tree (in
 * place, once). */
static bool cuda_on_host_tree(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    scan_in *in = fixture;
    kr_track_result r;
    kr_status st = kr_track_frame_on(dev, in->c, in->frame, &in->seed, &in->cfg, &r);
    CHECK_OK(st);
    if (st == KR_OK) put_track(out, &r);
    return st == KR_OK;
}

static bool cuda_on_device_tree(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    scan_in *in = fixture;
    if (!in->have_dg) {
        kr_status st = kr_track_frame_on(dev, in->g, in->frame, &in->seed, &in->cfg, &in->dg);
        CHECK_OK(st);
        if (st != KR_OK) return false;
        in->have_dg = true;
    }
    put_track(out, &in->dg);
    return true;
}

/* A different tie order moved a tracked frame by up to 1.8e-4 m / 1.1e-4
 * rad on fr1: host build against device build within 5e-4; the CUDA tracker
 * against the CPU tracker on one tree within 1e-5. */
#define POSE_WITHIN(tol)                                                                           \
    PARITY_CHECK("pose", KR_PARITY_ANGLE, tol), PARITY_CHECK("pose", KR_PARITY_DISTANCE, tol),     \
        PARITY_CHECK("state", KR_PARITY_BITS, 0)

static const kr_parity_step scan_steps[] = {
    {.name = "device tree against its reference",
     .cpu = reference_build,
     .cuda = scan_device_build,
     .checks = {SAME_TREE},
     .cpu_name = "level build",
     .cuda_name = "device build"},
    {.name = "host build against device build",
     .cpu = scan_host_build,
     .cuda = built_device_tree,
     .checks = {PARITY_CHECK("cells by point", KR_PARITY_BITS, 0)},
     .also = descents_as_near,
     .cpu_name = "host build",
     .cuda_name = "device build"},
    {.name = "the CPU tracker on either tree",
     .cpu = track_host_tree,
     .cuda = track_device_tree,
     .checks = {POSE_WITHIN(5e-4)},
     .cpu_name = "host tree",
     .cuda_name = "device tree"},
    PARITY_STEP("the host tree uploaded", track_host_tree, cuda_on_host_tree, NULL,
                POSE_WITHIN(1e-5)),
    PARITY_STEP("the device tree in place", track_device_tree, cuda_on_device_tree, NULL,
                POSE_WITHIN(1e-5)),
};

/* A model from one frame of `uri`, the frame `later` frames on tracked
 * against the host-built and the device-built tree, on both engines. A
 * real scan has many ties (a pixel column at one depth shares x): the
 * device tree is its reference's bit for bit, the host build's for what
 * tracking reads. */
static void track_against_both(const char *uri, int later)
{
    kr_device *cpu, *dev;
    if (!kr_parity_devices(&cpu, &dev)) return;
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
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    kr_pyramid a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    REQUIRE_OK(kr_preprocess(cpu, &pc, &fa, &K, &a));
    REQUIRE_OK(kr_preprocess(cpu, &pc, &fb, &K, &b));
    scan_in in = {0};
    in.n = scan_points(&a.level[1], &in.pts, &in.nrm);
    REQUIRE(in.n > 1000);
    in.frame = &b;
    kr_track_config_default(&in.cfg);
    double w[6] = {0.004, -0.006, 0.003, 0.01, -0.008, 0.006};
    in.seed = kr_pose_exp(w);
    kr_parity_run(scan_steps, sizeof scan_steps / sizeof *scan_steps, &in);
    free(in.pts);
    free(in.nrm);
    kr_kdtree_destroy(&in.c);
    kr_kdtree_destroy(&in.g);
    kr_pyramid_free(&a);
    kr_pyramid_free(&b);
    kr_frame_release(&fa);
    kr_frame_release(&fb);
}

KR_TEST(parity_tree, synthetic_frame_same_pose)
{
    PARITY_NEED();
    track_against_both("synthetic", 4);
}

KR_TEST(parity_tree, tum_frame_same_pose)
{
    PARITY_NEED();
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("no shared data tum/fr1_xyz_head (set KINREG_DATA)");
    char uri[2100];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    track_against_both(uri, 5);
}

/* ---- the model's snapshot tree built on the device ----------------------------------- */

static const kr_parity_step snapshot_steps[] = {
    /* Voxel means may tie on a coordinate: the host build of them is the
     * device's for tracking (see the head of this file). */
    {.name = "snapshot tree against the host build of its voxels",
     .cpu = track_host_tree,
     .cuda = cuda_on_device_tree,
     .checks = {POSE_WITHIN(5e-4)},
     .cpu_name = "cpu, host build",
     .cuda_name = "cuda, snapshot tree"},
    PARITY_STEP("snapshot tree on both engines", track_device_tree, cuda_on_device_tree, NULL,
                POSE_WITHIN(1e-5)),
};

/* The model's snapshots built on the device (as the CUDA pipeline does, in
 * the background): the snapshot tree carries its device copy, is a valid
 * k-d tree over the voxels, and tracks the next frame to the pose the host
 * tracker gives on it, and near the pose the host build of the voxels gives. */
KR_TEST(parity_tree, model_snapshot_on_device)
{
    kr_device *cpu, *dev;
    if (!kr_parity_devices(&cpu, &dev)) return;
    kr_source_config sc;
    kr_source_config_default(&sc);
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &sc)); /* synthetic */
    kr_intrinsics K = kr_source_intrinsics(src);
    kr_frame fa, fb;
    REQUIRE_OK(kr_source_read(src, &fa));
    REQUIRE_OK(kr_source_read(src, &fb));
    kr_source_destroy(&src);
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
    scan_in in = {0};
    in.g = (kr_kdtree *)kr_model_snapshot_tree(snap); /* borrowed: the snapshot frees it */
    CHECK(in.g->device != NULL);
    kr_model_device_times mt;
    kr_model_last_device_times(model, &mt);
    kr_device_tree_times tt = mt.tree;
    CHECK_GT(tt.build_ms, 0);
    in.n = kr_kdtree_size(in.g);
    in.pts = malloc(3 * in.n * sizeof *in.pts);
    in.nrm = malloc(3 * in.n * sizeof *in.nrm);
    REQUIRE(in.pts && in.nrm);
    for (size_t i = 0; i < in.n; i++)
        kr_kdtree_point(in.g, i, in.pts + 3 * i, in.nrm + 3 * i);
    check_valid(in.g, in.pts, in.n);
    REQUIRE_OK(kr_kdtree_build(&in.c, in.pts, in.nrm, in.n));
    in.frame = &b;
    kr_track_config_default(&in.cfg);
    double w[6] = {0.002, -0.003, 0.002, 0.005, -0.004, 0.003};
    in.seed = kr_pose_exp(w);
    kr_parity_run(snapshot_steps, sizeof snapshot_steps / sizeof *snapshot_steps, &in);
    printf("    snapshot of %zu voxels: device build %.3f ms\n", in.n, tt.build_ms);
    free(in.pts);
    free(in.nrm);
    kr_kdtree_destroy(&in.c);
    kr_model_snapshot_release(&snap);
    kr_model_destroy(&model);
    kr_pyramid_free(&a);
    kr_pyramid_free(&b);
    kr_frame_release(&fa);
    kr_frame_release(&fb);
}
