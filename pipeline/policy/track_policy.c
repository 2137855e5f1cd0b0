/* The tracker's policy (pipeline/policy/track_policy.h). */
#include "pipeline/policy/track_policy.h"

#include <math.h>
#include <string.h>

#include "pipeline/recover/recover.h"

void kr_policy_init(kr_policy *pol, const kr_track_config *tc, const kr_recover_config *rc)
{
    memset(pol, 0, sizeof *pol);
    pol->track = *tc;
    pol->after_poor = rc->after_poor;
    pol->recover = rc->method != KR_RECOVER_OFF;
}

kr_pose kr_policy_predict(const kr_policy *pol)
{
    if (!pol->have_pose) return kr_pose_identity();
    return kr_pose_mul(&pol->last_pose, &pol->velocity);
}

kr_policy_frame kr_policy_begin(const kr_policy *pol, double stamp)
{
    kr_policy_frame f;
    memset(&f, 0, sizeof f);
    f.stamp = stamp;
    f.seed = kr_policy_predict(pol);
    f.gates = pol->track;
    if (pol->partial_inlier > 0 && pol->partial_inlier < f.gates.good_inlier)
        f.gates.good_inlier = pol->partial_inlier;
    return f;
}

void kr_policy_first_frame(kr_policy_frame *f, kr_frame_result *r)
{
    /* It defines the world frame and seeds the model. */
    f->first = true;
    memset(&r->track, 0, sizeof r->track);
    r->track.pose = f->seed;
    r->method = KR_METHOD_PREDICTED;
    /* Only a frame with the depth tracking needs: fewer points with normals
     * than min_points (the fewest inliers kr_track_classify takes as a fit)
     * seed no model the next frames could be tracked against, and a frame
     * with none (an all-zero depth image, a covered sensor, absurd
     * intrinsics) was GOOD at the identity with inlier fraction 1 and rms 0,
     * the run ending "lost 0" (issue 30 item 3). It is LOST at the seed and
     * not fused; the next frame with depth is the first again. */
    if (r->valid_points < f->gates.min_points) {
        kr_track_result_worsen(&r->track, KR_TRACK_LOST, &f->gates);
        r->tracked = r->track;
        return;
    }
    /* GOOD by definition: its pose is the world's origin, so its covariance
     * is 0 (left so by the memset). */
    r->track.state = KR_TRACK_GOOD;
    r->track.inlier_fraction = 1;
    r->tracked = r->track;
}

bool kr_policy_basin_check_due(const kr_policy *pol)
{
    /* It tracks again from the last trusted pose: there must be one. */
    return pol->have_pose && pol->recover;
}

/* The pose the motion check measures from. */
static const kr_pose *motion_origin(const kr_policy *pol, const kr_policy_frame *f)
{
    return f->from_last ? &pol->last_pose : &f->seed;
}

/* The time the motion check allows for, from a trusted pose at `from` to a
 * frame at `stamp`. Frames come at least 1/100 s apart: timestamps that do
 * not advance (a source without clock) still allow one frame's motion. */
static double elapsed_since(double from, double stamp)
{
    return fmin(fmax(stamp - from, 0.01), KR_POLICY_MAX_ELAPSED_S);
}

/* Failure detection: the state machine sees the fit, how far the solution
 * lies from the prediction against the time the camera had to get there, and
 * the trend against the recent GOOD frames. A verdict only ever worsens; the
 * pose stays Newton's (the caller publishes the seed for a LOST frame). */
static void judge(const kr_policy *pol, const kr_pose *seed, const kr_track_config *gates,
                  double stamp, kr_track_result *t)
{
    if (t->state == KR_TRACK_LOST) return;
    kr_track_quality q = kr_track_quality_of(t, seed, elapsed_since(pol->last_pose_time, stamp));
    q.recent_inlier = pol->recent.recent_inlier;
    q.recent_rms = pol->recent.recent_rms;
    kr_track_result_worsen(t, kr_track_classify(&q, gates), gates);
}

void kr_policy_judge(const kr_policy *pol, const kr_policy_frame *f, kr_frame_result *r)
{
    judge(pol, motion_origin(pol, f), &f->gates, f->stamp, &r->track);
    r->tracked = r->track;
    if (r->track.state == KR_TRACK_LOST) r->track.pose = f->seed;
    r->method = r->track.state == KR_TRACK_LOST ? KR_METHOD_PREDICTED : KR_METHOD_NEWTON;
}

