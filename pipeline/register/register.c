/* kr_register: validates the two point sets, scales the seed's schedule to
 * their size, centres them (so that every engine accumulates small numbers),
 * dispatches to an engine — OpenMP (register_cpu.c), the seed's cuBLAS
 * formulation or the fused streaming kernels (gpu/register*.cu) — and
 * measures the result's quality with an exact nearest-neighbour search
 * (bounded at the extent, on a sample of the source: quality()). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/register/coarse_to_fine.h"
#include "pipeline/register/softreg_kernels.h"
#include "pipeline/register/register_cuda.h"
#include "kinreg/kdtree.h"
#include "kinreg/register.h"
#include "pipeline/register/register_cpu.h"
#include "pipeline/register/register_newton.h"
#include "pipeline/register/register_search.h"
#include "pipeline/register/register_verdict.h"

/* Softassign's constants are squared centimetres for a 10 cm object. */
#define SOFTASSIGN_UNIT2 1e-4

void kr_register_config_default(kr_register_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->method = KR_REG_AUTO;
    cfg->engine = KR_REG_ENGINE_AUTO;
    cfg->extent = 0;
    cfg->sigma2 = 0.01;
    cfg->sigma2_inf = 1e-5;
    cfg->sigma2_factor = 0.9;
    cfg->d02 = 0.01;
    cfg->jmax = 100;
    cfg->i0 = 5;
    cfg->i1 = 3;
    cfg->alpha = 3;
    cfg->t0 = 100;
    cfg->t_factor = 0.95;
    cfg->m_outlier = 0;
    cfg->coarse_points = 512;
    cfg->fine_temperatures = 6;
    cfg->stop_motion = 1e-4;
    cfg->stop_patience = 3;
    cfg->stop_sigma_ratio = 0.1;
    cfg->inlier_ratio = 0.1;
    cfg->hypotheses = 20;
    cfg->candidates = 3;
    cfg->soft_method = KR_REG_SOFTASSIGN;
    cfg->soft_points = 600;
    cfg->min_overlap = 0.2;
}

static const char *const method_names[] = {"emicp", "softassign", "newton", "auto"};
static const char *const engine_names[] = {"auto", "cpu", "cublas", "fused"};

const char *kr_reg_method_name(kr_reg_method m)
{
    return (unsigned)m < 4 ? method_names[m] : "?";
}

const char *kr_reg_engine_name(kr_reg_engine e)
{
    return (unsigned)e < 4 ? engine_names[e] : "?";
}

kr_status kr_reg_method_parse(const char *text, kr_reg_method *out)
{
    for (int i = 0; text && i < 4; i++)
        if (strcmp(text, method_names[i]) == 0) {
            if (out) *out = (kr_reg_method)i;
            return KR_OK;
        }
    return kr_error(KR_ERR_INVALID_ARG,
                    "unknown registration method '%s' (auto, emicp, softassign or newton)",
                    text ? text : "(null)");
}

