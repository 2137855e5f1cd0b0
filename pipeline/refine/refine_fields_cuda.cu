/* The refinement's fields built on a CUDA device (pipeline/refine/refine_fields_cuda.h):
 * the twin of pipeline/refine/refine_normals.c, pipeline/refine/dfield.c and
 * pipeline/refine/dfield_signed.c. Kernels map threads to points, table entries or
 * corners and call the shared per-element math (core/kdtree_knn.h,
 * core/normals_pca.h, dfield_kernels.h).
 *
 * Normals: the view's k-d tree is built on the device (gpu/kdtree_cuda.cu, the
 * same tree as the host's), then one thread per point finds its 12 nearest
 * neighbours in it (kr_kdtree_knn_hd, the host's search) and fits their plane
 * (kr_normals_pca).
 *
 * Bricks: the host inserts them one after the other into a growing table. Here
 * every point inserts the bricks its corners touch into a table large enough
 * for all of them at once (compare-and-swap on the key, linear probing), the
 * distinct keys are listed with one atomic counter, and the list is inserted
 * into a table sized as the host's (the smallest power of two ≥ 1024 that is
 * at least twice the bricks). The bricks' slots then follow the list, not
 * the points' order: a corner's value does not depend on its slot, and the
 * grid points are the same set in another order (the parity test compares
 * them as sets).
 *
 * Values: one thread per point takes the minimum over its influenced corners,
 * on the float bits (unsigned) or on the 64-bit (distance, plane distance)
 * pair (signed), as the host does with compare-and-swap loops: the minimum
 * does not depend on the order, so the values are the host's bits whenever
 * the points (and normals) are.
 *
 * Grid points: one thread per corner writes its grid point (if kept) and a
 * flag; an exclusive scan of the flags places the kept ones, in corner order,
 * into buffers of their exact size.
 *
 * Every buffer that outlives a call comes from the stream-ordered pool (as
 * pipeline/refine/refine_cuda.cu's); scratch grows and is kept. An allocation that fails
 * names the view and the bytes and says what to change. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "core/kdtree_knn.h"
#include "core/normals_pca.h"
#include "pipeline/refine/dfield_kernels.h"
#include "gpu/context.cuh"
#include "pipeline/refine/refine_fields_cuda.h"
#include "gpu/kdtree_cuda.h"

namespace
{

const int kThreads = 256;

struct Field {
    uint64_t *keys;
    int *slots;
    float *values;
    uint32_t capacity;
    int bricks;
    float *grid, *grid_val; /* only where built */
    size_t n_grid;
    float lo[3], hi[3];
    float h, inv_h;
};

struct ViewPoints {
    float *pts; /* the points fields are built from (moved onto planes when signed) */
    float *nrm; /* NULL: unsigned fields */
    size_t n;
};

/* What a build reads back: the bricks, then the grid points and bounds. */
struct Counters {
    int bricks;
    int overflow;
    unsigned long long kept;
    int lo[3], hi[3];
};

__global__ void normals_kernel(const kr_kdtree_node *__restrict__ nodes, uint32_t n_internal,
                               const kr_kdtree_cell *__restrict__ cells,
                               const float *__restrict__ xyz, long n, float *nrm, float *plane)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float bd[KR_REFINE_NEIGHBOURS], nb[3 * KR_REFINE_NEIGHBOURS];
    uint32_t bc[KR_REFINE_NEIGHBOURS];
    int k = n < KR_REFINE_NEIGHBOURS ? (int)n : KR_REFINE_NEIGHBOURS;
    const float p[3] = {xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]};
    int m = kr_kdtree_knn_hd(nodes, n_internal, cells, p, k, bd, bc);
    for (int j = 0; j < m; j++)
        for (int a = 0; a < 3; a++)
            nb[3 * j + a] = cells[bc[j]].s[a];
    kr_normals_pca(p, nb, m, nrm + 3 * i, plane + 3 * i);
}

__device__ int brick_of(int corner)
{
    return corner >> KR_DFIELD_BRICK_LOG;
}

/* Every brick that point k's corners touch, into the big table. */
__global__ void insert_kernel(const float *__restrict__ pts, long m, long stride, float inv_h,
                              int band, uint64_t *keys, uint32_t mask, Counters *cnt)
{
    long k = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (k >= m) return;
    const float *p = pts + 3 * k * stride;
    int lo[3], hi[3];
    if (!kr_dfield_corner_range(p, inv_h, band, lo, hi)) return;
    for (int bz = brick_of(lo[2]); bz <= brick_of(hi[2]); bz++)
        for (int by = brick_of(lo[1]); by <= brick_of(hi[1]); by++)
            for (int bx = brick_of(lo[0]); bx <= brick_of(hi[0]); bx++) {
                unsigned long long key = kr_dfield_brick_key(bx, by, bz);
                uint32_t at = kr_dfield_hash(key) & mask, probe = 0;
                for (; probe <= mask; probe++) {
                    unsigned long long old =
                        atomicCAS((unsigned long long *)&keys[at],
                                  (unsigned long long)KR_DFIELD_EMPTY_KEY, key);
                    if (old == (unsigned long long)KR_DFIELD_EMPTY_KEY || old == key) break;
                    at = (at + 1) & mask;
                }
                if (probe > mask) cnt->overflow = 1; /* cannot happen: the table is sized */
            }
}

