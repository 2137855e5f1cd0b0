/* kr_preprocess: validates a frame, lays out the pyramid's buffers (once per
 * shape) and dispatches to the device's engine — OpenMP here
 * (preprocess_cpu.c) or CUDA (pipeline/preprocess/preprocess_cuda.cu). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/preprocess/preprocess_cuda.h"
#include "kinreg/preprocess.h"
#include "pipeline/preprocess/preprocess_cpu.h"

void kr_preprocess_config_default(kr_preprocess_config *cfg)
{
    if (!cfg) return;
    cfg->levels = 3;
    cfg->min_depth = 0.3f;
    cfg->max_depth = 6.0f;
    cfg->discontinuity = 0.04f;
    cfg->depth_step = (float)-KR_DISPARITY_B;
}

/* Level l+1 pixel u' covers level-l pixels 2u' and 2u'+1, whose centre is
 * 2u'+0.5: u = 2u' + 0.5 ⇒ (u − cx)/fx = (u' − cx')/fx' with fx' = fx/2 and
 * cx' = (cx + 0.5)/2 − 0.5. Applied l times: cx/2^l with the half-pixel shift. */
kr_intrinsics kr_intrinsics_level(const kr_intrinsics *k, int level)
{
    kr_intrinsics out = {0};
    if (!k || level < 0 || level >= 31) return out;
    out = *k; /* distortion acts on normalised coordinates: the same at every level */
    float s = 1.0f / (float)(1 << level);
    out.width = k->width >> level;
    out.height = k->height >> level;
    out.fx = k->fx * s;
    out.fy = k->fy * s;
    out.cx = (k->cx + 0.5f) * s - 0.5f;
    out.cy = (k->cy + 0.5f) * s - 0.5f;
    return out;
}

static kr_status validate(const kr_preprocess_config *cfg, const kr_frame *frame,
                          const kr_intrinsics *k)
{
    if (cfg->levels < 1 || cfg->levels > KR_MAX_LEVELS)
        return kr_error(KR_ERR_INVALID_ARG, "preprocess: levels must be 1..%d, got %d",
                        KR_MAX_LEVELS, cfg->levels);
    if (!(cfg->min_depth >= 0.0f) || !(cfg->max_depth > cfg->min_depth) ||
        !isfinite(cfg->max_depth))
        return kr_error(KR_ERR_INVALID_ARG,
                        "preprocess: need 0 <= min_depth < max_depth, got %g and %g",
                        (double)cfg->min_depth, (double)cfg->max_depth);
    if (!(cfg->discontinuity > 0.0f) || !isfinite(cfg->discontinuity))
        return kr_error(KR_ERR_INVALID_ARG, "preprocess: discontinuity must be > 0, got %g",
                        (double)cfg->discontinuity);
    if (!(cfg->depth_step >= 0.0f) || !isfinite(cfg->depth_step))
        return kr_error(KR_ERR_INVALID_ARG, "preprocess: depth_step must be >= 0, got %g",
                        (double)cfg->depth_step);
    if (!frame->raw)
        return kr_error(KR_ERR_INVALID_ARG, "preprocess: frame %llu has no samples",
                        (unsigned long long)frame->index);
    if (frame->encoding != KR_DEPTH_SCALED && frame->encoding != KR_DEPTH_DISPARITY11)
        return kr_error(KR_ERR_INVALID_ARG, "preprocess: frame %llu has unknown depth encoding %d",
                        (unsigned long long)frame->index, (int)frame->encoding);
    if (frame->encoding == KR_DEPTH_SCALED &&
        (!(frame->depth_scale > 0.0f) || !isfinite(frame->depth_scale)))
        return kr_error(KR_ERR_INVALID_ARG,
                        "preprocess: frame %llu has depth scale %g (units per metre, must be > 0)",
                        (unsigned long long)frame->index, (double)frame->depth_scale);
    if (!(k->fx > 0.0f) || !(k->fy > 0.0f) || !isfinite(k->fx) || !isfinite(k->fy) ||
        !isfinite(k->cx) || !isfinite(k->cy))
        return kr_error(KR_ERR_INVALID_ARG,
                        "preprocess: intrinsics need finite fx, fy > 0 (got fx %g fy %g)",
                        (double)k->fx, (double)k->fy);
    if (frame->width != k->width || frame->height != k->height)
        return kr_error(
            KR_ERR_SIZE, "preprocess: frame %llu is %dx%d but the intrinsics are for %dx%d",
            (unsigned long long)frame->index, frame->width, frame->height, k->width, k->height);
    int shift = cfg->levels - 1;
    if (frame->width < 1 || frame->height < 1 || (frame->width >> shift) < 1 ||
        (frame->height >> shift) < 1)
        return kr_error(KR_ERR_SIZE, "preprocess: a %dx%d frame is too small for %d pyramid levels",
                        frame->width, frame->height, cfg->levels);
    return KR_OK;
}

