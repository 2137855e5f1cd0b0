/* TUM trajectory files: round trip through write/read, the line format, and
 * malformed input reported with its file and line; the bounded history a
 * long session keeps. */
#include "kr_test.h"

#include <stdio.h>
#include <stdlib.h>

#include "kinreg/trajectory.h"
#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>
#include <sys/stat.h>
#include "kinreg/frame.h"
#include <sys/resource.h>

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

KR_TEST(trajectory, write_read_round_trip)
{
    kr_trajectory a = {0}, b = {0};
    unsigned s = 11;
    for (int i = 0; i < 500; i++) {
        double x[6];
        for (int k = 0; k < 3; k++)
            x[k] = (2 * kr_urand(&s) - 1) * 1.5;
        for (int k = 3; k < 6; k++)
            x[k] = (2 * kr_urand(&s) - 1) * 20;
        kr_pose p = kr_pose_exp(x);
        REQUIRE_OK(kr_trajectory_push(&a, 1305031102.160407 + i / 30.0, &p));
    }
    CHECK_EQ(a.count, 500);
    char path[512];
    snprintf(path, sizeof path, "%s/round_trip.txt", kr_test_tmpdir());
    REQUIRE_OK(kr_trajectory_write_tum(path, &a));
    REQUIRE_OK(kr_trajectory_read_tum(path, &b));
    REQUIRE(b.count == a.count);
    double worst_t = 0, worst_R = 0, worst_s = 0;
    for (size_t i = 0; i < a.count; i++) {
        worst_s = fmax(worst_s, fabs(a.stamps[i] - b.stamps[i]));
        for (int k = 0; k < 3; k++)
            worst_t = fmax(worst_t, fabs(a.poses[i].t[k] - b.poses[i].t[k]));
        for (int k = 0; k < 9; k++)
            worst_R = fmax(worst_R, fabs(a.poses[i].R[k] - b.poses[i].R[k]));
    }
    /* %.6f stamps, 9 decimals for the pose */
    CHECK_LE(worst_s, 0.6e-6);
    CHECK_LE(worst_t, 0.6e-9);
    CHECK_LE(worst_R, 1e-8);
    kr_trajectory_free(&a);
    kr_trajectory_free(&b);
    CHECK(b.count == 0 && b.poses == NULL && b.stamps == NULL);
}

KR_TEST(trajectory, format_line)
{
    /* 90° about z: q = (0, 0, sin 45°, cos 45°) */
    kr_pose p = {{0, -1, 0, 1, 0, 0, 0, 0, 1}, {1.25, -2.5, 0.125}};
    char buf[256];
    kr_trajectory_format_line(12.5, &p, buf, sizeof buf);
    CHECK_STR(buf, "12.500000 1.250000000 -2.500000000 0.125000000 0.000000000 0.000000000 "
                   "0.707106781 0.707106781");
}

KR_TEST(trajectory, read_tum_with_comments)
{
    char path[512];
    snprintf(path, sizeof path, "%s/commented.txt", kr_test_tmpdir());
    write_text(path, "# ground truth trajectory\n"
                     "\n"
                     "1.0 1 2 3 0 0 0 1\n"
                     "  # indented comment\n"
                     "2.5\t4 5 6 0 0 1 0\r\n");
    kr_trajectory t = {0};
    REQUIRE_OK(kr_trajectory_read_tum(path, &t));
    REQUIRE(t.count == 2);
    CHECK_NEAR(t.stamps[1], 2.5, 0);
    CHECK_NEAR(t.poses[0].t[2], 3, 0);
    /* q = (0,0,1,0): 180° about z */
    CHECK_NEAR(t.poses[1].R[0], -1, 1e-12);
    CHECK_NEAR(t.poses[1].R[4], -1, 1e-12);
    CHECK_NEAR(t.poses[1].R[8], 1, 1e-12);
    kr_trajectory_free(&t);
}

KR_TEST(trajectory, malformed_line_names_file_and_line)
{
    char path[512];
    snprintf(path, sizeof path, "%s/malformed.txt", kr_test_tmpdir());
    write_text(path, "# header\n1.0 0 0 0 0 0 0 1\n2.0 0 0 0 0 0 0 1\n3.0 0 0 x 0 0 0 1\n");
    kr_trajectory t = {0};
    kr_pose id = kr_pose_identity();
    REQUIRE_OK(kr_trajectory_push(&t, 42.0, &id));
    CHECK_STATUS(kr_trajectory_read_tum(path, &t), KR_ERR_FORMAT);
    char where[600];
    snprintf(where, sizeof where, "%s:4", path);
    CHECK_CONTAINS(kr_last_error(), where);
    /* untouched on error */
    CHECK_EQ(t.count, 1);
    CHECK_NEAR(t.stamps[0], 42.0, 0);

    write_text(path, "1.0 0 0 0 0 0 0 1\n2.0 0 0 0 0 0 0 1 7\n");
    CHECK_STATUS(kr_trajectory_read_tum(path, &t), KR_ERR_FORMAT);
    snprintf(where, sizeof where, "%s:2", path);
    CHECK_CONTAINS(kr_last_error(), where);

    write_text(path, "1.0 0 0 0 0 0 0 0.5\n");
    CHECK_STATUS(kr_trajectory_read_tum(path, &t), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "norm");
    CHECK_EQ(t.count, 1);
    kr_trajectory_free(&t);
}

