/* What the two persistent registration kernels share: the fused streaming
 * engine (pipeline/register/register_persistent.cu, EM-ICP and Softassign) and Softassign
 * with its plan held on chip (pipeline/register/softassign_onchip.cu). Each is one
 * cooperative kernel for the whole annealing schedule; this is their block
 * state, the grid barrier between passes, and the end of a step (the
 * blocks' Horn moments summed in the same order in every block, Horn's step
 * on one warp, the schedule). CUDA-side header: gpu/ .cu files only. */
#ifndef KINREG_PIPELINE_REGISTER_PERSISTENT_KERNEL_CUH
#define KINREG_PIPELINE_REGISTER_PERSISTENT_KERNEL_CUH

#include <cooperative_groups.h>
#include <math.h>

#include "core/horn_kernels.h"
#include "pipeline/register/register_cuda.cuh"

namespace cg = cooperative_groups;

#ifndef P_THREADS
#define P_THREADS 1024
#endif
#define P_WARPS (P_THREADS / 32)
#define P_LOG2E 1.4426950408889634

typedef struct {
    kr_register_params p;
    kr_register_cuda_state init; /* the start, by value: no upload before the launch */
    kr_register_cuda_state *S;   /* out: the end state (block 0 writes it) */
    unsigned *arrivals;          /* PK_FLAG_BARRIER: blocks arrived, zeroed before the launch */
    int resident;                /* Softassign: both point sets fit their tiles (see sa_row_pass) */
    const float *src;            /* n × 3 */
    const float *dx, *dy, *dz;
    float4 *q4;   /* n: moved source (Softassign) */
    float *u2;    /* n: row scalings, log2 */
    float *v2;    /* m: column scalings, log2 */
    double *bmom; /* [parity 2][moment 16][block]: a warp reads one moment of
                     all blocks in consecutive doubles. Block-major, every
                     lane's 8-byte read was a sector of its own, and all the
                     blocks reading the same few lines at once after the
                     barrier took ~6 µs a step (H100 profile, session 6). */
    size_t n, m;
    int tile; /* columns per shared-memory tile */
    /* On-chip Softassign (pipeline/register/softassign_onchip.cu): its rows per block,
     * three column-sum buffers in fixed point, the fixed point's scale and
     * the largest per-block sum it takes, and where a block says it saw a
     * larger one. */
    int rows;
    unsigned long long *colsum;
    float fix_scale, fix_limit;
    double fix_inv;
    unsigned *overflow;
} pk_args;

/* Per-block state in shared memory. */
typedef struct {
    kr_register_cuda_state S;
    kr_register_params p; /* a copy: Horn's warp takes its address, which of a
                           kernel parameter would copy all of them to every
                           thread's stack */
    float R[9], t[3];
    double mom[32][16]; /* per merging warp, summed at the end of the pass */
    double total[16];
    double hS[9], hN[16];             /* Horn's S and N (horn_warp) */
    long staged;                      /* first column of the tile now in shared memory; -1 = none */
    unsigned arrivals_due;            /* PK_FLAG_BARRIER: the count that ends the next barrier */
    int rows_resident, cols_resident; /* Softassign: the resident tiles hold their points */
#ifdef KR_PK_PROFILE
    long long prof[12], prof_t, prof_g0;
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
            for (int k_ = 0; k_ < 12; k_++)                                                        \
                (B)->prof[k_] = 0;                                                                 \
            (B)->prof_t = clock64();                                                               \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"((B)->prof_g0));                       \
        }                                                                                          \
    } while (0)
#define PK_PROF_PRINT(B, name, G)                                                                  \
    do {                                                                                           \
        if (blockIdx.x == 0 && threadIdx.x == 0) {                                                 \
            long long g1_;                                                                         \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1_));                                \
            printf("pk-profile %s G=%d blocks=%u steps=%d ns=%lld cycles: pass-other %lld "        \
                   "sync1 %lld pass2-other %lld sync2 %lld horn %lld stage %lld loop %lld "        \
                   "merge %lld horn-load %lld horn-prep %lld horn-qcp %lld jacobi-calls %lld\n",   \
                   name, G, gridDim.x, (B)->S.st.steps, g1_ - (B)->prof_g0, (B)->prof[0],          \
                   (B)->prof[1], (B)->prof[2], (B)->prof[3], (B)->prof[4], (B)->prof[5],           \
                   (B)->prof[6], (B)->prof[7], (B)->prof[8], (B)->prof[9], (B)->prof[10],          \
                   (B)->prof[11]);                                                                 \
        }                                                                                          \
    } while (0)
