/* A range scan's points from a PLY file (kinreg/scan.h): the project's PLY
 * reader (core/ply.h), ASCII or binary, keeping x, y, z. */
#include <stdlib.h>

#include "core/ply.h"
#include "kinreg/scan.h"

kr_status kr_scan_read_ply(const char *path, float **xyz, size_t *n)
{
    if (!path || !xyz || !n) return kr_error(KR_ERR_INVALID_ARG, "kr_scan_read_ply: NULL argument");
    kr_ply_points p;
    kr_status s = kr_ply_read(path, &p);
    if (s != KR_OK) return s;
    free(p.normals);
    free(p.rgb);
    *xyz = p.xyz;
    *n = p.n;
    return KR_OK;
}

kr_status kr_scan_write_ply(const char *path, const float *xyz, const float *normals, size_t n,
                            const char *comment)
{
    if (!path || (n && !xyz))
        return kr_error(KR_ERR_INVALID_ARG, "kr_scan_write_ply: NULL argument");
    kr_ply_data d = {.n = n, .xyz = xyz, .normals = normals, .comment = comment};
    return kr_ply_write(path, "the points", &d);
}
