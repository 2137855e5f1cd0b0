/* The fused EM-ICP and Softassign engines as ONE cooperative kernel for the
 * whole annealing schedule (DESIGN.md §5; issue 13, session 5).
 *
 * Why. The multi-kernel engine (gpu/register_fused.cu) spent most of a
 * Softassign step launching and draining its 13 kernels of 3–11 µs each: the
 * pair work of a 2000 × 2000 Sinkhorn pass is 4 M exponentials, about 1.5 µs
 * of an H100. Here every block stays resident for the whole schedule and the
 * passes are separated by grid-wide barriers (cooperative groups):
 *   EM-ICP:     pair pass + per-row finish + moments | grid.sync | Horn
 *   Softassign: (row pass | sync | column pass | sync) × I1, the last column
 *               pass also accumulating the Horn moments | Horn
 * Horn's step is solved by every block on its own (thread 0, from the same
 * per-block moments summed in the same order, so every block holds the same
 * pose and takes the same schedule decisions): no barrier after it.
 *
 * Layout of a pass. A block owns groups of G rows (G = 16 or 32) and splits
 * the columns of each group over 1024 / G slices; the columns are staged in
 * shared memory as float4 (one 16-byte load per pair) and every lane of a
 * G-wide row group reads the same column (a broadcast). The slices' partial
 * sums of a row are merged in shared memory by one warp per row — no global
 * partials and no finishing kernels. Exponentials are base 2 with log2(e)
 * folded into the per-pass constants (one FFMA and one ex2 per pair), and
 * the running shifts are lazy: a sum is rescaled only when a new term would
 * exceed 2^40 (EM-ICP, whose sums hold e²) or 2^64 (log-sum-exp), which the
 * float range holds, instead of at every new minimum.
 *
 * Softassign's M-step in column form: Σ_ij m_ij (1, s_i, x_j, s_i x_jᵀ) are
 * exactly the Horn moments of the row form (weights r_i = Σ_j m_ij on the
 * pairs (s_i, z_i / r_i), core/softreg_kernels.h), and per column j
 *     Σ_i m_ij = 2^(v_j + L_j),  Σ_i m_ij s_i = 2^(v_j + mx_j) Σ_i 2^(y_ij − mx_j) s_i
 * come out of the column pass's own log-sum-exp (y_ij = log2 K_ij + u_i) —
 * so the mass pass of the multi-kernel engine disappears.
 *
 * Memory O(N + M): moved source points and u (N float4 and N floats), v (M),
 * and 2 × blocks × 16 doubles of moments (double-buffered by step parity:
 * a block still reading step k's moments cannot be overtaken by a block
 * writing step k+1's, since those go to the other buffer). */
#include <cooperative_groups.h>
#include <math.h>
#include <string.h>

#include "core/horn_kernels.h"
#include "gpu/register_internal.h"

namespace cg = cooperative_groups;

#ifndef P_THREADS
#define P_THREADS 1024
#endif
#define P_WARPS (P_THREADS / 32)
#define P_LOG2E 1.4426950408889634
/* A running sum is rescaled when a new term would exceed 2^LAZY (see top). */
#define LAZY_EMICP 40.0f
#define LAZY_LSE 64.0f
/* Floats of one slice's partial in the merge buffer (EM-ICP: mu, s1, sh, sx). */
#define PART_FLOATS 6

typedef struct {
    kr_hd_reg_params p;
    kr_gpu_reg_state *S; /* in: start; out: the end state (block 0 writes it) */
    const float *src;    /* n × 3 */
    const float *dx, *dy, *dz;
    float4 *q4;   /* n: moved source (Softassign) */
    float *u2;    /* n: row scalings, log2 */
    float *v2;    /* m: column scalings, log2 */
    double *bmom; /* 2 × gridDim.x × 16 */
    size_t n, m;
    int tile; /* columns per shared-memory tile */
} pk_args;

/* Per-block state in shared memory. */
typedef struct {
    kr_gpu_reg_state S;
    float R[9], t[3];
    double mom[32][16]; /* per merging warp, summed at the end of the pass */
    double total[16];
    double hS[9], hN[16]; /* Horn's S and N (horn_warp) */
    long staged;          /* first column of the tile now in shared memory; -1 = none */
#ifdef KR_PK_PROFILE
    long long prof[8], prof_t, prof_g0;
#endif
} pk_block;

/* Build with -DKR_PK_PROFILE to have block 0 print, at the end, the SM
 * cycles its thread 0 spent in each phase: pair passes (staging, pair loop,
 * merge, the rest), grid barriers and Horn. */
#ifdef KR_PK_PROFILE
#include <stdio.h>
#define PK_MARK(B, slot)                                                                           \
    do {                                                                                           \
        if (blockIdx.x == 0 && threadIdx.x == 0) {                                                 \
            long long t_ = clock64();                                                              \
            (B)->prof[slot] += t_ - (B)->prof_t;                                                   \
            (B)->prof_t = t_;                                                                      \
        }                                                                                          \
    } while (0)
