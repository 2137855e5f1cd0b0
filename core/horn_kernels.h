/* Horn's absolute orientation from accumulated moments, written once for the
 * host (core/horn.c, the CPU registration engine) and the device (the fused
 * CUDA registration engine solves it in a one-thread kernel, so the pose never
 * leaves the GPU between iterations).
 *
 * With weighted pairs (s_i → d_i, weight w_i), the moments are
 *   W = Σ w,  a = Σ w s,  b = Σ w d,  P = Σ w s dᵀ  (16 doubles: W, a, b, P row-major),
 * the centroids c_s = a/W, c_d = b/W and the centred cross-covariance
 *   S = Σ w (s − c_s)(d − c_d)ᵀ = P − W c_s c_dᵀ.
 * Engines accumulate P from coordinates already centred on the clouds'
 * centroids (pipeline/register/register.c), so the subtraction loses nothing.
 * N(S) below is Horn's 4×4 matrix (its derivation and the seed's typos are in
 * core/horn.c); R is the rotation of the unit eigenvector of N's largest
 * eigenvalue and t = c_d − R c_s. */
#ifndef KINREG_CORE_HORN_KERNELS_H
#define KINREG_CORE_HORN_KERNELS_H

#include <math.h>

#include "core/kr_hd.h"

/* Horn's N for S (S[3a+b] = S_ab, a from the source, b from the destination). */
static inline KR_HD void kr_horn_matrix(const double S[9], double N[16])
{
    const double Sxx = S[0], Sxy = S[1], Sxz = S[2];
    const double Syx = S[3], Syy = S[4], Syz = S[5];
    const double Szx = S[6], Szy = S[7], Szz = S[8];
    N[0] = Sxx + Syy + Szz;
    N[1] = Syz - Szy;
    N[2] = Szx - Sxz;
    N[3] = Sxy - Syx;
    N[5] = Sxx - Syy - Szz;
    N[6] = Sxy + Syx;
    N[7] = Szx + Sxz;
    N[10] = -Sxx + Syy - Szz;
    N[11] = Syz + Szy;
    N[15] = -Sxx - Syy + Szz;
    N[4] = N[1];
    N[8] = N[2];
    N[12] = N[3];
    N[9] = N[6];
    N[13] = N[7];
    N[14] = N[11];
}

/* Unit eigenvector q of the largest eigenvalue of the symmetric 4×4 A, by
 * cyclic Jacobi rotations in double (converges quadratically; 4×4 needs a
 * handful of sweeps). When the top eigenvalue is (numerically) double — the
 * rotation is undetermined — the column that Jacobi lands on is returned; it
 * is a valid minimiser. */
static inline KR_HD void kr_horn_eig4_top(const double A_in[16], double q[4])
{
    double a[16], v[16];
    for (int i = 0; i < 16; i++) {
        a[i] = A_in[i];
        v[i] = (i % 5 == 0) ? 1.0 : 0.0;
    }
    for (int sweep = 0; sweep < 40; sweep++) {
        double off = 0, diag = 0;
        for (int p = 0; p < 4; p++) {
            diag += a[5 * p] * a[5 * p];
            for (int r = p + 1; r < 4; r++)
                off += a[4 * p + r] * a[4 * p + r];
        }
        if (!(off > 1e-30 * diag)) break;
        for (int p = 0; p < 3; p++) {
            for (int r = p + 1; r < 4; r++) {
                double apq = a[4 * p + r];
                if (apq == 0.0) continue;
                double theta = (a[5 * r] - a[5 * p]) / (2.0 * apq);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < 4; k++) { /* columns: A·P */
                    double akp = a[4 * k + p], akq = a[4 * k + r];
                    a[4 * k + p] = c * akp - s * akq;
                    a[4 * k + r] = s * akp + c * akq;
                    double vkp = v[4 * k + p], vkq = v[4 * k + r];
                    v[4 * k + p] = c * vkp - s * vkq;
                    v[4 * k + r] = s * vkp + c * vkq;
                }
                for (int k = 0; k < 4; k++) { /* rows: Pᵀ·(A·P) */
                    double apk = a[4 * p + k], aqk = a[4 * r + k];
                    a[4 * p + k] = c * apk - s * aqk;
                    a[4 * r + k] = s * apk + c * aqk;
                }
            }
        }
    }
    int best = 0;
    for (int k = 1; k < 4; k++)
        if (a[5 * k] > a[5 * best]) best = k;
    double nrm = 0;
    for (int k = 0; k < 4; k++)
        nrm += v[4 * k + best] * v[4 * k + best];
    nrm = sqrt(nrm);
    for (int k = 0; k < 4; k++)
        q[k] = v[4 * k + best] / nrm;
}

