/* kinreg — pairwise rigid registration with soft correspondences: EM-ICP
 * (Granger and Pennec) and Softassign (Gold et al.), as in Tamaki et al.'s
 * "Softassign and EM-ICP on GPU" (seeds 001/002; DESIGN.md §5). Their wide
 * basin of convergence is what recovery after tracking loss needs.
 *
 * Three engines compute the same algorithm: an OpenMP one, the seed's cuBLAS
 * formulation (stores the N×M weight matrix) and a fused CUDA one that never
 * stores it (memory O(N + M)). The per-pair math is written once
 * (pipeline/register/softreg_kernels.h).
 *
 * Pose convention: the result maps SOURCE points into DEST's frame,
 * dest ≈ R·src + t (the moving set is src, the fixed set is dst). */
#ifndef KINREG_REGISTER_H
#define KINREG_REGISTER_H

#include <stdbool.h>
#include <stddef.h>

#include "kinreg/device.h"
#include "kinreg/frame.h"
#include "kinreg/pose.h"

#ifdef __cplusplus
extern "C" {
#endif

/* EM-ICP and Softassign need no good initial pose; NEWTON (the tracker's
 * k-d tree Newton method, point-to-plane with normals from the points'
 * neighbours) refines one that is already close, to the sets' own noise.
 * AUTO (the default) chains them after a search over start poses and judges
 * the result (pipeline/register/register_search.h): for pairs with a rough
 * start and partial overlap. */
typedef enum {
    KR_REG_EMICP = 0,
    KR_REG_SOFTASSIGN = 1,
    KR_REG_NEWTON = 2,
    KR_REG_AUTO = 3
} kr_reg_method;

typedef enum {
    KR_REG_ENGINE_AUTO = 0,   /* fused on a CUDA device, CPU otherwise */
    KR_REG_ENGINE_CPU = 1,    /* OpenMP, streams over dst, memory O(N + M) */
    KR_REG_ENGINE_CUBLAS = 2, /* the seed's formulation: N×M matrix, gemv/gemm */
    KR_REG_ENGINE_FUSED = 3   /* streaming CUDA kernels, memory O(N + M) */
} kr_reg_engine;

/* The seed's constants are lengths for an object of this size (metres): its
 * EM-ICP σ² runs from 0.01 m² (σ = 10 cm) to 1e-5 m² (σ = 3 mm) on a bunny of
 * about this radius. */
#define KR_REG_SEED_EXTENT 0.1

typedef struct {
    kr_reg_method method;
    kr_reg_engine engine;
    /* Size of the problem in metres; 0 (default) = the RMS distance of dst's
     * points from their centroid. Every squared length below (sigma2,
     * sigma2_inf, d02, alpha, t0) is given for an object of extent
     * KR_REG_SEED_EXTENT and is multiplied by (extent / KR_REG_SEED_EXTENT)²,
     * so the seed's numbers work unchanged for any object size. Set extent to
     * KR_REG_SEED_EXTENT to run the seed's schedule verbatim. */
    double extent;

    /* EM-ICP (seed code defaults): σ² starts at sigma2 (0.01), is multiplied
     * by sigma2_factor (0.9) after each Horn step and the loop ends when it is
     * below sigma2_inf (1e-5): 66 steps. d02 (0.01) is the outlier term
     * exp(−d0²/σ²) of each source point's normaliser. Squared metres. */
    double sigma2, sigma2_inf, sigma2_factor, d02;

    /* Softassign (seed code defaults): jmax (100) temperatures from t0 (100)
     * down by t_factor (0.95); at each, i0 (5) Horn steps, each after i1 (3)
     * Sinkhorn row+column normalisations. m_ij = exp(−(d²_ij − alpha)/T) with
     * alpha (3) and T in the seed's units: squared centimetres for an object of
     * extent KR_REG_SEED_EXTENT (the same 10 cm → few mm range as EM-ICP), i.e.
     * internally alpha·1e-4 and t0·1e-4 m² before the extent scaling. The slack
     * row and column hold m_outlier (default 0 = the seed's
     * exp(−1)/sqrt(t0)). */
    int jmax, i0, i1;
    double alpha, t0, t_factor, m_outlier;

    /* Softassign coarse to fine (not the seed's): the temperatures down to
     * fine_temperatures (6) before the stop rule's scale (T below
     * (stop_sigma_ratio·extent)²) run on every k-th point of each set, k
     * chosen so that about coarse_points (512) remain; the later ones, where
     * the pose settles, on every point. While √T is wide against the
     * thinned sets' spacing their path is the whole sets', so the result is
     * the seed's form's to a few thousandths of a degree at a fraction of
     * its cost (pipeline/register/coarse_to_fine.h). coarse_points 0 runs
     * every point at every temperature, as the seed. */
    int coarse_points, fine_temperatures;

    /* Stop rule (the seed has none): stop when the RMS displacement of the
     * source points caused by one Horn step stays below stop_motion·extent
     * for stop_patience (3) steps in a row — and only once the scale (σ, or
     * √T) is below stop_sigma_ratio (0.1)·extent, so the coarse early steps
     * (which move little while σ is wide) never stop it. stop_motion is 1e-4
     * by default (10 µm for a 10 cm object); 0 = run the whole schedule. On
     * the seed's schedule EM-ICP still refines by ~3e-4·extent per step at
     * its last σ, so the rule ends runs whose pose has truly settled (a
     * sharp optimum, a cold Softassign temperature) rather than cutting the
     * annealing short. */
    double stop_motion;
    int stop_patience;
    double stop_sigma_ratio;

    /* Quality: a source point is an inlier when its nearest dst point (after
     * the final pose) is within inlier_ratio (0.1)·extent. pose_only (default
     * false) skips the quality figures (rms and inlier_fraction stay 0): for
     * a caller that judges the pose itself, as recovery does, they cost a
     * k-d tree of dst and a search per point. */
    double inlier_ratio;
    bool pose_only;

    /* deterministic (default false): the fused Softassign engine adds its
     * blocks' column sums in 64-bit fixed point, exact in any order, so
     * two runs give bit-identical poses; without it, float atomics that
     * finish in the order the GPU's blocks arrive — the same pose to ~1e-9
     * from run to run, and ~20 % faster (9.5 against 11.3 ms at 2000
     * points on an H100, docs/BENCHMARKS.md, session 15).
     * The other engines are deterministic either way. */
    bool deterministic;

    /* AUTO: the start is tried as given and turned about the source's
     * centroid about `hypotheses` axes spread over the sphere (0: the start
     * only; default 20), each at 45°, 90° and 135°; the best `candidates`
     * (3) probes are refined; the soft stage (soft_method, default
     * Softassign) runs on at most soft_points (600) points of each set. A
     * result is trusted when at least min_overlap (0.2) of the source lies
     * within three point spacings of the destination, the RMS of those
     * distances is at most 2.5 spacings, and no distinct pose fits nearly as
     * well. */
    int hypotheses, candidates;
    kr_reg_method soft_method;
    int soft_points;
    double min_overlap;
} kr_register_config;

typedef struct {
    kr_pose pose;        /* maps src into dst's frame: dst ≈ R·src + t */
    int iterations;      /* Horn steps taken */
    bool stopped_early;  /* ended by the stop rule rather than the schedule */
    double final_sigma2; /* EM-ICP: last σ² used (m², after extent scaling);
                            Softassign: last temperature T (m²) */
    double extent;       /* metres, as used */
    double rms;          /* RMS distance (m) from each moved src point to its nearest dst point,
                            each capped at the extent */
    double inlier_fraction; /* share of src points with that distance <= inlier_distance */
    double inlier_distance; /* metres */
    double seconds;         /* wall time of the registration (quality figures excluded) */
    kr_reg_engine engine;   /* the engine that ran (never AUTO) */

    /* The verdict (every method; AUTO also searches by them): the share of
     * source points with a destination point within three of dst's median
     * point spacings (overlap), the RMS of those distances (residual), the
     * best overlap of a distinct other pose that was found (runner_up: 0
     * without a search), a confidence in [0, 1] that a caller can threshold,
     * and whether the result is trusted (see kr_register_config). */
    double spacing;    /* dst's median point spacing, metres */
    double overlap;    /* share of source points, 0 … 1 */
    double residual;   /* metres */
    double runner_up;  /* 0 … 1 */
    double confidence; /* 0 … 1 */
    bool trusted;
    int hypotheses; /* start poses tried (AUTO) */
} kr_register_result;

KR_API void kr_register_config_default(kr_register_config *cfg);

/* Registers src (n points, 3 floats each, metres) onto dst (m points), from
 * `init` (NULL = identity; a pose mapping src into dst's frame). cfg NULL =
 * defaults; dev NULL = the CPU engine on one thread. Inputs are copied
 * (centred on their centroids) and not kept. Errors (out untouched): KR_ERR_INVALID_ARG (NULL
 * pointers, bad settings, a NaN or infinite coordinate), KR_ERR_EMPTY (fewer than 3 points in
 * either set, or points that span no volume: all on one line or one place — a plane is accepted,
 * its in-plane rotation is then the weakest), KR_ERR_NO_DEVICE (a CUDA engine asked of a CPU
 * device), KR_ERR_NOMEM (the cuBLAS engine's N×M matrix does not fit), KR_ERR_NUMERIC (the weights
 * vanished: the sets are too far apart for the schedule), KR_ERR_CUDA. */
KR_API kr_status kr_register(kr_device *dev, const kr_register_config *cfg, const float *src,
                             size_t n, const float *dst, size_t m, const kr_pose *init,
                             kr_register_result *out);

/* "emicp" "softassign" / "auto" "cpu" "cublas" "fused". */
KR_API kr_status kr_reg_method_parse(const char *text, kr_reg_method *out);
KR_API const char *kr_reg_method_name(kr_reg_method m);
KR_API kr_status kr_reg_engine_parse(const char *text, kr_reg_engine *out);
KR_API const char *kr_reg_engine_name(kr_reg_engine e);

/* The point sets `kinreg register` reads: PLY scans (kr_scan_read_ply), or
 * single depth frames (a 16-bit PNG as TUM records them, a fakenect PGM of
 * raw disparity) turned into points in their camera's frame by the
 * preprocessing every tracked frame goes through (undistortion, filtering,
 * the invalid pixels dropped). By `path`'s extension: .png (depth /
 * depth_scale metres, 0 = no return) and .pgm (Kinect v1 disparity) need `K`
 * (their size must be K's); anything else is read as PLY. A new malloc'd
 * array of 3·n floats; errors name the file. */
KR_API kr_status kr_register_read_points(const char *path, const kr_intrinsics *K,
                                         float depth_scale, float **xyz, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
