/* The surface's per-voxel math, written once for both engines (DESIGN.md §4):
 * a truncated signed distance per voxel, averaged over the frames that see
 * it (Curless and Levoy's volumetric method, as KinectFusion uses it).
 *
 * A voxel centred at camera point p = (x, y, z) projects to the nearest pixel of
 * K·distort(x/z, y/z); the frame's organised level-0 cloud gives the depth
 * z_m measured there. Its signed distance along the ray is
 *
 *     sdf = (z_m − z)·√(1 + (x/z)² + (y/z)²)        (> 0: in front of the surface)
 *
 * clamped to ±τ. Voxels farther behind the surface than τ are left alone
 * (the frame says nothing about them); those in front are pulled towards +τ,
 * which carves free space where something has moved away.
 *
 * The Kinect's depth step at z is s(z) = depth_step·z² (1.2 cm at 2 m), and
 * its noise a fraction of a step. So the truncation grows with it,
 * τ = max(truncation_voxels·voxel, 2·s(z)) — a band narrower than two steps
 * would cut real surface away — and each observation weighs
 * w = min(1, (voxel / s(z))²): an inverse variance, normalised so that
 * observations finer than a voxel count fully. depth_step = 0 turns the
 * noise model off (τ fixed, every weight 1). The running average keeps at
 * most max_weight, so the surface can still follow change. */
#ifndef KINREG_FUSION_SURFACE_KERNELS_H
#define KINREG_FUSION_SURFACE_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/kr_hd.h"
#include "kinreg/frame.h"

/* Voxels along each side of a block; blocks are what memory is counted in. */
#define KR_SURFACE_BLOCK 8
#define KR_SURFACE_BLOCK_VOXELS (KR_SURFACE_BLOCK * KR_SURFACE_BLOCK * KR_SURFACE_BLOCK)

typedef struct {
    float d;          /* signed distance, metres, within ±τ; meaningless while w = 0 */
    float w;          /* accumulated weight, 0 = never seen */
    uint8_t rgb[3];   /* mean colour of the frames that saw it near the surface */
    uint8_t colour_w; /* how many did (capped at KR_SURFACE_COLOUR_WEIGHT), 0 = none */
} kr_surface_voxel;

/* Colour is averaged over at most this many frames (the newest weigh more
 * after that, so a lighting change shows through), and only into voxels
 * within this many voxels of the measured surface — the colour is the
 * surface's, not the free space's in front of it. */
#define KR_SURFACE_COLOUR_WEIGHT 32
#define KR_SURFACE_COLOUR_BAND 2.0f

/* One frame as the per-voxel update reads it. */
typedef struct {
    kr_intrinsics k;     /* of the cloud */
    bool distorted;      /* k has lens distortion */
    float R[9], t[3];    /* world to camera: p_c = R p_w + t */
    const uint8_t *rgb;  /* per pixel, 3 bytes, registered to the depth; NULL: no colour */
    const float *depth;  /* per pixel, row-major: the measured z, 0 where none or beyond
                            max_depth (the cloud's z, kr_surface_depth_of) */
    float voxel;         /* metres */
    float depth_step;    /* 1/m, 0 = no noise model */
    float truncation_voxels;
    float max_weight;
    float max_depth; /* measurements farther than this are ignored */
} kr_surface_frame;

/* Brown–Conrady distortion of normalised coordinates (the forward model
 * whose inverse preprocessing applies; kinreg/frame.h). */
static inline KR_HD void kr_surface_distort(const kr_intrinsics *k, float *x, float *y)
{
    float xx = *x * *x, yy = *y * *y, xy = *x * *y, r2 = xx + yy;
    float radial = 1.0f + r2 * (k->k1 + r2 * (k->k2 + r2 * k->k3));
    float dx = 2.0f * k->p1 * xy + k->p2 * (r2 + 2.0f * xx);
    float dy = k->p1 * (r2 + 2.0f * yy) + 2.0f * k->p2 * xy;
    *x = *x * radial + dx;
    *y = *y * radial + dy;
}

