/* Tracking: recovery of known motions of real scans (Stanford bunny) to 1 mm
 * and 0.1°, an objective that never increases across accepted steps, LOST
 * frames that keep the seed, the state machine, and the time of one
 * Kinect-sized frame on a ray-cast scene. */
#include "kr_test.h"

#include "kinreg/frame.h"
#include "kinreg/track.h"
#include "pipeline/track/track_internal.h"
#include "track_fixture.h"

/* Objective non-increasing within each level of a trace (levels differ in
 * points and gate, so values are comparable only within one). The polish's
 * whole steps are not line-searched: they are left out. */
static void check_trace(const kr_track_trace *tr)
{
    for (int i = 1; i < tr->count; i++) {
        const kr_track_trace_step *a = &tr->steps[i - 1], *b = &tr->steps[i];
        if (b->iteration >= KR_TRACK_TRACE_POLISH) continue;
        if (b->iteration < 0) { /* a failed line search: nothing accepted */
            CHECK(b->objective == a->objective && b->alpha == 0);
            continue;
        }
        if (a->level == b->level) {
            CHECK_MSG(b->objective < a->objective, "level %d step %d: objective %.12g after %.12g",
                      b->level, b->iteration, b->objective, a->objective);
            CHECK(b->alpha > 0 && b->alpha <= 1);
        }
    }
}

/* Frame levels from a scan: level l keeps every (3·4^l)-th point (≈13k, 3.4k
 * and 840 points for bun000), moved into the camera frame of `pose`. */
static void bunny_pyramid(kr_pyramid *pyr, const float *pts, const float *nrm, size_t n,
                          const kr_pose *pose, int levels)
{
    memset(pyr, 0, sizeof *pyr);
    pyr->levels = levels;
    kr_pose inv = kr_pose_inv(pose);
    size_t *idx = malloc(n * sizeof *idx);
    for (int l = 0; l < levels; l++) {
        size_t step = 3u << (2 * l), m = 0;
        for (size_t i = 0; i < n; i += step)
            if (!isnan(nrm[3 * i])) idx[m++] = i;
        fx_level(&pyr->level[l], pts, nrm, idx, m, &inv);
    }
    free(idx);
}

static void pyramid_free(kr_pyramid *pyr)
{
    for (int l = 0; l < pyr->levels; l++)
        fx_cloud_free(&pyr->level[l]);
}

static void bunny_config(kr_track_config *cfg)
{
    kr_track_config_default(cfg);
    cfg->finest_level = 0;
    for (int l = 0; l < KR_MAX_LEVELS; l++)
        cfg->iterations[l] = 10;
    /* A 15 cm object: a 10 cm motion needs the coarse gates (×2, ×4) and the
     * pull of point-to-point terms; with the far field at half the gate the
     * blend ends at the gate on every level (a continuous objective). */
    cfg->gate = 0.05f;
    cfg->far_field = 0.025f;
    cfg->converge_rot = 1e-6;
    cfg->converge_trans = 1e-6;
}

