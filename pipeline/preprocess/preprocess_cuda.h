/* The CUDA twin of preprocessing (pipeline/preprocess/preprocess_cuda.cu),
 * seen from plain C: the twin of pipeline/preprocess/preprocess_cpu.c, with
 * the same per-pixel math (preprocess_kernels.h). Builds without CUDA answer
 * KR_ERR_NO_DEVICE (preprocess_nocuda.c). */
#ifndef KINREG_PIPELINE_PREPROCESS_PREPROCESS_CUDA_H
#define KINREG_PIPELINE_PREPROCESS_PREPROCESS_CUDA_H

#include "gpu/engine.h"
#include "kinreg/pyramid.h"
#include "pipeline/preprocess/preprocess_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `pyr` arrives with its levels' sizes and intrinsics set and points/normals
 * pointing into pyr->storage (page-locked when possible); fills points,
 * normals and counts. The inputs were validated by kr_preprocess. */
kr_status kr_preprocess_cuda(kr_gpu_context *ctx, const kr_preprocess_params *pp,
                             const kr_frame *frame, kr_pyramid *pyr);

/* Device time of the last kr_preprocess_cuda's transfers (CUDA events): the
 * raw frame's upload and the pyramid's download, in ms (0 before any). */
void kr_preprocess_cuda_transfer_times(const kr_gpu_context *ctx, double *upload_ms,
                                       double *download_ms);

#ifdef __cplusplus
}
#endif
#endif
