/* A uniform grid of cubic cells over a point set, the points sorted by cell
 * (x fastest): the points of the cells along one x-row of the grid are one
 * contiguous run, so every point within r of a query lies in at most
 * (2⌈r/h⌉ + 1)² runs — what the CPU Softassign engine streams over, with
 * vector loads, instead of every point (pipeline/register/register_cpu.c). */
#ifndef KINREG_PIPELINE_REGISTER_CELL_GRID_H
#define KINREG_PIPELINE_REGISTER_CELL_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "kinreg/status.h"

typedef struct {
    float *x, *y, *z; /* the points, sorted by cell */
    uint32_t *order;  /* sorted position -> the point's index */
    uint32_t *start;  /* cell -> its first sorted position (cells + 1 entries) */
    size_t n, cap, cells, cells_cap;
    float lo[3], inv_h;
    int dim[3];
} kr_cell_grid;

/* Sorts the n points (x[i], y[i], z[i]) into cells of side about h (larger
 * when that would make more than 4n + 64 cells). Reuses g's buffers (g
 * zeroed before its first build). KR_ERR_NOMEM. */
kr_status kr_cell_grid_build(kr_cell_grid *g, const float *x, const float *y, const float *z,
                             size_t n, float h);
void kr_cell_grid_free(kr_cell_grid *g);

/* The runs of sorted positions [first[k], end[k]) holding every point within
 * r of q (and some beyond: the cells of the box about q, row by row). Returns
 * how many there are; only the first max_runs are stored, so a caller seeing
 * more than max_runs must take every point instead. With cells of side h,
 * a box holds at most (2⌈r/h⌉ + 1)² rows. */
size_t kr_cell_grid_runs(const kr_cell_grid *g, const float q[3], float r, uint32_t *first,
                         uint32_t *end, size_t max_runs);

#endif
