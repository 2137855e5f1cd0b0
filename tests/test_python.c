/* The Python package in python/: `pip install ./python` into a fresh virtual
 * environment, `import kinreg`, and the installed `kinreg-sub` decodes a live
 * stream from `kinreg run` pose for pose as the run wrote it. Skips when no
 * python3 can make a virtual environment with pip. */
#include "kr_test.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "kinreg/trajectory.h"

static char out[1 << 16];

static int sh(const char *cmd)
{
    return kr_test_shell(cmd, out, sizeof out);
}

/* A virtual environment in the test directory, or NULL (reason in out).
 * --system-site-packages lets Debian's python3-zmq satisfy the pyzmq
 * dependency without the network; elsewhere pip fetches pyzmq from PyPI. */
static const char *make_venv(void)
{
    static char venv[600];
    snprintf(venv, sizeof venv, "%s/venv", kr_test_tmpdir());
    const char *pythons[] = {"/usr/bin/python3", "python3"};
    for (size_t i = 0; i < sizeof pythons / sizeof pythons[0]; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "rm -rf '%s' && %s -m venv --system-site-packages '%s' && '%s/bin/pip' --version",
                 venv, pythons[i], venv, venv);
        if (sh(cmd) == 0) return venv;
    }
    return NULL;
}

KR_TEST(python, pip_install_then_import_and_decode_a_live_stream)
{
    const char *venv = make_venv();
    if (!venv) SKIP("no python3 with venv and pip (Debian: apt install python3-venv)");
    char cmd[4096];
    /* No build isolation: setuptools comes from the environment, so the test
     * needs no network when pyzmq is already there (python3-zmq). */
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/bin/pip' install --no-build-isolation -q ./python",
             KINREG_SOURCE_DIR, venv);
    int rc = sh(cmd);
    if (rc != 0 && strstr(out, "No module named")) SKIP("pip cannot build here: %s", out);
    CHECK_MSG(rc == 0, "pip install ./python failed: %s", out);
    if (kr_test_failed()) return;

    /* Imported from the environment, not from the checkout. */
    snprintf(
        cmd, sizeof cmd,
        "cd / && '%s/bin/python' -c 'import kinreg; print(kinreg.__file__, kinreg.WIRE_VERSION)'",
        venv);
    REQUIRE(sh(cmd) == 0);
    CHECK_CONTAINS(out, venv);
    CHECK_CONTAINS(out, " 3"); /* WIRE_VERSION */

    /* A live stream: run waits for the subscriber, kinreg-sub prints JSON. */
    char traj[700], json[700], endpoint[700];
    snprintf(traj, sizeof traj, "%s/py_live_traj.txt", kr_test_tmpdir());
    snprintf(json, sizeof json, "%s/py_live.json", kr_test_tmpdir());
    snprintf(endpoint, sizeof endpoint, "ipc://%s/py_live.ipc", kr_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "cd / && '%s' run -q -b cpu -n 20 --wait-subscriber 20 -p '%s' -t '%s' & run=$!; "
             "'%s/bin/kinreg-sub' --format json --timeout 30 '%s' > '%s'; sub=$?; wait $run; "
             "echo run=$? sub=$sub",
             kr_test_tool(), endpoint, traj, venv, endpoint, json);
    REQUIRE(sh(cmd) == 0);
    CHECK_CONTAINS(out, "run=0 sub=0");
    CHECK_CONTAINS(out, "kinreg-sub: received");

    kr_trajectory t = {0};
    REQUIRE_OK(kr_trajectory_read_tum(traj, &t));
    REQUIRE(t.count == 20);
    FILE *f = fopen(json, "r");
    REQUIRE(f != NULL);
    char line[4096];
    size_t poses = 0, stopped = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"topic\":\"status\"")) {
            stopped += strstr(line, "\"event\":\"stopped\"") != NULL;
            continue;
        }
        const char *fr = strstr(line, "\"frame\":"), *tt = strstr(line, "\"t\":[");
        unsigned long frame;
        double x, y, z;
        if (!fr || !tt || sscanf(fr, "\"frame\":%lu", &frame) != 1 ||
            sscanf(tt, "\"t\":[%lf,%lf,%lf", &x, &y, &z) != 3)
            continue;
        REQUIRE(frame < t.count);
        /* The trajectory file holds 9 decimals; the stream holds the doubles. */
        CHECK_NEAR(x, t.poses[frame].t[0], 1e-8);
        CHECK_NEAR(y, t.poses[frame].t[1], 1e-8);
        CHECK_NEAR(z, t.poses[frame].t[2], 1e-8);
        poses++;
    }
    fclose(f);
    kr_trajectory_free(&t);
    CHECK_EQ(poses, 20);
    CHECK_EQ(stopped, 1);
}

KR_TEST(python, bad_endpoint_is_one_line_not_a_traceback)
{
    const char *pythons[] = {"/usr/bin/python3", "python3"};
    char cmd[2048];
    for (size_t i = 0; i < sizeof pythons / sizeof pythons[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s -c 'import zmq'", pythons[i]);
        if (sh(cmd) != 0) continue;
        snprintf(cmd, sizeof cmd, "%s '%s/tools/python/kinreg_sub.py' 'tcp://*:notaport'",
                 pythons[i], KINREG_SOURCE_DIR);
        CHECK_EQ(sh(cmd), 2);
        CHECK_CONTAINS(out, "kinreg_sub.py: cannot connect to 'tcp://*:notaport'");
        CHECK_MSG(!strstr(out, "Traceback"), "%s", out);
        return;
    }
    SKIP("no python3 with pyzmq (apt install python3-zmq, or pip install pyzmq)");
}
