/* Internal: the refinement's normal equations over all views but the gauge,
 * block-sparse (a 6×6 block per view and per pair of views that overlap),
 * and their damped solve (H + λ·diag H) δ = −g. With CHOLMOD (SuiteSparse,
 * KINREG_HAVE_CHOLMOD) a sparse Cholesky factorisation, whose fill follows
 * the overlap graph: a long scan whose views overlap their neighbours costs
 * about O(views) instead of the dense O(views³). When most pairs overlap
 * (a sequence of one scene) the factor is dense anyway, and a dense
 * Cholesky (LAPACK's, KINREG_HAVE_LAPACK) is faster; builds without CHOLMOD
 * always solve densely (fine for tens of views). With the CUDA engine the
 * dense fill may be solved on a device instead (kr_refine_normal_use_device,
 * pipeline/refine/refine_solve_cuda.h). */
#ifndef KINREG_PIPELINE_REFINE_REFINE_SOLVE_H
#define KINREG_PIPELINE_REFINE_REFINE_SOLVE_H

#include "pipeline/refine/dfield_kernels.h"
#include <stdbool.h>

#include "kinreg/status.h"

typedef struct kr_refine_normal kr_refine_normal;

kr_status kr_refine_normal_create(kr_refine_normal **out, int views, int gauge);
void kr_refine_normal_destroy(kr_refine_normal **ne);

/* Assembles H and g from the pair sums (pipeline/refine/dfield_kernels.h: J_j = −J_i):
 * pairs[2p], pairs[2p+1] and acc[p] for p < npairs; pairs that saw nothing
 * are skipped. Returns the largest diagonal entry of H (0: nothing overlaps). */
kr_status kr_refine_normal_assemble(kr_refine_normal *ne, const int *pairs,
                                    const kr_refine_acc *acc, int npairs, double *max_diagonal);

/* x (6·(views−1) values, the gauge left out) = the solution of
 * (H + λ·D) x = −g, D the diagonal of H with zeros raised to 1e-9 of its
 * largest entry (a view without residuals stays still). KR_ERR_NUMERIC (no
 * message) when the matrix is not positive definite. */
kr_status kr_refine_normal_solve(kr_refine_normal *ne, double lambda, double *x);

/* True when a system of `views` views is one the CUDA engine's device
 * solves (pipeline/refine/refine_solve_cuda.h): large enough to pay for the copy,
 * small enough to fill densely. */
bool kr_refine_normal_device_pays(int views);
/* Solve on that device from now on (NULL: the host). The solver is the
 * caller's and outlives ne. */
struct kr_refine_device_solver;
void kr_refine_normal_use_device(kr_refine_normal *ne, struct kr_refine_device_solver *device);

/* "cholmod" or "dense": the solver this build uses for sparse systems. */
const char *kr_refine_solver_name(void);
/* "cholmod", "dense" or "cusolver": the one the last kr_refine_normal_solve used
 * ("none" before any). */
const char *kr_refine_normal_solver(const kr_refine_normal *ne);

#endif