#else
#define PK_MARK(B, slot)
#define PK_PROF_START(B)
#define PK_PROF_PRINT(B, name, G)
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
template <typename F>
static __device__ void stage(pk_block *B, long b, int len, F fill, bool force = false)
{
    if (B->staged == b && !force) return;
    PK_MARK(B, 0);
    __syncthreads(); /* the previous tile is no longer read */
    for (int k = threadIdx.x; k < len; k += blockDim.x)
        fill(k, (size_t)b + k);
    if (threadIdx.x == 0) B->staged = b;
    __syncthreads();
    PK_MARK(B, 5);
}

/* The grid barrier between passes. PK_FLAG_BARRIER=1 (default) uses a
 * counter that only grows (zeroed by the host before the launch): thread 0
 * of a block adds 1 with release semantics and waits, with acquire loads,
 * for the count of all blocks' arrivals so far; the block barriers on either
 * side carry the order to the block's other threads (the pattern of
 * CUTLASS's GenericBarrier; cooperative groups' grid.sync() adds a fence and
 * its flip-bit bookkeeping). The cooperative launch still guarantees that
 * all blocks are resident. Measured on the H100 (session 6): Softassign
 * 2000 19.4 ms against 19.7 with grid.sync(), EM-ICP unchanged; parity and
 * memcheck clean with both. Readers of data written before a barrier by
 * other blocks use L2 loads (__ldcg). */
#ifndef PK_FLAG_BARRIER
#define PK_FLAG_BARRIER 1
#endif
/* The barrier in two halves, so that a block may work between its arrival
 * and its wait on what no other block needs (with grid.sync() the arrival
 * does nothing and the wait is the whole barrier). */
static __device__ __forceinline__ void grid_arrive(pk_block *B, const pk_args &a)
{
#if PK_FLAG_BARRIER
    __syncthreads();
    if (threadIdx.x == 0) {
        B->arrivals_due += gridDim.x;
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(a.arrivals) : "memory");
    }
#else
    (void)B, (void)a;
#endif
}

static __device__ __forceinline__ void grid_wait(pk_block *B, const pk_args &a,
                                                 cg::grid_group &grid)
{
#if PK_FLAG_BARRIER
    (void)grid;
    if (threadIdx.x == 0) {
        const unsigned due = B->arrivals_due;
        unsigned seen;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                         : "=r"(seen)
                         : "l"(a.arrivals)
                         : "memory");
        } while ((int)(seen - due) < 0);
    }
    __syncthreads();
#else
    (void)B, (void)a;
    grid.sync();
#endif
}

static __device__ __forceinline__ void grid_barrier(pk_block *B, const pk_args &a,
                                                    cg::grid_group &grid)
{
    grid_arrive(B, a);
    grid_wait(B, a, grid);
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
        a.bmom[((size_t)parity * 16 + threadIdx.x) * gridDim.x + blockIdx.x] = v;
    }
}

/* Jacobi, where QCP declines: rare, and kept out of line. */
static __device__ __noinline__ void eig4_top_jacobi(const double *N, double q[4])
{
    kr_horn_eig4_top(N, q);
}

static __device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* kr_horn_qcp_top (core/horn_kernels.h) on one warp, from the same pieces
 * (kr_horn_det4_term, kr_horn_qcp_root, kr_horn_qcp_adj, kr_horn_qcp_trusted): the
 * 16 entries of N·N and the 16 cofactors of adj(N − λI) one per lane, the
 * root search on every lane alike. Returns 1 with q set on every lane, or 0
 * where QCP declines (then Jacobi, as on the host). */
static __device__ int qcp_warp(const double *N, int lane, double q[4])
{
    const int i = (lane >> 2) & 3, j = lane & 3;
    double n2 = 0;
    for (int k = 0; k < 4; k++)
        n2 += N[4 * i + k] * N[4 * k + j];
    const double p2 = warp_sum(lane < 16 && i == j ? n2 : 0.0);
    const double p3 = warp_sum(lane < 16 ? n2 * N[4 * j + i] : 0.0);
    const double det = warp_sum(lane < 4 ? kr_horn_det4_term(N, lane) : 0.0);
    if (!(p2 > 0) || !isfinite(p2)) return 0;
    double l;
    if (!kr_horn_qcp_root(p2, p3, det, &l)) return 0;
    /* Lane 4·col + row: entry `row` of adj(M)'s column `col`. */
    const double av = lane < 16 ? kr_horn_qcp_adj(N, l, j, i) : 0.0;
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
    if (!kr_horn_qcp_trusted(best, p2)) return 0;
    const double nrm = sqrt(best);
    for (int k = 0; k < 4; k++)
        q[k] = __shfl_sync(0xffffffffu, av, 4 * bestc + k) / nrm;
    return 1;
}

