/* Pose algebra the tracker needs on both engines, written once as KR_HD
 * functions (DESIGN.md §4): core/pose.c wraps them for the public API and
 * the CUDA tracker (pipeline/track/track_cuda.cu) runs them on the device, so a step taken
 * on either engine composes, exponentiates and re-orthonormalises alike. */
#ifndef KINREG_CORE_POSE_KERNELS_H
#define KINREG_CORE_POSE_KERNELS_H

#include <math.h>

#include "core/kr_hd.h"
#include "kinreg/pose.h"

static inline KR_HD void kr_pose_mat3_mul(const double *a, const double *b, double *out)
{
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            out[3 * r + c] = a[3 * r] * b[c] + a[3 * r + 1] * b[3 + c] + a[3 * r + 2] * b[6 + c];
}

static inline KR_HD void kr_pose_apply_hd(const kr_pose *a, const double p[3], double out[3])
{
    double r[3];
    for (int i = 0; i < 3; i++)
        r[i] = a->R[3 * i] * p[0] + a->R[3 * i + 1] * p[1] + a->R[3 * i + 2] * p[2];
    for (int i = 0; i < 3; i++)
        out[i] = r[i] + a->t[i];
}

static inline KR_HD kr_pose kr_pose_mul_hd(const kr_pose *a, const kr_pose *b)
{
    kr_pose out;
    kr_pose_mat3_mul(a->R, b->R, out.R);
    kr_pose_apply_hd(a, b->t, out.t);
    return out;
}

static inline KR_HD kr_quat kr_pose_quat_normalize(kr_quat q)
{
    double n = sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w);
    kr_quat u = {0, 0, 0, 1};
    if (n == 0) return u;
    u.x = q.x / n;
    u.y = q.y / n;
    u.z = q.z / n;
    u.w = q.w / n;
    return u;
}

static inline KR_HD kr_pose kr_pose_from_quat_hd(kr_quat q, const double t[3])
{
    q = kr_pose_quat_normalize(q);
    double x = q.x, y = q.y, z = q.z, w = q.w;
    kr_pose p = {{1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                  2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                  2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)},
                 {t ? t[0] : 0, t ? t[1] : 0, t ? t[2] : 0}};
    return p;
}

/* Shepperd's method: branch on the largest diagonal term for stability;
 * the quaternion with w >= 0. */
static inline KR_HD kr_quat kr_pose_to_quat_hd(const kr_pose *a)
{
    const double *m = a->R;
    double tr = m[0] + m[4] + m[8];
    kr_quat q;
    if (tr > 0) {
        double s = sqrt(tr + 1.0) * 2;
        q.x = (m[7] - m[5]) / s;
        q.y = (m[2] - m[6]) / s;
        q.z = (m[3] - m[1]) / s;
        q.w = 0.25 * s;
    } else if (m[0] > m[4] && m[0] > m[8]) {
        double s = sqrt(1.0 + m[0] - m[4] - m[8]) * 2;
        q.x = 0.25 * s;
        q.y = (m[1] + m[3]) / s;
        q.z = (m[2] + m[6]) / s;
        q.w = (m[7] - m[5]) / s;
    } else if (m[4] > m[8]) {
        double s = sqrt(1.0 + m[4] - m[0] - m[8]) * 2;
        q.x = (m[1] + m[3]) / s;
        q.y = 0.25 * s;
        q.z = (m[5] + m[7]) / s;
        q.w = (m[2] - m[6]) / s;
    } else {
        double s = sqrt(1.0 + m[8] - m[0] - m[4]) * 2;
        q.x = (m[2] + m[6]) / s;
        q.y = (m[5] + m[7]) / s;
        q.z = 0.25 * s;
        q.w = (m[3] - m[1]) / s;
    }
    q = kr_pose_quat_normalize(q);
    if (q.w < 0) {
        q.x = -q.x;
        q.y = -q.y;
        q.z = -q.z;
        q.w = -q.w;
    }
    return q;
}

static inline KR_HD void kr_pose_orthonormalize_hd(kr_pose *a)
{
    kr_quat q = kr_pose_to_quat_hd(a);
    *a = kr_pose_from_quat_hd(q, a->t);
}

/* Coefficients A = sin θ/θ, B = (1−cos θ)/θ², C = (θ − sin θ)/θ³ with series
 * near zero, shared by exp (R = I + A W + B W², V = I + B W + C W²) and log. */
static inline KR_HD void kr_pose_so3_coeffs(double th, double *A, double *B, double *C)
{
    double th2 = th * th;
    if (th < 1e-4) {
        *A = 1 - th2 / 6;
        *B = 0.5 - th2 / 24;
        *C = 1.0 / 6 - th2 / 120;
    } else {
        *A = sin(th) / th;
        *B = (1 - cos(th)) / th2;
        *C = (th - sin(th)) / (th2 * th);
    }
}

static inline KR_HD void kr_pose_skew(const double w[3], double W[9])
{
    W[0] = 0;
    W[1] = -w[2];
    W[2] = w[1];
    W[3] = w[2];
    W[4] = 0;
    W[5] = -w[0];
    W[6] = -w[1];
    W[7] = w[0];
    W[8] = 0;
}

/* SE(3) exponential of the twist x = (θ, t). */
static inline KR_HD kr_pose kr_pose_exp_hd(const double x[6])
{
    double th = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    double A, B, C, W[9], W2[9];
    kr_pose_so3_coeffs(th, &A, &B, &C);
    kr_pose_skew(x, W);
    kr_pose_mat3_mul(W, W, W2);
    kr_pose p;
    double V[9];
    for (int i = 0; i < 9; i++) {
        double I = (i % 4 == 0) ? 1 : 0;
        p.R[i] = I + A * W[i] + B * W2[i];
        V[i] = I + B * W[i] + C * W2[i];
    }
    for (int r = 0; r < 3; r++)
        p.t[r] = V[3 * r] * x[3] + V[3 * r + 1] * x[4] + V[3 * r + 2] * x[5];
    return p;
}

/* Cholesky solve of the SPD n×n system A x = b (n <= 8); 0 when A is not
 * positive definite (x untouched then). */
static inline KR_HD int kr_pose_solve_spd(int n, const double *A, const double *b, double *x)
{
    double L[64], y[8];
    for (int i = 0; i < 64; i++)
        L[i] = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j <= i; j++) {
            double s = A[i * n + j];
            for (int k = 0; k < j; k++)
                s -= L[i * 8 + k] * L[j * 8 + k];
            if (i == j) {
                if (!(s > 0)) return 0;
                L[i * 8 + i] = sqrt(s);
            } else {
                L[i * 8 + j] = s / L[j * 8 + j];
            }
        }
    }
    for (int i = 0; i < n; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++)
            s -= L[i * 8 + k] * y[k];
        y[i] = s / L[i * 8 + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = y[i];
        for (int k = i + 1; k < n; k++)
            s -= L[k * 8 + i] * x[k];
        x[i] = s / L[i * 8 + i];
    }
    return 1;
}

#endif
