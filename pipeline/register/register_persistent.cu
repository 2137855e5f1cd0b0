/* The fused EM-ICP and Softassign engines as ONE cooperative kernel for the
 * whole annealing schedule (DESIGN.md §5; issue 13, session 5).
 *
 * Why. The multi-kernel engine (pipeline/register/register_fused.cu) spent most of a
 * Softassign step launching and draining its 13 kernels of 3–11 µs each: the
 * pair work of a 2000 × 2000 Sinkhorn pass is 4 M exponentials, about 1.5 µs
 * of an H100. Here every block stays resident for the whole schedule and the
 * passes are separated by grid-wide barriers (a cooperative launch, and
 * grid_barrier() below):
 *   EM-ICP:     pair pass + per-row finish + moments | grid barrier | Horn
 *   Softassign: (row pass | sync | column pass | sync) × I1, the last column
 *               pass also accumulating the Horn moments | Horn
 * Horn's step is solved by every block on its own (one warp, from the same
 * per-block moments summed in the same order, so every block holds the same
 * pose and takes the same schedule decisions): no barrier after it.
 *
 * Layout of a pass. A block owns groups of G rows (G = 8, 16 or 32) and splits
 * the columns of each group over 1024 / G slices; the columns are staged in
 * shared memory as float4 (one 16-byte load per pair) and every lane of a
 * G-wide row group reads the same column (a broadcast). The slices' partial
 * sums of a row are merged in shared memory by one warp per row — no global
 * partials and no finishing kernels (EM-ICP keeps two merge buffers, so a
 * group's merge overlaps the next group's pairs). Exponentials are base 2
 * with log2(e) folded into the per-pass constants, and the running shifts
 * are lazy: a sum is rescaled only when a new term would exceed 2^40
 * (EM-ICP, whose sums hold e²) or 2^64 (log-sum-exp), which the float range
 * holds, tested once per four pairs. Softassign keeps both point sets in
 * shared memory for the whole kernel when they fit (a pass then reloads only
 * the scalings).
 *
 * Softassign's M-step in column form: Σ_ij m_ij (1, s_i, x_j, s_i x_jᵀ) are
 * exactly the Horn moments of the row form (weights r_i = Σ_j m_ij on the
 * pairs (s_i, z_i / r_i), pipeline/register/softreg_kernels.h), and per column j
 *     Σ_i m_ij = 2^(v_j + L_j),  Σ_i m_ij s_i = 2^(v_j + mx_j) Σ_i 2^(y_ij − mx_j) s_i
 * come out of the column pass's own log-sum-exp (y_ij = log2 K_ij + u_i) —
 * so the mass pass of the multi-kernel engine disappears.
 *
 * Memory O(N + M): moved source points and u (N float4 and N floats), v (M),
 * and 2 × 16 × blocks doubles of moments (double-buffered by step parity:
 * a block still reading step k's moments cannot be overtaken by a block
 * writing step k+1's, since those go to the other buffer). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/register/persistent_kernel.cuh"

/* A group's merge costs about this many rows of pairs (see the host side). */
#define PK_MERGE_ROWS 6
/* Softassign keeps both point sets in shared memory when they fit (sa_row_pass). */
#ifndef PK_SA_RESIDENT
#define PK_SA_RESIDENT 1
#endif
/* A running sum is rescaled when a new term would exceed 2^LAZY (see top). */
#define LAZY_EMICP 40.0f
#define LAZY_LSE 64.0f
/* Fields of one slice's partial in the merge buffer (EM-ICP: mu, s1, sh, sx). */
#define PART_FLOATS 6
/* The merge buffer holds each field as G rows of S + 32/G floats (S = 1024/G
 * slices): the merging warp of a row reads 32 consecutive floats, and the
 * 32 threads of a warp writing their partials (32/G slices × G rows) fall on
 * 32 distinct banks. The first layout, slice-major with the fields
 * interleaved, put a merging warp's 32 reads on one or two banks (16- to
 * 32-way conflicts). */
#define PART_FIELD (P_THREADS + 32)
template <int G> static __device__ __forceinline__ int part_at(int row, int slice)
{
    return row * (P_THREADS / G + 32 / G) + slice;
}

/* ---- EM-ICP ------------------------------------------------------------------ */

/* Pair arithmetic. The lazy-shift test is made once per batch of four
 * pairs (on their largest exponent), not per pair, so that the four
 * exponentials of a batch overlap. With PK_EXPAND_* the exponent of a pair
 * is expanded, kk − h‖q − x‖² = (kk − h‖q‖²) − h‖x‖² + 2h q·x, so that with
 * ‖x‖² staged beside x and 2h q and kk − h‖q‖² kept per row it costs four
 * FMAs instead of seven instructions; its rounding is ~ulp(h‖q‖²) in the
 * exponent (a few 1e-4 at the schedule's end, random from pair to pair),
 * and the shift itself is taken from exact distances. Measured on the H100
 * (docs/BENCHMARKS.md, session 6): it pays for Softassign, not for EM-ICP. */
