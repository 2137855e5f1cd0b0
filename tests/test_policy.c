/* The tracker's policy on its own (pipeline/policy/track_policy.h): frame
 * results made up by hand drive its state, and its decisions and counters
 * are checked against what DESIGN.md §5 and the guide
 * (docs/guide/replay-and-evaluation.md, "When tracking is lost") say they
 * must be. Last, a whole pipeline with a stub recovery passed in through
 * kr_pipeline_config.recover_fn. */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/pipeline.h"
#include "pipeline/policy/track_policy.h"
#include "recovery_fixture.h"

#define DT (1.0 / 30) /* frames at 30 Hz */

static kr_policy policy_with(int after_poor, kr_recover_method method)
{
    kr_track_config tc;
    kr_track_config_default(&tc);
    kr_recover_config rc;
    kr_recover_config_default(&rc);
    rc.after_poor = after_poor;
    rc.method = method;
    kr_policy pol;
    kr_policy_init(&pol, &tc, &rc);
    return pol;
}

/* Rotation by `deg` about z, then translation t. */
static kr_pose pose_of(double deg, double x, double y, double z)
{
    double c = cos(deg * M_PI / 180), s = sin(deg * M_PI / 180);
    kr_pose p = {{c, -s, 0, s, c, 0, 0, 0, 1}, {x, y, z}};
    return p;
}

/* The camera's path: 1 cm along x per frame from the origin (0.3 m/s). */
static kr_pose path(int k)
{
    return pose_of(0, 0.01 * k, 0, 0);
}

/* What tracking returned for a frame: a pose and its figures. */
static kr_frame_result tracked(kr_pose pose, kr_track_state state, float inlier, float rms)
{
    kr_frame_result r;
    memset(&r, 0, sizeof r);
    r.valid_points = 5000;
    r.track.pose = pose;
    r.track.state = state;
    r.track.inlier_fraction = inlier;
    r.track.rms = rms;
    r.track.condition = 0.1f;
    r.track.inliers = (int)(inlier * 5000);
    return r;
}

static kr_frame_result good_at(kr_pose pose)
{
    return tracked(pose, KR_TRACK_GOOD, 0.9f, 0.005f);
}

static kr_frame_result covered(void)
{
    kr_frame_result r = tracked(kr_pose_identity(), KR_TRACK_LOST, 0, 0);
    r.valid_points = 0;
    r.track.inliers = 0;
    return r;
}

static kr_recover_answer answer(bool success, kr_pose pose, float inlier, kr_method method)
{
    kr_recover_answer a;
    memset(&a, 0, sizeof a);
    a.success = success;
    a.track = tracked(pose, KR_TRACK_GOOD, inlier, 0.005f).track;
    a.method = method;
    return a;
}

/* One frame through the policy as the pipeline drives it (no basin check, no
 * second opinion); a recovery the policy asks for is answered by `ans`
 * (NULL: the test expects none). */
typedef struct {
    kr_policy_loss loss;
    bool asked, recovered;
    kr_policy_outcome out;
    kr_pose seed;
} step_log;

static step_log step(kr_policy *pol, double stamp, kr_frame_result *r, const kr_recover_answer *ans)
{
    step_log log;
    memset(&log, 0, sizeof log);
    kr_policy_frame f = kr_policy_begin(pol, stamp);
    log.seed = f.seed;
    kr_policy_judge(pol, &f, r);
    log.loss = kr_policy_watch(pol, r);
    if (log.loss.recover && ans) {
        log.asked = true;
        log.recovered = kr_policy_recovered(pol, &f, ans, r);
    }
    log.out = kr_policy_accept(pol, &f, r);
    return log;
}

/* The first frame (no model yet) at stamp 0, then GOOD frames 1..last on
 * the path. */
static void start(kr_policy *pol, int last)
{
    kr_frame_result r;
    memset(&r, 0, sizeof r);
    r.valid_points = 5000; /* a frame with depth */
    kr_policy_frame f = kr_policy_begin(pol, 0);
    kr_policy_first_frame(&f, &r);
    kr_policy_accept(pol, &f, &r);
    for (int k = 1; k <= last; k++) {
        r = good_at(path(k));
        step(pol, k * DT, &r, NULL);
    }
}

static bool same_pose(const kr_pose *a, const kr_pose *b)
{
    return !memcmp(a, b, sizeof *a);
}

static void check_pose_near(const kr_pose *got, const kr_pose *want, double tol)
{
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(got->R[i], want->R[i], tol);
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(got->t[i], want->t[i], tol);
}

/* The first frame, with no model to track against, defines the world frame:
 * GOOD at the identity, no registration, fused; its made-up figures are no
 * measurement for the trend checks. */
