/* The device voxel map, in a build without CUDA: unreachable (no CUDA
 * context can exist), answered for completeness. */
#include "fusion/voxel_map_cuda.h"

#define KR_FUSION_NOCUDA                                                                           \
    kr_error(                                                                                      \
        KR_ERR_NO_DEVICE,                                                                          \
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu")

kr_status kr_voxel_map_cuda_create(kr_gpu_context *ctx, float voxel_size, float max_weight,
                                   bool geometric_weight, kr_voxel_map_cuda **out)
{
    (void)ctx;
    (void)voxel_size;
    (void)max_weight;
    (void)geometric_weight;
    (void)out;
    return KR_FUSION_NOCUDA;
}

void kr_voxel_map_cuda_destroy(kr_voxel_map_cuda **map)
{
    (void)map;
}

kr_status kr_voxel_map_cuda_integrate(kr_voxel_map_cuda *map, const float *points,
                                      const float *normals, size_t w, size_t h, bool on_device,
                                      const float R[9], const float t[3], uint64_t frame)
{
    (void)map;
    (void)points;
    (void)normals;
    (void)w;
    (void)h;
    (void)on_device;
    (void)R;
    (void)t;
    (void)frame;
    return KR_FUSION_NOCUDA;
}

size_t kr_voxel_map_cuda_size(const kr_voxel_map_cuda *map)
{
    (void)map;
    return 0;
}

kr_status kr_voxel_map_cuda_gather(kr_voxel_map_cuda *map, uint64_t since, float **points,
                                   float **normals, size_t *capacity, size_t *n)
{
    (void)map;
    (void)since;
    (void)points;
    (void)normals;
    (void)capacity;
    (void)n;
    return KR_FUSION_NOCUDA;
}

kr_status kr_voxel_map_cuda_download(kr_voxel_map_cuda *map, kr_voxel *out)
{
    (void)map;
    (void)out;
    return KR_FUSION_NOCUDA;
}

kr_status kr_voxel_map_cuda_upload(kr_voxel_map_cuda *map, const kr_voxel *records, size_t n)
{
    (void)map;
    (void)records;
    (void)n;
    return KR_FUSION_NOCUDA;
}

void kr_voxel_map_cuda_times(const kr_voxel_map_cuda *map, double *integrate_ms, double *gather_ms)
{
    (void)map;
    if (integrate_ms) *integrate_ms = 0;
    if (gather_ms) *gather_ms = 0;
}
