/* Frame-to-model tracking: damped Newton steps on the k-d tree approximant of
 * the squared distance, coarse to fine over the pyramid (DESIGN.md §5).
 *
 * Per step: linearise at T (F, g, h), solve F x = g, then try
 * T' = exp(α x̂)·T for α = 1, ½, ¼, … until the objective re-evaluated at T'
 * drops by the Armijo amount h(T') ≤ h(T) − c·α·2gᵀx (−2g is the gradient of
 * h, so 2gᵀx is the predicted decrease rate). The linearisation made to
 * evaluate h(T') is the next step's, so an accepted full step costs one pass.
 *
 * The 6×6 system is solved in normalised coordinates: rotation about the
 * points' centroid c and scaled by their RMS radius L. There, a tiny isotropic
 * Levenberg term λI leaves well-determined directions unchanged and holds
 * still along degenerate ones (a single wall: slides along it have g ≈ 0),
 * where plain Cholesky would return an arbitrary huge step. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/kdtree_layout.h"
#include "kinreg/frame.h"
#include "kinreg/track.h"
#include "pipeline/track/track_step.h"
#include "gpu/engine.h"
#include "pipeline/track/track_cuda.h"
#include "pipeline/track/track_internal.h"

/* λ relative to the mean eigenvalue of the normalised F. */
#define TRACK_DAMPING 1e-6

void kr_track_config_default(kr_track_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->finest_level = 1;
    /* Finest first: level 1 (320×240), level 2 (160×120), … Coarse steps are
     * cheap and remove most of the motion; most frames converge in fewer. */
    const int iters[KR_MAX_LEVELS] = {6, 5, 4, 4, 4};
    memcpy(cfg->iterations, iters, sizeof iters);
    cfg->quad = KR_QUAD_AUTO;
    /* Point-to-plane inside the gate on every level: with descent (no
     * back-tracking) |q − s*| says little about the distance to the surface,
     * and point-to-point terms pulled towards arbitrary cell points (biases
     * of 0.1–0.2° on ray-cast Kinect scenes). Set it below gate/2 for
     * Mitra-style far-field attraction on large motions. */
    cfg->far_field = 0.10f;
    cfg->gate = 0.03f;
    cfg->normal_gate_deg = 45.0f;
    /* Two steps: about 3.5σ of a depth that is quantised (σ = step/√12) and
     * noisy (σ ≈ half a step). The 3 cm gate holds up to 2.2 m; at 2.7 m a
     * point's gate is 4.5 cm and its weight 0.45. */
    cfg->depth_step = (float)-KR_DISPARITY_B;
    cfg->gate_steps = 2.0f;
    cfg->exact_nn = false;
    /* α down to 1/4: smaller steps did not help (the failures are
     * gate crossings, which any step size meets) and each trial costs a
     * full pass over the level. */
    cfg->max_line_search = 2;
    cfg->armijo_c = 1e-4;
    cfg->converge_rot = 3e-4;   /* 0.017° */
    cfg->converge_trans = 3e-4; /* 0.3 mm at the centroid */
    cfg->polish_steps = 6;
    cfg->polish_tolerance = 0.1;
    cfg->polish_max_deg = 1;
    cfg->polish_max_m = 0.01;
    cfg->good_inlier = 0.5f;
    cfg->lost_inlier = 0.15f;
    cfg->good_rms = 0.02f;
    cfg->lost_rms = 0.05f;
    cfg->min_condition = 1e-4f;
    cfg->min_points = 100;
    /* A hand moves a sensor at up to about 1 m/s and turns it at up to
     * 60-90 deg/s; what departs from the constant-velocity prediction is the
     * change of motion, which stays well below that between 30 Hz frames
     * (fr1/xyz: under 1 cm). Sudden jumps of 15 cm or 15° in one frame do not. */
    cfg->max_speed = 0.75;
    cfg->max_turn_deg = 60;
    /* A recovered or slightly-off previous pose shifts the next solution by
     * its own error: allow for it. */
    cfg->departure_slack_m = 0.02;
    cfg->departure_slack_deg = 2;
    cfg->inlier_drop = 0.7f;
    cfg->rms_rise = 2.5f;
    cfg->covariance_patch = 100.0f;
    cfg->covariance_poor = 25.0f;
}

