/* Softassign with its plan held on chip (issue 13, session 10).
 *
 * Why. The streaming engine (pipeline/register/register_persistent.cu) computes every
 * pair's exponential anew in each of a Horn step's six Sinkhorn passes and
 * separates the passes by six grid barriers: 40 µs a step at 2000 × 2000 on
 * the H100, 19.4 ms for the seed's 500 steps (docs/BENCHMARKS.md, session
 * 6), where the pair work proper is ~1 µs a pass. At that size the whole
 * N × M matrix is 16 MB, and an H100's 132 SMs have 33 MB of registers.
 * Here each block keeps its rows of the matrix in its threads' registers
 * for the whole step: it computes their exponentials once, and the Sinkhorn
 * rounds become multiply-adds on them. A block owns whole rows, so a row
 * normalisation needs no other block; only the column sums cross blocks,
 * added with atomics (below). A step then has one grid
 * barrier a round and one for Horn's moments: four for the seed's I1 = 3,
 * against six. Measured on the H100 (docs/BENCHMARKS.md, sessions 10, 11
 * and 14): 24.5 µs a step at 2000 × 2000, 12.2 ms for the seed's schedule,
 * then 20.3 µs and 10.2 ms with float column sums in two copies, the rows
 * shifted by α' and the last round's Σ P g s taken while the other blocks
 * arrive; 11.7 ms with the exact sums; (session 15) 19.0 µs and 9.5 ms
 * with a lane's moments in float, the column steps' 16-byte loads and
 * three copies.
 * Nsight Compute (session 11, on the 1024-thread layout) said where: a
 * warp waited 22% of its time at the rounds' grid barriers and 11% for
 * Horn's warp, and the rest issued ~2400 instructions a step, four fifths
 * of them reductions, barriers and addressing that cost per warp — hence
 * the 512-thread layout (below). Cluster pre-sums of the column shares, a
 * cluster-level grid barrier and Horn's moments from global sums were each
 * measured slower (BENCHMARKS.md), and so were (session 14) the column sums
 * added by the TMA's bulk reductions, in four or more copies, or spread one
 * 16-byte sum to a 32-byte sector; Horn's step computed on every lane of
 * its warp without shuffles took no time off here and slowed the streaming
 * kernels' pair passes by 5 %.
 *
 * The math. pipeline/register/softreg_kernels.h gives Sinkhorn in log domain, as the
 * other engines compute it: m_ij = K_ij e^(u_i + v_j), with
 *     e^−u_i = m_o + Σ_j K_ij e^v_j,     e^−v_j = m_o + Σ_i K_ij e^u_i,
 * K_ij = e^(−(d²_ij − α)/T), v = 0 before a step's first row step. Let
 * y_ij = log2 K_ij = cc d²_ij + α' (cc = −log2 e / T, α' = α log2 e / T).
 * For a shift M_i of row i a block stores
 *     P_ij = 2^(y_ij − M_i)
 * and keeps the matrix as m_ij = P_ij g_i a_j with g_i = 2^M_i e^u_i and
 * a_j = e^v_j. The two steps become
 *     g_i = 1 / (m_o 2^−M_i + Σ_j P_ij a_j)   (a ≡ 1 in the first round),
 *     a_j = 1 / (m_o + C_j),   C_j = Σ_i P_ij g_i,
 * exact for any M_i; no exponential is taken after P. The shift is α'
 * while α' ≤ OC_ALPHA_SHIFT (60; the seed's schedule ends at 7.3): y ≤ α'
 * because d² ≥ 0, so P ∈ [0, 1] and the row needs no pass for its largest
 * entry, and m_o 2^−α' ≥ m_o 2^−60, beside which the entries that underflow
 * (P < 2^−126) are 2^−66 or less: nothing is lost. Colder, the shift is the
 * row's largest y, mx_i (a max pass): then P's largest is 1, m_o 2^−mx_i
 * overflows only for a row whose every K_ij is negligible beside m_o, and
 * g_i = 0 is the exact limit. In the first round P_ij g_i ≤ 1, so C_j ≤ N
 * and a_j ≥ 1/(m_o + N); the later rounds grow these bounds by at most a
 * factor N each, and the fixed point's guard (below) catches what it
 * cannot hold.
 *
 * Horn's moments in column form: per column, Σ_i m_ij = a_j C_j and
 * Σ_i m_ij s_i = a_j Σ_i P_ij g_i s_i from the last column step give
 * Σ_ij m_ij (1, s_i, x_j, s_i x_jᵀ), the sums the other engines take (the
 * streaming engine takes them in this form too). No other block needs the
 * block's Σ_i P_ij g_i s_i, so it is taken between the block's arrival at
 * the last round's barrier and its wait there; each lane then reads its
 * own columns' totals. A lane adds its columns' moments in float and the
 * warp's in float too: 128 columns a warp, each sum of non-negative
 * weights times coordinates the pipeline has centred on the clouds'
 * centroids (pipeline/register/register.c), so the float sums lose nothing the
 * centred S = P − W c_s c_dᵀ would need; the warps' and the blocks' sums
 * are in double. Measured: 4.9k → 4.2k SM cycles a step for the moments,
 * 10.2 → 9.95 ms (session 15).
 *
 * The column sums cross blocks through global memory, one buffer a round
 * (round k's is buffer k mod 3, which every block reads after the round's
 * barrier; then each block zeroes its slice of buffer (k + 2) mod 3 — read
 * after the previous barrier by everyone, so free, and next added to a
 * barrier from now). Two ways:
 *  - Float (the default): a block stages its shares C_jb in shared memory
 *    and adds them four columns an atomic (red.v4.f32) into one of
 *    OC_COPIES copies, which the readers add. The atomics end in the order
 *    the blocks arrive, so runs differ in the last float digits. Measured
 *    (session 14, a build between): one u64 atomic a column 12.4 ms, four
 *    columns a float atomic 11.4, in two copies 10.6 (the 125 blocks' adds
 *    to one address queue at the L2); session 15: three copies (below).
 *    A column step reads four columns' copies in 16-byte loads: 10.0 →
 *    9.9 ms.
 *  - Exact (kr_register_config's deterministic): block b adds
 *    round(2^40 C_jb) to an unsigned 64-bit counter per column. The
 *    counters are exact, so the sum is the same whatever the order of
 *    arrival. Its rounding, at most blocks × 2^−41 ≈ 6e−11 on a column sum,
 *    is beside m_o in a_j = 1 / (m_o + C_j): a relative error below 1e−6
 *    for m_o ≥ 1e−4 (the engine declines a smaller m_o; the seed's default
 *    is e^−1/√T₀ ≈ 0.037). A block's share above 2^23 / blocks would
 *    overflow the counter: the block sets a flag, and the host runs the
 *    streaming engine instead.
 *
 * Layout. A block takes RG groups of OC_RT = 4 rows (RG = 1, 2, 4 or 8;
 * the last block's spare rows are empty) and its 512 threads split them
 * and the columns: thread t takes row group t mod RG and CT (8 or 16)
 * columns, t / RG + c · 512 / RG. A thread holds P for its 4 × CT pairs in
 * registers — 64 floats at 2000 × 2000, on 125 blocks of 16 rows — so the
 * matrix never goes through memory. A row step adds each row over the
 * threads that hold it, a column step each column over the RG threads that
 * hold it, both with lanes_halve (each lane keeps half its values and
 * sends the other half, so K sums over a warp take K shuffles, not 5 K).
 * Tried first and measured: P in shared memory with a warp a row (every
 * sweep moved 4–20 bytes a pair through shared memory: 33 µs a step), a
 * thread a column over all the block's rows (the row sums' registers
 * spilled: 55 µs), and 1024 threads of 4 × 8 (session 10's layout: 29 µs
 * against 26 on the same code). The engine declines — and the streaming one runs — for
 * more than 32 rows a block or more than 512 / RG · 16 columns. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/register/persistent_kernel.cuh"

#define OC_FIX_BITS 40
#define OC_MIN_OUTLIER 1e-4
/* The rows' shift is α' while α' is at most this (see the top). */
#define OC_ALPHA_SHIFT 60.0f
/* Copies of the float column sums the blocks add into, block b into copy
 * b mod OC_COPIES (see the top). Measured on the H100, 2000 × 2000, the
 * seed's schedule (session 15, readers loading 16 bytes at once): 2 copies
 * 9.9 ms, 3 copies 9.5, 4 10.0, 5 10.3, 6 10.3 (session 14, with 4-byte
 * loads: 2 copies 10.2, 4 10.7, blocks split into halves 10.65). Why three
 * beat both two and four we have not found; the L2's slices the copies'
 * lines fall in are the likeliest. */
