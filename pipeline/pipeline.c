/* The streaming pipeline: composes source, queue, preprocessing, tracking,
 * fusion and publishing on three threads (capture, tracker, publisher). */
#include "kinreg/pipeline.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/engine.h"
#include "kinreg/queue.h"
#include "pipeline/fuser.h"
#include "pipeline/mesher.h"
#include "pipeline/depth_feed.h"
#include "pipeline/mesh_feed.h"
#include "pipeline/model_feed.h"
#include "pipeline/live_refine.h"
#include "pipeline/lost_fill.h"
#include "pipeline/latency_hist.h"
#include "pipeline/outbox.h"
#include "pipeline/policy/track_policy.h"
#include "pipeline/recover/recover.h"
#include "pipeline/trajectory_writer.h"

struct kr_pipeline {
    kr_pipeline_config cfg;
    kr_source *source;
    kr_device *device;
    kr_model *model;
    kr_publisher *publisher;
    kr_queue *queue;
    kr_outbox outbox;
    kr_depth_feed depth_feed; /* the `depth` topic: tracker offers, publisher sends */
    kr_mesh_feed mesh_feed;   /* the `mesh` topic: the surface's thread offers, publisher sends */
    kr_intrinsics intrinsics;
    kr_pyramid pyramid;
    /* CUDA backend: fusion runs on its own thread (fuser) from a second
     * pyramid, swapped with `pyramid` when a frame is handed over. */
    kr_fuser *fuser;
    kr_pyramid fuse_pyramid;
    kr_mesher *mesher;                    /* cfg.mesh_path: the surface's thread */
    kr_trajectory_writer trajectory_file; /* fd -1 without --trajectory */
    kr_trajectory trajectory;
    /* The live refiner (cfg.refine.enabled): its thread and the tracker's
     * keyframe bookkeeping; the refined trajectory once the run has ended. */
    kr_live_refine *refine;
    kr_trajectory refined;
    /* cfg.fill_lost: the LOST frames' depth, and once the run has ended the
     * trajectory with their poses filled in (pipeline/lost_fill.h). */
    bool fill;
    kr_lost_keep lost_keep;
    kr_trajectory final;
    /* A stop asked for while the fill runs (a second Ctrl-C) ends it. */
    atomic_bool filling, fill_cancel;

    /* What the tracker makes of each frame: prediction, verdicts, losses,
     * recoveries taken (pipeline/policy/track_policy.h). */
    kr_policy policy;
    kr_recover_cache recover_cache; /* the built-in recovery's, across the attempts of one loss */

    atomic_bool stop;
    /* The paced capture thread sleeps on this until its frame is due or the
     * run stops (a replay's timestamp gap may be minutes long). */
    pthread_mutex_t pace_lock;
    pthread_cond_t pace_wake;
    /* First error raised on a worker thread, re-raised by kr_pipeline_run. */
    pthread_mutex_t error_lock;
    kr_status error;
    char error_text[1024];

    pthread_mutex_t stats_lock;
    kr_pipeline_stats stats;
    double start_time, last_status_time;

    /* Capture → publish latencies, in ms (publisher thread): a histogram,
     * so that a session of any length keeps the same few kB. */
    kr_latency_hist latency;
};

void kr_pipeline_config_default(kr_pipeline_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    kr_source_config_default(&cfg->source);
    kr_device_config_default(&cfg->device);
    kr_preprocess_config_default(&cfg->preprocess);
    kr_track_config_default(&cfg->track);
    kr_model_config_default(&cfg->model);
    kr_surface_config_default(&cfg->surface);
    cfg->mesh_decimate = 1;
    kr_recover_config_default(&cfg->recover);
    kr_publisher_config_default(&cfg->publish);
    cfg->publish.endpoint = NULL;
    cfg->queue_capacity = 4;
    cfg->rate = 0;
    cfg->rebuild_every = 8;
    cfg->fuse_level = -1;
    cfg->model_period_s = 1.0;
    cfg->model_points = 100000;
    cfg->depth_period_s = 0.5;
    cfg->mesh_period_s = 2.0;
    cfg->fill_frames = 300;
    kr_live_refine_config_default(&cfg->refine);
}

static void record_error(kr_pipeline *p, kr_status status)
{
    pthread_mutex_lock(&p->error_lock);
    if (p->error == KR_OK) {
        p->error = status;
        snprintf(p->error_text, sizeof p->error_text, "%s", kr_last_error());
    }
    pthread_mutex_unlock(&p->error_lock);
}

