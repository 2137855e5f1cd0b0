/* EM-ICP and Softassign on the CPU (OpenMP): one thread per block of source
 * rows, each row streaming over the destination points in tiles — memory
 * O(N + M), never the N×M matrix. The math is pipeline/register/softreg_kernels.h; here is
 * only the loop structure: per tile, the squared distances first (a
 * vectorised loop), then one shift of the row's log-sum-exp reference, then
 * the exponentials (vectorised: kr_register_expf is branch-free), so the streaming
 * log-sum-exp costs one exp per pair like the plain sum would. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/horn_kernels.h"
#include "pipeline/register/register_cpu.h"

#define TILE 256

/* Threads of the current call (a kr_device serves one thread at a time). */
static _Thread_local int nthreads = 1;

/* Hot loops in versions for wider vector units, picked at load time. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KR_HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KR_HOT
#endif

typedef struct {
    float *x, *y, *z; /* structure of arrays */
} soa;

static kr_status soa_make(soa *s, const float *p, size_t n)
{
    s->x = malloc((n ? n : 1) * sizeof(float));
    s->y = malloc((n ? n : 1) * sizeof(float));
    s->z = malloc((n ? n : 1) * sizeof(float));
    if (!s->x || !s->y || !s->z) return KR_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        s->x[i] = p[3 * i];
        s->y[i] = p[3 * i + 1];
        s->z[i] = p[3 * i + 2];
    }
    return KR_OK;
}

static void soa_free(soa *s)
{
    free(s->x);
    free(s->y);
    free(s->z);
}

static void pose_to_float(const double R[9], const double t[3], float Rf[9], float tf[3])
{
    for (int k = 0; k < 9; k++)
        Rf[k] = (float)R[k];
    for (int k = 0; k < 3; k++)
        tf[k] = (float)t[k];
}

/* ---- EM-ICP ---------------------------------------------------------------- */

/* One row's sums over all of dst, tile by tile. */
KR_HOT static void emicp_row(const float q[3], const soa *dst, size_t m, float half_inv,
                             kr_register_emicp_row *row)
{
    float d2[TILE];
    kr_register_emicp_row_init(row);
    for (size_t j0 = 0; j0 < m; j0 += TILE) {
        size_t len = m - j0 < TILE ? m - j0 : TILE;
        const float *X = dst->x + j0, *Y = dst->y + j0, *Z = dst->z + j0;
        float mn = INFINITY;
#pragma omp simd reduction(min : mn)
        for (size_t j = 0; j < len; j++) {
            d2[j] = kr_register_sqdist(q, X[j], Y[j], Z[j]);
            mn = d2[j] < mn ? d2[j] : mn;
        }
        if (mn < row->mu) kr_register_emicp_row_shift(row, mn, half_inv);
        const float mu = row->mu;
        float s1 = 0, sh = 0, sx = 0, sy = 0, sz = 0;
#pragma omp simd reduction(+ : s1, sh, sx, sy, sz)
        for (size_t j = 0; j < len; j++) {
            float e = kr_register_expf(-(d2[j] - mu) * half_inv);
            s1 += e * e;
            sh += e;
            sx += e * X[j];
            sy += e * Y[j];
            sz += e * Z[j];
        }
        row->s1 += s1;
        row->sh += sh;
        row->sx[0] += sx;
        row->sx[1] += sy;
        row->sx[2] += sz;
    }
}

static kr_status emicp_step(const kr_register_params *p, const float *src, size_t n, const soa *dst,
                            size_t m, const double R[9], const double t[3], double temp,
                            double mom[16])
{
    float Rf[9], tf[3];
    pose_to_float(R, t, Rf, tf);
    const float half_inv = (float)(0.5 / temp);
    const double inv_s2 = 1.0 / temp;
    double acc[16] = {0};
#pragma omp parallel for num_threads(nthreads) schedule(static) reduction(+ : acc[:16])
    for (size_t i = 0; i < n; i++) {
        float q[3];
        kr_register_move(Rf, tf, src + 3 * i, q);
        kr_register_emicp_row row;
        emicp_row(q, dst, m, half_inv, &row);
        double w, pt[3], s[3] = {src[3 * i], src[3 * i + 1], src[3 * i + 2]};
        kr_register_emicp_row_finish(&row, p->d02, inv_s2, &w, pt);
        kr_register_moments_add(acc, w, s, pt);
    }
    memcpy(mom, acc, sizeof acc);
    return KR_OK;
}

