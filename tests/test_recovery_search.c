/* The recovery search alone, against the truth: on the synthetic scan with
 * jumps and covered stretches, a model is fused from the true poses of the
 * frames before each event (the model the tracker would hold had it tracked
 * them), and kr_recover_frame must find the frame after the event from the
 * last good pose in one attempt. This isolates the search from the state
 * machine (test_recovery.c runs the whole pipeline) and says how often one
 * attempt finds the camera and how long an attempt takes. */
#include "kr_test.h"

#include <stdlib.h>
#include <string.h>

#include "kinreg/device.h"
#include "kinreg/eval.h"
#include "kinreg/model.h"
#include "kinreg/pipeline.h"
#include "kinreg/preprocess.h"
#include "pipeline/recover/recover.h"
#include "recovery_fixture.h"

#define FUSE_STEP 3

typedef struct {
    int events, found, correct, soft; /* soft: found by EM-ICP or Softassign, not their fallback */
    double ms_total, ms_max;
} search_result;

static bool frame_covered(const kr_frame *f)
{
    size_t n = (size_t)f->width * f->height;
    for (size_t i = 0; i < n; i++)
        if (f->raw[i] < KR_DISPARITY_INVALID) return false;
    return true;
}

static double step_size(const kr_pose *a, const kr_pose *b, double *deg)
{
    kr_pose ia = kr_pose_inv(a), d = kr_pose_mul(&ia, b);
    *deg = kr_pose_angle(&d) * 180 / M_PI;
    return sqrt(d.t[0] * d.t[0] + d.t[1] * d.t[1] + d.t[2] * d.t[2]);
}

