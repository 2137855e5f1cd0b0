/* The synthetic source: the seeded scene rendered along the seeded camera
 * path. All poses are computed at open, so the ground truth is complete
 * before the first frame; each frame's noise depends only on (seed, index),
 * so the same seed gives the same bytes whatever the thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "capture/source_impl.h"
#include "capture/synthetic_loss.h"
#include "capture/synthetic_path.h"
#include "capture/synthetic_render.h"
#include "capture/synthetic_rng.h"
#include "capture/synthetic_scene.h"

#define SYNTH_MAX_FRAMES 10000000.0

typedef struct {
    kr_synth_scene scene;
    kr_synth_renderer renderer;
    uint64_t seed;
    double fps;
    unsigned frames, next;
    bool *covered; /* per frame: the sensor is covered (no valid depth) */
    bool colour;   /* render the colour stream too (kr_source_config.colour) */
} synth_source;

static kr_status synth_read(kr_source *src, kr_frame *frame)
{
    synth_source *s = src->impl;
    if (s->next >= s->frames) return KR_END;
    const kr_intrinsics *K = &src->intrinsics;
    uint16_t *raw = malloc((size_t)K->width * K->height * sizeof *raw);
    if (!raw)
        return kr_error(KR_ERR_NOMEM, "synthetic: cannot allocate a %dx%d frame", K->width,
                        K->height);
    uint8_t *rgb = NULL;
    if (s->colour && !(rgb = calloc((size_t)K->width * K->height, 3))) {
        free(raw);
        return kr_error(KR_ERR_NOMEM, "synthetic: cannot allocate a %dx%d colour frame", K->width,
                        K->height);
    }
    unsigned i = s->next++;
    if (s->covered[i]) {
        for (size_t k = 0; k < (size_t)K->width * K->height; k++)
            raw[k] = KR_DISPARITY_INVALID;
    } else {
        kr_synth_render(&s->renderer, &s->scene, &src->groundtruth.poses[i], K,
                        kr_rng_mix(s->seed, i, 0x5e1502), raw, rgb);
    }
    frame->rgb = rgb;
    frame->timestamp = src->groundtruth.stamps[i];
    frame->width = K->width;
    frame->height = K->height;
    frame->encoding = KR_DEPTH_DISPARITY11;
    frame->depth_scale = 0; /* unused by the disparity encoding */
    frame->raw = raw;
    return KR_OK;
}

static bool synth_skip(kr_source *src)
{
    synth_source *s = src->impl;
    if (s->next >= s->frames) return false;
    s->next++;
    return true;
}

static void synth_close(kr_source *src)
{
    synth_source *s = src->impl;
    if (s) free(s->covered);
    free(src->impl);
    src->impl = NULL;
}

static const kr_source_ops synth_ops = {
    .name = "synthetic", .read = synth_read, .close = synth_close, .skip = synth_skip};

kr_status kr_synthetic_open(kr_source *src, const kr_source_config *cfg, const kr_intrinsics *want)
{
    if (!(cfg->fps > 0) || !isfinite(cfg->fps) || !(cfg->duration_s > 0) ||
        !isfinite(cfg->duration_s))
        return kr_error(KR_ERR_INVALID_ARG,
                        "synthetic: duration %g s at %g fps is invalid: both must be positive "
                        "(defaults 30 s, 30 fps)",
                        cfg->duration_s, cfg->fps);
    double n = floor(cfg->duration_s * cfg->fps + 0.5);
    if (n < 1 || n > SYNTH_MAX_FRAMES)
        return kr_error(KR_ERR_INVALID_ARG,
                        "synthetic: duration %g s at %g fps gives %.0f frames: use 1 to %.0f",
                        cfg->duration_s, cfg->fps, n, SYNTH_MAX_FRAMES);
    if (cfg->render_threads < 0 || cfg->render_threads > 2)
        return kr_error(KR_ERR_INVALID_ARG, "synthetic: render_threads %d: use 1 or 2 (0 = 1)",
                        cfg->render_threads);
    synth_source *s = calloc(1, sizeof *s);
    if (!s) return kr_error(KR_ERR_NOMEM, "synthetic: out of memory");
    s->seed = cfg->seed;
    s->fps = cfg->fps;
    s->colour = cfg->colour;
    s->frames = (unsigned)n;
    /* Only the frames that will be delivered need a pose. */
    double stride = cfg->stride > 1 ? cfg->stride : 1;
    if (cfg->max_frames > 0 && cfg->max_frames * stride < s->frames)
        s->frames = (unsigned)(cfg->max_frames * stride);
    kr_synth_scene_build(s->seed, &s->scene);
    kr_synth_renderer_init(&s->renderer, s->seed);
    /* Rendering is the synthetic replay's limit with a fast backend (7-8 ms
     * a frame on one thread); a second thread costs the tracker nothing
     * where there are cores to spare. Frames are identical either way. */
    int threads = cfg->render_threads;
    if (threads == 0) threads = sysconf(_SC_NPROCESSORS_ONLN) >= 8 ? 2 : 1;
    s->renderer.threads = threads > 1 ? 2 : 1;

    kr_synth_path path;
    kr_synth_path_init(&path, s->seed, s->scene.target);
    kr_trajectory gt = {0};
    kr_pose *poses = malloc((size_t)s->frames * sizeof *poses);
    s->covered = calloc(s->frames, sizeof *s->covered);
    kr_status st =
        poses && s->covered
            ? KR_OK
            : kr_error(KR_ERR_NOMEM, "synthetic: out of memory for %u frames", s->frames);
    for (unsigned i = 0; st == KR_OK && i < s->frames; i++)
        poses[i] = kr_synth_path_pose(&path, i / s->fps);
    if (st == KR_OK) st = kr_synth_loss_apply(cfg, s->seed, s->frames, poses, s->covered);
    for (unsigned i = 0; st == KR_OK && i < s->frames; i++)
        st = kr_trajectory_push(&gt, i / s->fps, &poses[i]);
    free(poses);
    if (st != KR_OK) {
        kr_trajectory_free(&gt);
        free(s->covered);
        free(s);
        return st;
    }
    if (want)
        src->intrinsics = *want;
    else {
        kr_intrinsics_preset("default", &src->intrinsics);
        snprintf(src->intrinsics_origin, sizeof src->intrinsics_origin,
                 "preset default, the synthetic sensor");
    }
    snprintf(src->depth_origin, sizeof src->depth_origin,
             "raw 11-bit Kinect v1 disparity (simulated)");
    src->groundtruth = gt;
    src->has_groundtruth = true;
    src->ops = &synth_ops;
    src->impl = s;
    src->length = s->frames;
    int len = snprintf(src->description, sizeof src->description,
                       "synthetic:%u (%u frames at %g fps, %dx%d)", cfg->seed, s->frames, s->fps,
                       src->intrinsics.width, src->intrinsics.height);
    if ((cfg->jumps || cfg->covered) && len > 0 && (size_t)len < sizeof src->description)
        snprintf(src->description + len, sizeof src->description - (size_t)len,
                 " with %d jumps of up to %g deg and %g m, %d covered stretches of %d frames",
                 cfg->jumps, cfg->jump_angle_deg, cfg->jump_distance_m, cfg->covered,
                 cfg->covered_frames);
    return KR_OK;
}
