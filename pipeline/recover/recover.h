/* Recovery from tracking loss (DESIGN.md §5): align the frame to the model
 * with a wide basin of convergence — a wide-basin Newton search over seeds
 * scored cheaply on a probe of the coarse level (the prediction, the last
 * good pose, rotations about axes spread over the sphere), or EM-ICP /
 * Softassign on voxel-subsampled points first — and keep a result only when
 * Newton tracking from it passes the quality gates and the free-space check
 * (recover_verify.h). */
#ifndef KINREG_PIPELINE_RECOVER_RECOVER_H
#define KINREG_PIPELINE_RECOVER_RECOVER_H

#include <stdbool.h>

#include "kinreg/pipeline.h"

typedef struct {
    bool success; /* tracking from the aligned pose was GOOD */
    kr_track_result
        track;        /* that tracking result (pose, figures); the last attempt's when failed */
    kr_method method; /* how the coarse alignment was made */
    int hypothesis;   /* the seed that succeeded: 0 = the last good pose */
    int attempts;     /* seeds tried */
} kr_recovery;

/* Seed h of the search: h = 0 the last good pose, then rotations about the
 * camera's centre by half and all of `angle_rad` (then 1.5 times, ...) about
 * `axes` axes spread evenly over the sphere, h = 1 .. axes the first shell. */
kr_pose kr_recover_hypothesis(const kr_pose *last_good, int h, int axes, double angle_rad);

/* The model's points near the last good pose (camera frame, subsampled),
 * kept across the attempts of one loss: while the model tree (its serial)
 * and the last good pose stay the same, so do they. Zero-initialise; free
 * with kr_recover_cache_free. */
typedef struct {
    unsigned long long tree_serial; /* 0: empty */
    kr_pose last_good;
    double radius;
    size_t max_points;
    float *points;
    size_t n;
    /* A loss waiting for a better view (kr_recover_frame): the near miss
     * tracked on from frame to frame, for the loss whose last good pose is
     * wait_from, and the attempts since the last full search. */
    bool waiting;
    int waits;
    kr_pose wait_pose, wait_from;
} kr_recover_cache;

void kr_recover_cache_free(kr_recover_cache *cache);

/* While a loss waits on a near miss, the whole search runs again after this
 * many attempts that only tracked the near miss on (pipeline/recover/recover.c). */
#define KR_RECOVER_WAIT_FULL_EVERY 8

/* Recovers the frame `pyr` against `model`; `predicted` is the motion
 * model's seed for the frame (the last good pose when the motion is unknown). `recent` carries the
 * recent GOOD frames' figures (recent_inlier, recent_rms) for the final check; the motion check is
 * not applied (the camera may have jumped). Never fails on bad geometry: an unrecoverable frame is
 * success = false. `cache` (may be NULL) keeps the model's points for the
 * next attempt of the same loss, and a near miss to wait on. */
kr_status kr_recover_frame(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                           const kr_pose *predicted, const kr_pose *last_good,
                           const kr_recover_config *rc, const kr_track_config *tc,
                           const kr_track_quality *recent, kr_recover_cache *cache,
                           kr_recovery *out);

/* A departure from the prediction beyond this asks for the second seed: at
 * 30 frames/s a hand's motion departs by millimetres; at every 8th frame of
 * TUM fr1/xyz, where the camera turns back, by 5-25 cm. */
#define KR_BASIN_DEPARTURE_M 0.03
#define KR_BASIN_DEPARTURE_DEG 3.0

/* The basin check of a fast camera: when Newton tracking from the
 * constant-velocity prediction failed, or ended more than 3 cm or 3 degrees
 * from it (the camera turned back, or the solution slid along a wall),
 * tracks again from the last trusted pose; `io` (the result from the
 * prediction) becomes the one of the two with more inliers, and `from_last`
 * says it came from the last pose. A slow camera costs nothing (two pose
 * comparisons). */
kr_status kr_recover_basin_check(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                                 const kr_pose *predicted, const kr_pose *last_pose,
                                 const kr_track_config *tc, kr_track_result *io, bool *from_last);

#endif
