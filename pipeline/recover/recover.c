/* Recovery: coarse alignment with a wide basin, then Newton tracking as the
 * judge. The coarse stage is EM-ICP or Softassign (the seeds' wide-basin
 * methods, kr_register) of the frame's points against the model's near the
 * last good pose, and behind them, or alone (--recover newton), a search
 * over seeds with the k-d tree Newton method itself: a wide gate (far pairs
 * count), point-to-point attraction far from the surface and many steps on
 * the coarse levels, the "widen only when a failure is detected". */
#include "pipeline/recover/recover.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_layout.h"
#include "kinreg/register.h"
#include "pipeline/recover/recover_verify.h"
#include "pipeline/register/subsample.h"

void kr_recover_config_default(kr_recover_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->method = KR_RECOVER_EMICP;
    cfg->after_poor = 1;
    cfg->max_points = 1000;
    cfg->model_radius = 3.0f;
    cfg->wide_gate = 0.12f;
    cfg->wide_finest_level = 2;
    const int iters[KR_MAX_LEVELS] = {6, 10, 10, 10, 10};
    memcpy(cfg->wide_iterations, iters, sizeof iters);
    cfg->hypotheses = 16;
    cfg->hypothesis_deg = 30;
    cfg->probe_points = 600;
    cfg->probe_iterations = 8;
    cfg->judged = 3;
    cfg->max_violations = 0.02f;
    cfg->soft_hypotheses = 2;
    cfg->newton_fallback = 1;
    cfg->max_jump_m = 0.5;
    cfg->max_jump_deg = 45;
}

static const char *const recover_names[] = {"off", "newton", "emicp", "softassign"};

const char *kr_recover_method_name(kr_recover_method m)
{
    return (int)m >= 0 && (size_t)m < sizeof recover_names / sizeof *recover_names
               ? recover_names[m]
               : "unknown";
}

kr_status kr_recover_method_parse(const char *name, kr_recover_method *out)
{
    for (size_t i = 0; name && i < sizeof recover_names / sizeof *recover_names; i++)
        if (!strcmp(name, recover_names[i])) {
            *out = (kr_recover_method)i;
            return KR_OK;
        }
    return kr_error(KR_ERR_INVALID_ARG,
                    "recovery method '%s': use off, newton, emicp or softassign",
                    name ? name : "(null)");
}

kr_pose kr_recover_hypothesis(const kr_pose *last_good, int h, int axes, double angle_rad)
{
    if (h <= 0 || axes < 1) return *last_good;
    /* A jump turns the sensor about any axis (a hand twists as it turns):
     * axes spread evenly over the sphere (a Fibonacci lattice), the first
     * shell at half the angle, the next at all of it, each shell's lattice
     * turned by half a step against the one before so that they interleave.
     * Camera axes: x right (tilt), y down (pan), z forward (roll). */
    int k = (h - 1) % axes, shell = (h - 1) / axes;
    double z = 1 - (2.0 * k + 1) / axes, r = sqrt(fmax(0, 1 - z * z));
    double phi = (k + 0.5 * (shell % 2)) * M_PI * (3 - sqrt(5.0));
    double a = angle_rad * 0.5 * (shell + 1);
    double x[6] = {a * r * cos(phi), a * r * sin(phi), a * z, 0, 0, 0};
    kr_pose R = kr_pose_exp(x);
    return kr_pose_mul(last_good, &R);
}

/* The wide-basin tracking configuration: a gate wide enough for the pairs
 * a jump tears apart, point-to-point far from the surface so that far pairs
 * pull (Mitra et al.'s far field), many steps on coarse levels only. */
static kr_track_config wide_config(const kr_recover_config *rc, const kr_track_config *tc)
{
    kr_track_config wide = *tc;
    wide.gate = rc->wide_gate;
    wide.far_field = rc->wide_gate / 4;
    wide.finest_level = rc->wide_finest_level;
    memcpy(wide.iterations, rc->wide_iterations, sizeof wide.iterations);
    wide.max_line_search = 3;
    /* Only the fit counts here: the judge is the final tracking. */
    wide.lost_inlier = 0;
    wide.lost_rms = INFINITY;
    wide.min_points = 6;
    wide.max_speed = 0;
    wide.max_turn_deg = 0;
    return wide;
}

