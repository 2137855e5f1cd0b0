/* Internal hooks of the tracker: a per-step trace of the objective (tests
 * check that it never increases across accepted steps; benchmarks read the
 * step count per level). */
#ifndef KINREG_PIPELINE_TRACK_TRACK_INTERNAL_H
#define KINREG_PIPELINE_TRACK_TRACK_INTERNAL_H

#include "pipeline/track/newton_kernels.h"
#include "pipeline/track/track_step.h"
#include "kinreg/track.h"

typedef struct {
    int level;        /* pyramid level */
    int iteration;    /* 0: the objective at the level's starting pose; k: after accepted step k;
                         −1: a line search that found no decrease (the level stops);
                         KR_TRACK_TRACE_POLISH + k: after the polish's whole step k (the
                         objective may rise a little there: track_step.h) */
    double objective; /* h at the pose after this step (gate of this level) */
    double alpha;     /* accepted step length (0 for the starting and failed entries) */
    int evaluations;  /* linearisations spent on this step (line search included) */
} kr_track_trace_step;

enum { KR_TRACK_TRACE_POLISH = 1000 };

typedef struct {
    kr_track_trace_step *steps; /* caller's buffer */
    int capacity, count;
} kr_track_trace;

/* kr_track_frame with a trace (NULL: none). */
kr_status kr_track_frame_traced(const kr_kdtree *model, const kr_pyramid *pyr, const kr_pose *seed,
                                const kr_track_config *cfg, kr_track_result *out,
                                kr_track_trace *trace);

/* Condition of F as the state machine sees it: λmin/λmax after expressing the
 * rotation about the centroid c (world) and scaling it by the RMS radius L of
 * the points about c, so the figure does not depend on where the world origin
 * is nor on the units of rotation against translation. */
double kr_track_condition(const double F[36], const double c[3], double L);

/* The 6×6 covariance of (camera position, m; rotation about the world's
 * axes, rad), upper triangle row by row, of the least-squares pose with
 * normal matrix F (x = (θ, t) about the world origin), inlier residual Σ r²
 * and camera centre C, times `scale` (track_covariance.c); NaN when the
 * system says nothing (too few inliers). L: the points' RMS radius. */
void kr_track_covariance(const double F[36], double residual, int inliers, const double C[3],
                         double L, double scale, float cov[21]);

/* The per-point parameters of one level (gate: the level's gate, cfg's
 * far_field already scaled to the level): the one place both engines get
 * them from. */
void kr_newton_params(const kr_track_config *cfg, float gate, kr_track_point_params *P);

/* The whole frame's plan for an engine that runs the loop by itself (the
 * CUDA engine), the same levels, gates and iterations as kr_track_frame. */
void kr_track_plan(const kr_track_config *cfg, const kr_pyramid *pyr, kr_track_step_plan *plan);

#endif
