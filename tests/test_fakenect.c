/* fakenect:DIR — the dump reader: the real 2011 planes recording when
 * present (timestamps and samples checked against the files read here
 * independently), and every kind of bad dump, written here: each must give
 * the right status and a message naming the file (and its INDEX.txt line). */
#include "kr_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kinreg/source.h"

/* ---- helpers: small dumps written byte by byte --------------------------- */

static uint16_t pattern(int x, int y)
{
    return (uint16_t)((37 * x + 101 * y + ((x * y) & 0xff)) % 2048);
}

/* A fakenect depth file: `header` then w·h host-order samples (pattern, with
 * `bad` written at pixel 1000 when nonzero), cut to `keep` bytes if >= 0. */
static bool write_pgm(const char *dir, const char *name, const char *header, int w, int h,
                      uint16_t bad, long keep)
{
    char path[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    fputs(header, f);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint16_t v = bad && y * w + x == 1000 ? bad : pattern(x, y);
            fwrite(&v, sizeof v, 1, f);
        }
    bool ok = fclose(f) == 0;
    if (ok && keep >= 0) ok = truncate(path, keep) == 0;
    return ok;
}

static bool good_pgm(const char *dir, const char *name)
{
    return write_pgm(dir, name, "P5 640 480 65535\n", 640, 480, 0, -1);
}