kr_status kr_pipeline_create(kr_pipeline **out, const kr_pipeline_config *cfg)
{
    if (!out || !cfg) return kr_error(KR_ERR_INVALID_ARG, "kr_pipeline_create: NULL argument");
    if (cfg->queue_capacity < 1 || cfg->rebuild_every < 1 || cfg->rate < 0)
        return kr_error(KR_ERR_INVALID_ARG,
                        "pipeline: queue capacity and rebuild interval must be >= 1, rate >= 0");
    if (!(cfg->depth_period_s >= 0) || !(cfg->mesh_period_s >= 0))
        return kr_error(KR_ERR_INVALID_ARG,
                        "pipeline: depth period %g s and mesh period %g s must be >= 0",
                        cfg->depth_period_s, cfg->mesh_period_s);
    if (!(cfg->model_period_s >= 0) || cfg->model_points < 0)
        return kr_error(KR_ERR_INVALID_ARG,
                        "pipeline: model period %g s and model points %d must be >= 0",
                        cfg->model_period_s, cfg->model_points);
    kr_pipeline *p = calloc(1, sizeof *p);
    if (!p) return kr_error(KR_ERR_NOMEM, "cannot allocate the pipeline");
    p->cfg = *cfg;
    if (cfg->deterministic) p->cfg.recover.deterministic = true;
    if (p->cfg.fuse_level < 0) p->cfg.fuse_level = cfg->track.finest_level;
    kr_policy_init(&p->policy, &p->cfg.track, &p->cfg.recover);
    pthread_mutex_init(&p->error_lock, NULL);
    pthread_mutex_init(&p->stats_lock, NULL);
    pthread_mutex_init(&p->pace_lock, NULL);
    kr_depth_feed_init(&p->depth_feed, cfg->depth_period_s);
    kr_mesh_feed_init(&p->mesh_feed, cfg->mesh_period_s, &p->outbox);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->pace_wake, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&p->stop, false);
    atomic_init(&p->filling, false);
    atomic_init(&p->fill_cancel, false);
    p->trajectory_file.fd = -1;

    kr_status s;
    /* The surface takes the colour stream where the source has one. */
    kr_source_config scfg = cfg->source;
    if (cfg->mesh_path && *cfg->mesh_path) scfg.colour = true;
    if ((s = kr_source_create(&p->source, &scfg)) != KR_OK) goto fail;
    p->intrinsics = kr_source_intrinsics(p->source);
    if ((s = kr_device_create(&p->device, &cfg->device)) != KR_OK) goto fail;
    kr_model_config mcfg = cfg->model;
    if (cfg->deterministic) mcfg.background = false; /* no timing-dependent snapshot swaps */
    if ((s = kr_model_create(&p->model, &mcfg)) != KR_OK) goto fail;
    /* With the CUDA engine the snapshot trees are built on the device too,
     * where the tracker reads them in place (kinreg/model.h). */
    if (kr_device_backend(p->device) == KR_BACKEND_CUDA &&
        kr_model_build_trees_on(p->model, p->device) != KR_OK)
        kr_log(KR_LOG_WARN, "model trees are built on the host: %s", kr_last_error());
    /* And fusion: the voxel map on the device, each tracked frame fused there
     * (kinreg/model.h); the host keeps it when that cannot start. */
    if (kr_device_backend(p->device) == KR_BACKEND_CUDA &&
        kr_model_fuse_on(p->model, p->device) != KR_OK)
        kr_log(KR_LOG_WARN, "model fusion stays on the host: %s", kr_last_error());
    /* With the CUDA engine a frame is tracked in well under a millisecond and
     * host fusion would dominate: overlap it with the next frame. The CPU
     * engine keeps fusion inline (its cores are busy tracking). A
     * deterministic run fuses inline too. */
    bool fuse_thread = cfg->fuse_thread == 1 || (cfg->fuse_thread == 0 && !cfg->deterministic &&
                                                 kr_device_backend(p->device) == KR_BACKEND_CUDA);
    if (fuse_thread && (s = kr_fuser_create(&p->fuser, p->model)) != KR_OK) goto fail;
    if (cfg->mesh_path && *cfg->mesh_path &&
        (s = kr_mesher_create(&p->mesher, &cfg->surface, p->device, &p->mesh_feed)) != KR_OK)
        goto fail;
    if ((s = kr_publisher_create(&p->publisher, &cfg->publish)) != KR_OK) goto fail;
    kr_queue_config qcfg;
    kr_queue_config_default(&qcfg);
    qcfg.capacity = cfg->queue_capacity;
    qcfg.policy = kr_source_is_live(p->source) ? KR_QUEUE_DROP_OLDEST : KR_QUEUE_BLOCK;
    if ((s = kr_queue_create(&p->queue, &qcfg)) != KR_OK) goto fail;
    if ((s = kr_outbox_init(&p->outbox)) != KR_OK) goto fail;
    if (cfg->trajectory_refined_path && *cfg->trajectory_refined_path && !cfg->refine.enabled) {
        s = kr_error(KR_ERR_INVALID_ARG,
                     "a refined trajectory (%s) needs the live refiner: turn it on (--refine on)",
                     cfg->trajectory_refined_path);
        goto fail;
    }
    if (cfg->refine.enabled) {
        p->refine = calloc(1, sizeof *p->refine);
        if (!p->refine) {
            s = kr_error(KR_ERR_NOMEM, "cannot allocate the live refiner");
            goto fail;
        }
        if ((s = kr_live_refine_init(p->refine, &cfg->refine, kr_device_backend(p->device),
                                     cfg->device.cuda_device, cfg->deterministic)) != KR_OK) {
            free(p->refine);
            p->refine = NULL;
            goto fail;
        }
    }
    p->fill = cfg->fill_lost || (cfg->trajectory_final_path && *cfg->trajectory_final_path);
    kr_lost_keep_init(&p->lost_keep, cfg->fill_frames);
    if (cfg->trajectory_path && *cfg->trajectory_path &&
        (s = kr_trajectory_writer_open(&p->trajectory_file, cfg->trajectory_path)) != KR_OK)
        goto fail;
    *out = p;
    return KR_OK;
fail:;
    /* Keep the failing step's message while tearing down the rest. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", kr_last_error());
    kr_pipeline_destroy(&p);
    return kr_error(s, "%s", msg);
}

void kr_pipeline_destroy(kr_pipeline **pp)
{
    if (!pp || !*pp) return;
    kr_pipeline *p = *pp;
    kr_trajectory_writer_close(&p->trajectory_file);
    if (p->refine) kr_live_refine_free(p->refine); /* its thread first */
    free(p->refine);
    kr_trajectory_free(&p->refined);
    kr_lost_keep_free(&p->lost_keep);
    kr_trajectory_free(&p->final);
    kr_recover_cache_free(&p->recover_cache);
    kr_mesher_destroy(&p->mesher); /* its thread wakes the outbox's reader */
    kr_mesh_feed_free(&p->mesh_feed);
    kr_outbox_destroy(&p->outbox);
    kr_depth_feed_free(&p->depth_feed);
    kr_queue_destroy(&p->queue);
    kr_publisher_destroy(&p->publisher);
    kr_fuser_destroy(&p->fuser); /* before the model it writes */
    kr_model_destroy(&p->model);
    kr_pyramid_free(&p->pyramid);
    kr_pyramid_free(&p->fuse_pyramid);
    kr_device_destroy(&p->device);
    kr_source_destroy(&p->source);
    kr_trajectory_free(&p->trajectory);
    pthread_mutex_destroy(&p->error_lock);
    pthread_mutex_destroy(&p->stats_lock);
    pthread_mutex_destroy(&p->pace_lock);
    pthread_cond_destroy(&p->pace_wake);
    free(p);
    *pp = NULL;
}