static inline KR_HD float kr_surface_truncation(const kr_surface_frame *f, float z)
{
    float band = f->truncation_voxels * f->voxel, noise = 2.0f * f->depth_step * z * z;
    return band > noise ? band : noise;
}

static inline KR_HD float kr_surface_weight(const kr_surface_frame *f, float z)
{
    float step = f->depth_step * z * z;
    return step > f->voxel ? (f->voxel / step) * (f->voxel / step) : 1.0f;
}

/* The pixel that camera point (x, y, z) projects to ((xn, yn) = (x/z, y/z),
 * given), row-major, or -1 outside the image. */
static inline KR_HD long kr_surface_pixel(const kr_surface_frame *f, float xn, float yn)
{
    if (f->distorted) kr_surface_distort(&f->k, &xn, &yn);
    float u = f->k.fx * xn + f->k.cx, v = f->k.fy * yn + f->k.cy;
    if (!(u >= -0.5f && v >= -0.5f && u < (float)f->k.width - 0.5f &&
          v < (float)f->k.height - 0.5f))
        return -1;
    return (long)(int)(v + 0.5f) * f->k.width + (int)(u + 0.5f);
}

/* The band walk (surface_integrate.c): a measured point's ray is sampled
 * across its truncation band every half block, and each sample names the
 * block it falls in. Written once so that both engines list the same
 * blocks. A sample's block is packed into one key, 21 bits a coordinate
 * offset by 2·KR_SURFACE_BLOCK_LIMIT (coordinates clamped to twice the
 * allowed range, so an out-of-range block stays out of range). */
#define KR_SURFACE_BAND_MAX_STEPS 64
#define KR_SURFACE_BAND_STRIDE 2   /* every second point of every second row */
#define KR_SURFACE_KEY_LIMIT 32768 /* = KR_SURFACE_BLOCK_LIMIT (surface_internal.h) */

static inline KR_HD uint64_t kr_surface_block_key(const float pw[3], float block)
{
    uint64_t key = 0;
    for (int k = 0; k < 3; k++) {
        float b = floorf(pw[k] / block);
        int32_t c = b < -2.0f * KR_SURFACE_KEY_LIMIT  ? -2 * KR_SURFACE_KEY_LIMIT
                    : b > 2.0f * KR_SURFACE_KEY_LIMIT ? 2 * KR_SURFACE_KEY_LIMIT
                                                      : (int32_t)b;
        key = key << 21 | (uint64_t)(c + 2 * KR_SURFACE_KEY_LIMIT);
    }
    return key;
}

/* The block of a key (kr_surface_block_key's inverse). */
static inline KR_HD void kr_surface_key_block(uint64_t key, int32_t c[3])
{
    for (int k = 2; k >= 0; k--, key >>= 21)
        c[k] = (int32_t)(key & 0x1FFFFF) - 2 * KR_SURFACE_KEY_LIMIT;
}

/* One measured point's band: its samples (steps + 1, at most
 * KR_SURFACE_BAND_MAX_STEPS + 1; 0 for no measurement), and what every
 * sample needs — the ray's rotated direction R_wc·p, its length and the
 * band's half-width along it. */
typedef struct {
    int samples;
    float rp[3], len, tau;
} kr_surface_band;

