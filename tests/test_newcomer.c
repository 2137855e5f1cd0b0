/* A newcomer's first hour (issue 11): every rejected value names itself in one
 * line before any work, output paths are checked first, the conventions users
 * expect (--version, evo's --t_offset) are there. Each test failed before its
 * fix. */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <png.h>

#include "kinreg/device.h"
#include "kinreg/eval.h"
#include "kinreg/source.h"
#include "kinreg/trajectory.h"

static char out[1 << 16];

static int kinreg(const char *args)
{
    return kr_test_run_tool(NULL, args, out, sizeof out);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

KR_TEST(newcomer, every_rejected_number_names_option_value_and_range)
{
    /* Each of these exited 2 printing nothing; 1e12 frames overflowed an int. */
    static const struct {
        const char *args, *option, *value;
    } bad[] = {
        {"--voxel -1", "--voxel", "'-1'"},
        {"-n -5", "--frames", "'-5'"},
        {"--frames 0", "--frames", "'0'"},
        {"--frames 1e12", "--frames", "'1e12'"},
        {"--frames 2.5", "--frames", "'2.5'"},
        {"--voxel 0", "--voxel", "'0'"},
        {"--gate -1", "--gate", "'-1'"},
        {"--duration -1", "--duration", "'-1'"},
        {"--depth-scale 0", "--depth-scale", "'0'"},
        {"--active-window 0", "--active-window", "'0'"},
        {"--rebuild-every 0", "--rebuild-every", "'0'"},
        {"--stall-timeout -1", "--stall-timeout", "'-1'"},
        {"--wait-subscriber -1", "--wait-subscriber", "'-1'"},
        {"--threads -1", "--threads", "'-1'"},
        {"--seed -3", "--seed", "'-3'"},
        {"--iterations 6,x", "--iterations", "'6,x'"},
        {"--rate nan", "--rate", "'nan'"},
    };
    const char *commands[] = {"run", "demo", "bench"};
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char args[256];
            snprintf(args, sizeof args, "%s -b cpu %s", commands[c], bad[i].args);
            CHECK_MSG(kinreg(args) == 2, "%s: exit status", args);
            CHECK_MSG(strstr(out, bad[i].option) && strstr(out, bad[i].value) &&
                          strstr(out, "expected"),
                      "%s: '%s'", args, out);
            CHECK_MSG(count_lines(out) == 1, "%s: %d lines: '%s'", args, count_lines(out), out);
        }
    }
}

KR_TEST(newcomer, unknown_option_is_one_line_with_a_hint)
{
    /* It printed the whole help text. */
    const char *commands[] = {"run", "demo", "bench", "eval", "record", "convert", "sub"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char args[128], hint[64];
        snprintf(args, sizeof args, "%s --no-such-option", commands[i]);
        CHECK_EQ(kinreg(args), 2);
        CHECK_CONTAINS(out, "--no-such-option");
        snprintf(hint, sizeof hint, "kinreg %s --help", commands[i]);
        CHECK_CONTAINS(out, hint);
        CHECK_MSG(count_lines(out) == 1, "%s: %d lines", args, count_lines(out));
    }
    CHECK_EQ(kinreg("run --voxel"), 2);
    CHECK_CONTAINS(out, "'--voxel' needs a value");
    CHECK_EQ(kinreg("frobnicate"), 2);
    CHECK_EQ(count_lines(out), 1);
    CHECK_CONTAINS(out, "kinreg --help");
}

KR_TEST(newcomer, version_prints_the_project_version)
{
    CHECK_EQ(kinreg("--version"), 0);
    CHECK_CONTAINS(out, "kinreg ");
    int major = -1, minor = -1, patch = -1;
    CHECK_EQ(sscanf(out, "kinreg %d.%d.%d", &major, &minor, &patch), 3);
}