KR_TEST(policy, first_frame_defines_the_world_frame)
{
    kr_policy pol = policy_with(1, KR_RECOVER_EMICP);
    kr_frame_result r;
    memset(&r, 0xff, sizeof r);
    r.recovered = false;
    r.valid_points = 5000;
    kr_policy_frame f = kr_policy_begin(&pol, 0);
    kr_policy_first_frame(&f, &r);
    kr_pose id = kr_pose_identity();
    CHECK(same_pose(&r.track.pose, &id));
    CHECK_EQ(r.track.state, KR_TRACK_GOOD);
    CHECK_EQ(r.track.inlier_fraction, 1);
    CHECK_EQ(r.track.iterations, 0);
    CHECK_EQ(r.method, KR_METHOD_PREDICTED);
    CHECK(!memcmp(&r.tracked, &r.track, sizeof r.track));
    kr_policy_outcome out = kr_policy_accept(&pol, &f, &r);
    CHECK(out.fuse && out.trusted);
    CHECK_EQ(pol.recent.recent_inlier, 0);
    CHECK(kr_policy_basin_check_due(&pol));
}

/* Issue 30 item 3: a first frame without the depth tracking needs (fewer
 * points with normals than min_points, the fewest inliers a fit may have)
 * was GOOD at the identity with inlier fraction 1 and rms 0. It is LOST at
 * the seed, not fused, no trusted pose; the next frame with depth is the
 * first again and defines the world frame. */
KR_TEST(policy, first_frame_without_depth_is_lost)
{
    kr_policy pol = policy_with(1, KR_RECOVER_EMICP);
    const int few[] = {0, 1, pol.track.min_points - 1};
    for (size_t i = 0; i < sizeof few / sizeof few[0]; i++) {
        kr_frame_result r;
        memset(&r, 0, sizeof r);
        r.valid_points = few[i];
        kr_policy_frame f = kr_policy_begin(&pol, i * DT);
        kr_policy_first_frame(&f, &r);
        CHECK_EQ(r.track.state, KR_TRACK_LOST);
        CHECK_EQ(r.tracked.state, KR_TRACK_LOST);
        CHECK_LT(r.track.inlier_fraction, pol.track.lost_inlier);
        CHECK_EQ(r.method, KR_METHOD_PREDICTED);
        kr_policy_outcome out = kr_policy_accept(&pol, &f, &r);
        CHECK_EQ(r.track.state, KR_TRACK_LOST);
        CHECK(!out.fuse && !out.trusted);
        CHECK(!pol.have_pose);
        CHECK_EQ(pol.recent.recent_inlier, 0);
    }
    /* Depth at last: exactly min_points with normals is enough. */
    kr_frame_result r;
    memset(&r, 0, sizeof r);
    r.valid_points = pol.track.min_points;
    kr_policy_frame f = kr_policy_begin(&pol, 3 * DT);
    kr_policy_first_frame(&f, &r);
    CHECK_EQ(r.track.state, KR_TRACK_GOOD);
    kr_policy_outcome out = kr_policy_accept(&pol, &f, &r);
    CHECK(out.fuse && out.trusted);
    CHECK(pol.have_pose);
    kr_pose id = kr_pose_identity();
    CHECK(same_pose(&r.track.pose, &id));
}

/* The seed is T_k = T_{k-1} · (T_{k-2}⁻¹ T_{k-1}), the step between the last
 * two trusted poses applied once more; a LOST frame drops the velocity (the
 * seed is the last trusted pose), and the first trusted frame after it
 * starts the motion from rest. */
KR_TEST(policy, constant_velocity_prediction)
{
    kr_policy pol = policy_with(1, KR_RECOVER_EMICP);
    kr_pose seed = kr_policy_predict(&pol);
    kr_pose id = kr_pose_identity();
    check_pose_near(&seed, &id, 0);
    /* Two trusted poses: A = translation (1, 2, 3); B = A moved 1 cm along x
     * and turned 10° about z. A⁻¹B = (Rz(10°), (0.01, 0, 0)); B · A⁻¹B by
     * hand: Rz(20°), t = Rz(10°)(0.01, 0, 0) + (1.01, 2, 3). */
    kr_frame_result r = good_at(pose_of(0, 1, 2, 3));
    kr_policy_frame f = kr_policy_begin(&pol, 0);
    kr_policy_accept(&pol, &f, &r);
    r = good_at(pose_of(10, 1.01, 2, 3));
    f = kr_policy_begin(&pol, DT);
    kr_policy_accept(&pol, &f, &r);
    double c10 = cos(10 * M_PI / 180), s10 = sin(10 * M_PI / 180);
    kr_pose want = pose_of(20, 1.01 + 0.01 * c10, 2 + 0.01 * s10, 3);
    seed = kr_policy_predict(&pol);
    check_pose_near(&seed, &want, 1e-12);
    f = kr_policy_begin(&pol, 2 * DT);
    check_pose_near(&f.seed, &want, 1e-12);

    /* A LOST frame publishes the seed and drops the velocity. */
    r = tracked(pose_of(0, 5, 5, 5), KR_TRACK_LOST, 0.1f, 0.04f);
    kr_policy_outcome out = kr_policy_accept(&pol, &f, &r);
    CHECK(same_pose(&r.track.pose, &f.seed));
    CHECK_EQ(r.track.state, KR_TRACK_LOST);
    CHECK_EQ(r.method, KR_METHOD_PREDICTED);
    CHECK(!out.fuse);
    kr_pose b = pose_of(10, 1.01, 2, 3);
    seed = kr_policy_predict(&pol);
    check_pose_near(&seed, &b, 0);

    /* After the gap: the first trusted pose C is the next seed as it is. */
    kr_pose c = pose_of(12, 1.03, 2.01, 3);
    r = good_at(c);
    f = kr_policy_begin(&pol, 3 * DT);
    kr_policy_accept(&pol, &f, &r);
    seed = kr_policy_predict(&pol);
    check_pose_near(&seed, &c, 0);
    /* Then D: C⁻¹D = (Rz(2°), Rz(-12°)(0.01, 0, 0)), so D · C⁻¹D turns to 16°
     * and moves Rz(14°)Rz(-12°)(0.01, 0, 0) = Rz(2°)(0.01, 0, 0) further. */
    r = good_at(pose_of(14, 1.04, 2.01, 3));
    f = kr_policy_begin(&pol, 4 * DT);
    kr_policy_accept(&pol, &f, &r);
    double c2 = cos(2 * M_PI / 180), s2 = sin(2 * M_PI / 180);
    want = pose_of(16, 1.04 + 0.01 * c2, 2.01 + 0.01 * s2, 3);
    seed = kr_policy_predict(&pol);
    check_pose_near(&seed, &want, 1e-12);
}

