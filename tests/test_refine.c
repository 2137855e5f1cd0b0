/* Multi-view distance-field refinement (DESIGN.md §5): the trilinear field and
 * its gradient against finite differences, the residual's Jacobian against
 * finite differences of left increments, influenced-corner distances against
 * brute force, the LM objective going down, and bunny scans perturbed from
 * bun.conf returning to it. */
#include "kr_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/scan.h"
#include "pipeline/refine/dfield_kernels.h"
#include "pipeline/refine/dfield.h"
#include "pipeline/refine/keyframes.h"
#include "kinreg/eval.h"
#include "kinreg/recorder.h"
#include "kinreg/refine.h"
#include "kinreg/source.h"

/* Points on a bumpy surface patch z = f(x, y) (m), n of them. */
static float *patch_points(size_t n, unsigned seed)
{
    float *p = malloc(sizeof *p * 3 * n);
    for (size_t i = 0; p && i < n; i++) {
        double x = 0.1 * (2 * kr_urand(&seed) - 1), y = 0.1 * (2 * kr_urand(&seed) - 1);
        p[3 * i] = (float)x;
        p[3 * i + 1] = (float)y;
        p[3 * i + 2] = (float)(0.01 * sin(30 * x) * cos(20 * y) + 0.3);
    }
    return p;
}

KR_TEST(refine, trilinear_gradient_matches_finite_differences)
{
    size_t n = 4000;
    float *pts = patch_points(n, 7);
    REQUIRE(pts);
    kr_dfield f;
    REQUIRE_OK(kr_dfield_build(&f, pts, n, 1, 0.01f, 3, 1.0, 1));
    kr_dfield_lookup v = kr_dfield_lookup_of(&f);
    unsigned s = 11;
    int tried = 0;
    for (int t = 0; t < 2000 && tried < 200; t++) {
        /* Inside a cell, away from its faces (the gradient jumps there). */
        float q[3];
        for (int a = 0; a < 3; a++) {
            double cell = floor((a == 2 ? 0.3 : 0.1 * (2 * kr_urand(&s) - 1)) / 0.01 +
                                (a == 2 ? 2 * kr_urand(&s) - 1 : 0));
            q[a] = (float)(0.01 * (cell + 0.2 + 0.6 * kr_urand(&s)));
        }
        float D, g[3];
        if (!kr_dfield_sample(&v, q, &D, g)) continue;
        tried++;
        /* The value is a weighted mean of the 8 corners: within their range. */
        int c[3] = {(int)floor(q[0] / 0.01f), (int)floor(q[1] / 0.01f), (int)floor(q[2] / 0.01f)};
        float lo = INFINITY, hi = -INFINITY;
        for (int k = 0; k < 8; k++) {
            float cv = kr_dfield_corner(&v, c[0] + (k & 1), c[1] + ((k >> 1) & 1), c[2] + (k >> 2));
            lo = fminf(lo, cv);
            hi = fmaxf(hi, cv);
        }
        CHECK(D >= lo - 1e-6f && D <= hi + 1e-6f);
        for (int a = 0; a < 3; a++) {
            float qp[3] = {q[0], q[1], q[2]}, qm[3] = {q[0], q[1], q[2]}, Dp = 0, Dm = 0, gg[3];
            qp[a] += 1e-4f;
            qm[a] -= 1e-4f;
            REQUIRE(kr_dfield_sample(&v, qp, &Dp, gg) && kr_dfield_sample(&v, qm, &Dm, gg));
            CHECK_NEAR(g[a], (Dp - Dm) / 2e-4f, 2e-3);
        }
    }
    CHECK_GT(tried, 100);
    /* At a corner, the interpolation is that corner's value. */
    for (size_t i = 0; i < f.n_grid; i += 97) {
        int x = (int)floorf(f.grid[3 * i] / 0.01f), y = (int)floorf(f.grid[3 * i + 1] / 0.01f),
            z = (int)floorf(f.grid[3 * i + 2] / 0.01f);
        float q[3] = {0.01f * x, 0.01f * y, 0.01f * z}, D, g[3];
        if (kr_dfield_sample(&v, q, &D, g)) CHECK_NEAR(D, kr_dfield_corner(&v, x, y, z), 1e-5);
    }
    kr_dfield_free(&f);
    free(pts);
}

KR_TEST(refine, influenced_distances_match_brute_force)
{
    size_t n = 1500;
    float *pts = patch_points(n, 3);
    REQUIRE(pts);
    for (int band = 1; band <= 2; band++) {
        float h = 0.008f;
        kr_dfield f;
        REQUIRE_OK(kr_dfield_build(&f, pts, n, 1, h, band, 1.0, 1));
        kr_dfield_lookup v = kr_dfield_lookup_of(&f);
        size_t cells = (size_t)f.bricks * KR_DFIELD_BRICK_CELLS, checked = 0, exact = 0;
        for (size_t b = 0; b < (size_t)f.bricks; b++)
            for (int c = 0; c < KR_DFIELD_BRICK_CELLS; c += 3) {
                float val = f.values[b * KR_DFIELD_BRICK_CELLS + c];
                if (!(val < INFINITY)) continue;
                int x = f.brick_xyz[3 * b] * KR_DFIELD_BRICK + (c & 7),
                    y = f.brick_xyz[3 * b + 1] * KR_DFIELD_BRICK + ((c >> 3) & 7),
                    z = f.brick_xyz[3 * b + 2] * KR_DFIELD_BRICK + (c >> 6);
                double best = INFINITY;
                for (size_t i = 0; i < n; i++) {
                    double dx = pts[3 * i] - (double)h * x, dy = pts[3 * i + 1] - (double)h * y,
                           dz = pts[3 * i + 2] - (double)h * z;
                    best = fmin(best, sqrt(dx * dx + dy * dy + dz * dz));
                }
                checked++;
                /* Exact when the nearest point is within band cells (dfield_kernels.h), an upper
                 * bound else. */
                CHECK_GE(val, best - 1e-6);
                if (best < band * h) {
                    CHECK_NEAR(val, best, 1e-6);
                    exact++;
                }
            }
        CHECK_GT(checked, 100);
        CHECK_GT(exact, checked / 2);
        CHECK_LE(checked, cells);
        /* Every point's own cell corners are influenced. */
        for (size_t i = 0; i < n; i += 7) {
            int c[3];
            for (int a = 0; a < 3; a++)
                c[a] = (int)floorf(pts[3 * i + a] / h);
            for (int k = 0; k < 8; k++)
                CHECK(kr_dfield_corner(&v, c[0] + (k & 1), c[1] + ((k >> 1) & 1), c[2] + (k >> 2)) <
                      INFINITY);
        }
        kr_dfield_free(&f);
    }
    free(pts);
}