#define PK_PROF_START(B)                                                                           \
    do {                                                                                           \
        if (threadIdx.x == 0) {                                                                    \
            for (int k_ = 0; k_ < 8; k_++)                                                         \
                (B)->prof[k_] = 0;                                                                 \
            (B)->prof_t = clock64();                                                               \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"((B)->prof_g0));                       \
        }                                                                                          \
    } while (0)
#define PK_PROF_PRINT(B, name)                                                                     \
    do {                                                                                           \
        if (blockIdx.x == 0 && threadIdx.x == 0) {                                                 \
            long long g1_;                                                                         \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1_));                                \
            printf("pk-profile %s G=%d blocks=%u steps=%d ns=%lld cycles: pass-other %lld "        \
                   "sync1 %lld pass2-other %lld sync2 %lld horn %lld stage %lld loop %lld "        \
                   "merge %lld\n",                                                                 \
                   name, G, gridDim.x, (B)->S.st.steps, g1_ - (B)->prof_g0, (B)->prof[0],          \
                   (B)->prof[1], (B)->prof[2], (B)->prof[3], (B)->prof[4], (B)->prof[5],           \
                   (B)->prof[6], (B)->prof[7]);                                                    \
        }                                                                                          \
    } while (0)
#else
#define PK_MARK(B, slot)
#define PK_PROF_START(B)
#define PK_PROF_PRINT(B, name)
#endif