/* The distinct keys into a list (in any order: sorted next). */
__global__ void list_kernel(const uint64_t *__restrict__ keys, long capacity, uint64_t *list,
                            Counters *cnt)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= capacity || keys[i] == KR_DFIELD_EMPTY_KEY) return;
    int slot = atomicAdd(&cnt->bricks, 1);
    list[slot] = keys[i];
}

/* The listed bricks into the final table, with their coordinates. */
__global__ void table_kernel(const uint64_t *__restrict__ list, int bricks, uint64_t *keys,
                             int *slots, uint32_t mask, int *brick_xyz, Counters *cnt)
{
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= bricks) return;
    uint64_t key = list[b];
    uint32_t at = kr_dfield_hash(key) & mask, probe = 0;
    for (; probe <= mask; probe++) {
        unsigned long long old =
            atomicCAS((unsigned long long *)&keys[at], (unsigned long long)KR_DFIELD_EMPTY_KEY,
                      (unsigned long long)key);
        if (old == (unsigned long long)KR_DFIELD_EMPTY_KEY) break;
        at = (at + 1) & mask;
    }
    if (probe > mask) {
        cnt->overflow = 1;
        return;
    }
    slots[at] = b;
    brick_xyz[3 * b] = (int)((key >> 42) & 0x1fffff) - KR_DFIELD_COORD_OFFSET;
    brick_xyz[3 * b + 1] = (int)((key >> 21) & 0x1fffff) - KR_DFIELD_COORD_OFFSET;
    brick_xyz[3 * b + 2] = (int)(key & 0x1fffff) - KR_DFIELD_COORD_OFFSET;
}

__global__ void fill_u32_kernel(uint32_t *a, long n, uint32_t v)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) a[i] = v;
}

/* Unsigned: the nearest point's distance, a minimum on the float bits. */
__global__ void unsigned_kernel(kr_dfield_lookup f, int band, const float *__restrict__ pts, long m,
                                long stride, float *values)
{
    long k = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (k >= m) return;
    const float *p = pts + 3 * k * stride;
    int lo[3], hi[3];
    if (!kr_dfield_corner_range(p, f.inv_h, band, lo, hi)) return;
    for (int z = lo[2]; z <= hi[2]; z++)
        for (int y = lo[1]; y <= hi[1]; y++)
            for (int x = lo[0]; x <= hi[0]; x++) {
                long i = kr_dfield_corner_index(&f, x, y, z);
                if (i >= 0)
                    atomicMin((unsigned int *)&values[i],
                              __float_as_uint(kr_dfield_corner_distance(p, x, y, z, f.h)));
            }
}

/* Signed: the (distance, plane distance) pair of the nearest point with a
 * normal, a 64-bit minimum. */
__global__ void signed_kernel(kr_dfield_lookup f, int band, const float *__restrict__ pts,
                              const float *__restrict__ nrm, long m, long stride,
                              unsigned long long *pairs)
{
    long k = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (k >= m) return;
    const float *p = pts + 3 * k * stride, *n = nrm + 3 * k * stride;
    int lo[3], hi[3];
    if (!(fabsf(n[0]) <= 1) || !kr_dfield_corner_range(p, f.inv_h, band, lo, hi)) return;
    for (int z = lo[2]; z <= hi[2]; z++)
        for (int y = lo[1]; y <= hi[1]; y++)
            for (int x = lo[0]; x <= hi[0]; x++) {
                long i = kr_dfield_corner_index(&f, x, y, z);
                if (i >= 0)
                    atomicMin(&pairs[i],
                              (unsigned long long)kr_dfield_signed_pair(p, n, x, y, z, f.h));
            }
}

__global__ void pair_values_kernel(const unsigned long long *__restrict__ pairs, long cells,
                                   float *values)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < cells) values[i] = kr_dfield_pair_value(pairs[i]);
}

/* One thread per corner: the bounds of the influenced corners, and corner
 * i's grid point at grid[3i], val[i] with kept[i] = 1 when it is one. */
__global__ void collect_kernel(kr_dfield_lookup f, const int *__restrict__ brick_xyz, long cells,
                               uint32_t threshold, unsigned seed, float *grid, float *val,
                               uint32_t *kept, Counters *cnt)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= cells) return;
    kept[i] = 0;
    if (!(f.values[i] < INFINITY)) return;
    int c3[3];
    kr_dfield_cell_corner(brick_xyz, (int)(i / KR_DFIELD_BRICK_CELLS),
                          (int)(i % KR_DFIELD_BRICK_CELLS), c3);
    for (int a = 0; a < 3; a++) {
        atomicMin(&cnt->lo[a], c3[a]);
        atomicMax(&cnt->hi[a], c3[a]);
    }
    float q[3], v;
    if (!kr_dfield_grid_point(&f, c3[0], c3[1], c3[2], threshold, seed, q, &v)) return;
    grid[3 * i] = q[0];
    grid[3 * i + 1] = q[1];
    grid[3 * i + 2] = q[2];
    val[i] = v;
    kept[i] = 1;
}

