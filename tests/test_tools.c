/* The kinreg program's contract: help and usage exit codes, clear errors,
 * and the files and figures run, demo and bench promise; --version, the
 * status line that fits the terminal, progress lines when piped, and
 * --deterministic runs that are bit for bit the same. */
#include "kr_test.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "kinreg/source.h"
#include "kinreg/trajectory.h"
#include <unistd.h>
#include "kinreg/scan.h"

/* libfreenect_fakenect_replays_a_kinreg_dump loads libfreenect's fakenect */
KR_LABELS("fakenect");

static int kinreg(const char *args, char *out, size_t size)
{
    return kr_test_run_tool(NULL, args, out, size);
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
    const char *commands[] = {"run", "demo", "sub", "eval", "bench", "record", "convert"};
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
    CHECK_EQ(kinreg("run -q -n 3 -t /nonexistent/dir/t.txt", out, sizeof out), 2);
    CHECK_CONTAINS(out, "/nonexistent/dir/t.txt");
    CHECK_EQ(kinreg("run -q -n 3 --trajectory-final /nonexistent/dir/f.txt", out, sizeof out), 2);
    CHECK_CONTAINS(out, "/nonexistent/dir/f.txt");
}

/* The number after `"key":` in a JSON object (NAN when absent). */
static double json_number(const char *json, const char *key)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    const char *at = strstr(json, quoted);
    return at ? strtod(at + strlen(quoted), NULL) : NAN;
}

/* run and demo --json: one valid JSON object on stdout (Python's parser
 * reads it) whose counts are those of the files and the run: every pose
 * written is a line of the trajectory, the covered frames are LOST. */