KR_TEST(track, recovers_known_motions_of_bunny_scan)
{
    float *pts = NULL, *nrm = NULL;
    size_t n = 0;
    int rc = fx_bunny("bun000.ply", &pts, &nrm, &n);
    if (rc == 1) SKIP("shared data bunny/bun000.ply not found");
    REQUIRE(rc == 0);
    kr_kdtree *model = NULL;
    REQUIRE_OK(kr_kdtree_build(&model, pts, nrm, n));
    double centre[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++)
            centre[a] += pts[3 * i + a] / (double)n;

    kr_track_config cfg;
    bunny_config(&cfg);
    fx_rng r = {12345};
    kr_track_trace_step steps[256];
    double worst_deg = 0, worst_m = 0;
    int worst_iters = 0;
    for (int trial = 0; trial < 8; trial++) {
        /* up to 10° and 10 cm; the first two at the limits */
        double ang = trial < 2 ? 10.0 : 10.0 * fx_urand(&r),
               dist = trial < 2 ? 0.10 : 0.10 * fx_urand(&r);
        kr_pose truth = fx_motion(&r, ang * M_PI / 180, dist, centre);
        kr_pyramid pyr;
        bunny_pyramid(&pyr, pts, nrm, n, &truth, 3);
        kr_pose seed = kr_pose_identity();
        kr_track_trace tr = {steps, 256, 0};
        kr_track_result res;
        cfg.exact_nn = trial % 2;
        CHECK_OK(kr_track_frame_traced(model, &pyr, &seed, &cfg, &res, &tr));
        double deg, m;
        fx_pose_error(&res.pose, &truth, &deg, &m);
        CHECK_MSG(deg < 0.1 && m < 0.001,
                  "motion %d (%.1f°, %.1f cm, %s): error %.4f° %.3f mm, state %s", trial, ang,
                  dist * 100, cfg.exact_nn ? "exact" : "descent", deg, m * 1e3,
                  kr_track_state_name(res.state));
        CHECK_EQ(res.state, KR_TRACK_GOOD);
        check_trace(&tr);
        worst_deg = fmax(worst_deg, deg);
        worst_m = fmax(worst_m, m);
        worst_iters = res.iterations > worst_iters ? res.iterations : worst_iters;
        pyramid_free(&pyr);
    }
    printf("    bun000 onto itself, 8 motions ≤ 10°/10 cm: worst error %.5f° %.4f mm, ≤ %d Newton "
           "steps\n",
           worst_deg, worst_m * 1e3, worst_iters);
    kr_kdtree_destroy(&model);
    free(pts);
    free(nrm);
}

KR_TEST(track, registers_second_scan_to_ground_truth)
{
    /* bun045 (another viewpoint 45° away: partial overlap, its own noise and
     * PCA normals) onto bun000, seeded away from bun.conf's alignment. The
     * tracker stops 0.2° (0.6 mm) from bun.conf at a pose whose objective is
     * higher than bun.conf's: the line search meets points crossing the hard
     * normal gate or jumping cells (descent) at every step length, and only
     * decreasing steps are taken. The bounds below record that plateau. */
    float *mp = NULL, *mn = NULL, *fp = NULL, *fn = NULL;
    size_t mn_count = 0, fn_count = 0;
    int rc = fx_bunny("bun000.ply", &mp, &mn, &mn_count);
    if (rc == 1) SKIP("shared data bunny/ not found");
    REQUIRE(rc == 0);
    REQUIRE(fx_bunny("bun045.ply", &fp, &fn, &fn_count) == 0);
    kr_pose gt;
    REQUIRE(fx_bunny_conf("bun045.ply", &gt) == 0);
    kr_kdtree *model = NULL;
    REQUIRE_OK(kr_kdtree_build(&model, mp, mn, mn_count));
    /* The frame is the scan itself: camera coordinates = scan coordinates. */
    kr_pyramid pyr;
    kr_pose ident = kr_pose_identity();
    bunny_pyramid(&pyr, fp, fn, fn_count, &ident, 3);
    double centre[3] = {-0.024, 0.097, 0.036}; /* bun000 centroid */
    kr_track_config cfg;
    bunny_config(&cfg);
    fx_rng r = {999};
    kr_track_trace_step steps[256];
    double worst_deg = 0, worst_m = 0, worst_h = 0;
    /* The finest level's objective at bun.conf, for comparison. */
    kr_newton_sums at_gt;
    REQUIRE_OK(kr_newton_linearize(model, &pyr.level[0], &gt, &cfg, cfg.gate, &at_gt));
    for (int trial = 0; trial < 4; trial++) {
        double ang = trial == 0 ? 10.0 : 10.0 * fx_urand(&r),
               dist = trial == 0 ? 0.10 : 0.10 * fx_urand(&r);
        kr_pose P = fx_motion(&r, ang * M_PI / 180, dist, centre), seed = kr_pose_mul(&P, &gt);
        kr_track_trace tr = {steps, 256, 0};
        kr_track_result res;
        CHECK_OK(kr_track_frame_traced(model, &pyr, &seed, &cfg, &res, &tr));
        double deg, m;
        fx_pose_error(&res.pose, &gt, &deg, &m);
        CHECK_MSG(deg < 0.3 && m < 0.001,
                  "seed %d (%.1f°, %.1f cm): error %.4f° %.3f mm, state %s, inliers %.2f", trial,
                  ang, dist * 100, deg, m * 1e3, kr_track_state_name(res.state),
                  res.inlier_fraction);
        CHECK(res.state != KR_TRACK_LOST);
        /* the plateau is worse than bun.conf in the tracker's own objective */
        CHECK_GE(res.objective, at_gt.h);
        check_trace(&tr);
        worst_deg = fmax(worst_deg, deg);
        worst_m = fmax(worst_m, m);
        worst_h = fmax(worst_h, res.objective);
    }
    printf("    objective at bun.conf %.5f, at the results up to %.5f\n", at_gt.h, worst_h);
    printf("    bun045 onto bun000, 4 seeds ≤ 10°/10 cm off bun.conf: worst error %.4f° %.3f mm\n",
           worst_deg, worst_m * 1e3);
    pyramid_free(&pyr);
    kr_kdtree_destroy(&model);
    free(mp);
    free(mn);
    free(fp);
    free(fn);
}

