/* EM-ICP and Softassign on the device without the N×M matrix: the fused
 * streaming engine (DESIGN.md §5), and the entry point kr_register_cuda that
 * uploads the points and picks this engine or the cuBLAS one.
 *
 * Each thread owns one source row and one chunk of destination columns; the
 * block stages the chunk's columns through shared memory in tiles and the
 * thread keeps the row's streaming sums (pipeline/register/softreg_kernels.h: the shifted
 * EM-ICP sums, or a log-sum-exp for Softassign's Sinkhorn). A second kernel
 * merges the chunks of each row, turns them into the row's Horn pair and
 * reduces the 16 Horn moments (double) over the grid (a warp per row); a one-thread kernel
 * solves Horn, updates the pose and advances the schedule — all on the device.
 * The kernels of a batch of steps are captured once in a CUDA graph; every
 * kernel returns at once when the schedule is done, and the host reads the
 * state back only between batches. Memory: O(N + M) (partials: chunks × N). */
#include <math.h>
#include <string.h>

#include "core/horn_kernels.h"
#include "pipeline/register/register_cuda.cuh"

#define ROWS 128 /* threads (rows) per block */
#define TILE 128 /* columns staged in shared memory at a time */
#define REDUCE_THREADS 256
/* Independent accumulators per thread in Softassign's log-sum-exp loop: each
 * streaming sum is a chain of dependent updates (an exp, then adds), so one
 * accumulator leaves the SM waiting on latency; interleaved ones overlap. */
#define ILP 4
/* Fewest columns in one chunk: smaller chunks mean more blocks to fill the
 * device, and more partials for the finishing warp to merge. Softassign's
 * small problems (2000 × 2000) gain from 32; EM-ICP measured best with a
 * whole tile. */
#define MIN_CHUNK_SOFTASSIGN 32
#define MIN_CHUNK_EMICP TILE

static __device__ void pose_float(const kr_register_cuda_state *S, float R[9], float t[3])
{
    for (int k = 0; k < 9; k++)
        R[k] = (float)S->R[k];
    for (int k = 0; k < 3; k++)
        t[k] = (float)S->t[k];
}

/* Sums each thread's 16 moments over the block and adds them to out. */
static __device__ void block_moments(double mom[16], double *out)
{
    __shared__ double part[REDUCE_THREADS / 32][16];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int k = 0; k < 16; k++) {
        double v = mom[k];
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) part[warp][k] = v;
    }
    __syncthreads();
    if (threadIdx.x < 16) {
        double v = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++)
            v += part[w][threadIdx.x];
        atomicAdd(&out[threadIdx.x], v);
    }
}

/* The finishing kernels give each row one warp: its lanes merge the row's
 * chunk partials (every 32nd), then the warp merges the lanes' results by
 * shuffles. One thread per row merging up to 64 partials in a chain was
 * latency-bound (~12 µs a pass on an H100 with a few thousand rows). */
#define FINISH_WARPS (REDUCE_THREADS / 32)

static __device__ size_t finish_row(void)
{
    return (size_t)blockIdx.x * FINISH_WARPS + (threadIdx.x >> 5);
}

static __device__ kr_register_emicp_row shfl_emicp(const kr_register_emicp_row *r, int o)
{
    kr_register_emicp_row b;
    b.mu = __shfl_down_sync(0xffffffffu, r->mu, o);
    b.s1 = __shfl_down_sync(0xffffffffu, r->s1, o);
    b.sh = __shfl_down_sync(0xffffffffu, r->sh, o);
    for (int k = 0; k < 3; k++)
        b.sx[k] = __shfl_down_sync(0xffffffffu, r->sx[k], o);
    return b;
}

/* ---- EM-ICP ---------------------------------------------------------------- */