#define OC_COPIES 3
/* Bytes a column in a round's exchange buffer: a 64-bit counter or the copies. */
#define OC_XBYTES (OC_COPIES * 4 > 8 ? OC_COPIES * 4 : 8)

static constexpr __host__ __device__ int ilog2(int v)
{
    return v > 1 ? 1 + ilog2(v / 2) : 0;
}

/* Threads a block: 512, so that a thread may hold 4 × 16 entries of P in
 * its 128 registers. Measured on the H100 (BENCHMARKS.md, session 11):
 * 2000 × 2000 in 13.1 ms against 14.4 with 1024 threads of 4 × 8, and
 * faster at every size down to 300 — a block's reductions, barriers and
 * addressing cost per warp, and there are half the warps. */
#define OC_THREADS 512
static_assert(OC_THREADS / 32 >= 16, "horn_in_block: a warp for each of the 16 moments");
/* Rows a thread holds. */
#define OC_RT 4

/* The block's rows and the row sums' meeting place, in shared memory. */
template <int RP, int NW> struct oc_rows {
    float4 s[RP];      /* source points (zero past the block's rows) */
    float4 q[RP];      /* moved by this step's pose: y's row terms (below) */
    float mx[RP];      /* max_j y_ij */
    float mo[RP];      /* m_o 2^−mx_i */
    float g[RP];       /* the row factor */
    float red[NW][RP]; /* each warp's row sums */
};