void kr_pipeline_stop(kr_pipeline *p)
{
    if (!p) return;
    atomic_store(&p->stop, true);
    if (atomic_load(&p->filling)) atomic_store(&p->fill_cancel, true);
    /* A refinement still running ends with the stop: its keyframes keep
     * their tracked poses (a window of a loaded 2-core machine took 15 s). */
    if (p->refine) kr_live_refine_interrupt(p->refine);
}

void kr_pipeline_get_stats(const kr_pipeline *p, kr_pipeline_stats *out)
{
    pthread_mutex_lock((pthread_mutex_t *)&p->stats_lock);
    *out = p->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&p->stats_lock);
}

const kr_trajectory *kr_pipeline_refined_trajectory(const kr_pipeline *p)
{
    return p ? &p->refined : NULL;
}

const kr_trajectory *kr_pipeline_final_trajectory(const kr_pipeline *p)
{
    return p ? &p->final : NULL;
}

const kr_trajectory *kr_pipeline_trajectory(const kr_pipeline *p)
{
    return &p->trajectory;
}

const kr_source *kr_pipeline_source(const kr_pipeline *p)
{
    return p->source;
}

const kr_device *kr_pipeline_device(const kr_pipeline *p)
{
    return p->device;
}

/* ---- capture thread ------------------------------------------------------ */

/* Sleeps until kr_now() reaches t, or the run stops (wake_capture). */
static void sleep_until(kr_pipeline *p, double t)
{
    pthread_mutex_lock(&p->pace_lock);
    while (!atomic_load(&p->stop)) {
        /* kr_now() is CLOCK_MONOTONIC, the condition's clock too. */
        double left = t - kr_now();
        if (!(left > 0)) break;
        left = fmin(left, 3600.0); /* a longer gap is waited in turns */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double ns = (double)ts.tv_nsec + (left - floor(left)) * 1e9;
        ts.tv_sec += (time_t)left + (time_t)(ns / 1e9);
        ts.tv_nsec = (long)fmod(ns, 1e9);
        pthread_cond_timedwait(&p->pace_wake, &p->pace_lock, &ts);
    }
    pthread_mutex_unlock(&p->pace_lock);
}

/* Called after `stop` is set: a paced capture thread stops sleeping. */
static void wake_capture(kr_pipeline *p)
{
    pthread_mutex_lock(&p->pace_lock);
    pthread_cond_broadcast(&p->pace_wake);
    pthread_mutex_unlock(&p->pace_lock);
}

static void *capture_main(void *arg)
{
    kr_pipeline *p = arg;
    double first_stamp = 0, start = kr_now();
    bool paced = false;
    /* A sensor sets its own pace. */
    const bool pace = p->cfg.rate > 0 && !kr_source_is_live(p->source);
    while (!atomic_load(&p->stop)) {
        kr_frame frame;
        kr_status s = kr_source_read(p->source, &frame);
        if (s == KR_END) break;
        if (s != KR_OK) {
            record_error(p, s);
            break;
        }
        if (pace) {
            /* Recorded timing: frame k leaves (t_k − t_0)/rate after the first,
             * and that is when it counts as captured. */
            if (!paced) {
                first_stamp = frame.timestamp;
                start = kr_now();
                paced = true;
            }
            sleep_until(p, start + (frame.timestamp - first_stamp) / p->cfg.rate);
            if (atomic_load(&p->stop)) {
                kr_frame_release(&frame);
                break;
            }
            frame.capture_time = kr_now();
        }
        pthread_mutex_lock(&p->stats_lock);
        p->stats.frames_in++;
        pthread_mutex_unlock(&p->stats_lock);
        if (kr_queue_push(p->queue, &frame) != KR_OK) {
            kr_frame_release(&frame); /* queue closed: the tracker has stopped */
            break;
        }
    }
    kr_queue_close(p->queue);
    return NULL;
}

/* ---- publisher thread ---------------------------------------------------- */

static void record_latency(kr_pipeline *p, double ms)
{
    kr_latency_hist_add(&p->latency, ms);
    pthread_mutex_lock(&p->stats_lock);
    p->stats.latency_last_ms = ms;
    pthread_mutex_unlock(&p->stats_lock);
}