#ifndef PK_EXPAND_EMICP
#define PK_EXPAND_EMICP 0
#endif
#ifndef PK_EXPAND_SA
#define PK_EXPAND_SA 1
#endif

typedef struct {
    float kk;         /* mu · h: the shift in exponent units (h = log2 e / 2σ²) */
    float mu, s1, sh; /* shift (m²), Σ e², Σ e with e = 2^(kk − d² h) */
    float sx, sy, sz; /* Σ e x_j */
} emicp_acc;

/* One row's pair constants: the moved point q, and for the expanded form
 * 2h q and c0 = kk − h‖q‖². */
typedef struct {
    float q[3], q2h[3], qq, c0;
} emicp_row_c;

static __device__ __forceinline__ float emicp_arg(const emicp_row_c &c, const emicp_acc &r,
                                                  float4 x, float h)
{
#if PK_EXPAND_EMICP
    (void)r;
    return fmaf(c.q2h[0], x.x, fmaf(c.q2h[1], x.y, fmaf(c.q2h[2], x.z, fmaf(x.w, -h, c.c0))));
#else
    return fmaf(sqdist4(c.q, x), -h, r.kk);
#endif
}

/* Moves the shift to the nearest of the columns given (exact distances):
 * rare, and the first column of a row (kk = inf: f = 0). */
static __device__ __forceinline__ void emicp_rebase(emicp_acc &r, emicp_row_c &c, float h,
                                                    float4 x0, float4 x1, float4 x2, float4 x3,
                                                    int count)
{
    float d2 = sqdist4(c.q, x0);
    if (count > 1) d2 = fminf(d2, sqdist4(c.q, x1));
    if (count > 2) d2 = fminf(d2, sqdist4(c.q, x2));
    if (count > 3) d2 = fminf(d2, sqdist4(c.q, x3));
    float kk = d2 * h;
    float f = ex2_fast(kk - r.kk);
    r.s1 *= f * f;
    r.sh *= f;
    r.sx *= f;
    r.sy *= f;
    r.sz *= f;
    r.mu = d2;
    r.kk = kk;
    c.c0 = kk - h * c.qq;
}

static __device__ __forceinline__ void emicp_acc_add(emicp_acc &r, float ea, float4 x)
{
    float e = ex2_fast(ea);
    r.s1 = fmaf(e, e, r.s1);
    r.sh += e;
    r.sx = fmaf(e, x.x, r.sx);
    r.sy = fmaf(e, x.y, r.sy);
    r.sz = fmaf(e, x.z, r.sz);
}