/* A second opinion for a frame that departed from its seed as far as the
 * basin check looks (3 cm / 3 deg) and fits clearly less of its view than
 * the recent frames did. It may sit in a wrong basin: at TUM fr1 every 8th
 * frame, where the camera turns back over the desk, frames 34-38 were GOOD
 * 8-22 cm off with 0.64-0.73 of the view on the model against 0.87 before,
 * and the H100's runs that were not deterministic ended at 5.73 cm in five
 * of six. Or the camera did move that far: the fakenect planes recording
 * jumps 18 cm with 0.67 against 0.86, rightly. No figure of the fit tells
 * the two apart (a stricter inlier drop failed the second), so the recovery
 * search is asked; its answer replaces the frame's only when it passed the
 * recovery's own checks and fits clearly more, and is fused, like any
 * recovered pose, once the next frame confirms it. */
bool kr_policy_second_opinion_due(const kr_policy *pol, const kr_policy_frame *f,
                                  const kr_frame_result *r)
{
    if (!pol->recover) return false;
    kr_pose inv = kr_pose_inv(motion_origin(pol, f)), d = kr_pose_mul(&inv, &r->track.pose);
    bool departed =
        sqrt(d.t[0] * d.t[0] + d.t[1] * d.t[1] + d.t[2] * d.t[2]) > KR_BASIN_DEPARTURE_M ||
        kr_pose_angle(&d) > KR_BASIN_DEPARTURE_DEG * M_PI / 180;
    return r->track.state == KR_TRACK_GOOD && departed && pol->recent.recent_inlier > 0 &&
           !(r->track.inlier_fraction >=
             KR_POLICY_SECOND_OPINION_SHARE * pol->recent.recent_inlier);
}

bool kr_policy_second_opinion(const kr_recover_answer *answer, kr_frame_result *r)
{
    if (!answer->success ||
        !(answer->track.inlier_fraction > r->track.inlier_fraction + KR_POLICY_SECOND_OPINION_GAIN))
        return false;
    r->track = answer->track;
    r->method = answer->method;
    r->recovered = true;
    return true;
}

/* `frames`: frames with depth from the loss to the one that ended it. */
static void loss_ended(kr_policy *pol, int frames)
{
    pol->counts.losses_ended++;
    if (frames <= KR_POLICY_QUICK_FRAMES) pol->counts.losses_ended_fast++;
}

/* Lost, or slipping for after_poor frames: counted when it begins; recovery
 * then searches from the last good pose. */
kr_policy_loss kr_policy_watch(kr_policy *pol, const kr_frame_result *r)
{
    const kr_track_result *t = &r->track;
    kr_policy_loss out = {false, false};
    pol->poor_run = t->state == KR_TRACK_POOR ? pol->poor_run + 1 : 0;
    /* Once lost, only a GOOD frame ends the loss: a POOR one may be a
     * wrong basin that merely fits. */
    bool lost = t->state == KR_TRACK_LOST ||
                (pol->after_poor > 0 && pol->poor_run >= pol->after_poor) ||
                (pol->lost && t->state != KR_TRACK_GOOD);
    if (lost && !pol->lost) {
        pol->counts.losses++;
        pol->lost_frames = 0;
        out.began = true;
    }
    if (!lost && pol->lost) loss_ended(pol, pol->lost_frames + 1);
    pol->lost = lost;
    bool depth = r->valid_points >= pol->track.min_points;
    if (lost && depth) pol->lost_frames++;
    /* A covered sensor gives nothing to align: wait for depth. */
    out.recover = lost && pol->recover && depth;
    return out;
}

/* Whether the camera can have moved from `seed` to `pose` in the time since
 * the last trusted pose: the motion check's reach (kr_track_classify). */
static bool reachable(const kr_policy *pol, const kr_pose *seed, const kr_pose *pose, double stamp)
{
    return kr_track_within_reach(&pol->track, seed, pose,
                                 elapsed_since(pol->last_pose_time, stamp));
}

