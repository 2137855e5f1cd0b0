/* kr_register (EM-ICP and Softassign, CPU engine) against independent
 * expectations: one Horn step against a brute-force double-precision
 * evaluation of the seed's formulas followed by kr_horn (itself tested
 * against an SVD solution in test_horn.c); known motions of real bunny scans;
 * bad inputs. */
#include "kr_test.h"

#include <stdlib.h>
#include <string.h>

#include "anchor_surface.h"
#include "kinreg/scan.h"
#include "core/horn_kernels.h"
#include "pipeline/register/coarse_to_fine.h"
#include "pipeline/register/softreg_kernels.h"
#include "kinreg/horn.h"
#include "kinreg/register.h"

static void random_cloud(unsigned *s, float *p, size_t n, double radius)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            p[3 * i + k] = (float)(radius * (2 * kr_urand(s) - 1));
}

static kr_pose pose_from_axis(double ax, double ay, double az, double deg, double tx, double ty,
                              double tz)
{
    double n = sqrt(ax * ax + ay * ay + az * az), h = deg * M_PI / 360;
    kr_quat q = {ax / n * sin(h), ay / n * sin(h), az / n * sin(h), cos(h)};
    double t[3] = {tx, ty, tz};
    return kr_pose_from_quat(q, t);
}

static void move_points(const kr_pose *T, const float *in, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        double p[3] = {in[3 * i], in[3 * i + 1], in[3 * i + 2]}, q[3];
        kr_pose_apply(T, p, q);
        for (int k = 0; k < 3; k++)
            out[3 * i + k] = (float)q[k];
    }
}

/* Rotation angle (degrees) and translation distance (m) between two poses. */
static void pose_error(const kr_pose *a, const kr_pose *b, double *deg, double *dist)
{
    kr_pose ia = kr_pose_inv(a), d = kr_pose_mul(&ia, b);
    *deg = kr_pose_angle(&d) * 180 / M_PI;
    double dt[3] = {a->t[0] - b->t[0], a->t[1] - b->t[1], a->t[2] - b->t[2]};
    *dist = sqrt(dt[0] * dt[0] + dt[1] * dt[1] + dt[2] * dt[2]);
}

static kr_device *cpu_device(void)
{
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CPU;
    kr_device *dev = NULL;
    if (kr_device_create(&dev, &dc) != KR_OK) return NULL;
    return dev;
}

/* ---- the shared Horn step ------------------------------------------------- */

KR_TEST(register, horn_from_moments_matches_kr_horn)
{
    unsigned s = 11;
    enum { N = 60 };
    double src[3 * N], dst[3 * N], w[N], mom[16] = {0};
    kr_pose T = pose_from_axis(0.3, -1, 0.4, 70, 0.2, -0.1, 0.05);
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 3; k++)
            src[3 * i + k] = kr_nrand(&s) * 0.1;
        kr_pose_apply(&T, src + 3 * i, dst + 3 * i);
        for (int k = 0; k < 3; k++)
            dst[3 * i + k] += 0.002 * kr_nrand(&s);
        w[i] = kr_urand(&s) + 0.1;
        kr_register_moments_add(mom, w[i], src + 3 * i, dst + 3 * i);
    }
    kr_pose ref;
    REQUIRE_OK(kr_horn(src, dst, w, N, &ref));
    double R[9], t[3];
    CHECK_EQ(kr_horn_from_moments(mom, R, t), 0);
    for (int k = 0; k < 9; k++)
        CHECK_NEAR(R[k], ref.R[k], 1e-9);
    for (int k = 0; k < 3; k++)
        CHECK_NEAR(t[k], ref.t[k], 1e-9);
    double zero[16] = {0};
    CHECK_EQ(kr_horn_from_moments(zero, R, t), -1);
}

KR_TEST(register, eig4_matches_kr_eigen_sym)
{
    unsigned s = 5;
    for (int trial = 0; trial < 50; trial++) {
        double A[16], ev[4], V[16], q[4];
        for (int i = 0; i < 4; i++)
            for (int j = i; j < 4; j++)
                A[4 * i + j] = A[4 * j + i] = kr_nrand(&s);
        kr_eigen_sym(4, A, ev, V);
        kr_horn_eig4_top(A, q);
        double dot = 0;
        for (int k = 0; k < 4; k++)
            dot += q[k] * V[4 * k + 3];
        CHECK_NEAR(fabs(dot), 1.0, 1e-9);
    }
}