struct op_add {
    static constexpr float identity = 0.0f;
    template <typename T> __device__ T operator()(T x, T y) const
    {
        return x + y;
    }
};
struct op_max {
    static constexpr float identity = -INFINITY;
    __device__ float operator()(float x, float y) const
    {
        return fmaxf(x, y);
    }
};

/* S halving steps over lane bits B0 … B0 + S − 1 on K values a lane: in
 * each, a lane keeps half of its values and adds its partner's share of
 * them (K/2 shuffles, not K). After them v[0 … K/2^S) hold, summed over
 * the 2^S lanes, the values first … first + K/2^S − 1; returns first. */
template <int S, int B0, int K, typename T, typename Op>
static __device__ __forceinline__ int lanes_halve(T (&v)[K], Op op)
{
    static_assert(K >> S >= 1, "more halving steps than values");
    if constexpr (S == 0) {
        return 0;
    } else {
        constexpr int half = K / 2, off = 1 << B0;
        const bool up = threadIdx.x & off;
#pragma unroll
        for (int k = 0; k < half; k++) {
            const T lo = v[k], hi = v[k + half];
            v[k] = op(up ? hi : lo, __shfl_xor_sync(0xffffffffu, up ? lo : hi, off));
        }
        /* The rest on the first half (written in place). */
        return (up ? half : 0) +
               lanes_halve<S - 1, B0 + 1, half>(*reinterpret_cast<T(*)[half]>(&v[0]), op);
    }
}

