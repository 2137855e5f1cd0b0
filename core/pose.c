/* Rigid-pose algebra: composition, quaternions, SE(3) exp/log, small solvers. */
#include "kinreg/pose.h"

#include <math.h>
#include <string.h>

#include "core/pose_kernels.h"

kr_pose kr_pose_identity(void)
{
    kr_pose p = {{1, 0, 0, 0, 1, 0, 0, 0, 1}, {0, 0, 0}};
    return p;
}

static void mat3_mul(const double *a, const double *b, double *out)
{
    kr_pose_mat3_mul(a, b, out);
}

kr_pose kr_pose_mul(const kr_pose *a, const kr_pose *b)
{
    return kr_pose_mul_hd(a, b);
}

kr_pose kr_pose_inv(const kr_pose *a)
{
    kr_pose out;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) out.R[3 * r + c] = a->R[3 * c + r];
    for (int r = 0; r < 3; r++)
        out.t[r] = -(out.R[3 * r] * a->t[0] + out.R[3 * r + 1] * a->t[1] + out.R[3 * r + 2] * a->t[2]);
    return out;
}

void kr_pose_rotate(const kr_pose *a, const double v[3], double out[3])
{
    double r[3];
    for (int i = 0; i < 3; i++) r[i] = a->R[3 * i] * v[0] + a->R[3 * i + 1] * v[1] + a->R[3 * i + 2] * v[2];
    memcpy(out, r, sizeof r);
}

void kr_pose_apply(const kr_pose *a, const double p[3], double out[3])
{
    kr_pose_apply_hd(a, p, out);
}

kr_quat kr_quat_normalize(kr_quat q)
{
    return kr_pose_quat_normalize(q);
}

kr_pose kr_pose_from_quat(kr_quat q, const double t[3])
{
    return kr_pose_from_quat_hd(q, t);
}

kr_quat kr_pose_to_quat(const kr_pose *a)
{
    return kr_pose_to_quat_hd(a);
}

/* Coefficients A = sin θ/θ, B = (1−cos θ)/θ², C = (θ − sin θ)/θ³ with series
 * near zero, shared by exp (R = I + A W + B W², V = I + B W + C W²) and log. */
static void so3_coeffs(double th, double *A, double *B, double *C)
{
    kr_pose_so3_coeffs(th, A, B, C);
}

static void skew(const double w[3], double W[9])
{
    kr_pose_skew(w, W);
}

kr_pose kr_pose_exp(const double x[6])
{
    return kr_pose_exp_hd(x);
}

void kr_pose_log(const kr_pose *a, double x[6])
{
    const double *R = a->R;
    double c = (R[0] + R[4] + R[8] - 1) * 0.5;
    c = c > 1 ? 1 : (c < -1 ? -1 : c);
    double th = acos(c);
    double w[3];
    if (th < 1e-6) {
        w[0] = 0.5 * (R[7] - R[5]);
        w[1] = 0.5 * (R[2] - R[6]);
        w[2] = 0.5 * (R[3] - R[1]);
    } else if (M_PI - th < 1e-4) {
        /* Near π the antisymmetric part vanishes: take the axis from R + I. */
        int k = (R[0] >= R[4] && R[0] >= R[8]) ? 0 : (R[4] >= R[8] ? 1 : 2);
        double v[3];
        for (int i = 0; i < 3; i++) v[i] = R[3 * i + k] + (i == k ? 1 : 0);
        double n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        /* Sign from the antisymmetric part so that exp(log(R)) == R. */
        double sgn[3] = {R[7] - R[5], R[2] - R[6], R[3] - R[1]};
        double d = sgn[0] * v[0] + sgn[1] * v[1] + sgn[2] * v[2];
        double s = d < 0 ? -1 : 1;
        for (int i = 0; i < 3; i++) w[i] = s * th * v[i] / n;
    } else {
        double f = th / (2 * sin(th));
        w[0] = f * (R[7] - R[5]);
        w[1] = f * (R[2] - R[6]);
        w[2] = f * (R[3] - R[1]);
    }
    th = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
    double A, B, C, W[9], W2[9];
    so3_coeffs(th, &A, &B, &C);
    skew(w, W);
    mat3_mul(W, W, W2);
    /* V⁻¹ = I − W/2 + (1/θ²)(1 − A/(2B)) W². */
    double k = th < 1e-4 ? 1.0 / 12 + th * th / 720 : (1 - A / (2 * B)) / (th * th);
    double Vi[9];
    for (int i = 0; i < 9; i++) Vi[i] = (i % 4 == 0 ? 1 : 0) - 0.5 * W[i] + k * W2[i];
    x[0] = w[0];
    x[1] = w[1];
    x[2] = w[2];
    for (int r = 0; r < 3; r++)
        x[3 + r] = Vi[3 * r] * a->t[0] + Vi[3 * r + 1] * a->t[1] + Vi[3 * r + 2] * a->t[2];
}