/* The verdict on one solution, without changing the state. */
static kr_track_state verdict(const kr_policy *pol, double stamp, kr_frame_result r)
{
    kr_policy_frame f = kr_policy_begin(pol, stamp);
    kr_policy_judge(pol, &f, &r);
    return r.tracked.state;
}

/* The gates, the trend against the recent GOOD frames (below 0.7× their
 * inlier fraction or above 2.5× their RMS: POOR) and the motion check
 * (0.75 m/s and 60°/s since the last trusted pose, at most 0.3 s of it, plus
 * 2 cm / 2°: LOST). A LOST frame publishes the seed, Newton's pose stays in
 * `tracked`. */
KR_TEST(policy, verdicts_gates_trend_and_reach)
{
    kr_policy pol = policy_with(1, KR_RECOVER_EMICP);
    start(&pol, 10); /* recent GOOD frames: inlier 0.9, RMS 5 mm */
    double t = 11 * DT;
    kr_pose at = path(11); /* the seed */
    CHECK_EQ(verdict(&pol, t, good_at(at)), KR_TRACK_GOOD);
    /* Trend: 0.7 × 0.9 = 0.63. */
    CHECK_EQ(verdict(&pol, t, tracked(at, KR_TRACK_GOOD, 0.60f, 0.005f)), KR_TRACK_POOR);
    CHECK_EQ(verdict(&pol, t, tracked(at, KR_TRACK_GOOD, 0.66f, 0.005f)), KR_TRACK_GOOD);
    /* 2.5 × 5 mm = 12.5 mm. */
    CHECK_EQ(verdict(&pol, t, tracked(at, KR_TRACK_GOOD, 0.9f, 0.013f)), KR_TRACK_POOR);
    CHECK_EQ(verdict(&pol, t, tracked(at, KR_TRACK_GOOD, 0.9f, 0.012f)), KR_TRACK_GOOD);
    /* Gates: inlier fraction 0.5 (GOOD) and 0.15 (LOST). */
    CHECK_EQ(verdict(&pol, t, tracked(at, KR_TRACK_GOOD, 0.45f, 0.005f)), KR_TRACK_POOR);
    CHECK_EQ(verdict(&pol, t, tracked(at, KR_TRACK_GOOD, 0.10f, 0.005f)), KR_TRACK_LOST);
    /* A verdict only worsens. */
    CHECK_EQ(verdict(&pol, t, tracked(at, KR_TRACK_POOR, 0.9f, 0.005f)), KR_TRACK_POOR);
    CHECK_EQ(verdict(&pol, t, tracked(at, KR_TRACK_LOST, 0.9f, 0.005f)), KR_TRACK_LOST);
    /* Reach in one frame: 0.75 / 30 + 0.02 = 4.5 cm, 60 / 30 + 2 = 4°. */
    CHECK_EQ(verdict(&pol, t, good_at(pose_of(0, 0.11, 0.04, 0))), KR_TRACK_GOOD);
    CHECK_EQ(verdict(&pol, t, good_at(pose_of(0, 0.11, 0.05, 0))), KR_TRACK_LOST);
    CHECK_EQ(verdict(&pol, t, good_at(pose_of(3.5, 0.11, 0, 0))), KR_TRACK_GOOD);
    CHECK_EQ(verdict(&pol, t, good_at(pose_of(4.5, 0.11, 0, 0))), KR_TRACK_LOST);
    /* Ten seconds later the motion check allows 0.3 s: 24.5 cm. */
    CHECK_EQ(verdict(&pol, 10 + 10 * DT, good_at(pose_of(0, 0.11, 0.23, 0))), KR_TRACK_GOOD);
    CHECK_EQ(verdict(&pol, 10 + 10 * DT, good_at(pose_of(0, 0.11, 0.26, 0))), KR_TRACK_LOST);
    /* A stamp that did not advance still allows 1/100 s: 2.75 cm. */
    CHECK_EQ(verdict(&pol, 10 * DT, good_at(pose_of(0, 0.11, 0.025, 0))), KR_TRACK_GOOD);
    CHECK_EQ(verdict(&pol, 10 * DT, good_at(pose_of(0, 0.11, 0.03, 0))), KR_TRACK_LOST);

    /* A LOST frame: the seed is published with no registration, Newton's
     * pose kept as `tracked`. */
    kr_pose off = pose_of(0, 0.11, 0.2, 0);
    kr_frame_result r = good_at(off);
    kr_policy_frame f = kr_policy_begin(&pol, t);
    kr_policy_judge(&pol, &f, &r);
    CHECK_EQ(r.track.state, KR_TRACK_LOST);
    CHECK(same_pose(&r.track.pose, &f.seed));
    check_pose_near(&f.seed, &at, 1e-12);
    CHECK(same_pose(&r.tracked.pose, &off));
    CHECK_EQ(r.method, KR_METHOD_PREDICTED);
    r = good_at(at);
    kr_policy_judge(&pol, &f, &r);
    CHECK_EQ(r.method, KR_METHOD_NEWTON);
}

