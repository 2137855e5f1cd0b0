/* Soft-correspondence registration (EM-ICP and Softassign; Tamaki et al.,
 * seeds 001/002; DESIGN.md §5): the per-pair math, the per-row streaming
 * reductions and the annealing schedule, written once for the OpenMP engine
 * (pipeline/register/register_cpu.c) and the CUDA engines (gpu/register*.cu).
 *
 * Notation. Rows i are the moving source points s_i (N of them), columns j
 * the fixed destination points x_j (M). T = (R, t) maps src into dst's frame
 * and d²_ij = ‖x_j − (R s_i + t)‖².
 *
 * EM-ICP (seed §II-C). α_ij = exp(−d²_ij/σ²)/C_i with
 *     C_i = exp(−d₀²/σ²) + Σ_j exp(−d²_ij/σ²)
 * (the seed's eq. 9 sums to n_x+1 and writes exp(−(−d²/σ²)): both typos),
 *     λ_i = Σ_j √α_ij,   x'_i = Σ_j √α_ij x_j / λ_i,
 * and the M-step is Horn weighted by λ_i on the pairs (s_i, x'_i). (The seed's
 * eq. 10 writes λ_i² and an unsquared norm; its algorithm, its code and the
 * CuPy anchor weight by λ_i, and so do we.)
 * Streaming form: √α_ij = e_ij / √C_i with e_ij = exp(−d²_ij/(2σ²)), and
 * exp(−d²/σ²) = e_ij². So one pass over j accumulating
 *     S1 = Σ e², Sh = Σ e, Sx = Σ e x_j
 * gives C_i = S1 + exp(−d₀²/σ²), λ_i = Sh/√C_i and x'_i = Sx/Sh (C_i cancels).
 * To stay finite at small σ (exp(−d²/σ²) underflows float for d > 9σ) every
 * exponent is taken relative to a per-row shift μ (the smallest d² seen so
 * far): e_ij = exp(−(d²_ij − μ)/(2σ²)) ≤ 1 and C'_i = S1 + exp(−(d₀² − μ)/σ²)
 * with C_i = exp(−μ/σ²) C'_i; then λ_i = Sh/√C'_i exactly (the factors
 * exp(−μ/(2σ²)) cancel). When μ drops to μ' the sums are rescaled by
 * f = exp(−(μ − μ')/(2σ²)) (S1 by f²) — the log-sum-exp trick in streaming
 * form; partial sums of the same row merge the same way.
 *
 * Softassign (seed §II-B, Gold et al.). The seed's eq. 3–4 use the unsquared
 * distance and never raise β; Gold et al. use the squared distance and anneal.
 * With temperature T = 1/β:
 *     K_ij = exp(−(d²_ij − α)/T),   slack row and column K = m_o,
 * Sinkhorn alternately scales rows and columns of the (N+1)×(M+1) matrix so
 * that each real row and each real column sums to one (the slack row and
 * column are not normalised themselves). Only the scalings are kept, in log
 * domain: m_ij = exp(log K_ij + u_i + v_j), and
 *     u_i = −LSE(log m_o, LSE_j(log K_ij + v_j)),
 *     v_j = −LSE(log m_o, LSE_i(log K_ij + u_i)),
 * each a streaming log-sum-exp over the other set (stable for any β). The seed
 * keeps the slack entries fixed at m_o after each normalisation instead of
 * scaling them with their row/column; we follow Gold et al., for which this is
 * exactly Sinkhorn on the augmented matrix. u and v restart at 0 at every
 * Horn step (m_ij is recomputed from the new pose, as in the seed).
 * M-step: minimising Σ_ij m_ij ‖x_j − T s_i‖² equals, up to a constant,
 * Σ_i r_i ‖z_i/r_i − T s_i‖² with r_i = Σ_j m_ij and z_i = Σ_j m_ij x_j:
 * Horn weighted by r_i on (s_i, z_i/r_i) — the same per-row form as EM-ICP.
 * After the column step every m_ij ≤ 1, so the M-step pass needs no shift. */
