/* The surface's voxels on a CUDA device (fusion/surface/surface_cuda.h).
 *
 * A frame: its cloud goes up (page-locked from the surface thread: one
 * DMA), one thread per sampled point lists its band's blocks once each
 * (a hash set per frame) and looks them up in the device's copy of the
 * block hash; one copy down brings the counts and the keys of new blocks,
 * and the host's answer (their indices, the grown hash) goes up with the
 * fusion. The known blocks are fused while the host works: 0.23-0.32 ms
 * a 640x480 frame on an H200 (docs/BENCHMARKS.md, issue 34).
 *
 * Fusion: one CUDA block per touched volume block, one thread per voxel,
 * each calling the per-voxel math the CPU engine calls. Meshing: one thread
 * per cube counts its triangle corners, a scan gives each cube its place,
 * and a second pass writes them there — the CPU engine's order (blocks in
 * order, voxels x fastest), so the host's weld makes the same mesh. */
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include "fusion/surface/surface_coarse_kernels.h"
#include "fusion/surface/surface_cuda.h"
#include "gpu/context.cuh"

/* Makes the surface's device current on the calling thread (the mesher's
 * thread is not the one that made it). */
#define KR_CUDA_CHECK_ENTER(d)                                                                     \
    do {                                                                                           \
        kr_status kr_enter_ = kr_gpu_enter((d)->ctx);                                              \
        if (kr_enter_ != KR_OK) return kr_enter_;                                                  \
    } while (0)

struct kr_surface_cuda {
    kr_gpu_context *ctx;
    kr_surface_voxel *pool; /* cap_blocks blocks */
    int32_t *coords;        /* 3 per block, cap_blocks */
    size_t cap_blocks, n_blocks;
    kr_surface_voxel **chunk; /* one device pointer: the pool, as the view's only chunk */
    float *depth;
    size_t cap_depth;
    float *points;
    size_t cap_points;
    unsigned long long *keys[2];
    size_t cap_keys[2];
    unsigned long long *down; /* the band's counts (4 unsigned), then its unknown keys */
    size_t cap_down;
    size_t n_touched;        /* the touched blocks the band found (d->touched) */
    cudaEvent_t counted;     /* the band's counts are on the host */
    size_t n_slots;          /* the host's hash as last copied here (d->slots) */
    unsigned long long *set; /* the frame's band keys as a hash set; cap_set a power of two */
    size_t cap_set;
    void *stage; /* page-locked, cap_stage bytes (staged()) */
    size_t cap_stage;
    uint8_t *rgb;
    size_t cap_rgb;
    uint32_t *touched;
    size_t cap_touched;
    uint32_t *slots;
    size_t cap_slots;
    kr_mc_table *table;
    uint32_t *counts, *offsets; /* per cube */
    size_t cap_cubes;
    void *scan_temp;
    size_t scan_bytes;
    kr_surface_corner *corners;
    size_t cap_corners;
    uint8_t *seen; /* per block: a voxel seen (kr_surface_cuda_seen) */
    size_t cap_seen;
    int32_t *fine_of; /* a coarse volume's fine blocks (kr_surface_cuda_coarse) */
    size_t cap_fine_of;
};

/* A device buffer of at least n elements of `size` bytes; kept when large
 * enough, else replaced (contents dropped unless `keep` of them are copied). */
static kr_status grow(void **buf, size_t *cap, size_t n, size_t size, size_t keep, cudaStream_t st)
{
    if (n <= *cap) return KR_OK;
    size_t c = *cap ? *cap : 1024;
    while (c < n)
        c *= 2;
    void *p = NULL;
    KR_CUDA_CHECK(cudaMalloc(&p, c * size));
    if (keep) {
        kr_status s =
            KR_CUDA_STATUS(cudaMemcpyAsync(p, *buf, keep * size, cudaMemcpyDeviceToDevice, st));
        if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(st));
        if (s != KR_OK) {
            cudaFree(p);
            return s;
        }
    }
    cudaFree(*buf);
    *buf = p;
    *cap = c;
    return KR_OK;
}

extern "C" kr_status kr_surface_cuda_create(const kr_gpu_context *like, kr_surface_cuda **out)
{
    kr_surface_cuda *d = (kr_surface_cuda *)calloc(1, sizeof *d);
    if (!d) return kr_error(KR_ERR_NOMEM, "surface on the device: out of memory");
    kr_status s = kr_gpu_context_twin(like, &d->ctx);
    if (s == KR_OK) s = kr_gpu_enter(d->ctx);
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaMalloc(&d->chunk, sizeof *d->chunk));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaMalloc(&d->table, sizeof *d->table));
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cudaEventCreateWithFlags(&d->counted, cudaEventDisableTiming));
    if (s == KR_OK)
        s = KR_CUDA_STATUS(
            cudaMemcpy(d->table, kr_mc_table_get(), sizeof *d->table, cudaMemcpyHostToDevice));
    if (s != KR_OK) {
        kr_surface_cuda_destroy(&d);
        return s;
    }
    *out = d;
    return KR_OK;
}

