/* The CUDA twin of the refinement's engine (pipeline/refine/refine_cuda.cu), seen from plain C:
 * only the ground floor's types (pipeline/refine/dfield_kernels.h), so fusion/ can call
 * it without CUDA headers. Builds without CUDA answer KR_ERR_NO_DEVICE
 * (pipeline/refine/refine_nocuda.c). */
#ifndef KINREG_PIPELINE_REFINE_REFINE_CUDA_H
#define KINREG_PIPELINE_REFINE_REFINE_CUDA_H

#include <stddef.h>

#include "pipeline/refine/dfield_kernels.h"
#include "gpu/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_refine_cuda kr_refine_cuda;

kr_status kr_refine_cuda_create(kr_refine_cuda **out, kr_gpu_context *ctx);
void kr_refine_cuda_destroy(kr_refine_cuda **g);

/* One level's fields (host arrays, copied to the device) and grid points. */
typedef struct {
    kr_dfield_lookup field; /* host pointers */
    int bricks;
    const float *grid, *grid_val;
    size_t n_grid;
} kr_refine_cuda_view;

kr_status kr_refine_cuda_load(kr_refine_cuda *g, const kr_refine_cuda_view *views, int n_views);

/* One level's fields already on g's device (pipeline/refine/refine_fields_cuda.h: device
 * pointers that g reads but does not own; they must stay until the next load
 * or use): field, then the grid points g evaluates, as in kr_refine_cuda_view. */
kr_status kr_refine_cuda_use(kr_refine_cuda *g, const kr_refine_cuda_view *views, int n_views);

/* Sums per pair (pairs[2p], pairs[2p+1]) into acc[p], as the CPU engine
 * (pipeline/refine/refine_cpu.c): block reductions on the device, one pass per pair,
 * or for star (the thesis's form) one pass over the gauge's grid points. */
kr_status kr_refine_cuda_eval(kr_refine_cuda *g, int star, int gauge, float huber, float cap,
                              const kr_refine_posef *poses, const int *pairs, int npairs,
                              kr_refine_acc *acc);

/* kr_refine_cuda_eval in two halves, so that one host thread keeps several
 * devices busy at once: start enqueues the uploads, the kernel and the
 * download of the sums on g's stream (page-locked staging, nothing waits);
 * finish waits for that stream and copies the sums into acc[0 … npairs−1].
 * Every start is followed by one finish on the same g, also after a failed
 * start (finish then returns that failure). */
kr_status kr_refine_cuda_eval_start(kr_refine_cuda *g, int star, int gauge, float huber, float cap,
                                    const kr_refine_posef *poses, const int *pairs, int npairs);
kr_status kr_refine_cuda_eval_finish(kr_refine_cuda *g, kr_refine_acc *acc);
/* finish without the copy: waits, then *sums points at the npairs sums in
 * g's page-locked staging, valid until g's next start. Summing several
 * devices' sums from there saves copying each one first. */
kr_status kr_refine_cuda_eval_wait(kr_refine_cuda *g, const kr_refine_acc **sums);

#ifdef __cplusplus
}
#endif
#endif