static kr_refine_posef fpose(const kr_pose *p)
{
    kr_refine_posef f;
    for (int i = 0; i < 9; i++)
        f.R[i] = (float)p->R[i];
    for (int i = 0; i < 3; i++)
        f.t[i] = (float)p->t[i];
    return f;
}

KR_TEST(refine, jacobian_matches_left_increments)
{
    size_t n = 6000;
    float *pts = patch_points(n, 5);
    REQUIRE(pts);
    kr_dfield f;
    REQUIRE_OK(kr_dfield_build(&f, pts, n, 1, 0.01f, 3, 1.0, 1));
    kr_dfield_lookup v = kr_dfield_lookup_of(&f);
    double xi[6] = {0.02, -0.03, 0.01, 0.01, 0.005, -0.02},
           xj[6] = {-0.01, 0.02, 0.03, -0.004, 0.01, 0.02};
    kr_pose Ti = kr_pose_exp(xi), Tj = kr_pose_exp(xj);
    kr_refine_posef fi = fpose(&Ti), fj = fpose(&Tj);
    int tested = 0;
    for (size_t k = 0; k < f.n_grid && tested < 60; k += 13) {
        const float *g = f.grid + 3 * k;
        float e, J[6];
        if (!kr_refine_pair_residual(&fi, &fj, &v, g, f.grid_val[k], &e, J)) continue;
        /* Stay clear of cell faces, where the trilinear gradient jumps. */
        float w[3], p[3];
        kr_refine_apply(&fi, g, w);
        kr_refine_apply_inv(&fj, w, p);
        int clear = 1;
        for (int a = 0; a < 3; a++) {
            float fr = p[a] / 0.01f - floorf(p[a] / 0.01f);
            clear &= fr > 0.1f && fr < 0.9f;
        }
        if (!clear) continue;
        for (int which = 0; which < 2; which++)
            for (int c = 0; c < 6; c++) {
                double d[6] = {0}, eps = 2e-4;
                double fd[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    d[c] = sgn ? -eps : eps;
                    kr_pose step = kr_pose_exp(d);
                    kr_pose Ti2 = which == 0 ? kr_pose_mul(&step, &Ti) : Ti,
                            Tj2 = which == 1 ? kr_pose_mul(&step, &Tj) : Tj;
                    kr_refine_posef a = fpose(&Ti2), b = fpose(&Tj2);
                    float ee = 0;
                    REQUIRE(kr_refine_pair_residual(&a, &b, &v, g, f.grid_val[k], &ee, NULL));
                    fd[sgn] = ee;
                }
                double numeric = (fd[0] - fd[1]) / (2 * eps), analytic = which == 0 ? J[c] : -J[c];
                CHECK_NEAR(analytic, numeric, 0.02 * (1 + fabs(numeric)));
            }
        tested++;
    }
    CHECK_GT(tested, 20);
    kr_dfield_free(&f);
    free(pts);
}

/* Moves T by `deg` about a random axis through c and `m` metres along a random direction. */
static kr_pose perturb(const kr_pose *T, const double c[3], double deg, double m, unsigned *s)
{
    double ax[3], dir[3];
    for (int i = 0; i < 3; i++) {
        ax[i] = kr_nrand(s);
        dir[i] = kr_nrand(s);
    }
    double na = sqrt(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]),
           nd = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
    double x[6] = {ax[0] / na * deg * M_PI / 180,
                   ax[1] / na * deg * M_PI / 180,
                   ax[2] / na * deg * M_PI / 180,
                   0,
                   0,
                   0};
    kr_pose D = kr_pose_exp(x);
    double Rc[3];
    kr_pose_rotate(&D, c, Rc);
    for (int i = 0; i < 3; i++)
        D.t[i] = c[i] - Rc[i] + dir[i] / nd * m;
    return kr_pose_mul(&D, T);
}

static void relative_error(const kr_pose *est, const kr_pose *ref, int k, double *deg, double *mm)
{
    kr_pose ge = kr_pose_inv(&est[0]), gr = kr_pose_inv(&ref[0]);
    kr_pose re = kr_pose_mul(&ge, &est[k]), rr = kr_pose_mul(&gr, &ref[k]);
    kr_pose rri = kr_pose_inv(&rr), d = kr_pose_mul(&rri, &re);
    *deg = kr_pose_angle(&d) * 180 / M_PI;
    *mm = kr_pose_translation_norm(&d) * 1000;
}

KR_TEST(refine, lm_lowers_the_objective_on_a_synthetic_object)
{
    enum { V = 6 };
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V], poses[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 40000, xyz, n, truth));
    unsigned s = 21;
    for (int k = 0; k < V; k++) {
        double c[3] = {0, 0, 0};
        poses[k] = k ? perturb(&truth[k], c, 3, 0.006, &s) : truth[k];
    }
    kr_refine_view views[V];
    for (int k = 0; k < V; k++)
        views[k] = (kr_refine_view){xyz[k], n[k]};
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    cfg.cell = 0.004;
    kr_refine_result r;
    /* One LM iteration on one grid: the accepted step lowers the objective. */
    cfg.levels = 1;
    cfg.max_iterations = 1;
    cfg.coarse_band = cfg.band = 3;
    kr_pose one[V];
    memcpy(one, poses, sizeof one);
    REQUIRE_OK(kr_refine(&cfg, NULL, views, V, one, &r));
    CHECK_EQ(r.iterations, 1);
    if (r.accepted)
        CHECK_LT(r.cost_after, r.cost_before);
    else
        CHECK_LE(r.cost_after, r.cost_before);
    /* The whole run: back to the truth (synthetic views agree exactly). */
    kr_refine_config_default(&cfg);
    cfg.cell = 0.003;
    REQUIRE_OK(kr_refine(&cfg, NULL, views, V, poses, &r));
    CHECK_LT(r.rms_after, r.rms_before);
    for (int k = 1; k < V; k++) {
        /* The object's centre (the world origin) seen through the refined
         * pose, against the truth: the cameras are 0.5 m away, so their own
         * origins would magnify a rotation error. */
        double deg, mm, c[3] = {0, 0, 0}, a[3], w[3];
        relative_error(poses, truth, k, &deg, &mm);
        kr_pose ti = kr_pose_inv(&truth[k]);
        kr_pose_apply(&ti, c, a);
        kr_pose_apply(&poses[k], a, w);
        /* The gauge keeps its true pose, so the world frames agree. */
        double d = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
        CHECK_LT(deg, 0.15);
        CHECK_LT(d, 0.5 * cfg.cell); /* within half a grid cell */
    }
    for (int k = 0; k < V; k++)
        free(xyz[k]);
}