/* How well a coarse alignment fits: the inlier fraction at the wide gate,
 * less for a poor RMS (a wide gate also takes far pairs in). */
static double score(const kr_track_result *r)
{
    if (r->inliers < 6) return -1;
    return r->inlier_fraction * (1.0 / (1.0 + r->rms / 0.02));
}

/* The probe: every k-th point with a normal of the wide level, at most
 * max_points, as a one-level pyramid of its own (an unorganised cloud,
 * width = count) with its own storage block, so that the device engine
 * uploads it like any pyramid. Scoring a seed on it costs a fraction of a
 * run on the whole level. */
static kr_status make_probe(const kr_pyramid *pyr, int level, int max_points, kr_pyramid *probe)
{
    memset(probe, 0, sizeof *probe);
    const kr_cloud *cl = &pyr->level[level];
    size_t total = (size_t)cl->width * cl->height, valid = 0;
    for (size_t i = 0; i < total; i++)
        valid += cl->points[3 * i] == cl->points[3 * i] && cl->normals[3 * i] == cl->normals[3 * i];
    size_t want = max_points > 0 && valid > (size_t)max_points ? (size_t)max_points : valid;
    size_t step = want ? (valid + want - 1) / want : 1;
    size_t n = want ? valid / step : 0;
    float *block = malloc((n ? n : 1) * 6 * sizeof *block);
    if (!block) return kr_error(KR_ERR_NOMEM, "recovery: out of memory for %zu probe points", n);
    size_t seen = 0, k = 0;
    for (size_t i = 0; i < total && k < n; i++) {
        if (!(cl->points[3 * i] == cl->points[3 * i] && cl->normals[3 * i] == cl->normals[3 * i]))
            continue;
        if (seen++ % step) continue;
        memcpy(block + 3 * k, cl->points + 3 * i, 3 * sizeof *block);
        memcpy(block + 3 * (n + k), cl->normals + 3 * i, 3 * sizeof *block);
        k++;
    }
    probe->levels = 1;
    probe->storage = block;
    probe->storage_bytes = (n ? n : 1) * 6 * sizeof *block;
    kr_cloud *c = &probe->level[0];
    c->width = (int)k;
    c->height = 1;
    c->intrinsics = cl->intrinsics;
    c->points = block;
    c->normals = block + 3 * n;
    c->valid_points = c->valid_normals = (int)k;
    return KR_OK;
}

/* A hand does not teleport: a solution farther from the last good pose than
 * the largest jump searched for fits some other part of the scene. */
static bool within_jump(const kr_pose *last_good, const kr_pose *pose, const kr_recover_config *rc)
{
    kr_pose inv = kr_pose_inv(last_good);
    kr_pose d = kr_pose_mul(&inv, pose);
    double dist = sqrt(d.t[0] * d.t[0] + d.t[1] * d.t[1] + d.t[2] * d.t[2]);
    return dist <= rc->max_jump_m && kr_pose_angle(&d) <= rc->max_jump_deg * M_PI / 180;
}

/* Two coarse results that ended this close are one candidate. */
static bool same_pose(const kr_pose *a, const kr_pose *b)
{
    kr_pose inv = kr_pose_inv(a), d = kr_pose_mul(&inv, b);
    double dist = sqrt(d.t[0] * d.t[0] + d.t[1] * d.t[1] + d.t[2] * d.t[2]);
    return dist < 0.03 && kr_pose_angle(&d) < 2 * M_PI / 180;
}

/* The frame's points (camera frame) within `radius` of the camera, from the
 * coarsest pyramid level that still has max_points, voxel-subsampled to at
 * most max_points. The radius is the model's (model_points): a room seen to
 * 5 m against a model cut at 3 m puts the frame's centroid metres behind
 * the model's, and EM-ICP, which matches centroids first at its wide
 * start, pulls the camera there and never returns (the synthetic scan's 25
 * jumps and uncoverings: 2 found by EM-ICP alone with the frame uncut, 20
 * with both cut alike). */
