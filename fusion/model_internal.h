/* Internal: the running model's state, shared by model.c (map and lifetime),
 * model_snapshot.c (snapshot worker) and model_ply.c (export). */
#ifndef KINREG_FUSION_MODEL_INTERNAL_H
#define KINREG_FUSION_MODEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "fusion/voxel_map.h"
#include "fusion/voxel_map_cuda.h"
#include "gpu/kdtree_cuda.h"
#include "kinreg/model.h"

struct kr_model_snapshot {
    atomic_int refs; /* the model's "current" pointer holds one reference */
    kr_kdtree *tree;
    uint64_t frame;
};

struct kr_model {
    kr_model_config cfg;
    /* Only the tracker thread (the caller of integrate and request) touches
     * the map, so it needs no lock. */
    kr_voxel_map *map;
    /* Set (fusion/model_gpu.c: kr_model_fuse_on): the map lives on the
     * device instead, in a context of its own (the integrating thread's);
     * `map` then only serves eviction, done on the host over a download. */
    kr_voxel_map_cuda *dmap;
    kr_gpu_context *fuse_gpu;
    atomic_size_t size; /* mirror of the map's size for readers on other threads */
    size_t max_voxels;  /* from cfg.memory_mib; 0 = no cap */
    atomic_uint_fast64_t evicted;
    bool warned_full;   /* said once that recent voxels (evict_after) had to go */
    bool warned_window; /* ... and once that voxels of the active window had to */
    uint64_t eviction_passes;

    /* Gathered active voxels: written by the caller of request while no build
     * is in flight, read by the builder while one is (`busy` hands them over). */
    float *job_points, *job_normals;
    size_t job_capacity, job_n;
    uint64_t job_frame;

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t wake; /* worker: a job or stop */
    pthread_cond_t idle; /* waiters: busy became false */
    bool busy;           /* a request owns the job buffers until its build ends */
    bool job_ready;      /* the worker should build the job buffers */
    bool stop;
    bool worker_running;
    pthread_t worker;
    kr_model_snapshot *current;
    /* Set: snapshot trees are built on this device (fusion/model_gpu.c);
     * used by the builder only, replaced only while no build is in flight. */
    kr_gpu_context *gpu;
    kr_device_tree_times gpu_times; /* of the last device build */
};

/* model_gpu.c: the snapshot tree over the job buffers, on the device when
 * one is set, else (or when that fails) on the host. */
kr_status kr_model_build_tree(kr_model *model, kr_kdtree **tree);

/* model_gpu.c: the device map's part of kr_model_integrate (fusion, then
 * eviction when over the cap) and of the snapshot's gather. */
kr_status kr_model_integrate_on_device(kr_model *model, const kr_cloud *cloud, const kr_pose *pose,
                                       uint64_t frame_index);
kr_status kr_model_gather(kr_model *model, uint64_t since, size_t *n);
/* model.c: eviction of the host map under the cap (used by both). */
kr_status kr_model_evict_host_map(kr_model *model, const kr_pose *pose, uint64_t frame_index);

/* model_snapshot.c */
kr_status kr_model_worker_start(kr_model *model);
void kr_model_worker_stop(kr_model *model);

#endif
