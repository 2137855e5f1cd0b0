/* Trajectory evaluation (ATE, RPE, association, plots, `kinreg eval`) against
 * expectations built independently of the evaluator: injected noise whose
 * RMSE is known, known rigid transforms, known drift rates. */
#include "kr_test.h"

#include <png.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "kinreg/eval.h"
#include "kinreg/trajectory.h"
#include <unistd.h>
#include <sys/resource.h>
#include <signal.h>

/* TUM stamps are Unix times; large values exercise the stamp arithmetic. */
#define T0 1305031102.0
#define RATE 30.0

/* A smooth handheld-like path: about a metre of travel, turning. */
static kr_pose path_pose(double t)
{
    double x[6] = {0.2 * sin(t), 0.3 * cos(0.8 * t), 0.05 * t, 0, 0, 0};
    kr_pose p = kr_pose_exp(x);
    p.t[0] = 0.5 * sin(0.7 * t);
    p.t[1] = 0.3 * cos(0.5 * t);
    p.t[2] = 1.0 + 0.2 * sin(0.3 * t);
    return p;
}

static void make_path(kr_trajectory *traj, size_t n, double rate, double offset)
{
    for (size_t k = 0; k < n; k++) {
        double t = k / rate;
        kr_pose p = path_pose(t);
        kr_trajectory_push(traj, T0 + offset + t, &p);
    }
}

static double pose_diff(const kr_pose *a, const kr_pose *b)
{
    double d = 0;
    for (int i = 0; i < 9; i++)
        d = fmax(d, fabs(a->R[i] - b->R[i]));
    for (int i = 0; i < 3; i++)
        d = fmax(d, fabs(a->t[i] - b->t[i]));
    return d;
}

/* Noise with no rigid component: projecting out the six infinitesimal rigid
 * motions (Σ n = 0 and Σ (p − c) × n = 0) makes the true transform the exact
 * optimum of the alignment, so the ATE must equal the noise RMSE. */
static void rigid_free_noise(const kr_trajectory *gt, double sigma, unsigned *s, double *n)
{
    size_t m = gt->count;
    double c[3] = {0};
    for (size_t i = 0; i < m; i++)
        for (int k = 0; k < 3; k++)
            c[k] += gt->poses[i].t[k] / m;
    for (size_t i = 0; i < 3 * m; i++)
        n[i] = sigma * kr_nrand(s);
    /* Gram–Schmidt over the 6 generators (length 3m each), then subtract. */
    double *g = malloc(6 * 3 * m * sizeof *g);
    for (int a = 0; a < 6; a++) {
        double *v = g + a * 3 * m;
        for (size_t i = 0; i < m; i++) {
            double d[3] = {gt->poses[i].t[0] - c[0], gt->poses[i].t[1] - c[1],
                           gt->poses[i].t[2] - c[2]};
            double e[3] = {a % 3 == 0, a % 3 == 1, a % 3 == 2};
            if (a < 3) {
                for (int k = 0; k < 3; k++)
                    v[3 * i + k] = e[k];
            } else { /* e × d */
                v[3 * i] = e[1] * d[2] - e[2] * d[1];
                v[3 * i + 1] = e[2] * d[0] - e[0] * d[2];
                v[3 * i + 2] = e[0] * d[1] - e[1] * d[0];
            }
        }
        for (int b = 0; b < a; b++) {
            double *u = g + b * 3 * m, dot = 0;
            for (size_t i = 0; i < 3 * m; i++)
                dot += u[i] * v[i];
            for (size_t i = 0; i < 3 * m; i++)
                v[i] -= dot * u[i];
        }
        double norm = 0;
        for (size_t i = 0; i < 3 * m; i++)
            norm += v[i] * v[i];
        norm = sqrt(norm);
        for (size_t i = 0; i < 3 * m; i++)
            v[i] /= norm;
    }
    for (int a = 0; a < 6; a++) {
        double *u = g + a * 3 * m, dot = 0;
        for (size_t i = 0; i < 3 * m; i++)
            dot += u[i] * n[i];
        for (size_t i = 0; i < 3 * m; i++)
            n[i] -= dot * u[i];
    }
    free(g);
}

/* est_i = A · (gt_i with position + noise_i). */
static void transformed_copy(const kr_trajectory *gt, const kr_pose *A, const double *noise,
                             kr_trajectory *est)
{
    for (size_t i = 0; i < gt->count; i++) {
        kr_pose p = gt->poses[i];
        if (noise)
            for (int k = 0; k < 3; k++)
                p.t[k] += noise[3 * i + k];
        kr_pose q = kr_pose_mul(A, &p);
        kr_trajectory_push(est, gt->stamps[i], &q);
    }
}

