/* Newton linearisation: the library's F, g, h against an independent
 * per-point computation (brute-force nearest neighbour, explicit 3×3 A and
 * the moved points q + Q(q)x), g against finite differences of the objective
 * along random twists (g = −½∇h), and F symmetric positive semi-definite —
 * with the depth-noise model off (every point weighs 1) and on (points whose
 * noise scale s > 1 have s-times gates and far-field distances and weigh
 * 1/s²). */
#include "kr_test.h"

#include "kinreg/track.h"
#include "track_fixture.h"

/* Model: a wavy surface z = 1.5 + 0.1 sin 3x cos 2y on a 2 cm grid (so each
 * query's nearest model point stays the same under tiny motions), normals
 * facing the origin; every 13th point has none. */
#define GRID 51
#define SPACING 0.02
static void wavy_model(float *pts, float *nrm)
{
    for (int j = 0; j < GRID; j++)
        for (int i = 0; i < GRID; i++) {
            int k = j * GRID + i;
            /* ±0.5 mm of deterministic jitter: on an exact grid, coordinates
             * tie and split planes cannot separate tied points, leaving some
             * cells unreachable by descent (kdtree.c; real scans do not tie) */
            double x = -0.5 + SPACING * i + 0.0005 * sin(12.9898 * k),
                   y = -0.5 + SPACING * j + 0.0005 * cos(78.233 * k);
            pts[3 * k] = (float)x;
            pts[3 * k + 1] = (float)y;
            pts[3 * k + 2] = (float)(1.5 + 0.1 * sin(3 * x) * cos(2 * y));
            double gx = -0.3 * cos(3 * x) * cos(2 * y), gy = 0.2 * sin(3 * x) * sin(2 * y), gz = 1;
            double l = sqrt(gx * gx + gy * gy + gz * gz);
            nrm[3 * k] = (float)(-gx / l);
            nrm[3 * k + 1] = (float)(-gy / l);
            nrm[3 * k + 2] = (float)(-gz / l);
            if (k % 13 == 0) nrm[3 * k] = NAN;
        }
}

/* Frame points (world) around model points, in bands away from the
 * discontinuities used below (gate 10 mm, normal gate 45°): near-field
 * inliers (≤ 4.1 mm), inliers in the far-field blend band (6.5–8.1 mm of
 * 4.5–9 mm), gated outliers (≥ 13 mm), normals just inside the normal gate
 * (30–42°) and rejected beyond it (48–180°); model points without normals
 * make pure far-field terms. */
static void frame_world(fx_rng *r, const float *mp, const float *mn, int m, float *fp, float *fn)
{
    for (int k = 0; k < m; k++) {
        int b = (int)(fx_urand(r) * GRID * GRID);
        double n[3] = {mn[3 * b], mn[3 * b + 1], mn[3 * b + 2]};
        if (isnan(n[0])) n[0] = 0, n[1] = 0, n[2] = -1;
        double u = fx_urand(r), off, tang = 0.0014, tilt = 0.35 * fx_urand(r); /* up to 20° */
        if (u < 0.55)
            off = 0.003 * fx_srand(r);
        else if (u < 0.7)
            off = (fx_srand(r) < 0 ? -1 : 1) * (0.0065 + 0.0015 * fx_urand(r)), tang = 0.0007;
        else if (u < 0.85)
            off = (fx_srand(r) < 0 ? -1 : 1) * (0.013 + 0.003 * fx_urand(r));
        else if (u < 0.93)
            off = 0.002 * fx_srand(r),
            tilt = (30 + 12 * fx_urand(r)) * M_PI / 180; /* near the gate */
        else
            off = 0.002 * fx_srand(r), tilt = (48 + 132 * fx_urand(r)) * M_PI / 180; /* rejected */
        /* tangential jitter: remove the normal component of a random vector */
        double j[3] = {fx_srand(r), fx_srand(r), fx_srand(r)},
               d = j[0] * n[0] + j[1] * n[1] + j[2] * n[2];
        for (int a = 0; a < 3; a++)
            j[a] = (j[a] - d * n[a]) * tang / sqrt(3.0);
        for (int a = 0; a < 3; a++)
            fp[3 * k + a] = (float)(mp[3 * b + a] + off * n[a] + j[a]);
        /* frame normal: the model normal tilted by `tilt` about a random
         * perpendicular axis (the tangential direction j / |j|) */
        double jl = sqrt(j[0] * j[0] + j[1] * j[1] + j[2] * j[2]);
        for (int a = 0; a < 3; a++)
            fn[3 * k + a] = (float)(cos(tilt) * n[a] + sin(tilt) * j[a] / jl);
    }
}

