/* kinreg — multi-view distance-field refinement (DESIGN.md §5; Mohandoss's
 * thesis, after Bhakar, Wang and Mudur).
 *
 * Each view (a keyframe or a range scan: its points in its own frame) gets a
 * sparse distance field in its own frame. For every ordered pair of views
 * (i, j), each influenced grid point g of i that lands inside j's field adds
 * e = D_i(g) − D_j(T_j⁻¹T_i g); Levenberg–Marquardt moves every pose but the
 * gauge's with 6-DoF left increments T ← exp(ξ^)·T, coarse grids first. */
#ifndef KINREG_REFINE_H
#define KINREG_REFINE_H

#include <stdbool.h>
#include <stddef.h>

#include "kinreg/device.h"
#include "kinreg/pose.h"
#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Refinement shared by several processes (MPI ranks, DESIGN.md §10): this
 * process takes part `rank` of `ranks` of every view's grid points and
 * allreduce_sum adds n doubles element-wise over all parts, in place, with
 * the same result on every part (MPI_Allreduce with MPI_SUM). Every part must
 * call kr_refine with the same views, poses and settings; every part then
 * takes the same steps and returns the same poses. The library itself never
 * calls MPI: the program supplies the reduction (tools/refine_mpi.c). */
typedef struct {
    int rank, ranks;
    kr_status (*allreduce_sum)(void *user, double *data, size_t n);
    void *user;
} kr_refine_partition;

#define KR_REFINE_MAX_DEVICES 16

typedef struct {
    double cell;        /* finest grid spacing, metres */
    int levels;         /* grids of spacing cell·2^k, k = levels−1 … 0, coarse first */
    int band;           /* influence band of the finest grid, in cells (1: the 8 corners) */
    int coarse_band;    /* band of the coarsest grid (wider: a larger basin) */
    int mid_band;       /* band of the grids between the coarsest and the finest: each starts
                           within about a cell of the grid before, so it needs no wide basin */
    int max_points;     /* points per view per level at most (evenly strided); 0: all */
    int max_iterations; /* LM iterations per level */
    double
        lambda; /* initial LM damping of (H + λ·diag H); ×10 on a failed step, ÷10 on a good one */
    double huber;  /* Huber threshold in cells; 0: plain squares */
    double cap;    /* finest grid: residuals beyond cap cells cost ρ(cap) and weigh 0 (coarser
                      grids: their band in cells) */
    double subset; /* fraction of the grid points used (thesis: 0.4); 1: all */
    unsigned seed; /* for the subset */
    int gauge;     /* index of the view that stays fixed */
    bool star;     /* the thesis's form: pairs (gauge, j) only, and a gauge grid point counts only
                      when it lands inside every other view's field */
    double tolerance; /* stop a level when a step moves no view by more than tolerance·cell
                         (translation, and rotation times the views' radius) */
    /* Signed fields: each corner holds the signed distance to its nearest
     * point's tangent plane (normals by PCA, turned towards the view's origin,
     * which must be where its sensor was), instead of the unsigned distance to
     * the nearest point. Exact on planes and free of the unsigned field's
     * interpolation bias at the surface: the choice for long scans of rooms
     * (pipeline/refine/dfield_kernels.h, "Signed fields"). Off by default. */
    bool signed_field;
    const kr_refine_partition *partition; /* NULL: this process alone */
    /* CUDA backend: split each view's grid points over these device ordinals
     * (one context and stream each, sums added on the host); the same ordinal
     * twice gives two contexts on one device. n_devices 0: the kr_device's own. */
    int devices[KR_REFINE_MAX_DEVICES];
    int n_devices;
    /* With several devices, each view's field goes from the device that
     * built it to the others peer to peer where they reach each other
     * (false), or always through page-locked host memory (true). */
    bool staged_copies;
    /* The wide basin and the guarantee (refine_init.h, refine_fit.c):
     * initialize AUTO (default) places the views by pairwise registration
     * first when the given poses leave a view without overlap (or the joint
     * refinement did), ON always, OFF never. keep_if_worse (default true):
     * the refined poses are returned only when they fit the views better than
     * the given ones by the independent measure (kr_refine_fit); otherwise the
     * given poses come back and result.kept_input says so. */
    enum { KR_REFINE_INIT_AUTO = 0, KR_REFINE_INIT_OFF = 1, KR_REFINE_INIT_ON = 2 } initialize;
    bool keep_if_worse;
    /* Called after each LM iteration (may be NULL): grid spacing of the
     * level, iteration count so far, and the objective. */
    void (*progress)(void *user, double cell, int iteration, double cost);
    /* Called as a long stage begins (may be NULL; user: progress_user), so
     * that a caller can say what it waits for: "measure" (how the views
     * overlap), "placement" (pairwise registration of the views), "fields"
     * (the views' normals and distance fields on the finest grid, of spacing
     * cell), "coarse fields" (their fields on a coarser grid). */
    void (*stage)(void *user, const char *stage, int views, double cell);
    void *progress_user;
    /* Asked before each LM iteration, grid level and pairwise registration
     * (may be NULL): when it returns true, kr_refine ends with
     * KR_ERR_INTERRUPTED and leaves the poses as given. A stopped program
     * need not wait for a refinement it will not use (the live refiner on
     * Ctrl-C). */
    bool (*interrupted)(void *user);
    void *interrupted_user;
} kr_refine_config;

/* A view: n points (3 floats each, metres) in the view's own frame. */
typedef struct {
    const float *xyz;
    size_t n;
} kr_refine_view;

/* How well poses align the views, measured independently of the distance
 * fields: exact nearest neighbours between the views' points (at most 30000
 * per view, 2000 sampled), each sample's distance to the nearest point of any
 * other view capped at `radius` (0: three times the views' median point
 * spacing). */
