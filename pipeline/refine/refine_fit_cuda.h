/* The independent measure on CUDA devices (pipeline/refine/refine_fit_cuda.cu),
 * seen from plain C: the twin of kr_refine_fitter_eval's OpenMP loop. Every
 * device holds every view's tree and occupancy (a sample may land near any
 * view) and takes a contiguous share of the views' samples; each sample's
 * capped squared distance comes back, and the host adds them in sample
 * order as it does for its own, so the figures are the same bit for bit on
 * either engine and any number of devices. The per-sample step is
 * pipeline/refine/refine_fit_kernels.h. Builds without CUDA answer
 * KR_ERR_NO_DEVICE (pipeline/refine/refine_fit_nocuda.c). */
#ifndef KINREG_PIPELINE_REFINE_REFINE_FIT_CUDA_H
#define KINREG_PIPELINE_REFINE_REFINE_FIT_CUDA_H

#include <stddef.h>

#include "gpu/engine.h"
#include "kinreg/refine.h"
#include "pipeline/refine/refine_fit_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_refine_fit_cuda kr_refine_fit_cuda;

#define KR_REFINE_FIT_MAX_DEVICES KR_REFINE_MAX_DEVICES

/* The views (host arrays; tree cells n_internal + 1 each) and the samples
 * (xyz, those of view k at sample_start[k] … sample_start[k + 1]) onto
 * devices[0 … n_devices), a context of its own on each; n_devices 0: one
 * context on base's device. */
kr_status kr_refine_fit_cuda_create(kr_refine_fit_cuda **out, kr_gpu_context *base,
                                    const int *devices, int n_devices, const kr_fit_view *views,
                                    int n_views, const float *samples, const size_t *sample_start);
void kr_refine_fit_cuda_destroy(kr_refine_fit_cuda **f);
/* best[s] (every sample, in order) = kr_fit_sample at the poses (and their
 * inverses inv), cap2 and prune. Waits for the devices. */
kr_status kr_refine_fit_cuda_eval(kr_refine_fit_cuda *f, const kr_pose *poses, const kr_pose *inv,
                                  double cap2, int prune, double *best);

#ifdef __cplusplus
}
#endif

#endif