/* A loss begins at a LOST frame or after_poor POOR ones, lasts until a GOOD
 * frame (a POOR one may be a wrong basin that merely fits), publishes the
 * seed and fuses nothing meanwhile, and asks for recovery only on frames
 * with depth. Losses ended within 3 frames with depth count as quick. */
KR_TEST(policy, losses_begin_and_end_with_their_counts)
{
    kr_policy pol = policy_with(1, KR_RECOVER_EMICP);
    start(&pol, 3);
    kr_policy_counts zero = {0};
    CHECK(!memcmp(&pol.counts, &zero, sizeof zero));
    kr_recover_answer no = answer(false, path(0), 0, KR_METHOD_EMICP);

    kr_frame_result r = tracked(path(4), KR_TRACK_GOOD, 0.55f, 0.005f); /* POOR by trend */
    step_log s = step(&pol, 4 * DT, &r, &no);
    CHECK(s.loss.began);
    CHECK(s.loss.recover && s.asked && !s.recovered);
    CHECK_EQ(r.track.state, KR_TRACK_LOST);
    CHECK(same_pose(&r.track.pose, &s.seed));
    CHECK(!s.out.fuse && !s.out.trusted);
    CHECK_EQ(pol.counts.losses, 1);
    CHECK_EQ(pol.counts.recovery_failures, 1);

    r = tracked(path(5), KR_TRACK_POOR, 0.9f, 0.005f); /* POOR while lost: still lost */
    s = step(&pol, 5 * DT, &r, &no);
    CHECK(!s.loss.began && s.loss.recover);
    CHECK_EQ(r.track.state, KR_TRACK_LOST);
    CHECK(!s.out.fuse);

    r = covered(); /* nothing to align: no recovery, not counted */
    s = step(&pol, 6 * DT, &r, &no);
    CHECK(!s.loss.began && !s.loss.recover && !s.asked);
    CHECK_EQ(r.track.state, KR_TRACK_LOST);
    CHECK_EQ(pol.counts.recovery_failures, 2);

    r = good_at(path(7)); /* GOOD: the loss is over after 3 frames with depth */
    s = step(&pol, 7 * DT, &r, NULL);
    CHECK(!s.loss.began && !s.loss.recover);
    CHECK_EQ(r.track.state, KR_TRACK_GOOD);
    CHECK(s.out.fuse && s.out.trusted);
    CHECK_EQ(pol.counts.losses, 1);
    CHECK_EQ(pol.counts.losses_ended, 1);
    CHECK_EQ(pol.counts.losses_ended_fast, 1);

    /* A second loss of 4 frames with depth (and a covered one) ends late. */
    for (int k = 8; k <= 12; k++) {
        r = k == 10 ? covered() : tracked(path(k), KR_TRACK_LOST, 0.1f, 0.04f);
        s = step(&pol, k * DT, &r, &no);
        CHECK_EQ(s.loss.began, k == 8);
        CHECK_EQ(r.track.state, KR_TRACK_LOST);
    }
    r = good_at(path(13));
    s = step(&pol, 13 * DT, &r, NULL);
    CHECK(s.out.fuse);
    CHECK_EQ(pol.counts.losses, 2);
    CHECK_EQ(pol.counts.losses_ended, 2);
    CHECK_EQ(pol.counts.losses_ended_fast, 1);
    CHECK_EQ(pol.counts.recoveries, 0);
    CHECK_EQ(pol.counts.recovery_failures, 2 + 4);
}

/* after_poor 2: one POOR frame is published and fused as it is (not
 * trusted for a keyframe), the second in a row begins a loss; and with
 * recovery off, nothing asks for the search. */