KR_TEST(register, qcp_matches_kr_eigen_sym_or_declines)
{
    /* Horn matrices of random cross-covariances: the polynomial route must
     * give the top eigenvector of an independent symmetric eigensolver. */
    unsigned s = 9;
    int solved = 0;
    for (int trial = 0; trial < 200; trial++) {
        double S[9], N[16], ev[4], V[16], q[4];
        for (int k = 0; k < 9; k++)
            S[k] = kr_nrand(&s);
        kr_horn_matrix(S, N);
        kr_eigen_sym(4, N, ev, V);
        if (kr_horn_qcp_top(N, q) != 0) continue;
        solved++;
        double dot = 0;
        for (int k = 0; k < 4; k++)
            dot += q[k] * V[4 * k + 3];
        CHECK_NEAR(fabs(dot), 1.0, 1e-9);
    }
    CHECK_EQ(solved, 200);
    /* A double top eigenvalue (S = diag(1, 1, -1) gives N = diag(1, 1, 1, -3)):
     * the direction is undetermined by cofactors, so QCP must decline and
     * leave it to Jacobi. */
    double S[9] = {1, 0, 0, 0, 1, 0, 0, 0, -1}, N[16], q[4];
    kr_horn_matrix(S, N);
    CHECK_EQ(kr_horn_qcp_top(N, q), -1);
}

KR_TEST(register, qcp_pieces_match_kr_eigen_sym)
{
    /* The pieces QCP is built from, shared by the host's kr_horn_qcp_top and the
     * GPU's warp form (pipeline/register/persistent_kernel.cuh), each against an
     * independent symmetric eigensolver: det N as the product of the
     * eigenvalues, the root search's λ as the top eigenvalue, and a column of
     * adj(N − λI) along the top eigenvector. */
    unsigned s = 21;
    int declined = 0;
    for (int trial = 0; trial < 200; trial++) {
        double S[9], N[16], ev[4], V[16];
        for (int k = 0; k < 9; k++)
            S[k] = kr_nrand(&s);
        kr_horn_matrix(S, N);
        kr_eigen_sym(4, N, ev, V);
        double p2 = 0, p3 = 0, det = 0, scale = 0;
        for (int k = 0; k < 4; k++) {
            p2 += ev[k] * ev[k];
            p3 += ev[k] * ev[k] * ev[k];
            scale = fmax(scale, fabs(ev[k]));
        }
        for (int c = 0; c < 4; c++)
            det += kr_horn_det4_term(N, c);
        CHECK_NEAR(det, ev[0] * ev[1] * ev[2] * ev[3], 1e-10 * scale * scale * scale * scale);
        double l = 0;
        if (!kr_horn_qcp_root(p2, p3, det, &l)) {
            /* It may decline only where the top two eigenvalues are close
             * (the polynomial's noise then outweighs its slope). */
            CHECK_LT(ev[3] - ev[2], 0.05 * scale);
            declined++;
            continue;
        }
        CHECK_NEAR(l, ev[3], 1e-10 * scale);
        int best = 0;
        double a[4][4], bestn = 0;
        for (int col = 0; col < 4; col++) {
            double n2 = 0;
            for (int row = 0; row < 4; row++) {
                a[col][row] = kr_horn_qcp_adj(N, l, row, col);
                n2 += a[col][row] * a[col][row];
            }
            if (n2 > bestn) {
                bestn = n2;
                best = col;
            }
        }
        CHECK(kr_horn_qcp_trusted(bestn, p2));
        double dot = 0;
        for (int k = 0; k < 4; k++)
            dot += a[best][k] * V[4 * k + 3];
        CHECK_NEAR(fabs(dot) / sqrt(bestn), 1.0, 1e-9);
    }
    CHECK_LT(declined, 5);
}

/* ---- one step against brute force ----------------------------------------- */

/* The seed's EM-ICP E-step in double, literally, then kr_horn. */
static void emicp_reference(const float *src, size_t n, const float *dst, size_t m, double s2,
                            double d02, kr_pose *out)
{
    double *S = calloc(3 * n, sizeof *S), *X = calloc(3 * n, sizeof *X), *L = calloc(n, sizeof *L);
    for (size_t i = 0; i < n; i++) {
        double C = exp(-d02 / s2);
        for (size_t j = 0; j < m; j++) {
            double d2 = 0;
            for (int k = 0; k < 3; k++)
                d2 += pow((double)dst[3 * j + k] - src[3 * i + k], 2);
            C += exp(-d2 / s2);
        }
        for (size_t j = 0; j < m; j++) {
            double d2 = 0;
            for (int k = 0; k < 3; k++)
                d2 += pow((double)dst[3 * j + k] - src[3 * i + k], 2);
            double a = sqrt(exp(-d2 / s2) / C);
            L[i] += a;
            for (int k = 0; k < 3; k++)
                X[3 * i + k] += a * dst[3 * j + k];
        }
        for (int k = 0; k < 3; k++) {
            X[3 * i + k] /= L[i];
            S[3 * i + k] = src[3 * i + k];
        }
    }
    kr_horn(S, X, L, n, out);
    free(S);
    free(X);
    free(L);
}