/* The kept count: the scan's last entry plus the last flag. */
__global__ void kept_total_kernel(const uint32_t *kept, const uint32_t *at, long cells,
                                  Counters *cnt)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        cnt->kept = cells ? (unsigned long long)at[cells - 1] + kept[cells - 1] : 0ull;
}

/* The kept grid points to their places (corner order). */
__global__ void compact_kernel(const float *__restrict__ grid, const float *__restrict__ val,
                               const uint32_t *__restrict__ kept, const uint32_t *__restrict__ at,
                               long cells, float *out_grid, float *out_val)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i >= cells || !kept[i]) return;
    uint32_t j = at[i];
    out_grid[3 * (size_t)j] = grid[3 * i];
    out_grid[3 * (size_t)j + 1] = grid[3 * i + 1];
    out_grid[3 * (size_t)j + 2] = grid[3 * i + 2];
    out_val[j] = val[i];
}

unsigned blocks_for(long n)
{
    return (unsigned)((n + kThreads - 1) / kThreads);
}

} // namespace

struct kr_refine_cuda_fields {
    kr_gpu_context *ctx;
    kr_gpu_context *own; /* the twin context made here, or NULL */
    int views;
    ViewPoints *points; /* views entries */
    Field *slot[2];     /* views entries each */
    /* Grow-only scratch of one build. */
    void *scratch[7]; /* big table, list, brick_xyz, pairs, grid+val, flags+places, CUB */
    size_t scratch_bytes[7];
    Counters *d_cnt, *h_cnt; /* device counters, page-locked read-back */
    /* Devices whose pool this device may read (set on the first copy from
     * them: granting maps the whole pool, so once). */
    unsigned char pool_access[64];
};

enum { S_BIG, S_LIST, S_XYZ, S_PAIRS, S_GRID, S_FLAGS, S_TEMP, S_COUNT };

static cudaStream_t stream_of(const kr_refine_cuda_fields *f)
{
    return f->ctx->stream;
}

/* A stream-ordered allocation; running out of device memory is named. */
static kr_status dev_alloc(kr_refine_cuda_fields *f, void **p, size_t bytes, const char *what,
                           int k)
{
    *p = NULL;
    if (!bytes) bytes = 1;
    cudaError_t e = cudaMallocAsync(p, bytes, stream_of(f));
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *p = NULL;
        return kr_error(KR_ERR_NOMEM,
                        "refine: CUDA device %d is out of memory for view %d's %s (%zu bytes); "
                        "use more devices (--devices), fewer views or a coarser --cell",
                        f->ctx->device, k, what, bytes);
    }
    return KR_CUDA_STATUS(e);
}

static void dev_free(kr_refine_cuda_fields *f, void *p)
{
    if (p) (void)cudaFreeAsync(p, stream_of(f));
}

static kr_status scratch(kr_refine_cuda_fields *f, int which, size_t bytes, int k, void **out)
{
    /* Never NULL (CUB reads a NULL temp buffer as a size query). */
    if (bytes > f->scratch_bytes[which] || !f->scratch[which]) {
        dev_free(f, f->scratch[which]);
        f->scratch[which] = NULL;
        f->scratch_bytes[which] = 0;
        kr_status s = dev_alloc(f, &f->scratch[which], bytes + bytes / 4, "scratch", k);
        if (s != KR_OK) return s;
        f->scratch_bytes[which] = bytes + bytes / 4;
    }
    *out = f->scratch[which];
    return KR_OK;
}

static void free_field(kr_refine_cuda_fields *f, Field *d)
{
    dev_free(f, d->keys);
    dev_free(f, d->slots);
    dev_free(f, d->values);
    dev_free(f, d->grid);
    dev_free(f, d->grid_val);
    memset(d, 0, sizeof *d);
}

static kr_status check_view(const kr_refine_cuda_fields *f, int slot, int k)
{
    if (!f || k < 0 || k >= f->views || slot < 0 || slot > 1)
        return kr_error(KR_ERR_INVALID_ARG,
                        "refine: device fields: view %d or slot %d out of range", k, slot);
    return KR_OK;
}

extern "C" kr_status kr_refine_cuda_fields_create(kr_refine_cuda_fields **out, kr_gpu_context *ctx,
                                                  int n_views, int own_context)
{
    if (!out || !ctx || n_views < 1)
        return kr_error(KR_ERR_INVALID_ARG, "refine: device fields need a context and views");
    kr_refine_cuda_fields *f = (kr_refine_cuda_fields *)calloc(1, sizeof *f);
    if (!f) return kr_error(KR_ERR_NOMEM, "refine: no memory for device fields");
    f->ctx = ctx;
    f->views = n_views;
    f->points = (ViewPoints *)calloc((size_t)n_views, sizeof *f->points);
    f->slot[0] = (Field *)calloc((size_t)n_views, sizeof(Field));
    f->slot[1] = (Field *)calloc((size_t)n_views, sizeof(Field));
    kr_status s = f->points && f->slot[0] && f->slot[1]
                      ? KR_OK
                      : kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", n_views);
    if (s == KR_OK && own_context) {
        s = kr_gpu_context_twin(ctx, &f->own);
        if (s == KR_OK) f->ctx = f->own;
    }
    if (s == KR_OK) s = kr_gpu_enter(f->ctx);
    if (s == KR_OK) s = dev_alloc(f, (void **)&f->d_cnt, sizeof(Counters), "counters", 0);
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaMallocHost((void **)&f->h_cnt, sizeof(Counters)));
    if (s != KR_OK) {
        kr_refine_cuda_fields_destroy(&f);
        return s;
    }
    *out = f;
    return KR_OK;
}

