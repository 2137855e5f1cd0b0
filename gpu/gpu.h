/* The CUDA engine seen from plain C (DESIGN.md §4): no CUDA types here, so
 * pipeline/ can call it without CUDA headers. Implemented by the .cu files of gpu/; in
 * builds without CUDA the gpu/..._nocuda.c files answer KR_ERR_NO_DEVICE instead.
 *
 * Each compute step adds its entry point below and a stub to its
 * gpu/<step>_nocuda.c. */
#ifndef KR_GPU_H
#define KR_GPU_H

#include <stddef.h>

#include "core/preprocess_kernels.h"
#include "core/softreg_kernels.h"
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

#ifdef __cplusplus
}
#endif
#endif
