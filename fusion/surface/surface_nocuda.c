/* The surface's device engine, in a build without CUDA: unreachable (no
 * CUDA context can exist), answered for completeness. */
#include "fusion/surface/surface_cuda.h"

static kr_status no_cuda(void)
{
    return kr_error(KR_ERR_NO_DEVICE, "this kinreg was built without CUDA; rebuild with nvcc "
                                      "installed or use --backend cpu");
}

kr_status kr_surface_cuda_create(const kr_gpu_context *like, kr_surface_cuda **out)
{
    (void)like;
    (void)out;
    return no_cuda();
}

void kr_surface_cuda_destroy(kr_surface_cuda **d)
{
    (void)d;
}

kr_status kr_surface_cuda_band(kr_surface_cuda *d, const kr_surface_frame *f, const float *points,
                               size_t n_pixels, const float Rwc[9], const float twc[3],
                               uint64_t **unknown, size_t *n_unknown)
{
    (void)d, (void)f, (void)points, (void)n_pixels, (void)Rwc, (void)twc, (void)unknown,
        (void)n_unknown;
    return no_cuda();
}

kr_status kr_surface_cuda_fuse(kr_surface_cuda *d, const kr_surface_frame *f, const int32_t *coords,
                               size_t n_blocks, const uint32_t *slots, size_t n_slots,
                               const uint32_t *added, size_t n_added)
{
    (void)d, (void)f, (void)coords, (void)n_blocks, (void)slots, (void)n_slots, (void)added,
        (void)n_added;
    return no_cuda();
}

kr_status kr_surface_cuda_mesh(kr_surface_cuda *d, const uint32_t *slots, size_t n_slots,
                               size_t n_blocks, float voxel, bool colour, kr_mesh *out)
{
    (void)d, (void)slots, (void)n_slots, (void)n_blocks, (void)voxel, (void)colour, (void)out;
    return no_cuda();
}

kr_status kr_surface_cuda_download_range(kr_surface_cuda *d, size_t first, size_t n,
                                         kr_surface_voxel *out)
{
    (void)d, (void)first, (void)n, (void)out;
    return no_cuda();
}

kr_status kr_surface_cuda_create_like(const kr_surface_cuda *like, kr_surface_cuda **out)
{
    (void)like, (void)out;
    return no_cuda();
}

kr_status kr_surface_cuda_seen(kr_surface_cuda *d, size_t n_blocks, uint8_t *seen)
{
    (void)d, (void)n_blocks, (void)seen;
    return no_cuda();
}

kr_status kr_surface_cuda_coarse(kr_surface_cuda *d, const kr_surface_cuda *fine,
                                 const int32_t *coords, size_t n_blocks, const int32_t *fine_of,
                                 int factor)
{
    (void)d, (void)fine, (void)coords, (void)n_blocks, (void)fine_of, (void)factor;
    return no_cuda();
}
