/* The project's PLY reader and writer (core/ply.h): the Stanford scans,
 * generic headers, binary files of either byte order and any scalar type
 * checked against the same points in ASCII, the writer's files read back,
 * and bad inputs that must fail with the file (and line) named. */
#include "kr_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ply.h"
#include "kinreg/scan.h"

static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", kr_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

KR_TEST(ply, reads_stanford_scan)
{
    const char *path = kr_test_data("bunny/bun000.ply");
    if (!path) SKIP("shared data bunny/bun000.ply not found");
    float *xyz = NULL;
    size_t n = 0;
    REQUIRE_OK(kr_scan_read_ply(path, &xyz, &n));
    CHECK_EQ(n, 40256);
    /* first and last vertex lines of the file */
    CHECK_NEAR(xyz[0], -0.06325, 1e-7);
    CHECK_NEAR(xyz[1], 0.0359793, 1e-7);
    CHECK_NEAR(xyz[2], 0.0420873, 1e-7);
    for (size_t i = 0; i < 3 * n; i++)
        REQUIRE(isfinite(xyz[i]) && fabs(xyz[i]) < 0.3);
    free(xyz);
}

KR_TEST(ply, generic_header)
{
    /* Another element first (skipped line by line), extra properties around
     * x, y, z in a different order, comments, a line the format does not
     * define (Stanford's Happy Buddha scans carry 'bye' lines), CRLF line
     * ends. */
    const char *path = write_file(
        "generic.ply", "ply\r\nformat ascii 1.0\r\ncomment made by hand\r\nbye\r\n"
                       "element camera 1\r\nproperty float view_x\r\n"
                       "element vertex 2\r\nproperty float confidence\r\nproperty float z\r\n"
                       "property float y\r\nproperty float x\r\nproperty uchar intensity\r\n"
                       "element face 1\r\nproperty list uchar int vertex_indices\r\nend_header\r\n"
                       "7.5\r\n0.9 3 2 1 200\r\n0.8 6e-1 -5 4 100\r\n3 0 1 1\r\n");
    REQUIRE(path != NULL);
    float *xyz = NULL;
    size_t n = 0;
    REQUIRE_OK(kr_scan_read_ply(path, &xyz, &n));
    CHECK_EQ(n, 2);
    const float want[6] = {1, 2, 3, 4, -5, 0.6f};
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(xyz[i], want[i], 1e-7);
    free(xyz);
}