/* Sizes and intrinsics of every level, and the bytes of the one block that
 * holds all their points and normals. */
static size_t plan_levels(const kr_preprocess_config *cfg, const kr_intrinsics *k, kr_pyramid *plan)
{
    size_t floats = 0;
    memset(plan, 0, sizeof *plan);
    plan->levels = cfg->levels;
    for (int l = 0; l < cfg->levels; l++) {
        kr_cloud *c = &plan->level[l];
        c->intrinsics = kr_intrinsics_level(k, l);
        c->width = c->intrinsics.width;
        c->height = c->intrinsics.height;
        floats += 6 * (size_t)c->width * (size_t)c->height;
    }
    return floats * sizeof(float);
}

/* Points then normals of each level, in level order, inside one block: the
 * CUDA engine mirrors this layout on the device and downloads it in one copy. */
static void point_into(kr_pyramid *plan, void *storage)
{
    float *p = storage;
    for (int l = 0; l < plan->levels; l++) {
        kr_cloud *c = &plan->level[l];
        size_t n = 3 * (size_t)c->width * (size_t)c->height;
        c->points = p;
        c->normals = p + n;
        p += 2 * n;
    }
}

static bool same_shape(const kr_pyramid *a, const kr_pyramid *b)
{
    if (a->levels != b->levels) return false;
    for (int l = 0; l < a->levels; l++)
        if (a->level[l].width != b->level[l].width || a->level[l].height != b->level[l].height)
            return false;
    return true;
}

/* Bytes of the ray table of a planned pyramid: 2 floats per pixel per level. */
static size_t ray_bytes(const kr_pyramid *plan)
{
    size_t floats = 0;
    for (int l = 0; l < plan->levels; l++)
        floats += 2 * (size_t)plan->level[l].width * (size_t)plan->level[l].height;
    return floats * sizeof(float);
}

/* Whether `pyr` holds a ray table for these level-0 intrinsics and levels.
 * Compared bit for bit (kr_intrinsics is ints and floats, no padding): equal
 * bits give equal rays. */
static bool rays_match(const kr_pyramid *pyr, const kr_intrinsics *k, int levels)
{
    return pyr->rays && pyr->rays_levels == levels &&
           memcmp(&pyr->rays_intrinsics, k, sizeof *k) == 0;
}

/* Every level's undistorted rays, with the same kr_preprocess_pixel_ray that the
 * inline path (kr_preprocess_backproject) calls: the table holds its exact bits. */
static void build_rays(const kr_pyramid *plan, float *rays, int threads)
{
    for (int l = 0; l < plan->levels; l++) {
        const kr_cloud *c = &plan->level[l];
        const int w = c->width, h = c->height;
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int v = 0; v < h; v++)
            for (int u = 0; u < w; u++)
                kr_preprocess_pixel_ray(u, v, &c->intrinsics,
                                        rays + 2 * ((size_t)v * (size_t)w + (size_t)u));
        rays += 2 * (size_t)w * (size_t)h;
    }
}

static void release_storage(void *storage, bool pinned)
{
    if (pinned)
        kr_gpu_host_free(storage);
    else
        free(storage);
}

/* The settings as the per-pixel kernels take them, computed here once for
 * both engines so they pass the kernels the same bits. */
static kr_preprocess_params kernel_params(const kr_preprocess_config *cfg, const kr_frame *frame)
{
    kr_preprocess_params pp;
    pp.depth.encoding = (int)frame->encoding;
    pp.depth.scale = frame->depth_scale;
    pp.depth.min_depth = cfg->min_depth;
    pp.depth.max_depth = cfg->max_depth;
    pp.discontinuity = cfg->discontinuity;
    pp.downsample_tol = KR_DOWNSAMPLE_TOLERANCE * cfg->discontinuity;
    pp.depth_step = cfg->depth_step;
    return pp;
}