/* Runs the search on every jump and uncovering of `scfg`'s scan. */
static search_result run_search(const kr_source_config *scfg, kr_backend backend,
                                const kr_recover_config *rc, bool print)
{
    search_result res = {0};
    kr_source *src = NULL;
    kr_device *dev = NULL;
    kr_model *model = NULL;
    kr_pyramid pyr = {0}, last = {0};
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = backend;
    kr_status s = kr_device_create(&dev, &dc);
    if (s == KR_ERR_NO_DEVICE) {
        res.events = -1; /* the caller skips */
        return res;
    }
    CHECK_OK(s);
    CHECK_OK(kr_source_create(&src, scfg));
    kr_model_config mc;
    kr_model_config_default(&mc);
    mc.background = false;
    CHECK_OK(kr_model_create(&model, &mc));
    if (!src || !dev || !model) goto done;
    const kr_trajectory *gt = kr_source_groundtruth(src);
    const kr_intrinsics K = kr_source_intrinsics(src);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    kr_track_config tc;
    kr_track_config_default(&tc);
    size_t n = gt->count;
    /* Jumps from the ground truth: steps far beyond the smooth path's. */
    bool *jump = calloc(n, sizeof *jump);
    kr_pose *rel = malloc(n * sizeof *rel);
    kr_pose g0inv = kr_pose_inv(&gt->poses[0]);
    for (size_t k = 0; k < n; k++) {
        rel[k] = kr_pose_mul(&g0inv, &gt->poses[k]);
        double deg = 0;
        if (k > 0 && (step_size(&gt->poses[k - 1], &gt->poses[k], &deg) > 0.05 || deg > 5))
            jump[k] = true;
    }
    /* The tracker fuses every frame; every FUSE_STEP-th is enough for a
     * model as complete (the voxels are 1.5 cm) at a third of the cost. */
    bool *fuse = calloc(n, sizeof *fuse);
    for (size_t k = 0; k < n; k++)
        fuse[k] = k % FUSE_STEP == 0;
    bool prev_covered = false, have_last = false;
    kr_pose last_good = kr_pose_identity(), before_last = kr_pose_identity();
    size_t last_k = 0;
    for (size_t k = 0; k < n; k++) {
        kr_frame f;
        if (kr_source_read(src, &f) != KR_OK) break;
        bool covered = frame_covered(&f);
        bool event = have_last && !covered && (jump[k] || prev_covered);
        prev_covered = covered;
        if (covered || (!event && !fuse[k])) {
            kr_frame_release(&f);
            continue;
        }
        s = kr_preprocess(dev, &pc, &f, &K, &pyr);
        kr_frame_release(&f);
        CHECK_OK(s);
        if (s != KR_OK) break;
        if (!event) {
            CHECK_OK(kr_model_integrate(model, &pyr.level[tc.finest_level], &rel[k], k));
            kr_pyramid t = last;
            last = pyr;
            pyr = t;
            before_last = have_last && last_k + FUSE_STEP == k ? last_good : rel[k];
            last_good = rel[k];
            last_k = k;
            have_last = true;
            continue;
        }
        CHECK_OK(kr_model_request_snapshot(model, k - 1));
        kr_model_snapshot *snap = kr_model_snapshot_acquire(model);
        if (!snap) continue;
        /* The motion model's prediction: the velocity per frame from the
         * last two fused frames, carried to this one. */
        kr_pose inv = kr_pose_inv(&before_last), v = kr_pose_mul(&inv, &last_good);
        double x[6];
        kr_pose_log(&v, x);
        for (int i = 0; i < 6; i++)
            x[i] *= (double)(k - last_k) / FUSE_STEP;
        kr_pose vk = kr_pose_exp(x), predicted = kr_pose_mul(&last_good, &vk);
        if (jump[k]) predicted = last_good; /* a jump resets nothing: the last frame was good */
        /* The recent frames' figures: the last fused frame tracked from its
         * true pose. */
        kr_track_quality recent;
        memset(&recent, 0, sizeof recent);
        kr_track_result lr;
        if (kr_track_frame(kr_model_snapshot_tree(snap), &last, &last_good, &tc, &lr) == KR_OK &&
            lr.state == KR_TRACK_GOOD) {
            recent.recent_inlier = lr.inlier_fraction;
            recent.recent_rms = lr.rms;
        }
        kr_recovery rec;
        double t0 = kr_now();
        s = kr_recover_frame(dev, kr_model_snapshot_tree(snap), &pyr, &predicted, &last_good, rc,
                             &tc, &recent, NULL, &rec);
        double ms = 1e3 * (kr_now() - t0);
        kr_model_snapshot_release(&snap);
        CHECK_OK(s);
        double deg, m = step_size(&rel[k], &rec.track.pose, &deg), jdeg,
                    jm = step_size(&last_good, &rel[k], &jdeg);
        bool correct = rec.success && deg < 2 && m < 0.02;
        res.events++;
        res.found += rec.success;
        res.correct += correct;
        res.soft +=
            correct && (rec.method == KR_METHOD_EMICP || rec.method == KR_METHOD_SOFTASSIGN);
        res.ms_total += ms;
        if (ms > res.ms_max) res.ms_max = ms;
        if (print)
            fprintf(
                stderr,
                "    frame %4zu %-9s from %5.1f deg %5.3f m: %s by %-10s seed %2d of %2d, error "
                "%6.2f deg %6.3f m, %6.1f ms\n",
                k, jump[k] ? "jump" : "uncovered", jdeg, jm,
                correct       ? "found"
                : rec.success ? "WRONG"
                              : "missed",
                kr_method_name(rec.method), rec.hypothesis, rec.attempts, deg, m, ms);
    }
    free(jump);
    free(rel);
    free(fuse);
done:
    kr_pyramid_free(&pyr);
    kr_pyramid_free(&last);
    kr_model_destroy(&model);
    kr_source_destroy(&src);
    kr_device_destroy(&dev);
    return res;
}

static void report(const char *what, const search_result *r)
{
    printf("    %s: %d events, %d found (%d correct, %d of them by the soft method), %.1f ms per "
           "attempt (max %.1f)\n",
           what, r->events, r->found, r->correct, r->soft, r->events ? r->ms_total / r->events : 0,
           r->ms_max);
}

/* A short scan with jumps of up to 30° and 30 cm: one attempt finds most,
 * and accepts a wrong pose at most once (frame 302 of this scan, after a
 * covered stretch: the view is a valley of the objective, where tracking
 * slides 10 cm with a perfect fit and nothing in free space says so). */