/* A ball of radius 0.4 m at (0, 0, 2), normals facing out: no shared data. */
static void ball(size_t n, float **pts, float **nrm)
{
    *pts = malloc(3 * n * sizeof(float));
    *nrm = malloc(3 * n * sizeof(float));
    fx_rng r = {42};
    for (size_t i = 0; i < n; i++) {
        double u[3];
        fx_unit(&r, u);
        for (int a = 0; a < 3; a++) {
            (*nrm)[3 * i + a] = (float)u[a];
            (*pts)[3 * i + a] = (float)(0.4 * u[a] + (a == 2 ? 2.0 : 0.0));
        }
    }
}

KR_TEST(track, far_frame_is_lost_and_keeps_the_seed)
{
    size_t n = 20000;
    float *pts, *nrm;
    ball(n, &pts, &nrm);
    kr_kdtree *model = NULL;
    REQUIRE_OK(kr_kdtree_build(&model, pts, nrm, n));
    /* The frame sits 2 m away from where the seed puts it. */
    kr_pose truth = kr_pose_identity();
    truth.t[0] = 2.0;
    kr_pyramid pyr;
    bunny_pyramid(&pyr, pts, nrm, n, &truth, 2);
    kr_pose seed = kr_pose_identity();
    seed.t[2] = 0.001;
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    kr_track_result res;
    REQUIRE_OK(kr_track_frame(model, &pyr, &seed, &cfg, &res));
    CHECK_EQ(res.state, KR_TRACK_LOST);
    CHECK(memcmp(&res.pose, &seed, sizeof seed) == 0);
    CHECK_EQ(res.inliers, 0);
    /* A pyramid without a single usable point is LOST too, not an error. */
    for (int l = 0; l < pyr.levels; l++)
        for (int i = 0; i < pyr.level[l].width; i++)
            pyr.level[l].points[3 * i] = NAN;
    REQUIRE_OK(kr_track_frame(model, &pyr, &seed, &cfg, &res));
    CHECK_EQ(res.state, KR_TRACK_LOST);
    CHECK(memcmp(&res.pose, &seed, sizeof seed) == 0);
    pyr.levels = 0;
    CHECK_STATUS(kr_track_frame(model, &pyr, &seed, &cfg, &res), KR_ERR_INVALID_ARG);
    pyr.levels = 2;
    pyramid_free(&pyr);
    kr_kdtree_destroy(&model);
    free(pts);
    free(nrm);
}

KR_TEST(track, spinning_ball_is_poor_and_does_not_jump)
{
    /* The ball's position is found but its spin about the centre is free
     * (every normal passes through it): F is singular there, the frame is
     * POOR by the condition gate, and the damped solve leaves the free
     * rotation alone instead of jumping along it. */
    size_t n = 20000;
    float *pts, *nrm;
    ball(n, &pts, &nrm);
    kr_kdtree *model = NULL;
    REQUIRE_OK(kr_kdtree_build(&model, pts, nrm, n));
    kr_pose truth = kr_pose_identity();
    truth.t[0] = 0.01;
    kr_pyramid pyr;
    bunny_pyramid(&pyr, pts, nrm, n, &truth, 2);
    kr_pose seed = kr_pose_identity();
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    kr_track_result res;
    REQUIRE_OK(kr_track_frame(model, &pyr, &seed, &cfg, &res));
    CHECK_EQ(res.state, KR_TRACK_POOR);
    CHECK_LT(res.condition, cfg.min_condition);
    double centre[3] = {-0.01, 0, 2}, moved[3]; /* the ball's centre in the frame */
    kr_pose_apply(&res.pose, centre, moved);    /* lands on the model's (0, 0, 2) */
    CHECK_NEAR(moved[0], 0, 5e-4);
    CHECK_NEAR(moved[1], 0, 5e-4);
    CHECK_NEAR(moved[2], 2, 5e-4);
    CHECK_LT(kr_pose_angle(&res.pose), 0.5 * M_PI / 180); /* drifts a little, never jumps */
    pyramid_free(&pyr);
    kr_kdtree_destroy(&model);
    free(pts);
    free(nrm);
}

