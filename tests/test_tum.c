/* TUM RGB-D replay: the real fr1_xyz_head sequence when present, and every
 * kind of bad input, made here with libpng: each must give the right status
 * and a message naming the file (and the depth.txt line). The program takes
 * DIR/depth.txt for DIR, and --skip-bad names a few bad frames, then counts. */
#include "kr_test.h"

#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kinreg/source.h"

/* ---- helpers: sequences and PNGs written with libpng --------------------- */

/* A 16-bit sample pattern whose bytes differ, so byte-order mistakes show. */
static uint16_t pattern(int x, int y)
{
    return (uint16_t)(5000 + 37 * x + 101 * y + ((x * y) & 0xff) * 256);
}

static bool write_png(const char *path, int w, int h, int bit_depth, int color_type)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    int channels = color_type == PNG_COLOR_TYPE_RGB ? 3 : 1;
    int bytes = bit_depth / 8 * channels;
    unsigned char *row = malloc((size_t)w * bytes);
    if (!png || !info || !row || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(row);
        fclose(f);
        return false;
    }
    png_init_io(png, f);
    png_set_compression_level(png, 1);
    png_set_IHDR(png, info, w, h, bit_depth, color_type, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            uint16_t v = pattern(x, y);
            for (int c = 0; c < channels; c++) {
                unsigned char *p = row + (size_t)x * bytes + c * (bit_depth / 8);
                if (bit_depth == 16)
                    p[0] = (unsigned char)(v >> 8), p[1] = (unsigned char)v;
                else
                    p[0] = (unsigned char)v;
            }
        }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    return fclose(f) == 0;
}

static bool write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* A fresh sequence directory <tmp>/<name> with depth/. */
static const char *make_dir(const char *name)
{
    static char dir[512];
    char sub[600];
    snprintf(dir, sizeof dir, "%s/%s", kr_test_tmpdir(), name);
    mkdir(dir, 0755);
    snprintf(sub, sizeof sub, "%s/depth", dir);
    mkdir(sub, 0755);
    return dir;
}

static bool good_png(const char *dir, const char *name)
{
    char path[800];
    snprintf(path, sizeof path, "%s/depth/%s", dir, name);
    return write_png(path, 640, 480, 16, PNG_COLOR_TYPE_GRAY);
}

static bool write_depth_txt(const char *dir, const char *text)
{
    char path[800];
    snprintf(path, sizeof path, "%s/depth.txt", dir);
    return write_text(path, text);
}

static kr_status open_tum(const char *dir, bool skip_bad, kr_source **src)
{
    return kr_test_open_dir_source("tum", dir, skip_bad, src);
}

/* Opens a sequence of one frame whose PNG is `png`, reads it and returns the
 * status; the message must name `png` and depth.txt line 2. */
static kr_status read_single(const char *dir, const char *png_name)
{
    char text[300];
    snprintf(text, sizeof text, "# timestamp filename\n1.0 depth/%s\n", png_name);
    if (!write_depth_txt(dir, text)) return KR_ERR_IO;
    kr_source *src = NULL;
    kr_status st = open_tum(dir, false, &src);
    if (st != KR_OK) return st;
    kr_frame frame = {.index = 77, .raw = NULL};
    st = kr_source_read(src, &frame);
    CHECK(frame.index == 77 && frame.raw == NULL); /* untouched on error */
    kr_frame_release(&frame);
    kr_source_destroy(&src);
    return st;
}

/* ---- real data ------------------------------------------------------------ */