/* The first `count` of the bunny scans listed in `which`, perturbed from
 * bun.conf by up to 5° and 2 cm, refined jointly: back within 0.2° and 1 mm
 * of bun.conf relative to bun000. */
static void bunny_returns(const int *which, int count, unsigned seed)
{
    const char *dir = kr_test_data("bunny");
    if (!dir) SKIP("no shared data bunny/ (set KINREG_DATA)");
    char path[1024];
    snprintf(path, sizeof path, "%s/bun.conf", dir);
    kr_scan_set conf;
    REQUIRE_OK(kr_scan_set_read(path, &conf));
    REQUIRE(conf.n == 5);
    float *xyz[5] = {0};
    size_t n[5];
    kr_pose truth[5], poses[5];
    kr_refine_view views[5];
    unsigned s = seed;
    for (int k = 0; k < count; k++) {
        const kr_scan_set_entry *e = &conf.scans[which[k]];
        REQUIRE_OK(kr_scan_read_ply(e->path, &xyz[k], &n[k]));
        views[k] = (kr_refine_view){xyz[k], n[k]};
        truth[k] = e->pose;
        double c[3] = {0, 0, 0}, w[3];
        for (size_t i = 0; i < n[k]; i++)
            for (int a = 0; a < 3; a++)
                c[a] += xyz[k][3 * i + a] / (double)n[k];
        kr_pose_apply(&truth[k], c, w);
        poses[k] = k ? perturb(&truth[k], w, 3 + 2 * kr_urand(&s), 0.01 + 0.01 * kr_urand(&s), &s)
                     : truth[k];
    }
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    kr_refine_result r;
    CHECK_OK(kr_refine(&cfg, NULL, views, count, poses, &r));
    for (int k = 1; k < count; k++) {
        double deg, mm;
        relative_error(poses, truth, k, &deg, &mm);
        CHECK_MSG(deg <= 0.2 && mm <= 1.0, "%s: %.3f deg %.3f mm from bun.conf",
                  conf.scans[which[k]].file, deg, mm);
    }
    for (int k = 0; k < count; k++)
        free(xyz[k]);
    kr_scan_set_free(&conf);
}

KR_TEST(refine, two_bunny_scans_return_to_bun_conf)
{
    int which[2] = {0, 1}; /* bun000, bun045 */
    bunny_returns(which, 2, 5);
}

KR_TEST(refine, three_bunny_scans_return_to_bun_conf)
{
    int which[3] = {0, 1, 4}; /* bun000, bun045, bun315 */
    bunny_returns(which, 3, 9);
}

/* The five bunny scans with bun.conf's poses; *n_views 0 when absent. */
static bool bunny_set(kr_scan_set *conf, float *xyz[5], size_t n[5], kr_refine_view views[5],
                      kr_pose truth[5])
{
    const char *dir = kr_test_data("bunny");
    if (!dir) return false;
    char path[1024];
    snprintf(path, sizeof path, "%s/bun.conf", dir);
    if (kr_scan_set_read(path, conf) != KR_OK || conf->n != 5) return false;
    for (int k = 0; k < 5; k++) {
        if (kr_scan_read_ply(conf->scans[k].path, &xyz[k], &n[k]) != KR_OK) return false;
        views[k] = (kr_refine_view){xyz[k], n[k]};
        truth[k] = conf->scans[k].pose;
    }
    return true;
}

/* From 10° and 5 cm off, where no field of the scans reaches the others, the
 * views are placed pairwise first (kr_refine_config.initialize AUTO); the
 * result is bun.conf's alignment within 0.3° and 1 mm, or fits the scans at
 * least as well as bun.conf does by the independent measure (the published
 * alignment is itself a registration). */
/* long: the sanitizer passes leave it out; tool_returns_the_bunny_from_twenty_degrees
 * runs the same pairwise placement under them. */
KR_TEST_TAGGED(refine, wide_basin_returns_from_ten_degrees, "long")
{
    kr_scan_set conf;
    float *xyz[5] = {0};
    size_t n[5];
    kr_refine_view views[5];
    kr_pose truth[5], poses[5];
    if (!bunny_set(&conf, xyz, n, views, truth)) SKIP("no shared data bunny/ (set KINREG_DATA)");
    /* Four draws: one wrong but trusted pairwise registration placed bun270
     * 70 deg off before the placement checked edges against each other. */
    for (unsigned seed = 1; seed <= 4; seed++) {
        unsigned s = seed;
        for (int k = 0; k < 5; k++) {
            double c[3] = {0, 0, 0}, w[3];
            for (size_t i = 0; i < n[k]; i++)
                for (int a = 0; a < 3; a++)
                    c[a] += xyz[k][3 * i + a] / (double)n[k];
            kr_pose_apply(&truth[k], c, w);
            poses[k] = k ? perturb(&truth[k], w, 10, 0.05, &s) : truth[k];
        }
        kr_refine_config cfg;
        kr_refine_config_default(&cfg);
        kr_refine_result r;
        REQUIRE_OK(kr_refine(&cfg, NULL, views, 5, poses, &r));
        CHECK(r.initialized);
        kr_refine_fit at_truth;
        REQUIRE_OK(kr_refine_fit_of(views, 5, truth, r.fit_after.radius, NULL, &at_truth));
        bool close = true;
        printf("    seed %u:", seed);
        for (int k = 1; k < 5; k++) {
            double deg, mm;
            relative_error(poses, truth, k, &deg, &mm);
            printf(" %s %.3f deg %.3f mm;", conf.scans[k].file, deg, mm);
            close = close && deg <= 0.3 && mm <= 1.0;
        }
        printf(" fit %.4f mm (%.1f%% paired), bun.conf's %.4f mm (%.1f%%)\n",
               r.fit_after.residual * 1e3, 100 * r.fit_after.overlap, at_truth.residual * 1e3,
               100 * at_truth.overlap);
        CHECK_MSG(close || r.fit_after.score <= at_truth.score,
                  "seed %u: neither within 0.3 deg / 1 mm of bun.conf nor fitting as well", seed);
        CHECK_EQ(r.disconnected, 0);
    }
    for (int k = 0; k < 5; k++)
        free(xyz[k]);
    kr_scan_set_free(&conf);
}