KR_TEST(track, classify_table)
{
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    /* defaults: good_inlier 0.5, lost_inlier 0.15, good_rms 0.02, lost_rms 0.05,
     * min_condition 1e-4, min_points 100 */
    static const struct {
        int inliers;
        float fraction, rms, condition;
        bool solved;
        kr_track_state want;
        const char *why;
    } cases[] = {
        {5000, 0.90f, 0.005f, 1e-2f, true, KR_TRACK_GOOD, "all good"},
        {5000, 0.90f, 0.005f, 1e-2f, false, KR_TRACK_LOST, "not solved"},
        {99, 0.90f, 0.005f, 1e-2f, true, KR_TRACK_LOST, "too few inliers"},
        {100, 0.90f, 0.005f, 1e-2f, true, KR_TRACK_GOOD, "exactly min_points"},
        {5000, 0.14f, 0.005f, 1e-2f, true, KR_TRACK_LOST, "inlier fraction below lost"},
        {5000, 0.15f, 0.005f, 1e-2f, true, KR_TRACK_POOR, "fraction at lost gate, below good"},
        {5000, 0.49f, 0.005f, 1e-2f, true, KR_TRACK_POOR, "fraction below good"},
        {5000, 0.50f, 0.005f, 1e-2f, true, KR_TRACK_GOOD, "fraction at good gate"},
        {5000, 0.90f, 0.051f, 1e-2f, true, KR_TRACK_LOST, "rms above lost"},
        {5000, 0.90f, 0.03f, 1e-2f, true, KR_TRACK_POOR, "rms between gates"},
        {5000, 0.90f, 0.02f, 1e-2f, true, KR_TRACK_GOOD, "rms at good gate"},
        {5000, 0.90f, 0.005f, 1e-5f, true, KR_TRACK_POOR, "ill-conditioned (a single wall)"},
        {5000, 0.10f, 0.03f, 1e-5f, true, KR_TRACK_LOST, "lost wins over poor"},
        {5000, NAN, 0.005f, 1e-2f, true, KR_TRACK_LOST, "NaN fraction"},
        {5000, 0.90f, NAN, 1e-2f, true, KR_TRACK_LOST, "NaN rms"},
        {5000, 0.90f, 0.005f, NAN, true, KR_TRACK_POOR, "NaN condition"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kr_track_quality q = {.points = 10000,
                              .inliers = cases[i].inliers,
                              .inlier_fraction = cases[i].fraction,
                              .rms = cases[i].rms,
                              .condition = cases[i].condition,
                              .solved = cases[i].solved};
        kr_track_state got = kr_track_classify(&q, &cfg);
        CHECK_MSG(got == cases[i].want, "%s: got %s, want %s", cases[i].why,
                  kr_track_state_name(got), kr_track_state_name(cases[i].want));
    }
    CHECK_EQ(kr_track_classify(NULL, &cfg), KR_TRACK_LOST);
    CHECK_STR(kr_track_state_name(KR_TRACK_GOOD), "GOOD");
    CHECK_STR(kr_track_state_name(KR_TRACK_POOR), "POOR");
    CHECK_STR(kr_track_state_name(KR_TRACK_LOST), "LOST");
    CHECK_STR(kr_track_state_name((kr_track_state)7), "UNKNOWN");
}

/* Σ J Jᵀ, J = (q × n, n), of points shifted by `shift`. */
static void plane_terms(const double *q, const double *nv, int m, const double shift[3],
                        double F[36])
{
    memset(F, 0, 36 * sizeof *F);
    for (int k = 0; k < m; k++) {
        const double *n = nv + 3 * k;
        double p[3] = {q[3 * k] + shift[0], q[3 * k + 1] + shift[1], q[3 * k + 2] + shift[2]};
        double J[6] = {p[1] * n[2] - p[2] * n[1],
                       p[2] * n[0] - p[0] * n[2],
                       p[0] * n[1] - p[1] * n[0],
                       n[0],
                       n[1],
                       n[2]};
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++)
                F[6 * i + j] += J[i] * J[j];
    }
}

