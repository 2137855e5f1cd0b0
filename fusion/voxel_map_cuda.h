/* The voxel map on the device (fusion/voxel_map_cuda.cu), the twin of
 * fusion/voxel_map.c: the same records (fusion/voxel_kernels.h: kr_voxel)
 * in the same insertion order, fused with the same per-sample math, so that
 * after the same frames both maps hold the same voxels bit for bit. Plain C
 * (no CUDA types); in builds without CUDA fusion/voxel_map_nocuda.c answers
 * KR_ERR_NO_DEVICE.
 *
 * Order. The host fuses a frame's samples in pixel order, and each voxel's
 * running mean depends only on the order of its own samples. Here the
 * samples are sorted by voxel key, stably (a radix sort of keys with pixel
 * indices as values), so each voxel's run is in pixel order, and one thread
 * per run fuses it sequentially: the same sums in the same order. New voxels
 * get record indices in the order of their first pixel (a scan over the
 * pixels), as the host's inserts give them. */
#ifndef KINREG_FUSION_VOXEL_MAP_CUDA_H
#define KINREG_FUSION_VOXEL_MAP_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fusion/voxel_kernels.h"
#include "gpu/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_voxel_map_cuda kr_voxel_map_cuda;

/* A map on ctx's device, used with ctx (one thread at a time). voxel_size and
 * max_weight as kr_voxel_map_config's, already checked by the caller. */
kr_status kr_voxel_map_cuda_create(kr_gpu_context *ctx, float voxel_size, float max_weight,
                                   bool geometric_weight, kr_voxel_map_cuda **out);
void kr_voxel_map_cuda_destroy(kr_voxel_map_cuda **map);

/* Fuses the w×h samples (3 floats of point and normal each, camera frame;
 * a sample without a finite point x or normal x is skipped) moved to the
 * world by (R, t) (row-major). points/normals are host memory (uploaded)
 * unless `on_device`, when they are device pointers valid on ctx's stream.
 * Grows the map first: on failure the map is unchanged. */
kr_status kr_voxel_map_cuda_integrate(kr_voxel_map_cuda *map, const float *points,
                                      const float *normals, size_t w, size_t h, bool on_device,
                                      const float R[9], const float t[3], uint64_t frame);

size_t kr_voxel_map_cuda_size(const kr_voxel_map_cuda *map);

/* The voxels seen at or after frame `since`, in record order: mean point and
 * unit mean normal (x = NaN, y = z = 0 where the normals cancel out), into
 * host arrays of *capacity voxels (grown with realloc); *n gets the count. */
kr_status kr_voxel_map_cuda_gather(kr_voxel_map_cuda *map, uint64_t since, float **points,
                                   float **normals, size_t *capacity, size_t *n);

/* Every record, in insertion order, into `out` (room for size records). */
kr_status kr_voxel_map_cuda_download(kr_voxel_map_cuda *map, kr_voxel *out);

/* Replaces the content by n records (insertion order kept), e.g. the
 * survivors of an eviction done on the host; on failure the map is
 * unchanged. */
kr_status kr_voxel_map_cuda_upload(kr_voxel_map_cuda *map, const kr_voxel *records, size_t n);

/* Device time of the last integrate (upload included) and gather, in ms. */
void kr_voxel_map_cuda_times(const kr_voxel_map_cuda *map, double *integrate_ms, double *gather_ms);

#ifdef __cplusplus
}
#endif
#endif
