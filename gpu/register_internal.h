/* What the two CUDA registration engines share (gpu/register_fused.cu,
 * gpu/register_cublas.cu). CUDA-side header: gpu/ .cu files only. */
#ifndef KR_GPU_REGISTER_INTERNAL_H
#define KR_GPU_REGISTER_INTERNAL_H

#include "core/softreg_kernels.h"
#include "gpu/context.h"

/* Pose, Horn moments and schedule: on the device for the fused engine (so no
 * host round trip per step), on the host for the cuBLAS one (as in the seed). */
typedef struct {
    double R[9], t[3];
    double mom[16];
    kr_hd_reg_state st;
} kr_gpu_reg_state;

/* Device copies of the inputs: src as given (AoS, n×3), dst as three columns
 * (x[m], y[m], z[m]: column-major m×3, what cuBLAS takes). */
typedef struct {
    const float *src;
    const float *dst; /* dst, dst + m, dst + 2m */
    size_t n, m;
} kr_gpu_reg_points;

/* The fused engine as one cooperative kernel for the whole schedule
 * (gpu/register_persistent.cu). *ran = 0 when the device cannot run it
 * (no cooperative launch, too little shared memory): the caller then uses
 * the multi-kernel fused engine. */
kr_status kr_gpu_register_persistent(kr_gpu_context *ctx, const kr_hd_reg_params *p,
                                     const kr_gpu_reg_points *pts, kr_gpu_reg_state *state,
                                     int *ran);

/* Softassign with the N × M plan held in the blocks' shared memory
 * (gpu/softassign_onchip.cu). *ran = 0 where it does not fit (or a column
 * sum outgrew its fixed point): the caller then uses the streaming kernel. */
kr_status kr_gpu_softassign_onchip(kr_gpu_context *ctx, const kr_hd_reg_params *p,
                                   const kr_gpu_reg_points *pts, kr_gpu_reg_state *state, int *ran);
kr_status kr_gpu_register_cublas(kr_gpu_context *ctx, const kr_hd_reg_params *p,
                                 const kr_gpu_reg_points *pts, kr_gpu_reg_state *state);

#endif
