/* The CUDA engine of preprocessing: the twin of pipeline/preprocess/preprocess_cpu.c.
 * Kernels only map threads to pixels and call the shared per-pixel math of
 * pipeline/preprocess/preprocess_kernels.h, so both engines compute the same thing.
 *
 * One frame: raw samples → page-locked staging → device; level 0 points; each
 * coarser level from the finer one; normals and counts per level; counts
 * down, check for errors, then every level's points and normals down in one
 * copy (the device block mirrors kr_pyramid.storage). */
#include <string.h>

#include "gpu/context.cuh"
#include "pipeline/preprocess/preprocess_cuda.h"

namespace
{

const int kBlockX = 32, kBlockY = 8;

dim3 grid_for(int w, int h)
{
    return dim3((unsigned)((w + kBlockX - 1) / kBlockX), (unsigned)((h + kBlockY - 1) / kBlockY));
}

__global__ void level0_kernel(const uint16_t *__restrict__ raw, int w, int h,
                              kr_preprocess_depth_params dp, kr_intrinsics k,
                              float *__restrict__ points)
{
    int u = blockIdx.x * blockDim.x + threadIdx.x, v = blockIdx.y * blockDim.y + threadIdx.y;
    if (u < w && v < h) kr_preprocess_level0_pixel(raw, w, u, v, &dp, &k, points);
}

__global__ void downsample_kernel(const float *__restrict__ fine, int fine_w, int w, int h,
                                  float tol, kr_intrinsics k, float *__restrict__ points)
{
    int u = blockIdx.x * blockDim.x + threadIdx.x, v = blockIdx.y * blockDim.y + threadIdx.y;
    if (u < w && v < h) kr_preprocess_downsample_pixel(fine, fine_w, w, u, v, tol, &k, points);
}

/* counts[0] += valid points, counts[1] += valid normals: one atomic per
 * block after a block-wide count, not one per pixel. */
__global__ void normals_kernel(const float *__restrict__ points, int w, int h, float disc,
                               float reach, float *__restrict__ normals, int *counts)
{
    int u = blockIdx.x * blockDim.x + threadIdx.x, v = blockIdx.y * blockDim.y + threadIdx.y;
    int has_point = 0, has_normal = 0;
    if (u < w && v < h) {
        has_normal = kr_preprocess_normal_pixel(points, w, h, u, v, disc, reach, normals);
        has_point = points[3 * ((size_t)v * (size_t)w + (size_t)u) + 2] > 0.0f;
    }
    /* Every thread of the block reaches these, in-image or not. */
    int block_points = __syncthreads_count(has_point);
    int block_normals = __syncthreads_count(has_normal);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        if (block_points) atomicAdd(&counts[0], block_points);
        if (block_normals) atomicAdd(&counts[1], block_normals);
    }
}

} // namespace