/* The total over lane bits FROM … 4. */
template <int FROM, typename T, typename Op>
static __device__ __forceinline__ T lanes_reduce(T v, Op op)
{
#pragma unroll
    for (int off = 1 << FROM; off < 32; off *= 2)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* Each of the block's rows reduced over the block's NW warps (a thread's
 * OC_RT partials v, rows rg·OC_RT + k), then finish(row, total) once a row;
 * every thread sees its effects afterwards. */
template <int RG, int NW, typename Op, typename F>
static __device__ __forceinline__ void rows_reduce(const float (&v)[OC_RT], Op op,
                                                   oc_rows<OC_RT * RG, NW> *W, F finish)
{
    constexpr int LRG = ilog2(RG), RP = OC_RT * RG;
    static_assert(NW <= 32, "rows_reduce: a lane for each warp");
    const int lane = threadIdx.x & 31, rg = threadIdx.x & (RG - 1);
    float w[OC_RT] = {v[0], v[1], v[2], v[3]};
    const int first = lanes_halve<2, LRG, OC_RT>(w, op);
    const float t = lanes_reduce<LRG + 2>(w[0], op);
    if ((lane >> (LRG + 2)) == 0) W->red[threadIdx.x >> 5][rg * OC_RT + first] = t;
    __syncthreads();
    /* Warp r adds row r's NW warp totals (and row r + NW's, ...). */
    for (int r = threadIdx.x >> 5; r < RP; r += NW) {
        const float total = lanes_reduce<0>(lane < NW ? W->red[lane][r] : Op::identity, op);
        if (lane == 0) finish(r, total);
    }
    __syncthreads();
}

/* The thread's share of Σ_i P_ij w_i for each of its CT columns, summed
 * over the RG lanes that hold the column's other row groups: the lane keeps
 * CT / RG of them, columns first … first + CT / RG − 1 (lanes_halve). */
template <int LRG, int CT>
static __device__ __forceinline__ int column_sums(const float (&P)[OC_RT][CT],
                                                  const float (&w)[OC_RT], float (&out)[CT])
{
#pragma unroll
    for (int c = 0; c < CT; c++) {
        out[c] = 0.0f;
#pragma unroll
        for (int k = 0; k < OC_RT; k++)
            out[c] = fmaf(P[k][c], w[k], out[c]);
    }
    return lanes_halve<LRG, 0, CT>(out, op_add());
}

/* The column totals C_j of columns j0 + k · stride (k < K, j < m) from
 * round's exchange buffer (see the top), all loads in flight at once. */
template <bool EXACT, int K>
static __device__ __forceinline__ void column_totals(const pk_args &a, const char *buf, int mp,
                                                     int j0, int stride, float (&out)[K])
{
    const int m = (int)a.m;
    if constexpr (EXACT) {
        const unsigned long long *u = (const unsigned long long *)buf;
        unsigned long long v[K];
#pragma unroll
        for (int k = 0; k < K; k++)
            v[k] = j0 + k * stride < m ? __ldcg(u + j0 + k * stride) : 0ull;
#pragma unroll
        for (int k = 0; k < K; k++)
            out[k] = (float)((double)v[k] * a.fix_inv);
    } else {
        const float *f = (const float *)buf;
        float v[K][OC_COPIES];
#pragma unroll
        for (int k = 0; k < K; k++)
#pragma unroll
            for (int r = 0; r < OC_COPIES; r++)
                v[k][r] = j0 + k * stride < m ? __ldcg(f + r * mp + j0 + k * stride) : 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) {
            out[k] = v[k][0];
#pragma unroll
            for (int r = 1; r < OC_COPIES; r++)
                out[k] += v[k][r];
        }
    }
}

/* The column totals C_j of columns j4 … j4 + 3 (j4 a multiple of 4, below
 * the padded count mp: the padding's sums are zero) from round's exchange
 * buffer, in 16-byte loads. */
template <bool EXACT>
static __device__ __forceinline__ float4 column_totals4(const pk_args &a, const char *buf, int mp,
                                                        int j4)
{
    if constexpr (EXACT) {
        const ulonglong2 *u = (const ulonglong2 *)buf + j4 / 2;
        const ulonglong2 lo = __ldcg(u), hi = __ldcg(u + 1);
        return make_float4((float)((double)lo.x * a.fix_inv), (float)((double)lo.y * a.fix_inv),
                           (float)((double)hi.x * a.fix_inv), (float)((double)hi.y * a.fix_inv));
    } else {
        const float4 *f = (const float4 *)buf + j4 / 4;
        float4 v[OC_COPIES];
#pragma unroll
        for (int r = 0; r < OC_COPIES; r++)
            v[r] = __ldcg(f + r * (mp / 4));
        float4 t = v[0];
#pragma unroll
        for (int r = 1; r < OC_COPIES; r++)
            t = make_float4(t.x + v[r].x, t.y + v[r].y, t.z + v[r].z, t.w + v[r].w);
        return t;
    }
}

/* RG row groups of OC_RT rows a block; a thread takes row group tid mod RG
 * and the CT columns tid / RG + c · (OC_THREADS / RG). EXACT: the column
 * sums in fixed point (see the top). */