KR_TEST(recovery_search, finds_jumps_in_one_attempt)
{
    kr_source_config scfg;
    kr_source_config_default(&scfg);
    const char *env = getenv("KR_RECOVERY_SEARCH_FULL");
    bool full = env && *env == '1';
    scfg.uri = "synthetic:1";
    scfg.duration_s = full ? 30 : 12;
    scfg.jumps = full ? 20 : 8;
    scfg.covered = full ? 5 : 2;
    kr_recover_config rc;
    kr_recover_config_default(&rc);
    /* KR_RECOVERY_METHOD=newton|emicp|softassign: another method than the
     * default; KR_RECOVERY_NO_FALLBACK=1: a soft method without the Newton
     * search behind it. */
    const char *m = getenv("KR_RECOVERY_METHOD");
    if (m) CHECK_OK(kr_recover_method_parse(m, &rc.method));
    const char *nf = getenv("KR_RECOVERY_NO_FALLBACK");
    if (nf && *nf == '1') rc.newton_fallback = 0;
    /* KR_RECOVERY_BACKEND=cuda: the same on the device's engine. */
    kr_backend backend = KR_BACKEND_CPU;
    const char *b = getenv("KR_RECOVERY_BACKEND");
    if (b) CHECK_OK(kr_backend_parse(b, &backend));
    search_result r = run_search(&scfg, backend, &rc, true);
    if (r.events < 0) {
        SKIP("no device for backend %s", kr_backend_name(backend));
        return;
    }
    report(kr_backend_name(backend), &r);
    CHECK_LE(r.found - r.correct, 1);
    CHECK_GE(r.correct, 0.8 * r.events);
    /* The soft method finds most on its own, the Newton search the rest
     * (with the frame's points uncut beyond the model's radius, EM-ICP found
     * 2 of the full scan's 25). */
    if (rc.method == KR_RECOVER_EMICP || rc.method == KR_RECOVER_SOFTASSIGN)
        CHECK_GE(r.soft, 0.3 * r.events);
}

/* ---- the whole pipeline on the same scan: the figures the issue asks for */

/* Runs the pipeline on the scan; prints the events found again within 3
 * frames, the time recovery took, and the ATE over all frames and over the
 * frames that were not LOST (a LOST frame publishes the prediction: on a
 * covered stretch there is nothing else), and of the final trajectory (the
 * lost stretches filled in at the end, pipeline/lost_fill.h) over all. */
static void pipeline_figures(const kr_source_config *scfg, kr_recover_method method, int *events,
                             int *quick, double *ate_all, double *ate_tracked, double *ate_final)
{
    kr_pipeline_config cfg;
    kr_pipeline_config_default(&cfg);
    cfg.source = *scfg;
    cfg.device.backend = KR_BACKEND_CPU;
    const char *backend = getenv("KR_RECOVERY_BACKEND");
    if (backend) CHECK_OK(kr_backend_parse(backend, &cfg.device.backend));
    cfg.recover.method = method;
    cfg.deterministic = true; /* repeatable figures: no timing-dependent snapshot swaps */
    cfg.fill_lost = true;
    frame_log log = {0};
    cfg.on_frame = log_frame;
    cfg.user = &log;
    kr_pipeline *p = NULL;
    *events = *quick = 0;
    *ate_all = *ate_tracked = *ate_final = NAN;
    /* Not REQUIRE_OK: after a failed bound of the run with jumps, the run
     * without them must still print its figures. */
    kr_status s = kr_pipeline_create(&p, &cfg);
    CHECK_OK(s);
    if (s != KR_OK) return;
    CHECK_OK(kr_pipeline_run(p));
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    const kr_trajectory *gt = kr_source_groundtruth(kr_pipeline_source(p));
    kr_trajectory all = {0}, tracked = {0};
    int lost = 0;
    for (size_t i = 0; i < log.n; i++) {
        const kr_frame_result *r = &log.r[i];
        CHECK_OK(kr_trajectory_push(&all, r->timestamp, &r->track.pose));
        if (r->track.state != KR_TRACK_LOST)
            CHECK_OK(kr_trajectory_push(&tracked, r->timestamp, &r->track.pose));
        else
            lost++;
    }
    kr_ate a = {0}, b = {0}, f = {0};
    if (gt && log.n > 1) {
        count_recovered(&log, gt, 3, getenv("KR_RECOVERY_PRINT") != NULL, events, quick);
        CHECK_OK(kr_eval_ate(gt, &all, 0, &a));
        if (tracked.count > 2) CHECK_OK(kr_eval_ate(gt, &tracked, 0, &b));
        CHECK_OK(kr_eval_ate(gt, kr_pipeline_final_trajectory(p), 0, &f));
    }
    *ate_all = a.rmse;
    *ate_tracked = b.rmse;
    *ate_final = f.rmse;
    uint64_t attempts = st.recoveries + st.recovery_failures;
    printf(
        "    %s, --recover %s: %d events (jumps, uncoverings), %d right again within 3 frames with "
        "depth; state machine: %llu losses, %llu recoveries, %llu failed attempts, %.1f ms "
        "per attempt, %.1f ms per event; LOST frames %d of %zu; ATE %.2f cm over all frames, "
        "%.2f cm over the frames not LOST; final trajectory (%llu LOST frames tracked backwards, "
        "%llu interpolated, %llu left) %.2f cm over all frames\n",
        kr_backend_name(cfg.device.backend), kr_recover_method_name(method), *events, *quick,
        (unsigned long long)st.losses, (unsigned long long)st.recoveries,
        (unsigned long long)st.recovery_failures, attempts ? st.recovery_ms_total / attempts : 0,
        *events ? st.recovery_ms_total / *events : 0, lost, log.n, 100 * a.rmse, 100 * b.rmse,
        (unsigned long long)st.frames_filled, (unsigned long long)st.frames_interpolated,
        (unsigned long long)st.frames_unfilled, 100 * f.rmse);
    CHECK_EQ(st.frames_filled + st.frames_interpolated + st.frames_unfilled, (uint64_t)lost);
    kr_trajectory_free(&all);
    kr_trajectory_free(&tracked);
    kr_pipeline_destroy(&p);
    free(log.r);
}