static __global__ void emicp_partial(const kr_register_cuda_state *S, const float *src, size_t n,
                                     const float *dx, const float *dy, const float *dz, size_t m,
                                     size_t chunk, kr_register_emicp_row *part)
{
    if (S->st.done) return;
    __shared__ float tx[TILE], ty[TILE], tz[TILE];
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t j0 = (size_t)blockIdx.y * chunk, j1 = j0 + chunk < m ? j0 + chunk : m;
    float R[9], t[3], q[3] = {0, 0, 0};
    pose_float(S, R, t);
    const float half_inv = (float)(0.5 / S->st.temp);
    bool active = i < n;
    if (active) kr_register_move(R, t, src + 3 * i, q);
    /* One accumulator: the EM-ICP sums' state is six floats, and four
     * interleaved copies (as lse_partial keeps) measured slower here
     * (H100, 5000 × 5000: 55 µs against 49 µs a pass). */
    kr_register_emicp_row row;
    kr_register_emicp_row_init(&row);
    for (size_t b = j0; b < j1; b += TILE) {
        int len = (int)(j1 - b < TILE ? j1 - b : TILE);
        __syncthreads();
        for (int k = threadIdx.x; k < len; k += blockDim.x) {
            tx[k] = dx[b + k];
            ty[k] = dy[b + k];
            tz[k] = dz[b + k];
        }
        __syncthreads();
        if (active)
            for (int k = 0; k < len; k++)
                kr_register_emicp_row_add(&row, kr_register_sqdist(q, tx[k], ty[k], tz[k]), tx[k],
                                          ty[k], tz[k], half_inv);
    }
    if (active) part[(size_t)blockIdx.y * n + i] = row;
}

static __global__ void emicp_finish(kr_register_params p, kr_register_cuda_state *S,
                                    const float *src, size_t n, const kr_register_emicp_row *part,
                                    int chunks)
{
    if (S->st.done) return;
    double mom[16] = {0};
    int lane = threadIdx.x & 31;
    /* Grid-stride over rows, whole warps: few blocks, so that few atomic
     * adds of the moments contend for the same 16 addresses. */
    for (size_t i = finish_row(); i < n; i += (size_t)gridDim.x * FINISH_WARPS) {
        const double temp = S->st.temp;
        const float half_inv = (float)(0.5 / temp);
        kr_register_emicp_row row;
        kr_register_emicp_row_init(&row);
        for (int c = lane; c < chunks; c += 32) {
            const kr_register_emicp_row b = part[(size_t)c * n + i]; /* by value: see lse_finish */
            kr_register_emicp_row_merge(&row, &b, half_inv);
        }
        for (int o = 16; o > 0; o >>= 1) {
            kr_register_emicp_row b = shfl_emicp(&row, o);
            kr_register_emicp_row_merge(&row, &b, half_inv);
        }
        if (lane == 0) {
            double w, pt[3], s[3] = {src[3 * i], src[3 * i + 1], src[3 * i + 2]};
            kr_register_emicp_row_finish(&row, p.d02, 1.0 / temp, &w, pt);
            kr_register_moments_add(mom, w, s, pt);
        }
    }
    block_moments(mom, S->mom);
}

/* ---- Softassign ------------------------------------------------------------ */

/* The moved source points, and v = 0 (the scalings restart every step). */
static __global__ void sa_move(const kr_register_cuda_state *S, const float *src, size_t n,
                               float *mx, float *my, float *mz, float *v, size_t m)
{
    if (S->st.done) return;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float R[9], t[3], q[3];
        pose_float(S, R, t);
        kr_register_move(R, t, src + 3 * i, q);
        mx[i] = q[0];
        my[i] = q[1];
        mz[i] = q[2];
    }
    if (i < m) v[i] = 0;
}

/* Partial log-sum-exp over one chunk of columns Q (with offsets off) for
 * each row of P: one Sinkhorn half-step. */