#ifndef KINREG_PIPELINE_REGISTER_SOFTREG_KERNELS_H
#define KINREG_PIPELINE_REGISTER_SOFTREG_KERNELS_H

#include <math.h>

#include "core/kr_hd.h"

enum { KR_REGISTER_METHOD_EMICP = 0, KR_REGISTER_METHOD_SOFTASSIGN = 1 };

/* Everything an engine needs, after the extent scaling (pipeline/register/register.c):
 * lengths in metres, squared lengths in m². */
typedef struct {
    int method;
    /* EM-ICP: σ² from sigma2 down by factor while > sigma2_inf; d02 = d₀². */
    double sigma2, sigma2_inf, sigma2_factor, d02;
    /* Softassign: jmax temperatures from t0 down by t_factor, i0 Horn steps
     * each, i1 Sinkhorn rounds per step; alpha (m²), log of the slack m_o. */
    int jmax, i0, i1;
    double t0, t_factor, alpha, log_m_outlier;
    /* Stop rule: per-step RMS motion below stop_motion (m) for stop_patience
     * steps, while the scale (σ or √T) is below stop_scale (m). */
    double stop_motion, stop_scale;
    int stop_patience;
    /* Source moments for the motion test: mean and mean of s sᵀ. */
    double src_mean[3], src_second[9];
    /* Sums across GPU blocks exact in any order (kr_register_config's
     * deterministic). */
    int exact_sums;
} kr_register_params;

/* The annealing schedule's position; lives on the device in the fused engine. */
typedef struct {
    double temp;      /* σ² (EM-ICP) or T (Softassign) of the next step, m² */
    double used;      /* the one the last step used */
    int outer, inner; /* Softassign: temperature index J, step index I */
    int steps;        /* Horn steps taken */
    int calm;         /* consecutive steps below the motion threshold */
    int done;         /* 1 = schedule finished, 2 = stopped by the rule, −1 = failed */
} kr_register_state;

static inline KR_HD void kr_register_start(const kr_register_params *p, kr_register_state *st)
{
    st->temp = p->method == KR_REGISTER_METHOD_EMICP ? p->sigma2 : p->t0;
    st->used = st->temp;
    st->outer = st->inner = st->steps = st->calm = 0;
    st->done = (p->method == KR_REGISTER_METHOD_EMICP) ? !(p->sigma2 > p->sigma2_inf)
                                                       : (p->jmax < 1 || p->i0 < 1);
}

/* RMS displacement² of the source points between two poses:
 * mean ‖ΔR s + Δt‖² = tr(ΔR E[s sᵀ] ΔRᵀ) + 2 Δtᵀ ΔR E[s] + ‖Δt‖². */
static inline KR_HD double kr_register_motion2(const kr_register_params *p, const double Ra[9],
                                               const double ta[3], const double Rb[9],
                                               const double tb[3])
{
    double dR[9], dt[3], m2 = 0;
    for (int k = 0; k < 9; k++)
        dR[k] = Rb[k] - Ra[k];
    for (int k = 0; k < 3; k++)
        dt[k] = tb[k] - ta[k];
    for (int r = 0; r < 3; r++) {
        double rm = 0;
        for (int a = 0; a < 3; a++) {
            rm += dR[3 * r + a] * p->src_mean[a];
            for (int b = 0; b < 3; b++)
                m2 += dR[3 * r + a] * p->src_second[3 * a + b] * dR[3 * r + b];
        }
        m2 += 2 * dt[r] * rm + dt[r] * dt[r];
    }
    return m2 > 0 ? m2 : 0;
}

/* After a Horn step that moved the source points by `motion2` (RMS², m²):
 * applies the stop rule and advances the schedule. */
static inline KR_HD void kr_register_advance(const kr_register_params *p, kr_register_state *st,
                                             double motion2)
{
    st->steps++;
    st->used = st->temp;
    double scale2 = st->temp; /* σ² or T: the current length scale squared */
    if (p->stop_motion > 0 && motion2 < p->stop_motion * p->stop_motion &&
        scale2 < p->stop_scale * p->stop_scale)
        st->calm++;
    else
        st->calm = 0;
    if (p->method == KR_REGISTER_METHOD_EMICP) {
        st->temp *= p->sigma2_factor;
        if (!(st->temp > p->sigma2_inf)) st->done = 1;
    } else {
        if (++st->inner >= p->i0) {
            st->inner = 0;
            st->temp *= p->t_factor;
            if (++st->outer >= p->jmax) st->done = 1;
        }
    }
    if (!st->done && p->stop_patience > 0 && st->calm >= p->stop_patience) st->done = 2;
}

