/* Per-point math of the k-d tree Newton method (DESIGN.md §5), written once for
 * the OpenMP loop (pipeline/track/newton.c) and the CUDA kernel (gpu/).
 *
 * Derivation. A cell's approximant of the squared distance is
 *   d²(q) = qᵀA q − 2bᵀq + c,  b = A s*,  c = s*ᵀA s*  (= (q − s*)ᵀA(q − s*)).
 * A small motion x = (θ, t) moves q to q + Q x with Q = [−[q]× | I]
 * (q + θ×q + t). Substituting,
 *   d²(q + Qx) = xᵀ QᵀAQ x − 2 (Qᵀ(b − A q))ᵀ x + d²(q),
 * so F = Σ QᵀAQ, g = Σ Qᵀ(b − A q), h = Σ d²(q), the gradient of h is −2g and
 * the Newton step solves F x = g. (The seed paper prints g = Qᵀb + QᵀAᵀq; the
 * sign of the second term is a typo.) Qᵀ = [[q]× ; I] because [q]×ᵀ = −[q]×.
 *
 * Near field, A = n nᵀ: QᵀAQ = J Jᵀ with J = Qᵀn = (q × n, n), and with the
 * residual r = n·(s* − q): g-term = J r, h-term = r². One rank-one update.
 *
 * Far field, A = I: QᵀQ = [ |q|²I − qqᵀ   [q]× ]      g-term = (q × s*, s* − q),
 *                         [ −[q]×         I    ],     h-term = |q − s*|².
 * Its sum depends on q only through Σ1, Σq and Σqqᵀ, so far-field points add
 * ten moments instead of a 6×6 outer product; kr_track_acc_finish assembles F.
 *
 * Between the two (AUTO), A = (1 − w) n nᵀ + w I with a weight w rising from 0
 * to 1 as |q − s*| goes from the far-field distance to twice it: the near
 * terms scaled by 1 − w plus the far moments weighted by w (kr_track_classify_pair).
 *
 * Depth noise. A Kinect's depth is quantised in disparity, so its noise
 * grows as z²: a step of depth_step·z² (2.2 cm at 2.7 m). Each point carries
 * a noise scale s = max(1, noise·z²), noise = gate_steps·depth_step/gate,
 * with z its camera-frame depth: its residual is measured in units of s, so
 * its gate and far-field distance are s times the level's and its term
 * weighs 1/s² (inverse variance). z does not depend on the pose being
 * linearised, so s is a constant of the point and every formula above holds
 * with the term multiplied by 1/s²; an outlier costs gate²·s²/s² = gate²,
 * and the term stays continuous at its gate.
 *
 * Everything is in world coordinates: q = R p + t with the pose being
 * linearised, the frame normal rotated as R n. */
#ifndef KINREG_PIPELINE_TRACK_NEWTON_KERNELS_H
#define KINREG_PIPELINE_TRACK_NEWTON_KERNELS_H

#include "core/kr_hd.h"

/* Accumulation type: double on the CPU; a CUDA twin may define it as float
 * before including this header. */
#ifndef KR_TRACK_REAL
#define KR_TRACK_REAL double
#endif
typedef KR_TRACK_REAL kr_track_real;

/* A point's fate, and the approximant modes (same values as kr_quad_mode). */
enum { KR_TRACK_OUTLIER = 0, KR_TRACK_INLIER = 1 };
enum { KR_TRACK_MODE_AUTO = 0, KR_TRACK_MODE_PLANE = 1, KR_TRACK_MODE_POINT = 2 };

typedef struct {
    kr_track_real gate2;      /* squared gate: farther pairs are outliers */
    kr_track_real far;        /* far-field distance (AUTO): blend to A = I over [far, 2 far] */
    kr_track_real cos_normal; /* smallest accepted cos(angle) between normals */
    kr_track_real noise;      /* noise scale s = max(1, noise·z²) at camera depth z (0: s = 1) */
    int mode;                 /* KR_TRACK_MODE_* (same values as kr_quad_mode) */
} kr_track_point_params;

/* Per-thread (or per-block) sums. F of the near field is kept as the upper
 * triangle of the 6×6 (21 values, row by row). */
typedef struct {
    kr_track_real Fp[21], gp[6];                  /* near-field sums */
    kr_track_real m0, m1[3], m2[6], gr[3], gt[3]; /* far-field moments, weighted by w: Σ1, Σq, Σqqᵀ
                                                  (xx xy xz yy yz zz), Σ q×s*, Σ(s*−q) */
    kr_track_real h;                              /* objective, outliers included at gate² each */
    kr_track_real res; /* Σ φ/s² over inliers (for the RMS residual) */
    int points, inliers;
} kr_track_acc;

static inline KR_HD void kr_track_acc_zero(kr_track_acc *a)
{
    for (int i = 0; i < 21; i++)
        a->Fp[i] = 0;
    for (int i = 0; i < 6; i++)
        a->gp[i] = 0;
    a->m0 = 0;
    for (int i = 0; i < 3; i++)
        a->m1[i] = a->gr[i] = a->gt[i] = 0;
    for (int i = 0; i < 6; i++)
        a->m2[i] = 0;
    a->h = a->res = 0;
    a->points = a->inliers = 0;
}