typedef struct {
    double spacing;  /* the views' median point spacing, metres */
    double radius;   /* the cap, metres */
    double score;    /* RMS of the capped distances: lower is a better fit */
    double overlap;  /* share of samples with a partner within radius */
    double residual; /* RMS distance of those, metres */
} kr_refine_fit;

typedef struct {
    double rms_before, rms_after;   /* RMS residual (m) on the finest grid, before and after */
    double cost_before, cost_after; /* the objective (robust, misses included) on the finest grid */
    size_t residuals_before, residuals_after; /* residuals that landed on the finest grid */
    int iterations;                           /* LM iterations, all levels */
    int accepted;                             /* of which accepted */
    double seconds;                           /* wall time of kr_refine */
    kr_backend backend;                       /* engine used */
    int devices;                              /* CUDA devices the sums ran on (0: CPU) */
    int ranks;                                /* processes that shared the sums (1: alone) */
    double reduced_bytes; /* payload of all all-reduces, bytes (each rank sends and receives
                             it); divide by evaluations for one LM iteration's */
    int evaluations;      /* objective evaluations (one per LM iteration, one per level) */
    double fields_seconds; /* of seconds: normals, fields, and loading them onto the devices */
    double sums_seconds;   /* of seconds: the evaluations' sums (engine and all-reduce) */
    double solve_seconds;  /* of seconds: the normal equations (assembled, solved, shared) */
    const char *solver;    /* what solved them last: "cholmod", "dense" (the host's) or
                              "cusolver" (the CUDA engine's device, for 50 to 1366 views) */
    double fit_seconds;    /* of seconds: the independent measure (trees and evaluations) */
    double init_seconds;   /* of seconds: the pairwise placement */
    /* The independent measure (kr_refine_fit) at the given poses and at the
     * returned ones; whether pairwise registration placed the views first
     * (and how many views its tree reached); whether the given poses were
     * kept because nothing fitted better; and how many views overlap no other
     * at the returned poses (kr_refine_fit_of names them per view). */
    kr_refine_fit fit_before, fit_after;
    bool initialized;
    int placed;
    bool placement_only; /* the pairwise placement fitted better than any joint refinement */
    bool kept_input;
    int disconnected;
} kr_refine_result;

KR_API void kr_refine_config_default(kr_refine_config *cfg);

/* Refines poses[0 … n_views−1] (T_world_view, in/out) jointly. dev may be NULL
 * (the CPU engine with OpenMP's default threads). On error the poses and the
 * result are untouched. */
KR_API kr_status kr_refine(const kr_refine_config *cfg, kr_device *dev, const kr_refine_view *views,
                           int n_views, kr_pose *poses, kr_refine_result *result);

/* The objective's RMS residual (m) and landed residual count at the given
 * poses, on a single grid of spacing cfg->cell and band cfg->band. */
KR_API kr_status kr_refine_residual(const kr_refine_config *cfg, const kr_refine_view *views,
                                    int n_views, const kr_pose *poses, double *rms, size_t *count);

/* A --devices list: "all" (every visible CUDA device) or ordinals such as
 * "0,1" (one ordinal twice: two contexts on one device). KR_ERR_NO_DEVICE
 * when no CUDA device is visible (or the build has no CUDA), KR_ERR_INVALID_ARG
 * for a malformed list or an ordinal that is not visible; *n and devices are
 * untouched on failure. */
KR_API kr_status kr_refine_devices_parse(const char *text, int devices[KR_REFINE_MAX_DEVICES],
                                         int *n);

/* The host's solver of sparse normal equations in this build: "cholmod"
 * (block-sparse, SuiteSparse) or "dense"; kr_refine_result.solver says
 * which one a run used. */
KR_API const char *kr_refine_solver(void);

/* view_overlap (may be NULL): n_views shares, one per view; a view at 0
 * overlaps none of the others at these poses. */
KR_API kr_status kr_refine_fit_of(const kr_refine_view *views, int n_views, const kr_pose *poses,
                                  double radius, double *view_overlap, kr_refine_fit *out);

/* A depth sequence refined by its keyframes (kinreg refine --sequence): the
 * frames of `uri` whose trajectory pose (`trajectory`, TUM, matched by
 * timestamp within 20 ms) lies min_translation metres or min_angle_deg
 * degrees from the last keyframe become keyframes (their points at a quarter
 * of the sensor's resolution; a frame without depth never does), refined
 * jointly by kr_refine. */
typedef struct {
    const char *uri;         /* depth source, e.g. tum:DIR */
    const char *intrinsics;  /* preset or NULL */
    const char *trajectory;  /* TUM poses of the frames */
    const char *output;      /* refined keyframe poses (TUM), or NULL */
    const char *every_frame; /* every frame of `trajectory` moved by the refinement of the
                                keyframes around it (TUM), or NULL */
    double min_translation;  /* keyframe spacing, metres */
    double min_angle_deg;
    /* Called once the keyframes are chosen, before they are refined (may be NULL). */
    void (*on_keyframes)(int keyframes, void *user);
    void *user;
} kr_refine_sequence_config;

typedef struct {
    int keyframes;
    /* With every_frame: the frames moved by their keyframes, and those of
     * stretches without a keyframe, kept as they were. */
    size_t frames_corrected, frames_unmoved;
} kr_refine_sequence_result;

/* dev may be NULL (the CPU engine). res gets kr_refine's result. */
KR_API kr_status kr_refine_sequence(const kr_refine_sequence_config *sc, kr_refine_config *cfg,
                                    kr_device *dev, kr_refine_result *res,
                                    kr_refine_sequence_result *out);

#ifdef __cplusplus
}
#endif
#endif
