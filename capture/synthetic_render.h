/* Ray casting of the synthetic scene through a Kinect v1 sensor model:
 * true depth → 11-bit disparity with Gaussian noise (so depth noise grows
 * with z²), integer quantisation, and missing returns at grazing incidence,
 * outside the sensor's range and at random dropouts. */
#ifndef KINREG_CAPTURE_SYNTHETIC_RENDER_H
#define KINREG_CAPTURE_SYNTHETIC_RENDER_H

#include <stdint.h>

#include "capture/synthetic_scene.h"
#include "kinreg/frame.h"
#include "kinreg/pose.h"

#define KR_SYNTH_GAUSS_N 4096 /* fits in L1 cache; indexed by random bits per pixel */

typedef struct {
    float sigma;   /* disparity noise, disparity units (default 0.5) */
    float min_z;   /* closer returns are missing (default 0.5 m) */
    float max_z;   /* farther returns are missing (default 5 m) */
    float min_cos; /* returns at cos(incidence) below this are missing (default 0.15) */
    float dropout; /* probability of a random missing pixel (default 0.003) */
} kr_synth_sensor;

typedef struct {
    kr_synth_sensor sensor;
    int threads;                   /* OpenMP threads for one frame, 1 or 2 */
    float gauss[KR_SYNTH_GAUSS_N]; /* standard normal samples: exact mean 0, variance 1 */
} kr_synth_renderer;

void kr_synth_renderer_init(kr_synth_renderer *r, uint64_t seed);

/* Renders the scene seen from camera-to-world pose T_wc into `out`
 * (K->width × K->height disparities, KR_DISPARITY_INVALID where missing)
 * and, when `rgb` is not NULL, each pixel's surface colour into it (3 bytes
 * a pixel, kr_synth_colour; registered to the depth: the same rays).
 * The noise is a pure function of (noise_seed, pixel), independent of the
 * thread count. */
void kr_synth_render(const kr_synth_renderer *r, const kr_synth_scene *scene, const kr_pose *T_wc,
                     const kr_intrinsics *K, uint64_t noise_seed, uint16_t *out, uint8_t *rgb);

#endif