KR_TEST(trajectory, missing_file_and_unwritable_path)
{
    kr_trajectory t = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/no_such_file.txt", kr_test_tmpdir());
    CHECK_STATUS(kr_trajectory_read_tum(path, &t), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), path);
    snprintf(path, sizeof path, "%s/no_such_dir/out.txt", kr_test_tmpdir());
    CHECK_STATUS(kr_trajectory_write_tum(path, &t), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), path);
}

KR_TEST(trajectory, push_grows_and_keeps_order)
{
    kr_trajectory t = {0};
    for (int i = 0; i < 1000; i++) {
        kr_pose p = kr_pose_identity();
        p.t[0] = i;
        REQUIRE_OK(kr_trajectory_push(&t, i * 0.5, &p));
    }
    CHECK_EQ(t.count, 1000);
    CHECK_GE(t.capacity, 1000);
    int bad = 0;
    for (int i = 0; i < 1000; i++)
        bad += t.stamps[i] != i * 0.5 || t.poses[i].t[0] != i;
    CHECK_EQ(bad, 0);
    kr_trajectory_free(&t);
}

/* The bounded history (core/trajectory_keep.c) of a long session. */
KR_TEST(trajectory, trajectory_keeps_the_last_poses)
{
    kr_trajectory t = {0};
    kr_pose pose = kr_pose_identity();
    size_t most = 0;
    for (int i = 0; i < 1000; i++) {
        pose.t[0] = i;
        REQUIRE_OK(kr_trajectory_push(&t, 0.1 * i, &pose));
        kr_trajectory_keep_last(&t, 64);
        if (t.count > most) most = t.count;
        /* The newest pose is always last, and the history is contiguous. */
        REQUIRE(t.poses[t.count - 1].t[0] == i);
        REQUIRE(t.poses[0].t[0] == i - (double)t.count + 1);
        REQUIRE(t.count >= (i + 1 < 64 ? (size_t)i + 1 : 64));
    }
    CHECK_LE(most, 128);
    CHECK_LE(t.capacity, 128);
    kr_trajectory_free(&t);
}

/* Issue 30, items 2 and 7: a trajectory is written whole or not at all (a
 * write past a file-size limit used to leave a truncated file in place of
 * the good one), and only a regular file is read: a named pipe used to hang
 * forever, /dev/zero to grow without end. Values are range-checked as an
 * option's would be. */
KR_TEST(trajectory, written_whole_and_read_from_regular_files_only)
{
    kr_trajectory a = {0}, b = {0};
    kr_pose id = kr_pose_identity();
    for (int i = 0; i < 2000; i++)
        REQUIRE_OK(kr_trajectory_push(&a, 1305031102.0 + i / 30.0, &id));
    char path[512];
    snprintf(path, sizeof path, "%s/whole.txt", kr_test_tmpdir());
    REQUIRE_OK(kr_trajectory_write_tum(path, &a));
    struct stat before;
    REQUIRE(stat(path, &before) == 0);
    /* 100 000 bytes allowed, 2000 lines of ~90 bytes asked (SIGXFSZ ignored,
     * as the program does): the write fails naming the file and the cause,
     * and the good file of the call before is whole. */
    for (int i = 0; i < 2000; i++)
        a.poses[i].t[0] = 0.125 * i;
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {100000, 100000};
        setrlimit(RLIMIT_FSIZE, &lim);
        kr_status s = kr_trajectory_write_tum(path, &a);
        _exit(s == KR_ERR_IO && strstr(kr_last_error(), "whole.txt") &&
                      strstr(kr_last_error(), "File too large")
                  ? 0
                  : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "a write past the file-size limit: status %d", status);
    struct stat after;
    REQUIRE(stat(path, &after) == 0);
    CHECK_EQ(after.st_size, before.st_size);
    REQUIRE_OK(kr_trajectory_read_tum(path, &b));
    CHECK_EQ(b.count, 2000);
    CHECK_NEAR(b.poses[1999].t[0], 0, 0);
    if (access("/dev/full", W_OK) == 0) {
        CHECK_STATUS(kr_trajectory_write_tum("/dev/full", &a), KR_ERR_IO);
        CHECK_CONTAINS(kr_last_error(), "No space left");
    }

    /* Inputs: a named pipe nobody writes, a device, a directory. */
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/traj.fifo", kr_test_tmpdir());
    REQUIRE(mkfifo(fifo, 0600) == 0);
    double t0 = kr_now();
    CHECK_STATUS(kr_trajectory_read_tum(fifo, &b), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "named pipe");
    CHECK_LT(kr_now() - t0, 5);
    CHECK_STATUS(kr_trajectory_read_tum("/dev/zero", &b), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "a device");
    CHECK_STATUS(kr_trajectory_read_tum(kr_test_tmpdir(), &b), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "a directory");
    CHECK_EQ(b.count, 2000); /* untouched by every failure */

    /* Values out of range: a stamp past 1e10 s, a position past 1e8 m. */
    const char *bad[] = {"1e11 0 0 0 0 0 0 1\n", "1 1e30 0 0 0 0 0 1\n", "1 0 0 -2e8 0 0 0 1\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i]);
        CHECK_STATUS(kr_trajectory_read_tum(path, &b), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), "out of range");
    }
    write_text(path, "-1.5e9 -9.9e7 0 9.9e7 0 0 0 1\n");
    CHECK_OK(kr_trajectory_read_tum(path, &b));
    CHECK_EQ(b.count, 1);
    kr_trajectory_free(&a);
    kr_trajectory_free(&b);
}