static kr_status frame_points(const kr_pyramid *pyr, double radius, size_t max_points, float **out,
                              size_t *n)
{
    int level = 0;
    for (int l = pyr->levels - 1; l >= 0; l--)
        if ((size_t)pyr->level[l].valid_points >= max_points || l == 0) {
            level = l;
            break;
        }
    const kr_cloud *cl = &pyr->level[level];
    size_t total = (size_t)cl->width * cl->height, k = 0;
    float *pts = malloc((total ? total : 1) * 3 * sizeof *pts);
    if (!pts) return kr_error(KR_ERR_NOMEM, "recovery: out of memory for %zu frame points", total);
    for (size_t i = 0; i < total; i++) {
        const float *p = cl->points + 3 * i;
        if (!(p[0] * p[0] + p[1] * p[1] + p[2] * p[2] <= radius * radius)) continue; /* NaN too */
        memcpy(pts + 3 * k++, p, 3 * sizeof *p);
    }
    kr_status s = kr_voxel_subsample(pts, k, 0.02, max_points, n, NULL);
    if (s != KR_OK) {
        free(pts);
        return s;
    }
    *out = pts;
    return KR_OK;
}

/* The model's points near the last good camera (within `radius`, in front
 * of it), in that camera's frame, voxel-subsampled to at most max_points. */
static kr_status model_points(const kr_kdtree *model, const kr_pose *last_good, double radius,
                              size_t max_points, float **out, size_t *n)
{
    size_t total = kr_kdtree_size(model);
    /* Decimate evenly first: the voxel pass then works on a bounded set. */
    size_t step = total > 32 * max_points ? total / (32 * max_points) : 1;
    float *pts = malloc((total / step + 1) * 3 * sizeof *pts);
    if (!pts) return kr_error(KR_ERR_NOMEM, "recovery: out of memory for %zu model points", total);
    kr_pose inv = kr_pose_inv(last_good);
    size_t k = 0;
    for (size_t i = 0; i < total; i += step) {
        float p[3];
        double q[3];
        kr_kdtree_prefetch(model, i + KR_KDTREE_PREFETCH_AHEAD * step);
        kr_kdtree_point(model, i, p, NULL);
        double pw[3] = {p[0], p[1], p[2]};
        kr_pose_apply(&inv, pw, q);
        if (!(q[2] > 0) || q[0] * q[0] + q[1] * q[1] + q[2] * q[2] > radius * radius) continue;
        float *o = pts + 3 * k++;
        o[0] = (float)q[0];
        o[1] = (float)q[1];
        o[2] = (float)q[2];
    }
    kr_status s = kr_voxel_subsample(pts, k, 0.02, max_points, n, NULL);
    if (s != KR_OK) {
        free(pts);
        return s;
    }
    *out = pts;
    return KR_OK;
}

void kr_recover_cache_free(kr_recover_cache *cache)
{
    if (!cache) return;
    free(cache->points);
    memset(cache, 0, sizeof *cache);
}

/* model_points through the cache: the same model tree, last good pose,
 * radius and size give the same points. *out stays the cache's (or, without
 * a cache, is the caller's to free: *owned). */
static kr_status model_points_cached(const kr_kdtree *model, const kr_pose *last_good,
                                     double radius, size_t max_points, kr_recover_cache *cache,
                                     float **out, size_t *n, bool *owned)
{
    *owned = cache == NULL;
    if (!cache) return model_points(model, last_good, radius, max_points, out, n);
    if (!(cache->tree_serial == model->serial && model->serial != 0 &&
          !memcmp(&cache->last_good, last_good, sizeof *last_good) && cache->radius == radius &&
          cache->max_points == max_points)) {
        kr_recover_cache_free(cache);
        kr_status s = model_points(model, last_good, radius, max_points, &cache->points, &cache->n);
        if (s != KR_OK) return s;
        cache->tree_serial = model->serial;
        cache->last_good = *last_good;
        cache->radius = radius;
        cache->max_points = max_points;
    }
    *out = cache->points;
    *n = cache->n;
    return KR_OK;
}

/* Soft-correspondence registration (EM-ICP or Softassign) of the frame's
 * points to the model's, both in the last good camera's frame, from the
 * rotation `init`: the camera pose it implies. */