static __device__ __forceinline__ float ex2_fast(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

static __device__ __forceinline__ float lg2_fast(float x)
{
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

static __device__ __forceinline__ float sqdist4(const float q[3], float4 x)
{
    float a = x.x - q[0], b = x.y - q[1], c = x.z - q[2];
    return a * a + b * b + c * c;
}

/* The pose in float, for the pair loops (thread 0; a barrier follows). */
static __device__ void pose_to_float(pk_block *B)
{
    for (int k = 0; k < 9; k++)
        B->R[k] = (float)B->S.R[k];
    for (int k = 0; k < 3; k++)
        B->t[k] = (float)B->S.t[k];
}

/* Stages columns [b, b + len) unless they are already there. fill(k, j)
 * returns tile element k for column j = b + k. Block-uniform. */
template <typename F> static __device__ void stage(pk_block *B, long b, int len, F fill)
{
    if (B->staged == b) return;
    PK_MARK(B, 0);
    __syncthreads(); /* the previous tile is no longer read */
    for (int k = threadIdx.x; k < len; k += blockDim.x)
        fill(k, (size_t)b + k);
    if (threadIdx.x == 0) B->staged = b;
    __syncthreads();
    PK_MARK(B, 5);
}

/* ---- end of a step: moments over the grid, Horn, schedule ----------------- */

/* Writes this block's moments (sum of the merging warps') for step parity. */
static __device__ void block_moments_out(pk_block *B, const pk_args &a, int parity)
{
    __syncthreads();
    if (threadIdx.x < 16) {
        double v = 0;
        for (int w = 0; w < 32; w++)
            v += B->mom[w][threadIdx.x];
        a.bmom[((size_t)parity * gridDim.x + blockIdx.x) * 16 + threadIdx.x] = v;
    }
}

/* Jacobi, where QCP declines: rare, and kept out of line. */
static __device__ __noinline__ void eig4_top_jacobi(const double *N, double q[4])
{
    kr_hd_eig4_top(N, q);
}

/* The x-th (0..2) of the indices 0..3 other than e. */
static __device__ __forceinline__ int other_index(int e, int x)
{
    return x + (x >= e);
}

static __device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* kr_hd_qcp_top (core/horn_kernels.h) on one warp: the 16 entries of N·N and
 * the 16 cofactors of adj(N − λI) one per lane, the Newton iteration on every
 * lane alike (same thresholds). Returns 1 with q set on every lane, or 0 where
 * QCP declines (then Jacobi, as on the host). */
static __device__ int qcp_warp(const double *N, int lane, double q[4])
{
    const int i = (lane >> 2) & 3, j = lane & 3;
    double n2 = 0;
    for (int k = 0; k < 4; k++)
        n2 += N[4 * i + k] * N[4 * k + j];
    const double p2 = warp_sum(lane < 16 && i == j ? n2 : 0.0);
    const double p3 = warp_sum(lane < 16 ? n2 * N[4 * j + i] : 0.0);
    double dterm = 0;
    if (lane < 4) { /* det N by cofactors along the first row: column `lane` */
        int c0 = other_index(lane, 0), c1 = other_index(lane, 1), c2 = other_index(lane, 2);
        dterm = (lane % 2 ? -1.0 : 1.0) * N[lane] *
                kr_hd_det3(N[4 + c0], N[4 + c1], N[4 + c2], N[8 + c0], N[8 + c1], N[8 + c2],
                           N[12 + c0], N[12 + c1], N[12 + c2]);
    }
    const double det = warp_sum(dterm);
    if (!(p2 > 0) || !isfinite(p2)) return 0;
    const double c2 = -0.5 * p2, c1 = -p3 / 3.0, c0 = det;
    double l = sqrt(p2);
    int converged = 0;
    for (int it = 0; it < 60; it++) {
        double l2 = l * l;
        double f = (l2 + c2) * l2 + c1 * l + c0;
        double df = 4 * l2 * l + 2 * c2 * l + c1;
        if (!(df > 0)) break;
        double step = f / df;
        l -= step;
        if (fabs(step) <= 1e-15 * sqrt(p2)) {
            converged = 1;
            break;
        }
    }
    if (!converged) return 0;
    /* Lane 4·col + row: entry `row` of adj(M)'s column `col`, M = N − λI. */
    const int col = i, row = j;
    double av = 0;
    if (lane < 16) {
        int r[3], k[3];
        for (int x = 0; x < 3; x++) {
            r[x] = other_index(col, x);
            k[x] = other_index(row, x);
        }
        double m[9];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                m[3 * a + b] = N[4 * r[a] + k[b]] - (r[a] == k[b] ? l : 0.0);
        av = ((row + col) % 2 ? -1.0 : 1.0) *
             kr_hd_det3(m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8]);
    }
    double nn = av * av;
    nn += __shfl_xor_sync(0xffffffffu, nn, 1);
    nn += __shfl_xor_sync(0xffffffffu, nn, 2);
    double best = 0;
    int bestc = 0;
    for (int c = 0; c < 4; c++) {
        double v = __shfl_sync(0xffffffffu, nn, 4 * c);
        if (v > best) {
            best = v;
            bestc = c;
        }
    }
    if (!(best > 1e-18 * p2 * p2 * p2)) return 0;
    const double nrm = sqrt(best);
    for (int k = 0; k < 4; k++)
        q[k] = __shfl_sync(0xffffffffu, av, 4 * bestc + k) / nrm;
    return 1;
}

/* Horn's step from B->total on warp 0, then the schedule (lane 0): the steps
 * of kr_hd_horn_from_moments with QCP spread over the lanes. One thread
 * doing all of it measured 13 µs a step inside this 1024-thread kernel
 * (64 registers a thread: its double temporaries spilled). */
static __device__ __noinline__ void horn_warp(pk_block *B, const kr_hd_reg_params *p)
{
    const int lane = threadIdx.x & 31;
    const double *mom = B->total;
    const double W = mom[0];
    if (!(W > 0) || !isfinite(W)) {
        if (lane == 0) B->S.st.done = -1;
        return;
    }
    const double inv_w = 1.0 / W;
    double sv = 0, scale = 0;
    if (lane < 9) {
        double cs = mom[1 + lane / 3] * inv_w, cd = mom[4 + lane % 3] * inv_w;
        sv = mom[7 + lane] - W * cs * cd;
        scale = fabs(sv);
    }
    for (int o = 16; o > 0; o >>= 1)
        scale = fmax(scale, __shfl_xor_sync(0xffffffffu, scale, o));
    if (!isfinite(scale)) {
        if (lane == 0) B->S.st.done = -1;
        return;
    }
    double q[4] = {1, 0, 0, 0};
    if (scale > 0) {
        const double inv_scale = 1.0 / scale;
        if (lane < 9) B->hS[lane] = sv * inv_scale;
        __syncwarp();
        if (lane == 0) kr_hd_horn_matrix(B->hS, B->hN);
        __syncwarp();
        if (!qcp_warp(B->hN, lane, q) && lane == 0) eig4_top_jacobi(B->hN, q);
    }
    if (lane != 0) return;
    double R[9], t[3], cs[3], cd[3];
    kr_hd_quat_to_rot(q, R);
    for (int k = 0; k < 3; k++) {
        cs[k] = mom[1 + k] * inv_w;
        cd[k] = mom[4 + k] * inv_w;
    }
    for (int k = 0; k < 3; k++)
        t[k] = cd[k] - (R[3 * k] * cs[0] + R[3 * k + 1] * cs[1] + R[3 * k + 2] * cs[2]);
    double m2 = kr_hd_reg_motion2(p, B->S.R, B->S.t, R, t);
    for (int k = 0; k < 9; k++)
        B->S.R[k] = R[k];
    for (int k = 0; k < 3; k++)
        B->S.t[k] = t[k];
    kr_hd_reg_advance(p, &B->S.st, m2);
    pose_to_float(B);
}

/* After the grid barrier: every block sums all blocks' moments (same order
 * everywhere), solves Horn and advances the schedule, exactly as horn_step. */
static __device__ void horn_in_block(pk_block *B, const pk_args &a, int parity)
{
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp < 16) {
        const double *in = a.bmom + (size_t)parity * gridDim.x * 16;
        double v = 0;
        for (unsigned b = lane; b < gridDim.x; b += 32)
            v += __ldcg(in + (size_t)b * 16 + warp);
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) B->total[warp] = v;
    }
    __syncthreads();
    if (threadIdx.x < 32) horn_warp(B, &a.p);
    for (int k = threadIdx.x; k < 32 * 16; k += blockDim.x)
        B->mom[k / 16][k % 16] = 0;
    __syncthreads();
}

