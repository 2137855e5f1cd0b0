/* Snapshot trees built on the device (fusion/model_gpu.h). */
#include "fusion/model_gpu.h"

#include <string.h>

#include "fusion/model_internal.h"

kr_status kr_model_build_trees_on(kr_model *m, const kr_gpu_context *like)
{
    if (!m || !like) return kr_error(KR_ERR_INVALID_ARG, "kr_model_build_trees_on: NULL argument");
    kr_gpu_context *ctx = NULL;
    kr_status s = kr_gpu_context_twin(like, &ctx);
    if (s != KR_OK) return s;
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

kr_gpu_tree_times kr_model_last_tree_times(kr_model *m)
{
    kr_gpu_tree_times t;
    memset(&t, 0, sizeof t);
    if (!m) return t;
    pthread_mutex_lock(&m->mu);
    t = m->gpu_times;
    pthread_mutex_unlock(&m->mu);
    return t;
}

kr_status kr_model_build_tree(kr_model *m, kr_kdtree **tree)
{
    if (m->gpu) {
        kr_gpu_tree_times t;
        kr_status s = kr_gpu_tree_build(m->gpu, m->job_points, m->job_normals, m->job_n, tree, &t);
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