KR_TEST(track, condition_is_frame_independent)
{
    /* λmin/λmax after centring and scaling: moving the world origin changes
     * F but not the figure; a single plane is degenerate (three free
     * directions). */
    enum { M = 500 };
    double q[3 * M], nv[3 * M], F[36];
    fx_rng r = {3};
    for (int k = 0; k < M; k++) {
        double u[3];
        fx_unit(&r, u);
        for (int a = 0; a < 3; a++)
            q[3 * k + a] = 0.5 * u[a] + (a == 2 ? 2 : 0);
        /* normals of a bumpy, not spherical, surface */
        double t[3] = {u[0] + 0.3 * fx_srand(&r), u[1] + 0.3 * fx_srand(&r),
                       u[2] + 0.3 * fx_srand(&r)};
        double l = sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
        for (int a = 0; a < 3; a++)
            nv[3 * k + a] = t[a] / l;
    }
    double c0[3] = {0, 0, 2}, zero[3] = {0, 0, 0};
    plane_terms(q, nv, M, zero, F);
    double k0 = kr_track_condition(F, c0, 0.5);
    const double shifts[3][3] = {{10, 0, 0}, {-3, 7, 1}, {0, 0, -50}};
    for (int s = 0; s < 3; s++) {
        double cs[3] = {c0[0] + shifts[s][0], c0[1] + shifts[s][1], c0[2] + shifts[s][2]};
        plane_terms(q, nv, M, shifts[s], F);
        CHECK_NEAR(kr_track_condition(F, cs, 0.5), k0, 1e-9 * k0);
    }
    CHECK_GT(k0, 1e-3);
    for (int k = 0; k < M; k++) {
        q[3 * k + 2] = 2; /* flatten onto the plane z = 2 */
        nv[3 * k] = nv[3 * k + 1] = 0;
        nv[3 * k + 2] = -1;
    }
    plane_terms(q, nv, M, zero, F);
    CHECK_LT(kr_track_condition(F, c0, 0.5), 1e-9);
}

/* ---- a Kinect-sized frame on a ray-cast scene, for timing ----------------- */

typedef struct {
    double o[3], d[3];
} ray;

/* Room (floor, ceiling, three walls), two spheres and a box; camera y down. */
static double scene_hit(const ray *r, double n[3])
{
    double best = INFINITY;
    const double planes[5][4] = {
        {0, -1, 0, 1.2}, {0, 1, 0, 1.6}, {0, 0, -1, 3.6}, {1, 0, 0, 2.2}, {-1, 0, 0, 2.4}};
    for (int i = 0; i < 5; i++) { /* n·x = −d with n facing inwards: n·x + d = 0 */
        const double *P = planes[i];
        double den = P[0] * r->d[0] + P[1] * r->d[1] + P[2] * r->d[2];
        if (fabs(den) < 1e-12) continue;
        double t = -(P[0] * r->o[0] + P[1] * r->o[1] + P[2] * r->o[2] + P[3]) / den;
        if (t > 0 && t < best) best = t, n[0] = P[0], n[1] = P[1], n[2] = P[2];
    }
    const double sph[2][4] = {{0.3, 0.6, 2.6, 0.5}, {-0.9, 0.8, 3.2, 0.4}};
    for (int i = 0; i < 2; i++) {
        double oc[3] = {r->o[0] - sph[i][0], r->o[1] - sph[i][1], r->o[2] - sph[i][2]};
        double b = oc[0] * r->d[0] + oc[1] * r->d[1] + oc[2] * r->d[2];
        double cc = oc[0] * oc[0] + oc[1] * oc[1] + oc[2] * oc[2] - sph[i][3] * sph[i][3];
        double aa = r->d[0] * r->d[0] + r->d[1] * r->d[1] + r->d[2] * r->d[2], dd = b * b - aa * cc;
        if (dd < 0) continue;
        double t = (-b - sqrt(dd)) / aa; /* the ray direction is not unit */
        if (t > 0 && t < best) {
            best = t;
            for (int a = 0; a < 3; a++)
                n[a] = (r->o[a] + t * r->d[a] - sph[i][a]) / sph[i][3];
        }
    }
    const double lo[3] = {0.9, 0.4, 2.0}, hi[3] = {1.5, 1.2, 2.7};
    double t0 = 0, t1 = INFINITY;
    int ax = -1;
    for (int a = 0; a < 3; a++) {
        double inv = 1 / r->d[a], ta = (lo[a] - r->o[a]) * inv, tb = (hi[a] - r->o[a]) * inv;
        if (ta > tb) {
            double t = ta;
            ta = tb;
            tb = t;
        }
        if (ta > t0) t0 = ta, ax = a;
        if (tb < t1) t1 = tb;
    }
    if (ax >= 0 && t0 <= t1 && t0 < best) {
        best = t0;
        n[0] = n[1] = n[2] = 0;
        n[ax] = r->d[ax] > 0 ? -1 : 1;
    }
    return best;
}

