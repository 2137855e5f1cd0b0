/* One damped Newton step of the tracker (DESIGN.md §5), written once as KR_HD
 * functions for the CPU loop (pipeline/track/track.c) and the CUDA loop
 * (pipeline/track/track_cuda.cu), plus the plain-data plan of a frame that the CUDA loop
 * follows.
 *
 * The 6×6 system F x = g is solved in normalised coordinates: rotation about
 * the points' centroid c (world) and scaled by their RMS radius L. There a
 * tiny isotropic Levenberg term λI (λ = damping × mean eigenvalue) leaves
 * well-determined directions unchanged and holds still along degenerate ones
 * (a single wall: slides along it have g ≈ 0), where plain Cholesky would
 * return an arbitrary huge step. */
#ifndef KINREG_PIPELINE_TRACK_TRACK_STEP_H
#define KINREG_PIPELINE_TRACK_TRACK_STEP_H

#include <math.h>

#include "core/kr_hd.h"
#include "pipeline/track/newton_kernels.h"
#include "core/pose_kernels.h"
#include "kinreg/pyramid.h"

/* x = M D y with M = [[I, 0], [[c]×, I]] (t = t_c + c × θ, since
 * q + θ×q + t = q + θ×(q − c) + (t + θ×c)) and D = diag(1/L ×3, 1 ×3). */
static inline KR_HD void kr_track_step_to_origin(const double y[6], const double c[3], double L,
                                                 double x[6])
{
    double th[3] = {y[0] / L, y[1] / L, y[2] / L};
    x[0] = th[0];
    x[1] = th[1];
    x[2] = th[2];
    x[3] = y[3] + c[1] * th[2] - c[2] * th[1];
    x[4] = y[4] + c[2] * th[0] - c[0] * th[2];
    x[5] = y[5] + c[0] * th[1] - c[1] * th[0];
}

/* Fn = (MD)ᵀ F (MD), gn = (MD)ᵀ g (g, gn may be NULL): kr_track_step_to_origin
 * applied to the columns. */
static inline KR_HD void kr_track_step_normalise(const double F[36], const double *g,
                                                 const double c[3], double L, double Fn[36],
                                                 double *gn)
{
    double MD[36];
    for (int j = 0; j < 6; j++) {
        double e[6] = {0, 0, 0, 0, 0, 0}, col[6];
        e[j] = 1;
        kr_track_step_to_origin(e, c, L, col);
        for (int i = 0; i < 6; i++)
            MD[6 * i + j] = col[i];
    }
    double FMD[36];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            double s = 0;
            for (int k = 0; k < 6; k++)
                s += F[6 * i + k] * MD[6 * k + j];
            FMD[6 * i + j] = s;
        }
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 6; j++) {
            double s = 0;
            for (int k = 0; k < 6; k++)
                s += MD[6 * k + i] * FMD[6 * k + j];
            Fn[6 * i + j] = s;
        }
        if (g) {
            double s = 0;
            for (int k = 0; k < 6; k++)
                s += MD[6 * k + i] * g[k];
            gn[i] = s;
        }
    }
}

/* The Newton direction at pose T from the sums F, g: y in normalised
 * coordinates, x = (θ, t) at the world origin, and the predicted decrease
 * rate slope = 2gᵀx (−2g is the gradient of h). c_cam and L: the centroid
 * (camera frame) and RMS radius of the level's points. Returns 0 when the
 * damped system has no solution (F not positive definite or not finite). */
static inline KR_HD int kr_track_step_direction(const double F[36], const double g[6],
                                                const kr_pose *T, const double c_cam[3], double L,
                                                double damping, double y[6], double x[6],
                                                double *slope)
{
    double c[3], Fn[36], gn[6];
    kr_pose_apply_hd(T, c_cam, c);
    kr_track_step_normalise(F, g, c, L, Fn, gn);
    double tr = 0;
    for (int i = 0; i < 6; i++)
        tr += Fn[7 * i];
    for (int i = 0; i < 6; i++)
        Fn[7 * i] += damping * tr / 6;
    if (!(tr > 0) || !isfinite(tr) || !kr_pose_solve_spd(6, Fn, gn, y)) return 0;
    kr_track_step_to_origin(y, c, L, x);
    double s = 0;
    for (int i = 0; i < 6; i++)
        s += 2 * g[i] * x[i];
    *slope = s;
    return 1;
}