KR_TEST(tools, run_and_demo_print_json_summaries)
{
    char args[2048], traj[512], json[512], dir[512];
    snprintf(traj, sizeof traj, "%s/json_run.txt", kr_test_tmpdir());
    snprintf(json, sizeof json, "%s/json_run.json", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "run -q -b cpu -n 40 --covered 1 --covered-frames 6 -t '%s' --json > '%s'", traj,
             json);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    snprintf(args, sizeof args,
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(\"ok\", "
             "d[\"frames_out\"], d[\"error\"])' '%s'",
             json);
    REQUIRE(kr_test_shell(args, out, sizeof out) == 0);
    CHECK_CONTAINS(out, "ok 40 None");
    snprintf(args, sizeof args, "cat '%s'", json);
    REQUIRE(kr_test_shell(args, out, sizeof out) == 0);
    kr_trajectory t = {0};
    REQUIRE_OK(kr_trajectory_read_tum(traj, &t));
    CHECK_EQ(json_number(out, "poses_written"), (double)t.count);
    CHECK_EQ(json_number(out, "frames_lost"), 6);
    CHECK_EQ(json_number(out, "loss_events"), 1);
    kr_trajectory_free(&t);

    snprintf(dir, sizeof dir, "%s/json_demo", kr_test_tmpdir());
    snprintf(args, sizeof args, "demo -q -b cpu -n 30 -o '%s' --json 2>/dev/null", dir);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    CHECK_EQ(json_number(out, "frames_out"), 30);
    CHECK_EQ(json_number(out, "ate_pairs"), 30);
    CHECK_LT(json_number(out, "ate_rmse_m"), 0.02);
    CHECK_MSG(!strstr(out, "ATE RMSE"), "the words went to stdout too: %s", out);
}

/* A covered stretch is LOST while it lasts; the final trajectory holds every
 * frame, the covered ones placed between the poses around them. */
KR_TEST(tools, run_writes_the_final_trajectory)
{
    char args[1024], traj[512];
    snprintf(traj, sizeof traj, "%s/run_final.txt", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "run -q -b cpu -n 60 --covered 1 --covered-frames 10 --trajectory-final '%s'", traj);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    /* One vocabulary: frames LOST, loss events (it said "lost 10" beside
     * "tracking lost 1 times, found again 1; recoveries 1"). */
    CHECK_CONTAINS(out, "LOST 10, dropped 0");
    CHECK_CONTAINS(out, "loss events 1, ended 1");
    CHECK_CONTAINS(out, "recovery searches ");
    CHECK_MSG(!strstr(out, "tracking lost") && !strstr(out, "found again"), "%s", out);
    CHECK_CONTAINS(out, "10 covered ones interpolated, 0 keep their published pose");
    CHECK_CONTAINS(out, "final trajectory written to");
    kr_trajectory t = {0};
    REQUIRE_OK(kr_trajectory_read_tum(traj, &t));
    CHECK_EQ(t.count, 60);
    kr_trajectory_free(&t);
    /* --fill on: the same filling without a file (for the `final` messages). */
    REQUIRE(kinreg("run -q -b cpu -n 60 --covered 1 --covered-frames 10 --fill on", out,
                   sizeof out) == 0);
    CHECK_CONTAINS(out, "10 covered ones interpolated, 0 keep their published pose");
    CHECK(strstr(out, "final trajectory written to") == NULL);
    CHECK_EQ(kinreg("run -q -n 3 --fill yes", out, sizeof out), 2);
    CHECK_CONTAINS(out, "--fill 'yes' is not allowed: expected on or off");
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

    /* With LOST frames the plot shows the final trajectory (its title the
     * final ATE), not the tracked one it showed before. */
    snprintf(dir, sizeof dir, "%s/demo_lost", kr_test_tmpdir());
    snprintf(args, sizeof args, "demo -q -b cpu -n 60 --covered 1 --covered-frames 10 -o '%s'",
             dir);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    double tracked = -1, final = -2, plotted = -3;
    a = strstr(out, "ATE RMSE ");
    const char *f = strstr(out, "final trajectory (");
    REQUIRE(a && f);
    CHECK_EQ(sscanf(a, "ATE RMSE %lf", &tracked), 1);
    f = strstr(f, "ATE RMSE ");
    REQUIRE(f != NULL);
    CHECK_EQ(sscanf(f, "ATE RMSE %lf", &final), 1);
    char svg[600];
    snprintf(svg, sizeof svg, "cat '%s/trajectory.svg'", dir);
    REQUIRE(kr_test_shell(svg, out, sizeof out) == 0);
    const char *title = strstr(out, "ATE RMSE ");
    REQUIRE(title != NULL);
    CHECK_EQ(sscanf(title, "ATE RMSE %lf", &plotted), 1);
    printf("    LOST 10 covered frames: tracked %.2f cm, final %.2f cm, plotted %.2f cm\n", tracked,
           final, plotted);
    CHECK_NEAR(plotted, final, 0.005);
    CHECK_GT(tracked - final, 0.01); /* so the two can be told apart */
    /* Each frame placed after the run is a dot in both panels. */
    size_t dots = 0;
    for (const char *c = out; (c = strstr(c, "<circle class=\"mark\"")) != NULL; c++)
        dots++;
    CHECK_EQ(dots, 2 * 10);
    CHECK_CONTAINS(out, ">lost frames, placed afterwards</text>");
}

KR_TEST(tools, bench_prints_every_stage_as_table_and_json)
{
    char args[1024], json[512];
    snprintf(json, sizeof json, "%s/bench.json", kr_test_tmpdir());
    snprintf(args, sizeof args, "bench -b cpu -n 12 -o '%s'", json);
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
    /* --json: the same object on standard output, the table on stderr. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' bench -b cpu -n 3 -q --json 2> /dev/null", kr_test_tool());
    REQUIRE(kr_test_shell(cmd, out, sizeof out) == 0);
    CHECK(!strncmp(out, "{\"source\": \"synthetic\"", 21));
    CHECK_CONTAINS(out, "\"frames\": 3");
    CHECK_MSG(!strstr(out, "median ms"), "%s", out);
}

/* ---- record and convert ------------------------------------------------------ */

/* Lines of DIR/NAME that are not comments, or -1 when it cannot be read. */
static int count_lines(const char *dir, const char *name)
{
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += line[0] != '#';
    fclose(f);
    return n;
}

KR_TEST(tools, record_and_convert_usage_errors)
{
    char dir[512], args[1024];
    snprintf(dir, sizeof dir, "%s/usage_out", kr_test_tmpdir());
    CHECK_EQ(kinreg("record", out, sizeof out), 2);
    CHECK_CONTAINS(out, "DIR");
    snprintf(args, sizeof args, "record -f png '%s' synthetic", dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "--format");
    snprintf(args, sizeof args, "record -n 0 '%s' synthetic", dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "--frames '0'");
    snprintf(args, sizeof args, "record --intrinsics fr9 '%s' synthetic", dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "fr9");
    snprintf(args, sizeof args, "record '%s' synthetic extra", dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 2);
    snprintf(args, sizeof args, "record '%s' freenect:0", dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "fakenect:DIR");
    CHECK_EQ(kinreg("convert only-one", out, sizeof out), 2);
    CHECK_CONTAINS(out, "INPUT and OUTPUT");
    /* A source that is neither format needs -f, and nothing is written. */
    snprintf(args, sizeof args, "convert -n 2 synthetic '%s'", dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "-f fakenect");
    CHECK(count_lines(dir, "INDEX.txt") < 0 && count_lines(dir, "depth.txt") < 0);
}

KR_TEST(tools, convert_tum_to_fakenect_and_back)
{
    const char *fr1 = kr_test_data("tum/fr1_xyz_head");
    if (!fr1) SKIP("shared data tum/fr1_xyz_head not found (set KINREG_DATA)");
    char fr1_path[1024], dump[512], tum[512], args[4096];
    snprintf(fr1_path, sizeof fr1_path, "%s", fr1);
    snprintf(dump, sizeof dump, "%s/conv_dump", kr_test_tmpdir());
    snprintf(tum, sizeof tum, "%s/conv_tum", kr_test_tmpdir());

    snprintf(args, sizeof args, "convert -q -n 5 'tum:%s' '%s'", fr1_path, dump);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    char want[1024];
    snprintf(want, sizeof want, "5 frames written to %s (fakenect)", dump);
    CHECK_CONTAINS(out, want);
    CHECK_EQ(count_lines(dump, "INDEX.txt"), 5);
    CHECK(exists(dump, "kinreg-intrinsics.txt"));
    CHECK(exists(dump, "groundtruth.txt"));

    /* A bare dump directory converts back to TUM by default. */
    snprintf(args, sizeof args, "convert -q '%s' '%s'", dump, tum);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    snprintf(want, sizeof want, "5 frames written to %s (tum)", tum);
    CHECK_CONTAINS(out, want);
    CHECK_EQ(count_lines(tum, "depth.txt"), 5);
    CHECK(exists(tum, "groundtruth.txt"));

    /* Again: refused without --force, naming the index; replaced with it. */
    CHECK_EQ(kinreg(args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "depth.txt");
    CHECK_CONTAINS(out, "--force");
    CHECK_EQ(count_lines(tum, "depth.txt"), 5);
    snprintf(args, sizeof args, "convert -q --force -n 2 'fakenect:%s' '%s'", dump, tum);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    CHECK_EQ(count_lines(tum, "depth.txt"), 2);
    /* Reading and writing one directory is refused. */
    snprintf(args, sizeof args, "convert --force -f fakenect '%s' '%s'", dump, dump);
    CHECK_EQ(kinreg(args, out, sizeof out), 2);
    CHECK_CONTAINS(out, "input directory");
}

KR_TEST(tools, convert_errors_name_the_input)
{
    char dir[512], args[2048];
    snprintf(dir, sizeof dir, "%s/conv_err_out", kr_test_tmpdir());
    snprintf(args, sizeof args, "convert fakenect:/nonexistent/kinreg-dump '%s'", dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "/nonexistent/kinreg-dump");
    snprintf(args, sizeof args, "convert tum:/nonexistent/kinreg-seq '%s'", dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 1);
    CHECK_CONTAINS(out, "/nonexistent/kinreg-seq");

    /* A dump whose first frame is corrupt: the error names the frame file,
     * and the failed run leaves no recording that would block the next. */
    char bad[512], path[1024];
    snprintf(bad, sizeof bad, "%s/conv_bad_dump", kr_test_tmpdir());
    mkdir(bad, 0755);
    snprintf(path, sizeof path, "%s/INDEX.txt", bad);
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("d-1.000000-60000000.pgm\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/d-1.000000-60000000.pgm", bad);
    f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("P5 640 480 65535\n", f);
    fclose(f);
    snprintf(args, sizeof args, "convert '%s' '%s'", bad, dir);
    for (int run = 0; run < 2; run++) {
        CHECK_EQ(kinreg(args, out, sizeof out), 1);
        CHECK_CONTAINS(out, "d-1.000000-60000000.pgm");
        CHECK_CONTAINS(out, "truncated");
        CHECK_CONTAINS(out, "0 frames written");
    }
}

KR_TEST(tools, record_writes_and_stops_cleanly_on_ctrl_c)
{
    char dir[512], args[2048];
    snprintf(dir, sizeof dir, "%s/record_syn", kr_test_tmpdir());
    snprintf(args, sizeof args, "record -q -n 3 '%s' synthetic", dir);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    char want[1024];
    snprintf(want, sizeof want, "kinreg record: 3 frames written to %s (fakenect)", dir);
    CHECK_CONTAINS(out, want);
    CHECK_EQ(count_lines(dir, "INDEX.txt"), 3);
    CHECK(exists(dir, "kinreg-intrinsics.txt"));
    CHECK(exists(dir, "groundtruth.txt"));

    /* SIGINT in the middle of a long recording: exit 0, and the index lists
     * exactly the frames on disk, every one complete. */
    char cmd[4096], log[600];
    snprintf(dir, sizeof dir, "%s/record_sigint", kr_test_tmpdir());
    snprintf(log, sizeof log, "%s/record_sigint.log", kr_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "'%s' record -q -f tum '%s' synthetic > '%s' 2>&1 & pid=$!; sleep 1; kill -INT $pid; "
             "wait $pid",
             kr_test_tool(), dir, log);
    int rc = system(cmd);
    REQUIRE(WIFEXITED(rc));
    CHECK_EQ(WEXITSTATUS(rc), 0);
    FILE *f = fopen(log, "r");
    REQUIRE(f != NULL);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    CHECK_CONTAINS(out, "stopped by a signal");
    int frames = count_lines(dir, "depth.txt");
    CHECK_GT(frames, 0);
    CHECK_LT(frames, 900); /* the synthetic default: 30 s at 30 fps */
    snprintf(want, sizeof want, "%d frames written", frames);
    CHECK_CONTAINS(out, want);
    snprintf(args, sizeof args, "convert -q '%s' '%s_dump'", dir, dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 0);
    snprintf(want, sizeof want, "%d frames written", frames);
    CHECK_CONTAINS(out, want);
}

/* The dump format is libfreenect's: its fakenect library replays a dump that
 * kinreg wrote as if it were a Kinect, sample for sample. */
KR_TEST(tools, libfreenect_fakenect_replays_a_kinreg_dump)
{
#if !defined(KINREG_HAVE_FREENECT) || !defined(KINREG_FAKENECT_DIR)
    SKIP("built without libfreenect or its fakenect library");
#else
    char dump[512], replay[512], args[2048], env[1024];
    snprintf(dump, sizeof dump, "%s/fakenect_dump", kr_test_tmpdir());
    snprintf(replay, sizeof replay, "%s/fakenect_replay", kr_test_tmpdir());
    snprintf(args, sizeof args, "record -q -n 5 '%s' synthetic:4", dump);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    snprintf(env, sizeof env, "FAKENECT_PATH='%s' FAKENECT_LOOP=0 LD_LIBRARY_PATH='%s'", dump,
             KINREG_FAKENECT_DIR);
    snprintf(args, sizeof args, "record -q '%s' kinect", replay);
    int rc = kr_test_run_tool(env, args, out, sizeof out);
    REQUIRE(rc == 0);
    CHECK_CONTAINS(out, "5 frames written");

    kr_source_config cfg;
    kr_source_config_default(&cfg);
    kr_source *a = NULL, *b = NULL;
    cfg.uri = dump;
    REQUIRE_OK(kr_source_create(&a, &cfg));
    cfg.uri = replay;
    REQUIRE_OK(kr_source_create(&b, &cfg));
    kr_frame fa, fb;
    double t0a = 0, t0b = 0;
    for (int k = 0; k < 5; k++) {
        REQUIRE_OK(kr_source_read(a, &fa));
        REQUIRE_OK(kr_source_read(b, &fb));
        CHECK(memcmp(fa.raw, fb.raw, 640 * 480 * sizeof *fa.raw) == 0);
        if (k == 0) {
            t0a = fa.timestamp;
            t0b = fb.timestamp;
        }
        /* the replay keeps the frame spacing (the counter derived from it) */
        CHECK_NEAR(fb.timestamp - t0b, fa.timestamp - t0a, 1e-5);
        kr_frame_release(&fa);
        kr_frame_release(&fb);
    }
    kr_source_destroy(&a);
    kr_source_destroy(&b);
#endif
}

/* ---- what a run shows and promises ---------------------------------------- */

KR_TEST(tools, version_prints_the_project_version)
{
    CHECK_EQ(kinreg("--version", out, sizeof out), 0);
    CHECK_CONTAINS(out, "kinreg ");
    int major = -1, minor = -1, patch = -1;
    CHECK_EQ(sscanf(out, "kinreg %d.%d.%d", &major, &minor, &patch), 3);
}

KR_TEST(tools, demo_on_a_source_without_groundtruth_says_so)
{
    /* It ended with "cannot evaluate: " and an empty reason. */
    char rec[600], dir[600], args[2048];
    snprintf(rec, sizeof rec, "%s/nogt_src", kr_test_tmpdir());
    snprintf(dir, sizeof dir, "%s/nogt_demo", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "record -q -f tum -n 4 '%s' synthetic 2>/dev/null && rm '%s/groundtruth.txt'", rec,
             rec);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    snprintf(args, sizeof args, "demo -q -b cpu -s '%s' -o '%s'", rec, dir);
    CHECK_EQ(kinreg(args, out, sizeof out), 0);
    CHECK_CONTAINS(out, "has no ground truth");
    CHECK_MSG(!strstr(out, "cannot evaluate: \n"), "%s", out);
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

KR_TEST(tools, status_line_fits_the_terminal)
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

KR_TEST(tools, progress_lines_when_output_is_not_a_terminal)
{
    /* Piped output showed nothing until the end. */
    CHECK_EQ(kinreg("run -b cpu -n 45 --rate 1 --progress 0.4", out, sizeof out), 0);
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "kinreg: frame ")); p++)
        lines++;
    CHECK_MSG(lines >= 2, "%d progress lines in '%s'", lines, out);
    CHECK_MSG(!strchr(out, '\r'), "carriage returns in piped output");
    CHECK_EQ(kinreg("run -b cpu -n 45 --rate 1 --progress 0", out, sizeof out), 0);
    CHECK_MSG(!strstr(out, "kinreg: frame "), "--progress 0 still printed: '%s'", out);
    CHECK_EQ(kinreg("run --progress -1", out, sizeof out), 2);
    CHECK_CONTAINS(out, "--progress '-1'");
}

static bool same_file(const char *a, const char *b)
{
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

KR_TEST(tools, deterministic_runs_are_bit_identical)
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
        REQUIRE(kinreg(args, out, sizeof out) == 0);
    }
    kr_trajectory ta = {0};
    REQUIRE_OK(kr_trajectory_read_tum(a, &ta));
    CHECK_EQ(ta.count, 60);
    kr_trajectory_free(&ta);
    CHECK_MSG(same_file(a, b), "%s and %s differ", a, b);
}

