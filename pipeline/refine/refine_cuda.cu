/* The CUDA engine of multi-view refinement: the twin of pipeline/refine/dfield.c
 * (distances of the influenced corners) and pipeline/refine/refine_cpu.c (the pair
 * sums). Kernels map threads to points or grid points and call the shared
 * per-element math of pipeline/refine/dfield_kernels.h.
 *
 * Distances: one thread per point, atomicMin on the float bits of each
 * influenced corner (distances are ≥ 0, so bit order is value order). Sums:
 * one thread per grid point and pair; each block reduces its 30 sums (the
 * 21 of Σ w J Jᵀ, 6 of Σ w J e, cost, Σ e², count) with warp shuffles and
 * adds them to the pair's totals with one double atomicAdd per sum. The
 * normal equations are assembled on the host (pipeline/refine/refine_solve.c) and
 * solved there or on a device (pipeline/refine/refine_solve_cuda.cu).
 *
 * Device memory comes from the stream-ordered allocator (cudaMallocAsync on
 * the context's stream) with a pool that keeps what it is given back: a
 * refinement builds a field per view and level and loads every level, so
 * hundreds of buffers come and go, and plain cudaMalloc/cudaFree (cudaFree
 * waits for the whole device) cost more than the kernels. */
#include <stdlib.h>
#include <string.h>

#include "gpu/context.cuh"
#include "pipeline/refine/refine_cuda.h"

namespace
{

const int kThreads = 256;
const int kSums = (int)(sizeof(kr_refine_acc) / sizeof(double)); /* 30 */

struct DevView {
    kr_dfield_lookup field; /* device pointers */
    const float *grid, *grid_val;
    long n_grid;
};

/* Adds this thread's sums to out[0 … kSums−1]: warp shuffles, then one warp
 * over the warps' partial sums, then one atomicAdd per sum. */
__device__ void block_add(const double *mine, double *out)
{
    __shared__ double part[kThreads / 32][kSums];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int c = 0; c < kSums; c++) {
        double v = mine[c];
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) part[warp][c] = v;
    }
    __syncthreads();
    if (warp == 0) {
        for (int c = 0; c < kSums; c++) {
            double v = lane < kThreads / 32 ? part[lane][c] : 0.0;
            for (int o = 16; o > 0; o >>= 1)
                v += __shfl_down_sync(0xffffffffu, v, o);
            if (lane == 0 && v != 0.0) atomicAdd(&out[c], v);
        }
    }
    __syncthreads();
}

/* first + blockIdx.y: the pair (launches of at most 65 535 pairs, gridDim.y's
 * limit: a scan of thousands of views has more); blockIdx.x·blockDim.x +
 * threadIdx.x: i's grid point. Consecutive blocks share a pair, and so the
 * other view's field in the caches. */
__global__ void pairs_kernel(const DevView *__restrict__ views,
                             const kr_refine_posef *__restrict__ poses,
                             const int *__restrict__ pairs, int first, float huber, float cap,
                             double *acc)
{
    int p = first + (int)blockIdx.y, i = pairs[2 * p], j = pairs[2 * p + 1];
    /* The grid is as wide as the largest view's share; a block past this
     * view's grid points has nothing to add. The test is the same for the
     * whole block, so leaving before block_add's barriers is safe. */
    if (blockIdx.x * (long)blockDim.x >= views[i].n_grid) return;
    long k = blockIdx.x * (long)blockDim.x + threadIdx.x;
    kr_refine_acc a;
    kr_refine_acc_zero(&a);
    float e, J[6], w, c;
    if (k < views[i].n_grid &&
        kr_refine_pair_residual(&poses[i], &poses[j], &views[j].field, views[i].grid + 3 * k,
                                views[i].grid_val[k], &e, J)) {
        kr_refine_robust(e, huber, cap, &w, &c);
        kr_refine_accumulate(&a, J, e, w, c);
    }
    block_add((const double *)&a, acc + (size_t)p * kSums);
}

/* The thesis's form: a gauge grid point counts only when it lands in every
 * other view's field; then it adds one residual to each pair. */
