/* kinreg — the streaming pipeline: capture thread → bounded queue → tracker
 * thread (preprocess, track, fuse) → publisher thread, with the model's
 * snapshot rebuilds in the background (DESIGN.md §2). The pipeline only
 * composes the modules; each step reads like the algorithm. */
#ifndef KINREG_PIPELINE_H
#define KINREG_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "kinreg/device.h"
#include "kinreg/model.h"
#include "kinreg/surface.h"
#include "kinreg/preprocess.h"
#include "kinreg/source.h"
#include "kinreg/track.h"
#include "kinreg/trajectory.h"
#include "kinreg/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_pipeline kr_pipeline;

/* How a lost camera finds itself again (DESIGN.md §5, "Recovery"). */
typedef enum {
    KR_RECOVER_OFF = 0,
    KR_RECOVER_NEWTON = 1,    /* wide-basin Newton: a wide gate and many coarse steps */
    KR_RECOVER_EMICP = 2,     /* EM-ICP on voxel-subsampled frame and model points */
    KR_RECOVER_SOFTASSIGN = 3 /* Softassign on them */
} kr_recover_method;

typedef struct {
    kr_recover_method method; /* default KR_RECOVER_EMICP */
    int after_poor;           /* this many POOR frames in a row count as lost (default 1) */
    /* EM-ICP / Softassign: voxel-subsample frame and model to at most this
     * many points each (default 1000: the CPU engine's cost grows as N·M),
     * taking the model's points and the frame's within model_radius of the
     * last good camera and of the frame's (m, default 3); try
     * soft_hypotheses rotated seeds after the last good pose (default 2),
     * then, with newton_fallback (default 1), the Newton search. */
    int max_points;
    float model_radius;
    int soft_hypotheses;
    int newton_fallback;
    /* Wide-basin Newton: pair gate at its finest level (m, default 0.12), that
     * level (default 2), steps per level, finest first (default 6). */
    float wide_gate;
    int wide_finest_level;
    int wide_iterations[KR_MAX_LEVELS];
    /* Seeds beside the prediction and the last good pose: rotations about
     * `hypotheses` axes spread over the sphere (default 16), by half and all
     * of hypothesis_deg (default 30°). Each is scored by a short wide-basin
     * Newton run on probe_points points of the wide level (default 600,
     * probe_iterations steps, default 8); the best `judged` (default 3) are
     * refined and tracked in full, the first that passes the gates wins. */
    int hypotheses;
    double hypothesis_deg;
    int probe_points, probe_iterations, judged;
    /* A recovered pose must pass the tracking gates and must not see
     * through the model's surfaces at more than max_violations of the
     * pixels where the model is (default 0.02). */
    float max_violations;
    /* A recovered pose farther than this from the last good one is rejected
     * (default 0.5 m, 45°): it fits some other part of the scene. */
    double max_jump_m, max_jump_deg;
    /* The soft methods' registrations bit-identical from run to run
     * (kr_register_config's deterministic; default false). A pipeline sets
     * it when it runs deterministic. */
    bool deterministic;
} kr_recover_config;

KR_API void kr_recover_config_default(kr_recover_config *cfg);
KR_API const char *kr_recover_method_name(kr_recover_method m);
/* "off", "newton", "emicp", "softassign" → KR_OK and *out, else KR_ERR_INVALID_ARG. */
KR_API kr_status kr_recover_method_parse(const char *name, kr_recover_method *out);

/* The live refiner (DESIGN.md §2, §5): keyframes chosen by motion while
 * tracking is GOOD; every `every` new keyframes a background thread refines
 * the newest `window` of them jointly with multi-view distance fields (the
 * oldest of the window is the gauge, so windows chain). Tracking never
 * waits for it: the tracker hands over a copy of the keyframes and takes the
 * result at a later frame. Refined keyframe poses are published on the topic
 * `refine`; every frame's pose corrected by the refined motion of its
 * keyframe (T_refined = P_kf,refined · P_kf,tracked⁻¹ · T_tracked) is the
 * refined trajectory. When a refinement moves keyframes by refuse_distance
 * or more, the running model is re-fused from the newest keyframes' points at
 * their refined poses, in the tracker's frame (the newest keyframe stays put,
 * so tracking goes on without a jump). */
