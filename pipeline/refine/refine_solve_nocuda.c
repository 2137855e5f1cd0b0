/* Builds without CUDA: no device solve (pipeline/refine/refine_solve_cuda.h). */
#include "pipeline/refine/refine_solve_cuda.h"

#include <stddef.h>

kr_status kr_refine_device_solver_create(kr_refine_device_solver **out, int device)
{
    (void)device;
    if (out) *out = NULL;
    return kr_error(KR_ERR_NO_DEVICE, "refine: this build has no CUDA: the host solves");
}

void kr_refine_device_solver_destroy(kr_refine_device_solver **s)
{
    if (s) *s = NULL;
}

kr_status kr_refine_device_solve(kr_refine_device_solver *s, const double *A, int n, double *x)
{
    (void)s, (void)A, (void)n, (void)x;
    return kr_error(KR_ERR_NO_DEVICE, "refine: this build has no CUDA: the host solves");
}

kr_status kr_refine_device_solve_damped(kr_refine_device_solver *s, const double *H, bool upload,
                                        const double *d, int n, double *x)
{
    (void)s, (void)H, (void)upload, (void)d, (void)n, (void)x;
    return kr_error(KR_ERR_NO_DEVICE, "refine: this build has no CUDA: the host solves");
}