kr_status kr_reg_engine_parse(const char *text, kr_reg_engine *out)
{
    for (int i = 0; text && i < 4; i++)
        if (strcmp(text, engine_names[i]) == 0) {
            if (out) *out = (kr_reg_engine)i;
            return KR_OK;
        }
    return kr_error(KR_ERR_INVALID_ARG,
                    "unknown registration engine '%s' (auto, cpu, cublas or fused)",
                    text ? text : "(null)");
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int finite_pos(double x)
{
    return x > 0 && isfinite(x);
}

static kr_status check_config(const kr_register_config *c)
{
    if ((unsigned)c->method > KR_REG_AUTO)
        return kr_error(KR_ERR_INVALID_ARG, "register: unknown method %d", (int)c->method);
    if (c->method == KR_REG_AUTO &&
        (c->hypotheses < 0 || c->hypotheses > 200 || c->candidates < 0 || c->candidates > 8 ||
         c->soft_points < 0 ||
         (c->soft_method != KR_REG_EMICP && c->soft_method != KR_REG_SOFTASSIGN &&
          c->soft_method != KR_REG_NEWTON) ||
         !(c->min_overlap >= 0 && c->min_overlap <= 1)))
        return kr_error(KR_ERR_INVALID_ARG,
                        "register: auto needs hypotheses 0..200, candidates 0..8, soft_points >= "
                        "0, a soft method (emicp, softassign, or newton for none) and min_overlap "
                        "in [0, 1]");
    if ((unsigned)c->engine > KR_REG_ENGINE_FUSED)
        return kr_error(KR_ERR_INVALID_ARG, "register: unknown engine %d", (int)c->engine);
    if (!(c->extent >= 0) || !isfinite(c->extent))
        return kr_error(KR_ERR_INVALID_ARG, "register: extent must be >= 0 (0 = measure), got %g",
                        c->extent);
    if (c->method == KR_REG_NEWTON) {
        /* its gates come from the extent alone */
    } else if (c->method == KR_REG_EMICP ||
               (c->method == KR_REG_AUTO && c->soft_method == KR_REG_EMICP)) {
        if (!finite_pos(c->sigma2) || !finite_pos(c->sigma2_inf) || !finite_pos(c->d02))
            return kr_error(
                KR_ERR_INVALID_ARG,
                "register: EM-ICP needs sigma2, sigma2_inf and d02 > 0 (got %g, %g, %g)", c->sigma2,
                c->sigma2_inf, c->d02);
        if (!(c->sigma2_factor > 0 && c->sigma2_factor < 1))
            return kr_error(KR_ERR_INVALID_ARG, "register: sigma2_factor must be in (0, 1), got %g",
                            c->sigma2_factor);
    } else {
        if (c->jmax < 1 || c->i0 < 1 || c->i1 < 1)
            return kr_error(KR_ERR_INVALID_ARG,
                            "register: Softassign needs jmax, i0, i1 >= 1 (got %d, %d, %d)",
                            c->jmax, c->i0, c->i1);
        if (!finite_pos(c->t0) || !(c->alpha >= 0) || !isfinite(c->alpha) ||
            !(c->t_factor > 0 && c->t_factor <= 1) || !(c->m_outlier >= 0) ||
            !isfinite(c->m_outlier))
            return kr_error(KR_ERR_INVALID_ARG,
                            "register: Softassign needs t0 > 0, alpha >= 0, t_factor in (0, 1], "
                            "m_outlier >= 0 (got %g, %g, %g, %g)",
                            c->t0, c->alpha, c->t_factor, c->m_outlier);
        if (c->coarse_points != 0 && (c->coarse_points < 64 || c->fine_temperatures < 1))
            return kr_error(KR_ERR_INVALID_ARG,
                            "register: Softassign's coarse_points must be 0 (off) or >= 64, with "
                            "fine_temperatures >= 1 (got %d, %d)",
                            c->coarse_points, c->fine_temperatures);
    }
    if (!(c->stop_motion >= 0) || !isfinite(c->stop_motion) || c->stop_patience < 0 ||
        !(c->stop_sigma_ratio >= 0) || !isfinite(c->stop_sigma_ratio) || !(c->inlier_ratio > 0) ||
        !isfinite(c->inlier_ratio))
        return kr_error(KR_ERR_INVALID_ARG,
                        "register: need stop_motion, stop_sigma_ratio >= 0, stop_patience >= 0 and "
                        "inlier_ratio > 0");
    return KR_OK;
}

/* Centroid, RMS radius and whether the set spans at least a plane. */
static kr_status inspect(const char *name, const float *p, size_t n, double c[3], double *rms)
{
    if (n < 3)
        return kr_error(KR_ERR_EMPTY, "register: the %s set has %zu points, need at least 3", name,
                        n);
    c[0] = c[1] = c[2] = 0;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            if (!isfinite(p[3 * i + k]))
                return kr_error(KR_ERR_INVALID_ARG,
                                "register: %s point %zu is not finite; drop invalid points first",
                                name, i);
            c[k] += p[3 * i + k];
        }
    for (int k = 0; k < 3; k++)
        c[k] /= (double)n;
    double C[9] = {0};
    for (size_t i = 0; i < n; i++) {
        double d[3] = {p[3 * i] - c[0], p[3 * i + 1] - c[1], p[3 * i + 2] - c[2]};
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                C[3 * a + b] += d[a] * d[b] / (double)n;
    }
    double ev[3];
    kr_eigen_sym(3, C, ev, NULL);
    *rms = sqrt(fmax(ev[0] + ev[1] + ev[2], 0));
    if (!(ev[1] > 1e-10 * ev[2]) || !(ev[2] > 0))
        return kr_error(KR_ERR_EMPTY,
                        "register: the %s set's %zu points lie on one line or at one place; "
                        "the rotation is undetermined",
                        name, n);
    return KR_OK;
}