/* The number after `"key":` in `json` at or after `from` (NAN when absent). */
static double json_number_after(const char *json, const char *from, const char *key)
{
    const char *at = from ? strstr(json, from) : json;
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    at = at ? strstr(at, quoted) : NULL;
    return at ? strtod(at + strlen(quoted), NULL) : NAN;
}

/* `kinreg refine bun.conf --perturb 20,5` as a user runs it (the tool's own
 * perturbation draws): seeds 1 and 3 ended bun270 70 and 36 deg off (and the
 * fit worse than bun.conf's) while the pairwise registration started only
 * from the given relative pose, 5 cm off on an object of 15 cm; it now also
 * starts from the two views' centroids laid on each other. Each run ends
 * within 0.3 deg / 1 mm of bun.conf or fits the scans at least as well. */
KR_TEST(refine, tool_returns_the_bunny_from_twenty_degrees)
{
    const char *dir = kr_test_data("bunny");
    if (!dir) SKIP("no shared data bunny/ (set KINREG_DATA)");
    char args[2048], out[16384];
    snprintf(args, sizeof args, "refine %s/bun.conf --iterations 0 --json -q -o %s/b0.conf", dir,
             kr_test_tmpdir());
    REQUIRE(kr_test_run_tool(NULL, args, out, sizeof out) == 0);
    double published = json_number_after(out, "\"fit_before\"", "score_m");
    REQUIRE(published > 0);
    for (int seed = 1; seed <= 4; seed++) {
        snprintf(args, sizeof args,
                 "refine %s/bun.conf --perturb 20,5 --seed %d --json -q -o %s/b.conf", dir, seed,
                 kr_test_tmpdir());
        REQUIRE(kr_test_run_tool(NULL, args, out, sizeof out) == 0);
        double deg = json_number_after(out, NULL, "max_deg"),
               mm = json_number_after(out, NULL, "max_mm"),
               score = json_number_after(out, "\"fit_after\"", "score_m");
        printf("    seed %d: largest error %.3f deg %.3f mm; fit %.4f mm, bun.conf's %.4f mm\n",
               seed, deg, mm, score * 1e3, published * 1e3);
        CHECK_MSG((deg <= 0.3 && mm <= 1.0) || score <= published,
                  "seed %d: %.2f deg %.1f mm off, fitting worse than bun.conf", seed, deg, mm);
    }
}

/* The Stanford bunny's ten scans (the five of the shared data and the
 * oblique top2, top3, chin and ear_back), fetched beside the project and
 * named by KINREG_SCANS (the folder holding bunny/bun.conf; docs/BENCHMARKS.md
 * "Issue 29"). The runs that ended the top view top2 118, 133 and 144 deg off
 * (5 deg / 2 cm seed 7, 10 deg / 5 cm seed 10, 20 deg / 5 cm seed 4: two
 * wrong pairings chained, a check that took the more overlapping) now end no
 * scan beyond the placement's 60 deg limit from where it was given: every
 * scan within 45 deg of bun.conf (on the CPU engine 118 deg before for the
 * first, now 10, 0.4 and 0.4 deg). */
KR_TEST(refine, tool_keeps_the_bunny_top_views_near_their_given_poses)
{
    const char *root = getenv("KINREG_SCANS");
    char conf[1024];
    snprintf(conf, sizeof conf, "%s/bunny/bun.conf", root ? root : "");
    FILE *f = root ? fopen(conf, "r") : NULL;
    if (!f) SKIP("set KINREG_SCANS to the folder of the fetched Stanford sets (bunny/bun.conf)");
    fclose(f);
    static const struct {
        const char *perturb;
        int seed;
    } runs[] = {{"5,2", 7}, {"10,5", 10}, {"20,5", 4}};
    char args[2048], out[16384];
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        snprintf(args, sizeof args, "refine %s --perturb %s --seed %d --json -q -o %s/b.conf", conf,
                 runs[k].perturb, runs[k].seed, kr_test_tmpdir());
        REQUIRE(kr_test_run_tool(NULL, args, out, sizeof out) == 0);
        double deg = json_number_after(out, NULL, "max_deg"),
               mm = json_number_after(out, NULL, "max_mm");
        printf("    --perturb %s --seed %d: largest error %.2f deg %.1f mm\n", runs[k].perturb,
               runs[k].seed, deg, mm);
        CHECK_MSG(deg <= 45, "--perturb %s --seed %d: a scan %.1f deg off", runs[k].perturb,
                  runs[k].seed, deg);
    }
}

/* Nearly right poses of a scan set that overlaps little when aligned and
 * repeats itself: the synthetic room's 12 views, 30 deg apart with a 60 deg
 * field of view (39 % of the samples paired at the truth), each but the gauge
 * turned 0.1-0.2 deg about its centre and moved 1-3 mm, with the room
 * settings (a 2 cm grid, one level, signed fields, every grid point). The
 * little overlap starts the pairwise placement, which slid and stacked the
 * planar walls onto each other (83 % paired, a lower score) and was kept: a
 * view 25 deg and 3.0 m off. The views stay within 1 deg and 1 cm. */