KR_TEST(policy, after_poor_and_recovery_off)
{
    kr_policy pol = policy_with(2, KR_RECOVER_EMICP);
    start(&pol, 3);
    kr_frame_result r = tracked(path(4), KR_TRACK_POOR, 0.45f, 0.005f);
    step_log s = step(&pol, 4 * DT, &r, NULL);
    CHECK(!s.loss.began && !s.loss.recover);
    CHECK_EQ(r.track.state, KR_TRACK_POOR);
    kr_pose p4 = path(4);
    CHECK(same_pose(&r.track.pose, &p4));
    CHECK(s.out.fuse && !s.out.trusted);
    r = tracked(path(5), KR_TRACK_POOR, 0.45f, 0.005f);
    s = step(&pol, 5 * DT, &r, NULL);
    CHECK(s.loss.began && s.loss.recover);
    CHECK_EQ(r.track.state, KR_TRACK_LOST);
    CHECK(!s.out.fuse);

    /* Once lost, a POOR frame (one short of after_poor) does not end the
     * loss; a GOOD one does. */
    kr_policy two = policy_with(2, KR_RECOVER_EMICP);
    start(&two, 3);
    r = tracked(path(4), KR_TRACK_LOST, 0.1f, 0.04f);
    s = step(&two, 4 * DT, &r, NULL);
    CHECK(s.loss.began);
    r = tracked(path(5), KR_TRACK_POOR, 0.45f, 0.005f);
    s = step(&two, 5 * DT, &r, NULL);
    CHECK(!s.loss.began && s.loss.recover);
    CHECK_EQ(r.track.state, KR_TRACK_LOST);
    CHECK(!s.out.fuse);
    CHECK_EQ(two.counts.losses_ended, 0);
    r = good_at(path(6));
    s = step(&two, 6 * DT, &r, NULL);
    CHECK(!s.loss.recover && s.out.fuse);
    CHECK_EQ(two.counts.losses_ended, 1);

    kr_policy off = policy_with(1, KR_RECOVER_OFF);
    start(&off, 3);
    CHECK(!kr_policy_basin_check_due(&off));
    CHECK(kr_policy_basin_check_due(&pol));
    r = tracked(path(4), KR_TRACK_LOST, 0.1f, 0.04f);
    s = step(&off, 4 * DT, &r, NULL);
    CHECK(s.loss.began && !s.loss.recover);
    CHECK_EQ(off.counts.losses, 1);
}

/* A recovery's answer is taken only when it succeeded: its pose and method
 * are published, the frame is not fused until the next one confirms it,
 * and the loss is over. A pose the camera can have reached from the seed
 * continues the motion of a trusted frame before it; a jump starts it from
 * rest. */
KR_TEST(policy, recovery_answer_taken_only_when_it_succeeded)
{
    kr_policy pol = policy_with(1, KR_RECOVER_EMICP);
    start(&pol, 3);
    kr_frame_result r = tracked(path(4), KR_TRACK_LOST, 0.1f, 0.04f);
    kr_recover_answer no = answer(false, pose_of(0, 0.04, 0.001, 0), 0.9f, KR_METHOD_SOFTASSIGN);
    step_log s = step(&pol, 4 * DT, &r, &no);
    CHECK(s.asked && !s.recovered && !r.recovered);
    CHECK_EQ(r.track.state, KR_TRACK_LOST);
    CHECK_EQ(r.method, KR_METHOD_PREDICTED);
    CHECK(same_pose(&r.track.pose, &s.seed));

    kr_pose found = pose_of(0.5, 0.05, 0.002, 0);
    kr_recover_answer yes = answer(true, found, 0.8f, KR_METHOD_SOFTASSIGN);
    r = tracked(path(5), KR_TRACK_LOST, 0.1f, 0.04f);
    s = step(&pol, 5 * DT, &r, &yes);
    CHECK(s.asked && s.recovered && r.recovered);
    CHECK_EQ(r.track.state, KR_TRACK_GOOD);
    CHECK_EQ(r.method, KR_METHOD_SOFTASSIGN);
    CHECK(same_pose(&r.track.pose, &found));
    CHECK(!s.out.fuse && !s.out.trusted); /* fused once the next frame confirms it */
    CHECK_EQ(pol.counts.recoveries, 1);
    CHECK_EQ(pol.counts.recovery_failures, 1);
    CHECK_EQ(pol.counts.losses_ended, 1);
    CHECK_EQ(pol.counts.losses_ended_fast, 1);
    /* The frame before was LOST: no velocity, the next seed is the found pose. */
    kr_pose seed = kr_policy_predict(&pol);
    CHECK(same_pose(&seed, &found));
    r = good_at(pose_of(0.5, 0.06, 0.002, 0));
    s = step(&pol, 6 * DT, &r, NULL);
    CHECK(s.out.fuse && s.out.trusted);
    CHECK(!s.loss.began);

    /* Losses recovered at their third frame with depth are quick, at their
     * fourth not (a covered frame between does not count). */
    for (int late = 0; late <= 1; late++) {
        kr_policy q = policy_with(1, KR_RECOVER_EMICP);
        start(&q, 3);
        int k = 4;
        for (int with_depth = 1; with_depth < 3 + late; k++) {
            r = k == 5 ? covered() : tracked(path(k), KR_TRACK_LOST, 0.1f, 0.04f);
            with_depth += r.valid_points > 0;
            step(&q, k * DT, &r, &no);
        }
        r = tracked(path(k), KR_TRACK_LOST, 0.1f, 0.04f);
        yes = answer(true, path(k), 0.9f, KR_METHOD_EMICP);
        s = step(&q, k * DT, &r, &yes);
        CHECK(s.recovered);
        CHECK_EQ(q.counts.losses_ended, 1);
        CHECK_EQ(q.counts.losses_ended_fast, late ? 0 : 1);
    }

    /* Recovered right after a trusted frame, within reach of the seed: the
     * step to it is a velocity (P7 · P6⁻¹P7 = 1 cm further). */
    kr_policy a = policy_with(1, KR_RECOVER_EMICP);
    start(&a, 6);
    r = tracked(path(7), KR_TRACK_GOOD, 0.55f, 0.005f); /* POOR by trend: lost */
    yes = answer(true, path(7), 0.9f, KR_METHOD_EMICP);
    s = step(&a, 7 * DT, &r, &yes);
    CHECK(s.recovered);
    kr_pose want = path(8);
    seed = kr_policy_predict(&a);
    check_pose_near(&seed, &want, 1e-12);
    /* A jump of 50 cm: the motion starts from rest at the found pose. */
    kr_policy b = policy_with(1, KR_RECOVER_EMICP);
    start(&b, 6);
    kr_pose jump = pose_of(20, 0.57, 0.2, 0);
    r = tracked(path(7), KR_TRACK_LOST, 0.1f, 0.04f);
    yes = answer(true, jump, 0.9f, KR_METHOD_EMICP);
    s = step(&b, 7 * DT, &r, &yes);
    CHECK(s.recovered);
    seed = kr_policy_predict(&b);
    CHECK(same_pose(&seed, &jump));
}

