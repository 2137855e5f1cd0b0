/* The independent measure of a multi-view alignment (refine_fit.c), for the
 * refinement's own decisions: its per-view k-d trees are built once and the
 * alignment of several sets of poses measured on them. */
#ifndef KINREG_PIPELINE_REFINE_REFINE_FIT_H
#define KINREG_PIPELINE_REFINE_REFINE_FIT_H

#include "kinreg/device.h"
#include "kinreg/refine.h"

typedef struct kr_refine_fitter kr_refine_fitter;

kr_status kr_refine_fitter_create(const kr_refine_view *views, int n, kr_refine_fitter **out);
void kr_refine_fitter_destroy(kr_refine_fitter **f);
/* The views' median point spacing, metres. */
double kr_refine_fitter_spacing(const kr_refine_fitter *f);
/* The views' size: the median radius of their bounding spheres, metres. */
double kr_refine_fitter_extent(const kr_refine_fitter *f);
/* Measures on dev's CUDA devices from now on: devices[0 … n_devices), or
 * with n_devices 0 dev's own device (each gets every view's tree, and a
 * share of the samples); a CPU dev (or NULL) measures on OpenMP threads.
 * The figures are the same either way. */
kr_status kr_refine_fitter_use_devices(kr_refine_fitter *f, kr_device *dev, const int *devices,
                                       int n_devices);
/* kr_refine_fit_of on the fitter's views. Deterministic: the same poses give
 * the same figures on every process and thread count. */
kr_status kr_refine_fitter_eval(const kr_refine_fitter *f, const kr_pose *poses, double radius,
                                double *view_overlap, kr_refine_fit *out);

#endif
