/* Reading point positions from ASCII PLY files (the Stanford range scans:
 * `element vertex N` with float x y z and maybe more scalar properties,
 * followed by other elements such as a range_grid, which are skipped). */
#ifndef KINREG_CAPTURE_PLY_READ_H
#define KINREG_CAPTURE_PLY_READ_H

#include <stddef.h>

#include "kinreg/status.h"

/* Reads the x, y, z properties of every vertex into a new malloc'd array of
 * 3·n floats. Errors name the file and line: KR_ERR_IO (cannot open or read),
 * KR_ERR_FORMAT (not a PLY, malformed header or data, no x/y/z, too few
 * vertices, non-finite values), KR_ERR_UNSUPPORTED (binary PLY, list
 * properties in the vertex element). On error the outputs are untouched. */
kr_status kr_ply_read_points(const char *path, float **xyz, size_t *n);

#endif