KR_TEST(newcomer, model_path_is_checked_before_the_run)
{
    /* The scan ran to the end and then lost the model. */
    CHECK_EQ(kinreg("run -q -b cpu -n 3 -m /nonexistent-kinreg-dir/x.ply"), 1);
    CHECK_CONTAINS(out, "--save-model /nonexistent-kinreg-dir/x.ply");
    CHECK_MSG(!strstr(out, "frames in"), "the run started: '%s'", out);
    char args[512];
    snprintf(args, sizeof args, "run -q -b cpu -n 3 -m '%s'", kr_test_tmpdir());
    CHECK_EQ(kinreg(args), 1);
    CHECK_CONTAINS(out, "is a directory");
    CHECK_MSG(!strstr(out, "frames in"), "the run started: '%s'", out);
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

KR_TEST(newcomer, eval_t_offset_undoes_a_clock_shift)
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

KR_TEST(newcomer, eval_align_start_measures_drift_from_the_first_pose)
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

KR_TEST(newcomer, eval_plot_path_is_checked_first_and_never_hides_the_ate)
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

KR_TEST(newcomer, recordings_carry_intrinsics_and_runs_say_which)
{
    /* record --format tum dropped the source's intrinsics; a later run fell
     * back to the 525 px default without a word. */
    char dir[600], bare[700], args[2048];
    snprintf(dir, sizeof dir, "%s/kinect_tum", kr_test_tmpdir());
    snprintf(args, sizeof args, "record -q -f tum --intrinsics kinect -n 3 '%s' synthetic", dir);
    REQUIRE(kinreg(args) == 0);
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[800];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    cfg.uri = uri;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    kr_intrinsics got = kr_source_intrinsics(src), want;
    REQUIRE_OK(kr_intrinsics_preset("kinect", &want));
    CHECK(memcmp(&got, &want, sizeof got) == 0);
    kr_source_destroy(&src);

    /* run prints the intrinsics, depth units and backend with their origin. */
    snprintf(args, sizeof args, "run -q -b cpu -n 2 '%s'", dir);
    REQUIRE(kinreg(args) == 0);
    CHECK_CONTAINS(out, "fx 570.3");
    CHECK_CONTAINS(out, "kinreg-intrinsics.txt");
    CHECK_CONTAINS(out, "5000 units/m (TUM default)");
    CHECK_CONTAINS(out, "--backend cpu");
    snprintf(args, sizeof args, "run -q -b cpu -n 2 --intrinsics fr3 '%s'", dir);
    REQUIRE(kinreg(args) == 0);
    CHECK_CONTAINS(out, "preset fr3, as given (--intrinsics)");

    /* A TUM directory without the file: one warning naming the preset. */
    snprintf(bare, sizeof bare, "%s/bare_tum", kr_test_tmpdir());
    snprintf(args, sizeof args, "cp -r '%s' '%s' && rm '%s/kinreg-intrinsics.txt'", dir, bare,
             bare);
    REQUIRE(system(args) == 0);
    snprintf(args, sizeof args, "run -q -b cpu -n 2 '%s'", bare);
    REQUIRE(kinreg(args) == 0);
    CHECK_CONTAINS(out, "warning: tum:");
    CHECK_CONTAINS(out, "no kinreg-intrinsics.txt: using the default preset");
}

KR_TEST(newcomer, convert_to_tum_keeps_the_dump_intrinsics)
{
    char dump[600], tum[600], args[2048];
    snprintf(dump, sizeof dump, "%s/conv_dump", kr_test_tmpdir());
    snprintf(tum, sizeof tum, "%s/conv_tum", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "record -q -f fakenect --intrinsics 500,501,320,240 -n 2 '%s' synthetic", dump);
    REQUIRE(kinreg(args) == 0);
    snprintf(args, sizeof args, "convert -q '%s' '%s'", dump, tum);
    REQUIRE(kinreg(args) == 0);
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[800];
    snprintf(uri, sizeof uri, "tum:%s", tum);
    cfg.uri = uri;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    kr_intrinsics k = kr_source_intrinsics(src);
    CHECK_EQ(k.fx, 500.0f);
    CHECK_EQ(k.fy, 501.0f);
    CHECK_EQ(k.cx, 320.0f);
    kr_source_destroy(&src);
}

KR_TEST(newcomer, a_source_may_name_its_index_file)
{
    /* `kinreg run DIR/depth.txt` said "no such directory". */
    const char *depth_txt = kr_test_data("tum/fr1_xyz_head/depth.txt");
    if (!depth_txt) SKIP("no TUM data (KINREG_DATA or ../shared/data)");
    char args[2048];
    snprintf(args, sizeof args, "run -q -b cpu -n 2 '%s'", depth_txt);
    CHECK_EQ(kinreg(args), 0);
    CHECK_CONTAINS(out, "2 frames");
    snprintf(args, sizeof args, "run -q -b cpu -n 2 'tum:%s'", depth_txt);
    CHECK_EQ(kinreg(args), 0);
}

KR_TEST(newcomer, publish_port_out_of_range_is_refused)
{
    /* A tcp port of 99999 was accepted and bound a random port. */
    CHECK_EQ(kinreg("run -q -b cpu -n 2 -p 'tcp://*:99999'"), 2);
    CHECK_CONTAINS(out, "tcp://*:99999");
    CHECK_CONTAINS(out, "1..65535");
    CHECK_MSG(!strstr(out, "frames in"), "the run started: '%s'", out);
    CHECK_EQ(kinreg("run -q -b cpu -n 2 -p 'tcp://127.0.0.1:0x10'"), 2);
}

KR_TEST(newcomer, demo_on_a_source_without_groundtruth_says_so)
{
    /* It ended with "cannot evaluate: " and an empty reason. */
    char rec[600], dir[600], args[2048];
    snprintf(rec, sizeof rec, "%s/nogt_src", kr_test_tmpdir());
    snprintf(dir, sizeof dir, "%s/nogt_demo", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "record -q -f tum -n 4 '%s' synthetic 2>/dev/null && rm '%s/groundtruth.txt'", rec,
             rec);
    REQUIRE(kinreg(args) == 0);
    snprintf(args, sizeof args, "demo -q -b cpu -s '%s' -o '%s'", rec, dir);
    CHECK_EQ(kinreg(args), 0);
    CHECK_CONTAINS(out, "has no ground truth");
    CHECK_MSG(!strstr(out, "cannot evaluate: \n"), "%s", out);
}

KR_TEST(newcomer, bench_takes_quiet_and_refuses_what_it_ignores)
{
    /* bench rejected -q and listed (and silently ignored) output options. */
    CHECK_EQ(kinreg("bench -q -b cpu -n 2"), 0);
    CHECK_CONTAINS(out, "frame total");
    CHECK_MSG(!strstr(out, "timing stages"), "%s", out);
    const char *unused[] = {"-t x.txt", "-m x.ply", "-p tcp://127.0.0.1:5555", "--rate 1",
                            "--wait-subscriber 1"};
    const char *names[] = {"--trajectory", "--save-model", "--publish", "--rate",
                           "--wait-subscriber"};
    for (size_t i = 0; i < sizeof unused / sizeof unused[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "bench -q -b cpu -n 2 %s", unused[i]);
        CHECK_EQ(kinreg(args), 2);
        CHECK_CONTAINS(out, names[i]);
        CHECK_CONTAINS(out, "not used by bench");
    }
    CHECK_EQ(kinreg("bench --help"), 0);
    CHECK_MSG(!strstr(out, "--trajectory") && !strstr(out, "--publish"),
              "bench help lists unused options");
}

static int warnings;
static void count_warnings(kr_log_level level, const char *message, void *user)
{
    (void)message, (void)user;
    warnings += level == KR_LOG_WARN;
}

KR_TEST(newcomer, skip_bad_shows_a_few_then_counts)
{
    /* --skip-bad printed one line per skipped frame. */
    char rec[600], args[2048];
    snprintf(rec, sizeof rec, "%s/skip_src", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "record -q -f tum -n 12 '%s' synthetic 2>/dev/null && for f in $(ls '%s/depth' | head "
             "-10); do "
             "echo x > '%s/depth/'$f; "
             "done",
             rec, rec, rec);
    REQUIRE(kinreg(args) == 0);
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[800];
    snprintf(uri, sizeof uri, "tum:%s", rec);
    cfg.uri = uri;
    cfg.skip_bad = true;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    warnings = 0;
    kr_log_set(KR_LOG_WARN, count_warnings, NULL);
    kr_frame f;
    int frames = 0;
    while (kr_source_read(src, &f) == KR_OK) {
        frames++;
        kr_frame_release(&f);
    }
    kr_log_set(KR_LOG_WARN, NULL, NULL);
    CHECK_EQ(frames, 2);
    CHECK_EQ(kr_source_skipped(src), 10);
    CHECK_EQ(warnings, 3);
    kr_source_destroy(&src);
    /* The program's summary carries the count. */
    snprintf(args, sizeof args, "run -q -b cpu --skip-bad '%s'", rec);
    CHECK_EQ(kinreg(args), 0);
    CHECK_CONTAINS(out, "skipped 10");
}

/* Longest redrawn status text: the pieces between carriage returns or
 * newlines that start with the clear-to-end-of-line code. */
static size_t longest_status(const char *s)
{
    size_t longest = 0;
    while (*s) {
        size_t n = strcspn(s, "\r\n");
        if (n > 4 && memcmp(s, "\033[K ", 4) == 0 && n - 3 > longest) longest = n - 3;
        s += n;
        if (*s) s++;
    }
    return longest;
}

KR_TEST(newcomer, status_line_fits_the_terminal)
{
    /* About 105 characters wrapped on an 80-column terminal. */
    if (system("command -v script > /dev/null 2>&1") != 0)
        SKIP("no script(1) to give the run a terminal");
    char args[2048];
    const int widths[] = {40, 60, 80};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        char log[700];
        snprintf(log, sizeof log, "%s/script_out.txt", kr_test_tmpdir());
        snprintf(
            args, sizeof args,
            "COLUMNS=%d script -qec \"'%s' run -b cpu -n 40\" /dev/null < /dev/null > '%s' 2>&1",
            widths[i], kr_test_tool(), log);
        CHECK_EQ(system(args), 0);
        FILE *f = fopen(log, "r");
        REQUIRE(f != NULL);
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        fclose(f);
        size_t longest = longest_status(out);
        CHECK_MSG(longest > 0, "no status line at width %d: '%s'", widths[i], out);
        CHECK_MSG(longest < (size_t)widths[i], "status line of %zu characters at width %d", longest,
                  widths[i]);
    }
}