/* Renders an organised cloud (camera frame) at pose T with depth noise
 * σ = 1.5e-3·z² (Kinect-like), the normals exact. */
static void render(kr_cloud *c, const kr_pose *T, int w, int h, double f, double noise, fx_rng *rng)
{
    memset(c, 0, sizeof *c);
    c->width = w;
    c->height = h;
    c->points = malloc((size_t)w * h * 3 * sizeof(float));
    c->normals = malloc((size_t)w * h * 3 * sizeof(float));
    kr_pose inv = kr_pose_inv(T);
    for (int v = 0; v < h; v++)
        for (int u = 0; u < w; u++) {
            size_t i = (size_t)v * w + u;
            double dc[3] = {(u - 0.5 * w + 0.5) / f, (v - 0.5 * h + 0.5) / f, 1}, n[3], nc[3];
            ray r;
            memcpy(r.o, T->t, sizeof r.o);
            kr_pose_rotate(T, dc, r.d);
            double z = scene_hit(&r, n);
            if (!(z < 6)) {
                c->points[3 * i] = c->normals[3 * i] = NAN;
                continue;
            }
            /* u1+u2−1 is a cheap zero-mean noise of variance 1/6 */
            z += noise * z * z * (fx_urand(rng) + fx_urand(rng) - 1) * sqrt(6.0);
            kr_pose_rotate(&inv, n, nc);
            for (int a = 0; a < 3; a++) {
                c->points[3 * i + a] = (float)(z * dc[a]);
                c->normals[3 * i + a] = (float)nc[a];
            }
            c->valid_points++;
            c->valid_normals++;
        }
}

