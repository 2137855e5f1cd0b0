/* Free-space check of a recovered pose: where the model lies in front of
 * what the frame sees, the frame's rays would pass through the model's
 * surfaces — the pose is wrong. A view that jumped overlaps the model only
 * in part, so its inlier fraction alone cannot tell a right pose with little
 * overlap from a wrong one that fits a wall; this check can, because it
 * judges only the pixels where the model is. */
#ifndef KINREG_PIPELINE_RECOVER_RECOVER_VERIFY_H
#define KINREG_PIPELINE_RECOVER_RECOVER_VERIFY_H

#include "kinreg/kdtree.h"
#include "kinreg/pose.h"
#include "kinreg/preprocess.h"

typedef struct {
    int compared;   /* pixels where both the frame and the model have a depth */
    int agree;      /* ... where they agree within the margin */
    int violations; /* ... where the frame sees farther than the model's surface by the margin */
} kr_free_space;

/* Projects (at most max_points of) the model's points into the organised
 * level `cloud` (its intrinsics) seen from `pose` (camera to world), keeps
 * the nearest per pixel, and compares it with the frame's depth there. The
 * margin is margin_m plus three depth steps at the pixel's depth
 * (depth_step·z², 1/m). KR_ERR_INVALID_ARG for NULL arguments or an
 * unorganised cloud; KR_ERR_NOMEM. */
kr_status kr_recover_free_space(const kr_kdtree *model, const kr_cloud *cloud, const kr_pose *pose,
                                size_t max_points, double margin_m, double depth_step,
                                kr_free_space *out);

#endif
