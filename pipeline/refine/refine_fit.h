/* The independent measure of a multi-view alignment (refine_fit.c), for the
 * refinement's own decisions: its per-view k-d trees are built once and the
 * alignment of several sets of poses measured on them. */
#ifndef KINREG_PIPELINE_REFINE_REFINE_FIT_H
#define KINREG_PIPELINE_REFINE_REFINE_FIT_H

#include "kinreg/refine.h"

typedef struct kr_refine_fitter kr_refine_fitter;

kr_status kr_refine_fitter_create(const kr_refine_view *views, int n, kr_refine_fitter **out);
void kr_refine_fitter_destroy(kr_refine_fitter **f);
/* The views' median point spacing, metres. */
double kr_refine_fitter_spacing(const kr_refine_fitter *f);
/* The views' size: the median radius of their bounding spheres, metres. */
double kr_refine_fitter_extent(const kr_refine_fitter *f);
/* kr_refine_fit_of on the fitter's views. Deterministic: the same poses give
 * the same figures on every process and thread count. */
kr_status kr_refine_fitter_eval(const kr_refine_fitter *f, const kr_pose *poses, double radius,
                                double *view_overlap, kr_refine_fit *out);

#endif
