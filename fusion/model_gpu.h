/* The model's snapshot trees built on a CUDA device (gpu/tree_build.cu)
 * instead of the host: the tree of the active voxels then lives on the
 * device where the CUDA tracker reads it in place, and the snapshot worker
 * spends some milliseconds instead of tens. The swap stays as it is: the
 * tracker keeps the snapshot it holds (its device copy with it) while the
 * next is built, so it never waits (double buffering by snapshot). */
#ifndef KINREG_FUSION_MODEL_GPU_H
#define KINREG_FUSION_MODEL_GPU_H

#include "gpu/gpu.h"
#include "kinreg/model.h"

/* From the next snapshot on, build trees on the device of `like` (with a
 * context of the model's own: the worker thread uses it). A build that fails
 * on the device falls back to the host build with a warning. Call before
 * requesting snapshots. */
kr_status kr_model_build_trees_on(kr_model *model, const kr_gpu_context *like);

/* Device times of the last snapshot built on the device (zeros before any,
 * or when the last one was built on the host). */
kr_gpu_tree_times kr_model_last_tree_times(kr_model *model);

/* From now on, fuse on the device of `like` (gpu/fusion_gpu.h, with a
 * context of the model's own): the voxel map moves there (its content so far
 * with it), each kr_model_integrate fuses the cloud there, the snapshot's
 * active voxels are gathered there, and kr_model_save_ply downloads the map.
 * The device map holds the host map's voxels, bit for bit; the memory cap
 * evicts as on the host (the map comes down, the host's eviction runs, the
 * survivors go back up: once per cap crossing, every frame while the recent
 * voxels alone exceed the cap). Call from the integrating
 * thread, or before it starts. */
kr_status kr_model_fuse_on(kr_model *model, const kr_gpu_context *like);

/* Device time of the last integrate (the cloud's upload included) and of the
 * last gather, in ms; zeros when fusing on the host. */
void kr_model_fuse_times(kr_model *model, double *integrate_ms, double *gather_ms);

#endif