__global__ void star_kernel(const DevView *__restrict__ views,
                            const kr_refine_posef *__restrict__ poses,
                            const int *__restrict__ pairs, int npairs, int r, float huber,
                            float cap, double *acc)
{
    long k = blockIdx.x * (long)blockDim.x + threadIdx.x;
    int inside = k < views[r].n_grid;
    float e, J[6], w, c;
    for (int p = 0; p < npairs && inside; p++) {
        int j = pairs[2 * p + 1];
        inside = kr_refine_pair_residual(&poses[r], &poses[j], &views[j].field,
                                         views[r].grid + 3 * k, views[r].grid_val[k], &e, NULL);
    }
    for (int p = 0; p < npairs; p++) {
        kr_refine_acc a;
        kr_refine_acc_zero(&a);
        int j = pairs[2 * p + 1];
        if (inside && kr_refine_pair_residual(&poses[r], &poses[j], &views[j].field,
                                              views[r].grid + 3 * k, views[r].grid_val[k], &e, J)) {
            kr_refine_robust(e, huber, cap, &w, &c);
            kr_refine_accumulate(&a, J, e, w, c);
        }
        block_add((const double *)&a, acc + (size_t)p * kSums);
    }
}

} // namespace

struct kr_refine_cuda {
    kr_gpu_context *ctx;
    /* The loaded level: per view, device copies of its field and grid. */
    int views;
    void **blocks; /* views × 5 device allocations */
    DevView *host_views;
    DevView *d_views;
    kr_refine_posef *d_poses;
    int *d_pairs;
    double *d_acc;
    int pairs_capacity;
    /* Page-locked staging of one evaluation (grow-only): the poses and pairs
     * on their way up, the pair sums on their way down. Pageable copies
     * would make eval_start wait and eval_finish copy at a fraction of the
     * bus's speed (2.4 MB of sums per evaluation at 200 views). */
    void *h_stage;
    size_t h_stage_bytes;
    int staged_pairs; /* pairs of the evaluation in flight (-1: none) */
    kr_status launch_status;
};

/* Device buffers on the context's stream, from its pool (see the top). */
static void release(kr_refine_cuda *g, void *ptr)
{
    if (ptr) (void)cudaFreeAsync(ptr, g->ctx->stream);
}

static void free_level(kr_refine_cuda *g)
{
    if (g->blocks)
        for (int i = 0; i < 5 * g->views; i++)
            release(g, g->blocks[i]);
    free(g->blocks);
    free(g->host_views);
    release(g, g->d_views);
    release(g, g->d_poses);
    g->blocks = NULL;
    g->host_views = NULL;
    g->d_views = NULL;
    g->d_poses = NULL;
    g->views = 0;
}

kr_status kr_refine_cuda_create(kr_refine_cuda **out, kr_gpu_context *ctx)
{
    if (!out || !ctx) return kr_error(KR_ERR_INVALID_ARG, "refine: needs a CUDA context");
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    /* Keep freed blocks in the pool for the next level's fields. */
    cudaMemPool_t pool;
    KR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, ctx->device));
    uint64_t keep = UINT64_MAX;
    KR_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    kr_refine_cuda *g = (kr_refine_cuda *)calloc(1, sizeof *g);
    if (!g) return kr_error(KR_ERR_NOMEM, "refine: no memory for the CUDA engine");
    g->ctx = ctx;
    g->staged_pairs = -1;
    *out = g;
    return KR_OK;
}

void kr_refine_cuda_destroy(kr_refine_cuda **g)
{
    if (!g || !*g) return;
    (void)kr_gpu_enter((*g)->ctx);
    free_level(*g);
    release(*g, (*g)->d_pairs);
    release(*g, (*g)->d_acc);
    (void)cudaStreamSynchronize((*g)->ctx->stream);
    if ((*g)->h_stage) (void)cudaFreeHost((*g)->h_stage);
    free(*g);
    *g = NULL;
}

/* A pageable source: cudaMemcpyAsync returns once it has been staged, so the
 * caller may free it. */
static kr_status upload(kr_refine_cuda *g, void **dst, const void *src, size_t bytes)
{
    *dst = NULL;
    if (!bytes) return KR_OK;
    KR_CUDA_CHECK(cudaMallocAsync(dst, bytes, g->ctx->stream));
    KR_CUDA_CHECK(cudaMemcpyAsync(*dst, src, bytes, cudaMemcpyHostToDevice, g->ctx->stream));
    return KR_OK;
}