KR_TEST(ply, bad_inputs_name_file_and_line)
{
    static const struct {
        const char *name, *text;
        kr_status want;
        const char *detail; /* must appear in kr_last_error() */
    } cases[] = {
        {"notply.ply", "plx\nformat ascii 1.0\nend_header\n", KR_ERR_FORMAT, "notply.ply:1"},
        {"format.ply", "ply\nformat binary_middle_endian 1.0\nelement vertex 1\nend_header\n",
         KR_ERR_FORMAT, "format.ply:2"},
        {"noxyz.ply",
         "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float "
         "y\nend_header\n1 2\n",
         KR_ERR_FORMAT, "lacks an x, y or z"},
        {"novertex.ply", "ply\nformat ascii 1.0\nelement face 0\nend_header\n", KR_ERR_FORMAT,
         "no vertex element"},
        {"short.ply",
         "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty "
         "float z\nend_header\n"
         "1.0 2.0 3.0\n4.0 5.0 6.0\n", /* long enough for 3 short lines: read, then cut */
         KR_ERR_FORMAT, "short.ply:9: file ends after 2 of 3 vertices"},
        {"text.ply",
         "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty "
         "float z\nend_header\n"
         "1 2 3\n4 five 6\n",
         KR_ERR_FORMAT, "text.ply:9"},
        {"nan.ply",
         "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nproperty "
         "float z\nend_header\n"
         "1 nan 3\n",
         KR_ERR_FORMAT, "nan.ply:8"},
        {"noend.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n", KR_ERR_FORMAT,
         "end_header"},
        {"badcount.ply", "ply\nformat ascii 1.0\nelement vertex -4\nend_header\n", KR_ERR_FORMAT,
         "badcount.ply:3"},
        /* unknown lines are skipped (real files carry some), and named when
         * the header then lacks what they may have meant */
        {"keyword.ply", "ply\nformat ascii 1.0\nelemnt vertex 1\nend_header\n", KR_ERR_FORMAT,
         "line 3, 'elemnt'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *path = write_file(cases[i].name, cases[i].text);
        REQUIRE(path != NULL);
        float *xyz = (float *)(uintptr_t)1;
        size_t n = 12345;
        CHECK_STATUS(kr_scan_read_ply(path, &xyz, &n), cases[i].want);
        CHECK_CONTAINS(kr_last_error(), cases[i].detail);
        CHECK(xyz == (float *)(uintptr_t)1 && n == 12345); /* outputs untouched */
    }
    float *xyz = NULL;
    size_t n = 0;
    char missing[512];
    snprintf(missing, sizeof missing, "%s/does-not-exist.ply", kr_test_tmpdir());
    CHECK_STATUS(kr_scan_read_ply(missing, &xyz, &n), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "does-not-exist.ply");
    CHECK_STATUS(kr_scan_read_ply(NULL, &xyz, &n), KR_ERR_INVALID_ARG);
}

/* Found by tests/fuzz/fuzz_ply: a 114-byte file whose header claims 200
 * million vertices made the reader ask for 2.4 GB before reading a line.
 * Counts are now checked against the bytes after the header, and refused
 * with a message that says so, before any allocation. */
KR_TEST(ply, header_counts_capped_by_file_size)
{
    static const char header[] = "ply\nformat ascii 1.0\nelement vertex %s\nproperty float x\n"
                                 "property float y\nproperty float z\nend_header\n%s";
    static const struct {
        const char *count, *body;
        bool ok;
    } cases[] = {
        {"200000000", "1 2 3\n4 5 6\n", false},            /* the fuzzer's finding */
        {"18446744073709551615", "1 2 3\n", false},         /* the largest count */
        {"3", "1 2 3\n4 5 6\n", false},                     /* 12 bytes cannot hold 3 vertices */
        {"2", "1 2 3\n4 5 6", true},                        /* exactly enough, no last newline */
        {"2", "1 2 3\n4 5 6\n", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[512];
        snprintf(text, sizeof text, header, cases[i].count, cases[i].body);
        const char *path = write_file("claims.ply", text);
        REQUIRE(path != NULL);
        float *xyz = NULL;
        size_t n = 0;
        if (cases[i].ok) {
            CHECK_OK(kr_scan_read_ply(path, &xyz, &n));
            CHECK_EQ(n, 2);
            if (xyz) CHECK_NEAR(xyz[5], 6.0, 0);
            free(xyz);
        } else {
            CHECK_STATUS(kr_scan_read_ply(path, &xyz, &n), KR_ERR_FORMAT);
            CHECK_CONTAINS(kr_last_error(), "bytes follow the header");
            CHECK(xyz == NULL && n == 0);
        }
    }
    /* An earlier element's claim counts too: its items come first. */
    const char *path = write_file("claims_face.ply",
                                  "ply\nformat ascii 1.0\nelement camera 4000000000\n"
                                  "property float a\nelement vertex 1\nproperty float x\n"
                                  "property float y\nproperty float z\nend_header\n1\n1 2 3\n");
    REQUIRE(path != NULL);
    float *xyz = NULL;
    size_t n = 0;
    CHECK_STATUS(kr_scan_read_ply(path, &xyz, &n), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "bytes follow the header");
    /* An earlier element without properties takes no bytes, whatever it
     * claims: the fuzzer's 4e18 of them were dropped one by one for ever. */
    path =
        write_file("claims_empty.ply", "ply\nformat ascii 1.0\nelement marker 4444444444444444444\n"
                                       "element vertex 1\nproperty float x\nproperty float y\n"
                                       "property float z\nend_header\n1 2 3\n");
    REQUIRE(path != NULL);
    CHECK_OK(kr_scan_read_ply(path, &xyz, &n));
    CHECK_EQ(n, 1);
    if (xyz) CHECK_NEAR(xyz[2], 3.0, 0);
    free(xyz);
}

/* A named pipe is refused at once, naming it: a reader would wait for a
 * writer forever (before: `kinreg refine` on a FIFO hung). */
KR_TEST(ply, named_pipe_is_refused_at_once)
{
    char cmd[2048], path[512];
    snprintf(path, sizeof path, "%s/pipe.ply", kr_test_tmpdir());
    snprintf(cmd, sizeof cmd, "rm -f '%s' && mkfifo '%s'", path, path);
    if (system(cmd) != 0) SKIP("mkfifo is not available");
    float *xyz = NULL;
    size_t n = 0;
    CHECK_STATUS(kr_scan_read_ply(path, &xyz, &n), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "pipe.ply");
    CHECK_CONTAINS(kr_last_error(), "named pipe");
}

/* ---- binary files ---------------------------------------------------------- */

/* A binary PLY of the given byte order with one element `camera` (a list and
 * a double) before the vertices, whose properties are written in the types
 * named: x as `xt`, y as float64, z as int16 (scaled values are integers
 * here), then nx ny nz float, red green blue uchar, and a face element after. */
static const char *write_binary(const char *name, bool big, const char *xt, int xsize)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", kr_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    fprintf(f,
            "ply\nformat %s 1.0\ncomment binary test\nelement camera 1\n"
            "property list uchar int ids\nproperty double when\nelement vertex 2\n"
            "property %s x\nproperty float64 y\nproperty int16 z\nproperty uint8 confidence\n"
            "property float nx\nproperty float ny\nproperty float nz\n"
            "property uchar red\nproperty uchar green\nproperty uchar blue\n"
            "element face 1\nproperty list uchar int vertex_indices\nend_header\n",
            big ? "binary_big_endian" : "binary_little_endian", xt);
    /* Writes v as an n-byte value in the file's order. */
#define PUT(bytes, n)                                                                              \
    do {                                                                                           \
        unsigned char b_[8];                                                                       \
        memcpy(b_, bytes, n);                                                                      \
        for (int k_ = 0; k_ < (n); k_++)                                                           \
            fputc(b_[big ? (n)-1 - k_ : k_], f);                                                   \
    } while (0)
    /* the camera item: a list of 2 ints, a double */
    unsigned char two = 2;
    int32_t ids[2] = {7, 8};
    double when = 12.5;
    PUT(&two, 1);
    PUT(&ids[0], 4);
    PUT(&ids[1], 4);
    PUT(&when, 8);
    const double X[2] = {1.5, -2.25}, Y[2] = {0.125, 3.0};
    const int16_t Z[2] = {-7, 300};
    for (int i = 0; i < 2; i++) {
        if (xsize == 4) {
            float x = (float)X[i];
            PUT(&x, 4);
        } else {
            PUT(&X[i], 8);
        }
        PUT(&Y[i], 8);
        PUT(&Z[i], 2);
        unsigned char conf = 99;
        PUT(&conf, 1);
        float nrm[3] = {0, i ? -1.0f : 1.0f, 0};
        for (int k = 0; k < 3; k++)
            PUT(&nrm[k], 4);
        unsigned char rgb[3] = {10, (unsigned char)(20 + i), 30};
        for (int k = 0; k < 3; k++)
            PUT(&rgb[k], 1);
    }
#undef PUT
    fputc(3, f); /* a face: vertex_indices never read */
    fclose(f);
    return path;
}

