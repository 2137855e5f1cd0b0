/* The independent measure on CUDA devices (pipeline/refine/refine_fit_cuda.h).
 *
 * Each device gets one block of memory holding every view's tree nodes,
 * cells and occupancy bits, the kr_fit_view table pointing into it, and its
 * share of the samples (whole views, contiguous, so that the devices' answers
 * laid end to end are in sample order). An evaluation uploads the poses and
 * their inverses, runs one thread per sample (kr_fit_sample: the same code
 * and rounding as the host's loop) and reads the distances back; the devices
 * run together and are waited for one after the other. */
#include <stdlib.h>
#include <string.h>

#include "gpu/context.cuh"
#include "pipeline/refine/refine_fit_cuda.h"

#define FIT_THREADS 128

typedef struct {
    kr_gpu_context *ctx;
    void *block;        /* trees, occupancies, table, samples, poses, answers */
    kr_fit_view *views; /* device table */
    const float *samples;
    int *view_of; /* each of this device's samples' view */
    kr_pose *poses, *inv;
    double *best;
    size_t first, count; /* this device's samples: [first, first + count) */
} fit_device;

struct kr_refine_fit_cuda {
    int n_dev, n_views;
    fit_device dev[KR_REFINE_FIT_MAX_DEVICES];
};

__global__ void fit_samples(const kr_fit_view *views, int n, const kr_pose *poses,
                            const kr_pose *inv, const float *samples, const int *view_of,
                            size_t count, double cap2, int prune, double *best)
{
    size_t s = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= count) return;
    int i = view_of[s];
    best[s] = kr_fit_sample(views, n, i, &poses[i], inv, samples + 3 * s, cap2, prune);
}

static size_t occupancy_words(const kr_fit_occupancy *g)
{
    return g->bits ? ((size_t)g->dim[0] * g->dim[1] * g->dim[2] + 63) / 64 : 0;
}

static size_t align16(size_t b)
{
    return (b + 15) & ~(size_t)15;
}

/* Device d's block: the layout is computed once (sizes), then filled on the
 * host in one pageable buffer and copied up in one transfer. */
static kr_status upload(fit_device *fd, const kr_fit_view *views, int n, const float *samples,
                        const size_t *sample_start, int v_lo, int v_hi)
{
    fd->first = sample_start[v_lo];
    fd->count = sample_start[v_hi] - sample_start[v_lo];
    size_t bytes = 0, *at = (size_t *)malloc(sizeof *at * 3 * (size_t)n);
    if (!at) return kr_error(KR_ERR_NOMEM, "refine measure: no memory for %d views", n);
    for (int k = 0; k < n; k++) {
        const kr_fit_view *v = &views[k];
        size_t cells = v->cells ? v->n_internal + 1 : 0;
        at[3 * k] = bytes;
        bytes += align16(sizeof(kr_kdtree_node) * (v->cells ? v->n_internal : 0));
        at[3 * k + 1] = bytes;
        bytes += align16(sizeof(kr_kdtree_cell) * cells);
        at[3 * k + 2] = bytes;
        bytes += align16(sizeof(uint64_t) * occupancy_words(&v->occupied));
    }
    size_t table = bytes, samples_at = table + align16(sizeof(kr_fit_view) * n);
    size_t view_of_at = samples_at + align16(sizeof(float) * 3 * fd->count);
    size_t poses_at = view_of_at + align16(sizeof(int) * fd->count);
    size_t inv_at = poses_at + align16(sizeof(kr_pose) * n);
    size_t best_at = inv_at + align16(sizeof(kr_pose) * n);
    size_t upload_bytes = poses_at, total = best_at + sizeof(double) * (fd->count ? fd->count : 1);
    char *host = (char *)malloc(upload_bytes);
    kr_status s =
        host ? KR_OK
             : kr_error(KR_ERR_NOMEM, "refine measure: no memory (%zu bytes)", upload_bytes);
    if (s == KR_OK) s = kr_gpu_enter(fd->ctx);
    if (s == KR_OK) {
        cudaError_t e = cudaMalloc(&fd->block, total);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            s = kr_error(KR_ERR_NOMEM,
                         "refine measure: CUDA device %d has no room for %zu MB of %d views' trees "
                         "(%s); use fewer views or --backend cpu",
                         fd->ctx->device, total >> 20, n, cudaGetErrorString(e));
        }
    }
    if (s == KR_OK) {
        char *dev = (char *)fd->block;
        kr_fit_view *t = (kr_fit_view *)(host + table);
        for (int k = 0; k < n; k++) {
            const kr_fit_view *v = &views[k];
            t[k] = *v;
            if (v->cells) {
                memcpy(host + at[3 * k], v->nodes, sizeof(kr_kdtree_node) * v->n_internal);
                memcpy(host + at[3 * k + 1], v->cells,
                       sizeof(kr_kdtree_cell) * (v->n_internal + 1));
                t[k].nodes = (const kr_kdtree_node *)(dev + at[3 * k]);
                t[k].cells = (const kr_kdtree_cell *)(dev + at[3 * k + 1]);
            }
            if (v->occupied.bits) {
                memcpy(host + at[3 * k + 2], v->occupied.bits,
                       sizeof(uint64_t) * occupancy_words(&v->occupied));
                t[k].occupied.bits = (const uint64_t *)(dev + at[3 * k + 2]);
            }
        }
        memcpy(host + samples_at, samples + 3 * fd->first, sizeof(float) * 3 * fd->count);
        int *view_of = (int *)(host + view_of_at);
        for (int k = v_lo; k < v_hi; k++)
            for (size_t i = sample_start[k]; i < sample_start[k + 1]; i++)
                view_of[i - fd->first] = k;
        fd->views = (kr_fit_view *)(dev + table);
        fd->samples = (const float *)(dev + samples_at);
        fd->view_of = (int *)(dev + view_of_at);
        fd->poses = (kr_pose *)(dev + poses_at);
        fd->inv = (kr_pose *)(dev + inv_at);
        fd->best = (double *)(dev + best_at);
        s = KR_CUDA_STATUS(cudaMemcpy(fd->block, host, upload_bytes, cudaMemcpyHostToDevice));
    }
    free(host);
    free(at);
    return s;
}

