/* The test harness itself: shared data found under its original folder
 * names (tests/runner.c, kr_test_data), skipped cases counted in the
 * closing summary (scripts/test_summary.sh), and tagged cases left out on
 * request (KINREG_TEST_SKIP). */
#include "kr_test.h"

#include <stdlib.h>
#include <unistd.h>

static char out[1 << 16];

KR_TEST(harness, kinreg_data_accepts_the_original_folder_names)
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

KR_TEST(harness, skipped_cases_show_in_the_test_summary)
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
        "[  OK  ] tum.parse (12.5 s, CPU 20.3 s)\n[ RUN  ] tum.wait\n"
        "[  OK  ] tum.wait (30.0 s, CPU 0.5 s)\ntum: 2 passed, 0 failed, 1 skipped\n"
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
    CHECK_CONTAINS(out, "kinreg test cases in 2 modules:\ncases: 9 passed, 0 failed, 1 skipped\n");
    CHECK_CONTAINS(out, "skipped: tum.replay: no TUM data (KINREG_DATA)");
    CHECK_CONTAINS(out, "slowest:    30.0 s  tum.wait\nslowest:    12.5 s  tum.parse\n");
    CHECK_CONTAINS(out, "most CPU:   20.3 s  tum.parse\nmost CPU:    0.5 s  tum.wait\n");
}

/* The sanitizer passes leave out the long cases through the runner's
 * KINREG_TEST_SKIP (scripts/sanitize.sh): a tagged case is neither run nor
 * counted, a line says so, and a selection left empty is a skip (77). */
KR_TEST(harness, tagged_cases_are_left_out_on_request)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'/proc/%d/exe' --list", (int)getpid());
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 0);
    CHECK_CONTAINS(out, "\nrecovery detection_rates_on_jumps_and_covered long\n");
    CHECK_CONTAINS(out, "\nrecovery synthetic_jumps_in_ground_truth_and_stride\n");
    snprintf(cmd, sizeof cmd,
             "KINREG_TEST_SKIP=deadline,long '/proc/%d/exe' recovery "
             "detection_rates_on_jumps_and_covered",
             (int)getpid());
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 77);
    CHECK_CONTAINS(out, "recovery: 1 case left out (tagged deadline,long: KINREG_TEST_SKIP)\n");
    CHECK_MSG(!strstr(out, "[ RUN  ]"), "a case ran: %s", out);
    /* A tag that names no case's tag leaves the case in: "lon" is not "long". */
    snprintf(
        cmd, sizeof cmd,
        "KINREG_TEST_SKIP=lon '/proc/%d/exe' recovery synthetic_jumps_in_ground_truth_and_stride",
        (int)getpid());
    CHECK_EQ(kr_test_shell(cmd, out, sizeof out), 0);
    CHECK_CONTAINS(out, "recovery: 1 passed, 0 failed, 0 skipped");
}
