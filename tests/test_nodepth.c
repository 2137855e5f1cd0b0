/* Frames without the depth tracking needs (issue 30 item 3): a TUM folder
 * whose depth images are all zero, or hold a patch too small to track,
 * ran with every frame GOOD at the identity, inlier fraction 1, rms 0, and
 * the summary said "lost 0". Such frames are LOST and counted; the first
 * frame with depth after them still defines the world frame and tracking
 * goes on as it would have without them. */
#include "kr_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture/png_depth.h"
#include "kinreg/pipeline.h"

/* the capture, tracker and fuser threads: TSan watches them */
KR_LABELS("threads");

enum { W = 640, H = 480, EMPTY = 4, SPARSE = 2, REAL = 20 };

/* A depth image that is zero (no return) but for a side×side block at 1 m
 * in the middle: side 0 is a covered sensor, a small side a patch that
 * leaves fewer points with normals than tracking needs. */
static bool block_png(const char *path, int side)
{
    uint16_t *d = calloc((size_t)W * H, sizeof *d);
    if (!d) return false;
    for (int y = 0; y < side; y++)
        for (int x = 0; x < side; x++)
            d[(size_t)(H / 2 - side / 2 + y) * W + (W / 2 - side / 2 + x)] = 5000; /* 1 m */
    bool ok = kr_png_write_depth16(path, W, H, d) == KR_OK;
    free(d);
    return ok;
}

/* <tmp>/<name>: EMPTY all-zero frames, then SPARSE frames with a 12×12
 * block, then, when `real` names a TUM folder, its first REAL frames
 * (linked). Returns the folder, or NULL. */
static const char *make_sequence(const char *name, const char *real)
{
    static char dir[512];
    char path[1024];
    snprintf(dir, sizeof dir, "%s/%s", kr_test_tmpdir(), name);
    snprintf(path, sizeof path, "%s/depth", dir);
    if (mkdir(dir, 0755) != 0 || mkdir(path, 0755) != 0) return NULL;
    snprintf(path, sizeof path, "%s/depth.txt", dir);
    FILE *txt = fopen(path, "w");
    if (!txt) return NULL;
    bool ok = true;
    for (int i = 0; i < EMPTY + SPARSE && ok; i++) {
        snprintf(path, sizeof path, "%s/depth/blank%d.png", dir, i);
        ok = block_png(path, i < EMPTY ? 0 : 12);
        /* before fr1_xyz's first stamp, 1305031102.160407 */
        fprintf(txt, "%.6f depth/blank%d.png\n", 1305031101.0 + i / 30.0, i);
    }
    if (real && ok) {
        snprintf(path, sizeof path, "%s/depth.txt", real);
        FILE *in = fopen(path, "r");
        char line[512], stamp[64], file[256];
        int n = 0;
        while (in && ok && n < REAL && fgets(line, sizeof line, in)) {
            if (line[0] == '#' || sscanf(line, "%63s %255s", stamp, file) != 2) continue;
            char from[1024], to[1024];
            snprintf(from, sizeof from, "%s/%s", real, file);
            snprintf(to, sizeof to, "%s/%s", dir, file);
            ok = symlink(from, to) == 0;
            fprintf(txt, "%s %s\n", stamp, file);
            n++;
        }
        ok = ok && in && n == REAL;
        if (in) fclose(in);
    }
    return fclose(txt) == 0 && ok ? dir : NULL;
}

typedef struct {
    size_t n;
    kr_frame_result r[EMPTY + SPARSE + REAL];
} frame_log;

static void log_frame(const kr_frame_result *r, const kr_pipeline_stats *st, void *user)
{
    (void)st;
    frame_log *log = user;
    if (log->n < sizeof log->r / sizeof log->r[0]) log->r[log->n++] = *r;
}

/* The pipeline on the folder: every frame's result and the statistics. */
static bool run(const char *dir, frame_log *log, kr_pipeline_stats *st)
{
    char uri[600];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = uri;
    cfg.source.intrinsics = "fr1";
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.deterministic = true;
    cfg.on_frame = log_frame;
    cfg.user = log;
    memset(log, 0, sizeof *log);
    kr_pipeline *p = NULL;
    kr_status s = kr_pipeline_create(&p, &cfg);
    CHECK_OK(s);
    if (s != KR_OK) return false;
    CHECK_OK(s = kr_pipeline_run(p));
    kr_pipeline_get_stats(p, st);
    kr_pipeline_destroy(&p);
    return s == KR_OK;
}

