/* A synthetic long scan: a depth camera that circles inside a room whose
 * walls, floor and ceiling carry smooth bumps, seen from hundreds of poses
 * with the exact ground truth — the benchmark input of distributed
 * refinement (kinreg refine --synthetic room:N). Each view overlaps only its
 * neighbours along the loop, so the normal equations are block-sparse. */
#ifndef KINREG_CAPTURE_SYNTHETIC_ROOM_H
#define KINREG_CAPTURE_SYNTHETIC_ROOM_H

#include <stddef.h>

#include "kinreg/pose.h"
#include "kinreg/status.h"

/* The room is 4 × 3 × 2.5 m (x, y, z up, floor at z = 0); the camera (60°
 * horizontal field of view, width × height pixels, depth along +z of its
 * frame) moves once around a loop of about 0.7 m radius at 1.2–1.4 m height,
 * looking outward with a slow yaw and pitch wobble. View k is a ray-cast depth
 * image turned into points in the camera frame: xyz[k] (malloc'd, 3 floats
 * per point, n[k] points; free each) and poses[k] = T_world_camera exactly.
 * noise_m > 0 adds seeded Gaussian noise of that standard deviation along
 * each ray. */
kr_status kr_synthetic_room_views(int n_views, int width, int height, double noise_m, unsigned seed,
                                  float **xyz, size_t *n, kr_pose *poses);

#endif