extern "C" void kr_surface_cuda_destroy(kr_surface_cuda **dp)
{
    if (!dp || !*dp) return;
    kr_surface_cuda *d = *dp;
    if (d->ctx && kr_gpu_enter(d->ctx) == KR_OK) {
        cudaStreamSynchronize(d->ctx->stream);
        void *bufs[] = {d->points, d->keys[0], d->keys[1],   d->down,    d->pool,  d->coords,
                        d->chunk,  d->depth,   d->rgb,       d->touched, d->slots, d->table,
                        d->counts, d->offsets, d->scan_temp, d->corners, d->seen,  d->fine_of};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            cudaFree(bufs[i]);
    }
    if (d->stage) cudaFreeHost(d->stage);
    if (d->counted) cudaEventDestroy(d->counted);
    kr_gpu_context_destroy(&d->ctx);
    free(d);
    *dp = NULL;
}

/* Page-locked room for a call's small uploads (new blocks' coordinates,
 * the touched list, the pose): one DMA each, where a pageable copy is
 * staged by the driver at tens of microseconds apiece. Every call that
 * fills it ends synchronised before the next can. */
static kr_status staged(kr_surface_cuda *d, size_t bytes, uint8_t **out)
{
    if (bytes > d->cap_stage) {
        size_t c = d->cap_stage ? d->cap_stage : 4096;
        while (c < bytes)
            c *= 2;
        void *p = NULL;
        KR_CUDA_CHECK(cudaMallocHost(&p, c));
        cudaFreeHost(d->stage);
        d->stage = p;
        d->cap_stage = c;
    }
    *out = (uint8_t *)d->stage;
    return KR_OK;
}

/* Grows the pool to n_blocks (new voxels unseen) and takes the new blocks'
 * coordinates, through `stage` (room for them). */
static kr_status take_blocks(kr_surface_cuda *d, const int32_t *coords, size_t n_blocks,
                             uint8_t *stage)
{
    cudaStream_t st = d->ctx->stream;
    size_t had = d->n_blocks, cap = d->cap_blocks;
    if (n_blocks <= had) return KR_OK;
    kr_surface_voxel *pool = d->pool;
    kr_status s = grow((void **)&d->pool, &d->cap_blocks, n_blocks,
                       KR_SURFACE_BLOCK_VOXELS * sizeof(kr_surface_voxel), had, st);
    if (s != KR_OK) return s;
    size_t cap_coords = cap;
    if ((s = grow((void **)&d->coords, &cap_coords, d->cap_blocks, 3 * sizeof(int32_t), had, st)) !=
        KR_OK)
        return s;
    KR_CUDA_CHECK(
        cudaMemsetAsync(d->pool + had * KR_SURFACE_BLOCK_VOXELS, 0,
                        (n_blocks - had) * KR_SURFACE_BLOCK_VOXELS * sizeof(kr_surface_voxel), st));
    size_t bytes = (n_blocks - had) * 3 * sizeof(int32_t);
    memcpy(stage, coords + 3 * had, bytes);
    KR_CUDA_CHECK(cudaMemcpyAsync(d->coords + 3 * had, stage, bytes, cudaMemcpyHostToDevice, st));
    if (d->pool != pool) { /* the view's one chunk moved */
        memcpy(stage + bytes, &d->pool, sizeof d->pool);
        KR_CUDA_CHECK(
            cudaMemcpyAsync(d->chunk, stage + bytes, sizeof d->pool, cudaMemcpyHostToDevice, st));
    }
    d->n_blocks = n_blocks;
    return KR_OK;
}

/* Room take_blocks needs in the stage for n_blocks. */
static size_t take_bytes(const kr_surface_cuda *d, size_t n_blocks)
{
    return (n_blocks > d->n_blocks ? n_blocks - d->n_blocks : 0) * 3 * sizeof(int32_t) +
           sizeof(void *);
}

/* The frame's depth (kr_surface_frame.depth), one thread a pixel. */
__global__ void depth_kernel(const float *__restrict__ points, size_t n, float max_depth,
                             float *depth)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) depth[i] = kr_surface_depth_of(points + 3 * i, max_depth);
}

/* One thread per sampled point: its band's keys, appended to `keys` once
 * each. A key goes into the frame's hash set first (open addressing,
 * `mask` + 1 slots, empty = ~0) and is listed only by the thread that put
 * it there, so the list holds the frame's few thousand blocks, not its
 * hundreds of thousands of samples. A key that finds no slot within
 * KR_SURFACE_SET_PROBES is listed anyway and flags the overflow: the list
 * then has repeats, and a sort makes it unique (kr_surface_cuda_band). */
#define KR_SURFACE_SET_PROBES 64
enum { COUNT_LISTED, COUNT_OVERFLOW, COUNT_KNOWN, COUNT_UNKNOWN, COUNTS };

