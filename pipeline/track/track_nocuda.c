/* Tracking on a device, in a build without CUDA: unreachable through
 * kr_track_frame_on (no CUDA kr_device can exist), answered for completeness. */
#include "pipeline/track/track_cuda.h"

#define KR_TRACK_NOCUDA                                                                            \
    kr_error(                                                                                      \
        KR_ERR_NO_DEVICE,                                                                          \
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu")

kr_status kr_track_cuda(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_pyramid *pyr,
                        const kr_track_step_plan *plan, const kr_pose *seeds, int count,
                        kr_track_step_result *out)
{
    (void)ctx;
    (void)tree;
    (void)pyr;
    (void)plan;
    (void)seeds;
    (void)count;
    (void)out;
    return KR_TRACK_NOCUDA;
}

kr_status kr_track_cuda_linearize(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_cloud *cloud,
                                  const kr_pose *pose, const kr_track_point_params *P,
                                  kr_track_step_result *out)
{
    (void)ctx;
    (void)tree;
    (void)cloud;
    (void)pose;
    (void)P;
    (void)out;
    return KR_TRACK_NOCUDA;
}

kr_status kr_track_cuda_linearize_level(kr_gpu_context *ctx, const kr_kdtree *tree,
                                        const kr_pyramid *pyr, int level, const kr_pose *pose,
                                        const kr_track_point_params *P, kr_track_step_result *out)
{
    (void)ctx;
    (void)tree;
    (void)pyr;
    (void)level;
    (void)pose;
    (void)P;
    (void)out;
    return KR_TRACK_NOCUDA;
}

kr_status kr_track_cuda_descend(kr_gpu_context *ctx, const kr_kdtree *tree, const float *q,
                                size_t n, uint32_t *cells)
{
    (void)ctx;
    (void)tree;
    (void)q;
    (void)n;
    (void)cells;
    return KR_TRACK_NOCUDA;
}

kr_status kr_track_cuda_tree_download(kr_gpu_context *ctx, const kr_kdtree *tree,
                                      kr_kdtree_node *nodes, kr_kdtree_cell *cells)
{
    (void)ctx;
    (void)tree;
    (void)nodes;
    (void)cells;
    return KR_TRACK_NOCUDA;
}