static __device__ void block_start(pk_block *B, const pk_args &a)
{
    if (threadIdx.x == 0) {
        B->S = *a.S;
        B->staged = -1;
        pose_to_float(B);
    }
    for (int k = threadIdx.x; k < 32 * 16; k += blockDim.x)
        B->mom[k / 16][k % 16] = 0;
    __syncthreads();
}

static __device__ void block_end(pk_block *B, const pk_args &a)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int k = 0; k < 16; k++)
            B->S.mom[k] = 0;
        *a.S = B->S;
    }
}

/* ---- EM-ICP ------------------------------------------------------------------ */

typedef struct {
    float kk;         /* mu · h: the shift in exponent units (h = log2 e / 2σ²) */
    float mu, s1, sh; /* shift (m²), Σ e², Σ e with e = 2^(kk − d² h) */
    float sx, sy, sz; /* Σ e x_j */
} emicp_acc;

static __device__ __forceinline__ void emicp_add(emicp_acc &r, float d2, float4 x, float h)
{
    float ea = fmaf(d2, -h, r.kk);
    if (ea > LAZY_EMICP) { /* rare: a much nearer column; also the first one */
        float f = ex2_fast(-ea);
        r.s1 *= f * f;
        r.sh *= f;
        r.sx *= f;
        r.sy *= f;
        r.sz *= f;
        r.mu = d2;
        r.kk = d2 * h;
        ea = 0.0f;
    }
    float e = ex2_fast(ea);
    r.s1 = fmaf(e, e, r.s1);
    r.sh += e;
    r.sx = fmaf(e, x.x, r.sx);
    r.sy = fmaf(e, x.y, r.sy);
    r.sz = fmaf(e, x.z, r.sz);
}

template <int G>
static __device__ void emicp_pass(pk_block *B, const pk_args &a, float4 *tile, float *part)
{
    const int S = P_THREADS / G;
    const int r = threadIdx.x % G, slice = threadIdx.x / G;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const double temp = B->S.st.temp;
    const float h = (float)(P_LOG2E * 0.5 / temp), half_inv = (float)(0.5 / temp);
    const size_t groups = (a.n + G - 1) / G;
    for (size_t g = blockIdx.x; g < groups; g += gridDim.x) {
        size_t i = g * G + r;
        bool active = i < a.n;
        float q[3] = {0, 0, 0};
        if (active) {
            float s[3] = {__ldg(a.src + 3 * i), __ldg(a.src + 3 * i + 1), __ldg(a.src + 3 * i + 2)};
            kr_hd_move(B->R, B->t, s, q);
        }
        emicp_acc acc = {INFINITY, INFINITY, 0, 0, 0, 0, 0};
        for (size_t b = 0; b < a.m; b += a.tile) {
            int len = (int)(a.m - b < (size_t)a.tile ? a.m - b : (size_t)a.tile);
            stage(B, (long)b, len, [&](int k, size_t j) {
                tile[k] = make_float4(__ldg(a.dx + j), __ldg(a.dy + j), __ldg(a.dz + j), 0.0f);
            });
            if (active)
#pragma unroll 4
                for (int k = slice; k < len; k += S) {
                    float4 x = tile[k];
                    emicp_add(acc, sqdist4(q, x), x, h);
                }
        }
        PK_MARK(B, 6);
        float *pp = part + (size_t)threadIdx.x * PART_FLOATS; /* slice-major: (slice, r) */
        pp[0] = acc.mu;
        pp[1] = acc.s1;
        pp[2] = acc.sh;
        pp[3] = acc.sx;
        pp[4] = acc.sy;
        pp[5] = acc.sz;
        __syncthreads();
        for (int rw = warp; rw < G && g * G + rw < a.n;
             rw += P_WARPS) { /* one warp per row: merge S slices */
            kr_hd_emicp_row row;
            kr_hd_emicp_row_init(&row);
            for (int c = lane; c < S; c += 32) {
                const float *o = part + (size_t)(c * G + rw) * PART_FLOATS;
                kr_hd_emicp_row b;
                b.mu = o[0];
                b.s1 = o[1];
                b.sh = o[2];
                b.sx[0] = o[3];
                b.sx[1] = o[4];
                b.sx[2] = o[5];
                kr_hd_emicp_row_merge(&row, &b, half_inv);
            }
            for (int o = 16; o > 0; o >>= 1) {
                kr_hd_emicp_row b;
                b.mu = __shfl_down_sync(0xffffffffu, row.mu, o);
                b.s1 = __shfl_down_sync(0xffffffffu, row.s1, o);
                b.sh = __shfl_down_sync(0xffffffffu, row.sh, o);
                for (int k = 0; k < 3; k++)
                    b.sx[k] = __shfl_down_sync(0xffffffffu, row.sx[k], o);
                kr_hd_emicp_row_merge(&row, &b, half_inv);
            }
            if (lane == 0) {
                size_t ii = g * G + rw;
                double w, pt[3], s[3] = {a.src[3 * ii], a.src[3 * ii + 1], a.src[3 * ii + 2]};
                kr_hd_emicp_row_finish(&row, a.p.d02, 1.0 / temp, &w, pt);
                kr_hd_moments_add(B->mom[rw], w, s, pt);
            }
        }
        __syncthreads(); /* part is reused by the next group */
        PK_MARK(B, 7);
    }
}

