/* kinreg — TUM-format trajectories: `timestamp tx ty tz qx qy qz qw` per line,
 * camera-to-world, '#' starts a comment. */
#ifndef KINREG_TRAJECTORY_H
#define KINREG_TRAJECTORY_H

#include <stddef.h>

#include "kinreg/pose.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    size_t count, capacity;
    double *stamps;
    kr_pose *poses;
} kr_trajectory;

/* Appends one pose (grows the arrays). */
KR_API kr_status kr_trajectory_push(kr_trajectory *traj, double stamp, const kr_pose *pose);
/* Reads a TUM file; errors name the file and line. On error *traj is untouched;
 * on success its previous contents (it must be {0} or a trajectory) are freed
 * and replaced. Quaternions are normalised; one far from unit norm is an error. */
KR_API kr_status kr_trajectory_read_tum(const char *path, kr_trajectory *traj);
KR_API kr_status kr_trajectory_write_tum(const char *path, const kr_trajectory *traj);
/* One TUM line (no newline) into buf. */
KR_API void kr_trajectory_format_line(double stamp, const kr_pose *pose, char *buf, size_t size);
/* Bounded history: once count reaches 2·keep, drops all but the last `keep`
 * poses (amortised O(1) per pose; keep = 0 does nothing). */
KR_API void kr_trajectory_keep_last(kr_trajectory *traj, size_t keep);
KR_API void kr_trajectory_free(kr_trajectory *traj);

#ifdef __cplusplus
}
#endif
#endif