/* Horn's step from B->total on warp 0, then the schedule (lane 0): the steps
 * of kr_horn_from_moments with QCP spread over the lanes. One thread
 * doing all of it measured 13 µs a step inside this 1024-thread kernel
 * (64 registers a thread: its double temporaries spilled). */
static __device__ __noinline__ void horn_warp(pk_block *B, const kr_register_params *p)
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
        if (lane == 0) kr_horn_matrix(B->hS, B->hN);
        __syncwarp();
        PK_MARK(B, 9);
        int declined = !qcp_warp(B->hN, lane, q);
        if (declined && lane == 0) eig4_top_jacobi(B->hN, q);
#ifdef KR_PK_PROFILE
        if (declined && lane == 0 && blockIdx.x == 0) B->prof[11]++;
#endif
        PK_MARK(B, 10);
    }
    if (lane != 0) return;
    double R[9], t[3], cs[3], cd[3];
    kr_horn_quat_to_rot(q, R);
    for (int k = 0; k < 3; k++) {
        cs[k] = mom[1 + k] * inv_w;
        cd[k] = mom[4 + k] * inv_w;
    }
    for (int k = 0; k < 3; k++)
        t[k] = cd[k] - (R[3 * k] * cs[0] + R[3 * k + 1] * cs[1] + R[3 * k + 2] * cs[2]);
    double m2 = kr_register_motion2(p, B->S.R, B->S.t, R, t);
    for (int k = 0; k < 9; k++)
        B->S.R[k] = R[k];
    for (int k = 0; k < 3; k++)
        B->S.t[k] = t[k];
    kr_register_advance(p, &B->S.st, m2);
    pose_to_float(B);
}

/* After the grid barrier: every block sums all blocks' moments (same order
 * everywhere), solves Horn and advances the schedule, exactly as horn_step. */
static __device__ void horn_in_block(pk_block *B, const pk_args &a, int parity)
{
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp < 16) {
        /* All of a lane's loads in flight at once (up to 256 blocks; a loop
         * that adds each before loading the next waits one L2 round trip per
         * 32 blocks). The order of the sums is the same in every block. */
        const double *in = a.bmom + ((size_t)parity * 16 + warp) * gridDim.x;
        double part8[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            unsigned b = lane + 32u * k;
            part8[k] = b < gridDim.x ? __ldcg(in + b) : 0.0;
        }
        double v = ((part8[0] + part8[1]) + (part8[2] + part8[3])) +
                   ((part8[4] + part8[5]) + (part8[6] + part8[7]));
        for (unsigned b = lane + 256u; b < gridDim.x; b += 32)
            v += __ldcg(in + b);
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) B->total[warp] = v;
    }
    __syncthreads();
    PK_MARK(B, 8);
    if (threadIdx.x < 32)
        horn_warp(B, &B->p);
    else /* the merging warps' moments are read: zeroed for the next step */
        for (int k = threadIdx.x - 32; k < 32 * 16; k += blockDim.x - 32)
            B->mom[k / 16][k % 16] = 0;
    __syncthreads();
}

static __device__ void block_start(pk_block *B, const pk_args &a)
{
    if (threadIdx.x == 0) {
        B->S = a.init;
        B->p = a.p;
        B->staged = -1;
        B->arrivals_due = 0;
        B->rows_resident = B->cols_resident = 0;
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

/* Dynamic shared memory, tile and grid for one kernel of `threads` threads a
 * block; 0 blocks = cannot run (pipeline/register/register_persistent.cu). A kernel whose
 * columns all fit gets tile = cols. */
kr_status pk_plan_kernel(kr_gpu_context *ctx, const void *kernel, int threads, size_t cols,
                         size_t bytes_per, size_t reserved, size_t groups, int *tile, size_t *dyn,
                         int *blocks);

#endif