static kr_status soft_align(kr_device *dev, const kr_recover_config *rc, const float *src, size_t n,
                            const float *dst, size_t m, const kr_pose *last_good,
                            const kr_pose *init, kr_pose *out)
{
    kr_register_config reg;
    kr_register_config_default(&reg);
    reg.method = rc->method == KR_RECOVER_SOFTASSIGN ? KR_REG_SOFTASSIGN : KR_REG_EMICP;
    /* EM-ICP only finds the basin here; Newton tracking, the judge, does
     * the fine alignment. σ² ends at 1e-4 (σ a tenth of the extent) instead
     * of the seed's 1e-5: 44 steps instead of 66. On the synthetic scan's
     * 25 events alike found (24, 20 by EM-ICP), one attempt 44 -> 30 ms
     * on the 2-core VM; at 3e-4 EM-ICP found 17. */
    reg.sigma2_inf = 1e-4;
    reg.pose_only = true; /* judged by tracking, not by its own fit */
    reg.deterministic = rc->deterministic;
    kr_register_result r;
    kr_status s = kr_register(dev, &reg, src, n, dst, m, init, &r);
    if (s != KR_OK) return s;
    *out = kr_pose_mul(last_good, &r.pose);
    return KR_OK;
}

/* Newton tracking at full detail from `start`, judged by the gates with the
 * recent frames' RMS trend (not their inlier trend: a view that jumped
 * overlaps the model less), the jump limit and the free-space check: a
 * wrong pose that fits a wall or the floor well sees through the model's
 * other surfaces, a right one nowhere. */
/* A recovered pose fits no worse than this times the recent GOOD frames'
 * RMS: near a right pose lie wrong ones a few centimetres off that fit
 * almost as well (1.5: the right ones measured within 1.2 times on the
 * synthetic scan). */
#define RECOVER_RMS_RISE 1.5

/* A recovered view may overlap the model this much less than a tracked one
 * must (times the inlier gate), and then must agree with free space this
 * many times better: partial views slide more easily. At 0.8 the synthetic
 * scan's jump at frame 172 was "recovered" at frame 185 with 0.40 of the
 * view on the model, 4 cm off; the frames after it fused the offset into
 * the model, and 13 of the 25 events after were found again only relative
 * to it (12 of 25 within 2 cm / 2 deg of the truth on the GPU). At 0.85
 * that view waits for a better one: 24 of 25 on both engines, and the frames
 * not LOST 0.58 cm off instead of 1.56 (docs/BENCHMARKS.md). */
#define PARTIAL_INLIER 0.85
#define PARTIAL_STRICTER 3

/* A view from near the prediction or the last good pose is trusted without
 * the free-space check only if it fits about as much of itself as the
 * recent GOOD frames did. After the synthetic scan's covered stretch at
 * frames 279-288 the camera had moved 8 cm; the search from the last good
 * pose slid 17.6 cm along a wall and floor with 0.54 of the view on the
 * model (recent frames: 0.97) and 3.8 % of it seeing through the model:
 * accepted as near, that one frame made the ATE of the frames not LOST
 * 0.70 cm instead of 0.33 (docs/BENCHMARKS.md). 0.7-0.9 measured alike. */
#define NEAR_INLIER_SHARE 0.8

/* Fit gates: the tracking gates with the recent RMS trend, tightened. */
static bool fit_passes(const kr_track_result *fine, const kr_recover_config *rc,
                       const kr_track_config *tc, const kr_track_quality *recent,
                       const kr_pose *predicted, const kr_pose *last_good)
{
    if (fine->state == KR_TRACK_LOST ||
        !(within_jump(last_good, &fine->pose, rc) || within_jump(predicted, &fine->pose, rc)))
        return false;
    /* The motion is judged above (within_jump): elapsed 0 skips the check. */
    kr_track_quality q = kr_track_quality_of(fine, &fine->pose, 0);
    if (recent && recent->recent_rms > 0 && !(fine->rms <= RECOVER_RMS_RISE * recent->recent_rms))
        return false;
    /* A view that jumped overlaps the model in part: PARTIAL_INLIER of the
     * inlier gate will do, with a stricter free-space check (the caller). */
    kr_track_config gates = *tc;
    gates.good_inlier *= PARTIAL_INLIER;
    return kr_track_classify(&q, &gates) == KR_TRACK_GOOD;
}

/* Waiting for a better view. After a jump into a view the model covers in
 * part, the search finds the same candidate frame after frame, fitting all
 * but the overlap gate: on the synthetic scan, after the jump at frame 172,
 * 24 attempts in a row found a pose with 0.39-0.43 of the view on the model
 * (the gate: 0.425) and judged it, and the rotated seeds, again — 22 of the
 * scan's 23 failed attempts, most of the GPU's recovery time. A candidate
 * that fits at least WAIT_SHARE of that gate, is within the jump limits and
 * keeps the RMS trend is a near miss: the next attempts of the same loss
 * only track it on (one judged tracking) and accept it once it passes, and
 * run the whole search again every KR_RECOVER_WAIT_FULL_EVERY attempts
 * (recover.h), or as soon as the tracked candidate no longer is a near
 * miss. */
