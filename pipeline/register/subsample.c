/* Voxel subsampling with an open-addressing hash of voxel keys: O(n) per
 * pass, a few passes as the voxel grows. */
#include "pipeline/register/subsample.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t voxel_key(const float *p, double inv)
{
    /* 21 bits per axis: ±1e6 voxels, far beyond a room at any voxel size. */
    int64_t x = (int64_t)floor(p[0] * inv), y = (int64_t)floor(p[1] * inv),
            z = (int64_t)floor(p[2] * inv);
    return ((uint64_t)(x & 0x1fffff) << 42) | ((uint64_t)(y & 0x1fffff) << 21) |
           (uint64_t)(z & 0x1fffff);
}

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

/* One pass: marks in `keep` the first point of each voxel; returns the count. */
static size_t one_pass(const float *points, size_t n, double voxel, uint64_t *table, size_t cap,
                       unsigned char *keep)
{
    const uint64_t empty = UINT64_MAX;
    for (size_t i = 0; i < cap; i++)
        table[i] = empty;
    size_t count = 0;
    double inv = 1.0 / voxel;
    for (size_t i = 0; i < n; i++) {
        const float *p = points + 3 * i;
        keep[i] = 0;
        if (!(p[0] == p[0] && p[1] == p[1] && p[2] == p[2])) continue;
        uint64_t k = voxel_key(p, inv);
        if (k == empty) k = 0;
        size_t slot = (size_t)(mix(k) & (cap - 1));
        while (table[slot] != empty && table[slot] != k)
            slot = (slot + 1) & (cap - 1);
        if (table[slot] == empty) {
            table[slot] = k;
            keep[i] = 1;
            count++;
        }
    }
    return count;
}

#define MAX_GROWTHS 64

/* The voxel after k growths by half, multiplied as often as growing pass by
 * pass would (the same double). */
static double grown(double voxel, int k)
{
    while (k-- > 0)
        voxel *= 1.5;
    return voxel;
}

kr_status kr_voxel_subsample(float *points, size_t n, double voxel, size_t max_points, size_t *kept,
                             double *voxel_used)
{
    if (!points || !kept || !(voxel > 0) || max_points < 1)
        return kr_error(KR_ERR_INVALID_ARG, "kr_voxel_subsample: NULL points or bad voxel/limit");
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    uint64_t *table = malloc(cap * sizeof *table);
    unsigned char *keep = malloc(n ? n : 1);
    if (!table || !keep) {
        free(table);
        free(keep);
        return kr_error(KR_ERR_NOMEM, "voxel subsampling: out of memory for %zu points", n);
    }
    /* The voxel is the first of voxel·1.5^k, k = 0, 1, ... (at most 64), that
     * keeps at most max_points. A surface's count falls about as the voxel
     * squared, so the count at the start says roughly which k that is:
     * start one short of it and step, a few passes instead of one per k
     * (a room's model to 1000 points: 7). */
    size_t count = one_pass(points, n, voxel, table, cap, keep);
    int k = 0;
    if (count > max_points) {
        double need = 0.5 * log((double)count / (double)max_points) / log(1.5);
        k = (int)ceil(need) - 1;
        k = k < 1 ? 1 : k > MAX_GROWTHS ? MAX_GROWTHS : k;
        count = one_pass(points, n, grown(voxel, k), table, cap, keep);
        if (count <= max_points) {
            /* Started too far: back down while a smaller voxel also keeps
             * few enough, then the marks of the one found again. */
            while (k > 1 &&
                   one_pass(points, n, grown(voxel, k - 1), table, cap, keep) <= max_points)
                k--;
            count = one_pass(points, n, grown(voxel, k), table, cap, keep);
        }
        while (count > max_points && k < MAX_GROWTHS)
            count = one_pass(points, n, grown(voxel, ++k), table, cap, keep);
    }
    voxel = grown(voxel, k);
    size_t w = 0;
    for (size_t i = 0; i < n && w < max_points; i++)
        if (keep[i]) {
            memmove(points + 3 * w, points + 3 * i, 3 * sizeof *points);
            w++;
        }
    free(table);
    free(keep);
    *kept = w;
    if (voxel_used) *voxel_used = voxel;
    return KR_OK;
}
