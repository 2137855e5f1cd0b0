/* Free-space check: a z-buffer of the model's points at the level's
 * resolution, compared pixel by pixel with the frame's depth. */
#include "pipeline/recover/recover_verify.h"

#include "core/kdtree_layout.h"

#include <math.h>
#include <stdlib.h>

kr_status kr_recover_free_space(const kr_kdtree *model, const kr_cloud *cloud, const kr_pose *pose,
                                size_t max_points, double margin_m, double depth_step,
                                kr_free_space *out)
{
    if (!model || !cloud || !pose || !out || !cloud->points)
        return kr_error(KR_ERR_INVALID_ARG, "kr_recover_free_space: NULL argument");
    const int w = cloud->width, h = cloud->height;
    if (w < 2 || h < 2)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_recover_free_space: a %dx%d cloud is not an organised level", w, h);
    float *zbuf = malloc((size_t)w * h * sizeof *zbuf);
    if (!zbuf)
        return kr_error(KR_ERR_NOMEM, "free-space check: out of memory for a %dx%d z-buffer", w, h);
    for (size_t i = 0; i < (size_t)w * h; i++)
        zbuf[i] = INFINITY;
    const kr_intrinsics *K = &cloud->intrinsics;
    kr_pose inv = kr_pose_inv(pose);
    size_t n = kr_kdtree_size(model);
    size_t step = max_points > 0 && n > max_points ? (n + max_points - 1) / max_points : 1;
    for (size_t i = 0; i < n; i += step) {
        float p[3];
        kr_kdtree_prefetch(model, i + KR_KDTREE_PREFETCH_AHEAD * step);
        kr_kdtree_point(model, i, p, NULL);
        double pw[3] = {p[0], p[1], p[2]}, q[3];
        kr_pose_apply(&inv, pw, q);
        if (!(q[2] > 0.1)) continue;
        /* The level's pinhole (the frame's points are already undistorted). */
        double u = K->fx * q[0] / q[2] + K->cx, v = K->fy * q[1] / q[2] + K->cy;
        if (!(u >= 0 && v >= 0 && u < w && v < h)) continue;
        size_t k = (size_t)v * (size_t)w + (size_t)u;
        if (q[2] < zbuf[k]) zbuf[k] = (float)q[2];
    }
    kr_free_space r = {0, 0, 0};
    for (size_t k = 0; k < (size_t)w * h; k++) {
        float zm = zbuf[k], zf = cloud->points[3 * k + 2];
        if (!isfinite(zm) || !(zf > 0)) continue;
        double margin = margin_m + 3 * depth_step * zf * zf;
        r.compared++;
        if (zf > zm + margin)
            r.violations++;
        else if (zf > zm - margin)
            r.agree++;
    }
    free(zbuf);
    *out = r;
    return KR_OK;
}