/* long: the sanitizer passes leave it out (30 s of CPU under ASan); the room settings'
 * code (signed fields on a room) runs there in
 * refine_signed.room_loop_returns_to_the_ground_truth. */
KR_TEST_TAGGED(refine, room_of_few_views_keeps_nearly_right_poses, "long")
{
    enum { V = 12 };
    float *xyz[V] = {0};
    size_t n[V];
    kr_pose truth[V], poses[V];
    kr_refine_view views[V];
    REQUIRE_OK(kr_scan_synthetic_room(V, 160, 120, 0, 1, xyz, n, truth));
    for (int k = 0; k < V; k++)
        views[k] = (kr_refine_view){xyz[k], n[k]};
    for (unsigned seed = 1; seed <= 2; seed++) {
        unsigned s = seed;
        for (int k = 0; k < V; k++) {
            double c[3] = {0, 0, 0}, w[3];
            for (size_t i = 0; i < n[k]; i++)
                for (int a = 0; a < 3; a++)
                    c[a] += xyz[k][3 * i + a] / (double)n[k];
            kr_pose_apply(&truth[k], c, w);
            poses[k] = k ? perturb(&truth[k], w, 0.1 + 0.1 * kr_urand(&s),
                                   0.001 + 0.002 * kr_urand(&s), &s)
                         : truth[k];
        }
        kr_refine_config cfg;
        kr_refine_config_default(&cfg);
        cfg.cell = 0.02;
        cfg.levels = 1;
        cfg.signed_field = true;
        cfg.subset = 1;
        kr_refine_result r;
        REQUIRE_OK(kr_refine(&cfg, NULL, views, V, poses, &r));
        double worst_deg = 0, worst_mm = 0;
        for (int k = 1; k < V; k++) {
            double deg, mm;
            relative_error(poses, truth, k, &deg, &mm);
            worst_deg = fmax(worst_deg, deg);
            worst_mm = fmax(worst_mm, mm);
        }
        printf("    seed %u: largest error %.3f deg %.3f mm; fit %.1f%% paired, %.3f mm\n", seed,
               worst_deg, worst_mm, 100 * r.fit_after.overlap, r.fit_after.residual * 1e3);
        CHECK_MSG(worst_deg <= 1.0 && worst_mm <= 10.0, "seed %u: a view %.3f deg %.3f mm off",
                  seed, worst_deg, worst_mm);
    }
    for (int k = 0; k < V; k++)
        free(xyz[k]);
}

/* Started at the published alignment, the result never fits worse by the
 * independent measure; when nothing fitted better the given poses come back
 * exactly. */
KR_TEST(refine, never_worse_than_the_published_alignment)
{
    kr_scan_set conf;
    float *xyz[5] = {0};
    size_t n[5];
    kr_refine_view views[5];
    kr_pose truth[5], poses[5];
    if (!bunny_set(&conf, xyz, n, views, truth)) SKIP("no shared data bunny/ (set KINREG_DATA)");
    memcpy(poses, truth, sizeof poses);
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    kr_refine_result r;
    REQUIRE_OK(kr_refine(&cfg, NULL, views, 5, poses, &r));
    kr_refine_fit before, after;
    REQUIRE_OK(kr_refine_fit_of(views, 5, truth, 0, NULL, &before));
    REQUIRE_OK(kr_refine_fit_of(views, 5, poses, 0, NULL, &after));
    CHECK_NEAR(r.fit_before.score, before.score, 1e-12); /* the measure is deterministic */
    CHECK_LE(after.score, before.score);
    if (r.kept_input) CHECK(memcmp(poses, truth, sizeof poses) == 0);
    for (int k = 0; k < 5; k++)
        free(xyz[k]);
    kr_scan_set_free(&conf);
}

/* The independent measure against brute force: every point of every view
 * (small views: all are samples and all are in the trees) to its nearest
 * point among all the other views, capped at the measure's radius. The room's
 * views each see a part of it, so most views are skipped for most samples
 * (bounding spheres, occupancy) and none of that may change a figure. */
KR_TEST(refine, fit_matches_brute_force_nearest_points)
{
    enum { V = 12 };
    float *xyz[V] = {0};
    size_t n[V];
    kr_pose truth[V], poses[V];
    REQUIRE_OK(kr_scan_synthetic_room(V, 40, 30, 0.002, 3, xyz, n, truth));
    kr_refine_view views[V];
    unsigned seed = 5;
    for (int k = 0; k < V; k++) {
        REQUIRE(n[k] <= 2000);
        views[k] = (kr_refine_view){xyz[k], n[k]};
        /* Off by up to 0.6° and 1 cm: some samples pair, some do not. */
        double x[6];
        for (int a = 0; a < 6; a++)
            x[a] = (a < 3 ? 0.01 : 0.01) * (2 * kr_urand(&seed) - 1);
        kr_pose d = kr_pose_exp(x);
        poses[k] = kr_pose_mul(&truth[k], &d);
    }
    double overlap[V];
    kr_refine_fit fit;
    REQUIRE_OK(kr_refine_fit_of(views, V, poses, 0, overlap, &fit));
    const double cap2 = fit.radius * fit.radius;
    double total = 0, paired_sq = 0;
    size_t used = 0, paired = 0;
    for (int i = 0; i < V; i++) {
        size_t mine = 0;
        for (size_t a = 0; a < n[i]; a++) {
            double p[3] = {xyz[i][3 * a], xyz[i][3 * a + 1], xyz[i][3 * a + 2]}, w[3];
            kr_pose_apply(&poses[i], p, w);
            double best = cap2;
            for (int j = 0; j < V; j++) {
                if (j == i) continue;
                kr_pose inv = kr_pose_inv(&poses[j]);
                double q[3];
                kr_pose_apply(&inv, w, q);
                for (size_t b = 0; b < n[j]; b++) {
                    double dx = q[0] - xyz[j][3 * b], dy = q[1] - xyz[j][3 * b + 1],
                           dz = q[2] - xyz[j][3 * b + 2];
                    best = fmin(best, dx * dx + dy * dy + dz * dz);
                }
            }
            used++;
            total += best;
            if (best < cap2) paired++, paired_sq += best, mine++;
        }
        CHECK_NEAR(overlap[i], (double)mine / (double)n[i], 2e-3);
    }
    printf("    score %.6f mm (brute force %.6f), overlap %.4f (%.4f)\n", fit.score * 1e3,
           sqrt(total / (double)used) * 1e3, fit.overlap, (double)paired / (double)used);
    CHECK(fit.overlap > 0.3 && fit.overlap < 1); /* some samples pair, some do not */
    CHECK_NEAR(fit.score, sqrt(total / (double)used), 1e-6 * fit.radius);
    CHECK_NEAR(fit.overlap, (double)paired / (double)used, 1e-3);
    CHECK_NEAR(fit.residual, sqrt(paired_sq / (double)paired), 1e-6 * fit.radius);
    for (int k = 0; k < V; k++)
        free(xyz[k]);
}