static bool write_file(const char *dir, const char *name, const char *text)
{
    char path[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

static const char *make_dump(const char *name)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", kr_test_tmpdir(), name);
    mkdir(dir, 0755);
    return dir;
}

static kr_status open_dump(const char *dir, bool skip_bad, kr_source **src)
{
    return kr_test_open_dir_source("fakenect", dir, skip_bad, src);
}

/* Opens a one-frame dump whose frame file is `name` and reads it; the frame
 * must stay untouched on error. */
static kr_status read_single(const char *dir, const char *name)
{
    char index[300];
    snprintf(index, sizeof index, "a-1.0-0.dump\n%s\n", name);
    if (!write_file(dir, "INDEX.txt", index)) return KR_ERR_IO;
    kr_source *src = NULL;
    kr_status st = open_dump(dir, false, &src);
    if (st != KR_OK) return st;
    kr_frame frame = {.index = 77, .raw = NULL};
    st = kr_source_read(src, &frame);
    if (st == KR_OK) {
        int bad = 0;
        for (int y = 0; y < 480; y++)
            for (int x = 0; x < 640; x++)
                bad += frame.raw[y * 640 + x] != pattern(x, y);
        CHECK_EQ(bad, 0);
    } else {
        CHECK(frame.index == 77 && frame.raw == NULL);
    }
    kr_frame_release(&frame);
    kr_source_destroy(&src);
    return st;
}

/* ---- the real planes recording -------------------------------------------- */

KR_TEST(fakenect, planes_dump)
{
    const char *dir = kr_test_data("fakenect/planes");
    if (!dir) SKIP("shared data fakenect/planes not found (set KINREG_DATA)");
    /* The depth frames in INDEX.txt order, read here without the library. */
    char path[1600];
    snprintf(path, sizeof path, "%s/INDEX.txt", dir);
    FILE *index = fopen(path, "r");
    REQUIRE(index != NULL);
    char names[64][256];
    double stamps[64];
    int n_names = 0, lines = 0;
    char line[256];
    while (fgets(line, sizeof line, index) && n_names < 64) {
        lines++;
        unsigned ticks;
        if (line[0] != 'd') continue;
        REQUIRE(sscanf(line, "d-%lf-%u.pgm", &stamps[n_names], &ticks) == 2);
        line[strcspn(line, "\n")] = '\0';
        memcpy(names[n_names++], line, sizeof line);
    }
    fclose(index);
    CHECK_EQ(lines, 623);
    REQUIRE(n_names == 36);

    kr_source *src = NULL;
    REQUIRE_OK(open_dump(dir, false, &src));
    CHECK_EQ(kr_source_length(src), 36);
    CHECK_CONTAINS(kr_source_describe(src), "fakenect:");
    CHECK_CONTAINS(kr_source_describe(src), "36 frames");
    CHECK(kr_source_groundtruth(src) == NULL);
    CHECK(!kr_source_is_live(src));
    kr_intrinsics k = kr_source_intrinsics(src), kinect;
    REQUIRE_OK(kr_intrinsics_preset("kinect", &kinect));
    CHECK(memcmp(&k, &kinect, sizeof k) == 0);

    static uint16_t file[640 * 480];
    kr_frame f;
    kr_status st;
    int n = 0;
    size_t valid = 0, total = 0;
    while ((st = kr_source_read(src, &f)) == KR_OK) {
        REQUIRE(n < 36);
        CHECK_EQ(f.index, n);
        CHECK_EQ(f.width, 640);
        CHECK_EQ(f.height, 480);
        CHECK_EQ(f.encoding, KR_DEPTH_DISPARITY11);
        CHECK_NEAR(f.timestamp, stamps[n], 0);
        /* The samples are the file's bytes after the 17-byte header line. */
        snprintf(path, sizeof path, "%s/%s", dir, names[n]);
        FILE *pgm = fopen(path, "rb");
        REQUIRE(pgm != NULL);
        char header[18] = "";
        CHECK_EQ(fread(header, 1, 17, pgm), 17);
        CHECK_STR(header, "P5 640 480 65535\n");
        CHECK_EQ(fread(file, 2, 640 * 480, pgm), 640 * 480);
        fclose(pgm);
        int differ = 0;
        for (size_t i = 0; i < 640 * 480; i++) {
            differ += f.raw[i] != file[i];
            valid += f.raw[i] < KR_DISPARITY_INVALID;
        }
        total += 640 * 480;
        CHECK_EQ(differ, 0);
        kr_frame_release(&f);
        n++;
    }
    CHECK_STATUS(st, KR_END);
    CHECK_EQ(n, 36);
    CHECK_EQ(kr_source_skipped(src), 0);
    CHECK_GT(valid, 0.9 * total); /* 5.5% of the planes pixels have no return */
    kr_source_destroy(&src);

    /* A bare directory holding INDEX.txt (and no depth.txt) is a fakenect dump. */
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = dir;
    cfg.max_frames = 2;
    cfg.intrinsics = "fr1"; /* the caller's intrinsics win */
    REQUIRE_OK(kr_source_create(&src, &cfg));
    CHECK_CONTAINS(kr_source_describe(src), "fakenect:");
    CHECK_EQ(kr_source_length(src), 2);
    CHECK_NEAR(kr_source_intrinsics(src).fx, 517.3, 1e-4);
    kr_source_destroy(&src);
}

/* ---- good small dumps ------------------------------------------------------ */

KR_TEST(fakenect, header_forms_and_ignored_records)
{
    const char *dir = make_dump("forms");
    REQUIRE(write_pgm(dir, "d-1.5-10.pgm", "P5\n# a comment\n640  480\t65535\n", 640, 480, 0, -1));
    REQUIRE(write_pgm(dir, "d-2.5-20.pgm", "P5 640\n480\n# c\n65535\n", 640, 480, 0, -1));
    REQUIRE(write_file(dir, "INDEX.txt",
                       "r-1.0-5.ppm\na-1.2-5.dump\nd-1.5-10.pgm\r\n\n"
                       "a-2.0-9.dump\nd-2.5-20.pgm\n"));
    kr_source *src = NULL;
    REQUIRE_OK(open_dump(dir, false, &src));
    CHECK_EQ(kr_source_length(src), 2);
    kr_frame f;
    for (int k = 0; k < 2; k++) {
        REQUIRE_OK(kr_source_read(src, &f));
        CHECK_NEAR(f.timestamp, 1.5 + k, 0);
        CHECK_EQ(f.raw[0], pattern(0, 0));
        CHECK_EQ(f.raw[479 * 640 + 639], pattern(639, 479));
        CHECK_EQ(f.raw[123 * 640 + 456], pattern(456, 123));
        kr_frame_release(&f);
    }
    CHECK_STATUS(kr_source_read(src, &f), KR_END);
    kr_source_destroy(&src);
}

KR_TEST(fakenect, intrinsics_file_and_groundtruth)
{
    const char *dir = make_dump("sidecars");
    REQUIRE(good_pgm(dir, "d-1.0-1.pgm"));
    REQUIRE(write_file(dir, "INDEX.txt", "d-1.0-1.pgm\n"));
    REQUIRE(write_file(dir, "kinreg-intrinsics.txt",
                       "# width height fx fy cx cy k1 k2 p1 p2 k3\n"
                       "640 480 517.3 516.5 318.6 255.3 0.2624 -0.9531 -0.0054 0.0026 1.1633\n"));
    REQUIRE(write_file(dir, "groundtruth.txt", "# gt\n1.0 1 2 3 0 0 0 1\n"));
    kr_source *src = NULL;
    REQUIRE_OK(open_dump(dir, false, &src));
    kr_intrinsics k = kr_source_intrinsics(src), fr1;
    REQUIRE_OK(kr_intrinsics_preset("fr1", &fr1));
    CHECK(memcmp(&k, &fr1, sizeof k) == 0);
    REQUIRE(kr_source_groundtruth(src) != NULL);
    CHECK_EQ(kr_source_groundtruth(src)->count, 1);
    CHECK_NEAR(kr_source_groundtruth(src)->poses[0].t[2], 3, 0);
    kr_source_destroy(&src);

    /* Six numbers: no distortion. */
    REQUIRE(write_file(dir, "kinreg-intrinsics.txt", "640 480 500 501 320 240\n"));
    REQUIRE_OK(open_dump(dir, false, &src));
    CHECK_NEAR(kr_source_intrinsics(src).fy, 501, 0);
    CHECK_NEAR(kr_source_intrinsics(src).k1, 0, 0);
    kr_source_destroy(&src);

    const char *bad[] = {"640 480 500 501\n",
                         "640 480 -500 501 320 240\n",
                         "640 480 500 501 320 240 1 2 3\n",
                         "640 480 500 501 320 240\n1 2 3 4 5 6\n",
                         "# only a comment\n",
                         "640x480 500 501 320 240\n"};
    char path[800];
    snprintf(path, sizeof path, "%s/kinreg-intrinsics.txt", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        REQUIRE(write_file(dir, "kinreg-intrinsics.txt", bad[i]));
        CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), path);
        CHECK(src == NULL);
    }
}