/* End to end: the events found again quickly, and the frames that were
 * tracked stay accurate. KR_RECOVERY_SEARCH_FULL=1: the demo scan of
 * docs/guide/replay-and-evaluation.md (30 s, 20 jumps, 5 covered
 * stretches) and the run without jumps beside it;
 * KR_RECOVERY_METHOD=newton (or another) to measure that method;
 * KR_RECOVERY_PRINT=1 names the events not found again in time. */
KR_TEST_TAGGED(recovery_search, pipeline_events_and_ate, "long")
{
    kr_source_config scfg;
    kr_source_config_default(&scfg);
    const char *env = getenv("KR_RECOVERY_SEARCH_FULL");
    bool full = env && *env == '1';
    scfg.uri = "synthetic:1";
    scfg.duration_s = full ? 30 : 10;
    scfg.jumps = full ? 20 : 6;
    scfg.covered = full ? 5 : 2;
    kr_recover_config rc;
    kr_recover_config_default(&rc);
    kr_recover_method method = rc.method;
    const char *m = getenv("KR_RECOVERY_METHOD");
    if (m) CHECK_OK(kr_recover_method_parse(m, &method));
    int events, quick;
    double ate_all, ate_tracked, ate_final;
    pipeline_figures(&scfg, method, &events, &quick, &ate_all, &ate_tracked, &ate_final);
    CHECK_EQ(events, scfg.jumps + scfg.covered);
    CHECK_GE(quick, 0.75 * events);
    CHECK_LT(ate_tracked, 0.03);
    /* Every loss here ends in a recovery, so the final trajectory places
     * the LOST frames: no stale pose is left to dominate the figure. */
    CHECK_LT(ate_final, 0.5 * ate_all);
    if (full) {
        int e0, q0;
        double a0, t0, f0;
        scfg.jumps = scfg.covered = 0;
        pipeline_figures(&scfg, method, &e0, &q0, &a0, &t0, &f0);
        CHECK_EQ(f0, a0); /* nothing lost, nothing filled in */
        printf("    ATE without jumps %.2f cm: with them %.1fx over all frames, %.1fx over the "
               "frames not LOST, %.1fx for the final trajectory over all frames\n",
               100 * a0, ate_all / a0, ate_tracked / a0, ate_final / a0);
        /* One wrong recovery accepted as near (frame 289, 17.6 cm off) made
         * this 5.4x; with it caught, 2.5x on both engines. */
        CHECK_LT(ate_tracked, 4 * a0);
    }
}

/* Waiting on a near miss. After the full scan's jump at frame 172 the view
 * overlaps the model at about 0.4, just under the partial gate: the search
 * finds the same candidate frame after frame (pipeline/recover/recover.c, "Waiting
 * for a better view"). With the pipeline's cache the loss then waits on it:
 * each waiting attempt must be one judged tracking and decide as the whole
 * search (no cache) decides on the same frame, and the whole search must
 * come back after KR_RECOVER_WAIT_FULL_EVERY waiting attempts. The model is
 * fused from the true poses of every third frame before the jump, as in
 * run_search. KR_RECOVERY_BACKEND=cuda: the same on the device's engine. */