__device__ static bool first_in_set(unsigned long long *set, size_t mask, unsigned long long key,
                                    unsigned *counts)
{
    size_t h = (size_t)((key ^ key >> 21 ^ key >> 42) * 0x9E3779B97F4A7C15ull >> 20) & mask;
    for (int probe = 0; probe < KR_SURFACE_SET_PROBES; probe++, h = (h + 1) & mask) {
        unsigned long long old = atomicCAS(set + h, ~0ull, key);
        if (old == ~0ull) return true;
        if (old == key) return false;
    }
    counts[COUNT_OVERFLOW] = 1;
    return true;
}

__global__ void band_kernel(kr_surface_frame f, const float *__restrict__ points, int width,
                            int height, const float *__restrict__ Rwc_twc, unsigned long long *set,
                            size_t mask, unsigned long long *keys, unsigned *counts)
{
    int cols = (width + KR_SURFACE_BAND_STRIDE - 1) / KR_SURFACE_BAND_STRIDE;
    int rows = (height + KR_SURFACE_BAND_STRIDE - 1) / KR_SURFACE_BAND_STRIDE;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cols * rows) return;
    int u = i % cols * KR_SURFACE_BAND_STRIDE, v = i / cols * KR_SURFACE_BAND_STRIDE;
    const float *p = points + 3 * ((size_t)v * width + u);
    kr_surface_band band = kr_surface_band_of(&f, Rwc_twc, p);
    unsigned long long prev = ~0ull;
    for (int j = 0; j < band.samples; j++) {
        unsigned long long key = kr_surface_band_key(&f, &band, Rwc_twc + 9, j);
        if (key != prev && first_in_set(set, mask, key, counts))
            keys[atomicAdd(counts + COUNT_LISTED, 1u)] = key;
        prev = key;
    }
}

/* Each listed key's block in the device's copy of the host's hash: found,
 * it joins the frame's touched blocks; not, its key goes back to the host.
 * The number of keys is read on the device (no round trip before). */
__global__ void lookup_kernel(kr_surface_view v, const unsigned long long *__restrict__ keys,
                              unsigned *counts, uint32_t *touched, unsigned long long *unknown)
{
    unsigned n = counts[COUNT_LISTED];
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int32_t c[3];
        kr_surface_key_block(keys[i], c);
        long b = kr_surface_view_find(&v, c);
        if (b >= 0)
            touched[atomicAdd(counts + COUNT_KNOWN, 1u)] = (uint32_t)b;
        else
            unknown[atomicAdd(counts + COUNT_UNKNOWN, 1u)] = keys[i];
    }
}

/* One CUDA block per touched volume block, one thread per voxel, over
 * touched[0 .. n), gridDim.x blocks at a time. With `counts` n is the
 * lookup's count of known blocks, read on the device (no round trip
 * before), or 0 while the set overflowed (its list may name a block
 * twice: kr_surface_cuda_band looks up again). */
__global__ void fuse_kernel(kr_surface_frame f, const int32_t *__restrict__ coords,
                            const uint32_t *__restrict__ touched, const unsigned *counts,
                            unsigned n, kr_surface_voxel *pool)
{
    if (counts) n = counts[COUNT_OVERFLOW] ? 0 : counts[COUNT_KNOWN];
    int i = threadIdx.x;
    for (unsigned t = blockIdx.x; t < n; t += gridDim.x) {
        size_t b = touched[t];
        kr_surface_block_frame bf;
        kr_surface_block_in_camera(&f, coords + 3 * b, &bf);
        float pc[3];
        kr_surface_voxel_in_camera(&bf, i % KR_SURFACE_BLOCK,
                                   i / KR_SURFACE_BLOCK % KR_SURFACE_BLOCK,
                                   i / (KR_SURFACE_BLOCK * KR_SURFACE_BLOCK), pc);
        kr_surface_fuse_voxel(&f, pc, pool + b * KR_SURFACE_BLOCK_VOXELS + i);
    }
}

/* The frame as the device's kernels read it: its depth and colour there. */
static kr_surface_frame device_frame(const kr_surface_cuda *d, const kr_surface_frame *f)
{
    kr_surface_frame df = *f;
    df.depth = d->depth;
    df.rgb = f->rgb ? d->rgb : NULL;
    return df;
}

/* CUDA blocks for fusing up to n volume blocks: one each up to a few per
 * multiprocessor, then each loops. */
static unsigned fuse_grid(size_t n)
{
    return (unsigned)(n == 0 ? 1 : n < 2048 ? n : 2048);
}

/* Keys that come back with the counts, in one copy; more take a second. */
#define KR_SURFACE_UNKNOWN_FIRST 8192

