/* Shared by the recovery tests: every frame's result of a pipeline run, and
 * the events (jumps, uncoverings) after which the published pose is right
 * again, judged against the source's ground truth. */
#ifndef KINREG_TESTS_RECOVERY_FIXTURE_H
#define KINREG_TESTS_RECOVERY_FIXTURE_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "kinreg/eval.h"
#include "kinreg/pipeline.h"

typedef struct {
    size_t n, cap;
    kr_frame_result *r;
} frame_log;

/* on_frame callback: appends the frame's result to the frame_log in user. */
static inline void log_frame(const kr_frame_result *r, const kr_pipeline_stats *st, void *user)
{
    (void)st;
    frame_log *log = user;
    if (log->n == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 1024;
        kr_frame_result *g = realloc(log->r, cap * sizeof *g);
        if (!g) return;
        log->r = g;
        log->cap = cap;
    }
    log->r[log->n++] = *r;
}

/* Error of an estimated pose (world = first camera) against ground truth
 * pose k expressed in the first camera's frame. */
static inline void pose_error(const kr_trajectory *gt, size_t k, const kr_pose *est,
                              double *rot_deg, double *trans_m)
{
    kr_pose g0inv = kr_pose_inv(&gt->poses[0]);
    kr_pose rel = kr_pose_mul(&g0inv, &gt->poses[k]);
    kr_pose relinv = kr_pose_inv(&rel);
    kr_pose e = kr_pose_mul(&relinv, est);
    *rot_deg = kr_pose_angle(&e) * 180 / M_PI;
    *trans_m = sqrt(e.t[0] * e.t[0] + e.t[1] * e.t[1] + e.t[2] * e.t[2]);
}

/* An event is a jump of the true camera (more than 5 cm or 5° in one frame,
 * far beyond the smooth path's 1.5 cm / 1°) or depth coming back after a
 * covered stretch. After each, the published pose must be right again (GOOD,
 * within 2 cm and 2°): counts the events where it is within `frames` frames
 * with depth; with `print`, names the others. */
static inline void count_recovered(const frame_log *log, const kr_trajectory *gt, int frames,
                                   bool print, int *events, int *quick)
{
    *events = *quick = 0;
    for (size_t i = 1; i < log->n; i++) {
        const kr_frame_result *r = &log->r[i], *prev = &log->r[i - 1];
        size_t k = (size_t)r->frame_index;
        kr_pose inv = kr_pose_inv(&gt->poses[k - 1]);
        kr_pose step = kr_pose_mul(&inv, &gt->poses[k]);
        double move = sqrt(step.t[0] * step.t[0] + step.t[1] * step.t[1] + step.t[2] * step.t[2]);
        bool jump = move > 0.05 || kr_pose_angle(&step) > 5 * M_PI / 180;
        bool uncovered = r->valid_points >= 100 && prev->valid_points < 100;
        if (!jump && !uncovered) continue;
        (*events)++;
        int with_depth = 0;
        bool ok = false;
        for (size_t j = i; j < log->n && with_depth < frames && !ok; j++) {
            if (log->r[j].valid_points < 100) continue;
            with_depth++;
            double rd, tm;
            pose_error(gt, (size_t)log->r[j].frame_index, &log->r[j].track.pose, &rd, &tm);
            ok = log->r[j].track.state == KR_TRACK_GOOD && rd < 2 && tm < 0.02;
        }
        *quick += ok;
        if (!ok && print)
            printf("    event at frame %zu (%s) not recovered within %d frames\n", k,
                   jump ? "jump" : "uncovered", frames);
    }
}

#endif