KR_TEST(tum, fr1_xyz_head)
{
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("shared data tum/fr1_xyz_head not found (set KINREG_DATA)");
    kr_source *src = NULL;
    REQUIRE_OK(open_tum(dir, false, &src));
    CHECK_EQ(kr_source_length(src), 400);
    CHECK(!kr_source_is_live(src));
    CHECK_CONTAINS(kr_source_describe(src), "400 frames");
    kr_intrinsics k = kr_source_intrinsics(src);
    CHECK_EQ(k.width, 640);
    CHECK_EQ(k.height, 480);
    CHECK_NEAR(k.fx, 517.3, 1e-4); /* fr1 guessed from the directory name */
    CHECK_NEAR(k.cy, 255.3, 1e-4);

    const kr_trajectory *gt = kr_source_groundtruth(src);
    REQUIRE(gt != NULL);
    CHECK_GT(gt->count, 400);
    /* first line of groundtruth.txt: 1305031098.6659 1.3563 0.6305 1.6380 ... */
    CHECK_NEAR(gt->stamps[0], 1305031098.6659, 1e-6);
    CHECK_NEAR(gt->poses[0].t[0], 1.3563, 1e-9);
    CHECK_NEAR(gt->poses[0].t[2], 1.6380, 1e-9);

    unsigned n = 0;
    double prev = 0, t0 = kr_now(), median_sum = 0;
    kr_frame f;
    kr_status st;
    while ((st = kr_source_read(src, &f)) == KR_OK) {
        CHECK_EQ(f.index, n);
        CHECK_EQ(f.width, 640);
        CHECK_EQ(f.height, 480);
        CHECK_EQ(f.encoding, KR_DEPTH_SCALED);
        CHECK_NEAR(f.depth_scale, 5000, 0);
        if (n == 0)
            CHECK_NEAR(f.timestamp, 1305031102.160407, 1e-6); /* depth.txt line 4 */
        else
            CHECK_GT(f.timestamp, prev);
        prev = f.timestamp;
        /* fr1/xyz looks at a desk from ~0.7-2 m: most returns lie in 0.4-4 m */
        size_t valid = 0, plausible = 0;
        double sum = 0;
        for (size_t i = 0; i < 640 * 480; i++) {
            if (!f.raw[i]) continue;
            valid++;
            double z = f.raw[i] / 5000.0;
            plausible += z > 0.4 && z < 4.0;
            sum += z;
        }
        CHECK_GT(valid, 640 * 480 / 2);
        CHECK_GT(plausible, 0.98 * valid);
        median_sum += sum / (valid ? valid : 1);
        kr_frame_release(&f);
        n++;
    }
    double dt = kr_now() - t0;
    CHECK_STATUS(st, KR_END);
    CHECK_EQ(n, 400);
    CHECK_EQ(kr_source_skipped(src), 0);
    double mean = median_sum / (n ? n : 1);
    CHECK_GT(mean, 0.8);
    CHECK_LT(mean, 2.0);
    printf("    tum: %u PNG frames read in %.3f s: %.2f ms/frame\n", n, dt, 1e3 * dt / (n ? n : 1));
    CHECK_STATUS(kr_source_read(src, &f), KR_END); /* stays at the end */
    kr_source_destroy(&src);
    CHECK(src == NULL);
}

/* ---- good synthetic sequences --------------------------------------------- */

KR_TEST(tum, samples_round_trip_exactly)
{
    const char *dir = make_dir("samples");
    REQUIRE(good_png(dir, "a.png") && good_png(dir, "b.png"));
    REQUIRE(write_depth_txt(dir, "# depth maps\n10.5 depth/a.png\n10.5 depth/b.png\n"));
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = dir; /* plain directory: TUM when it holds depth.txt */
    cfg.depth_scale = 1000;
    cfg.intrinsics = "fr3";
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    CHECK_CONTAINS(kr_source_describe(src), "tum:");
    CHECK_NEAR(kr_source_intrinsics(src).fx, 535.4, 1e-4);
    CHECK(kr_source_groundtruth(src) == NULL);
    kr_frame f;
    for (int k = 0; k < 2; k++) {
        REQUIRE_OK(kr_source_read(src, &f));
        CHECK_EQ(f.index, k);
        CHECK_NEAR(f.timestamp, 10.5, 0); /* equal stamps are not "backwards" */
        CHECK_NEAR(f.depth_scale, 1000, 0);
        int bad = 0;
        for (int y = 0; y < 480; y++)
            for (int x = 0; x < 640; x++)
                bad += f.raw[y * 640 + x] != pattern(x, y);
        CHECK_EQ(bad, 0);
        kr_frame_release(&f);
    }
    CHECK_STATUS(kr_source_read(src, &f), KR_END);
    kr_source_destroy(&src);
}

