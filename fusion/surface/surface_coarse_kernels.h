/* A coarser volume's voxel from the fine voxels it covers (the factor³ of
 * them; kr_surface_extract_coarse), written once for both engines: their
 * distances averaged by weight, their colours by how many frames coloured
 * them. The sums run over the fine voxels in their block's order (x
 * fastest), one fine block per coarse voxel when the factor divides the
 * block's side, and the CUDA file is compiled with -fmad=false: the two
 * engines' coarse volumes agree bit for bit. */
#ifndef KINREG_FUSION_SURFACE_COARSE_KERNELS_H
#define KINREG_FUSION_SURFACE_COARSE_KERNELS_H

#include "fusion/surface/surface_kernels.h"

typedef struct {
    float dw, w, rgb[3], cw;
} kr_surface_coarse_sum;

static inline KR_HD void kr_surface_coarse_add(kr_surface_coarse_sum *sum,
                                               const kr_surface_voxel *vx)
{
    if (!(vx->w > 0.0f)) return;
    sum->dw += vx->d * vx->w;
    sum->w += vx->w;
    for (int k = 0; k < 3; k++)
        sum->rgb[k] += (float)vx->rgb[k] * vx->colour_w;
    sum->cw += vx->colour_w;
}

/* The coarse voxel of a sum (left unseen when nothing was). */
static inline KR_HD void kr_surface_coarse_voxel(const kr_surface_coarse_sum *sum,
                                                 kr_surface_voxel *vx)
{
    if (!(sum->w > 0.0f)) return;
    vx->d = sum->dw / sum->w;
    vx->w = sum->w;
    if (sum->cw > 0.0f) {
        for (int k = 0; k < 3; k++)
            vx->rgb[k] = (uint8_t)(sum->rgb[k] / sum->cw + 0.5f);
        vx->colour_w = 1;
    }
}

#endif
