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
#include "fusion/surface/surface_view.h"

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

/* Coarse voxel i (x fastest) of a coarse block, when the factor divides
 * the block's side: the factor³ fine voxels it covers all lie in one of the
 * fine blocks the coarse block covers (fine_of: their indices, factor³ of
 * them, x fastest, -1 where none), summed in that block's order. The
 * block-major order of the sums (x fastest) is the CPU's accumulate(). */
static inline KR_HD void kr_surface_coarse_of(const kr_surface_view *fine, const int32_t *fine_of,
                                              int factor, int i, kr_surface_voxel *out)
{
    out->d = 0.0f;
    out->w = 0.0f;
    for (int k = 0; k < 3; k++)
        out->rgb[k] = 0;
    out->colour_w = 0;
    const int span = KR_SURFACE_BLOCK / factor; /* coarse voxels per fine block side */
    int l[3] = {i % KR_SURFACE_BLOCK, i / KR_SURFACE_BLOCK % KR_SURFACE_BLOCK,
                i / (KR_SURFACE_BLOCK * KR_SURFACE_BLOCK)};
    int sub[3], base[3];
    for (int k = 0; k < 3; k++) {
        sub[k] = l[k] / span;
        base[k] = l[k] % span * factor;
    }
    int32_t b = fine_of[(sub[2] * factor + sub[1]) * factor + sub[0]];
    if (b < 0) return;
    const kr_surface_voxel *vx = kr_surface_view_block(fine, (size_t)b);
    kr_surface_coarse_sum sum = {0.0f, 0.0f, {0.0f, 0.0f, 0.0f}, 0.0f};
    for (int z = base[2]; z < base[2] + factor; z++)
        for (int y = base[1]; y < base[1] + factor; y++)
            for (int x = base[0]; x < base[0] + factor; x++)
                kr_surface_coarse_add(&sum, vx + (z * KR_SURFACE_BLOCK + y) * KR_SURFACE_BLOCK + x);
    kr_surface_coarse_voxel(&sum, out);
}

#endif