extern "C" void kr_refine_cuda_fields_destroy(kr_refine_cuda_fields **fp)
{
    if (!fp || !*fp) return;
    kr_refine_cuda_fields *f = *fp;
    if (kr_gpu_enter(f->ctx) == KR_OK) {
        for (int k = 0; k < f->views; k++) {
            if (f->points) {
                dev_free(f, f->points[k].pts);
                dev_free(f, f->points[k].nrm);
            }
            for (int s = 0; s < 2; s++)
                if (f->slot[s]) free_field(f, &f->slot[s][k]);
        }
        for (int i = 0; i < S_COUNT; i++)
            dev_free(f, f->scratch[i]);
        dev_free(f, f->d_cnt);
        (void)cudaStreamSynchronize(stream_of(f));
        if (f->h_cnt) (void)cudaFreeHost(f->h_cnt);
        (void)cudaGetLastError();
    }
    free(f->points);
    free(f->slot[0]);
    free(f->slot[1]);
    kr_gpu_context_destroy(&f->own);
    free(f);
    *fp = NULL;
}

extern "C" int kr_refine_cuda_fields_device(const kr_refine_cuda_fields *f)
{
    return f->ctx->device;
}

extern "C" kr_status kr_refine_cuda_fields_points(kr_refine_cuda_fields *f, int k, const float *xyz,
                                                  size_t n, int with_normals)
{
    kr_status s = check_view(f, 0, k);
    if (s != KR_OK) return s;
    if (!xyz || n < 1 || n > (size_t)INT32_MAX / 3)
        return kr_error(KR_ERR_INVALID_ARG, "refine: view %d: %zu points (1 to %d)", k, n,
                        INT32_MAX / 3);
    if ((s = kr_gpu_enter(f->ctx)) != KR_OK) return s;
    ViewPoints *v = &f->points[k];
    dev_free(f, v->pts);
    dev_free(f, v->nrm);
    memset(v, 0, sizeof *v);
    float *d_xyz = NULL;
    size_t bytes = sizeof(float) * 3 * n;
    s = dev_alloc(f, (void **)&d_xyz, bytes, "points", k);
    if (s == KR_OK)
        s = KR_CUDA_STATUS(
            cudaMemcpyAsync(d_xyz, xyz, bytes, cudaMemcpyHostToDevice, stream_of(f)));
    if (s == KR_OK && !with_normals) {
        v->pts = d_xyz;
        v->n = n;
        return KR_CUDA_STATUS(cudaStreamSynchronize(stream_of(f)));
    }
    kr_kdtree *tree = NULL;
    float *nrm = NULL, *plane = NULL;
    /* The tree build checks the points and waits for its own copy. */
    if (s == KR_OK) s = kr_kdtree_cuda_build(f->ctx, xyz, NULL, n, &tree, NULL);
    if (s == KR_OK) s = dev_alloc(f, (void **)&nrm, bytes, "normals", k);
    if (s == KR_OK) s = dev_alloc(f, (void **)&plane, bytes, "points on their planes", k);
    if (s == KR_OK) {
        const kr_kdtree_device_copy *td = (const kr_kdtree_device_copy *)tree->device;
        normals_kernel<<<blocks_for((long)n), kThreads, 0, stream_of(f)>>>(
            td->nodes, tree->n_internal, td->cells, d_xyz, (long)n, nrm, plane);
        s = KR_CUDA_STATUS(cudaGetLastError());
    }
    /* Wait before the tree's device copy goes (freed on another stream). */
    kr_status waited = KR_CUDA_STATUS(cudaStreamSynchronize(stream_of(f)));
    if (s == KR_OK) s = waited;
    kr_kdtree_destroy(&tree);
    dev_free(f, d_xyz);
    if (s != KR_OK) {
        dev_free(f, nrm);
        dev_free(f, plane);
        return s;
    }
    v->pts = plane;
    v->nrm = nrm;
    v->n = n;
    return KR_OK;
}

/* The read-back of the counters (waits for the stream). */
static kr_status read_counters(kr_refine_cuda_fields *f)
{
    KR_CUDA_CHECK(cudaMemcpyAsync(f->h_cnt, f->d_cnt, sizeof(Counters), cudaMemcpyDeviceToHost,
                                  stream_of(f)));
    KR_CUDA_CHECK(cudaStreamSynchronize(stream_of(f)));
    return KR_OK;
}

static uint32_t pow2_at_least(size_t n)
{
    uint32_t c = 1;
    while (c < n && c < (1u << 31))
        c <<= 1;
    return c;
}