extern "C" kr_status kr_surface_cuda_band(kr_surface_cuda *d, const kr_surface_frame *f,
                                          const float *points, size_t n_pixels, const float Rwc[9],
                                          const float twc[3], uint64_t **unknown, size_t *n_unknown)
{
    KR_CUDA_CHECK_ENTER(d);
    cudaStream_t st = d->ctx->stream;
    *unknown = NULL;
    *n_unknown = 0;
    int width = f->k.width, height = f->k.height;
    size_t cells = (size_t)((width + KR_SURFACE_BAND_STRIDE - 1) / KR_SURFACE_BAND_STRIDE) *
                   ((height + KR_SURFACE_BAND_STRIDE - 1) / KR_SURFACE_BAND_STRIDE);
    size_t slots = cells * (KR_SURFACE_BAND_MAX_STEPS + 1);
    kr_status s =
        grow((void **)&d->points, &d->cap_points, 3 * n_pixels + 12, sizeof(float), 0, st);
    if (s == KR_OK) s = grow((void **)&d->depth, &d->cap_depth, n_pixels, sizeof(float), 0, st);
    for (int k = 0; k < 2 && s == KR_OK; k++)
        s = grow((void **)&d->keys[k], &d->cap_keys[k], slots, sizeof(unsigned long long), 0, st);
    if (s == KR_OK) s = grow((void **)&d->touched, &d->cap_touched, slots, sizeof(uint32_t), 0, st);
    /* The set: four slots a sampled point (a power of two), so it stays at
     * most a quarter full while the points' bands touch a block each. */
    if (s == KR_OK) s = grow((void **)&d->set, &d->cap_set, 4 * cells, sizeof *d->set, 0, st);
    /* The counts, then the unknown keys: what comes down, in one copy
     * when there are at most KR_SURFACE_UNKNOWN_FIRST of them. */
    if (s == KR_OK)
        s = grow((void **)&d->down, &d->cap_down, 2 + slots, sizeof(unsigned long long), 0, st);
    unsigned *counter = (unsigned *)d->down;
    unsigned long long *unknown_keys = d->down + 2;
    uint8_t *stage = NULL;
    const size_t down = (2 + KR_SURFACE_UNKNOWN_FIRST) * sizeof(unsigned long long);
    if (s == KR_OK) s = staged(d, down > 12 * sizeof(float) ? down : 12 * sizeof(float), &stage);
    if (s != KR_OK) return s;
    /* The pose rides after the points. */
    float *pose = d->points + 3 * n_pixels;
    KR_CUDA_CHECK(cudaMemcpyAsync(d->points, points, 3 * n_pixels * sizeof(float),
                                  cudaMemcpyHostToDevice, st));
    memcpy(stage, Rwc, 9 * sizeof(float));
    memcpy(stage + 9 * sizeof(float), twc, 3 * sizeof(float));
    KR_CUDA_CHECK(cudaMemcpyAsync(pose, stage, 12 * sizeof(float), cudaMemcpyHostToDevice, st));
    if (f->rgb) {
        if ((s = grow((void **)&d->rgb, &d->cap_rgb, 3 * n_pixels, 1, 0, st)) != KR_OK) return s;
        KR_CUDA_CHECK(cudaMemcpyAsync(d->rgb, f->rgb, 3 * n_pixels, cudaMemcpyHostToDevice, st));
    }
    unsigned threads = 256;
    depth_kernel<<<(unsigned)((n_pixels + threads - 1) / threads), threads, 0, st>>>(
        d->points, n_pixels, f->max_depth, d->depth);
    KR_CUDA_CHECK(cudaGetLastError());
    KR_CUDA_CHECK(cudaMemsetAsync(counter, 0, COUNTS * sizeof *counter, st));
    KR_CUDA_CHECK(cudaMemsetAsync(d->set, 0xff, d->cap_set * sizeof *d->set, st));
    band_kernel<<<(unsigned)((cells + threads - 1) / threads), threads, 0, st>>>(
        *f, d->points, width, height, pose, d->set, d->cap_set - 1, d->keys[0], counter);
    KR_CUDA_CHECK(cudaGetLastError());
    kr_surface_view v = {d->slots, d->n_slots, d->coords, d->chunk, d->cap_blocks, f->voxel};
    unsigned *counts = (unsigned *)stage;
    for (int pass = 0;; pass++) {
        lookup_kernel<<<264, threads, 0, st>>>(v, d->keys[0], counter, d->touched, unknown_keys);
        KR_CUDA_CHECK(cudaGetLastError());
        KR_CUDA_CHECK(cudaMemcpyAsync(stage, d->down, down, cudaMemcpyDeviceToHost, st));
        KR_CUDA_CHECK(cudaEventRecord(d->counted, st));
        /* The known blocks are fused while the host reads the counts and
         * adds the unknown blocks (kr_surface_cuda_fuse fuses those). */
        fuse_kernel<<<fuse_grid(d->cap_touched), KR_SURFACE_BLOCK_VOXELS, 0, st>>>(
            device_frame(d, f), d->coords, d->touched, counter, 0, d->pool);
        KR_CUDA_CHECK(cudaGetLastError());
        KR_CUDA_CHECK(cudaEventSynchronize(d->counted));
        if (!counts[COUNT_OVERFLOW] || pass) break;
        /* The set overflowed (more blocks than it holds): the list has
         * repeats. Sorted and made unique, it is looked up again. */
        unsigned listed = counts[COUNT_LISTED];
        size_t sort_bytes = 0, unique_bytes = 0;
        KR_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(NULL, sort_bytes, d->keys[0], d->keys[1],
                                                     (int)listed, 0, 63, st));
        KR_CUDA_CHECK(cub::DeviceSelect::Unique(NULL, unique_bytes, d->keys[1], d->keys[0],
                                                (int *)counter + COUNT_LISTED, (int)listed, st));
        size_t bytes = sort_bytes > unique_bytes ? sort_bytes : unique_bytes;
        if ((s = grow(&d->scan_temp, &d->scan_bytes, bytes, 1, 0, st)) != KR_OK) return s;
        KR_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(d->scan_temp, sort_bytes, d->keys[0],
                                                     d->keys[1], (int)listed, 0, 63, st));
        KR_CUDA_CHECK(cub::DeviceSelect::Unique(d->scan_temp, unique_bytes, d->keys[1], d->keys[0],
                                                (int *)counter + COUNT_LISTED, (int)listed, st));
        KR_CUDA_CHECK(cudaMemsetAsync(counter + COUNT_OVERFLOW, 0,
                                      (COUNTS - COUNT_OVERFLOW) * sizeof *counter, st));
    }
    d->n_touched = counts[COUNT_KNOWN];
    size_t m = counts[COUNT_UNKNOWN];
    uint64_t *host = (uint64_t *)malloc((m ? m : 1) * sizeof *host);
    if (!host) return kr_error(KR_ERR_NOMEM, "surface volume: out of memory");
    size_t first = m < KR_SURFACE_UNKNOWN_FIRST ? m : KR_SURFACE_UNKNOWN_FIRST;
    memcpy(host, stage + 2 * sizeof(unsigned long long), first * sizeof *host);
    if (m > first) {
        s = KR_CUDA_STATUS(cudaMemcpy(host + first, unknown_keys + first,
                                      (m - first) * sizeof *host, cudaMemcpyDeviceToHost));
        if (s != KR_OK) {
            free(host);
            return s;
        }
    }
    *unknown = host;
    *n_unknown = m;
    return KR_OK;
}

