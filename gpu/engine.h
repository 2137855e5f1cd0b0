/* The compute engine as the steps see it (DESIGN.md §4): the backend a
 * kr_device chose, its OpenMP threads, and for the CUDA backend the device
 * context every step's CUDA twin runs on. No CUDA types here, so any C file
 * may include it; the context's insides are gpu/context.cuh, for .cu files.
 *
 * Each compute step declares its own CUDA entry points in a header beside it
 * (pipeline/track/track_cuda.h, pipeline/preprocess/preprocess_cuda.h, …),
 * implemented in its .cu files; in builds without CUDA its *_nocuda.c
 * answers KR_ERR_NO_DEVICE instead. This header and gpu/engine_nocuda.c do
 * the same for the context. */
#ifndef KINREG_GPU_ENGINE_H
#define KINREG_GPU_ENGINE_H

#include <stddef.h>

#include "kinreg/device.h"
#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One device: its stream, cuBLAS handle and reusable buffers (gpu/context.cuh). */
typedef struct kr_gpu_context kr_gpu_context;

/* The CUDA context of a CUDA device; NULL for the CPU backend. */
kr_gpu_context *kr_device_gpu(const kr_device *dev);
/* OpenMP threads the CPU engine uses (≥ 1). */
int kr_device_threads(const kr_device *dev);

/* Number of usable CUDA devices. When 0, `why` (may be NULL) receives the
 * reason, e.g. "cudaGetDeviceCount: no CUDA-capable device is detected". */
int kr_gpu_device_count(char *why, size_t why_len);

/* KR_ERR_NO_DEVICE when there is no such device, KR_ERR_CUDA when setting it
 * up fails; *out is untouched on failure. */
kr_status kr_gpu_context_create(kr_gpu_context **out, int device);
void kr_gpu_context_destroy(kr_gpu_context **ctx);
/* Its CUDA device ordinal (-1 for NULL). */
int kr_gpu_context_device(const kr_gpu_context *ctx);
/* e.g. "cuda: NVIDIA H100 80GB HBM3 (sm_90)". */
const char *kr_gpu_context_describe(const kr_gpu_context *ctx);
/* A second context on ctx's device, with its own stream and buffers, for
 * another thread (a context is used by one thread at a time). */
kr_status kr_gpu_context_twin(const kr_gpu_context *ctx, kr_gpu_context **out);

/* Page-locked host memory (fast, asynchronous copies to and from devices). */
kr_status kr_gpu_host_alloc(void **out, size_t bytes);
void kr_gpu_host_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