template <int RG, int CT, bool EXACT>
static __global__ void __launch_bounds__(OC_THREADS, 1)
    softassign_onchip(const __grid_constant__ pk_args a)
{
    constexpr int TH = OC_THREADS, RP = OC_RT * RG, LRG = ilog2(RG), NCG = TH / RG;
    constexpr int KEEP = CT / RG, NW = TH / 32;
    static_assert(CT >= RG, "a lane keeps at least one column's block sum");
    cg::grid_group grid = cg::this_grid();
    extern __shared__ float4 X[]; /* dst, then the column factors a_j, then (!EXACT) the
                                     block's column shares */
    __shared__ pk_block B;
    __shared__ oc_rows<RP, NW> W;
    const int tid = threadIdx.x, m = (int)a.m, mp = (m + 3) & ~3;
    float *A = (float *)(X + m), *shares = A + mp;
    const int rg = tid & (RG - 1), cgi = tid >> LRG;
    const int row0 = blockIdx.x * a.rows;
    const int rows = min(a.rows, (int)a.n - row0);
    const float mo = (float)exp(a.p.log_m_outlier);
    const float lmo2 = (float)(a.p.log_m_outlier * P_LOG2E);
    /* Round k's exchange buffer: OC_XBYTES · mp bytes, m counters or
     * OC_COPIES copies of mp floats. */
    auto exchange = [&](unsigned k) { return (char *)a.colsum + (size_t)(k % 3) * OC_XBYTES * mp; };
    block_start(&B, a);
    PK_PROF_START(&B);
    /* The fixed point o of y's terms (below). */
    const float o[3] = {__ldg(a.dx), __ldg(a.dy), __ldg(a.dz)};
    for (int j = tid; j < m; j += TH) {
        const float x = __ldg(a.dx + j), y = __ldg(a.dy + j), z = __ldg(a.dz + j);
        const float ux = x - o[0], uy = y - o[1], uz = z - o[2];
        X[j] = make_float4(x, y, z, fmaf(ux, ux, fmaf(uy, uy, uz * uz)));
    }
    for (int j = m + tid; j < mp; j += TH)
        shares[j] = 0.0f; /* the padding, added as zeros four columns at a time */
    if (tid < RP) {
        const float *sp = a.src + 3 * (size_t)(row0 + tid);
        W.s[tid] = tid < rows ? make_float4(__ldg(sp), __ldg(sp + 1), __ldg(sp + 2), 0.0f)
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    int parity = 0;
    unsigned round_no = 0;
    __syncthreads(); /* W.s and X; later steps' pose: horn_in_block's last barrier */
    while (!B.S.st.done) {
        const double T = B.S.st.temp;
        const float cc = (float)(-P_LOG2E / T), aterm = (float)(a.p.alpha * P_LOG2E / T);
        /* The rows' shift (see the top): α' while it is small, else each
         * row's largest y. */
        const bool by_alpha = aterm <= OC_ALPHA_SHIFT;
        if (tid < RP) {
            float sp[3] = {W.s[tid].x, W.s[tid].y, W.s[tid].z}, qm[3];
            kr_register_move(B.R, B.t, sp, qm);
            const float ux = qm[0] - o[0], uy = qm[1] - o[1], uz = qm[2] - o[2];
            const float c2 = -2.0f * cc;
            /* An empty row's y is −∞: its P is 0 without a test a pair. */
            const float row = tid >= rows ? -INFINITY : by_alpha ? 0.0f : aterm;
            W.q[tid] = make_float4(c2 * ux, c2 * uy, c2 * uz,
                                   fmaf(fmaf(ux, ux, fmaf(uy, uy, uz * uz)), cc, row));
            if (by_alpha) W.mo[tid] = ex2_fast(lmo2 - aterm);
        }
        __syncthreads();
        PK_MARK(&B, 4);
        /* y_ij. With u = x − o and w = q − o for a fixed point o (dst's
         * first point, so that the squares stay near the cloud's extent
         * squared: their rounding is then far below T),
         * y_ij = cc ‖w_i − u_j‖² + α' = (cc ‖w_i‖² + α') + cc ‖u_j‖² − 2 cc w_i·u_j:
         * the row's and the column's terms once, then four operations a
         * pair. Columns past m have ‖u_j‖² = ∞, so y = −∞ and P = 0. */
        float P[OC_RT][CT], v[OC_RT];
        float4 q[OC_RT];
#pragma unroll
        for (int k = 0; k < OC_RT; k++) {
            q[k] = W.q[rg * OC_RT + k];
            v[k] = by_alpha ? 0.0f : -INFINITY;
        }
        if (by_alpha) { /* P = 2^(y − α'), and the first row step (a ≡ 1) */
#pragma unroll
            for (int c = 0; c < CT; c++) {
                const int j = cgi + c * NCG;
                const float4 x = j < m ? X[j] : make_float4(0.0f, 0.0f, 0.0f, INFINITY);
                const float ux = x.x - o[0], uy = x.y - o[1], uz = x.z - o[2], col = cc * x.w;
#pragma unroll
                for (int k = 0; k < OC_RT; k++) {
                    P[k][c] = ex2_fast(
                        fmaf(q[k].x, ux, fmaf(q[k].y, uy, fmaf(q[k].z, uz, q[k].w + col))));
                    v[k] += P[k][c];
                }
            }
        } else { /* y, the rows' largest, then P = 2^(y − mx) and the first row step */
#pragma unroll
            for (int c = 0; c < CT; c++) {
                const int j = cgi + c * NCG;
                const float4 x = j < m ? X[j] : make_float4(0.0f, 0.0f, 0.0f, INFINITY);
                const float ux = x.x - o[0], uy = x.y - o[1], uz = x.z - o[2], col = cc * x.w;
#pragma unroll
                for (int k = 0; k < OC_RT; k++) {
                    P[k][c] = fmaf(q[k].x, ux, fmaf(q[k].y, uy, fmaf(q[k].z, uz, q[k].w + col)));
                    v[k] = fmaxf(v[k], P[k][c]);
                }
            }
            rows_reduce<RG, NW>(v, op_max(), &W, [&](int r, float mx) {
                W.mx[r] = mx;
                W.mo[r] = ex2_fast(lmo2 - mx);
            });
#pragma unroll
            for (int k = 0; k < OC_RT; k++) {
                const int r = rg * OC_RT + k;
                const float mx = W.mx[r];
                const bool here = r < rows;
                v[k] = 0.0f;
#pragma unroll
                for (int c = 0; c < CT; c++) {
                    P[k][c] = here ? ex2_fast(P[k][c] - mx) : 0.0f;
                    v[k] += P[k][c];
                }
            }
        }
        auto row_factor = [&](int r, float sum) {
            W.g[r] = r < rows ? 1.0f / (W.mo[r] + sum) : 0.0f;
        };
        rows_reduce<RG, NW>(v, op_add(), &W, row_factor);
        PK_MARK(&B, 0);
        /* The lane's share of the column sums after the last round: C_jb and
         * Σ_i P_ij g_i s_i of columns cgi + (first + k) · NCG. */
        float C[KEEP], Ws[3][KEEP];
        int first = 0;
        for (int round = 0; round < a.p.i1; round++, round_no++) {
            const bool last = round + 1 == a.p.i1;
            if (round > 0) { /* the row step */
#pragma unroll
                for (int k = 0; k < OC_RT; k++)
                    v[k] = 0.0f;
#pragma unroll
                for (int c = 0; c < CT; c++) {
                    const int j = cgi + c * NCG;
                    const float aj = j < m ? A[j] : 0.0f;
#pragma unroll
                    for (int k = 0; k < OC_RT; k++)
                        v[k] = fmaf(P[k][c], aj, v[k]);
                }
                rows_reduce<RG, NW>(v, op_add(), &W, row_factor);
                PK_MARK(&B, 6);
            }
            /* This block's share of the column sums, over the row groups' lanes. */
            float g[OC_RT];
#pragma unroll
            for (int k = 0; k < OC_RT; k++)
                g[k] = W.g[rg * OC_RT + k];
            {
                float cs[CT];
                first = column_sums<LRG>(P, g, cs);
#pragma unroll
                for (int k = 0; k < KEEP; k++)
                    C[k] = cs[k];
            }
            char *buf = exchange(round_no);
            if constexpr (EXACT) {
                unsigned long long *sums = (unsigned long long *)buf;
#pragma unroll
                for (int k = 0; k < KEEP; k++) {
                    const int j = cgi + (first + k) * NCG;
                    if (j >= m) continue;
                    float share = C[k];
                    if (!(share <= a.fix_limit)) { /* also NaN */
                        *a.overflow = 1;
                        share = 0.0f;
                    }
                    const unsigned long long units = __float2ull_rn(share * a.fix_scale);
                    if (units) atomicAdd(sums + j, units);
                }
            } else {
#pragma unroll
                for (int k = 0; k < KEEP; k++) {
                    const int j = cgi + (first + k) * NCG;
                    if (j < m) shares[j] = C[k];
                }
                __syncthreads();
                float4 *sums = (float4 *)((float *)buf + (blockIdx.x % OC_COPIES) * mp);
                for (int j4 = tid; j4 < mp / 4; j4 += TH)
                    atomicAdd(sums + j4, ((const float4 *)shares)[j4]);
            }
            PK_MARK(&B, 2);
            grid_arrive(&B, a);
            if (last) { /* Σ_i P_ij g_i s_i while the other blocks arrive */
#pragma unroll
                for (int d = 0; d < 3; d++) { /* one coordinate at a time: registers */
                    float gs[OC_RT], ws[CT];
#pragma unroll
                    for (int k = 0; k < OC_RT; k++)
                        gs[k] = g[k] * (&W.s[rg * OC_RT + k].x)[d];
                    column_sums<LRG>(P, gs, ws);
#pragma unroll
                    for (int k = 0; k < KEEP; k++)
                        Ws[d][k] = ws[k];
                }
            }
            grid_wait(&B, a, grid);
            PK_MARK(&B, 1);
            /* The column step (the last round's: in Horn's moments below);
             * then the buffer of two rounds on is zeroed. */
            if (!last)
                for (int j4 = 4 * tid; j4 < mp; j4 += 4 * TH) {
                    const float4 t = column_totals4<EXACT>(a, buf, mp, j4);
                    reinterpret_cast<float4 *>(A)[j4 / 4] =
                        make_float4(__frcp_rn(mo + t.x), __frcp_rn(mo + t.y), __frcp_rn(mo + t.z),
                                    __frcp_rn(mo + t.w));
                }
            unsigned long long *next = (unsigned long long *)exchange(round_no + 2);
            for (int j = blockIdx.x * TH + tid; j < OC_XBYTES * mp / 8; j += gridDim.x * TH)
                next[j] = 0;
            if (!last) __syncthreads();
            PK_MARK(&B, 5);
        }
        /* Horn's moments in column form (see the top), then over the block;
         * each lane reads its own columns' totals. */
        float mom[16];
#pragma unroll
        for (int k = 0; k < 16; k++)
            mom[k] = 0;
        float tot[KEEP];
        column_totals<EXACT>(a, exchange(round_no - 1), mp, cgi + first * NCG, NCG, tot);
#pragma unroll
        for (int k = 0; k < KEEP; k++) {
            const int j = cgi + (first + k) * NCG;
            if (j >= m) continue;
            const float aj = __frcp_rn(mo + tot[k]), w = aj * C[k];
            const float ws[3] = {aj * Ws[0][k], aj * Ws[1][k], aj * Ws[2][k]};
            const float4 x = X[j];
            const float xd[3] = {x.x, x.y, x.z};
            mom[0] += w;
#pragma unroll
            for (int u = 0; u < 3; u++) {
                mom[1 + u] += ws[u];
                mom[4 + u] += w * xd[u];
#pragma unroll
                for (int v = 0; v < 3; v++)
                    mom[7 + 3 * u + v] += ws[u] * xd[v];
            }
        }
        {
            const int at = lanes_halve<4, 0, 16>(mom, op_add());
            const float t = lanes_reduce<4>(mom[0], op_add());
            if ((tid & 16) == 0) B.mom[tid >> 5][at] = t;
        }
        PK_MARK(&B, 7);
        block_moments_out(&B, a, parity);
        grid_barrier(&B, a, grid);
        PK_MARK(&B, 3);
        horn_in_block(&B, a, parity);
        PK_MARK(&B, 4);
        parity ^= 1;
    }
    PK_PROF_PRINT(&B, "softassign-onchip", RP);
    block_end(&B, a);
}

kr_status kr_register_cuda_softassign_onchip(kr_gpu_context *ctx, const kr_register_params *p,
                                             const kr_register_cuda_points *pts,
                                             kr_register_cuda_state *state, int *ran)
{
    *ran = 0;
    const size_t n = pts->n, m = pts->m;
    if (p->method != KR_REGISTER_METHOD_SOFTASSIGN || p->i1 < 1 || n < 1 || m < 1) return KR_OK;
    if (!(p->log_m_outlier >= log(OC_MIN_OUTLIER))) return KR_OK;
#if defined(KR_PK_PROFILE) || defined(KR_PK_TUNING)
    /* Tuning builds: KR_SA_ONCHIP=0 leaves Softassign to the streaming engine. */
    const char *want = getenv("KR_SA_ONCHIP");
    if (want && want[0] == '0') return KR_OK;
#endif
    int coop = 0, sms = 0;
    KR_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, ctx->device));
    KR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device));
    if (!coop || sms < 1) return KR_OK;
    const size_t rows = (n + (size_t)sms - 1) / (size_t)sms;
    /* Row groups of OC_RT rows a block, and columns a thread (see the top). */
    const size_t groups = (rows + OC_RT - 1) / OC_RT;
    const int rg = groups <= 1 ? 1 : groups <= 2 ? 2 : groups <= 4 ? 4 : groups <= 8 ? 8 : 0;
    if (!rg) return KR_OK; /* more rows a block than its registers hold */
    const size_t ncg = OC_THREADS / rg;
    const int ct = m <= 8 * ncg ? 8 : m <= 16 * ncg ? 16 : 0;
    if (!ct) return KR_OK;
    const bool exact = p->exact_sums != 0;
