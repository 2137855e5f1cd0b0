/* Bounded memory over a long session: a short soak of the pipeline whose
 * model and RSS must stop growing once the model's cap is reached
 * (bench/soak.sh is the long version; the cap's own rules are
 * test_model_evict.c's, the bounded trajectory test_trajectory.c's). */
#include "kr_test.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "kinreg/model.h"
#include "kinreg/pipeline.h"

/* ---- short soak: the pipeline with a small cap ------------------------------ */

typedef struct {
    uint64_t frames, total;
    size_t model_max;
    uint64_t last_model;
    /* Warm-up ends `settle` frames after the map first shrank (the first
     * eviction: from then on its arrays are at their final size). RSS is
     * compared as the peak over `window` frames right after warm-up against
     * the peak over the last `window` frames: it swings by ~25 MiB within a
     * couple of hundred frames (the active window's k-d tree is rebuilt
     * beside the old one, the map refills to its cap between evictions), so
     * two single samples would measure where in that swing they fell. */
    uint64_t first_eviction, settle, window, warm_frame;
    long rss_warm_peak, rss_end_peak; /* KiB */
    uint64_t model_at_warm, model_end;
} soak_probe;

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
        fclose(f);
    }
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void soak_frame(const kr_frame_result *r, const kr_pipeline_stats *st, void *user)
{
    soak_probe *p = user;
    (void)r;
    uint64_t n = st->frames_out;
    p->frames = n;
    if (st->model_points > p->model_max) p->model_max = st->model_points;
    if (!p->first_eviction && st->model_points < p->last_model) {
        p->first_eviction = n;
        p->warm_frame = n + p->settle;
    }
    p->last_model = st->model_points;
    if (p->warm_frame && n == p->warm_frame) p->model_at_warm = st->model_points;
    long rss = rss_kib();
    if (p->warm_frame && n >= p->warm_frame && n < p->warm_frame + p->window &&
        rss > p->rss_warm_peak)
        p->rss_warm_peak = rss;
    if (n + p->window > p->total && rss > p->rss_end_peak) p->rss_end_peak = rss;
    p->model_end = st->model_points;
}

KR_TEST(memory, short_soak_model_and_rss_flat_after_warm_up)
{
    if (rss_kib() < 0) SKIP("/proc/self/statm is not readable");
    /* As the kinreg program does (tools/main.c): big blocks go back to the
     * system when freed instead of fragmenting glibc's arenas. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic";
    cfg.source.seed = 3;
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.trajectory_keep = 64;
    /* A cap (0.4 M voxels) that the synthetic room's model passes within a
     * few hundred frames (the first sweep adds ~7 k voxels per frame, later
     * ones fewer), with eviction allowed soon after the tracker's window. The
     * window itself comes near it (around frame 365 the voxels seen in the
     * last 50 frames pass 90 % of it; the oldest of them then go). */
    cfg.model.memory_mib = 64;
    cfg.model.evict_after = 60;
    cfg.model.evict_distance = 0.5f;
    soak_probe probe = {.settle = 50, .window = 200};
#ifdef KINREG_SANITIZED
    /* Slow, and its allocator's quarantine owns the RSS: the model bound
     * alone is checked. */
    cfg.source.max_frames = 150;
#else
    cfg.source.max_frames = 700;
#endif
    probe.total = cfg.source.max_frames;
    cfg.on_frame = soak_frame;
    cfg.user = &probe;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_destroy(&p);
    CHECK_EQ(probe.frames, (uint64_t)cfg.source.max_frames);
    size_t cap = kr_model_max_voxels(&cfg.model);
    /* Between frames the map never holds more than its cap (within a
     * fusion call, one frame's new voxels more until that call evicts). */
    CHECK_LE(probe.model_max, cap);
    fprintf(stderr,
            "    soak: %llu frames, model at most %zu voxels (cap %zu), first eviction at frame "
            "%llu; at frame %llu %llu voxels, RSS peak over the next %llu frames %ld KiB; at the "
            "end %llu voxels, RSS peak over the last %llu frames %ld KiB\n",
            (unsigned long long)probe.frames, probe.model_max, cap,
            (unsigned long long)probe.first_eviction, (unsigned long long)probe.warm_frame,
            (unsigned long long)probe.model_at_warm, (unsigned long long)probe.window,
            probe.rss_warm_peak, (unsigned long long)probe.model_end,
            (unsigned long long)probe.window, probe.rss_end_peak);
#ifndef KINREG_SANITIZED
    /* Flat after warm-up. Without the cap the map keeps growing (the issue:
     * +84 MiB over 17 k frames); with it, what may still move is the k-d
     * tree of the active window and allocator noise: 8 MiB. */
    REQUIRE(probe.first_eviction > 0 &&
            probe.warm_frame + probe.window <= probe.frames - probe.window);
    REQUIRE(probe.rss_warm_peak > 0);
    CHECK_LE(probe.rss_end_peak - probe.rss_warm_peak, 8 * 1024);
#endif
}

/* ---- a cap below what the recent frames see ------------------------------- */

static void max_model(const kr_frame_result *r, const kr_pipeline_stats *st, void *user)
{
    (void)r;
    uint64_t *most = user;
    if (st->model_points > *most) *most = st->model_points;
}

/* The vertex count a PLY's header states, or -1. */
static long ply_vertices(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char line[256];
    long n = -1;
    while (fgets(line, sizeof line, f) && strncmp(line, "end_header", 10) != 0)
        sscanf(line, "element vertex %ld", &n);
    fclose(f);
    return n;
}

/* Issue 30 item 8: the cap held only while the voxels seen in the last
 * evict_after frames (900) fitted under it; past that they were kept, and
 * with 16 MiB the model held 912,913 voxels against a 99,864-voxel cap.
 * Now the oldest of the recent voxels go too (the active window last), so
 * the model holds at most the cap after every frame, and the saved model
 * (an independent count: what the PLY writer found in the map) too. */
KR_TEST(memory, cap_holds_when_the_recent_frames_exceed_it)
{
    char ply[512];
    snprintf(ply, sizeof ply, "%s/capped_model.ply", kr_test_tmpdir());
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source.uri = "synthetic";
    cfg.source.max_frames = 30;
    cfg.device.backend = KR_BACKEND_CPU;
    cfg.model_path = ply;
    /* 4 MiB = 24,966 voxels: less than the synthetic room's first frames
     * put in (the evict_after and distance rules at their defaults). */
    cfg.model.memory_mib = 4;
    uint64_t most = 0;
    cfg.on_frame = max_model;
    cfg.user = &most;
    kr_pipeline *p = NULL;
    REQUIRE_OK(kr_pipeline_create(&p, &cfg));
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    kr_pipeline_destroy(&p);
    size_t cap = kr_model_max_voxels(&cfg.model);
    CHECK_EQ(cap, 24966);
    long saved = ply_vertices(ply);
    printf("    cap %zu voxels: at most %llu after a frame, %llu at the end, %ld saved; "
           "%llu frames, lost %llu\n",
           cap, (unsigned long long)most, (unsigned long long)st.model_points, saved,
           (unsigned long long)st.frames_out, (unsigned long long)st.frames_lost);
    CHECK_LE(most, cap);
    CHECK_GT(most, cap / 2); /* the cap was reached, not merely respected */
    CHECK_GT(saved, 0);
    CHECK_LE(saved, (long)cap);
    CHECK_EQ(saved, (long)st.model_points);
    CHECK_EQ(st.frames_out, 30);
}
