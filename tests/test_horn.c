/* kr_horn (Horn's quaternion method) against an independent solution: the
 * weighted Kabsch/Umeyama SVD computed here with a one-sided Jacobi SVD that
 * shares no code with the library's eigen solver. */
#include "kr_test.h"

#include <stdlib.h>

#include "kinreg/eval.h"
#include "kinreg/pose.h"

/* Random rotation from a normalised Gaussian quaternion (uniform on SO(3)),
 * built as a matrix here rather than with the library's conversions. */
static void random_rotation(unsigned *s, double R[9])
{
    double a = kr_nrand(s), b = kr_nrand(s), c = kr_nrand(s), d = kr_nrand(s);
    double n = sqrt(a * a + b * b + c * c + d * d);
    a /= n, b /= n, c /= n, d /= n; /* a = w */
    double M[9] = {a * a + b * b - c * c - d * d, 2 * (b * c - a * d),
                   2 * (b * d + a * c),           2 * (b * c + a * d),
                   a * a - b * b + c * c - d * d, 2 * (c * d - a * b),
                   2 * (b * d - a * c),           2 * (c * d + a * b),
                   a * a - b * b - c * c + d * d};
    memcpy(R, M, sizeof M);
}

static double det3(const double *A)
{
    return A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) +
           A[2] * (A[3] * A[7] - A[4] * A[6]);
}

/* One-sided Jacobi SVD of a 3×3 matrix: rotate column pairs of U (= A
 * initially) until they are orthogonal, accumulating the rotations in V; then
 * A = U Σ Vᵀ with Σ the column norms. Row-major. */
static void svd3(const double *A, double *U, double *sig, double *V)
{
    memcpy(U, A, 9 * sizeof *A);
    for (int i = 0; i < 9; i++)
        V[i] = (i % 4 == 0);
    for (int sweep = 0; sweep < 60; sweep++) {
        double off = 0;
        for (int p = 0; p < 3; p++)
            for (int q = p + 1; q < 3; q++) {
                double al = 0, be = 0, ga = 0;
                for (int k = 0; k < 3; k++) {
                    al += U[3 * k + p] * U[3 * k + p];
                    be += U[3 * k + q] * U[3 * k + q];
                    ga += U[3 * k + p] * U[3 * k + q];
                }
                if (ga == 0) continue;
                off = fmax(off, fabs(ga) / sqrt(al * be));
                double zeta = (be - al) / (2 * ga);
                double t = (zeta >= 0 ? 1 : -1) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                double c = 1 / sqrt(1 + t * t), s = c * t;
                for (int k = 0; k < 3; k++) {
                    double up = U[3 * k + p], uq = U[3 * k + q];
                    U[3 * k + p] = c * up - s * uq;
                    U[3 * k + q] = s * up + c * uq;
                    double vp = V[3 * k + p], vq = V[3 * k + q];
                    V[3 * k + p] = c * vp - s * vq;
                    V[3 * k + q] = s * vp + c * vq;
                }
            }
        if (off < 1e-15) break;
    }
    for (int j = 0; j < 3; j++) {
        double n = sqrt(U[j] * U[j] + U[3 + j] * U[3 + j] + U[6 + j] * U[6 + j]);
        sig[j] = n;
        for (int k = 0; k < 3; k++)
            U[3 * k + j] = n > 0 ? U[3 * k + j] / n : 0;
    }
}

/* Weighted Kabsch/Umeyama: H = Σ w (s − c_s)(d − c_d)ᵀ = U Σ Vᵀ,
 * R = V diag(1, 1, sign det(V Uᵀ)) Uᵀ, t = c_d − R c_s. */
static void kabsch(const double *src, const double *dst, const double *w, size_t n, double R[9],
                   double t[3])
{
    double W = 0, cs[3] = {0}, cd[3] = {0}, H[9] = {0};
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1;
        W += wi;
        for (int k = 0; k < 3; k++)
            cs[k] += wi * src[3 * i + k], cd[k] += wi * dst[3 * i + k];
    }
    for (int k = 0; k < 3; k++)
        cs[k] /= W, cd[k] /= W;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1;
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                H[3 * r + c] += wi * (src[3 * i + r] - cs[r]) * (dst[3 * i + c] - cd[c]);
    }
    double U[9], sig[3], V[9], VUt[9];
    svd3(H, U, sig, V);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            VUt[3 * r + c] =
                V[3 * r] * U[3 * c] + V[3 * r + 1] * U[3 * c + 1] + V[3 * r + 2] * U[3 * c + 2];
    double d = det3(VUt) < 0 ? -1 : 1;
    /* Reflection fix: flip the direction of the smallest singular value. */
    int m = 0;
    for (int j = 1; j < 3; j++)
        if (sig[j] < sig[m]) m = j;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            double s = 0;
            for (int k = 0; k < 3; k++)
                s += V[3 * r + k] * (k == m ? d : 1) * U[3 * c + k];
            R[3 * r + c] = s;
        }
    for (int r = 0; r < 3; r++)
        t[r] = cd[r] - (R[3 * r] * cs[0] + R[3 * r + 1] * cs[1] + R[3 * r + 2] * cs[2]);
}