/* ---- Softassign ------------------------------------------------------------ */

/* out_i = −LSE(log m_o, LSE_j(−(d²_ij − α)/T + off_j)) for every row i of P
 * against the columns Q (a Sinkhorn half-step in log domain). */
KR_HOT static void lse_row(const float q[3], const soa *Q, const float *off, size_t m, float alpha,
                           float inv_t, float log_mo, float *out)
{
    float v[TILE];
    kr_register_lse l;
    kr_register_lse_init(&l, log_mo);
    for (size_t j0 = 0; j0 < m; j0 += TILE) {
        size_t len = m - j0 < TILE ? m - j0 : TILE;
        const float *X = Q->x + j0, *Y = Q->y + j0, *Z = Q->z + j0, *O = off + j0;
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (size_t j = 0; j < len; j++) {
            v[j] =
                kr_register_softassign_logk(kr_register_sqdist(q, X[j], Y[j], Z[j]), alpha, inv_t) +
                O[j];
            mx = v[j] > mx ? v[j] : mx;
        }
        if (mx > l.mx) {
            l.sum *= kr_register_expf(l.mx - mx);
            l.mx = mx;
        }
        const float ref = l.mx;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (size_t j = 0; j < len; j++)
            s += kr_register_expf(v[j] - ref);
        l.sum += s;
    }
    *out = -kr_register_lse_value(&l);
}

static void lse_pass(const soa *P, size_t n, const soa *Q, const float *off, size_t m, float alpha,
                     float inv_t, float log_mo, float *out)
{
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float q[3] = {P->x[i], P->y[i], P->z[i]};
        lse_row(q, Q, off, m, alpha, inv_t, log_mo, &out[i]);
    }
}

/* r_i = Σ_j m_ij and z_i = Σ_j m_ij x_j for one row (every m_ij <= 1 here). */
KR_HOT static void mass_row(const float q[3], float u, const soa *dst, const float *v, size_t m,
                            float alpha, float inv_t, double *r, double z[3])
{
    double R = 0, Z0 = 0, Z1 = 0, Z2 = 0;
    for (size_t j0 = 0; j0 < m; j0 += TILE) {
        size_t len = m - j0 < TILE ? m - j0 : TILE;
        const float *X = dst->x + j0, *Y = dst->y + j0, *Z = dst->z + j0, *V = v + j0;
        float s = 0, sx = 0, sy = 0, sz = 0;
#pragma omp simd reduction(+ : s, sx, sy, sz)
        for (size_t j = 0; j < len; j++) {
            float lg =
                kr_register_softassign_logk(kr_register_sqdist(q, X[j], Y[j], Z[j]), alpha, inv_t);
            float x = lg + u + V[j];
            float e = kr_register_expf(x < 0.0f ? x : 0.0f);
            s += e;
            sx += e * X[j];
            sy += e * Y[j];
            sz += e * Z[j];
        }
        R += s;
        Z0 += sx;
        Z1 += sy;
        Z2 += sz;
    }
    *r = R;
    z[0] = Z0;
    z[1] = Z1;
    z[2] = Z2;
}