typedef struct {
    kr_kdtree *tree;
    kr_cloud cloud;
    kr_pose T;
    float *mp, *mn;
} newton_case;

static int newton_case_make(newton_case *c, uint64_t seed, int m)
{
    fx_rng r = {seed};
    c->mp = malloc(GRID * GRID * 3 * sizeof(float));
    c->mn = malloc(GRID * GRID * 3 * sizeof(float));
    wavy_model(c->mp, c->mn);
    c->tree = NULL;
    if (kr_kdtree_build(&c->tree, c->mp, c->mn, GRID * GRID) != KR_OK) return -1;
    float *fp = malloc(3 * (size_t)m * sizeof(float)), *fn = malloc(3 * (size_t)m * sizeof(float));
    frame_world(&r, c->mp, c->mn, m, fp, fn);
    double centre[3] = {0, 0, 1.5};
    c->T = fx_motion(&r, 0.5 * fx_urand(&r), 0.3 * fx_urand(&r), centre);
    kr_pose inv = kr_pose_inv(&c->T);
    fx_level(&c->cloud, fp, fn, NULL, (size_t)m, &inv);
    free(fp);
    free(fn);
    return 0;
}

static void newton_case_free(newton_case *c)
{
    kr_kdtree_destroy(&c->tree);
    fx_cloud_free(&c->cloud);
    free(c->mp);
    free(c->mn);
}

static void test_config(kr_track_config *cfg, kr_quad_mode mode)
{
    kr_track_config_default(cfg);
    cfg->quad = mode;
    cfg->far_field = 0.0045f; /* blend band 4.5–9 mm, inside the 10 mm gate */
    cfg->normal_gate_deg = 45;
    cfg->exact_nn = true;
    cfg->depth_step = 0; /* every point's noise scale is 1 */
}

/* Turns the depth-noise model on so that the noise scale
 * s = max(1, gate_steps·depth_step·z²/gate) is 1 up to the median of the
 * cloud's z² and rises to s_max at its largest: both kinds of points. */
static void noise_config(kr_track_config *cfg, const kr_cloud *cl, float gate, double s_max)
{
    size_t n = (size_t)cl->width * (size_t)cl->height;
    double *z2 = malloc(n * sizeof *z2), top = 0;
    for (size_t i = 0; i < n; i++) {
        double z = cl->points[3 * i + 2];
        z2[i] = z * z;
        top = fmax(top, z2[i]);
    }
    /* median by selection: count how many lie below each candidate */
    double med = top;
    for (size_t i = 0; i < n; i++) {
        size_t below = 0;
        for (size_t j = 0; j < n; j++)
            below += z2[j] < z2[i];
        if (below == n / 2) med = z2[i];
    }
    free(z2);
    /* s = c·z² with c·med = 1 would reach top/med at the top; pick
     * gate_steps·depth_step/gate = c so that the top gets s_max, and keep
     * the median below 1 (s_max·med/top < 1 as long as top > s_max·med). */
    cfg->gate_steps = 2;
    double c = s_max / top;
    if (c * med > 1) c = 1 / med;
    cfg->depth_step = (float)(c * gate / cfg->gate_steps);
}

/* The noise scale of a point at camera depth z, computed independently of
 * the library's kernel. */
static double noise_scale(const kr_track_config *cfg, float gate, double z)
{
    if (!(cfg->depth_step > 0)) return 1;
    return fmax(1.0, (double)cfg->gate_steps * cfg->depth_step * z * z / gate);
}

/* The library's quadratic model at twist x computed the long way: Σ over
 * frame points of the approximant at the moved points q + Q(q)x with the
 * cells and far-field weights fixed at x = 0, plus the weight's first-order
 * change (g carries it, F does not). A point with noise scale s has gate
 * s·gate and far-field distance s·f, and its term is divided by s²; an
 * outlier costs gate².
 * Counts outliers, near-field (w = 0), far-field (w = 1) and blended points
 * when `kinds` is not NULL, and in kinds[4 …] the inliers with s > 1 and
 * the blended points with s > 1. */