KR_TEST(newcomer, progress_lines_when_output_is_not_a_terminal)
{
    /* Piped output showed nothing until the end. */
    CHECK_EQ(kinreg("run -b cpu -n 45 --rate 1 --progress 0.4"), 0);
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "kinreg: frame ")); p++)
        lines++;
    CHECK_MSG(lines >= 2, "%d progress lines in '%s'", lines, out);
    CHECK_MSG(!strchr(out, '\r'), "carriage returns in piped output");
    CHECK_EQ(kinreg("run -b cpu -n 45 --rate 1 --progress 0"), 0);
    CHECK_MSG(!strstr(out, "kinreg: frame "), "--progress 0 still printed: '%s'", out);
    CHECK_EQ(kinreg("run --progress -1"), 2);
    CHECK_CONTAINS(out, "--progress '-1'");
}

static bool same_file(const char *a, const char *b)
{
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

KR_TEST(newcomer, deterministic_runs_are_bit_identical)
{
    /* Two identical runs differed by 0.1 cm RMS, even with --threads 1: the
     * tracker used whichever model snapshot the background build had
     * finished. Two threads here, so the fixed reduction order counts too. */
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    char a[700], b[700], args[2048];
    snprintf(a, sizeof a, "%s/det_a.txt", kr_test_tmpdir());
    snprintf(b, sizeof b, "%s/det_b.txt", kr_test_tmpdir());
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "run -q -b cpu --threads 2 --deterministic -n 60 -t '%s' %s",
                 i ? b : a, dir ? dir : "synthetic");
        REQUIRE(kinreg(args) == 0);
    }
    kr_trajectory ta = {0};
    REQUIRE_OK(kr_trajectory_read_tum(a, &ta));
    CHECK_EQ(ta.count, 60);
    kr_trajectory_free(&ta);
    CHECK_MSG(same_file(a, b), "%s and %s differ", a, b);
}

