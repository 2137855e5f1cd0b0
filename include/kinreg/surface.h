/* kinreg — the scan as a surface: a sparse truncated signed-distance volume
 * integrated from tracked depth frames, and the triangle mesh of its zero
 * level (marching cubes), written as PLY.
 *
 * The volume holds blocks of 8×8×8 voxels, allocated where frames see a
 * surface, so memory follows the surface rather than the room; a cap bounds
 * it. Every voxel keeps the weighted mean of its signed distance to the
 * surfaces the frames measured, truncated to a band that widens with the
 * sensor's depth step (fusion/surface/surface_kernels.h derives it). The mesh
 * has triangles only where voxels were seen on both sides of the surface:
 * unseen parts stay open. Its normals are the field's gradient; its vertices
 * are welded (each shared by the triangles around it). */
#ifndef KINREG_SURFACE_H
#define KINREG_SURFACE_H

#include <stddef.h>
#include <stdint.h>

#include "kinreg/device.h"
#include "kinreg/pose.h"
#include "kinreg/pyramid.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_surface kr_surface;

typedef struct {
    float voxel_size;        /* metres (default 0.005) */
    float truncation_voxels; /* the band's least half-width, in voxels (default 4) */
    float depth_step;        /* the sensor's depth step at z is depth_step·z² (1/m; default the
                                Kinect v1's 0.0030711016; 0 = no noise model: fixed band,
                                equal weights) */
    float max_weight;        /* the running average's weight cap (default 128) */
    float max_depth;         /* measurements farther than this are ignored (metres, default 3) */
    /* Memory cap: at most memory_mib MiB of blocks (KR_SURFACE_BYTES_PER_BLOCK
     * each; default 1024 MiB, about 174 000 blocks; 0 = no cap). Past it, new
     * surface is not added (kr_surface_stats.refused counts the requests
     * turned away, and a warning says so once); what is held keeps being
     * refined. */
    double memory_mib;
} kr_surface_config;

#define KR_SURFACE_BYTES_PER_BLOCK 6176

KR_API void kr_surface_config_default(kr_surface_config *cfg);
/* Errors: KR_ERR_INVALID_ARG (a setting out of range, named). */
KR_API kr_status kr_surface_create(kr_surface **out, const kr_surface_config *cfg);
KR_API void kr_surface_destroy(kr_surface **surface);

/* Moves the voxels to `device`'s GPU (the CUDA engine): from then on each
 * frame's voxels are fused there and the mesh's cubes are found there, with
 * the CPU engine's math (the same voxels and mesh bit for bit); the host
 * keeps the block hash. Only while the volume is empty. Errors:
 * KR_ERR_INVALID_ARG (not empty), KR_ERR_NO_DEVICE (not a CUDA device),
 * KR_ERR_CUDA. The CPU engine (the default) needs no call. */
KR_API kr_status kr_surface_fuse_on(kr_surface *surface, const kr_device *device);

/* Integrates one frame: `cloud` is its organised level-0 cloud (camera
 * coordinates, kinreg/preprocess.h), `rgb` its colour registered to the
 * depth (3 bytes a pixel, the cloud's size; NULL: none, kr_frame.rgb),
 * `pose` its camera-to-world pose. Voxels within two voxels of the measured
 * surface average the colour of the frames that saw them (the newest 32).
 * Errors: KR_ERR_INVALID_ARG, KR_ERR_NOMEM (the frame is not fused; blocks
 * it added stay, unseen, and change no mesh). */
KR_API kr_status kr_surface_integrate(kr_surface *surface, const kr_cloud *cloud,
                                      const uint8_t *rgb, const kr_pose *pose);

typedef struct {
    size_t blocks;     /* allocated */
    size_t max_blocks; /* the cap (SIZE_MAX: none) */
    uint64_t frames;   /* integrated */
    uint64_t refused;  /* requests for a new block the cap turned away (a block a frame
                          reaches is asked for once for each point walked to it) */
} kr_surface_stats;

KR_API kr_surface_stats kr_surface_stats_get(const kr_surface *surface);

/* A triangle mesh: vertices with unit normals, triangles counter-clockwise
 * seen from the side the sensor saw (their normal points out of the
 * surface, towards free space). */
typedef struct {
    size_t n_vertices;
    float *xyz;     /* 3 per vertex, world metres */
    float *normals; /* 3 per vertex */
    uint8_t *rgb;   /* 3 per vertex, or NULL when no frame had colour (a vertex no
                       coloured frame saw near the surface is black) */
    size_t n_faces;
    uint32_t *faces; /* 3 vertex indices per triangle */
} kr_mesh;

/* The zero level of the volume. Errors: KR_ERR_NOMEM, KR_ERR_EMPTY (no
 * surface seen yet). On error `out` is untouched. */
KR_API kr_status kr_surface_extract(const kr_surface *surface, kr_mesh *out);
KR_API void kr_mesh_free(kr_mesh *mesh);
/* A coarser mesh for a large scan: the volume's voxels averaged over cubes
 * of factor³ and meshed like kr_surface_extract at factor times the voxel
 * (about factor² fewer triangles; a marching-cubes mesh still: welded,
 * oriented, each edge shared by two triangles). factor 1: the full mesh.
 * Errors: as kr_surface_extract's, KR_ERR_INVALID_ARG (factor outside 1-64). */
KR_API kr_status kr_surface_extract_coarse(const kr_surface *surface, int factor, kr_mesh *out);

/* Binary little-endian PLY with vertex normals and faces, written whole or
 * not at all (an existing file is left as it was on failure). */
KR_API kr_status kr_mesh_save_ply(const char *path, const kr_mesh *mesh);

#ifdef __cplusplus
}
#endif

#endif