/* ---- every output checked (issue 30, items 1 and 2) ---------------------------- */

/* Standard output that cannot be written (/dev/full: every write fails with
 * ENOSPC) is an error naming it and the cause, exit status 4, for every
 * command: `kinreg eval ... > /dev/full` used to exit 0, `refine --json`
 * and `register --json` to leave 0-byte files and exit 0. */
/* cuBLAS is opened only when the cublas registration engine needs it
 * (gpu/cublas_loader.cuh): linked, its ~700 MB were relocated at every
 * start, ~100 ms before main() could block Ctrl-C (issue 30, item 6). The
 * dynamic loader's own log of a start (LD_DEBUG=files) must not name it. */
KR_TEST(tools, starts_without_loading_cublas)
{
    CHECK_EQ(kr_test_run_tool("LD_DEBUG=files", "--version", out, sizeof out), 0);
    if (!strstr(out, "libcudart")) SKIP("this build has no CUDA");
    CHECK_MSG(!strstr(out, "libcublas"), "the start loaded cuBLAS:\n%s", out);
}

KR_TEST(tools, stdout_that_cannot_be_written_is_exit_4)
{
    if (access("/dev/full", W_OK) != 0) SKIP("no /dev/full here");
    char gt[512], args[1200];
    snprintf(gt, sizeof gt, "%s/stdout_gt.txt", kr_test_tmpdir());
    FILE *f = fopen(gt, "w");
    REQUIRE(f);
    for (int i = 0; i < 60; i++)
        fprintf(f, "%d.0 %g %g 0 0 0 0 1\n", i, 0.01 * i, 0.02 * i);
    fclose(f);
    const char *commands[] = {"eval '%s' '%s'",
                              "eval --json '%s' '%s'",
                              "register --synthetic 300 --json",
                              "register --synthetic 300",
                              "refine --synthetic 3 --cell 0.004 --json -q",
                              "--version",
                              "eval --help"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, commands[i], gt, gt);
        snprintf(args, sizeof args, "%s > /dev/full", cmd);
        int rc = kinreg(args, out, sizeof out);
        CHECK_MSG(rc == 4, "kinreg %s exited with %d, not 4:\n%s", args, rc, out);
        CHECK_CONTAINS(out, "cannot write to standard output (/dev/full): No space left on device");
    }
}