#define WAIT_SHARE 0.75

typedef struct {
    bool found;
    float inlier_fraction;
    kr_pose pose;
} near_miss;

static void note_near_miss(const kr_track_result *fine, const kr_recover_config *rc,
                           const kr_track_config *tc, const kr_track_quality *recent,
                           const kr_pose *predicted, const kr_pose *last_good, near_miss *miss)
{
    if (!miss || fine->state == KR_TRACK_LOST ||
        !(within_jump(last_good, &fine->pose, rc) || within_jump(predicted, &fine->pose, rc)))
        return;
    if (recent && recent->recent_rms > 0 && !(fine->rms <= RECOVER_RMS_RISE * recent->recent_rms))
        return;
    if (!(fine->inlier_fraction >= WAIT_SHARE * PARTIAL_INLIER * tc->good_inlier)) return;
    if (miss->found && !(fine->inlier_fraction > miss->inlier_fraction)) return;
    miss->found = true;
    miss->inlier_fraction = fine->inlier_fraction;
    miss->pose = fine->pose;
}

static kr_status violations(const kr_kdtree *model, const kr_pyramid *pyr, const kr_pose *pose,
                            const kr_recover_config *rc, const kr_track_config *tc,
                            size_t model_points, double *fraction)
{
    int level = rc->wide_finest_level < pyr->levels ? rc->wide_finest_level : pyr->levels - 1;
    kr_free_space fs;
    kr_status s = kr_recover_free_space(model, &pyr->level[level > 0 ? level : 0], pose,
                                        model_points, 0.05, tc->depth_step, &fs);
    if (s != KR_OK) return s;
    *fraction = fs.compared >= 50 ? (double)fs.violations / fs.compared : 1.0;
    return KR_OK;
}

/* A fit that passes the gates but sees through the model has often slid
 * along a valley of the objective: the part of the view the model covers
 * is a wall and the floor, say, and says nothing about the slide along
 * them; the rest of the view, which the model does not cover, does, through
 * free space. Shifts of the camera along its axes, scored by the free-space
 * check alone, find where along the valley the view fits; Newton tracking
 * from the best then refines the directions the overlap constrains. */
static kr_status slide_search(const kr_kdtree *model, const kr_pyramid *pyr, const kr_pose *pose,
                              double current, const kr_recover_config *rc,
                              const kr_track_config *tc, kr_pose *best, bool *found)
{
    static const double steps[] = {-0.3, -0.2, -0.1, 0.1, 0.2, 0.3};
    *found = false;
    double best_fraction = current;
    for (int axis = 0; axis < 3; axis++)
        for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
            kr_pose shifted = *pose;
            for (int i = 0; i < 3; i++)
                shifted.t[i] += pose->R[3 * i + axis] * steps[k];
            double f;
            kr_status s = violations(model, pyr, &shifted, rc, tc, 8000, &f);
            if (s != KR_OK) return s;
            if (f < 0.5 * best_fraction) {
                best_fraction = f;
                *best = shifted;
                *found = true;
            }
        }
    return KR_OK;
}

/* Newton tracking at full detail from `start`, judged by the gates with the
 * recent frames' RMS trend (not their inlier trend: a view that jumped
 * overlaps the model less), the jump limit and the free-space check: a
 * wrong pose that fits a wall or the floor well sees through the model's
 * other surfaces, a right one nowhere. */