KR_TEST(ply, binary_either_byte_order_any_type)
{
    const char *types[][2] = {{"float", "4"}, {"float32", "4"}, {"double", "8"}};
    for (int big = 0; big < 2; big++)
        for (int t = 0; t < 3; t++) {
            const char *path = write_binary("binary.ply", big, types[t][0], atoi(types[t][1]));
            REQUIRE(path != NULL);
            kr_ply_points p;
            REQUIRE_OK(kr_ply_read(path, &p));
            CHECK_EQ(p.n, 2);
            const float want[6] = {1.5f, 0.125f, -7, -2.25f, 3.0f, 300};
            for (int i = 0; i < 6; i++)
                CHECK_NEAR(p.xyz[i], want[i], 0);
            REQUIRE(p.normals != NULL && p.rgb != NULL);
            CHECK_NEAR(p.normals[1], 1, 0);
            CHECK_NEAR(p.normals[4], -1, 0);
            CHECK_EQ(p.rgb[1], 20);
            CHECK_EQ(p.rgb[4], 21);
            CHECK_STR(p.format, big ? "binary_big_endian" : "binary_little_endian");
            kr_ply_points_free(&p);
        }
}

/* A binary file cut short, or claiming more than it holds, is refused. */
KR_TEST(ply, binary_truncated_or_lying_is_refused)
{
    const char *path = write_binary("cut.ply", false, "float", 4);
    REQUIRE(path != NULL);
    struct stat sb;
    REQUIRE(stat(path, &sb) == 0);
    /* Cut inside the second vertex (the face and 10 bytes of it gone). */
    REQUIRE(truncate(path, sb.st_size - 2 - 10) == 0);
    kr_ply_points p = {0};
    CHECK_STATUS(kr_ply_read(path, &p), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "cut.ply");
    CHECK(p.xyz == NULL);
    const char *lie = write_file("lie.ply", "ply\nformat binary_little_endian 1.0\n"
                                            "element vertex 1000\nproperty float x\n"
                                            "property float y\nproperty float z\nend_header\n"
                                            "abcdefghijkl");
    REQUIRE(lie != NULL);
    CHECK_STATUS(kr_ply_read(lie, &p), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "bytes follow the header");
}