template <int G>
static __device__ void emicp_pass(pk_block *B, const pk_args &a, float4 *tile, float *parts)
{
    const int S = P_THREADS / G;
    const int r = threadIdx.x % G, slice = threadIdx.x / G;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* The lambdas below capture these, not `a`: a reference to a kernel
     * parameter would copy all the parameters to every thread's stack. */
    const float *dx = a.dx, *dy = a.dy, *dz = a.dz;
    const double temp = B->S.st.temp;
    const float h = (float)(P_LOG2E * 0.5 / temp), half_inv = (float)(0.5 / temp);
    const size_t groups = (a.n + G - 1) / G;
    int buf = 0;
    for (size_t g = blockIdx.x; g < groups; g += gridDim.x, buf ^= 1) {
        /* Two merge buffers: a group's merge (8–32 warps) overlaps the next
         * group's pair loop in the other warps. Buffer b is written again two
         * groups later, after a barrier that every merging warp passes only
         * when its merge of the group before is done. */
        float *part = parts + (size_t)buf * PART_FLOATS * PART_FIELD;
        size_t i = g * G + r;
        bool active = i < a.n;
        emicp_row_c rc = {{0, 0, 0}, {0, 0, 0}, 0, INFINITY};
        if (active) {
            float s[3] = {__ldg(a.src + 3 * i), __ldg(a.src + 3 * i + 1), __ldg(a.src + 3 * i + 2)};
            kr_register_move(B->R, B->t, s, rc.q);
            for (int k = 0; k < 3; k++)
                rc.q2h[k] = 2.0f * h * rc.q[k];
            rc.qq = rc.q[0] * rc.q[0] + rc.q[1] * rc.q[1] + rc.q[2] * rc.q[2];
        }
        emicp_acc acc = {INFINITY, INFINITY, 0, 0, 0, 0, 0};
        for (size_t b = 0; b < a.m; b += a.tile) {
            int len = (int)(a.m - b < (size_t)a.tile ? a.m - b : (size_t)a.tile);
            stage(B, (long)b, len, [&](int k, size_t j) {
                float x = __ldg(dx + j), y = __ldg(dy + j), z = __ldg(dz + j);
                tile[k] = make_float4(x, y, z, x * x + y * y + z * z);
            });
            if (active) {
                int k = slice;
                for (; k + 3 * S < len; k += 4 * S) {
                    float4 x0 = tile[k], x1 = tile[k + S], x2 = tile[k + 2 * S],
                           x3 = tile[k + 3 * S];
                    float a0 = emicp_arg(rc, acc, x0, h), a1 = emicp_arg(rc, acc, x1, h);
                    float a2 = emicp_arg(rc, acc, x2, h), a3 = emicp_arg(rc, acc, x3, h);
                    if (fmaxf(fmaxf(a0, a1), fmaxf(a2, a3)) > LAZY_EMICP) {
                        emicp_rebase(acc, rc, h, x0, x1, x2, x3, 4);
                        a0 = emicp_arg(rc, acc, x0, h);
                        a1 = emicp_arg(rc, acc, x1, h);
                        a2 = emicp_arg(rc, acc, x2, h);
                        a3 = emicp_arg(rc, acc, x3, h);
                    }
                    emicp_acc_add(acc, a0, x0);
                    emicp_acc_add(acc, a1, x1);
                    emicp_acc_add(acc, a2, x2);
                    emicp_acc_add(acc, a3, x3);
                }
                for (; k < len; k += S) {
                    float4 x = tile[k];
                    float a0 = emicp_arg(rc, acc, x, h);
                    if (a0 > LAZY_EMICP) {
                        emicp_rebase(acc, rc, h, x, x, x, x, 1);
                        a0 = emicp_arg(rc, acc, x, h);
                    }
                    emicp_acc_add(acc, a0, x);
                }
            }
        }
        PK_MARK(B, 6);
        float *pp = part + part_at<G>(r, slice);
        pp[0] = acc.mu;
        pp[PART_FIELD] = acc.s1;
        pp[2 * PART_FIELD] = acc.sh;
        pp[3 * PART_FIELD] = acc.sx;
        pp[4 * PART_FIELD] = acc.sy;
        pp[5 * PART_FIELD] = acc.sz;
        __syncthreads();
        for (int rw = warp; rw < G && g * G + rw < a.n;
             rw += P_WARPS) { /* one warp per row: merge S slices */
            kr_register_emicp_row row;
            kr_register_emicp_row_init(&row);
            for (int c = lane; c < S; c += 32) {
                const float *o = part + part_at<G>(rw, c);
                kr_register_emicp_row b;
                b.mu = o[0];
                b.s1 = o[PART_FIELD];
                b.sh = o[2 * PART_FIELD];
                b.sx[0] = o[3 * PART_FIELD];
                b.sx[1] = o[4 * PART_FIELD];
                b.sx[2] = o[5 * PART_FIELD];
                kr_register_emicp_row_merge(&row, &b, half_inv);
            }
            for (int o = 16; o > 0; o >>= 1) {
                kr_register_emicp_row b;
                b.mu = __shfl_down_sync(0xffffffffu, row.mu, o);
                b.s1 = __shfl_down_sync(0xffffffffu, row.s1, o);
                b.sh = __shfl_down_sync(0xffffffffu, row.sh, o);
                for (int k = 0; k < 3; k++)
                    b.sx[k] = __shfl_down_sync(0xffffffffu, row.sx[k], o);
                kr_register_emicp_row_merge(&row, &b, half_inv);
            }
            if (lane == 0) {
                size_t ii = g * G + rw;
                double w, pt[3], s[3] = {a.src[3 * ii], a.src[3 * ii + 1], a.src[3 * ii + 2]};
                kr_register_emicp_row_finish(&row, a.p.d02, 1.0 / temp, &w, pt);
                kr_register_moments_add(B->mom[rw], w, s, pt);
            }
        }
        PK_MARK(B, 7);
    }
}

template <int G>
static __global__ void __launch_bounds__(P_THREADS, 1)
    emicp_persistent(const __grid_constant__ pk_args a)
{
    cg::grid_group grid = cg::this_grid();
    extern __shared__ float4 tile[];
    __shared__ pk_block B;
    float *parts = (float *)(tile + a.tile); /* 2 × PART_FLOATS × PART_FIELD */
    block_start(&B, a);
    PK_PROF_START(&B);
    int parity = 0;
    while (!B.S.st.done) {
        emicp_pass<G>(&B, a, tile, parts);
        block_moments_out(&B, a, parity);
        PK_MARK(&B, 0);
        grid_barrier(&B, a, grid);
        PK_MARK(&B, 1);
        horn_in_block(&B, a, parity);
        PK_MARK(&B, 4);
        parity ^= 1;
    }
    PK_PROF_PRINT(&B, "emicp", G);
    block_end(&B, a);
}

