/* SE(3) algebra against independent computations: exp/log round trips,
 * finite-difference derivatives, quaternion <-> matrix, solvers. */
#include "kr_test.h"

#include <stdlib.h>

#include "kinreg/pose.h"

static void random_twist(unsigned *s, double x[6], double max_angle)
{
    for (int i = 0; i < 3; i++) x[i] = (2 * kr_urand(s) - 1) * max_angle / sqrt(3.0);
    for (int i = 3; i < 6; i++) x[i] = (2 * kr_urand(s) - 1);
}

static double pose_diff(const kr_pose *a, const kr_pose *b)
{
    double d = 0;
    for (int i = 0; i < 9; i++) d = fmax(d, fabs(a->R[i] - b->R[i]));
    for (int i = 0; i < 3; i++) d = fmax(d, fabs(a->t[i] - b->t[i]));
    return d;
}

KR_TEST(pose, exp_log_round_trip)
{
    unsigned s = 7;
    for (int k = 0; k < 200; k++) {
        double x[6], y[6];
        random_twist(&s, x, k < 100 ? 3.0 : 1e-6);
        kr_pose T = kr_pose_exp(x);
        kr_pose_log(&T, y);
        for (int i = 0; i < 6; i++) CHECK_NEAR(x[i], y[i], 1e-9);
    }
}

KR_TEST(pose, exp_is_orthonormal_and_matches_rodrigues)
{
    /* Rotation about z by θ must be the textbook matrix. */
    double th = 0.7, x[6] = {0, 0, th, 0, 0, 0};
    kr_pose T = kr_pose_exp(x);
    CHECK_NEAR(T.R[0], cos(th), 1e-12);
    CHECK_NEAR(T.R[1], -sin(th), 1e-12);
    CHECK_NEAR(T.R[3], sin(th), 1e-12);
    CHECK_NEAR(T.R[8], 1, 1e-12);
    /* Pure translation twist is a pure translation. */
    double y[6] = {0, 0, 0, 0.1, -0.2, 0.3};
    kr_pose U = kr_pose_exp(y);
    CHECK_NEAR(U.t[1], -0.2, 1e-15);
}

KR_TEST(pose, exp_derivative_matches_finite_differences)
{
    /* d/dα exp(α x)·p at α = 0 equals θ × p + t: the linearisation Q(p) x. */
    double x[6] = {0.3, -0.2, 0.5, 0.1, 0.4, -0.3}, p[3] = {0.5, -1.0, 2.0};
    double h = 1e-6, xp[6], xm[6], a[3], b[3];
    for (int i = 0; i < 6; i++) {
        xp[i] = h * x[i];
        xm[i] = -h * x[i];
    }
    kr_pose Tp = kr_pose_exp(xp), Tm = kr_pose_exp(xm);
    kr_pose_apply(&Tp, p, a);
    kr_pose_apply(&Tm, p, b);
    double expect[3] = {x[1] * p[2] - x[2] * p[1] + x[3], x[2] * p[0] - x[0] * p[2] + x[4],
                        x[0] * p[1] - x[1] * p[0] + x[5]};
    for (int i = 0; i < 3; i++) CHECK_NEAR((a[i] - b[i]) / (2 * h), expect[i], 1e-6);
}

KR_TEST(pose, quaternion_round_trip)
{
    unsigned s = 11;
    for (int k = 0; k < 200; k++) {
        double x[6];
        random_twist(&s, x, 3.1);
        kr_pose T = kr_pose_exp(x);
        kr_quat q = kr_pose_to_quat(&T);
        CHECK_NEAR(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w, 1, 1e-12);
        kr_pose U = kr_pose_from_quat(q, T.t);
        CHECK_LT(pose_diff(&T, &U), 1e-10);
    }
    /* 180° about x: q = (1, 0, 0, 0). */
    double x[6] = {M_PI, 0, 0, 0, 0, 0};
    kr_pose T = kr_pose_exp(x);
    kr_quat q = kr_pose_to_quat(&T);
    CHECK_NEAR(fabs(q.x), 1, 1e-9);
}