/* ---- bad dumps -------------------------------------------------------------- */

KR_TEST(fakenect, missing_directory_and_index)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/no_such_dump", kr_test_tmpdir());
    kr_source *src = NULL;
    CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), dir);
    CHECK_CONTAINS(kr_last_error(), "INDEX.txt");
    const char *empty = make_dump("no_index");
    CHECK_STATUS(open_dump(empty, false, &src), KR_ERR_IO);
    char path[800];
    snprintf(path, sizeof path, "%s/INDEX.txt", empty);
    CHECK_CONTAINS(kr_last_error(), path);
    CHECK_CONTAINS(kr_last_error(), "fakenect-record");
    CHECK_CONTAINS(kr_last_error(), "kinreg record");
    CHECK(src == NULL);
}

KR_TEST(fakenect, index_errors)
{
    const char *dir = make_dump("index_errors");
    char where[800];
    snprintf(where, sizeof where, "%s/INDEX.txt:2", dir);
    const char *malformed[] = {"a-1-1.dump\nd-abc-1.pgm\n", "d-1.0-1.pgm\nd-2.0.pgm\n",
                               "a-1-1.dump\nd-2.0--5.pgm\n", "a-1-1.dump\nd-2.0-99999999999.pgm\n",
                               "a-1-1.dump\nd-2.0-7\n"};
    kr_source *src = NULL;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        REQUIRE(write_file(dir, "INDEX.txt", malformed[i]));
        CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), where);
        CHECK(src == NULL);
    }
    REQUIRE(write_file(dir, "INDEX.txt", "r-1.0-1.ppm\na-1.0-1.dump\n"));
    CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "no depth frames");
    REQUIRE(write_file(dir, "INDEX.txt", ""));
    CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_FORMAT);

    /* Backwards among depth frames; accelerometer records do not count. */
    REQUIRE(write_file(dir, "INDEX.txt",
                       "d-1.0-1.pgm\na-0.5-1.dump\nd-2.0-2.pgm\nd-2.0-3.pgm\n"
                       "a-9.0-1.dump\nd-1.5-4.pgm\n"));
    CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_ORDER);
    snprintf(where, sizeof where, "%s/INDEX.txt:6", dir);
    CHECK_CONTAINS(kr_last_error(), where);
    CHECK_CONTAINS(kr_last_error(), "line 4");
    CHECK(src == NULL);
}

KR_TEST(fakenect, missing_frame_file)
{
    const char *dir = make_dump("missing_frame");
    CHECK_STATUS(read_single(dir, "d-1.0-1.pgm"), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "d-1.0-1.pgm");
    CHECK_CONTAINS(kr_last_error(), "INDEX.txt:2");
}

KR_TEST(fakenect, truncated_frame)
{
    const char *dir = make_dump("truncated");
    long cuts[] = {17 + 614400 - 1, 17 + 1000, 17, 10, 0};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        REQUIRE(write_pgm(dir, "d-1.0-1.pgm", "P5 640 480 65535\n", 640, 480, 0, cuts[i]));
        CHECK_STATUS(read_single(dir, "d-1.0-1.pgm"), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), "d-1.0-1.pgm");
        CHECK_CONTAINS(kr_last_error(), "INDEX.txt:2");
    }
    /* Trailing bytes are ignored, as fakenect ignores them. */
    REQUIRE(write_pgm(dir, "d-1.0-1.pgm", "P5 640 480 65535\n", 640, 481, 0, -1));
    CHECK_OK(read_single(dir, "d-1.0-1.pgm"));
}

