/* Internal: the surface volume's storage — blocks of KR_SURFACE_BLOCK³
 * voxels in fixed-size chunks (a block's address never moves, and growing
 * never copies voxels), found by an open-addressing hash of their integer
 * block coordinates; with the CUDA engine the voxels are on the device
 * (surface_cuda.h) and the host keeps the hash alone. */
#ifndef KINREG_FUSION_SURFACE_INTERNAL_H
#define KINREG_FUSION_SURFACE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "fusion/surface/surface_cuda.h"
#include "fusion/surface/surface_kernels.h"
#include "fusion/surface/surface_view.h"
#include "kinreg/surface.h"

#define KR_SURFACE_CHUNK 1024 /* blocks per chunk */
/* Block coordinates stay within ±2^15 (±2^18 voxels: 1.3 km at 5 mm), so a
 * voxel's coordinates, offset by 2^19, fit 20 bits each in the mesh's edge
 * keys (surface_mesh.c). */
#define KR_SURFACE_BLOCK_LIMIT (1 << 15)
_Static_assert(KR_SURFACE_BLOCK_LIMIT == KR_SURFACE_KEY_LIMIT,
               "the band keys' range is the blocks'");

struct kr_surface {
    kr_surface_config cfg;
    size_t n_blocks, max_blocks;
    int32_t (*coords)[3]; /* per block, grown with realloc */
    uint32_t *touched;    /* the blocks the current frame's band touches */
    size_t n_touched;
    float *depth; /* the current frame's depth (kr_surface_frame.depth) */
    size_t depth_pixels;
    kr_surface_voxel **chunks; /* KR_SURFACE_CHUNK blocks each */
    size_t n_chunks, cap_chunks, cap_blocks;
    uint32_t *slots; /* block index + 1, 0 = empty; n_slots a power of two */
    size_t n_slots;
    uint64_t frames, refused;
    bool warned_full;
    bool coloured;        /* a frame with colour was fused */
    kr_surface_cuda *gpu; /* the voxels on a device (chunks then unused), or NULL */
};

static inline kr_surface_voxel *kr_surface_block_voxels(const kr_surface *s, size_t block)
{
    return s->chunks[block / KR_SURFACE_CHUNK] +
           (block % KR_SURFACE_CHUNK) * (size_t)KR_SURFACE_BLOCK_VOXELS;
}

/* The host's blocks as the kernels read them. */
static inline kr_surface_view kr_surface_host_view(const kr_surface *s)
{
    kr_surface_view v = {s->slots,  s->n_slots,       s->n_blocks ? &s->coords[0][0] : NULL,
                         s->chunks, KR_SURFACE_CHUNK, s->cfg.voxel_size};
    return v;
}
/* The block at c, allocated (voxels unseen) when absent; -1 when the cap
 * or c's range forbids it (counted in s->refused), -2 out of memory. */
long kr_surface_find_or_add(kr_surface *s, const int32_t c[3]);

#endif