typedef struct {
    bool enabled;              /* default false: tracking only, as before */
    int window;                /* K: keyframes refined together (default 10, 2..64) */
    int every;                 /* M: a refinement every M new keyframes (default 5, 1..window) */
    double keyframe_distance;  /* metres since the last keyframe (default 0.10) */
    double keyframe_angle_deg; /* or degrees since the last keyframe (default 10) */
    int keyframe_points;       /* points kept per keyframe, evenly strided (default 20000) */
    double cell;               /* finest distance-field grid, m (default 0.01, after 4 and 2 cm) */
    int threads;               /* OpenMP threads of the refiner's CPU engine (default 1: the
                                  tracker keeps the other cores) */
    double min_correction;     /* a refinement that moves no keyframe of its window by this
                                  much (m; a turn counts at 1 m) is below the method's resolution
                                  and leaves the poses as they were (default 0.003, 0.3 cells) */
    double refuse_distance;    /* a refinement that moves a keyframe by this much or more (m,
                                  counted as above) re-fuses the model from the newest 32
                                  keyframes at their refined poses (default 0 = never: the
                                  rebuilt model holds only what those keyframes saw, and on
                                  fr1_xyz at 0.01 the tracked ATE rose from 1.415 to 1.653 cm
                                  while the refined one stayed at 1.33 cm, docs/BENCHMARKS.md) */
} kr_live_refine_config;

/* What the tracker produced for one frame. */
typedef struct {
    uint64_t frame_index;
    double timestamp;
    kr_track_result track;   /* the published pose, state and quality */
    kr_track_result tracked; /* Newton tracking from the predicted pose, as the state machine
                                judged it before any recovery (what failure detection saw) */
    int valid_points;        /* points with normals at the finest level tracked (0: no depth) */
    kr_method method;        /* KR_METHOD_NEWTON; KR_METHOD_EMICP or _SOFTASSIGN for a recovered
                                frame; KR_METHOD_PREDICTED for LOST and first frames */
    bool recovery_tried;     /* recovery ran on this frame */
    bool recovered;          /* ... and its pose passed the quality gates */
    double recover_ms;       /* time recovery took (0 when it did not run) */
    double latency_ms;       /* frame capture → pose ready (publishing follows at once) */
    double preprocess_ms, track_ms, fuse_ms;
    kr_pose refined_pose;    /* live refiner on: the pose corrected by the refined motion of the
                                newest keyframe so far; else the published pose */
} kr_frame_result;