extern "C" kr_status kr_surface_cuda_fuse(kr_surface_cuda *d, const kr_surface_frame *f,
                                          const int32_t *coords, size_t n_blocks,
                                          const uint32_t *slots, size_t n_slots,
                                          const uint32_t *added, size_t n_added)
{
    KR_CUDA_CHECK_ENTER(d);
    cudaStream_t st = d->ctx->stream;
    /* The new blocks, the hash that now holds them (whole: a few hundred
     * kilobytes, when it changed) and the added blocks' indices go up
     * through the stage. */
    bool rehashed = n_slots != d->n_slots || n_blocks != d->n_blocks;
    size_t take = take_bytes(d, n_blocks), hash = rehashed ? n_slots * sizeof(uint32_t) : 0,
           list = n_added * sizeof(uint32_t);
    uint8_t *stage = NULL;
    kr_status s = staged(d, take + hash + list, &stage);
    if (s == KR_OK) s = take_blocks(d, coords, n_blocks, stage);
    if (s == KR_OK)
        s = grow((void **)&d->touched, &d->cap_touched, d->n_touched + n_added, sizeof(uint32_t),
                 d->n_touched, st);
    if (s == KR_OK && rehashed)
        s = grow((void **)&d->slots, &d->cap_slots, n_slots, sizeof(uint32_t), 0, st);
    if (s != KR_OK) return s;
    if (rehashed) {
        memcpy(stage + take, slots, hash);
        KR_CUDA_CHECK(cudaMemcpyAsync(d->slots, stage + take, hash, cudaMemcpyHostToDevice, st));
        d->n_slots = n_slots;
    }
    if (n_added) {
        memcpy(stage + take + hash, added, list);
        KR_CUDA_CHECK(cudaMemcpyAsync(d->touched + d->n_touched, stage + take + hash, list,
                                      cudaMemcpyHostToDevice, st));
    }
    /* The known blocks are being fused since the band's lookup. */
    if (n_added)
        fuse_kernel<<<fuse_grid(n_added), KR_SURFACE_BLOCK_VOXELS, 0, st>>>(
            device_frame(d, f), d->coords, d->touched + d->n_touched, NULL, (unsigned)n_added,
            d->pool);
    KR_CUDA_CHECK(cudaGetLastError());
    d->n_touched = 0; /* the next frame's band finds its own */
    /* The host's cloud, colour and lists may change once this returns. */
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    return KR_OK;
}

__global__ void cube_kernel(kr_surface_view v, const kr_mc_table *t, size_t n_cubes,
                            uint32_t *counts, const uint32_t *offsets, kr_surface_corner *out)
{
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cubes) return;
    int32_t g[3];
    kr_surface_voxel_of(&v, c / KR_SURFACE_BLOCK_VOXELS, (int)(c % KR_SURFACE_BLOCK_VOXELS), g);
    kr_surface_block_cache cache;
    kr_surface_cache_init(&cache);
    kr_surface_corner corner[KR_SURFACE_CUBE_CORNERS];
    int n = kr_surface_cube(&v, &cache, t, g, corner);
    if (!out) {
        counts[c] = (uint32_t)n;
        return;
    }
    for (int i = 0; i < n; i++)
        out[offsets[c] + i] = corner[i];
}