static double noise_rmse(const double *n, size_t m)
{
    double s = 0;
    for (size_t i = 0; i < 3 * m; i++)
        s += n[i] * n[i];
    return sqrt(s / m);
}

static kr_pose some_transform(void)
{
    double x[6] = {0.4, -1.1, 2.0, 3.0, -2.0, 0.5};
    return kr_pose_exp(x);
}

KR_TEST(eval, ate_equals_injected_noise_and_recovers_transform)
{
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 400, RATE, 0);
    double *noise = malloc(3 * gt.count * sizeof *noise);
    unsigned s = 42;
    rigid_free_noise(&gt, 0.01, &s, noise);
    kr_pose A = some_transform(), Ainv = kr_pose_inv(&A);
    transformed_copy(&gt, &A, noise, &est);

    kr_ate ate;
    REQUIRE_OK(kr_eval_ate(&gt, &est, 0, &ate));
    CHECK_EQ(ate.pairs, 400);
    double expect = noise_rmse(noise, gt.count);
    CHECK_NEAR(ate.rmse, expect, 1e-12);
    CHECK_LT(pose_diff(&ate.alignment, &Ainv), 1e-10);

    /* Mean, median and max of the per-pose error norms, computed here. */
    double *e = malloc(gt.count * sizeof *e), mean = 0, mx = 0;
    for (size_t i = 0; i < gt.count; i++) {
        e[i] = sqrt(noise[3 * i] * noise[3 * i] + noise[3 * i + 1] * noise[3 * i + 1] +
                    noise[3 * i + 2] * noise[3 * i + 2]);
        mean += e[i] / gt.count;
        mx = fmax(mx, e[i]);
    }
    size_t below = 0, above = 0;
    for (size_t i = 0; i < gt.count; i++)
        below += e[i]<ate.median - 1e-12, above += e[i]> ate.median + 1e-12;
    CHECK_NEAR(ate.mean, mean, 1e-12);
    CHECK_NEAR(ate.max, mx, 1e-12);
    CHECK_LE(below, gt.count / 2);
    CHECK_LE(above, gt.count / 2);
    free(e);
    free(noise);
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
}

KR_TEST(eval, ate_with_gaussian_noise_is_close_to_sigma)
{
    /* Plain isotropic noise: the alignment absorbs 6 of 3n degrees of freedom,
     * so E[ATE²] = 3σ²(1 − 2/n); the transform is recovered to about σ/√n. */
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 2000, 100, 0);
    double sigma = 0.005, *noise = malloc(3 * gt.count * sizeof *noise);
    unsigned s = 7;
    for (size_t i = 0; i < 3 * gt.count; i++)
        noise[i] = sigma * kr_nrand(&s);
    kr_pose A = some_transform(), Ainv = kr_pose_inv(&A);
    transformed_copy(&gt, &A, noise, &est);
    kr_ate ate;
    REQUIRE_OK(kr_eval_ate(&gt, &est, 0, &ate));
    CHECK_NEAR(ate.rmse, sigma * sqrt(3.0), 0.05 * sigma * sqrt(3.0));
    CHECK_LT(ate.rmse, noise_rmse(noise, gt.count));
    CHECK_LT(pose_diff(&ate.alignment, &Ainv), 5e-3);
    free(noise);
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
}

KR_TEST(eval, association_respects_max_dt)
{
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 300, RATE, 0);
    /* Estimates 15 ms late: within the default 20 ms window (the other
     * neighbour is 18.3 ms away), all pair with their own ground truth. */
    make_path(&est, 300, RATE, 0.015);
    kr_ate ate;
    REQUIRE_OK(kr_eval_ate(&gt, &est, 0, &ate));
    CHECK_EQ(ate.pairs, 300);
    CHECK_LT(ate.rmse, 1e-12);
    /* A 10 ms window admits none of them. */
    kr_ate untouched = ate;
    CHECK_STATUS(kr_eval_ate(&gt, &est, 0.01, &ate), KR_ERR_EMPTY);
    CHECK(memcmp(&ate, &untouched, sizeof ate) == 0);
    kr_trajectory_free(&est);

    /* Every third estimate 50 ms late. Its nearest ground-truth stamps (k+1,
     * k+2, 16.7 ms away) belong to estimates only 4 ms from them, and one-to-one
     * association must not reuse them: with a 20 ms window those estimates
     * find no partner, with 60 ms they get their own stamp k. */
    for (size_t k = 0; k < 300; k++) {
        double t = k / RATE;
        kr_pose p = path_pose(t);
        kr_trajectory_push(&est, T0 + t + (k % 3 == 0 ? 0.05 : 0.004), &p);
    }
    REQUIRE_OK(kr_eval_ate(&gt, &est, 0.02, &ate));
    CHECK_EQ(ate.pairs, 200);
    CHECK_LT(ate.rmse, 1e-12);
    REQUIRE_OK(kr_eval_ate(&gt, &est, 0.06, &ate));
    CHECK_EQ(ate.pairs, 300);
    CHECK_LT(ate.rmse, 1e-12);
    CHECK_STATUS(kr_eval_ate(&gt, &est, 0.003, &ate), KR_ERR_EMPTY);
    kr_trajectory_free(&est);
    kr_trajectory_free(&gt);
}

