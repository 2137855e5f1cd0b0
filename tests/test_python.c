/* The Python package in python/: `pip install ./python` into a fresh virtual
 * environment, `import kinreg`, and the installed `kinreg-sub` decodes a live
 * stream from `kinreg run` pose for pose as the run wrote it; its wheel
 * builds; kinreg.arrays turns model chunks, mesh chunks and poses that the
 * C library encoded into the numbers they came from. Skips when no python3 can make a
 * virtual environment with pip (or has no numpy, for kinreg.arrays). */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "kinreg/pose.h"
#include "kinreg/trajectory.h"
#include "kinreg/transport.h"

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
    CHECK_CONTAINS(out, " 5"); /* WIRE_VERSION */

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

KR_TEST(python, the_wheel_builds_with_its_numpy_module_and_type_marker)
{
    const char *venv = make_venv();
    if (!venv) SKIP("no python3 with venv and pip (Debian: apt install python3-venv)");
    char cmd[4096];
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && '%s/bin/pip' wheel --no-deps --no-build-isolation -q -w '%s/dist' ./python "
        "&& cd '%s/dist' && '%s/bin/python' -m zipfile -l kinreg-*.whl",
        KINREG_SOURCE_DIR, venv, kr_test_tmpdir(), kr_test_tmpdir(), venv);
    int rc = sh(cmd);
    if (rc != 0 && strstr(out, "No module named")) SKIP("pip cannot build here: %s", out);
    CHECK_MSG(rc == 0, "pip wheel ./python failed: %s", out);
    CHECK_CONTAINS(out, "kinreg/arrays.py");
    CHECK_CONTAINS(out, "kinreg/py.typed");
    CHECK_CONTAINS(out, "kinreg/wire.py");
}

static double uniform(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return (double)(*state >> 8) / (double)(1u << 24);
}

static bool write_payload(const char *name, const uint8_t *buf, size_t len)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", kr_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(buf, 1, len, f) == len;
    if (f) ok = fclose(f) == 0 && ok;
    return ok;
}

/* The first n numbers of the text file DIR/NAME (what numpy.savetxt wrote,
 * "nan" included) into out; false when the file is missing or shorter. */
static bool read_numbers(const char *dir, const char *name, int n, double *out)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    int read = 0;
    while (read < n && fscanf(f, "%lf", &out[read]) == 1)
        read++;
    fclose(f);
    return read == n;
}

/* kinreg.arrays against the numbers the C library encoded: a model snapshot
 * of 3000 points in two chunks (given last chunk first, then a snapshot that
 * misses a chunk), and poses of known rotation matrices. */