static inline KR_HD kr_surface_band kr_surface_band_of(const kr_surface_frame *f,
                                                       const float Rwc[9], const float p[3])
{
    kr_surface_band b;
    b.samples = 0;
    if (p[0] != p[0] || !(p[2] > 0.0f) || p[2] > f->max_depth) return b;
    b.len = sqrtf(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
    b.tau = kr_surface_truncation(f, p[2]) * b.len / p[2];
    int steps = (int)ceilf(2.0f * b.tau / (0.5f * f->voxel * KR_SURFACE_BLOCK));
    b.samples = (steps < KR_SURFACE_BAND_MAX_STEPS ? steps : KR_SURFACE_BAND_MAX_STEPS) + 1;
    for (int r = 0; r < 3; r++)
        b.rp[r] = Rwc[3 * r] * p[0] + Rwc[3 * r + 1] * p[1] + Rwc[3 * r + 2] * p[2];
    return b;
}

/* Sample j's block key (twc: the camera-to-world translation). */
static inline KR_HD uint64_t kr_surface_band_key(const kr_surface_frame *f,
                                                 const kr_surface_band *b, const float twc[3],
                                                 int j)
{
    float along = 1.0f + (-b->tau + 2.0f * b->tau * (float)j / (float)(b->samples - 1)) / b->len;
    float pw[3];
    for (int r = 0; r < 3; r++)
        pw[r] = along * b->rp[r] + twc[r];
    return kr_surface_block_key(pw, f->voxel * KR_SURFACE_BLOCK);
}

/* A pixel's entry in kr_surface_frame.depth from its cloud point. */
static inline KR_HD float kr_surface_depth_of(const float p[3], float max_depth)
{
    return p[0] == p[0] && p[2] > 0.0f && p[2] <= max_depth ? p[2] : 0.0f;
}

/* A block in camera coordinates: its first voxel's centre and the steps to
 * the next voxel along x, y and z (the rotation's columns times the voxel). */
typedef struct {
    float first[3];
    float step[3][3]; /* step[axis][row] */
} kr_surface_block_frame;

static inline KR_HD void kr_surface_block_in_camera(const kr_surface_frame *f,
                                                    const int32_t block[3],
                                                    kr_surface_block_frame *b)
{
    float pw[3];
    for (int k = 0; k < 3; k++)
        pw[k] = ((float)block[k] * KR_SURFACE_BLOCK + 0.5f) * f->voxel;
    for (int r = 0; r < 3; r++) {
        b->first[r] =
            f->R[3 * r] * pw[0] + f->R[3 * r + 1] * pw[1] + f->R[3 * r + 2] * pw[2] + f->t[r];
        for (int k = 0; k < 3; k++)
            b->step[k][r] = f->R[3 * r + k] * f->voxel;
    }
}

/* The camera point of voxel (x, y, z) of the block, summed z first, so that
 * the CPU's loops hoist the z and y terms and a GPU thread per voxel gets
 * the same bits. */
static inline KR_HD void kr_surface_voxel_in_camera(const kr_surface_block_frame *b, int x, int y,
                                                    int z, float pc[3])
{
    for (int r = 0; r < 3; r++)
        pc[r] = ((b->first[r] + (float)z * b->step[2][r]) + (float)y * b->step[1][r]) +
                (float)x * b->step[0][r];
}

/* Fuses one frame's view of the voxel whose centre is at camera point pc. */
static inline KR_HD void kr_surface_fuse_voxel(const kr_surface_frame *f, const float pc[3],
                                               kr_surface_voxel *vx)
{
    if (!(pc[2] > 0.0f)) return;
    float inv = 1.0f / pc[2], xn = pc[0] * inv, yn = pc[1] * inv;
    long px = kr_surface_pixel(f, xn, yn);
    float zm = px < 0 ? 0.0f : f->depth[px];
    if (zm == 0.0f) return;
    float sdf = (zm - pc[2]) * sqrtf(1.0f + xn * xn + yn * yn);
    float tau = kr_surface_truncation(f, zm);
    if (sdf < -tau) return;
    float d = sdf < tau ? sdf : tau, w = kr_surface_weight(f, zm);
    float total = vx->w + w;
    vx->d = (vx->d * vx->w + d * w) / total;
    vx->w = total < f->max_weight ? total : f->max_weight;
    if (f->rgb && sdf <= KR_SURFACE_COLOUR_BAND * f->voxel &&
        sdf >= -KR_SURFACE_COLOUR_BAND * f->voxel) {
        const uint8_t *c = f->rgb + 3 * px;
        int n = vx->colour_w;
        for (int k = 0; k < 3; k++)
            vx->rgb[k] = (uint8_t)((vx->rgb[k] * n + c[k] + (n + 1) / 2) / (n + 1));
        if (n < KR_SURFACE_COLOUR_WEIGHT) vx->colour_w = (uint8_t)(n + 1);
    }
}

#endif
