/* kinreg — preprocessing: raw depth → metres → organised points, normals, and a
 * pyramid for coarse-to-fine tracking. CPU (OpenMP) and CUDA give the same
 * result within float rounding (tests/test_parity_preprocess.c). */
#ifndef KINREG_PREPROCESS_H
#define KINREG_PREPROCESS_H

#include "kinreg/device.h"
#include "kinreg/frame.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KR_MAX_LEVELS 5

/* One organised level in camera coordinates (metres), host memory.
 * points/normals hold 3 floats per pixel, row-major; an invalid point has
 * x = NaN, a point without a normal has normal x = NaN. */
typedef struct {
    int width, height;
    kr_intrinsics intrinsics; /* scaled to this level */
    float *points;
    float *normals;
    int valid_points;         /* pixels with a point */
    int valid_normals;        /* pixels with a point and a normal */
} kr_cloud;

/* Level 0 is the input resolution; level l+1 halves width and height
 * (rounding down). Start from a zeroed kr_pyramid ({0}); kr_preprocess
 * allocates on first use and reuses the buffers while the shape repeats;
 * kr_pyramid_free releases them. */
typedef struct {
    int levels;
    kr_cloud level[KR_MAX_LEVELS];
    /* Owned by kr_preprocess: one block backs every level's points and
     * normals; page-locked when a CUDA device filled it (fast downloads). */
    void *storage;
    size_t storage_bytes;
    bool storage_pinned;
    /* Owned by kr_preprocess, CPU engine and lenses with distortion only
     * (NULL otherwise): each level's undistorted normalised ray (x, y) per
     * pixel, 2 floats per pixel, row-major, levels in order in one block —
     * undistortion done once instead of per pixel per frame. Built for the
     * level-0 intrinsics `rays_intrinsics` and `rays_levels` levels; rebuilt
     * when either changes, reallocated only when its size does. */
    float *rays;
    size_t rays_bytes;
    int rays_levels;
    kr_intrinsics rays_intrinsics;
} kr_pyramid;

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

/* Widest normal baseline, in pixels either side (kr_preprocess_config). */
#define KR_NORMAL_MAX_REACH 8

KR_API void kr_preprocess_config_default(kr_preprocess_config *cfg);

/* Fills `out` (allocating or reusing its buffers) from one frame. Runs on the
 * device's backend: OpenMP on the CPU, kernels on the GPU (then downloads).
 * cfg NULL means the defaults. Errors: KR_ERR_INVALID_ARG (NULL or bad
 * settings), KR_ERR_SIZE (frame and intrinsics sizes differ, or too small for
 * the levels), KR_ERR_NOMEM, KR_ERR_CUDA; `out` is then left as it was. */
KR_API kr_status kr_preprocess(kr_device *dev, const kr_preprocess_config *cfg, const kr_frame *frame,
                               const kr_intrinsics *intrinsics, kr_pyramid *out);
KR_API void kr_pyramid_free(kr_pyramid *pyr);

/* Intrinsics of pyramid level `level` derived from level 0. */
KR_API kr_intrinsics kr_intrinsics_level(const kr_intrinsics *k, int level);

#ifdef __cplusplus
}
#endif
#endif