static kr_status softassign_step(const kr_register_params *p, const float *src, size_t n,
                                 const soa *dst, size_t m, const double R[9], const double t[3],
                                 double temp, soa *moved, float *u, float *v, double mom[16])
{
    float Rf[9], tf[3];
    pose_to_float(R, t, Rf, tf);
    for (size_t i = 0; i < n; i++) {
        float q[3];
        kr_register_move(Rf, tf, src + 3 * i, q);
        moved->x[i] = q[0];
        moved->y[i] = q[1];
        moved->z[i] = q[2];
    }
    const float inv_t = (float)(1.0 / temp), alpha = (float)p->alpha;
    const float log_mo = (float)p->log_m_outlier;
    memset(u, 0, n * sizeof *u);
    memset(v, 0, m * sizeof *v);
    for (int k = 0; k < p->i1; k++) {
        lse_pass(moved, n, dst, v, m, alpha, inv_t, log_mo, u); /* rows */
        lse_pass(dst, m, moved, u, n, alpha, inv_t, log_mo, v); /* columns */
    }
    double acc[16] = {0};
#pragma omp parallel for num_threads(nthreads) schedule(static) reduction(+ : acc[:16])
    for (size_t i = 0; i < n; i++) {
        float q[3] = {moved->x[i], moved->y[i], moved->z[i]};
        double r, z[3];
        mass_row(q, u[i], dst, v, m, alpha, inv_t, &r, z);
        if (r > 0) {
            double pt[3] = {z[0] / r, z[1] / r, z[2] / r};
            double s[3] = {src[3 * i], src[3 * i + 1], src[3 * i + 2]};
            kr_register_moments_add(acc, r, s, pt);
        }
    }
    memcpy(mom, acc, sizeof acc);
    return KR_OK;
}

/* ---- the schedule ---------------------------------------------------------- */

kr_status kr_register_cpu(const kr_register_params *p, int threads, const float *src, size_t n,
                          const float *dst, size_t m, double R[9], double t[3],
                          kr_register_state *st_out)
{
    soa D = {0}, moved = {0};
    float *u = NULL, *v = NULL;
    kr_status s = soa_make(&D, dst, m);
    if (s == KR_OK && p->method == KR_REGISTER_METHOD_SOFTASSIGN) {
        s = soa_make(&moved, src, n);
        u = malloc(n * sizeof *u);
        v = malloc(m * sizeof *v);
        if (!u || !v) s = KR_ERR_NOMEM;
    }
    if (s != KR_OK) {
        soa_free(&D);
        soa_free(&moved);
        free(u);
        free(v);
        return kr_error(KR_ERR_NOMEM, "register: cannot allocate %zu + %zu points' buffers", n, m);
    }
    nthreads = threads > 0 ? threads : 1;

    double Rc[9], tc[3];
    memcpy(Rc, R, sizeof Rc);
    memcpy(tc, t, sizeof tc);
    kr_register_state st;
    kr_register_start(p, &st);
    while (!st.done) {
        double mom[16];
        if (p->method == KR_REGISTER_METHOD_EMICP)
            s = emicp_step(p, src, n, &D, m, Rc, tc, st.temp, mom);
        else
            s = softassign_step(p, src, n, &D, m, Rc, tc, st.temp, &moved, u, v, mom);
        if (s != KR_OK) break;
        double Rn[9], tn[3];
        if (kr_horn_from_moments(mom, Rn, tn) != 0) {
            s = kr_error(
                KR_ERR_NUMERIC,
                "register: every correspondence weight vanished at step %d (scale² %g m²): "
                "the point sets are too far apart for the schedule; give an initial pose "
                "or a larger starting sigma2/t0",
                st.steps + 1, st.temp);
            break;
        }
        double motion2 = kr_register_motion2(p, Rc, tc, Rn, tn);
        memcpy(Rc, Rn, sizeof Rc);
        memcpy(tc, tn, sizeof tc);
        kr_register_advance(p, &st, motion2);
    }
    soa_free(&D);
    soa_free(&moved);
    free(u);
    free(v);
    if (s != KR_OK) return s;
    memcpy(R, Rc, sizeof Rc);
    memcpy(t, tc, sizeof tc);
    *st_out = st;
    return KR_OK;
}