/* A recovery into a view that overlaps the model in part (inlier fraction
 * below the gate): the next frames are GOOD at 0.9 of that overlap, are not
 * taken into the recent figures, until a frame fits the normal gate again
 * (or the camera is lost). */
KR_TEST(policy, partial_overlap_relaxes_the_inlier_gate)
{
    kr_policy pol = policy_with(1, KR_RECOVER_EMICP);
    start(&pol, 5);
    kr_recover_answer part = answer(true, path(6), 0.4f, KR_METHOD_EMICP);
    kr_frame_result r = tracked(path(6), KR_TRACK_LOST, 0.1f, 0.04f);
    step_log s = step(&pol, 6 * DT, &r, &part);
    CHECK(s.recovered);
    CHECK_EQ(r.track.state, KR_TRACK_GOOD);
    kr_policy_frame f = kr_policy_begin(&pol, 7 * DT);
    CHECK_NEAR(f.gates.good_inlier, 0.36, 1e-6);
    CHECK_NEAR(pol.recent.recent_inlier, 0.4, 1e-6);

    /* 0.42 fits the relaxed gate: GOOD, fused, not remembered. */
    kr_frame_result fits = tracked(path(7), KR_TRACK_GOOD, 0.42f, 0.005f);
    kr_policy plain = policy_with(1, KR_RECOVER_EMICP);
    start(&plain, 6);
    CHECK_EQ(verdict(&plain, 7 * DT, fits), KR_TRACK_POOR); /* without the relaxation */
    r = fits;
    s = step(&pol, 7 * DT, &r, NULL);
    CHECK_EQ(r.track.state, KR_TRACK_GOOD);
    CHECK(s.out.fuse);
    CHECK_NEAR(pol.recent.recent_inlier, 0.4, 1e-6);
    f = kr_policy_begin(&pol, 8 * DT);
    CHECK_NEAR(f.gates.good_inlier, 0.36, 1e-6);

    /* A frame at the normal gate ends it. */
    r = tracked(path(8), KR_TRACK_GOOD, 0.55f, 0.005f);
    s = step(&pol, 8 * DT, &r, NULL);
    CHECK_EQ(r.track.state, KR_TRACK_GOOD);
    f = kr_policy_begin(&pol, 9 * DT);
    CHECK_NEAR(f.gates.good_inlier, 0.5, 1e-6);
    CHECK_NEAR(pol.recent.recent_inlier, 0.4 + 0.1 * (0.55 - 0.4), 1e-6); /* remembered again */

    /* And so does a loss. */
    r = tracked(path(9), KR_TRACK_LOST, 0.1f, 0.04f);
    step(&pol, 9 * DT, &r, &part);
    f = kr_policy_begin(&pol, 10 * DT);
    CHECK_NEAR(f.gates.good_inlier, 0.36, 1e-6);
    r = tracked(path(10), KR_TRACK_LOST, 0.1f, 0.04f);
    kr_recover_answer no = answer(false, path(10), 0.4f, KR_METHOD_EMICP);
    step(&pol, 10 * DT, &r, &no);
    f = kr_policy_begin(&pol, 11 * DT);
    CHECK_NEAR(f.gates.good_inlier, 0.5, 1e-6);
}

/* The second opinion: asked for a GOOD frame more than 3 cm or 3° from where
 * the motion check measures (the seed, or the last pose after the basin
 * check) that fits less than 0.8 of the recent inlier fraction; taken only
 * when it succeeded and fits more than 0.05 better. */
