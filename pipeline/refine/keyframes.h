/* Internal: the keyframes a refiner works on (DESIGN.md §2, §5). A frame
 * becomes a keyframe when tracking was good and the camera moved far enough
 * (distance or angle) since the last keyframe; each keeps its points,
 * subsampled, in its own camera frame, and its current pose. The live
 * refiner (pipeline/) and `kinreg refine` over depth sequences build on it. */
#ifndef KINREG_PIPELINE_REFINE_KEYFRAMES_H
#define KINREG_PIPELINE_REFINE_KEYFRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/device.h"
#include "kinreg/pose.h"
#include "kinreg/refine.h"

typedef struct {
    double min_translation; /* metres since the last keyframe (default 0.10) */
    double min_angle;       /* radians since the last keyframe (default 10°) */
    size_t max_points;      /* points kept per keyframe, evenly strided (default 20000) */
} kr_keyframes_config;

typedef struct {
    uint64_t frame; /* the frame's index in its sequence */
    kr_pose pose;   /* T_world_camera, refined in place */
    float *xyz;     /* points, camera frame */
    size_t n;
} kr_keyframe;

typedef struct {
    kr_keyframes_config cfg;
    kr_keyframe *items;
    int n, capacity;
} kr_keyframes;

void kr_keyframes_config_default(kr_keyframes_config *cfg);
void kr_keyframes_init(kr_keyframes *kf, const kr_keyframes_config *cfg);
void kr_keyframes_free(kr_keyframes *kf);

/* Should the frame tracked at `pose` become a keyframe? Always the first
 * one; never while tracking is poor; else when it moved far enough. */
bool kr_keyframes_due(const kr_keyframes *kf, const kr_pose *pose, bool tracking_good);

/* Adds a keyframe from n camera-frame points (3 floats each); points with a
 * non-finite coordinate or z <= 0 (no depth) are dropped. */
kr_status kr_keyframes_add(kr_keyframes *kf, uint64_t frame, const kr_pose *pose, const float *xyz,
                           size_t n);

/* Refines the poses of keyframes [first, first + count) jointly (the first
 * of them is the gauge) and writes them back. */
kr_status kr_keyframes_refine(kr_keyframes *kf, int first, int count, const kr_refine_config *cfg,
                              kr_device *dev, kr_refine_result *result);

#endif
