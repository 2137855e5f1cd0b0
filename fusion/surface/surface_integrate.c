/* Integrating a frame into the surface volume.
 *
 * First the blocks the frame's surface passes through are found, allocated
 * when new: each measured point's ray is walked across its truncation band
 * in steps of half a block, so every block within the band of a surface
 * the frame saw is listed. (On the CUDA engine the device walks the bands
 * and looks the blocks up in its copy of the hash; only the keys of blocks
 * it does not know come to the host, which adds them in key order as the
 * CPU engine does.) Then every voxel of those blocks is fused
 * (surface_kernels.h): those behind the measured surface are untouched,
 * those in front are pulled towards free space. As in voxel hashing
 * (Nießner et al. 2013) and Open3D's scalable volume, blocks outside every
 * band are left alone: the cost follows the surface seen, not the volume in
 * view, and free space is carved within the band (where a moved object's
 * old surface lies when it is still in front of the new one). Blocks are
 * independent, so the second pass runs one block per OpenMP iteration. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/surface/surface_internal.h"

static void frame_of(const kr_surface *s, const kr_cloud *cloud, const kr_pose *pose,
                     kr_surface_frame *f)
{
    kr_pose inv = kr_pose_inv(pose);
    f->k = cloud->intrinsics;
    const kr_intrinsics *k = &f->k;
    f->distorted =
        !(k->k1 == 0.0f && k->k2 == 0.0f && k->k3 == 0.0f && k->p1 == 0.0f && k->p2 == 0.0f);
    for (int i = 0; i < 9; i++)
        f->R[i] = (float)inv.R[i];
    for (int i = 0; i < 3; i++)
        f->t[i] = (float)inv.t[i];
    f->depth = s->depth;
    f->voxel = s->cfg.voxel_size;
    f->depth_step = s->cfg.depth_step;
    f->truncation_voxels = s->cfg.truncation_voxels;
    f->max_weight = s->cfg.max_weight;
    f->max_depth = s->cfg.max_depth;
}

typedef struct {
    uint64_t *keys;
    size_t n, cap;
    bool failed;
} key_list;

static bool push_key(key_list *l, uint64_t key)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        uint64_t *keys = realloc(l->keys, cap * sizeof *keys);
        if (!keys) return false;
        l->keys = keys;
        l->cap = cap;
    }
    l->keys[l->n++] = key;
    return true;
}

/* The blocks a frame's bands pass through (kr_surface_band_key): each thread
 * walks its rows' points and lists the blocks, dropping repeats with a small
 * direct-mapped cache of the keys it listed last (a point's neighbours
 * mostly hit the same blocks), so the lists hold a few times the frame's
 * blocks, not its samples. Every second point of every second row is
 * enough: they are 2-12 mm apart at 0.5-3 m (fx 525), a block is 8 voxels
 * (4 cm at 5 mm), and a block only a skipped point's band would reach is a
 * sliver at its corner that later frames fill. */
static void band_blocks(const kr_surface_frame *f, const kr_cloud *cloud, const float Rwc[9],
                        const float twc[3], key_list *mine)
{
    enum { RECENT = 1024 };
    uint64_t recent[RECENT];
    memset(recent, 0xff, sizeof recent);
#pragma omp for schedule(static)
    for (int v = 0; v < cloud->height; v += KR_SURFACE_BAND_STRIDE)
        for (int u = 0; u < cloud->width && !mine->failed; u += KR_SURFACE_BAND_STRIDE) {
            const float *p = cloud->points + 3 * ((size_t)v * cloud->width + u);
            kr_surface_band band = kr_surface_band_of(f, Rwc, p);
            for (int j = 0; j < band.samples; j++) {
                uint64_t key = kr_surface_band_key(f, &band, twc, j);
                uint64_t *slot = &recent[(key ^ key >> 21 ^ key >> 42) % RECENT];
                if (*slot == key) continue;
                *slot = key;
                if (!push_key(mine, key)) {
                    mine->failed = true;
                    break;
                }
            }
        }
}