KR_TEST(newcomer, embedders_are_told_about_spinning_openmp_threads)
{
    /* An embedding program ran 3x slower without OMP_WAIT_POLICY=passive;
     * the library neither set it nor said so. */
    const char *saved = getenv("OMP_WAIT_POLICY");
    char keep[64] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    unsetenv("GOMP_SPINCOUNT");
    kr_device_config cfg;
    kr_device_config_default(&cfg);
    cfg.backend = KR_BACKEND_CPU;
    kr_device *dev = NULL;
    warnings = 0;
    kr_log_set(KR_LOG_WARN, count_warnings, NULL);

    setenv("OMP_WAIT_POLICY", "passive", 1);
    CHECK(kr_openmp_waits_passive());
    CHECK(kr_openmp_wait_policy_chosen());
    CHECK_OK(kr_openmp_prefer_passive(NULL)); /* a chosen policy: nothing to do, no exec */
    REQUIRE_OK(kr_device_create(&dev, &cfg));
    kr_device_destroy(&dev);
    CHECK_EQ(warnings, 0);

    setenv("OMP_WAIT_POLICY", "active", 1);
    CHECK(!kr_openmp_waits_passive());
    unsetenv("OMP_WAIT_POLICY");
    CHECK(!kr_openmp_wait_policy_chosen());
    for (int i = 0; i < 2; i++) {
        REQUIRE_OK(kr_device_create(&dev, &cfg));
        kr_device_destroy(&dev);
    }
    CHECK_EQ(warnings, 1); /* once per process */
    kr_log_set(KR_LOG_WARN, NULL, NULL);
    if (keep[0]) setenv("OMP_WAIT_POLICY", keep, 1);
}

