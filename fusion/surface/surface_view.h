/* The surface volume as both engines' kernels read it: the block hash and
 * the voxels behind it, written once (DESIGN.md §4). The host's blocks live
 * in chunks of KR_SURFACE_CHUNK; a device's in one pool, which is one chunk
 * as large as the pool — so one lookup serves both. */
#ifndef KINREG_FUSION_SURFACE_VIEW_H
#define KINREG_FUSION_SURFACE_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "fusion/surface/surface_kernels.h"

typedef struct {
    const uint32_t *slots; /* block index + 1, 0 = empty; n_slots a power of two */
    size_t n_slots;
    const int32_t *coords;           /* 3 per block */
    kr_surface_voxel *const *chunks; /* chunk_blocks blocks each */
    size_t chunk_blocks;
    float voxel;
} kr_surface_view;

static inline KR_HD size_t kr_surface_slot_of(const int32_t c[3], size_t mask)
{
    uint64_t h = (uint64_t)(uint32_t)c[0] * 0x9E3779B97F4A7C15ull ^
                 (uint64_t)(uint32_t)c[1] * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)(uint32_t)c[2] * 0x165667B19E3779F9ull;
    return (size_t)(h ^ h >> 29) & mask;
}

/* The block at block coordinates c, or -1. */
static inline KR_HD long kr_surface_view_find(const kr_surface_view *v, const int32_t c[3])
{
    if (!v->n_slots) return -1;
    size_t mask = v->n_slots - 1;
    for (size_t i = kr_surface_slot_of(c, mask);; i = (i + 1) & mask) {
        uint32_t b = v->slots[i];
        if (!b) return -1;
        const int32_t *k = v->coords + 3 * (size_t)(b - 1);
        if (k[0] == c[0] && k[1] == c[1] && k[2] == c[2]) return (long)b - 1;
    }
}

static inline KR_HD kr_surface_voxel *kr_surface_view_block(const kr_surface_view *v, size_t b)
{
    return v->chunks[b / v->chunk_blocks] + (b % v->chunk_blocks) * (size_t)KR_SURFACE_BLOCK_VOXELS;
}

/* The last block looked up, so that neighbouring voxels cost no search. */
typedef struct {
    int32_t c[3];
    long b;
} kr_surface_block_cache;

static inline KR_HD void kr_surface_cache_init(kr_surface_block_cache *cache)
{
    cache->c[0] = cache->c[1] = cache->c[2] = INT32_MIN;
    cache->b = -1;
}

static inline KR_HD int32_t kr_surface_floor_div(int32_t a, int32_t d)
{
    return a >= 0 ? a / d : -((-a + d - 1) / d);
}

/* The voxel at global voxel coordinates g, or NULL when its block is absent. */
static inline KR_HD const kr_surface_voxel *
kr_surface_view_voxel(const kr_surface_view *v, kr_surface_block_cache *cache, const int32_t g[3])
{
    int32_t c[3], l[3];
    for (int k = 0; k < 3; k++) {
        c[k] = kr_surface_floor_div(g[k], KR_SURFACE_BLOCK);
        l[k] = g[k] - c[k] * KR_SURFACE_BLOCK;
    }
    if (c[0] != cache->c[0] || c[1] != cache->c[1] || c[2] != cache->c[2]) {
        cache->c[0] = c[0], cache->c[1] = c[1], cache->c[2] = c[2];
        cache->b = kr_surface_view_find(v, c);
    }
    if (cache->b < 0) return NULL;
    return kr_surface_view_block(v, (size_t)cache->b) +
           (l[2] * KR_SURFACE_BLOCK + l[1]) * KR_SURFACE_BLOCK + l[0];
}

/* The distance at global voxel coordinates g, when that voxel was seen. */
static inline KR_HD bool kr_surface_view_seen(const kr_surface_view *v,
                                              kr_surface_block_cache *cache, const int32_t g[3],
                                              float *d)
{
    const kr_surface_voxel *x = kr_surface_view_voxel(v, cache, g);
    if (!x || !(x->w > 0.0f)) return false;
    *d = x->d;
    return true;
}

#endif
