/* Marching cubes over the surface volume, per cube, written once for both
 * engines (DESIGN.md §4; the CUDA file is compiled with -fmad=false, so the
 * two round alike and give the same mesh bit for bit).
 *
 * A cube joins the centres of eight neighbouring voxels, which may lie in up
 * to eight blocks; it makes no triangles unless all eight were seen (weight
 * > 0), so the mesh is open where the scan saw nothing. Each triangle corner
 * is named by its cube edge — the edge's low voxel and its axis, unique in
 * the whole volume — and computed from that edge's two voxels alone, so the
 * cubes sharing an edge give it the same bits, and sorting the names welds
 * the mesh (surface_mesh.c). Its normal is the field's gradient (central
 * differences at the edge's two voxels, interpolated). */
#ifndef KINREG_FUSION_SURFACE_MESH_KERNELS_H
#define KINREG_FUSION_SURFACE_MESH_KERNELS_H

#include "fusion/surface/mc_cases.h"
#include "fusion/surface/surface_view.h"

typedef struct {
    uint64_t key; /* the edge: low voxel (20 bits each, offset 2^19) and axis */
    float p[3], n[3];
    uint8_t rgb[3];
    uint8_t coloured; /* rgb holds a colour (a frame with colour saw either voxel) */
} kr_surface_corner;

/* A cube's corners at most: 3 per triangle. */
#define KR_SURFACE_CUBE_CORNERS (3 * KR_MC_MAX_TRIANGLES)

/* The field's gradient at voxel g by central differences, one-sided where a
 * neighbour is unseen (0 along an axis with neither). */
static inline KR_HD void kr_surface_gradient(const kr_surface_view *v,
                                             kr_surface_block_cache *cache, const int32_t g[3],
                                             float here, float out[3])
{
    for (int k = 0; k < 3; k++) {
        int32_t a[3] = {g[0], g[1], g[2]}, b[3] = {g[0], g[1], g[2]};
        a[k]++;
        b[k]--;
        float da = 0.0f, db = 0.0f;
        bool ha = kr_surface_view_seen(v, cache, a, &da),
             hb = kr_surface_view_seen(v, cache, b, &db);
        out[k] = ha && hb ? 0.5f * (da - db) : ha ? da - here : hb ? here - db : 0.0f;
    }
}

static inline KR_HD uint64_t kr_surface_edge_key(const int32_t g[3], int axis)
{
    const int64_t off = 1 << 19;
    return (uint64_t)(g[0] + off) << 42 | (uint64_t)(g[1] + off) << 22 |
           (uint64_t)(g[2] + off) << 2 | (uint64_t)axis;
}

/* The triangle corner on edge e of the cube whose low voxel is g. */
static inline KR_HD void kr_surface_edge_corner(const kr_surface_view *v,
                                                kr_surface_block_cache *cache, const kr_mc_table *t,
                                                const int32_t g[3], const float value[8], int e,
                                                kr_surface_corner *out)
{
    int a = t->edge_corner[e][0], b = t->edge_corner[e][1], axis = t->edge_axis[e];
    int32_t ga[3], gb[3];
    for (int k = 0; k < 3; k++) {
        ga[k] = g[k] + (a >> k & 1);
        gb[k] = g[k] + (b >> k & 1);
    }
    float u = value[a] / (value[a] - value[b]);
    float na[3], nb[3], len = 0.0f;
    kr_surface_gradient(v, cache, ga, value[a], na);
    kr_surface_gradient(v, cache, gb, value[b], nb);
    for (int k = 0; k < 3; k++) {
        out->p[k] = ((float)ga[k] + 0.5f + (k == axis ? u : 0.0f)) * v->voxel;
        out->n[k] = na[k] + u * (nb[k] - na[k]);
        len += out->n[k] * out->n[k];
    }
    len = sqrtf(len);
    for (int k = 0; k < 3; k++)
        out->n[k] = len > 0.0f ? out->n[k] / len : (k == 2 ? 1.0f : 0.0f);
    out->key = kr_surface_edge_key(ga, axis);
    /* The colour between the edge's voxels as the distance is, or the one
     * that has a colour. */
    const kr_surface_voxel *va = kr_surface_view_voxel(v, cache, ga),
                           *vb = kr_surface_view_voxel(v, cache, gb);
    int ca = va && va->colour_w, cb = vb && vb->colour_w;
    out->coloured = (uint8_t)(ca || cb);
    for (int k = 0; k < 3; k++) {
        float x = ca && cb ? (float)va->rgb[k] + u * ((float)vb->rgb[k] - (float)va->rgb[k])
                  : ca     ? (float)va->rgb[k]
                  : cb     ? (float)vb->rgb[k]
                           : 0.0f;
        out->rgb[k] = (uint8_t)(x + 0.5f);
    }
}

/* The triangle corners of the cube whose low voxel is g, 3 per triangle,
 * into out (room for KR_SURFACE_CUBE_CORNERS); returns how many. `cache`
 * may carry over from the cube before. */
static inline KR_HD int kr_surface_cube(const kr_surface_view *v, kr_surface_block_cache *cache,
                                        const kr_mc_table *t, const int32_t g[3],
                                        kr_surface_corner *out)
{
    float value[8];
    for (int c = 0; c < 8; c++) {
        int32_t q[3] = {g[0] + (c & 1), g[1] + (c >> 1 & 1), g[2] + (c >> 2 & 1)};
        if (!kr_surface_view_seen(v, cache, q, &value[c])) return 0;
    }
    unsigned cs = kr_mc_case(value);
    int n = 3 * t->triangles[cs];
    for (int i = 0; i < n; i++)
        kr_surface_edge_corner(v, cache, t, g, value, t->edges[cs][i], &out[i]);
    return n;
}

/* Global voxel coordinates of voxel i (x fastest) of block b. */
static inline KR_HD void kr_surface_voxel_of(const kr_surface_view *v, size_t b, int i,
                                             int32_t g[3])
{
    const int32_t *c = v->coords + 3 * b;
    g[0] = c[0] * KR_SURFACE_BLOCK + i % KR_SURFACE_BLOCK;
    g[1] = c[1] * KR_SURFACE_BLOCK + i / KR_SURFACE_BLOCK % KR_SURFACE_BLOCK;
    g[2] = c[2] * KR_SURFACE_BLOCK + i / (KR_SURFACE_BLOCK * KR_SURFACE_BLOCK);
}

#endif