typedef struct {
    uint64_t frames_in;         /* delivered by the source */
    uint64_t frames_out;        /* tracked and published */
    uint64_t frames_dropped;    /* live only: dropped because the tracker (or reader) was behind */
    uint64_t frames_lost;       /* frames whose state was LOST */
    uint64_t losses;            /* times tracking was lost (a LOST frame, or after_poor POOR frames,
                                   after a trusted frame) */
    uint64_t losses_ended;      /* losses over again (recovered, or tracking GOOD again) */
    uint64_t losses_ended_fast; /* ... within 3 frames that had depth (a covered sensor has none) */
    uint64_t recoveries;        /* recoveries that passed the gates */
    uint64_t recovery_failures; /* recovery attempts that did not */
    double recovery_ms_total;   /* time spent in recovery, all attempts */
    double recovery_ms_max;     /* longest successful recovery */
    /* The final trajectory (fill_lost; counted once kr_pipeline_run has
     * returned): LOST frames placed by tracking backwards from the pose
     * that ended their loss, covered ones interpolated between known poses,
     * and those left with their published pose. */
    uint64_t frames_filled, frames_interpolated, frames_unfilled;
    double fill_ms;             /* the time that took, at the end of the run */
    uint64_t frames_skipped;    /* corrupt frames skipped (--skip-bad) */
    double elapsed_s;           /* wall time from start to the last frame */
    double fps;                 /* frames_out / elapsed_s */
    double input_fps;           /* frames_in / elapsed_s */
    /* Capture → publish latency: the time from a frame entering kinreg (the
     * sensor callback, or the read of a replayed frame) to its pose leaving
     * on the socket. Last value while running; median and p99 over the run
     * once kr_pipeline_run has returned. */
    double latency_last_ms, latency_median_ms, latency_p99_ms;
    uint64_t model_points;     /* voxels in the running model */
    uint64_t messages_dropped; /* pose/status messages the publisher could not queue for a
                                  slow subscriber (kr_publisher_dropped; also in every status) */
    kr_track_state last_state;
    /* Live refiner (zero when off). */
    uint64_t keyframes;         /* keyframes chosen so far */
    uint64_t refinements;       /* windows refined */
    uint64_t refine_corrections; /* ... that moved keyframes by refine.min_correction or more
                                    (the others left the poses as they were) */
    uint64_t refine_failures;   /* windows whose refinement failed (poses kept as tracked) */
    uint64_t refine_refusions;  /* times the model was re-fused from refined keyframes */
    bool refine_in_flight;      /* a window is being refined now */
    double refine_ms_last;      /* wall time of the last refinement */
    /* Outputs: poses in the trajectory file so far; whether a write to it
     * failed (a full disk, a file-size limit, an I/O error: the file then
     * holds the poses_written first poses, whole lines only, and the run's
     * error says the path and the cause) and whether the model could not be
     * saved at the end. Poses are published either way. */
    uint64_t poses_written;
    bool trajectory_failed;
    bool model_save_failed;
    /* The surface (mesh_path): frames fused into it, frames skipped while it
     * was busy, the mesh written, and whether it could not be made or saved. */
    uint64_t mesh_frames, mesh_skipped;
    size_t mesh_vertices, mesh_faces;
    bool mesh_save_failed;
    /* The `mesh` topic: surfaces sent to viewers, the mean seconds the
     * surface thread took to mesh and pack one, and the last one's size. */
    uint64_t mesh_refreshes;
    double mesh_refresh_s;
    size_t mesh_refresh_faces;
} kr_pipeline_stats;

typedef void (*kr_frame_callback)(const kr_frame_result *result, const kr_pipeline_stats *stats, void *user);

/* A recovery passed in (kr_pipeline_config.recover_fn). The tracker's policy
 * decides when the recovery search is asked and whether its answer is taken
 * (DESIGN.md §5, "Recovery"); the function only answers. A test double, or a
 * bench program that knows the true pose (bench/recovery_oracle.c), stands in
 * this way for the built-in search (kr_pipeline_recover_builtin). With
 * recover.method KR_RECOVER_OFF nothing is asked. */
typedef enum {
    KR_RECOVER_FOR_LOSS = 0,          /* tracking is lost: find the camera again */
    KR_RECOVER_FOR_SECOND_OPINION = 1 /* a GOOD frame that departed from its seed by 3 cm / 3 deg
                                         and fits less than 0.8 of the recent frames' inlier
                                         fraction: taken only when it fits clearly more */
} kr_recover_purpose;

/* What one recovery attempt is asked, on the tracker thread. Valid for the call only. */
typedef struct {
    kr_recover_purpose purpose;
    uint64_t frame_index;
    double timestamp;
    kr_device *device;
    const kr_kdtree *model;           /* the model snapshot the frame was tracked against */
    const kr_pyramid *pyramid;        /* the frame, preprocessed */
    const kr_track_config *track;     /* the tracking gates */
    const kr_recover_config *recover; /* the pipeline's recovery settings */
    kr_pose predicted;                /* the motion model's seed for the frame */
    kr_pose last_good;                /* the last trusted pose */
    kr_track_quality recent;          /* the recent GOOD frames' figures (recent_inlier,
                                         recent_rms) */
    void *builtin;                    /* the built-in search's state across the attempts of a
                                         loss: only for kr_pipeline_recover_builtin */
} kr_recover_request;