static void *publisher_main(void *arg)
{
    kr_pipeline *p = arg;
    kr_outbox_item item;
    kr_model_feed feed;
    kr_model_feed_init(&feed, p->cfg.model_period_s, (size_t)p->cfg.model_points);
    for (;;) {
        /* Between messages, the model snapshot for viewers when it is due
         * (only while someone subscribes to it). */
        kr_status fs = kr_model_feed_tick(&feed, p->model, p->publisher);
        if (fs != KR_OK)
            kr_log(KR_LOG_WARN, "model not published: %s (%s)", kr_strerror(fs), kr_last_error());
        if ((fs = kr_depth_feed_tick(&p->depth_feed, p->publisher)) != KR_OK)
            kr_log(KR_LOG_WARN, "depth not published: %s (%s)", kr_strerror(fs), kr_last_error());
        if (p->mesher && (fs = kr_mesh_feed_tick(&p->mesh_feed, p->publisher)) != KR_OK)
            kr_log(KR_LOG_WARN, "surface not published: %s (%s)", kr_strerror(fs), kr_last_error());
        int got = kr_outbox_take_within(&p->outbox, &item, kr_model_feed_wait_s(&feed));
        if (got < 0) break;
        if (got == 0) continue;
        kr_status s;
        if (item.topic == KR_TOPIC_STATUS) {
            s = kr_publisher_send_status(p->publisher, &item.status);
        } else {
            /* The message carries capture → publish, measured as it leaves. */
            double ms = 1e3 * (kr_now() - item.capture_time);
            item.pose.latency_ms = (float)ms;
            s = kr_publisher_send_pose(p->publisher, &item.pose);
            if (item.topic == KR_TOPIC_POSE) record_latency(p, ms); /* refine: not a frame's */
        }
        if (s != KR_OK)
            kr_log(KR_LOG_WARN, "publish failed: %s (%s)", kr_strerror(s), kr_last_error());
    }
    kr_model_feed_free(&feed);
    return NULL;
}

/* Median and 99th percentile (nearest rank) of the recorded latencies. */
static void latency_percentiles(kr_pipeline *p)
{
    if (!p->latency.count) return;
    pthread_mutex_lock(&p->stats_lock);
    p->stats.latency_median_ms = kr_latency_hist_quantile(&p->latency, 0.5);
    p->stats.latency_p99_ms = kr_latency_hist_quantile(&p->latency, 0.99);
    pthread_mutex_unlock(&p->stats_lock);
}

static void publish_status(kr_pipeline *p, kr_event event, const char *text)
{
    kr_outbox_item item = {.topic = KR_TOPIC_STATUS};
    kr_pipeline_stats st;
    kr_pipeline_get_stats(p, &st);
    item.status.event = (uint8_t)event;
    item.status.state = (uint8_t)st.last_state;
    item.status.frames_in = st.frames_in;
    item.status.frames_out = st.frames_out;
    item.status.frames_dropped = st.frames_dropped;
    item.status.frames_lost = st.frames_lost;
    item.status.fps = (float)st.fps;
    item.status.model_points = st.model_points;
    item.status.frames_total = kr_source_length(p->source);
    snprintf(item.status.text, sizeof item.status.text, "%.319s", text ? text : "");
    kr_outbox_put(&p->outbox, &item);
}

/* ---- tracker thread ------------------------------------------------------ */

/* The loss counters are the policy's; the run's statistics show them. */
static void show_policy_counts(kr_pipeline *p)
{
    const kr_policy_counts *c = &p->policy.counts;
    pthread_mutex_lock(&p->stats_lock);
    p->stats.losses = c->losses;
    p->stats.losses_ended = c->losses_ended;
    p->stats.losses_ended_fast = c->losses_ended_fast;
    p->stats.recoveries = c->recoveries;
    p->stats.recovery_failures = c->recovery_failures;
    pthread_mutex_unlock(&p->stats_lock);
}

/* The recovery search the policy asked for: the one passed in
 * (cfg.recover_fn), else the built-in. */
static kr_status ask_recovery(kr_pipeline *p, kr_recover_purpose purpose, const kr_kdtree *model,
                              const kr_frame *frame, const kr_policy_frame *f,
                              kr_recover_answer *out)
{
    kr_recover_request req = {.purpose = purpose,
                              .frame_index = frame->index,
                              .timestamp = frame->timestamp,
                              .device = p->device,
                              .model = model,
                              .pyramid = &p->pyramid,
                              .track = &p->cfg.track,
                              .recover = &p->cfg.recover,
                              .predicted = f->seed,
                              .last_good = p->policy.last_pose,
                              .recent = p->policy.recent,
                              .builtin = &p->recover_cache};
    memset(out, 0, sizeof *out);
    if (p->cfg.recover_fn) return p->cfg.recover_fn(&req, out, p->cfg.recover_user);
    return kr_pipeline_recover_builtin(&req, out);
}

/* A loss's recovery: timed for the statistics, announced when it succeeds. */
static kr_status recover(kr_pipeline *p, const kr_kdtree *model, const kr_frame *frame,
                         const kr_policy_frame *f, kr_frame_result *r)
{
    double t0 = kr_now();
    kr_recover_answer answer;
    kr_status s = ask_recovery(p, KR_RECOVER_FOR_LOSS, model, frame, f, &answer);
    if (s != KR_OK) return s;
    r->recovery_tried = true;
    r->recover_ms = 1e3 * (kr_now() - t0);
    bool recovered = kr_policy_recovered(&p->policy, f, &answer, r);
    pthread_mutex_lock(&p->stats_lock);
    p->stats.recovery_ms_total += r->recover_ms;
    if (recovered && r->recover_ms > p->stats.recovery_ms_max)
        p->stats.recovery_ms_max = r->recover_ms;
    pthread_mutex_unlock(&p->stats_lock);
    show_policy_counts(p);
    if (recovered) {
        char text[64];
        snprintf(text, sizeof text, "%s %.1f ms frame %llu", kr_method_name(answer.method),
                 r->recover_ms, (unsigned long long)frame->index);
        publish_status(p, KR_EVENT_RECOVERED, text);
    }
    return KR_OK;
}

/* Tracking against the model from the policy's seed, the basin check, the
 * policy's verdict, and the recovery searches it asks for. */
