/* The OpenMP engine of preprocessing (pipeline/preprocess/preprocess_cpu.c), called by
 * kr_preprocess; its CUDA twin is kr_preprocess_cuda (gpu/engine.h). It receives
 * a validated frame, the per-frame kernel parameters and a pyramid whose
 * levels already carry sizes, intrinsics and buffer pointers. */
#ifndef KINREG_PIPELINE_PREPROCESS_PREPROCESS_CPU_H
#define KINREG_PIPELINE_PREPROCESS_PREPROCESS_CPU_H

#include "pipeline/preprocess/preprocess_kernels.h"
#include "kinreg/pyramid.h"

/* Cannot fail. */
void kr_preprocess_cpu(const kr_preprocess_params *pp, const kr_frame *frame, int threads,
                       kr_pyramid *pyr);

#endif
