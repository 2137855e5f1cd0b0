/* The running model's lifetime and fusion: configuration, the voxel map, and
 * the snapshot worker's start and stop. */
#include "fusion/model_internal.h"

#include <math.h>
#include <stdlib.h>

void kr_model_config_default(kr_model_config *cfg)
{
    if (!cfg) return;
    cfg->voxel_size = 0.015f;
    cfg->active_window = 50;
    cfg->max_weight = 64.0f;
    cfg->background = true;
    cfg->geometric_weight = true;
    cfg->memory_mib = 512;
    cfg->evict_after = 900;
    cfg->evict_distance = 3.0f;
}

size_t kr_model_max_voxels(const kr_model_config *cfg)
{
    if (!cfg || !(cfg->memory_mib > 0)) return 0;
    double n = cfg->memory_mib * 1048576.0 / KR_MODEL_BYTES_PER_VOXEL;
    /* The map indexes records with 32 bits. */
    return n >= 4.0e9 ? (size_t)4000000000u : (n < 1 ? 1 : (size_t)n);
}

kr_status kr_model_create(kr_model **out, const kr_model_config *cfg)
{
    if (!out || !cfg) return kr_error(KR_ERR_INVALID_ARG, "kr_model_create: NULL argument");
    if (cfg->active_window < 1)
        return kr_error(KR_ERR_INVALID_ARG, "model active window must be at least 1 frame (got %d)",
                        cfg->active_window);
    if (!(cfg->memory_mib >= 0) || !isfinite(cfg->memory_mib))
        return kr_error(KR_ERR_INVALID_ARG, "model memory cap must be >= 0 MiB, 0 = none (got %g)",
                        cfg->memory_mib);
    if (cfg->memory_mib > 0 && (cfg->evict_after < 0 || !(cfg->evict_distance >= 0)))
        return kr_error(KR_ERR_INVALID_ARG,
                        "model eviction needs evict_after >= 0 frames and evict_distance >= 0 m (got %d, %g)",
                        cfg->evict_after, (double)cfg->evict_distance);
    kr_model *m = calloc(1, sizeof *m);
    if (!m) return kr_error(KR_ERR_NOMEM, "cannot allocate model");
    m->cfg = *cfg;
    m->max_voxels = kr_model_max_voxels(cfg);
    atomic_init(&m->evicted, 0);
    kr_voxel_map_config vcfg = {cfg->voxel_size, cfg->max_weight, cfg->geometric_weight};
    kr_status s = kr_voxel_map_create(&m->map, &vcfg);
    if (s != KR_OK) {
        free(m);
        return s;
    }
    atomic_init(&m->size, 0);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->wake, NULL);
    pthread_cond_init(&m->idle, NULL);
    if (cfg->background && (s = kr_model_worker_start(m)) != KR_OK) {
        kr_model_destroy(&m);
        return s;
    }
    *out = m;
    return KR_OK;
}

void kr_model_destroy(kr_model **mp)
{
    if (!mp || !*mp) return;
    kr_model *m = *mp;
    kr_model_worker_stop(m); /* finishes a build in flight, then joins */
    /* Snapshots still held elsewhere stay alive on their own references. */
    kr_model_snapshot_release(&m->current);
    pthread_cond_destroy(&m->idle);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->mu);
    kr_voxel_map_destroy(&m->map);
    kr_voxel_map_cuda_destroy(&m->dmap);
    kr_gpu_context_destroy(&m->fuse_gpu);
    kr_gpu_context_destroy(&m->gpu);
    free(m->job_points);
    free(m->job_normals);
    free(m);
    *mp = NULL;
}

kr_status kr_model_integrate(kr_model *m, const kr_cloud *cloud, const kr_pose *pose, uint64_t frame_index)
{
    if (!m || !cloud || !pose) return kr_error(KR_ERR_INVALID_ARG, "kr_model_integrate: NULL argument");
    if (m->dmap) return kr_model_integrate_on_device(m, cloud, pose, frame_index);
    kr_status s = kr_voxel_map_integrate(m->map, cloud, pose, frame_index);
    if (s == KR_OK && m->max_voxels && kr_voxel_map_size(m->map) > m->max_voxels)
        s = kr_model_evict_host_map(m, pose, frame_index);
    atomic_store(&m->size, kr_voxel_map_size(m->map));
    return s;
}

kr_status kr_model_refuse(kr_model *m, const kr_cloud *clouds, const kr_pose *poses, int n,
                          uint64_t frame_index)
{
    if (!m || n < 0 || (n && (!clouds || !poses)))
        return kr_error(KR_ERR_INVALID_ARG, "kr_model_refuse: NULL argument or negative count");
    kr_model_wait_idle(m);
    kr_voxel_map_clear(m->map);
    kr_status s = m->dmap ? kr_voxel_map_cuda_upload(m->dmap, NULL, 0) : KR_OK; /* empties it */
    for (int i = 0; i < n && s == KR_OK; i++)
        s = kr_model_integrate(m, &clouds[i], &poses[i], frame_index);
    if (!m->dmap) atomic_store(&m->size, kr_voxel_map_size(m->map)); /* the device path sets it */
    return s == KR_OK ? kr_model_request_snapshot(m, frame_index) : s;
}

uint64_t kr_model_evicted(const kr_model *m)
{
    return m ? atomic_load(&((kr_model *)m)->evicted) : 0;
}

size_t kr_model_size(const kr_model *m)
{
    return m ? atomic_load(&((kr_model *)m)->size) : 0;
}
