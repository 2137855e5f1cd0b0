/* Preprocessing on a device, in a build without CUDA: unreachable through
 * kr_preprocess (no CUDA kr_device can exist), answered for completeness. */
#include "gpu/gpu.h"

kr_status kr_gpu_preprocess(kr_gpu_context *ctx, const kr_hd_preprocess_params *pp,
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