static kr_status build(kr_refine_cuda_fields *f, Field *d, const ViewPoints *v, int k,
                       size_t stride, float h, int band, double subset, unsigned seed)
{
    cudaStream_t st = stream_of(f);
    long m = (long)((v->n + stride - 1) / stride);
    /* Bricks a point can touch: its corners span 2·band per axis. */
    long per_axis = (2 * band - 1) / KR_DFIELD_BRICK + 2,
         per_point = per_axis * per_axis * per_axis;
    size_t most = (size_t)m * (size_t)per_point;
    if (most > (size_t)1 << 30)
        return kr_error(KR_ERR_INVALID_ARG,
                        "refine: view %d: %ld points with band %d touch too many bricks; use a "
                        "smaller band or fewer points per view",
                        k, m, band);
    uint32_t big = pow2_at_least(2 * most);
    void *p_big, *p_list, *p_xyz;
    kr_status s = scratch(f, S_BIG, sizeof(uint64_t) * big, k, &p_big);
    if (s == KR_OK) s = scratch(f, S_LIST, sizeof(uint64_t) * most, k, &p_list);
    if (s != KR_OK) return s;
    uint64_t *keys_big = (uint64_t *)p_big, *list = (uint64_t *)p_list;
    Counters init;
    memset(&init, 0, sizeof init);
    for (int a = 0; a < 3; a++) {
        init.lo[a] = INT_MAX;
        init.hi[a] = INT_MIN;
    }
    *f->h_cnt = init;
    KR_CUDA_CHECK(cudaMemcpyAsync(f->d_cnt, f->h_cnt, sizeof init, cudaMemcpyHostToDevice, st));
    KR_CUDA_CHECK(cudaMemsetAsync(keys_big, 0xff, sizeof(uint64_t) * big, st));
    insert_kernel<<<blocks_for(m), kThreads, 0, st>>>(v->pts, m, (long)stride, 1.0f / h, band,
                                                      keys_big, big - 1, f->d_cnt);
    KR_CUDA_CHECK_LAUNCH(insert_kernel);
    list_kernel<<<blocks_for(big), kThreads, 0, st>>>(keys_big, big, list, f->d_cnt);
    KR_CUDA_CHECK_LAUNCH(list_kernel);
    if ((s = read_counters(f)) != KR_OK) return s;
    if (f->h_cnt->overflow)
        return kr_error(KR_ERR_NUMERIC, "refine: view %d: the device's brick table overflowed", k);
    int bricks = f->h_cnt->bricks;
    /* The host's table: from 1024 entries, doubled while over half full. */
    uint32_t cap = 1024;
    while ((uint32_t)bricks * 2 > cap)
        cap *= 2;
    size_t cells = (size_t)bricks * KR_DFIELD_BRICK_CELLS;
    d->h = h;
    d->inv_h = 1.0f / h;
    d->capacity = cap;
    d->bricks = bricks;
    s = dev_alloc(f, (void **)&d->keys, sizeof(uint64_t) * cap, "brick table", k);
    if (s == KR_OK) s = dev_alloc(f, (void **)&d->slots, sizeof(int) * cap, "brick slots", k);
    if (s == KR_OK) s = dev_alloc(f, (void **)&d->values, sizeof(float) * cells, "values", k);
    if (s == KR_OK)
        s = scratch(f, S_XYZ, sizeof(int) * 3 * (size_t)(bricks ? bricks : 1), k, &p_xyz);
    if (s != KR_OK) return s;
    int *brick_xyz = (int *)p_xyz;
    KR_CUDA_CHECK(cudaMemsetAsync(d->keys, 0xff, sizeof(uint64_t) * cap, st));
    if (bricks) {
        /* Slots in key order (the big table is free again: the sorted list
         * goes there). */
        uint64_t *sorted = keys_big;
        size_t temp_bytes = 0;
        void *temp;
        KR_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(NULL, temp_bytes, (const uint64_t *)list,
                                                     sorted, bricks, 0, 64, st));
        if ((s = scratch(f, S_TEMP, temp_bytes, k, &temp)) != KR_OK) return s;
        KR_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, (const uint64_t *)list,
                                                     sorted, bricks, 0, 64, st));
        table_kernel<<<blocks_for(bricks), kThreads, 0, st>>>(sorted, bricks, d->keys, d->slots,
                                                              cap - 1, brick_xyz, f->d_cnt);
        KR_CUDA_CHECK_LAUNCH(table_kernel);
    }
    kr_dfield_lookup view = {h, 1.0f / h, d->keys, d->slots, d->values, cap - 1};
    if (cells && v->nrm) {
        void *p_pairs;
        if ((s = scratch(f, S_PAIRS, sizeof(uint64_t) * cells, k, &p_pairs)) != KR_OK) return s;
        unsigned long long *pairs = (unsigned long long *)p_pairs;
        KR_CUDA_CHECK(cudaMemsetAsync(pairs, 0xff, sizeof(uint64_t) * cells, st)); /* EMPTY_PAIR */
        signed_kernel<<<blocks_for(m), kThreads, 0, st>>>(view, band, v->pts, v->nrm, m,
                                                          (long)stride, pairs);
        KR_CUDA_CHECK_LAUNCH(signed_kernel);
        pair_values_kernel<<<blocks_for((long)cells), kThreads, 0, st>>>(pairs, (long)cells,
                                                                         d->values);
        KR_CUDA_CHECK_LAUNCH(pair_values_kernel);
    } else if (cells) {
        fill_u32_kernel<<<blocks_for((long)cells), kThreads, 0, st>>>(
            (uint32_t *)d->values, (long)cells, KR_DFIELD_INF_BITS);
        KR_CUDA_CHECK_LAUNCH(fill_u32_kernel);
        unsigned_kernel<<<blocks_for(m), kThreads, 0, st>>>(view, band, v->pts, m, (long)stride,
                                                            d->values);
        KR_CUDA_CHECK_LAUNCH(unsigned_kernel);
    }
    if (cells > (size_t)INT32_MAX)
        return kr_error(KR_ERR_INVALID_ARG,
                        "refine: view %d: %zu corners is too many for one field; use a coarser "
                        "--cell or fewer points per view",
                        k, cells);
    void *p_grid, *p_flags;
    s = scratch(f, S_GRID, sizeof(float) * 4 * (cells ? cells : 1), k, &p_grid);
    if (s == KR_OK)
        s = scratch(f, S_FLAGS, sizeof(uint32_t) * 2 * (cells ? cells : 1), k, &p_flags);
    if (s != KR_OK) return s;
    float *grid = (float *)p_grid, *val = grid + 3 * cells;
    uint32_t *kept_flag = (uint32_t *)p_flags, *at = kept_flag + cells;
    if (cells) {
        collect_kernel<<<blocks_for((long)cells), kThreads, 0, st>>>(
            view, brick_xyz, (long)cells, kr_dfield_subset_threshold(subset), seed, grid, val,
            kept_flag, f->d_cnt);
        KR_CUDA_CHECK_LAUNCH(collect_kernel);
        size_t temp_bytes = 0;
        void *temp;
        KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(NULL, temp_bytes, (const uint32_t *)kept_flag,
                                                    at, (int)cells, st));
        if ((s = scratch(f, S_TEMP, temp_bytes, k, &temp)) != KR_OK) return s;
        KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, (const uint32_t *)kept_flag,
                                                    at, (int)cells, st));
        kept_total_kernel<<<1, 32, 0, st>>>(kept_flag, at, (long)cells, f->d_cnt);
        KR_CUDA_CHECK_LAUNCH(kept_total_kernel);
    }
    if ((s = read_counters(f)) != KR_OK) return s;
    if (f->h_cnt->overflow)
        return kr_error(KR_ERR_NUMERIC, "refine: view %d: the device's brick table overflowed", k);
    size_t kept = (size_t)f->h_cnt->kept;
    d->n_grid = kept;
    s = dev_alloc(f, (void **)&d->grid, sizeof(float) * 3 * kept, "grid points", k);
    if (s == KR_OK) s = dev_alloc(f, (void **)&d->grid_val, sizeof(float) * kept, "grid values", k);
    if (s != KR_OK) return s;
    if (kept) {
        compact_kernel<<<blocks_for((long)cells), kThreads, 0, st>>>(
            grid, val, kept_flag, at, (long)cells, d->grid, d->grid_val);
        KR_CUDA_CHECK_LAUNCH(compact_kernel);
    }
    /* The host's bounds: the corners' positions h·x, whose extremes are
     * those of x (h > 0); none influenced: +∞ / −∞ as the host leaves them. */
    for (int a = 0; a < 3; a++) {
        int none = f->h_cnt->lo[a] > f->h_cnt->hi[a];
        d->lo[a] = none ? INFINITY : h * (float)f->h_cnt->lo[a];
        d->hi[a] = none ? -INFINITY : h * (float)f->h_cnt->hi[a];
    }
    return KR_OK;
}

