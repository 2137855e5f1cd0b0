/* End to end: source → pipeline → trajectory file and model, checked against
 * ground truth (what a real subscriber receives: test_pipeline_publish.c). */
#include "kr_test.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "kinreg/eval.h"
#include "kinreg/pipeline.h"

/* the capture, tracker, fuser and publisher threads: TSan watches them */
KR_LABELS("threads");

static int count_pose_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && line[0] != '\n') n++;
    fclose(f);
    return n;
}

/* Runs a pipeline and returns its ATE against the source's ground truth. */
static double run_and_evaluate(kr_pipeline_config *cfg, kr_pipeline_stats *stats)
{
    kr_pipeline *p = NULL;
    kr_status s = kr_pipeline_create(&p, cfg);
    CHECK_OK(s);
    if (s != KR_OK) return INFINITY;
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_get_stats(p, stats);
    const kr_trajectory *gt = kr_source_groundtruth(kr_pipeline_source(p));
    CHECK(gt != NULL);
    kr_ate ate = {0};
    double rmse = INFINITY;
    if (gt && kr_eval_ate(gt, kr_pipeline_trajectory(p), 0, &ate) == KR_OK) rmse = ate.rmse;
    printf("    %llu frames, %.1f frames/s, lost %llu, ATE RMSE %.2f cm over %zu pairs\n",
           (unsigned long long)stats->frames_out, stats->fps, (unsigned long long)stats->frames_lost, 100 * rmse,
           ate.pairs);
    kr_pipeline_destroy(&p);
    return rmse;
}

KR_TEST_TAGGED(pipeline, synthetic_scan_within_one_centimetre, "long")
{
    char traj[512], model[512];
    snprintf(traj, sizeof traj, "%s/synthetic_traj.txt", kr_test_tmpdir());
    snprintf(model, sizeof model, "%s/synthetic_model.ply", kr_test_tmpdir());
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic"; /* the embedded default: 30 s at 30 Hz */
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.trajectory_path = traj;
    cfg.model_path = model;
    kr_pipeline_stats st;
    double rmse = run_and_evaluate(&cfg, &st);
    CHECK_LE(rmse, 0.01);
    CHECK_EQ(st.frames_out, 900);
    CHECK_EQ(count_pose_lines(traj), 900);
    struct stat sb;
    CHECK(stat(model, &sb) == 0 && sb.st_size > 1000);
    CHECK_GT(st.model_points, 1000);
}

KR_TEST_TAGGED(pipeline, tum_fr1_xyz_within_bound, "long")
{
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("../shared/data/tum/fr1_xyz_head is absent");
    char uri[1024];
    snprintf(uri, sizeof uri, "tum:%s", dir);
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = uri;
    cfg.source.intrinsics = "fr1";
    cfg.device.backend = KR_BACKEND_CPU;
    kr_pipeline_stats st;
    double rmse = run_and_evaluate(&cfg, &st);
    CHECK_LE(rmse, 0.025);
    CHECK_EQ(st.frames_out, 400);
}

/* Fusion on its own thread (the CUDA backend's default) tracks as well as
 * fusion inline: every frame, the same accuracy bound, a model saved. */
KR_TEST(pipeline, fusion_thread_tracks_as_well)
{
    char traj[512], model[512];
    snprintf(traj, sizeof traj, "%s/fuser_traj.txt", kr_test_tmpdir());
    snprintf(model, sizeof model, "%s/fuser_model.ply", kr_test_tmpdir());
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic";
    cfg.source.max_frames = 120;
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.fuse_thread = 1;
    cfg.trajectory_path = traj;
    cfg.model_path = model;
    kr_pipeline_stats st;
    double rmse = run_and_evaluate(&cfg, &st);
    CHECK_LE(rmse, 0.01);
    CHECK_EQ(st.frames_out, 120);
    CHECK_EQ(st.frames_lost, 0);
    CHECK_EQ(count_pose_lines(traj), 120);
    struct stat sb;
    CHECK(stat(model, &sb) == 0 && sb.st_size > 1000);
    CHECK_GT(st.model_points, 1000);
}

/* Stops the pipeline from its own frame callback after `limit` frames. */
static void stop_after(const kr_frame_result *r, const kr_pipeline_stats *st, void *user)
{
    (void)r;
    void **ctx = user;
    if (st->frames_out >= (uint64_t)(size_t)ctx[1]) kr_pipeline_stop(ctx[0]);
}

