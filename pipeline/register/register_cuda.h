/* The CUDA twins of soft registration (pipeline/register/register_fused.cu,
 * register_cublas.cu, register_persistent.cu, softassign_onchip.cu), seen
 * from plain C: the twins of register_cpu.c, with the same per-pair math
 * (softreg_kernels.h). Builds without CUDA answer KR_ERR_NO_DEVICE
 * (register_nocuda.c). */
#ifndef KINREG_PIPELINE_REGISTER_REGISTER_CUDA_H
#define KINREG_PIPELINE_REGISTER_REGISTER_CUDA_H

#include <stddef.h>

#include "gpu/engine.h"
#include "pipeline/register/softreg_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the schedule of p from (R, t) (in/out) on src (n) and dst (m) points,
 * 3 floats each, already validated and centred by kr_register. cublas != 0
 * selects the seed's cuBLAS formulation (stores the N×M matrix: KR_ERR_NOMEM
 * when it does not fit), else the fused streaming kernels (memory O(N + M)).
 * st receives the schedule's final state. */
kr_status kr_register_cuda(kr_gpu_context *ctx, int cublas, const kr_register_params *p,
                           const float *src, size_t n, const float *dst, size_t m, double R[9],
                           double t[3], kr_register_state *st);

#ifdef __cplusplus
}
#endif
#endif