/* ---- Softassign ---------------------------------------------------------------- */

typedef struct {
    float mx, sum; /* log2-sum-exp2: Σ 2^(y − mx) */
} lse2_acc;

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

/* Softassign's pair loops (see PK_EXPAND above): y_ij = c‖q − x‖² + w_x with
 * c = −log2 e / T; expanded, y = c‖q‖² + (c‖x‖² + w_x) − 2c q·x, the middle
 * term staged as the tile's w. A running sum keeps `base` = c‖q‖² − mx so
 * that an FMA chain gives y − mx directly; the lazy shift is tested once per
 * batch of four pairs. */
typedef struct {
    float q[3], q2[3], cqq; /* the row's point, −2c q, c‖q‖² */
} sa_row_c;

typedef struct {
    float mx, sum, base; /* Σ 2^(y − mx); base = c‖q‖² − mx (inf before the first term) */
    float w0, w1, w2;    /* Σ 2^(y − mx) s (the moment pass only) */
} sa_run;

static __device__ __forceinline__ void sa_row_setup(sa_row_c &rc, float c)
{
#if PK_EXPAND_SA
    for (int k = 0; k < 3; k++)
        rc.q2[k] = -2.0f * c * rc.q[k];
    rc.cqq = c * (rc.q[0] * rc.q[0] + rc.q[1] * rc.q[1] + rc.q[2] * rc.q[2]);
#else
    (void)c;
    rc.q2[0] = rc.q2[1] = rc.q2[2] = 0.0f;
    rc.cqq = 0.0f;
#endif
}

/* The tile's w for a column (or row) with scaling term w and point x. */
static __device__ __forceinline__ float sa_tile_w(float w, float c, float x, float y, float z)
{
#if PK_EXPAND_SA
    return fmaf(c, x * x + y * y + z * z, w);
#else
    (void)c, (void)x, (void)y, (void)z;
    return w;
#endif
}

/* y − mx + (base − (c‖q‖² − mx)): y − mx for base = c‖q‖² − mx. */
static __device__ __forceinline__ float sa_arg(const sa_row_c &rc, float4 x, float c, float base)
{
#if PK_EXPAND_SA
    (void)c;
    return fmaf(rc.q2[0], x.x, fmaf(rc.q2[1], x.y, fmaf(rc.q2[2], x.z, x.w + base)));
#else
    return fmaf(sqdist4(rc.q, x), c, x.w + base);
#endif
}

/* Moves the shift to the largest y of the batch: rare, and the first batch
 * of a row (mx = −inf: the factor is 0). */
template <bool MOM>
static __device__ __forceinline__ void sa_rebase(sa_run &l, const sa_row_c &rc, float c, float4 x0,
                                                 float4 x1, float4 x2, float4 x3, int count)
{
    float y = sa_arg(rc, x0, c, rc.cqq);
    if (count > 1) y = fmaxf(y, sa_arg(rc, x1, c, rc.cqq));
    if (count > 2) y = fmaxf(y, sa_arg(rc, x2, c, rc.cqq));
    if (count > 3) y = fmaxf(y, sa_arg(rc, x3, c, rc.cqq));
    float f = ex2_fast(l.mx - y);
    l.sum *= f;
    if (MOM) {
        l.w0 *= f;
        l.w1 *= f;
        l.w2 *= f;
    }
    l.mx = y;
    l.base = rc.cqq - y;
}

