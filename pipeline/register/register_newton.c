/* kr_register_newton (register_newton.h): normals, the model tree, a source
 * pyramid, then kr_track_frame_on with gates sized to the sets. */
#include "pipeline/register/register_newton.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_layout.h"
#include "core/normals.h"
#include "kinreg/kdtree.h"
#include "kinreg/track.h"

/* Normals by PCA over this many neighbours, as the refinement's signed fields
 * take them (pipeline/refine/dfield_kernels.h, KR_REFINE_NEIGHBOURS). */
#define REGISTER_NEIGHBOURS 12
/* Source levels: every 4^l-th point while a level keeps this many. */
#define NEWTON_LEVELS 3
#define NEWTON_MIN_LEVEL_POINTS 200
#define NEWTON_ITERATIONS 20

static bool has_normal(const float *nrm, size_t i)
{
    return isfinite(nrm[3 * i]) && isfinite(nrm[3 * i + 1]) && isfinite(nrm[3 * i + 2]);
}

/* The points of `xyz` with a normal, packed with their normals. */
static size_t keep_with_normals(const float *xyz, const float *nrm, size_t n, float *out_p,
                                float *out_n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!has_normal(nrm, i)) continue;
        memcpy(out_p + 3 * k, xyz + 3 * i, 3 * sizeof *xyz);
        memcpy(out_n + 3 * k, nrm + 3 * i, 3 * sizeof *nrm);
        k++;
    }
    return k;
}

/* Level l holds every 4^l-th point of level 0, each level's points then its
 * normals in one block (the layout the device tracker uploads). */
