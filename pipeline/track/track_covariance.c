/* The pose's covariance from the Newton system at the final pose.
 *
 * Near the solution the objective is Σ r_i² with r_i ≈ r_i(0) − J_iᵀ x, and
 * F = Σ J_i J_iᵀ (newton_kernels.h). For independent residuals of one
 * variance σ² the least-squares estimate has covariance σ² F⁻¹, σ² estimated
 * by Σ r² / (inliers − 6); each term is already divided by its point's depth
 * noise scale, so σ is the residual of a near point.
 *
 * The residuals are not independent: neighbouring points share the depth
 * quantisation's stripes, the preprocessing's smoothing and the model
 * voxel they are matched to, so the frame holds far fewer independent
 * samples than points, and the tracker stops within its convergence test
 * (0.3 mm, 0.017°) of the minimum. σ² F⁻¹ predicted 0.03-0.25 of the
 * observed errors on synthetic frames with known noise; the covariance is
 * σ² F⁻¹ times cfg->covariance_patch, the number of points that behave as
 * one independent sample, calibrated against that Monte Carlo
 * (docs/BENCHMARKS.md, "Pose covariance"). A POOR frame's covariance is
 * multiplied by cfg->covariance_poor; a LOST frame has none.
 *
 * x = (θ, t) moves a world point q to q + θ×q + t: a rotation about the world
 * origin. A user wants the error of the camera's position C and of its
 * orientation, (δC, δθ) with δθ the same small rotation about the world's
 * axes (ROS's PoseWithCovariance order and fixed-axis convention): that is
 * the rotation taken about C, t = δC + C×δθ, which kr_track_step_normalise
 * writes F in, with the rotation scaled by the points' RMS radius L (the
 * tracker's own normalisation, so metres and radians weigh alike). That F
 * is inverted through its eigenvalues, so that a direction the scene does
 * not constrain keeps a huge variance instead of making the inverse fail. */
#include <math.h>

#include "kinreg/pose.h"
#include "pipeline/track/track_internal.h"
#include "pipeline/track/track_step.h"

void kr_track_covariance(const double F[36], double residual, int inliers, const double C[3],
                         double L, double scale, float cov[21])
{
    for (int i = 0; i < 21; i++)
        cov[i] = NAN;
    if (inliers <= 6 || !(residual >= 0) || !(L > 0) || !(scale > 0)) return;
    double sigma2 = residual / (inliers - 6);
    /* G: F in y = (L·δθ, δC). */
    double G[36];
    kr_track_step_normalise(F, NULL, C, L, G, NULL);
    double ev[6], V[36];
    kr_eigen_sym(6, G, ev, V);
    double top = ev[5]; /* ascending */
    if (!(top > 0) || !isfinite(top)) return;
    double floor = top * 1e-12;
    /* Output index a: δC (a < 3) is y[3 + a]; δθ is y[a − 3] / L. */
    int at = 0;
    for (int a = 0; a < 6; a++)
        for (int b = a; b < 6; b++) {
            int i = a < 3 ? 3 + a : a - 3, j = b < 3 ? 3 + b : b - 3;
            double s = 0;
            for (int k = 0; k < 6; k++)
                s += V[6 * i + k] * V[6 * j + k] / fmax(ev[k], floor);
            double back = (a >= 3 ? 1.0 / L : 1.0) * (b >= 3 ? 1.0 / L : 1.0);
            cov[at++] = (float)(scale * sigma2 * s * back);
        }
}
