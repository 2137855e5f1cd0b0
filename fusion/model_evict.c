/* The model's memory cap (--model-memory): eviction of the host voxel map,
 * used by both the host fusion (fusion/model.c) and the device fusion
 * (fusion/model_gpu.c, over a download of the device map). */
#include "fusion/model_internal.h"

/* The map is over its cap: evict down to 90 % of it (the slack keeps this
 * from running on every frame), never touching the active window. A pass
 * that leaves the map over its cap sets the next one a tenth further
 * (model_internal.h, evict_above). */
kr_status kr_model_evict_host_map(kr_model *m, const kr_pose *pose, uint64_t frame_index)
{
    uint64_t keep = (uint64_t)(m->cfg.evict_after > m->cfg.active_window ? m->cfg.evict_after
                                                                         : m->cfg.active_window);
    uint64_t older_than = frame_index > keep ? frame_index - keep : 0;
    float camera[3] = {(float)pose->t[0], (float)pose->t[1], (float)pose->t[2]};
    size_t evicted = 0;
    kr_status s = kr_voxel_map_evict(m->map, m->max_voxels, m->max_voxels - m->max_voxels / 10,
                                     older_than, camera, m->cfg.evict_distance, &evicted);
    if (s != KR_OK) return s;
    m->eviction_passes++;
    atomic_fetch_add(&m->evicted, evicted);
    size_t left = kr_voxel_map_size(m->map);
    m->evict_above = left > m->max_voxels ? left + left / 10 : m->max_voxels;
    if (left > m->max_voxels && !m->warned_full) {
        m->warned_full = true;
        kr_log(KR_LOG_WARN,
               "model: %zu voxels seen in the last %llu frames exceed the memory cap of %g MiB "
               "(%zu voxels); "
               "keeping them (raise --model-memory or --voxel)",
               kr_voxel_map_size(m->map), (unsigned long long)keep, m->cfg.memory_mib,
               m->max_voxels);
    }
    return KR_OK;
}
