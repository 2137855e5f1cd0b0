/* Per-pixel preprocessing math, written once for both engines: the OpenMP
 * loops (pipeline/preprocess/preprocess_cpu.c) and the CUDA kernels
 * (pipeline/preprocess/preprocess_cuda.cu) only iterate over pixels and call these.
 *
 * Layout: a level is w×h pixels, 3 floats per pixel (row-major). An invalid
 * point or normal is NaN in all three components; a valid point has z > 0, so
 * `z > 0` is the validity test everywhere (false for NaN). */
#ifndef KINREG_PIPELINE_PREPROCESS_PREPROCESS_KERNELS_H
#define KINREG_PIPELINE_PREPROCESS_PREPROCESS_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/frame.h"
#include "kinreg/pyramid.h"
#include "core/kr_hd.h"

/* How raw samples become metres, and the accepted range. */
typedef struct {
    int encoding; /* kr_depth_encoding */
    float scale;  /* units per metre (KR_DEPTH_SCALED) */
    float min_depth, max_depth;
} kr_preprocess_depth_params;

/* Everything the per-pixel math takes from the preprocessing settings,
 * derived once per frame on the host (pipeline/preprocess/preprocess.c) so both engines
 * pass their kernels the same bits. */
typedef struct {
    kr_preprocess_depth_params depth;
    float discontinuity;  /* normals: a neighbour's depth may differ by discontinuity·z */
    float downsample_tol; /* downsampling's band, KR_DOWNSAMPLE_TOLERANCE·discontinuity */
    float depth_step;     /* the sensor's depth step per z² (1/m), 0 = none */
} kr_preprocess_params;

/* Downsampling keeps depths within this many discontinuity thresholds of the
 * block's median: a wider band than normals use, since a 2×2 block at a
 * coarse level spans more surface. */
#define KR_DOWNSAMPLE_TOLERANCE 3.0f

/* depth_step·fx/2 of a level: a normal's half-baseline at depth z is
 * ⌊reach·z⌋ + 1 pixels (kr_preprocess_normal_reach). */
static inline float kr_preprocess_level_normal_reach(const kr_preprocess_params *pp,
                                                     const kr_intrinsics *k)
{
    return 0.5f * pp->depth_step * k->fx;
}

static inline KR_HD void kr_preprocess_set_nan3(float *p)
{
    p[0] = p[1] = p[2] = NAN;
}

/* Metres for one raw sample, or 0 for no return and for depths outside
 * [min_depth, max_depth]. Same formulas as kr_depth_to_metres (frame.h); the
 * disparity model runs in double because 1/(a + b·d) loses digits in float
 * where a + b·d is small (far range). */
static inline KR_HD float kr_preprocess_depth(uint16_t v, const kr_preprocess_depth_params *dp)
{
    float z;
    if (dp->encoding == KR_DEPTH_DISPARITY11) {
        if (v >= KR_DISPARITY_INVALID) return 0.0f;
        double inv = KR_DISPARITY_A + KR_DMUL(KR_DISPARITY_B, (double)v);
        z = inv > 0 ? (float)(1.0 / inv) : 0.0f;
    } else {
        z = v ? (float)v / dp->scale : 0.0f;
    }
    return (z > 0.0f && z >= dp->min_depth && z <= dp->max_depth) ? z : 0.0f;
}

/* Undistorts normalised image coordinates in place: finds (x, y) whose
 * Brown–Conrady distortion is the given (xd, yd) by fixed-point iteration
 * x ← (xd − tangential(x, y)) / radial(r²). The map is a contraction for
 * Kinect-class lenses (distortion of a few per cent), so a handful of
 * iterations reach float precision (10: 3e-4 px at fr1's corners, where 6
 * leave 0.035 px). Skipped when every coefficient is 0. */
#define KR_UNDISTORT_ITERATIONS 10

/* Whether the lens model has distortion: any coefficient other than 0 (NaN
 * counts as distortion, so it propagates as the iteration would). */
static inline KR_HD int kr_preprocess_has_distortion(const kr_intrinsics *k)
{
    return !(k->k1 == 0.0f && k->k2 == 0.0f && k->k3 == 0.0f && k->p1 == 0.0f && k->p2 == 0.0f);
}

