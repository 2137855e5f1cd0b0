/* Model export: every voxel's mean point and unit normal as a binary
 * little-endian PLY (core/ply.h), which MeshLab, CloudCompare and Open3D
 * read directly; written whole or not at all. */
#include "fusion/model_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/ply.h"

kr_status kr_model_save_ply(const kr_model *m, const char *path)
{
    if (!m || !path) return kr_error(KR_ERR_INVALID_ARG, "kr_model_save_ply: NULL argument");
    /* A map on the device comes down first (the same records, in the same
     * insertion order as the host map's). */
    size_t n = kr_voxel_map_size(m->map);
    const kr_voxel *records = kr_voxel_map_records(m->map);
    kr_voxel *down = NULL;
    if (m->dmap) {
        n = kr_voxel_map_cuda_size(m->dmap);
        down = malloc((n ? n : 1) * sizeof *down);
        if (!down) return kr_error(KR_ERR_NOMEM, "cannot allocate %zu voxels to save the model", n);
        kr_status s = kr_voxel_map_cuda_download(m->dmap, down);
        if (s != KR_OK) {
            free(down);
            return s;
        }
        records = down;
    }
    float *xyz = malloc(6 * (n ? n : 1) * sizeof *xyz);
    if (!xyz) {
        free(down);
        return kr_error(KR_ERR_NOMEM, "cannot allocate %zu voxels to save the model", n);
    }
    float *nrm = xyz + 3 * n;
    for (size_t i = 0; i < n; i++) {
        float normal[3] = {0, 0, 0};
        kr_voxel_unit_normal(&records[i], normal); /* stays zero when the normals cancel */
        for (int k = 0; k < 3; k++) {
            xyz[3 * i + k] = records[i].point[k];
            nrm[3 * i + k] = normal[k];
        }
    }
    free(down);
    char comment[128];
    snprintf(comment, sizeof comment,
             "kinreg running model: voxel mean points and normals, voxel size %g m",
             (double)m->cfg.voxel_size);
    kr_ply_data d = {.n = n, .xyz = xyz, .normals = nrm, .comment = comment};
    kr_status s = kr_ply_write(path, "the model", &d);
    free(xyz);
    return s;
}