template <int G> static __global__ void __launch_bounds__(P_THREADS, 1) emicp_persistent(pk_args a)
{
    cg::grid_group grid = cg::this_grid();
    extern __shared__ float4 tile[];
    __shared__ pk_block B;
    __shared__ float part[P_THREADS * PART_FLOATS];
    block_start(&B, a);
    PK_PROF_START(&B);
    int parity = 0;
    while (!B.S.st.done) {
        emicp_pass<G>(&B, a, tile, part);
        block_moments_out(&B, a, parity);
        PK_MARK(&B, 0);
        grid.sync();
        PK_MARK(&B, 1);
        horn_in_block(&B, a, parity);
        PK_MARK(&B, 4);
        parity ^= 1;
    }
    PK_PROF_PRINT(&B, "emicp");
    block_end(&B, a);
}

/* ---- Softassign ---------------------------------------------------------------- */

typedef struct {
    float mx, sum; /* log2-sum-exp2: Σ 2^(y − mx) */
} lse2_acc;

static __device__ __forceinline__ void lse2_add(lse2_acc &l, float y)
{
    float d = y - l.mx;
    if (d > LAZY_LSE) { /* rare; also the first term (mx = −inf) */
        l.sum *= ex2_fast(-d);
        l.mx = y;
        d = 0.0f;
    }
    l.sum += ex2_fast(d);
}

static __device__ void lse2_merge(lse2_acc &a, float bmx, float bsum)
{
    if (!(bsum > 0)) return;
    if (!(a.sum > 0)) {
        a.mx = bmx;
        a.sum = bsum;
    } else if (bmx > a.mx) {
        a.sum = a.sum * ex2_fast(a.mx - bmx) + bsum;
        a.mx = bmx;
    } else {
        a.sum += bsum * ex2_fast(bmx - a.mx);
    }
}

/* −log2(2^lmo2 + 2^L): the scaling of a row or column with its slack. */
static __device__ float neg_lse2_slack(float lmo2, float L)
{
    float hi = fmaxf(lmo2, L), lo = fminf(lmo2, L);
    return -(hi + lg2_fast(1.0f + ex2_fast(lo - hi)));
}

/* The log-sum-exp plus Σ 2^(y − mx) s_i of the moment pass. */
typedef struct {
    float mx, sum, w0, w1, w2;
} lsem_acc;

static __device__ __forceinline__ void lsem_add(lsem_acc &l, float y, float4 s)
{
    float d = y - l.mx;
    if (d > LAZY_LSE) {
        float f = ex2_fast(-d);
        l.sum *= f;
        l.w0 *= f;
        l.w1 *= f;
        l.w2 *= f;
        l.mx = y;
        d = 0.0f;
    }
    float e = ex2_fast(d);
    l.sum += e;
    l.w0 = fmaf(e, s.x, l.w0);
    l.w1 = fmaf(e, s.y, l.w1);
    l.w2 = fmaf(e, s.z, l.w2);
}

static __device__ void lsem_merge(lsem_acc &a, const lsem_acc &b)
{
    if (!(b.sum > 0)) return;
    if (!(a.sum > 0)) {
        a = b;
        return;
    }
    if (b.mx > a.mx) {
        float f = ex2_fast(a.mx - b.mx);
        a.sum = a.sum * f + b.sum;
        a.w0 = a.w0 * f + b.w0;
        a.w1 = a.w1 * f + b.w1;
        a.w2 = a.w2 * f + b.w2;
        a.mx = b.mx;
    } else {
        float f = ex2_fast(b.mx - a.mx);
        a.sum += b.sum * f;
        a.w0 += b.w0 * f;
        a.w1 += b.w1 * f;
        a.w2 += b.w2 * f;
    }
}

/* Constants of one step's passes, in log2 units: y = d² c + (α log2e / T) + scaling. */
typedef struct {
    float c, aterm, lmo2;
} sa_consts;

/* Row pass: u_i = −LSE(slack, LSE_j(log K_ij + v_j)), v = 0 on the first
 * round (the scalings restart every Horn step); writes the moved source. */
