/* The tracker's side of the live refiner (pipeline/live_refine.h).
 *
 * Keyframe k keeps its tracked pose A_k and its current pose P_k. A refined
 * window sets P_k for its keyframes; the newest of them, w, gives the world
 * correction C = P_w·A_w⁻¹, and every later keyframe gets P_k = C·A_k (it was
 * tracked in the same model frame as w, so it moves with it). A frame f whose
 * newest keyframe is a gets T_f,refined = P_a·A_a⁻¹·T_f,tracked: its motion
 * relative to its keyframe is kept, the keyframe's error is removed. With
 * windows overlapping (every < window), the next window's gauge is a
 * keyframe the previous window refined, so the corrections chain. */
#include "pipeline/live_refine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/transport.h"

/* The most keyframes one window holds (--refine-window is at most 64). */
#define KR_LIVE_REFINE_MAX_WINDOW 64
/* Keyframes waiting for a window at most: their points are kept until then
 * (about 0.24 MB each), so a refiner that cannot keep up for good must not
 * make memory grow without bound; beyond this the oldest are skipped. */
#define KR_LIVE_REFINE_MAX_BACKLOG 64
/* Keyframes whose points and normals are kept for re-fusion (about 0.5 MB
 * each at 20000 points): the model is rebuilt from these. */
#define KR_LIVE_REFINE_REFUSE_KEYFRAMES 32

void kr_live_refine_config_default(kr_live_refine_config *cfg)
{
    *cfg = (kr_live_refine_config){.enabled = false,
                                   .window = 10,
                                   .every = 5,
                                   .keyframe_distance = 0.10,
                                   .keyframe_angle_deg = 10,
                                   .keyframe_points = 20000,
                                   .cell = 0.01,
                                   .threads = 1,
                                   .min_correction = 0.003,
                                   .refuse_distance = 0};
}

kr_status kr_live_refine_init(kr_live_refine *lr, const kr_live_refine_config *cfg,
                              kr_backend backend, int cuda_device, bool in_step)
{
    memset(lr, 0, sizeof *lr);
    if (cfg->every > cfg->window && cfg->window >= 2)
        return kr_error(KR_ERR_INVALID_ARG,
                        "live refiner: a refinement every %d keyframes (--refine-every) with a "
                        "window of %d (--refine-window) would leave keyframes unrefined: give "
                        "--refine-every at most the window",
                        cfg->every, cfg->window);
    if (cfg->window < 2 || cfg->window > 64 || cfg->every < 1 || cfg->every > cfg->window ||
        !(cfg->keyframe_distance > 0) || !(cfg->keyframe_angle_deg > 0) ||
        cfg->keyframe_points < 100 || !(cfg->cell > 0) || cfg->threads < 0 ||
        !(cfg->min_correction >= 0) || !(cfg->refuse_distance >= 0))
        return kr_error(KR_ERR_INVALID_ARG,
                        "live refiner: window %d (2..64), every %d (1..window), keyframe spacing "
                        "%g m / %g deg (> 0), %d points (>= 100), cell %g m (> 0), threads %d "
                        "(>= 0), min correction %g m (>= 0), re-fusion %g m (>= 0): a value is "
                        "out of range",
                        cfg->window, cfg->every, cfg->keyframe_distance, cfg->keyframe_angle_deg,
                        cfg->keyframe_points, cfg->cell, cfg->threads, cfg->min_correction,
                        cfg->refuse_distance);
    lr->cfg = *cfg;
    lr->in_step = in_step;
    atomic_init(&lr->interrupted, false);
    kr_keyframes_config kc;
    kr_keyframes_config_default(&kc);
    kc.min_translation = cfg->keyframe_distance;
    kc.min_angle = cfg->keyframe_angle_deg * M_PI / 180;
    kc.max_points = (size_t)cfg->keyframe_points;
    kr_keyframes_init(&lr->kf, &kc);
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = backend;
    dc.cuda_device = cuda_device;
    dc.cpu_threads = cfg->threads;
    kr_status s = kr_device_create(&lr->device, &dc);
    kr_refine_config rc;
    kr_refine_config_default(&rc);
    /* Room-sized scenes have far more grid points than the bunny: at most 10
     * LM steps per grid keep a window of ten keyframes to seconds on one
     * core. Real depth is noisy: a Huber loss of half a cell. Measured on
     * fr1_xyz (docs/BENCHMARKS.md): a 2 cm finest grid made the trajectory
     * worse, 1 cm better; 20000 points, three grids and the Huber loss
     * better still. The refinement's defaults since session 4 (finest band
     * 2 on a fifth of the grid points, band 2 between) did better again in
     * a third of the time (in step: refined 1.379 -> 1.328 cm, windows 5.3
     * -> 1.7 s on the loaded 2-core VM), so they stay. */
    rc.cell = cfg->cell;
    rc.levels = 3;
    rc.max_iterations = 10;
    rc.huber = 0.5;
    /* Keyframes tracked frame to frame lie well inside the fields' basin,
     * and a window is refined in seconds on one core: no pairwise placement,
     * and no independent check (measured with neither, docs/BENCHMARKS.md). */
    rc.initialize = KR_REFINE_INIT_OFF;
    rc.keep_if_worse = false;
    if (s == KR_OK) s = kr_refiner_create(&lr->refiner, &rc, lr->device, cfg->threads);
    if (s != KR_OK) kr_device_destroy(&lr->device);
    return s;
}