static inline KR_HD void kr_preprocess_undistort(const kr_intrinsics *k, float *x, float *y)
{
    if (!kr_preprocess_has_distortion(k)) return;
    const float xd = *x, yd = *y;
    float xu = xd, yu = yd;
    for (int it = 0; it < KR_UNDISTORT_ITERATIONS; it++) {
        float xx = KR_MUL(xu, xu), yy = KR_MUL(yu, yu), xy = KR_MUL(xu, yu);
        float r2 = xx + yy;
        float radial = 1.0f + KR_MUL(r2, k->k1 + KR_MUL(r2, k->k2 + KR_MUL(r2, k->k3)));
        float dx = KR_MUL(2.0f * k->p1, xy) + KR_MUL(k->p2, r2 + 2.0f * xx);
        float dy = KR_MUL(k->p1, r2 + 2.0f * yy) + KR_MUL(2.0f * k->p2, xy);
        xu = (xd - dx) / radial;
        yu = (yd - dy) / radial;
    }
    *x = xu;
    *y = yu;
}

/* The normalised ray (x, y) of pixel (u, v) — the point at depth z is
 * (x·z, y·z, z): ((u − cx)/fx, (v − cy)/fy) for the pinhole model, through
 * kr_preprocess_undistort when the lens has distortion. Depends on the pixel and the
 * intrinsics alone, so the CPU engine tabulates it once per level for
 * distorted lenses (kr_pyramid.rays) and both paths give the same bits. */
static inline KR_HD void kr_preprocess_pixel_ray(int u, int v, const kr_intrinsics *k, float ray[2])
{
    float x = ((float)u - k->cx) / k->fx, y = ((float)v - k->cy) / k->fy;
    kr_preprocess_undistort(k, &x, &y);
    ray[0] = x;
    ray[1] = y;
}

/* Back-projection along a precomputed ray (kr_preprocess_pixel_ray) at depth z.
 * z ≤ 0 (no depth) gives the invalid point. */
static inline KR_HD void kr_preprocess_backproject_ray(const float ray[2], float z, float *p)
{
    if (!(z > 0.0f)) {
        kr_preprocess_set_nan3(p);
        return;
    }
    p[0] = KR_MUL(ray[0], z);
    p[1] = KR_MUL(ray[1], z);
    p[2] = z;
}

/* Back-projection of pixel (u, v) at depth z: kr_preprocess_backproject_ray along
 * kr_preprocess_pixel_ray (the ray is only computed where there is a depth). */
static inline KR_HD void kr_preprocess_backproject(int u, int v, float z, const kr_intrinsics *k,
                                                   float *p)
{
    if (!(z > 0.0f)) {
        kr_preprocess_set_nan3(p);
        return;
    }
    float ray[2];
    kr_preprocess_pixel_ray(u, v, k, ray);
    kr_preprocess_backproject_ray(ray, z, p);
}

/* Level 0: raw sample → point for pixel (u, v). */
static inline KR_HD void kr_preprocess_level0_pixel(const uint16_t *raw, int w, int u, int v,
                                                    const kr_preprocess_depth_params *dp,
                                                    const kr_intrinsics *k, float *points)
{
    size_t i = (size_t)v * (size_t)w + (size_t)u;
    kr_preprocess_backproject(u, v, kr_preprocess_depth(raw[i], dp), k, points + 3 * i);
}

/* Level 0 with a ray table (2 floats per pixel, row-major, from
 * kr_preprocess_pixel_ray): the same point as kr_preprocess_level0_pixel, bit for bit. */
static inline KR_HD void kr_preprocess_level0_pixel_rays(const uint16_t *raw, int w, int u, int v,
                                                         const kr_preprocess_depth_params *dp,
                                                         const float *rays, float *points)
{
    size_t i = (size_t)v * (size_t)w + (size_t)u;
    kr_preprocess_backproject_ray(rays + 2 * i, kr_preprocess_depth(raw[i], dp), points + 3 * i);
}

/* Depth of coarse pixel (u, v) from the 2×2 block (2u..2u+1, 2v..2v+1) of the
 * finer level (KinectFusion-style): the mean of the block's valid depths that
 * lie within tol·ref of ref, the lower median of the valid depths. The median
 * keeps a block that straddles a depth edge on one surface instead of
 * averaging foreground and background into a point on neither. 0 when the
 * whole block is invalid. Reads z from the finer level's points. */