/* Adds `len` tile entries from k = slice, stride S: four at a time. */
template <bool MOM>
static __device__ __forceinline__ void sa_loop(sa_run &l, const sa_row_c &rc, float c,
                                               const float4 *tile, const float4 *tile_s, int slice,
                                               int S, int len)
{
    int k = slice;
    for (; k + 3 * S < len; k += 4 * S) {
        float4 x0 = tile[k], x1 = tile[k + S], x2 = tile[k + 2 * S], x3 = tile[k + 3 * S];
        float d0 = sa_arg(rc, x0, c, l.base), d1 = sa_arg(rc, x1, c, l.base);
        float d2 = sa_arg(rc, x2, c, l.base), d3 = sa_arg(rc, x3, c, l.base);
        if (fmaxf(fmaxf(d0, d1), fmaxf(d2, d3)) > LAZY_LSE) {
            sa_rebase<MOM>(l, rc, c, x0, x1, x2, x3, 4);
            d0 = sa_arg(rc, x0, c, l.base);
            d1 = sa_arg(rc, x1, c, l.base);
            d2 = sa_arg(rc, x2, c, l.base);
            d3 = sa_arg(rc, x3, c, l.base);
        }
        float e0 = ex2_fast(d0), e1 = ex2_fast(d1), e2 = ex2_fast(d2), e3 = ex2_fast(d3);
        l.sum += (e0 + e1) + (e2 + e3);
        if (MOM) {
            float4 s0 = tile_s[k], s1 = tile_s[k + S], s2 = tile_s[k + 2 * S],
                   s3 = tile_s[k + 3 * S];
            l.w0 += fmaf(e0, s0.x, e1 * s1.x) + fmaf(e2, s2.x, e3 * s3.x);
            l.w1 += fmaf(e0, s0.y, e1 * s1.y) + fmaf(e2, s2.y, e3 * s3.y);
            l.w2 += fmaf(e0, s0.z, e1 * s1.z) + fmaf(e2, s2.z, e3 * s3.z);
        }
    }
    for (; k < len; k += S) {
        float4 x = tile[k];
        float d = sa_arg(rc, x, c, l.base);
        if (d > LAZY_LSE) {
            sa_rebase<MOM>(l, rc, c, x, x, x, x, 1);
            d = sa_arg(rc, x, c, l.base);
        }
        float e = ex2_fast(d);
        l.sum += e;
        if (MOM) {
            float4 s = tile_s[k];
            l.w0 = fmaf(e, s.x, l.w0);
            l.w1 = fmaf(e, s.y, l.w1);
            l.w2 = fmaf(e, s.z, l.w2);
        }
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
    /* The lambdas below capture these, not `a`: a reference to a kernel
     * parameter would copy all the parameters to every thread's stack. */
    const float *dx = a.dx, *dy = a.dy, *dz = a.dz;
    const float *v2 = a.v2;
    const size_t groups = (a.n + G - 1) / G;
    const bool resident = a.resident;
    if (resident) {
        /* All of dst stays in the tile for the whole kernel: a pass reloads
         * only the scalings, one float a point, where staging anew read 16
         * bytes a point from L2 in every block (2000 points, 125 blocks:
         * 4 MB a pass, L2-bandwidth bound). The tile was last read by the
         * previous row pass, a grid barrier ago. */
        PK_MARK(B, 0);
        const bool have = B->rows_resident;
        for (int k = threadIdx.x; k < (int)a.m; k += P_THREADS) {
            float4 x =
                have ? tile[k] : make_float4(__ldg(dx + k), __ldg(dy + k), __ldg(dz + k), 0.0f);
            float v = first ? 0.0f : __ldcg(v2 + k);
            x.w = sa_tile_w(v + k0.aterm, k0.c, x.x, x.y, x.z);
            tile[k] = x;
        }
        __syncthreads();
        if (threadIdx.x == 0) B->rows_resident = 1;
        PK_MARK(B, 5);
    }
    /* Otherwise the tile's scalings changed: the pass's first tile is staged
     * anew (stage()'s own barrier keeps the last pass's readers safe). */
    for (size_t g = blockIdx.x; g < groups; g += gridDim.x) {
        const bool fresh = g == blockIdx.x;
        size_t i = g * G + r;
        bool active = i < a.n;
        /* The row's point is loaded before the first tile is staged and
         * used after it: the two loads' latencies overlap. */
        float s[3] = {0, 0, 0};
        if (active) {
            s[0] = __ldg(a.src + 3 * i);
            s[1] = __ldg(a.src + 3 * i + 1);
            s[2] = __ldg(a.src + 3 * i + 2);
        }
        sa_row_c rc = {{0, 0, 0}, {0, 0, 0}, 0};
        sa_run l0 = {-INFINITY, 0, INFINITY, 0, 0, 0};
        for (size_t b = 0; b < a.m; b += a.tile) {
            int len = (int)(a.m - b < (size_t)a.tile ? a.m - b : (size_t)a.tile);
            if (!resident)
                stage(
                    B, (long)b, len,
                    [&](int k, size_t j) {
                        float v = first ? 0.0f : __ldcg(v2 + j);
                        float x = __ldg(dx + j), y = __ldg(dy + j), z = __ldg(dz + j);
                        tile[k] = make_float4(x, y, z, sa_tile_w(v + k0.aterm, k0.c, x, y, z));
                    },
                    fresh && b == 0);
            if (b == 0) {
                if (active) {
                    kr_register_move(B->R, B->t, s, rc.q);
                    if (first && slice == 0 && !resident)
                        a.q4[i] = make_float4(rc.q[0], rc.q[1], rc.q[2], 0.0f);
                }
                sa_row_setup(rc, k0.c);
            }
            if (active) sa_loop<false>(l0, rc, k0.c, tile, tile, slice, S, len);
        }
        PK_MARK(B, 6);
        part[part_at<G>(r, slice)] = l0.mx;
        part[PART_FIELD + part_at<G>(r, slice)] = l0.sum;
        __syncthreads();
        for (int rw = warp; rw < G && g * G + rw < a.n; rw += P_WARPS) {
            lse2_acc l = {-INFINITY, 0};
            for (int c = lane; c < S; c += 32)
                lse2_merge(l, part[part_at<G>(rw, c)], part[PART_FIELD + part_at<G>(rw, c)]);
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
        /* part is reused by this block's next group; after its last group
         * the grid barrier (or the moments' barrier) comes first. */
        if (g + gridDim.x < groups) __syncthreads();
        PK_MARK(B, 7);
    }
}

/* Column pass: v_j = −LSE(slack, LSE_i(log K_ij + u_i)); with `moments`,
 * also this column's share of the Horn moments (see the top). */
template <int G, bool MOMENTS>
static __device__ void sa_col_pass(pk_block *B, const pk_args &a, float4 *tile, float *part,
                                   sa_consts k0, bool fresh_pose)
{
    const int S = P_THREADS / G;
    const int r = threadIdx.x % G, slice = threadIdx.x / G;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t groups = (a.m + G - 1) / G;
    float4 *tile_s = tile + a.tile; /* the unmoved source points (MOMENTS) */
    const float4 *q4 = a.q4;
    const float *u2 = a.u2, *src = a.src; /* captured, not `a` (see the row pass) */
    const bool resident = a.resident;
    if (resident) {
        /* As in the row pass: src stays in tile_s for the kernel, the moved
         * source is computed here from it once a Horn step (the same floats
         * and pose as the row pass's), and a pass reloads only u. */
        PK_MARK(B, 2);
        const bool have = B->cols_resident;
        for (int k = threadIdx.x; k < (int)a.n; k += P_THREADS) {
            float4 s4 = have ? tile_s[k]
                             : make_float4(__ldg(src + 3 * k), __ldg(src + 3 * k + 1),
                                           __ldg(src + 3 * k + 2), 0.0f);
            if (!have) tile_s[k] = s4;
            float4 q;
            if (fresh_pose) {
                float sp[3] = {s4.x, s4.y, s4.z}, qm[3];
                kr_register_move(B->R, B->t, sp, qm);
                q = make_float4(qm[0], qm[1], qm[2], 0.0f);
            } else {
                q = tile[k];
            }
            q.w = sa_tile_w(__ldcg(u2 + k) + k0.aterm, k0.c, q.x, q.y, q.z);
            tile[k] = q;
        }
        __syncthreads();
        if (threadIdx.x == 0) B->cols_resident = 1;
        PK_MARK(B, 5);
    }
    for (size_t g = blockIdx.x; g < groups; g += gridDim.x) {
        const bool fresh = g == blockIdx.x;
        size_t j = g * G + r;
        bool active = j < a.m;
        sa_row_c rc = {{0, 0, 0}, {0, 0, 0}, 0};
        if (active) { /* used after the first tile is staged (see the row pass) */
            rc.q[0] = __ldg(a.dx + j);
            rc.q[1] = __ldg(a.dy + j);
            rc.q[2] = __ldg(a.dz + j);
        }
        sa_run l0 = {-INFINITY, 0, INFINITY, 0, 0, 0};
        for (size_t b = 0; b < a.n; b += a.tile) {
            int len = (int)(a.n - b < (size_t)a.tile ? a.n - b : (size_t)a.tile);
            if (!resident)
                stage(
                    B, (long)b, len,
                    [&](int k, size_t i) {
                        float4 mv = __ldcg(q4 + i);
                        mv.w = sa_tile_w(__ldcg(u2 + i) + k0.aterm, k0.c, mv.x, mv.y, mv.z);
                        tile[k] = mv;
                        if (MOMENTS)
                            tile_s[k] = make_float4(__ldg(src + 3 * i), __ldg(src + 3 * i + 1),
                                                    __ldg(src + 3 * i + 2), 0.0f);
                    },
                    fresh && b == 0);
            if (b == 0) sa_row_setup(rc, k0.c);
            if (active) sa_loop<MOMENTS>(l0, rc, k0.c, tile, tile_s, slice, S, len);
        }
        PK_MARK(B, 6);
        float *pp = part + part_at<G>(r, slice);
        pp[0] = l0.mx;
        pp[PART_FIELD] = l0.sum;
        if (MOMENTS) {
            pp[2 * PART_FIELD] = l0.w0;
            pp[3 * PART_FIELD] = l0.w1;
            pp[4 * PART_FIELD] = l0.w2;
        }
        __syncthreads();
        /* one warp per column: merge S slices */
        for (int rw = warp; rw < G && g * G + rw < a.m; rw += P_WARPS) {
            size_t jj = g * G + rw;
            lsem_acc l = {-INFINITY, 0, 0, 0, 0};
            for (int c = lane; c < S; c += 32) {
                const float *o = part + part_at<G>(rw, c);
                lsem_acc b = {o[0], o[PART_FIELD], 0, 0, 0};
                if (MOMENTS) {
                    b.w0 = o[2 * PART_FIELD];
                    b.w1 = o[3 * PART_FIELD];
                    b.w2 = o[4 * PART_FIELD];
                }
                lsem_merge(l, b);
            }
            for (int o = 16; o > 0; o >>= 1) {
                lsem_acc b;
                b.mx = __shfl_down_sync(0xffffffffu, l.mx, o);
                b.sum = __shfl_down_sync(0xffffffffu, l.sum, o);
                b.w0 = b.w1 = b.w2 = 0.0f;
                if (MOMENTS) {
                    b.w0 = __shfl_down_sync(0xffffffffu, l.w0, o);
                    b.w1 = __shfl_down_sync(0xffffffffu, l.w1, o);
                    b.w2 = __shfl_down_sync(0xffffffffu, l.w2, o);
                }
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
        /* part is reused by this block's next group; after its last group
         * the grid barrier (or the moments' barrier) comes first. */
        if (g + gridDim.x < groups) __syncthreads();
        PK_MARK(B, 7);
    }
}

template <int G>
static __global__ void __launch_bounds__(P_THREADS, 1)
    softassign_persistent(const __grid_constant__ pk_args a)
{
    cg::grid_group grid = cg::this_grid();
    extern __shared__ float4 tile[];
    __shared__ pk_block B;
    __shared__ float part[5 * PART_FIELD];
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
            grid_barrier(&B, a, grid);
            PK_MARK(&B, 1);
            /* Tiles: rows' dst, then the columns' moved source and source. */
            if (round + 1 < a.p.i1) {
                sa_col_pass<G, false>(&B, a, tile + a.tile, part, k0, round == 0);
            } else {
                sa_col_pass<G, true>(&B, a, tile + a.tile, part, k0, round == 0);
                block_moments_out(&B, a, parity);
            }
            PK_MARK(&B, 2);
            grid_barrier(&B, a, grid);
            PK_MARK(&B, 3);
        }
        horn_in_block(&B, a, parity);
        PK_MARK(&B, 4);
        parity ^= 1;
    }
    PK_PROF_PRINT(&B, "softassign", G);
    block_end(&B, a);
}

/* ---- host side ------------------------------------------------------------------ */

/* What a kernel's launch needs to know about the device, found once per
 * (kernel, device, tile width) and kept: cudaFuncGetAttributes,
 * cudaFuncSetAttribute and the occupancy query cost tens of µs a call, which
 * a 3 ms registration repeated per frame should not pay every time. */
typedef struct {
    const void *kernel;
    int device;
    size_t cols, bytes_per;
    int tile, occ, sms;
    size_t dyn;
} pk_plan;

#define PK_PLANS 32
static pk_plan pk_plans[PK_PLANS];
static int pk_plan_count;
static pthread_mutex_t pk_plan_lock = PTHREAD_MUTEX_INITIALIZER;

kr_status pk_plan_kernel(kr_gpu_context *ctx, const void *kernel, int threads, size_t cols,
                         size_t bytes_per, size_t reserved, size_t groups, int *tile, size_t *dyn,
                         int *blocks)
{
    *blocks = 0;
    pk_plan pl;
    int found = 0;
    pthread_mutex_lock(&pk_plan_lock);
    for (int k = 0; k < pk_plan_count && !found; k++)
        if (pk_plans[k].kernel == kernel && pk_plans[k].device == ctx->device &&
            pk_plans[k].cols == cols && pk_plans[k].bytes_per == bytes_per) {
            pl = pk_plans[k];
            found = 1;
        }
    pthread_mutex_unlock(&pk_plan_lock);
    if (!found) {
        int optin = 0;
        memset(&pl, 0, sizeof pl);
        pl.kernel = kernel;
        pl.device = ctx->device;
        pl.cols = cols;
        pl.bytes_per = bytes_per;
        KR_CUDA_CHECK(cudaDeviceGetAttribute(&pl.sms, cudaDevAttrMultiProcessorCount, ctx->device));
        KR_CUDA_CHECK(
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device));
        cudaFuncAttributes fa;
        KR_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
        long room = (long)optin - (long)fa.sharedSizeBytes - 1024 - (long)reserved;
        if (room >= (long)(64 * bytes_per)) {
            /* The attribute is set to the largest tile, whatever `cols`, so
             * that every cached plan of this kernel stays launchable. */
            size_t most = (size_t)room / bytes_per;
            if (most > 8192) most = 8192;
            size_t t = most < cols ? most : (cols > 0 ? cols : 1);
            pl.tile = (int)t;
            pl.dyn = t * bytes_per + reserved;
            size_t dyn_most = most * bytes_per + reserved;
            KR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)dyn_most));
            KR_CUDA_CHECK(
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pl.occ, kernel, threads, dyn_most));
        }
        pthread_mutex_lock(&pk_plan_lock);
        if (pk_plan_count < PK_PLANS) pk_plans[pk_plan_count++] = pl;
        pthread_mutex_unlock(&pk_plan_lock);
    }
    if (pl.occ < 1) return KR_OK;
    *tile = pl.tile;
    *dyn = pl.dyn;
    size_t most = (size_t)pl.sms * (size_t)pl.occ;
    *blocks = (int)(groups < most ? (groups > 0 ? groups : 1) : most);
    return KR_OK;
}

