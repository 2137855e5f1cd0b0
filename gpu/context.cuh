/* The CUDA device context behind kr_gpu_context (gpu/engine.h), for the .cu
 * files of gpu/ only: the device, the tracking stream, the cuBLAS handle (made
 * on first use) and grow-only scratch buffers that steps reuse frame after
 * frame. */
#ifndef KINREG_GPU_CONTEXT_CUH
#define KINREG_GPU_CONTEXT_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu/cublas_loader.cuh"
#include "gpu/cuda_check.cuh"
#include "gpu/engine.h"

/* Device buffers, one slot per use; a step adds its slots here. */
typedef enum {
    KR_GPU_SCRATCH_RAW,         /* preprocess: the raw uint16 frame */
    KR_GPU_SCRATCH_PYRAMID,     /* preprocess: points and normals of every level,
                                   laid out as kr_pyramid.storage; stays valid
                                   after kr_preprocess_cuda for device-side steps */
    KR_GPU_SCRATCH_COUNTS,      /* preprocess: valid point/normal counts per level */
    KR_GPU_SCRATCH_REG_POINTS,  /* register: src, dst (SoA) and the moved src */
    KR_GPU_SCRATCH_REG_PARTIAL, /* register: per-chunk partial row sums (fused) */
    KR_GPU_SCRATCH_REG_VECTORS, /* register: per-row/column vectors (scalings, sums) */
    KR_GPU_SCRATCH_REG_STATE,   /* register: pose, moments and schedule on the device */
    KR_GPU_SCRATCH_REG_MATRIX,  /* register: the N×M matrix of the cuBLAS engine */
    KR_GPU_SCRATCH_TREE_NODES,  /* track: the model tree's internal nodes (heap order) */
    KR_GPU_SCRATCH_TREE_CELLS,  /* track: the model tree's leaf cells */
    KR_GPU_SCRATCH_TRACK,       /* track: plan, state and per-block partial sums */
    KR_GPU_SCRATCH_QUERY,       /* track: query points and answers of the parity entry points */
    KR_GPU_SCRATCH_TREE_BUILD,  /* tree build: points, sorted lists, scans (gpu/kdtree_cuda.cu) */
    KR_GPU_SCRATCH_SLOTS
} kr_gpu_scratch_slot;

/* Page-locked host buffers for transfers, one slot per use. */
typedef enum {
    KR_GPU_STAGING_RAW,       /* preprocess: the raw frame on its way up */
    KR_GPU_STAGING_COUNTS,    /* preprocess: counts on their way down */
    KR_GPU_STAGING_REG_STATE, /* register: the device state on its way down */
    KR_GPU_STAGING_TRACK,     /* track: the plan up, the result down */
    KR_GPU_STAGING_SLOTS
} kr_gpu_staging_slot;

typedef struct {
    void *ptr;
    size_t bytes;
} kr_gpu_buffer;

struct kr_gpu_context {
    int device;
    cudaStream_t stream; /* the tracking stream: every step of a frame runs on it */
    cublasHandle_t cublas; /* NULL until kr_gpu_cublas */
    kr_gpu_buffer scratch[KR_GPU_SCRATCH_SLOTS];
    kr_gpu_buffer staging[KR_GPU_STAGING_SLOTS];
    char description[256];
    /* The device copy of the pyramid that kr_preprocess_cuda left in
     * KR_GPU_SCRATCH_PYRAMID carries this stamp (kr_pyramid.device_stamp). */
    unsigned long long pyramid_stamp;
    /* kr_kdtree serial of the tree in the TREE slots (0: none). */
    unsigned long long tree_serial;
    /* The tracker's kernel sequence of one frame as an instantiated CUDA
     * graph (pipeline/track/track_cuda.cu), and what it was captured for. */
    cudaGraphExec_t track_graph;
    unsigned char track_graph_key[256];
    /* Events around the last preprocess's transfers (kr_preprocess_cuda_transfer_times):
     * upload start/end, download start/end; created on first use. */
    cudaEvent_t transfer_events[4];
    float upload_ms, download_ms;
};

/* Makes ctx's device current on the calling thread: the tracker thread is not
 * the one that created the context, and the current device is per thread. */
kr_status kr_gpu_enter(kr_gpu_context *ctx);

/* A device (scratch) or page-locked host (staging) buffer of at least `bytes`
 * for `slot`. Grow-only: reallocated only when too small, so steady-state
 * frames allocate nothing; contents are not kept across growth. Not safe while
 * work on ctx->stream still uses the slot. */
kr_status kr_gpu_scratch(kr_gpu_context *ctx, kr_gpu_scratch_slot slot, size_t bytes, void **out);
kr_status kr_gpu_staging(kr_gpu_context *ctx, kr_gpu_staging_slot slot, size_t bytes, void **out);

/* cuBLAS (loaded on first use, gpu/cublas_loader.cuh) and ctx's handle, made
 * on first use and bound to ctx->stream. */
kr_status kr_gpu_cublas(kr_gpu_context *ctx, const kr_cublas_api **api, cublasHandle_t *handle);

#endif