/* The trial pose exp(α x̂)·T of the line search. */
static inline KR_HD kr_pose kr_track_step_trial(const double x[6], double alpha, const kr_pose *T)
{
    double ax[6];
    for (int i = 0; i < 6; i++)
        ax[i] = alpha * x[i];
    kr_pose E = kr_pose_exp_hd(ax);
    return kr_pose_mul_hd(&E, T);
}

/* Armijo's sufficient decrease, and a strict decrease besides. */
static inline KR_HD int kr_track_step_accept(double h_trial, double h, double armijo_c,
                                             double alpha, double slope)
{
    return h_trial <= h - armijo_c * alpha * slope && h_trial < h;
}

/* The accepted step α·y is below both convergence thresholds. */
static inline KR_HD int kr_track_step_converged(const double y[6], double alpha, double L,
                                                double converge_rot, double converge_trans)
{
    double rot = alpha * sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]) / L;
    double trans = alpha * sqrt(y[3] * y[3] + y[4] * y[4] + y[5] * y[5]);
    return rot < converge_rot && trans < converge_trans;
}

/* The polish (after the finest level's iterations): Gauss–Newton steps taken
 * whole, without the line search. The line search stops where a trial meets
 * a discontinuity of the piecewise objective (a point crossing its gate, a
 * query switching cells), which happens within about a millimetre of the
 * minimum, and sometimes at the first step of a level: the pose it leaves
 * depends on the seed. Whole steps from the last linearisation go on to
 * where the pairs and the pose agree, which is the same from any seed in the
 * basin (0.7-1.7 mm of seed-dependent error per axis became 0.4-0.6 mm on
 * synthetic frames; docs/BENCHMARKS.md, "the polish and the pose
 * covariance"). A whole step below the convergence test ends it: six steps
 * every frame cost the CPU engine a third of its frames/s for 0.08 cm of
 * ATE on the demo, stopping there costs little for 0.09 cm (0.14 without).
 *
 * The objective cannot guard it: its cells come from the tree's descent, so
 * near the answer it is rugged, and a seed 6 mm off sat 20 % lower than the
 * true pose the polish reached. What is guarded is what a wrong turn
 * changes: the polished pose is kept only when the steps, summed, moved less
 * than max_rot / max_trans (a polish corrects, it never relocates) and the
 * inliers fell by at most the share `tolerance`. */
static inline KR_HD int kr_track_polish_done(const double y[6], double L, double converge_rot,
                                             double converge_trans)
{
    /* α = 1: the whole step, measured as the loop's convergence test does. */
    return kr_track_step_converged(y, 1.0, L, converge_rot, converge_trans);
}

/* Adds the whole step y to the distance the polish moved (rot, trans). */
static inline KR_HD void kr_track_polish_moved(const double y[6], double L, double moved[2])
{
    moved[0] += sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]) / L;
    moved[1] += sqrt(y[3] * y[3] + y[4] * y[4] + y[5] * y[5]);
}

static inline KR_HD int kr_track_polish_keep(int inliers, int inliers_before, const double moved[2],
                                             double tolerance, double max_rot, double max_trans)
{
    return inliers >= 6 && inliers >= (1 - tolerance) * inliers_before && moved[0] <= max_rot &&
           moved[1] <= max_trans;
}

/* A frame's tracking plan as plain data (built by pipeline/track/track.c from the
 * track config), for an engine that runs the whole loop by itself. Levels are
 * tracked from `top` down to `finest`. */
typedef struct {
    int top, finest;
    kr_track_point_params P[KR_MAX_LEVELS]; /* per pyramid level (only top..finest used) */
    int iterations[KR_MAX_LEVELS];          /* Newton iterations per pyramid level */
    int max_line_search;
    double armijo_c, converge_rot, converge_trans, damping;
    int polish_steps; /* whole steps after the finest level (kr_track_polish_*) */
    double polish_tolerance, polish_max_rot, polish_max_trans;
} kr_track_step_plan;

/* What such an engine hands back: everything the host needs to compute the
 * quality figures exactly as the CPU engine does. */
typedef struct {
    kr_pose T;          /* final pose */
    double F[36], g[6]; /* the last linearisation (finest level tracked) */
    double h, residual;
    int points, inliers;
    double c_cam[3], L; /* centroid and RMS radius of the last level */
    int total_iters;
    int solved;
} kr_track_step_result;

#endif
