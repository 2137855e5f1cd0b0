/* The model k-d tree built on the device: the twin of core/kdtree.c, giving
 * the same complete binary tree in heap order (core/kdtree_layout.h), so
 * the tracker (pipeline/track/track_cuda.cu) descends it unchanged.
 *
 * The host build splits each node's points at the k-th smallest coordinate
 * (k: the leaves of its left subtree) on the axis of widest extent, by
 * quickselect, recursively. Here the tree is built level by level over all
 * nodes of a level at once, from three index lists presorted by x, y and z
 * (one stable radix sort each, ties in index order):
 *
 *   - every node owns the same contiguous range [start, start + m) in all
 *     three lists, each list sorted on its axis within the range;
 *   - so a node's box is the first and last entry of each list, the k-th
 *     smallest on the split axis is entry start + k of that axis's list, and
 *     the two values either side of the split are entries k − 1 and k — the
 *     same values the host's quickselect finds;
 *   - the left group is the first k entries of the split axis's list; every
 *     list is then partitioned stably (a flag per point, an exclusive scan of
 *     the flags over all three lists), which keeps each child's ranges sorted.
 *
 * A level costs four small kernels and one scan over 3n entries; a tree of n
 * points has ceil(log2 n) levels. The per-node and per-leaf math (shape,
 * axis, split plane, the cell's coefficients) is core/kdtree_build_kernels.h,
 * shared with the host build. Points that tie on a coordinate are ordered
 * by index here (the sorts are stable and start from index order; CUB takes
 * −0 and +0 as equal, as the host's comparisons do); the host's quickselect
 * orders them by its partition's history instead, its fastest order. So the
 * two builds give the same tree where no coordinates tie, and trees that
 * differ only in which tied points a split sends left where they do (every
 * depth image): the same cells, descents as near (tests/test_parity_tree.c).
 * tests/level_build.h is this build's exact host reference. The cells'
 * products go through KR_MUL (never fused) and sqrtf and / are IEEE-rounded
 * by default, so the cells round as the host's. */
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "core/kdtree_build_kernels.h"
#include "gpu/context.cuh"
#include "gpu/kdtree_cuda.h"

namespace
{

const int kThreads = 256;

int blocks_for(uint64_t n)
{
    return (int)((n + kThreads - 1) / kThreads);
}

/* The build's work arrays, carved out of one scratch slot. */
struct tb_work {
    float *pts, *nrm;       /* 3n each, as given (nrm NULL without normals) */
    float *keys, *keys_out; /* n: one axis's coordinates for its sort */
    uint32_t *iota;         /* n: 0 … n − 1 */
    uint32_t *idx[2];       /* 3n each: the three sorted lists, ping-pong */
    uint32_t *node_of[2];   /* n each: the node that owns list position p */
    uint32_t *goes_left;    /* n, by point: 1 when the point goes to the left child */
    uint32_t *flags, *scan; /* 3n each: goes_left along each list, its exclusive scan */
    uint32_t *start;        /* 2n − 1, by node: first list position of its range */
    uint32_t *left;         /* n_internal, by node: leaves of the left child */
    uint32_t *axis;         /* n_internal, by node: split axis */
    void *temp;             /* CUB's temporary storage */
    size_t temp_bytes;
};

size_t align_up(size_t b)
{
    return (b + 255) & ~(size_t)255;
}

__global__ void init_kernel(const float *__restrict__ pts, int axis, uint32_t n, float *keys,
                            uint32_t *iota, uint32_t *node_of)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    keys[i] = pts[3 * (size_t)i + axis];
    iota[i] = i;
    node_of[i] = 0;
}

/* The level steps of core/kdtree_build_kernels.h, one thread per element. */
__global__ void node_kernel(const float *__restrict__ pts, const uint32_t *__restrict__ idx,
                            uint32_t n, uint32_t first, uint32_t last, uint32_t *start,
                            uint32_t *left_of, uint32_t *axis_of, kr_kdtree_node *nodes)
{
    uint32_t node = first + blockIdx.x * blockDim.x + threadIdx.x;
    if (node < last) kr_kdtree_level_node(pts, idx, n, node, start, left_of, axis_of, nodes);
}

__global__ void mark_kernel(const uint32_t *__restrict__ idx, const uint32_t *__restrict__ node_of,
                            const uint32_t *__restrict__ start,
                            const uint32_t *__restrict__ left_of,
                            const uint32_t *__restrict__ axis_of, uint32_t n, uint32_t n_internal,
                            uint32_t *goes_left)
{
    uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n)
        kr_kdtree_level_mark(idx, node_of, start, left_of, axis_of, n, n_internal, p, goes_left);
}

