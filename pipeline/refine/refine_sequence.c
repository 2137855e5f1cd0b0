/* kinreg refine --sequence: keyframes of a depth sequence with a trajectory
 * (chosen by motion, pipeline/refine/keyframes.h), refined jointly; writes the refined
 * keyframe poses as a TUM trajectory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipeline/refine/keyframes.h"
#include "kinreg/preprocess.h"
#include "kinreg/source.h"
#include "kinreg/track.h"
#include "kinreg/refine.h"

/* A frame with fewer points (a covered sensor) is no keyframe: the next
 * frame with depth is due instead. The tracker's own floor (kinreg/track.h,
 * min_points), on the quarter-resolution level used here. */
#define MIN_KEYFRAME_POINTS 100

/* Every frame of `traj` moved by the refinement of the keyframes around it:
 * keyframe k, at trajectory position at[k], moved from A_k to P_k, which is
 * the correction C_k = P_k A_k⁻¹ in the world; a frame between keyframes k0
 * and k1 takes the correction a fraction u = (t − t_k0) / (t_k1 − t_k0) of
 * the way from C_k0 to C_k1 along the screw motion, one before the first
 * or after the last keyframe that of the nearest. Only keyframes of the
 * frame's own stretch count: a step the tracker's motion check refuses (a
 * jump, a lost stretch filled in wrong) starts a new stretch, whose error
 * has nothing to do with the one before. A stretch without a keyframe
 * keeps its poses. */
static kr_status correct_frames(const kr_trajectory *traj, const kr_keyframes *kf, const size_t *at,
                                kr_trajectory *out, size_t *unmoved)
{
    size_t n = traj->count;
    size_t *stretch = malloc(sizeof *stretch * (n ? n : 1));
    kr_pose *corr = malloc(sizeof *corr * (size_t)(kf->n ? kf->n : 1));
    if (!stretch || !corr) {
        free(stretch);
        free(corr);
        return kr_error(KR_ERR_NOMEM, "no memory to correct %zu frames", n);
    }
    kr_track_config tc;
    kr_track_config_default(&tc);
    for (size_t i = 0; i < n; i++) {
        double dt = i ? traj->stamps[i] - traj->stamps[i - 1] : 0;
        bool reach =
            i && dt > 0 && kr_track_within_reach(&tc, &traj->poses[i - 1], &traj->poses[i], dt);
        stretch[i] = i == 0 ? 0 : stretch[i - 1] + !reach;
    }
    for (int k = 0; k < kf->n; k++) {
        kr_pose inv = kr_pose_inv(&traj->poses[at[k]]);
        corr[k] = kr_pose_mul(&kf->items[k].pose, &inv);
    }
    kr_status s = KR_OK;
    *unmoved = 0;
    int next = 0; /* the first keyframe at or after frame i */
    for (size_t i = 0; i < n && s == KR_OK; i++) {
        while (next < kf->n && at[next] < i)
            next++;
        int k0 = next > 0 && stretch[at[next - 1]] == stretch[i] ? next - 1 : -1;
        int k1 = next < kf->n && stretch[at[next]] == stretch[i] ? next : -1;
        if (next < kf->n && at[next] == i) k0 = k1 = next;
        kr_pose c;
        if (k0 >= 0 && k1 >= 0 && k0 != k1) {
            double t0 = traj->stamps[at[k0]], t1 = traj->stamps[at[k1]];
            c = kr_pose_interpolate(&corr[k0], &corr[k1], (traj->stamps[i] - t0) / (t1 - t0));
        } else if (k0 >= 0 || k1 >= 0) {
            c = corr[k0 >= 0 ? k0 : k1];
        } else {
            c = kr_pose_identity();
            (*unmoved)++;
        }
        kr_pose moved = kr_pose_mul(&c, &traj->poses[i]);
        s = kr_trajectory_push(out, traj->stamps[i], &moved);
    }
    free(stretch);
    free(corr);
    return s;
}

/* The trajectory's pose nearest in time to t, within max_dt; NULL if none.
 * In a trajectory in time order only the poses on either side of t can be
 * (a whole scan per frame made a long sequence quadratic). */
static const kr_pose *pose_at(const kr_trajectory *traj, bool in_order, double t, double max_dt)
{
    size_t best = traj->count, lo = 0, hi = traj->count;
    if (in_order) {
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (traj->stamps[mid] < t)
                lo = mid + 1;
            else
                hi = mid;
        }
        hi = lo < traj->count ? lo + 1 : traj->count;
        lo = lo > 0 ? lo - 1 : 0;
    }
    double bd = max_dt;
    for (size_t i = lo; i < hi; i++) {
        double d = fabs(traj->stamps[i] - t);
        if (d <= bd) {
            bd = d;
            best = i;
        }
    }
    return best < traj->count ? &traj->poses[best] : NULL;
}

