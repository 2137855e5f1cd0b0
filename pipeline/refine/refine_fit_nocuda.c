/* The measure on CUDA devices in a build without CUDA: unreachable through
 * kr_refine (no CUDA kr_device can exist), answered for completeness. */
#include "pipeline/refine/refine_fit_cuda.h"

kr_status kr_refine_fit_cuda_create(kr_refine_fit_cuda **out, kr_gpu_context *base,
                                    const int *devices, int n_devices, const kr_fit_view *views,
                                    int n_views, const float *samples, const size_t *sample_start)
{
    (void)out, (void)base, (void)devices, (void)n_devices, (void)views, (void)n_views;
    (void)samples, (void)sample_start;
    return kr_error(
        KR_ERR_NO_DEVICE,
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu");
}

void kr_refine_fit_cuda_destroy(kr_refine_fit_cuda **f)
{
    (void)f;
}

kr_status kr_refine_fit_cuda_eval(kr_refine_fit_cuda *f, const kr_pose *poses, const kr_pose *inv,
                                  double cap2, int prune, double *best)
{
    (void)f, (void)poses, (void)inv, (void)cap2, (void)prune, (void)best;
    return kr_error(KR_ERR_NO_DEVICE, "this kinreg was built without CUDA");
}
