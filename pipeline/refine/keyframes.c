/* Keyframes for refinement (pipeline/refine/keyframes.h). */
#include "pipeline/refine/keyframes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void kr_keyframes_config_default(kr_keyframes_config *cfg)
{
    if (!cfg) return;
    cfg->min_translation = 0.10;
    cfg->min_angle = 10 * M_PI / 180;
    cfg->max_points = 20000;
}

void kr_keyframes_init(kr_keyframes *kf, const kr_keyframes_config *cfg)
{
    memset(kf, 0, sizeof *kf);
    if (cfg)
        kf->cfg = *cfg;
    else
        kr_keyframes_config_default(&kf->cfg);
}

void kr_keyframes_free(kr_keyframes *kf)
{
    if (!kf) return;
    for (int i = 0; i < kf->n; i++)
        free(kf->items[i].xyz);
    free(kf->items);
    memset(kf, 0, sizeof *kf);
}

bool kr_keyframes_due(const kr_keyframes *kf, const kr_pose *pose, bool tracking_good)
{
    if (!tracking_good) return false;
    if (kf->n == 0) return true;
    kr_pose last = kr_pose_inv(&kf->items[kf->n - 1].pose), rel = kr_pose_mul(&last, pose);
    return kr_pose_translation_norm(&rel) >= kf->cfg.min_translation ||
           kr_pose_angle(&rel) >= kf->cfg.min_angle;
}

kr_status kr_keyframes_add(kr_keyframes *kf, uint64_t frame, const kr_pose *pose, const float *xyz,
                           size_t n)
{
    if (!kf || !pose || (!xyz && n))
        return kr_error(KR_ERR_INVALID_ARG, "keyframes: needs a pose and points");
    size_t valid = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(xyz[3 * i]) && isfinite(xyz[3 * i + 1]) && isfinite(xyz[3 * i + 2]) &&
            xyz[3 * i + 2] > 0)
            valid++;
    if (!valid)
        return kr_error(KR_ERR_EMPTY, "keyframes: frame %llu has no valid point",
                        (unsigned long long)frame);
    size_t keep = kf->cfg.max_points && valid > kf->cfg.max_points ? kf->cfg.max_points : valid;
    if (kf->n == kf->capacity) {
        int cap = kf->capacity ? 2 * kf->capacity : 16;
        kr_keyframe *grown = realloc(kf->items, sizeof *grown * (size_t)cap);
        if (!grown) return kr_error(KR_ERR_NOMEM, "keyframes: no memory for %d keyframes", cap);
        kf->items = grown;
        kf->capacity = cap;
    }
    float *pts = malloc(sizeof *pts * 3 * keep);
    if (!pts) return kr_error(KR_ERR_NOMEM, "keyframes: no memory for %zu points", keep);
    /* Even stride over the valid points: the k-th kept one is valid point ⌊k·valid/keep⌋. */
    size_t seen = 0, kept = 0;
    for (size_t i = 0; i < n && kept < keep; i++) {
        if (!(isfinite(xyz[3 * i]) && isfinite(xyz[3 * i + 1]) && isfinite(xyz[3 * i + 2]) &&
              xyz[3 * i + 2] > 0))
            continue;
        if (seen++ == kept * valid / keep) memcpy(pts + 3 * kept++, xyz + 3 * i, sizeof(float) * 3);
    }
    kf->items[kf->n++] = (kr_keyframe){.frame = frame, .pose = *pose, .xyz = pts, .n = kept};
    return KR_OK;
}

kr_status kr_keyframes_refine(kr_keyframes *kf, int first, int count, const kr_refine_config *cfg,
                              kr_device *dev, kr_refine_result *result)
{
    if (!kf || !cfg || first < 0 || count < 2 || first + count > kf->n)
        return kr_error(KR_ERR_INVALID_ARG,
                        "keyframes: window %d+%d outside the %d keyframes (needs 2 or more)", first,
                        count, kf ? kf->n : 0);
    kr_refine_view *views = malloc(sizeof *views * (size_t)count);
    kr_pose *poses = malloc(sizeof *poses * (size_t)count);
    kr_status s =
        views && poses ? KR_OK : kr_error(KR_ERR_NOMEM, "keyframes: no memory for %d views", count);
    for (int k = 0; k < count && s == KR_OK; k++) {
        views[k] = (kr_refine_view){kf->items[first + k].xyz, kf->items[first + k].n};
        poses[k] = kf->items[first + k].pose;
    }
    if (s == KR_OK) {
        kr_refine_config c = *cfg;
        c.gauge = 0;
        s = kr_refine(&c, dev, views, count, poses, result);
    }
    if (s == KR_OK)
        for (int k = 0; k < count; k++)
            kf->items[first + k].pose = poses[k];
    free(views);
    free(poses);
    return s;
}