static double independent_objective(const newton_case *c, const kr_track_config *cfg, float gate,
                                    const double x[6], int kinds[6])
{
    double h = 0, cosg = cos(cfg->normal_gate_deg * M_PI / 180);
    size_t n = kr_kdtree_size(c->tree);
    for (int i = 0; i < c->cloud.width; i++) {
        const float *pf = c->cloud.points + 3 * i, *nf = c->cloud.normals + 3 * i;
        double p[3] = {pf[0], pf[1], pf[2]}, q[3], nfd[3] = {nf[0], nf[1], nf[2]}, nr[3];
        kr_pose_apply(&c->T, p, q);
        kr_pose_rotate(&c->T, nfd, nr);
        size_t best = 0;
        double bd = INFINITY;
        float s[3], sn[3];
        for (size_t k = 0; k < n; k++) {
            kr_kdtree_point(c->tree, k, s, sn);
            double d = (q[0] - s[0]) * (q[0] - s[0]) + (q[1] - s[1]) * (q[1] - s[1]) +
                       (q[2] - s[2]) * (q[2] - s[2]);
            if (d < bd) bd = d, best = k;
        }
        kr_kdtree_point(c->tree, best, s, sn);
        bool has_n = !isnan(sn[0]);
        double sc = noise_scale(cfg, gate, pf[2]), g2 = (double)gate * gate * sc * sc,
               far = cfg->far_field * sc;
        /* far-field weight: A = (1 − w) n nᵀ + w I; AUTO ramps w from 0 at
         * the far-field distance f to 1 at 2f (smoothstep) */
        double w, dw = 0, c = has_n ? nr[0] * sn[0] + nr[1] * sn[1] + nr[2] * sn[2] : 1;
        bool outlier = bd > g2 || c < cosg;
        if (!has_n || cfg->quad == KR_QUAD_POINT)
            w = 1;
        else if (cfg->quad == KR_QUAD_PLANE)
            w = 0;
        else {
            double u = (sqrt(bd) - far) / far;
            u = u < 0 ? 0 : (u > 1 ? 1 : u);
            w = u * u * (3 - 2 * u);
            dw = 6 * u * (1 - u) / far; /* dw/dd */
        }
        if (kinds) {
            kinds[outlier ? 0 : w == 0 ? 1 : w == 1 ? 2 : 3]++;
            if (!outlier && sc > 1) kinds[4]++;
            if (!outlier && sc > 1 && w > 0 && w < 1) kinds[5]++;
        }
        if (outlier) {
            h += (double)gate * gate;
            continue;
        }
        double A[9];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                A[3 * a + b] = (has_n ? (1 - w) * sn[a] * sn[b] : 0) + w * (a == b);
        /* q + θ×q + t − s */
        double e[3] = {q[0] + x[1] * q[2] - x[2] * q[1] + x[3] - s[0],
                       q[1] + x[2] * q[0] - x[0] * q[2] + x[4] - s[1],
                       q[2] + x[0] * q[1] - x[1] * q[0] + x[5] - s[2]};
        double quad = 0;
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                quad += e[a] * A[3 * a + b] * e[b];
        /* The weight varies with d = |q − s*| too: its first-order part,
         * w'(d) t² ∂d, with t² the squared tangential distance and
         * ∂d = (q − s*)·(θ×q + t)/d. */
        double e0[3] = {q[0] - s[0], q[1] - s[1], q[2] - s[2]};
        double rho = has_n ? e0[0] * sn[0] + e0[1] * sn[1] + e0[2] * sn[2] : 0;
        if (dw != 0) {
            double t2 = bd - rho * rho, dd = 0;
            for (int a = 0; a < 3; a++)
                dd += e0[a] * (e[a] - e0[a]) / sqrt(bd);
            quad += dw * t2 * dd;
        }
        h += quad / (sc * sc);
    }
    return h;
}

static double model_value(const kr_newton_sums *S, const double x[6])
{
    double v = S->h;
    for (int i = 0; i < 6; i++) {
        v -= 2 * S->g[i] * x[i];
        for (int j = 0; j < 6; j++)
            v += x[i] * S->F[6 * i + j] * x[j];
    }
    return v;
}