static kr_status track_on_model(kr_pipeline *p, const kr_kdtree *model, const kr_frame *frame,
                                kr_policy_frame *f, kr_frame_result *r)
{
    kr_status s = kr_track_frame_on(p->device, model, &p->pyramid, &f->seed, &f->gates, &r->track);
    /* A fast camera's prediction may overshoot into a wrong basin; the
     * motion check then measures from the seed the result came from. */
    if (s == KR_OK && kr_policy_basin_check_due(&p->policy))
        s = kr_recover_basin_check(p->device, model, &p->pyramid, &f->seed, &p->policy.last_pose,
                                   &f->gates, &r->track, &f->from_last);
    if (s != KR_OK) return s;
    kr_policy_judge(&p->policy, f, r);
    if (kr_policy_second_opinion_due(&p->policy, f, r)) {
        kr_recover_answer answer;
        s = ask_recovery(p, KR_RECOVER_FOR_SECOND_OPINION, model, frame, f, &answer);
        if (s != KR_OK) return s;
        kr_policy_second_opinion(&answer, r);
    }
    kr_policy_loss loss = kr_policy_watch(&p->policy, r);
    show_policy_counts(p);
    if (loss.began) {
        char text[64];
        snprintf(text, sizeof text, "frame %llu", (unsigned long long)frame->index);
        publish_status(p, KR_EVENT_LOST, text);
    }
    return loss.recover ? recover(p, model, frame, f, r) : KR_OK;
}

/* The live refiner's share of a frame: keyframes, and the model re-fused
 * from refined ones when a refinement moved them far. */
static kr_status refine_frame(kr_pipeline *p, const kr_frame *frame, bool trusted,
                              kr_frame_result *r)
{
    /* Keyframes come from a mid level (dense enough for a 1 cm grid),
     * read before the pyramid is handed to the fuser. */
    int level = p->pyramid.levels > 1 ? 1 : 0;
    kr_status s =
        kr_live_refine_frame(p->refine, &p->outbox, frame->index, frame->timestamp, &r->track.pose,
                             trusted, &p->pyramid.level[level], &r->refined_pose);
    if (s != KR_OK) return s;
    if (p->refine->refuse_due) {
        /* The model is rebuilt on this thread: no fusion may be in flight. */
        if (p->fuser && (s = kr_fuser_wait(p->fuser)) != KR_OK) return s;
        if ((s = kr_live_refine_refuse(p->refine, p->model, frame->index)) != KR_OK) return s;
    }
    return KR_OK;
}

/* Fuses the frame at `pose` when `fuse`, and asks for the model's snapshot
 * when one is due: on the fuser thread (CUDA backend) or inline. */
static kr_status fuse_frame(kr_pipeline *p, const kr_frame *frame, const kr_pose *pose, bool fuse,
                            bool first)
{
    kr_status s;
    bool snapshot_due = first || frame->index % (uint64_t)p->cfg.rebuild_every == 0;
    if (p->mesher && fuse &&
        (s = kr_mesher_post(p->mesher, &p->pyramid.level[0], frame->rgb, pose)) != KR_OK)
        return s;
    if (p->fuser) {
        if (fuse || snapshot_due) {
            /* Hand the frame's cloud over: the fuser owns fuse_pyramid until
             * the next post, this thread preprocesses into the other one. */
            if ((s = kr_fuser_wait(p->fuser)) != KR_OK) return s;
            kr_pyramid tmp = p->pyramid;
            p->pyramid = p->fuse_pyramid;
            p->fuse_pyramid = tmp;
            const kr_cloud *cloud = fuse ? &p->fuse_pyramid.level[p->cfg.fuse_level] : NULL;
            if ((s = kr_fuser_post(p->fuser, cloud, pose, frame->index, snapshot_due)) != KR_OK)
                return s;
            if (first) {
                /* frame 1 needs a model to track against */
                if ((s = kr_fuser_wait(p->fuser)) != KR_OK) return s;
                kr_model_wait_idle(p->model);
            }
        }
    } else {
        if (fuse) {
            const kr_cloud *cloud = &p->pyramid.level[p->cfg.fuse_level];
            if ((s = kr_model_integrate(p->model, cloud, pose, frame->index)) != KR_OK) return s;
        }
        if (snapshot_due) {
            if ((s = kr_model_request_snapshot(p->model, frame->index)) != KR_OK) return s;
            if (first) kr_model_wait_idle(p->model); /* frame 1 needs a model to track against */
        }
    }
    return KR_OK;
}

/* One frame: preprocess, predict, track, judge, recover when lost, accept,
 * then refine and fuse. The decisions are the policy's
 * (pipeline/policy/track_policy.h). */
static kr_status track_frame(kr_pipeline *p, const kr_frame *frame, kr_frame_result *r)
{
    kr_status s;
    double t0 = kr_now();
    if ((s = kr_preprocess(p->device, &p->cfg.preprocess, frame, &p->intrinsics, &p->pyramid)) !=
        KR_OK)
        return s;
    double t1 = kr_now();

    kr_policy_frame f = kr_policy_begin(&p->policy, frame->timestamp);
    r->valid_points = p->pyramid.level[p->cfg.track.finest_level].valid_normals;
    kr_model_snapshot *snap = kr_model_snapshot_acquire(p->model);
    if (snap) {
        s = track_on_model(p, kr_model_snapshot_tree(snap), frame, &f, r);
        kr_model_snapshot_release(&snap);
        if (s != KR_OK) return s;
    } else {
        kr_policy_first_frame(&f, r); /* no model yet: the frame defines the world frame */
    }
    double t2 = kr_now();

    kr_policy_outcome out = kr_policy_accept(&p->policy, &f, r);
    r->refined_pose = r->track.pose;
    if (p->refine && (s = refine_frame(p, frame, out.trusted, r)) != KR_OK) return s;
    if ((s = fuse_frame(p, frame, &r->track.pose, out.fuse, f.first)) != KR_OK) return s;
    double t3 = kr_now();
    r->frame_index = frame->index;
    r->timestamp = frame->timestamp;
    r->preprocess_ms = 1e3 * (t1 - t0);
    r->track_ms = 1e3 * (t2 - t1);
    r->fuse_ms = 1e3 * (t3 - t2);
    r->latency_ms = 1e3 * (t3 - frame->capture_time);
    return KR_OK;
}