__global__ void flags_kernel(const uint32_t *__restrict__ idx, const uint32_t *__restrict__ node_of,
                             const uint32_t *__restrict__ goes_left, uint32_t n,
                             uint32_t n_internal, uint32_t *flags)
{
    size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < 3 * (size_t)n) kr_kdtree_level_flag(idx, node_of, goes_left, n, n_internal, q, flags);
}

__global__ void
scatter_kernel(const uint32_t *__restrict__ idx, const uint32_t *__restrict__ node_of,
               const uint32_t *__restrict__ flags, const uint32_t *__restrict__ scan,
               const uint32_t *__restrict__ start, const uint32_t *__restrict__ left_of, uint32_t n,
               uint32_t n_internal, uint32_t *idx_next, uint32_t *node_of_next)
{
    size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q < 3 * (size_t)n)
        kr_kdtree_level_scatter(idx, node_of, flags, scan, start, left_of, n, n_internal, q,
                                idx_next, node_of_next);
}

/* The cell is built in registers and stored as two float4 (aligned). */
__global__ void leaf_kernel(const float *__restrict__ pts, const float *__restrict__ nrm,
                            const uint32_t *__restrict__ idx, const uint32_t *__restrict__ node_of,
                            uint32_t n, uint32_t n_internal, kr_kdtree_cell *cells,
                            uint32_t *leaf_orig, uint32_t *orig_leaf)
{
    uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    kr_kdtree_cell c;
    kr_kdtree_level_leaf(pts, nrm, idx, node_of, n_internal, p, &c, leaf_orig, orig_leaf);
    float4 *c4 =
        reinterpret_cast<float4 *>(cells + kr_kdtree_level_cell_of(node_of, n_internal, p));
    c4[0] = make_float4(c.s[0], c.s[1], c.s[2], c.s[3]);
    c4[1] = make_float4(c.n[0], c.n[1], c.n[2], c.n[3]);
}

/* Carves the work arrays out of the TREE_BUILD slot (or, with base NULL,
 * only totals the bytes). */
size_t carve(char *base, uint32_t n, bool normals, size_t temp_bytes, tb_work *w)
{
    size_t off = 0, N = n;
    auto take = [&](size_t bytes) -> void * {
        void *p = base ? base + off : NULL;
        off += align_up(bytes ? bytes : 1);
        return p;
    };
    w->pts = (float *)take(3 * N * sizeof(float));
    w->nrm = normals ? (float *)take(3 * N * sizeof(float)) : NULL;
    w->keys = (float *)take(N * sizeof(float));
    w->keys_out = (float *)take(N * sizeof(float));
    w->iota = (uint32_t *)take(N * sizeof(uint32_t));
    for (int b = 0; b < 2; b++) {
        w->idx[b] = (uint32_t *)take(3 * N * sizeof(uint32_t));
        w->node_of[b] = (uint32_t *)take(N * sizeof(uint32_t));
    }
    w->goes_left = (uint32_t *)take(N * sizeof(uint32_t));
    w->flags = (uint32_t *)take(3 * N * sizeof(uint32_t));
    w->scan = (uint32_t *)take(3 * N * sizeof(uint32_t));
    w->start = (uint32_t *)take(2 * N * sizeof(uint32_t));
    w->left = (uint32_t *)take(N * sizeof(uint32_t));
    w->axis = (uint32_t *)take(N * sizeof(uint32_t));
    w->temp = take(temp_bytes);
    w->temp_bytes = temp_bytes;
    return off;
}

/* The device copy's allocation: nodes, cells, then the two index maps. */
struct tb_out_layout {
    size_t nodes, cells, leaf_orig, orig_leaf, total;
};

tb_out_layout out_layout(uint32_t n)
{
    tb_out_layout L;
    L.nodes = 0;
    L.cells = align_up((size_t)(n > 1 ? n - 1 : 1) * sizeof(kr_kdtree_node));
    L.leaf_orig = L.cells + align_up((size_t)n * sizeof(kr_kdtree_cell));
    L.orig_leaf = L.leaf_orig + align_up((size_t)n * sizeof(uint32_t));
    L.total = L.orig_leaf + align_up((size_t)n * sizeof(uint32_t));
    return L;
}

/* kr_kdtree.device_release: stream-ordered, so a thread that drops the last
 * reference (possibly the tracker's) never waits for the device. Every use
 * of the copy has completed by then: the tracker synchronises before it
 * returns, and the builder before it hands the tree over. */