KR_TEST(pipeline, stop_flushes_every_computed_pose)
{
    char traj[512];
    snprintf(traj, sizeof traj, "%s/stopped_traj.txt", kr_test_tmpdir());
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.trajectory_path = traj;
    void *ctx[2] = {NULL, (void *)(size_t)20};
    cfg.on_frame = stop_after;
    cfg.user = ctx;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    ctx[0] = p;
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    CHECK_GE(st.frames_out, 20);
    CHECK_LT(st.frames_out, 900);
    CHECK_EQ(count_pose_lines(traj), (long long)st.frames_out);
    CHECK_EQ(kr_pipeline_trajectory(p)->count, st.frames_out);
    kr_pipeline_destroy(&p);
    CHECK(p == NULL);
}

KR_TEST(pipeline, bad_endpoint_and_source_fail_before_starting)
{
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.source.uri = "tum:/nonexistent/kinreg";
    kr_pipeline *p = NULL;
    CHECK_STATUS(kr_pipeline_create(&p, &cfg), KR_ERR_IO);
    CHECK(p == NULL);
    CHECK_CONTAINS(kr_last_error(), "/nonexistent/kinreg");
    cfg.source.uri = "synthetic";
    cfg.trajectory_path = "/nonexistent/dir/traj.txt";
    CHECK_STATUS(kr_pipeline_create(&p, &cfg), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "/nonexistent/dir/traj.txt");
}

/* Copies the first `n` frames of the TUM sequence into `dst`, truncating
 * frame `bad` to half its bytes (a corrupt PNG). */
static int make_truncated_sequence(const char *src, const char *dst, int n, int bad)
{
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/depth.txt", src);
    FILE *in = fopen(path, "r");
    snprintf(path, sizeof path, "%s/depth.txt", dst);
    mkdir(dst, 0777);
    char depth_dir[1024];
    snprintf(depth_dir, sizeof depth_dir, "%s/depth", dst);
    mkdir(depth_dir, 0777);
    FILE *out = fopen(path, "w");
    if (!in || !out) return -1;
    int k = 0;
    while (k < n && fgets(line, sizeof line, in)) {
        if (line[0] == '#') continue;
        char name[512];
        double ts;
        if (sscanf(line, "%lf %511s", &ts, name) != 2) continue;
        fputs(line, out);
        char from[2048], to[2048];
        snprintf(from, sizeof from, "%s/%s", src, name);
        snprintf(to, sizeof to, "%s/%s", dst, name);
        FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
        if (!a || !b) return -1;
        fseek(a, 0, SEEK_END);
        long size = ftell(a);
        fseek(a, 0, SEEK_SET);
        char *buf = malloc((size_t)size);
        if (fread(buf, 1, (size_t)size, a) != (size_t)size) return -1;
        fwrite(buf, 1, (size_t)(k == bad ? size / 2 : size), b);
        free(buf);
        fclose(a);
        fclose(b);
        k++;
    }
    fclose(in);
    fclose(out);
    return k;
}

KR_TEST(pipeline, corrupt_frame_stops_with_poses_kept)
{
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("../shared/data/tum/fr1_xyz_head is absent");
    char seq[512], uri[600], traj[512];
    snprintf(seq, sizeof seq, "%s/truncated_seq", kr_test_tmpdir());
    snprintf(uri, sizeof uri, "tum:%s", seq);
    snprintf(traj, sizeof traj, "%s/truncated_traj.txt", kr_test_tmpdir());
    REQUIRE(make_truncated_sequence(dir, seq, 12, 8) == 12);

    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.source.uri = uri;
    cfg.source.intrinsics = "fr1";
    cfg.trajectory_path = traj;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    CHECK_STATUS(kr_pipeline_run(p), KR_ERR_FORMAT);
    CHECK_CONTAINS(kr_last_error(), ".png");
    CHECK_EQ(count_pose_lines(traj), 8); /* the 8 frames before the corrupt one */
    kr_pipeline_destroy(&p);

    /* --skip-bad: the corrupt frame is skipped and counted, the rest tracked. */
    cfg.source.skip_bad = true;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    CHECK_EQ(st.frames_out, 11);
    CHECK_EQ(st.frames_skipped, 1);
    CHECK_EQ(count_pose_lines(traj), 11);
    kr_pipeline_destroy(&p);
}