static kr_status source_pyramid(const float *p, const float *nrm, size_t n, kr_pyramid *pyr)
{
    memset(pyr, 0, sizeof *pyr);
    int levels = 1;
    while (levels < NEWTON_LEVELS && n >> (2 * levels) >= NEWTON_MIN_LEVEL_POINTS)
        levels++;
    size_t total = 0;
    for (int l = 0; l < levels; l++)
        total += (n + ((size_t)1 << (2 * l)) - 1) >> (2 * l);
    float *block = malloc(6 * total * sizeof *block);
    if (!block) return kr_error(KR_ERR_NOMEM, "register: no memory for %zu source points", total);
    float *at = block;
    for (int l = 0; l < levels; l++) {
        size_t step = (size_t)1 << (2 * l), count = (n + step - 1) / step;
        kr_cloud *c = &pyr->level[l];
        c->points = at;
        c->normals = at + 3 * count;
        for (size_t i = 0; i < count; i++) {
            memcpy(c->points + 3 * i, p + 3 * i * step, 3 * sizeof *p);
            memcpy(c->normals + 3 * i, nrm + 3 * i * step, 3 * sizeof *nrm);
        }
        c->width = (int)count;
        c->height = 1;
        c->valid_points = c->valid_normals = (int)count;
        at += 6 * count;
    }
    pyr->levels = levels;
    pyr->storage = block;
    pyr->storage_bytes = 6 * total * sizeof *block;
    return KR_OK;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median distance from a point of the tree to its nearest other point, on up
 * to 1000 evenly spread points: the sampling density the gate must exceed. */
static double median_spacing(const kr_kdtree *tree, const float *p, size_t m)
{
    enum { SAMPLES = 1000 };
    float d[SAMPLES];
    size_t step = m > SAMPLES ? m / SAMPLES : 1, k = 0;
    for (size_t i = 0; i < m && k < SAMPLES; i += step) {
        uint32_t idx[2];
        float d2[2];
        /* duplicated points (0 apart) say nothing of the sampling */
        if (kr_kdtree_knn(tree, p + 3 * i, 2, idx, d2) == 2 && d2[1] > 0) d[k++] = sqrtf(d2[1]);
    }
    if (k == 0) return INFINITY;
    qsort(d, k, sizeof *d, cmp_float);
    return d[k / 2];
}

/* The finest level's gate: a tenth of the object (the bunny: 5.6 mm), or for
 * a scene (a depth frame spans metres) eight times its sampling, about the
 * tracker's 3 cm on a whole Kinect frame. */
#define GATE_EXTENT 0.1
#define GATE_SPACINGS 8

/* The tracker's loop with registration's gates, no sensor noise model, no
 * state-machine checks (kr_register measures the result itself). The far
 * field begins at 10/3 of the gate, as the tracker's does (0.10 / 0.03 m). */
static kr_track_config newton_config(double gate, int levels)
{
    kr_track_config tc;
    kr_track_config_default(&tc);
    tc.finest_level = 0;
    for (int l = 0; l < KR_MAX_LEVELS; l++)
        tc.iterations[l] = l < levels ? NEWTON_ITERATIONS : 0;
    tc.gate = (float)gate;
    tc.far_field = (float)(gate * 10 / 3);
    tc.depth_step = 0;
    tc.converge_trans = 1e-5 * gate;
    tc.lost_inlier = 0;
    tc.lost_rms = INFINITY;
    tc.good_rms = INFINITY;
    tc.min_points = 6;
    tc.min_condition = 0;
    tc.max_speed = 0;
    tc.max_turn_deg = 0;
    return tc;
}

kr_status kr_register_newton(kr_device *dev, const float *src, size_t n, const float *dst, size_t m,
                             double extent, kr_pose *pose, int *iterations)
{
    /* Both sets' normals first (one buffer), then the points that have one. */
    float *nrm = malloc(3 * (n + m) * sizeof *nrm);
    float *sp = malloc(6 * (n + m) * sizeof *sp);
    kr_kdtree *tree = NULL;
    kr_pyramid pyr = {0};
    kr_status s = KR_OK;
    if (!nrm || !sp) {
        s = kr_error(KR_ERR_NOMEM, "register: no memory for %zu points", n + m);
        goto done;
    }
    if ((s = kr_normals_estimate(src, n, REGISTER_NEIGHBOURS, nrm, NULL)) != KR_OK ||
        (s = kr_normals_estimate(dst, m, REGISTER_NEIGHBOURS, nrm + 3 * n, NULL)) != KR_OK)
        goto done;
    float *sn = sp + 3 * n, *dp = sp + 6 * n, *dn = dp + 3 * m;
    size_t ns = keep_with_normals(src, nrm, n, sp, sn);
    size_t md = keep_with_normals(dst, nrm + 3 * n, m, dp, dn);
    if (ns < 6 || md < 6) {
        s = kr_error(KR_ERR_EMPTY,
                     "register: newton needs normals, and the %s set has %zu points with one "
                     "(of %zu): too sparse or on one line",
                     ns < 6 ? "source" : "destination", ns < 6 ? ns : md, ns < 6 ? n : m);
        goto done;
    }
    if ((s = kr_kdtree_build(&tree, dp, dn, md)) != KR_OK) goto done;
    if ((s = source_pyramid(sp, sn, ns, &pyr)) != KR_OK) goto done;
    double gate = fmin(GATE_EXTENT * extent, GATE_SPACINGS * median_spacing(tree, dp, md));
    kr_track_config tc = newton_config(gate, pyr.levels);
    kr_track_result r;
    if ((s = kr_track_frame_on(dev, tree, &pyr, pose, &tc, &r)) != KR_OK) goto done;
    if (r.state == KR_TRACK_LOST) {
        s = kr_error(KR_ERR_NUMERIC,
                     "register: newton found too few pairs within %.3g m of each other: the "
                     "initial pose is outside its basin (start from EM-ICP's or Softassign's "
                     "answer)",
                     (double)tc.gate * (1 << (pyr.levels - 1)));
        goto done;
    }
    *pose = r.pose;
    *iterations = r.iterations;
done:
    free(pyr.storage);
    kr_kdtree_destroy(&tree);
    free(sp);
    free(nrm);
    return s;
}