static void info_of(const Field *d, kr_refine_cuda_field_info *info)
{
    memset(info, 0, sizeof *info);
    info->field = (kr_dfield_lookup){d->h,     d->inv_h,  d->keys,
                                     d->slots, d->values, d->capacity ? d->capacity - 1 : 0};
    info->bricks = d->bricks;
    info->grid = d->grid;
    info->grid_val = d->grid_val;
    info->n_grid = d->n_grid;
    memcpy(info->lo, d->lo, sizeof d->lo);
    memcpy(info->hi, d->hi, sizeof d->hi);
}

extern "C" kr_status kr_refine_cuda_fields_build(kr_refine_cuda_fields *f, int slot, int k,
                                                 size_t stride, float h, int band, double subset,
                                                 unsigned seed, kr_refine_cuda_field_info *info)
{
    kr_status s = check_view(f, slot, k);
    if (s != KR_OK) return s;
    const ViewPoints *v = &f->points[k];
    if (!v->pts || stride < 1 || !(h > 0) || band < 1 || !info)
        return kr_error(KR_ERR_INVALID_ARG,
                        "refine: device field of view %d: needs its points, a stride, a cell > 0 "
                        "and a band >= 1",
                        k);
    if ((s = kr_gpu_enter(f->ctx)) != KR_OK) return s;
    Field *d = &f->slot[slot][k];
    free_field(f, d);
    s = build(f, d, v, k, stride, h, band, subset, seed);
    /* Done before the caller lets another stream (the sums') read it. */
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(stream_of(f)));
    if (s != KR_OK) {
        /* Nothing half-built stays: wait out what was enqueued, then free. */
        (void)cudaStreamSynchronize(stream_of(f));
        free_field(f, d);
        (void)cudaGetLastError();
        return s;
    }
    info_of(d, info);
    return KR_OK;
}

