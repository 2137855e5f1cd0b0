/* kinreg — the organised point clouds that preprocessing makes from a depth
 * frame, one per pyramid level: plain data that tracking, fusion and both
 * compute engines read (kinreg/preprocess.h fills them). */
#ifndef KINREG_PYRAMID_H
#define KINREG_PYRAMID_H

#include <stdbool.h>
#include <stddef.h>

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
    int valid_points;  /* pixels with a point */
    int valid_normals; /* pixels with a point and a normal */
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
    /* Set by the CUDA engine of kr_preprocess (0 otherwise): the levels are
     * also on that device, and the device tracker reads them there instead
     * of uploading them again while its context holds the same stamp. */
    unsigned long long device_stamp;
} kr_pyramid;

/* Widest normal baseline, in pixels either side (kr_preprocess_config). */
#define KR_NORMAL_MAX_REACH 8

#ifdef __cplusplus
}
#endif
#endif
