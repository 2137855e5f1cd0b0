/* Normals of an unorganised point set (a range scan, a keyframe's points) by
 * PCA over each point's nearest neighbours (core/normals_pca.h, the one PCA
 * of the project), found in a k-d tree of the points. */
#ifndef KINREG_CORE_NORMALS_H
#define KINREG_CORE_NORMALS_H

#include <stddef.h>

#include "kinreg/status.h"

/* Unit normals of the n points xyz[3i…3i+2] from their k nearest neighbours
 * (3 ≤ k ≤ KR_KDTREE_KNN_MAX), turned towards the origin of the points' frame
 * (where their sensor was); NaN where the neighbourhood is degenerate.
 * planes (may be NULL): each point moved along its normal onto the plane
 * through its neighbours' mean, which averages depth noise out (the point
 * itself where there is no normal). Points run on the OpenMP threads; inside
 * a parallel region of the caller's (one cloud per thread) they run serially. */
kr_status kr_normals_estimate(const float *xyz, size_t n, int k, float *normals, float *planes);

#endif
