/* Preprocessing on a device, in a build without CUDA: unreachable through
 * kr_preprocess (no CUDA kr_device can exist), answered for completeness. */
#include "pipeline/preprocess/preprocess_cuda.h"

kr_status kr_preprocess_cuda(kr_gpu_context *ctx, const kr_preprocess_params *pp,
                             const kr_frame *frame, kr_pyramid *pyr)
{
    (void)ctx;
    (void)pp;
    (void)frame;
    (void)pyr;
    return kr_error(
        KR_ERR_NO_DEVICE,
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu");
}

void kr_preprocess_cuda_transfer_times(const kr_gpu_context *ctx, double *upload_ms,
                                       double *download_ms)
{
    (void)ctx;
    if (upload_ms) *upload_ms = 0;
    if (download_ms) *download_ms = 0;
}
