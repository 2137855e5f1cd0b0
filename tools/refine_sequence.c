/* kinreg refine --sequence: keyframes of a depth sequence with a trajectory
 * (chosen by motion, fusion/keyframes.h), refined jointly; writes the refined
 * keyframe poses as a TUM trajectory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "fusion/keyframes.h"
#include "kinreg/preprocess.h"
#include "kinreg/source.h"
#include "refine_sequence.h"

/* A frame with fewer points (a covered sensor) is no keyframe: the next
 * frame with depth is due instead. The tracker's own floor (kinreg/track.h,
 * min_points), on the quarter-resolution level used here. */
#define MIN_KEYFRAME_POINTS 100

/* The trajectory's pose nearest in time to t, within max_dt; NULL if none. */
static const kr_pose *pose_at(const kr_trajectory *traj, double t, double max_dt)
{
    size_t best = traj->count;
    double bd = max_dt;
    for (size_t i = 0; i < traj->count; i++) {
        double d = fabs(traj->stamps[i] - t);
        if (d <= bd) {
            bd = d;
            best = i;
        }
    }
    return best < traj->count ? &traj->poses[best] : NULL;
}

kr_status kr_refine_sequence(const kr_refine_sequence_args *a, kr_refine_config *cfg,
                             kr_device *dev, kr_refine_result *res, int *keyframes)
{
    kr_trajectory traj = {0}, out = {0};
    kr_status s = kr_trajectory_read_tum(a->trajectory, &traj);
    if (s != KR_OK) return s;
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
    size_t n_stamps = 0;
    while (s == KR_OK) {
        kr_frame frame = {0};
        kr_status r = kr_source_read(src, &frame);
        if (r == KR_END) break;
        if (r != KR_OK) {
            s = r;
            break;
        }
        const kr_pose *pose = pose_at(&traj, frame.timestamp, 0.02);
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
            if (s == KR_OK && !grown) s = kr_error(KR_ERR_NOMEM, "no memory for keyframe stamps");
            if (grown) {
                stamps = grown;
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
    if (s == KR_OK && a->verbose) fprintf(stderr, "refine: %d keyframes\n", kf.n);
    if (s == KR_OK) s = kr_keyframes_refine(&kf, 0, kf.n, cfg, dev, res);
    for (int i = 0; s == KR_OK && i < kf.n; i++)
        s = kr_trajectory_push(&out, stamps[i], &kf.items[i].pose);
    if (s == KR_OK && a->output) s = kr_trajectory_write_tum(a->output, &out);
    if (s == KR_OK) *keyframes = kf.n;
    free(stamps);
    kr_keyframes_free(&kf);
    kr_pyramid_free(&pyr);
    kr_source_destroy(&src);
    kr_device_destroy(&cpu);
    kr_trajectory_free(&traj);
    kr_trajectory_free(&out);
    return s;
}