KR_TEST(tum, size_follows_intrinsics)
{
    const char *dir = make_dir("small");
    char path[800];
    snprintf(path, sizeof path, "%s/depth/s.png", dir);
    REQUIRE(write_png(path, 320, 240, 16, PNG_COLOR_TYPE_GRAY));
    REQUIRE(write_depth_txt(dir, "1.0 depth/s.png\n"));
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = dir;
    cfg.override_intrinsics = true;
    cfg.custom = (kr_intrinsics){320, 240, 260, 260, 160, 120, 0, 0, 0, 0, 0};
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    kr_frame f;
    REQUIRE_OK(kr_source_read(src, &f));
    CHECK_EQ(f.width, 320);
    CHECK_EQ(f.raw[239 * 320 + 319], pattern(319, 239));
    kr_frame_release(&f);
    kr_source_destroy(&src);
}

/* ---- bad inputs ----------------------------------------------------------- */

KR_TEST(tum, missing_directory)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/does_not_exist", kr_test_tmpdir());
    kr_source *src = NULL;
    CHECK_STATUS(open_tum(dir, false, &src), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "no such directory");
    CHECK_CONTAINS(kr_last_error(), dir);
    CHECK(src == NULL);
}

KR_TEST(tum, missing_depth_txt)
{
    const char *dir = make_dir("no_depth_txt");
    kr_source *src = NULL;
    CHECK_STATUS(open_tum(dir, false, &src), KR_ERR_IO);
    char path[800];
    snprintf(path, sizeof path, "%s/depth.txt", dir);
    CHECK_CONTAINS(kr_last_error(), path);
    CHECK(src == NULL);
}

KR_TEST(tum, missing_png)
{
    const char *dir = make_dir("missing_png");
    CHECK_STATUS(read_single(dir, "absent.png"), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "depth/absent.png");
    CHECK_CONTAINS(kr_last_error(), "depth.txt:2");
}

KR_TEST(tum, truncated_png)
{
    const char *dir = make_dir("truncated");
    REQUIRE(good_png(dir, "t.png"));
    char path[800];
    snprintf(path, sizeof path, "%s/depth/t.png", dir);
    long size = file_size(path);
    REQUIRE(size > 1000);
    long cuts[] = {size / 2, size - 20, 40, 8, 3, 0};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        REQUIRE(good_png(dir, "t.png"));
        REQUIRE(truncate(path, cuts[i]) == 0);
        CHECK_STATUS(read_single(dir, "t.png"), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), path);
        CHECK_CONTAINS(kr_last_error(), "depth.txt:2");
    }
}

KR_TEST(tum, corrupt_png_bytes)
{
    const char *dir = make_dir("corrupt");
    char path[800];
    snprintf(path, sizeof path, "%s/depth/c.png", dir);
    REQUIRE(write_text(path, "this is not a PNG file at all\n"));
    CHECK_STATUS(read_single(dir, "c.png"), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "not a PNG");
    /* Flipped bytes inside the compressed data: a CRC or zlib error. */
    long size = 0;
    for (int trial = 0; trial < 4; trial++) {
        REQUIRE(good_png(dir, "c.png"));
        size = file_size(path);
        FILE *f = fopen(path, "r+b");
        REQUIRE(f != NULL);
        long at = 100 + trial * (size - 200) / 4;
        fseek(f, at, SEEK_SET);
        int c = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(c ^ 0x5a, f);
        fclose(f);
        CHECK_STATUS(read_single(dir, "c.png"), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), path);
    }
}