template <int G>
static __device__ void sa_row_pass(pk_block *B, const pk_args &a, float4 *tile, float *part,
                                   sa_consts k0, bool first)
{
    const int S = P_THREADS / G;
    const int r = threadIdx.x % G, slice = threadIdx.x / G;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t groups = (a.n + G - 1) / G;
    if (threadIdx.x == 0) B->staged = -1; /* the offsets changed */
    __syncthreads();
    for (size_t g = blockIdx.x; g < groups; g += gridDim.x) {
        size_t i = g * G + r;
        bool active = i < a.n;
        float q[3] = {0, 0, 0};
        if (active) {
            float s[3] = {__ldg(a.src + 3 * i), __ldg(a.src + 3 * i + 1), __ldg(a.src + 3 * i + 2)};
            kr_hd_move(B->R, B->t, s, q);
            if (first && slice == 0) a.q4[i] = make_float4(q[0], q[1], q[2], 0.0f);
        }
        lse2_acc l0 = {-INFINITY, 0}, l1 = {-INFINITY, 0};
        for (size_t b = 0; b < a.m; b += a.tile) {
            int len = (int)(a.m - b < (size_t)a.tile ? a.m - b : (size_t)a.tile);
            stage(B, (long)b, len, [&](int k, size_t j) {
                float v = first ? 0.0f : __ldcg(a.v2 + j);
                tile[k] =
                    make_float4(__ldg(a.dx + j), __ldg(a.dy + j), __ldg(a.dz + j), v + k0.aterm);
            });
            if (active) {
                int k = slice;
                for (; k + S < len; k += 2 * S) {
                    float4 x = tile[k], y = tile[k + S];
                    lse2_add(l0, fmaf(sqdist4(q, x), k0.c, x.w));
                    lse2_add(l1, fmaf(sqdist4(q, y), k0.c, y.w));
                }
                if (k < len) {
                    float4 x = tile[k];
                    lse2_add(l0, fmaf(sqdist4(q, x), k0.c, x.w));
                }
            }
        }
        PK_MARK(B, 6);
        lse2_merge(l0, l1.mx, l1.sum);
        part[2 * threadIdx.x] = l0.mx;
        part[2 * threadIdx.x + 1] = l0.sum;
        __syncthreads();
        for (int rw = warp; rw < G && g * G + rw < a.n; rw += P_WARPS) {
            lse2_acc l = {-INFINITY, 0};
            for (int c = lane; c < S; c += 32)
                lse2_merge(l, part[2 * (c * G + rw)], part[2 * (c * G + rw) + 1]);
            for (int o = 16; o > 0; o >>= 1) {
                float bmx = __shfl_down_sync(0xffffffffu, l.mx, o);
                float bs = __shfl_down_sync(0xffffffffu, l.sum, o);
                lse2_merge(l, bmx, bs);
            }
            if (lane == 0) {
                float L = l.sum > 0 ? l.mx + lg2_fast(l.sum) : -INFINITY;
                a.u2[g * G + rw] = neg_lse2_slack(k0.lmo2, L);
            }
        }
        __syncthreads();
        PK_MARK(B, 7);
    }
}

/* Column pass: v_j = −LSE(slack, LSE_i(log K_ij + u_i)); with `moments`,
 * also this column's share of the Horn moments (see the top). */