/* The frames without depth: LOST at the identity (no world frame yet), not
 * GOOD with made-up figures. */
static void check_no_depth_frames(const frame_log *log, int min_points)
{
    kr_pose id = kr_pose_identity();
    for (size_t i = 0; i < EMPTY + SPARSE && i < log->n; i++) {
        const kr_frame_result *r = &log->r[i];
        if (i < EMPTY)
            CHECK_EQ(r->valid_points, 0);
        else /* some points, too few */
            CHECK(r->valid_points > 0 && r->valid_points < min_points);
        CHECK_MSG(r->track.state == KR_TRACK_LOST, "frame %zu: %s, inlier fraction %g, rms %g", i,
                  kr_track_state_name(r->track.state), (double)r->track.inlier_fraction,
                  (double)r->track.rms);
        CHECK(!memcmp(&r->track.pose, &id, sizeof id));
    }
}

/* The pipeline on a folder from make_sequence, with its `frames` results
 * counted and the blank frames first checked: the log (the caller frees it)
 * when the run went through, else NULL with the failure recorded. */
static frame_log *run_past_blank_frames(const char *dir, size_t frames, kr_pipeline_stats *st)
{
    frame_log *log = calloc(1, sizeof *log);
    CHECK(log != NULL);
    if (!log || !run(dir, log, st)) {
        free(log);
        return NULL;
    }
    kr_track_config tc;
    kr_track_config_default(&tc);
    CHECK_EQ(log->n, frames);
    check_no_depth_frames(log, tc.min_points);
    return log;
}

KR_TEST(nodepth, frames_without_depth_are_lost_and_counted)
{
    const char *dir = make_sequence("blank", NULL);
    REQUIRE(dir != NULL);
    kr_pipeline_stats st;
    frame_log *log = run_past_blank_frames(dir, EMPTY + SPARSE, &st);
    if (log) {
        CHECK_EQ(st.frames_lost, EMPTY + SPARSE);
        CHECK_EQ(st.model_points, 0);
    }
    free(log);

    /* The program's summary says so (it said "lost 0"). */
    char args[1024], out[1 << 14];
    snprintf(args, sizeof args, "run -q -b cpu tum:%s", dir);
    CHECK_EQ(kr_test_run_tool(NULL, args, out, sizeof out), 0);
    char want[32];
    snprintf(want, sizeof want, "LOST %d,", EMPTY + SPARSE);
    CHECK_CONTAINS(out, want);
}

/* Depth after the blank frames: the first frame with depth defines the
 * world frame (GOOD at the identity) and tracking goes on; none of the
 * real frames is lost (fr1_xyz's first 20 lose none on their own). */
KR_TEST(nodepth, depth_after_blank_frames_tracks_as_usual)
{
    const char *real = kr_test_data("tum/fr1_xyz_head");
    if (!real) SKIP("../shared/data/tum/fr1_xyz_head is absent");
    const char *dir = make_sequence("blank_then_fr1", real);
    REQUIRE(dir != NULL);
    kr_pipeline_stats st;
    frame_log *log = run_past_blank_frames(dir, EMPTY + SPARSE + REAL, &st);
    if (log) {
        const kr_frame_result *first = &log->r[EMPTY + SPARSE];
        kr_pose id = kr_pose_identity();
        CHECK_EQ(first->track.state, KR_TRACK_GOOD);
        CHECK(!memcmp(&first->track.pose, &id, sizeof id));
        int good = 0;
        for (size_t i = EMPTY + SPARSE; i < log->n; i++) {
            CHECK_NE(log->r[i].track.state, KR_TRACK_LOST);
            good += log->r[i].track.state == KR_TRACK_GOOD;
        }
        CHECK_GE(good, REAL - 2);
        CHECK_EQ(st.frames_lost, EMPTY + SPARSE);
        CHECK_GT(st.model_points, 1000);
        printf("    %d of %d real frames GOOD after %d blank ones; model %llu points\n", good, REAL,
               EMPTY + SPARSE, (unsigned long long)st.model_points);
    }
    free(log);
}