static kr_status judge_candidate(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                                 const kr_pose *start, const kr_pose *predicted,
                                 const kr_pose *last_good, const kr_recover_config *rc,
                                 const kr_track_config *tc, const kr_track_quality *recent,
                                 bool near, kr_track_result *fine, bool *good, near_miss *miss)
{
    *good = false;
    kr_pose from = *start;
    for (int round = 0; round < 2; round++) {
        kr_status s = kr_track_frame_on(dev, model, pyr, &from, tc, fine);
        if (s != KR_OK) return s;
        if (!fit_passes(fine, rc, tc, recent, predicted, last_good)) {
            note_near_miss(fine, rc, tc, recent, predicted, last_good, miss);
            return KR_OK;
        }
        double f;
        if ((s = violations(model, pyr, &fine->pose, rc, tc, 20000, &f)) != KR_OK) return s;
        bool partial = fine->inlier_fraction < tc->good_inlier;
        bool fits_as_recent = !recent || !(recent->recent_inlier > 0) ||
                              fine->inlier_fraction >= NEAR_INLIER_SHARE * recent->recent_inlier;
        /* From the prediction or the last good pose with a full view that
         * fits as the recent frames did, what ordinary tracking would accept
         * is accepted: on real depth (TUM fr1) right poses measured up to
         * 13 % here, with edges and mixed pixels; the check guards the far
         * seeds, partial views and views that fit less than they did. */
        if ((near && !partial && fits_as_recent) ||
            f <= rc->max_violations / (partial ? PARTIAL_STRICTER : 1)) {
            fine->state = KR_TRACK_GOOD;
            *good = true;
            return KR_OK;
        }
        bool found = false;
        if (round == 0 &&
            (s = slide_search(model, pyr, &fine->pose, f, rc, tc, &from, &found)) != KR_OK)
            return s;
        if (!found) return KR_OK;
    }
    return KR_OK;
}

/* EM-ICP or Softassign from the last good pose, then from the first
 * soft_hypotheses rotated seeds; a result that ends where an earlier one
 * did is not judged again (the wide basin at work: on the synthetic scan 61
 * of the 64 rotated runs ended within 3 cm and 2 degrees of an earlier
 * one). */
static kr_status recover_soft(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                              const kr_pose *last_good, const kr_recover_config *rc,
                              const kr_track_config *tc, const kr_track_quality *recent,
                              kr_recover_cache *cache, near_miss *miss, kr_recovery *res)
{
    float *src = NULL, *dst = NULL;
    size_t n = 0, m = 0;
    bool own_dst = false;
    kr_status s = frame_points(pyr, rc->model_radius, (size_t)rc->max_points, &src, &n);
    if (s == KR_OK)
        s = model_points_cached(model, last_good, rc->model_radius, (size_t)rc->max_points, cache,
                                &dst, &m, &own_dst);
    const double angle = rc->hypothesis_deg * M_PI / 180;
    const kr_pose identity = kr_pose_identity();
    enum { MAX_JUDGED = 64 };
    kr_pose judged[MAX_JUDGED];
    int njudged = 0;
    for (int h = 0; s == KR_OK && h <= rc->soft_hypotheses && !res->success; h++) {
        kr_pose init = kr_recover_hypothesis(&identity, h, rc->hypotheses, angle), start;
        s = soft_align(dev, rc, src, n, dst, m, last_good, &init, &start);
        if (s == KR_ERR_EMPTY || s == KR_ERR_NUMERIC) {
            s = KR_OK; /* too little to register: let the next stage try */
            break;
        }
        if (s != KR_OK) break;
        res->attempts++;
        bool seen = false;
        for (int j = 0; j < njudged && !seen; j++)
            seen = same_pose(&judged[j], &start);
        if (seen) continue;
        if (njudged < MAX_JUDGED) judged[njudged++] = start;
        kr_track_result fine;
        bool good;
        s = judge_candidate(dev, model, pyr, &start, last_good, last_good, rc, tc, recent, false,
                            &fine, &good, miss);
        res->track = fine;
        res->hypothesis = h;
        res->success = s == KR_OK && good;
    }
    if (res->success)
        res->method = rc->method == KR_RECOVER_SOFTASSIGN ? KR_METHOD_SOFTASSIGN : KR_METHOD_EMICP;
    free(src);
    if (own_dst) free(dst);
    return s;
}

/* Refines a scored candidate on the whole wide level and judges it. */
static kr_status try_candidate(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                               const kr_pose *from, const kr_pose *predicted,
                               const kr_pose *last_good, const kr_recover_config *rc,
                               const kr_track_config *tc, const kr_track_quality *recent, bool near,
                               near_miss *miss, kr_recovery *res)
{
    kr_track_config wide = wide_config(rc, tc);
    kr_track_result coarse, fine;
    kr_status s = kr_track_frame_on(dev, model, pyr, from, &wide, &coarse);
    if (s != KR_OK) return s;
    bool good = false;
    s = judge_candidate(dev, model, pyr, &coarse.pose, predicted, last_good, rc, tc, recent, near,
                        &fine, &good, miss);
    if (s != KR_OK) return s;
    res->track = fine;
    res->success = good;
    return KR_OK;
}

