/* kinreg — plain data that flows between modules: intrinsics and depth frames. */
#ifndef KINREG_FRAME_H
#define KINREG_FRAME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pinhole intrinsics with optional Brown–Conrady lens distortion. Without
 * distortion x = (u − cx)·z/fx, y = (v − cy)·z/fy. With it, the pixel's
 * normalised coordinates ((u − cx)/fx, (v − cy)/fy) are the *distorted* ones
 * (k1, k2, k3 radial, p1, p2 tangential, as in OpenCV and the TUM RGB-D
 * calibration) and back-projection undistorts them first. All-zero
 * coefficients (the default) are the plain pinhole model. */
typedef struct {
    int width, height;
    float fx, fy, cx, cy;
    float k1, k2, p1, p2, k3;
} kr_intrinsics;

/* How the 16-bit samples of a frame become metres (DESIGN.md §5). */
typedef enum {
    KR_DEPTH_SCALED = 0,     /* z = value / depth_scale; 0 = no return (TUM: 5000, mm modes: 1000) */
    KR_DEPTH_DISPARITY11 = 1 /* raw Kinect v1 11-bit disparity d < 2047:
                                z = 1 / (3.3309495161 − 0.0030711016·d); 2047 = no return */
} kr_depth_encoding;

/* Constants of the Kinect v1 disparity model (metres). */
#define KR_DISPARITY_A 3.3309495161
#define KR_DISPARITY_B (-0.0030711016)
#define KR_DISPARITY_INVALID 2047

/* One depth image as a source delivers it. The frame owns `raw` (malloc'd,
 * width*height samples, row-major) and `rgb`; kr_frame_release() frees
 * both. Code that moves a frame's samples elsewhere moves its colour too
 * (or frees it) and sets both to NULL. */
typedef struct {
    uint64_t index;           /* 0-based position in the stream */
    double timestamp;         /* sensor or file timestamp, seconds */
    double capture_time;      /* monotonic clock (kr_now()) when the frame entered kinreg */
    int width, height;
    kr_depth_encoding encoding;
    float depth_scale;        /* units per metre for KR_DEPTH_SCALED */
    uint16_t *raw;
    uint8_t *rgb; /* the colour registered to the depth, 3 bytes a pixel
                     (width*height), when the source was asked for colour
                     (kr_source_config.colour) and has it; else NULL */
} kr_frame;

KR_API void kr_frame_release(kr_frame *frame);

/* Metres for one raw sample under an encoding; 0 means no return. */
static inline float kr_depth_to_metres(uint16_t v, kr_depth_encoding enc, float scale)
{
    if (enc == KR_DEPTH_DISPARITY11) {
        if (v >= KR_DISPARITY_INVALID) return 0.0f;
        double inv = KR_DISPARITY_A + KR_DISPARITY_B * (double)v;
        return inv > 0 ? (float)(1.0 / inv) : 0.0f;
    }
    return v ? (float)v / scale : 0.0f;
}

/* The inverse of the disparity model: the raw 11-bit sample whose depth is
 * nearest to z metres. Depths nearer than the model can express (z < 1/A,
 * about 0.30 m) and z <= 0 give KR_DISPARITY_INVALID; depths beyond the
 * model's far end (d = 1084, about 530 m) clamp to it. A round trip keeps
 * depth within half the local disparity step, 0.5·|B|·z² to first order
 * (1.5 mm at 1 m, 25 mm at 4 m). */
static inline uint16_t kr_metres_to_disparity(float z)
{
    const long far_end = 1084; /* the largest d with A + B·d > 0 */
    /* (float)(1/A) is what kr_depth_to_metres gives for d = 0: it must map back. */
    if (!(z >= (float)(1.0 / KR_DISPARITY_A))) return KR_DISPARITY_INVALID;
    double zz = z, d = (1.0 / zz - KR_DISPARITY_A) / KR_DISPARITY_B;
    long best = d > far_end ? far_end : (long)(d + 0.5);
    if (best < 0) best = 0;
    /* Rounding d is rounding inverse depth; depth grows faster than linearly
     * in d, so just above a midpoint the lower neighbour can be nearer. */
    double err = fabs(zz - 1.0 / (KR_DISPARITY_A + KR_DISPARITY_B * (double)best));
    for (long c = best - 1; c <= best + 1; c += 2) {
        if (c < 0 || c > far_end) continue;
        double e = fabs(zz - 1.0 / (KR_DISPARITY_A + KR_DISPARITY_B * (double)c));
        if (e < err) err = e, best = c;
    }
    return (uint16_t)best;
}

/* Monotonic clock in seconds. */
KR_API double kr_now(void);

#ifdef __cplusplus
}
#endif
#endif