extern "C" kr_status kr_refine_cuda_fields_info(const kr_refine_cuda_fields *f, int slot, int k,
                                                kr_refine_cuda_field_info *info)
{
    kr_status s = check_view(f, slot, k);
    if (s != KR_OK) return s;
    if (!info) return kr_error(KR_ERR_INVALID_ARG, "refine: device fields: no info to fill");
    info_of(&f->slot[slot][k], info);
    return KR_OK;
}

/* bytes from src's device to dst's through page-locked host memory: the
 * route between devices that cannot reach each other, and the one a caller
 * may force (staged copies) to compare with the peer route. The read waits
 * for src's stream, the write for dst's. */
static kr_status staged_copy(kr_refine_cuda_fields *dst, const kr_refine_cuda_fields *src, void *to,
                             const void *from, size_t bytes)
{
    void *host = NULL;
    kr_status s = kr_gpu_host_alloc(&host, bytes);
    if (s != KR_OK) return s;
    if ((s = kr_gpu_enter(src->ctx)) == KR_OK)
        s = KR_CUDA_STATUS(
            cudaMemcpyAsync(host, from, bytes, cudaMemcpyDeviceToHost, stream_of(src)));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(stream_of(src)));
    kr_status back = kr_gpu_enter(dst->ctx);
    if (s == KR_OK) s = back;
    if (s == KR_OK)
        s = KR_CUDA_STATUS(
            cudaMemcpyAsync(to, host, bytes, cudaMemcpyHostToDevice, stream_of(dst)));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(stream_of(dst)));
    kr_gpu_host_free(host);
    return s;
}

/* Peer access from device `from` to `to`'s memory, once per process (it is
 * the device's, not a context's; asking twice is an error that a sanitizer
 * reports). `from` is the current device. */
static kr_status enable_peer(int from, int to)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static unsigned char enabled[64][64];
    if (from < 0 || to < 0 || from >= 64 || to >= 64)
        return KR_CUDA_STATUS(cudaDeviceEnablePeerAccess(to, 0));
    kr_status s = KR_OK;
    pthread_mutex_lock(&lock);
    if (!enabled[from][to]) {
        cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
            (void)cudaGetLastError(); /* another caller */
        else
            s = KR_CUDA_STATUS(e);
        if (s == KR_OK) enabled[from][to] = 1;
    }
    pthread_mutex_unlock(&lock);
    return s;
}

/* bytes from src's device to dst's (both idle but for this copy): on one
 * device a device-to-device copy, between devices that reach each other a
 * peer copy, otherwise (or when `staged`) through the host. */
static kr_status copy_between(kr_refine_cuda_fields *dst, const kr_refine_cuda_fields *src,
                              void *to, const void *from, size_t bytes, bool staged)
{
    if (!bytes) return KR_OK;
    if (staged) return staged_copy(dst, src, to, from, bytes);
    int dd = dst->ctx->device, sd = src->ctx->device, can = 0;
    if (dd == sd)
        return KR_CUDA_STATUS(
            cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_of(dst)));
    KR_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, dd, sd));
    if (!can) return staged_copy(dst, src, to, from, bytes);
    /* Pool allocations are reachable from another device only once the
     * pool grants it (peer access alone does not), and the copy engines of
     * both ends touch both pools: each device's pool is opened to the other
     * (once: granting maps the whole pool), and peer access enabled. Seen on
     * two H200s joined by NVLink: with only the source's pool opened to the
     * destination, every peer copy ended in an unspecified launch failure. */
    if (sd >= 64 || !dst->pool_access[sd]) {
        int ends[2][2] = {{sd, dd}, {dd, sd}}; /* {pool's device, device given access} */
        for (int e = 0; e < 2; e++) {
            cudaMemPool_t pool;
            KR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, ends[e][0]));
            cudaMemAccessDesc desc;
            memset(&desc, 0, sizeof desc);
            desc.location.type = cudaMemLocationTypeDevice;
            desc.location.id = ends[e][1];
            desc.flags = cudaMemAccessFlagsProtReadWrite;
            KR_CUDA_CHECK(cudaMemPoolSetAccess(pool, &desc, 1));
        }
        kr_status pe = enable_peer(dd, sd);
        if (pe != KR_OK) return pe;
        if (sd < 64) dst->pool_access[sd] = 1;
    }
    return KR_CUDA_STATUS(cudaMemcpyPeerAsync(to, dd, from, sd, bytes, stream_of(dst)));
}

