/* The OpenMP engine of preprocessing (pipeline/preprocess_cpu.c), called by
 * kr_preprocess; its CUDA twin is kr_gpu_preprocess (gpu/gpu.h). It receives
 * a validated frame, the per-frame kernel parameters and a pyramid whose
 * levels already carry sizes, intrinsics and buffer pointers. */
#ifndef KR_PREPROCESS_CPU_H
#define KR_PREPROCESS_CPU_H

#include "core/preprocess_kernels.h"
#include "kinreg/pyramid.h"

/* Cannot fail. */
void kr_preprocess_cpu(const kr_hd_preprocess_params *pp, const kr_frame *frame, int threads,
                       kr_pyramid *pyr);

#endif