KR_TEST(fakenect, wrong_size_and_maxval)
{
    const char *dir = make_dump("wrong_size");
    REQUIRE(write_pgm(dir, "d-1.0-1.pgm", "P5 320 240 65535\n", 320, 240, 0, -1));
    CHECK_STATUS(read_single(dir, "d-1.0-1.pgm"), KR_ERR_SIZE);
    CHECK_CONTAINS(kr_last_error(), "d-1.0-1.pgm");
    CHECK_CONTAINS(kr_last_error(), "320x240");
    CHECK_CONTAINS(kr_last_error(), "640x480");
    REQUIRE(write_pgm(dir, "d-1.0-1.pgm", "P5 640 480 255\n", 640, 480, 0, -1));
    CHECK_STATUS(read_single(dir, "d-1.0-1.pgm"), KR_ERR_SIZE);
    CHECK_CONTAINS(kr_last_error(), "d-1.0-1.pgm");
    CHECK_CONTAINS(kr_last_error(), "maxval 255");
    const char *not_pgm[] = {"P6 640 480 65535\n", "P2 640 480 65535\n", "P5640 480 65535\n",
                             "P5 640 480\n",       "P5 640 abc 65535\n", "hello\n"};
    for (size_t i = 0; i < sizeof not_pgm / sizeof not_pgm[0]; i++) {
        REQUIRE(write_pgm(dir, "d-1.0-1.pgm", not_pgm[i], 640, 480, 0, -1));
        CHECK_STATUS(read_single(dir, "d-1.0-1.pgm"), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), "d-1.0-1.pgm");
    }

    /* Custom intrinsics of another size: the frames must match them. */
    REQUIRE(write_pgm(dir, "d-1.0-1.pgm", "P5 320 240 65535\n", 320, 240, 0, -1));
    REQUIRE(write_file(dir, "INDEX.txt", "d-1.0-1.pgm\n"));
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[700];
    snprintf(uri, sizeof uri, "fakenect:%s", dir);
    cfg.uri = uri;
    cfg.override_intrinsics = true;
    cfg.custom = (kr_intrinsics){320, 240, 285, 285, 159.5f, 119.5f, 0, 0, 0, 0, 0};
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    kr_frame f;
    REQUIRE_OK(kr_source_read(src, &f));
    CHECK_EQ(f.width, 320);
    CHECK_EQ(f.raw[239 * 320 + 319], pattern(319, 239));
    kr_frame_release(&f);
    kr_source_destroy(&src);
}

KR_TEST(fakenect, sample_above_2047)
{
    const char *dir = make_dump("above_2047");
    REQUIRE(write_pgm(dir, "d-1.0-1.pgm", "P5 640 480 65535\n", 640, 480, 2048, -1));
    CHECK_STATUS(read_single(dir, "d-1.0-1.pgm"), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "d-1.0-1.pgm");
    CHECK_CONTAINS(kr_last_error(), "2047");
    CHECK_CONTAINS(kr_last_error(), "x 360, y 1"); /* pixel 1000 */
    /* 2047 itself is "no return", not an error. */
    REQUIRE(write_pgm(dir, "d-1.0-1.pgm", "P5 640 480 65535\n", 640, 480, 2047, -1));
    kr_source *src = NULL;
    REQUIRE_OK(open_dump(dir, false, &src));
    kr_frame f;
    REQUIRE_OK(kr_source_read(src, &f));
    CHECK_EQ(f.raw[1000], 2047);
    CHECK_EQ(f.raw[1001], pattern(361, 1));
    kr_frame_release(&f);
    kr_source_destroy(&src);
}