/* Every cube's triangle corners into d->corners, in the CPU engine's order;
 * *total gets their number. */
static kr_status corners(kr_surface_cuda *d, const uint32_t *slots, size_t n_slots, size_t n_blocks,
                         float voxel, uint32_t *total)
{
    cudaStream_t st = d->ctx->stream;
    size_t n_cubes = n_blocks * KR_SURFACE_BLOCK_VOXELS;
    *total = 0;
    if (n_cubes == 0) return KR_OK;
    if (n_cubes >= UINT32_MAX)
        return kr_error(KR_ERR_NOMEM, "surface mesh: %zu blocks are too many for one device pass",
                        n_blocks);
    kr_status s = grow((void **)&d->slots, &d->cap_slots, n_slots, sizeof(uint32_t), 0, st);
    size_t cap = d->cap_cubes;
    if (s == KR_OK)
        s = grow((void **)&d->counts, &d->cap_cubes, n_cubes + 1, sizeof(uint32_t), 0, st);
    if (s == KR_OK) s = grow((void **)&d->offsets, &cap, n_cubes + 1, sizeof(uint32_t), 0, st);
    if (s != KR_OK) return s;
    KR_CUDA_CHECK(
        cudaMemcpyAsync(d->slots, slots, n_slots * sizeof(uint32_t), cudaMemcpyHostToDevice, st));
    d->n_slots = n_slots;
    kr_surface_view v = {d->slots, n_slots, d->coords, d->chunk, d->cap_blocks, voxel};
    unsigned threads = 128, grid = (unsigned)((n_cubes + threads - 1) / threads);
    cube_kernel<<<grid, threads, 0, st>>>(v, d->table, n_cubes, d->counts, NULL, NULL);
    KR_CUDA_CHECK(cudaGetLastError());
    KR_CUDA_CHECK(cudaMemsetAsync(d->counts + n_cubes, 0, sizeof(uint32_t), st));
    size_t bytes = 0;
    KR_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(NULL, bytes, d->counts, d->offsets, (int)(n_cubes + 1), st));
    if ((s = grow(&d->scan_temp, &d->scan_bytes, bytes, 1, 0, st)) != KR_OK) return s;
    KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(d->scan_temp, bytes, d->counts, d->offsets,
                                                (int)(n_cubes + 1), st));
    KR_CUDA_CHECK(
        cudaMemcpyAsync(total, d->offsets + n_cubes, sizeof *total, cudaMemcpyDeviceToHost, st));
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    if (*total == 0) return KR_OK;
    if ((s = grow((void **)&d->corners, &d->cap_corners, *total, sizeof(kr_surface_corner), 0,
                  st)) != KR_OK)
        return s;
    cube_kernel<<<grid, threads, 0, st>>>(v, d->table, n_cubes, d->counts, d->offsets, d->corners);
    KR_CUDA_CHECK(cudaGetLastError());
    return KR_OK;
}

__global__ void key_kernel(const kr_surface_corner *c, uint32_t n, unsigned long long *key,
                           uint32_t *at)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    key[i] = c[i].key;
    at[i] = i;
}

__global__ void head_kernel(const unsigned long long *key, uint32_t n, uint32_t *head)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) head[i] = i == 0 || key[i] != key[i - 1];
}

/* Sorted corner i is vertex vid[i] - 1 (the inclusive sum of the run heads). */
__global__ void weld_kernel(const kr_surface_corner *c, const uint32_t *at, const uint32_t *head,
                            const uint32_t *vid, uint32_t n, uint32_t *faces, float *xyz,
                            float *normals, uint8_t *rgb)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t v = vid[i] - 1;
    faces[at[i]] = v;
    if (!head[i]) return;
    const kr_surface_corner *k = &c[at[i]];
    for (int a = 0; a < 3; a++) {
        xyz[3 * v + a] = k->p[a];
        normals[3 * v + a] = k->n[a];
        if (rgb) rgb[3 * v + a] = k->rgb[a];
    }
}

/* The device's buffers of one weld, freed together. */
typedef struct {
    unsigned long long *key[2];
    uint32_t *at[2], *head, *vid, *faces;
    float *xyz, *normals;
    uint8_t *rgb;
    void *temp;
} weld_buffers;

static void weld_free(weld_buffers *w)
{
    void *all[] = {w->key[0], w->key[1], w->at[0],   w->at[1], w->head, w->vid,
                   w->faces,  w->xyz,    w->normals, w->rgb,   w->temp};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        cudaFree(all[i]);
}

/* The corners welded as the host's weld does (surface_mesh.c): a stable sort
 * by edge, so a vertex is its edge's first corner and the mesh is the
 * same. */
