/* `kinreg register` on two depth frames: the synthetic scan's frames written
 * as a fakenect dump's PGM and as TUM's 16-bit PNG, and two real TUM fr1
 * frames; the transform against the camera's true motion between them
 * (T = G_dest⁻¹ G_source from the ground truth, camera to world). */
#include "kr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/pgm_depth.h"
#include "capture/png_depth.h"
#include "kinreg/source.h"
#include "kinreg/trajectory.h"

/* T from the tool's --json "t" and "q". */
static bool read_json_pose(const char *out, kr_pose *T)
{
    const char *t = strstr(out, "\"t\": ["), *q = strstr(out, "\"q\": [");
    double v[3], w[4];
    if (!t || !q || sscanf(t, "\"t\": [%lf, %lf, %lf]", &v[0], &v[1], &v[2]) != 3 ||
        sscanf(q, "\"q\": [%lf, %lf, %lf, %lf]", &w[0], &w[1], &w[2], &w[3]) != 4)
        return false;
    *T = kr_pose_from_quat(kr_quat_normalize((kr_quat){w[0], w[1], w[2], w[3]}), v);
    return true;
}

/* T from a 'tx ty tz qx qy qz qw' line (the tool's "tum:"). */
static bool parse_tum_line(const char *line, kr_pose *T)
{
    double v[7];
    if (sscanf(line, "%lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6]) != 7)
        return false;
    *T = kr_pose_from_quat(kr_quat_normalize((kr_quat){v[3], v[4], v[5], v[6]}), v);
    return true;
}

/* Pose error of `T` against `truth`: degrees and millimetres. */
static void error_of(const kr_pose *T, const kr_pose *truth, double *deg, double *mm)
{
    kr_pose ti = kr_pose_inv(truth), d = kr_pose_mul(&ti, T);
    *deg = kr_pose_angle(&d) * 180 / M_PI;
    *mm = 1e3 * sqrt(pow(T->t[0] - truth->t[0], 2) + pow(T->t[1] - truth->t[1], 2) +
                     pow(T->t[2] - truth->t[2], 2));
}

/* Registers SOURCE onto DEST with the tool; the error against `truth`. */
static bool register_error(const char *options, const char *a, const char *b, const kr_pose *truth,
                           double *deg, double *mm)
{
    char args[4096], out[8192];
    snprintf(args, sizeof args, "register --json %s %s %s", options, a, b);
    int rc = kr_test_run_tool(NULL, args, out, sizeof out);
    CHECK_EQ(rc, 0);
    kr_pose T;
    if (rc != 0 || !read_json_pose(out, &T)) {
        CHECK_MSG(0, "no pose from: %s", out);
        return false;
    }
    error_of(&T, truth, deg, mm);
    return true;
}

/* EM-ICP from identity (no initial pose needed), then Newton from its answer
 * on 60 000 points of each frame (on all 300 000 the 12-neighbour normals of
 * Kinect depth, quantised in 1 cm steps at 2 m, are noisier: 0.7° against
 * 0.2-0.3° on the synthetic pair). Newton must at least halve EM-ICP's error. */
#ifdef KINREG_SANITIZED
#define SOFT_POINTS 1000 /* EM-ICP's N x M loop runs many times slower there */
#else
#define SOFT_POINTS 5000 /* the tool's default */
#endif

static bool emicp_then_newton(const char *camera, const char *a, const char *b,
                              const kr_pose *truth, double *deg, double *mm)
{
    char args[4096], out[8192], init[256], options[1024];
    snprintf(args, sizeof args, "register %s --method emicp --engine cpu --subsample %d %s %s",
             camera, SOFT_POINTS, a, b);
    int rc = kr_test_run_tool(NULL, args, out, sizeof out);
    CHECK_EQ(rc, 0);
    const char *tum = strstr(out, "tum: ");
    kr_pose E;
    if (rc != 0 || !tum || sscanf(tum, "tum: %255[^\n]", init) != 1 || !parse_tum_line(init, &E)) {
        CHECK_MSG(0, "no EM-ICP pose from: %s", out);
        return false;
    }
    double edeg, emm;
    error_of(&E, truth, &edeg, &emm);
    snprintf(options, sizeof options,
             "%s --method newton --engine cpu --subsample 60000 --init '%s'", camera, init);
    if (!register_error(options, a, b, truth, deg, mm)) return false;
    /* --method emicp+newton is the same two stages in one call. */
    double cdeg = -1, cmm = -1;
    snprintf(options, sizeof options, "%s --method emicp+newton --engine cpu --subsample %d",
             camera, SOFT_POINTS);
    if (register_error(options, a, b, truth, &cdeg, &cmm)) {
        CHECK_NEAR(cdeg, *deg, 1e-4);
        CHECK_NEAR(cmm, *mm, 1e-3);
    }
    printf("    EM-ICP %.3f deg %.2f mm, then Newton %.3f deg %.2f mm from the true motion\n", edeg,
           emm, *deg, *mm);
    CHECK_LT(*deg, 0.5 * edeg);
    CHECK_LT(*mm, 0.5 * emm);
    return true;
}

/* Frames 0 and 4 of the synthetic scan (4° and 5 cm apart), each written in
 * both formats; the intrinsics are the source's. */
KR_TEST(register_depth, synthetic_frames_as_pgm_and_png)
{
    kr_source_config sc;
    kr_source_config_default(&sc);
    sc.uri = "synthetic";
    sc.duration_s = 1;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &sc));
    const kr_trajectory *gt = kr_source_groundtruth(src);
    kr_intrinsics K = kr_source_intrinsics(src);
    const int picks[2] = {0, 4};
    char pgm[2][1024], png[2][1024];
    for (int k = 0, i = 0; k <= picks[1]; k++) {
        kr_frame f;
        REQUIRE_OK(kr_source_read(src, &f));
        if (k == picks[i]) {
            snprintf(pgm[i], sizeof pgm[i], "%s/frame%d.pgm", kr_test_tmpdir(), k);
            snprintf(png[i], sizeof png[i], "%s/frame%d.png", kr_test_tmpdir(), k);
            CHECK_OK(kr_pgm_write_depth(pgm[i], f.width, f.height, f.raw));
            size_t n = (size_t)f.width * f.height;
            uint16_t *mm5 = malloc(n * sizeof *mm5);
            for (size_t j = 0; j < n; j++) {
                double z = kr_depth_to_metres(f.raw[j], f.encoding, f.depth_scale);
                mm5[j] = z > 0 && z < 13 ? (uint16_t)lround(z * 5000) : 0;
            }
            CHECK_OK(kr_png_write_depth16(png[i], f.width, f.height, mm5));
            free(mm5);
            i++;
        }
        kr_frame_release(&f);
    }
    kr_pose ib = kr_pose_inv(&gt->poses[picks[1]]), truth = kr_pose_mul(&ib, &gt->poses[picks[0]]);
    kr_source_destroy(&src);
    char camera[256];
    snprintf(camera, sizeof camera, "--intrinsics %.6g,%.6g,%.6g,%.6g", K.fx, K.fy, K.cx, K.cy);
    double deg, mm;
    if (emicp_then_newton(camera, pgm[0], pgm[1], &truth, &deg, &mm)) {
        printf("    pgm (raw disparity), a motion of %.1f deg %.1f mm\n",
               kr_pose_angle(&truth) * 180 / M_PI, 1e3 * kr_pose_translation_norm(&truth));
        CHECK_LT(deg, 0.5);
        CHECK_LT(mm, 8);
    }
#ifndef KINREG_SANITIZED /* one pair is enough there */
    snprintf(camera + strlen(camera), sizeof camera - strlen(camera), " --depth-scale 5000");
    if (emicp_then_newton(camera, png[0], png[1], &truth, &deg, &mm)) {
        printf("    png (depth, 1/5000 m)\n");
        CHECK_LT(deg, 0.5);
        CHECK_LT(mm, 8);
    }
#endif
    /* A corrupt depth frame is refused by name (exit status 1). */
    char bad[1024], args[4096], out[4096];
    snprintf(bad, sizeof bad, "%s/cut.png", kr_test_tmpdir());
    FILE *f = fopen(bad, "wb");
    REQUIRE(f != NULL);
    fputs("\x89PNG\r\n\x1a\n truncated", f);
    fclose(f);
    snprintf(args, sizeof args, "register %s %s", bad, pgm[1]);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "cut.png");
}