/* Sorts n keys (LSD radix, 8 passes of a byte, through `tmp`) and drops
 * repeats; returns how many are left. */
static size_t sort_unique(uint64_t *keys, uint64_t *tmp, size_t n)
{
    for (int shift = 0; shift < 64; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++)
            count[(keys[i] >> shift & 0xff) + 1]++;
        for (int d = 0; d < 256; d++)
            count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++)
            tmp[count[keys[i] >> shift & 0xff]++] = keys[i];
        uint64_t *t = keys;
        keys = tmp;
        tmp = t;
    }
    /* Eight passes: the sorted keys are back in the first array. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || keys[i] != keys[m - 1]) keys[m++] = keys[i];
    return m;
}

/* The frame's band blocks as sorted unique keys, on the CPU engine. */
static kr_status host_band_keys(const kr_surface_frame *f, const kr_cloud *cloud,
                                const float Rwc[9], const float twc[3], key_list *out)
{
    int threads = omp_get_max_threads();
    key_list *lists = calloc((size_t)threads, sizeof *lists);
    if (!lists) return kr_error(KR_ERR_NOMEM, "surface volume: out of memory");
#pragma omp parallel num_threads(threads)
    band_blocks(f, cloud, Rwc, twc, &lists[omp_get_thread_num()]);
    size_t n = 0;
    bool failed = false;
    for (int t = 0; t < threads; t++) {
        n += lists[t].n;
        failed |= lists[t].failed;
    }
    uint64_t *keys = failed ? NULL : malloc((n ? n : 1) * sizeof *keys);
    uint64_t *tmp = keys ? malloc((n ? n : 1) * sizeof *tmp) : NULL;
    if (tmp) {
        size_t at = 0;
        for (int t = 0; t < threads; t++) {
            memcpy(keys + at, lists[t].keys, lists[t].n * sizeof *keys);
            at += lists[t].n;
        }
        n = sort_unique(keys, tmp, n);
    }
    for (int t = 0; t < threads; t++)
        free(lists[t].keys);
    free(lists);
    free(tmp);
    if (!keys || (n && !tmp)) {
        free(keys);
        return kr_error(KR_ERR_NOMEM, "surface volume: out of memory");
    }
    *out = (key_list){keys, n, n, false};
    return KR_OK;
}

/* Adds the blocks of n unique keys in key order, listing their indices in
 * s->touched (a block the cap refuses is left out). */
static kr_status add_keys(kr_surface *s, const uint64_t *keys, size_t n)
{
    s->n_touched = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c[3];
        kr_surface_key_block(keys[i], c);
        long b = kr_surface_find_or_add(s, c);
        if (b == -2) return kr_error(KR_ERR_NOMEM, "surface volume: out of memory");
        if (b >= 0) s->touched[s->n_touched++] = (uint32_t)b;
    }
    return KR_OK;
}

/* Lists (allocating) the blocks within the truncation band of every measured
 * point, once each, in the order of their keys, so that both engines give
 * the same blocks the same indices (and the meshes the same faces in the
 * same order). On the CPU engine s->touched lists them all; on the CUDA
 * engine the device finds the blocks it knows from its copy of the hash,
 * and s->touched lists the ones added here, from the keys it did not know
 * (sorted: new blocks are numbered in key order on both engines). */
