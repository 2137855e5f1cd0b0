/* Loss you can reproduce, failure detection and recovery, end to end on the
 * synthetic source with jumps and covered stretches: every frame's pose is
 * compared with the source's ground truth (the true poses, jumps included). */
#include "kr_test.h"

#include <stdlib.h>

#include "kinreg/eval.h"
#include "kinreg/pipeline.h"

typedef struct {
    size_t n, cap;
    kr_frame_result *r;
} frame_log;

static void log_frame(const kr_frame_result *r, const kr_pipeline_stats *st, void *user)
{
    (void)st;
    frame_log *log = user;
    if (log->n == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 1024;
        kr_frame_result *g = realloc(log->r, cap * sizeof *g);
        if (!g) return;
        log->r = g;
        log->cap = cap;
    }
    log->r[log->n++] = *r;
}

/* Error of an estimated pose (world = first camera) against ground truth
 * pose k expressed in the first camera's frame. */
static void pose_error(const kr_trajectory *gt, size_t k, const kr_pose *est, double *rot_deg,
                       double *trans_m)
{
    kr_pose g0inv = kr_pose_inv(&gt->poses[0]);
    kr_pose rel = kr_pose_mul(&g0inv, &gt->poses[k]);
    kr_pose relinv = kr_pose_inv(&rel);
    kr_pose e = kr_pose_mul(&relinv, est);
    *rot_deg = kr_pose_angle(&e) * 180 / M_PI;
    *trans_m = sqrt(e.t[0] * e.t[0] + e.t[1] * e.t[1] + e.t[2] * e.t[2]);
}

typedef struct {
    int bad, bad_flagged, good, good_flagged, blind;
} detection;

static detection run_log(kr_pipeline_config *cfg, frame_log *log, bool print)
{
    detection d = {0};
    cfg->on_frame = log_frame;
    cfg->user = log;
    kr_pipeline *p = NULL;
    kr_status s = kr_pipeline_create(&p, cfg);
    CHECK_OK(s);
    if (s != KR_OK) return d;
    CHECK_OK(kr_pipeline_run(p));
    const kr_trajectory *gt = kr_source_groundtruth(kr_pipeline_source(p));
    CHECK(gt != NULL);
    if (!gt) {
        kr_pipeline_destroy(&p);
        return d;
    }
    for (size_t i = 0; i < log->n; i++) {
        const kr_frame_result *r = &log->r[i];
        double rd, tm;
        size_t k = (size_t)r->frame_index;
        pose_error(gt, k, &r->tracked.pose, &rd, &tm);
        /* A covered frame has nothing to track: it is LOST by definition and
         * counted apart. */
        if (r->valid_points < 100) {
            d.blind++;
            continue;
        }
        bool bad = rd > 5 || tm > 0.05;
        bool flagged = r->tracked.state != KR_TRACK_GOOD;
        double frd, ftm;
        pose_error(gt, k, &r->track.pose, &frd, &ftm);
        if (print && (bad || flagged || r->recovery_tried || frd > 2 || ftm > 0.02))
            printf("    frame %4zu tracked %s err %6.2f deg %6.3f m in %.2f rms %.4f | out %s %s err %6.2f deg %6.3f m%s %.0f ms\n",
                   k, kr_track_state_name(r->tracked.state), rd, tm, r->tracked.inlier_fraction,
                   r->tracked.rms, kr_track_state_name(r->track.state), kr_method_name(r->method), frd, ftm,
                   r->recovered ? " RECOVERED" : r->recovery_tried ? " (recovery failed)" : "", r->recover_ms);
        if (bad) {
            d.bad++;
            d.bad_flagged += flagged;
        } else {
            d.good++;
            d.good_flagged += flagged;
        }
    }
    kr_pipeline_destroy(&p);
    return d;
}

KR_TEST(recovery, detection_rates_on_jumps_and_covered)
{
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic";
    cfg.source.jumps = 20;
    cfg.source.covered = 5;
    cfg.device.backend = KR_BACKEND_CPU;
    frame_log log = {0};
    detection d = run_log(&cfg, &log, true);
    printf("    bad frames %d, flagged %d; good frames %d, flagged %d\n", d.bad, d.bad_flagged, d.good,
           d.good_flagged);
    CHECK_GE(d.bad_flagged, 0.9 * d.bad);
    CHECK_LT(d.good_flagged, 0.01 * d.good);
    free(log.r);
}