/* exp(x) for x <= 0 in float, and exactly 0 below KR_REGISTER_EXP_CUT: every sum
 * it feeds holds a term equal to 1 (the shift), so what is dropped is below
 * M·e⁻⁴⁰ ≈ M·4e-18 relative — and no subnormal float is ever produced (e² is
 * still normal), which on the CPU would cost a hundred cycles each. The
 * device uses the special-function unit; the host a branch-free Cody–Waite
 * reduction and a degree-6 polynomial (relative error < 2e-7) that the
 * compiler vectorises, unlike libm's expf. */
#define KR_REGISTER_EXP_CUT (-40.0f)
static inline KR_HD float kr_register_expf(float x)
{
#ifdef __CUDA_ARCH__
    return x < KR_REGISTER_EXP_CUT ? 0.0f : __expf(x);
#else
    float xc = x > KR_REGISTER_EXP_CUT ? x : KR_REGISTER_EXP_CUT; /* not fmaxf: a libm call */
    /* Round to nearest by the 1.5·2²³ trick (vectorises, unlike floorf). */
    float k = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;
    float r = xc - k * 0.693359375f;
    r = r + k * 2.12194440e-4f;
    float pz = 1.0f / 720.0f;
    pz = pz * r + 1.0f / 120.0f;
    pz = pz * r + 1.0f / 24.0f;
    pz = pz * r + 1.0f / 6.0f;
    pz = pz * r + 0.5f;
    pz = pz * r + 1.0f;
    pz = pz * r + 1.0f;
    union {
        float f;
        int i;
    } u;
    u.i = ((int)k + 127) << 23;
    return x < KR_REGISTER_EXP_CUT ? 0.0f : pz * u.f;
#endif
}

/* d²_ij from the moved source point q = R s_i + t. */
static inline KR_HD float kr_register_sqdist(const float q[3], float x, float y, float z)
{
    float dx = x - q[0], dy = y - q[1], dz = z - q[2];
    return dx * dx + dy * dy + dz * dz;
}

/* ---- EM-ICP: one row's streaming sums ------------------------------------ */

typedef struct {
    float mu;     /* shift: smallest d² seen (m²); +inf while empty */
    float s1, sh; /* Σ e², Σ e with e = exp(−(d² − mu)/(2σ²)) */
    float sx[3];  /* Σ e x_j */
} kr_register_emicp_row;

static inline KR_HD void kr_register_emicp_row_init(kr_register_emicp_row *r)
{
    r->mu = INFINITY;
    r->s1 = r->sh = 0;
    r->sx[0] = r->sx[1] = r->sx[2] = 0;
}

/* Moves the shift down to mu (mu <= r->mu); half_inv = 1/(2σ²). */
static inline KR_HD void kr_register_emicp_row_shift(kr_register_emicp_row *r, float mu,
                                                     float half_inv)
{
    float f = r->sh > 0 ? kr_register_expf(-(r->mu - mu) * half_inv) : 0.0f;
    r->s1 *= f * f;
    r->sh *= f;
    for (int k = 0; k < 3; k++)
        r->sx[k] *= f;
    r->mu = mu;
}

/* Adds column x_j at squared distance d2. */
static inline KR_HD void kr_register_emicp_row_add(kr_register_emicp_row *r, float d2, float x,
                                                   float y, float z, float half_inv)
{
    if (d2 < r->mu) kr_register_emicp_row_shift(r, d2, half_inv);
    float e = kr_register_expf(-(d2 - r->mu) * half_inv);
    r->s1 += e * e;
    r->sh += e;
    r->sx[0] += e * x;
    r->sx[1] += e * y;
    r->sx[2] += e * z;
}