void release_device_tree(void *p)
{
    kr_kdtree_device_copy *d = (kr_kdtree_device_copy *)p;
    if (!d) return;
    int prev = -1;
    if (cudaGetDevice(&prev) == cudaSuccess && prev != d->device) (void)cudaSetDevice(d->device);
    if (d->block) (void)cudaFreeAsync(d->block, cudaStreamPerThread);
    if (prev >= 0 && prev != d->device) (void)cudaSetDevice(prev);
    (void)cudaGetLastError();
    free(d);
}

/* The build proper on ctx->stream, after the points are up: leaves the tree
 * in d and the maps in leaf_orig/orig_leaf of the device copy. */
kr_status build_levels(cudaStream_t st, tb_work *w, uint32_t n, kr_kdtree_node *nodes,
                       kr_kdtree_cell *cells, uint32_t *leaf_orig, uint32_t *orig_leaf)
{
    const uint32_t n_internal = n - 1;
    const int nb = blocks_for(n), nb3 = blocks_for(3 * (uint64_t)n);
    for (int a = 0; a < 3; a++) {
        init_kernel<<<nb, kThreads, 0, st>>>(w->pts, a, n, w->keys, w->iota, w->node_of[0]);
        KR_CUDA_CHECK_LAUNCH(init_kernel);
        size_t tb = w->temp_bytes;
        KR_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(w->temp, tb, w->keys, w->keys_out, w->iota,
                                                      w->idx[0] + (size_t)a * n, (int)n, 0,
                                                      (int)(8 * sizeof(float)), st));
    }
    KR_CUDA_CHECK(cudaMemsetAsync(w->start, 0, sizeof(uint32_t), st));
    int cur = 0;
    for (uint64_t first = 0; first < n_internal; first = 2 * first + 1) {
        uint64_t last = 2 * first + 1 < n_internal ? 2 * first + 1 : n_internal;
        node_kernel<<<blocks_for(last - first), kThreads, 0, st>>>(
            w->pts, w->idx[cur], n, (uint32_t)first, (uint32_t)last, w->start, w->left, w->axis,
            nodes);
        KR_CUDA_CHECK_LAUNCH(node_kernel);
        mark_kernel<<<nb, kThreads, 0, st>>>(w->idx[cur], w->node_of[cur], w->start, w->left,
                                             w->axis, n, n_internal, w->goes_left);
        KR_CUDA_CHECK_LAUNCH(mark_kernel);
        flags_kernel<<<nb3, kThreads, 0, st>>>(w->idx[cur], w->node_of[cur], w->goes_left, n,
                                               n_internal, w->flags);
        KR_CUDA_CHECK_LAUNCH(flags_kernel);
        size_t tb = w->temp_bytes;
        KR_CUDA_CHECK(
            cub::DeviceScan::ExclusiveSum(w->temp, tb, w->flags, w->scan, (int)(3 * n), st));
        scatter_kernel<<<nb3, kThreads, 0, st>>>(w->idx[cur], w->node_of[cur], w->flags, w->scan,
                                                 w->start, w->left, n, n_internal, w->idx[1 - cur],
                                                 w->node_of[1 - cur]);
        KR_CUDA_CHECK_LAUNCH(scatter_kernel);
        cur = 1 - cur;
    }
    leaf_kernel<<<nb, kThreads, 0, st>>>(w->pts, w->nrm, w->idx[cur], w->node_of[cur], n,
                                         n_internal, cells, leaf_orig, orig_leaf);
    KR_CUDA_CHECK_LAUNCH(leaf_kernel);
    return KR_OK;
}

