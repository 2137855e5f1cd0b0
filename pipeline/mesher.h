/* The surface on a thread of its own (kinreg run --mesh): the tracker hands
 * over each fused frame's level-0 cloud and pose, and the thread integrates
 * it into a signed-distance volume (kinreg/surface.h); at the end the volume
 * is meshed and written.
 *
 * Never on the tracker's path: a post copies the cloud (3.7 MB at VGA, a
 * fraction of a millisecond) into the one waiting slot and returns. When the
 * thread is still integrating the frame before, a newer frame replaces the
 * one waiting, which is counted as skipped, so the surface takes what the
 * machine can integrate and the poses are never waited for; the thread runs
 * at a lower priority (nice 10), so on few cores it takes the time tracking
 * leaves. `kinreg mesh` fuses every frame of a replay afterwards. The
 * same thread meshes the surface for the `mesh` topic's viewers. */
#ifndef KINREG_PIPELINE_MESHER_H
#define KINREG_PIPELINE_MESHER_H

#include <stdint.h>

#include "kinreg/pipeline.h"
#include "kinreg/surface.h"
#include "pipeline/mesh_feed.h"

typedef struct kr_mesher kr_mesher;

/* With a CUDA `device` the voxels are fused and meshed there (a context of
 * the surface's own); with the CPU one, or when the device cannot take
 * them (a warning says why), on the host. With a `feed` the thread also
 * meshes the surface for viewers when the feed asks (pipeline/mesh_feed.h). */
kr_status kr_mesher_create(kr_mesher **out, const kr_surface_config *cfg, const kr_device *device,
                           kr_mesh_feed *feed);

/* Hands over a copy of `cloud` (and of its colour `rgb`, 3 bytes a pixel,
 * when not NULL) at `pose`; returns at once. */
kr_status kr_mesher_post(kr_mesher *m, const kr_cloud *cloud, const uint8_t *rgb,
                         const kr_pose *pose);

/* Integrates the frame still waiting, stops the thread, meshes the volume
 * at `decimate` times its voxel (kr_surface_extract_coarse; 1: the full
 * mesh) and writes it to `path` (kr_mesh_save_ply); fills the mesh_*
 * members of `stats`. Errors: the first integration failure, KR_ERR_EMPTY (no surface
 * seen), the write's. */
kr_status kr_mesher_finish(kr_mesher *m, const char *path, int decimate, kr_pipeline_stats *stats);

void kr_mesher_destroy(kr_mesher **m);

#endif
