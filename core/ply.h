/* PLY files: the one reader and the one writer of the project.
 *
 * The reader takes what scanners and other tools write: ASCII and binary
 * (little and big endian), any scalar type (char … double, with or without
 * the int8/float32 spellings), any extra vertex properties (confidence,
 * intensity, …), and any other elements before or after the vertices (faces,
 * Stanford range grids, with list properties), which are skipped. It keeps
 * the vertices' x, y, z and, when present, nx, ny, nz and red, green, blue.
 *
 * The header's counts are claims, not facts: before anything is allocated
 * they are checked against the bytes the file still holds, and arrays grow as
 * vertices are actually read, so a 100-byte file that claims 200 million
 * vertices costs nothing (found by tests/fuzz/fuzz_ply). Inputs must be
 * regular files (core/files.h).
 *
 * The writer writes binary little-endian PLY (MeshLab, CloudCompare, Open3D,
 * trimesh and Blender read it), whole or not at all (core/files.h). */
#ifndef KINREG_CORE_PLY_H
#define KINREG_CORE_PLY_H

#include <stddef.h>
#include <stdint.h>

#include "kinreg/status.h"

typedef struct {
    size_t n;           /* vertices */
    float *xyz;         /* 3n */
    float *normals;     /* 3n, or NULL when the file has no nx, ny, nz */
    uint8_t *rgb;       /* 3n, or NULL when the file has no red, green, blue */
    const char *format; /* "ascii", "binary_little_endian" or "binary_big_endian" */
} kr_ply_points;

/* Reads the vertices of `path`. Errors name the file (and the line, in
 * ASCII): KR_ERR_IO (cannot open or read; not a regular file), KR_ERR_FORMAT
 * (not a PLY, malformed header or data, no x/y/z, too few vertices,
 * non-finite coordinates). On error `out` is untouched. */
kr_status kr_ply_read(const char *path, kr_ply_points *out);
void kr_ply_points_free(kr_ply_points *p);

typedef struct {
    size_t n;              /* vertices */
    const float *xyz;      /* 3n */
    const float *normals;  /* 3n or NULL */
    const uint8_t *rgb;    /* 3n or NULL */
    size_t n_faces;        /* triangles */
    const uint32_t *faces; /* 3 vertex indices each, or NULL */
    const char *comment;   /* one header comment line, or NULL */
} kr_ply_data;

/* Writes `d` to `path` as binary little-endian PLY, through a temporary
 * beside it: on any failure (KR_ERR_IO naming `what`, the path and the cause)
 * an existing file at `path` is left as it was. */
kr_status kr_ply_write(const char *path, const char *what, const kr_ply_data *d);

#endif
