/* EM-ICP and Softassign on the CPU (OpenMP): one thread per block of rows,
 * each row streaming over the other set's points in tiles — memory O(N + M),
 * never the N×M matrix; Softassign's rows stream only over the points within
 * its reach (below). The math is pipeline/register/softreg_kernels.h; here is
 * only the loop structure: per tile, the squared distances first (a
 * vectorised loop), then one shift of the row's log-sum-exp reference, then
 * the exponentials (vectorised: kr_register_expf is branch-free), so the
 * streaming log-sum-exp costs one exp per pair like the plain sum would. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/horn_kernels.h"
#include "pipeline/register/cell_grid.h"
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

/* Softassign's reach. Every scaling is minus a log-sum-exp that includes the
 * slack's log m_o, so u_i, v_j <= -log m_o and m_ij = exp(log K_ij + u_i +
 * v_j) <= K_ij / m_o². A pair with log K_ij < 2 log m_o - REACH_CUT, i.e.
 *     d²_ij > alpha + T (REACH_CUT - 2 log m_o),
 * adds less than e^-30 (1e-13) of the slack's share to its row's and its
 * column's log-sum-exp and less than e^-30 to the M-step's weights: a
 * million such pairs stay a thousand times below float precision. So the
 * passes visit, for each point, only the other set's points in the cells of
 * a uniform grid around it (pipeline/register/cell_grid.h) out to that
 * reach: the same sums, and at the seed's cold temperatures a fraction of
 * the pairs (the reach falls from ~0.7 to ~0.5 of the extent over the last
 * 16 temperatures, against scans that span 3-4 times that); at warm ones
 * the box covers the whole set and nothing is skipped. */
#define REACH_CUT 30.0
static float softassign_reach(double alpha, double temp, double log_mo)
{
    double r2 = alpha + temp * (REACH_CUT - 2 * log_mo);
    return r2 > 0 ? (float)sqrt(r2) : 0.0f;
}

/* Cells of half the reach: a box of at most 5 x 5 rows of 5 cells, about
 * twice the disc a surface's points within the reach cover (a third of the
 * reach visits fewer pairs in more, shorter runs, and was measured slower:
 * 6.5-7.0 against 5.2-5.3 s on the bunny pair of docs/BENCHMARKS.md). */
#define MAX_RUNS 64

/* The points a pass streams over: the other set sorted by cell, with each
 * point's offset (the other side's scaling) in the same order. */
typedef struct {
    const kr_cell_grid *grid;
    const float *off;
    float reach;
} columns;

/* The log-sum-exp of −(d²_ij − α)/T + off_j over one run of columns. */
KR_HOT static void lse_span(const float q[3], const float *X, const float *Y, const float *Z,
                            const float *O, size_t n, float alpha, float inv_t, kr_register_lse *l)
{
    float v[TILE];
    for (size_t j0 = 0; j0 < n; j0 += TILE) {
        size_t len = n - j0 < TILE ? n - j0 : TILE;
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (size_t j = 0; j < len; j++) {
            v[j] = kr_register_softassign_logk(
                       kr_register_sqdist(q, X[j0 + j], Y[j0 + j], Z[j0 + j]), alpha, inv_t) +
                   O[j0 + j];
            mx = v[j] > mx ? v[j] : mx;
        }
        if (mx > l->mx) {
            l->sum *= kr_register_expf(l->mx - mx);
            l->mx = mx;
        }
        const float ref = l->mx;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (size_t j = 0; j < len; j++)
            s += kr_register_expf(v[j] - ref);
        l->sum += s;
    }
}

/* The runs of c's points within its reach of q: at most MAX_RUNS, else the
 * whole sorted set as one run. */
static size_t runs_near(const columns *c, const float q[3], uint32_t *first, uint32_t *end)
{
    size_t k = kr_cell_grid_runs(c->grid, q, c->reach, first, end, MAX_RUNS);
    if (k > MAX_RUNS) {
        first[0] = 0;
        end[0] = (uint32_t)c->grid->n;
        k = 1;
    }
    return k;
}

/* −LSE(log m_o, LSE_j(−(d²_ij − α)/T + off_j)) for the point q against c:
 * a Sinkhorn half-step in log domain. */
static float lse_row(const float q[3], const columns *c, float alpha, float inv_t, float log_mo)
{
    uint32_t first[MAX_RUNS], end[MAX_RUNS];
    size_t k = runs_near(c, q, first, end);
    const kr_cell_grid *g = c->grid;
    kr_register_lse l;
    kr_register_lse_init(&l, log_mo);
    for (size_t r = 0; r < k; r++)
        lse_span(q, g->x + first[r], g->y + first[r], g->z + first[r], c->off + first[r],
                 end[r] - first[r], alpha, inv_t, &l);
    return -kr_register_lse_value(&l);
}

/* out[i] for every point i of P (in P's order) against c. */
static void lse_pass(const soa *P, size_t n, const columns *c, float alpha, float inv_t,
                     float log_mo, float *out)
{
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 32)
    for (size_t i = 0; i < n; i++) {
        float q[3] = {P->x[i], P->y[i], P->z[i]};
        out[i] = lse_row(q, c, alpha, inv_t, log_mo);
    }
}

/* Σ m_ij and Σ m_ij x_j over one run of destination points (every m_ij <= 1
 * after the column step, so no shift). */