KR_TEST(newton, sums_match_independent_computation)
{
    const kr_quad_mode modes[3] = {KR_QUAD_AUTO, KR_QUAD_PLANE, KR_QUAD_POINT};
    /* Trials 6–11 with the noise model: s up to 2, so gates reach 20 mm and
     * blend bands 9–18 mm, moving points across every boundary. */
    for (int trial = 0; trial < 12; trial++) {
        newton_case c;
        REQUIRE(newton_case_make(&c, 1000 + (uint64_t)trial, 1500) == 0);
        kr_track_config cfg;
        test_config(&cfg, modes[trial % 3]);
        float gate = 0.010f;
        if (trial >= 6) noise_config(&cfg, &c.cloud, gate, 2.0);
        kr_newton_sums S;
        REQUIRE_OK(kr_newton_linearize(c.tree, &c.cloud, &c.T, &cfg, gate, &S));
        int kinds[6] = {0, 0, 0, 0, 0, 0};
        double zero[6] = {0};
        double h0 = independent_objective(&c, &cfg, gate, zero, kinds);
        CHECK_EQ(S.points, c.cloud.width);
        CHECK_EQ(S.inliers, kinds[1] + kinds[2] + kinds[3]);
        CHECK_NEAR(S.h, h0, 1e-10 * h0);
        if (trial == 0 || trial == 6) {
            printf("    AUTO%s: %d near-field, %d far-field, %d blended, %d outliers of %d; "
                   "%d inliers with s > 1 (%d blended)\n",
                   trial ? " with depth noise" : "", kinds[1], kinds[2], kinds[3], kinds[0],
                   S.points, kinds[4], kinds[5]);
            CHECK(kinds[0] > 100 && kinds[1] > 100 && kinds[2] > 50 &&
                  kinds[3] > 100); /* every branch */
            if (trial == 6)
                CHECK(kinds[4] > 200 && kinds[5] > 50); /* scaled terms in play */
            else
                CHECK_EQ(kinds[4], 0);
        }
        /* The quadratic model is exact for linearly moved points with fixed
         * cells and weights, for any x: h − 2gᵀx + xᵀFx =
         * Σ (q + Qx − s*)ᵀA(q + Qx − s*) (+ the weights' linear term). */
        fx_rng r = {77 + (uint64_t)trial};
        for (int k = 0; k < 5; k++) {
            double x[6];
            double scale = k < 2 ? 1e-3 : 0.1;
            for (int i = 0; i < 6; i++)
                x[i] = scale * fx_srand(&r);
            double want = independent_objective(&c, &cfg, gate, x, NULL), got = model_value(&S, x);
            CHECK_NEAR(got, want, 1e-9 * fmax(want, h0));
        }
        newton_case_free(&c);
    }
}

KR_TEST(newton, gradient_matches_finite_differences)
{
    const kr_quad_mode modes[3] = {KR_QUAD_AUTO, KR_QUAD_PLANE, KR_QUAD_POINT};
    /* Trials 9–17 with the noise model, s up to 1.2: gates up to 12 mm stay
     * below the outliers' 13 mm and blend bands 4.5–5.4 to 9–10.8 mm keep
     * the near-field (≤ 4.4 mm) and blended (6.5–8.2 mm) points in their
     * bands, so no point changes kind under the tiny twists. */
    for (int trial = 0; trial < 18; trial++) {
        newton_case c;
        REQUIRE(newton_case_make(&c, 2000 + (uint64_t)trial, 1000) == 0);
        kr_track_config cfg;
        test_config(&cfg, modes[trial % 3]);
        float gate = 0.010f;
        if (trial >= 9) {
            noise_config(&cfg, &c.cloud, gate, 1.2);
            int kinds[6] = {0, 0, 0, 0, 0, 0};
            double zero[6] = {0};
            independent_objective(&c, &cfg, gate, zero, kinds);
            CHECK(kinds[4] > 100); /* points with s > 1 contribute */
        }
        kr_newton_sums S, Sp, Sm;
        REQUIRE_OK(kr_newton_linearize(c.tree, &c.cloud, &c.T, &cfg, gate, &S));
        fx_rng r = {5 + (uint64_t)trial};
        for (int k = 0; k < 4; k++) {
            /* a random twist: dh/dε of h(exp(εv)·T) at 0 is ∇h·v = −2gᵀv */
            double v[6], eps = 1e-6, xp[6], xm[6];
            for (int i = 0; i < 6; i++)
                v[i] = fx_srand(&r);
            for (int i = 0; i < 6; i++)
                xp[i] = eps * v[i], xm[i] = -eps * v[i];
            kr_pose Ep = kr_pose_exp(xp), Em = kr_pose_exp(xm);
            kr_pose Tp = kr_pose_mul(&Ep, &c.T), Tm = kr_pose_mul(&Em, &c.T);
            REQUIRE_OK(kr_newton_linearize(c.tree, &c.cloud, &Tp, &cfg, gate, &Sp));
            REQUIRE_OK(kr_newton_linearize(c.tree, &c.cloud, &Tm, &cfg, gate, &Sm));
            CHECK_EQ(Sp.inliers, S.inliers); /* no point changed its kind */
            double fd = (Sp.h - Sm.h) / (2 * eps), an = 0, gn = 0;
            for (int i = 0; i < 6; i++)
                an += -2 * S.g[i] * v[i], gn += fabs(2 * S.g[i] * v[i]);
            CHECK_NEAR(fd, an, 1e-6 * gn + 1e-9);
        }
        newton_case_free(&c);
    }
}