void kr_live_refine_free(kr_live_refine *lr)
{
    if (!lr) return;
    kr_refiner_destroy(&lr->refiner); /* before the device its thread uses */
    kr_device_destroy(&lr->device);
    for (int k = 0; lr->surfels && k < lr->kf.n; k++)
        free(lr->surfels[k].points);
    free(lr->surfels);
    kr_keyframes_free(&lr->kf);
    free(lr->tracked);
    free(lr->stamps);
    free(lr->anchor);
    memset(lr, 0, sizeof *lr);
}

/* A rotation's move is counted at this distance from the camera (a typical
 * depth of what it sees). */
#define MOVE_RADIUS_M 1.0

static void publish_keyframe(kr_live_refine *lr, kr_outbox *box, int k, const kr_refine_job *j)
{
    kr_outbox_item item = kr_outbox_pose_item(KR_TOPIC_REFINE, lr->kf.items[k].frame, lr->stamps[k],
                                              &lr->kf.items[k].pose);
    kr_pose_msg *m = &item.pose;
    m->state = KR_TRACK_GOOD;
    m->method = KR_METHOD_REFINE;
    m->iterations = (uint16_t)(j->result.iterations > 65535 ? 65535 : j->result.iterations);
    m->inlier_fraction = NAN; /* no inliers in a distance-field fit */
    m->rms = (float)j->result.rms_after;
    m->condition = NAN;
    kr_outbox_put(box, &item);
}

/* A finished window: its poses replace the keyframes' (the window's poses
 * were theirs when posted: only results change keyframe poses, and one
 * window is in flight at a time), later keyframes follow its newest one,
 * and the refined poses leave on `refine`. A failed window changes nothing. */
static void apply(kr_live_refine *lr, kr_outbox *box, kr_refine_job *j)
{
    if (j->status == KR_ERR_INTERRUPTED) {
        kr_log(KR_LOG_INFO, "live refiner: keyframes %d..%d kept as tracked: stopped", j->first,
               j->first + j->count - 1);
        return;
    }
    lr->last_ms = 1e3 * j->result.seconds;
    if (j->status != KR_OK) {
        lr->failures++;
        kr_log(KR_LOG_WARN, "live refiner: keyframes %d..%d kept as tracked: %s", j->first,
               j->first + j->count - 1, j->error);
        return;
    }
    lr->refinements++;
    /* Below the refinement's resolution a move is noise, not a correction:
     * the window keeps its poses (still published: they are the best). */
    double moved = 0;
    for (int k = 0; k < j->count; k++) {
        kr_pose inv = kr_pose_inv(&lr->kf.items[j->first + k].pose);
        kr_pose d = kr_pose_mul(&inv, &j->poses[k]);
        moved = fmax(moved, kr_pose_translation_norm(&d) + kr_pose_angle(&d) * MOVE_RADIUS_M);
    }
    lr->last_moved = moved;
    kr_log(KR_LOG_DEBUG, "live refiner: keyframes %d..%d moved up to %.1f mm: %s", j->first,
           j->first + j->count - 1, 1e3 * moved,
           moved >= lr->cfg.min_correction ? "applied" : "below the resolution, kept");
    if (moved >= lr->cfg.min_correction) {
        lr->corrections++;
        for (int k = 0; k < j->count; k++)
            lr->kf.items[j->first + k].pose = j->poses[k];
        if (lr->cfg.refuse_distance > 0 && moved >= lr->cfg.refuse_distance) lr->refuse_due = true;
    }
    int w = j->first + j->count - 1;
    kr_pose inv = kr_pose_inv(&lr->tracked[w]);
    kr_pose correction = kr_pose_mul(&lr->kf.items[w].pose, &inv);
    for (int k = w + 1; k < lr->kf.n; k++)
        lr->kf.items[k].pose = kr_pose_mul(&correction, &lr->tracked[k]);
    for (int k = 0; k < j->count; k++)
        publish_keyframe(lr, box, j->first + k, j);
}

