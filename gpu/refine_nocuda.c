/* The refinement's CUDA engine in a build without CUDA: unreachable through
 * kr_refine (no CUDA kr_device can exist), answered for completeness. */
#include "gpu/refine_gpu.h"

static kr_status no_cuda(void)
{
    return kr_error(
        KR_ERR_NO_DEVICE,
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu");
}

kr_status kr_gpu_refine_create(kr_gpu_refine **out, kr_gpu_context *ctx)
{
    (void)out;
    (void)ctx;
    return no_cuda();
}

void kr_gpu_refine_destroy(kr_gpu_refine **g)
{
    (void)g;
}

kr_status kr_gpu_refine_load(kr_gpu_refine *g, const kr_gpu_refine_view *views, int n_views)
{
    (void)g, (void)views, (void)n_views;
    return no_cuda();
}

kr_status kr_gpu_refine_use(kr_gpu_refine *g, const kr_gpu_refine_view *views, int n_views)
{
    (void)g, (void)views, (void)n_views;
    return no_cuda();
}

kr_status kr_gpu_refine_eval(kr_gpu_refine *g, int star, int gauge, float huber, float cap,
                             const kr_df_pose *poses, const int *pairs, int npairs, kr_df_acc *acc)
{
    (void)g, (void)star, (void)gauge, (void)huber, (void)cap, (void)poses, (void)pairs,
        (void)npairs, (void)acc;
    return no_cuda();
}

kr_status kr_gpu_refine_eval_start(kr_gpu_refine *g, int star, int gauge, float huber, float cap,
                                   const kr_df_pose *poses, const int *pairs, int npairs)
{
    (void)g, (void)star, (void)gauge, (void)huber, (void)cap, (void)poses, (void)pairs,
        (void)npairs;
    return no_cuda();
}

kr_status kr_gpu_refine_eval_finish(kr_gpu_refine *g, kr_df_acc *acc)
{
    (void)g, (void)acc;
    return no_cuda();
}
