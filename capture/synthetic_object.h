/* Synthetic range views of a bumpy closed object, for refinement tests and
 * benchmarks: each view keeps the surface points facing its camera, in the
 * camera's own frame, with the exact pose T_world_camera. */
#ifndef KINREG_CAPTURE_SYNTHETIC_OBJECT_H
#define KINREG_CAPTURE_SYNTHETIC_OBJECT_H

#include <stddef.h>

#include "kinreg/pose.h"
#include "kinreg/status.h"

/* n_views cameras on a slanted ring 0.5 m around an object of radius about
 * 0.1 m; about `density` surface samples over the whole object (each view
 * keeps the third or so that faces it). xyz[k] is malloc'd (3 floats per
 * point, free each); poses[k] the exact camera-to-world pose. */
kr_status kr_synthetic_object_views(int n_views, size_t density, float **xyz, size_t *n,
                                    kr_pose *poses);

#endif