static inline KR_HD float kr_preprocess_downsample_depth(const float *fine_points, int fine_w,
                                                         int u, int v, float tol)
{
    const float *r0 = fine_points + 3 * ((size_t)(2 * v) * (size_t)fine_w + (size_t)(2 * u));
    const float *r1 = r0 + 3 * (size_t)fine_w;
    const float s0 = r0[2], s1 = r0[5], s2 = r1[2], s3 = r1[5];
    const int n = (s0 > 0.0f) + (s1 > 0.0f) + (s2 > 0.0f) + (s3 > 0.0f);
    if (n == 0) return 0.0f;
    /* Branch-free: invalid samples (0 or NaN) sort last as +inf, and a
     * 5-comparator network sorts the four; the lower median of the n valid
     * ones is then a[(n − 1)/2], i.e. a0 for n ≤ 2, else a1. */
    float a0 = s0 > 0.0f ? s0 : INFINITY, a1 = s1 > 0.0f ? s1 : INFINITY;
    float a2 = s2 > 0.0f ? s2 : INFINITY, a3 = s3 > 0.0f ? s3 : INFINITY, lo, hi;
    /* Selects, not fminf/fmaxf: no NaN can occur here, and the C build
     * would otherwise call libm for each. */
#define KR_PREPROCESS_SORT2(x, y)                                                                  \
    (lo = (x) < (y) ? (x) : (y), hi = (x) < (y) ? (y) : (x), x = lo, y = hi)
    KR_PREPROCESS_SORT2(a0, a1);
    KR_PREPROCESS_SORT2(a2, a3);
    KR_PREPROCESS_SORT2(a0, a2);
    KR_PREPROCESS_SORT2(a1, a3);
    KR_PREPROCESS_SORT2(a1, a2);
#undef KR_PREPROCESS_SORT2
    (void)a3;
    const float ref = n <= 2 ? a0 : a1;
    const float lim = tol * ref;
    /* Sum in block order, not sorted order, so both engines add alike. */
    const int k0 = s0 > 0.0f && fabsf(s0 - ref) <= lim, k1 = s1 > 0.0f && fabsf(s1 - ref) <= lim;
    const int k2 = s2 > 0.0f && fabsf(s2 - ref) <= lim, k3 = s3 > 0.0f && fabsf(s3 - ref) <= lim;
    float sum = k0 ? s0 : 0.0f;
    sum += k1 ? s1 : 0.0f;
    sum += k2 ? s2 : 0.0f;
    sum += k3 ? s3 : 0.0f;
    return sum / (float)(k0 + k1 + k2 + k3); /* ≥ 1 term: ref itself qualifies */
}

/* Level l+1 pixel (u, v) from level l: downsampled depth, back-projected with
 * the coarse level's intrinsics (kr_intrinsics_level). */
static inline KR_HD void kr_preprocess_downsample_pixel(const float *fine_points, int fine_w, int w,
                                                        int u, int v, float tol,
                                                        const kr_intrinsics *k, float *points)
{
    float z = kr_preprocess_downsample_depth(fine_points, fine_w, u, v, tol);
    kr_preprocess_backproject(u, v, z, k, points + 3 * ((size_t)v * (size_t)w + (size_t)u));
}

/* kr_preprocess_downsample_pixel with the coarse level's ray table. */
static inline KR_HD void kr_preprocess_downsample_pixel_rays(const float *fine_points, int fine_w,
                                                             int w, int u, int v, float tol,
                                                             const float *rays, float *points)
{
    float z = kr_preprocess_downsample_depth(fine_points, fine_w, u, v, tol);
    size_t i = (size_t)v * (size_t)w + (size_t)u;
    kr_preprocess_backproject_ray(rays + 2 * i, z, points + 3 * i);
}

/* A neighbour counts when it has a point whose depth is within lim of the centre's. */
static inline KR_HD int kr_preprocess_near(float z, float zc, float lim)
{
    return z > 0.0f && fabsf(z - zc) <= lim;
}

/* Half-baseline k of the normal at depth z: the smallest k >= 1 with
 * k > reach·z, i.e. ⌊reach·z⌋ + 1, at most KR_NORMAL_MAX_REACH
 * (reach = depth_step·fx/2, 0 for k = 1). One depth step depth_step·z² over
 * the baseline 2k·z/fx changes the slope by depth_step·z·fx/(2k) < 1: less
 * than 45° of tilt. (⌊·⌋ by truncation, as x >= 0: cheaper per pixel than
 * ⌈·⌉, which x86-64 without SSE4.1 computes in a dozen instructions.) */