KR_TEST(policy, second_opinion_thresholds)
{
    kr_policy pol = policy_with(1, KR_RECOVER_EMICP);
    start(&pol, 5); /* recent inlier fraction 0.9: the trigger is below 0.72 */
    kr_policy_frame f = kr_policy_begin(&pol, 6 * DT); /* seed: path(6), x = 0.06 */
    kr_frame_result r = tracked(pose_of(0, 0.06, 0.04, 0), KR_TRACK_GOOD, 0.70f, 0.005f);
    CHECK(kr_policy_second_opinion_due(&pol, &f, &r));
    r.track.inlier_fraction = 0.74f;
    CHECK(!kr_policy_second_opinion_due(&pol, &f, &r));
    r = tracked(pose_of(0, 0.06, 0.02, 0), KR_TRACK_GOOD, 0.70f, 0.005f);
    CHECK(!kr_policy_second_opinion_due(&pol, &f, &r));
    r = tracked(pose_of(3.5, 0.06, 0, 0), KR_TRACK_GOOD, 0.70f, 0.005f);
    CHECK(kr_policy_second_opinion_due(&pol, &f, &r));
    r = tracked(pose_of(2.5, 0.06, 0, 0), KR_TRACK_GOOD, 0.70f, 0.005f);
    CHECK(!kr_policy_second_opinion_due(&pol, &f, &r));
    r = tracked(pose_of(0, 0.06, 0.04, 0), KR_TRACK_POOR, 0.70f, 0.005f);
    CHECK(!kr_policy_second_opinion_due(&pol, &f, &r));
    /* Measured from the last pose (x = 0.05) after the basin check. */
    r = tracked(pose_of(0, 0.085, 0, 0), KR_TRACK_GOOD, 0.70f, 0.005f);
    CHECK(!kr_policy_second_opinion_due(&pol, &f, &r));
    f.from_last = true;
    CHECK(kr_policy_second_opinion_due(&pol, &f, &r));
    kr_policy off = policy_with(1, KR_RECOVER_OFF);
    start(&off, 5);
    CHECK(!kr_policy_second_opinion_due(&off, &f, &r));

    /* Taking it. */
    kr_pose other = pose_of(1, 0.055, 0.001, 0);
    kr_frame_result mine = tracked(pose_of(0, 0.06, 0.04, 0), KR_TRACK_GOOD, 0.70f, 0.005f);
    mine.method = KR_METHOD_NEWTON;
    r = mine;
    CHECK(!kr_policy_second_opinion(&(kr_recover_answer){0}, &r));
    kr_recover_answer a = answer(true, other, 0.74f, KR_METHOD_EMICP);
    CHECK(!kr_policy_second_opinion(&a, &r));
    CHECK(same_pose(&r.track.pose, &mine.track.pose) && !r.recovered);
    a = answer(false, other, 0.95f, KR_METHOD_EMICP);
    CHECK(!kr_policy_second_opinion(&a, &r));
    CHECK(same_pose(&r.track.pose, &mine.track.pose) && !r.recovered);
    a = answer(true, other, 0.76f, KR_METHOD_EMICP);
    CHECK(kr_policy_second_opinion(&a, &r));
    CHECK(same_pose(&r.track.pose, &other) && r.recovered);
    CHECK_EQ(r.method, KR_METHOD_EMICP);
    /* Like a recovered pose, it is fused once the next frame confirms it. */
    f.from_last = false;
    kr_policy_outcome out = kr_policy_accept(&pol, &f, &r);
    CHECK(!out.fuse && !out.trusted);
    CHECK_EQ(pol.counts.recoveries, 0); /* not a loss's */
}

/* ---- the hook, through a whole pipeline ---------------------------------- */

typedef struct {
    bool succeed; /* answer the loss's requests with the true pose */
    const kr_trajectory *gt;
    int loss_calls, second_calls, bad_requests;
    uint64_t loss_frames[64];
    kr_pose answered[64];
    kr_pose last_good[64];
    int n;
} stub;

static kr_status stub_recover(const kr_recover_request *req, kr_recover_answer *out, void *user)
{
    stub *st = user;
    if (!req->model || !req->pyramid || !req->track || !req->recover || !req->builtin ||
        req->frame_index >= st->gt->count || req->timestamp != st->gt->stamps[req->frame_index])
        st->bad_requests++;
    if (req->purpose == KR_RECOVER_FOR_SECOND_OPINION) {
        /* Succeeds, but fits no better: the policy must not take it. */
        st->second_calls++;
        out->success = true;
        out->track.pose = req->predicted;
        out->track.inlier_fraction = 0;
        out->method = KR_METHOD_SOFTASSIGN;
        return KR_OK;
    }
    st->loss_calls++;
    kr_pose g0inv = kr_pose_inv(&st->gt->poses[0]);
    kr_pose truth = kr_pose_mul(&g0inv, &st->gt->poses[req->frame_index]);
    if (st->n < 64) {
        st->loss_frames[st->n] = req->frame_index;
        st->answered[st->n] = truth;
        st->last_good[st->n] = req->last_good;
        st->n++;
    }
    out->success = st->succeed;
    out->track.pose = truth;
    out->track.state = KR_TRACK_GOOD;
    out->track.inlier_fraction = 0.95f;
    out->track.rms = 0.003f;
    out->track.condition = 0.1f;
    out->track.inliers = 5000;
    out->method = KR_METHOD_SOFTASSIGN; /* the default search is EM-ICP: this marks the stub */
    return KR_OK;
}

