/* The refinement's damped normal equations solved on a CUDA device: the
 * dense matrix that pipeline/refine/refine_solve.c fills on the host (the
 * same fill as its LAPACK path), factored and solved with cuSOLVER's Cholesky
 * (potrf, potrs), for the CUDA engine.
 *
 * Why: a sequence whose keyframes all see each other has a dense system of
 * 6 unknowns per keyframe. With 298 keyframes (1782 unknowns) the host's
 * reference LAPACK took about 1 s a solve, 51-60 s of a 64-73 s refinement
 * on two H200 (the fields and sums took 10 s); a device factors it in
 * milliseconds. Builds without CUDA answer KR_ERR_NO_DEVICE
 * (pipeline/refine/refine_solve_nocuda.c). */
#ifndef KINREG_PIPELINE_REFINE_REFINE_SOLVE_CUDA_H
#define KINREG_PIPELINE_REFINE_REFINE_SOLVE_CUDA_H

#include <stdbool.h>

#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_refine_device_solver kr_refine_device_solver;

/* A solver on CUDA device `device`, with a stream of its own (it may run
 * beside a tracker on the same device). Its buffers grow with the system. */
kr_status kr_refine_device_solver_create(kr_refine_device_solver **out, int device);
void kr_refine_device_solver_destroy(kr_refine_device_solver **s);

/* Solves A x = b for the symmetric positive definite n×n A given as LAPACK's
 * column-major upper triangle (the row-major lower one; the rest is not
 * read), b given in x. KR_ERR_NUMERIC (no message) when A is not positive
 * definite; another error (cuSOLVER missing, no device memory) says why. */
kr_status kr_refine_device_solve(kr_refine_device_solver *s, const double *A, int n, double *x);

/* Solves (H + diag(d)) x = b, H laid out as A above. The device keeps H:
 * it is uploaded only when `upload` (a new assembly), and each solve adds
 * the damping d[0 … n−1] to a device copy of it. Levenberg–Marquardt's
 * retries with a larger λ then cost a device-to-device copy, not the host's
 * n×n fill and upload (19 MB for 260 keyframes). */
kr_status kr_refine_device_solve_damped(kr_refine_device_solver *s, const double *H, bool upload,
                                        const double *d, int n, double *x);

#ifdef __cplusplus
}
#endif
#endif
