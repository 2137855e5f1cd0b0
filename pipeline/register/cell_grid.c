/* A uniform grid of cells over a point set, points sorted by cell
 * (pipeline/register/cell_grid.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/register/cell_grid.h"

static int axis_cell(const kr_cell_grid *g, int a, float v)
{
    float c = floorf((v - g->lo[a]) * g->inv_h);
    if (!(c > 0)) return 0;
    return c >= (float)(g->dim[a] - 1) ? g->dim[a] - 1 : (int)c;
}

static size_t cell_of(const kr_cell_grid *g, float x, float y, float z)
{
    return (size_t)axis_cell(g, 0, x) +
           (size_t)g->dim[0] *
               ((size_t)axis_cell(g, 1, y) + (size_t)g->dim[1] * axis_cell(g, 2, z));
}

static int grow(kr_cell_grid *g, size_t n, size_t cells)
{
    if (n > g->cap) {
        float *x = realloc(g->x, n * sizeof *x), *y = x ? realloc(g->y, n * sizeof *y) : NULL;
        if (x) g->x = x;
        if (y) g->y = y;
        float *z = y ? realloc(g->z, n * sizeof *z) : NULL;
        if (z) g->z = z;
        uint32_t *o = z ? realloc(g->order, n * sizeof *o) : NULL;
        if (!o) return 0;
        g->order = o;
        g->cap = n;
    }
    if (cells + 1 > g->cells_cap) {
        uint32_t *s = realloc(g->start, (cells + 1) * sizeof *s);
        if (!s) return 0;
        g->start = s;
        g->cells_cap = cells + 1;
    }
    return 1;
}

kr_status kr_cell_grid_build(kr_cell_grid *g, const float *x, const float *y, const float *z,
                             size_t n, float h)
{
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++) {
        const float p[3] = {x[i], y[i], z[i]};
        for (int a = 0; a < 3; a++) {
            lo[a] = p[a] < lo[a] ? p[a] : lo[a];
            hi[a] = p[a] > hi[a] ? p[a] : hi[a];
        }
    }
    if (!n) lo[0] = lo[1] = lo[2] = hi[0] = hi[1] = hi[2] = 0;
    /* Cells of side h, coarser while there would be more than 4n + 64. */
    double cells;
    for (;;) {
        cells = 1;
        for (int a = 0; a < 3; a++)
            cells *= floor((hi[a] - lo[a]) / h) + 1;
        if (cells <= 4.0 * (double)n + 64) break;
        h *= 1.25f;
    }
    g->inv_h = 1.0f / h;
    for (int a = 0; a < 3; a++) {
        g->lo[a] = lo[a];
        g->dim[a] = (int)floor((hi[a] - lo[a]) / h) + 1;
    }
    g->cells = (size_t)cells;
    g->n = n;
    if (!grow(g, n, g->cells)) return kr_error(KR_ERR_NOMEM, "register: cannot sort %zu points", n);
    /* Counting sort: start[c + 1] counts cell c, then prefix sums. */
    memset(g->start, 0, (g->cells + 1) * sizeof *g->start);
    for (size_t i = 0; i < n; i++)
        g->start[cell_of(g, x[i], y[i], z[i]) + 1]++;
    for (size_t c = 0; c < g->cells; c++)
        g->start[c + 1] += g->start[c];
    for (size_t i = 0; i < n; i++) {
        size_t c = cell_of(g, x[i], y[i], z[i]);
        uint32_t k = g->start[c]++;
        g->x[k] = x[i];
        g->y[k] = y[i];
        g->z[k] = z[i];
        g->order[k] = (uint32_t)i;
    }
    /* start[c] now holds the end of cell c: shift back by one cell. */
    memmove(g->start + 1, g->start, g->cells * sizeof *g->start);
    g->start[0] = 0;
    return KR_OK;
}

void kr_cell_grid_free(kr_cell_grid *g)
{
    free(g->x);
    free(g->y);
    free(g->z);
    free(g->order);
    free(g->start);
    memset(g, 0, sizeof *g);
}

size_t kr_cell_grid_runs(const kr_cell_grid *g, const float q[3], float r, uint32_t *first,
                         uint32_t *end, size_t max_runs)
{
    int c0[3], c1[3];
    for (int a = 0; a < 3; a++) {
        float lo = (q[a] - r - g->lo[a]) * g->inv_h, hi = (q[a] + r - g->lo[a]) * g->inv_h;
        if (!(hi >= 0) || !(lo < (float)g->dim[a])) return 0; /* the box misses the grid */
        c0[a] = lo > 0 ? (int)lo : 0;
        c1[a] = hi < (float)(g->dim[a] - 1) ? (int)hi : g->dim[a] - 1;
    }
    size_t k = 0;
    for (int iz = c0[2]; iz <= c1[2]; iz++)
        for (int iy = c0[1]; iy <= c1[1]; iy++) {
            size_t row = (size_t)g->dim[0] * ((size_t)iy + (size_t)g->dim[1] * (size_t)iz);
            uint32_t a = g->start[row + (size_t)c0[0]], b = g->start[row + (size_t)c1[0] + 1];
            if (a == b) continue;
            if (k < max_runs) {
                first[k] = a;
                end[k] = b;
            }
            k++;
        }
    return k;
}