static __global__ void lse_partial(kr_register_params p, const kr_register_cuda_state *S,
                                   const float *px, const float *py, const float *pz, size_t n,
                                   const float *qx, const float *qy, const float *qz,
                                   const float *off, size_t m, size_t chunk, kr_register_lse *part)
{
    if (S->st.done) return;
    __shared__ float tx[TILE], ty[TILE], tz[TILE], to[TILE];
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t j0 = (size_t)blockIdx.y * chunk, j1 = j0 + chunk < m ? j0 + chunk : m;
    const float inv_t = (float)(1.0 / S->st.temp), alpha = (float)p.alpha;
    bool active = i < n;
    float q[3] = {0, 0, 0};
    if (active) {
        q[0] = px[i];
        q[1] = py[i];
        q[2] = pz[i];
    }
    kr_register_lse l[ILP];
#pragma unroll
    for (int a = 0; a < ILP; a++) {
        l[a].mx = -INFINITY;
        l[a].sum = 0;
    }
    for (size_t b = j0; b < j1; b += TILE) {
        int len = (int)(j1 - b < TILE ? j1 - b : TILE);
        __syncthreads();
        for (int k = threadIdx.x; k < len; k += blockDim.x) {
            tx[k] = qx[b + k];
            ty[k] = qy[b + k];
            tz[k] = qz[b + k];
            to[k] = off[b + k];
        }
        __syncthreads();
        if (active) {
            int k = 0;
            for (; k + ILP <= len; k += ILP)
#pragma unroll
                for (int a = 0; a < ILP; a++)
                    kr_register_lse_add(
                        &l[a],
                        kr_register_softassign_logk(
                            kr_register_sqdist(q, tx[k + a], ty[k + a], tz[k + a]), alpha, inv_t) +
                            to[k + a]);
            for (; k < len; k++)
                kr_register_lse_add(
                    &l[0], kr_register_softassign_logk(kr_register_sqdist(q, tx[k], ty[k], tz[k]),
                                                       alpha, inv_t) +
                               to[k]);
        }
    }
#pragma unroll
    for (int a = 1; a < ILP; a++)
        kr_register_lse_merge(&l[0], &l[a]);
    if (active) part[(size_t)blockIdx.y * n + i] = l[0];
}

static __global__ void lse_finish(kr_register_params p, const kr_register_cuda_state *S,
                                  const kr_register_lse *part, size_t n, int chunks, float *out)
{
    if (S->st.done) return;
    size_t i = finish_row();
    if (i >= n) return; /* whole warps; no block-wide step follows */
    int lane = threadIdx.x & 31;
    kr_register_lse l;
    l.mx = -INFINITY;
    l.sum = 0;
    /* Each partial is copied into registers before the merge. nvcc 13.0
     * (V13.0.88, -O3, sm_90) miscompiled the merge through a pointer into
     * global memory: in the unrolled loop's second and later copies both
     * loads (`sum` and `mx`) read the address of `sum`, so mx became a sum of
     * exponentials (around 20) and every row scaling was off by ~24 — the
     * fused Softassign then landed 70° from the CPU engine. */
    for (int c = lane; c < chunks; c += 32) {
        const kr_register_lse b = part[(size_t)c * n + i];
        kr_register_lse_merge(&l, &b);
    }
    for (int o = 16; o > 0; o >>= 1) {
        kr_register_lse b;
        b.mx = __shfl_down_sync(0xffffffffu, l.mx, o);
        b.sum = __shfl_down_sync(0xffffffffu, l.sum, o);
        kr_register_lse_merge(&l, &b);
    }
    if (lane == 0) {
        kr_register_lse all;
        kr_register_lse_init(&all, (float)p.log_m_outlier);
        kr_register_lse_merge(&all, &l);
        out[i] = -kr_register_lse_value(&all);
    }
}

typedef struct {
    float r, z[3];
} mass_sum;

