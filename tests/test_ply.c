/* ASCII PLY point reader: the Stanford scans, generic headers, and bad inputs
 * that must fail with the file and line named. */
#include "kr_test.h"

#include <stdint.h>
#include <stdlib.h>

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
     * x, y, z in a different order, comments, CRLF line ends. */
    const char *path = write_file(
        "generic.ply", "ply\r\nformat ascii 1.0\r\ncomment made by hand\r\n"
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
        {"binary.ply", "ply\nformat binary_little_endian 1.0\nelement vertex 1\nend_header\n",
         KR_ERR_UNSUPPORTED, "binary.ply:2"},
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
        {"keyword.ply", "ply\nformat ascii 1.0\nelemnt vertex 1\nend_header\n", KR_ERR_FORMAT,
         "keyword.ply:3"},
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
}

/* A reader fed through a pipe cannot know the size ahead: it must still read
 * a well-formed file and refuse a lying header by its end, not by its claim. */
KR_TEST(ply, pipe_input_allocates_as_it_reads)
{
    char cmd[2048], path[512];
    snprintf(path, sizeof path, "%s/pipe.ply", kr_test_tmpdir());
    snprintf(cmd, sizeof cmd, "rm -f '%s' && mkfifo '%s'", path, path);
    if (system(cmd) != 0) SKIP("mkfifo is not available");
    /* A writer in the background: the header lies (a billion vertices). */
    snprintf(cmd, sizeof cmd,
             "(printf 'ply\\nformat ascii 1.0\\nelement vertex 1000000000\\nproperty float x\\n"
             "property float y\\nproperty float z\\nend_header\\n1 2 3\\n' > '%s') &",
             path);
    REQUIRE(system(cmd) == 0);
    float *xyz = NULL;
    size_t n = 0;
    CHECK_STATUS(kr_scan_read_ply(path, &xyz, &n), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "file ends after 1 of 1000000000 vertices");
}