/* Scans that overlap nothing are named, and the run fails unless told so. */
KR_TEST(refine, a_scan_that_overlaps_none_is_named)
{
    const char *dir = kr_test_data("bunny");
    if (!dir) SKIP("no shared data bunny/ (set KINREG_DATA)");
    char path[1024], args[2048], out[16384];
    snprintf(path, sizeof path, "%s/apart.conf", kr_test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    /* bun045 a metre away from bun000: no point of one is near the other. */
    fprintf(f, "bmesh %s/bun000.ply 0 0 0 0 0 0 1\nbmesh %s/bun045.ply 1 0 0 0 0 0 1\n", dir, dir);
    fclose(f);
    snprintf(args, sizeof args, "refine -q %s", path);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "bun045.ply overlaps no other scan");
    CHECK_CONTAINS(out, "--allow-disconnected");
    snprintf(args, sizeof args, "refine -q --allow-disconnected %s", path);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 0);
}

KR_TEST(refine, conf_pose_convention_and_round_trip)
{
    /* A scan point p maps to R(q)ᵀ p + t (DESIGN.md §9). */
    kr_quat q = kr_quat_normalize((kr_quat){0.1, -0.3, 0.2, 0.9});
    double t[3] = {0.01, -0.02, 0.03}, p[3] = {0.05, 0.07, -0.02}, w[3];
    kr_pose T = kr_scan_set_pose(t, q);
    kr_pose_apply(&T, p, w);
    kr_pose Rq = kr_pose_from_quat(q, (double[3]){0, 0, 0});
    for (int r = 0; r < 3; r++) {
        double expect = Rq.R[r] * p[0] + Rq.R[3 + r] * p[1] + Rq.R[6 + r] * p[2] + t[r];
        CHECK_NEAR(w[r], expect, 1e-12);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/scans.conf", kr_test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "camera 0 0 0 0 0 0 1\nbmesh a.ply 0.01 -0.02 0.03 0.1 -0.3 0.2 0.9\nbmesh b.ply 0 "
               "0 0 0 0 0 1\n");
    fclose(f);
    kr_scan_set c;
    REQUIRE_OK(kr_scan_set_read(path, &c));
    CHECK_EQ(c.n, 2);
    CHECK_STR(c.scans[0].file, "a.ply");
    CHECK_NEAR(c.scans[0].pose.R[1], T.R[1], 1e-12);
    kr_pose poses[2] = {c.scans[0].pose, c.scans[1].pose};
    char out[1024];
    snprintf(out, sizeof out, "%s/scans_out.conf", kr_test_tmpdir());
    REQUIRE_OK(kr_scan_set_write(out, &c, poses));
    kr_scan_set back;
    REQUIRE_OK(kr_scan_set_read(out, &back));
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(back.scans[0].pose.R[i], T.R[i], 1e-8);
    CHECK_STR(back.camera, "0 0 0 0 0 0 1");
    kr_scan_set_free(&c);
    kr_scan_set_free(&back);
    f = fopen(path, "w");
    fprintf(f, "bmesh a.ply 1 2\n");
    fclose(f);
    CHECK_STATUS(kr_scan_set_read(path, &c), KR_ERR_FORMAT);
}

KR_TEST(refine, rejects_bad_arguments)
{
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    float p[3] = {0, 0, 0};
    kr_refine_view v[2] = {{p, 1}, {p, 1}};
    kr_pose poses[2] = {kr_pose_identity(), kr_pose_identity()};
    CHECK_STATUS(kr_refine(&cfg, NULL, v, 1, poses, NULL), KR_ERR_INVALID_ARG);
    cfg.gauge = 2;
    CHECK_STATUS(kr_refine(&cfg, NULL, v, 2, poses, NULL), KR_ERR_INVALID_ARG);
    kr_refine_config_default(&cfg);
    v[1].n = 0;
    CHECK_STATUS(kr_refine(&cfg, NULL, v, 2, poses, NULL), KR_ERR_EMPTY);
}

KR_TEST(refine, keyframes_follow_motion_and_quality)
{
    kr_keyframes_config cfg;
    kr_keyframes_config_default(&cfg);
    cfg.max_points = 100;
    kr_keyframes kf;
    kr_keyframes_init(&kf, &cfg);
    kr_pose p = kr_pose_identity();
    CHECK(!kr_keyframes_due(&kf, &p, false)); /* poor tracking: never */
    CHECK(kr_keyframes_due(&kf, &p, true));   /* the first one */
    float pts[3 * 300];
    for (int i = 0; i < 300; i++) {
        pts[3 * i] = 0.001f * i;
        pts[3 * i + 1] = 0;
        pts[3 * i + 2] = i % 3 == 0 ? 0.0f : 1.0f; /* a third have no depth */
    }
    REQUIRE_OK(kr_keyframes_add(&kf, 0, &p, pts, 300));
    CHECK_EQ(kf.items[0].n, 100);
    for (size_t i = 0; i < kf.items[0].n; i++)
        CHECK_GT(kf.items[0].xyz[3 * i + 2], 0);
    /* Spread over the valid points: the first and nearly the last kept. */
    CHECK_LT(kf.items[0].xyz[0], 0.0025f);
    CHECK_GT(kf.items[0].xyz[3 * 99], 0.29f);
    double small[6] = {0, 0, 0.05, 0.05, 0, 0}, far[6] = {0, 0, 0, 0.12, 0, 0},
           turn[6] = {0, 0.2, 0, 0, 0, 0};
    kr_pose a = kr_pose_exp(small), b = kr_pose_exp(far), c = kr_pose_exp(turn);
    CHECK(!kr_keyframes_due(&kf, &a, true)); /* 5 cm and 2.9°: not yet */
    CHECK(kr_keyframes_due(&kf, &b, true));  /* 12 cm */
    CHECK(kr_keyframes_due(&kf, &c, true));  /* 11.5° */
    CHECK(!kr_keyframes_due(&kf, &b, false));
    CHECK_STATUS(kr_keyframes_add(&kf, 1, &p, pts, 1),
                 KR_ERR_EMPTY); /* its only point has no depth */
    CHECK_STATUS(kr_keyframes_refine(&kf, 0, 2, &(kr_refine_config){0}, NULL, NULL),
                 KR_ERR_INVALID_ARG);
    kr_keyframes_free(&kf);
}