/* A file-size limit (ulimit -f) on standard output: the write fails with
 * EFBIG, said, exit 4, instead of SIGXFSZ killing the program (refine was
 * killed with status 153, without a word). A file given as standard output
 * holds the report whole or not at all. */
KR_TEST(tools, stdout_past_a_file_size_limit_is_said)
{
    char path[512], args[1200];
    snprintf(path, sizeof path, "%s/limited_stdout.txt", kr_test_tmpdir());
    /* 2 blocks (1024 bytes in dash, which system() runs; LLVM's OpenMP
     * runtime needs a 1 KiB file in /dev/shm to start): the report of 8
     * scans has about 1180. */
    snprintf(args, sizeof args,
             "refine --synthetic 8 --cell 0.004 --perturb 1,0.2 --json -q > '%s'", path);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "ulimit -f 2 && exec '%s' %s", kr_test_tool(), args);
    int rc = kr_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 4, "refine under ulimit -f 2 exited with %d, not 4:\n%s", rc, out);
    char expect[700];
    snprintf(expect, sizeof expect, "cannot write to standard output (%s): File too large", path);
    CHECK_CONTAINS(out, expect);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 0);
}

/* Bytes in a file, -1 when there is none. */
static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A failed write never harms the file that was there: `refine --model`
 * under `ulimit -f 100` used to leave a truncated PLY whose header still
 * claimed every vertex (and to die of SIGXFSZ); `bench --json` wrote in
 * place. Now each is exit 4 with the path and the cause, and the earlier
 * good file is whole. */