/* The same eigenvector by the quaternion characteristic polynomial (QCP,
 * Theobald 2005): far fewer divisions and square roots than Jacobi, which
 * matters where one GPU thread solves Horn between two kernels (the fused
 * registration engine: a Jacobi solve took ~10 µs of each ~80 µs step).
 *
 * N is symmetric and traceless (its diagonal sums to zero), so with
 * p_k = tr(Nᵏ) Newton's identities give the characteristic polynomial
 *   P(λ) = λ⁴ − (p₂/2) λ² − (p₃/3) λ + det N.
 * All its roots are real and Σλ² = p₂, so √p₂ bounds the largest from above;
 * P is convex right of its largest root, so Newton's iteration from √p₂
 * falls monotonically onto it. The eigenvector is then any non-zero column
 * of adj(N − λI) = Π_{j≠max}(λ_j − λ) v vᵀ: the column of largest norm.
 * When the top eigenvalue is (nearly) double that product vanishes and the
 * direction is undetermined by this route; returns −1 and the caller falls
 * back to Jacobi. Returns 0 with q set otherwise. */
static inline KR_HD double kr_horn_det3(double a, double b, double c, double d, double e, double f,
                                        double g, double h, double i)
{
    return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g);
}

/* The x-th (0..2) of the indices 0..3 other than e. */
static inline KR_HD int kr_horn_other_index(int e, int x)
{
    return x + (x >= e);
}

/* Term c (0..3) of det N expanded by cofactors along the first row. */
static inline KR_HD double kr_horn_det4_term(const double N[16], int c)
{
    int c0 = kr_horn_other_index(c, 0), c1 = kr_horn_other_index(c, 1),
        c2 = kr_horn_other_index(c, 2);
    return (c % 2 ? -1.0 : 1.0) * N[c] *
           kr_horn_det3(N[4 + c0], N[4 + c1], N[4 + c2], N[8 + c0], N[8 + c1], N[8 + c2],
                        N[12 + c0], N[12 + c1], N[12 + c2]);
}

/* QCP's root search, written once for the host and the GPU's warp form
 * (pipeline/register/register_persistent.cu): Newton's iteration on
 * P(λ) = λ⁴ − (p₂/2) λ² − (p₃/3) λ + det N from √p₂. Returns 1 with *lambda
 * the largest root, or 0 where it does not converge (a double root: the
 * caller falls back to Jacobi). */
static inline KR_HD int kr_horn_qcp_root(double p2, double p3, double det, double *lambda)
{
    const double c2 = -0.5 * p2, c1 = -p3 / 3.0, c0 = det;
    const double tol = 1e-15 * sqrt(p2);
    double l = sqrt(p2);
    for (int it = 0; it < 60; it++) {
        double l2 = l * l;
        double f = (l2 + c2) * l2 + c1 * l + c0;
        double df = 4 * l2 * l + 2 * c2 * l + c1;
        if (!(df > 0)) return 0; /* a double root at λ: leave it to Jacobi */
        double step = f / df;
        l -= step;
        if (fabs(step) <= tol) {
            *lambda = l;
            return 1;
        }
    }
    return 0;
}

/* Entry (row, col) of adj(N − λI): the signed minor of M = N − λI without
 * column `row` and row `col` (M is symmetric). */
static inline KR_HD double kr_horn_qcp_adj(const double N[16], double l, int row, int col)
{
    double m[9];
    for (int a = 0; a < 3; a++) {
        int r = kr_horn_other_index(col, a);
        for (int b = 0; b < 3; b++) {
            int k = kr_horn_other_index(row, b);
            m[3 * a + b] = N[4 * r + k] - (r == k ? l : 0.0);
        }
    }
    return ((row + col) % 2 ? -1.0 : 1.0) *
           kr_horn_det3(m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8]);
}

