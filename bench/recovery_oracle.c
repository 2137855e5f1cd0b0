/* What the recovery limits (issue 13): the demo's synthetic scan tracked as
 * `kinreg demo -b cpu --deterministic` does, with the recovery given the
 * ground truth through the library's recovery hook
 * (kr_pipeline_config.recover_fn, kinreg/pipeline.h). Built against the
 * library and run by bench/recovery_oracle.sh.
 *
 *   recovery_oracle [--seed N] [--jumps N] [--covered N] [--out DIR] MODE
 *
 * MODE says what a loss's recovery gets (second opinions stay the built-in
 * search's, as they were):
 *   none       kinreg's own recovery (the hook passes the built-in's answer on);
 *   replace    where kinreg recovers, Newton tracking from the true pose
 *              instead of from what the search found (the best any search
 *              feeding the same judge could do);
 *   exact      where kinreg recovers, the true pose itself;
 *   immediate  at every attempt, Newton tracking from the true pose,
 *              accepted unless it is LOST (no waiting for a better view).
 * The built-in search runs at every attempt in every mode, so its state
 * across the attempts of a loss is what it would be without the oracle.
 * Prints the demo's ATE lines, the run's loss summary and, for each oracle
 * recovery, its distance from kinreg's own. With --out, writes
 * trajectory.txt and trajectory_final.txt there (MODE none gives the
 * demo's files byte for byte). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/device.h"
#include "kinreg/eval.h"
#include "kinreg/pipeline.h"

typedef struct {
    const char *mode;
    const kr_trajectory *gt; /* the source's true poses */
} oracle;

/* The true pose at `stamp` in the run's world frame (the first camera's). */
static bool truth_at(const oracle *o, double stamp, kr_pose *out)
{
    if (!o->gt || o->gt->count == 0) return false;
    size_t best = 0;
    for (size_t k = 1; k < o->gt->count; k++)
        if (fabs(o->gt->stamps[k] - stamp) < fabs(o->gt->stamps[best] - stamp)) best = k;
    kr_pose inv0 = kr_pose_inv(&o->gt->poses[0]);
    *out = kr_pose_mul(&inv0, &o->gt->poses[best]);
    return true;
}

static kr_status oracle_recover(const kr_recover_request *req, kr_recover_answer *out, void *user)
{
    const oracle *o = user;
    kr_status s = kr_pipeline_recover_builtin(req, out);
    kr_pose truth;
    if (s != KR_OK || req->purpose != KR_RECOVER_FOR_LOSS || !strcmp(o->mode, "none") ||
        !truth_at(o, req->timestamp, &truth))
        return s;
    bool immediate = !strcmp(o->mode, "immediate");
    if (!immediate && !out->success) return KR_OK;
    kr_track_result from_truth;
    s = kr_track_frame_on(req->device, req->model, req->pyramid, &truth, req->track, &from_truth);
    if (s != KR_OK) return s;
    kr_pose inv = kr_pose_inv(&from_truth.pose), d = kr_pose_mul(&inv, &out->track.pose);
    printf("oracle: frame %llu: %s; kinreg's pose %.2f cm %.2f deg from the truth-tracked one "
           "(view on the model %.3f; from the truth %.3f)\n",
           (unsigned long long)req->frame_index, out->success ? "recovered" : "not recovered",
           100 * kr_pose_translation_norm(&d), kr_pose_angle(&d) * 180 / M_PI,
           out->track.inlier_fraction, from_truth.inlier_fraction);
    if (immediate) {
        out->success = from_truth.state != KR_TRACK_LOST;
        out->method = KR_METHOD_EMICP;
    }
    if (!strcmp(o->mode, "exact"))
        out->track.pose = truth;
    else
        out->track = from_truth;
    out->track.state = KR_TRACK_GOOD;
    return KR_OK;
}

static int usage(void)
{
    fprintf(stderr, "usage: recovery_oracle [--seed N] [--jumps N] [--covered N] [--out DIR] "
                    "none|replace|exact|immediate\n");
    return 2;
}

int main(int argc, char **argv)
{
    kr_openmp_prefer_passive(argv); /* as kinreg does: idle OpenMP threads must not spin */
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic";
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.deterministic = true;
    cfg.fill_lost = true;
    oracle o = {NULL, NULL};
    const char *out_dir = NULL;
    for (int i = 1; i < argc; i++) {
        bool value = i + 1 < argc;
        if (!strcmp(argv[i], "--seed") && value)
            cfg.source.seed = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--jumps") && value)
            cfg.source.jumps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--covered") && value)
            cfg.source.covered = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && value)
            out_dir = argv[++i];
        else if (argv[i][0] != '-' && !o.mode)
            o.mode = argv[i];
        else
            return usage();
    }
    if (!o.mode || (strcmp(o.mode, "none") && strcmp(o.mode, "replace") &&
                    strcmp(o.mode, "exact") && strcmp(o.mode, "immediate")))
        return usage();
    char traj[1024], final[1024];
    if (out_dir) {
        snprintf(traj, sizeof traj, "%s/trajectory.txt", out_dir);
        snprintf(final, sizeof final, "%s/trajectory_final.txt", out_dir);
        cfg.trajectory_path = traj;
        cfg.trajectory_final_path = final;
    }
    cfg.recover_fn = oracle_recover;
    cfg.recover_user = &o;

    kr_pipeline *p = NULL;
    kr_status s = kr_pipeline_create(&p, &cfg);
    if (s != KR_OK) {
        fprintf(stderr, "recovery_oracle: %s: %s\n", kr_strerror(s), kr_last_error());
        return 1;
    }
    o.gt = kr_source_groundtruth(kr_pipeline_source(p));
    printf("oracle: %zu true poses from the synthetic source\n", o.gt ? o.gt->count : (size_t)0);
    s = kr_pipeline_run(p);
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    if (s != KR_OK) fprintf(stderr, "recovery_oracle: %s: %s\n", kr_strerror(s), kr_last_error());
    /* The lines kinreg demo and its summary print. */
    if (st.losses)
        printf("kinreg: loss events %llu, ended %llu (%llu within 3 frames with depth); "
               "recovery searches %llu found the pose, %llu failed\n",
               (unsigned long long)st.losses, (unsigned long long)st.losses_ended,
               (unsigned long long)st.losses_ended_fast, (unsigned long long)st.recoveries,
               (unsigned long long)st.recovery_failures);
    kr_ate ate;
    if (o.gt && kr_eval_ate(o.gt, kr_pipeline_trajectory(p), 0, &ate) == KR_OK)
        printf("ATE RMSE %.2f cm (median %.2f cm, max %.2f cm) over %zu frames; %.1f frames/s; "
               "lost %llu\n",
               100 * ate.rmse, 100 * ate.median, 100 * ate.max, ate.pairs, st.fps,
               (unsigned long long)st.frames_lost);
    if (o.gt && st.frames_lost &&
        kr_eval_ate(o.gt, kr_pipeline_final_trajectory(p), 0, &ate) == KR_OK)
        printf("final trajectory (%llu LOST frames placed, %llu not): ATE RMSE %.2f cm (median "
               "%.2f cm, max %.2f cm)\n",
               (unsigned long long)(st.frames_filled + st.frames_interpolated),
               (unsigned long long)st.frames_unfilled, 100 * ate.rmse, 100 * ate.median,
               100 * ate.max);
    kr_pipeline_destroy(&p);
    return s == KR_OK ? 0 : 1;
}