extern "C" kr_status kr_refine_cuda_fields_copy(kr_refine_cuda_fields *f,
                                                const kr_refine_cuda_fields *src, int slot, int k,
                                                bool staged)
{
    kr_status s = check_view(f, slot, k);
    if (s == KR_OK) s = check_view(src, slot, k);
    if (s != KR_OK) return s;
    if (f == src) return KR_OK;
    if ((s = kr_gpu_enter(f->ctx)) != KR_OK) return s;
    const Field *from = &src->slot[slot][k];
    Field *d = &f->slot[slot][k];
    free_field(f, d);
    *d = *from;
    d->keys = NULL;
    d->slots = NULL;
    d->values = NULL;
    d->grid = NULL;
    d->grid_val = NULL;
    size_t cells = (size_t)from->bricks * KR_DFIELD_BRICK_CELLS;
    s = dev_alloc(f, (void **)&d->keys, sizeof(uint64_t) * from->capacity, "brick table", k);
    if (s == KR_OK) s = dev_alloc(f, (void **)&d->slots, sizeof(int) * from->capacity, "slots", k);
    if (s == KR_OK) s = dev_alloc(f, (void **)&d->values, sizeof(float) * cells, "values", k);
    if (s == KR_OK)
        s = copy_between(f, src, d->keys, from->keys, sizeof(uint64_t) * from->capacity, staged);
    if (s == KR_OK)
        s = copy_between(f, src, d->slots, from->slots, sizeof(int) * from->capacity, staged);
    if (s == KR_OK)
        s = copy_between(f, src, d->values, from->values, sizeof(float) * cells, staged);
    kr_status waited = KR_CUDA_STATUS(cudaStreamSynchronize(stream_of(f)));
    if (s == KR_OK) s = waited;
    if (s != KR_OK) {
        free_field(f, d);
        (void)cudaGetLastError();
    }
    return s;
}

static kr_status download(const kr_refine_cuda_fields *f, void **out, const void *from,
                          size_t bytes)
{
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return kr_error(KR_ERR_NOMEM, "refine: no host memory for %zu bytes", bytes);
    if (!bytes) return KR_OK;
    kr_status s =
        KR_CUDA_STATUS(cudaMemcpyAsync(*out, from, bytes, cudaMemcpyDeviceToHost, stream_of(f)));
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(stream_of(f)));
    if (s != KR_OK) {
        free(*out);
        *out = NULL;
    }
    return s;
}

extern "C" kr_status kr_refine_cuda_fields_download(const kr_refine_cuda_fields *f, int slot, int k,
                                                    uint32_t *capacity, uint64_t **keys,
                                                    int **slots, float **values, float **grid,
                                                    float **grid_val)
{
    kr_status s = check_view(f, slot, k);
    if (s == KR_OK) s = kr_gpu_enter(f->ctx);
    if (s != KR_OK) return s;
    const Field *d = &f->slot[slot][k];
    if (!d->keys) return kr_error(KR_ERR_INVALID_ARG, "refine: view %d's field was not built", k);
    size_t cells = (size_t)d->bricks * KR_DFIELD_BRICK_CELLS;
    void *a = NULL, *b = NULL, *c = NULL, *g = NULL, *gv = NULL;
    if (keys) s = download(f, &a, d->keys, sizeof(uint64_t) * d->capacity);
    if (s == KR_OK && slots) s = download(f, &b, d->slots, sizeof(int) * d->capacity);
    if (s == KR_OK && values) s = download(f, &c, d->values, sizeof(float) * cells);
    if (s == KR_OK && grid)
        s = download(f, &g, d->grid, d->grid ? sizeof(float) * 3 * d->n_grid : 0);
    if (s == KR_OK && grid_val)
        s = download(f, &gv, d->grid_val, d->grid_val ? sizeof(float) * d->n_grid : 0);
    if (s != KR_OK) {
        free(a), free(b), free(c), free(g), free(gv);
        return s;
    }
    if (capacity) *capacity = d->capacity;
    if (keys) *keys = (uint64_t *)a;
    if (slots) *slots = (int *)b;
    if (values) *values = (float *)c;
    if (grid) *grid = (float *)g;
    if (grid_val) *grid_val = (float *)gv;
    return KR_OK;
}

extern "C" kr_status kr_refine_cuda_fields_download_normals(const kr_refine_cuda_fields *f, int k,
                                                            float *normals, float *points)
{
    kr_status s = check_view(f, 0, k);
    if (s == KR_OK) s = kr_gpu_enter(f->ctx);
    if (s != KR_OK) return s;
    const ViewPoints *v = &f->points[k];
    if (!v->nrm) return kr_error(KR_ERR_INVALID_ARG, "refine: view %d has no device normals", k);
    size_t bytes = sizeof(float) * 3 * v->n;
    if (normals)
        KR_CUDA_CHECK(
            cudaMemcpyAsync(normals, v->nrm, bytes, cudaMemcpyDeviceToHost, stream_of(f)));
    if (points)
        KR_CUDA_CHECK(cudaMemcpyAsync(points, v->pts, bytes, cudaMemcpyDeviceToHost, stream_of(f)));
    return KR_CUDA_STATUS(cudaStreamSynchronize(stream_of(f)));
}
