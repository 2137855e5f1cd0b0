/* kinreg — frame-to-model tracking with the k-d tree Newton method
 * (Mitra et al.; Zabatani & Bronstein), and the tracking state machine. */
#ifndef KINREG_TRACK_H
#define KINREG_TRACK_H

#include <stdbool.h>

#include "kinreg/device.h"
#include "kinreg/kdtree.h"
#include "kinreg/pose.h"
#include "kinreg/preprocess.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KR_TRACK_GOOD = 0, KR_TRACK_POOR = 1, KR_TRACK_LOST = 2 } kr_track_state;

/* Which approximant of d² a cell contributes. */
typedef enum {
    KR_QUAD_AUTO = 0,    /* point-to-plane near the surface, point-to-point far away */
    KR_QUAD_PLANE = 1,   /* A = n nᵀ everywhere */
    KR_QUAD_POINT = 2    /* A = I everywhere */
} kr_quad_mode;

typedef struct {
    int finest_level;               /* finest pyramid level tracked (default 1) */
    int iterations[KR_MAX_LEVELS];  /* Newton iterations per level, finest first */
    kr_quad_mode quad;
    float far_field;                /* AUTO: A = n nᵀ up to this |q − s*|, blending smoothly to A = I at twice it
                                       (m, default 0.10; coarser levels x2 per level, like the gate) */
    float gate;                     /* pairs farther apart are rejected (m, default 0.03; coarser levels x2 per level) */
    float normal_gate_deg;          /* max angle between frame and model normals (default 45) */
    /* Depth noise that grows as z² (Kinect: depth quantised in disparity).
     * A point at camera depth z gets the noise scale
     * s = max(1, gate_steps·depth_step·z²/gate): its gate and far-field
     * distance are s times the level's and its term weighs 1/s². */
    float depth_step;               /* the sensor's depth step at z is depth_step·z² (1/m; default
                                       0.0030711016, the Kinect v1's −KR_DISPARITY_B; 0 = s = 1) */
    float gate_steps;               /* the gate spans at least this many depth steps (default 2) */
    bool exact_nn;                  /* exact nearest neighbour instead of cell descent (tests) */
    int max_line_search;            /* Armijo halvings before giving up (default 2) */
    double armijo_c;                /* sufficient-decrease constant (default 1e-4) */
    double converge_rot, converge_trans; /* stop when a step is below these (rad, m) */
    /* After the finest level: up to this many Gauss–Newton steps taken
     * whole, which make the pose independent of the seed
     * (pipeline/track/track_step.h); kept only when the inliers fell by at
     * most the share polish_tolerance and the steps moved less than
     * polish_max_deg / polish_max_m in all. 0 = no polish. */
    int polish_steps;                    /* default 6 */
    double polish_tolerance;             /* default 0.1 */
    double polish_max_deg, polish_max_m; /* default 1, 0.01 */
    /* Quality gates for the state machine. */
    float good_inlier, lost_inlier; /* inlier fraction (default 0.5, 0.15) */
    float good_rms, lost_rms;       /* RMS residual, m (default 0.02, 0.05) */
    float min_condition;            /* λmin/λmax of F below this → POOR (default 1e-4) */
    int min_points;                 /* fewer inliers → LOST (default 100) */
    /* Divergence checks against the frame's history (kr_track_quality's
     * context fields; a context left at 0 disables its check). A tracker
     * that slid into a wrong basin often still fits well, so the fit alone
     * cannot tell: the motion it implies and the trend of its figures can. */
    double max_speed;           /* the solution may depart from the constant-velocity prediction
                                   by at most this many m/s times the time since the last
                                   trusted pose, else LOST (default 0.75: a handheld sensor) */
    double max_turn_deg;        /* likewise for rotation, deg/s (default 60) */
    double departure_slack_m;   /* plus this much, for the noise of the pose the prediction
                                   extends (m, default 0.02) */
    double departure_slack_deg; /* likewise for rotation (default 2) */
    float inlier_drop; /* inlier fraction below this times the recent mean → POOR (default 0.7) */
    float rms_rise;    /* RMS above this times the recent mean (and above good_rms/2) → POOR
                          (default 2.5) */
    /* The pose covariance (kr_track_result.covariance) is σ²F⁻¹ of the
     * finest level times covariance_patch: the number of points whose
     * residuals move together (quantisation stripes, smoothing, model
     * voxels), calibrated against a Monte Carlo on synthetic frames
     * (docs/BENCHMARKS.md, "Pose covariance"); a POOR frame's is multiplied
     * again by covariance_poor. */
    float covariance_patch; /* default 100 */
    float covariance_poor;  /* default 25 (5× the standard deviations) */
} kr_track_config;

