/* The refinement's device-built fields in a build without CUDA: unreachable
 * through kr_refine (no CUDA kr_device can exist), answered for completeness. */
#include "pipeline/refine/refine_fields_cuda.h"

static kr_status no_cuda(void)
{
    return kr_error(
        KR_ERR_NO_DEVICE,
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu");
}

kr_status kr_refine_cuda_fields_create(kr_refine_cuda_fields **out, kr_gpu_context *ctx,
                                       int n_views, int own_context)
{
    (void)out, (void)ctx, (void)n_views, (void)own_context;
    return no_cuda();
}

void kr_refine_cuda_fields_destroy(kr_refine_cuda_fields **f)
{
    (void)f;
}

int kr_refine_cuda_fields_device(const kr_refine_cuda_fields *f)
{
    (void)f;
    return -1;
}

kr_status kr_refine_cuda_fields_points(kr_refine_cuda_fields *f, int k, const float *xyz, size_t n,
                                       int with_normals)
{
    (void)f, (void)k, (void)xyz, (void)n, (void)with_normals;
    return no_cuda();
}

kr_status kr_refine_cuda_fields_build(kr_refine_cuda_fields *f, int slot, int k, size_t stride,
                                      float h, int band, double subset, unsigned seed,
                                      kr_refine_cuda_field_info *info)
{
    (void)f, (void)slot, (void)k, (void)stride, (void)h, (void)band, (void)subset, (void)seed,
        (void)info;
    return no_cuda();
}

kr_status kr_refine_cuda_fields_copy(kr_refine_cuda_fields *f, const kr_refine_cuda_fields *src,
                                     int slot, int k, bool staged)
{
    (void)f, (void)src, (void)slot, (void)k, (void)staged;
    return no_cuda();
}

kr_status kr_refine_cuda_fields_info(const kr_refine_cuda_fields *f, int slot, int k,
                                     kr_refine_cuda_field_info *info)
{
    (void)f, (void)slot, (void)k, (void)info;
    return no_cuda();
}

kr_status kr_refine_cuda_fields_download(const kr_refine_cuda_fields *f, int slot, int k,
                                         uint32_t *capacity, uint64_t **keys, int **slots,
                                         float **values, float **grid, float **grid_val)
{
    (void)f, (void)slot, (void)k, (void)capacity, (void)keys, (void)slots, (void)values, (void)grid,
        (void)grid_val;
    return no_cuda();
}

kr_status kr_refine_cuda_fields_download_normals(const kr_refine_cuda_fields *f, int k,
                                                 float *normals, float *points)
{
    (void)f, (void)k, (void)normals, (void)points;
    return no_cuda();
}