KR_TEST(tum, eight_bit_png)
{
    const char *dir = make_dir("eight_bit");
    char path[800];
    snprintf(path, sizeof path, "%s/depth/e.png", dir);
    REQUIRE(write_png(path, 640, 480, 8, PNG_COLOR_TYPE_GRAY));
    CHECK_STATUS(read_single(dir, "e.png"), KR_ERR_SIZE);
    CHECK_CONTAINS(kr_last_error(), path);
    CHECK_CONTAINS(kr_last_error(), "8-bit");
    CHECK_CONTAINS(kr_last_error(), "16-bit grayscale");
    REQUIRE(write_png(path, 640, 480, 16, PNG_COLOR_TYPE_RGB));
    CHECK_STATUS(read_single(dir, "e.png"), KR_ERR_SIZE);
    CHECK_CONTAINS(kr_last_error(), "RGB");
}

KR_TEST(tum, wrong_size_png)
{
    const char *dir = make_dir("wrong_size");
    char path[800];
    snprintf(path, sizeof path, "%s/depth/w.png", dir);
    REQUIRE(write_png(path, 320, 240, 16, PNG_COLOR_TYPE_GRAY));
    CHECK_STATUS(read_single(dir, "w.png"), KR_ERR_SIZE);
    CHECK_CONTAINS(kr_last_error(), path);
    CHECK_CONTAINS(kr_last_error(), "320x240");
    CHECK_CONTAINS(kr_last_error(), "640x480");
}

KR_TEST(tum, malformed_line)
{
    const char *dir = make_dir("malformed");
    REQUIRE(good_png(dir, "a.png"));
    const char *cases[] = {"1.0 depth/a.png\n2.0\n", "1.0 depth/a.png\nabc depth/a.png\n",
                           "1.0 depth/a.png\n2.0x depth/a.png\n"};
    char path[800];
    snprintf(path, sizeof path, "%s/depth.txt:2", dir);
    for (int i = 0; i < 3; i++) {
        REQUIRE(write_depth_txt(dir, cases[i]));
        kr_source *src = NULL;
        CHECK_STATUS(open_tum(dir, false, &src), KR_ERR_FORMAT);
        CHECK_CONTAINS(kr_last_error(), path);
        CHECK(src == NULL);
    }
    REQUIRE(write_depth_txt(dir, "# only comments\n\n"));
    kr_source *src = NULL;
    CHECK_STATUS(open_tum(dir, false, &src), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "no frames");
}

KR_TEST(tum, backwards_timestamps)
{
    const char *dir = make_dir("backwards");
    REQUIRE(good_png(dir, "a.png"));
    REQUIRE(write_depth_txt(dir, "# c\n1.0 depth/a.png\n2.0 depth/a.png\n# c\n1.5 depth/a.png\n"));
    kr_source *src = NULL;
    CHECK_STATUS(open_tum(dir, false, &src), KR_ERR_ORDER);
    char where[800];
    snprintf(where, sizeof where, "%s/depth.txt:5", dir);
    CHECK_CONTAINS(kr_last_error(), where);
    CHECK_CONTAINS(kr_last_error(), "line 3");
    CHECK(src == NULL);
}

KR_TEST(tum, malformed_groundtruth)
{
    const char *dir = make_dir("bad_gt");
    REQUIRE(good_png(dir, "a.png"));
    REQUIRE(write_depth_txt(dir, "1.0 depth/a.png\n"));
    char gt[800];
    snprintf(gt, sizeof gt, "%s/groundtruth.txt", dir);
    REQUIRE(write_text(gt, "# gt\n1.0 0 0 0 0 0 0 1\n1.1 0 0 0 0 0\n"));
    kr_source *src = NULL;
    CHECK_STATUS(open_tum(dir, false, &src), KR_ERR_FORMAT);
    char where[900];
    snprintf(where, sizeof where, "%s:3", gt);
    CHECK_CONTAINS(kr_last_error(), where);
    REQUIRE(write_text(gt, "# gt\n1.0 0 0 0 0 0 0 1\n1.1 0.5 0 0 0 0 0 1\n"));
    REQUIRE_OK(open_tum(dir, false, &src));
    REQUIRE(kr_source_groundtruth(src) != NULL);
    CHECK_EQ(kr_source_groundtruth(src)->count, 2);
    kr_source_destroy(&src);
}