/* What the writer writes, the reader reads back bit for bit; the file is
 * binary little-endian with the header every viewer expects; a write that
 * fails leaves the file that was there before. */
KR_TEST(ply, writer_round_trip_and_failure_keeps_the_old_file)
{
    enum { N = 1000 };
    float xyz[3 * N], nrm[3 * N];
    uint8_t rgb[3 * N];
    for (int i = 0; i < 3 * N; i++) {
        xyz[i] = (float)(i * 0.001 - 1.2345);
        nrm[i] = (float)((i % 3) - 1);
        rgb[i] = (uint8_t)(i * 7);
    }
    uint32_t faces[6] = {0, 1, 2, 3, 4, 5};
    char path[512];
    snprintf(path, sizeof path, "%s/written.ply", kr_test_tmpdir());
    kr_ply_data d = {.n = N,
                     .xyz = xyz,
                     .normals = nrm,
                     .rgb = rgb,
                     .n_faces = 2,
                     .faces = faces,
                     .comment = "round trip"};
    REQUIRE_OK(kr_ply_write(path, "the test points", &d));
    kr_ply_points p;
    REQUIRE_OK(kr_ply_read(path, &p));
    CHECK_EQ(p.n, N);
    CHECK(memcmp(p.xyz, xyz, sizeof xyz) == 0);
    CHECK(p.normals && memcmp(p.normals, nrm, sizeof nrm) == 0);
    CHECK(p.rgb && memcmp(p.rgb, rgb, sizeof rgb) == 0);
    CHECK_STR(p.format, "binary_little_endian");
    kr_ply_points_free(&p);
    /* The same through the public API, points only. */
    float *back = NULL;
    size_t n = 0;
    REQUIRE_OK(kr_scan_write_ply(path, xyz, NULL, N, NULL));
    REQUIRE_OK(kr_scan_read_ply(path, &back, &n));
    CHECK_EQ(n, N);
    CHECK(back && memcmp(back, xyz, sizeof xyz) == 0);
    free(back);
    /* A file-size limit hit half way (ulimit -f; SIGXFSZ ignored, as the
     * program does): the write fails, naming the path, and the good file of
     * the call before is still whole, whatever its size. */
    struct stat before;
    REQUIRE(stat(path, &before) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &lim);
        kr_ply_data big = d;
        big.rgb = NULL;
        kr_status s = kr_ply_write(path, "the test points", &big);
        _exit(s == KR_ERR_IO && strstr(kr_last_error(), "written.ply") &&
                      strstr(kr_last_error(), "File too large")
                  ? 0
                  : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "a write past the file-size limit: status %d", status);
    char bad[1024];
    snprintf(bad, sizeof bad, "%s/nodir/written.ply", kr_test_tmpdir());
    CHECK_STATUS(kr_ply_write(bad, "the test points", &d), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "nodir/written.ply");
    if (access("/dev/full", W_OK) == 0) {
        /* /dev/full is no regular file: written in place, every write fails. */
        CHECK_STATUS(kr_ply_write("/dev/full", "the test points", &d), KR_ERR_IO);
        CHECK_CONTAINS(kr_last_error(), "No space left");
    }
    struct stat after;
    REQUIRE(stat(path, &after) == 0);
    CHECK_EQ(after.st_size, before.st_size);
    REQUIRE_OK(kr_ply_read(path, &p));
    CHECK_EQ(p.n, N);
    kr_ply_points_free(&p);
}