static kr_status post_window(kr_live_refine *lr)
{
    /* Windows follow each other in keyframe order: each takes the `every`
     * keyframes after the last window's end (or fewer at the end of a run)
     * and the window − every before them, the oldest its gauge. A window is
     * posted only when the refiner is idle, so when it falls behind it works
     * through the windows in order instead of jumping to the newest: jumping
     * left keyframes never refined (their points are freed below) and made
     * the real-time runs worse than the in-step ones on the loaded 2-core VM
     * (fr1: refined ATE 1.39-1.56 cm against 1.33 in step). What is still
     * queued when the source ends is refined then (kr_live_refine_finish). */
    if (lr->kf.n - lr->refined_to > KR_LIVE_REFINE_MAX_BACKLOG)
        lr->refined_to = lr->kf.n - lr->cfg.every; /* too far behind: the oldest are dropped */
    int end = lr->refined_to + lr->cfg.every;
    if (end < 2) end = 2; /* the first window needs two keyframes (--refine-every 1) */
    if (end > lr->kf.n) end = lr->kf.n;
    int first = end - lr->cfg.window;
    if (first < 0) first = 0;
    int count = end - first;
    const float *xyz[KR_LIVE_REFINE_MAX_WINDOW];
    size_t n[KR_LIVE_REFINE_MAX_WINDOW];
    kr_pose poses[KR_LIVE_REFINE_MAX_WINDOW];
    for (int k = 0; k < count; k++) {
        xyz[k] = lr->kf.items[first + k].xyz;
        n[k] = lr->kf.items[first + k].n;
        poses[k] = lr->kf.items[first + k].pose;
    }
    kr_refine_job *job = NULL;
    kr_status s = kr_refine_job_create(&job, first, count, xyz, n, poses);
    if (s == KR_OK) s = kr_refiner_post(lr->refiner, &job);
    kr_refine_job_free(&job);
    if (s != KR_OK) return s;
    lr->refined_to = end;
    lr->since_post = lr->kf.n - end;
    /* Keyframes before this window are never refined again: their points go. */
    for (int k = 0; k < first; k++) {
        free(lr->kf.items[k].xyz);
        lr->kf.items[k].xyz = NULL;
        lr->kf.items[k].n = 0;
    }
    return KR_OK;
}

static bool has_surfel(const kr_cloud *c, size_t i)
{
    const float *p = c->points + 3 * i, *n = c->normals + 3 * i;
    return isfinite(p[0]) && isfinite(p[1]) && isfinite(p[2]) && isfinite(n[0]) && isfinite(n[1]) &&
           isfinite(n[2]);
}

/* A keyframe's points that have normals, evenly strided down to at most
 * `max`, as one allocation (points, then normals) that `out` owns through
 * out->points (empty when the cloud has no such point). */
static kr_status keep_surfels(const kr_cloud *c, size_t max, kr_cloud *out)
{
    *out = (kr_cloud){0};
    size_t npix = (size_t)c->width * (size_t)c->height, valid = 0;
    if (!c->points || !c->normals) return KR_OK;
    for (size_t i = 0; i < npix; i++)
        valid += has_surfel(c, i);
    size_t keep = valid > max ? max : valid;
    if (!keep) return KR_OK;
    float *buf = malloc(sizeof *buf * 6 * keep);
    if (!buf)
        return kr_error(KR_ERR_NOMEM, "live refiner: no memory for %zu keyframe points", keep);
    size_t seen = 0, kept = 0;
    for (size_t i = 0; i < npix && kept < keep; i++) {
        if (!has_surfel(c, i)) continue;
        if (seen++ == kept * valid / keep) {
            memcpy(buf + 3 * kept, c->points + 3 * i, sizeof(float) * 3);
            memcpy(buf + 3 * (keep + kept), c->normals + 3 * i, sizeof(float) * 3);
            kept++;
        }
    }
    *out = (kr_cloud){.width = (int)keep,
                      .height = 1,
                      .intrinsics = c->intrinsics,
                      .points = buf,
                      .normals = buf + 3 * keep,
                      .valid_points = (int)keep,
                      .valid_normals = (int)keep};
    return KR_OK;
}