/* A recovery's answer, taken only when success. For a loss it ends the
 * loss: its pose is published as the frame's (and fused once the next frame
 * confirms it), and fitting less than the inlier gate it lets the frames
 * after it be GOOD at that overlap. A second opinion is taken only when it
 * also fits clearly more (by 0.05) than the frame's own tracking. */
typedef struct {
    bool success;          /* the pose passed the recovery's own checks */
    kr_track_result track; /* Newton tracking from the pose found: the pose and its figures */
    kr_method method;      /* how it was found: the frame's published method */
} kr_recover_answer;

/* Answers `req` into `out` (zeroed before the call); a status other than
 * KR_OK is an error that ends the run. */
typedef kr_status (*kr_recover_fn)(const kr_recover_request *req, kr_recover_answer *out,
                                   void *user);

typedef struct {
    kr_source_config source;
    kr_device_config device;
    kr_preprocess_config preprocess;
    kr_track_config track;
    kr_model_config model;
    kr_recover_config recover;
    kr_publisher_config publish;   /* endpoint NULL = no publishing */
    double publish_wait_s;         /* before the first frame, wait up to this long for a
                                      subscriber (0 = start at once; ZeroMQ drops what is
                                      published before a subscriber has joined) */
    int queue_capacity;            /* frames between capture and tracker (default 4) */
    double rate;                   /* 0 = as fast as possible; 1.0 = recorded timing */
    int rebuild_every;             /* frames between model snapshot requests (default 8) */
    double model_period_s;         /* seconds between `model` snapshots for viewers (default 1;
                                      0 = none); sent only while someone subscribes to `model` */
    int model_points;              /* points per `model` snapshot at most (default 100000) */
    double depth_period_s;         /* seconds between `depth` thumbnails for viewers (default 0.5;
                                      0 = none); made only while someone subscribes to `depth` */
    int fuse_level;                /* pyramid level fused into the model (default = track.finest_level) */
    int fuse_thread;               /* fusion on its own thread, overlapping the next frame's tracking:
                                      0 = with the CUDA backend (default), 1 = always, 2 = never */
    const char *trajectory_path;   /* TUM file written as poses are computed; NULL = none */
    size_t trajectory_keep;        /* poses kr_pipeline_trajectory keeps in memory: 0 = all
                                      (default), else at least the last N and at most 2N, so
                                      a long session that streams to trajectory_path stays
                                      bounded (`kinreg run` keeps 1024); ignored with the
                                      live refiner or fill_lost on, which correct every frame
                                      at the end */
    const char *model_path;        /* PLY written at the end; NULL = none */
    const char *mesh_path;         /* the surface mesh (PLY with faces) written at the end, from
                                      the tracked frames fused on a thread of their own
                                      (pipeline/mesher.h: frames it has no time for are skipped,
                                      never the tracker delayed); NULL = none */
    kr_surface_config surface;     /* its volume (kr_surface_config_default) */
    int mesh_decimate;             /* the mesh at this many times the voxel (voxels averaged,
                                      kr_surface_extract_coarse); default 1: the full mesh */
    double mesh_period_s;          /* seconds between `mesh` refreshes for viewers (default 2;
                                      0 = none); made on the surface's thread only while
                                      someone subscribes to `mesh` */
    kr_live_refine_config refine;  /* the live refiner (default off) */
    const char *trajectory_refined_path; /* TUM file of every frame's refined pose, written when
                                            the run ends (Ctrl-C included): later refinements
                                            correct earlier frames; needs refine.enabled */
    bool fill_lost;                /* keep the LOST frames' depth and, when the run ends, place
                                      them: kr_pipeline_final_trajectory (pipeline/lost_fill.h),
                                      and a `final` message for each frame placed; on with
                                      trajectory_final_path */
    size_t fill_frames;            /* LOST frames with depth kept at most, the oldest dropped first
                                      (default 300, about 180 MB of 640x480 depth) */
    const char *trajectory_final_path; /* TUM file of the final trajectory, written when the run
                                          ends; NULL = none */
    bool deterministic;            /* repeatable results (default false): model snapshots are
                                      built on the tracker thread when requested, so frame k
                                      always tracks against the snapshot of frame
                                      k - k % rebuild_every, not whichever background build
                                      finished first; reductions run in a fixed order. Two
                                      runs of a replay with the same options and thread count
                                      give bit-identical poses. Costs the tree build's time
                                      on the tracker thread. Live sensors still drop frames
                                      by timing. */
    kr_frame_callback on_frame;    /* called on the tracker thread after each frame */
    void *user;
    kr_recover_fn recover_fn;      /* the recovery search (NULL = kr_pipeline_recover_builtin):
                                      called on the tracker thread with recover_user */
    void *recover_user;
} kr_pipeline_config;