kr_status kr_register_cuda_persistent(kr_gpu_context *ctx, const kr_register_params *p,
                                      const kr_register_cuda_points *pts,
                                      kr_register_cuda_state *state, int *ran)
{
    *ran = 0;
    int coop = 0;
    KR_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, ctx->device));
    if (!coop) return KR_OK;
    size_t n = pts->n, m = pts->m;
    bool emicp = p->method == KR_REGISTER_METHOD_EMICP;
    if (!emicp && p->i1 < 1) return KR_OK; /* no Sinkhorn round: the multi-kernel engine */
    int sms = 0;
    KR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device));
#if defined(KR_PK_PROFILE) || defined(KR_PK_TUNING)
    /* Tuning builds: KR_PK_G=8|16|32 forces the rows per group. */
    const char *force_g = getenv("KR_PK_G");
#endif
    /* Rows per group G: a block's time on a pass goes as its rounds of
     * groups, ceil(groups / blocks), each costing its G rows of pairs plus a
     * merge worth about PK_MERGE_ROWS rows (fitted on the H100, session 6:
     * EM-ICP 5000 takes 2.66 ms with 16 rows, 2.81 with 8; 20000 takes 20.1
     * with 32, 22.7 with 16, 27.1 with 8). The smallest cost wins, ties going
     * to the larger G. One block per SM (1024 threads). */
    size_t most_rows = emicp ? n : (n > m ? n : m);
    int G = 32;
    size_t best = (size_t)-1;
    for (int g = 32; g >= 8; g /= 2) {
        size_t groups_g = (most_rows + g - 1) / g;
        size_t cost = (groups_g + sms - 1) / sms * (size_t)(g + PK_MERGE_ROWS);
        if (cost < best) {
            best = cost;
            G = g;
        }
    }
