/* The surface's mesh: marching cubes over the volume's voxels (mc_cases.h),
 * vertices welded by the cube edge they lie on, normals from the field's
 * gradient.
 *
 * A cube joins the centres of eight neighbouring voxels, which may lie in up
 * to eight blocks; it is skipped unless all eight were seen (weight > 0), so
 * the mesh is open where the scan saw nothing. Each triangle corner is named
 * by its cube edge — the edge's low voxel and its axis, unique in the whole
 * volume — and computed from that edge's two voxels alone, so the cubes
 * sharing an edge give it the same bits. Sorting the names welds the mesh. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/ply.h"
#include "fusion/surface/mc_cases.h"
#include "fusion/surface/surface_internal.h"

typedef struct {
    uint64_t key; /* the edge: low voxel (20 bits each, offset 2^19) and axis */
    float p[3], n[3];
} corner_entry;

typedef struct {
    corner_entry *v; /* 3 per triangle, in triangle order */
    size_t n, cap;
    bool failed;
} corner_list;

/* The voxel at global voxel coordinates g, or NULL when its block is absent;
 * `last` caches the previous block. */
typedef struct {
    int32_t c[3];
    long b;
} block_cache;

static int32_t floor_div(int32_t a, int32_t d)
{
    return a >= 0 ? a / d : -((-a + d - 1) / d);
}

static const kr_surface_voxel *voxel_at(const kr_surface *s, block_cache *cache, const int32_t g[3])
{
    int32_t c[3], l[3];
    for (int k = 0; k < 3; k++) {
        c[k] = floor_div(g[k], KR_SURFACE_BLOCK);
        l[k] = g[k] - c[k] * KR_SURFACE_BLOCK;
    }
    if (c[0] != cache->c[0] || c[1] != cache->c[1] || c[2] != cache->c[2]) {
        memcpy(cache->c, c, sizeof c);
        cache->b = kr_surface_find(s, c);
    }
    if (cache->b < 0) return NULL;
    return kr_surface_block_voxels(s, (size_t)cache->b) +
           (l[2] * KR_SURFACE_BLOCK + l[1]) * KR_SURFACE_BLOCK + l[0];
}

static bool seen_value(const kr_surface *s, block_cache *cache, const int32_t g[3], float *d)
{
    const kr_surface_voxel *v = voxel_at(s, cache, g);
    if (!v || !(v->w > 0.0f)) return false;
    *d = v->d;
    return true;
}

/* The field's gradient at voxel g by central differences, one-sided where a
 * neighbour is unseen (0 along an axis with neither). */
static void gradient(const kr_surface *s, block_cache *cache, const int32_t g[3], float here,
                     float out[3])
{
    for (int k = 0; k < 3; k++) {
        int32_t a[3] = {g[0], g[1], g[2]}, b[3] = {g[0], g[1], g[2]};
        a[k]++;
        b[k]--;
        float da, db;
        bool ha = seen_value(s, cache, a, &da), hb = seen_value(s, cache, b, &db);
        out[k] = ha && hb ? 0.5f * (da - db) : ha ? da - here : hb ? here - db : 0.0f;
    }
}

static uint64_t edge_key(const int32_t g[3], int axis)
{
    const int64_t off = 1 << 19;
    return (uint64_t)(g[0] + off) << 42 | (uint64_t)(g[1] + off) << 22 |
           (uint64_t)(g[2] + off) << 2 | (uint64_t)axis;
}

static bool push(corner_list *l, const corner_entry *e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        corner_entry *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *e;
    return true;
}

/* The triangle corner on edge e of the cube whose low voxel is g. */
static void edge_corner(const kr_surface *s, block_cache *cache, const kr_mc_table *t,
                        const int32_t g[3], const float value[8], int e, corner_entry *out)
{
    int a = t->edge_corner[e][0], b = t->edge_corner[e][1], axis = t->edge_axis[e];
    int32_t ga[3], gb[3];
    for (int k = 0; k < 3; k++) {
        ga[k] = g[k] + (a >> k & 1);
        gb[k] = g[k] + (b >> k & 1);
    }
    float u = value[a] / (value[a] - value[b]);
    float na[3], nb[3], len = 0.0f;
    gradient(s, cache, ga, value[a], na);
    gradient(s, cache, gb, value[b], nb);
    const float voxel = s->cfg.voxel_size;
    for (int k = 0; k < 3; k++) {
        out->p[k] = ((float)ga[k] + 0.5f + (k == axis ? u : 0.0f)) * voxel;
        out->n[k] = na[k] + u * (nb[k] - na[k]);
        len += out->n[k] * out->n[k];
    }
    len = sqrtf(len);
    for (int k = 0; k < 3; k++)
        out->n[k] = len > 0.0f ? out->n[k] / len : (k == 2 ? 1.0f : 0.0f);
    out->key = edge_key(ga, axis);
}

