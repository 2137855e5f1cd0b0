/* Recovery: coarse alignment with a wide basin, then Newton tracking as the
 * judge. The coarse stage is the k-d tree Newton method itself with a wide
 * gate (far pairs count), point-to-point attraction far from the surface and
 * many steps on the coarse levels: the "widen only when a failure is
 * detected". EM-ICP and Softassign (the seeds' wide-basin methods) plug into
 * the same place once the registration engines are built in. */
#include "pipeline/recover.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/register.h"
#include "pipeline/subsample.h"

void kr_recover_config_default(kr_recover_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->method = KR_RECOVER_NEWTON;
    cfg->after_poor = 1;
    cfg->max_points = 1000;
    cfg->model_radius = 3.0f;
    cfg->wide_gate = 0.12f;
    cfg->wide_finest_level = 2;
    const int iters[KR_MAX_LEVELS] = {10, 15, 20, 20, 20};
    memcpy(cfg->wide_iterations, iters, sizeof iters);
    cfg->hypotheses = 14;
    cfg->soft_hypotheses = 2;
    cfg->newton_fallback = 1;
    cfg->hypothesis_deg = 30;
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

kr_pose kr_recover_hypothesis(const kr_pose *last_good, int h, double angle_rad)
{
    if (h <= 0) return *last_good;
    /* Pan and tilt move the view most (a hand turns the sensor about its
     * vertical and horizontal axes): half and all of the angle each way,
     * then both together, then roll; then the pattern again at twice the
     * angle. Camera axes: x right (tilt), y down (pan), z forward (roll). */
    static const struct {
        double pan, tilt, roll;
    } pattern[] = {{0.5, 0, 0},    {-0.5, 0, 0},    {0, 0.5, 0}, {0, -0.5, 0},  {1, 0, 0},
                   {-1, 0, 0},     {0, 1, 0},       {0, -1, 0},  {0.7, 0.7, 0}, {0.7, -0.7, 0},
                   {-0.7, 0.7, 0}, {-0.7, -0.7, 0}, {0, 0, 0.7}, {0, 0, -0.7}};
    const int n = (int)(sizeof pattern / sizeof *pattern);
    int k = (h - 1) % n, round = (h - 1) / n;
    double a = angle_rad * (1 << (round < 8 ? round : 8));
    double x[6] = {pattern[k].tilt * a, pattern[k].pan * a, pattern[k].roll * a, 0, 0, 0};
    kr_pose R = kr_pose_exp(x);
    return kr_pose_mul(last_good, &R);
}

/* Wide-basin alignment from `seed`: gate wide enough for the pairs a jump
 * tears apart, point-to-point far from the surface so that far pairs pull
 * (Mitra et al.'s far field), many steps on coarse levels only. */
static kr_status coarse_align(const kr_kdtree *model, const kr_pyramid *pyr, const kr_pose *seed,
                              const kr_recover_config *rc, const kr_track_config *tc,
                              kr_track_result *out)
{
    kr_track_config wide = *tc;
    wide.gate = rc->wide_gate;
    wide.far_field = rc->wide_gate / 4;
    wide.finest_level = rc->wide_finest_level;
    memcpy(wide.iterations, rc->wide_iterations, sizeof wide.iterations);
    wide.max_line_search = 4;
    /* Only the fit counts here: the judge is the final tracking. */
    wide.lost_inlier = 0;
    wide.lost_rms = INFINITY;
    wide.min_points = 6;
    return kr_track_frame(model, pyr, seed, &wide, out);
}

/* How well a coarse alignment fits: the inlier fraction at the wide gate,
 * less for a poor RMS (a wide gate also takes far pairs in). */
static double score(const kr_track_result *r)
{
    if (r->inliers < 6) return -1;
    return r->inlier_fraction * (1.0 / (1.0 + r->rms / 0.02));
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

/* The frame's points (camera frame) from the coarsest pyramid level that
 * still has max_points, voxel-subsampled to at most max_points. */
static kr_status frame_points(const kr_pyramid *pyr, size_t max_points, float **out, size_t *n)
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
        if (p[0] != p[0]) continue;
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
    kr_register_result r;
    kr_status s = kr_register(dev, &reg, src, n, dst, m, init, &r);
    if (s != KR_OK) return s;
    *out = kr_pose_mul(last_good, &r.pose);
    return KR_OK;
}

/* Newton tracking at full detail from `start`, judged by the gates with the
 * recent frames' trends and the jump limit. */
static kr_status judge_candidate(const kr_kdtree *model, const kr_pyramid *pyr,
                                 const kr_pose *start, const kr_pose *last_good,
                                 const kr_recover_config *rc, const kr_track_config *tc,
                                 const kr_track_quality *recent, kr_track_result *fine, bool *good)
{
    kr_status s = kr_track_frame(model, pyr, start, tc, fine);
    if (s != KR_OK) return s;
    *good = false;
    if (fine->state != KR_TRACK_GOOD || !within_jump(last_good, &fine->pose, rc)) return KR_OK;
    kr_track_quality q;
    memset(&q, 0, sizeof q);
    q.points = fine->inliers;
    q.inliers = fine->inliers;
    q.inlier_fraction = fine->inlier_fraction;
    q.rms = fine->rms;
    q.condition = fine->condition;
    q.solved = true;
    if (recent) {
        q.recent_inlier = recent->recent_inlier;
        q.recent_rms = recent->recent_rms;
    }
    *good = kr_track_classify(&q, tc) == KR_TRACK_GOOD;
    return KR_OK;
}

/* EM-ICP or Softassign from the last good pose, then from the first
 * soft_hypotheses rotated seeds. */
static kr_status recover_soft(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                              const kr_pose *last_good, const kr_recover_config *rc,
                              const kr_track_config *tc, const kr_track_quality *recent,
                              kr_recovery *res)
{
    float *src = NULL, *dst = NULL;
    size_t n = 0, m = 0;
    kr_status s = frame_points(pyr, (size_t)rc->max_points, &src, &n);
    if (s == KR_OK)
        s = model_points(model, last_good, rc->model_radius, (size_t)rc->max_points, &dst, &m);
    const double angle = rc->hypothesis_deg * M_PI / 180;
    const kr_pose identity = kr_pose_identity();
    for (int h = 0; s == KR_OK && h <= rc->soft_hypotheses && !res->success; h++) {
        kr_pose init = kr_recover_hypothesis(&identity, h, angle), start;
        s = soft_align(dev, rc, src, n, dst, m, last_good, &init, &start);
        if (s == KR_ERR_EMPTY || s == KR_ERR_NUMERIC) {
            s = KR_OK; /* too little to register: let the next stage try */
            break;
        }
        if (s != KR_OK) break;
        res->attempts++;
        kr_track_result fine;
        bool good;
        s = judge_candidate(model, pyr, &start, last_good, rc, tc, recent, &fine, &good);
        res->track = fine;
        res->hypothesis = h;
        res->success = s == KR_OK && good;
    }
    if (res->success)
        res->method = rc->method == KR_RECOVER_SOFTASSIGN ? KR_METHOD_SOFTASSIGN : KR_METHOD_EMICP;
    free(src);
    free(dst);
    return s;
}

kr_status kr_recover_frame(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                           const kr_pose *predicted, const kr_pose *last_good,
                           const kr_recover_config *rc, const kr_track_config *tc,
                           const kr_track_quality *recent, kr_recovery *out)
{
    if (!dev || !model || !pyr || !predicted || !last_good || !rc || !tc || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_recover_frame: NULL argument");
    kr_recovery res;
    memset(&res, 0, sizeof res);
    res.method = KR_METHOD_NEWTON;
    if (rc->method == KR_RECOVER_EMICP || rc->method == KR_RECOVER_SOFTASSIGN) {
        kr_status s = recover_soft(dev, model, pyr, last_good, rc, tc, recent, &res);
        if (s != KR_OK) return s;
        if (res.success || rc->newton_fallback == 0) {
            *out = res;
            return KR_OK;
        }
    }
    /* The wide-basin Newton search (also the fallback of the soft methods). */
    res.method = KR_METHOD_NEWTON;
    /* Coarse alignment from every seed (cheap: coarse levels), then the
     * judge, Newton tracking at full detail, for the best few in order of
     * their coarse fit. */
    enum { MAX_SEEDS = 64, JUDGED = 3 };
    /* Seed 0 is the motion model's prediction (the camera kept moving), seed
     * 1 the last good pose (it stopped or jumped), then the rotations. */
    int n = rc->hypotheses + 2 < MAX_SEEDS ? rc->hypotheses + 2 : MAX_SEEDS;
    kr_track_result coarse[MAX_SEEDS];
    int order[MAX_SEEDS];
    const double angle = rc->hypothesis_deg * M_PI / 180;
    for (int h = 0; h < n; h++) {
        kr_pose seed = h == 0 ? *predicted : kr_recover_hypothesis(last_good, h - 1, angle);
        kr_status s = coarse_align(model, pyr, &seed, rc, tc, &coarse[h]);
        if (s != KR_OK) return s;
        order[h] = h;
        /* Insertion by score: the last good pose first on ties. */
        for (int i = h; i > 0 && score(&coarse[order[i]]) > score(&coarse[order[i - 1]]); i--) {
            int t = order[i];
            order[i] = order[i - 1];
            order[i - 1] = t;
        }
    }
    res.attempts += n;
    for (int k = 0; k < n && k < JUDGED && !res.success; k++) {
        int h = order[k];
        kr_track_result fine;
        bool good;
        kr_status s =
            judge_candidate(model, pyr, &coarse[h].pose, last_good, rc, tc, recent, &fine, &good);
        if (s != KR_OK) return s;
        res.track = fine;
        res.hypothesis = h;
        res.success = good;
    }
    *out = res;
    return KR_OK;
}
