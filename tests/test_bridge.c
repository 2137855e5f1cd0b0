/* kinreg-bridge (python/kinreg/bridge.py): the pose stream of a live
 * `kinreg run` recorded to MCAP and served on a Foxglove WebSocket. The
 * checks are independent of the SDK that writes and serves: the MCAP file is
 * read back with the mcap library's reader and its protobuf and ROS 2
 * decoders (tests/python/mcap_matches_tum.py), the WebSocket by a client
 * written from the protocol's specification (tests/python/
 * foxglove_ws_receives.py); both compare every pose with the run's TUM file.
 * Needs PyPI (foxglove-sdk, mcap, ...): skips, saying so, where pip cannot
 * fetch them. */
#include "kr_test.h"

#include <stdlib.h>

static char out[1 << 16];

static int sh(const char *cmd)
{
    return kr_test_shell(cmd, out, sizeof out);
}

/* A virtual environment with the package and its foxglove extra, and the
 * readers the checks use; NULL with the reason in `why`. Made once a run. */
static const char *bridge_venv(char *why, size_t size)
{
    static char venv[600];
    static int state; /* 0 not tried, 1 made, -1 failed */
    static char reason[600];
    if (state == 0) {
        snprintf(venv, sizeof venv, "%s/bridge-venv", kr_test_tmpdir());
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "rm -rf '%s' && /usr/bin/python3 -m venv --system-site-packages '%s' 2>&1 && "
                 "cd '%s' && '%s/bin/pip' install -q --disable-pip-version-check "
                 "'./python[foxglove]' mcap mcap-protobuf-support websockets 2>&1 | tail -3; "
                 "'%s/bin/python' -c 'import kinreg.bridge, foxglove, mcap_ros2, mcap_protobuf, "
                 "websockets' 2>&1",
                 venv, venv, KINREG_SOURCE_DIR, venv, venv);
        state = sh(cmd) == 0 ? 1 : -1;
        snprintf(reason, sizeof reason, "%.590s", out);
    }
    snprintf(why, size, "%s", reason);
    return state == 1 ? venv : NULL;
}

/* Runs N frames of SOURCE (a `kinreg run` source and its options), bridged
 * to MCAP, then checks the recording against the run's TUM file. */
static void check_mcap_of(const char *venv, const char *source, const char *tag)
{
    char mcap[700], traj[700], endpoint[700], cmd[8192];
    snprintf(mcap, sizeof mcap, "%s/%s.mcap", kr_test_tmpdir(), tag);
    snprintf(traj, sizeof traj, "%s/%s_traj.txt", kr_test_tmpdir(), tag);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/%s.ipc", kr_test_tmpdir(), tag);
    /* run waits for the bridge's subscription; the bridge ends with the
     * stream's "stopped" status and closes the file. */
    snprintf(cmd, sizeof cmd,
             "cd / && '%s' run %s -q -b cpu --wait-subscriber 30 -p '%s' -t '%s' 2>&1 & run=$!; "
             "'%s/bin/kinreg-bridge' '%s' --mcap '%s' --timeout 60 2>&1; bridge=$?; wait $run; "
             "echo run=$? bridge=$bridge",
             kr_test_tool(), source, endpoint, traj, venv, endpoint, mcap);
    REQUIRE(sh(cmd) == 0);
    CHECK_CONTAINS(out, "run=0 bridge=0");
    CHECK_CONTAINS(out, "kinreg-bridge: bridged");
    snprintf(cmd, sizeof cmd, "'%s/bin/python' '%s/tests/python/mcap_matches_tum.py' '%s' '%s'",
             venv, KINREG_SOURCE_DIR, mcap, traj);
    int rc = sh(cmd);
    printf("    %s", out);
    CHECK_MSG(rc == 0, "%s", out);
    CHECK_CONTAINS(out, " 0 failures");
}

KR_TEST(bridge, mcap_holds_every_pose_of_a_synthetic_run)
{
    char why[600];
    const char *venv = bridge_venv(why, sizeof why);
    if (!venv) SKIP("cannot install kinreg[foxglove] and the readers from PyPI: %s", why);
    check_mcap_of(venv, "-n 60", "synthetic");
}

KR_TEST_TAGGED(bridge, mcap_holds_every_pose_of_fr1_xyz_head, "long")
{
    /* The same code as the synthetic case, on a real sequence's timestamps. */
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("../shared/data/tum/fr1_xyz_head not present");
    char why[600];
    const char *venv = bridge_venv(why, sizeof why);
    if (!venv) SKIP("cannot install kinreg[foxglove] and the readers from PyPI: %s", why);
    char source[900];
    snprintf(source, sizeof source, "'tum:%s' --intrinsics fr1", dir);
    check_mcap_of(venv, source, "fr1");
}

KR_TEST(bridge, a_foxglove_client_receives_every_pose)
{
    char why[600];
    const char *venv = bridge_venv(why, sizeof why);
    if (!venv) SKIP("cannot install kinreg[foxglove] and the readers from PyPI: %s", why);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd / && '%s/bin/python' '%s/tests/python/foxglove_ws_receives.py' '%s' "
             "'%s/bin/kinreg-bridge' '%s'",
             venv, KINREG_SOURCE_DIR, kr_test_tool(), venv, kr_test_tmpdir());
    int rc = sh(cmd);
    printf("    %s", out);
    CHECK_MSG(rc == 0, "%s", out);
    CHECK_CONTAINS(out, "ok foxglove: 40 PoseInFrame of 40 poses");
}

KR_TEST(bridge, usage_errors_are_one_line)
{
    char why[600];
    const char *venv = bridge_venv(why, sizeof why);
    if (!venv) SKIP("cannot install kinreg[foxglove] and the readers from PyPI: %s", why);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/bin/kinreg-bridge' tcp://127.0.0.1:5555", venv);
    CHECK_EQ(sh(cmd), 2);
    CHECK_CONTAINS(out, "nothing to bridge to");
    snprintf(cmd, sizeof cmd,
             "'%s/bin/kinreg-bridge' tcp://127.0.0.1:5555 --mcap /nonexistent/dir/x.mcap", venv);
    CHECK_EQ(sh(cmd), 2);
    CHECK_CONTAINS(out, "its directory does not exist");
    snprintf(cmd, sizeof cmd, "'%s/bin/kinreg-bridge' tcp://127.0.0.1:5555 --foxglove notaport",
             venv);
    CHECK_EQ(sh(cmd), 2);
    CHECK_CONTAINS(out, "is not [HOST:]PORT");
    snprintf(cmd, sizeof cmd, "'%s/bin/kinreg-bridge' 'tcp://*:x' --mcap '%s/x.mcap'", venv,
             kr_test_tmpdir());
    CHECK_EQ(sh(cmd), 2);
    CHECK_CONTAINS(out, "cannot connect to");
    CHECK_MSG(!strstr(out, "Traceback"), "%s", out);
    /* A WebSocket port another program holds. */
    snprintf(cmd, sizeof cmd,
             "'%s/bin/python' -c 'import socket, subprocess, sys\n"
             "s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()\n"
             "r = subprocess.run([\"%s/bin/kinreg-bridge\", \"tcp://127.0.0.1:5555\", "
             "\"--foxglove\", str(s.getsockname()[1])])\n"
             "sys.exit(r.returncode)' 2>&1",
             venv, venv);
    CHECK_EQ(sh(cmd), 2);
    CHECK_CONTAINS(out, "cannot serve Foxglove on 127.0.0.1:");
    CHECK_CONTAINS(out, "choose another --foxglove port");
}