template <int G, bool MOMENTS>
static __device__ void sa_col_pass(pk_block *B, const pk_args &a, float4 *tile, float *part,
                                   sa_consts k0)
{
    const int S = P_THREADS / G;
    const int r = threadIdx.x % G, slice = threadIdx.x / G;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t groups = (a.m + G - 1) / G;
    float4 *tile_s = tile + a.tile; /* the unmoved source points (MOMENTS) */
    if (threadIdx.x == 0) B->staged = -1;
    __syncthreads();
    for (size_t g = blockIdx.x; g < groups; g += gridDim.x) {
        size_t j = g * G + r;
        bool active = j < a.m;
        float q[3] = {0, 0, 0};
        if (active) {
            q[0] = __ldg(a.dx + j);
            q[1] = __ldg(a.dy + j);
            q[2] = __ldg(a.dz + j);
        }
        lsem_acc l0 = {-INFINITY, 0, 0, 0, 0}, l1 = {-INFINITY, 0, 0, 0, 0};
        for (size_t b = 0; b < a.n; b += a.tile) {
            int len = (int)(a.n - b < (size_t)a.tile ? a.n - b : (size_t)a.tile);
            stage(B, (long)b, len, [&](int k, size_t i) {
                float4 mv = __ldcg(a.q4 + i);
                mv.w = __ldcg(a.u2 + i) + k0.aterm;
                tile[k] = mv;
                if (MOMENTS)
                    tile_s[k] = make_float4(__ldg(a.src + 3 * i), __ldg(a.src + 3 * i + 1),
                                            __ldg(a.src + 3 * i + 2), 0.0f);
            });
            if (active) {
                int k = slice;
                if (MOMENTS) {
                    for (; k + S < len; k += 2 * S) {
                        float4 x = tile[k], y = tile[k + S];
                        lsem_add(l0, fmaf(sqdist4(q, x), k0.c, x.w), tile_s[k]);
                        lsem_add(l1, fmaf(sqdist4(q, y), k0.c, y.w), tile_s[k + S]);
                    }
                    if (k < len) {
                        float4 x = tile[k];
                        lsem_add(l0, fmaf(sqdist4(q, x), k0.c, x.w), tile_s[k]);
                    }
                } else {
                    lse2_acc m0 = {l0.mx, l0.sum}, m1 = {l1.mx, l1.sum};
                    for (; k + S < len; k += 2 * S) {
                        float4 x = tile[k], y = tile[k + S];
                        lse2_add(m0, fmaf(sqdist4(q, x), k0.c, x.w));
                        lse2_add(m1, fmaf(sqdist4(q, y), k0.c, y.w));
                    }
                    if (k < len) {
                        float4 x = tile[k];
                        lse2_add(m0, fmaf(sqdist4(q, x), k0.c, x.w));
                    }
                    l0.mx = m0.mx;
                    l0.sum = m0.sum;
                    l1.mx = m1.mx;
                    l1.sum = m1.sum;
                }
            }
        }
        PK_MARK(B, 6);
        lsem_merge(l0, l1);
        float *pp = part + (size_t)threadIdx.x * 5;
        pp[0] = l0.mx;
        pp[1] = l0.sum;
        pp[2] = l0.w0;
        pp[3] = l0.w1;
        pp[4] = l0.w2;
        __syncthreads();
        /* one warp per column: merge S slices */
        for (int rw = warp; rw < G && g * G + rw < a.m; rw += P_WARPS) {
            size_t jj = g * G + rw;
            lsem_acc l = {-INFINITY, 0, 0, 0, 0};
            for (int c = lane; c < S; c += 32) {
                const float *o = part + (size_t)(c * G + rw) * 5;
                lsem_acc b = {o[0], o[1], o[2], o[3], o[4]};
                lsem_merge(l, b);
            }
            for (int o = 16; o > 0; o >>= 1) {
                lsem_acc b;
                b.mx = __shfl_down_sync(0xffffffffu, l.mx, o);
                b.sum = __shfl_down_sync(0xffffffffu, l.sum, o);
                b.w0 = __shfl_down_sync(0xffffffffu, l.w0, o);
                b.w1 = __shfl_down_sync(0xffffffffu, l.w1, o);
                b.w2 = __shfl_down_sync(0xffffffffu, l.w2, o);
                lsem_merge(l, b);
            }
            if (lane == 0) {
                float L = l.sum > 0 ? l.mx + lg2_fast(l.sum) : -INFINITY;
                float v = neg_lse2_slack(k0.lmo2, L);
                if (!MOMENTS) a.v2[jj] = v;
                if (MOMENTS && l.sum > 0) {
                    /* m_ij = 2^(y_ij + v_j): Σ_i m_ij = 2^(v + mx) sum, Σ_i m_ij s_i likewise. */
                    double scale = exp2((double)v + (double)l.mx);
                    double cj = scale * l.sum, aj[3] = {scale * l.w0, scale * l.w1, scale * l.w2};
                    double x[3] = {a.dx[jj], a.dy[jj], a.dz[jj]};
                    double *mom = B->mom[rw];
                    if (cj > 0) {
                        mom[0] += cj;
                        for (int u = 0; u < 3; u++) {
                            mom[1 + u] += aj[u];
                            mom[4 + u] += cj * x[u];
                            for (int w = 0; w < 3; w++)
                                mom[7 + 3 * u + w] += aj[u] * x[w];
                        }
                    }
                }
            }
        }
        __syncthreads();
        PK_MARK(B, 7);
    }
}

template <int G>
static __global__ void __launch_bounds__(P_THREADS, 1) softassign_persistent(pk_args a)
{
    cg::grid_group grid = cg::this_grid();
    extern __shared__ float4 tile[];
    __shared__ pk_block B;
    __shared__ float part[P_THREADS * PART_FLOATS];
    block_start(&B, a);
    PK_PROF_START(&B);
    int parity = 0;
    while (!B.S.st.done) {
        const double T = B.S.st.temp;
        sa_consts k0;
        k0.c = (float)(-P_LOG2E / T);
        k0.aterm = (float)(a.p.alpha * P_LOG2E / T);
        k0.lmo2 = (float)(a.p.log_m_outlier * P_LOG2E);
        for (int round = 0; round < a.p.i1; round++) {
            sa_row_pass<G>(&B, a, tile, part, k0, round == 0);
            PK_MARK(&B, 0);
            grid.sync();
            PK_MARK(&B, 1);
            if (round + 1 < a.p.i1) {
                sa_col_pass<G, false>(&B, a, tile, part, k0);
            } else {
                sa_col_pass<G, true>(&B, a, tile, part, k0);
                block_moments_out(&B, a, parity);
            }
            PK_MARK(&B, 2);
            grid.sync();
            PK_MARK(&B, 3);
        }
        horn_in_block(&B, a, parity);
        PK_MARK(&B, 4);
        parity ^= 1;
    }
    PK_PROF_PRINT(&B, "softassign");
    block_end(&B, a);
}

/* ---- host side ------------------------------------------------------------------ */