static kr_register_config one_step_config(kr_reg_method method)
{
    kr_register_config c;
    kr_register_config_default(&c);
    c.method = method;
    c.engine = KR_REG_ENGINE_CPU;
    c.extent = KR_REG_SEED_EXTENT; /* the constants apply unscaled */
    c.stop_motion = 0;
    c.sigma2_inf = c.sigma2 * 0.95; /* one step */
    c.jmax = 1;
    c.i0 = 1;
    return c;
}

static void check_one_step(kr_register_config *c, const float *src, size_t n, const float *dst,
                           size_t m, const kr_pose *expected)
{
    kr_register_result r;
    REQUIRE_OK(kr_register(NULL, c, src, n, dst, m, NULL, &r));
    CHECK_EQ(r.iterations, 1);
    double deg, dist;
    pose_error(expected, &r.pose, &deg, &dist);
    CHECK_LT(deg, 2e-4);
    CHECK_LT(dist, 2e-6);
}

KR_TEST(register, emicp_step_matches_the_seed_formulas)
{
    unsigned s = 3;
    enum { N = 70, M = 90 };
    float src[3 * N], dst[3 * M];
    random_cloud(&s, dst, M, 0.1);
    kr_pose T = pose_from_axis(1, 2, 0.5, 10, 0.01, 0.02, -0.01);
    float tmp[3 * N];
    random_cloud(&s, tmp, N, 0.1);
    move_points(&T, tmp, N, src);
    /* A wide σ (the seed's start), and a narrow one at which exp(−d²/σ²)
     * underflows float for most pairs: the shifted sums must still agree. */
    double sig2[2] = {0.01, 4e-5};
    for (int k = 0; k < 2; k++) {
        kr_register_config c = one_step_config(KR_REG_EMICP);
        c.sigma2 = sig2[k];
        c.sigma2_inf = sig2[k] * 0.95;
        kr_pose ref;
        emicp_reference(src, N, dst, M, c.sigma2, c.d02, &ref);
        check_one_step(&c, src, N, dst, M, &ref);
    }
}

/* Gold et al.'s Softassign step in double on the explicit (N+1)×(M+1)
 * matrix, linear domain: K, then i1 rounds of row and column normalisation
 * (slack row/column not normalised), then Horn weighted by row masses. */
static void softassign_reference(const float *src, size_t n, const float *dst, size_t m, double T,
                                 double alpha, double mo, int i1, kr_pose *out)
{
    size_t W = m + 1;
    double *K = malloc((n + 1) * W * sizeof *K);
    for (size_t i = 0; i <= n; i++)
        for (size_t j = 0; j <= m; j++) {
            if (i == n || j == m) {
                K[i * W + j] = mo;
                continue;
            }
            double d2 = 0;
            for (int k = 0; k < 3; k++)
                d2 += pow((double)dst[3 * j + k] - src[3 * i + k], 2);
            K[i * W + j] = exp(-(d2 - alpha) / T);
        }
    for (int it = 0; it < i1; it++) {
        for (size_t i = 0; i < n; i++) {
            double r = 0;
            for (size_t j = 0; j <= m; j++)
                r += K[i * W + j];
            for (size_t j = 0; j <= m; j++)
                K[i * W + j] /= r;
        }
        for (size_t j = 0; j < m; j++) {
            double c = 0;
            for (size_t i = 0; i <= n; i++)
                c += K[i * W + j];
            for (size_t i = 0; i <= n; i++)
                K[i * W + j] /= c;
        }
    }
    double *S = calloc(3 * n, sizeof *S), *Z = calloc(3 * n, sizeof *Z), *w = calloc(n, sizeof *w);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < m; j++) {
            w[i] += K[i * W + j];
            for (int k = 0; k < 3; k++)
                Z[3 * i + k] += K[i * W + j] * dst[3 * j + k];
        }
        for (int k = 0; k < 3; k++) {
            Z[3 * i + k] /= w[i];
            S[3 * i + k] = src[3 * i + k];
        }
    }
    kr_horn(S, Z, w, n, out);
    free(K);
    free(S);
    free(Z);
    free(w);
}

KR_TEST(register, softassign_step_matches_gold_sinkhorn)
{
    unsigned s = 4;
    enum { N = 60, M = 50 };
    float src[3 * N], dst[3 * M], tmp[3 * N];
    random_cloud(&s, dst, M, 0.1);
    random_cloud(&s, tmp, N, 0.1);
    kr_pose T = pose_from_axis(-1, 0.5, 2, 12, -0.01, 0.01, 0.02);
    move_points(&T, tmp, N, src);
    /* T from the seed's start (100 cm²) to a cold one where K spans e^±20,
     * and colder, where the CPU engine's reach (register_cpu.c) is 2.7 cm
     * in the 20 cm cube: it skips most pairs. */
    double t0[3] = {100, 1, 0.1};
    for (int k = 0; k < 3; k++) {
        kr_register_config c = one_step_config(KR_REG_SOFTASSIGN);
        c.t0 = t0[k];
        kr_pose ref;
        softassign_reference(src, N, dst, M, c.t0 * 1e-4, c.alpha * 1e-4, exp(-1) / sqrt(c.t0),
                             c.i1, &ref);
        check_one_step(&c, src, N, dst, M, &ref);
    }
}