const char *kr_track_state_name(kr_track_state s)
{
    switch (s) {
    case KR_TRACK_GOOD:
        return "GOOD";
    case KR_TRACK_POOR:
        return "POOR";
    case KR_TRACK_LOST:
        return "LOST";
    }
    return "UNKNOWN";
}

/* A handheld sensor moves at most max_speed and turns at most max_turn_deg
 * per second, plus the slack for the noise of the pose it moved from. */
static bool within_reach(const kr_track_config *cfg, double trans, double rot, double elapsed_s)
{
    double reach = cfg->max_speed * elapsed_s + cfg->departure_slack_m;
    double turn = (cfg->max_turn_deg * elapsed_s + cfg->departure_slack_deg) * M_PI / 180;
    return !(cfg->max_speed > 0 && !(trans <= reach)) && !(cfg->max_turn_deg > 0 && !(rot <= turn));
}

bool kr_track_within_reach(const kr_track_config *cfg, const kr_pose *from, const kr_pose *to,
                           double elapsed_s)
{
    kr_pose inv = kr_pose_inv(from), d = kr_pose_mul(&inv, to);
    return within_reach(cfg, kr_pose_translation_norm(&d), kr_pose_angle(&d), elapsed_s);
}

kr_track_quality kr_track_quality_of(const kr_track_result *t, const kr_pose *from,
                                     double elapsed_s)
{
    kr_track_quality q;
    memset(&q, 0, sizeof q);
    q.points = t->inliers;
    q.inliers = t->inliers;
    q.inlier_fraction = t->inlier_fraction;
    q.rms = t->rms;
    q.condition = t->condition;
    q.solved = true;
    kr_pose inv = kr_pose_inv(from), d = kr_pose_mul(&inv, &t->pose);
    q.departure_rot = kr_pose_angle(&d);
    q.departure_trans = kr_pose_translation_norm(&d);
    q.elapsed_s = elapsed_s;
    return q;
}

kr_track_state kr_track_classify(const kr_track_quality *q, const kr_track_config *cfg)
{
    if (!q || !cfg || !q->solved) return KR_TRACK_LOST;
    /* NaN figures fail every comparison below, so test for the good side. */
    if (q->inliers < cfg->min_points || !(q->inlier_fraction >= cfg->lost_inlier) ||
        !(q->rms <= cfg->lost_rms))
        return KR_TRACK_LOST;
    /* Implied motion: a solution the sensor cannot have reached is a wrong basin. */
    if (q->elapsed_s > 0 && !within_reach(cfg, q->departure_trans, q->departure_rot, q->elapsed_s))
        return KR_TRACK_LOST;
    if (!(q->inlier_fraction >= cfg->good_inlier) || !(q->rms <= cfg->good_rms) ||
        !(q->condition >= cfg->min_condition))
        return KR_TRACK_POOR;
    /* Trends: a fit clearly worse than the recent frames' has begun to slip. */
    if (q->recent_inlier > 0 && cfg->inlier_drop > 0 &&
        q->inlier_fraction < cfg->inlier_drop * q->recent_inlier)
        return KR_TRACK_POOR;
    if (q->recent_rms > 0 && cfg->rms_rise > 0 && q->rms > cfg->rms_rise * q->recent_rms &&
        q->rms > 0.5f * cfg->good_rms)
        return KR_TRACK_POOR;
    return KR_TRACK_GOOD;
}

double kr_track_condition(const double F[36], const double c[3], double L)
{
    double Fn[36], ev[6];
    kr_track_step_normalise(F, NULL, c, L > 0 ? L : 1, Fn, NULL);
    kr_eigen_sym(6, Fn, ev, NULL);
    if (!(ev[5] > 0) || !isfinite(ev[5])) return 0;
    return ev[0] > 0 ? ev[0] / ev[5] : 0;
}

