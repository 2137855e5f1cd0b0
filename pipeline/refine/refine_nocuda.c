/* The refinement's CUDA engine in a build without CUDA: unreachable through
 * kr_refine (no CUDA kr_device can exist), answered for completeness. */
#include "pipeline/refine/refine_cuda.h"

static kr_status no_cuda(void)
{
    return kr_error(
        KR_ERR_NO_DEVICE,
        "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu");
}

kr_status kr_refine_cuda_create(kr_refine_cuda **out, kr_gpu_context *ctx)
{
    (void)out;
    (void)ctx;
    return no_cuda();
}

void kr_refine_cuda_destroy(kr_refine_cuda **g)
{
    (void)g;
}

kr_status kr_refine_cuda_load(kr_refine_cuda *g, const kr_refine_cuda_view *views, int n_views)
{
    (void)g, (void)views, (void)n_views;
    return no_cuda();
}

kr_status kr_refine_cuda_use(kr_refine_cuda *g, const kr_refine_cuda_view *views, int n_views)
{
    (void)g, (void)views, (void)n_views;
    return no_cuda();
}

kr_status kr_refine_cuda_eval(kr_refine_cuda *g, int star, int gauge, float huber, float cap,
                              const kr_refine_posef *poses, const int *pairs, int npairs,
                              kr_refine_acc *acc)
{
    (void)g, (void)star, (void)gauge, (void)huber, (void)cap, (void)poses, (void)pairs,
        (void)npairs, (void)acc;
    return no_cuda();
}

kr_status kr_refine_cuda_eval_start(kr_refine_cuda *g, int star, int gauge, float huber, float cap,
                                    const kr_refine_posef *poses, const int *pairs, int npairs)
{
    (void)g, (void)star, (void)gauge, (void)huber, (void)cap, (void)poses, (void)pairs,
        (void)npairs;
    return no_cuda();
}

kr_status kr_refine_cuda_eval_finish(kr_refine_cuda *g, kr_refine_acc *acc)
{
    (void)g, (void)acc;
    return no_cuda();
}

kr_status kr_refine_cuda_eval_wait(kr_refine_cuda *g, const kr_refine_acc **sums)
{
    (void)g, (void)sums;
    return no_cuda();
}