/* Whether the adj column of squared norm `best` determines the eigenvector:
 * |adj column| ~ Π gaps to the other eigenvalues (times N's scale³); below
 * this the gap to the second eigenvalue is too small to trust. */
static inline KR_HD int kr_horn_qcp_trusted(double best, double p2)
{
    return best > 1e-18 * p2 * p2 * p2;
}

static inline KR_HD int kr_horn_qcp_top(const double N[16], double q[4])
{
    double p2 = 0, p3 = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double n2 = 0;
            for (int k = 0; k < 4; k++)
                n2 += N[4 * i + k] * N[4 * k + j];
            if (i == j) p2 += n2;
            p3 += n2 * N[4 * j + i];
        }
    if (!(p2 > 0) || !isfinite(p2)) return -1;
    double det = 0;
    for (int c = 0; c < 4; c++)
        det += kr_horn_det4_term(N, c);
    double l;
    if (!kr_horn_qcp_root(p2, p3, det, &l)) return -1;
    /* adj(N − λI) column by column; the column of largest norm. */
    double best = 0, v[4] = {0, 0, 0, 0};
    for (int col = 0; col < 4; col++) {
        double a[4], n2 = 0;
        for (int row = 0; row < 4; row++) {
            a[row] = kr_horn_qcp_adj(N, l, row, col);
            n2 += a[row] * a[row];
        }
        if (n2 > best) {
            best = n2;
            for (int k = 0; k < 4; k++)
                v[k] = a[k];
        }
    }
    if (!kr_horn_qcp_trusted(best, p2)) return -1;
    double nrm = sqrt(best);
    for (int k = 0; k < 4; k++)
        q[k] = v[k] / nrm;
    return 0;
}

/* Rotation (row-major) of the unit quaternion q = (w, x, y, z). */
static inline KR_HD void kr_horn_quat_to_rot(const double q[4], double R[9])
{
    double w = q[0], x = q[1], y = q[2], z = q[3];
    R[0] = 1 - 2 * (y * y + z * z);
    R[1] = 2 * (x * y - w * z);
    R[2] = 2 * (x * z + w * y);
    R[3] = 2 * (x * y + w * z);
    R[4] = 1 - 2 * (x * x + z * z);
    R[5] = 2 * (y * z - w * x);
    R[6] = 2 * (x * z - w * y);
    R[7] = 2 * (y * z + w * x);
    R[8] = 1 - 2 * (x * x + y * y);
}

/* The pose (R, t) minimising Σ w ‖d − (R s + t)‖² from the 16 moments above.
 * Returns 0, or −1 when the total weight is not positive and finite (R and t
 * are then left alone). */
static inline KR_HD int kr_horn_from_moments(const double mom[16], double R[9], double t[3])
{
    double W = mom[0];
    if (!(W > 0) || !isfinite(W)) return -1;
    double cs[3], cd[3], S[9], N[16], q[4];
    /* Reciprocals, not divisions: a double division is a long software
     * sequence on the GPU, where this runs on one thread every Horn step. */
    const double inv_w = 1.0 / W;
    for (int k = 0; k < 3; k++) {
        cs[k] = mom[1 + k] * inv_w;
        cd[k] = mom[4 + k] * inv_w;
    }
    double scale = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            S[3 * a + b] = mom[7 + 3 * a + b] - W * cs[a] * cd[b];
            scale = fmax(scale, fabs(S[3 * a + b]));
        }
    if (!isfinite(scale)) return -1;
    if (scale > 0) {
        /* Normalised so that Jacobi's relative threshold sees O(1) numbers. */
        const double inv_scale = 1.0 / scale;
        for (int i = 0; i < 9; i++)
            S[i] *= inv_scale;
        kr_horn_matrix(S, N);
        if (kr_horn_qcp_top(N, q) != 0) kr_horn_eig4_top(N, q);
    } else {
        q[0] = 1;
        q[1] = q[2] = q[3] = 0;
    }
    kr_horn_quat_to_rot(q, R);
    for (int k = 0; k < 3; k++)
        t[k] = cd[k] - (R[3 * k] * cs[0] + R[3 * k + 1] * cs[1] + R[3 * k + 2] * cs[2]);
    return 0;
}

#endif