KR_TEST(tools, failed_file_writes_keep_the_file_there_before)
{
    const char *dir = kr_test_tmpdir();
    char model[512], conf[512], json[512], args[1600], cmd[2000];
    snprintf(model, sizeof model, "%s/kept_model.ply", dir);
    snprintf(conf, sizeof conf, "%s/kept.conf", dir);
    snprintf(json, sizeof json, "%s/kept_bench.json", dir);
    snprintf(args, sizeof args, "refine --synthetic 4 --cell 0.004 -q -o '%s' --model '%s'", conf,
             model);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    long model_size = file_size(model), conf_size = file_size(conf);
    REQUIRE(model_size > 100000);
    float *xyz = NULL;
    size_t n0 = 0, n = 0;
    REQUIRE_OK(kr_scan_read_ply(model, &xyz, &n0));
    free(xyz);
    snprintf(cmd, sizeof cmd, "ulimit -f 100 && exec '%s' %s", kr_test_tool(), args);
    int rc = kr_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 4, "refine --model under ulimit -f 100 exited with %d, not 4:\n%s", rc, out);
    char expect[700];
    snprintf(expect, sizeof expect, "%s: File too large", model);
    CHECK_CONTAINS(out, expect);
    CHECK_CONTAINS(out, "the file there before, if any, is unchanged");
    CHECK_EQ(file_size(model), model_size);
    CHECK_EQ(file_size(conf), conf_size);
    xyz = NULL;
    CHECK_OK(kr_scan_read_ply(model, &xyz, &n));
    CHECK_EQ(n, n0);
    free(xyz);

    /* bench -o: a good report, then one that cannot be written. */
    snprintf(args, sizeof args, "bench -b cpu -n 6 -q -o '%s'", json);
    REQUIRE(kinreg(args, out, sizeof out) == 0);
    long json_size = file_size(json);
    REQUIRE(json_size > 100);