kr_status kr_preprocess(kr_device *dev, const kr_preprocess_config *cfg, const kr_frame *frame,
                        const kr_intrinsics *intrinsics, kr_pyramid *out)
{
    if (!dev || !frame || !intrinsics || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_preprocess: NULL argument");
    kr_preprocess_config defaults;
    if (!cfg) {
        kr_preprocess_config_default(&defaults);
        cfg = &defaults;
    }
    kr_status s = validate(cfg, frame, intrinsics);
    if (s != KR_OK) return s;

    kr_pyramid plan;
    size_t bytes = plan_levels(cfg, intrinsics, &plan);
    kr_gpu_context *gpu = kr_device_backend(dev) == KR_BACKEND_CUDA ? kr_device_gpu(dev) : NULL;

    /* Reuse the caller's block while the shape repeats (no per-frame
     * allocation); the CUDA engine also wants it page-locked. Otherwise fill a
     * new block and swap it in only on success, so a failure leaves `out` as
     * it was. */
    bool reuse = out->storage && out->storage_bytes == bytes && same_shape(out, &plan) &&
                 (!gpu || out->storage_pinned);
    void *storage = out->storage;
    bool pinned = out->storage_pinned;
    if (!reuse) {
        pinned = false;
        storage = NULL;
        if (gpu) {
            if (kr_gpu_host_alloc(&storage, bytes) == KR_OK) pinned = true;
            /* Pageable memory still works with the CUDA engine, only slower. */
            else
                kr_log(KR_LOG_WARN,
                       "preprocess: no page-locked memory (%s); downloads will be slower",
                       kr_last_error());
        }
        if (!storage) storage = malloc(bytes);
        if (!storage)
            return kr_error(KR_ERR_NOMEM, "preprocess: cannot allocate %zu bytes for the pyramid",
                            bytes);
    }
    point_into(&plan, storage);
    plan.storage = storage;
    plan.storage_bytes = bytes;
    plan.storage_pinned = pinned;

    /* The CPU engine back-projects a distorted lens through a ray table
     * (kr_pyramid.rays), built on the first frame and whenever the
     * intrinsics or levels change; the pinhole model needs none, and the
     * CUDA engine undistorts inline (cheap there). A table that is not
     * wanted goes away on success, so the CPU engine uses one exactly when
     * it is present. A new block only when the size changes. */
    const bool want_rays = !gpu && kr_preprocess_has_distortion(intrinsics);
    const bool build = want_rays && !rays_match(out, intrinsics, cfg->levels);
    const size_t rbytes = want_rays ? ray_bytes(&plan) : 0;
    float *rays = want_rays ? out->rays : NULL;
    if (build && (!out->rays || out->rays_bytes != rbytes)) {
        rays = malloc(rbytes);
        if (!rays) {
            if (!reuse) release_storage(storage, pinned);
            return kr_error(KR_ERR_NOMEM, "preprocess: cannot allocate %zu bytes for the ray table",
                            rbytes);
        }
    }
    plan.rays = rays;
    plan.rays_bytes = rbytes;
    plan.rays_levels = want_rays ? cfg->levels : 0;
    if (want_rays) plan.rays_intrinsics = *intrinsics;

    const kr_preprocess_params pp = kernel_params(cfg, frame);
    if (gpu) {
        s = kr_preprocess_cuda(gpu, &pp, frame, &plan);
    } else {
        /* Nothing fails from here on: a table rebuilt in place is safe. */
        if (build) build_rays(&plan, rays, kr_device_threads(dev));
        kr_preprocess_cpu(&pp, frame, kr_device_threads(dev), &plan);
    }
    if (s != KR_OK) {
        if (!reuse) release_storage(storage, pinned);
        return s; /* the GPU path allocated no table */
    }
    if (!reuse && out->storage) release_storage(out->storage, out->storage_pinned);
    if (out->rays && out->rays != rays) free(out->rays);
    *out = plan;
    return KR_OK;
}

void kr_pyramid_free(kr_pyramid *pyr)
{
    if (!pyr) return;
    if (pyr->storage) release_storage(pyr->storage, pyr->storage_pinned);
    free(pyr->rays);
    memset(pyr, 0, sizeof *pyr);
}

void kr_preprocess_transfer_times(const kr_device *dev, double *upload_ms, double *download_ms)
{
    kr_preprocess_cuda_transfer_times(dev ? kr_device_gpu(dev) : NULL, upload_ms, download_ms);
}