/* Level l + 1 keeps every other pixel of level l. */
static void downsample(const kr_cloud *in, kr_cloud *out)
{
    memset(out, 0, sizeof *out);
    out->width = in->width / 2;
    out->height = in->height / 2;
    size_t m = (size_t)out->width * out->height;
    out->points = malloc(m * 3 * sizeof(float));
    out->normals = malloc(m * 3 * sizeof(float));
    for (int v = 0; v < out->height; v++)
        for (int u = 0; u < out->width; u++) {
            size_t o = (size_t)v * out->width + u, i = (size_t)(2 * v) * in->width + 2 * u;
            memcpy(out->points + 3 * o, in->points + 3 * i, 3 * sizeof(float));
            memcpy(out->normals + 3 * o, in->normals + 3 * i, 3 * sizeof(float));
            out->valid_points += out->points[3 * o] == out->points[3 * o];
        }
    out->valid_normals = out->valid_points;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Model: the scene seen from the identity pose with a third of the frame
 * noise (a fused model averages many frames), every 3rd valid pixel. */
static kr_kdtree *scene_model(double noise, fx_rng *rng, size_t *count, double *build_ms)
{
    kr_pose T0 = kr_pose_identity();
    kr_cloud full;
    render(&full, &T0, 640, 480, 525, noise / 3, rng);
    size_t m = 0, n = (size_t)full.width * full.height;
    float *mp = malloc(n * 3 * sizeof(float)), *mn = malloc(n * 3 * sizeof(float));
    for (size_t i = 0, k = 0; i < n; i++) {
        if (isnan(full.points[3 * i])) continue;
        if (k++ % 3) continue;
        memcpy(mp + 3 * m, full.points + 3 * i, 3 * sizeof(float));
        memcpy(mn + 3 * m, full.normals + 3 * i, 3 * sizeof(float));
        m++;
    }
    fx_cloud_free(&full);
    kr_kdtree *model = NULL;
    double t0 = kr_now();
    if (kr_kdtree_build(&model, mp, mn, m) != KR_OK) model = NULL;
    *build_ms = (kr_now() - t0) * 1e3;
    free(mp);
    free(mn);
    *count = m;
    return model;
}

/* Frame pyramid 640×480 → 160×120 seen from T. */
static void scene_frame(kr_pyramid *pyr, const kr_pose *T, double noise, fx_rng *rng)
{
    memset(pyr, 0, sizeof *pyr);
    pyr->levels = 3;
    render(&pyr->level[0], T, 640, 480, 525, noise, rng);
    downsample(&pyr->level[0], &pyr->level[1]);
    downsample(&pyr->level[1], &pyr->level[2]);
}

KR_TEST(track, kinect_sized_frames)
{
    /* Kinect-like depth noise σ = 1.5e-3·z² on the frames. Hand motion
     * between frames of up to 2° and 3 cm (a constant-velocity seed is
     * usually much closer). */
    double noise = 1.5e-3;
    fx_rng rng = {2024};
    size_t m = 0;
    double build_ms = 0;
    kr_kdtree *model = scene_model(noise, &rng, &m, &build_ms);
    REQUIRE(model != NULL);
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    const int trials = 4;
    double worst_deg = 0, worst_m = 0, sum_m = 0;
    double centre[3] = {0, 0, 2.5};
    kr_pose T0 = kr_pose_identity();
    for (int trial = 0; trial < trials; trial++) {
        double ang = trial == 0 ? 1.0 : 2.0 * fx_urand(&rng),
               dist = trial == 0 ? 0.02 : 0.03 * fx_urand(&rng);
        kr_pose T1 = fx_motion(&rng, ang * M_PI / 180, dist, centre);
        kr_pyramid pyr;
        scene_frame(&pyr, &T1, noise, &rng);
        kr_track_trace_step steps[64];
        kr_track_trace tr = {steps, 64, 0};
        kr_track_result res;
        enum { RUNS = 5 };
        double ms[RUNS];
        for (int k = 0; k < (trial == 0 ? RUNS : 1); k++) {
            tr.count = 0;
            double s = kr_now();
            REQUIRE_OK(kr_track_frame_traced(model, &pyr, &T0, &cfg, &res, &tr));
            ms[k] = (kr_now() - s) * 1e3;
        }
        double deg, err;
        fx_pose_error(&res.pose, &T1, &deg, &err);
        check_trace(&tr);
        CHECK_MSG(res.state == KR_TRACK_GOOD && deg < 0.1 && err < 0.003,
                  "motion %d (%.2f°, %.1f cm): %s, error %.3f° %.2f mm", trial, ang, dist * 100,
                  kr_track_state_name(res.state), deg, err * 1e3);
        worst_deg = fmax(worst_deg, deg);
        worst_m = fmax(worst_m, err);
        sum_m += err;
        int passes[KR_MAX_LEVELS] = {0}, nsteps[KR_MAX_LEVELS] = {0};
        for (int i = 0; i < tr.count; i++) {
            passes[tr.steps[i].level] += tr.steps[i].evaluations;
            nsteps[tr.steps[i].level] += tr.steps[i].iteration > 0;
        }
        if (trial == 0) {
            qsort(ms, RUNS, sizeof *ms, cmp_double);
            double lin_ms[3];
            for (int l = 1; l <= 2; l++) {
                kr_newton_sums S;
                double times[RUNS];
                for (int k = 0; k < RUNS; k++) {
                    double s = kr_now();
                    REQUIRE_OK(kr_newton_linearize(model, &pyr.level[l], &T1, &cfg,
                                                   cfg.gate * (float)l, &S));
                    times[k] = (kr_now() - s) * 1e3;
                }
                qsort(times, RUNS, sizeof *times, cmp_double);
                lin_ms[l] = times[RUNS / 2];
            }
            printf("    model %zu points, build %.1f ms; frame levels 1/2: %d/%d points\n", m,
                   build_ms, pyr.level[1].valid_normals, pyr.level[2].valid_normals);
            printf("    one frame %.2f ms (median of %d, min %.2f): level 2 %d steps in %d passes, "
                   "level 1 %d "
                   "steps in %d passes; one pass: level 1 %.2f ms, level 2 %.2f ms\n",
                   ms[RUNS / 2], RUNS, ms[0], nsteps[2], passes[2], nsteps[1], passes[1], lin_ms[1],
                   lin_ms[2]);
        }
        for (int l = 0; l < 3; l++)
            fx_cloud_free(&pyr.level[l]);
    }
    printf("    %d motions ≤ 2°/3 cm: worst error %.3f° %.2f mm, mean %.2f mm\n", trials, worst_deg,
           worst_m * 1e3, sum_m / trials * 1e3);
    kr_kdtree_destroy(&model);
}

/* The backend dispatch: on the CPU backend (or with no device) the device
 * entry points are the CPU engine itself, result for result. */
KR_TEST(track, cpu_backend_dispatch_is_the_cpu_engine)
{
    fx_rng rng = {77};
    size_t m = 0;
    double build_ms = 0;
    kr_kdtree *model = scene_model(1.5e-3, &rng, &m, &build_ms);
    REQUIRE(model != NULL);
    double centre[3] = {0, 0, 2.5};
    kr_pose T1 = fx_motion(&rng, 1.0 * M_PI / 180, 0.02, centre), T0 = kr_pose_identity();
    kr_pyramid pyr;
    scene_frame(&pyr, &T1, 1.5e-3, &rng);
    kr_track_config cfg;
    kr_track_config_default(&cfg);
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CPU;
    kr_device *dev = NULL;
    REQUIRE_OK(kr_device_create(&dev, &dc));
    kr_track_result a, b, c;
    REQUIRE_OK(kr_track_frame(model, &pyr, &T0, &cfg, &a));
    REQUIRE_OK(kr_track_frame_on(dev, model, &pyr, &T0, &cfg, &b));
    REQUIRE_OK(kr_track_frame_on(NULL, model, &pyr, &T0, &cfg, &c));
    /* The same engine; only the OpenMP reduction of the centroid may round
     * differently from run to run on many threads. */
    CHECK_EQ(a.state, KR_TRACK_GOOD);
    const kr_track_result *other[2] = {&b, &c};
    for (int k = 0; k < 2; k++) {
        double deg, err;
        fx_pose_error(&a.pose, &other[k]->pose, &deg, &err);
        CHECK_LE(deg, 1e-9);
        CHECK_LE(err, 1e-9);
        CHECK_EQ(other[k]->state, a.state);
        CHECK_EQ(other[k]->iterations, a.iterations);
        CHECK_EQ(other[k]->inliers, a.inliers);
    }
    kr_newton_sums s1, s2;
    REQUIRE_OK(kr_newton_linearize(model, &pyr.level[1], &T1, &cfg, cfg.gate, &s1));
    REQUIRE_OK(kr_newton_linearize_on(dev, model, &pyr, 1, &T1, &cfg, cfg.gate, &s2));
    CHECK_EQ(s1.inliers, s2.inliers);
    CHECK_NEAR(s1.h, s2.h, 1e-12 * s1.h);
    for (int i = 0; i < 36; i++)
        CHECK_NEAR(s1.F[i], s2.F[i], 1e-12 * fabs(s1.F[0]) + 1e-12);
    CHECK_STATUS(kr_newton_linearize_on(dev, model, &pyr, pyr.levels, &T1, &cfg, cfg.gate, &s2),
                 KR_ERR_INVALID_ARG);
    kr_device_destroy(&dev);
    for (int l = 0; l < 3; l++)
        fx_cloud_free(&pyr.level[l]);
    kr_kdtree_destroy(&model);
}