/* A failed trajectory write does not stop the run: the pose has already
 * gone to the socket and the model still grows; the failure is said at once
 * and becomes the run's error (last status `error`, exit status 4 in kinreg). */
static void trajectory_failed(kr_pipeline *p)
{
    pthread_mutex_lock(&p->stats_lock);
    bool first = !p->stats.trajectory_failed;
    p->stats.trajectory_failed = true;
    p->stats.poses_written = p->trajectory_file.poses;
    pthread_mutex_unlock(&p->stats_lock);
    if (!first) return;
    kr_log(KR_LOG_WARN, "%s; poses are still published, the file keeps the %llu written before",
           p->trajectory_file.error, (unsigned long long)p->trajectory_file.poses);
    kr_error(KR_ERR_IO, "%s (it holds the first %llu poses)", p->trajectory_file.error,
             (unsigned long long)p->trajectory_file.poses);
    record_error(p, KR_ERR_IO);
}

static void write_pose(kr_pipeline *p, const kr_frame_result *r)
{
    if (kr_trajectory_writer_append(&p->trajectory_file, r->timestamp, &r->track.pose)) {
        pthread_mutex_lock(&p->stats_lock);
        p->stats.poses_written = p->trajectory_file.poses;
        pthread_mutex_unlock(&p->stats_lock);
    } else {
        trajectory_failed(p);
    }
}

static void emit_pose(kr_pipeline *p, const kr_frame_result *r, double capture_time)
{
    kr_outbox_item item =
        kr_outbox_pose_item(KR_TOPIC_POSE, r->frame_index, r->timestamp, &r->track.pose);
    item.capture_time = capture_time;
    kr_pose_msg *m = &item.pose;
    m->state = (uint8_t)r->track.state;
    m->method = (uint8_t)r->method;
    m->iterations = (uint16_t)r->track.iterations;
    m->inlier_fraction = r->track.inlier_fraction;
    m->rms = r->track.rms;
    m->condition = r->track.condition;
    memcpy(m->covariance, r->track.covariance, sizeof m->covariance);
    kr_outbox_put(&p->outbox, &item);

    kr_trajectory_push(&p->trajectory, r->timestamp, &r->track.pose);
    /* The live refiner and the lost frames' filling correct frames' poses
     * at the end of the run, so with either on the whole trajectory stays
     * in memory. */
    if (p->cfg.trajectory_keep && !p->refine && !p->fill)
        kr_trajectory_keep_last(&p->trajectory, p->cfg.trajectory_keep);
    if (p->trajectory_file.fd >= 0 || p->trajectory_file.failed) write_pose(p, r);
}

static void update_stats(kr_pipeline *p, const kr_frame_result *r)
{
    pthread_mutex_lock(&p->stats_lock);
    kr_pipeline_stats *st = &p->stats;
    st->frames_out++;
    if (r->track.state == KR_TRACK_LOST) st->frames_lost++;
    st->last_state = r->track.state;
    st->frames_dropped = kr_queue_dropped(p->queue) + kr_source_dropped(p->source);
    st->frames_skipped = kr_source_skipped(p->source);
    st->model_points = kr_model_size(p->model);
    st->messages_dropped = kr_publisher_dropped(p->publisher);
    if (p->refine) {
        st->keyframes = (uint64_t)p->refine->kf.n;
        st->refinements = p->refine->refinements;
        st->refine_corrections = p->refine->corrections;
        st->refine_failures = p->refine->failures;
        st->refine_refusions = p->refine->refusions;
        st->refine_in_flight = !kr_refiner_idle(p->refine->refiner);
        st->refine_ms_last = p->refine->last_ms;
    }
    st->elapsed_s = kr_now() - p->start_time;
    st->fps = st->elapsed_s > 0 ? (double)st->frames_out / st->elapsed_s : 0;
    st->input_fps = st->elapsed_s > 0 ? (double)st->frames_in / st->elapsed_s : 0;
    pthread_mutex_unlock(&p->stats_lock);
}

/* A LOST frame's depth, for the final trajectory: its position is the
 * trajectory's next. Out of memory, the frame is not kept (it keeps its
 * published pose) and tracking goes on. */
static void keep_lost(kr_pipeline *p, kr_frame *frame, const kr_frame_result *r)
{
    bool depth = r->valid_points >= p->cfg.track.min_points;
    if (kr_lost_keep_add(&p->lost_keep, p->trajectory.count, frame, depth) != KR_OK)
        kr_log(KR_LOG_WARN, "%s: it keeps its published pose", kr_last_error());
}

/* True when the source ended (not a stop or an error). */
static bool tracker_loop(kr_pipeline *p)
{
    while (!atomic_load(&p->stop)) {
        kr_frame frame;
        kr_status s = kr_queue_pop(p->queue, &frame, 200);
        if (s == KR_END) {
            pthread_mutex_lock(&p->error_lock);
            bool clean = p->error == KR_OK;
            pthread_mutex_unlock(&p->error_lock);
            return clean && !atomic_load(&p->stop);
        }
        if (s != KR_OK) continue; /* timeout: check the stop flag */
        kr_frame_result r;
        memset(&r, 0, sizeof r);
        s = track_frame(p, &frame, &r);
        if (s == KR_OK && p->fill && r.track.state == KR_TRACK_LOST) keep_lost(p, &frame, &r);
        if (s == KR_OK) kr_depth_feed_offer(&p->depth_feed, &frame);
        double captured = frame.capture_time;
        kr_frame_release(&frame);
        if (s != KR_OK) {
            record_error(p, s);
            break;
        }
        emit_pose(p, &r, captured);
        update_stats(p, &r);
        if (p->cfg.on_frame) {
            kr_pipeline_stats st;
            kr_pipeline_get_stats(p, &st);
            p->cfg.on_frame(&r, &st, p->cfg.user);
        }
        if (kr_now() - p->last_status_time >= 1.0) {
            p->last_status_time = kr_now();
            publish_status(p, KR_EVENT_PROGRESS, NULL);
        }
    }
    return false;
}

