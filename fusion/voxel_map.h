/* Internal: the running model's voxel map — an open-addressing hash from
 * integer voxel coordinates floor(p / voxel_size) to a record holding the
 * weighted mean point and normal, the accumulated weight and the frame that
 * last touched it. Single-threaded: only the tracker thread touches it. */
#ifndef KINREG_FUSION_VOXEL_MAP_H
#define KINREG_FUSION_VOXEL_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fusion/voxel_kernels.h"
#include "kinreg/pose.h"
#include "kinreg/pyramid.h"

typedef struct kr_voxel_map kr_voxel_map;

typedef struct {
    float voxel_size;   /* metres */
    float max_weight;   /* weight cap */
    /* w = |n·ray| / z² clipped to [KR_VOXEL_MIN_WEIGHT, 1] (z in metres along
     * the optical axis); false: every point weighs 1. */
    bool geometric_weight;
} kr_voxel_map_config;

kr_status kr_voxel_map_create(kr_voxel_map **out, const kr_voxel_map_config *cfg);
void kr_voxel_map_destroy(kr_voxel_map **map);

/* Fuses every point of `cloud` that has a finite point and normal, moved to
 * the world by `pose`. All memory is reserved up front: on failure the map is
 * unchanged. Points beyond ±2^20 voxels of the origin are skipped. */
kr_status kr_voxel_map_integrate(kr_voxel_map *map, const kr_cloud *cloud, const kr_pose *pose,
                                 uint64_t frame_index);

size_t kr_voxel_map_size(const kr_voxel_map *map);
/* Empties the map, keeping its memory (re-fusion builds it anew). */
void kr_voxel_map_clear(kr_voxel_map *map);
/* Voxel i, 0 <= i < size, in insertion order (stable across growth). */
const kr_voxel *kr_voxel_map_at(const kr_voxel_map *map, size_t i);
/* The voxel containing world point p, or NULL. */
const kr_voxel *kr_voxel_map_find(const kr_voxel_map *map, const float p[3]);

/* Appends to points/normals (3 floats each, grown with realloc; *capacity in
 * voxels) the mean point and unit mean normal of every voxel seen at or after
 * frame `since`; a voxel whose normals cancel out gets normal x = NaN. Walks
 * the active list, pruning voxels older than `since`, so the cost follows the
 * active region rather than the whole map. *n receives the count. */
kr_status kr_voxel_map_gather(kr_voxel_map *map, uint64_t since, float **points, float **normals,
                              size_t *capacity, size_t *n);
/* Same result by scanning every voxel (the reference the active list is
 * checked and timed against). */
kr_status kr_voxel_map_gather_scan(const kr_voxel_map *map, uint64_t since, float **points,
                                   float **normals, size_t *capacity, size_t *n);

/* Bounded memory (DESIGN.md §3, --model-memory): when the map holds more
 * than `max_voxels`, drops voxels until it holds at most `target` (<= max),
 * oldest first, among those last seen before frame `older_than` and farther
 * than `min_distance` metres from `camera` (world frame). If those are not
 * enough, the distance condition is dropped (still only voxels older than
 * `older_than`); if dropping all of those still leaves more than
 * `max_voxels`, the oldest of all go, in insertion order within one frame's
 * age, until exactly `target` are left: the map never stays above
 * max_voxels. Survivors keep their insertion
 * order; the table and the active list are rebuilt. *evicted receives the
 * number dropped (0 when the map was within bounds), *newest (may be NULL)
 * the last_seen of the newest voxel dropped (0: none), which tells the
 * caller whether recent voxels had to go. Allocates a scratch array of the
 * candidates' ages; on failure the map is unchanged. */
kr_status kr_voxel_map_evict(kr_voxel_map *map, size_t max_voxels, size_t target,
                             uint64_t older_than, const float camera[3], float min_distance,
                             size_t *evicted, uint64_t *newest);

/* Replaces the map's content by `n` records (as a device map downloads
 * them: insertion order), rebuilding the table and the active list (every
 * record in it). On failure the map is unchanged. */
kr_status kr_voxel_map_assign(kr_voxel_map *map, const kr_voxel *records, size_t n);
/* The records, contiguous in insertion order (size of them), or NULL. */
const kr_voxel *kr_voxel_map_records(const kr_voxel_map *map);

/* Unit normal of a voxel's mean, or false when the normals cancel out. */
bool kr_voxel_unit_normal(const kr_voxel *v, float out[3]);

#endif