static void apply(const double R[9], const double t[3], const double *p, double *out)
{
    for (int r = 0; r < 3; r++)
        out[r] = R[3 * r] * p[0] + R[3 * r + 1] * p[1] + R[3 * r + 2] * p[2] + t[r];
}

static double weighted_sse(const double *src, const double *dst, const double *w, size_t n,
                           const double R[9], const double t[3])
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double p[3];
        apply(R, t, src + 3 * i, p);
        double d2 = 0;
        for (int k = 0; k < 3; k++)
            d2 += (p[k] - dst[3 * i + k]) * (p[k] - dst[3 * i + k]);
        e += (w ? w[i] : 1) * d2;
    }
    return e;
}

static void check_rotation(const kr_pose *T)
{
    double RRt[9];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            RRt[3 * r + c] = T->R[3 * r] * T->R[3 * c] + T->R[3 * r + 1] * T->R[3 * c + 1] +
                             T->R[3 * r + 2] * T->R[3 * c + 2];
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(RRt[i], i % 4 == 0, 1e-12);
    CHECK_NEAR(det3(T->R), 1, 1e-12);
}

KR_TEST(horn, matches_weighted_svd_on_noisy_data)
{
    unsigned s = 1234;
    for (int trial = 0; trial < 100; trial++) {
        size_t n = 3 + (size_t)(kr_urand(&s) * 200);
        double *src = malloc(n * 3 * sizeof *src), *dst = malloc(n * 3 * sizeof *dst),
               *w = malloc(n * sizeof *w);
        REQUIRE(src && dst && w);
        double R0[9], t0[3], off[3];
        random_rotation(&s, R0);
        for (int k = 0; k < 3; k++)
            t0[k] = 4 * kr_urand(&s) - 2, off[k] = 10 * kr_urand(&s) - 5;
        double noise = trial % 2 ? 0.05 : 0.005;
        for (size_t i = 0; i < n; i++) {
            /* Point clouds away from the origin exercise the centring. */
            for (int k = 0; k < 3; k++)
                src[3 * i + k] = off[k] + 2 * kr_urand(&s) - 1;
            apply(R0, t0, src + 3 * i, dst + 3 * i);
            for (int k = 0; k < 3; k++)
                dst[3 * i + k] += noise * kr_nrand(&s);
            w[i] = 0.05 + kr_urand(&s);
        }
        kr_pose T;
        REQUIRE_OK(kr_horn(src, dst, w, n, &T));
        double R1[9], t1[3];
        kabsch(src, dst, w, n, R1, t1);
        for (int i = 0; i < 9; i++)
            CHECK_NEAR(T.R[i], R1[i], 1e-9);
        for (int i = 0; i < 3; i++)
            CHECK_NEAR(T.t[i], t1[i], 1e-9);
        check_rotation(&T);
        /* Same answer unweighted as well. */
        REQUIRE_OK(kr_horn(src, dst, NULL, n, &T));
        kabsch(src, dst, NULL, n, R1, t1);
        for (int i = 0; i < 9; i++)
            CHECK_NEAR(T.R[i], R1[i], 1e-9);
        for (int i = 0; i < 3; i++)
            CHECK_NEAR(T.t[i], t1[i], 1e-9);
        free(src);
        free(dst);
        free(w);
        if (kr_test_failed()) return;
    }
}

KR_TEST(horn, exact_recovery_without_noise)
{
    unsigned s = 99;
    for (int trial = 0; trial < 50; trial++) {
        enum { n = 17 };
        double src[3 * n], dst[3 * n], R0[9], t0[3];
        random_rotation(&s, R0);
        for (int k = 0; k < 3; k++)
            t0[k] = 6 * kr_urand(&s) - 3;
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < 3; k++)
                src[3 * i + k] = 2 * kr_urand(&s) - 1;
            apply(R0, t0, src + 3 * i, dst + 3 * i);
        }
        kr_pose T;
        REQUIRE_OK(kr_horn(src, dst, NULL, n, &T));
        for (int i = 0; i < 9; i++)
            CHECK_NEAR(T.R[i], R0[i], 1e-12);
        for (int i = 0; i < 3; i++)
            CHECK_NEAR(T.t[i], t0[i], 1e-12);
    }
    /* Near 180°, where a quaternion's scalar part vanishes. */
    double R0[9] = {-1, 0, 0, 0, -1, 0, 0, 0, 1}, t0[3] = {0.5, 0, -1};
    double src[12] = {0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3}, dst[12];
    for (int i = 0; i < 4; i++)
        apply(R0, t0, src + 3 * i, dst + 3 * i);
    kr_pose T;
    REQUIRE_OK(kr_horn(src, dst, NULL, 4, &T));
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(T.R[i], R0[i], 1e-12);
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(T.t[i], t0[i], 1e-12);
}