KR_TEST(refine, keyframe_window_is_refined_in_place)
{
    enum { V = 6 };
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 40000, xyz, n, truth));
    kr_keyframes kf;
    kr_keyframes_init(&kf, NULL);
    unsigned s = 21;
    for (int k = 0; k < V; k++) {
        double c[3] = {0, 0, 0};
        kr_pose p = k ? perturb(&truth[k], c, 3, 0.006, &s) : truth[k];
        REQUIRE_OK(kr_keyframes_add(&kf, (uint64_t)k, &p, xyz[k], n[k]));
        free(xyz[k]);
    }
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    cfg.cell = 0.003;
    kr_refine_result r;
    REQUIRE_OK(kr_keyframes_refine(&kf, 0, V, &cfg, NULL, &r));
    CHECK_LT(r.rms_after, r.rms_before);
    for (int k = 1; k < V; k++) {
        kr_pose ti = kr_pose_inv(&truth[k]), d = kr_pose_mul(&ti, &kf.items[k].pose);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 0.15);
    }
    kr_keyframes_free(&kf);
}

/* Progress into a file or pipe: whole lines, no carriage returns (they
 * piled up on one line a reader saw only at the end, minutes later), and
 * what the refinement waits on before its first iteration (the measure, the
 * fields: minutes for a long sequence on two cores) said as it begins. */
KR_TEST(refine, progress_into_a_pipe_is_whole_lines)
{
    char out[1 << 14];
    REQUIRE(kr_test_run_tool(NULL, "refine --synthetic 3 --cell 0.004 --perturb 1,0.2 2>&1 | cat",
                             out, sizeof out) == 0);
    CHECK_CONTAINS(out, "refine: grid ");
    const char *measure = strstr(out, "refine: measuring how 3 views overlap"),
               *fields = strstr(out, "refine: normals and fields of 3 views, grid 4.0 mm"),
               *first = strstr(out, "refine: grid ");
    CHECK_MSG(measure && fields && first && measure < fields && fields < first,
              "no measure, then fields, then iterations in: %s", out);
    CHECK_CONTAINS(out, "refine: fields of 3 views, grid 16.0 mm");
    CHECK_MSG(!strchr(out, '\r'), "a carriage return in: %s", out);
    CHECK_MSG(!strstr(out, "\033["), "a terminal escape in: %s", out);
}

KR_TEST(refine, tool_writes_poses_model_and_json)
{
    char args[2048], out[8192];
    const char *dir = kr_test_tmpdir();
    snprintf(
        args, sizeof args,
        "refine --synthetic 4 --cell 0.004 --perturb 1,0.2 -o %s/s.conf --model %s/s.ply --json",
        dir, dir);
    REQUIRE(kr_test_run_tool(NULL, args, out, sizeof out) == 0);
    CHECK_CONTAINS(out, "\"rms_after_m\":");
    CHECK_CONTAINS(out, "\"max_deg\":");
    char path[1024];
    snprintf(path, sizeof path, "%s/s.conf", dir);
    kr_scan_set c;
    REQUIRE_OK(kr_scan_set_read(path, &c));
    CHECK_EQ(c.n, 4);
    kr_scan_set_free(&c);
    snprintf(path, sizeof path, "%s/s.ply", dir);
    float *xyz = NULL;
    size_t n = 0;
    /* The model is the scans merged: as many points as they have. */
    REQUIRE_OK(kr_scan_read_ply(path, &xyz, &n));
    kr_pose poses[4];
    float *views[4];
    size_t count[4], total = 0;
    REQUIRE_OK(kr_scan_synthetic_object(4, 60000, views, count, poses));
    for (int k = 0; k < 4; k++) {
        total += count[k];
        free(views[k]);
    }
    CHECK_EQ(n, total);
    free(xyz);
    snprintf(args, sizeof args, "refine %s/missing.conf", dir);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "missing.conf");
    CHECK_EQ(kr_test_run_tool(NULL, "refine", out, sizeof out), 2);
}

/* kinreg refine --sequence on a recording with a covered stretch: a frame
 * without depth is no keyframe (it was refused with "has no valid point"),
 * the next frame with depth is. Keyframes every centimetre, so that the
 * covered frames fall due. */