/* Dynamic shared memory, tile and grid for one kernel; 0 blocks = cannot run. */
static kr_status plan_kernel(kr_gpu_context *ctx, const void *kernel, size_t cols, size_t bytes_per,
                             size_t groups, int *tile, size_t *dyn, int *blocks)
{
    int sms = 0, optin = 0, occ = 0;
    *blocks = 0;
    KR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device));
    KR_CUDA_CHECK(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device));
    cudaFuncAttributes fa;
    KR_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
    long room = (long)optin - (long)fa.sharedSizeBytes - 1024;
    if (room < (long)(64 * bytes_per)) return KR_OK;
    size_t t = (size_t)room / bytes_per;
    if (t > 8192) t = 8192;
    if (t > cols) t = cols > 0 ? cols : 1;
    *tile = (int)t;
    *dyn = t * bytes_per;
    KR_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)*dyn));
    KR_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, P_THREADS, *dyn));
    if (occ < 1) return KR_OK;
    size_t most = (size_t)sms * (size_t)occ;
    *blocks = (int)(groups < most ? (groups > 0 ? groups : 1) : most);
    return KR_OK;
}

kr_status kr_gpu_register_persistent(kr_gpu_context *ctx, const kr_hd_reg_params *p,
                                     const kr_gpu_reg_points *pts, kr_gpu_reg_state *state,
                                     int *ran)
{
    *ran = 0;
    int coop = 0;
    KR_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, ctx->device));
    if (!coop) return KR_OK;
    size_t n = pts->n, m = pts->m;
    bool emicp = p->method == KR_HD_REG_EMICP;
    if (!emicp && p->i1 < 1) return KR_OK; /* no Sinkhorn round: the multi-kernel engine */
    int sms = 0;
    KR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device));
    /* Rows per group G: a block's time on a pass goes as the rows it owns,
     * ceil(groups / blocks) · G; the smallest such G wins (fewer idle blocks
     * in the last round), ties going to the larger G (fewer merges, fewer
     * tile loads per pair). One block per SM (1024 threads). */
    size_t most_rows = emicp ? n : (n > m ? n : m);
    int G = 32;
    size_t best = (size_t)-1;
    for (int g = 32; g >= 8; g /= 2) {
        size_t groups_g = (most_rows + g - 1) / g;
        size_t cost = (groups_g + sms - 1) / sms * (size_t)g;
        if (cost < best) {
            best = cost;
            G = g;
        }
    }
    size_t groups = (most_rows + G - 1) / G;
    const void *kernel;
    if (emicp)
        kernel = G == 32   ? (const void *)emicp_persistent<32>
                 : G == 16 ? (const void *)emicp_persistent<16>
                           : (const void *)emicp_persistent<8>;
    else
        kernel = G == 32   ? (const void *)softassign_persistent<32>
                 : G == 16 ? (const void *)softassign_persistent<16>
                           : (const void *)softassign_persistent<8>;
    int tile = 0, blocks = 0;
    size_t dyn = 0;
    size_t cols = emicp ? m : (n > m ? n : m);
    kr_status s = plan_kernel(ctx, kernel, cols, emicp ? sizeof(float4) : 2 * sizeof(float4),
                              groups, &tile, &dyn, &blocks);
    if (s != KR_OK || blocks < 1) return s;

    void *part = NULL, *vec = NULL, *dstate = NULL, *hstate = NULL;
    size_t part_bytes = sizeof(float4) * n + sizeof(double) * 2 * 16 * (size_t)blocks;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_PARTIAL, part_bytes, &part)) != KR_OK) return s;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_VECTORS, sizeof(float) * (n + m + 8), &vec)) !=
        KR_OK)
        return s;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_STATE, sizeof *state, &dstate)) != KR_OK)
        return s;
    if ((s = kr_gpu_staging(ctx, KR_GPU_STAGING_REG_STATE, sizeof *state, &hstate)) != KR_OK)
        return s;
    pk_args a;
    memset(&a, 0, sizeof a);
    a.p = *p;
    a.S = (kr_gpu_reg_state *)dstate;
    a.src = pts->src;
    a.dx = pts->dst;
    a.dy = pts->dst + m;
    a.dz = pts->dst + 2 * m;
    a.q4 = (float4 *)part;
    a.bmom = (double *)((char *)part + sizeof(float4) * n);
    a.u2 = (float *)vec;
    a.v2 = a.u2 + n;
    a.n = n;
    a.m = m;
    a.tile = tile;
    KR_CUDA_CHECK(cudaMemcpyAsync(a.S, state, sizeof *state, cudaMemcpyHostToDevice, ctx->stream));
    void *args[] = {&a};
    cudaError_t launch =
        cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(P_THREADS), args, dyn, ctx->stream);
    if (launch == cudaErrorCooperativeLaunchTooLarge) {
        /* The blocks cannot all be resident now (another context holds
         * SMs, MPS limits): the multi-kernel engine needs no such promise. */
        (void)cudaGetLastError();
        return KR_OK;
    }
    KR_CUDA_CHECK(launch);
    kr_gpu_reg_state *h = (kr_gpu_reg_state *)hstate;
    KR_CUDA_CHECK(cudaMemcpyAsync(h, a.S, sizeof *h, cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    *state = *h;
    *ran = 1;
    return KR_OK;
}