static __global__ void mass_partial(kr_register_params p, const kr_register_cuda_state *S,
                                    const float *mx, const float *my, const float *mz,
                                    const float *u, size_t n, const float *dx, const float *dy,
                                    const float *dz, const float *v, size_t m, size_t chunk,
                                    mass_sum *part)
{
    if (S->st.done) return;
    __shared__ float tx[TILE], ty[TILE], tz[TILE], tv[TILE];
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t j0 = (size_t)blockIdx.y * chunk, j1 = j0 + chunk < m ? j0 + chunk : m;
    const float inv_t = (float)(1.0 / S->st.temp), alpha = (float)p.alpha;
    bool active = i < n;
    float q[3] = {0, 0, 0}, ui = 0;
    if (active) {
        q[0] = mx[i];
        q[1] = my[i];
        q[2] = mz[i];
        ui = u[i];
    }
    mass_sum acc = {0, {0, 0, 0}};
    for (size_t b = j0; b < j1; b += TILE) {
        int len = (int)(j1 - b < TILE ? j1 - b : TILE);
        __syncthreads();
        for (int k = threadIdx.x; k < len; k += blockDim.x) {
            tx[k] = dx[b + k];
            ty[k] = dy[b + k];
            tz[k] = dz[b + k];
            tv[k] = v[b + k];
        }
        __syncthreads();
        if (active)
            for (int k = 0; k < len; k++) {
                float x = kr_register_softassign_logk(kr_register_sqdist(q, tx[k], ty[k], tz[k]),
                                                      alpha, inv_t) +
                          ui + tv[k];
                float e = kr_register_expf(x < 0.0f ? x : 0.0f);
                acc.r += e;
                acc.z[0] += e * tx[k];
                acc.z[1] += e * ty[k];
                acc.z[2] += e * tz[k];
            }
    }
    if (active) part[(size_t)blockIdx.y * n + i] = acc;
}

static __global__ void mass_finish(kr_register_cuda_state *S, const float *src, size_t n,
                                   const mass_sum *part, int chunks)
{
    if (S->st.done) return;
    double mom[16] = {0};
    size_t i = finish_row();
    int lane = threadIdx.x & 31;
    if (i < n) {                      /* whole warps */
        double acc[4] = {0, 0, 0, 0}; /* r, z */
        for (int c = lane; c < chunks; c += 32) {
            const mass_sum ps = part[(size_t)c * n + i];
            acc[0] += ps.r;
            for (int k = 0; k < 3; k++)
                acc[1 + k] += ps.z[k];
        }
        for (int o = 16; o > 0; o >>= 1)
            for (int k = 0; k < 4; k++)
                acc[k] += __shfl_down_sync(0xffffffffu, acc[k], o);
        if (lane == 0 && acc[0] > 0) {
            double pt[3] = {acc[1] / acc[0], acc[2] / acc[0], acc[3] / acc[0]};
            double s[3] = {src[3 * i], src[3 * i + 1], src[3 * i + 2]};
            kr_register_moments_add(mom, acc[0], s, pt);
        }
    }
    block_moments(mom, S->mom);
}

/* ---- Horn and the schedule, on the device ---------------------------------- */

static __global__ void horn_step(kr_register_params p, kr_register_cuda_state *S)
{
    if (S->st.done) return;
    double R[9], t[3];
    if (kr_horn_from_moments(S->mom, R, t) != 0) {
        S->st.done = -1;
        return;
    }
    double m2 = kr_register_motion2(&p, S->R, S->t, R, t);
    for (int k = 0; k < 9; k++)
        S->R[k] = R[k];
    for (int k = 0; k < 3; k++)
        S->t[k] = t[k];
    for (int k = 0; k < 16; k++)
        S->mom[k] = 0;
    kr_register_advance(&p, &S->st, m2);
}

/* ---- host side --------------------------------------------------------------- */

static unsigned blocks_for(size_t n, unsigned threads)
{
    return (unsigned)((n + threads - 1) / threads);
}

/* Column chunks per row: enough blocks to fill the device (about 16 per SM),
 * at most 64 and at least min_chunk columns each. */