/* Two frames of TUM fr1/xyz 0.67 s apart (the camera moved 24 cm): EM-ICP
 * from identity, then Newton from its answer on every point. */
KR_TEST(register_depth, tum_frames_against_the_ground_truth)
{
#ifdef KINREG_SANITIZED
    SKIP("the plain suite runs this pair (the synthetic one runs here)");
#endif
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("shared data tum/fr1_xyz_head not found");
    char list[1024], line[512], name[2][1024];
    double stamp[2];
    snprintf(list, sizeof list, "%s/depth.txt", dir);
    FILE *f = fopen(list, "r");
    REQUIRE(f != NULL);
    int row = 0, got = 0;
    while (got < 2 && fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char file[256];
        if (sscanf(line, "%lf %255s", &stamp[got], file) == 2 && (row == 0 || row == 20)) {
            snprintf(name[got], sizeof name[got], "%s/%s", dir, file);
            got++;
        }
        row++;
    }
    fclose(f);
    REQUIRE(got == 2);
    char gtpath[1024];
    snprintf(gtpath, sizeof gtpath, "%s/groundtruth.txt", dir);
    kr_trajectory gt = {0};
    REQUIRE_OK(kr_trajectory_read_tum(gtpath, &gt));
    kr_pose G[2];
    for (int k = 0; k < 2; k++) {
        size_t best = 0;
        for (size_t i = 1; i < gt.count; i++)
            if (fabs(gt.stamps[i] - stamp[k]) < fabs(gt.stamps[best] - stamp[k])) best = i;
        G[k] = gt.poses[best];
    }
    kr_trajectory_free(&gt);
    kr_pose ib = kr_pose_inv(&G[1]), truth = kr_pose_mul(&ib, &G[0]);
    double deg, mm;
    if (emicp_then_newton("--intrinsics fr1", name[0], name[1], &truth, &deg, &mm)) {
        printf("    fr1/xyz frames 0 and 20, a motion of %.1f deg %.1f mm\n",
               kr_pose_angle(&truth) * 180 / M_PI, 1e3 * kr_pose_translation_norm(&truth));
        CHECK_LT(deg, 1.2);
        CHECK_LT(mm, 10);
    }
}
