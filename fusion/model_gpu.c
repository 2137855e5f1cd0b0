/* The model on a CUDA device (kinreg/model.h: kr_model_build_trees_on,
 * kr_model_fuse_on): snapshot trees built there, the voxel map fused there. */
#include <stdlib.h>
#include <string.h>

#include "fusion/model_internal.h"
#include "gpu/engine.h"
#include "gpu/kdtree_cuda.h"
#include "kinreg/model.h"

/* The device's context, which the model's own contexts are twins of. */
static kr_status device_context(const kr_device *dev, const char *who, const kr_gpu_context **out)
{
    const kr_gpu_context *ctx = dev ? kr_device_gpu(dev) : NULL;
    if (!ctx)
        return kr_error(dev ? KR_ERR_NO_DEVICE : KR_ERR_INVALID_ARG, "%s: %s", who,
                        dev ? "not a CUDA device" : "NULL device");
    *out = ctx;
    return KR_OK;
}

kr_status kr_model_build_trees_on(kr_model *m, const kr_device *dev)
{
    const kr_gpu_context *like = NULL;
    if (!m) return kr_error(KR_ERR_INVALID_ARG, "kr_model_build_trees_on: NULL model");
    kr_status s = device_context(dev, "kr_model_build_trees_on", &like);
    if (s != KR_OK) return s;
    kr_gpu_context *ctx = NULL;
    if ((s = kr_gpu_context_twin(like, &ctx)) != KR_OK) return s;
    pthread_mutex_lock(&m->mu);
    /* Not while a build may be using the old one. */
    while (m->busy)
        pthread_cond_wait(&m->idle, &m->mu);
    kr_gpu_context *old = m->gpu;
    m->gpu = ctx;
    pthread_mutex_unlock(&m->mu);
    kr_gpu_context_destroy(&old);
    return KR_OK;
}

void kr_model_last_device_times(kr_model *m, kr_model_device_times *out)
{
    memset(out, 0, sizeof *out);
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    out->tree = m->gpu_times;
    pthread_mutex_unlock(&m->mu);
    kr_voxel_map_cuda_times(m->dmap, &out->integrate_ms, &out->gather_ms);
}

kr_status kr_model_build_tree(kr_model *m, kr_kdtree **tree)
{
    if (m->gpu) {
        kr_device_tree_times t;
        kr_status s =
            kr_kdtree_cuda_build(m->gpu, m->job_points, m->job_normals, m->job_n, tree, &t);
        pthread_mutex_lock(&m->mu);
        if (s == KR_OK)
            m->gpu_times = t;
        else
            memset(&m->gpu_times, 0, sizeof m->gpu_times);
        pthread_mutex_unlock(&m->mu);
        if (s == KR_OK || s == KR_ERR_EMPTY || s == KR_ERR_INVALID_ARG) return s;
        kr_log(KR_LOG_WARN,
               "model tree of %zu voxels not built on the device: %s (%s); building it on the host",
               m->job_n, kr_strerror(s), kr_last_error());
    }
    return kr_kdtree_build(tree, m->job_points, m->job_normals, m->job_n);
}

kr_status kr_model_fuse_on(kr_model *m, const kr_device *dev)
{
    const kr_gpu_context *like = NULL;
    if (!m) return kr_error(KR_ERR_INVALID_ARG, "kr_model_fuse_on: NULL model");
    kr_status s = device_context(dev, "kr_model_fuse_on", &like);
    if (s != KR_OK) return s;
    if (m->dmap) return KR_OK;
    kr_gpu_context *ctx = NULL;
    kr_voxel_map_cuda *dmap = NULL;
    s = kr_gpu_context_twin(like, &ctx);
    if (s == KR_OK)
        s = kr_voxel_map_cuda_create(ctx, m->cfg.voxel_size, m->cfg.max_weight,
                                     m->cfg.geometric_weight, &dmap);
    /* What was fused on the host so far goes up with it. */
    if (s == KR_OK && kr_voxel_map_size(m->map))
        s = kr_voxel_map_cuda_upload(dmap, kr_voxel_map_records(m->map), kr_voxel_map_size(m->map));
    if (s != KR_OK) {
        kr_voxel_map_cuda_destroy(&dmap);
        kr_gpu_context_destroy(&ctx);
        return s;
    }
    m->dmap = dmap;
    m->fuse_gpu = ctx;
    return KR_OK;
}

kr_status kr_model_integrate_on_device(kr_model *m, const kr_cloud *cloud, const kr_pose *pose,
                                       uint64_t frame_index)
{
    if (cloud->width < 0 || cloud->height < 0)
        return kr_error(KR_ERR_INVALID_ARG, "cloud size %dx%d", cloud->width, cloud->height);
    size_t w = (size_t)cloud->width, h = (size_t)cloud->height;
    if (w * h == 0) return KR_OK;
    if (!cloud->points || !cloud->normals)
        return kr_error(KR_ERR_INVALID_ARG, "cloud %dx%d without point or normal buffers",
                        cloud->width, cloud->height);
    /* The pose in float, as the host map converts it. */
    float R[9], t[3];
    for (int k = 0; k < 9; k++)
        R[k] = (float)pose->R[k];
    for (int k = 0; k < 3; k++)
        t[k] = (float)pose->t[k];
    kr_status s = kr_voxel_map_cuda_integrate(m->dmap, cloud->points, cloud->normals, w, h, false,
                                              R, t, frame_index);
    size_t n = kr_voxel_map_cuda_size(m->dmap);
    if (s == KR_OK && m->max_voxels && n > m->max_voxels) {
        /* Over the cap: the host's eviction over a download, survivors up. */
        kr_voxel *all = malloc(n * sizeof *all);
        if (!all) s = kr_error(KR_ERR_NOMEM, "cannot allocate %zu voxels for eviction", n);
        if (s == KR_OK) s = kr_voxel_map_cuda_download(m->dmap, all);
        if (s == KR_OK) s = kr_voxel_map_assign(m->map, all, n);
        free(all);
        if (s == KR_OK) s = kr_model_evict_host_map(m, pose, frame_index);
        if (s == KR_OK && kr_voxel_map_size(m->map) != n)
            s = kr_voxel_map_cuda_upload(m->dmap, kr_voxel_map_records(m->map),
                                         kr_voxel_map_size(m->map));
        /* The host copy is not kept in step with the device: free it. */
        kr_voxel_map *fresh = NULL;
        kr_voxel_map_config vcfg = {m->cfg.voxel_size, m->cfg.max_weight, m->cfg.geometric_weight};
        if (kr_voxel_map_create(&fresh, &vcfg) == KR_OK) {
            kr_voxel_map_destroy(&m->map);
            m->map = fresh;
        }
        n = kr_voxel_map_cuda_size(m->dmap);
    }
    atomic_store(&m->size, n);
    return s;
}

kr_status kr_model_gather(kr_model *m, uint64_t since, size_t *n)
{
    if (m->dmap)
        return kr_voxel_map_cuda_gather(m->dmap, since, &m->job_points, &m->job_normals,
                                        &m->job_capacity, n);
    return kr_voxel_map_gather(m->map, since, &m->job_points, &m->job_normals, &m->job_capacity, n);
}