static int chunks_for(size_t rows, size_t cols, int sms, size_t min_chunk)
{
    size_t row_blocks = (rows + ROWS - 1) / ROWS;
    size_t want = (size_t)(16 * sms) / (row_blocks ? row_blocks : 1) + 1;
    size_t most = (cols + min_chunk - 1) / min_chunk;
    if (want > most) want = most;
    if (want > 64) want = 64;
    return want < 1 ? 1 : (int)want;
}

typedef struct {
    const float *src, *dx, *dy, *dz;
    float *mx, *my, *mz, *u, *v;
    void *part;
    kr_register_cuda_state *S;
    size_t n, m;
    int chunks_rows, chunks_cols;
    unsigned moment_blocks; /* blocks of the kernels that add up Horn moments */
} fused_buffers;

/* One Horn step's kernels on ctx->stream. */
static kr_status enqueue_step(kr_gpu_context *ctx, const kr_register_params *p,
                              const fused_buffers *b)
{
    cudaStream_t st = ctx->stream;
    size_t n = b->n, m = b->m;
    unsigned moment_blocks = blocks_for(n, FINISH_WARPS);
    if (moment_blocks > b->moment_blocks) moment_blocks = b->moment_blocks;
    if (p->method == KR_REGISTER_METHOD_EMICP) {
        int C = b->chunks_rows;
        size_t chunk = (m + C - 1) / C;
        emicp_partial<<<dim3(blocks_for(n, ROWS), C), ROWS, 0, st>>>(
            b->S, b->src, n, b->dx, b->dy, b->dz, m, chunk, (kr_register_emicp_row *)b->part);
        KR_CUDA_CHECK_LAUNCH(emicp_partial);
        emicp_finish<<<moment_blocks, REDUCE_THREADS, 0, st>>>(
            *p, b->S, b->src, n, (const kr_register_emicp_row *)b->part, C);
        KR_CUDA_CHECK_LAUNCH(emicp_finish);
    } else {
        int Cr = b->chunks_rows, Cc = b->chunks_cols;
        size_t chunk_r = (m + Cr - 1) / Cr, chunk_c = (n + Cc - 1) / Cc;
        sa_move<<<blocks_for(n > m ? n : m, 256), 256, 0, st>>>(b->S, b->src, n, b->mx, b->my,
                                                                b->mz, b->v, m);
        KR_CUDA_CHECK_LAUNCH(sa_move);
        for (int k = 0; k < p->i1; k++) {
            lse_partial<<<dim3(blocks_for(n, ROWS), Cr), ROWS, 0, st>>>(
                *p, b->S, b->mx, b->my, b->mz, n, b->dx, b->dy, b->dz, b->v, m, chunk_r,
                (kr_register_lse *)b->part);
            KR_CUDA_CHECK_LAUNCH(lse_partial);
            lse_finish<<<blocks_for(n, FINISH_WARPS), REDUCE_THREADS, 0, st>>>(
                *p, b->S, (const kr_register_lse *)b->part, n, Cr, b->u);
            KR_CUDA_CHECK_LAUNCH(lse_finish);
            lse_partial<<<dim3(blocks_for(m, ROWS), Cc), ROWS, 0, st>>>(
                *p, b->S, b->dx, b->dy, b->dz, m, b->mx, b->my, b->mz, b->u, n, chunk_c,
                (kr_register_lse *)b->part);
            KR_CUDA_CHECK_LAUNCH(lse_partial);
            lse_finish<<<blocks_for(m, FINISH_WARPS), REDUCE_THREADS, 0, st>>>(
                *p, b->S, (const kr_register_lse *)b->part, m, Cc, b->v);
            KR_CUDA_CHECK_LAUNCH(lse_finish);
        }
        mass_partial<<<dim3(blocks_for(n, ROWS), Cr), ROWS, 0, st>>>(
            *p, b->S, b->mx, b->my, b->mz, b->u, n, b->dx, b->dy, b->dz, b->v, m, chunk_r,
            (mass_sum *)b->part);
        KR_CUDA_CHECK_LAUNCH(mass_partial);
        mass_finish<<<moment_blocks, REDUCE_THREADS, 0, st>>>(b->S, b->src, n,
                                                              (const mass_sum *)b->part, Cr);
        KR_CUDA_CHECK_LAUNCH(mass_finish);
    }
    horn_step<<<1, 1, 0, st>>>(*p, b->S);
    KR_CUDA_CHECK_LAUNCH(horn_step);
    return KR_OK;
}