KR_TEST(pose, inverse_and_composition)
{
    unsigned s = 3;
    for (int k = 0; k < 50; k++) {
        double x[6], y[6], p[3] = {kr_urand(&s), kr_urand(&s), kr_urand(&s)}, a[3], b[3], c[3];
        random_twist(&s, x, 2);
        random_twist(&s, y, 2);
        kr_pose A = kr_pose_exp(x), B = kr_pose_exp(y);
        kr_pose AB = kr_pose_mul(&A, &B);
        kr_pose_apply(&B, p, a);
        kr_pose_apply(&A, a, b);
        kr_pose_apply(&AB, p, c);
        for (int i = 0; i < 3; i++) CHECK_NEAR(b[i], c[i], 1e-12);
        kr_pose Ai = kr_pose_inv(&A), I = kr_pose_mul(&Ai, &A), Id = kr_pose_identity();
        CHECK_LT(pose_diff(&I, &Id), 1e-12);
    }
}

KR_TEST(pose, spd_solve_and_eigen)
{
    unsigned s = 5;
    double M[36], A[36], x[6], b[6], y[6], ev[6], V[36];
    for (int i = 0; i < 36; i++) M[i] = 2 * kr_urand(&s) - 1;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            A[i * 6 + j] = (i == j) ? 0.5 : 0;
            for (int k = 0; k < 6; k++) A[i * 6 + j] += M[k * 6 + i] * M[k * 6 + j];
        }
    for (int i = 0; i < 6; i++) x[i] = kr_urand(&s);
    for (int i = 0; i < 6; i++) {
        b[i] = 0;
        for (int j = 0; j < 6; j++) b[i] += A[i * 6 + j] * x[j];
    }
    CHECK_OK(kr_solve_spd(6, A, b, y));
    for (int i = 0; i < 6; i++) CHECK_NEAR(x[i], y[i], 1e-9);
    kr_eigen_sym(6, A, ev, V);
    for (int k = 0; k < 6; k++) {
        if (k) CHECK_LE(ev[k - 1], ev[k]);
        for (int i = 0; i < 6; i++) {
            double Av = 0;
            for (int j = 0; j < 6; j++) Av += A[i * 6 + j] * V[j * 6 + k];
            CHECK_NEAR(Av, ev[k] * V[i * 6 + k], 1e-9);
        }
    }
    double neg[4] = {1, 2, 2, 1}; /* indefinite */
    CHECK_STATUS(kr_solve_spd(2, neg, b, y), KR_ERR_NUMERIC);
}

/* Interpolation along the screw motion: the ends are a and b, and a constant
 * twist's steps add up — a · exp(u x) for b = a · exp(x), checked against
 * kr_pose_exp of the scaled twist itself. */
KR_TEST(pose, interpolate_follows_the_screw_motion)
{
    unsigned s = 11;
    for (int k = 0; k < 100; k++) {
        double xa[6], x[6], ux[6];
        random_twist(&s, xa, 3.0);
        random_twist(&s, x, 2.5);
        kr_pose a = kr_pose_exp(xa), step = kr_pose_exp(x), b = kr_pose_mul(&a, &step);
        kr_pose at0 = kr_pose_interpolate(&a, &b, 0), at1 = kr_pose_interpolate(&a, &b, 1);
        CHECK_LT(pose_diff(&at0, &a), 1e-9);
        CHECK_LT(pose_diff(&at1, &b), 1e-9);
        double u = kr_urand(&s);
        for (int i = 0; i < 6; i++)
            ux[i] = u * x[i];
        kr_pose part = kr_pose_exp(ux), want = kr_pose_mul(&a, &part);
        kr_pose got = kr_pose_interpolate(&a, &b, u);
        CHECK_LT(pose_diff(&got, &want), 1e-9);
    }
}