static kr_status allocate(kr_surface *s, const kr_surface_frame *f, const kr_cloud *cloud,
                          const kr_pose *pose)
{
    float Rwc[9], twc[3];
    for (int i = 0; i < 9; i++)
        Rwc[i] = (float)pose->R[i];
    for (int i = 0; i < 3; i++)
        twc[i] = (float)pose->t[i];
    key_list keys = {0};
    kr_status st;
    if (s->gpu) {
        st = kr_surface_cuda_band(s->gpu, f, cloud->points,
                                  (size_t)cloud->width * (size_t)cloud->height, Rwc, twc,
                                  &keys.keys, &keys.n);
        uint64_t *tmp = st == KR_OK && keys.n ? malloc(keys.n * sizeof *tmp) : NULL;
        if (st == KR_OK && keys.n && !tmp)
            st = kr_error(KR_ERR_NOMEM, "surface volume: out of memory");
        if (tmp) keys.n = sort_unique(keys.keys, tmp, keys.n);
        free(tmp);
    } else {
        st = host_band_keys(f, cloud, Rwc, twc, &keys);
    }
    if (st == KR_OK) st = add_keys(s, keys.keys, keys.n);
    free(keys.keys);
    if (s->refused && !s->warned_full) {
        s->warned_full = true;
        kr_log(KR_LOG_WARN,
               "surface volume full (%zu blocks, %.0f MiB): new surface is no longer added; "
               "raise the surface's memory cap to keep it",
               s->n_blocks, s->cfg.memory_mib);
    }
    return st;
}

/* Fuses every voxel of block b. */
static void fuse_block(const kr_surface *s, const kr_surface_frame *f, size_t b)
{
    kr_surface_voxel *vx = kr_surface_block_voxels(s, b);
    kr_surface_block_frame bf;
    kr_surface_block_in_camera(f, s->coords[b], &bf);
    for (int z = 0; z < KR_SURFACE_BLOCK; z++)
        for (int y = 0; y < KR_SURFACE_BLOCK; y++)
            for (int x = 0; x < KR_SURFACE_BLOCK; x++, vx++) {
                float pc[3];
                kr_surface_voxel_in_camera(&bf, x, y, z, pc);
                kr_surface_fuse_voxel(f, pc, vx);
            }
}

kr_status kr_surface_integrate(kr_surface *s, const kr_cloud *cloud, const uint8_t *rgb,
                               const kr_pose *pose)
{
    if (!s || !cloud || !pose || !cloud->points)
        return kr_error(KR_ERR_INVALID_ARG, "kr_surface_integrate: missing surface, cloud or pose");
    if (cloud->intrinsics.width != cloud->width || cloud->intrinsics.height != cloud->height)
        return kr_error(
            KR_ERR_INVALID_ARG, "kr_surface_integrate: the cloud is %dx%d but its intrinsics %dx%d",
            cloud->width, cloud->height, cloud->intrinsics.width, cloud->intrinsics.height);
    size_t pixels = (size_t)cloud->width * (size_t)cloud->height;
    if (!s->gpu) {
        if (pixels > s->depth_pixels) {
            float *d = realloc(s->depth, pixels * sizeof *d);
            if (!d) return kr_error(KR_ERR_NOMEM, "surface volume: out of memory");
            s->depth = d;
            s->depth_pixels = pixels;
        }
        /* One float a pixel, read by every voxel: a third of the cloud's
         * bytes. (The device makes its own from the points it receives.) */
        const float max_depth = s->cfg.max_depth;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < (long)pixels; i++)
            s->depth[i] = kr_surface_depth_of(cloud->points + 3 * i, max_depth);
    }
    kr_surface_frame f;
    frame_of(s, cloud, pose, &f);
    f.rgb = rgb;
    if (rgb) s->coloured = true;
    kr_status st = allocate(s, &f, cloud, pose);
    if (st != KR_OK) return st;
    if (s->gpu) {
        st = kr_surface_cuda_fuse(s->gpu, &f, s->n_blocks ? &s->coords[0][0] : NULL, s->n_blocks,
                                  s->slots, s->n_slots, s->touched, s->n_touched);
        if (st != KR_OK) return st;
    } else {
        const long n = (long)s->n_touched;
#pragma omp parallel for schedule(dynamic, 16)
        for (long i = 0; i < n; i++)
            fuse_block(s, &f, s->touched[i]);
    }
    s->frames++;
    return KR_OK;
}
