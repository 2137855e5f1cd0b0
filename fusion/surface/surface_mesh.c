/* The surface's mesh on the CPU engine: every cube's triangle corners
 * (surface_mesh_kernels.h), one block per OpenMP iteration, then welded by
 * the cube edge each lies on. The CUDA engine does the same on the device
 * (surface_cuda.cu). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/ply.h"
#include "fusion/surface/surface_internal.h"
#include "fusion/surface/surface_mesh_kernels.h"

typedef struct {
    kr_surface_corner *v; /* 3 per triangle, in triangle order */
    size_t n, cap;
    bool failed;
} corner_list;

static bool push(corner_list *l, const kr_surface_corner *e, size_t n)
{
    if (l->n + n > l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        while (cap < l->n + n)
            cap *= 2;
        kr_surface_corner *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    memcpy(l->v + l->n, e, n * sizeof *e);
    l->n += n;
    return true;
}

static void mesh_block(const kr_surface_view *v, const kr_mc_table *t, size_t b, corner_list *l)
{
    kr_surface_block_cache cache;
    kr_surface_cache_init(&cache);
    for (int i = 0; i < KR_SURFACE_BLOCK_VOXELS; i++) {
        int32_t g[3];
        kr_surface_voxel_of(v, b, i, g);
        kr_surface_corner c[KR_SURFACE_CUBE_CORNERS];
        int n = kr_surface_cube(v, &cache, t, g, c);
        if (n && !push(l, c, (size_t)n)) {
            l->failed = true;
            return;
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
/* Welds the corners into vertices and faces; with `colour`, vertex colours. */
static kr_status weld(const kr_surface_corner *v, size_t n, bool colour, kr_mesh *out)
{
    size_t m = n ? n : 1;
    key_at *order = malloc(m * sizeof *order);
    uint32_t *faces = malloc(m * sizeof *faces);
    float *xyz = malloc(m * 3 * sizeof *xyz), *normals = malloc(m * 3 * sizeof *normals);
    uint8_t *rgb = colour ? malloc(m * 3) : NULL;
    if (!order || !faces || !xyz || !normals || (colour && !rgb) || n / 3 > UINT32_MAX) {
        free(order), free(faces), free(xyz), free(normals), free(rgb);
        return kr_error(KR_ERR_NOMEM, "surface mesh: out of memory for %zu triangles", n / 3);
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (key_at){v[i].key, i};
    qsort(order, n, sizeof *order, by_key);
    size_t vertices = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || order[i].key != order[i - 1].key) {
            const kr_surface_corner *c = &v[order[i].at];
            memcpy(xyz + 3 * vertices, c->p, sizeof c->p);
            memcpy(normals + 3 * vertices, c->n, sizeof c->n);
            if (rgb) memcpy(rgb + 3 * vertices, c->rgb, sizeof c->rgb);
            vertices++;
        }
        faces[order[i].at] = (uint32_t)(vertices - 1);
    }
    free(order);
    size_t k = vertices ? vertices : 1;
    float *x2 = realloc(xyz, k * 3 * sizeof *xyz), *n2 = realloc(normals, k * 3 * sizeof *normals);
    uint8_t *c2 = rgb ? realloc(rgb, k * 3) : NULL;
    *out = (kr_mesh){vertices, x2 ? x2 : xyz, n2 ? n2 : normals, c2 ? c2 : rgb, n / 3, faces};
    return KR_OK;
}

/* Every cube's corners on the CPU engine, in block order. */
static kr_status host_corners(const kr_surface *s, corner_list *all)
{
    const kr_mc_table *t = kr_mc_table_get();
    const kr_surface_view view = kr_surface_host_view(s);
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
            if (!mine->failed) mesh_block(&view, t, (size_t)b, mine);
    }
    bool failed = false;
    for (int i = 0; i < threads; i++) {
        failed |= lists[i].failed;
        if (!failed && lists[i].n) failed = !push(all, lists[i].v, lists[i].n);
        free(lists[i].v);
    }
    free(lists);
    if (failed)
        return kr_error(KR_ERR_NOMEM, "surface mesh: out of memory (%zu blocks)", s->n_blocks);
    return KR_OK;
}

kr_status kr_surface_extract(const kr_surface *s, kr_mesh *out)
{
    if (!s || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_surface_extract: missing surface or mesh");
    kr_status st;
    kr_mesh m = {0};
    if (s->gpu) {
        st = kr_surface_cuda_mesh(s->gpu, s->slots, s->n_slots, s->n_blocks, s->cfg.voxel_size,
                                  s->coloured, &m);
    } else {
        corner_list all = {0};
        st = host_corners(s, &all);
        if (st == KR_OK && all.n) st = weld(all.v, all.n, s->coloured, &m);
        free(all.v);
    }
    if (st == KR_OK && m.n_faces == 0) {
        kr_mesh_free(&m);
        st = kr_error(KR_ERR_EMPTY, "surface mesh: no surface seen on both sides yet (%zu blocks)",
                      s->n_blocks);
    }
    if (st == KR_OK) *out = m;
    return st;
}

void kr_mesh_free(kr_mesh *m)
{
    if (!m) return;
    free(m->xyz);
    free(m->normals);
    free(m->rgb);
    free(m->faces);
    memset(m, 0, sizeof *m);
}

kr_status kr_mesh_save_ply(const char *path, const kr_mesh *m)
{
    if (!path || !m) return kr_error(KR_ERR_INVALID_ARG, "kr_mesh_save_ply: missing path or mesh");
    kr_ply_data d = {m->n_vertices,
                     m->xyz,
                     m->normals,
                     m->rgb,
                     m->n_faces,
                     m->faces,
                     "kinreg surface mesh (marching cubes of the fused signed distance)"};
    return kr_ply_write(path, "mesh", &d);
}