KR_TEST(refine, sequence_skips_frames_without_depth)
{
    char dir[512], args[2048], out[8192];
    snprintf(dir, sizeof dir, "%s/covered_seq", kr_test_tmpdir());
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = "synthetic:2";
    sc.duration_s = 2;
    sc.covered = 1;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &sc));
    kr_recorder_config rc;
    kr_recorder_config_default(&rc);
    rc.format = KR_RECORD_TUM;
    rc.overwrite = true;
    kr_recorder *rec = NULL;
    REQUIRE_OK(kr_recorder_create(&rec, dir, &rc));
    kr_frame f;
    int covered = 0;
    bool *empty = calloc(64, sizeof *empty);
    REQUIRE(empty != NULL);
    for (int k = 0; kr_source_read(src, &f) == KR_OK; k++) {
        bool any = false;
        for (int i = 0; i < f.width * f.height && !any; i++)
            any = kr_depth_to_metres(f.raw[i], f.encoding, f.depth_scale) > 0;
        if (k < 64) empty[k] = !any;
        covered += !any;
        CHECK_OK(kr_recorder_write(rec, &f));
        kr_frame_release(&f);
    }
    kr_intrinsics K = kr_source_intrinsics(src);
    CHECK_OK(kr_recorder_write_intrinsics(rec, &K));
    CHECK_OK(kr_recorder_write_groundtruth(rec, kr_source_groundtruth(src)));
    kr_recorder_destroy(&rec);
    kr_source_destroy(&src);
    CHECK_EQ(covered, 10);
    snprintf(args, sizeof args,
             "refine --sequence tum:%s --trajectory %s/groundtruth.txt --min-move 0.01,1 "
             "--iterations 0 -o %s/keyframes.txt",
             dir, dir, dir);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/keyframes.txt", dir);
    kr_trajectory kf = {0};
    REQUIRE_OK(kr_trajectory_read_tum(path, &kf));
    CHECK_GT(kf.count, 10);
    /* No keyframe at a covered frame (30 Hz from 0: frame k at k / 30 s). */
    for (size_t i = 0; i < kf.count; i++) {
        int k = (int)lround(kf.stamps[i] * 30);
        CHECK_MSG(k < 0 || k >= 64 || !empty[k], "keyframe at covered frame %d", k);
    }
    kr_trajectory_free(&kf);
    free(empty);
}

/* kinreg refine --sequence --every-frame after a recovery that landed off:
 * a recording with a jump (kinreg record's loss options), the true poses
 * but every frame after the jump moved by 1 cm and 0.5 deg (as a
 * recovered pose in a flat valley is, docs/BENCHMARKS.md). The keyframes
 * refined jointly with signed fields put the frames after the jump back
 * beside those before it, and every frame follows the keyframes of its own
 * stretch: the whole trajectory ends near the truth. */
KR_TEST(refine, every_frame_follows_its_stretch_keyframes)
{
    char dir[512], args[4096], out[8192], path[700];
    snprintf(dir, sizeof dir, "%s/jump_seq", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "record -q -f tum --force --duration 3 --jumps 1 --covered 1 %s synthetic:2", dir);
    REQUIRE(kr_test_run_tool(NULL, args, out, sizeof out) == 0);
    kr_trajectory gt = {0}, off = {0}, every = {0}, kf = {0};
    snprintf(path, sizeof path, "%s/groundtruth.txt", dir);
    REQUIRE_OK(kr_trajectory_read_tum(path, &gt));
    REQUIRE(gt.count == 90);
    size_t jump = 1;
    double widest = 0;
    for (size_t i = 1; i < gt.count; i++) {
        kr_pose inv = kr_pose_inv(&gt.poses[i - 1]), step = kr_pose_mul(&inv, &gt.poses[i]);
        if (kr_pose_translation_norm(&step) > widest) {
            widest = kr_pose_translation_norm(&step);
            jump = i;
        }
    }
    CHECK_GT(widest, 0.1); /* the source placed its jump */
    const double x[6] = {0, 0, 0.5 * M_PI / 180, 0.01, 0, 0.005};
    kr_pose shift = kr_pose_exp(x);
    for (size_t i = 0; i < gt.count; i++) {
        kr_pose p = i >= jump ? kr_pose_mul(&shift, &gt.poses[i]) : gt.poses[i];
        REQUIRE_OK(kr_trajectory_push(&off, gt.stamps[i], &p));
    }
    snprintf(path, sizeof path, "%s/off.txt", dir);
    REQUIRE_OK(kr_trajectory_write_tum(path, &off));
    snprintf(args, sizeof args,
             "refine -q --sequence tum:%s --trajectory %s/off.txt --signed --min-move 0.05,5 "
             "--every-frame %s/every.txt -o %s/kf.txt",
             dir, dir, dir, dir);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 0);
    snprintf(path, sizeof path, "%s/every.txt", dir);
    REQUIRE_OK(kr_trajectory_read_tum(path, &every));
    snprintf(path, sizeof path, "%s/kf.txt", dir);
    REQUIRE_OK(kr_trajectory_read_tum(path, &kf));
    CHECK_EQ(every.count, gt.count);
    kr_ate before = {0}, after = {0};
    CHECK_OK(kr_eval_ate(&gt, &off, 0, &before));
    CHECK_OK(kr_eval_ate(&gt, &every, 0, &after));
    printf("    %zu keyframes; ATE of every frame %.3f cm before, %.3f cm after\n", kf.count,
           100 * before.rmse, 100 * after.rmse);
    CHECK_GT(before.rmse, 0.004);
    CHECK_LT(after.rmse, 0.25 * before.rmse);
    /* A keyframe's own frame takes exactly its refined pose. */
    for (size_t k = 0; k < kf.count; k++)
        for (size_t i = 0; i < every.count; i++)
            if (fabs(every.stamps[i] - kf.stamps[k]) < 1e-6)
                for (int a = 0; a < 3; a++)
                    CHECK_NEAR(every.poses[i].t[a], kf.poses[k].t[a], 1e-8);
    CHECK_EQ(kr_test_run_tool(NULL, "refine --every-frame x.txt", out, sizeof out), 2);
    CHECK_CONTAINS(out, "--every-frame needs --sequence");
    kr_trajectory_free(&gt);
    kr_trajectory_free(&off);
    kr_trajectory_free(&every);
    kr_trajectory_free(&kf);
}

/* Issue 30: a .conf's values are range-checked like a trajectory's: a scan
 * placed 1e30 m away is refused, naming the line. */
KR_TEST(refine, scan_set_positions_in_range)
{
    char path[600];
    snprintf(path, sizeof path, "%s/far.conf", kr_test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("bmesh a.ply 0 0 0 0 0 0 1\nbmesh b.ply 1e30 0 0 0 0 0 1\n", f);
    fclose(f);
    kr_scan_set c;
    CHECK_STATUS(kr_scan_set_read(path, &c), KR_ERR_FORMAT);
    char where[700];
    snprintf(where, sizeof where, "%s:2", path);
    CHECK_CONTAINS(kr_last_error(), where);
    CHECK_CONTAINS(kr_last_error(), "out of range");
}
