/* The model k-d tree on a CUDA device (gpu/kdtree_cuda.cu): its device build,
 * the twin of kr_kdtree_build (core/kdtree.c), and the device copy it leaves
 * (kr_kdtree.device), which the tracker (pipeline/track/track_cuda.cu) reads
 * in place: no upload for trees built there. The tree is the ground floor's;
 * its CUDA twin lives here because the ground floor holds no CUDA. No CUDA
 * types, so C callers may look at it too. Builds without CUDA answer
 * KR_ERR_NO_DEVICE (gpu/kdtree_nocuda.c). */
#ifndef KINREG_GPU_KDTREE_CUDA_H
#define KINREG_GPU_KDTREE_CUDA_H

#include <stddef.h>

#include "core/kdtree_layout.h"
#include "gpu/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int device;            /* CUDA device index that holds the copy */
    kr_kdtree_node *nodes; /* n_internal entries (at least one slot) */
    kr_kdtree_cell *cells; /* n entries, leaf order */
    void *block;           /* the one allocation behind nodes and cells */
} kr_kdtree_device_copy;

/* The model k-d tree of n points built on the device, the twin of
 * kr_kdtree_build: the same complete-tree shape, split axes and planes and
 * cells (core/kdtree_build_kernels.h): the same tree where no two points tie
 * on a coordinate (ties go by point index here, by the quickselect's history
 * on the host; tests/level_build.h is this build's exact host reference). The
 * tree comes back on the host (for the host-side readers) and keeps its device
 * copy (tree->device), which kr_track_cuda reads in place instead of uploading.
 * Blocks the calling thread until the tree is down: call it on a background
 * thread. times (may be NULL) gets the device time of the points' upload, the
 * build kernels and the tree's download. Inputs are checked as kr_kdtree_build
 * checks them. */
kr_status kr_kdtree_cuda_build(kr_gpu_context *ctx, const float *points, const float *normals,
                               size_t n, kr_kdtree **out, kr_device_tree_times *times);

#ifdef __cplusplus
}
#endif
#endif