/* Horn steps the schedule takes when the stop rule never fires. */
static int schedule_length(const kr_register_params *p)
{
    kr_register_params q = *p;
    q.stop_patience = 0;
    kr_register_state st;
    kr_register_start(&q, &st);
    while (!st.done && st.steps < 1000000)
        kr_register_advance(&q, &st, INFINITY);
    return st.steps;
}

static kr_status run_fused(kr_gpu_context *ctx, const kr_register_params *p,
                           const kr_register_cuda_points *pts, kr_register_cuda_state *state)
{
    size_t n = pts->n, m = pts->m;
    if (state->st.done) return KR_OK; /* an empty schedule: nothing to run */
    int ran = 0;
    kr_status ps = kr_register_cuda_softassign_onchip(ctx, p, pts, state, &ran);
    if (ps != KR_OK || ran) return ps;
    ps = kr_register_cuda_persistent(ctx, p, pts, state, &ran);
    if (ps != KR_OK || ran) return ps;
    int sms = 0;
    KR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device));
    fused_buffers b;
    memset(&b, 0, sizeof b);
    b.n = n;
    b.m = m;
    b.src = pts->src;
    b.dx = pts->dst;
    b.dy = pts->dst + m;
    b.dz = pts->dst + 2 * m;
    size_t min_chunk =
        p->method == KR_REGISTER_METHOD_EMICP ? MIN_CHUNK_EMICP : MIN_CHUNK_SOFTASSIGN;
    b.chunks_rows = chunks_for(n, m, sms, min_chunk);
    b.chunks_cols = chunks_for(m, n, sms, min_chunk);
    b.moment_blocks = 2 * (unsigned)sms;
    size_t part_elem = sizeof(kr_register_emicp_row) > sizeof(mass_sum)
                           ? sizeof(kr_register_emicp_row)
                           : sizeof(mass_sum);
    size_t part_bytes = part_elem * (size_t)b.chunks_rows * n;
    size_t col_bytes = sizeof(kr_register_lse) * (size_t)b.chunks_cols * m;
    if (col_bytes > part_bytes) part_bytes = col_bytes;
    kr_status s;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_PARTIAL, part_bytes, &b.part)) != KR_OK)
        return s;
    void *vec = NULL, *dstate = NULL, *hstate = NULL;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_VECTORS, sizeof(float) * (4 * n + m + 8),
                            &vec)) != KR_OK)
        return s;
    b.mx = (float *)vec;
    b.my = b.mx + n;
    b.mz = b.my + n;
    b.u = b.mz + n;
    b.v = b.u + n;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_STATE, sizeof *state, &dstate)) != KR_OK)
        return s;
    if ((s = kr_gpu_staging(ctx, KR_GPU_STAGING_REG_STATE, sizeof *state, &hstate)) != KR_OK)
        return s;
    b.S = (kr_register_cuda_state *)dstate;
    KR_CUDA_CHECK(cudaMemcpyAsync(b.S, state, sizeof *state, cudaMemcpyHostToDevice, ctx->stream));

    /* A batch of steps as one graph: launching it costs one call, not dozens. */
    int total = schedule_length(p);
    int batch = p->method == KR_REGISTER_METHOD_EMICP ? 8 : 4;
    if (batch > total) batch = total > 0 ? total : 1;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    KR_CUDA_CHECK(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < batch && s == KR_OK; k++)
        s = enqueue_step(ctx, p, &b);
    kr_status end = KR_CUDA_STATUS(cudaStreamEndCapture(ctx->stream, &graph));
    if (s == KR_OK) s = end;
    if (s == KR_OK) s = KR_CUDA_STATUS(cudaGraphInstantiate(&exec, graph, 0));
    kr_register_cuda_state *h = (kr_register_cuda_state *)hstate;
    for (int done = 0; s == KR_OK && done < total; done += batch) {
        s = KR_CUDA_STATUS(cudaGraphLaunch(exec, ctx->stream));
        if (s != KR_OK) break;
        /* Read the schedule back every few batches (and at the end). */
        if ((done / batch) % 4 == 3 || done + batch >= total) {
            s = KR_CUDA_STATUS(
                cudaMemcpyAsync(h, b.S, sizeof *h, cudaMemcpyDeviceToHost, ctx->stream));
            if (s == KR_OK) s = KR_CUDA_STATUS(cudaStreamSynchronize(ctx->stream));
            if (s == KR_OK && h->st.done) break;
        }
    }
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
    if (s != KR_OK) return s;
    *state = *h;
    return KR_OK;
}

