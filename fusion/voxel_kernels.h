/* Per-sample math of fusing a frame into the voxel map, written once for the
 * host map (fusion/voxel_map.c) and a device twin (issue 8, fusion on the
 * device): a sample's world point and normal, its voxel key and the key's
 * hash, its weight, the running-mean update of a voxel, and a voxel's unit
 * normal. Products go through KR_MUL so a device build rounds as the host's
 * (no fused multiply-adds) and the maps can agree bit for bit. */
#ifndef KINREG_FUSION_VOXEL_KERNELS_H
#define KINREG_FUSION_VOXEL_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/kr_hd.h"

/* Voxel coordinates are packed 21 bits per axis, offset by 2^20, into the low
 * 63 bits, so the all-ones word can never be a key and marks an empty slot.
 * At 1 cm voxels that spans ±10 km — far beyond any handheld scan. */
#define KR_VOXEL_AXIS_BITS 21
#define KR_VOXEL_AXIS_OFFSET (1 << (KR_VOXEL_AXIS_BITS - 1))
#define KR_VOXEL_EMPTY_KEY UINT64_MAX

/* One voxel as both maps store it (fusion/voxel_map.h: kr_voxel; the device
 * map of fusion/voxel_map_cuda.cu), 48 bytes. Means, not sums: see kr_voxel_fuse. */
typedef struct {
    uint64_t key;       /* packed voxel coordinates */
    uint64_t last_seen; /* frame index of the last integration */
    float point[3];     /* weighted mean point, world frame */
    float normal[3];    /* weighted mean of unit normals: not unit length */
    float weight;       /* accumulated weight, capped */
    uint32_t active;    /* host map: in its active list; device map: unused (0) */
} kr_voxel;

/* A weight never falls below this (grazing or far samples still count). */
#define KR_VOXEL_MIN_WEIGHT 0.05f

static inline KR_HD uint64_t kr_voxel_hash64(uint64_t x)
{
    /* splitmix64 finaliser: neighbouring voxels land in unrelated slots. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* The key of the voxel holding world point p (inv_size = 1 / voxel size);
 * false outside the packable range or for NaN. */
static inline KR_HD bool kr_voxel_pack_key(float inv_size, const float p[3], uint64_t *key)
{
    uint64_t k = 0;
    for (int a = 0; a < 3; a++) {
        float c = floorf(KR_MUL(p[a], inv_size));
        /* Also rejects NaN: every comparison with it is false. */
        if (!(c >= -(float)KR_VOXEL_AXIS_OFFSET && c < (float)KR_VOXEL_AXIS_OFFSET)) return false;
        k |= (uint64_t)((int64_t)c + KR_VOXEL_AXIS_OFFSET) << (KR_VOXEL_AXIS_BITS * a);
    }
    *key = k;
    return true;
}

/* Camera point pc and normal nc moved to the world by (R, t), row-major. */
static inline KR_HD void kr_voxel_to_world(const float R[9], const float t[3], const float pc[3],
                                           const float nc[3], float p[3], float n[3])
{
    for (int r = 0; r < 3; r++) {
        p[r] = KR_MUL(R[3 * r], pc[0]) + KR_MUL(R[3 * r + 1], pc[1]) + KR_MUL(R[3 * r + 2], pc[2]) +
               t[r];
        n[r] = KR_MUL(R[3 * r], nc[0]) + KR_MUL(R[3 * r + 1], nc[1]) + KR_MUL(R[3 * r + 2], nc[2]);
    }
}

/* Kinect depth noise grows with z² and with the incidence angle, so near,
 * head-on samples count most: w = |n·ray| / z², normalised so that 1 m
 * head-on weighs 1, clipped to [KR_VOXEL_MIN_WEIGHT, 1]; 1 when not
 * `geometric`. */
static inline KR_HD float kr_voxel_weight(bool geometric, const float pc[3], const float nc[3])
{
    if (!geometric) return 1.0f;
    float r2 = KR_MUL(pc[0], pc[0]) + KR_MUL(pc[1], pc[1]) + KR_MUL(pc[2], pc[2]);
    float cosang =
        fabsf(KR_MUL(nc[0], pc[0]) + KR_MUL(nc[1], pc[1]) + KR_MUL(nc[2], pc[2])) / sqrtf(r2);
    float w = cosang / KR_MUL(pc[2], pc[2]);
    return w < KR_VOXEL_MIN_WEIGHT ? KR_VOXEL_MIN_WEIGHT : (w > 1.0f ? 1.0f : w);
}

/* One sample (p, n, w) into a voxel's running means: m += (w / (W + w))·(x − m)
 * equals Σwx / Σw; capping W at `cap` then equals scaling both sums down. */
static inline KR_HD void kr_voxel_fuse(float point[3], float normal[3], float *weight,
                                       const float p[3], const float n[3], float w, float cap)
{
    float sum = *weight + w, a = w / sum;
    for (int r = 0; r < 3; r++) {
        point[r] += KR_MUL(a, p[r] - point[r]);
        normal[r] += KR_MUL(a, n[r] - normal[r]);
    }
    *weight = sum > cap ? cap : sum;
}

/* The unit vector of a voxel's mean normal, or false when the normals cancel
 * out: a mean of unit vectors shorter than 1e-3 means the views disagree
 * (e.g. both sides of a thin wall). */
static inline KR_HD bool kr_voxel_unit_normal_hd(const float normal[3], float out[3])
{
    float len = sqrtf(KR_MUL(normal[0], normal[0]) + KR_MUL(normal[1], normal[1]) +
                      KR_MUL(normal[2], normal[2]));
    if (!(len > 1e-3f)) return false;
    for (int r = 0; r < 3; r++)
        out[r] = normal[r] / len;
    return true;
}

/* Eviction's distance test: the voxel's mean point farther than
 * sqrt(min_d2) from the camera c. */
static inline KR_HD bool kr_voxel_far_from(const float point[3], const float c[3], float min_d2)
{
    float dx = point[0] - c[0], dy = point[1] - c[1], dz = point[2] - c[2];
    return KR_MUL(dx, dx) + KR_MUL(dy, dy) + KR_MUL(dz, dz) > min_d2;
}

#endif
