/* kinreg — range scans and scan sets, for registration and refinement.
 *
 * A scan set is a Stanford-style `.conf`: lines `bmesh FILE tx ty tz qx qy qz
 * qw` naming each scan (a PLY file) and its pose. A scan point p maps into
 * the common frame as R(q)ᵀ·p + t (DESIGN.md §9), so the scan's pose
 * T_world_scan is (R(q)ᵀ, t). Synthetic scan sets with exact poses serve
 * tests and benchmarks. */
#ifndef KINREG_SCAN_H
#define KINREG_SCAN_H

#include <stddef.h>

#include "kinreg/pose.h"
#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the x, y, z properties of every vertex of a PLY file into a new
 * malloc'd array of 3·n floats: ASCII or binary (either byte order), any
 * scalar types, extra vertex properties, and other elements (faces, the
 * Stanford scans' range_grid), which are skipped. Errors name the file (and
 * the line, in ASCII): KR_ERR_IO (cannot open or read; not a regular file),
 * KR_ERR_FORMAT (not a PLY, malformed header or data, no x/y/z, too few
 * vertices, non-finite values). On error the outputs are untouched. */
KR_API kr_status kr_scan_read_ply(const char *path, float **xyz, size_t *n);

/* Writes n points (and their normals, may be NULL) as binary little-endian
 * PLY, with an optional header comment, through a temporary beside `path`:
 * on failure (KR_ERR_IO naming the path and cause) an existing file there is
 * left as it was. */
KR_API kr_status kr_scan_write_ply(const char *path, const float *xyz, const float *normals,
                                   size_t n, const char *comment);

typedef struct {
    char *file;   /* as written in the .conf */
    char *path;   /* resolved against the .conf's folder */
    kr_pose pose; /* T_world_scan */
} kr_scan_set_entry;

typedef struct {
    kr_scan_set_entry *scans;
    int n;
    char *camera; /* the `camera` line without its keyword, or NULL */
    /* Every other line that is not a scan (`camera`, `mesh` lines naming a
     * reconstruction rather than a scan, `#` comments), as read, in order:
     * written back before the scans. */
    char **lines;
    int n_lines;
} kr_scan_set;

/* Reads a .conf as the Stanford repository writes them: `bmesh` lines (the
 * scans; FILE relative to the .conf's folder unless absolute), `camera` and
 * `mesh` lines and `#` comments (kept for rewriting), blank lines. KR_ERR_IO
 * when it cannot be opened or is not a regular file, KR_ERR_FORMAT (naming
 * the line) for a malformed bmesh line or an unknown keyword, KR_ERR_EMPTY
 * when it lists no scan. */
KR_API kr_status kr_scan_set_read(const char *path, kr_scan_set *out);
/* Writes the set with the given poses (one per scan) in the same format. */
KR_API kr_status kr_scan_set_write(const char *path, const kr_scan_set *set, const kr_pose *poses);
KR_API void kr_scan_set_free(kr_scan_set *set);

/* A scan's pose as a .conf writes it: t and q with p ↦ R(q)ᵀ p + t. */
KR_API kr_pose kr_scan_set_pose(const double t[3], kr_quat q);
KR_API void kr_scan_set_to_tq(const kr_pose *pose, double t[3], kr_quat *q);

/* Synthetic range views of a bumpy closed object: n_views cameras on a
 * slanted ring 0.5 m around an object of radius about 0.1 m; about `density`
 * surface samples over the whole object, each view keeping the third or so
 * that faces its camera, in the camera's own frame. xyz[k] is malloc'd (3
 * floats per point, free each); poses[k] the exact camera-to-world pose. */
KR_API kr_status kr_scan_synthetic_object(int n_views, size_t density, float **xyz, size_t *n,
                                          kr_pose *poses);

/* A synthetic long scan: a depth camera that circles inside a room whose
 * walls, floor and ceiling carry smooth bumps, seen from hundreds of poses —
 * the benchmark input of distributed refinement (kinreg refine --synthetic
 * room:N). Each view overlaps only its neighbours along the loop, so the
 * normal equations are block-sparse. The room is 4 × 3 × 2.5 m (x, y, z up,
 * floor at z = 0); the camera (60° horizontal field of view, width × height
 * pixels, depth along +z of its frame) moves once around a loop of about
 * 0.7 m radius at 1.2–1.4 m height, looking outward with a slow yaw and pitch
 * wobble. View k is a ray-cast depth image turned into points in the camera
 * frame: xyz[k] (malloc'd, 3 floats per point, n[k] points; free each) and
 * poses[k] = T_world_camera exactly. noise_m > 0 adds seeded Gaussian noise
 * of that standard deviation along each ray. */
KR_API kr_status kr_scan_synthetic_room(int n_views, int width, int height, double noise_m,
                                        unsigned seed, float **xyz, size_t *n, kr_pose *poses);

#ifdef __cplusplus
}
#endif
#endif