kr_status kr_preprocess_cuda(kr_gpu_context *ctx, const kr_preprocess_params *pp,
                             const kr_frame *frame, kr_pyramid *pyr)
{
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    const int levels = pyr->levels;
    const kr_cloud *c0 = &pyr->level[0];
    const size_t raw_bytes = (size_t)c0->width * (size_t)c0->height * sizeof(uint16_t);
    const size_t count_bytes = 2 * (size_t)levels * sizeof(int);

    void *stage_raw, *stage_counts, *d_raw, *d_block, *d_counts;
    if ((s = kr_gpu_staging(ctx, KR_GPU_STAGING_RAW, raw_bytes, &stage_raw)) != KR_OK) return s;
    if ((s = kr_gpu_staging(ctx, KR_GPU_STAGING_COUNTS, count_bytes, &stage_counts)) != KR_OK)
        return s;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_RAW, raw_bytes, &d_raw)) != KR_OK) return s;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_PYRAMID, pyr->storage_bytes, &d_block)) != KR_OK)
        return s;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_COUNTS, count_bytes, &d_counts)) != KR_OK) return s;

    /* Device pointers of each level: same offsets as in the host block. */
    float *d_points[KR_MAX_LEVELS], *d_normals[KR_MAX_LEVELS];
    const float *host_base = (const float *)pyr->storage;
    for (int l = 0; l < levels; l++) {
        d_points[l] = (float *)d_block + (pyr->level[l].points - host_base);
        d_normals[l] = (float *)d_block + (pyr->level[l].normals - host_base);
    }
    int *counts = (int *)d_counts;

    /* The frame's own buffer is pageable: copy it into staging so the upload
     * is a real asynchronous DMA. Staging is free again: the previous call
     * ended with the stream synchronised. */
    cudaEvent_t *ev = ctx->transfer_events;
    for (int i = 0; i < 4; i++)
        if (!ev[i]) KR_CUDA_CHECK(cudaEventCreate(&ev[i]));
    memcpy(stage_raw, frame->raw, raw_bytes);
    KR_CUDA_CHECK(cudaEventRecord(ev[0], ctx->stream));
    KR_CUDA_CHECK(
        cudaMemcpyAsync(d_raw, stage_raw, raw_bytes, cudaMemcpyHostToDevice, ctx->stream));
    KR_CUDA_CHECK(cudaEventRecord(ev[1], ctx->stream));
    KR_CUDA_CHECK(cudaMemsetAsync(d_counts, 0, count_bytes, ctx->stream));

    const dim3 block(kBlockX, kBlockY);
    const kr_preprocess_depth_params dp = pp->depth;
    level0_kernel<<<grid_for(c0->width, c0->height), block, 0, ctx->stream>>>(
        (const uint16_t *)d_raw, c0->width, c0->height, dp, c0->intrinsics, d_points[0]);
    KR_CUDA_CHECK_LAUNCH(level0_kernel);

    const float tol = pp->downsample_tol;
    for (int l = 1; l < levels; l++) {
        const kr_cloud *f = &pyr->level[l - 1], *c = &pyr->level[l];
        downsample_kernel<<<grid_for(c->width, c->height), block, 0, ctx->stream>>>(
            d_points[l - 1], f->width, c->width, c->height, tol, c->intrinsics, d_points[l]);
        KR_CUDA_CHECK_LAUNCH(downsample_kernel);
    }
    for (int l = 0; l < levels; l++) {
        const kr_cloud *c = &pyr->level[l];
        normals_kernel<<<grid_for(c->width, c->height), block, 0, ctx->stream>>>(
            d_points[l], c->width, c->height, pp->discontinuity,
            kr_preprocess_level_normal_reach(pp, &c->intrinsics), d_normals[l], counts + 2 * l);
        KR_CUDA_CHECK_LAUNCH(normals_kernel);
    }

    /* Kernel faults surface at this synchronisation, before anything is
     * written into the caller's pyramid. */
    KR_CUDA_CHECK(
        cudaMemcpyAsync(stage_counts, d_counts, count_bytes, cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    KR_CUDA_CHECK(cudaEventRecord(ev[2], ctx->stream));
    KR_CUDA_CHECK(cudaMemcpyAsync(pyr->storage, d_block, pyr->storage_bytes, cudaMemcpyDeviceToHost,
                                  ctx->stream));
    KR_CUDA_CHECK(cudaEventRecord(ev[3], ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    KR_CUDA_CHECK(cudaEventElapsedTime(&ctx->upload_ms, ev[0], ev[1]));
    KR_CUDA_CHECK(cudaEventElapsedTime(&ctx->download_ms, ev[2], ev[3]));

    const int *h_counts = (const int *)stage_counts;
    for (int l = 0; l < levels; l++) {
        pyr->level[l].valid_points = h_counts[2 * l];
        pyr->level[l].valid_normals = h_counts[2 * l + 1];
    }
    pyr->device_stamp = ++ctx->pyramid_stamp;
    return KR_OK;
}

void kr_preprocess_cuda_transfer_times(const kr_gpu_context *ctx, double *upload_ms,
                                       double *download_ms)
{
    if (upload_ms) *upload_ms = ctx ? ctx->upload_ms : 0;
    if (download_ms) *download_ms = ctx ? ctx->download_ms : 0;
}