#ifndef __clang__
    /* 512 bytes (dash counts 512-byte blocks): the report has about 770.
     * Not with clang: LLVM's OpenMP runtime cannot start under a limit
     * below 1 KiB (its file in /dev/shm), and the report is shorter. */
    snprintf(cmd, sizeof cmd, "ulimit -f 1 && exec '%s' %s > /dev/null", kr_test_tool(), args);
    rc = kr_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 4, "bench -o under ulimit -f 1 exited with %d, not 4:\n%s", rc, out);
    snprintf(expect, sizeof expect, "cannot write the JSON report to %s: File too large", json);
    CHECK_CONTAINS(out, expect);
    CHECK_EQ(file_size(json), json_size);
#endif
    if (access("/dev/full", W_OK) == 0) {
        CHECK_EQ(kinreg("bench -b cpu -n 6 -q -o /dev/full", out, sizeof out), 4);
        CHECK_CONTAINS(out, "cannot write the JSON report to /dev/full: No space left on device");
    }
    /* No temporary is left beside them. */
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c 'tmp-' || true", dir);
    kr_test_shell(cmd, out, sizeof out);
    CHECK_EQ(atoi(out), 0);
}

/* Issue 30, item 9: what files say reaches the terminal only as text. A
 * depth.txt or .conf can name files whose names hold escape sequences (they
 * retitle a terminal, ESC]0;...BEL, or clear it, ESC[2J); no such byte comes
 * out of the program on stdout or stderr, and JSON escapes them. */
