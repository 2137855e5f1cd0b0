/* The kinreg program's contract: help and usage exit codes, clear errors,
 * and the files and figures run, demo and bench promise. */
#include "kr_test.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "kinreg/trajectory.h"

/* Runs `kinreg ARGS` with stdout and stderr captured in `out`; returns the exit code. */
static int kinreg(const char *args, char *out, size_t size)
{
    char cmd[2048], path[512];
    snprintf(path, sizeof path, "%s/tool_output.txt", kr_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s' 2>&1", kr_test_tool(), args, path);
    int rc = system(cmd);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(out, 1, size - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static bool exists(const char *dir, const char *name)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && st.st_size > 0;
}

static char out[1 << 16];

KR_TEST(tools, help_and_usage_errors)
{
    const char *commands[] = {"run", "demo", "sub", "eval", "bench"};
    CHECK_EQ(kinreg("--help", out, sizeof out), 0);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", commands[i]);
        CHECK_EQ(kinreg(args, out, sizeof out), 0);
        CHECK_CONTAINS(out, "usage: kinreg");
        snprintf(args, sizeof args, "%s --no-such-option", commands[i]);
        CHECK_EQ(kinreg(args, out, sizeof out), 2);
    }
    CHECK_EQ(kinreg("frobnicate", out, sizeof out), 2);
    CHECK_EQ(kinreg("run --rate fast", out, sizeof out), 2);
    CHECK_CONTAINS(out, "--rate");
}

KR_TEST(tools, run_errors_name_the_input)
{
    CHECK_EQ(kinreg("run -q tum:/nonexistent/kinreg-seq", out, sizeof out), 1);
    CHECK_CONTAINS(out, "/nonexistent/kinreg-seq");
    CHECK_EQ(kinreg("run -q -n 3 -t /nonexistent/dir/t.txt", out, sizeof out), 1);
    CHECK_CONTAINS(out, "/nonexistent/dir/t.txt");
}

KR_TEST(tools, run_writes_one_pose_per_frame)
{
    char args[1024], traj[512];
    snprintf(traj, sizeof traj, "%s/run_traj.txt", kr_test_tmpdir());
    snprintf(args, sizeof args, "run -q -b cpu -n 25 -t '%s'", traj);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    CHECK_CONTAINS(out, "25 frames");
    kr_trajectory t = {0};
    REQUIRE_OK(kr_trajectory_read_tum(traj, &t));
    CHECK_EQ(t.count, 25);
    for (size_t i = 1; i < t.count; i++) CHECK_GT(t.stamps[i], t.stamps[i - 1]);
    kr_trajectory_free(&t);
}

KR_TEST(tools, demo_writes_its_files_and_reports_ate)
{
    char args[2048], dir[512];
    snprintf(dir, sizeof dir, "%s/demo_out", kr_test_tmpdir());
    snprintf(args, sizeof args, "demo -q -b cpu -n 60 --out '%s'", dir);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    CHECK_CONTAINS(out, "ATE RMSE");
    CHECK_CONTAINS(out, "frames/s");
    const char *files[] = {"trajectory.txt", "groundtruth.txt", "model.ply", "trajectory.svg"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) CHECK_MSG(exists(dir, files[i]), "missing %s", files[i]);
    /* The reported ATE agrees with kinreg eval on the files the demo wrote. */
    double demo_ate = -1, eval_ate = -2;
    const char *a = strstr(out, "ATE RMSE ");
    REQUIRE(a != NULL);
    CHECK_EQ(sscanf(a, "ATE RMSE %lf", &demo_ate), 1);
    snprintf(args, sizeof args, "eval '%s/groundtruth.txt' '%s/trajectory.txt'", dir, dir);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    const char *e = strstr(out, "ATE rmse");
    REQUIRE(e != NULL);
    CHECK_EQ(sscanf(e, "ATE rmse %lf", &eval_ate), 1);
    CHECK_NEAR(demo_ate, eval_ate, 0.01); /* both in cm, printed to 2 and 3 decimals */
}

KR_TEST(tools, bench_prints_every_stage_as_table_and_json)
{
    char args[1024], json[512];
    snprintf(json, sizeof json, "%s/bench.json", kr_test_tmpdir());
    snprintf(args, sizeof args, "bench -b cpu -n 12 --json '%s'", json);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    const char *rows[] = {"preprocess", "track (whole frame)", "one Newton iteration", "fuse into model",
                          "tree build", "frame total", "tracker frames/s"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) CHECK_CONTAINS(out, rows[i]);
    FILE *f = fopen(json, "r");
    REQUIRE(f != NULL);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    CHECK_CONTAINS(out, "\"frames\": 12");
    const char *keys[] = {"\"preprocess\":", "\"track\":", "\"newton_iteration\":", "\"fuse\":",
                          "\"tree_build\":", "\"frame\":", "\"tracker_fps\":"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK_CONTAINS(out, keys[i]);
}