kr_status kr_refine_sequence(const kr_refine_sequence_config *a, kr_refine_config *cfg,
                             kr_device *dev, kr_refine_result *res,
                             kr_refine_sequence_result *result)
{
    /* Keyframes placed by a trajectory: no pairwise placement; the result is
     * still never worse than the trajectory's poses. */
    cfg->initialize = KR_REFINE_INIT_OFF;
    kr_refine_sequence_result counts = {0};
    kr_trajectory traj = {0}, out = {0};
    kr_status s = kr_trajectory_read_tum(a->trajectory, &traj);
    if (s != KR_OK) return s;
    bool in_order = true;
    for (size_t i = 1; i < traj.count && in_order; i++)
        in_order = traj.stamps[i] > traj.stamps[i - 1];
    if (a->every_frame && !in_order) {
        kr_trajectory_free(&traj);
        return kr_error(KR_ERR_INVALID_ARG,
                        "%s: the poses are not in time order, which --every-frame needs",
                        a->trajectory);
    }
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = a->uri;
    sc.intrinsics = a->intrinsics;
    kr_source *src = NULL;
    s = kr_source_create(&src, &sc);
    kr_device *cpu = NULL; /* preprocessing needs an engine even when refinement runs on the CPU */
    if (s == KR_OK && !dev) {
        kr_device_config dc;
        kr_device_config_default(&dc);
        dc.backend = KR_BACKEND_CPU;
        s = kr_device_create(&cpu, &dc);
    }
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    pc.levels = 2; /* level 1 (a quarter of the pixels) is dense enough for a 1 cm grid */
    kr_pyramid pyr = {0};
    kr_keyframes kf;
    kr_keyframes_config kc;
    kr_keyframes_config_default(&kc);
    kc.min_translation = a->min_translation;
    kc.min_angle = a->min_angle_deg * M_PI / 180;
    kr_keyframes_init(&kf, &kc);
    double *stamps = NULL;
    size_t *at = NULL; /* each keyframe's position in traj */
    size_t n_stamps = 0;
    while (s == KR_OK) {
        kr_frame frame = {0};
        kr_status r = kr_source_read(src, &frame);
        if (r == KR_END) break;
        if (r != KR_OK) {
            s = r;
            break;
        }
        const kr_pose *pose = pose_at(&traj, in_order, frame.timestamp, 0.02);
        if (pose && kr_keyframes_due(&kf, pose, true)) {
            kr_intrinsics k = kr_source_intrinsics(src);
            s = kr_preprocess(dev ? dev : cpu, &pc, &frame, &k, &pyr);
            const kr_cloud *c = &pyr.level[1];
            if (s == KR_OK && c->valid_points < MIN_KEYFRAME_POINTS) {
                kr_frame_release(&frame);
                continue;
            }
            if (s == KR_OK)
                s = kr_keyframes_add(&kf, frame.index, pose, c->points,
                                     (size_t)c->width * c->height);
            double *grown = s == KR_OK ? realloc(stamps, sizeof *stamps * (n_stamps + 1)) : NULL;
            if (grown) stamps = grown;
            size_t *grown_at = grown ? realloc(at, sizeof *at * (n_stamps + 1)) : NULL;
            if (s == KR_OK && !grown_at)
                s = kr_error(KR_ERR_NOMEM, "no memory for keyframe stamps");
            if (grown_at) {
                at = grown_at;
                at[n_stamps] = (size_t)(pose - traj.poses);
                stamps[n_stamps++] = frame.timestamp;
            }
        }
        kr_frame_release(&frame);
    }
    if (s == KR_OK && kf.n < 2)
        s = kr_error(
            KR_ERR_EMPTY,
            "%s with %s gave %d keyframe(s); refinement needs 2 or more (lower --min-move)", a->uri,
            a->trajectory, kf.n);
    if (s == KR_OK && a->on_keyframes) a->on_keyframes(kf.n, a->user);
    if (s == KR_OK) s = kr_keyframes_refine(&kf, 0, kf.n, cfg, dev, res);
    for (int i = 0; s == KR_OK && i < kf.n; i++)
        s = kr_trajectory_push(&out, stamps[i], &kf.items[i].pose);
    if (s == KR_OK && a->output) s = kr_trajectory_write_tum(a->output, &out);
    if (s == KR_OK && a->every_frame) {
        kr_trajectory all = {0};
        size_t unmoved = 0;
        s = correct_frames(&traj, &kf, at, &all, &unmoved);
        if (s == KR_OK) s = kr_trajectory_write_tum(a->every_frame, &all);
        if (s == KR_OK) {
            counts.frames_corrected = all.count - unmoved;
            counts.frames_unmoved = unmoved;
        }
        kr_trajectory_free(&all);
    }
    if (s == KR_OK) {
        counts.keyframes = kf.n;
        *result = counts;
    }
    free(stamps);
    free(at);
    kr_keyframes_free(&kf);
    kr_pyramid_free(&pyr);
    kr_source_destroy(&src);
    kr_device_destroy(&cpu);
    kr_trajectory_free(&traj);
    kr_trajectory_free(&out);
    return s;
}