static void run_with_stub(stub *st, frame_log *log, kr_pipeline_stats *stats)
{
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic:3";
    cfg.source.duration_s = 3;
    cfg.source.jumps = 2;
    cfg.source.covered = 1;
    cfg.source.covered_frames = 5;
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.deterministic = true;
    cfg.on_frame = log_frame;
    cfg.user = log;
    cfg.recover_fn = stub_recover;
    cfg.recover_user = st;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    st->gt = kr_source_groundtruth(kr_pipeline_source(p));
    REQUIRE(st->gt != NULL);
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_get_stats(p, stats);
    kr_pipeline_destroy(&p);
}

static const kr_frame_result *logged(const frame_log *log, uint64_t index)
{
    for (size_t i = 0; i < log->n; i++)
        if (log->r[i].frame_index == index) return &log->r[i];
    return NULL;
}

/* The last pose published by a frame that was not LOST, before `index`. */
static const kr_pose *last_trusted_before(const frame_log *log, uint64_t index)
{
    const kr_pose *p = NULL;
    for (size_t i = 0; i < log->n && log->r[i].frame_index < index; i++)
        if (log->r[i].track.state != KR_TRACK_LOST) p = &log->r[i].track.pose;
    return p;
}

/* A stub recovery that never succeeds: called at the losses, each call a
 * failed attempt, no frame recovered; the request carries the frame and the
 * last trusted pose published. */
KR_TEST(policy, stub_recovery_through_the_hook_failing)
{
    stub st;
    memset(&st, 0, sizeof st);
    frame_log log = {0};
    kr_pipeline_stats stats;
    memset(&stats, 0, sizeof stats);
    run_with_stub(&st, &log, &stats);
    printf("    %d loss requests, %d second opinions; losses %llu, recoveries %llu, failed %llu\n",
           st.loss_calls, st.second_calls, (unsigned long long)stats.losses,
           (unsigned long long)stats.recoveries, (unsigned long long)stats.recovery_failures);
    CHECK_EQ(st.bad_requests, 0);
    CHECK_GE(st.loss_calls, 1);
    CHECK_GE(stats.losses, 1);
    CHECK_EQ(stats.recoveries, 0);
    CHECK_EQ(stats.recovery_failures, (uint64_t)st.loss_calls);
    int tried = 0;
    for (size_t i = 0; i < log.n; i++) {
        const kr_frame_result *r = &log.r[i];
        CHECK(!r->recovered);
        CHECK_NE(r->method, KR_METHOD_SOFTASSIGN);
        if (!r->recovery_tried) continue;
        tried++;
        CHECK_EQ(r->track.state, KR_TRACK_LOST);
        CHECK_EQ(r->method, KR_METHOD_PREDICTED);
    }
    CHECK_EQ(tried, st.loss_calls);
    for (int k = 0; k < st.n; k++) {
        const kr_pose *want = last_trusted_before(&log, st.loss_frames[k]);
        CHECK(want && same_pose(&st.last_good[k], want));
    }
    free(log.r);
}

/* A stub recovery that answers the true pose: every loss request's frame
 * publishes exactly that pose and the stub's method, each counted as a
 * recovery; its second opinions, which fit no better, are never taken. */
KR_TEST(policy, stub_recovery_through_the_hook_accepted)
{
    stub st;
    memset(&st, 0, sizeof st);
    st.succeed = true;
    frame_log log = {0};
    kr_pipeline_stats stats;
    memset(&stats, 0, sizeof stats);
    run_with_stub(&st, &log, &stats);
    printf("    %d loss requests, %d second opinions; losses %llu, recoveries %llu\n",
           st.loss_calls, st.second_calls, (unsigned long long)stats.losses,
           (unsigned long long)stats.recoveries);
    CHECK_EQ(st.bad_requests, 0);
    CHECK_GE(st.loss_calls, 1);
    CHECK_EQ(stats.recoveries, (uint64_t)st.loss_calls);
    CHECK_EQ(stats.recovery_failures, 0);
    CHECK_EQ(stats.losses_ended, stats.losses);
    for (int k = 0; k < st.n; k++) {
        const kr_frame_result *r = logged(&log, st.loss_frames[k]);
        REQUIRE(r != NULL);
        CHECK(r->recovery_tried && r->recovered);
        CHECK_EQ(r->track.state, KR_TRACK_GOOD);
        CHECK_EQ(r->method, KR_METHOD_SOFTASSIGN);
        CHECK(same_pose(&r->track.pose, &st.answered[k]));
    }
    int stub_published = 0;
    for (size_t i = 0; i < log.n; i++)
        stub_published += log.r[i].method == KR_METHOD_SOFTASSIGN;
    CHECK_EQ(stub_published, st.loss_calls);
    free(log.r);
}
