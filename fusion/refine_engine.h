/* Internal: which engine computes the refinement's fields and sums — the
 * OpenMP loops (refine_cpu.c, dfield.c) or the CUDA twin (gpu/refine_gpu.h),
 * chosen by the kr_device. */
#ifndef KINREG_FUSION_REFINE_ENGINE_H
#define KINREG_FUSION_REFINE_ENGINE_H

#include "fusion/refine_internal.h"

typedef struct kr_refine_engine kr_refine_engine;

/* dev NULL: the CPU engine. With a CUDA dev and n_devices > 0 the sums are
 * split over those device ordinals (a context each, made here); with
 * n_devices 0 they run on dev's own context. */
kr_status kr_refine_engine_create(kr_refine_engine **out, kr_device *dev, const int *devices,
                                  int n_devices);
void kr_refine_engine_destroy(kr_refine_engine **eng);
kr_backend kr_refine_engine_backend(const kr_refine_engine *eng);
/* CUDA devices the sums run on (0 on the CPU). */
int kr_refine_engine_devices(const kr_refine_engine *eng);
/* kr_dfield_build on this engine; with normals (not NULL) a signed field
 * (kr_dfield_build_signed, on the host for either engine). */
kr_status kr_refine_engine_field(kr_refine_engine *eng, kr_dfield *f, const float *xyz,
                                 const float *normals, size_t n, size_t stride, float h, int band,
                                 double subset, unsigned seed);
/* Makes pb's fields the ones evaluated next (the GPU copies them over). */
kr_status kr_refine_engine_load(kr_refine_engine *eng, const kr_refine_problem *pb);
kr_status kr_refine_engine_eval(kr_refine_engine *eng, const kr_refine_problem *pb,
                                const kr_df_pose *poses, const int *pairs, int npairs,
                                kr_df_acc *acc);

#endif