KR_TEST(fakenect, skip_bad_counts_and_continues)
{
    const char *dir = make_dump("skip_bad");
    REQUIRE(good_pgm(dir, "d-1.0-1.pgm") && good_pgm(dir, "d-4.0-4.pgm"));
    REQUIRE(write_pgm(dir, "d-2.0-2.pgm", "P5 640 480 65535\n", 640, 480, 0, 5000));
    REQUIRE(write_pgm(dir, "d-5.0-5.pgm", "P5 640 480 255\n", 640, 480, 0, -1));
    REQUIRE(write_pgm(dir, "d-6.0-6.pgm", "P5 640 480 65535\n", 640, 480, 4095, -1));
    REQUIRE(write_file(dir, "INDEX.txt",
                       "d-1.0-1.pgm\nd-2.0-2.pgm\nd-3.0-3.pgm\nd-4.0-4.pgm\n"
                       "d-5.0-5.pgm\nd-6.0-6.pgm\n"));
    kr_log_set(KR_LOG_ERROR, NULL, NULL); /* the skip warnings are expected here */
    kr_source *src = NULL;
    REQUIRE_OK(open_dump(dir, true, &src));
    CHECK_EQ(kr_source_length(src), 6);
    kr_frame f;
    REQUIRE_OK(kr_source_read(src, &f));
    CHECK_EQ(f.index, 0);
    CHECK_NEAR(f.timestamp, 1.0, 0);
    kr_frame_release(&f);
    REQUIRE_OK(kr_source_read(src, &f)); /* 2 is truncated, 3 missing */
    CHECK_EQ(f.index, 1);
    CHECK_NEAR(f.timestamp, 4.0, 0);
    CHECK_EQ(kr_source_skipped(src), 2);
    kr_frame_release(&f);
    CHECK_STATUS(kr_source_read(src, &f), KR_END); /* 5 has maxval 255, 6 a sample 4095 */
    CHECK_EQ(kr_source_skipped(src), 4);
    kr_source_destroy(&src);

    /* Without skip_bad the same dump stops at the first bad frame. */
    REQUIRE_OK(open_dump(dir, false, &src));
    REQUIRE_OK(kr_source_read(src, &f));
    kr_frame_release(&f);
    CHECK_STATUS(kr_source_read(src, &f), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "d-2.0-2.pgm");
    CHECK_CONTAINS(kr_last_error(), "INDEX.txt:2");
    CHECK_EQ(kr_source_skipped(src), 0);
    kr_source_destroy(&src);
    kr_log_set(KR_LOG_WARN, NULL, NULL);
}

/* Issue 30: every value read from a file is range-checked like its option.
 * kinreg-intrinsics.txt took fx = 1e30 (an empty model and identity poses
 * without a word); it now allows what --intrinsics allows: fx, fy
 * 1..100000, cx, cy within +-100000, distortion within +-1000. A frame's
 * time in INDEX.txt is within +-1e10 s. */
KR_TEST(fakenect, file_values_in_the_options_ranges)
{
    const char *dir = make_dump("ranges");
    REQUIRE(good_pgm(dir, "d-1.0-1.pgm"));
    REQUIRE(write_file(dir, "INDEX.txt", "d-1.0-1.pgm\n"));
    const char *bad[] = {"640 480 1e30 500 320 240\n",
                         "640 480 500 100001 320 240\n",
                         "640 480 0.5 500 320 240\n",
                         "640 480 500 500 2e5 240\n",
                         "640 480 500 500 320 -1e40\n",
                         "640 480 500 500 320 240 1e4 0 0 0 0\n",
                         "640 480 500 500 320 240 0 0 0 0 -1001\n"};
    char path[800];
    snprintf(path, sizeof path, "%s/kinreg-intrinsics.txt", dir);
    kr_source *src = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        REQUIRE(write_file(dir, "kinreg-intrinsics.txt", bad[i]));
        CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), path);
        CHECK_CONTAINS(kr_last_error(), "fx and fy 1..100000");
        CHECK(src == NULL);
    }
    /* The edges are allowed. */
    REQUIRE(write_file(dir, "kinreg-intrinsics.txt",
                       "640 480 100000 1 -100000 100000 1000 -1000 0 0 0\n"));
    REQUIRE_OK(open_dump(dir, false, &src));
    kr_source_destroy(&src);
    REQUIRE(write_file(dir, "kinreg-intrinsics.txt", "640 480 500 500 320 240\n"));
    REQUIRE(good_pgm(dir, "d-1e11-1.pgm"));
    REQUIRE(write_file(dir, "INDEX.txt", "d-1.0-1.pgm\nd-1e11-1.pgm\n"));
    CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_FORMAT);
    char where[900];
    snprintf(where, sizeof where, "%s/INDEX.txt:2", dir);
    CHECK_CONTAINS(kr_last_error(), where);
    /* A named pipe as the intrinsics file is refused at once. */
    unlink(path);
    REQUIRE(mkfifo(path, 0600) == 0);
    REQUIRE(write_file(dir, "INDEX.txt", "d-1.0-1.pgm\n"));
    double t0 = kr_now();
    CHECK_STATUS(open_dump(dir, false, &src), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "named pipe");
    CHECK_LT(kr_now() - t0, 5);
    unlink(path);
}