kr_status kr_refine_cuda_load(kr_refine_cuda *g, const kr_refine_cuda_view *views, int n_views)
{
    kr_status s = kr_gpu_enter(g->ctx);
    if (s != KR_OK) return s;
    free_level(g);
    g->blocks = (void **)calloc((size_t)(5 * n_views), sizeof(void *));
    g->host_views = (DevView *)calloc((size_t)n_views, sizeof(DevView));
    if (!g->blocks || !g->host_views)
        return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", n_views);
    g->views = n_views;
    for (int k = 0; k < n_views && s == KR_OK; k++) {
        const kr_refine_cuda_view *v = &views[k];
        void **b = g->blocks + 5 * k;
        size_t cap = (size_t)v->field.mask + 1;
        s = upload(g, &b[0], v->field.keys, sizeof(uint64_t) * cap);
        if (s == KR_OK) s = upload(g, &b[1], v->field.slots, sizeof(int) * cap);
        if (s == KR_OK)
            s = upload(g, &b[2], v->field.values,
                       sizeof(float) * (size_t)v->bricks * KR_DFIELD_BRICK_CELLS);
        if (s == KR_OK) s = upload(g, &b[3], v->grid, sizeof(float) * 3 * v->n_grid);
        if (s == KR_OK) s = upload(g, &b[4], v->grid_val, sizeof(float) * v->n_grid);
        DevView *d = &g->host_views[k];
        d->field = v->field;
        d->field.keys = (const uint64_t *)b[0];
        d->field.slots = (const int *)b[1];
        d->field.values = (const float *)b[2];
        d->grid = (const float *)b[3];
        d->grid_val = (const float *)b[4];
        d->n_grid = (long)v->n_grid;
    }
    if (s == KR_OK)
        s = upload(g, (void **)&g->d_views, g->host_views, sizeof(DevView) * (size_t)n_views);
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cudaMallocAsync(
            (void **)&g->d_poses, sizeof(kr_refine_posef) * (size_t)n_views, g->ctx->stream));
    return s;
}

kr_status kr_refine_cuda_use(kr_refine_cuda *g, const kr_refine_cuda_view *views, int n_views)
{
    kr_status s = kr_gpu_enter(g->ctx);
    if (s != KR_OK) return s;
    free_level(g);
    /* No blocks: the fields belong to their kr_refine_cuda_fields. */
    g->host_views = (DevView *)calloc((size_t)n_views, sizeof(DevView));
    if (!g->host_views) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", n_views);
    g->views = n_views;
    for (int k = 0; k < n_views; k++) {
        DevView *d = &g->host_views[k];
        d->field = views[k].field;
        d->grid = views[k].grid;
        d->grid_val = views[k].grid_val;
        d->n_grid = views[k].grid ? (long)views[k].n_grid : 0;
    }
    s = upload(g, (void **)&g->d_views, g->host_views, sizeof(DevView) * (size_t)n_views);
    if (s == KR_OK)
        s = KR_CUDA_STATUS(cudaMallocAsync(
            (void **)&g->d_poses, sizeof(kr_refine_posef) * (size_t)n_views, g->ctx->stream));
    return s;
}

/* Staging layout: sums (npairs × kr_refine_acc), then poses, then pairs. */
static size_t stage_bytes(int views, int npairs)
{
    return sizeof(kr_refine_acc) * (size_t)npairs + sizeof(kr_refine_posef) * (size_t)views +
           sizeof(int) * 2 * (size_t)npairs;
}