KR_TEST(horn, three_points_are_enough)
{
    double R0[9], t0[3] = {0.1, 0.2, 0.3};
    unsigned s = 5;
    random_rotation(&s, R0);
    double src[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, dst[9];
    for (int i = 0; i < 3; i++)
        apply(R0, t0, src + 3 * i, dst + 3 * i);
    kr_pose T;
    REQUIRE_OK(kr_horn(src, dst, NULL, 3, &T));
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(T.R[i], R0[i], 1e-12);
}

KR_TEST(horn, weights_select_points)
{
    /* Zero weights remove outliers entirely: the result equals Horn on the
     * inliers alone. */
    unsigned s = 77;
    enum { n = 40 };
    double src[3 * n], dst[3 * n], w[n], R0[9], t0[3] = {1, -1, 0.5};
    random_rotation(&s, R0);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++)
            src[3 * i + k] = 2 * kr_urand(&s) - 1;
        apply(R0, t0, src + 3 * i, dst + 3 * i);
        w[i] = 1;
        if (i % 4 == 0) {
            for (int k = 0; k < 3; k++)
                dst[3 * i + k] += 3 * kr_nrand(&s);
            w[i] = 0;
        }
    }
    kr_pose T;
    REQUIRE_OK(kr_horn(src, dst, w, n, &T));
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(T.R[i], R0[i], 1e-12);
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(T.t[i], t0[i], 1e-12);
}

KR_TEST(horn, collinear_points_give_a_minimiser)
{
    /* Points on a line: rotation about the line is free. The answer must still
     * be a proper rotation with zero residual, and kr_horn picks the one
     * closest to the identity. */
    double R0[9], t0[3] = {0.3, -0.2, 1.0};
    unsigned s = 3;
    random_rotation(&s, R0);
    enum { n = 10 };
    double src[3 * n], dst[3 * n], u[3] = {0.6, 0.0, 0.8};
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++)
            src[3 * i + k] = (i - 4.5) * 0.2 * u[k] + (k == 1 ? 2 : 0);
        apply(R0, t0, src + 3 * i, dst + 3 * i);
    }
    kr_pose T;
    REQUIRE_OK(kr_horn(src, dst, NULL, n, &T));
    check_rotation(&T);
    CHECK_LT(weighted_sse(src, dst, NULL, n, T.R, T.t), 1e-20);
    /* A line translated along itself: the identity rotation fits exactly and is
     * the closest to the identity, so kr_horn must return it. */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            dst[3 * i + k] = src[3 * i + k] + 0.5 * u[k];
    REQUIRE_OK(kr_horn(src, dst, NULL, n, &T));
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(T.R[i], i % 4 == 0, 1e-9);
    for (int k = 0; k < 3; k++)
        CHECK_NEAR(T.t[k], 0.5 * u[k], 1e-9);
}

KR_TEST(horn, coincident_points_give_a_translation)
{
    double src[9] = {1, 2, 3, 1, 2, 3, 1, 2, 3}, dst[9] = {0, 0, 1, 0, 0, 1, 0, 0, 1};
    kr_pose T;
    REQUIRE_OK(kr_horn(src, dst, NULL, 3, &T));
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(T.R[i], i % 4 == 0, 0);
    CHECK_NEAR(T.t[0], -1, 1e-15);
    CHECK_NEAR(T.t[1], -2, 1e-15);
    CHECK_NEAR(T.t[2], -2, 1e-15);
}

KR_TEST(horn, degenerate_input_is_an_error)
{
    double src[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, dst[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
    double zero[3] = {0, 0, 0}, neg[3] = {1, -1, 1}, nan_w[3] = {1, NAN, 1};
    kr_pose T = kr_pose_identity(), before;
    T.t[0] = 42;
    before = T;
    CHECK_STATUS(kr_horn(src, dst, NULL, 2, &T), KR_ERR_EMPTY);
    CHECK_STATUS(kr_horn(src, dst, NULL, 0, &T), KR_ERR_EMPTY);
    CHECK_STATUS(kr_horn(src, dst, zero, 3, &T), KR_ERR_EMPTY);
    CHECK_STATUS(kr_horn(src, dst, neg, 3, &T), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_horn(src, dst, nan_w, 3, &T), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_horn(NULL, dst, NULL, 3, &T), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_horn(src, dst, NULL, 3, NULL), KR_ERR_INVALID_ARG);
    double bad[9] = {0, 0, 0, INFINITY, 0, 0, 0, 1, 0};
    CHECK_STATUS(kr_horn(bad, dst, NULL, 3, &T), KR_ERR_INVALID_ARG);
    /* A failed call leaves its output untouched. */
    CHECK(memcmp(&T, &before, sizeof T) == 0);
}
