/* Loss you can reproduce, failure detection and recovery, end to end on the
 * synthetic source with jumps and covered stretches: every frame's pose is
 * compared with the source's ground truth (the true poses, jumps included). */
#include "kr_test.h"

#include <stdlib.h>

#include "kinreg/eval.h"
#include "kinreg/pipeline.h"
#include "recovery_fixture.h"

typedef struct {
    int bad, bad_flagged, good, good_flagged, blind;
} detection;

static detection run_log(kr_pipeline_config *cfg, frame_log *log, bool print)
{
    detection d = {0};
    cfg->on_frame = log_frame;
    cfg->user = log;
    /* Repeatable: with background snapshot builds, which model a frame tracks
     * against depends on the machine's speed, and a slower machine than the
     * one the bounds were set on sees different losses. */
    cfg->deterministic = true;
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
            printf("    frame %4zu tracked %s err %6.2f deg %6.3f m in %.2f rms %.4f | out %s %s "
                   "err %6.2f deg %6.3f m%s %.0f ms\n",
                   k, kr_track_state_name(r->tracked.state), rd, tm, r->tracked.inlier_fraction,
                   r->tracked.rms, kr_track_state_name(r->track.state), kr_method_name(r->method),
                   frd, ftm,
                   r->recovered        ? " RECOVERED"
                   : r->recovery_tried ? " (recovery failed)"
                                       : "",
                   r->recover_ms);
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

KR_TEST_TAGGED(recovery, detection_rates_on_jumps_and_covered, "long")
{
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic";
    cfg.source.jumps = 20;
    cfg.source.covered = 5;
    cfg.device.backend = KR_BACKEND_CPU;
    frame_log log = {0};
    detection d = run_log(&cfg, &log, true);
    printf("    bad frames %d, flagged %d; good frames %d, flagged %d\n", d.bad, d.bad_flagged,
           d.good, d.good_flagged);
    CHECK_GE(d.bad_flagged, 0.9 * d.bad);
    CHECK_LT(d.good_flagged, 0.01 * d.good);
    free(log.r);
}

KR_TEST_TAGGED(recovery, pipeline_recovers_from_jumps_and_covered_stretches, "long")
{
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic:3";
    cfg.source.duration_s = 10;
    cfg.source.jumps = 4;
    cfg.source.jump_angle_deg = 20;
    cfg.source.jump_distance_m = 0.2;
    cfg.source.covered = 2;
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.deterministic = true; /* as in run_log */
    frame_log log = {0};
    cfg.on_frame = log_frame;
    cfg.user = &log;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    const kr_trajectory *gt = kr_source_groundtruth(kr_pipeline_source(p));
    CHECK(gt != NULL && log.n == 300);
    if (gt && log.n == 300) {
        int events, quick, eventually;
        count_recovered(&log, gt, 3, true, &events, &quick);
        count_recovered(&log, gt, 10, true, &events, &eventually);
        printf(
            "    %d jumps and uncovered frames: %d recovered within 3 frames with depth, %d within "
            "10; losses %llu, recoveries %llu\n",
            events, quick, eventually, (unsigned long long)st.losses,
            (unsigned long long)st.recoveries);
        CHECK_EQ(events, 6); /* 4 jumps, 2 stretches: the source placed them all */
        /* Every loss ends, most within 3 frames (the target is 95 %:
         * the wide-basin Newton search misses some 20° jumps at first; see
         * docs/BENCHMARKS.md). */
        CHECK_EQ(eventually, events);
        CHECK_GE(quick, events / 2);
        CHECK_GE(st.recoveries, 1);
        /* Bounded error at the end and over the run. */
        double rd, tm;
        pose_error(gt, (size_t)log.r[log.n - 1].frame_index, &log.r[log.n - 1].track.pose, &rd,
                   &tm);
        CHECK_LT(rd, 1.0);
        CHECK_LT(tm, 0.02);
        kr_ate ate = {0};
        CHECK_OK(kr_eval_ate(gt, kr_pipeline_trajectory(p), 0, &ate));
        CHECK_LT(ate.rmse, 0.05);
    }
    kr_pipeline_destroy(&p);
    free(log.r);
}

/* The loss source: the ground truth holds exactly the configured jumps, each
 * between half and all of the limits (measured as the step between frames
 * beyond the smooth path's motion), and a stride delivers every K-th frame. */
KR_TEST(recovery, synthetic_jumps_in_ground_truth_and_stride)
{
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = "synthetic:5";
    cfg.duration_s = 20;
    cfg.jumps = 6;
    cfg.jump_angle_deg = 20;
    cfg.jump_distance_m = 0.2;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    const kr_trajectory *gt = kr_source_groundtruth(src);
    REQUIRE(gt != NULL);
    int jumps = 0;
    for (size_t k = 1; k < gt->count; k++) {
        kr_pose inv = kr_pose_inv(&gt->poses[k - 1]);
        kr_pose step = kr_pose_mul(&inv, &gt->poses[k]);
        double move = sqrt(step.t[0] * step.t[0] + step.t[1] * step.t[1] + step.t[2] * step.t[2]);
        double deg = kr_pose_angle(&step) * 180 / M_PI;
        if (move < 0.05 && deg < 5) continue; /* the smooth path: under 1.5 cm, 1° a frame */
        jumps++;
        CHECK_GE(deg, 10 - 1.5);
        CHECK_LE(deg, 20 + 1.5);
    }
    CHECK_EQ(jumps, 6);
    CHECK_EQ(kr_source_length(src), 600);
    kr_source_destroy(&src);

    cfg.jumps = 0;
    cfg.duration_s = 1;
    cfg.stride = 8;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    CHECK_EQ(kr_source_length(src), 4); /* frames 0, 8, 16, 24 of 30 */
    kr_frame f;
    double stamps[4];
    int n = 0;
    while (n < 5 && kr_source_read(src, &f) == KR_OK) {
        if (n < 4) stamps[n] = f.timestamp;
        n++;
        kr_frame_release(&f);
    }
    CHECK_EQ(n, 4);
    for (int i = 0; i < 4 && i < n; i++)
        CHECK_NEAR(stamps[i], i * 8 / 30.0, 1e-9);
    kr_source_destroy(&src);

    cfg.stride = 0;
    cfg.duration_s = 1;
    cfg.jumps = 20; /* does not fit into 30 frames: a clear error */
    CHECK_STATUS(kr_source_create(&src, &cfg), KR_ERR_INVALID_ARG);
}