static inline KR_HD void kr_track_acc_add(kr_track_acc *a, const kr_track_acc *b)
{
    for (int i = 0; i < 21; i++)
        a->Fp[i] += b->Fp[i];
    for (int i = 0; i < 6; i++)
        a->gp[i] += b->gp[i];
    a->m0 += b->m0;
    for (int i = 0; i < 3; i++) {
        a->m1[i] += b->m1[i];
        a->gr[i] += b->gr[i];
        a->gt[i] += b->gt[i];
    }
    for (int i = 0; i < 6; i++)
        a->m2[i] += b->m2[i];
    a->h += b->h;
    a->res += b->res;
    a->points += b->points;
    a->inliers += b->inliers;
}

/* q = R p + t (R row-major). */
static inline KR_HD void kr_track_transform(const kr_track_real R[9], const kr_track_real t[3],
                                            const float p[3], kr_track_real q[3])
{
    for (int r = 0; r < 3; r++)
        q[r] = R[3 * r] * p[0] + R[3 * r + 1] * p[1] + R[3 * r + 2] * p[2] + t[r];
}

/* One point's classification against its cell. */
typedef struct {
    kr_track_real dist2; /* |q − s*|² */
    kr_track_real w, dw; /* far-field weight (A = (1 − w) n nᵀ + w I) and dw/dd, d = |q − s*| */
    kr_track_real wt;    /* the point's weight 1/s² (noise scale s) */
} kr_track_pair_class;

static inline KR_HD kr_track_real kr_track_smoothstep(kr_track_real u)
{
    return u <= 0 ? 0 : (u >= 1 ? 1 : u * u * (3 - 2 * u));
}

/* Gating and the approximant for world point q against cell (s, n)
 * (kr_kdtree_cell layout: s = (s*, ·), n = (n, has_normal)); z is the point's
 * camera-frame depth and nf its normal in the camera frame. Returns
 * KR_TRACK_OUTLIER or KR_TRACK_INLIER.
 *
 * Noise scale s = max(1, noise·z²): the gate and the far-field distance
 * below are the level's times s.
 *
 * Far-field weight w: PLANE 0; POINT, or a model point without a normal, 1;
 * AUTO 0 up to the far-field distance f, 1 from 2f on, a smoothstep between.
 * A hard switch would jump from r² to d² and stall the line search; with the
 * blend and 2f <= gate the term is also continuous at the gate (d² = gate²).
 *
 * Normal gate: pairs whose normals differ by more than the gate angle are
 * outliers. Normals of both clouds face their sensor, so the signed angle
 * also rejects pairs on opposite sides of a thin surface. (A gate that fades
 * over a band of angles makes the objective continuous but pulls the
 * rotation towards aligning noisy normals with a force of order gate² — it
 * broke the bunny recovery, so the gate stays hard.) */
static inline KR_HD int kr_track_classify_pair(const kr_track_point_params *P,
                                               const kr_track_real R[9], const kr_track_real q[3],
                                               float z, const float nf[3], const float s[4],
                                               const float n[4], kr_track_pair_class *k)
{
    kr_track_real d0 = q[0] - s[0], d1 = q[1] - s[1], d2 = q[2] - s[2];
    kr_track_real dist2 = d0 * d0 + d1 * d1 + d2 * d2;
    kr_track_real sc = P->noise * z * z;
    sc = sc > 1 ? sc : 1;
    const kr_track_real far = P->far * sc;
    k->dist2 = dist2;
    k->w = 1;
    k->dw = 0;
    k->wt = 1 / (sc * sc);
    if (!(dist2 <= P->gate2 * (sc * sc))) return KR_TRACK_OUTLIER;
    if (n[3] == 0) return KR_TRACK_INLIER; /* model point without a normal: far field only */
    kr_track_real c = 0;
    for (int r = 0; r < 3; r++)
        c += (R[3 * r] * nf[0] + R[3 * r + 1] * nf[1] + R[3 * r + 2] * nf[2]) * n[r];
    if (!(c >= P->cos_normal)) return KR_TRACK_OUTLIER;
    if (P->mode == KR_TRACK_MODE_POINT) return KR_TRACK_INLIER;
    k->w = 0;
    if (P->mode == KR_TRACK_MODE_PLANE || dist2 <= far * far) return KR_TRACK_INLIER;
    kr_track_real u = (sqrt(dist2) - far) / far;
    if (!(far > 0) || u >= 1) {
        k->w = 1;
        return KR_TRACK_INLIER;
    }
    k->w = kr_track_smoothstep(u);
    k->dw = 6 * u * (1 - u) / far;
    return KR_TRACK_INLIER;
}

