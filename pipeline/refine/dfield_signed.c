/* Signed sparse distance fields (pipeline/refine/dfield.h, pipeline/refine/dfield_kernels.h
 * "Signed fields"): the same bricks and grid points as kr_dfield_build, each
 * corner valued by the signed distance to the tangent plane of its nearest
 * point. The CPU engine's build; the CUDA engine builds the same fields on its
 * devices (pipeline/refine/refine_fields_cuda.cu) from the same per-element math. */
#include <math.h>
#include <stdlib.h>

#include "pipeline/refine/dfield.h"

/* Keeps the smaller of *slot and pair (64-bit compare-and-swap loop). */
static void atomic_min_pair(uint64_t *slot, uint64_t pair)
{
    uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    while (pair < cur &&
           !__atomic_compare_exchange_n(slot, &cur, pair, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

kr_status kr_dfield_build_signed(kr_dfield *f, const float *xyz, const float *normals, size_t n,
                                 size_t stride, float h, int band, double subset, unsigned seed)
{
    if (!normals && n)
        return kr_error(KR_ERR_INVALID_ARG, "distance field: a signed field needs normals");
    kr_dfield g;
    kr_status s = kr_dfield_build_bricks(&g, xyz, n, stride, h, band);
    if (s != KR_OK) return s;
    size_t cells = (size_t)g.bricks * KR_DFIELD_BRICK_CELLS;
    uint64_t *pairs = malloc(sizeof *pairs * (cells ? cells : 1));
    if (!pairs) {
        kr_dfield_free(&g);
        return kr_error(KR_ERR_NOMEM, "distance field: no memory for %zu corners", cells);
    }
    for (size_t i = 0; i < cells; i++)
        pairs[i] = KR_DFIELD_EMPTY_PAIR;
    kr_dfield_lookup view = kr_dfield_lookup_of(&g);
    float inv_h = 1.0f / h;
    long count = (long)((n + stride - 1) / stride);
#pragma omp parallel for schedule(static)
    for (long k = 0; k < count; k++) {
        const float *p = xyz + 3 * (size_t)k * stride, *nrm = normals + 3 * (size_t)k * stride;
        int lo[3], hi[3];
        /* A point without a normal (a degenerate neighbourhood) defines no
         * plane: it leaves the corners to its neighbours. */
        if (!(fabsf(nrm[0]) <= 1) || !kr_dfield_corner_range(p, inv_h, band, lo, hi)) continue;
        for (int z = lo[2]; z <= hi[2]; z++)
            for (int y = lo[1]; y <= hi[1]; y++)
                for (int x = lo[0]; x <= hi[0]; x++) {
                    long i = kr_dfield_corner_index(&view, x, y, z);
                    if (i >= 0)
                        atomic_min_pair(&pairs[i], kr_dfield_signed_pair(p, nrm, x, y, z, h));
                }
    }
    for (size_t i = 0; i < cells; i++)
        g.values[i] = kr_dfield_pair_value(pairs[i]);
    free(pairs);
    s = kr_dfield_collect(&g, subset, seed);
    if (s != KR_OK) {
        kr_dfield_free(&g);
        return s;
    }
    *f = g;
    return KR_OK;
}
