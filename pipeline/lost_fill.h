/* Filling in lost stretches once the run has ended.
 *
 * A LOST frame publishes the prediction (on a covered sensor, the last good
 * pose): while the loss lasts nothing better is known. Once a recovery ends
 * it, the frames in between can be placed after all. Their neighbour on the
 * far side now has a pose, and the frames with depth overlap that
 * neighbour's view as much as any consecutive frames do.
 *
 * So the pipeline keeps the depth of its LOST frames (a bounded number; the
 * oldest go first), and at the end of the run each stretch that a known pose
 * ended is tracked backwards against the final model: from the pose that
 * ended it, each frame seeded by the one after it and judged by the state
 * machine's gates, its motion checked over the time between the two. The
 * final model serves better than the one the loss saw: it holds the frames
 * fused after the recovery, which see what the lost frames saw.
 *
 * Frames without depth (a covered sensor) between two known poses are
 * interpolated in time, when the camera can have moved from one to the
 * other in that time. What cannot be placed keeps its published pose.
 *
 * The published poses and the trajectory file stay as they were: the filled
 * trajectory is a product of the run's end (--trajectory-final, and the
 * topic `final` for subscribers), like the refined one. */
#ifndef KINREG_PIPELINE_LOST_FILL_H
#define KINREG_PIPELINE_LOST_FILL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/device.h"
#include "kinreg/frame.h"
#include "kinreg/kdtree.h"
#include "kinreg/preprocess.h"
#include "kinreg/track.h"
#include "kinreg/trajectory.h"

/* How kr_lost_fill placed a frame. */
typedef enum {
    KR_LOST_KEPT = 0,     /* not placed: it keeps its published pose */
    KR_LOST_TRACKED,      /* tracked backwards */
    KR_LOST_INTERPOLATED, /* covered, between two known poses */
} kr_lost_placement;

typedef struct {
    size_t index;   /* the frame's position in the run's trajectory */
    kr_frame frame; /* its depth (owned); raw NULL once dropped or when covered */
    bool covered;   /* too little depth to track: nothing was kept */
    /* Set by kr_lost_fill: how the frame was placed and, when tracked, the
     * tracking that placed it (for the `final` messages' figures). */
    kr_lost_placement placed;
    kr_track_result track;
} kr_lost_frame;

typedef struct {
    size_t max_depth;      /* frames with depth kept at most */
    kr_lost_frame *frames; /* every LOST frame, by index */
    size_t count, capacity;
    size_t with_depth; /* frames whose depth is held now */
    size_t oldest;     /* no frame before this one holds depth */
    uint64_t dropped;  /* depth dropped to stay within max_depth */
} kr_lost_keep;

typedef struct {
    uint64_t tracked;      /* placed by tracking backwards */
    uint64_t interpolated; /* covered frames placed between two known poses */
} kr_lost_fill_counts;

void kr_lost_keep_init(kr_lost_keep *k, size_t max_depth);
/* Records the LOST frame at trajectory position `index`. With depth, the
 * frame's samples move into the keep (frame->raw becomes NULL); the oldest
 * frame's depth is dropped beyond max_depth. Fails only out of memory. */
kr_status kr_lost_keep_add(kr_lost_keep *k, size_t index, kr_frame *frame, bool has_depth);
void kr_lost_keep_free(kr_lost_keep *k);

/* Fills in `traj` (the run's trajectory, every frame's pose) where the keep
 * allows, as described above. `pyr` is scratch for the frames' clouds;
 * `max_elapsed_s` caps the time the motion check allows a step (the
 * pipeline's own cap). Once `cancel` (may be NULL) is set, no further frame
 * is tracked: what was placed stays. Each frame's `placed` (and `track`)
 * says what was done with it. Errors are the device's or out of
 * memory; frames that cannot be placed are not an error. */
kr_status kr_lost_fill(kr_lost_keep *k, kr_device *dev, const kr_kdtree *model,
                       const kr_preprocess_config *pc, const kr_intrinsics *K,
                       const kr_track_config *tc, double max_elapsed_s, const atomic_bool *cancel,
                       kr_pyramid *pyr, kr_trajectory *traj, kr_lost_fill_counts *counts);

#endif
