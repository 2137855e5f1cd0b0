/* kr_register_newton (register_newton.h): normals, the model tree, a source
 * pyramid, then kr_track_frame_on with gates sized to the sets. */
#include "pipeline/register/register_newton.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_layout.h"
#include "core/normals.h"
#include "pipeline/register/register_verdict.h"
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

/* The probe: every k-th point with its normal, at most PROBE_POINTS, as a
 * pyramid of its own (the search scores its start poses on it). */
#define PROBE_POINTS 800
static kr_status probe_pyramid(const float *p, const float *nrm, size_t n, kr_pyramid *pyr)
{
    size_t step = n > PROBE_POINTS ? (n + PROBE_POINTS - 1) / PROBE_POINTS : 1;
    size_t k = (n + step - 1) / step;
    float *tmp = malloc(6 * (k ? k : 1) * sizeof *tmp);
    if (!tmp) return kr_error(KR_ERR_NOMEM, "register: no memory for %zu probe points", k);
    for (size_t i = 0; i < k; i++) {
        memcpy(tmp + 3 * i, p + 3 * i * step, 3 * sizeof *p);
        memcpy(tmp + 3 * (k + i), nrm + 3 * i * step, 3 * sizeof *nrm);
    }
    kr_status s = source_pyramid(tmp, tmp + 3 * k, k, pyr);
    free(tmp);
    return s;
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

void kr_register_pair_free(kr_register_pair *pair)
{
    if (!pair) return;
    kr_kdtree_destroy(&pair->tree);
    free(pair->src.storage);
    free(pair->probe.storage);
    free(pair->block);
    memset(pair, 0, sizeof *pair);
}

kr_status kr_register_pair_prepare(const float *src, size_t n, const float *dst, size_t m,
                                   double extent, kr_register_pair *pair)
{
    memset(pair, 0, sizeof *pair);
    /* Both sets' normals first (one buffer), then the points that have one. */
    float *nrm = malloc(3 * (n + m) * sizeof *nrm);
    float *sp = malloc(6 * (n + m) * sizeof *sp);
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
    if ((s = kr_kdtree_build(&pair->tree, dp, dn, md)) != KR_OK) goto done;
    if ((s = source_pyramid(sp, sn, ns, &pair->src)) != KR_OK) goto done;
    if ((s = probe_pyramid(sp, sn, ns, &pair->probe)) != KR_OK) goto done;
    pair->spacing = kr_register_spacing(pair->tree, dp, md);
    pair->extent = extent;
    pair->gate = fmin(GATE_EXTENT * extent, GATE_SPACINGS * pair->spacing);
    pair->block = sp;
    pair->src_points = sp;
    pair->src_normals = sn;
    pair->n = ns;
    sp = NULL;
done:
    if (s != KR_OK) kr_register_pair_free(pair);
    free(sp);
    free(nrm);
    return s;
}

kr_status kr_register_pair_newton(kr_device *dev, const kr_register_pair *pair, kr_pose *pose,
                                  kr_track_result *result)
{
    kr_track_config tc = newton_config(pair->gate, pair->src.levels);
    kr_track_result r;
    kr_status s = kr_track_frame_on(dev, pair->tree, &pair->src, pose, &tc, &r);
    if (s != KR_OK) return s;
    if (r.state == KR_TRACK_LOST)
        return kr_error(KR_ERR_NUMERIC,
                        "register: newton found too few pairs within %.3g m of each other: the "
                        "initial pose is outside its basin (start from EM-ICP's or Softassign's "
                        "answer)",
                        (double)tc.gate * (1 << (pair->src.levels - 1)));
    *pose = r.pose;
    if (result) *result = r;
    return KR_OK;
}

kr_status kr_register_newton(kr_device *dev, const float *src, size_t n, const float *dst, size_t m,
                             double extent, kr_pose *pose, int *iterations)
{
    kr_register_pair pair;
    kr_status s = kr_register_pair_prepare(src, n, dst, m, extent, &pair);
    if (s != KR_OK) return s;
    kr_track_result r;
    s = kr_register_pair_newton(dev, &pair, pose, &r);
    if (s == KR_OK) *iterations = r.iterations;
    kr_register_pair_free(&pair);
    return s;
}

/* The probe's search: a gate of a quarter of the object at the finest probe
 * level (doubling per level), point-to-point attraction beyond a quarter of
 * the gate (far pairs pull, as Mitra et al.'s far field), normals not
 * required to agree (a start turned by 90° has every normal turned too), and
 * many steps: the basin is what matters here, not the last micrometre. */
#define PROBE_GATE_EXTENT 0.25
#define PROBE_ITERATIONS 12

kr_status kr_register_pair_probe(kr_device *dev, const kr_register_pair *pair, const kr_pose *seeds,
                                 int count, kr_track_result *out)
{
    kr_track_config tc = newton_config(PROBE_GATE_EXTENT * pair->extent, pair->probe.levels);
    for (int l = 0; l < pair->probe.levels; l++)
        tc.iterations[l] = PROBE_ITERATIONS;
    tc.far_field = tc.gate / 4;
    tc.normal_gate_deg = 180;
    tc.converge_trans = 1e-4 * pair->extent;
    return kr_track_frames_on(dev, pair->tree, &pair->probe, seeds, count, &tc, out);
}