KR_TEST(newton, F_is_symmetric_positive_semidefinite)
{
    const kr_quad_mode modes[3] = {KR_QUAD_AUTO, KR_QUAD_PLANE, KR_QUAD_POINT};
    for (int trial = 0; trial < 6; trial++) {
        newton_case c;
        REQUIRE(newton_case_make(&c, 3000 + (uint64_t)trial, 800) == 0);
        kr_track_config cfg;
        test_config(&cfg, modes[trial % 3]);
        if (trial >= 3) noise_config(&cfg, &c.cloud, 0.01f, 2.0);
        kr_newton_sums S;
        REQUIRE_OK(kr_newton_linearize(c.tree, &c.cloud, &c.T, &cfg, 0.01f, &S));
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++)
                CHECK(S.F[6 * i + j] == S.F[6 * j + i]);
        double ev[6];
        kr_eigen_sym(6, S.F, ev, NULL);
        CHECK_GT(ev[5], 0);
        CHECK_GE(ev[0], -1e-12 * ev[5]);
        /* A single surface seen from one side constrains all six degrees of
         * freedom here (curved), so F is positive definite. */
        CHECK_GT(ev[0], 1e-9 * ev[5]);
        newton_case_free(&c);
    }
}

KR_TEST(newton, descent_equals_exact_on_model_points)
{
    /* Frame points exactly on model points lie in their own cells, so the
     * descent and the exact search give identical sums. */
    newton_case c;
    REQUIRE(newton_case_make(&c, 4000, 10) == 0);
    fx_cloud_free(&c.cloud);
    kr_pose inv = kr_pose_inv(&c.T);
    fx_level(&c.cloud, c.mp, c.mn, NULL, GRID * GRID, &inv);
    kr_track_config cfg;
    test_config(&cfg, KR_QUAD_AUTO);
    kr_newton_sums A, B;
    REQUIRE_OK(kr_newton_linearize(c.tree, &c.cloud, &c.T, &cfg, 0.01f, &A));
    cfg.exact_nn = false;
    REQUIRE_OK(kr_newton_linearize(c.tree, &c.cloud, &c.T, &cfg, 0.01f, &B));
    CHECK_EQ(A.inliers, B.inliers);
    CHECK_NEAR(A.h, B.h, 1e-12);
    for (int i = 0; i < 36; i++)
        CHECK_NEAR(A.F[i], B.F[i], 1e-9 * fabs(A.F[i]) + 1e-9);
    newton_case_free(&c);
}

KR_TEST(newton, arguments_and_empty_clouds)
{
    newton_case c;
    REQUIRE(newton_case_make(&c, 5000, 10) == 0);
    kr_track_config cfg;
    test_config(&cfg, KR_QUAD_AUTO);
    kr_newton_sums S;
    CHECK_STATUS(kr_newton_linearize(NULL, &c.cloud, &c.T, &cfg, 0.01f, &S), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_newton_linearize(c.tree, &c.cloud, &c.T, &cfg, 0.01f, NULL),
                 KR_ERR_INVALID_ARG);
    /* points without normals and invalid points are skipped */
    for (int i = 0; i < c.cloud.width; i++) {
        if (i % 2)
            c.cloud.points[3 * i] = NAN;
        else
            c.cloud.normals[3 * i] = NAN;
    }
    REQUIRE_OK(kr_newton_linearize(c.tree, &c.cloud, &c.T, &cfg, 0.01f, &S));
    CHECK_EQ(S.points, 0);
    CHECK_EQ(S.inliers, 0);
    CHECK(S.h == 0);
    kr_cloud empty;
    memset(&empty, 0, sizeof empty);
    REQUIRE_OK(kr_newton_linearize(c.tree, &empty, &c.T, &cfg, 0.01f, &S));
    CHECK_EQ(S.points, 0);
    newton_case_free(&c);
}
