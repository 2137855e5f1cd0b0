/* The CUDA twin of the refinement's engine (gpu/refine.cu), seen from plain C:
 * only the ground floor's types (core/dfield_kernels.h), so fusion/ can call
 * it without CUDA headers. Builds without CUDA answer KR_ERR_NO_DEVICE
 * (gpu/refine_nocuda.c). */
#ifndef KR_GPU_REFINE_GPU_H
#define KR_GPU_REFINE_GPU_H

#include <stddef.h>

#include "core/dfield_kernels.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_gpu_refine kr_gpu_refine;

kr_status kr_gpu_refine_create(kr_gpu_refine **out, kr_gpu_context *ctx);
void kr_gpu_refine_destroy(kr_gpu_refine **g);

/* One level's fields (host arrays, copied to the device) and grid points. */
typedef struct {
    kr_df_field field; /* host pointers */
    int bricks;
    const float *grid, *grid_val;
    size_t n_grid;
} kr_gpu_refine_view;

kr_status kr_gpu_refine_load(kr_gpu_refine *g, const kr_gpu_refine_view *views, int n_views);

/* One level's fields already on g's device (gpu/refine_fields_gpu.h: device
 * pointers that g reads but does not own; they must stay until the next load
 * or use): field, then the grid points g evaluates, as in kr_gpu_refine_view. */
kr_status kr_gpu_refine_use(kr_gpu_refine *g, const kr_gpu_refine_view *views, int n_views);

/* Sums per pair (pairs[2p], pairs[2p+1]) into acc[p], as the CPU engine
 * (fusion/refine_cpu.c): block reductions on the device, one pass per pair,
 * or for star (the thesis's form) one pass over the gauge's grid points. */
kr_status kr_gpu_refine_eval(kr_gpu_refine *g, int star, int gauge, float huber, float cap,
                             const kr_df_pose *poses, const int *pairs, int npairs, kr_df_acc *acc);

/* kr_gpu_refine_eval in two halves, so that one host thread keeps several
 * devices busy at once: start enqueues the uploads, the kernel and the
 * download of the sums on g's stream (page-locked staging, nothing waits);
 * finish waits for that stream and copies the sums into acc[0 … npairs−1].
 * Every start is followed by one finish on the same g, also after a failed
 * start (finish then returns that failure). */
kr_status kr_gpu_refine_eval_start(kr_gpu_refine *g, int star, int gauge, float huber, float cap,
                                   const kr_df_pose *poses, const int *pairs, int npairs);
kr_status kr_gpu_refine_eval_finish(kr_gpu_refine *g, kr_df_acc *acc);

#ifdef __cplusplus
}
#endif
#endif