KR_TEST(recovery_search, waits_on_a_near_miss)
{
    const size_t jump_at = 172, last = jump_at + KR_RECOVER_WAIT_FULL_EVERY + 2;
    kr_source_config scfg;
    kr_source_config_default(&scfg);
    scfg.uri = "synthetic:1";
    scfg.duration_s = 30;
    scfg.jumps = 20;
    scfg.covered = 5;
    kr_device *dev = NULL;
    kr_source *src = NULL;
    kr_model *model = NULL;
    kr_device_config dc;
    kr_device_config_default(&dc);
    const char *b = getenv("KR_RECOVERY_BACKEND"); /* cuda: the device's engine */
    if (b) REQUIRE_OK(kr_backend_parse(b, &dc.backend));
    kr_status ds = kr_device_create(&dev, &dc);
    if (ds == KR_ERR_NO_DEVICE) {
        SKIP("no device for backend %s", kr_backend_name(dc.backend));
        return;
    }
    REQUIRE_OK(ds);
    REQUIRE_OK(kr_source_create(&src, &scfg));
    kr_model_config mc;
    kr_model_config_default(&mc);
    mc.background = false;
    REQUIRE_OK(kr_model_create(&model, &mc));
    const kr_trajectory *gt = kr_source_groundtruth(src);
    REQUIRE(gt && gt->count > last);
    const kr_intrinsics K = kr_source_intrinsics(src);
    kr_preprocess_config pc;
    kr_preprocess_config_default(&pc);
    kr_track_config tc;
    kr_track_config_default(&tc);
    kr_recover_config rc;
    kr_recover_config_default(&rc);
    kr_pose g0inv = kr_pose_inv(&gt->poses[0]);
    double deg;
    REQUIRE(step_size(&gt->poses[jump_at - 1], &gt->poses[jump_at], &deg) > 0.05 || deg > 5);
    kr_pyramid pyr = {0}, fused = {0};
    kr_pose last_good = kr_pose_identity();
    kr_recover_cache cache = {0};
    kr_track_quality recent;
    memset(&recent, 0, sizeof recent);
    int waited = 0, full_after_wait = 0;
    for (size_t k = 0; k <= last; k++) {
        kr_frame f;
        REQUIRE_OK(kr_source_read(src, &f));
        if (k < jump_at && k % FUSE_STEP != 0) {
            kr_frame_release(&f);
            continue;
        }
        kr_status s = kr_preprocess(dev, &pc, &f, &K, &pyr);
        kr_frame_release(&f);
        REQUIRE_OK(s);
        if (k < jump_at) {
            last_good = kr_pose_mul(&g0inv, &gt->poses[k]);
            REQUIRE_OK(kr_model_integrate(model, &pyr.level[tc.finest_level], &last_good, k));
            kr_pyramid t = fused;
            fused = pyr;
            pyr = t;
            continue;
        }
        REQUIRE_OK(kr_model_request_snapshot(model, jump_at - 1));
        kr_model_snapshot *snap = kr_model_snapshot_acquire(model);
        REQUIRE(snap != NULL);
        const kr_kdtree *tree = kr_model_snapshot_tree(snap);
        if (k == jump_at) {
            kr_track_result lr;
            REQUIRE_OK(kr_track_frame(tree, &fused, &last_good, &tc, &lr));
            recent.recent_inlier = lr.inlier_fraction;
            recent.recent_rms = lr.rms;
        }
        const bool was_waiting = cache.waiting;
        const int waits = cache.waits;
        kr_recovery with, whole;
        REQUIRE_OK(kr_recover_frame(dev, tree, &pyr, &last_good, &last_good, &rc, &tc, &recent,
                                    &cache, &with));
        REQUIRE_OK(kr_recover_frame(dev, tree, &pyr, &last_good, &last_good, &rc, &tc, &recent,
                                    NULL, &whole));
        kr_model_snapshot_release(&snap);
        printf("    frame %zu: %s, %d attempts (whole search: %s, %d)\n", k,
               with.success ? "found" : "not found", with.attempts,
               whole.success ? "found" : "not found", whole.attempts);
        if (k == jump_at) {
            CHECK(!with.success);
            REQUIRE(cache.waiting); /* else this scan no longer tests the wait */
            continue;
        }
        CHECK_EQ(with.success, whole.success);
        if (was_waiting && waits < KR_RECOVER_WAIT_FULL_EVERY) {
            CHECK_EQ(with.attempts, 1);
            waited++;
        } else if (was_waiting) {
            CHECK_GT(with.attempts, 1);
            full_after_wait++;
        }
        if (with.success) break;
    }
    /* The near miss of this jump lasts past one round of waiting. */
    CHECK_EQ(waited, KR_RECOVER_WAIT_FULL_EVERY);
    CHECK_EQ(full_after_wait, 1);
    kr_recover_cache_free(&cache);
    kr_pyramid_free(&pyr);
    kr_pyramid_free(&fused);
    kr_model_destroy(&model);
    kr_source_destroy(&src);
    kr_device_destroy(&dev);
}