kr_status kr_refine_fit_cuda_create(kr_refine_fit_cuda **out, kr_gpu_context *base,
                                    const int *devices, int n_devices, const kr_fit_view *views,
                                    int n_views, const float *samples, const size_t *sample_start)
{
    if (!out || !views || n_views < 1 || (!base && n_devices < 1) || n_devices < 0 ||
        n_devices > KR_REFINE_FIT_MAX_DEVICES)
        return kr_error(KR_ERR_INVALID_ARG, "refine measure: %d views on %d devices", n_views,
                        n_devices);
    kr_refine_fit_cuda *f = (kr_refine_fit_cuda *)calloc(1, sizeof *f);
    if (!f) return kr_error(KR_ERR_NOMEM, "refine measure: no memory");
    f->n_views = n_views;
    f->n_dev = n_devices > 0 ? n_devices : 1;
    kr_status s = KR_OK;
    for (int d = 0; d < f->n_dev && s == KR_OK; d++) {
        s = n_devices > 0 ? kr_gpu_context_create(&f->dev[d].ctx, devices[d])
                          : kr_gpu_context_twin(base, &f->dev[d].ctx);
        /* Whole views per device, about as many of them each. */
        int v_lo = (int)((long)n_views * d / f->n_dev),
            v_hi = (int)((long)n_views * (d + 1) / f->n_dev);
        if (s == KR_OK) s = upload(&f->dev[d], views, n_views, samples, sample_start, v_lo, v_hi);
    }
    if (s != KR_OK) {
        kr_refine_fit_cuda_destroy(&f);
        return s;
    }
    *out = f;
    return KR_OK;
}

void kr_refine_fit_cuda_destroy(kr_refine_fit_cuda **pf)
{
    if (!pf || !*pf) return;
    kr_refine_fit_cuda *f = *pf;
    for (int d = 0; d < f->n_dev; d++) {
        fit_device *fd = &f->dev[d];
        if (fd->ctx && fd->block && kr_gpu_enter(fd->ctx) == KR_OK) {
            (void)cudaStreamSynchronize(fd->ctx->stream);
            (void)cudaFree(fd->block);
        }
        kr_gpu_context_destroy(&fd->ctx);
    }
    free(f);
    *pf = NULL;
}

kr_status kr_refine_fit_cuda_eval(kr_refine_fit_cuda *f, const kr_pose *poses, const kr_pose *inv,
                                  double cap2, int prune, double *best)
{
    kr_status s = KR_OK;
    size_t pose_bytes = sizeof(kr_pose) * (size_t)f->n_views;
    for (int d = 0; d < f->n_dev && s == KR_OK; d++) {
        fit_device *fd = &f->dev[d];
        if (fd->count == 0) continue;
        cudaStream_t st = fd->ctx->stream;
        if ((s = kr_gpu_enter(fd->ctx)) != KR_OK) break;
        s = KR_CUDA_STATUS(
            cudaMemcpyAsync(fd->poses, poses, pose_bytes, cudaMemcpyHostToDevice, st));
        if (s == KR_OK)
            s = KR_CUDA_STATUS(
                cudaMemcpyAsync(fd->inv, inv, pose_bytes, cudaMemcpyHostToDevice, st));
        if (s != KR_OK) break;
        unsigned blocks = (unsigned)((fd->count + FIT_THREADS - 1) / FIT_THREADS);
        fit_samples<<<blocks, FIT_THREADS, 0, st>>>(fd->views, f->n_views, fd->poses, fd->inv,
                                                    fd->samples, fd->view_of, fd->count, cap2,
                                                    prune, fd->best);
        s = KR_CUDA_STATUS(cudaGetLastError());
        if (s == KR_OK)
            s = KR_CUDA_STATUS(cudaMemcpyAsync(best + fd->first, fd->best,
                                               sizeof(double) * fd->count, cudaMemcpyDeviceToHost,
                                               st));
    }
    /* Every device waited for, also after a failure: no copy may still be
     * writing into best when the caller frees it. */
    for (int d = 0; d < f->n_dev; d++) {
        fit_device *fd = &f->dev[d];
        if (fd->count == 0 || kr_gpu_enter(fd->ctx) != KR_OK) continue;
        kr_status w = KR_CUDA_STATUS(cudaStreamSynchronize(fd->ctx->stream));
        if (s == KR_OK) s = w;
    }
    return s;
}