/* a += b (two partial sums of one row). */
static inline KR_HD void kr_register_emicp_row_merge(kr_register_emicp_row *a,
                                                     const kr_register_emicp_row *b, float half_inv)
{
    if (!(b->sh > 0)) return;
    if (!(a->sh > 0)) {
        *a = *b;
        return;
    }
    float f;
    if (b->mu < a->mu) {
        kr_register_emicp_row_shift(a, b->mu, half_inv);
        f = 1.0f;
    } else {
        f = kr_register_expf(-(b->mu - a->mu) * half_inv);
    }
    a->s1 += b->s1 * f * f;
    a->sh += b->sh * f;
    for (int k = 0; k < 3; k++)
        a->sx[k] += b->sx[k] * f;
}

/* The row's Horn weight λ_i and pseudo-point x'_i. inv_s2 = 1/σ². */
static inline KR_HD void kr_register_emicp_row_finish(const kr_register_emicp_row *r, double d02,
                                                      double inv_s2, double *w, double p[3])
{
    if (!(r->sh > 0)) {
        *w = 0;
        p[0] = p[1] = p[2] = 0;
        return;
    }
    double c = (double)r->s1 + exp(-(d02 - (double)r->mu) * inv_s2); /* C'_i */
    *w = (double)r->sh / sqrt(c);                                    /* 0 when c = inf */
    /* One reciprocal, not three divisions: on the GPU a double division is
     * a long dependent sequence, and this runs once per row on one lane. */
    const double inv_sh = 1.0 / (double)r->sh;
    for (int k = 0; k < 3; k++)
        p[k] = (double)r->sx[k] * inv_sh;
}

/* ---- Softassign: streaming log-sum-exp ----------------------------------- */

typedef struct {
    float mx;  /* largest exponent seen */
    float sum; /* Σ exp(exponent − mx) */
} kr_register_lse;

static inline KR_HD void kr_register_lse_init(kr_register_lse *l, float first)
{
    l->mx = first;
    l->sum = 1.0f;
}

static inline KR_HD void kr_register_lse_add(kr_register_lse *l, float v)
{
    if (v > l->mx) {
        l->sum = l->sum * kr_register_expf(l->mx - v) + 1.0f;
        l->mx = v;
    } else {
        l->sum += kr_register_expf(v - l->mx);
    }
}

static inline KR_HD void kr_register_lse_merge(kr_register_lse *a, const kr_register_lse *b)
{
    if (!(b->sum > 0)) return;
    if (b->mx > a->mx) {
        a->sum = a->sum * kr_register_expf(a->mx - b->mx) + b->sum;
        a->mx = b->mx;
    } else {
        a->sum += b->sum * kr_register_expf(b->mx - a->mx);
    }
}

static inline KR_HD float kr_register_lse_value(const kr_register_lse *l)
{
    return l->mx + logf(l->sum);
}

/* log K_ij = −(d² − α)/T, with inv_t = 1/T. */
static inline KR_HD float kr_register_softassign_logk(float d2, float alpha, float inv_t)
{
    return -(d2 - alpha) * inv_t;
}

/* ---- the M-step's moments ------------------------------------------------- */

/* Adds the pair (s, p) with weight w to the 16 Horn moments
 * (core/horn_kernels.h): W, Σ w s, Σ w p, Σ w s pᵀ. */
static inline KR_HD void kr_register_moments_add(double mom[16], double w, const double s[3],
                                                 const double p[3])
{
    if (!(w > 0)) return;
    mom[0] += w;
    for (int a = 0; a < 3; a++) {
        mom[1 + a] += w * s[a];
        mom[4 + a] += w * p[a];
        for (int b = 0; b < 3; b++)
            mom[7 + 3 * a + b] += w * s[a] * p[b];
    }
}

/* q = R s + t in float for the pair loops. */
static inline KR_HD void kr_register_move(const float R[9], const float t[3], const float s[3],
                                          float q[3])
{
    for (int k = 0; k < 3; k++)
        q[k] = R[3 * k] * s[0] + R[3 * k + 1] * s[1] + R[3 * k + 2] * s[2] + t[k];
}

#endif