/* ---- the bunny ---------------------------------------------------------------- */

/* Two disjoint random subsets of one scan (so no point has an exact twin). */
static int bunny_subsets(size_t n_each, float **a, float **b)
{
    const char *path = kr_test_data("bunny/bun000.ply");
    if (!path) return 0;
    float *all = NULL;
    size_t n = 0;
    if (kr_scan_read_ply(path, &all, &n) != KR_OK || n < 2 * n_each) return 0;
    unsigned s = 77;
    for (size_t i = n - 1; i > 0; i--) { /* Fisher–Yates */
        size_t j = (size_t)(kr_urand(&s) * (double)(i + 1));
        for (int k = 0; k < 3; k++) {
            float t = all[3 * i + k];
            all[3 * i + k] = all[3 * j + k];
            all[3 * j + k] = t;
        }
    }
    *a = malloc(3 * n_each * sizeof **a);
    *b = malloc(3 * n_each * sizeof **b);
    memcpy(*a, all, 3 * n_each * sizeof **a);
    memcpy(*b, all + 3 * n_each, 3 * n_each * sizeof **b);
    free(all);
    return 1;
}

/* src = T⁻¹·(subset b), so kr_register(src → dst = subset a) should give T. */
static void bunny_recovery(kr_reg_method method, size_t n_each, size_t n_cases)
{
    float *a = NULL, *b = NULL;
    if (!bunny_subsets(n_each, &a, &b)) SKIP("shared data bunny/bun000.ply not found");
    kr_device *dev = cpu_device();
    REQUIRE(dev != NULL);
    /* Rotations about axes through the scan's middle, up to 45°, and 3–6 cm. */
    struct {
        double ax, ay, az, deg, tx, ty, tz;
    } cases[] = {
        {0, 1, 0, 45, 0.03, -0.02, 0.01},
        {1, 0.3, -0.2, 30, -0.02, 0.04, 0.03},
        {0.2, -0.5, 1, -40, 0.0, 0.01, -0.05},
    };
    float *src = malloc(3 * n_each * sizeof *src);
    for (size_t c = 0; c < n_cases && c < sizeof cases / sizeof cases[0]; c++) {
        kr_pose T = pose_from_axis(cases[c].ax, cases[c].ay, cases[c].az, cases[c].deg, cases[c].tx,
                                   cases[c].ty, cases[c].tz);
        /* Rotate about the scan's centroid g: T p = R (p − g) + g + t. */
        double g[3] = {0, 0, 0}, Rg[3];
        for (size_t i = 0; i < n_each; i++)
            for (int k = 0; k < 3; k++)
                g[k] += b[3 * i + k] / (double)n_each;
        kr_pose_rotate(&T, g, Rg);
        for (int k = 0; k < 3; k++)
            T.t[k] += g[k] - Rg[k];
        kr_pose Ti = kr_pose_inv(&T);
        move_points(&Ti, b, n_each, src);
        kr_register_config cfg;
        kr_register_config_default(&cfg);
        cfg.method = method;
        cfg.engine = KR_REG_ENGINE_CPU;
        if (method == KR_REG_SOFTASSIGN) {
            /* The seed's temperature range (T0 → T0·0.95¹⁰⁰) in 40 coarser
             * steps rather than 100, to keep the test fast. */
            cfg.jmax = 40;
            cfg.t_factor = pow(0.95, 100.0 / 40.0);
        }
        kr_register_result r;
        REQUIRE_OK(kr_register(dev, &cfg, src, n_each, a, n_each, NULL, &r));
        double deg, dist;
        pose_error(&T, &r.pose, &deg, &dist);
        fprintf(stderr, "%s case %zu: %.4f deg, %.3f mm, %d steps, rms %.2f mm, inliers %.2f\n",
                kr_reg_method_name(method), c, deg, dist * 1e3, r.iterations, r.rms * 1e3,
                r.inlier_fraction);
        CHECK_LT(deg, 0.5);
        CHECK_LT(dist, 0.002);
        CHECK_GT(r.inlier_fraction, 0.9);
        CHECK_EQ(r.engine, KR_REG_ENGINE_CPU);
    }
    free(src);
    free(a);
    free(b);
    kr_device_destroy(&dev);
}