static kr_status centred_copy(const float *p, size_t n, const double c[3], float **out)
{
    float *q = malloc(3 * n * sizeof *q);
    if (!q) return kr_error(KR_ERR_NOMEM, "register: cannot copy %zu points", n);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            q[3 * i + k] = (float)(p[3 * i + k] - c[k]);
    *out = q;
    return KR_OK;
}

/* RMS of the nearest-neighbour distances, each capped at `cap` (the
 * extent), and the share within `inlier`, over at most QUALITY_POINTS
 * evenly spread source points. From a failed pose the moved points lie far
 * from every destination point, and an exact search from each walks much
 * of the tree: on two whole depth frames (230 000 points each) all of them
 * took 20 s of a 21 s Newton run. */
#define QUALITY_POINTS 20000
static kr_status quality(const kr_register_config *cfg, const float *src, size_t n,
                         const float *dst, size_t m, kr_register_result *r)
{
    kr_kdtree *tree = NULL;
    kr_status s = kr_kdtree_build(&tree, dst, NULL, m);
    if (s != KR_OK) return s;
    const float cap2 = r->extent > 0 ? (float)(r->extent * r->extent) : INFINITY;
    const double inlier = r->inlier_distance;
    const size_t step = n > QUALITY_POINTS ? n / QUALITY_POINTS : 1, used = (n + step - 1) / step;
    double sum = 0;
    size_t in = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum, in)
    for (size_t i = 0; i < n; i += step) {
        double p[3] = {src[3 * i], src[3 * i + 1], src[3 * i + 2]}, q[3];
        kr_pose_apply(&r->pose, p, q);
        float qf[3] = {(float)q[0], (float)q[1], (float)q[2]}, d2;
        kr_kdtree_nearest_within(tree, qf, cap2, &d2);
        sum += d2;
        in += d2 <= inlier * inlier;
    }
    r->rms = sqrt(sum / (double)used);
    r->inlier_fraction = (double)in / (double)used;
    /* The verdict's measures, where the method did not take them itself (the
     * search does, on the sets it registered). */
    if (!(r->spacing > 0)) {
        r->spacing = kr_register_spacing(tree, dst, m);
        kr_register_overlap(tree, src, n, &r->pose, KR_REGISTER_OVERLAP_SPACINGS * r->spacing,
                            QUALITY_POINTS, &r->overlap, &r->residual);
        kr_register_judge(cfg, r);
    }
    kr_kdtree_destroy(&tree);
    return KR_OK;
}

static void make_params(const kr_register_config *c, double extent, const float *src, size_t n,
                        kr_register_params *p)
{
    double k2 = (extent / KR_REG_SEED_EXTENT) * (extent / KR_REG_SEED_EXTENT);
    memset(p, 0, sizeof *p);
    p->method =
        c->method == KR_REG_EMICP ? KR_REGISTER_METHOD_EMICP : KR_REGISTER_METHOD_SOFTASSIGN;
    p->sigma2 = c->sigma2 * k2;
    p->sigma2_inf = c->sigma2_inf * k2;
    p->sigma2_factor = c->sigma2_factor;
    p->d02 = c->d02 * k2;
    p->jmax = c->jmax;
    p->i0 = c->i0;
    p->i1 = c->i1;
    p->t0 = c->t0 * SOFTASSIGN_UNIT2 * k2;
    p->t_factor = c->t_factor;
    p->alpha = c->alpha * SOFTASSIGN_UNIT2 * k2;
    double mo = c->m_outlier > 0 ? c->m_outlier : exp(-1.0) / sqrt(c->t0);
    p->log_m_outlier = log(mo);
    p->stop_motion = c->stop_motion * extent;
    p->stop_scale = c->stop_sigma_ratio * extent;
    p->stop_patience = c->stop_patience;
    p->exact_sums = c->deterministic;
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            p->src_mean[a] += src[3 * i + a] / (double)n;
            for (int b = 0; b < 3; b++)
                p->src_second[3 * a + b] += (double)src[3 * i + a] * src[3 * i + b] / (double)n;
        }
}

/* The schedule p from (R, t) (in/out) on one engine. */
static kr_status run_engine(kr_device *dev, kr_reg_engine engine, const kr_register_params *p,
                            const float *src, size_t n, const float *dst, size_t m, double R[9],
                            double t[3], kr_register_state *st)
{
    if (engine == KR_REG_ENGINE_CPU)
        return kr_register_cpu(p, dev ? kr_device_threads(dev) : 1, src, n, dst, m, R, t, st);
    return kr_register_cuda(kr_device_gpu(dev), engine == KR_REG_ENGINE_CUBLAS, p, src, n, dst, m,
                            R, t, st);
}