KR_TEST(python, arrays_give_back_the_model_points_and_pose_matrices_that_were_sent)
{
    char cmd[4096];
    if (sh("python3 -c 'import numpy'") != 0)
        SKIP("no python3 with numpy (Debian: apt install python3-numpy)");

    enum { N = 3000, FIRST = 2000 };
    static float p[N][3], n[N][3];
    unsigned rng = 7;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < N; i++) {
        double v[3], len = 0;
        for (int k = 0; k < 3; k++) {
            p[i][k] = (float)(-1.0 + 3.0 * uniform(&rng)) * (k == 2 ? 0.5f : 1.0f);
            lo[k] = fminf(lo[k], p[i][k]);
            hi[k] = fmaxf(hi[k], p[i][k]);
            v[k] = uniform(&rng) - 0.5;
            len += v[k] * v[k];
        }
        for (int k = 0; k < 3; k++)
            n[i][k] = i % 100 == 0 ? 0.f : (float)(v[k] / sqrt(len)); /* none: sent as +z */
    }
    float scale = fmaxf(hi[0] - lo[0], fmaxf(hi[1] - lo[1], hi[2] - lo[2])) / 65535.f;
    static uint8_t buf[64 + 8 * FIRST];
    const struct {
        const char *name;
        uint64_t snapshot;
        uint32_t first, count;
        uint16_t chunk;
    } chunks[] = {{"m1.bin", 7, FIRST, N - FIRST, 1},
                  {"m0.bin", 7, 0, FIRST, 0},
                  {"m9.bin", 9, 0, FIRST, 0},
                  {"m10.bin", 10, 0, FIRST, 0}};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        kr_model_msg m = {.seq = c,
                          .snapshot = chunks[c].snapshot,
                          .frame = 42,
                          .total_points = N,
                          .first_point = chunks[c].first,
                          .count = chunks[c].count,
                          .chunk = chunks[c].chunk,
                          .chunks = 2,
                          .scale = scale};
        memcpy(m.origin, lo, sizeof lo);
        size_t at = kr_wire_encode_model_header(&m, buf);
        for (uint32_t i = 0; i < m.count; i++)
            kr_wire_pack_model_point(p[m.first_point + i], n[m.first_point + i], lo, scale,
                                     buf + at + 8 * i);
        REQUIRE(write_payload(chunks[c].name, buf, kr_wire_model_size(m.count)));
    }
    kr_pose truth[3];
    /* Two symmetric 6×6 matrices A Aᵀ of random A, as a covariance is. */
    double cov[2][6][6];
    for (int i = 0; i < 2; i++) {
        double A[6][6];
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 6; b++)
                A[a][b] = 1e-3 * (uniform(&rng) - 0.5);
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 6; b++) {
                cov[i][a][b] = 0;
                for (int k = 0; k < 6; k++)
                    cov[i][a][b] += A[a][k] * A[b][k];
            }
    }
    for (int i = 0; i < 3; i++) {
        double x[6] = {2.5 * (uniform(&rng) - 0.5),
                       2.5 * (uniform(&rng) - 0.5),
                       2.5 * (uniform(&rng) - 0.5),
                       uniform(&rng),
                       uniform(&rng),
                       -uniform(&rng)};
        truth[i] = kr_pose_exp(x);
        kr_quat q = kr_pose_to_quat(&truth[i]);
        kr_pose_msg m = {.topic = KR_TOPIC_POSE,
                         .seq = (uint64_t)i,
                         .frame_index = 5u * (unsigned)i,
                         .timestamp = 100.0 + i,
                         .q = {q.x, q.y, q.z, q.w}};
        memcpy(m.t, truth[i].t, sizeof m.t);
        /* Poses 0 and 1 carry the covariance cov[i] (upper triangle row by
         * row); pose 2 none (NaN: a LOST frame's). */
        for (int a = 0, k = 0; a < 6; a++)
            for (int b = a; b < 6; b++, k++)
                m.covariance[k] = i < 2 ? (float)cov[i][a][b] : NAN;
        uint8_t pose[KR_WIRE_POSE_SIZE];
        REQUIRE(kr_wire_encode_pose(&m, pose) == KR_WIRE_POSE_SIZE);
        char name[32];
        snprintf(name, sizeof name, "p%d.bin", i);
        REQUIRE(write_payload(name, pose, sizeof pose));
    }

    const char *dir = kr_test_tmpdir();
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && PYTHONPATH='%s/python' python3 -c '\n"
        "import numpy as np, kinreg, kinreg.arrays as A\n"
        "def read(topic, name):\n"
        "    with open(name, \"rb\") as f: return kinreg.decode(topic, f.read())\n"
        "snaps = A.ModelSnapshots()\n"
        "done = [snaps.add(read(\"model\", n)) for n in (\"m1.bin\", \"m0.bin\", \"m9.bin\", "
        "\"m10.bin\")]\n"
        "print(\"returned\", [d is not None for d in done], \"frame\", snaps.frame, \"dropped\", "
        "snaps.dropped)\n"
        "np.savetxt(\"model.txt\", done[1], fmt=\"%%.9g\")\n"
        "arr = A.pose_arrays([read(\"pose\", \"p%%d.bin\" %% i) for i in range(3)])\n"
        "np.savetxt(\"T.txt\", arr[\"T\"].reshape(-1, 16), fmt=\"%%.17g\")\n"
        "np.savetxt(\"cov.txt\", arr[\"covariance\"].reshape(-1, 36), fmt=\"%%.9g\")\n"
        "print(\"unknown\", A.covariance_matrix(read(\"pose\", \"p2.bin\")), \"same cov\", "
        "bool(np.array_equal(A.covariance_matrix(read(\"pose\", \"p1.bin\")), "
        "arr[\"covariance\"][1])))\n"
        "one = A.pose_matrix(read(\"pose\", \"p1.bin\"))\n"
        "print(\"frames\", *arr[\"frame\"], \"shapes\", arr[\"t\"].shape, arr[\"q\"].shape, "
        "\"same\", bool(np.array_equal(one, arr[\"T\"][1])))\n"
        "'",
        dir, KINREG_SOURCE_DIR);
    int rc = sh(cmd);
    CHECK_MSG(rc == 0, "%s", out);
    if (rc != 0) return;
    CHECK_CONTAINS(out, "returned [False, True, False, False] frame 42 dropped 1");
    CHECK_CONTAINS(out, "frames 0 5 10 shapes (3, 3) (3, 4) same True");
    CHECK_CONTAINS(out, "unknown None same cov True");

    char path[700];
    snprintf(path, sizeof path, "%s/model.txt", dir);
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    int rows = 0, far = 0, unlike_c = 0, bent = 0;
    float got[6];
    while (rows < N && fscanf(f, "%f %f %f %f %f %f", &got[0], &got[1], &got[2], &got[3], &got[4],
                              &got[5]) == 6) {
        uint8_t packed[KR_WIRE_MODEL_POINT_SIZE];
        float cp[3], cn[3];
        kr_wire_pack_model_point(p[rows], n[rows], lo, scale, packed);
        kr_wire_unpack_model_point(packed, lo, scale, cp, cn);
        double dot = 0;
        for (int k = 0; k < 3; k++) {
            /* within half a quantum of what was sent; as the C decoder */
            far += fabs(got[k] - p[rows][k]) > 0.5 * scale + 1e-6;
            unlike_c += fabs(got[k] - cp[k]) > 1e-6 || fabs(got[3 + k] - cn[k]) > 1e-6;
            dot += got[3 + k] * (rows % 100 == 0 ? (k == 2) : n[rows][k]);
        }
        bent += dot < cos(1.5 * M_PI / 180); /* within 1.5 degrees */
        rows++;
    }
    fclose(f);
    CHECK_EQ(rows, N);
    CHECK_EQ(far, 0);
    CHECK_EQ(unlike_c, 0);
    CHECK_EQ(bent, 0);

    double T[3][16], C[3][36];
    REQUIRE(read_numbers(dir, "T.txt", 3 * 16, &T[0][0]));
    for (int i = 0; i < 3; i++) {
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++)
                CHECK_NEAR(T[i][4 * r + c], truth[i].R[3 * r + c], 1e-12);
            CHECK_NEAR(T[i][4 * r + 3], truth[i].t[r], 1e-15);
        }
        CHECK_NEAR(T[i][12], 0, 0);
        CHECK_NEAR(T[i][15], 1, 0);
    }

    /* The covariances whole and symmetric as sent (float precision), NaN
     * where the message had none. */
    REQUIRE(read_numbers(dir, "cov.txt", 3 * 36, &C[0][0]));
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 36; k++) {
            int a = k / 6, b = k % 6;
            if (i == 2)
                CHECK(isnan(C[i][k]));
            else
                CHECK_NEAR(C[i][k], (double)(float)cov[i][a < b ? a : b][a < b ? b : a], 1e-12);
        }
}

