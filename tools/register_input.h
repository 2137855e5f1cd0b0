/* The point sets `kinreg register` reads: PLY scans, or single depth frames
 * (a 16-bit PNG as TUM records them, a fakenect PGM of raw disparity) turned
 * into points in their camera's frame by the preprocessing every tracked
 * frame goes through (undistortion, filtering, the invalid pixels dropped). */
#ifndef KINREG_TOOLS_REGISTER_INPUT_H
#define KINREG_TOOLS_REGISTER_INPUT_H

#include <stddef.h>

#include "kinreg/frame.h"

/* Reads `path` by its extension: .png (depth / depth_scale metres, 0 = no
 * return) and .pgm (Kinect v1 disparity) need `K` (their size must be
 * K's); anything else is read as ASCII PLY. A new malloc'd array of 3·n
 * floats; errors name the file. */
kr_status kr_register_read_points(const char *path, const kr_intrinsics *K, float depth_scale,
                                  float **xyz, size_t *n);

#endif
