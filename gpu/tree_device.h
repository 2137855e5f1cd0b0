/* A model tree's own copy on a device (kr_kdtree.device), made by the
 * device build (gpu/tree_build.cu) and read in place by the tracker
 * (gpu/track.cu): no upload for trees built there. No CUDA types, so C
 * callers may look at it too. */
#ifndef KR_GPU_TREE_DEVICE_H
#define KR_GPU_TREE_DEVICE_H

#include "core/kdtree_internal.h"

typedef struct {
    int device;        /* CUDA device index that holds the copy */
    kr_kd_node *nodes; /* n_internal entries (at least one slot) */
    kr_kd_cell *cells; /* n entries, leaf order */
    void *block;       /* the one allocation behind nodes and cells */
} kr_gpu_tree_device;

#endif
