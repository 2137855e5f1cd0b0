/* The surface volume's voxels on a CUDA device (fusion/surface/surface_cuda.cu),
 * the twin of the CPU engine's: the device walks a frame's bands and looks
 * their blocks up in its copy of the block hash; the host keeps the hash,
 * adds the blocks the device did not know in key order, as the CPU engine
 * does (surface_integrate.c), and copies the hash back; the device holds every block's voxels in
 * one pool and runs the per-voxel fusion and the per-cube marching cubes with the same math
 * (surface_kernels.h, surface_mesh_kernels.h, compiled with -fmad=false): the same frames give the
 * same voxels and the same mesh bit for bit. Plain C; in builds without CUDA surface_nocuda.c
 * answers KR_ERR_NO_DEVICE. */
#ifndef KINREG_FUSION_SURFACE_CUDA_H
#define KINREG_FUSION_SURFACE_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fusion/surface/surface_mesh_kernels.h"
#include "gpu/engine.h"
#include "kinreg/surface.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_surface_cuda kr_surface_cuda;

/* Voxels on `like`'s device, worked on through a context of their own. */
kr_status kr_surface_cuda_create(const kr_gpu_context *like, kr_surface_cuda **out);
void kr_surface_cuda_destroy(kr_surface_cuda **d);

/* The frame's band blocks (kr_surface_band_key over every
 * KR_SURFACE_BAND_STRIDE-th point of the n_pixels points, host memory):
 * those the device's copy of the host's block hash holds are fused from
 * here on (with the frame's depth and its colour, f->rgb, taken up here);
 * the keys of the others come back, each once, unsorted, in a malloc'd
 * host array *unknown of *n_unknown, for the host to add and
 * kr_surface_cuda_fuse to fuse. (So a frame whose new blocks cannot be
 * added, out of memory, is fused into the blocks seen before.) */
kr_status kr_surface_cuda_band(kr_surface_cuda *d, const kr_surface_frame *f, const float *points,
                               size_t n_pixels, const float Rwc[9], const float twc[3],
                               uint64_t **unknown, size_t *n_unknown);

/* Completes one frame's fusion: the blocks kr_surface_cuda_band found are
 * being fused since its lookup (with the depth and colour it took up);
 * this fuses the n_added blocks `added` (the host's indices for the keys
 * it did not know) and waits for both. coords holds all n_blocks blocks'
 * coordinates and slots the host's hash of them (the device grows its
 * pool, takes the new blocks, their voxels unseen, and copies the hash
 * when it changed). */
kr_status kr_surface_cuda_fuse(kr_surface_cuda *d, const kr_surface_frame *f, const int32_t *coords,
                               size_t n_blocks, const uint32_t *slots, size_t n_slots,
                               const uint32_t *added, size_t n_added);

/* The volume's mesh, made on the device as the CPU engine makes it (every
 * cube's corners in block and voxel order, welded by a stable sort by
 * edge): the same vertices, faces and colours (with `colour`). The hash is
 * the host's (uploaded). No surface gives an empty mesh (0 vertices). */
kr_status kr_surface_cuda_mesh(kr_surface_cuda *d, const uint32_t *slots, size_t n_slots,
                               size_t n_blocks, float voxel, bool colour, kr_mesh *out);

/* An empty volume on the device of `like`. */
kr_status kr_surface_cuda_create_like(const kr_surface_cuda *like, kr_surface_cuda **out);

/* seen[b] = 1 where block b of the first n_blocks has a seen voxel, else 0. */
kr_status kr_surface_cuda_seen(kr_surface_cuda *d, size_t n_blocks, uint8_t *seen);

/* Fills the empty volume d (blocks at `coords`, n_blocks of them, as the
 * host lists them) with the voxels of `fine` averaged factor³ at a time
 * (surface_coarse_kernels.h); fine_of lists each coarse block's factor³
 * fine blocks, x fastest, -1 where none. The factor must divide
 * KR_SURFACE_BLOCK, so each coarse voxel lies in one fine block. */
kr_status kr_surface_cuda_coarse(kr_surface_cuda *d, const kr_surface_cuda *fine,
                                 const int32_t *coords, size_t n_blocks, const int32_t *fine_of,
                                 int factor);

/* Blocks [first, first + n)'s voxels, into out (n · KR_SURFACE_BLOCK_VOXELS). */
kr_status kr_surface_cuda_download_range(kr_surface_cuda *d, size_t first, size_t n,
                                         kr_surface_voxel *out);

#ifdef __cplusplus
}
#endif

#endif