static kr_status eval_launch(kr_refine_cuda *g, int star, int gauge, float huber, float cap,
                             const kr_refine_posef *poses, const int *pairs, int npairs)
{
    cudaStream_t st = g->ctx->stream;
    if (npairs > g->pairs_capacity) {
        release(g, g->d_pairs);
        release(g, g->d_acc);
        g->d_pairs = NULL;
        g->d_acc = NULL;
        g->pairs_capacity = 0;
        KR_CUDA_CHECK(cudaMallocAsync((void **)&g->d_pairs, sizeof(int) * 2 * (size_t)npairs, st));
        KR_CUDA_CHECK(
            cudaMallocAsync((void **)&g->d_acc, sizeof(kr_refine_acc) * (size_t)npairs, st));
        g->pairs_capacity = npairs;
    }
    size_t need = stage_bytes(g->views, npairs);
    if (need > g->h_stage_bytes) {
        /* No copy of the previous evaluation is in flight: eval_finish waited. */
        if (g->h_stage) KR_CUDA_CHECK(cudaFreeHost(g->h_stage));
        g->h_stage = NULL;
        g->h_stage_bytes = 0;
        KR_CUDA_CHECK(cudaMallocHost(&g->h_stage, need + need / 4));
        g->h_stage_bytes = need + need / 4;
    }
    char *stage = (char *)g->h_stage;
    kr_refine_posef *h_poses = (kr_refine_posef *)(stage + sizeof(kr_refine_acc) * (size_t)npairs);
    int *h_pairs = (int *)(h_poses + g->views);
    memcpy(h_poses, poses, sizeof(kr_refine_posef) * (size_t)g->views);
    memcpy(h_pairs, pairs, sizeof(int) * 2 * (size_t)npairs);
    KR_CUDA_CHECK(cudaMemcpyAsync(g->d_poses, h_poses, sizeof(kr_refine_posef) * (size_t)g->views,
                                  cudaMemcpyHostToDevice, st));
    KR_CUDA_CHECK(cudaMemcpyAsync(g->d_pairs, h_pairs, sizeof(int) * 2 * (size_t)npairs,
                                  cudaMemcpyHostToDevice, st));
    KR_CUDA_CHECK(cudaMemsetAsync(g->d_acc, 0, sizeof(kr_refine_acc) * (size_t)npairs, st));
    if (star) {
        long n = g->host_views[gauge].n_grid;
        unsigned blocks = (unsigned)((n + kThreads - 1) / kThreads);
        if (blocks)
            star_kernel<<<blocks, kThreads, 0, st>>>(g->d_views, g->d_poses, g->d_pairs, npairs,
                                                     gauge, huber, cap, g->d_acc);
    } else {
        long n = 0;
        for (int p = 0; p < npairs; p++)
            if (g->host_views[pairs[2 * p]].n_grid > n) n = g->host_views[pairs[2 * p]].n_grid;
        unsigned blocks = (unsigned)((n + kThreads - 1) / kThreads);
        for (int first = 0; blocks && first < npairs; first += 65535) {
            int count = npairs - first < 65535 ? npairs - first : 65535;
            pairs_kernel<<<dim3(blocks, (unsigned)count), kThreads, 0, st>>>(
                g->d_views, g->d_poses, g->d_pairs, first, huber, cap, g->d_acc);
        }
    }
    KR_CUDA_CHECK(cudaGetLastError());
    KR_CUDA_CHECK(cudaMemcpyAsync(stage, g->d_acc, sizeof(kr_refine_acc) * (size_t)npairs,
                                  cudaMemcpyDeviceToHost, st));
    return KR_OK;
}

kr_status kr_refine_cuda_eval_start(kr_refine_cuda *g, int star, int gauge, float huber, float cap,
                                    const kr_refine_posef *poses, const int *pairs, int npairs)
{
    kr_status s = kr_gpu_enter(g->ctx);
    if (s != KR_OK) return s;
    g->staged_pairs = npairs;
    g->launch_status =
        npairs > 0 ? eval_launch(g, star, gauge, huber, cap, poses, pairs, npairs) : KR_OK;
    return g->launch_status;
}

kr_status kr_refine_cuda_eval_wait(kr_refine_cuda *g, const kr_refine_acc **sums)
{
    int npairs = g->staged_pairs;
    g->staged_pairs = -1;
    if (npairs < 0) return kr_error(KR_ERR_INVALID_ARG, "refine: no evaluation was started");
    kr_status s = kr_gpu_enter(g->ctx);
    if (s != KR_OK) return s;
    /* Wait even after a failed launch: the staging buffer may still be the
     * target of a copy. */
    kr_status waited = KR_CUDA_STATUS(cudaStreamSynchronize(g->ctx->stream));
    if (g->launch_status != KR_OK) return g->launch_status;
    if (waited != KR_OK) return waited;
    *sums = (const kr_refine_acc *)g->h_stage;
    return KR_OK;
}

kr_status kr_refine_cuda_eval_finish(kr_refine_cuda *g, kr_refine_acc *acc)
{
    int npairs = g->staged_pairs;
    const kr_refine_acc *sums = NULL;
    kr_status s = kr_refine_cuda_eval_wait(g, &sums);
    if (s == KR_OK && npairs > 0) memcpy(acc, sums, sizeof(kr_refine_acc) * (size_t)npairs);
    return s;
}

kr_status kr_refine_cuda_eval(kr_refine_cuda *g, int star, int gauge, float huber, float cap,
                              const kr_refine_posef *poses, const int *pairs, int npairs,
                              kr_refine_acc *acc)
{
    kr_status s = kr_refine_cuda_eval_start(g, star, gauge, huber, cap, poses, pairs, npairs);
    kr_status f = kr_refine_cuda_eval_finish(g, acc);
    return s != KR_OK ? s : f;
}