/* Everything after the inputs were checked and the host tree allocated. */
kr_status build_on(kr_gpu_context *ctx, const float *points, const float *normals, kr_kdtree *t,
                   kr_kdtree_device_copy *dev, cudaEvent_t ev[4])
{
    cudaStream_t st = ctx->stream;
    const uint32_t n = t->n;
    size_t sort_bytes = 0, scan_bytes = 0;
    KR_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, (const float *)NULL,
                                                  (float *)NULL, (const uint32_t *)NULL,
                                                  (uint32_t *)NULL, (int)n, 0, 32, st));
    KR_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, (const uint32_t *)NULL,
                                                (uint32_t *)NULL, (int)(3 * n), st));
    size_t temp = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
    tb_work w;
    size_t bytes = carve(NULL, n, normals != NULL, temp, &w);
    void *base;
    kr_status s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_TREE_BUILD, bytes, &base);
    if (s != KR_OK) return s;
    carve((char *)base, n, normals != NULL, temp, &w);

    tb_out_layout L = out_layout(n);
    KR_CUDA_CHECK(cudaMallocAsync(&dev->block, L.total, st));
    char *ob = (char *)dev->block;
    dev->nodes = (kr_kdtree_node *)(ob + L.nodes);
    dev->cells = (kr_kdtree_cell *)(ob + L.cells);
    uint32_t *leaf_orig = (uint32_t *)(ob + L.leaf_orig),
             *orig_leaf = (uint32_t *)(ob + L.orig_leaf);

    KR_CUDA_CHECK(cudaEventRecord(ev[0], st));
    KR_CUDA_CHECK(
        cudaMemcpyAsync(w.pts, points, 3 * (size_t)n * sizeof(float), cudaMemcpyHostToDevice, st));
    if (normals)
        KR_CUDA_CHECK(cudaMemcpyAsync(w.nrm, normals, 3 * (size_t)n * sizeof(float),
                                      cudaMemcpyHostToDevice, st));
    KR_CUDA_CHECK(cudaEventRecord(ev[1], st));
    if ((s = build_levels(st, &w, n, dev->nodes, dev->cells, leaf_orig, orig_leaf)) != KR_OK)
        return s;
    KR_CUDA_CHECK(cudaEventRecord(ev[2], st));
    if (t->n_internal)
        KR_CUDA_CHECK(cudaMemcpyAsync(t->nodes, dev->nodes, t->n_internal * sizeof(kr_kdtree_node),
                                      cudaMemcpyDeviceToHost, st));
    KR_CUDA_CHECK(cudaMemcpyAsync(t->cells, dev->cells, (size_t)n * sizeof(kr_kdtree_cell),
                                  cudaMemcpyDeviceToHost, st));
    KR_CUDA_CHECK(cudaMemcpyAsync(t->leaf_orig, leaf_orig, (size_t)n * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, st));
    KR_CUDA_CHECK(cudaMemcpyAsync(t->orig_leaf, orig_leaf, (size_t)n * sizeof(uint32_t),
                                  cudaMemcpyDeviceToHost, st));
    KR_CUDA_CHECK(cudaEventRecord(ev[3], st));
    KR_CUDA_CHECK(cudaStreamSynchronize(st));
    return KR_OK;
}

} // namespace

kr_status kr_kdtree_cuda_build(kr_gpu_context *ctx, const float *points, const float *normals,
                               size_t n, kr_kdtree **out, kr_device_tree_times *times)
{
    if (!ctx || !out || (!points && n))
        return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_cuda_build: NULL argument");
    if (n == 0) return kr_error(KR_ERR_EMPTY, "kr_kdtree_cuda_build: no model points");
    /* The scan runs over 3n entries counted in int. */
    if (n > (size_t)INT32_MAX / 3)
        return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_cuda_build: %zu points is too many", n);
    for (size_t i = 0; i < 3 * n; i++)
        if (!isfinite(points[i]))
            return kr_error(KR_ERR_INVALID_ARG, "kr_kdtree_cuda_build: point %zu is not finite",
                            i / 3);
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    kr_kdtree *t = kr_kdtree_alloc(n);
    kr_kdtree_device_copy *dev = (kr_kdtree_device_copy *)calloc(1, sizeof *dev);
    if (!t || !dev) {
        kr_kdtree_destroy(&t);
        free(dev);
        return kr_error(KR_ERR_NOMEM, "kr_kdtree_cuda_build: out of host memory for %zu points", n);
    }
    dev->device = ctx->device;
    cudaEvent_t ev[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4 && s == KR_OK; i++)
        s = KR_CUDA_STATUS(cudaEventCreate(&ev[i]));
    if (s == KR_OK) s = build_on(ctx, points, normals, t, dev, ev);
    if (s == KR_OK && times) {
        float ms[3] = {0, 0, 0};
        for (int i = 0; i < 3 && s == KR_OK; i++)
            s = KR_CUDA_STATUS(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]));
        if (s == KR_OK) {
            times->upload_ms = ms[0];
            times->build_ms = ms[1];
            times->download_ms = ms[2];
        }
    }
    for (int i = 0; i < 4; i++)
        if (ev[i]) (void)cudaEventDestroy(ev[i]);
    if (s != KR_OK) {
        /* The stream may still hold work on the copy: wait it out first. */
        (void)cudaStreamSynchronize(ctx->stream);
        release_device_tree(dev);
        kr_kdtree_destroy(&t);
        return s;
    }
    t->device = dev;
    t->device_release = release_device_tree;
    *out = t;
    return KR_OK;
}

kr_status kr_gpu_context_twin(const kr_gpu_context *ctx, kr_gpu_context **out)
{
    if (!ctx || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_gpu_context_twin: NULL argument");
    return kr_gpu_context_create(out, ctx->device);
}
