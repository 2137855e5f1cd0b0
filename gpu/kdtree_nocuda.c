/* The device tree build, in a build without CUDA: unreachable (no CUDA
 * kr_device or context can exist), answered for completeness. */
#include "gpu/kdtree_cuda.h"

#define KR_TREE_NOCUDA                                                                             \
    kr_error(                                                                                      \
        KR_ERR_NO_DEVICE,                                                                          \
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu")

kr_status kr_kdtree_cuda_build(kr_gpu_context *ctx, const float *points, const float *normals,
                               size_t n, kr_kdtree **out, kr_device_tree_times *times)
{
    (void)ctx;
    (void)points;
    (void)normals;
    (void)n;
    (void)out;
    (void)times;
    return KR_TREE_NOCUDA;
}