KR_HOT static void mass_span(const float q[3], float u, const float *X, const float *Y,
                             const float *Z, const float *V, size_t n, float alpha, float inv_t,
                             double acc[4])
{
    for (size_t j0 = 0; j0 < n; j0 += TILE) {
        size_t len = n - j0 < TILE ? n - j0 : TILE;
        float s = 0, sx = 0, sy = 0, sz = 0;
#pragma omp simd reduction(+ : s, sx, sy, sz)
        for (size_t j = j0; j < j0 + len; j++) {
            float lg =
                kr_register_softassign_logk(kr_register_sqdist(q, X[j], Y[j], Z[j]), alpha, inv_t);
            float x = lg + u + V[j];
            float e = kr_register_expf(x < 0.0f ? x : 0.0f);
            s += e;
            sx += e * X[j];
            sy += e * Y[j];
            sz += e * Z[j];
        }
        acc[0] += s;
        acc[1] += sx;
        acc[2] += sy;
        acc[3] += sz;
    }
}

/* Per-call buffers of the Softassign step. */
typedef struct {
    soa moved;          /* R s_i + t, in src's order */
    kr_cell_grid dgrid; /* dst by cell */
    kr_cell_grid mgrid; /* the moved source by cell */
    float *u, *v;       /* scalings, in src's and dst's order */
    float *off;         /* one of them in the other grid's order */
} softassign_buffers;

static void softassign_free(softassign_buffers *b)
{
    soa_free(&b->moved);
    kr_cell_grid_free(&b->dgrid);
    kr_cell_grid_free(&b->mgrid);
    free(b->u);
    free(b->v);
    free(b->off);
}

static kr_status softassign_step(const kr_register_params *p, const float *src, size_t n,
                                 const soa *dst, size_t m, const double R[9], const double t[3],
                                 double temp, softassign_buffers *b, double mom[16])
{
    float Rf[9], tf[3];
    pose_to_float(R, t, Rf, tf);
    for (size_t i = 0; i < n; i++) {
        float q[3];
        kr_register_move(Rf, tf, src + 3 * i, q);
        b->moved.x[i] = q[0];
        b->moved.y[i] = q[1];
        b->moved.z[i] = q[2];
    }
    const float inv_t = (float)(1.0 / temp), alpha = (float)p->alpha;
    const float log_mo = (float)p->log_m_outlier;
    const float reach = softassign_reach(p->alpha, temp, p->log_m_outlier);
    const float h = reach / 2 > 1e-9f ? reach / 2 : 1e-9f;
    kr_status s = kr_cell_grid_build(&b->dgrid, dst->x, dst->y, dst->z, m, h);
    if (s == KR_OK) s = kr_cell_grid_build(&b->mgrid, b->moved.x, b->moved.y, b->moved.z, n, h);
    if (s != KR_OK) return s;
    columns to_dst = {&b->dgrid, b->off, reach}, to_src = {&b->mgrid, b->off, reach};
    memset(b->u, 0, n * sizeof *b->u);
    memset(b->v, 0, m * sizeof *b->v);
    for (int k = 0; k < p->i1; k++) {
        for (size_t j = 0; j < m; j++) /* rows: v in dst's sorted order */
            b->off[j] = b->v[b->dgrid.order[j]];
        lse_pass(&b->moved, n, &to_dst, alpha, inv_t, log_mo, b->u);
        for (size_t i = 0; i < n; i++) /* columns: u in the moved source's sorted order */
            b->off[i] = b->u[b->mgrid.order[i]];
        lse_pass(dst, m, &to_src, alpha, inv_t, log_mo, b->v);
    }
    for (size_t j = 0; j < m; j++)
        b->off[j] = b->v[b->dgrid.order[j]];
    double acc[16] = {0};
#pragma omp parallel for num_threads(nthreads) schedule(dynamic, 32) reduction(+ : acc[:16])
    for (size_t i = 0; i < n; i++) {
        float q[3] = {b->moved.x[i], b->moved.y[i], b->moved.z[i]};
        uint32_t first[MAX_RUNS], end[MAX_RUNS];
        size_t k = runs_near(&to_dst, q, first, end);
        const kr_cell_grid *g = &b->dgrid;
        double sums[4] = {0, 0, 0, 0};
        for (size_t r = 0; r < k; r++)
            mass_span(q, b->u[i], g->x + first[r], g->y + first[r], g->z + first[r],
                      b->off + first[r], end[r] - first[r], alpha, inv_t, sums);
        if (sums[0] > 0) {
            double pt[3] = {sums[1] / sums[0], sums[2] / sums[0], sums[3] / sums[0]};
            double sp[3] = {src[3 * i], src[3 * i + 1], src[3 * i + 2]};
            kr_register_moments_add(acc, sums[0], sp, pt);
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
    soa D = {0};
    softassign_buffers b;
    memset(&b, 0, sizeof b);
    kr_status s = soa_make(&D, dst, m);
    if (s == KR_OK && p->method == KR_REGISTER_METHOD_SOFTASSIGN) {
        s = soa_make(&b.moved, src, n);
        b.u = malloc((n ? n : 1) * sizeof *b.u);
        b.v = malloc((m ? m : 1) * sizeof *b.v);
        b.off = malloc((n > m ? n : m ? m : 1) * sizeof *b.off);
        if (!b.u || !b.v || !b.off) s = KR_ERR_NOMEM;
    }
    if (s != KR_OK) {
        soa_free(&D);
        softassign_free(&b);
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
            s = softassign_step(p, src, n, &D, m, Rc, tc, st.temp, &b, mom);
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
    softassign_free(&b);
    if (s != KR_OK) return s;
    memcpy(R, Rc, sizeof Rc);
    memcpy(t, tc, sizeof tc);
    *st_out = st;
    return KR_OK;
}