KR_TEST(tum, skip_bad_counts_and_continues)
{
    const char *dir = make_dir("skip_bad");
    REQUIRE(good_png(dir, "1.png") && good_png(dir, "2.png") && good_png(dir, "4.png"));
    char path[800];
    snprintf(path, sizeof path, "%s/depth/2.png", dir);
    REQUIRE(truncate(path, file_size(path) / 3) == 0);
    snprintf(path, sizeof path, "%s/depth/5.png", dir);
    REQUIRE(write_png(path, 640, 480, 8, PNG_COLOR_TYPE_GRAY));
    REQUIRE(write_depth_txt(dir, "1.0 depth/1.png\n2.0 depth/2.png\n3.0 depth/3.png\n"
                                 "4.0 depth/4.png\n5.0 depth/5.png\n"));
    kr_log_set(KR_LOG_ERROR, NULL, NULL); /* the skip warnings are expected here */
    kr_source *src = NULL;
    REQUIRE_OK(open_tum(dir, true, &src));
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
    CHECK_STATUS(kr_source_read(src, &f), KR_END); /* 5 is 8-bit */
    CHECK_EQ(kr_source_skipped(src), 3);
    kr_source_destroy(&src);

    /* Without skip_bad the same sequence stops at the first bad frame. */
    REQUIRE_OK(open_tum(dir, false, &src));
    REQUIRE_OK(kr_source_read(src, &f));
    kr_frame_release(&f);
    CHECK_STATUS(kr_source_read(src, &f), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), "depth/2.png");
    CHECK_CONTAINS(kr_last_error(), "depth.txt:2");
    CHECK_EQ(kr_source_skipped(src), 0);
    kr_source_destroy(&src);
    kr_log_set(KR_LOG_WARN, NULL, NULL);
}

/* Decoding ahead on worker threads (KINREG_DECODE_THREADS) hands out the
 * same frames in the same order as decoding on demand. */
KR_TEST(tum, decode_ahead_keeps_order)
{
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("shared data tum/fr1_xyz_head not found (set KINREG_DATA)");
    const int n = 40;
    kr_source *on_demand = NULL, *ahead = NULL;
    setenv("KINREG_DECODE_THREADS", "0", 1);
    kr_status s0 = open_tum(dir, false, &on_demand);
    setenv("KINREG_DECODE_THREADS", "3", 1);
    kr_status s1 = open_tum(dir, false, &ahead);
    unsetenv("KINREG_DECODE_THREADS");
    REQUIRE_OK(s0);
    REQUIRE_OK(s1);
    int differ = 0;
    for (int i = 0; i < n; i++) {
        kr_frame a, b;
        REQUIRE_OK(kr_source_read(on_demand, &a));
        REQUIRE_OK(kr_source_read(ahead, &b));
        differ += a.index != b.index || a.timestamp != b.timestamp || a.width != b.width ||
                  memcmp(a.raw, b.raw, (size_t)a.width * a.height * sizeof *a.raw) != 0;
        kr_frame_release(&a);
        kr_frame_release(&b);
    }
    CHECK_EQ(differ, 0);
    /* Destroyed with frames still being decoded ahead: workers join cleanly. */
    kr_source_destroy(&ahead);
    kr_source_destroy(&on_demand);
}

/* Every K-th frame with decoders running ahead (as on a machine of 4+ cores)
 * delivers the same frames as decoding on demand, and no frame out of order. */