KR_TEST(tools, file_contents_reach_the_terminal_as_text)
{
    const char *tmp = kr_test_tmpdir();
    char dir[600], path[800], args[1600];
    /* A TUM listing naming missing frames with escapes in their names. */
    snprintf(dir, sizeof dir, "%s/escapes_tum", tmp);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/depth.txt", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("1.0 depth/\x1b]0;pwned\x07.png\n2.0 depth/\x1b[2J.png\n3.0 x\2332J.png\n", f);
    fclose(f);
    snprintf(args, sizeof args, "run -q -b cpu --skip-bad --intrinsics fr1 'tum:%s'", dir);
    kinreg(args, out, sizeof out);
    CHECK_CONTAINS(out, "skipping frame");
    CHECK_MSG(!strchr(out, '\x1b') && !strchr(out, '\x07') && !strchr(out, '\x9b'),
              "a control character reached the terminal:\n%s", out);

    /* A scan set whose scans are named so: refine's progress, its table and
     * its JSON. */
    float *views[3];
    size_t count[3];
    kr_pose poses[3];
    REQUIRE_OK(kr_scan_synthetic_object(3, 20000, views, count, poses));
    /* The third holds U+009B (CSI) in UTF-8: octal escapes, so that no hex
     * escape runs into the "2J" after it. */
    const char *names[3] = {"a\x1b]0;pwned\x07.ply", "b\x1b[2J.ply", "c\302\2332J.ply"};
    kr_scan_set_entry entries[3];
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", tmp, names[k]);
        REQUIRE_OK(kr_scan_write_ply(path, views[k], NULL, count[k], NULL));
        free(views[k]);
        entries[k].file = (char *)names[k];
        entries[k].path = NULL;
        entries[k].pose = poses[k];
    }
    kr_scan_set set = {.scans = entries, .n = 3};
    char conf[600];
    snprintf(conf, sizeof conf, "%s/escapes.conf", tmp);
    REQUIRE_OK(kr_scan_set_write(conf, &set, poses));
    snprintf(args, sizeof args, "refine '%s' --cell 0.004 --perturb 1,0.2", conf);
    int rc = kinreg(args, out, sizeof out);
    CHECK_MSG(rc == 0, "refine exited with %d:\n%s", rc, out);
    CHECK_CONTAINS(out, "a\\e]0;pwned\\x07.ply");
    CHECK_MSG(!strchr(out, '\x1b') && !strchr(out, '\x07') && !strstr(out, "\xc2\x9b"),
              "a control character reached the terminal:\n%s", out);
    snprintf(args, sizeof args, "refine '%s' --cell 0.004 --perturb 1,0.2 --json -q", conf);
    rc = kinreg(args, out, sizeof out);
    CHECK_MSG(rc == 0, "refine --json exited with %d:\n%s", rc, out);
    CHECK_CONTAINS(out, "\"scan\":\"a\\u001b]0;pwned\\u0007.ply\"");
    CHECK_MSG(!strchr(out, '\x1b') && !strchr(out, '\x07'),
              "a control character reached the JSON:\n%s", out);
}

