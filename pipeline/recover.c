/* Recovery: coarse alignment with a wide basin, then Newton tracking as the
 * judge. The coarse stage is the k-d tree Newton method itself with a wide
 * gate (far pairs count), point-to-point attraction far from the surface and
 * many steps on the coarse levels: the "widen only when a failure is
 * detected". EM-ICP and Softassign (the seeds' wide-basin methods) plug into
 * the same place once the registration engines are built in. */
#include "pipeline/recover.h"

#include <math.h>
#include <string.h>

void kr_recover_config_default(kr_recover_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->method = KR_RECOVER_NEWTON;
    cfg->after_poor = 3;
    cfg->max_points = 3000;
    cfg->model_radius = 3.0f;
    cfg->wide_gate = 0.12f;
    cfg->wide_finest_level = 2;
    const int iters[KR_MAX_LEVELS] = {10, 15, 20, 20, 20};
    memcpy(cfg->wide_iterations, iters, sizeof iters);
    cfg->hypotheses = 14;
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

kr_status kr_recover_frame(const kr_kdtree *model, const kr_pyramid *pyr, const kr_pose *last_good,
                           const kr_recover_config *rc, const kr_track_config *tc,
                           const kr_track_quality *recent, kr_recovery *out)
{
    if (!model || !pyr || !last_good || !rc || !tc || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_recover_frame: NULL argument");
    if (rc->method != KR_RECOVER_NEWTON)
        return kr_error(KR_ERR_UNSUPPORTED,
                        "recovery by %s needs the registration engines, not in this build: use "
                        "--recover newton",
                        kr_recover_method_name(rc->method));
    kr_recovery res;
    memset(&res, 0, sizeof res);
    res.method = KR_METHOD_NEWTON;
    /* Coarse alignment from every seed (cheap: coarse levels), then the
     * judge, Newton tracking at full detail, for the best few in order of
     * their coarse fit. */
    enum { MAX_SEEDS = 64, JUDGED = 3 };
    int n = rc->hypotheses + 1 < MAX_SEEDS ? rc->hypotheses + 1 : MAX_SEEDS;
    kr_track_result coarse[MAX_SEEDS];
    int order[MAX_SEEDS];
    const double angle = rc->hypothesis_deg * M_PI / 180;
    for (int h = 0; h < n; h++) {
        kr_pose seed = kr_recover_hypothesis(last_good, h, angle);
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
    res.attempts = n;
    for (int k = 0; k < n && k < JUDGED && !res.success; k++) {
        int h = order[k];
        kr_track_result fine;
        kr_status s = kr_track_frame(model, pyr, &coarse[h].pose, tc, &fine);
        if (s != KR_OK) return s;
        res.track = fine;
        res.hypothesis = h;
        if (fine.state != KR_TRACK_GOOD || !within_jump(last_good, &fine.pose, rc)) continue;
        /* The gates with the recent frames' trends: a recovered pose must fit
         * as well as tracking did before the loss. */
        kr_track_quality q;
        memset(&q, 0, sizeof q);
        q.points = fine.inliers;
        q.inliers = fine.inliers;
        q.inlier_fraction = fine.inlier_fraction;
        q.rms = fine.rms;
        q.condition = fine.condition;
        q.solved = true;
        if (recent) {
            q.recent_inlier = recent->recent_inlier;
            q.recent_rms = recent->recent_rms;
        }
        res.success = kr_track_classify(&q, tc) == KR_TRACK_GOOD;
    }
    *out = res;
    return KR_OK;
}
