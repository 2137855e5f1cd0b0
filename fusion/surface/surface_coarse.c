/* A coarser mesh of the same volume (kr_surface_extract_coarse): the voxels
 * averaged over cubes of factor³ (their distances weighted by their weights,
 * their colours by their colour counts) into a volume of factor-times larger
 * voxels, meshed as any volume is. Unlike decimating the triangles (vertex
 * clustering folds thin parts into fins that share an edge three and more
 * times), the coarse mesh is a marching-cubes mesh like the fine one:
 * welded, consistently oriented, with edges shared by two triangles. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/surface/surface_coarse_kernels.h"
#include "fusion/surface/surface_internal.h"

typedef kr_surface_coarse_sum coarse_sum;

/* The fine voxels of blocks [first, first + n), wherever they live. */
static const kr_surface_voxel *fine_blocks(const kr_surface *s, size_t first, size_t n,
                                           kr_surface_voxel *buf, kr_status *st)
{
    if (!s->gpu) return kr_surface_block_voxels(s, first);
    *st = kr_surface_cuda_download_range(s->gpu, first, n, buf);
    return *st == KR_OK ? buf : NULL;
}

static kr_status accumulate(const kr_surface *s, kr_surface *c, int factor, coarse_sum **sums,
                            size_t *cap)
{
    /* On the device the voxels come down a chunk of blocks at a time. */
    kr_surface_voxel *buf =
        s->gpu ? malloc((size_t)KR_SURFACE_CHUNK * KR_SURFACE_BLOCK_VOXELS * sizeof *buf) : NULL;
    if (s->gpu && !buf) return kr_error(KR_ERR_NOMEM, "coarse mesh: out of memory");
    const kr_surface_view view = kr_surface_host_view(s);
    kr_status st = KR_OK;
    for (size_t first = 0; first < s->n_blocks && st == KR_OK; first += KR_SURFACE_CHUNK) {
        size_t n = s->n_blocks - first < KR_SURFACE_CHUNK ? s->n_blocks - first : KR_SURFACE_CHUNK;
        /* A chunk's blocks are contiguous on the host as on the device. */
        const kr_surface_voxel *chunk = fine_blocks(s, first, n, buf, &st);
        if (!chunk) break;
        for (size_t b = first; b < first + n && st == KR_OK; b++) {
            const kr_surface_voxel *vx = chunk + (b - first) * KR_SURFACE_BLOCK_VOXELS;
            for (int i = 0; i < KR_SURFACE_BLOCK_VOXELS; i++) {
                if (!(vx[i].w > 0.0f)) continue;
                int32_t g[3], gc[3], cb[3];
                kr_surface_voxel_of(&view, b, i, g);
                for (int k = 0; k < 3; k++) {
                    gc[k] = kr_surface_floor_div(g[k], factor);
                    cb[k] = kr_surface_floor_div(gc[k], KR_SURFACE_BLOCK);
                }
                long at = kr_surface_find_or_add(c, cb);
                if (at == -2) {
                    st = kr_error(KR_ERR_NOMEM, "coarse mesh: out of memory");
                    break;
                }
                if (at < 0) continue;
                size_t need = ((size_t)at + 1) * KR_SURFACE_BLOCK_VOXELS;
                if (need > *cap) {
                    size_t grown = *cap ? 2 * *cap : 1 << 16;
                    while (grown < need)
                        grown *= 2;
                    coarse_sum *p = realloc(*sums, grown * sizeof *p);
                    if (!p) {
                        st = kr_error(KR_ERR_NOMEM, "coarse mesh: out of memory");
                        break;
                    }
                    memset(p + *cap, 0, (grown - *cap) * sizeof *p);
                    *sums = p;
                    *cap = grown;
                }
                int l[3];
                for (int k = 0; k < 3; k++)
                    l[k] = gc[k] - cb[k] * KR_SURFACE_BLOCK;
                kr_surface_coarse_add(*sums + (size_t)at * KR_SURFACE_BLOCK_VOXELS +
                                          (l[2] * KR_SURFACE_BLOCK + l[1]) * KR_SURFACE_BLOCK +
                                          l[0],
                                      &vx[i]);
            }
        }
    }
    free(buf);
    return st;
}

/* Whether each block has a seen voxel. */
static kr_status blocks_seen(const kr_surface *s, uint8_t *seen)
{
    if (s->gpu) return kr_surface_cuda_seen(s->gpu, s->n_blocks, seen);
    const long n = (long)s->n_blocks;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < n; b++) {
        const kr_surface_voxel *vx = kr_surface_block_voxels(s, (size_t)b);
        bool any = false;
        for (int i = 0; i < KR_SURFACE_BLOCK_VOXELS && !any; i++)
            any = vx[i].w > 0.0f;
        seen[b] = any;
    }
    return KR_OK;
}