kr_status kr_register_cuda(kr_gpu_context *ctx, int cublas, const kr_register_params *p,
                           const float *src, size_t n, const float *dst, size_t m, double R[9],
                           double t[3], kr_register_state *st)
{
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    void *d_pts = NULL;
    size_t floats = 3 * n + 3 * m;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_POINTS, floats * sizeof(float), &d_pts)) !=
        KR_OK)
        return s;
    float *d_src = (float *)d_pts, *d_dst = d_src + 3 * n;
    /* src and dst (as three columns: transposed here) side by side in the
     * page-locked staging buffer, after the engines' state slot: one
     * asynchronous upload, where two from pageable memory each waited for
     * a copy through the driver's own bounce buffer. */
    const size_t state_room = (sizeof(kr_register_cuda_state) + 255) & ~(size_t)255;
    void *stage = NULL;
    if ((s = kr_gpu_staging(ctx, KR_GPU_STAGING_REG_STATE, state_room + floats * sizeof(float),
                            &stage)) != KR_OK)
        return s;
    float *h_src = (float *)((char *)stage + state_room), *cols = h_src + 3 * n;
    if (n) memcpy(h_src, src, 3 * n * sizeof(float));
    for (size_t j = 0; j < m; j++)
        for (int k = 0; k < 3; k++)
            cols[k * m + j] = dst[3 * j + k];
    s = KR_CUDA_STATUS(
        cudaMemcpyAsync(d_src, h_src, floats * sizeof(float), cudaMemcpyHostToDevice, ctx->stream));
    /* The engines run on the same stream; the cuBLAS one (unchanged) gets
     * its points settled as before. The staging buffer is not written again
     * before the engine's own final synchronisation. */
    if (s == KR_OK && cublas) s = KR_CUDA_STATUS(cudaStreamSynchronize(ctx->stream));
    if (s != KR_OK) return s;

    kr_register_cuda_state state;
    memset(&state, 0, sizeof state);
    memcpy(state.R, R, sizeof state.R);
    memcpy(state.t, t, sizeof state.t);
    kr_register_start(p, &state.st);
    kr_register_cuda_points pts = {d_src, d_dst, n, m};
    s = cublas ? kr_register_cuda_cublas(ctx, p, &pts, &state) : run_fused(ctx, p, &pts, &state);
    if (s != KR_OK) return s;
    if (state.st.done < 0)
        return kr_error(KR_ERR_NUMERIC,
                        "register: every correspondence weight vanished at step %d (scale² %g "
                        "m²): the point sets are too far apart for the schedule; give an initial "
                        "pose or a larger starting sigma2/t0",
                        state.st.steps + 1, state.st.temp);
    memcpy(R, state.R, sizeof state.R);
    memcpy(t, state.t, sizeof state.t);
    *st = state.st;
    return KR_OK;
}