static inline KR_HD int kr_preprocess_normal_reach(float reach, float z)
{
    float x = KR_MUL(reach, z);
    return x < (float)(KR_NORMAL_MAX_REACH - 1) ? (int)x + 1 : KR_NORMAL_MAX_REACH;
}

/* kr_preprocess_normal_pixel for a pixel with a point and a given k; n is its
 * normal, NaN on entry. */
static inline KR_HD int kr_preprocess_normal_stencil(const float *points, int w, int h, int u,
                                                     int v, float discontinuity, int k, float *n)
{
    if (u < k || v < k || u >= w - k || v >= h - k) return 0;
    const float *c = points + 3 * ((size_t)v * (size_t)w + (size_t)u);
    float zc = c[2];
    const size_t dx = 3 * (size_t)k, dy = 3 * (size_t)w * (size_t)k;
    const float *l = c - dx, *r = c + dx, *t = c - dy, *b = c + dy;
    float lim = discontinuity * zc;
    if (!kr_preprocess_near(l[2], zc, lim) || !kr_preprocess_near(r[2], zc, lim) ||
        !kr_preprocess_near(t[2], zc, lim) || !kr_preprocess_near(b[2], zc, lim))
        return 0;
    float dx0 = r[0] - l[0], dx1 = r[1] - l[1], dx2 = r[2] - l[2];
    float dy0 = b[0] - t[0], dy1 = b[1] - t[1], dy2 = b[2] - t[2];
    float n0 = KR_MUL(dx1, dy2) - KR_MUL(dx2, dy1);
    float n1 = KR_MUL(dx2, dy0) - KR_MUL(dx0, dy2);
    float n2 = KR_MUL(dx0, dy1) - KR_MUL(dx1, dy0);
    float len2 = KR_MUL(n0, n0) + KR_MUL(n1, n1) + KR_MUL(n2, n2);
    if (!(len2 > 0.0f)) return 0; /* degenerate: neighbours collinear */
    float len = sqrtf(len2);
    if (KR_MUL(n0, c[0]) + KR_MUL(n1, c[1]) + KR_MUL(n2, c[2]) > 0.0f) len = -len;
    n[0] = n0 / len;
    n[1] = n1 / len;
    n[2] = n2 / len;
    return 1;
}

/* Normal of pixel (u, v): cross product of the central differences of the
 * neighbours k pixels left/right and up/down (k = kr_preprocess_normal_reach of the
 * centre's depth), normalised and oriented towards the camera (n·p < 0). NaN
 * — returns 0 — within k pixels of the border, where the centre or any
 * neighbour has no point, or where a neighbour's depth differs from the
 * centre's by more than discontinuity·z (a depth edge: the difference would
 * span two surfaces). Returns 1 for a valid normal. */
static inline KR_HD int kr_preprocess_normal_pixel(const float *points, int w, int h, int u, int v,
                                                   float discontinuity, float reach, float *normals)
{
    size_t i = (size_t)v * (size_t)w + (size_t)u;
    float *n = normals + 3 * i;
    kr_preprocess_set_nan3(n);
    float zc = points[3 * i + 2];
    if (!(zc > 0.0f)) return 0;
    /* The common k as constants: the compiler folds the offsets and border
     * tests of each copy. With k a plain variable, a 640×480 frame took
     * 0.4 ms longer on the 2-core CPU, even with k = 1 everywhere; this way
     * 0.15 ms. */
    const int k = kr_preprocess_normal_reach(reach, zc);
    switch (k) {
    case 1:
        return kr_preprocess_normal_stencil(points, w, h, u, v, discontinuity, 1, n);
    case 2:
        return kr_preprocess_normal_stencil(points, w, h, u, v, discontinuity, 2, n);
    case 3:
        return kr_preprocess_normal_stencil(points, w, h, u, v, discontinuity, 3, n);
    case 4:
        return kr_preprocess_normal_stencil(points, w, h, u, v, discontinuity, 4, n);
    default:
        return kr_preprocess_normal_stencil(points, w, h, u, v, discontinuity, k, n);
    }
}

#endif
