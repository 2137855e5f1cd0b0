/* The CUDA engine seen from plain C (DESIGN.md §4): no CUDA types here, so
 * pipeline/ can call it without CUDA headers. Implemented by the .cu files of gpu/; in
 * builds without CUDA the gpu/..._nocuda.c files answer KR_ERR_NO_DEVICE instead.
 *
 * Each compute step adds its entry point below and a stub to its
 * gpu/<step>_nocuda.c. */
#ifndef KR_GPU_H
#define KR_GPU_H

#include <stddef.h>

#include "core/kdtree_internal.h"
#include "core/preprocess_kernels.h"
#include "core/softreg_kernels.h"
#include "core/track_step.h"
#include "kinreg/pyramid.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One device: its stream, cuBLAS handle and reusable buffers (gpu/context.h). */
typedef struct kr_gpu_context kr_gpu_context;

/* Number of usable CUDA devices. When 0, `why` (may be NULL) receives the
 * reason, e.g. "cudaGetDeviceCount: no CUDA-capable device is detected". */
int kr_gpu_device_count(char *why, size_t why_len);

/* KR_ERR_NO_DEVICE when there is no such device, KR_ERR_CUDA when setting it
 * up fails; *out is untouched on failure. */
kr_status kr_gpu_context_create(kr_gpu_context **out, int device);
void kr_gpu_context_destroy(kr_gpu_context **ctx);
/* e.g. "cuda: NVIDIA H100 80GB HBM3 (sm_90)". */
const char *kr_gpu_context_describe(const kr_gpu_context *ctx);

/* Page-locked host memory (fast, asynchronous copies to and from devices). */
kr_status kr_gpu_host_alloc(void **out, size_t bytes);
void kr_gpu_host_free(void *p);

/* Device time of the last kr_gpu_preprocess's transfers (CUDA events): the
 * raw frame's upload and the pyramid's download, in ms (0 before any). */
void kr_gpu_transfer_times(const kr_gpu_context *ctx, double *upload_ms, double *download_ms);

/* ---- steps ---------------------------------------------------------------- */

/* Preprocessing on the device (gpu/preprocess.cu). `pyr` arrives with its
 * levels' sizes and intrinsics set and points/normals pointing into
 * pyr->storage (page-locked when possible); fills points, normals and counts.
 * The inputs were validated by kr_preprocess. */
kr_status kr_gpu_preprocess(kr_gpu_context *ctx, const kr_hd_preprocess_params *pp,
                            const kr_frame *frame, kr_pyramid *pyr);

/* Registration on the device (gpu/register_fused.cu, gpu/register_cublas.cu):
 * runs the schedule of p from (R, t) (in/out) on src (n) and dst (m) points,
 * 3 floats each, already validated and centred by kr_register. cublas != 0
 * selects the seed's cuBLAS formulation (stores the N×M matrix: KR_ERR_NOMEM
 * when it does not fit), else the fused streaming kernels (memory O(N + M)).
 * st receives the schedule's final state. */
kr_status kr_gpu_register(kr_gpu_context *ctx, int cublas, const kr_hd_reg_params *p,
                          const float *src, size_t n, const float *dst, size_t m, double R[9],
                          double t[3], kr_hd_reg_state *st);
/* Tracking on the device (gpu/track.cu): the whole coarse-to-fine Newton
 * loop of one frame — descent, per-point terms, block sums in double, the
 * 6×6 solve, the Armijo line search, convergence tests — with the pose kept
 * on the device and only the result copied back. The tree is uploaded when
 * it is not the one already there (kr_kdtree serial); the pyramid's levels
 * are read where kr_gpu_preprocess left them when pyr->device_stamp says so,
 * else uploaded. `count` seeds of the same pyramid and plan (1 to
 * KR_GPU_TRACK_MAX_SEEDS) run side by side in one launch, out[k] from
 * seeds[k]. */
#define KR_GPU_TRACK_MAX_SEEDS 256
kr_status kr_gpu_track(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_pyramid *pyr,
                       const kr_ts_plan *plan, const kr_pose *seeds, int count, kr_ts_result *out);

/* Parity entry points: one linearisation of `cloud` at `pose` (out gets
 * F, g, h, residual, points, inliers; the pose and centroid fields are not
 * set), the descent cells of n query points (3 floats each), and the device
 * copy of the tree's nodes and cells (as many as the tree has). */
kr_status kr_gpu_linearize(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_cloud *cloud,
                           const kr_pose *pose, const kr_nk_params *P, kr_ts_result *out);
/* The same for level `level` of a pyramid (read where kr_gpu_preprocess
 * left it when pyr->device_stamp says so, else uploaded). */
kr_status kr_gpu_linearize_level(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_pyramid *pyr,
                                 int level, const kr_pose *pose, const kr_nk_params *P,
                                 kr_ts_result *out);
kr_status kr_gpu_descend(kr_gpu_context *ctx, const kr_kdtree *tree, const float *q, size_t n,
                         uint32_t *cells);
/* The model k-d tree of n points built on the device (gpu/tree_build.cu), the
 * twin of kr_kdtree_build: the same complete-tree shape, split axes and planes
 * and cells (core/kdtree_build_kernels.h): the same tree where no two points
 * tie on a coordinate (ties go by point index here, by the quickselect's
 * history on the host; tests/level_build.h is this build's exact host
 * reference). The tree comes back on the host
 * (for the host-side readers) and keeps its device copy (tree->device), which
 * kr_gpu_track reads in place instead of uploading. Blocks the calling thread
 * until the tree is down: call it on a background thread. times (may be NULL)
 * gets the device time of the points' upload, the build kernels and the
 * tree's download. Inputs are checked as kr_kdtree_build checks them. */
typedef struct {
    double upload_ms, build_ms, download_ms;
} kr_gpu_tree_times;
kr_status kr_gpu_tree_build(kr_gpu_context *ctx, const float *points, const float *normals,
                            size_t n, kr_kdtree **out, kr_gpu_tree_times *times);
/* A second context on ctx's device, with its own stream and buffers, for
 * another thread (a context is used by one thread at a time). */
kr_status kr_gpu_context_twin(const kr_gpu_context *ctx, kr_gpu_context **out);

kr_status kr_gpu_tree_download(kr_gpu_context *ctx, const kr_kdtree *tree, kr_kd_node *nodes,
                               kr_kd_cell *cells);

#ifdef __cplusplus
}
#endif
#endif