/* The `final` messages: one for each frame the fill placed, in frame
 * order, after the last `pose` message and before the run's last status
 * (docs/PROTOCOL.md). A frame tracked backwards passed the gates a GOOD
 * frame passes, and carries that tracking's figures; a covered frame
 * interpolated between two known poses was not measured: POOR. */
static void publish_final(kr_pipeline *p)
{
    for (size_t i = 0; i < p->lost_keep.count; i++) {
        const kr_lost_frame *f = &p->lost_keep.frames[i];
        if (f->placed == KR_LOST_KEPT) continue;
        kr_outbox_item item = kr_outbox_pose_item(
            KR_TOPIC_FINAL, f->frame.index, p->final.stamps[f->index], &p->final.poses[f->index]);
        kr_pose_msg *m = &item.pose;
        if (f->placed == KR_LOST_TRACKED) {
            m->state = KR_TRACK_GOOD;
            m->method = KR_METHOD_NEWTON;
            m->iterations = (uint16_t)(f->track.iterations > 65535 ? 65535 : f->track.iterations);
            m->inlier_fraction = f->track.inlier_fraction;
            m->rms = f->track.rms;
            m->condition = f->track.condition;
            memcpy(m->covariance, f->track.covariance, sizeof m->covariance);
        } else {
            m->state = KR_TRACK_POOR;
            m->method = KR_METHOD_INTERPOLATED;
            m->inlier_fraction = m->rms = m->condition = NAN;
        }
        kr_outbox_put(&p->outbox, &item);
    }
}

/* The final trajectory: the published poses, the lost stretches filled in
 * against the model as it stands at the end (a snapshot of everything
 * fused). Written to trajectory_final_path; errors are recorded, not fatal
 * to the rest of the shutdown. */
static void fill_lost(kr_pipeline *p)
{
    kr_status s = KR_OK;
    for (size_t i = 0; i < p->trajectory.count && s == KR_OK; i++)
        s = kr_trajectory_push(&p->final, p->trajectory.stamps[i], &p->trajectory.poses[i]);
    if (s != KR_OK) {
        record_error(p, s);
        return;
    }
    double t0 = kr_now();
    kr_lost_fill_counts counts = {0};
    kr_status fs = KR_OK;
    if (p->lost_keep.count > 0) {
        kr_log(KR_LOG_INFO, "filling in %zu LOST frames (%zu with depth kept); stop again to skip",
               p->lost_keep.count, p->lost_keep.with_depth);
        /* The whole map: the active window holds only the run's last view. */
        fs = kr_model_request_snapshot_since(p->model, p->trajectory.count, 0);
        kr_model_wait_idle(p->model);
        kr_model_snapshot *snap = fs == KR_OK ? kr_model_snapshot_acquire(p->model) : NULL;
        if (snap) {
            atomic_store(&p->filling, true);
            fs = kr_lost_fill(&p->lost_keep, p->device, kr_model_snapshot_tree(snap),
                              &p->cfg.preprocess, &p->intrinsics, &p->cfg.track,
                              KR_POLICY_MAX_ELAPSED_S, &p->fill_cancel, &p->pyramid, &p->final,
                              &counts);
            atomic_store(&p->filling, false);
            kr_model_snapshot_release(&snap);
        }
        if (fs != KR_OK) record_error(p, fs);
    }
    /* What was filled in before a failure is still written and published. */
    publish_final(p);
    const char *path = p->cfg.trajectory_final_path;
    if (path && *path && (s = kr_trajectory_write_tum(path, &p->final)) != KR_OK)
        record_error(p, s);
    pthread_mutex_lock(&p->stats_lock);
    p->stats.frames_filled = counts.tracked;
    p->stats.frames_interpolated = counts.interpolated;
    p->stats.frames_unfilled = p->lost_keep.count - counts.tracked - counts.interpolated;
    p->stats.fill_ms = 1e3 * (kr_now() - t0);
    pthread_mutex_unlock(&p->stats_lock);
}

/* An output that could not be written when the run ended: its flag (a
 * member of p->stats) set, and its error the run's unless another came
 * first, when it is logged instead. */
static void output_failed(kr_pipeline *p, bool *flag, kr_status s)
{
    pthread_mutex_lock(&p->stats_lock);
    *flag = true;
    pthread_mutex_unlock(&p->stats_lock);
    pthread_mutex_lock(&p->error_lock);
    bool first = p->error == KR_OK;
    pthread_mutex_unlock(&p->error_lock);
    if (!first) kr_log(KR_LOG_ERROR, "%s", kr_last_error()); /* the first error stays the run's */
    record_error(p, s);
}

/* The surface's last frames, its mesh and the file (cfg.mesh_path). */
static void save_mesh(kr_pipeline *p)
{
    kr_pipeline_stats m = {0};
    kr_status s = kr_mesher_finish(p->mesher, p->cfg.mesh_path, p->cfg.mesh_decimate, &m);
    pthread_mutex_lock(&p->stats_lock);
    p->stats.mesh_frames = m.mesh_frames;
    p->stats.mesh_skipped = m.mesh_skipped;
    p->stats.mesh_vertices = m.mesh_vertices;
    p->stats.mesh_faces = m.mesh_faces;
    /* The surface thread has stopped: its feed's counters are still. */
    p->stats.mesh_refreshes = p->mesh_feed.refreshes;
    p->stats.mesh_refresh_s =
        p->mesh_feed.refreshes ? p->mesh_feed.refresh_s / (double)p->mesh_feed.refreshes : 0;
    p->stats.mesh_refresh_faces = p->mesh_feed.last_faces;
    pthread_mutex_unlock(&p->stats_lock);
    if (s != KR_OK) output_failed(p, &p->stats.mesh_save_failed, s);
}
/* Shutdown of the live refiner: the window in flight is waited for and its
 * poses published (after a stop, Ctrl-C, it has ended at once and changed
 * nothing); at the end of the source the newest keyframes get one last
 * window. Then every frame's refined pose is known
 * and the refined trajectory is written. Errors are recorded, not fatal to
 * the flush of what was computed. */