/* Under ASan+UBSan the N×M loops run several times slower (Softassign's
 * three motions took 7 minutes on 2 cores): one motion, and Softassign on
 * two thirds of the points (0.44° on its first motion), the same code. */
KR_TEST(register, emicp_recovers_bunny_motions)
{
#ifdef KINREG_SANITIZED
    bunny_recovery(KR_REG_EMICP, 2000, 1);
#else
    bunny_recovery(KR_REG_EMICP, 2000, 3);
#endif
}

KR_TEST(register, softassign_recovers_bunny_motions)
{
#ifdef KINREG_SANITIZED
    bunny_recovery(KR_REG_SOFTASSIGN, 1000, 1);
#else
    bunny_recovery(KR_REG_SOFTASSIGN, 1500, 3);
#endif
}

/* ---- Softassign coarse to fine ------------------------------------------------ */

/* The seed's form (every point at every temperature, coarse_points 0) is the
 * expectation: coarse to fine (pipeline/register/coarse_to_fine.h) must end
 * at its pose, not merely near the truth. Two independent 1100-point samples
 * of the anchor's surface (thinned to every second point), 20° and 2.7 cm
 * apart: at this size Softassign's answer itself is most of a degree from
 * the truth (different samples of one surface), so the truth only tells
 * that both found the pair. */
KR_TEST(register, softassign_coarse_to_fine_ends_at_the_seed_forms_pose)
{
#ifdef KINREG_SANITIZED /* the seed's form is N x M exponentials at 200 temperatures */
    enum { N = 800, COARSE = 256 };
#else
    enum { N = 1100, COARSE = 512 };
#endif
    unsigned seed = 5;
    float *dst = kr_test_anchor_surface(&seed, N), *other = kr_test_anchor_surface(&seed, N);
    float *src = malloc(3 * N * sizeof *src);
    REQUIRE(dst && other && src);
    kr_pose T = pose_from_axis(1, 2, 3, 20, 0.02, -0.01, 0.015);
    kr_pose Ti = kr_pose_inv(&T);
    move_points(&Ti, other, N, src);
    kr_register_config c;
    kr_register_config_default(&c);
    c.method = KR_REG_SOFTASSIGN;
    c.engine = KR_REG_ENGINE_CPU;
    c.stop_motion = 0; /* both run every temperature */
    c.jmax = 40;       /* the seed's range in coarser steps, as above */
    c.t_factor = pow(0.95, 100.0 / 40.0);
    kr_register_result seed_form, coarse;
    c.coarse_points = 0;
    REQUIRE_OK(kr_register(NULL, &c, src, N, dst, N, NULL, &seed_form));
    c.coarse_points = COARSE;
    REQUIRE_OK(kr_register(NULL, &c, src, N, dst, N, NULL, &coarse));
    double deg, dist, deg_truth, dist_truth;
    pose_error(&seed_form.pose, &coarse.pose, &deg, &dist);
    pose_error(&T, &coarse.pose, &deg_truth, &dist_truth);
    fprintf(stderr,
            "coarse to fine: %.5f deg, %.5f mm from the seed's form; %.3f deg, %.3f mm from "
            "the truth\n",
            deg, dist * 1e3, deg_truth, dist_truth * 1e3);
    CHECK_EQ(seed_form.iterations, 40 * 5);
    CHECK_EQ(coarse.iterations, 40 * 5);
    CHECK_LT(deg, 0.01);
    CHECK_LT(dist, 1e-5);
    CHECK_LT(deg_truth, 2.0);
    CHECK_LT(dist_truth, 0.003);
    free(dst);
    free(other);
    free(src);
}

/* The split: the thinned sets run down to fine_temperatures before the stop
 * rule's scale, T = t0·f^J < stop_scale² (whether or not the rule is on). */