typedef struct {
    kr_pose pose;              /* T_world_camera */
    kr_track_state state;
    float inlier_fraction;     /* finest level: inliers / points with normals */
    float rms;                 /* finest level: RMS residual of inliers, m, each residual divided
                                  by its noise scale (track config: depth_step) */
    float condition;           /* finest level: λmin/λmax of F */
    int iterations;            /* Newton steps taken, all levels */
    int inliers;
    double objective;          /* final objective at the finest level */
    /* 6×6 covariance of (camera position x y z in the world, m; rotation
     * about the world's x y z axes, rad), the upper triangle row by row
     * (21 values: xx xy xz xrx xry xrz yy …); the order and fixed-axis
     * convention of ROS's PoseWithCovariance. NaN when unknown (LOST). */
    float covariance[21];
} kr_track_result;

KR_API void kr_track_config_default(kr_track_config *cfg);

/* Registers the pyramid to the model tree starting from `seed`. Never fails on
 * bad geometry: a frame that cannot be tracked comes back LOST with the seed. */
KR_API kr_status kr_track_frame(const kr_kdtree *model, const kr_pyramid *pyr, const kr_pose *seed,
                                const kr_track_config *cfg, kr_track_result *out);

/* kr_track_frame on the device's engine: with a CUDA device the whole loop
 * runs on the GPU (pipeline/track/track_cuda.cu) and only the result comes back; the figures
 * and the state come from the same code as the CPU engine's. The CPU
 * backend (dev NULL included), and exact_nn (a test mode the CPU engine
 * alone has), run kr_track_frame. */
KR_API kr_status kr_track_frame_on(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                                   const kr_pose *seed, const kr_track_config *cfg,
                                   kr_track_result *out);

/* kr_track_frame_on from `count` seeds at once: out[k] is the result from
 * seeds[k], as kr_track_frame_on would give it. On a CUDA device they run
 * side by side in one launch (a search over seeds costs about one
 * tracking); the CPU engine tracks them in turn. */
KR_API kr_status kr_track_frames_on(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                                    const kr_pose *seeds, int count, const kr_track_config *cfg,
                                    kr_track_result *out);

/* Worsens t's state to `s` (a better or equal `s` changes nothing) and its
 * covariance with it: a GOOD frame made POOR has its covariance multiplied by
 * cfg->covariance_poor, a LOST one has none (NaN). */
KR_API void kr_track_result_worsen(kr_track_result *t, kr_track_state s,
                                   const kr_track_config *cfg);

/* Quality figures of one level as the state machine sees them. */
typedef struct {
    int points, inliers;
    float inlier_fraction, rms, condition;
    bool solved; /* the 6×6 system had a solution */
    /* Context from the frames before (0 = unknown: the check is skipped). */
    double departure_rot,
        departure_trans;             /* how far the solution lies from the prediction (rad, m) */
    double elapsed_s;                /* time since the last trusted pose the prediction extends */
    float recent_inlier, recent_rms; /* means over the recent GOOD frames */
} kr_track_quality;

/* The state machine: a pure function of quality figures, their context and
 * the gates. LOST: too few inliers, too poor a fit, or a solution farther from
 * the prediction than the sensor can move; POOR: a weak or ill-conditioned
 * fit, or one much worse than the recent frames'. */
KR_API kr_track_state kr_track_classify(const kr_track_quality *q, const kr_track_config *cfg);
/* A result's figures as the state machine sees them, its departure measured
 * from `from` after `elapsed_s` (the trends' means left at 0: no trend). */
KR_API kr_track_quality kr_track_quality_of(const kr_track_result *t, const kr_pose *from,
                                            double elapsed_s);
/* kr_track_classify's motion check alone: whether the camera can have moved
 * from `from` to `to` in `elapsed_s`. */
KR_API bool kr_track_within_reach(const kr_track_config *cfg, const kr_pose *from,
                                  const kr_pose *to, double elapsed_s);
KR_API const char *kr_track_state_name(kr_track_state s);

/* One Newton linearisation at `pose` on one level: the sums F (6×6 row-major),
 * g (6), h (objective, truncated at the gate), used by kr_track_frame and
 * exposed for tests (finite differences) and benchmarks. */
typedef struct {
    double F[36], g[6], h;
    int points, inliers;
    double residual;           /* Σ of the inliers' squared-distance approximants over s² (RMS = √(residual/inliers)) */
} kr_newton_sums;

KR_API kr_status kr_newton_linearize(const kr_kdtree *model, const kr_cloud *cloud, const kr_pose *pose,
                                     const kr_track_config *cfg, float gate, kr_newton_sums *out);

/* kr_newton_linearize of pyramid level `level` on the device's engine (the
 * CUDA engine reads the level where kr_preprocess left it when it can). */
KR_API kr_status kr_newton_linearize_on(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                                        int level, const kr_pose *pose, const kr_track_config *cfg,
                                        float gate, kr_newton_sums *out);

#ifdef __cplusplus
}
#endif
#endif