/* Centroid and RMS radius of the points with normals, camera frame. */
static int cloud_centroid(const kr_cloud *cl, double c[3], double *L)
{
    long n = (long)cl->width * cl->height;
    /* Per-thread partial sums over contiguous ranges, added in thread order:
     * an OpenMP reduction clause may combine them in any order, which made
     * two identical runs differ in the last bits. */
    enum { MAX_PARTS = 64 };
    double part[MAX_PARTS][4] = {{0}};
    long part_cnt[MAX_PARTS] = {0};
    int parts = 1;
#pragma omp parallel if (n > 16384)
    {
        int nth = omp_get_num_threads(), tid = omp_get_thread_num();
        if (nth > MAX_PARTS) nth = MAX_PARTS;
        if (tid < nth) {
            long lo = n * tid / nth, hi = n * (tid + 1) / nth;
            double a[4] = {0, 0, 0, 0};
            long c = 0;
            for (long i = lo; i < hi; i++) {
                const float *p = cl->points + 3 * i;
                if (p[0] != p[0] || cl->normals[3 * i] != cl->normals[3 * i]) continue;
                a[0] += p[0];
                a[1] += p[1];
                a[2] += p[2];
                a[3] += (double)p[0] * p[0] + (double)p[1] * p[1] + (double)p[2] * p[2];
                c++;
            }
            memcpy(part[tid], a, sizeof a);
            part_cnt[tid] = c;
        }
        if (tid == 0) parts = nth;
    }
    double sx = 0, sy = 0, sz = 0, s2 = 0;
    long cnt = 0;
    for (int k = 0; k < parts; k++) {
        sx += part[k][0];
        sy += part[k][1];
        sz += part[k][2];
        s2 += part[k][3];
        cnt += part_cnt[k];
    }
    if (!cnt) {
        c[0] = c[1] = c[2] = 0;
        *L = 1;
        return 0;
    }
    c[0] = sx / cnt;
    c[1] = sy / cnt;
    c[2] = sz / cnt;
    double r2 = s2 / cnt - (c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
    *L = r2 > 1e-12 ? sqrt(r2) : 1e-6;
    return cnt > 0x7fffffff ? 0x7fffffff : (int)cnt;
}

static void trace_add(kr_track_trace *tr, int level, int it, double h, double alpha, int evals)
{
    if (!tr || tr->count >= tr->capacity) return;
    kr_track_trace_step *s = &tr->steps[tr->count++];
    s->level = level;
    s->iteration = it;
    s->objective = h;
    s->alpha = alpha;
    s->evaluations = evals;
}

void kr_track_result_worsen(kr_track_result *t, kr_track_state s, const kr_track_config *cfg)
{
    if (!t || !cfg || s <= t->state) return;
    if (s == KR_TRACK_LOST)
        for (int i = 0; i < 21; i++)
            t->covariance[i] = NAN;
    else if (t->state == KR_TRACK_GOOD)
        for (int i = 0; i < 21; i++)
            t->covariance[i] *= cfg->covariance_poor;
    t->state = s;
}

/* Quality at the finest level, from the linearisation at the final pose:
 * one function for both engines, so their figures and states agree. */
static void finish_result(const kr_newton_sums *lin, const kr_pose *T, const double c_cam[3],
                          double L, bool solved, int total_iters, const kr_pose *seed,
                          const kr_track_config *cfg, kr_track_result *out)
{
    kr_track_quality q;
    memset(&q, 0, sizeof q);
    q.points = lin->points;
    q.inliers = lin->inliers;
    q.inlier_fraction = lin->points ? (float)lin->inliers / (float)lin->points : 0.0f;
    q.rms = lin->inliers ? (float)sqrt(fmax(lin->residual, 0) / lin->inliers) : INFINITY;
    double c[3];
    kr_pose_apply(T, c_cam, c);
    q.condition = lin->inliers >= 6 ? (float)kr_track_condition(lin->F, c, L) : 0.0f;
    q.solved = solved && lin->inliers >= 6;

    kr_track_result r;
    memset(&r, 0, sizeof r);
    r.state = kr_track_classify(&q, cfg);
    r.pose = r.state == KR_TRACK_LOST ? *seed : *T;
    r.inlier_fraction = q.inlier_fraction;
    r.rms = q.rms;
    r.condition = q.condition;
    r.iterations = total_iters;
    r.inliers = q.inliers;
    r.objective = lin->h;
    kr_track_state state = r.state;
    r.state = KR_TRACK_GOOD;
    kr_track_covariance(lin->F, lin->residual, lin->inliers, T->t, L, cfg->covariance_patch,
                        r.covariance);
    kr_track_result_worsen(&r, state, cfg);
    *out = r;
}

/* The polish of the finest level (pipeline/track/track_step.h): *T and *lin
 * are the level's result on entry, the polished or the same on return.
 * Traced as iterations with α = 1 after the level's own. */
static kr_status polish(const kr_kdtree *model, const kr_cloud *cl, const kr_track_config *cfg,
                        const double c_cam[3], double L, kr_pose *T, kr_newton_sums *lin,
                        int *total_iters, kr_track_trace *trace, int level)
{
    const kr_pose T0 = *T;
    const kr_newton_sums lin0 = *lin;
    const int iters0 = *total_iters;
    double moved[2] = {0, 0};
    for (int k = 0; k < cfg->polish_steps && lin->inliers >= 6; k++) {
        double y[6], x[6], slope;
        if (!kr_track_step_direction(lin->F, lin->g, T, c_cam, L, TRACK_DAMPING, y, x, &slope))
            break;
        if (kr_track_polish_done(y, L, cfg->converge_rot, cfg->converge_trans)) break;
        kr_track_polish_moved(y, L, moved);
        *T = kr_track_step_trial(x, 1.0, T);
        kr_pose_orthonormalize(T);
        kr_status st = kr_newton_linearize(model, cl, T, cfg, cfg->gate, lin);
        if (st != KR_OK) return st;
        (*total_iters)++;
        trace_add(trace, level, KR_TRACK_TRACE_POLISH + k, lin->h, 1.0, 1);
    }
    if (!kr_track_polish_keep(lin->inliers, lin0.inliers, moved, cfg->polish_tolerance,
                              cfg->polish_max_deg * M_PI / 180, cfg->polish_max_m)) {
        *T = T0;
        *lin = lin0;
        *total_iters = iters0;
    }
    return KR_OK;
}

kr_status kr_track_frame_traced(const kr_kdtree *model, const kr_pyramid *pyr, const kr_pose *seed,
                                const kr_track_config *cfg, kr_track_result *out,
                                kr_track_trace *trace)
{
    if (!model || !pyr || !seed || !cfg || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_track_frame: NULL argument");
    if (pyr->levels < 1 || pyr->levels > KR_MAX_LEVELS)
        return kr_error(KR_ERR_INVALID_ARG, "kr_track_frame: pyramid with %d levels", pyr->levels);

    const int top = pyr->levels - 1;
    /* A pyramid shallower than the configured finest level tracks its last. */
    int finest = cfg->finest_level < 0 ? 0 : (cfg->finest_level > top ? top : cfg->finest_level);
    kr_pose T = *seed;
    kr_newton_sums lin, trial;
    memset(&lin, 0, sizeof lin);
    int total_iters = 0;
    bool solved = false;
    double c_cam[3] = {0, 0, 0}, L = 1;

    for (int level = top; level >= finest; level--) {
        const kr_cloud *cl = &pyr->level[level];
        int k = level - finest;
        int iters = k < KR_MAX_LEVELS ? cfg->iterations[k] : 0;
        float gate = cfg->gate * (float)(1u << k);
        /* The far-field distance scales with the gate, so that a blend that
         * ends at the gate on the finest level does so on every level. */
        kr_track_config lcfg = *cfg;
        lcfg.far_field = cfg->far_field * (float)(1u << k);
        int n_valid = cloud_centroid(cl, c_cam, &L);
        if (n_valid == 0 && level != finest) continue;
        kr_status st = kr_newton_linearize(model, cl, &T, &lcfg, gate, &lin);
        if (st != KR_OK) return st;
        trace_add(trace, level, 0, lin.h, 0, 1);
        solved = lin.inliers >= 6;
        for (int it = 1; it <= iters && lin.inliers >= 6; it++) {
            double y[6], x[6], slope = 0;
            if (!kr_track_step_direction(lin.F, lin.g, &T, c_cam, L, TRACK_DAMPING, y, x, &slope)) {
                solved = false;
                break;
            }
            if (!(slope > 0)) break; /* no descent direction left: converged */
            double alpha = 1;
            bool accepted = false;
            kr_pose Tt = T;
            int evals = 0;
            for (int ls = 0; ls <= cfg->max_line_search; ls++, alpha *= 0.5) {
                Tt = kr_track_step_trial(x, alpha, &T);
                st = kr_newton_linearize(model, cl, &Tt, &lcfg, gate, &trial);
                if (st != KR_OK) return st;
                evals++;
                if (kr_track_step_accept(trial.h, lin.h, cfg->armijo_c, alpha, slope)) {
                    accepted = true;
                    break;
                }
            }
            if (!accepted) {
                /* No decrease along x: at the level's minimum, or stopped by a
                 * discontinuity of the objective (a point crossing a gate). */
                trace_add(trace, level, -1, lin.h, 0, evals);
                break;
            }
            T = Tt;
            kr_pose_orthonormalize(&T);
            lin = trial;
            total_iters++;
            trace_add(trace, level, it, lin.h, alpha, evals);
            if (kr_track_step_converged(y, alpha, L, cfg->converge_rot, cfg->converge_trans)) break;
        }
    }

    if (solved && lin.inliers >= 6 && cfg->polish_steps > 0) {
        kr_status st = polish(model, &pyr->level[finest], cfg, c_cam, L, &T, &lin, &total_iters,
                              trace, finest);
        if (st != KR_OK) return st;
    }
    finish_result(&lin, &T, c_cam, L, solved, total_iters, seed, cfg, out);
    return KR_OK;
}

kr_status kr_track_frame(const kr_kdtree *model, const kr_pyramid *pyr, const kr_pose *seed,
                         const kr_track_config *cfg, kr_track_result *out)
{
    return kr_track_frame_traced(model, pyr, seed, cfg, out, NULL);
}

void kr_track_plan(const kr_track_config *cfg, const kr_pyramid *pyr, kr_track_step_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    const int top = pyr->levels - 1;
    plan->top = top;
    plan->finest = cfg->finest_level < 0 ? 0 : (cfg->finest_level > top ? top : cfg->finest_level);
    for (int level = top; level >= plan->finest; level--) {
        int k = level - plan->finest;
        plan->iterations[level] = k < KR_MAX_LEVELS ? cfg->iterations[k] : 0;
        kr_track_config lcfg = *cfg;
        lcfg.far_field = cfg->far_field * (float)(1u << k);
        kr_newton_params(&lcfg, cfg->gate * (float)(1u << k), &plan->P[level]);
    }
    plan->max_line_search = cfg->max_line_search;
    plan->armijo_c = cfg->armijo_c;
    plan->converge_rot = cfg->converge_rot;
    plan->converge_trans = cfg->converge_trans;
    plan->damping = TRACK_DAMPING;
    plan->polish_steps = cfg->polish_steps > 0 ? cfg->polish_steps : 0;
    plan->polish_tolerance = cfg->polish_tolerance;
    plan->polish_max_rot = cfg->polish_max_deg * M_PI / 180;
    plan->polish_max_trans = cfg->polish_max_m;
}

kr_status kr_track_frame_on(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                            const kr_pose *seed, const kr_track_config *cfg, kr_track_result *out)
{
    return kr_track_frames_on(dev, model, pyr, seed, 1, cfg, out);
}

/* Seeds tracked per device launch: the probes of one recovery search fit. */
#define SEEDS_PER_LAUNCH 64

kr_status kr_track_frames_on(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                             const kr_pose *seeds, int count, const kr_track_config *cfg,
                             kr_track_result *out)
{
    if (!model || !pyr || !seeds || !cfg || !out || count < 0)
        return kr_error(KR_ERR_INVALID_ARG, "kr_track_frames_on: NULL argument or count < 0");
    kr_gpu_context *gpu =
        dev && kr_device_backend(dev) == KR_BACKEND_CUDA ? kr_device_gpu(dev) : NULL;
    /* Exact nearest neighbours (a test mode) exist on the CPU engine only. */
    if (!gpu || cfg->exact_nn) {
        for (int k = 0; k < count; k++) {
            kr_status s = kr_track_frame(model, pyr, &seeds[k], cfg, &out[k]);
            if (s != KR_OK) return s;
        }
        return KR_OK;
    }
    if (pyr->levels < 1 || pyr->levels > KR_MAX_LEVELS)
        return kr_error(KR_ERR_INVALID_ARG, "kr_track_frame: pyramid with %d levels", pyr->levels);
    if (model->n == 0)
        return kr_error(KR_ERR_EMPTY, "kr_track_frame: the model tree has no points");
    kr_track_step_plan plan;
    kr_track_plan(cfg, pyr, &plan);
    for (int first = 0; first < count; first += SEEDS_PER_LAUNCH) {
        int batch = count - first < SEEDS_PER_LAUNCH ? count - first : SEEDS_PER_LAUNCH;
        kr_track_step_result r[SEEDS_PER_LAUNCH];
        kr_status s = kr_track_cuda(gpu, model, pyr, &plan, seeds + first, batch, r);
        if (s != KR_OK) return s;
        for (int k = 0; k < batch; k++) {
            kr_newton_sums lin;
            memset(&lin, 0, sizeof lin);
            memcpy(lin.F, r[k].F, sizeof lin.F);
            memcpy(lin.g, r[k].g, sizeof lin.g);
            lin.h = r[k].h;
            lin.residual = r[k].residual;
            lin.points = r[k].points;
            lin.inliers = r[k].inliers;
            finish_result(&lin, &r[k].T, r[k].c_cam, r[k].L, r[k].solved != 0, r[k].total_iters,
                          &seeds[first + k], cfg, &out[first + k]);
        }
    }
    return KR_OK;
}

kr_status kr_newton_linearize_on(kr_device *dev, const kr_kdtree *model, const kr_pyramid *pyr,
                                 int level, const kr_pose *pose, const kr_track_config *cfg,
                                 float gate, kr_newton_sums *out)
{
    if (!pyr || level < 0 || level >= pyr->levels)
        return kr_error(KR_ERR_INVALID_ARG, "kr_newton_linearize_on: no pyramid level %d", level);
    kr_gpu_context *gpu =
        dev && kr_device_backend(dev) == KR_BACKEND_CUDA ? kr_device_gpu(dev) : NULL;
    if (!gpu || !cfg || cfg->exact_nn)
        return kr_newton_linearize(model, &pyr->level[level], pose, cfg, gate, out);
    if (!model || !pose || !out)
        return kr_error(KR_ERR_INVALID_ARG, "kr_newton_linearize_on: NULL argument");
    kr_track_point_params P;
    kr_newton_params(cfg, gate, &P);
    kr_track_step_result r;
    kr_status s = kr_track_cuda_linearize_level(gpu, model, pyr, level, pose, &P, &r);
    if (s != KR_OK) return s;
    memset(out, 0, sizeof *out);
    memcpy(out->F, r.F, sizeof out->F);
    memcpy(out->g, r.g, sizeof out->g);
    out->h = r.h;
    out->residual = r.residual;
    out->points = r.points;
    out->inliers = r.inliers;
    return KR_OK;
}