kr_pose kr_pose_interpolate(const kr_pose *a, const kr_pose *b, double u)
{
    kr_pose inv = kr_pose_inv(a), d = kr_pose_mul(&inv, b);
    double x[6];
    kr_pose_log(&d, x);
    for (int i = 0; i < 6; i++)
        x[i] *= u;
    kr_pose step = kr_pose_exp(x);
    return kr_pose_mul(a, &step);
}

double kr_pose_angle(const kr_pose *a)
{
    double c = (a->R[0] + a->R[4] + a->R[8] - 1) * 0.5;
    c = c > 1 ? 1 : (c < -1 ? -1 : c);
    return acos(c);
}

double kr_pose_translation_norm(const kr_pose *a)
{
    return sqrt(a->t[0] * a->t[0] + a->t[1] * a->t[1] + a->t[2] * a->t[2]);
}

void kr_pose_orthonormalize(kr_pose *a)
{
    kr_pose_orthonormalize_hd(a);
}

kr_status kr_solve_spd(int n, const double *A, const double *b, double *x)
{
    if (n <= 0 || n > 8) return kr_error(KR_ERR_INVALID_ARG, "kr_solve_spd: n=%d out of range", n);
    return kr_pose_solve_spd(n, A, b, x) ? KR_OK : KR_ERR_NUMERIC;
}

void kr_eigen_sym(int n, const double *A, double *eigenvalues, double *V)
{
    double a[64], v[64];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            a[i * 8 + j] = A[i * n + j];
            v[i * 8 + j] = i == j;
        }
    for (int sweep = 0; sweep < 50; sweep++) {
        double off = 0;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) off += a[i * 8 + j] * a[i * 8 + j];
        if (off < 1e-30) break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = a[p * 8 + q];
                if (fabs(apq) < 1e-300) continue;
                double theta = (a[q * 8 + q] - a[p * 8 + p]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) {
                    double akp = a[k * 8 + p], akq = a[k * 8 + q];
                    a[k * 8 + p] = c * akp - s * akq;
                    a[k * 8 + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) {
                    double apk = a[p * 8 + k], aqk = a[q * 8 + k];
                    a[p * 8 + k] = c * apk - s * aqk;
                    a[q * 8 + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < n; k++) {
                    double vkp = v[k * 8 + p], vkq = v[k * 8 + q];
                    v[k * 8 + p] = c * vkp - s * vkq;
                    v[k * 8 + q] = s * vkp + c * vkq;
                }
            }
    }
    /* Sort ascending, carrying eigenvectors along. */
    int idx[8];
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && a[idx[j] * 9] < a[idx[j - 1] * 9]; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        eigenvalues[i] = a[idx[i] * 9];
        if (V)
            for (int k = 0; k < n; k++) V[k * n + i] = v[k * 8 + idx[i]];
    }
}