#if defined(KR_PK_PROFILE) || defined(KR_PK_TUNING)
    if (force_g && (atoi(force_g) == 8 || atoi(force_g) == 16 || atoi(force_g) == 32))
        G = atoi(force_g);
#endif
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
    /* EM-ICP's two merge buffers follow its tile in dynamic shared memory. */
    size_t reserved = emicp ? 2 * sizeof(float) * PART_FLOATS * PART_FIELD : 0;
    kr_status s =
        pk_plan_kernel(ctx, kernel, P_THREADS, cols, emicp ? sizeof(float4) : 3 * sizeof(float4),
                       reserved, groups, &tile, &dyn, &blocks);
    if (s != KR_OK || blocks < 1) return s;

    void *part = NULL, *vec = NULL, *dstate = NULL, *hstate = NULL;
    size_t part_bytes = sizeof(float4) * n + sizeof(double) * 2 * 16 * (size_t)blocks;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_PARTIAL, part_bytes, &part)) != KR_OK) return s;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_VECTORS, sizeof(float) * (n + m + 8), &vec)) !=
        KR_OK)
        return s;
    /* The state, then (PK_FLAG_BARRIER) the barrier's arrival counter. */
    const size_t counter_at = (sizeof *state + 15) & ~(size_t)15;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_STATE, counter_at + 16, &dstate)) != KR_OK)
        return s;
    if ((s = kr_gpu_staging(ctx, KR_GPU_STAGING_REG_STATE, sizeof *state, &hstate)) != KR_OK)
        return s;
    pk_args a;
    memset(&a, 0, sizeof a);
    a.p = *p;
    a.S = (kr_register_cuda_state *)dstate;
    a.arrivals = (unsigned *)((char *)dstate + counter_at);
#if PK_FLAG_BARRIER
    KR_CUDA_CHECK(cudaMemsetAsync(a.arrivals, 0, sizeof(unsigned), ctx->stream));
#endif
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
    a.resident = PK_SA_RESIDENT && !emicp && n <= (size_t)tile && m <= (size_t)tile;
    a.init = *state;
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
    kr_register_cuda_state *h = (kr_register_cuda_state *)hstate;
    KR_CUDA_CHECK(cudaMemcpyAsync(h, a.S, sizeof *h, cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    *state = *h;
    *ran = 1;
    return KR_OK;
}
