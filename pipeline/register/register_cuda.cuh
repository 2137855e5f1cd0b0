/* What the two CUDA registration engines share (pipeline/register/register_fused.cu,
 * pipeline/register/register_cublas.cu). CUDA-side header: gpu/ .cu files only. */
#ifndef KINREG_PIPELINE_REGISTER_REGISTER_CUDA_CUH
#define KINREG_PIPELINE_REGISTER_REGISTER_CUDA_CUH

#include "pipeline/register/softreg_kernels.h"
#include "gpu/context.cuh"
#include "pipeline/register/register_cuda.h"

/* Pose, Horn moments and schedule: on the device for the fused engine (so no
 * host round trip per step), on the host for the cuBLAS one (as in the seed). */
typedef struct {
    double R[9], t[3];
    double mom[16];
    kr_register_state st;
} kr_register_cuda_state;

/* Device copies of the inputs: src as given (AoS, n×3), dst as three columns
 * (x[m], y[m], z[m]: column-major m×3, what cuBLAS takes). */
typedef struct {
    const float *src;
    const float *dst; /* dst, dst + m, dst + 2m */
    size_t n, m;
} kr_register_cuda_points;

/* The fused engine as one cooperative kernel for the whole schedule
 * (pipeline/register/register_persistent.cu). *ran = 0 when the device cannot run it
 * (no cooperative launch, too little shared memory): the caller then uses
 * the multi-kernel fused engine. */
kr_status kr_register_cuda_persistent(kr_gpu_context *ctx, const kr_register_params *p,
                                      const kr_register_cuda_points *pts,
                                      kr_register_cuda_state *state, int *ran);

/* Softassign with the N × M plan held in the blocks' shared memory
 * (pipeline/register/softassign_onchip.cu). *ran = 0 where it does not fit (or a column
 * sum outgrew its fixed point): the caller then uses the streaming kernel. */
kr_status kr_register_cuda_softassign_onchip(kr_gpu_context *ctx, const kr_register_params *p,
                                             const kr_register_cuda_points *pts,
                                             kr_register_cuda_state *state, int *ran);
kr_status kr_register_cuda_cublas(kr_gpu_context *ctx, const kr_register_params *p,
                                  const kr_register_cuda_points *pts,
                                  kr_register_cuda_state *state);

#endif