#define OC_KERNEL(RG_, CT_)                                                                        \
    (exact ? (const void *)softassign_onchip<RG_, CT_, true>                                       \
           : (const void *)softassign_onchip<RG_, CT_, false>)
    const void *kernel = rg == 1   ? (ct == 8 ? OC_KERNEL(1, 8) : OC_KERNEL(1, 16))
                         : rg == 2 ? (ct == 8 ? OC_KERNEL(2, 8) : OC_KERNEL(2, 16))
                         : rg == 4 ? (ct == 8 ? OC_KERNEL(4, 8) : OC_KERNEL(4, 16))
                                   : (ct == 8 ? OC_KERNEL(8, 8) : OC_KERNEL(8, 16));
#undef OC_KERNEL
    const size_t needed = (n + rows - 1) / rows;
    int tile = 0, blocks = 0;
    size_t dyn = 0;
    /* Dynamic shared memory: dst as float4, the column factors and the
     * block's column shares (each padded to four columns). */
    kr_status s = pk_plan_kernel(ctx, kernel, OC_THREADS, m, sizeof(float4) + 2 * sizeof(float),
                                 8 * sizeof(float), needed, &tile, &dyn, &blocks);
    if (s != KR_OK || (size_t)blocks != needed || (size_t)tile < m) return s;

    /* Scratch: the blocks' moments (two parities), then the three rounds'
     * column exchanges of OC_XBYTES a (padded) column. */
    void *part = NULL, *dstate = NULL, *hstate = NULL;
    const size_t mom_bytes = sizeof(double) * 2 * 16 * (size_t)blocks;
    const size_t sum_bytes = OC_XBYTES * 3 * ((m + 3) & ~(size_t)3);
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_PARTIAL, mom_bytes + sum_bytes, &part)) !=
        KR_OK)
        return s;
    /* The state, then the barrier's arrival counter and the overflow flag. */
    const size_t flags_at = (sizeof *state + 15) & ~(size_t)15;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_STATE, flags_at + 16, &dstate)) != KR_OK)
        return s;
    if ((s = kr_gpu_staging(ctx, KR_GPU_STAGING_REG_STATE, flags_at + 16, &hstate)) != KR_OK)
        return s;
    pk_args a;
    memset(&a, 0, sizeof a);
    a.p = *p;
    a.init = *state;
    a.S = (kr_register_cuda_state *)dstate;
    a.arrivals = (unsigned *)((char *)dstate + flags_at);
    a.overflow = a.arrivals + 1;
    a.src = pts->src;
    a.dx = pts->dst;
    a.dy = pts->dst + m;
    a.dz = pts->dst + 2 * m;
    a.bmom = (double *)part;
    a.colsum = (unsigned long long *)((char *)part + mom_bytes);
    a.n = n;
    a.m = m;
    a.rows = (int)rows;
    a.fix_scale = ldexpf(1.0f, OC_FIX_BITS);
    a.fix_inv = ldexp(1.0, -OC_FIX_BITS);
    a.fix_limit = ldexpf(1.0f, 63 - OC_FIX_BITS) / (float)blocks;
    KR_CUDA_CHECK(cudaMemsetAsync(a.arrivals, 0, 2 * sizeof(unsigned), ctx->stream));
    KR_CUDA_CHECK(cudaMemsetAsync(a.colsum, 0, sum_bytes, ctx->stream));
    void *args[] = {&a};
    cudaError_t launch =
        cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(OC_THREADS), args, dyn, ctx->stream);
    if (launch == cudaErrorCooperativeLaunchTooLarge) {
        (void)cudaGetLastError(); /* SMs held elsewhere: the streaming engine */
        return KR_OK;
    }
    KR_CUDA_CHECK(launch);
    KR_CUDA_CHECK(
        cudaMemcpyAsync(hstate, dstate, flags_at + 16, cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    const unsigned overflow = ((const unsigned *)((const char *)hstate + flags_at))[1];
    if (overflow) return KR_OK; /* a column sum beyond the fixed point: the streaming engine */
    memcpy(state, hstate, sizeof *state);
    *ran = 1;
    return KR_OK;
}