KR_TEST(tum, stride_with_decode_ahead)
{
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("shared data tum/fr1_xyz_head not found (set KINREG_DATA)");
    kr_source *src[2] = {NULL, NULL};
    const char *threads[2] = {"0", "3"};
    for (int k = 0; k < 2; k++) {
        kr_source_config cfg;
        kr_source_config_default(&cfg);
        char uri[1024];
        snprintf(uri, sizeof uri, "tum:%s", dir);
        cfg.uri = uri;
        cfg.stride = 8;
        setenv("KINREG_DECODE_THREADS", threads[k], 1);
        kr_status s = kr_source_create(&src[k], &cfg);
        unsetenv("KINREG_DECODE_THREADS");
        REQUIRE_OK(s);
    }
    for (int i = 0; i < 12; i++) {
        kr_frame a, b;
        REQUIRE_OK(kr_source_read(src[0], &a));
        REQUIRE_OK(kr_source_read(src[1], &b));
        CHECK_EQ(a.index, (uint64_t)i);
        CHECK(a.timestamp == b.timestamp && a.index == b.index);
        kr_frame_release(&a);
        kr_frame_release(&b);
    }
    kr_source_destroy(&src[0]);
    kr_source_destroy(&src[1]);
}

/* ---- the program on TUM directories ----------------------------------------- */

static char out[1 << 16];

static int kinreg(const char *args)
{
    return kr_test_run_tool(NULL, args, out, sizeof out);
}

KR_TEST(tum, a_source_may_name_its_index_file)
{
    /* `kinreg run DIR/depth.txt` said "no such directory". */
    const char *depth_txt = kr_test_data("tum/fr1_xyz_head/depth.txt");
    if (!depth_txt) SKIP("no TUM data (KINREG_DATA or ../shared/data)");
    char args[2048];
    snprintf(args, sizeof args, "run -q -b cpu -n 2 '%s'", depth_txt);
    CHECK_EQ(kinreg(args), 0);
    CHECK_CONTAINS(out, "2 frames");
    snprintf(args, sizeof args, "run -q -b cpu -n 2 'tum:%s'", depth_txt);
    CHECK_EQ(kinreg(args), 0);
}

static int warnings;
static void count_warnings(kr_log_level level, const char *message, void *user)
{
    (void)message, (void)user;
    warnings += level == KR_LOG_WARN;
}

KR_TEST(tum, skip_bad_shows_a_few_then_counts)
{
    /* --skip-bad printed one line per skipped frame. */
    char rec[600], args[2048];
    snprintf(rec, sizeof rec, "%s/skip_src", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "record -q -f tum -n 12 '%s' synthetic 2>/dev/null && for f in $(ls '%s/depth' | head "
             "-10); do "
             "echo x > '%s/depth/'$f; "
             "done",
             rec, rec, rec);
    REQUIRE(kinreg(args) == 0);
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[800];
    snprintf(uri, sizeof uri, "tum:%s", rec);
    cfg.uri = uri;
    cfg.skip_bad = true;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    warnings = 0;
    kr_log_set(KR_LOG_WARN, count_warnings, NULL);
    kr_frame f;
    int frames = 0;
    while (kr_source_read(src, &f) == KR_OK) {
        frames++;
        kr_frame_release(&f);
    }
    kr_log_set(KR_LOG_WARN, NULL, NULL);
    CHECK_EQ(frames, 2);
    CHECK_EQ(kr_source_skipped(src), 10);
    CHECK_EQ(warnings, 3);
    kr_source_destroy(&src);
    /* The program's summary carries the count. */
    snprintf(args, sizeof args, "run -q -b cpu --skip-bad '%s'", rec);
    CHECK_EQ(kinreg(args), 0);
    CHECK_CONTAINS(out, "skipped 10");
}

/* Issue 30: a depth.txt stamp is seconds within +-1e10, like a
 * trajectory's; 1e300 is no frame's time. */
