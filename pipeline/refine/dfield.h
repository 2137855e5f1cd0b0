/* Internal: a view's sparse distance field (DESIGN.md §5, thesis §3.2) — the
 * brick table, the influenced corners' values, and the list of influenced
 * corners that serve as the view's residual grid points. The per-element math
 * is pipeline/refine/dfield_kernels.h. */
#ifndef KINREG_PIPELINE_REFINE_DFIELD_H
#define KINREG_PIPELINE_REFINE_DFIELD_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/refine/dfield_kernels.h"
#include "kinreg/status.h"

typedef struct {
    float h;
    int band;
    uint64_t *keys; /* brick table */
    int *slots;
    uint32_t capacity;
    int bricks;
    int *brick_xyz; /* brick coordinates of each slot (3 ints) */
    float *values;  /* bricks × KR_DFIELD_BRICK_CELLS */
    /* Influenced corners kept as grid points (a subset when asked). */
    float *grid;     /* 3 floats per grid point, view frame */
    float *grid_val; /* the corner's distance */
    size_t n_grid;
    float lo[3], hi[3]; /* bounds of all influenced corners, view frame */
} kr_dfield;

/* Builds the field of the points xyz[3·k], k = 0, stride, 2·stride, … < n on
 * corners of spacing h with the given band (b ≥ 1; b = 1: the 8 corners of
 * each point's cell). Grid points: each influenced corner is kept with
 * probability `subset` (1 keeps all), chosen by a hash of the corner and seed
 * so the choice repeats. The brick table is filled serially (a few thousand
 * bricks); the distances by all threads with an atomic minimum. */
kr_status kr_dfield_build(kr_dfield *f, const float *xyz, size_t n, size_t stride, float h,
                          int band, double subset, unsigned seed);
/* kr_dfield_build with signed values: each corner holds n·(g − p) for its
 * nearest point p and that point's unit normal n (normals[3·k], NaN: the point
 * is skipped), pipeline/refine/dfield_kernels.h "Signed fields". */
kr_status kr_dfield_build_signed(kr_dfield *f, const float *xyz, const float *normals, size_t n,
                                 size_t stride, float h, int band, double subset, unsigned seed);
/* The brick table alone, values all +∞ and no grid points: what the GPU
 * engine needs before it fills the distances itself. */
kr_status kr_dfield_build_bricks(kr_dfield *f, const float *xyz, size_t n, size_t stride, float h,
                                 int band);
/* Keeps the influenced corners as grid points (after the values are filled). */
kr_status kr_dfield_collect(kr_dfield *f, double subset, unsigned seed);
void kr_dfield_free(kr_dfield *f);
kr_dfield_lookup kr_dfield_lookup_of(const kr_dfield *f);

#endif
