/* The tracker's side of the live refiner (kinreg/pipeline.h,
 * kr_live_refine_config): chooses keyframes, posts windows of them to the
 * refiner thread, applies finished refinements, publishes refined keyframe
 * poses on `refine`, and corrects frames by their keyframe's refined motion.
 * Runs on the tracker thread only. */
#ifndef KINREG_PIPELINE_LIVE_REFINE_H
#define KINREG_PIPELINE_LIVE_REFINE_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>

#include "pipeline/refine/keyframes.h"
#include "kinreg/model.h"
#include "kinreg/pipeline.h"
#include "pipeline/outbox.h"
#include "pipeline/refine/refiner.h"

typedef struct {
    kr_live_refine_config cfg;
    kr_refiner *refiner;
    kr_device *device; /* the refiner thread's engine (owned) */
    kr_keyframes kf;   /* poses: the current best (refined, or corrected by the newest refined) */
    kr_pose *tracked;  /* per keyframe: its pose as tracked */
    double *stamps;    /* per keyframe: its frame's timestamp */
    int capacity;
    int since_post; /* keyframes after the last posted window's end */
    int refined_to; /* keyframes [0, refined_to) are in windows posted so far */
    int *anchor;    /* per frame: its keyframe (the newest at that frame), -1 before any */
    size_t frames, frames_cap;
    uint64_t refinements, failures;
    uint64_t corrections; /* refinements that moved keyframes by min_correction or more */
    double last_moved;    /* the largest keyframe move of the last refinement, m */
    double last_ms;
    /* Re-fusion: per keyframe, its points that have normals (a cloud of
     * width n, height 1), kept for the newest KR_LIVE_REFINE_REFUSE_KEYFRAMES
     * keyframes only; refuse_due when a refinement moved keyframes by
     * cfg.refuse_distance or more. */
    kr_cloud *surfels;
    bool refuse_due;
    uint64_t refusions;
    bool in_step; /* deterministic runs: each window is refined before the next frame */
    atomic_bool interrupted; /* kr_live_refine_interrupt: no window is started any more */
} kr_live_refine;

/* Starts the refiner thread with an engine of `backend` (the tracker's).
 * `in_step` (kr_pipeline_config.deterministic): the tracker waits for each
 * window it posts, so which frames are corrected by which refinement does
 * not depend on timing; otherwise it never waits. */
kr_status kr_live_refine_init(kr_live_refine *lr, const kr_live_refine_config *cfg,
                              kr_backend backend, int cuda_device, bool in_step);
/* Stops the thread (finishing a job in flight, its result dropped) and frees. */
void kr_live_refine_free(kr_live_refine *lr);

/* After a frame is tracked: takes a finished refinement (publishing its
 * poses to `box`), makes the frame a keyframe when due (`good`: tracking was
 * GOOD; `cloud`: its camera-frame points), posts the next window when due
 * and the refiner is idle, and returns the frame's refined pose. */
kr_status kr_live_refine_frame(kr_live_refine *lr, kr_outbox *box, uint64_t frame, double stamp,
                               const kr_pose *tracked, bool good, const kr_cloud *cloud,
                               kr_pose *refined);

/* When a refinement has made it due (refuse_due): rebuilds `model` from the
 * newest keyframes' points at their refined poses, expressed in the
 * tracker's frame (see live_refine.c), stamped `frame`. The caller is the
 * thread that integrates into `model`, with no fusion in flight. */
kr_status kr_live_refine_refuse(kr_live_refine *lr, kr_model *model, uint64_t frame);

/* At shutdown: waits for the window in flight and applies it; with `final`
 * (the source ended), refines the windows still due, in order, until every
 * keyframe has been in one, and applies them too. After
 * kr_live_refine_interrupt, the window in flight ends at once and no other
 * is started: those keyframes keep their tracked poses. */
kr_status kr_live_refine_finish(kr_live_refine *lr, kr_outbox *box, bool final);

/* A stop: the refinement in flight, and any later, ends now (any thread). */
void kr_live_refine_interrupt(kr_live_refine *lr);

/* Every frame's refined pose from the tracked trajectory (one pose per frame,
 * in the order kr_live_refine_frame saw them; it may lack the last) into
 * *out (appended). */
kr_status kr_live_refine_trajectory(const kr_live_refine *lr, const kr_trajectory *tracked,
                                    kr_trajectory *out);

/* Defaults of kr_live_refine_config. */
void kr_live_refine_config_default(kr_live_refine_config *cfg);

#endif