/* A recording whose frame cannot be written (a file-size limit): exit status
 * 4 like every output failure (it was 1), the frame file named with the
 * cause, and nothing half written left in the directory. */
KR_TEST(tools, record_frame_that_cannot_be_written_is_exit_4)
{
    char dir[512], cmd[1400];
    snprintf(dir, sizeof dir, "%s/rec_limited", kr_test_tmpdir());
    /* 200 blocks of 512 bytes: a 600 KiB frame does not fit. */
    snprintf(cmd, sizeof cmd, "ulimit -f 200 && exec '%s' record -q -n 3 '%s' synthetic",
             kr_test_tool(), dir);
    int rc = kr_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 4, "record under ulimit -f 200 exited with %d, not 4:\n%s", rc, out);
    char expect[700];
    snprintf(expect, sizeof expect, "cannot write the depth frame to %s/d-", dir);
    CHECK_CONTAINS(out, expect);
    CHECK_CONTAINS(out, "File too large");
    CHECK_CONTAINS(out, "0 frames written");
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c 'pgm' || true", dir);
    kr_test_shell(cmd, out, sizeof out);
    CHECK_EQ(atoi(out), 0);
}

/* Issue 30 item 6: a named pipe as -t. With no reader, run waited forever in
 * open(2), deaf to Ctrl-C; it is refused at once. A reader that stops
 * reading (its pipe shrunk to one page, so it fills after ~45 poses) held
 * tracking to 43 frames in 18 s; the writing now ends after a second
 * without progress, said with the pose count, exit 4, and every frame is
 * still tracked. */
KR_TEST(tools, trajectory_pipe_without_reader_or_stalled_is_said)
{
    char fifo[512], cmd[4096];
    snprintf(fifo, sizeof fifo, "%s/poses.fifo", kr_test_tmpdir());
    REQUIRE(mkfifo(fifo, 0600) == 0);
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' run synthetic -n 5 -b cpu -q -t '%s'",
             kr_test_tool(), fifo);
    int rc = kr_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 1, "run with a reader-less pipe as -t exited with %d, not 1:\n%s", rc, out);
    CHECK_CONTAINS(out, "named pipe that nothing reads");

    /* A reader that opens the pipe, shrinks it and never reads; killed by
     * the shell after the run. */
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import fcntl,os,time; fd=os.open('%s', os.O_RDONLY | os.O_NONBLOCK); "
             "fcntl.fcntl(fd, 1031, 4096); open('%s.ready', 'w').close(); time.sleep(300)\" & "
             "r=$!; for i in $(seq 100); do [ -e '%s.ready' ] && break; sleep 0.1; done; "
             "timeout 300 '%s' run synthetic -n 100 -b cpu -q -t '%s'; rc=$?; kill $r; exit $rc",
             fifo, fifo, fifo, kr_test_tool(), fifo);
    rc = kr_test_shell(cmd, out, sizeof out);
    CHECK_MSG(rc == 4, "run with a stalled pipe reader exited with %d, not 4:\n%s", rc, out);
    CHECK_CONTAINS(out, "its reader took nothing for a second");
    CHECK_CONTAINS(out, "100 frames");
    CHECK_CONTAINS(out, "is incomplete");
}
