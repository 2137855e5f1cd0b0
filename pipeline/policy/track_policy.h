/* The tracker's policy (DESIGN.md §5 "Tracking", "Recovery"; §7.8): what the
 * tracker makes of each frame's results. The seed it predicts (constant
 * velocity), the verdict on a solution (the gates, the trend against the
 * recent GOOD frames, the partial-overlap relaxation), when a loss begins
 * and ends, when the recovery search is asked (for a loss, or for a second
 * opinion) and whether its answer is taken, which pose is published, and
 * whether the frame extends the motion model and is fused.
 *
 * A state and functions of it, nothing else: no locks, threads, clocks, I/O
 * or publishing. The caller does the work the policy asks for (tracking, the
 * basin check, the recovery search), publishes the events it returns and
 * copies its counters into the run's statistics (pipeline/pipeline.c). A
 * frame goes through, in this order:
 *
 *   f = kr_policy_begin(pol, stamp)              seed and gates
 *   no model yet: kr_policy_first_frame(&f, r)   the frame defines the world frame
 *   else:
 *     track r->track from f.seed with f.gates;
 *     if kr_policy_basin_check_due(pol): the basin check, setting f.from_last
 *     kr_policy_judge(pol, &f, r)
 *     if kr_policy_second_opinion_due(pol, &f, r): ask, kr_policy_second_opinion(&answer, r)
 *     loss = kr_policy_watch(pol, r)             loss.began: publish `lost`
 *     if loss.recover: ask, kr_policy_recovered(pol, &f, &answer, r)   true: publish `recovered`
 *   out = kr_policy_accept(pol, &f, r)           the published pose; out.fuse
 */
#ifndef KINREG_PIPELINE_POLICY_TRACK_POLICY_H
#define KINREG_PIPELINE_POLICY_TRACK_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "kinreg/pipeline.h"

/* Beyond this the last trusted pose is stale: the motion check allows no more
 * than this much time's motion, and recovery (a wider search) takes over. */
#define KR_POLICY_MAX_ELAPSED_S 0.3

/* Losses that end within this many frames with depth count as quick. */
#define KR_POLICY_QUICK_FRAMES 3

/* The second opinion (kr_policy_second_opinion_due): asked for a GOOD frame
 * that fits less than this share of the recent frames' inlier fraction, and
 * taken when it fits more than the frame by this much. */
#define KR_POLICY_SECOND_OPINION_SHARE 0.8f
#define KR_POLICY_SECOND_OPINION_GAIN 0.05f

/* kr_pipeline_stats' loss counters. */
typedef struct {
    uint64_t losses;            /* losses begun */
    uint64_t losses_ended;      /* ... over again (recovered, or tracking GOOD again) */
    uint64_t losses_ended_fast; /* ... within KR_POLICY_QUICK_FRAMES frames with depth */
    uint64_t recoveries;        /* recovery answers taken for a loss */
    uint64_t recovery_failures; /* recovery attempts for a loss that did not succeed */
} kr_policy_counts;

typedef struct {
    kr_track_config track; /* the gates */
    int after_poor;        /* this many POOR frames in a row count as lost (0 = never) */
    bool recover;          /* the recovery search, the basin check and second opinions are on */

    /* Motion history for the constant-velocity seed: the last trusted pose
     * (its time bounds how far the camera can have moved since). */
    kr_pose last_pose, velocity;
    double last_pose_time;
    bool have_pose;
    bool previous_trusted; /* the frame before this one was trusted: a velocity can be taken */
    /* Failure detection: the recent GOOD frames' figures, the current run
     * of POOR frames, and whether tracking is lost now. */
    kr_track_quality recent;
    int poor_run;
    bool lost;
    int lost_frames; /* frames with depth since the loss began */
    /* After a recovery into a view that overlaps the model only in part:
     * the inlier fraction a GOOD frame needs until the model covers the
     * view (0 = the track config's). */
    float partial_inlier;
    kr_policy_counts counts;
} kr_policy;

/* One frame on its way through the policy (kr_policy_begin). */
typedef struct {
    double stamp;
    kr_pose seed;          /* the constant-velocity prediction: tracking's seed */
    kr_track_config gates; /* the track config with the partial-overlap relaxation */
    bool from_last;        /* set by the caller: the basin check kept the tracking from the
                              last trusted pose, so the motion check measures from there */
    bool first;            /* no model yet (kr_policy_first_frame) */
} kr_policy_frame;

/* What kr_policy_watch saw. */
typedef struct {
    bool began;   /* a loss begins at this frame: publish `lost` */
    bool recover; /* ask the recovery search (KR_RECOVER_FOR_LOSS) */
} kr_policy_loss;

/* What becomes of the frame (kr_policy_accept). */
typedef struct {
    bool fuse;    /* fuse it into the model */
    bool trusted; /* a GOOD frame, not a recovered one: fit to become a keyframe */
} kr_policy_outcome;

void kr_policy_init(kr_policy *pol, const kr_track_config *tc, const kr_recover_config *rc);
/* Constant-velocity prediction: T_k = T_{k−1} · (T_{k−2}⁻¹ T_{k−1}). */
kr_pose kr_policy_predict(const kr_policy *pol);
kr_policy_frame kr_policy_begin(const kr_policy *pol, double stamp);
/* The first frame, with no model to track against: GOOD at the seed, or
 * LOST there when r->valid_points is below the gates' min_points. */
void kr_policy_first_frame(kr_policy_frame *f, kr_frame_result *r);
/* Whether a tracking from the seed should go through kr_recover_basin_check. */
bool kr_policy_basin_check_due(const kr_policy *pol);
/* Judges r->track (tracked from f->seed, or the last pose with f->from_last):
 * the verdict only ever worsens; r->tracked keeps it; a LOST frame publishes
 * the seed. */
void kr_policy_judge(const kr_policy *pol, const kr_policy_frame *f, kr_frame_result *r);
bool kr_policy_second_opinion_due(const kr_policy *pol, const kr_policy_frame *f,
                                  const kr_frame_result *r);
/* Takes a second opinion into r when it succeeded and fits clearly more. */
bool kr_policy_second_opinion(const kr_recover_answer *answer, kr_frame_result *r);
/* Whether tracking is lost at this frame (r judged): counts losses begun
 * and ended, and says whether to recover. */
kr_policy_loss kr_policy_watch(kr_policy *pol, const kr_frame_result *r);
/* A recovery's answer for a loss: counted; when it succeeded, it is the
 * frame's result and the loss is over (true: publish `recovered`). */
bool kr_policy_recovered(kr_policy *pol, const kr_policy_frame *f, const kr_recover_answer *answer,
                         kr_frame_result *r);
/* The frame's end: the published pose and state in r, the motion model and
 * the recent figures updated, and whether it is fused. */
kr_policy_outcome kr_policy_accept(kr_policy *pol, const kr_policy_frame *f, kr_frame_result *r);

#endif
