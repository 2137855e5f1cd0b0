/* kinreg — preprocessing: raw depth → metres → organised points, normals, and a
 * pyramid for coarse-to-fine tracking. CPU (OpenMP) and CUDA give the same
 * result within float rounding (tests/test_parity_preprocess.c). */
#ifndef KINREG_PREPROCESS_H
#define KINREG_PREPROCESS_H

#include "kinreg/device.h"
#include "kinreg/frame.h"
#include "kinreg/pyramid.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int levels;                 /* default 3 */
    float min_depth, max_depth; /* metres, default 0.3 and 6.0 */
    /* Normals are rejected when a neighbour's depth differs from the centre's
     * by more than discontinuity·z (default 0.04) — across depth edges. */
    float discontinuity;
    /* The sensor's depth step at depth z is depth_step·z² (1/m; default
     * 0.0030711016, the Kinect v1's −KR_DISPARITY_B: 2.2 cm at 2.7 m; 0 = none).
     * Normals take the neighbours k pixels away, with k the smallest
     * (1 … KR_NORMAL_MAX_REACH) for which one step across the 2k-pixel
     * baseline tilts the normal by less than 45°: k = ⌊depth_step·z·fx/2⌋ + 1
     * with the level's fx. Farther points thus get a wider baseline, and
     * normals that are not noise from depth quantisation. */
    float depth_step;
} kr_preprocess_config;

KR_API void kr_preprocess_config_default(kr_preprocess_config *cfg);

/* Fills `out` (allocating or reusing its buffers) from one frame. Runs on the
 * device's backend: OpenMP on the CPU, kernels on the GPU (then downloads).
 * cfg NULL means the defaults. Errors: KR_ERR_INVALID_ARG (NULL or bad
 * settings), KR_ERR_SIZE (frame and intrinsics sizes differ, or too small for
 * the levels), KR_ERR_NOMEM, KR_ERR_CUDA; `out` is then left as it was. */
KR_API kr_status kr_preprocess(kr_device *dev, const kr_preprocess_config *cfg, const kr_frame *frame,
                               const kr_intrinsics *intrinsics, kr_pyramid *out);
KR_API void kr_pyramid_free(kr_pyramid *pyr);
/* Device time of the last kr_preprocess's transfers on a CUDA device (CUDA
 * events): the raw frame's upload and the pyramid's download, in ms; zeros on
 * the CPU or before any. */
KR_API void kr_preprocess_transfer_times(const kr_device *dev, double *upload_ms,
                                         double *download_ms);

/* Intrinsics of pyramid level `level` derived from level 0. */
KR_API kr_intrinsics kr_intrinsics_level(const kr_intrinsics *k, int level);

#ifdef __cplusplus
}
#endif
#endif
