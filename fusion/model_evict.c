/* The model's memory cap (--model-memory): eviction of the host voxel map,
 * used by both the host fusion (fusion/model.c) and the device fusion
 * (fusion/model_gpu.c, over a download of the device map). */
#include "fusion/model_internal.h"

/* The map is over its cap: evict down to 90 % of it (the slack keeps this
 * from running on every frame), old and far voxels first, then old near
 * ones; only when dropping every old voxel would leave the map over its cap
 * do the oldest recent ones go, the active window last. A pass always ends
 * at or under the cap, so it scans at most the cap plus one frame's new
 * voxels (repeating futile passes over an ever larger map made fusion five
 * times slower once). */
kr_status kr_model_evict_host_map(kr_model *m, const kr_pose *pose, uint64_t frame_index)
{
    uint64_t keep = (uint64_t)(m->cfg.evict_after > m->cfg.active_window ? m->cfg.evict_after
                                                                         : m->cfg.active_window);
    uint64_t older_than = frame_index > keep ? frame_index - keep : 0;
    float camera[3] = {(float)pose->t[0], (float)pose->t[1], (float)pose->t[2]};
    size_t evicted = 0;
    uint64_t newest = 0;
    kr_status s = kr_voxel_map_evict(m->map, m->max_voxels, m->max_voxels - m->max_voxels / 10,
                                     older_than, camera, m->cfg.evict_distance, &evicted, &newest);
    if (s != KR_OK) return s;
    m->eviction_passes++;
    atomic_fetch_add(&m->evicted, evicted);
    /* Said once each: recent voxels had to go, and (worse for tracking) some
     * of the active window the snapshots are built from. */
    uint64_t window = (uint64_t)m->cfg.active_window;
    bool in_window = evicted && newest + window >= frame_index;
    bool recent = evicted && newest >= older_than;
    if ((in_window && !m->warned_window) || (recent && !m->warned_full)) {
        m->warned_full = true;
        m->warned_window |= in_window;
        kr_log(KR_LOG_WARN,
               "model: the voxels seen in the last %llu frames exceed the memory cap of %g MiB "
               "(%zu voxels); the oldest of them are evicted%s (raise --model-memory or --voxel)",
               (unsigned long long)(in_window ? window : keep), m->cfg.memory_mib, m->max_voxels,
               in_window ? ", and tracking sees less of the scene" : "");
    }
    return KR_OK;
}