KR_TEST(register, softassign_coarse_split_ends_before_the_stop_scale)
{
    kr_register_params p;
    memset(&p, 0, sizeof p);
    p.method = KR_REGISTER_METHOD_SOFTASSIGN;
    p.jmax = 100;
    p.i0 = 5;
    p.t0 = 0.01;
    p.t_factor = 0.95;
    p.stop_motion = 1e-5;
    p.stop_patience = 3;
    p.stop_scale = 0.01;
    int j_stop = (int)ceil(log(p.stop_scale * p.stop_scale / p.t0) / log(p.t_factor)); /* 90 */
    kr_register_levels lv = kr_register_levels_plan(&p, 5000, 3000, 512, 6);
    CHECK_EQ(lv.coarse_temperatures, j_stop - 6);
    CHECK_EQ(lv.src_stride, 9);
    CHECK_EQ(lv.dst_stride, 5);
    p.stop_motion = 0; /* the rule off: the same split */
    CHECK_EQ(kr_register_levels_plan(&p, 5000, 3000, 512, 6).coarse_temperatures, j_stop - 6);
    CHECK_EQ(kr_register_levels_plan(&p, 5000, 600, 512, 6).coarse_temperatures, j_stop - 6);
    CHECK_EQ(kr_register_levels_plan(&p, 5000, 3000, 512, 100).coarse_temperatures, 0);
    CHECK_EQ(kr_register_levels_plan(&p, 1000, 600, 512, 6).coarse_temperatures, 0);
    CHECK_EQ(kr_register_levels_plan(&p, 5000, 3000, 0, 6).coarse_temperatures, 0);
    p.stop_scale = 0; /* no scale: back from the schedule's end */
    CHECK_EQ(kr_register_levels_plan(&p, 5000, 3000, 512, 6).coarse_temperatures, 94);
    kr_register_params q = p;
    kr_register_params_after(&q, 84);
    CHECK_NEAR(q.t0, p.t0 * pow(p.t_factor, 84), 1e-12 * p.t0);
    CHECK_EQ(q.jmax, 16);
    p.method = KR_REGISTER_METHOD_EMICP;
    CHECK_EQ(kr_register_levels_plan(&p, 5000, 3000, 512, 6).coarse_temperatures, 0);
}

/* ---- bad inputs --------------------------------------------------------------- */

KR_TEST(register, bad_inputs_give_a_clear_status)
{
    unsigned s = 9;
    enum { N = 40 };
    float a[3 * N], b[3 * N];
    random_cloud(&s, a, N, 0.1);
    random_cloud(&s, b, N, 0.1);
    kr_register_result r, untouched;
    memset(&untouched, 0x5a, sizeof untouched);
    r = untouched;
    kr_register_config c;
    kr_register_config_default(&c);
    c.engine = KR_REG_ENGINE_CPU;
    const kr_reg_method methods[] = {KR_REG_EMICP, KR_REG_SOFTASSIGN, KR_REG_AUTO};
    for (int k = 0; k < 3; k++) {
        c.method = methods[k];
        CHECK_STATUS(kr_register(NULL, &c, a, 0, b, N, NULL, &r), KR_ERR_EMPTY);
        CHECK_STATUS(kr_register(NULL, &c, a, N, b, 0, NULL, &r), KR_ERR_EMPTY);
        CHECK_STATUS(kr_register(NULL, &c, a, 1, b, N, NULL, &r), KR_ERR_EMPTY);
        CHECK_STATUS(kr_register(NULL, &c, a, N, b, 1, NULL, &r), KR_ERR_EMPTY);
        CHECK_STATUS(kr_register(NULL, &c, NULL, N, b, N, NULL, &r), KR_ERR_INVALID_ARG);
        CHECK_STATUS(kr_register(NULL, &c, a, N, b, N, NULL, NULL), KR_ERR_INVALID_ARG);
        float nan_a[3 * N];
        memcpy(nan_a, a, sizeof a);
        nan_a[3 * 7 + 1] = NAN;
        CHECK_STATUS(kr_register(NULL, &c, nan_a, N, b, N, NULL, &r), KR_ERR_INVALID_ARG);
        CHECK_CONTAINS(kr_last_error(), "not finite");
        nan_a[3 * 7 + 1] = INFINITY;
        CHECK_STATUS(kr_register(NULL, &c, a, N, nan_a, N, NULL, &r), KR_ERR_INVALID_ARG);
        /* All on a line, or all at one place. */
        float line[3 * N], point[3 * N];
        for (int i = 0; i < N; i++)
            for (int k = 0; k < 3; k++) {
                line[3 * i + k] = 0.01f * (float)i * (float)(k + 1);
                point[3 * i + k] = 0.5f;
            }
        CHECK_STATUS(kr_register(NULL, &c, line, N, b, N, NULL, &r), KR_ERR_EMPTY);
        CHECK_STATUS(kr_register(NULL, &c, a, N, point, N, NULL, &r), KR_ERR_EMPTY);
        CHECK(memcmp(&r, &untouched, sizeof r) == 0);
        /* A plane is accepted and gives a finite pose. */
        float plane[3 * N];
        memcpy(plane, a, sizeof a);
        for (int i = 0; i < N; i++)
            plane[3 * i + 2] = 0;
        c.jmax = 10;
        CHECK_OK(kr_register(NULL, &c, plane, N, plane, N, NULL, &r));
        CHECK(isfinite(r.pose.t[0]) && isfinite(r.pose.R[0]));
        kr_register_config_default(&c);
        c.engine = KR_REG_ENGINE_CPU;
        r = untouched;
    }
    /* Bad settings and engines. */
    c.method = KR_REG_EMICP;
    c.sigma2_factor = 1.5;
    CHECK_STATUS(kr_register(NULL, &c, a, N, b, N, NULL, &r), KR_ERR_INVALID_ARG);
    kr_register_config_default(&c);
    c.hypotheses = -1;
    CHECK_STATUS(kr_register(NULL, &c, a, N, b, N, NULL, &r), KR_ERR_INVALID_ARG);
    c.hypotheses = 20;
    c.min_overlap = 1.5;
    CHECK_STATUS(kr_register(NULL, &c, a, N, b, N, NULL, &r), KR_ERR_INVALID_ARG);
    kr_register_config_default(&c);
    c.engine = KR_REG_ENGINE_FUSED;
    CHECK_STATUS(kr_register(NULL, &c, a, N, b, N, NULL, &r), KR_ERR_NO_DEVICE);
    c.engine = KR_REG_ENGINE_CUBLAS;
    CHECK_STATUS(kr_register(NULL, &c, a, N, b, N, NULL, &r), KR_ERR_NO_DEVICE);
    kr_register_config_default(&c);
    kr_pose bad = kr_pose_identity();
    bad.t[1] = NAN;
    CHECK_STATUS(kr_register(NULL, &c, a, N, b, N, &bad, &r), KR_ERR_INVALID_ARG);
    /* Sets far apart at a narrow σ: every weight vanishes — a clear error. */
    kr_register_config_default(&c);
    c.method = KR_REG_EMICP;
    c.extent = KR_REG_SEED_EXTENT;
    c.sigma2 = 1e-5;
    c.sigma2_inf = 1e-6;
    for (int i = 0; i < N; i++)
        b[3 * i] += 100.0f;
    CHECK_STATUS(kr_register(NULL, &c, a, N, b, N, NULL, &r), KR_ERR_NUMERIC);
    CHECK_CONTAINS(kr_last_error(), "too far apart");
    CHECK(memcmp(&r, &untouched, sizeof r) == 0);
}