KR_TEST(eval, association_is_one_to_one_and_order_free)
{
    /* Estimates at twice the ground-truth rate: each ground-truth stamp may
     * serve only one estimate, so pairs = ground-truth poses. */
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 150, RATE, 0);
    make_path(&est, 300, 2 * RATE, 0);
    kr_ate ate;
    REQUIRE_OK(kr_eval_ate(&gt, &est, 0, &ate));
    CHECK_EQ(ate.pairs, 150);
    CHECK_LT(ate.rmse, 1e-12);

    /* Reversed file order gives the same result. */
    kr_trajectory rev = {0};
    for (size_t k = est.count; k-- > 0;)
        kr_trajectory_push(&rev, est.stamps[k], &est.poses[k]);
    kr_ate ate2;
    REQUIRE_OK(kr_eval_ate(&gt, &rev, 0, &ate2));
    CHECK_EQ(ate2.pairs, 150);
    CHECK_LT(pose_diff(&ate.alignment, &ate2.alignment), 1e-12);
    kr_trajectory_free(&rev);
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
}

KR_TEST(eval, bad_arguments)
{
    kr_trajectory gt = {0}, est = {0};
    kr_ate ate;
    kr_rpe rpe;
    CHECK_STATUS(kr_eval_ate(&gt, &est, 0, &ate), KR_ERR_EMPTY);
    make_path(&gt, 10, RATE, 0);
    make_path(&est, 2, RATE, 0);
    CHECK_STATUS(kr_eval_ate(&gt, &est, 0, &ate), KR_ERR_EMPTY);
    CHECK_STATUS(kr_eval_ate(NULL, &est, 0, &ate), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_eval_ate(&gt, &est, -1, &ate), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_eval_ate(&gt, &est, NAN, &ate), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_eval_rpe(&gt, &est, 0, -1, &rpe), KR_ERR_INVALID_ARG);
    /* 10 frames at 30 Hz span 0.3 s: no pair 1 s apart. */
    kr_trajectory_free(&est);
    make_path(&est, 10, RATE, 0);
    CHECK_STATUS(kr_eval_rpe(&gt, &est, 0, 1.0, &rpe), KR_ERR_EMPTY);
    CHECK_CONTAINS(kr_last_error(), "delta");
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
}

KR_TEST(eval, rpe_of_constant_drift_equals_drift_rate)
{
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 600, RATE, 0);
    /* Translational drift v (world frame) accumulated over time: over any
     * interval Δ the relative motion is off by exactly v·Δ, no rotation. */
    double v[3] = {0.03, -0.04, 0.12}; /* |v| = 0.13 m/s */
    for (size_t k = 0; k < gt.count; k++) {
        double t = gt.stamps[k] - T0;
        kr_pose p = gt.poses[k];
        for (int i = 0; i < 3; i++)
            p.t[i] += v[i] * t;
        kr_trajectory_push(&est, gt.stamps[k], &p);
    }
    kr_rpe rpe;
    REQUIRE_OK(kr_eval_rpe(&gt, &est, 0, 0, &rpe)); /* delta 0 → 1 s */
    CHECK_EQ(rpe.pairs, 600 - 30);
    CHECK_NEAR(rpe.rmse, 0.13, 1e-6);
    CHECK_NEAR(rpe.mean, 0.13, 1e-6);
    CHECK_NEAR(rpe.median, 0.13, 1e-6);
    CHECK_NEAR(rpe.rot_rmse_deg, 0, 1e-9);
    REQUIRE_OK(kr_eval_rpe(&gt, &est, 0, 0.5, &rpe));
    CHECK_EQ(rpe.pairs, 600 - 15);
    CHECK_NEAR(rpe.rmse, 0.065, 1e-6);
    kr_trajectory_free(&est);

    /* Rotational drift ω about a world axis: E is a conjugate of the drift
     * rotation over Δ, so its angle is exactly |ω|·Δ. */
    double w = 2.0 * M_PI / 180.0; /* 2°/s */
    for (size_t k = 0; k < gt.count; k++) {
        double t = gt.stamps[k] - T0, x[6] = {0, w * t * 0.6, w * t * 0.8, 0, 0, 0};
        kr_pose D = kr_pose_exp(x);
        kr_pose p = kr_pose_mul(&D, &gt.poses[k]);
        kr_trajectory_push(&est, gt.stamps[k], &p);
    }
    REQUIRE_OK(kr_eval_rpe(&gt, &est, 0, 1.0, &rpe));
    CHECK_NEAR(rpe.rot_rmse_deg, 2.0, 1e-5);
    kr_trajectory_free(&est);
    kr_trajectory_free(&gt);
}

