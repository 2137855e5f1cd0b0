/* Sparse distance fields of the influenced corners (see pipeline/refine/dfield.h). */
#include "pipeline/refine/dfield.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int brick_of(int corner)
{
    return corner >> KR_DFIELD_BRICK_LOG; /* floor division for negatives too */
}

static kr_status table_grow(kr_dfield *f)
{
    uint32_t cap = f->capacity ? f->capacity * 2 : 1024;
    uint64_t *keys = malloc(sizeof *keys * cap);
    int *slots = malloc(sizeof *slots * cap);
    if (!keys || !slots) {
        free(keys);
        free(slots);
        return kr_error(KR_ERR_NOMEM, "distance field: no memory for a brick table of %u entries",
                        cap);
    }
    for (uint32_t i = 0; i < cap; i++)
        keys[i] = KR_DFIELD_EMPTY_KEY;
    for (uint32_t i = 0; i < f->capacity; i++) {
        if (f->keys[i] == KR_DFIELD_EMPTY_KEY) continue;
        uint32_t at = kr_dfield_hash(f->keys[i]) & (cap - 1);
        while (keys[at] != KR_DFIELD_EMPTY_KEY)
            at = (at + 1) & (cap - 1);
        keys[at] = f->keys[i];
        slots[at] = f->slots[i];
    }
    free(f->keys);
    free(f->slots);
    f->keys = keys;
    f->slots = slots;
    f->capacity = cap;
    return KR_OK;
}

static kr_status insert_brick(kr_dfield *f, int bx, int by, int bz, int *xyz_cap)
{
    uint64_t key = kr_dfield_brick_key(bx, by, bz);
    uint32_t mask = f->capacity - 1;
    uint32_t at = kr_dfield_hash(key) & mask;
    while (f->keys[at] != KR_DFIELD_EMPTY_KEY) {
        if (f->keys[at] == key) return KR_OK;
        at = (at + 1) & mask;
    }
    if (f->bricks == *xyz_cap) {
        int cap = *xyz_cap ? *xyz_cap * 2 : 256;
        int *grown = realloc(f->brick_xyz, sizeof *grown * 3 * (size_t)cap);
        if (!grown) return kr_error(KR_ERR_NOMEM, "distance field: no memory for %d bricks", cap);
        f->brick_xyz = grown;
        *xyz_cap = cap;
    }
    f->keys[at] = key;
    f->slots[at] = f->bricks;
    f->brick_xyz[3 * f->bricks] = bx;
    f->brick_xyz[3 * f->bricks + 1] = by;
    f->brick_xyz[3 * f->bricks + 2] = bz;
    f->bricks++;
    if ((uint32_t)f->bricks * 2 > f->capacity) return table_grow(f);
    return KR_OK;
}

kr_status kr_dfield_build_bricks(kr_dfield *f, const float *xyz, size_t n, size_t stride, float h,
                                 int band)
{
    if (!f || (!xyz && n) || !(h > 0) || band < 1 || stride < 1)
        return kr_error(KR_ERR_INVALID_ARG,
                        "distance field: needs points, a cell size > 0 and a band >= 1");
    kr_dfield g = {.h = h, .band = band};
    kr_status s = table_grow(&g);
    int xyz_cap = 0, last[6] = {1, 0, 0, 0, 0, 0}; /* empty range: lo > hi */
    float inv_h = 1.0f / h;
    for (size_t k = 0; k < n && s == KR_OK; k += stride) {
        const float *p = xyz + 3 * k;
        int lo[3], hi[3], b[6];
        if (!kr_dfield_corner_range(p, inv_h, band, lo, hi)) continue;
        for (int a = 0; a < 3; a++) {
            b[a] = brick_of(lo[a]);
            b[3 + a] = brick_of(hi[a]);
        }
        /* Scan order keeps neighbours together: skip a point whose bricks
         * are the previous point's. */
        if (!memcmp(b, last, sizeof b)) continue;
        memcpy(last, b, sizeof b);
        for (int bz = b[2]; bz <= b[5] && s == KR_OK; bz++)
            for (int by = b[1]; by <= b[4] && s == KR_OK; by++)
                for (int bx = b[0]; bx <= b[3] && s == KR_OK; bx++)
                    s = insert_brick(&g, bx, by, bz, &xyz_cap);
    }
    size_t cells = (size_t)g.bricks * KR_DFIELD_BRICK_CELLS;
    if (s == KR_OK && !(g.values = malloc(sizeof *g.values * (cells ? cells : 1))))
        s = kr_error(KR_ERR_NOMEM, "distance field: no memory for %d bricks", g.bricks);
    if (s != KR_OK) {
        kr_dfield_free(&g);
        return s;
    }
    for (size_t i = 0; i < cells; i++)
        g.values[i] = INFINITY;
    *f = g;
    return KR_OK;
}

