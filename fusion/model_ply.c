/* Model export: every voxel's mean point and unit normal as a binary
 * little-endian PLY, which MeshLab, CloudCompare and Open3D read directly. */
#include "fusion/model_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Floats are written byte by byte in little-endian order so the file is the
 * same whatever the host's byte order. */
static void put_float_le(unsigned char *out, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    for (int b = 0; b < 4; b++) out[b] = (unsigned char)(u >> (8 * b));
}

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
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(down);
        return kr_error(KR_ERR_IO, "cannot write model to %s: %s", path, strerror(errno));
    }

    fprintf(f,
            "ply\n"
            "format binary_little_endian 1.0\n"
            "comment kinreg running model: voxel mean points and normals, voxel size %g m\n"
            "element vertex %zu\n"
            "property float x\nproperty float y\nproperty float z\n"
            "property float nx\nproperty float ny\nproperty float nz\n"
            "end_header\n",
            (double)m->cfg.voxel_size, n);

    enum { CHUNK = 4096, VERTEX_BYTES = 24 };
    static _Thread_local unsigned char buf[CHUNK * VERTEX_BYTES];
    size_t filled = 0;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const kr_voxel *v = &records[i];
        float normal[3] = {0, 0, 0};
        kr_voxel_unit_normal(v, normal); /* stays zero when the normals cancel */
        unsigned char *o = buf + filled * VERTEX_BYTES;
        for (int k = 0; k < 3; k++) {
            put_float_le(o + 4 * k, v->point[k]);
            put_float_le(o + 12 + 4 * k, normal[k]);
        }
        if (++filled == CHUNK) {
            ok = fwrite(buf, VERTEX_BYTES, filled, f) == filled;
            filled = 0;
        }
    }
    if (ok && filled) ok = fwrite(buf, VERTEX_BYTES, filled, f) == filled;
    free(down);
    int err = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok) return kr_error(KR_ERR_IO, "cannot write model to %s: %s", path, strerror(err ? err : EIO));
    return KR_OK;
}