KR_API void kr_pipeline_config_default(kr_pipeline_config *cfg);
/* Opens the source, device and publisher (so bad input, a missing GPU or an
 * endpoint in use fail here, before any thread starts). */
KR_API kr_status kr_pipeline_create(kr_pipeline **out, const kr_pipeline_config *cfg);
/* Runs to the end of the source or until kr_pipeline_stop(). Threads start
 * and stop inside this call. Every pose computed is written to the trajectory
 * file and published before it returns, also on error. A failed trajectory
 * write does not stop the run: it is logged at once, writing stops (the file
 * keeps whole lines), poses are still published, and it becomes the run's
 * error (KR_ERR_IO; stats.trajectory_failed). The model is saved before the
 * last status message, which is `stopped` on success and `error` otherwise
 * (after `stalled` for a stall). Returns the first error of any thread, else
 * KR_OK. */
KR_API kr_status kr_pipeline_run(kr_pipeline *p);
/* Asks a running pipeline to finish; async-signal-safe (for Ctrl-C). A
 * pipeline stopped before kr_pipeline_run runs no frame and ends cleanly. */
KR_API void kr_pipeline_stop(kr_pipeline *p);
KR_API void kr_pipeline_destroy(kr_pipeline **p);

KR_API void kr_pipeline_get_stats(const kr_pipeline *p, kr_pipeline_stats *out);
/* Poses computed so far, or the last ones with trajectory_keep (valid until
 * destroy). */
KR_API const kr_trajectory *kr_pipeline_trajectory(const kr_pipeline *p);
/* Every frame's pose corrected by its keyframe's refined motion, complete
 * once kr_pipeline_run has returned (empty before, and with the refiner off). */
KR_API const kr_trajectory *kr_pipeline_refined_trajectory(const kr_pipeline *p);
/* The published poses with the lost stretches filled in where they could
 * be, complete once kr_pipeline_run has returned (empty before, and with
 * fill_lost off). */
KR_API const kr_trajectory *kr_pipeline_final_trajectory(const kr_pipeline *p);
/* The built-in recovery (cfg.recover.method: the wide-basin Newton search,
 * EM-ICP or Softassign, pipeline/recover.h) answering `req`; a recover_fn
 * may call it and change or keep its answer. */
KR_API kr_status kr_pipeline_recover_builtin(const kr_recover_request *req,
                                             kr_recover_answer *out);
KR_API const kr_source *kr_pipeline_source(const kr_pipeline *p);
KR_API const kr_device *kr_pipeline_device(const kr_pipeline *p);

#ifdef __cplusplus
}
#endif
#endif