bool kr_policy_recovered(kr_policy *pol, const kr_policy_frame *f, const kr_recover_answer *answer,
                         kr_frame_result *r)
{
    if (!answer->success) {
        pol->counts.recovery_failures++;
        return false;
    }
    pol->counts.recoveries++;
    r->recovered = true;
    r->track = answer->track;
    /* A jump into a view the model covers in part, judged right by the
     * recovery's stricter checks: until the fused frames fill the model
     * in, frames that fit about as well are GOOD. */
    if (answer->track.inlier_fraction < pol->track.good_inlier) {
        pol->partial_inlier = 0.9f * answer->track.inlier_fraction;
        pol->recent.recent_inlier = answer->track.inlier_fraction;
    }
    r->method = answer->method;
    /* A recovered pose the camera could have reached from the prediction
     * (within the motion check's reach) continues the motion: the step to
     * it is a velocity. One beyond was a jump: the motion model starts
     * again from rest, and the next frame's seeds stay at the found pose. */
    if (!reachable(pol, &f->seed, &answer->track.pose, f->stamp)) pol->previous_trusted = false;
    loss_ended(pol, pol->lost_frames);
    pol->lost = false;
    pol->poor_run = 0;
    return true;
}

/* A trusted pose: it extends the motion model. The velocity is the motion
 * from the frame before, when that one was trusted too; after a gap the
 * motion that led here is no velocity to continue. A recovery in the frame
 * right after a trusted one is a step of one frame like any other: a fast
 * camera keeps its velocity through it (TUM fr1/xyz at every 8th frame),
 * and where the step was a jump, the basin check tracks from the last pose
 * instead of the overshot prediction. */
static void accept_pose(kr_policy *pol, const kr_pose *pose, double stamp)
{
    if (pol->have_pose && pol->previous_trusted) {
        kr_pose inv = kr_pose_inv(&pol->last_pose);
        pol->velocity = kr_pose_mul(&inv, pose);
    } else {
        pol->velocity = kr_pose_identity();
    }
    pol->last_pose = *pose;
    pol->last_pose_time = stamp;
    pol->have_pose = true;
    pol->previous_trusted = true;
}

/* Running means of the GOOD frames' inlier fraction and RMS (about the last
 * ten frames), the reference of the trend checks. */
static void remember_good(kr_policy *pol, const kr_track_result *t)
{
    const float a = 0.1f;
    if (pol->recent.recent_inlier <= 0) {
        pol->recent.recent_inlier = t->inlier_fraction;
        pol->recent.recent_rms = t->rms;
    } else {
        pol->recent.recent_inlier += a * (t->inlier_fraction - pol->recent.recent_inlier);
        pol->recent.recent_rms += a * (t->rms - pol->recent.recent_rms);
    }
}

kr_policy_outcome kr_policy_accept(kr_policy *pol, const kr_policy_frame *f, kr_frame_result *r)
{
    /* A LOST frame, or any but a GOOD one while lost, keeps the predicted
     * pose and is not fused; without a trusted motion the next seed is the
     * last trusted pose. */
    bool lost =
        !(r->track.state == KR_TRACK_GOOD || (r->track.state == KR_TRACK_POOR && !pol->lost));
    if (lost || (!r->recovered && r->track.inlier_fraction >= pol->track.good_inlier))
        pol->partial_inlier = 0;
    bool partial = pol->partial_inlier > 0 && r->track.inlier_fraction < pol->track.good_inlier;
    if (!lost) {
        accept_pose(pol, &r->track.pose, f->stamp);
        if (r->track.state == KR_TRACK_GOOD && !f->first && !partial) remember_good(pol, &r->track);
    } else {
        kr_track_result_worsen(&r->track, KR_TRACK_LOST, &pol->track);
        r->track.pose = f->seed;
        r->method = KR_METHOD_PREDICTED;
        pol->velocity = kr_pose_identity();
        pol->previous_trusted = false;
    }
    kr_policy_outcome out;
    /* A recovered pose is fused once the next frame confirms it: a wrong
     * one fused would make the frames after it fit where it put them. */
    out.fuse = !lost && !r->recovered;
    out.trusted = r->track.state == KR_TRACK_GOOD && !r->recovered;
    return out;
}
