/* The recorder: frames written in both formats and read back through the
 * sources; the disparity model's inverse checked against the forward model
 * by brute force; the TUM → fakenect → TUM round trip on real fr1 depth held
 * to half a disparity step; the layout, ordering and overwrite rules; and
 * the intrinsics that `kinreg record` and `convert` keep with a recording. */
#include "kr_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kinreg/recorder.h"
#include "kinreg/source.h"

/* ---- helpers ---------------------------------------------------------------- */

/* The disparity model, written out here (DESIGN.md §5), in double. */
static double model_depth(int d)
{
    return 1.0 / (3.3309495161 - 0.0030711016 * d);
}

static const char *out_dir(const char *name)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/rec_%s", kr_test_tmpdir(), name);
    return dir;
}

static bool exists(const char *dir, const char *name)
{
    char path[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static long file_size(const char *dir, const char *name)
{
    char path[800];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static kr_status open_source(const char *uri, int max_frames, kr_source **src)
{
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = uri;
    cfg.max_frames = max_frames;
    return kr_source_create(src, &cfg);
}

static kr_status make_recorder(const char *dir, kr_record_format format, bool overwrite,
                               kr_recorder **rec)
{
    kr_recorder_config cfg;
    kr_recorder_config_default(&cfg);
    cfg.format = format;
    cfg.overwrite = overwrite;
    return kr_recorder_create(rec, dir, &cfg);
}

/* Copies every frame of `uri` (at most max_frames) into a new recording. */
static kr_status record_all(const char *uri, int max_frames, const char *dir,
                            kr_record_format format)
{
    kr_source *src = NULL;
    kr_status st = open_source(uri, max_frames, &src);
    if (st != KR_OK) return st;
    kr_recorder *rec = NULL;
    st = make_recorder(dir, format, false, &rec);
    kr_frame f;
    while (st == KR_OK && (st = kr_source_read(src, &f)) == KR_OK) {
        st = kr_recorder_write(rec, &f);
        kr_frame_release(&f);
    }
    if (st == KR_END) st = KR_OK;
    kr_intrinsics k = kr_source_intrinsics(src);
    if (st == KR_OK) st = kr_recorder_write_intrinsics(rec, &k);
    kr_recorder_destroy(&rec);
    kr_source_destroy(&src);
    return st;
}

/* A hand-made frame of constant fill; owns nothing of its own. */
static kr_frame make_frame(uint16_t *buf, int w, int h, double t, kr_depth_encoding enc,
                           float scale)
{
    return (kr_frame){
        .timestamp = t, .width = w, .height = h, .encoding = enc, .depth_scale = scale, .raw = buf};
}

/* ---- configuration ------------------------------------------------------------ */

KR_TEST(recorder, config_and_format_names)
{
    kr_recorder_config cfg;
    memset(&cfg, 0x5a, sizeof cfg);
    kr_recorder_config_default(&cfg);
    CHECK_EQ(cfg.format, KR_RECORD_FAKENECT);
    CHECK(!cfg.overwrite);
    kr_record_format f = KR_RECORD_TUM;
    REQUIRE_OK(kr_record_format_parse("fakenect", &f));
    CHECK_EQ(f, KR_RECORD_FAKENECT);
    REQUIRE_OK(kr_record_format_parse("tum", &f));
    CHECK_EQ(f, KR_RECORD_TUM);
    CHECK_STATUS(kr_record_format_parse("png", &f), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "png");
    CHECK_EQ(f, KR_RECORD_TUM); /* untouched */
    CHECK_STR(kr_record_format_name(KR_RECORD_FAKENECT), "fakenect");
    CHECK_STR(kr_record_format_name(KR_RECORD_TUM), "tum");
    kr_recorder *rec = NULL;
    CHECK_STATUS(kr_recorder_create(&rec, NULL, &cfg), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_recorder_create(&rec, "", &cfg), KR_ERR_INVALID_ARG);
    CHECK(rec == NULL);
    kr_recorder_destroy(&rec);
    kr_recorder_destroy(NULL);
    CHECK_EQ(kr_recorder_frames(NULL), 0);
}

/* ---- the disparity model's inverse ----------------------------------------- */

KR_TEST(recorder, metres_to_disparity_is_the_nearest_sample)
{
    /* Every sample of the model maps back to itself. */
    for (int d = 0; d <= 1084; d++)
        CHECK_EQ(kr_metres_to_disparity(kr_depth_to_metres((uint16_t)d, KR_DEPTH_DISPARITY11, 0)),
                 d);
    /* Random depths, log-uniform over 0.2 m..1 km, and depths just either
     * side of the midpoints between neighbouring samples (where rounding the
     * disparity, i.e. the inverse depth, would pick the farther one). */
    unsigned seed = 7;
    int checked = 0;
    for (int i = 0; i < 300000; i++) {
        double z;
        if (i % 2) {
            z = 0.2 * pow(5000.0, kr_urand(&seed));
        } else {
            int d = (int)(kr_urand(&seed) * 1084);
            double mid = 0.5 * (model_depth(d) + model_depth(d + 1));
            z = mid * (1 + (kr_urand(&seed) - 0.5) * 2e-6);
        }
        float zf = (float)z;
        uint16_t d = kr_metres_to_disparity(zf);
        if (zf < 1 / 3.3309495161) {
            CHECK_EQ(d, KR_DISPARITY_INVALID);
            continue;
        }
        REQUIRE(d <= 1084);
        double e = fabs(zf - model_depth(d));
        for (int c = d - 1; c <= d + 1; c += 2) {
            if (c < 0 || c > 1084) continue;
            double ec = fabs(zf - model_depth(c));
            if (!(e <= ec * (1 + 1e-9)))
                CHECK_MSG(false, "z %.9g -> d %u (|err| %.9g), but d %d is nearer (%.9g)",
                          (double)zf, d, e, c, ec);
        }
        checked++;
    }
    CHECK_GT(checked, 250000);
    CHECK_EQ(kr_metres_to_disparity(0.0f), KR_DISPARITY_INVALID);
    CHECK_EQ(kr_metres_to_disparity(-1.0f), KR_DISPARITY_INVALID);
    CHECK_EQ(kr_metres_to_disparity(NAN), KR_DISPARITY_INVALID);
    CHECK_EQ(kr_metres_to_disparity(0.29f), KR_DISPARITY_INVALID);
    CHECK_EQ(kr_metres_to_disparity(0.3003f), 0);
    CHECK_EQ(kr_metres_to_disparity(1e6f), 1084); /* beyond the far end: clamped */
    CHECK_EQ(kr_metres_to_disparity(INFINITY), 1084);
}

/* ---- synthetic frames in both formats ---------------------------------------- */

KR_TEST(recorder, synthetic_to_tum_is_exact)
{
    const char *dir = out_dir("syn_tum");
    REQUIRE_OK(record_all("synthetic", 4, dir, KR_RECORD_TUM));
    CHECK(exists(dir, "kinreg-intrinsics.txt")); /* carried in both layouts (issue 11) */
    kr_source *orig = NULL, *back = NULL;
    REQUIRE_OK(open_source("synthetic", 4, &orig));
    char uri[600];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    REQUIRE_OK(open_source(uri, 0, &back));
    CHECK_EQ(kr_source_length(back), 4);
    kr_frame a, b;
    int n = 0;
    while (kr_source_read(orig, &a) == KR_OK) {
        REQUIRE_OK(kr_source_read(back, &b));
        CHECK_EQ(b.encoding, KR_DEPTH_SCALED);
        CHECK_NEAR(b.depth_scale, 5000, 0);
        CHECK_NEAR(b.timestamp, a.timestamp, 5e-7 + 1e-12); /* "%f" */
        int wrong = 0, far_off = 0, valid = 0;
        for (size_t i = 0; i < (size_t)a.width * a.height; i++) {
            uint16_t d = a.raw[i];
            float z = kr_depth_to_metres(d, a.encoding, a.depth_scale);
            long want = z > 0 ? lround((double)z * 5000) : 0;
            wrong += b.raw[i] != want;
            /* and independently of the library's float metres */
            long indep = d < 2047 ? lround(model_depth(d) * 5000) : 0;
            far_off += labs((long)b.raw[i] - indep) > 1;
            valid += b.raw[i] != 0;
        }
        CHECK_EQ(wrong, 0);
        CHECK_EQ(far_off, 0);
        CHECK_GT(valid, a.width * a.height / 2);
        kr_frame_release(&a);
        kr_frame_release(&b);
        n++;
    }
    CHECK_EQ(n, 4);
    CHECK_STATUS(kr_source_read(back, &b), KR_END);
    kr_source_destroy(&orig);
    kr_source_destroy(&back);
}

KR_TEST(recorder, synthetic_to_fakenect_keeps_disparity)
{
    const char *dir = out_dir("syn_fakenect");
    REQUIRE_OK(record_all("synthetic:3", 4, dir, KR_RECORD_FAKENECT));
    kr_source *orig = NULL, *back = NULL;
    REQUIRE_OK(open_source("synthetic:3", 4, &orig));
    REQUIRE_OK(open_source(dir, 0, &back)); /* bare directory with INDEX.txt */
    CHECK_CONTAINS(kr_source_describe(back), "fakenect:");
    /* The recorded intrinsics come back exactly. */
    kr_intrinsics ka = kr_source_intrinsics(orig), kb = kr_source_intrinsics(back);
    CHECK(memcmp(&ka, &kb, sizeof ka) == 0);
    kr_frame a, b;
    int n = 0;
    while (kr_source_read(orig, &a) == KR_OK) {
        REQUIRE_OK(kr_source_read(back, &b));
        CHECK_EQ(b.encoding, KR_DEPTH_DISPARITY11);
        CHECK_NEAR(b.timestamp, a.timestamp, 5e-7 + 1e-12);
        int wrong = 0, copied = 0;
        for (size_t i = 0; i < (size_t)a.width * a.height; i++) {
            float z = kr_depth_to_metres(a.raw[i], a.encoding, a.depth_scale);
            wrong += b.raw[i] != kr_metres_to_disparity(z);
            copied += b.raw[i] == a.raw[i];
        }
        CHECK_EQ(wrong, 0);
        CHECK_EQ(copied, a.width * a.height);
        kr_frame_release(&a);
        kr_frame_release(&b);
        n++;
    }
    CHECK_EQ(n, 4);
    kr_source_destroy(&orig);
    kr_source_destroy(&back);
}

KR_TEST(recorder, scaled_depth_converts_both_ways)
{
    /* Millimetre frames (libfreenect's MM mode) into both formats. */
    static uint16_t mm[640 * 480];
    for (int i = 0; i < 640 * 480; i++)
        mm[i] = (uint16_t)(i % 7 == 0 ? 0 : 250 + (i * 37) % 15000); /* 0.25..15.25 m */
    kr_frame f = make_frame(mm, 640, 480, 12.5, KR_DEPTH_SCALED, 1000);
    char fdir[600], tdir[600];
    snprintf(fdir, sizeof fdir, "%s", out_dir("mm_fakenect"));
    snprintf(tdir, sizeof tdir, "%s", out_dir("mm_tum"));
    kr_recorder *rf = NULL, *rt = NULL;
    REQUIRE_OK(make_recorder(fdir, KR_RECORD_FAKENECT, false, &rf));
    REQUIRE_OK(make_recorder(tdir, KR_RECORD_TUM, false, &rt));
    REQUIRE_OK(kr_recorder_write(rf, &f));
    REQUIRE_OK(kr_recorder_write(rt, &f));
    CHECK_EQ(kr_recorder_frames(rf), 1);
    kr_recorder_destroy(&rf);
    kr_recorder_destroy(&rt);

    kr_source *src = NULL;
    kr_frame b;
    REQUIRE_OK(open_source(fdir, 0, &src));
    REQUIRE_OK(kr_source_read(src, &b));
    int wrong = 0;
    for (int i = 0; i < 640 * 480; i++)
        wrong += b.raw[i] != kr_metres_to_disparity(mm[i] / 1000.0f);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(b.raw[0], KR_DISPARITY_INVALID);
    kr_frame_release(&b);
    kr_source_destroy(&src);

    REQUIRE_OK(open_source(tdir, 0, &src));
    REQUIRE_OK(kr_source_read(src, &b));
    wrong = 0;
    for (int i = 0; i < 640 * 480; i++) {
        long want = mm[i] * 5L; /* exact: mm → 1/5000 m */
        wrong += b.raw[i] != (want > 65535 ? 0 : want);
    }
    CHECK_EQ(wrong, 0);
    kr_frame_release(&b);
    kr_source_destroy(&src);
}

/* ---- real data: TUM → fakenect → TUM --------------------------------------------- */

KR_TEST(recorder, fr1_round_trip_within_half_a_disparity_step)
{
    const char *fr1 = kr_test_data("tum/fr1_xyz_head");
    if (!fr1) SKIP("shared data tum/fr1_xyz_head not found (set KINREG_DATA)");
    enum { FRAMES = 30 };
    char uri[1200];
    snprintf(uri, sizeof uri, "tum:%s", fr1);
    const char *dump = out_dir("fr1_dump");
    char dump_dir[600], back_dir[600];
    snprintf(dump_dir, sizeof dump_dir, "%s", dump);
    snprintf(back_dir, sizeof back_dir, "%s", out_dir("fr1_back"));
    REQUIRE_OK(record_all(uri, FRAMES, dump_dir, KR_RECORD_FAKENECT));
    char dump_uri[700];
    snprintf(dump_uri, sizeof dump_uri, "fakenect:%s", dump_dir);
    REQUIRE_OK(record_all(dump_uri, 0, back_dir, KR_RECORD_TUM));

    kr_source *orig = NULL, *mid = NULL, *back = NULL;
    REQUIRE_OK(open_source(uri, FRAMES, &orig));
    REQUIRE_OK(open_source(dump_uri, 0, &mid));
    REQUIRE_OK(open_source(back_dir, 0, &back));
    CHECK_EQ(kr_source_length(mid), FRAMES);
    /* The dump carries fr1's intrinsics (lens distortion included). */
    kr_intrinsics ko = kr_source_intrinsics(orig), km = kr_source_intrinsics(mid);
    CHECK(memcmp(&ko, &km, sizeof ko) == 0);

    const double A = 3.3309495161, B = 0.0030711016; /* |B| */
    kr_frame a, m, b;
    int n = 0;
    double worst = 0, worst_z = 0;
    while (kr_source_read(orig, &a) == KR_OK) {
        REQUIRE_OK(kr_source_read(mid, &m));
        REQUIRE_OK(kr_source_read(back, &b));
        CHECK_NEAR(m.timestamp, a.timestamp, 1e-6);
        CHECK_NEAR(b.timestamp, a.timestamp, 1e-6);
        int lost = 0, invented = 0, too_far = 0, not_nearest = 0, kept_near = 0;
        for (size_t i = 0; i < 640 * 480; i++) {
            double z = a.raw[i] / 5000.0, z2 = b.raw[i] / 5000.0;
            int d = m.raw[i];
            if (z == 0 || (float)z < (float)(1 / A)) {
                /* no return, or nearer than the model reaches */
                invented += d != KR_DISPARITY_INVALID || b.raw[i] != 0;
                kept_near += z > 0 && d != KR_DISPARITY_INVALID;
                continue;
            }
            if (z > 12) continue; /* beyond 65535/5000 after rounding: may become 0 */
            if (d == KR_DISPARITY_INVALID || b.raw[i] == 0) {
                lost++;
                continue;
            }
            /* The dump holds the sample whose model depth is nearest. */
            double e = fabs(z - model_depth(d));
            if ((d > 0 && fabs(z - model_depth(d - 1)) < e * (1 - 1e-9)) ||
                (d < 1084 && fabs(z - model_depth(d + 1)) < e * (1 - 1e-9)))
                not_nearest++;
            /* Half the step to the farther neighbour, |B|·z·z_next / 2 with
             * z_next = z / (1 − |B| z), plus PNG rounding of z' (1e-4 m) and
             * a little for evaluating the step at z' rather than z. */
            double tol = 0.5 * B * z2 * z2 / (1 - B * z2) + 2e-4;
            double err = fabs(z2 - z);
            too_far += err > tol;
            if (err / (z2 * z2) > worst) worst = err / (z2 * z2), worst_z = z;
        }
        CHECK_EQ(lost, 0);
        CHECK_EQ(invented, 0);
        CHECK_EQ(kept_near, 0);
        CHECK_EQ(too_far, 0);
        CHECK_EQ(not_nearest, 0);
        kr_frame_release(&a);
        kr_frame_release(&m);
        kr_frame_release(&b);
        n++;
    }
    CHECK_EQ(n, FRAMES);
    CHECK_LE(worst, 0.5 * B * 1.02 + 2e-4 / (0.3 * 0.3));
    printf(
        "    round trip: worst |z'-z| / z'^2 = %.6f /m (half step 0.5|B| = %.6f /m) at z %.3f m\n",
        worst, 0.5 * B, worst_z);
    kr_source_destroy(&orig);
    kr_source_destroy(&mid);
    kr_source_destroy(&back);
}

/* ---- layout ---------------------------------------------------------------------- */

KR_TEST(recorder, fakenect_layout_matches_libfreenect)
{
    const char *dir = out_dir("layout");
    static uint16_t buf[640 * 480];
    for (int i = 0; i < 640 * 480; i++)
        buf[i] = (uint16_t)(i % 2048);
    kr_recorder *rec = NULL;
    REQUIRE_OK(make_recorder(dir, KR_RECORD_FAKENECT, false, &rec));
    const double stamps[] = {1313283822.781270, 1313283823.016174, 1313283823.5};
    for (int k = 0; k < 3; k++) {
        kr_frame f = make_frame(buf, 640, 480, stamps[k], KR_DEPTH_DISPARITY11, 0);
        REQUIRE_OK(kr_recorder_write(rec, &f));
    }
    kr_recorder_destroy(&rec);

    /* INDEX.txt lists d-%f-%u.pgm names, the ticks being the time at 60 MHz
     * modulo 2^32, each file 17 + 614400 bytes like the planes recording. */
    char path[800], line[200];
    snprintf(path, sizeof path, "%s/INDEX.txt", dir);
    FILE *index = fopen(path, "r");
    REQUIRE(index != NULL);
    for (int k = 0; k < 3; k++) {
        REQUIRE(fgets(line, sizeof line, index) != NULL);
        line[strcspn(line, "\n")] = '\0';
        char want[100];
        unsigned long long ticks = (unsigned long long)llround(stamps[k] * 60e6) % 4294967296ULL;
        snprintf(want, sizeof want, "d-%.6f-%llu.pgm", stamps[k], ticks);
        CHECK_STR(line, want);
        CHECK_EQ(file_size(dir, line), 17 + 614400);
        snprintf(path, sizeof path, "%s/%s", dir, line);
        FILE *pgm = fopen(path, "rb");
        REQUIRE(pgm != NULL);
        char header[18] = "";
        CHECK_EQ(fread(header, 1, 17, pgm), 17);
        CHECK_STR(header, "P5 640 480 65535\n");
        uint16_t s[3];
        fseek(pgm, 17 + 2 * 2047, SEEK_SET);
        CHECK_EQ(fread(s, 2, 3, pgm), 3);
        CHECK(s[0] == 2047 && s[1] == 0 && s[2] == 1); /* host order, as libfreenect */
        fclose(pgm);
    }
    CHECK(fgets(line, sizeof line, index) == NULL);
    fclose(index);
    /* The planes frames have this very layout. */
    const char *planes = kr_test_data("fakenect/planes/d-1313283822.781270-3018607296.pgm");
    if (planes) {
        struct stat sb;
        REQUIRE(stat(planes, &sb) == 0);
        CHECK_EQ(sb.st_size, 17 + 614400);
        CHECK_STR(strrchr(planes, '/') + 1, "d-1313283822.781270-3018607296.pgm");
    }
}

KR_TEST(recorder, tum_layout)
{
    const char *dir = out_dir("tum_layout");
    static uint16_t buf[320 * 240];
    for (int i = 0; i < 320 * 240; i++)
        buf[i] = (uint16_t)(i * 3);
    kr_recorder *rec = NULL;
    REQUIRE_OK(make_recorder(dir, KR_RECORD_TUM, false, &rec));
    kr_frame f = make_frame(buf, 320, 240, 1305031102.160407, KR_DEPTH_SCALED, 5000);
    REQUIRE_OK(kr_recorder_write(rec, &f)); /* any size goes into TUM */
    kr_intrinsics k = {320, 240, 260, 260, 160, 120, 0, 0, 0, 0, 0};
    REQUIRE_OK(kr_recorder_write_intrinsics(rec, &k));
    kr_recorder_destroy(&rec);
    CHECK(exists(dir, "depth/1305031102.160407.png"));
    /* The TUM layout keeps its intrinsics too, and tum:DIR reads them back
     * instead of guessing a preset from the directory name. */
    CHECK(exists(dir, "kinreg-intrinsics.txt"));
    char uri[600];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    kr_source *back = NULL;
    REQUIRE_OK(open_source(uri, 0, &back));
    kr_intrinsics kb = kr_source_intrinsics(back);
    CHECK(memcmp(&kb, &k, sizeof k) == 0);
    CHECK_CONTAINS(kr_source_settings(back), "kinreg-intrinsics.txt");
    kr_source_destroy(&back);
    char path[800], text[400] = "";
    snprintf(path, sizeof path, "%s/depth.txt", dir);
    FILE *t = fopen(path, "r");
    REQUIRE(t != NULL);
    size_t len = fread(text, 1, sizeof text - 1, t);
    text[len] = '\0';
    fclose(t);
    CHECK(text[0] == '#');
    CHECK_CONTAINS(text, "\n1305031102.160407 depth/1305031102.160407.png\n");

    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = dir;
    cfg.override_intrinsics = true;
    cfg.custom = k;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    kr_frame b;
    REQUIRE_OK(kr_source_read(src, &b));
    CHECK(memcmp(b.raw, buf, sizeof buf) == 0);
    kr_frame_release(&b);
    kr_source_destroy(&src);
}

/* ---- rules ------------------------------------------------------------------------ */

KR_TEST(recorder, refuses_an_existing_recording)
{
    static uint16_t buf[640 * 480];
    const char *formats[] = {"fakenect", "tum"};
    for (int fi = 0; fi < 2; fi++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/nested/dir", out_dir(formats[fi]));
        kr_record_format format = fi ? KR_RECORD_TUM : KR_RECORD_FAKENECT;
        const char *index = fi ? "depth.txt" : "INDEX.txt";
        kr_recorder *rec = NULL;
        REQUIRE_OK(make_recorder(dir, format, false, &rec)); /* mkdir -p */
        for (int k = 0; k < 3; k++) {
            kr_frame f = make_frame(buf, 640, 480, k, KR_DEPTH_DISPARITY11, 0);
            REQUIRE_OK(kr_recorder_write(rec, &f));
        }
        kr_recorder_destroy(&rec);
        for (int other = 0; other < 2; other++) {
            CHECK_STATUS(
                make_recorder(dir, other ? KR_RECORD_TUM : KR_RECORD_FAKENECT, false, &rec),
                KR_ERR_EXISTS);
            CHECK_CONTAINS(kr_last_error(), index);
            CHECK_CONTAINS(kr_last_error(), "--force");
            CHECK(rec == NULL);
        }
        /* overwrite starts the index afresh */
        REQUIRE_OK(make_recorder(dir, format, true, &rec));
        kr_frame f = make_frame(buf, 640, 480, 10, KR_DEPTH_DISPARITY11, 0);
        REQUIRE_OK(kr_recorder_write(rec, &f));
        kr_recorder_destroy(&rec);
        kr_source *src = NULL;
        REQUIRE_OK(open_source(dir, 0, &src));
        CHECK_EQ(kr_source_length(src), 1);
        kr_source_destroy(&src);
    }

    /* A recording that got no frame leaves no index behind. */
    const char *empty = out_dir("empty");
    kr_recorder *rec = NULL;
    REQUIRE_OK(make_recorder(empty, KR_RECORD_FAKENECT, false, &rec));
    kr_intrinsics k;
    REQUIRE_OK(kr_intrinsics_preset("kinect", &k));
    REQUIRE_OK(kr_recorder_write_intrinsics(rec, &k));
    CHECK(exists(empty, "INDEX.txt") && exists(empty, "kinreg-intrinsics.txt"));
    kr_recorder_destroy(&rec);
    CHECK(!exists(empty, "INDEX.txt") && !exists(empty, "kinreg-intrinsics.txt"));
    REQUIRE_OK(make_recorder(empty, KR_RECORD_FAKENECT, false, &rec));
    kr_recorder_destroy(&rec);
}

KR_TEST(recorder, order_size_and_failed_writes_keep_the_index_valid)
{
    static uint16_t buf[640 * 480];
    const char *dir = out_dir("order");
    kr_recorder *rec = NULL;
    REQUIRE_OK(make_recorder(dir, KR_RECORD_FAKENECT, false, &rec));
    kr_frame f = make_frame(buf, 640, 480, 2.0, KR_DEPTH_DISPARITY11, 0);
    REQUIRE_OK(kr_recorder_write(rec, &f));
    f.timestamp = 1.0;
    CHECK_STATUS(kr_recorder_write(rec, &f), KR_ERR_ORDER);
    CHECK_CONTAINS(kr_last_error(), "backwards");
    f.timestamp = 2.0; /* the same file name as the frame before */
    CHECK_STATUS(kr_recorder_write(rec, &f), KR_ERR_ORDER);
    CHECK_CONTAINS(kr_last_error(), "repeats");
    f.timestamp = 3.0;
    f.width = 320;
    f.height = 240;
    CHECK_STATUS(kr_recorder_write(rec, &f), KR_ERR_SIZE);
    CHECK_CONTAINS(kr_last_error(), "320x240");
    CHECK_CONTAINS(kr_last_error(), "640x480");
    f.width = 640;
    f.height = 480;
    f.timestamp = NAN;
    CHECK_STATUS(kr_recorder_write(rec, &f), KR_ERR_INVALID_ARG);
    f.timestamp = 3.0;
    f.encoding = KR_DEPTH_SCALED;
    f.depth_scale = 0;
    CHECK_STATUS(kr_recorder_write(rec, &f), KR_ERR_INVALID_ARG);
    f.encoding = KR_DEPTH_DISPARITY11;

    /* A frame file that cannot be written (a directory holds its name): the
     * error names it, and INDEX.txt lists only complete frames. */
    char name[100], path[800];
    snprintf(name, sizeof name, "d-%.6f-%u.pgm", 3.0, (unsigned)(3.0 * 60e6));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    REQUIRE(mkdir(path, 0755) == 0);
    CHECK_STATUS(kr_recorder_write(rec, &f), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), path);
    f.timestamp = 4.0;
    REQUIRE_OK(kr_recorder_write(rec, &f));
    CHECK_EQ(kr_recorder_frames(rec), 2);
    kr_recorder_destroy(&rec);
    kr_source *src = NULL;
    REQUIRE_OK(open_source(dir, 0, &src));
    CHECK_EQ(kr_source_length(src), 2);
    kr_frame b;
    REQUIRE_OK(kr_source_read(src, &b));
    CHECK_NEAR(b.timestamp, 2.0, 0);
    kr_frame_release(&b);
    REQUIRE_OK(kr_source_read(src, &b));
    CHECK_NEAR(b.timestamp, 4.0, 0);
    kr_frame_release(&b);
    kr_source_destroy(&src);

    /* A recording directory that is a file. */
    char file[600];
    snprintf(file, sizeof file, "%s/plain_file", kr_test_tmpdir());
    FILE *pf = fopen(file, "w");
    REQUIRE(pf != NULL);
    fclose(pf);
    CHECK_STATUS(make_recorder(file, KR_RECORD_FAKENECT, false, &rec), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), file);
}

KR_TEST(recorder, groundtruth_travels_with_the_frames)
{
    const char *dir = out_dir("gt");
    kr_source *src = NULL;
    REQUIRE_OK(open_source("synthetic", 2, &src));
    kr_recorder *rec = NULL;
    REQUIRE_OK(make_recorder(dir, KR_RECORD_FAKENECT, false, &rec));
    REQUIRE_OK(kr_recorder_write_groundtruth(rec, kr_source_groundtruth(src)));
    kr_frame f;
    while (kr_source_read(src, &f) == KR_OK) {
        REQUIRE_OK(kr_recorder_write(rec, &f));
        kr_frame_release(&f);
    }
    kr_recorder_destroy(&rec);
    kr_source *back = NULL;
    REQUIRE_OK(open_source(dir, 0, &back));
    const kr_trajectory *g0 = kr_source_groundtruth(src), *g1 = kr_source_groundtruth(back);
    REQUIRE(g1 != NULL);
    CHECK_EQ(g1->count, g0->count);
    REQUIRE(g1->count >= 2);
    CHECK_NEAR(g1->stamps[1], g0->stamps[1], 1e-6);
    CHECK_NEAR(g1->poses[1].t[0], g0->poses[1].t[0], 1e-6);
    kr_source_destroy(&back);
    kr_source_destroy(&src);
}

/* ---- the program's recordings keep their intrinsics ------------------------ */

static char out[1 << 16];

static int kinreg(const char *args)
{
    return kr_test_run_tool(NULL, args, out, sizeof out);
}

KR_TEST(recorder, recordings_carry_intrinsics_and_runs_say_which)
{
    /* record --format tum dropped the source's intrinsics; a later run fell
     * back to the 525 px default without a word. */
    char dir[600], bare[700], args[2048];
    snprintf(dir, sizeof dir, "%s/kinect_tum", kr_test_tmpdir());
    snprintf(args, sizeof args, "record -q -f tum --intrinsics kinect -n 3 '%s' synthetic", dir);
    REQUIRE(kinreg(args) == 0);
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[800];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    cfg.uri = uri;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    kr_intrinsics got = kr_source_intrinsics(src), want;
    REQUIRE_OK(kr_intrinsics_preset("kinect", &want));
    CHECK(memcmp(&got, &want, sizeof got) == 0);
    kr_source_destroy(&src);

    /* run prints the intrinsics, depth units and backend with their origin. */
    snprintf(args, sizeof args, "run -q -b cpu -n 2 '%s'", dir);
    REQUIRE(kinreg(args) == 0);
    CHECK_CONTAINS(out, "fx 570.3");
    CHECK_CONTAINS(out, "kinreg-intrinsics.txt");
    CHECK_CONTAINS(out, "5000 units/m (TUM default)");
    CHECK_CONTAINS(out, "--backend cpu");
    snprintf(args, sizeof args, "run -q -b cpu -n 2 --intrinsics fr3 '%s'", dir);
    REQUIRE(kinreg(args) == 0);
    CHECK_CONTAINS(out, "preset fr3, as given (--intrinsics)");

    /* A TUM directory without the file: one warning naming the preset. */
    snprintf(bare, sizeof bare, "%s/bare_tum", kr_test_tmpdir());
    snprintf(args, sizeof args, "cp -r '%s' '%s' && rm '%s/kinreg-intrinsics.txt'", dir, bare,
             bare);
    REQUIRE(system(args) == 0);
    snprintf(args, sizeof args, "run -q -b cpu -n 2 '%s'", bare);
    REQUIRE(kinreg(args) == 0);
    CHECK_CONTAINS(out, "warning: tum:");
    CHECK_CONTAINS(out, "no kinreg-intrinsics.txt: using the default preset");
}

KR_TEST(recorder, convert_to_tum_keeps_the_dump_intrinsics)
{
    char dump[600], tum[600], args[2048];
    snprintf(dump, sizeof dump, "%s/conv_dump", kr_test_tmpdir());
    snprintf(tum, sizeof tum, "%s/conv_tum", kr_test_tmpdir());
    snprintf(args, sizeof args,
             "record -q -f fakenect --intrinsics 500,501,320,240 -n 2 '%s' synthetic", dump);
    REQUIRE(kinreg(args) == 0);
    snprintf(args, sizeof args, "convert -q '%s' '%s'", dump, tum);
    REQUIRE(kinreg(args) == 0);
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    char uri[800];
    snprintf(uri, sizeof uri, "tum:%s", tum);
    cfg.uri = uri;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    kr_intrinsics k = kr_source_intrinsics(src);
    CHECK_EQ(k.fx, 500.0f);
    CHECK_EQ(k.fy, 501.0f);
    CHECK_EQ(k.cx, 320.0f);
    kr_source_destroy(&src);
}