static kr_status add_keyframe(kr_live_refine *lr, uint64_t frame, double stamp,
                              const kr_pose *tracked, const kr_cloud *cloud)
{
    if (lr->kf.n == lr->capacity) {
        int cap = lr->capacity ? 2 * lr->capacity : 64;
        kr_pose *t = realloc(lr->tracked, sizeof *t * (size_t)cap);
        if (t) lr->tracked = t;
        double *st = t ? realloc(lr->stamps, sizeof *st * (size_t)cap) : NULL;
        if (st) lr->stamps = st;
        kr_cloud *sf = st ? realloc(lr->surfels, sizeof *sf * (size_t)cap) : NULL;
        if (sf) lr->surfels = sf;
        if (!t || !st || !sf)
            return kr_error(KR_ERR_NOMEM, "live refiner: no memory for %d keyframes", cap);
        lr->capacity = cap;
    }
    /* The pose it starts from: the tracked one moved like the newest keyframe. */
    kr_pose pose = *tracked;
    if (lr->kf.n > 0) {
        int last = lr->kf.n - 1;
        kr_pose inv = kr_pose_inv(&lr->tracked[last]);
        kr_pose correction = kr_pose_mul(&lr->kf.items[last].pose, &inv);
        pose = kr_pose_mul(&correction, tracked);
    }
    kr_status s = kr_keyframes_add(&lr->kf, frame, &pose, cloud->points,
                                   (size_t)cloud->width * (size_t)cloud->height);
    if (s == KR_ERR_EMPTY) return KR_OK; /* no depth: not a keyframe after all */
    if (s != KR_OK) return s;
    lr->tracked[lr->kf.n - 1] = *tracked;
    lr->stamps[lr->kf.n - 1] = stamp;
    lr->since_post++;
    int old = lr->kf.n - 1 - KR_LIVE_REFINE_REFUSE_KEYFRAMES;
    if (old >= 0) {
        free(lr->surfels[old].points);
        lr->surfels[old] = (kr_cloud){0};
    }
    lr->surfels[lr->kf.n - 1] = (kr_cloud){0};
    if (!(lr->cfg.refuse_distance > 0)) return KR_OK; /* re-fusion off: nothing to keep */
    return keep_surfels(cloud, (size_t)lr->cfg.keyframe_points, &lr->surfels[lr->kf.n - 1]);
}

static kr_pose correct(const kr_live_refine *lr, int k, const kr_pose *tracked)
{
    if (k < 0) return *tracked;
    kr_pose inv = kr_pose_inv(&lr->tracked[k]);
    kr_pose correction = kr_pose_mul(&lr->kf.items[k].pose, &inv);
    return kr_pose_mul(&correction, tracked);
}

kr_status kr_live_refine_frame(kr_live_refine *lr, kr_outbox *box, uint64_t frame, double stamp,
                               const kr_pose *tracked, bool good, const kr_cloud *cloud,
                               kr_pose *refined)
{
    kr_refine_job *done = kr_refiner_take(lr->refiner, false);
    if (done) apply(lr, box, done);
    kr_refine_job_free(&done);

    kr_status s;
    kr_pose corrected = correct(lr, lr->kf.n - 1, tracked);
    if (cloud && kr_keyframes_due(&lr->kf, &corrected, good) &&
        (s = add_keyframe(lr, frame, stamp, tracked, cloud)) != KR_OK)
        return s;
    if (lr->frames == lr->frames_cap) {
        size_t cap = lr->frames_cap ? 2 * lr->frames_cap : 1024;
        int *grown = realloc(lr->anchor, sizeof *grown * cap);
        if (!grown) return kr_error(KR_ERR_NOMEM, "live refiner: no memory for %zu frames", cap);
        lr->anchor = grown;
        lr->frames_cap = cap;
    }
    lr->anchor[lr->frames++] = lr->kf.n - 1;
    if (lr->since_post >= lr->cfg.every && lr->kf.n >= 2 && kr_refiner_idle(lr->refiner) &&
        (s = post_window(lr)) != KR_OK)
        return s;
    if (lr->in_step) {
        done = kr_refiner_take(lr->refiner, true);
        if (done) apply(lr, box, done);
        kr_refine_job_free(&done);
    }
    *refined = correct(lr, lr->kf.n - 1, tracked);
    return KR_OK;
}