KR_TEST(eval, rpe_skips_gaps)
{
    /* A 3 s hole in the estimate (frames 200–289), and every pose after it
     * shifted by a constant: pairs within a segment have zero error, a pair
     * formed across the hole (or clamped at the end) would not. */
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 600, RATE, 0);
    for (size_t k = 0; k < gt.count; k++) {
        if (k >= 200 && k < 290) continue;
        kr_pose p = gt.poses[k];
        if (k >= 290) p.t[0] += 0.5;
        kr_trajectory_push(&est, gt.stamps[k], &p);
    }
    kr_rpe rpe;
    REQUIRE_OK(kr_eval_rpe(&gt, &est, 0, 1.0, &rpe));
    /* Pairs (i, i+30) with both outside the hole: i < 170 and 290 <= i < 570. */
    CHECK_EQ(rpe.pairs, 170 + 280);
    CHECK_LT(rpe.rmse, 1e-9);
    kr_trajectory_free(&est);
    kr_trajectory_free(&gt);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

static size_t count_substr(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

KR_TEST(eval, plot_svg_and_png)
{
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 120, RATE, 0);
    kr_pose A = some_transform();
    transformed_copy(&gt, &A, NULL, &est);
    kr_ate ate;
    REQUIRE_OK(kr_eval_ate(&gt, &est, 0, &ate));
    char svg[512], png[512], bad[512];
    snprintf(svg, sizeof svg, "%s/plot.svg", kr_test_tmpdir());
    snprintf(png, sizeof png, "%s/plot.PNG", kr_test_tmpdir());
    snprintf(bad, sizeof bad, "%s/plot.jpg", kr_test_tmpdir());

    REQUIRE_OK(kr_eval_plot(svg, &gt, &est, &ate));
    char *text = slurp(svg, NULL);
    REQUIRE(text != NULL);
    CHECK_CONTAINS(text, "<svg");
    CHECK_CONTAINS(text, "</svg>");
    CHECK_CONTAINS(text, "ATE RMSE 0.00 cm (120 pairs)");
    /* Ground truth and estimate in each of the two panels: the truth first,
     * wider, so that the estimate over it leaves it visible. */
    CHECK_EQ(count_substr(text, "<polyline"), 4);
    const char *truth_line = strstr(text, "<polyline"),
               *est_line = strstr(text, "#d62728\" stroke-width");
    CHECK(truth_line && est_line && truth_line < est_line);
    CHECK(truth_line && strstr(truth_line, "stroke=\"#9e9e9e\" stroke-width=\"5\"") ==
                            strstr(truth_line, "stroke="));
    const char *est_style = "#d62728\" stroke-width=\"2\"";
    CHECK(est_line && strncmp(est_line, est_style, strlen(est_style)) == 0);
    /* Every pose is a vertex: 4 polylines × 120 "x,y" pairs. */
    const char *pts = strstr(text, "points=\"");
    REQUIRE(pts != NULL);
    size_t commas = 0;
    for (const char *p = pts + 8; *p && *p != '"'; p++)
        commas += *p == ',';
    CHECK_EQ(commas, 120);
    free(text);

    /* ate NULL: the plot aligns by itself. */
    REQUIRE_OK(kr_eval_plot(png, &gt, &est, NULL));
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    REQUIRE(png_image_begin_read_from_file(&im, png));
    CHECK_EQ(im.width, KR_EVAL_PLOT_WIDTH);
    CHECK_EQ(im.height, KR_EVAL_PLOT_HEIGHT);
    im.format = PNG_FORMAT_RGB;
    unsigned char *rgb = malloc(PNG_IMAGE_SIZE(im));
    REQUIRE(rgb != NULL);
    REQUIRE(png_image_finish_read(&im, NULL, rgb, 0, NULL));
    /* White background in a corner; black text, the red estimate and, though
     * the estimate lies exactly on it, the ground truth's grey band on both
     * sides of it (drawn alike, the estimate hid it: no truth pixel). The
     * renderer antialiases: the band's colour within a few levels. */
    CHECK(rgb[0] == 255 && rgb[1] == 255 && rgb[2] == 255);
    size_t red = 0, black = 0, truth = 0;
    for (size_t i = 0; i < (size_t)im.width * im.height; i++) {
        const unsigned char *p = rgb + 3 * i;
        red += p[0] > 200 && p[1] < 80 && p[2] < 80;
        black += p[0] == 0 && p[1] == 0 && p[2] == 0;
        truth += abs(p[0] - 0x9e) <= 4 && abs(p[1] - 0x9e) <= 4 && abs(p[2] - 0x9e) <= 4;
    }
    CHECK_GT(red, 500);
    CHECK_GT(black, 500);
    CHECK_GT(truth, red); /* a band wider than the line over it */
    size_t unmarked_orange = 0;
    for (size_t i = 0; i < (size_t)im.width * im.height; i++)
        unmarked_orange += rgb[3 * i] == 0xff && rgb[3 * i + 1] == 0x7f && rgb[3 * i + 2] == 0x0e;
    CHECK_EQ(unmarked_orange, 0);
    free(rgb);

    /* Marked poses: an orange dot each in both panels, a legend entry whose
     * text is text; none without marks (above: no orange pixel). */
    bool marked[120] = {false};
    for (int i = 40; i < 50; i++)
        marked[i] = true;
    REQUIRE_OK(kr_eval_plot_marked(svg, &gt, &est, &ate, marked, "lost <10>"));
    text = slurp(svg, NULL);
    REQUIRE(text != NULL);
    CHECK_EQ(count_substr(text, "<circle class=\"mark\""), 20);
    CHECK_CONTAINS(text, ">lost &lt;10&gt;</text>");
    free(text);
    REQUIRE_OK(kr_eval_plot_marked(png, &gt, &est, &ate, marked, "lost"));
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    REQUIRE(png_image_begin_read_from_file(&im, png));
    im.format = PNG_FORMAT_RGB;
    rgb = malloc(PNG_IMAGE_SIZE(im));
    REQUIRE(rgb != NULL);
    REQUIRE(png_image_finish_read(&im, NULL, rgb, 0, NULL));
    size_t orange = 0;
    for (size_t i = 0; i < (size_t)im.width * im.height; i++)
        orange += rgb[3 * i] == 0xff && rgb[3 * i + 1] == 0x7f && rgb[3 * i + 2] == 0x0e;
    CHECK_GT(orange, 2 * 49); /* at least a 7x7 dot in each panel and the legend's */
    free(rgb);

    CHECK_STATUS(kr_eval_plot(bad, &gt, &est, &ate), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_eval_plot("/nonexistent-dir/x.svg", &gt, &est, &ate), KR_ERR_IO);
    CHECK_STATUS(kr_eval_plot("/nonexistent-dir/x.png", &gt, &est, &ate), KR_ERR_IO);
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
}