KR_TEST(tum, depth_txt_stamps_in_range)
{
    const char *dir = make_dir("stamp_range");
    REQUIRE(good_png(dir, "a.png"));
    REQUIRE(write_depth_txt(dir, "1.0 depth/a.png\n1e300 depth/a.png\n"));
    kr_source *src = NULL;
    CHECK_STATUS(open_tum(dir, false, &src), KR_ERR_FORMAT);
    char where[900];
    snprintf(where, sizeof where, "%s/depth.txt:2", dir);
    CHECK_CONTAINS(kr_last_error(), where);
    CHECK_CONTAINS(kr_last_error(), "within +-1e10");
    CHECK(src == NULL);
    REQUIRE(write_depth_txt(dir, "1305031102.175304 depth/a.png\n"));
    REQUIRE_OK(open_tum(dir, false, &src));
    kr_source_destroy(&src);
}

/* The colour stream: each depth frame takes rgb.txt's image nearest in time
 * within 0.02 s (any PNG colour type, as 8-bit RGB); a frame with none near
 * goes without, and so does one whose image cannot be read (a warning, the
 * depth kept); without the colour flag nothing is read; a malformed rgb.txt
 * fails the open, naming its line. */
KR_TEST(tum, colour_stream_by_nearest_time)
{
    const char *dir = make_dir("colour");
    char path[800];
    snprintf(path, sizeof path, "%s/rgb", dir);
    mkdir(path, 0755);
    REQUIRE(good_png(dir, "a.png") && good_png(dir, "b.png") && good_png(dir, "c.png") &&
            good_png(dir, "d.png"));
    REQUIRE(write_depth_txt(dir, "1.000 depth/a.png\n1.050 depth/b.png\n1.200 depth/c.png\n"
                                 "1.295 depth/d.png\n"));
    snprintf(path, sizeof path, "%s/rgb/rgb8.png", dir);
    REQUIRE(write_png(path, 640, 480, 8, PNG_COLOR_TYPE_RGB));
    snprintf(path, sizeof path, "%s/rgb/grey8.png", dir);
    REQUIRE(write_png(path, 640, 480, 8, PNG_COLOR_TYPE_GRAY));
    snprintf(path, sizeof path, "%s/rgb.txt", dir);
    REQUIRE(write_text(path, "# timestamp filename\n0.990 rgb/rgb8.png\n1.060 rgb/grey8.png\n"
                             "1.300 rgb/missing.png\n"));
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[800];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    cfg.uri = uri;
    cfg.intrinsics = "fr1";
    cfg.colour = true;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    const bool want[4] = {true, true, false, false}; /* d: its image is missing */
    for (int i = 0; i < 4; i++) {
        kr_frame f;
        REQUIRE_OK(kr_source_read(src, &f));
        CHECK(f.raw != NULL);
        CHECK_MSG((f.rgb != NULL) == want[i], "frame %d: colour %s", i, f.rgb ? "yes" : "no");
        bool same = true;
        for (int y = 0; f.rgb && y < 480; y += 37)
            for (int x = 0; x < 640; x += 41)
                for (int c = 0; c < 3; c++)
                    same = same && f.rgb[3 * (y * 640 + x) + c] == (uint8_t)pattern(x, y);
        CHECK_MSG(same, "frame %d: the image's pixels", i);
        kr_frame_release(&f);
    }
    kr_source_destroy(&src);

    cfg.colour = false;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    kr_frame f;
    REQUIRE_OK(kr_source_read(src, &f));
    CHECK(f.rgb == NULL);
    kr_frame_release(&f);
    kr_source_destroy(&src);

    cfg.colour = true;
    REQUIRE(write_text(path, "0.990 rgb/rgb8.png\nnot-a-time rgb/grey8.png\n"));
    CHECK_EQ(kr_source_create(&src, &cfg), KR_ERR_FORMAT);
    CHECK_MSG(strstr(kr_last_error(), "rgb.txt:2"), "%s", kr_last_error());
}