static kr_status weld(kr_surface_cuda *d, uint32_t n, bool colour, kr_mesh *out)
{
    cudaStream_t st = d->ctx->stream;
    weld_buffers w = {};
    kr_status s = KR_OK;
    for (int k = 0; k < 2 && s == KR_OK; k++) {
        s = KR_CUDA_STATUS(cudaMalloc(&w.key[k], n * sizeof(unsigned long long)));
        if (s == KR_OK) s = KR_CUDA_STATUS(cudaMalloc(&w.at[k], n * sizeof(uint32_t)));
    }
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaMalloc(&w.head, n * sizeof(uint32_t)));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaMalloc(&w.vid, n * sizeof(uint32_t)));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaMalloc(&w.faces, n * sizeof(uint32_t)));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaMalloc(&w.xyz, 3 * (size_t)n * sizeof(float)));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaMalloc(&w.normals, 3 * (size_t)n * sizeof(float)));
    if (s == KR_OK && colour) s = KR_CUDA_STATUS(cudaMalloc(&w.rgb, 3 * (size_t)n));
    unsigned threads = 256, grid = (n + threads - 1) / threads;
    size_t sort_bytes = 0, scan_bytes = 0;
    if (s == KR_OK) {
        key_kernel<<<grid, threads, 0, st>>>(d->corners, n, w.key[0], w.at[0]);
        s = KR_CUDA_STATUS(cudaGetLastError());
    }
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, w.key[0], w.key[1],
                                                           w.at[0], w.at[1], (int)n, 0, 64, st));
    if (s == KR_OK)
        s = KR_CUDA_STATUS(
            cub::DeviceScan::InclusiveSum(NULL, scan_bytes, w.head, w.vid, (int)n, st));
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cudaMalloc(&w.temp, sort_bytes > scan_bytes ? sort_bytes : scan_bytes));
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cub::DeviceRadixSort::SortPairs(w.temp, sort_bytes, w.key[0], w.key[1],
                                                           w.at[0], w.at[1], (int)n, 0, 64, st));
    if (s == KR_OK) {
        head_kernel<<<grid, threads, 0, st>>>(w.key[1], n, w.head);
        s = KR_CUDA_STATUS(cudaGetLastError());
    }
    if (s == KR_OK)
        s = KR_CUDA_STATUS(
            cub::DeviceScan::InclusiveSum(w.temp, scan_bytes, w.head, w.vid, (int)n, st));
    if (s == KR_OK) {
        weld_kernel<<<grid, threads, 0, st>>>(d->corners, w.at[1], w.head, w.vid, n, w.faces, w.xyz,
                                              w.normals, w.rgb);
        s = KR_CUDA_STATUS(cudaGetLastError());
    }
    uint32_t vertices = 0;
    if (s == KR_OK)
        s = KR_CUDA_STATUS(
            cudaMemcpyAsync(&vertices, w.vid + n - 1, sizeof vertices, cudaMemcpyDeviceToHost, st));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(st));
    kr_mesh m = {};
    if (s == KR_OK) {
        m.n_vertices = vertices;
        m.n_faces = n / 3;
        m.xyz = (float *)malloc(3 * (size_t)vertices * sizeof(float));
        m.normals = (float *)malloc(3 * (size_t)vertices * sizeof(float));
        m.rgb = colour ? (uint8_t *)malloc(3 * (size_t)vertices) : NULL;
        m.faces = (uint32_t *)malloc((size_t)n * sizeof(uint32_t));
        if (!m.xyz || !m.normals || !m.faces || (colour && !m.rgb))
            s = kr_error(KR_ERR_NOMEM, "surface mesh: out of memory for %u vertices", vertices);
    }
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cudaMemcpyAsync(m.xyz, w.xyz, 3 * (size_t)vertices * sizeof(float),
                                           cudaMemcpyDeviceToHost, st));
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cudaMemcpyAsync(m.normals, w.normals,
                                           3 * (size_t)vertices * sizeof(float),
                                           cudaMemcpyDeviceToHost, st));
    if (s == KR_OK && colour)
        s = KR_CUDA_STATUS(
            cudaMemcpyAsync(m.rgb, w.rgb, 3 * (size_t)vertices, cudaMemcpyDeviceToHost, st));
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cudaMemcpyAsync(m.faces, w.faces, (size_t)n * sizeof(uint32_t),
                                           cudaMemcpyDeviceToHost, st));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(st));
    cudaStreamSynchronize(st);
    weld_free(&w);
    if (s != KR_OK) {
        /* Freed here, not by kr_mesh_free: surface_mesh.c calls this file,
         * and files do not call each other in a circle (check_layers). */
        free(m.xyz), free(m.normals), free(m.rgb), free(m.faces);
        return s;
    }
    *out = m;
    return KR_OK;
}