/* kinreg.arrays.MeshSnapshots puts a mesh the C library packed back
 * together from its chunks, given in reverse order: every triangle's
 * corners within half a quantum of the mesh's, their colours exact. */
KR_TEST(python, mesh_snapshots_give_back_every_triangle_that_was_sent)
{
    char cmd[4096];
    if (sh("python3 -c 'import numpy'") != 0)
        SKIP("no python3 with numpy (Debian: apt install python3-numpy)");
    /* A wavy 140 x 140 grid: 38 642 triangles, several chunks. */
    enum { SIDE = 140, NV = SIDE * SIDE, NF = 2 * (SIDE - 1) * (SIDE - 1) };
    static float xyz[NV][3], nrm[NV][3];
    static uint8_t rgb[NV][3];
    static uint32_t tri[NF][3];
    for (int i = 0; i < NV; i++) {
        float u = (float)(i % SIDE) / (SIDE - 1), v = (float)(i / SIDE) / (SIDE - 1);
        xyz[i][0] = 2 * u;
        xyz[i][1] = v;
        xyz[i][2] = 0.2f * sinf(7 * u + 3 * v);
        nrm[i][2] = 1;
        for (int k = 0; k < 3; k++)
            rgb[i][k] = (uint8_t)(i * (2 * k + 1));
    }
    for (int y = 0, f = 0; y + 1 < SIDE; y++)
        for (int x = 0; x + 1 < SIDE; x++, f += 2) {
            uint32_t a = (uint32_t)(y * SIDE + x);
            uint32_t t[2][3] = {{a, a + 1, a + SIDE + 1}, {a, a + SIDE + 1, a + SIDE}};
            memcpy(tri[f], t, sizeof t);
        }
    kr_wire_mesh_packed p;
    REQUIRE_OK(kr_wire_pack_mesh(&xyz[0][0], &nrm[0][0], &rgb[0][0], NV, &tri[0][0], NF, 9, &p));
    REQUIRE(p.chunks >= 3);
    for (int c = 0; c < p.chunks; c++) {
        char name[32];
        snprintf(name, sizeof name, "mesh%d.bin", c);
        REQUIRE(write_payload(name, p.bytes + p.offsets[c], p.offsets[c + 1] - p.offsets[c]));
    }
    const int chunks = p.chunks;
    kr_wire_mesh_packed_free(&p);
    const char *dir = kr_test_tmpdir();
    snprintf(cmd, sizeof cmd,
             "cd '%s' && PYTHONPATH='%s/python' python3 -c '\n"
             "import numpy as np, kinreg, kinreg.arrays as A\n"
             "snaps = A.MeshSnapshots()\n"
             "for c in reversed(range(%d)):\n"
             "    with open(\"mesh%%d.bin\" %% c, \"rb\") as f: got = "
             "snaps.add(kinreg.decode(\"mesh\", f.read()))\n"
             "v, rgba, faces = got[\"vertices\"], got[\"rgba\"], got[\"faces\"]\n"
             "print(\"frame\", snaps.frame, \"faces\", len(faces), \"alpha\", set(rgba[:, "
             "3].tolist()))\n"
             "np.savetxt(\"corners.txt\", np.hstack([v[faces[:, k], :3] for k in range(3)]), "
             "fmt=\"%%.9g\")\n"
             "np.savetxt(\"colours.txt\", np.hstack([rgba[faces[:, k], :3] for k in range(3)]), "
             "fmt=\"%%d\")\n"
             "'",
             dir, KINREG_SOURCE_DIR, chunks);
    int rc = sh(cmd);
    CHECK_MSG(rc == 0, "%s", out);
    if (rc != 0) return;
    char want[64];
    snprintf(want, sizeof want, "frame 9 faces %d alpha {255}", NF);
    CHECK_CONTAINS(out, want);
    static double corners[NF][9], colours[NF][9];
    REQUIRE(read_numbers(dir, "corners.txt", NF * 9, &corners[0][0]));
    REQUIRE(read_numbers(dir, "colours.txt", NF * 9, &colours[0][0]));
    const double half = 0.5 * 2.0 / 65535 + 1e-6; /* the box is 2 m along x */
    int far = 0, unlike = 0;
    for (int f = 0; f < NF; f++)
        for (int k = 0; k < 3; k++)
            for (int a = 0; a < 3; a++) {
                far += fabs(corners[f][3 * k + a] - xyz[tri[f][k]][a]) > half;
                unlike += colours[f][3 * k + a] != rgb[tri[f][k]][a];
            }
    CHECK_EQ(far, 0);
    CHECK_EQ(unlike, 0);
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