KR_TEST(newcomer, kinreg_data_accepts_the_original_folder_names)
{
    /* KINREG_DATA only worked with this project's own folder names. */
    /* kr_test_data returns one buffer: resolve each before the next call. */
    char real_fr1[1024], real_planes[1024], root[700], cmd[8192];
    const char *fr1 = kr_test_data("tum/fr1_xyz_head");
    if (!fr1 || !realpath(fr1, real_fr1)) SKIP("no shared data to link to");
    const char *planes = kr_test_data("fakenect/planes");
    if (!planes || !realpath(planes, real_planes)) SKIP("no shared data to link to");
    const char *saved = getenv("KINREG_DATA");
    char keep[1024] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);

    /* As downloaded: TUM's name, the dump directly under the data folder. */
    snprintf(root, sizeof root, "%s/as_downloaded", kr_test_tmpdir());
    snprintf(
        cmd, sizeof cmd,
        "mkdir -p '%s' && ln -sfn '%s' '%s/rgbd_dataset_freiburg1_xyz' && ln -sfn '%s' '%s/planes'",
        root, real_fr1, root, real_planes, root);
    REQUIRE(system(cmd) == 0);
    setenv("KINREG_DATA", root, 1);
    const char *p = kr_test_data("tum/fr1_xyz_head/depth.txt");
    CHECK_MSG(p && strstr(p, "rgbd_dataset_freiburg1_xyz/depth.txt"), "%s", p ? p : "(null)");
    p = kr_test_data("fakenect/planes");
    CHECK_MSG(p && strstr(p, "/planes"), "%s", p ? p : "(null)");
    CHECK(kr_test_data("tum/fr2_desk") == NULL);

    /* KINREG_DATA naming the sequence itself. */
    char seq[800];
    snprintf(seq, sizeof seq, "%s/rgbd_dataset_freiburg1_xyz", root);
    setenv("KINREG_DATA", seq, 1);
    p = kr_test_data("tum/fr1_xyz_head/groundtruth.txt");
    CHECK_MSG(p && strstr(p, "rgbd_dataset_freiburg1_xyz/groundtruth.txt"), "%s", p ? p : "(null)");

    if (keep[0])
        setenv("KINREG_DATA", keep, 1);
    else
        unsetenv("KINREG_DATA");
}

