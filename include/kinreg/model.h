/* kinreg — the running model: a voxel map in world coordinates (weighted mean
 * point and normal per voxel, last-seen frame) into which each tracked frame is
 * fused, and k-d tree snapshots of its active part rebuilt in the background.
 * Tracking reads the last completed snapshot and never waits for a rebuild. */
#ifndef KINREG_MODEL_H
#define KINREG_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/device.h"
#include "kinreg/kdtree.h"
#include "kinreg/pose.h"
#include "kinreg/pyramid.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_model kr_model;
typedef struct kr_model_snapshot kr_model_snapshot;

typedef struct {
    float voxel_size;       /* metres, default 0.015 */
    int active_window;      /* voxels seen in the last N frames form a snapshot (default 50) */
    float max_weight;       /* per-voxel weight cap so the map can follow change (default 64) */
    bool background;        /* rebuild snapshots on a background thread (default true);
                               false rebuilds inside kr_model_request_snapshot (tests) */
    bool geometric_weight;  /* weigh each point by |n·ray|/z² clipped to [0.05, 1] — Kinect
                               noise grows with depth and incidence (default true);
                               false: every point weighs 1 */
    /* Bounded memory over a long session: the voxel map holds at most
     * kr_model_max_voxels voxels, memory_mib MiB counted as
     * KR_MODEL_BYTES_PER_VOXEL per voxel (its record, hash slots and
     * active-list entry with their growth slack; default 512 MiB, about
     * 3.2 M voxels; 0 = no cap). It bounds the voxel count: kr_model_size
     * never exceeds it when kr_model_integrate returns (within the call the
     * map holds one frame's new voxels more). Past the cap the oldest voxels
     * are evicted (dropped, not merged) down to 90 % of it: first those
     * unseen for evict_after frames (default 900, 30 s at 30 Hz; never fewer
     * than active_window) AND farther than evict_distance metres from the
     * camera (default 3), then the unseen ones near it too. Only when all
     * of those together are not enough (the voxels seen in the last
     * evict_after frames alone exceed the cap) do recent voxels go, oldest
     * first, the active window last; a warning says so once (tracking then
     * sees less of the scene). kr_model_save_ply writes what the map still
     * holds. */
    double memory_mib;
    int evict_after;
    float evict_distance;
} kr_model_config;

#define KR_MODEL_BYTES_PER_VOXEL 168

KR_API void kr_model_config_default(kr_model_config *cfg);
KR_API kr_status kr_model_create(kr_model **out, const kr_model_config *cfg);
/* Waits for a rebuild in flight, then frees everything. */
KR_API void kr_model_destroy(kr_model **model);

/* Fuses the points of `cloud` that have normals, transformed by `pose`
 * (camera-to-world), into the voxel map, stamping them with `frame_index`. */
KR_API kr_status kr_model_integrate(kr_model *model, const kr_cloud *cloud, const kr_pose *pose,
                                    uint64_t frame_index);

/* Re-fusion (the live refiner's, DESIGN.md §2): empties the map and fuses
 * the `n` clouds anew, cloud i at poses[i], all stamped with `frame_index`
 * (so the tracker's next snapshot holds all of them), then requests a
 * snapshot. Waits for a rebuild in flight first; the caller must be the
 * thread that integrates, with no fusion in flight. On failure (out of
 * memory) the map holds the clouds fused until then. */
KR_API kr_status kr_model_refuse(kr_model *model, const kr_cloud *clouds, const kr_pose *poses,
                                 int n, uint64_t frame_index);

/* Starts building a snapshot of the voxels seen since frame_index − active_window
 * (last_seen ≥ frame_index − active_window). The voxels are gathered on the
 * calling thread, which must be the one that integrates; the k-d tree is built
 * on the worker when background. Returns at once when background (a request
 * while one is in flight is ignored). With no such voxels nothing is built and
 * the last snapshot stays (KR_OK). Synchronous mode returns the build status. */
KR_API kr_status kr_model_request_snapshot(kr_model *model, uint64_t frame_index);
/* The same over the voxels seen since frame `since` (0: the whole map). */
KR_API kr_status kr_model_request_snapshot_since(kr_model *model, uint64_t frame_index,
                                                 uint64_t since);
/* Blocks until no rebuild is in flight. */
KR_API void kr_model_wait_idle(kr_model *model);

/* The last completed snapshot, reference-counted; NULL before the first. Safe
 * from any thread; a snapshot stays valid until released, even after a newer
 * one is swapped in or the model is destroyed. */
KR_API kr_model_snapshot *kr_model_snapshot_acquire(kr_model *model);
KR_API void kr_model_snapshot_release(kr_model_snapshot **snap);
KR_API const kr_kdtree *kr_model_snapshot_tree(const kr_model_snapshot *snap);
/* Frame index the snapshot was requested at. */
KR_API uint64_t kr_model_snapshot_frame(const kr_model_snapshot *snap);

/* Voxels in the map (safe to read from any thread). */
KR_API size_t kr_model_size(const kr_model *model);
/* Voxels evicted so far under memory_mib (safe to read from any thread). */
KR_API uint64_t kr_model_evicted(const kr_model *model);
/* The voxel count memory_mib allows (0 = no cap). */
KR_API size_t kr_model_max_voxels(const kr_model_config *cfg);
/* Writes every voxel as a binary little-endian PLY with x y z nx ny nz (float);
 * a voxel whose normals cancel out gets normal (0, 0, 0). Call it from the
 * integrating thread (or once it has stopped). */
KR_API kr_status kr_model_save_ply(const kr_model *model, const char *path);

/* The model on a CUDA device (dev made with the CUDA backend; each call
 * takes a context of the model's own on dev's device, since the model's
 * threads use it).
 *
 * kr_model_build_trees_on: from the next snapshot on, the snapshot trees are
 * built on the device instead of the host: the tree of the active voxels then
 * lives on the device where the CUDA tracker reads it in place, and the
 * snapshot worker spends some milliseconds instead of tens. The swap stays as
 * it is: the tracker keeps the snapshot it holds (its device copy with it)
 * while the next is built, so it never waits (double buffering by snapshot).
 * A build that fails on the device falls back to the host build with a
 * warning. Call before requesting snapshots.
 *
 * kr_model_fuse_on: from now on the voxel map lives on the device (its
 * content so far with it), each kr_model_integrate fuses the cloud there, the
 * snapshot's active voxels are gathered there, and kr_model_save_ply
 * downloads the map. The device map holds the host map's voxels, bit for bit;
 * the memory cap evicts as on the host (the map comes down, the host's
 * eviction runs, the survivors go back up: once per cap crossing, every pass
 * ending at or under the cap). Call from the integrating
 * thread, or before it starts.
 *
 * KR_ERR_NO_DEVICE for a device that is not a CUDA one. */
KR_API kr_status kr_model_build_trees_on(kr_model *model, const kr_device *dev);
KR_API kr_status kr_model_fuse_on(kr_model *model, const kr_device *dev);

/* Device times of the model's work on a CUDA device (zeros where it ran on the
 * host, or before any): the last integrate (the cloud's upload included) and
 * gather, and the last snapshot tree built there. */
typedef struct {
    double integrate_ms, gather_ms;
    kr_device_tree_times tree;
} kr_model_device_times;
KR_API void kr_model_last_device_times(kr_model *model, kr_model_device_times *out);

#ifdef __cplusplus
}
#endif
#endif