/* When the factor divides the block's side, each coarse voxel lies in one
 * fine block: the host lists each coarse block's fine blocks (factor³ of
 * them, -1 where none) and every coarse voxel gathers its own
 * (kr_surface_coarse_of) — in parallel on the CPU, one thread each on the
 * device, where the coarse volume is then meshed too and nothing but the
 * mesh comes down. Coarse blocks are made for fine blocks with a seen
 * voxel, in their order, as accumulate() makes them: the same blocks, the
 * same indices, the same sums. */
static kr_status coarse_by_block(const kr_surface *s, kr_surface *c, int factor)
{
    const size_t per = (size_t)factor * factor * factor;
    uint8_t *seen = malloc(s->n_blocks ? s->n_blocks : 1);
    if (!seen) return kr_error(KR_ERR_NOMEM, "coarse mesh: out of memory");
    kr_status st = blocks_seen(s, seen);
    /* On a device the coarse volume lives there from the start. */
    if (st == KR_OK && s->gpu) st = kr_surface_cuda_create_like(s->gpu, &c->gpu);
    int32_t *fine_of = NULL;
    size_t cap = 0;
    for (size_t b = 0; b < s->n_blocks && st == KR_OK; b++) {
        if (!seen[b]) continue;
        int32_t cb[3], sub[3];
        for (int k = 0; k < 3; k++) {
            cb[k] = kr_surface_floor_div(s->coords[b][k], factor);
            sub[k] = s->coords[b][k] - cb[k] * factor;
        }
        long at = kr_surface_find_or_add(c, cb);
        if (at == -2) st = kr_error(KR_ERR_NOMEM, "coarse mesh: out of memory");
        if (at < 0) continue;
        if (((size_t)at + 1) * per > cap) {
            size_t grown = cap ? 2 * cap : 1 << 16;
            while (grown < ((size_t)at + 1) * per)
                grown *= 2;
            int32_t *p = realloc(fine_of, grown * sizeof *p);
            if (!p) {
                st = kr_error(KR_ERR_NOMEM, "coarse mesh: out of memory");
                break;
            }
            memset(p + cap, 0xff, (grown - cap) * sizeof *p); /* -1: no fine block */
            fine_of = p;
            cap = grown;
        }
        fine_of[(size_t)at * per + (size_t)((sub[2] * factor + sub[1]) * factor + sub[0])] =
            (int32_t)b;
    }
    if (st == KR_OK && c->n_blocks && s->gpu) {
        st = kr_surface_cuda_coarse(c->gpu, s->gpu, &c->coords[0][0], c->n_blocks, fine_of, factor);
    } else if (st == KR_OK) {
        const kr_surface_view fine = kr_surface_host_view(s);
        const long n = (long)c->n_blocks;
#pragma omp parallel for schedule(static)
        for (long cb = 0; cb < n; cb++) {
            kr_surface_voxel *vx = kr_surface_block_voxels(c, (size_t)cb);
            for (int i = 0; i < KR_SURFACE_BLOCK_VOXELS; i++)
                kr_surface_coarse_of(&fine, fine_of + (size_t)cb * per, factor, i, vx + i);
        }
    }
    free(fine_of);
    free(seen);
    return st;
}

kr_status kr_surface_extract_coarse(const kr_surface *s, int factor, kr_mesh *out)
{
    if (!s || !out || factor < 1 || factor > 64)
        return kr_error(KR_ERR_INVALID_ARG, "kr_surface_extract_coarse: a surface, a mesh and a "
                                            "factor from 1 to 64");
    if (factor == 1) return kr_surface_extract(s, out);
    kr_surface_config cfg = s->cfg;
    cfg.voxel_size *= (float)factor;
    cfg.memory_mib = 0;
    kr_surface *c = NULL;
    kr_status st = kr_surface_create(&c, &cfg);
    if (st != KR_OK) return st;
    if (KR_SURFACE_BLOCK % factor == 0) {
        st = coarse_by_block(s, c, factor);
    } else {
        coarse_sum *sums = NULL;
        size_t cap = 0;
        st = accumulate(s, c, factor, &sums, &cap);
        for (size_t b = 0; st == KR_OK && b < c->n_blocks; b++) {
            kr_surface_voxel *vx = kr_surface_block_voxels(c, b);
            for (int i = 0; i < KR_SURFACE_BLOCK_VOXELS; i++)
                kr_surface_coarse_voxel(sums + b * KR_SURFACE_BLOCK_VOXELS + i, &vx[i]);
        }
        free(sums);
    }
    c->coloured = s->coloured;
    if (st == KR_OK) st = kr_surface_extract(c, out);
    kr_surface_destroy(&c);
    return st;
}
