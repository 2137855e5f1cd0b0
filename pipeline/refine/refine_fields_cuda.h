/* The refinement's fields built on a CUDA device (pipeline/refine/refine_fields_cuda.cu), seen
 * from plain C: the twin of pipeline/refine/refine_normals.c (normals by PCA over the
 * 12 nearest neighbours, points moved onto their planes), pipeline/refine/dfield.c and
 * pipeline/refine/dfield_signed.c (bricks, unsigned or signed values, grid points).
 * The per-element math is core/kdtree_knn.h, core/normals_pca.h and
 * pipeline/refine/dfield_kernels.h, shared with the OpenMP build.
 *
 * One kr_refine_cuda_fields per device holds the points (and normals) of the views
 * that device builds, and two level slots (0: the finest grid, kept for the
 * whole run; 1: the coarser grid in use) of every view's field: the ones it
 * built, with their grid points, and copies of the others' (field only).
 * Builds without CUDA answer KR_ERR_NO_DEVICE (pipeline/refine/refine_fields_nocuda.c). */
#ifndef KINREG_PIPELINE_REFINE_REFINE_FIELDS_CUDA_H
#define KINREG_PIPELINE_REFINE_REFINE_FIELDS_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/refine/dfield_kernels.h"
#include "gpu/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_refine_cuda_fields kr_refine_cuda_fields;

/* One view's field of one level slot on a device (device pointers). */
typedef struct {
    kr_dfield_lookup field; /* keys, slots, values on the device (NULL: not built) */
    int bricks;
    const float *grid, *grid_val; /* NULL where the view was only copied */
    size_t n_grid;                /* the builder's count of grid points */
    float lo[3], hi[3];           /* bounds of the influenced corners, view frame */
} kr_refine_cuda_field_info;

/* n_views views, on ctx's device; own_context: work on a second context of
 * that device (kr_gpu_context_twin), for a ctx another thread also uses. */
kr_status kr_refine_cuda_fields_create(kr_refine_cuda_fields **out, kr_gpu_context *ctx,
                                       int n_views, int own_context);
void kr_refine_cuda_fields_destroy(kr_refine_cuda_fields **f);
int kr_refine_cuda_fields_device(const kr_refine_cuda_fields *f);

/* View k's points (xyz[3i], i < n) onto the device. with_normals: their
 * normals (a k-d tree of the view built on the device, the 12 nearest
 * neighbours, PCA), and the points moved onto their planes, which are then
 * the points the view's fields are built from. Waits for the device. */
kr_status kr_refine_cuda_fields_points(kr_refine_cuda_fields *f, int k, const float *xyz, size_t n,
                                       int with_normals);

/* View k's field in `slot` (0 or 1) from its points i = 0, stride, 2·stride,
 * … (signed when it has normals): the brick table, the values and the grid
 * points, as kr_dfield_build / kr_dfield_build_signed on the host. The slot's
 * previous field of view k is released. info gets the summary. Waits for
 * the device (two small read-backs: the brick count, then the grid points'). */
kr_status kr_refine_cuda_fields_build(kr_refine_cuda_fields *f, int slot, int k, size_t stride,
                                      float h, int band, double subset, unsigned seed,
                                      kr_refine_cuda_field_info *info);

/* Copies view k's field of `slot` from src (which built it and is idle) onto
 * f: keys, slots and values, not the grid points. Devices that can reach each
 * other copy directly (peer), others through page-locked host memory, and
 * so do all when `staged`. Waits for the device. */
kr_status kr_refine_cuda_fields_copy(kr_refine_cuda_fields *f, const kr_refine_cuda_fields *src,
                                     int slot, int k, bool staged);

/* View k's field of `slot` on f's device. */
kr_status kr_refine_cuda_fields_info(const kr_refine_cuda_fields *f, int slot, int k,
                                     kr_refine_cuda_field_info *info);

/* For tests: host copies (malloc'd, the caller frees) of view k's field of
 * `slot` — keys and slots (capacity entries, *capacity), values (bricks ×
 * KR_DFIELD_BRICK_CELLS), grid (3 per grid point) and grid_val; any may be NULL
 * to skip it. */
kr_status kr_refine_cuda_fields_download(const kr_refine_cuda_fields *f, int slot, int k,
                                         uint32_t *capacity, uint64_t **keys, int **slots,
                                         float **values, float **grid, float **grid_val);
/* For tests: view k's normals and (moved) points, 3n floats each (either may
 * be NULL); KR_ERR_INVALID_ARG when the view has no normals. */
kr_status kr_refine_cuda_fields_download_normals(const kr_refine_cuda_fields *f, int k,
                                                 float *normals, float *points);

#ifdef __cplusplus
}
#endif
#endif