static void mesh_block(const kr_surface *s, const kr_mc_table *t, size_t b, corner_list *l)
{
    block_cache cache = {{INT32_MIN, INT32_MIN, INT32_MIN}, -1};
    for (int z = 0; z < KR_SURFACE_BLOCK; z++)
        for (int y = 0; y < KR_SURFACE_BLOCK; y++)
            for (int x = 0; x < KR_SURFACE_BLOCK; x++) {
                int32_t g[3] = {s->coords[b][0] * KR_SURFACE_BLOCK + x,
                                s->coords[b][1] * KR_SURFACE_BLOCK + y,
                                s->coords[b][2] * KR_SURFACE_BLOCK + z};
                float value[8];
                bool seen = true;
                for (int c = 0; c < 8 && seen; c++) {
                    int32_t q[3] = {g[0] + (c & 1), g[1] + (c >> 1 & 1), g[2] + (c >> 2 & 1)};
                    seen = seen_value(s, &cache, q, &value[c]);
                }
                if (!seen) continue;
                unsigned cs = kr_mc_case(value);
                for (int i = 0; i < 3 * t->triangles[cs]; i++) {
                    corner_entry e;
                    edge_corner(s, &cache, t, g, value, t->edges[cs][i], &e);
                    if (!push(l, &e)) {
                        l->failed = true;
                        return;
                    }
                }
            }
}

typedef struct {
    uint64_t key;
    size_t at;
} key_at;

static int by_key(const void *a, const void *b)
{
    const key_at *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key ? 1 : (x->at > y->at) - (x->at < y->at);
}

/* Welds the corners into vertices and faces. */
static kr_status weld(const corner_entry *v, size_t n, kr_mesh *out)
{
    key_at *order = malloc((n ? n : 1) * sizeof *order);
    uint32_t *faces = malloc((n ? n : 1) * sizeof *faces);
    float *xyz = malloc((n ? n : 1) * 3 * sizeof *xyz),
          *normals = malloc((n ? n : 1) * 3 * sizeof *normals);
    if (!order || !faces || !xyz || !normals || n / 3 > UINT32_MAX) {
        free(order), free(faces), free(xyz), free(normals);
        return kr_error(KR_ERR_NOMEM, "surface mesh: out of memory for %zu triangles", n / 3);
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (key_at){v[i].key, i};
    qsort(order, n, sizeof *order, by_key);
    size_t vertices = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || order[i].key != order[i - 1].key) {
            memcpy(xyz + 3 * vertices, v[order[i].at].p, sizeof v->p);
            memcpy(normals + 3 * vertices, v[order[i].at].n, sizeof v->n);
            vertices++;
        }
        faces[order[i].at] = (uint32_t)(vertices - 1);
    }
    free(order);
    float *x2 = realloc(xyz, (vertices ? vertices : 1) * 3 * sizeof *xyz);
    float *n2 = realloc(normals, (vertices ? vertices : 1) * 3 * sizeof *normals);
    *out = (kr_mesh){vertices, x2 ? x2 : xyz, n2 ? n2 : normals, n / 3, faces};
    return KR_OK;
}

kr_status kr_surface_extract(const kr_surface *s, kr_mesh *out)
{
    if (!s || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_surface_extract: missing surface or mesh");
    const kr_mc_table *t = kr_mc_table_get();
    const long n_blocks = (long)s->n_blocks;
    /* Each thread meshes one contiguous run of blocks (a static schedule),
     * and the runs are joined in thread order: the faces come in block order
     * whatever the thread count, so the file is the same bit for bit. */
    int threads = omp_get_max_threads();
    corner_list *lists = calloc((size_t)threads, sizeof *lists);
    if (!lists) return kr_error(KR_ERR_NOMEM, "surface mesh: out of memory");
#pragma omp parallel num_threads(threads)
    {
        corner_list *mine = &lists[omp_get_thread_num()];
#pragma omp for schedule(static)
        for (long b = 0; b < n_blocks; b++)
            if (!mine->failed) mesh_block(s, t, (size_t)b, mine);
    }
    corner_list all = {0};
    bool failed = false;
    for (int i = 0; i < threads; i++) {
        failed |= lists[i].failed;
        for (size_t j = 0; j < lists[i].n && !failed; j++)
            failed = !push(&all, &lists[i].v[j]);
        free(lists[i].v);
    }
    free(lists);
    kr_status st = KR_OK;
    if (failed)
        st = kr_error(KR_ERR_NOMEM, "surface mesh: out of memory (%zu blocks)", s->n_blocks);
    else if (all.n == 0)
        st = kr_error(KR_ERR_EMPTY, "surface mesh: no surface seen on both sides yet (%zu blocks)",
                      s->n_blocks);
    else
        st = weld(all.v, all.n, out);
    free(all.v);
    return st;
}

void kr_mesh_free(kr_mesh *m)
{
    if (!m) return;
    free(m->xyz);
    free(m->normals);
    free(m->faces);
    memset(m, 0, sizeof *m);
}

kr_status kr_mesh_save_ply(const char *path, const kr_mesh *m)
{
    if (!path || !m) return kr_error(KR_ERR_INVALID_ARG, "kr_mesh_save_ply: missing path or mesh");
    kr_ply_data d = {m->n_vertices,
                     m->xyz,
                     m->normals,
                     NULL,
                     m->n_faces,
                     m->faces,
                     "kinreg surface mesh (marching cubes of the fused signed distance)"};
    return kr_ply_write(path, "mesh", &d);
}