/* Atomic minimum of a non-negative float through its bit pattern. */
static void atomic_min_bits(float *slot, float value)
{
    uint32_t *bits = (uint32_t *)slot, v;
    memcpy(&v, &value, sizeof v);
    uint32_t cur = __atomic_load_n(bits, __ATOMIC_RELAXED);
    while (v < cur &&
           !__atomic_compare_exchange_n(bits, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static void fill_distances(kr_dfield *f, const float *xyz, size_t n, size_t stride)
{
    kr_dfield_lookup view = kr_dfield_lookup_of(f);
    float inv_h = 1.0f / f->h;
    long count = (long)((n + stride - 1) / stride);
#pragma omp parallel for schedule(static)
    for (long k = 0; k < count; k++) {
        const float *p = xyz + 3 * (size_t)k * stride;
        int lo[3], hi[3];
        if (!kr_dfield_corner_range(p, inv_h, f->band, lo, hi)) continue;
        for (int z = lo[2]; z <= hi[2]; z++)
            for (int y = lo[1]; y <= hi[1]; y++)
                for (int x = lo[0]; x <= hi[0]; x++) {
                    long i = kr_dfield_corner_index(&view, x, y, z);
                    if (i >= 0)
                        atomic_min_bits(&f->values[i], kr_dfield_corner_distance(p, x, y, z, f->h));
                }
    }
}

kr_status kr_dfield_collect(kr_dfield *f, double subset, unsigned seed)
{
    size_t cells = (size_t)f->bricks * KR_DFIELD_BRICK_CELLS, kept = 0;
    uint32_t threshold = kr_dfield_subset_threshold(subset);
    float *grid = malloc(sizeof *grid * 3 * (cells ? cells : 1));
    float *val = malloc(sizeof *val * (cells ? cells : 1));
    if (!grid || !val) {
        free(grid);
        free(val);
        return kr_error(KR_ERR_NOMEM, "distance field: no memory for %zu grid points", cells);
    }
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    kr_dfield_lookup view = kr_dfield_lookup_of(f);
    for (int b = 0; b < f->bricks; b++)
        for (int c = 0; c < KR_DFIELD_BRICK_CELLS; c++) {
            float v = f->values[(size_t)b * KR_DFIELD_BRICK_CELLS + c];
            if (!(v < INFINITY)) continue;
            int c3[3];
            kr_dfield_cell_corner(f->brick_xyz, b, c, c3);
            float p[3] = {f->h * (float)c3[0], f->h * (float)c3[1], f->h * (float)c3[2]};
            for (int a = 0; a < 3; a++) {
                lo[a] = fminf(lo[a], p[a]);
                hi[a] = fmaxf(hi[a], p[a]);
            }
            /* A fixed offset inside the corner's cell, valued by
             * interpolation (pipeline/refine/dfield_kernels.h, "Grid points"). */
            if (!kr_dfield_grid_point(&view, c3[0], c3[1], c3[2], threshold, seed, grid + 3 * kept,
                                      &v))
                continue;
            val[kept++] = v;
        }
    free(f->grid);
    free(f->grid_val);
    f->grid = grid;
    f->grid_val = val;
    f->n_grid = kept;
    memcpy(f->lo, lo, sizeof lo);
    memcpy(f->hi, hi, sizeof hi);
    return KR_OK;
}

kr_status kr_dfield_build(kr_dfield *f, const float *xyz, size_t n, size_t stride, float h,
                          int band, double subset, unsigned seed)
{
    kr_dfield g;
    kr_status s = kr_dfield_build_bricks(&g, xyz, n, stride, h, band);
    if (s != KR_OK) return s;
    fill_distances(&g, xyz, n, stride);
    s = kr_dfield_collect(&g, subset, seed);
    if (s != KR_OK) {
        kr_dfield_free(&g);
        return s;
    }
    *f = g;
    return KR_OK;
}

void kr_dfield_free(kr_dfield *f)
{
    if (!f) return;
    free(f->keys);
    free(f->slots);
    free(f->brick_xyz);
    free(f->values);
    free(f->grid);
    free(f->grid_val);
    memset(f, 0, sizeof *f);
}

kr_dfield_lookup kr_dfield_lookup_of(const kr_dfield *f)
{
    kr_dfield_lookup v = {.h = f->h,
                          .inv_h = 1.0f / f->h,
                          .keys = f->keys,
                          .slots = f->slots,
                          .values = f->values,
                          .mask = f->capacity - 1};
    return v;
}
