/* The synthetic camera's handheld-like trajectory: a slow sweep along an arc
 * around the scene centre, always looking at it, plus small smooth wobbles of
 * position and orientation (sums of sinusoids with seeded phases). */
#ifndef KINREG_CAPTURE_SYNTHETIC_PATH_H
#define KINREG_CAPTURE_SYNTHETIC_PATH_H

#include <stdint.h>

#include "kinreg/pose.h"

typedef struct {
    double amp, omega, phase; /* amp · sin(omega·t + phase) */
} kr_synth_wave;

typedef struct {
    double centre[3]; /* look-at point and orbit centre (world, z up) */
    double azimuth0, radius0, height0;
    kr_synth_wave azimuth[2]; /* radians */
    kr_synth_wave radius, height;
    kr_synth_wave shake[3][2]; /* handheld position wobble, metres, per axis */
    kr_synth_wave look[3];     /* wander of the look-at point, metres */
    kr_synth_wave tilt[3][2];  /* rotation wobble about camera x, y, z, radians */
} kr_synth_path;

void kr_synth_path_init(kr_synth_path *path, uint64_t seed, const double centre[3]);
/* Camera-to-world pose at time t (seconds); camera x right, y down, z forward. */
kr_pose kr_synth_path_pose(const kr_synth_path *path, double t);

#endif
