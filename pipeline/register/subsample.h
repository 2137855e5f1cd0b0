/* Voxel subsampling of a point list: one point per occupied voxel, the voxel
 * grown until at most a given number of points remain (recovery registers a
 * few thousand points of the frame and of the model, DESIGN.md §5). */
#ifndef KINREG_PIPELINE_REGISTER_SUBSAMPLE_H
#define KINREG_PIPELINE_REGISTER_SUBSAMPLE_H

#include <stddef.h>

#include "kinreg/status.h"

/* Keeps the first point of each occupied voxel of `points` (n × 3 floats,
 * NaN points skipped), in place, starting at voxel size `voxel` (m) and
 * growing it by half until at most max_points remain. Returns the count kept;
 * *voxel_used gets the size used (may be NULL). KR_ERR_NOMEM leaves the points
 * untouched. */
kr_status kr_voxel_subsample(float *points, size_t n, double voxel, size_t max_points, size_t *kept,
                             double *voxel_used);

#endif