KR_TEST(register, names_parse)
{
    kr_reg_method m;
    kr_reg_engine e;
    REQUIRE_OK(kr_reg_method_parse("softassign", &m));
    CHECK_EQ(m, KR_REG_SOFTASSIGN);
    REQUIRE_OK(kr_reg_engine_parse("cublas", &e));
    CHECK_EQ(e, KR_REG_ENGINE_CUBLAS);
    CHECK_STR(kr_reg_engine_name(KR_REG_ENGINE_FUSED), "fused");
    CHECK_STATUS(kr_reg_method_parse("icp", &m), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "softassign or newton");
    REQUIRE_OK(kr_reg_method_parse("auto", &m));
    CHECK_EQ(m, KR_REG_AUTO);
    kr_register_config c;
    kr_register_config_default(&c);
    CHECK_EQ(c.method, KR_REG_AUTO); /* the default: the search and its verdict */
}

/* The stop rule: with an exact copy the optimum is sharp, the pose settles
 * and the run ends before the schedule does, at the same answer. */
KR_TEST(register, stop_rule_ends_a_settled_run_early)
{
    float *a = NULL, *b = NULL;
    if (!bunny_subsets(1000, &a, &b)) SKIP("shared data bunny/bun000.ply not found");
    kr_pose T = pose_from_axis(0.3, 1, 0.2, 20, 0.01, -0.02, 0.01), Ti = kr_pose_inv(&T);
    float *src = malloc(3 * 1000 * sizeof *src);
    move_points(&Ti, a, 1000, src);
    kr_register_config c;
    kr_register_config_default(&c);
    c.method = KR_REG_EMICP;
    c.engine = KR_REG_ENGINE_CPU;
    kr_register_result early, full;
    REQUIRE_OK(kr_register(NULL, &c, src, 1000, a, 1000, NULL, &early));
    c.stop_motion = 0;
    REQUIRE_OK(kr_register(NULL, &c, src, 1000, a, 1000, NULL, &full));
    CHECK(early.stopped_early);
    CHECK(!full.stopped_early);
    CHECK_LT(early.iterations, full.iterations);
    CHECK_EQ(full.iterations, 66);
    double deg, dist;
    pose_error(&T, &early.pose, &deg, &dist);
    CHECK_LT(deg, 0.05);
    CHECK_LT(dist, 2e-4);
    pose_error(&full.pose, &early.pose, &deg, &dist);
    CHECK_LT(deg, 0.05);
    CHECK_LT(dist, 2e-4);
    free(src);
    free(a);
    free(b);
}

/* pose_only: the same pose, no quality figures (recovery judges the pose by
 * tracking and skips their k-d tree and searches). */