/* The first lv->coarse_temperatures of Softassign's schedule on the thinned
 * sets (pipeline/register/coarse_to_fine.h), from (R, t) (in/out). */
static kr_status coarse_part(kr_device *dev, const kr_register_config *cfg, kr_reg_engine engine,
                             double extent, const float *src, size_t n, const float *dst, size_t m,
                             const kr_register_levels *lv, double R[9], double t[3], int *steps)
{
    size_t nc = 0, mc = 0;
    float *sc = kr_register_thin(src, n, lv->src_stride, &nc);
    float *dc = kr_register_thin(dst, m, lv->dst_stride, &mc);
    kr_status s = KR_OK;
    if (!sc || !dc) {
        s = kr_error(KR_ERR_NOMEM, "register: cannot thin %zu + %zu points", n, m);
    } else {
        kr_register_params p;
        make_params(cfg, extent, sc, nc, &p);
        p.jmax = lv->coarse_temperatures;
        kr_register_state st;
        s = run_engine(dev, engine, &p, sc, nc, dc, mc, R, t, &st);
        if (s == KR_OK) *steps = st.steps;
    }
    free(sc);
    free(dc);
    return s;
}

/* EM-ICP or Softassign from init on an engine (resolved, never AUTO), with
 * both sets centred on cs and cd (so that every engine accumulates small
 * numbers); st gets the schedule's final state. */
static kr_status soft_engine(kr_device *dev, const kr_register_config *cfg, kr_reg_engine engine,
                             const float *src, size_t n, const float *dst, size_t m,
                             const kr_pose *init, double extent, const double cs[3],
                             const double cd[3], kr_pose *out, kr_register_state *st)
{
    float *sc = NULL, *dc = NULL;
    kr_status s;
    if ((s = centred_copy(src, n, cs, &sc)) != KR_OK) return s;
    if ((s = centred_copy(dst, m, cd, &dc)) != KR_OK) {
        free(sc);
        return s;
    }
    kr_register_params p;
    make_params(cfg, extent, sc, n, &p);

    /* In centred coordinates dst' = R src' + t' with t' = t + R c_s − c_d. */
    kr_pose T0 = init ? *init : kr_pose_identity();
    double R[9], t[3], Rcs[3];
    memcpy(R, T0.R, sizeof R);
    kr_pose_rotate(&T0, cs, Rcs);
    for (int k = 0; k < 3; k++)
        t[k] = T0.t[k] + Rcs[k] - cd[k];

    kr_register_levels lv =
        kr_register_levels_plan(&p, n, m, cfg->coarse_points, cfg->fine_temperatures);
    int coarse_steps = 0;
    if (lv.coarse_temperatures > 0) {
        s = coarse_part(dev, cfg, engine, extent, sc, n, dc, m, &lv, R, t, &coarse_steps);
        kr_register_params_after(&p, lv.coarse_temperatures);
    }
    if (s == KR_OK) s = run_engine(dev, engine, &p, sc, n, dc, m, R, t, st);
    if (s == KR_OK) st->steps += coarse_steps;
    free(sc);
    free(dc);
    if (s != KR_OK) return s;

    kr_pose T;
    memcpy(T.R, R, sizeof R);
    kr_pose_orthonormalize(&T);
    double Rc[3];
    kr_pose_rotate(&T, cs, Rc);
    for (int k = 0; k < 3; k++)
        T.t[k] = t[k] - Rc[k] + cd[k];
    *out = T;
    return KR_OK;
}

static void centroid(const float *p, size_t n, double c[3])
{
    c[0] = c[1] = c[2] = 0;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            c[k] += p[3 * i + k] / (double)n;
}

/* The soft stage of the search (register_search.h): cfg's method, extent
 * and engine already set. */
static kr_status soft_run(kr_device *dev, const kr_register_config *cfg, const float *src, size_t n,
                          const float *dst, size_t m, const kr_pose *init, kr_pose *out, int *steps)
{
    double cs[3], cd[3];
    centroid(src, n, cs);
    centroid(dst, m, cd);
    kr_register_state st;
    kr_status s =
        soft_engine(dev, cfg, cfg->engine, src, n, dst, m, init, cfg->extent, cs, cd, out, &st);
    if (s == KR_OK) *steps = st.steps;
    return s;
}

/* The Newton method: the tracker's engines (the CPU's, or the device's,
 * which is fused: one graph of kernels per level), the same quality figures. */