/* Seeds: 0 the motion model's prediction (the camera kept moving), 1 the
 * last good pose (it stopped or jumped), then the rotations. Each is scored
 * by a short wide-basin run on the probe; the prediction and the last good
 * pose are judged at once when their probe fits well (most losses that are
 * not jumps end there), the rest in order of their score, the first that
 * passes wins. */
static kr_status newton_search(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                               const kr_pose *predicted, const kr_pose *last_good,
                               const kr_recover_config *rc, const kr_track_config *tc,
                               const kr_track_quality *recent, near_miss *miss, kr_recovery *res)
{
    enum { MAX_SEEDS = 130 };
    int level = rc->wide_finest_level < pyr->levels ? rc->wide_finest_level : pyr->levels - 1;
    if (level < 0) level = 0;
    kr_pyramid probe;
    kr_status s = make_probe(pyr, level, rc->probe_points, &probe);
    if (s != KR_OK) return s;
    kr_track_config pc = wide_config(rc, tc);
    pc.finest_level = 0;
    memset(pc.iterations, 0, sizeof pc.iterations);
    pc.iterations[0] = rc->probe_iterations;
    /* The probe's gate is the wide level's: gates double per level. */
    pc.gate = rc->wide_gate;
    pc.far_field = rc->wide_gate / 4;

    int axes = rc->hypotheses > 0 ? rc->hypotheses : 0;
    int n = 2 + 2 * axes < MAX_SEEDS ? 2 + 2 * axes : MAX_SEEDS;
    kr_pose seeds[MAX_SEEDS];
    kr_track_result coarse[MAX_SEEDS];
    const double angle = rc->hypothesis_deg * M_PI / 180;
    /* Rotations about the prediction (the last good pose once the pipeline
     * has dropped the velocity of a lost camera). */
    for (int h = 0; h < n; h++)
        seeds[h] = h == 0   ? *predicted
                   : h == 1 ? *last_good
                            : kr_recover_hypothesis(predicted, h - 1, axes, angle);
    /* The prediction and the last good pose first, judged at once when
     * their probe fits well; the rotations only if neither passes. Each
     * group is one launch on a CUDA device. */
    int first = n < 2 ? n : 2, judged = 0;
    s = kr_track_frames_on(dev, model, &probe, seeds, first, &pc, coarse);
    res->attempts += first;
    for (int h = 0; h < first && s == KR_OK && !res->success; h++)
        if (coarse[h].inlier_fraction >= tc->good_inlier &&
            !(h == 1 && same_pose(&coarse[0].pose, &coarse[1].pose))) {
            s = try_candidate(dev, model, pyr, &coarse[h].pose, predicted, last_good, rc, tc,
                              recent, true, miss, res);
            res->hypothesis = h;
            judged++;
        }
    if (s == KR_OK && !res->success && n > first) {
        s = kr_track_frames_on(dev, model, &probe, seeds + first, n - first, &pc, coarse + first);
        res->attempts += n - first;
    }
    int order[MAX_SEEDS];
    for (int h = 0; h < n && s == KR_OK && !res->success; h++) {
        order[h] = h;
        for (int i = h; i > 0 && score(&coarse[order[i]]) > score(&coarse[order[i - 1]]); i--) {
            int t = order[i];
            order[i] = order[i - 1];
            order[i - 1] = t;
        }
    }
    /* The best few distinct candidates, in order of their probe fit. */
    kr_pose tried[MAX_SEEDS];
    int ntried = 0;
    for (int k = 0; k < n && s == KR_OK && !res->success && ntried < rc->judged; k++) {
        const kr_track_result *c = &coarse[order[k]];
        if (c->inliers < 6) break;
        bool dup = false;
        for (int j = 0; j < ntried && !dup; j++)
            dup = same_pose(&tried[j], &c->pose);
        if (dup) continue;
        tried[ntried++] = c->pose;
        if (order[k] <= 1 && judged > 0 && c->inlier_fraction >= tc->good_inlier) continue;
        s = try_candidate(dev, model, pyr, &c->pose, predicted, last_good, rc, tc, recent,
                          order[k] <= 1, miss, res);
        res->hypothesis = order[k];
    }
    free(probe.storage);
    return s;
}