KR_TEST(register, pose_only_skips_the_quality_figures)
{
#ifdef KINREG_SANITIZED
    enum { N = 200 }; /* the default search on 500 points: 26 s of CPU under ASan */
#else
    enum { N = 500 };
#endif
    unsigned seed = 7;
    float dst[3 * N], src[3 * N];
    random_cloud(&seed, dst, N, 0.1);
    kr_pose T = pose_from_axis(0.2, 1, -0.3, 10, 0.005, 0.002, -0.004), Ti = kr_pose_inv(&T);
    move_points(&Ti, dst, N, src);
    kr_register_config c;
    kr_register_config_default(&c);
    c.engine = KR_REG_ENGINE_CPU;
    kr_register_result full, bare;
    REQUIRE_OK(kr_register(NULL, &c, src, N, dst, N, NULL, &full));
    c.pose_only = true;
    REQUIRE_OK(kr_register(NULL, &c, src, N, dst, N, NULL, &bare));
    CHECK(memcmp(&full.pose, &bare.pose, sizeof full.pose) == 0);
    CHECK_EQ(full.iterations, bare.iterations);
    CHECK_GT(full.inlier_fraction, 0.9);
    CHECK_EQ(bare.inlier_fraction, 0);
    CHECK_EQ(bare.rms, 0);
}

/* ---- kinreg register ----------------------------------------------------------- */

KR_TEST(register, tool_aligns_two_bunny_scans)
{
    char a[1024], b[1024], out[8192], args[4096];
    const char *pa = kr_test_data("bunny/bun045.ply");
    if (!pa) SKIP("shared data bunny/ not found");
    snprintf(a, sizeof a, "%s", pa); /* kr_test_data reuses its buffer */
    const char *pb = kr_test_data("bunny/bun000.ply");
    if (!pb) SKIP("shared data bunny/ not found");
    snprintf(b, sizeof b, "%s", pb);
    /* bun.conf: bun045 maps into bun000's frame with t ≈ (−52.0, −0.4, −10.9) mm;
     * EM-ICP on 1500 points lands within 4 mm. Newton on every point, alone
     * or after EM-ICP in one call, within a tenth of a millimetre
     * (test_register_newton.c checks the rotation). */
    static const struct {
        const char *options, *method;
        double tolerance;
    } runs[] = {
        {"--method emicp --subsample 1500", "emicp", 0.004},
        {"--method emicp --subsample 1500 --deterministic", "emicp", 0.004},
        {"", "auto", 1e-4},
        {"--method newton --subsample 0", "newton", 1e-4},
        {"--method emicp+newton --subsample 1500 --newton-subsample 0", "emicp+newton", 1e-4},
    };
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        snprintf(args, sizeof args, "register --engine cpu --json %s %s %s", runs[k].options, a, b);
        REQUIRE(kr_test_run_tool(NULL, args, out, sizeof out) == 0);
        const char *t = strstr(out, "\"t\": [");
        double tx, ty, tz;
        REQUIRE(t != NULL && sscanf(t, "\"t\": [%lf, %lf, %lf]", &tx, &ty, &tz) == 3);
        CHECK_NEAR(tx, -0.0520211, runs[k].tolerance);
        CHECK_NEAR(ty, -0.000384, runs[k].tolerance);
        CHECK_NEAR(tz, -0.0109223, runs[k].tolerance);
        char method[64];
        snprintf(method, sizeof method, "\"method\": \"%s\"", runs[k].method);
        CHECK_CONTAINS(out, method);
    }
    CHECK_CONTAINS(out, "\"coarse_iterations\"");
    CHECK_EQ(kr_test_run_tool(NULL, "register --method newton+newton a b", out, sizeof out), 2);
    CHECK_CONTAINS(out, "emicp+newton or softassign+newton");
    snprintf(args, sizeof args, "register --engine cpu --subsample 500 %s %s", a, b);
    REQUIRE(kr_test_run_tool(NULL, args, out, sizeof out) == 0);
    CHECK_CONTAINS(out, "tum: ");
    CHECK_CONTAINS(out, "quality: rms");
    CHECK_CONTAINS(out, "verdict: trusted");
    /* Usage errors exit 2 and say what is wrong; failures exit 1. */
    CHECK_EQ(kr_test_run_tool(NULL, "register --method icp a b", out, sizeof out), 2);
    CHECK_CONTAINS(out, "softassign or newton");
    CHECK_EQ(kr_test_run_tool(NULL, "register only_one.ply", out, sizeof out), 2);
    CHECK_EQ(kr_test_run_tool(NULL, "register --init '1 2 3' a b", out, sizeof out), 2);
    CHECK_CONTAINS(out, "tx ty tz qx qy qz qw");
    CHECK_EQ(
        kr_test_run_tool(NULL, "register /nonexistent/a.ply /nonexistent/b.ply", out, sizeof out),
        1);
    CHECK_CONTAINS(out, "/nonexistent/a.ply");
}