/* Runs the kinreg program; returns its exit status and its output. */
static int run_tool(const char *args, char *out, size_t size)
{
    char cmd[4608];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kr_test_tool(), args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

KR_TEST(eval, command_prints_ate)
{
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 300, RATE, 0);
    double *noise = malloc(3 * gt.count * sizeof *noise);
    unsigned s = 3;
    rigid_free_noise(&gt, 0.02, &s, noise);
    kr_pose A = some_transform();
    transformed_copy(&gt, &A, noise, &est);
    double expect = noise_rmse(noise, gt.count);
    char gtp[512], estp[512], plot[512], emptyp[512], args[2048], out[8192];
    snprintf(gtp, sizeof gtp, "%s/eval_gt.txt", kr_test_tmpdir());
    snprintf(estp, sizeof estp, "%s/eval_est.txt", kr_test_tmpdir());
    snprintf(plot, sizeof plot, "%s/eval_plot.svg", kr_test_tmpdir());
    snprintf(emptyp, sizeof emptyp, "%s/eval_far.txt", kr_test_tmpdir());
    REQUIRE_OK(kr_trajectory_write_tum(gtp, &gt));
    REQUIRE_OK(kr_trajectory_write_tum(estp, &est));

    snprintf(args, sizeof args, "eval --plot '%s' '%s' '%s'", plot, gtp, estp);
    CHECK_EQ(run_tool(args, out, sizeof out), 0);
    const char *line = strstr(out, "ATE rmse");
    REQUIRE(line != NULL);
    double cm = -1;
    CHECK_EQ(sscanf(line, "ATE rmse %lf cm", &cm), 1);
    CHECK_NEAR(cm, expect * 100, 0.0006); /* printed with 3 decimals */
    CHECK_CONTAINS(out, "pairs            300");
    CHECK_CONTAINS(out, "RPE trans rmse");
    FILE *f = fopen(plot, "r");
    CHECK(f != NULL);
    if (f) fclose(f);

    snprintf(args, sizeof args, "eval --json --max-dt 0.01 --delta 0.5 '%s' '%s'", gtp, estp);
    CHECK_EQ(run_tool(args, out, sizeof out), 0);
    const char *r = strstr(out, "\"rmse\": ");
    REQUIRE(r != NULL);
    double m = -1;
    CHECK_EQ(sscanf(r, "\"rmse\": %lf", &m), 1);
    CHECK_NEAR(m, expect, 1e-6); /* the file keeps 9 decimals */
    CHECK_CONTAINS(out, "\"pairs\": 300");
    CHECK_CONTAINS(out, "\"delta\": 0.5");

    /* Errors: missing file, no associations, bad options. */
    snprintf(args, sizeof args, "eval '%s' '%s/missing.txt'", gtp, kr_test_tmpdir());
    CHECK_EQ(run_tool(args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "missing.txt");
    kr_trajectory far = {0};
    make_path(&far, 30, RATE, 1000.0);
    REQUIRE_OK(kr_trajectory_write_tum(emptyp, &far));
    snprintf(args, sizeof args, "eval '%s' '%s'", gtp, emptyp);
    CHECK_EQ(run_tool(args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "ground-truth stamp within");
    snprintf(args, sizeof args, "eval --plot x.gif '%s' '%s'", gtp, estp);
    CHECK_EQ(run_tool(args, out, sizeof out), 2);
    CHECK_EQ(run_tool("eval --max-dt abc a b", out, sizeof out), 2);
    CHECK_EQ(run_tool("eval onlyone", out, sizeof out), 2);
    CHECK_EQ(run_tool("eval --help", out, sizeof out), 0);
    CHECK_CONTAINS(out, "usage: kinreg eval");

    kr_trajectory_free(&far);
    free(noise);
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
}

KR_TEST(eval, tum_ground_truth_against_itself)
{
    /* Real motion-capture data: the ground truth evaluated against a
     * transformed copy of itself has zero error and the inverse transform. */
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("../shared/data/tum/fr1_xyz_head not present");
    char path[1024];
    snprintf(path, sizeof path, "%s/groundtruth.txt", dir);
    kr_trajectory gt = {0}, est = {0};
    REQUIRE_OK(kr_trajectory_read_tum(path, &gt));
    kr_pose A = some_transform(), Ainv = kr_pose_inv(&A);
    transformed_copy(&gt, &A, NULL, &est);
    kr_ate ate;
    REQUIRE_OK(kr_eval_ate(&gt, &est, 0, &ate));
    CHECK_EQ(ate.pairs, gt.count);
    CHECK_LT(ate.rmse, 1e-9);
    CHECK_LT(pose_diff(&ate.alignment, &Ainv), 1e-8);
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
}

/* ---- the eval command's options and plots ---------------------------------- */

static char out[1 << 16];

static int kinreg(const char *args)
{
    return kr_test_run_tool(NULL, args, out, sizeof out);
}

/* GT copied with every stamp moved by `shift` seconds. */
static void write_shifted(const kr_trajectory *gt, double shift, const char *path)
{
    kr_trajectory t = {0};
    for (size_t i = 0; i < gt->count; i++)
        kr_trajectory_push(&t, gt->stamps[i] + shift, &gt->poses[i]);
    kr_trajectory_write_tum(path, &t);
    kr_trajectory_free(&t);
}

static double ate_of(const char *args)
{
    double v = -1;
    const char *a;
    if (kinreg(args) != 0 || !(a = strstr(out, "ATE rmse")) || sscanf(a, "ATE rmse %lf", &v) != 1)
        return -1;
    return v;
}

KR_TEST(eval, eval_t_offset_undoes_a_clock_shift)
{
    const char *gt_path = kr_test_data("tum/fr1_xyz_head/groundtruth.txt");
    if (!gt_path) SKIP("no TUM data (KINREG_DATA or ../shared/data)");
    char gt_copy[1024], shifted[1024], args[4096];
    snprintf(gt_copy, sizeof gt_copy, "%s", gt_path);
    kr_trajectory gt = {0};
    REQUIRE_OK(kr_trajectory_read_tum(gt_copy, &gt));
    snprintf(shifted, sizeof shifted, "%s/shifted.txt", kr_test_tmpdir());
    write_shifted(&gt, -0.3, shifted);
    kr_trajectory_free(&gt);
    /* Independent expectation: the estimate is the ground truth on a clock
     * 0.3 s behind, so adding 0.3 s makes every pair identical. */
    snprintf(args, sizeof args, "eval '%s' '%s'", gt_copy, shifted);
    double without = ate_of(args);
    snprintf(args, sizeof args, "eval --t-offset 0.3 '%s' '%s'", gt_copy, shifted);
    double with = ate_of(args);
    CHECK_MSG(with >= 0 && with < 0.01, "ATE with --t-offset %g cm", with);
    CHECK_MSG(without > 1, "ATE without the offset %g cm", without);
    /* evo's spelling is accepted too. */
    snprintf(args, sizeof args, "eval --t_offset 0.3 '%s' '%s'", gt_copy, shifted);
    CHECK_NEAR(ate_of(args), with, 1e-9);
    CHECK_EQ(kinreg("eval --t-offset soon a b"), 2);
    CHECK_CONTAINS(out, "--t-offset 'soon'");
}

KR_TEST(eval, eval_align_start_measures_drift_from_the_first_pose)
{
    /* Estimate = ground truth moved rigidly: Horn removes it entirely, and so
     * does the first-pose alignment; a trajectory that also drifts shows the
     * drift only with --align-start. */
    char gt_path[1024], est_path[1024], args[4096];
    snprintf(gt_path, sizeof gt_path, "%s/line_gt.txt", kr_test_tmpdir());
    snprintf(est_path, sizeof est_path, "%s/line_est.txt", kr_test_tmpdir());
    kr_trajectory gt = {0}, est = {0};
    for (int i = 0; i < 50; i++) {
        kr_pose p = kr_pose_identity();
        p.t[0] = 0.01 * i;
        kr_trajectory_push(&gt, i * 0.1, &p);
        kr_pose e = p;
        e.t[0] = 0.02 * i; /* moves twice as far: scale drift */
        e.t[1] = 1.0;      /* and starts 1 m away */
        kr_trajectory_push(&est, i * 0.1, &e);
    }
    REQUIRE_OK(kr_trajectory_write_tum(gt_path, &gt));
    REQUIRE_OK(kr_trajectory_write_tum(est_path, &est));
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
    /* First-pose alignment: error at frame i is 0.01 i m, i = 0..49. */
    double s2 = 0;
    for (int i = 0; i < 50; i++)
        s2 += (0.01 * i) * (0.01 * i);
    double expect_cm = 100 * sqrt(s2 / 50);
    snprintf(args, sizeof args, "eval --align-start '%s' '%s'", gt_path, est_path);
    CHECK_NEAR(ate_of(args), expect_cm, 0.002);
    snprintf(args, sizeof args, "eval '%s' '%s'", gt_path, est_path);
    double horn = ate_of(args);
    CHECK_MSG(horn >= 0 && horn < expect_cm / 1.5, "Horn ATE %g cm vs first-pose %g cm", horn,
              expect_cm);
}

KR_TEST(eval, eval_plot_path_is_checked_first_and_never_hides_the_ate)
{
    const char *gt_path = kr_test_data("tum/fr1_xyz_head/groundtruth.txt");
    if (!gt_path) SKIP("no TUM data (KINREG_DATA or ../shared/data)");
    char args[4096];
    snprintf(args, sizeof args, "eval --plot /nonexistent-kinreg-dir/x.svg '%s' '%s'", gt_path,
             gt_path);
    CHECK_EQ(kinreg(args), 2);
    CHECK_CONTAINS(out, "--plot /nonexistent-kinreg-dir/x.svg");
    CHECK_CONTAINS(out, "no directory");
}

/* A straight 20 m ground truth over 20 s, and an estimate of its first second. */
static void long_gt_short_est(kr_trajectory *gt, kr_trajectory *est)
{
    for (int i = 0; i < 200; i++) {
        kr_pose p = kr_pose_identity();
        p.t[0] = 0.1 * i;
        p.t[1] = 0.01 * (i % 7);
        p.t[2] = 0.02 * (i % 5);
        kr_trajectory_push(gt, 0.1 * i, &p);
        if (i < 10) kr_trajectory_push(est, 0.1 * i, &p);
    }
}

KR_TEST(eval, plot_draws_ground_truth_over_the_estimate_span_only)
{
    /* A 20 m ground truth beside a 1 s run set the scale: the estimate was a dot. */
    kr_trajectory gt = {0}, est = {0};
    long_gt_short_est(&gt, &est);
    char path[700];
    snprintf(path, sizeof path, "%s/span.svg", kr_test_tmpdir());
    REQUIRE_OK(kr_eval_plot(path, &gt, &est, NULL));
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    /* Points drawn: each pose is one "x,y" pair in a polyline; 2 panels ×
     * (10 estimate + about 10 ground truth in the span), not 2 × 210. */
    int pairs = 0;
    for (const char *p = out; (p = strstr(p, "points=\"")); p++)
        for (const char *q = p + 8; *q && *q != '"'; q++)
            pairs += *q == ',';
    CHECK_MSG(pairs >= 40 && pairs <= 50, "%d points drawn", pairs);
}

KR_TEST(eval, plot_png_tick_labels_are_readable)
{
    /* The PNG's tick labels were 7 pixels high. */
    kr_trajectory gt = {0}, est = {0};
    long_gt_short_est(&gt, &est);
    char path[700];
    snprintf(path, sizeof path, "%s/labels.png", kr_test_tmpdir());
    REQUIRE_OK(kr_eval_plot(path, &gt, &est, NULL));
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    REQUIRE(png_image_begin_read_from_file(&im, path));
    im.format = PNG_FORMAT_GRAY;
    unsigned char *px = malloc(PNG_IMAGE_SIZE(im));
    REQUIRE(px != NULL);
    REQUIRE(png_image_finish_read(&im, NULL, px, 0, NULL));
    /* The band under the first panel's frame (the panel spans x 90..470,
     * y 70..450): dark rows there are the x tick labels. */
    int first = -1, last = -1;
    for (int y = 456; y < 477 && y < (int)im.height; y++)
        for (int x = 90; x < 470; x++)
            if (px[(size_t)y * im.width + (size_t)x] < 100) {
                if (first < 0) first = y;
                last = y;
                break;
            }
    free(px);
    REQUIRE(first >= 0);
    CHECK_MSG(last - first + 1 >= 12, "tick labels %d pixels high", last - first + 1);
}

/* Issue 30, item 2: a plot that cannot be written whole (a file-size limit
 * half way, /dev/full) is an error naming the file and the cause, and the
 * plot that was there before is left as it was, for SVG and PNG alike. */
KR_TEST(eval, failed_plot_keeps_the_plot_there_before)
{
    kr_trajectory gt = {0}, est = {0};
    make_path(&gt, 2000, RATE, 0);
    kr_pose A = some_transform();
    transformed_copy(&gt, &A, NULL, &est);
    const char *names[] = {"kept.svg", "kept.png"};
    for (int k = 0; k < 2; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", kr_test_tmpdir(), names[k]);
        REQUIRE_OK(kr_eval_plot(path, &gt, &est, NULL));
        size_t before = 0, after = 0;
        char *good = slurp(path, &before);
        REQUIRE(good && before > 4096);
        pid_t child = fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            signal(SIGXFSZ, SIG_IGN);
            struct rlimit lim = {4096, 4096};
            setrlimit(RLIMIT_FSIZE, &lim);
            kr_status s = kr_eval_plot(path, &gt, &est, NULL);
            _exit(s == KR_ERR_IO && strstr(kr_last_error(), names[k]) &&
                          strstr(kr_last_error(), "File too large")
                      ? 0
                      : 1);
        }
        int status = 0;
        REQUIRE(waitpid(child, &status, 0) == child);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "%s past the file-size limit: status %d", names[k], status);
        char *kept = slurp(path, &after);
        CHECK(kept && after == before && !memcmp(kept, good, before));
        free(good);
        free(kept);
        if (access("/dev/full", W_OK) == 0) {
            char full[64];
            snprintf(full, sizeof full, "/dev/full");
            /* The format follows the name; /dev/full has none: a link does. */
            char link[512];
            snprintf(link, sizeof link, "%s/full_%s", kr_test_tmpdir(), names[k]);
            unlink(link);
            REQUIRE(symlink(full, link) == 0);
            CHECK_STATUS(kr_eval_plot(link, &gt, &est, NULL), KR_ERR_IO);
            CHECK_CONTAINS(kr_last_error(), "No space left");
        }
    }
    kr_trajectory_free(&gt);
    kr_trajectory_free(&est);
}
