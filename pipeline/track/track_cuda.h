/* The CUDA twin of tracking (pipeline/track/track_cuda.cu), seen from plain
 * C: the twin of track.c + newton.c, with the same per-point math
 * (newton_kernels.h) and step (track_step.h). Builds without CUDA answer
 * KR_ERR_NO_DEVICE (track_nocuda.c). */
#ifndef KINREG_PIPELINE_TRACK_TRACK_CUDA_H
#define KINREG_PIPELINE_TRACK_TRACK_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "core/kdtree_layout.h"
#include "gpu/engine.h"
#include "kinreg/pyramid.h"
#include "pipeline/track/track_step.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole coarse-to-fine Newton loop of one frame — descent, per-point
 * terms, block sums in double, the 6×6 solve, the Armijo line search,
 * convergence tests — with the pose kept on the device and only the result
 * copied back. The tree is uploaded when it is not the one already there
 * (kr_kdtree serial); the pyramid's levels are read where kr_preprocess_cuda
 * left them when pyr->device_stamp says so, else uploaded. `count` seeds of
 * the same pyramid and plan (1 to KR_TRACK_CUDA_MAX_SEEDS) run side by side in
 * one launch, out[k] from seeds[k]. */
#define KR_TRACK_CUDA_MAX_SEEDS 256
kr_status kr_track_cuda(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_pyramid *pyr,
                        const kr_track_step_plan *plan, const kr_pose *seeds, int count,
                        kr_track_step_result *out);

/* Parity entry points: one linearisation of `cloud` at `pose` (out gets
 * F, g, h, residual, points, inliers; the pose and centroid fields are not
 * set), the descent cells of n query points (3 floats each), and the device
 * copy of the tree's nodes and cells (as many as the tree has). */
kr_status kr_track_cuda_linearize(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_cloud *cloud,
                                  const kr_pose *pose, const kr_track_point_params *P,
                                  kr_track_step_result *out);
/* The same for level `level` of a pyramid (read where kr_preprocess_cuda
 * left it when pyr->device_stamp says so, else uploaded). */
kr_status kr_track_cuda_linearize_level(kr_gpu_context *ctx, const kr_kdtree *tree,
                                        const kr_pyramid *pyr, int level, const kr_pose *pose,
                                        const kr_track_point_params *P, kr_track_step_result *out);
kr_status kr_track_cuda_descend(kr_gpu_context *ctx, const kr_kdtree *tree, const float *q,
                                size_t n, uint32_t *cells);
kr_status kr_track_cuda_tree_download(kr_gpu_context *ctx, const kr_kdtree *tree,
                                      kr_kdtree_node *nodes, kr_kdtree_cell *cells);

#ifdef __cplusplus
}
#endif
#endif