KR_TEST(newcomer, a_second_configure_changes_no_compile_flags)
{
    /* `scripts/setup.sh test` after `setup.sh demo` rebuilt everything: the
     * second configure moved libzmq's -isystem flag and changed every
     * compile line. Configure a fresh tree twice (about 15 s on the 2-core
     * machine, configure only); the flags must not move. */
    char dir[700], cmd[8192];
    snprintf(dir, sizeof dir, "%s/reconfigure", kr_test_tmpdir());
    const char *nvcc_path = "PATH=\"$PATH:/usr/local/cuda/bin\"";
    snprintf(
        cmd, sizeof cmd,
        "%s '%s' -S '%s' -B '%s' -DCMAKE_BUILD_TYPE=Release -DKINREG_WERROR=ON > /dev/null 2>&1 && "
        "find '%s' -name flags.make | sort | xargs cat > '%s/first.txt' && "
        "%s '%s' -S '%s' -B '%s' -DCMAKE_BUILD_TYPE=Release -DKINREG_WERROR=ON > /dev/null 2>&1 && "
        "find '%s' -name flags.make | sort | xargs cat > '%s/second.txt' && "
        "cmp -s '%s/first.txt' '%s/second.txt'",
        nvcc_path, KINREG_CMAKE_COMMAND, KINREG_SOURCE_DIR, dir, dir, kr_test_tmpdir(), nvcc_path,
        KINREG_CMAKE_COMMAND, KINREG_SOURCE_DIR, dir, dir, kr_test_tmpdir(), kr_test_tmpdir(),
        kr_test_tmpdir());
    CHECK_MSG(system(cmd) == 0,
              "the second configure changed the compile flags (diff %s/first.txt second.txt)",
              kr_test_tmpdir());
}

KR_TEST(newcomer, skipped_cases_show_in_the_test_summary)
{
    /* Data tests that skipped were invisible: "100% tests passed". */
    char dir[700], cmd[4096];
    snprintf(dir, sizeof dir, "%s/fake_build/Testing/Temporary", kr_test_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    REQUIRE(system(cmd) == 0);
    char log[800];
    snprintf(log, sizeof log, "%s/LastTest.log", dir);
    FILE *f = fopen(log, "w");
    REQUIRE(f != NULL);
    fputs(
        "[ RUN  ] tum.replay\n[ SKIP ] tum.replay: no TUM data (KINREG_DATA)\n[ RUN  ] tum.parse\n"
        "[  OK  ] tum.parse\ntum: 1 passed, 0 failed, 1 skipped\n"
        "pose: 7 passed, 0 failed, 0 skipped\n",
        f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s/scripts/test_summary.sh' '%s/fake_build'", KINREG_SOURCE_DIR,
             kr_test_tmpdir());
    char path[800];
    snprintf(path, sizeof path, "%s/summary.txt", kr_test_tmpdir());
    char full[8192];
    snprintf(full, sizeof full, "%s > '%s' 2>&1", cmd, path);
    CHECK_EQ(system(full), 0);
    f = fopen(path, "r");
    REQUIRE(f != NULL);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    CHECK_CONTAINS(out, "kinreg test cases in 2 modules:\ncases: 8 passed, 0 failed, 1 skipped\n");
    CHECK_CONTAINS(out, "skipped: tum.replay: no TUM data (KINREG_DATA)");
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

KR_TEST(newcomer, plot_draws_ground_truth_over_the_estimate_span_only)
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

KR_TEST(newcomer, plot_png_tick_labels_are_readable)
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

KR_TEST(newcomer, recording_directory_is_checked_before_the_source_opens)
{
    /* Output paths are checked before any work: a recording's too. */
    CHECK_EQ(kinreg("record -q -n 2 /nonexistent-kinreg-dir/take synthetic"), 1);
    CHECK_CONTAINS(
        out,
        "DIR /nonexistent-kinreg-dir/take cannot be created: no directory /nonexistent-kinreg-dir");
    CHECK_MSG(!strstr(out, "synthetic:1"), "the source was opened first: '%s'", out);
    CHECK_EQ(kinreg("convert -q synthetic /nonexistent-kinreg-dir/out"), 1);
    CHECK_CONTAINS(out, "OUTPUT /nonexistent-kinreg-dir/out cannot be created");
}
