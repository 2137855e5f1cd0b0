/* The voxel map on the device (gpu/fusion.cu), the twin of
 * fusion/voxel_map.c: the same records (core/fusion_kernels.h: kr_fk_voxel)
 * in the same insertion order, fused with the same per-sample math, so that
 * after the same frames both maps hold the same voxels bit for bit. Plain C
 * (no CUDA types); in builds without CUDA gpu/fusion_nocuda.c answers
 * KR_ERR_NO_DEVICE.
 *
 * Order. The host fuses a frame's samples in pixel order, and each voxel's
 * running mean depends only on the order of its own samples. Here the
 * samples are sorted by voxel key, stably (a radix sort of keys with pixel
 * indices as values), so each voxel's run is in pixel order, and one thread
 * per run fuses it sequentially: the same sums in the same order. New voxels
 * get record indices in the order of their first pixel (a scan over the
 * pixels), as the host's inserts give them. */
#ifndef KR_GPU_FUSION_GPU_H
#define KR_GPU_FUSION_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/fusion_kernels.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_gpu_voxel_map kr_gpu_voxel_map;

/* A map on ctx's device, used with ctx (one thread at a time). voxel_size and
 * max_weight as kr_voxel_map_config's, already checked by the caller. */
kr_status kr_gpu_voxel_map_create(kr_gpu_context *ctx, float voxel_size, float max_weight,
                                  bool geometric_weight, kr_gpu_voxel_map **out);
void kr_gpu_voxel_map_destroy(kr_gpu_voxel_map **map);

/* Fuses the w×h samples (3 floats of point and normal each, camera frame;
 * a sample without a finite point x or normal x is skipped) moved to the
 * world by (R, t) (row-major). points/normals are host memory (uploaded)
 * unless `on_device`, when they are device pointers valid on ctx's stream.
 * Grows the map first: on failure the map is unchanged. */
kr_status kr_gpu_voxel_map_integrate(kr_gpu_voxel_map *map, const float *points,
                                     const float *normals, size_t w, size_t h, bool on_device,
                                     const float R[9], const float t[3], uint64_t frame);

size_t kr_gpu_voxel_map_size(const kr_gpu_voxel_map *map);

/* The voxels seen at or after frame `since`, in record order: mean point and
 * unit mean normal (x = NaN, y = z = 0 where the normals cancel out), into
 * host arrays of *capacity voxels (grown with realloc); *n gets the count. */
kr_status kr_gpu_voxel_map_gather(kr_gpu_voxel_map *map, uint64_t since, float **points,
                                  float **normals, size_t *capacity, size_t *n);

/* Every record, in insertion order, into `out` (room for size records). */
kr_status kr_gpu_voxel_map_download(kr_gpu_voxel_map *map, kr_fk_voxel *out);

/* Replaces the content by n records (insertion order kept), e.g. the
 * survivors of an eviction done on the host; on failure the map is
 * unchanged. */
kr_status kr_gpu_voxel_map_upload(kr_gpu_voxel_map *map, const kr_fk_voxel *records, size_t n);

/* Device time of the last integrate (upload included) and gather, in ms. */
void kr_gpu_voxel_map_times(const kr_gpu_voxel_map *map, double *integrate_ms, double *gather_ms);

#ifdef __cplusplus
}
#endif
#endif