static kr_status register_newton(kr_device *dev, const kr_register_config *cfg,
                                 kr_reg_engine engine, const float *src, size_t n, const float *dst,
                                 size_t m, const kr_pose *init, double extent,
                                 kr_register_result *out)
{
    if (engine == KR_REG_ENGINE_CUBLAS)
        return kr_error(KR_ERR_INVALID_ARG,
                        "register: the cublas engine is EM-ICP's and Softassign's (the seed's "
                        "N x M matrix); newton runs on the cpu or fused engine");
    kr_register_result r;
    memset(&r, 0, sizeof r);
    r.pose = init ? *init : kr_pose_identity();
    r.extent = extent;
    r.inlier_distance = cfg->inlier_ratio * extent;
    r.engine = engine;
    double t0 = now_seconds();
    kr_status s = kr_register_newton(engine == KR_REG_ENGINE_CPU ? NULL : dev, src, n, dst, m,
                                     extent, &r.pose, &r.iterations);
    r.seconds = now_seconds() - t0;
    if (s != KR_OK) return s;
    if (!cfg->pose_only && (s = quality(cfg, src, n, dst, m, &r)) != KR_OK) return s;
    *out = r;
    return KR_OK;
}

kr_status kr_register(kr_device *dev, const kr_register_config *cfg, const float *src, size_t n,
                      const float *dst, size_t m, const kr_pose *init, kr_register_result *out)
{
    if (!out || (!src && n) || (!dst && m))
        return kr_error(KR_ERR_INVALID_ARG, "kr_register: NULL argument");
    kr_register_config defaults;
    if (!cfg) {
        kr_register_config_default(&defaults);
        cfg = &defaults;
    }
    kr_status s = check_config(cfg);
    if (s != KR_OK) return s;
    if (init) {
        for (int k = 0; k < 9; k++)
            if (!isfinite(init->R[k]))
                return kr_error(KR_ERR_INVALID_ARG, "kr_register: the initial pose is not finite");
        for (int k = 0; k < 3; k++)
            if (!isfinite(init->t[k]))
                return kr_error(KR_ERR_INVALID_ARG, "kr_register: the initial pose is not finite");
    }
    double cs[3], cd[3], rs, rd;
    if ((s = inspect("source", src, n, cs, &rs)) != KR_OK) return s;
    if ((s = inspect("destination", dst, m, cd, &rd)) != KR_OK) return s;

    kr_reg_engine engine = cfg->engine;
    kr_gpu_context *gpu = dev ? kr_device_gpu(dev) : NULL;
    /* AUTO: the fused engine on a device (O(N + M) memory, faster than the
     * cuBLAS one for both methods), else the CPU. */
    if (engine == KR_REG_ENGINE_AUTO) engine = gpu ? KR_REG_ENGINE_FUSED : KR_REG_ENGINE_CPU;
    if (engine != KR_REG_ENGINE_CPU && !gpu)
        return kr_error(KR_ERR_NO_DEVICE,
                        "register: the %s engine needs a CUDA device; create the kr_device with "
                        "backend cuda (or use engine cpu)",
                        kr_reg_engine_name(engine));

    double extent = cfg->extent > 0 ? cfg->extent : rd;
    if (cfg->method == KR_REG_NEWTON)
        return register_newton(dev, cfg, engine, src, n, dst, m, init, extent, out);
    if (cfg->method == KR_REG_AUTO) {
        kr_register_result r;
        if ((s = kr_register_search(dev, cfg, engine, src, n, dst, m, init, extent, soft_run,
                                    &r)) != KR_OK)
            return s;
        if (!cfg->pose_only && (s = quality(cfg, src, n, dst, m, &r)) != KR_OK) return s;
        *out = r;
        return KR_OK;
    }
    kr_register_state st;
    kr_pose T;
    double t_start = now_seconds();
    s = soft_engine(dev, cfg, engine, src, n, dst, m, init, extent, cs, cd, &T, &st);
    double seconds = now_seconds() - t_start;
    if (s != KR_OK) return s;

    kr_register_result r;
    memset(&r, 0, sizeof r);
    r.pose = T;
    r.iterations = st.steps;
    r.stopped_early = st.done == 2;
    r.final_sigma2 = st.used;
    r.extent = extent;
    r.inlier_distance = cfg->inlier_ratio * extent;
    r.seconds = seconds;
    r.engine = engine;
    if (!cfg->pose_only && (s = quality(cfg, src, n, dst, m, &r)) != KR_OK) return s;
    *out = r;
    return KR_OK;
}
