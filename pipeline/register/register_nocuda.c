/* Registration on a device, in a build without CUDA: unreachable through
 * kr_register (no CUDA kr_device can exist), answered for completeness. */
#include "pipeline/register/register_cuda.h"

kr_status kr_register_cuda(kr_gpu_context *ctx, int cublas, const kr_register_params *p,
                           const float *src, size_t n, const float *dst, size_t m, double R[9],
                           double t[3], kr_register_state *st)
{
    (void)ctx;
    (void)cublas;
    (void)p;
    (void)src;
    (void)n;
    (void)dst;
    (void)m;
    (void)R;
    (void)t;
    (void)st;
    return kr_error(
        KR_ERR_NO_DEVICE,
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu");
}