/* Adds one classified point; returns its objective term. With e = q − s*,
 * ρ = n·e and t² = |e|² − ρ² (tangential part), the term is
 *   φ = (ρ² + w t²)/s² = eᵀA e/s²,  A = (1 − w) n nᵀ + w I,
 * and its gradient in q is (2Ae + w'(d) t² e/d)/s². F uses A/s² (Gauss–Newton
 * in the weight); g is exactly −½∇h: the plane part (1 − w) J r, the point
 * part w (q × s*, s* − q), and the weight's part Qᵀu with u = −½ w' t² e/d,
 * each over s². An outlier costs the level's gate² (its own gate² over s²). */
static inline KR_HD kr_track_real kr_track_accumulate(kr_track_acc *a,
                                                      const kr_track_point_params *P, int kind,
                                                      const kr_track_pair_class *k,
                                                      const kr_track_real q[3], const float s[4],
                                                      const float n[4])
{
    a->points++;
    if (kind == KR_TRACK_OUTLIER) {
        a->h += P->gate2;
        return P->gate2;
    }
    a->inliers++;
    kr_track_real nx = n[0], ny = n[1], nz = n[2], sx = s[0], sy = s[1], sz = s[2];
    /* n·(s* − q) rather than (n·s*) − n·q: no cancellation of two large
     * products when the accumulation type is float. */
    kr_track_real r = nx * (sx - q[0]) + ny * (sy - q[1]) + nz * (sz - q[2]);
    kr_track_real t2 = k->dist2 - r * r;
    t2 = t2 > 0 ? t2 : 0;
    kr_track_real phi = k->wt * (r * r + k->w * t2);
    kr_track_real wp = k->wt * (1 - k->w), ww = k->wt * k->w;
    if (wp > 0) {
        kr_track_real J[6] = {
            q[1] * nz - q[2] * ny, q[2] * nx - q[0] * nz, q[0] * ny - q[1] * nx, nx, ny, nz};
        int m = 0;
        for (int i = 0; i < 6; i++) {
            kr_track_real Jw = wp * J[i];
            a->gp[i] += Jw * r;
            for (int j = i; j < 6; j++)
                a->Fp[m++] += Jw * J[j];
        }
    }
    if (ww > 0) {
        a->m0 += ww;
        a->m1[0] += ww * q[0];
        a->m1[1] += ww * q[1];
        a->m1[2] += ww * q[2];
        a->m2[0] += ww * q[0] * q[0];
        a->m2[1] += ww * q[0] * q[1];
        a->m2[2] += ww * q[0] * q[2];
        a->m2[3] += ww * q[1] * q[1];
        a->m2[4] += ww * q[1] * q[2];
        a->m2[5] += ww * q[2] * q[2];
        a->gr[0] += ww * (q[1] * sz - q[2] * sy);
        a->gr[1] += ww * (q[2] * sx - q[0] * sz);
        a->gr[2] += ww * (q[0] * sy - q[1] * sx);
        a->gt[0] += ww * (sx - q[0]);
        a->gt[1] += ww * (sy - q[1]);
        a->gt[2] += ww * (sz - q[2]);
    }
    if (k->dw != 0 && k->dist2 > 0) {
        kr_track_real f = -0.5 * k->wt * k->dw * t2 / sqrt(k->dist2);
        kr_track_real u[3] = {f * (q[0] - sx), f * (q[1] - sy), f * (q[2] - sz)};
        a->gr[0] += q[1] * u[2] - q[2] * u[1];
        a->gr[1] += q[2] * u[0] - q[0] * u[2];
        a->gr[2] += q[0] * u[1] - q[1] * u[0];
        a->gt[0] += u[0];
        a->gt[1] += u[1];
        a->gt[2] += u[2];
    }
    a->h += phi;
    a->res += phi;
    return phi;
}

/* Full 6×6 F (row-major) and g from the sums. */
static inline KR_HD void kr_track_acc_finish(const kr_track_acc *a, double F[36], double g[6])
{
    int k = 0;
    for (int i = 0; i < 6; i++)
        for (int j = i; j < 6; j++) {
            F[6 * i + j] = F[6 * j + i] = a->Fp[k++];
        }
    /* Far field: Σ(|q|²I − qqᵀ) | [Σq]×  over  −[Σq]× | (Σ1) I. */
    const kr_track_real *m2 = a->m2;
    kr_track_real tr = m2[0] + m2[3] + m2[5];
    kr_track_real M[9] = {m2[0], m2[1], m2[2], m2[1], m2[3], m2[4], m2[2], m2[4], m2[5]};
    kr_track_real S[9] = {0, -a->m1[2], a->m1[1], a->m1[2], 0, -a->m1[0], -a->m1[1], a->m1[0], 0};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            F[6 * i + j] += (i == j ? tr : 0) - M[3 * i + j];
            F[6 * i + 3 + j] += S[3 * i + j];
            F[6 * (3 + i) + j] -= S[3 * i + j];
            F[6 * (3 + i) + 3 + j] += i == j ? a->m0 : 0;
        }
    for (int i = 0; i < 3; i++) {
        g[i] = a->gp[i] + a->gr[i];
        g[3 + i] = a->gp[3 + i] + a->gt[i];
    }
}

#endif