static void finish_refinement(kr_pipeline *p, bool source_ended)
{
    kr_status s = kr_live_refine_finish(p->refine, &p->outbox, source_ended);
    if (s == KR_OK) s = kr_live_refine_trajectory(p->refine, &p->trajectory, &p->refined);
    const char *path = p->cfg.trajectory_refined_path;
    if (s == KR_OK && path && *path) s = kr_trajectory_write_tum(path, &p->refined);
    if (s != KR_OK) record_error(p, s);
    pthread_mutex_lock(&p->stats_lock);
    p->stats.keyframes = (uint64_t)p->refine->kf.n;
    p->stats.refinements = p->refine->refinements;
    p->stats.refine_corrections = p->refine->corrections;
    p->stats.refine_failures = p->refine->failures;
    p->stats.refine_in_flight = false;
    p->stats.refine_ms_last = p->refine->last_ms;
    pthread_mutex_unlock(&p->stats_lock);
}

kr_status kr_pipeline_run(kr_pipeline *p)
{
    if (!p) return kr_error(KR_ERR_INVALID_ARG, "kr_pipeline_run: NULL pipeline");
    if (p->cfg.publish_wait_s > 0) {
        /* The publisher thread does not exist yet: this thread may use the
         * socket. Waited in slices so that a stop (Ctrl-C) ends the wait. */
        double deadline = kr_now() + p->cfg.publish_wait_s;
        kr_status w = KR_TIMEOUT;
        while (!atomic_load(&p->stop)) {
            double left = deadline - kr_now();
            if (left <= 0) break;
            w = kr_publisher_wait_subscriber(p->publisher, (int)fmin(100.0, ceil(left * 1e3)));
            if (w != KR_TIMEOUT) break;
        }
        if (w == KR_TIMEOUT && !atomic_load(&p->stop))
            kr_log(KR_LOG_WARN, "no subscriber on %s after %.1f s: starting anyway",
                   kr_publisher_endpoint(p->publisher), p->cfg.publish_wait_s);
        else if (w != KR_OK && w != KR_TIMEOUT)
            return w;
    }
    p->start_time = p->last_status_time = kr_now();
    pthread_t capture, publisher;
    if (pthread_create(&publisher, NULL, publisher_main, p) != 0)
        return kr_error(KR_ERR_NOMEM, "cannot start the publisher thread");
    publish_status(p, KR_EVENT_STARTED, kr_source_describe(p->source));
    if (pthread_create(&capture, NULL, capture_main, p) != 0) {
        kr_outbox_close(&p->outbox);
        pthread_join(publisher, NULL);
        return kr_error(KR_ERR_NOMEM, "cannot start the capture thread");
    }

    /* The calling thread is the tracker. */
    bool source_ended = tracker_loop(p);

    /* Shutdown: stop capture (a blocked push returns once the queue closes,
     * a read waiting for a sensor once the source is interrupted), then flush
     * every computed pose to the socket before returning. */
    atomic_store(&p->stop, true);
    wake_capture(p);
    kr_queue_close(p->queue);
    kr_source_interrupt(p->source);
    pthread_join(capture, NULL);
    if (p->fuser) {
        kr_status f = kr_fuser_wait(p->fuser); /* the last frame's fusion */
        if (f != KR_OK) record_error(p, f);
    }
    kr_model_wait_idle(p->model);
    if (p->fill) fill_lost(p);
    if (p->refine) finish_refinement(p, source_ended);
    pthread_mutex_lock(&p->stats_lock);
    p->stats.frames_dropped = kr_queue_dropped(p->queue) + kr_source_dropped(p->source);
    p->stats.frames_skipped = kr_source_skipped(p->source);
    pthread_mutex_unlock(&p->stats_lock);

    /* Every pose is in the file and the model saved (or the failure known)
     * before the last status says how the run ended. */
    if (p->trajectory_file.fd >= 0 || p->trajectory_file.failed) {
        if (!kr_trajectory_writer_close(&p->trajectory_file)) trajectory_failed(p);
    }
    if (p->cfg.model_path && *p->cfg.model_path) {
        kr_status s = kr_model_save_ply(p->model, p->cfg.model_path);
        if (s != KR_OK) output_failed(p, &p->stats.model_save_failed, s);
    }
    if (p->mesher) save_mesh(p);

    kr_status err;
    char text[1024];
    pthread_mutex_lock(&p->error_lock);
    err = p->error;
    snprintf(text, sizeof text, "%s", p->error_text);
    pthread_mutex_unlock(&p->error_lock);
    /* A stall is announced as such, then ended like any failed run: the last
     * message of every run is `stopped` or `error` (docs/PROTOCOL.md). */
    if (err == KR_ERR_STALLED) publish_status(p, KR_EVENT_STALLED, text);
    publish_status(p, err == KR_OK ? KR_EVENT_STOPPED : KR_EVENT_ERROR,
                   err == KR_OK ? "end" : text);
    kr_outbox_close(&p->outbox);
    pthread_join(publisher, NULL);
    pthread_mutex_lock(&p->stats_lock);
    p->stats.messages_dropped = kr_publisher_dropped(p->publisher);
    pthread_mutex_unlock(&p->stats_lock);
    latency_percentiles(p);

    if (err != KR_OK) return kr_error(err, "%s", text);
    return KR_OK;
}
