/* Internal: which engine computes the refinement's fields and sums — the
 * OpenMP loops (refine_cpu.c, dfield.c) or the CUDA twin (pipeline/refine/refine_cuda.h),
 * chosen by the kr_device. */
#ifndef KINREG_PIPELINE_REFINE_REFINE_ENGINE_H
#define KINREG_PIPELINE_REFINE_REFINE_ENGINE_H

#include "pipeline/refine/refine_internal.h"
#include "kinreg/refine.h"

typedef struct kr_refine_engine kr_refine_engine;

/* dev NULL: the CPU engine. With a CUDA dev and n_devices > 0 the sums are
 * split over those device ordinals (a context each, made here); with
 * n_devices 0 they run on dev's own context. */
kr_status kr_refine_engine_create(kr_refine_engine **out, kr_device *dev, const int *devices,
                                  int n_devices);
void kr_refine_engine_destroy(kr_refine_engine **eng);
kr_backend kr_refine_engine_backend(const kr_refine_engine *eng);
/* Fields built on one device reach the others through the host (true), or
 * peer to peer where the devices allow it (false, the default). */
void kr_refine_engine_stage_copies(kr_refine_engine *eng, bool staged);
/* The CUDA engine's solver of dense normal equations on its first device
 * (pipeline/refine/refine_solve_cuda.h), made at the first call; NULL on the CPU, or
 * when it cannot be made (then the host solves). */
struct kr_refine_device_solver *kr_refine_engine_solver(kr_refine_engine *eng);
/* CUDA devices the sums run on (0 on the CPU). */
int kr_refine_engine_devices(const kr_refine_engine *eng);
/* A field built on the host (kr_dfield_build; with normals, not NULL,
 * kr_dfield_build_signed), for the CPU engine or kr_refine_engine_load. A
 * CUDA engine builds its own on the devices (_build_level below). */
kr_status kr_refine_engine_field(kr_refine_engine *eng, kr_dfield *f, const float *xyz,
                                 const float *normals, size_t n, size_t stride, float h, int band,
                                 double subset, unsigned seed);
/* Fields built on the devices (CUDA; pipeline/refine/refine_fields_cuda.h): each device
 * builds the fields of its share of the views (view k on device k mod D),
 * then copies the others' fields from the devices that built them; a view's
 * grid points stay where it was built, so each device evaluates the grid
 * points of its own views. 1 when this engine does so (CUDA), else 0. */
int kr_refine_engine_device_fields(const kr_refine_engine *eng);
/* Each view's points onto the device that builds its fields; signed: their
 * normals computed there, and the points moved onto their planes. */
kr_status kr_refine_engine_prepare(kr_refine_engine *eng, const kr_refine_view *views, int V,
                                   int signed_fields);
/* One level's fields on the devices (slot 0: the finest grid, kept for the
 * run; 1: a coarser one), view k from its points k' = 0, stride[k], … with
 * grid-point seed seed + k, this process keeping share rank of ranks of each
 * view's grid points. fields[k] gets the host's summary only (h, band,
 * bricks, n_grid: all of the view's grid points, lo, hi; no arrays);
 * kr_refine_engine_load with pb.device_level = 1 + slot makes it the level
 * evaluated. */
kr_status kr_refine_engine_build_level(kr_refine_engine *eng, int slot, const size_t *stride,
                                       float h, int band, double subset, unsigned seed, int rank,
                                       int ranks, kr_dfield *fields);
/* For tests: the device fields of device index d (0 … devices − 1), NULL
 * when the fields are on the host. */
struct kr_refine_cuda_fields *kr_refine_engine_gpu_fields(kr_refine_engine *eng, int d);
/* Makes pb's fields the ones evaluated next (the GPU copies them over, or
 * with pb->device_level selects the level built there). */
kr_status kr_refine_engine_load(kr_refine_engine *eng, const kr_refine_problem *pb);
kr_status kr_refine_engine_eval(kr_refine_engine *eng, const kr_refine_problem *pb,
                                const kr_refine_posef *poses, const int *pairs, int npairs,
                                kr_refine_acc *acc);

#endif
