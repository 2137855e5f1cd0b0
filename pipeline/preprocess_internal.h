/* The engines behind kr_preprocess. Each receives a validated frame and a
 * pyramid whose levels already carry sizes, intrinsics and buffer pointers. */
#ifndef KR_PREPROCESS_INTERNAL_H
#define KR_PREPROCESS_INTERNAL_H

#include "kinreg/preprocess.h"
#include "pipeline/preprocess_kernels.h"

/* OpenMP engine (pipeline/preprocess_cpu.c); cannot fail. */
void kr_preprocess_cpu(const kr_preprocess_config *cfg, const kr_frame *frame, int threads,
                       kr_pyramid *pyr);

/* Depth settings of a frame under a configuration, as the kernels take them. */
static inline kr_hd_depth_params kr_preprocess_depth_params(const kr_preprocess_config *cfg,
                                                            const kr_frame *frame)
{
    kr_hd_depth_params dp;
    dp.encoding = (int)frame->encoding;
    dp.scale = frame->depth_scale;
    dp.min_depth = cfg->min_depth;
    dp.max_depth = cfg->max_depth;
    return dp;
}

/* depth_step·fx/2 of a level: a normal's half-baseline at depth z is
 * ⌊reach·z⌋ + 1 pixels (kr_hd_normal_reach). Computed here once for both
 * engines, so they pass the kernel the same bits. */
static inline float kr_preprocess_normal_reach(const kr_preprocess_config *cfg,
                                               const kr_intrinsics *k)
{
    return 0.5f * cfg->depth_step * k->fx;
}

/* Downsampling keeps depths within this many discontinuity thresholds of the
 * block's median: a wider band than normals use, since a 2×2 block at a
 * coarse level spans more surface. */
#define KR_DOWNSAMPLE_TOLERANCE 3.0f

#endif