extern "C" kr_status kr_surface_cuda_mesh(kr_surface_cuda *d, const uint32_t *slots, size_t n_slots,
                                          size_t n_blocks, float voxel, bool colour, kr_mesh *out)
{
    KR_CUDA_CHECK_ENTER(d);
    uint32_t total = 0;
    kr_status s = corners(d, slots, n_slots, n_blocks, voxel, &total);
    if (s != KR_OK) return s;
    if (total == 0) {
        *out = kr_mesh{};
        return KR_OK;
    }
    return weld(d, total, colour, out);
}

extern "C" kr_status kr_surface_cuda_create_like(const kr_surface_cuda *like, kr_surface_cuda **out)
{
    return kr_surface_cuda_create(like->ctx, out);
}

/* Whether each block has a seen voxel: one CUDA block per volume block. */
__global__ void seen_kernel(const kr_surface_voxel *__restrict__ pool, uint8_t *seen)
{
    size_t b = blockIdx.x;
    int any = __syncthreads_or(pool[b * KR_SURFACE_BLOCK_VOXELS + threadIdx.x].w > 0.0f);
    if (threadIdx.x == 0) seen[b] = (uint8_t)any;
}

extern "C" kr_status kr_surface_cuda_seen(kr_surface_cuda *d, size_t n_blocks, uint8_t *seen)
{
    KR_CUDA_CHECK_ENTER(d);
    cudaStream_t st = d->ctx->stream;
    if (n_blocks > d->n_blocks)
        return kr_error(KR_ERR_INVALID_ARG, "surface: %zu blocks asked, %zu on the device",
                        n_blocks, d->n_blocks);
    if (!n_blocks) return KR_OK;
    kr_status s = grow((void **)&d->seen, &d->cap_seen, n_blocks, 1, 0, st);
    if (s != KR_OK) return s;
    seen_kernel<<<(unsigned)n_blocks, KR_SURFACE_BLOCK_VOXELS, 0, st>>>(d->pool, d->seen);
    KR_CUDA_CHECK(cudaGetLastError());
    KR_CUDA_CHECK(cudaMemcpyAsync(seen, d->seen, n_blocks, cudaMemcpyDeviceToHost, st));
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    return KR_OK;
}

/* One CUDA block per coarse block, one thread per coarse voxel
 * (kr_surface_coarse_of, as the CPU engine computes it). */
__global__ void coarse_kernel(kr_surface_view fine, const int32_t *__restrict__ fine_of, int factor,
                              kr_surface_voxel *coarse)
{
    size_t c = blockIdx.x;
    kr_surface_voxel out;
    kr_surface_coarse_of(&fine, fine_of + c * (size_t)(factor * factor * factor), factor,
                         threadIdx.x, &out);
    coarse[c * KR_SURFACE_BLOCK_VOXELS + threadIdx.x] = out;
}

extern "C" kr_status kr_surface_cuda_coarse(kr_surface_cuda *d, const kr_surface_cuda *fine,
                                            const int32_t *coords, size_t n_blocks,
                                            const int32_t *fine_of, int factor)
{
    if (factor < 1 || KR_SURFACE_BLOCK % factor != 0)
        return kr_error(KR_ERR_INVALID_ARG, "surface: a coarse factor of %d does not divide %d",
                        factor, KR_SURFACE_BLOCK);
    /* The fine voxels are complete: every fusion ends synchronised. */
    KR_CUDA_CHECK_ENTER(d);
    cudaStream_t st = d->ctx->stream;
    uint8_t *stage = NULL;
    kr_status s = staged(d, take_bytes(d, n_blocks), &stage);
    if (s == KR_OK) s = take_blocks(d, coords, n_blocks, stage);
    size_t per = (size_t)factor * factor * factor;
    if (s == KR_OK)
        s = grow((void **)&d->fine_of, &d->cap_fine_of, n_blocks * per, sizeof(int32_t), 0, st);
    if (s != KR_OK || !n_blocks) return s;
    KR_CUDA_CHECK(cudaMemcpyAsync(d->fine_of, fine_of, n_blocks * per * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, st));
    kr_surface_view v = {NULL, 0, fine->coords, fine->chunk, fine->cap_blocks, 0.0f};
    coarse_kernel<<<(unsigned)n_blocks, KR_SURFACE_BLOCK_VOXELS, 0, st>>>(v, d->fine_of, factor,
                                                                          d->pool);
    KR_CUDA_CHECK(cudaGetLastError());
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    return KR_OK;
}

extern "C" kr_status kr_surface_cuda_download_range(kr_surface_cuda *d, size_t first, size_t n,
                                                    kr_surface_voxel *out)
{
    KR_CUDA_CHECK_ENTER(d);
    if (first + n > d->n_blocks)
        return kr_error(KR_ERR_INVALID_ARG, "surface: blocks %zu to %zu asked, %zu on the device",
                        first, first + n, d->n_blocks);
    KR_CUDA_CHECK(cudaMemcpy(out, d->pool + first * KR_SURFACE_BLOCK_VOXELS,
                             n * KR_SURFACE_BLOCK_VOXELS * sizeof *out, cudaMemcpyDeviceToHost));
    return KR_OK;
}