kr_status kr_recover_frame(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                           const kr_pose *predicted, const kr_pose *last_good,
                           const kr_recover_config *rc, const kr_track_config *tc,
                           const kr_track_quality *recent, kr_recover_cache *cache,
                           kr_recovery *out)
{
    if (!dev || !model || !pyr || !predicted || !last_good || !rc || !tc || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_recover_frame: NULL argument");
    kr_recovery res;
    memset(&res, 0, sizeof res);
    res.method = KR_METHOD_NEWTON;
    kr_status s;
    near_miss miss = {0};
    if (cache && cache->waiting) {
        cache->waiting = false;
        if (!memcmp(&cache->wait_from, last_good, sizeof *last_good) &&
            cache->waits < KR_RECOVER_WAIT_FULL_EVERY) {
            kr_track_result fine;
            bool good = false;
            s = judge_candidate(dev, model, pyr, &cache->wait_pose, predicted, last_good, rc, tc,
                                recent, false, &fine, &good, &miss);
            if (s != KR_OK) return s;
            if (good || miss.found) {
                res.attempts = 1;
                res.track = fine;
                res.success = good;
                cache->waiting = !good;
                cache->wait_pose = miss.pose;
                cache->waits++;
                *out = res;
                return KR_OK;
            }
            miss.found = false; /* the candidate fell apart: search again */
        }
    }
    const bool soft = rc->method == KR_RECOVER_EMICP || rc->method == KR_RECOVER_SOFTASSIGN;
    if (soft) {
        s = recover_soft(dev, model, pyr, last_good, rc, tc, recent, cache, &miss, &res);
        if (s != KR_OK) return s;
    }
    if (!res.success && !(soft && rc->newton_fallback == 0)) {
        /* The wide-basin Newton search (also the fallback of the soft methods). */
        res.method = KR_METHOD_NEWTON;
        s = newton_search(dev, model, pyr, predicted, last_good, rc, tc, recent, &miss, &res);
        if (s != KR_OK) return s;
    }
    if (cache && !res.success && miss.found) {
        cache->waiting = true;
        cache->waits = 0;
        cache->wait_pose = miss.pose;
        cache->wait_from = *last_good;
    }
    *out = res;
    return KR_OK;
}

static bool poses_apart(const kr_pose *a, const kr_pose *b, double m, double deg)
{
    kr_pose inv = kr_pose_inv(a), d = kr_pose_mul(&inv, b);
    double dist = sqrt(d.t[0] * d.t[0] + d.t[1] * d.t[1] + d.t[2] * d.t[2]);
    return dist > m || kr_pose_angle(&d) > deg * M_PI / 180;
}

kr_status kr_recover_basin_check(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                                 const kr_pose *predicted, const kr_pose *last_pose,
                                 const kr_track_config *tc, kr_track_result *io, bool *from_last)
{
    if (!dev || !model || !pyr || !predicted || !last_pose || !tc || !io || !from_last)
        return kr_error(KR_ERR_INVALID_ARG, "kr_recover_basin_check: NULL argument");
    *from_last = false;
    /* Nothing to check: the prediction is the last pose (no motion known),
     * or the solution stayed near it. */
    if (!poses_apart(predicted, last_pose, 1e-4, 0.01) ||
        (io->state != KR_TRACK_LOST &&
         !poses_apart(predicted, &io->pose, KR_BASIN_DEPARTURE_M, KR_BASIN_DEPARTURE_DEG)))
        return KR_OK;
    kr_track_result other;
    kr_status s = kr_track_frame_on(dev, model, pyr, last_pose, tc, &other);
    if (s != KR_OK) return s;
    /* The better fit: where the prediction overshot a camera that turned
     * back, the solution from it slides along the scene's walls with fewer
     * inliers (fr1/xyz every 8th frame: 0.80-0.84 against 0.94); after a
     * jump the velocity carried is the jump's, and the prediction fails. */
    if (other.state != KR_TRACK_LOST &&
        (io->state == KR_TRACK_LOST || other.inlier_fraction > io->inlier_fraction)) {
        *io = other;
        *from_last = true;
    }
    return KR_OK;
}