/* The model stays in the tracker's frame. The newest keyframe w's correction
 * C = P_w·A_w⁻¹ maps that frame to the refined one, so keyframe k is fused at
 * C⁻¹·P_k: w stays where it was tracked (the tracker goes on from there
 * without a jump), and every other keyframe takes its refined place relative
 * to it. Later refinements then correct poses tracked against this model
 * exactly as before. */
kr_status kr_live_refine_refuse(kr_live_refine *lr, kr_model *model, uint64_t frame)
{
    if (!lr->refuse_due || lr->kf.n < 1) return KR_OK;
    lr->refuse_due = false;
    int w = lr->kf.n - 1;
    kr_pose inv = kr_pose_inv(&lr->tracked[w]);
    kr_pose correction = kr_pose_mul(&lr->kf.items[w].pose, &inv);
    kr_pose undo = kr_pose_inv(&correction);
    kr_cloud clouds[KR_LIVE_REFINE_REFUSE_KEYFRAMES];
    kr_pose poses[KR_LIVE_REFINE_REFUSE_KEYFRAMES];
    int n = 0;
    for (int k = w + 1 > KR_LIVE_REFINE_REFUSE_KEYFRAMES ? w + 1 - KR_LIVE_REFINE_REFUSE_KEYFRAMES
                                                         : 0;
         k <= w; k++) {
        if (!lr->surfels[k].points) continue;
        clouds[n] = lr->surfels[k];
        poses[n++] = kr_pose_mul(&undo, &lr->kf.items[k].pose);
    }
    kr_status s = kr_model_refuse(model, clouds, poses, n, frame);
    if (s == KR_OK) lr->refusions++;
    return s;
}

kr_status kr_live_refine_finish(kr_live_refine *lr, kr_outbox *box, bool final)
{
    /* Said before the wait: the run has tracked its last frame and would
     * otherwise be silent for as long as the backlog takes. */
    bool backlog = lr->since_post > 0 && lr->kf.n >= 2 && lr->refined_to < lr->kf.n;
    bool busy = !kr_refiner_idle(lr->refiner);
    if (final && (busy || backlog))
        kr_log(KR_LOG_INFO,
               "the source ended: the live refiner finishes %s (Ctrl-C ends it at once, keeping "
               "the tracked poses)",
               busy && backlog ? "its window in flight and the last keyframes"
               : busy          ? "its window in flight"
                               : "the last keyframes");
    kr_refine_job *done = kr_refiner_take(lr->refiner, true);
    if (done) apply(lr, box, done);
    kr_refine_job_free(&done);
    if (!final || lr->since_post == 0 || lr->kf.n < 2) return KR_OK;
    /* Every keyframe the windows have not reached yet, in order. */
    while (lr->refined_to < lr->kf.n && !atomic_load(&lr->interrupted)) {
        kr_status s = post_window(lr);
        if (s != KR_OK) return s;
        done = kr_refiner_take(lr->refiner, true);
        if (done) apply(lr, box, done);
        kr_refine_job_free(&done);
    }
    return KR_OK;
}

void kr_live_refine_interrupt(kr_live_refine *lr)
{
    if (!lr) return;
    atomic_store(&lr->interrupted, true);
    kr_refiner_interrupt(lr->refiner);
}

kr_status kr_live_refine_trajectory(const kr_live_refine *lr, const kr_trajectory *tracked,
                                    kr_trajectory *out)
{
    /* A frame whose fusion failed after it was seen here has no tracked pose:
     * it is the run's last, and the poses before it still line up. */
    if (tracked->count > lr->frames)
        return kr_error(KR_ERR_INVALID_ARG, "live refiner: %zu tracked poses for %zu frames seen",
                        tracked->count, lr->frames);
    for (size_t f = 0; f < tracked->count; f++) {
        kr_pose pose = correct(lr, lr->anchor[f], &tracked->poses[f]);
        kr_status s = kr_trajectory_push(out, tracked->stamps[f], &pose);
        if (s != KR_OK) return s;
    }
    return KR_OK;
}
