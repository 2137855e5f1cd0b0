/* The CUDA engine of tracking: the twin of pipeline/track/track.c + newton.c.
 *
 * The model tree is read where the device build left it (gpu/kdtree_cuda.cu),
 * or goes up as it is built on the host: a complete binary tree
 * in heap order, i.e. serialised level by level (seed 004 §4.2), so the top
 * levels that every query visits share a few cache lines, and cells of two
 * float4 for aligned loads. It is uploaded once per tree (kr_kdtree serial).
 *
 * One frame is a fixed sequence of kernels on the tracking stream with no
 * host round trip in between; the pose and the loop's state live in device
 * memory (trk_dev) and each kernel reads them there:
 *
 *   per level, top to finest:
 *     centroid   block sums of the points' centroid and radius
 *     begin      one block: the level's centroid, whether it is tracked
 *     (eval; step) × (1 + iterations × (max_line_search + 1))
 *       eval     one thread per point: descend, classify, accumulate through
 *                pipeline/track/newton_kernels.h, block sums in double (warp shuffles,
 *                then warps in a fixed order) → one partial per block
 *       step     one block: the partials summed in block order (double,
 *                deterministic), then thread 0 runs the loop's control — the
 *                direction (pipeline/track/track_step.h: normalised 6×6 Cholesky),
 *                the Armijo test on the re-evaluated objective, the pose
 *                update and the convergence test — and marks the level
 *                finished when the CPU loop would leave it
 *   finest level: polish_start, then (eval; step) × polish_steps — the
 *                whole Gauss–Newton steps of track_step.h, kept or undone
 *                as the CPU engine's polish() does
 *   result down, one synchronisation.
 *
 * The schedule covers the most evaluations a level can take; once a level is
 * finished the remaining kernels of that level return at once. The sequence
 * is captured into a CUDA graph and replayed while the pyramid's shape, the
 * plan's schedule and the buffers stay the same, so a frame costs one graph
 * launch. Several seeds of one pyramid (kr_track_cuda's count, the
 * recovery's probes) run as one sequence: seed k's state is trk_dev k, its
 * evaluations grid row k and its control block k, so the probes of a search
 * cost one graph launch instead of one each. Built with -fmad=false (CMakeLists.txt): no fused
 * multiply-adds, so the double sums round like the CPU engine's. */
#include <string.h>

#include "gpu/context.cuh"
#include "gpu/kdtree_cuda.h"
#include "pipeline/track/track_cuda.h"

namespace
{

const int kThreads = 256;
const int kWarps = kThreads / 32;
/* kr_track_acc flattened: Fp 21, gp 6, m0, m1 3, m2 6, gr 3, gt 3, h, res,
 * points, inliers. */
const int kAccFields = 47;
const int kCentroidFields = 5; /* Σx, Σy, Σz, Σ|p|², count */

enum { PHASE_START = 0, PHASE_TRIAL = 1, PHASE_POLISH = 2 };

/* The loop's state, on the device. */
struct trk_state {
    kr_track_step_result r; /* r.T: the pose; r.F … r.inliers: the current linearisation */
    kr_pose Tt;             /* trial pose of the line search, or the polish's next pose */
    double x[6], y[6], slope, alpha;
    int phase, active, it, ls;
    kr_track_step_result pre; /* the polish: the finest level's result before it */
    double moved[2];
    int pol;
};

struct trk_dev {
    kr_track_step_plan plan;
    const kr_kdtree_node *nodes;
    const kr_kdtree_cell *cells;
    uint32_t n_internal;
    trk_state st;
};

__device__ inline void acc_pack(const kr_track_acc &a, double v[kAccFields])
{
    int k = 0;
    for (int i = 0; i < 21; i++)
        v[k++] = a.Fp[i];
    for (int i = 0; i < 6; i++)
        v[k++] = a.gp[i];
    v[k++] = a.m0;
    for (int i = 0; i < 3; i++)
        v[k++] = a.m1[i];
    for (int i = 0; i < 6; i++)
        v[k++] = a.m2[i];
    for (int i = 0; i < 3; i++)
        v[k++] = a.gr[i];
    for (int i = 0; i < 3; i++)
        v[k++] = a.gt[i];
    v[k++] = a.h;
    v[k++] = a.res;
    v[k++] = a.points;
    v[k++] = a.inliers;
}

__device__ inline void acc_unpack(const double v[kAccFields], kr_track_acc *a)
{
    int k = 0;
    for (int i = 0; i < 21; i++)
        a->Fp[i] = v[k++];
    for (int i = 0; i < 6; i++)
        a->gp[i] = v[k++];
    a->m0 = v[k++];
    for (int i = 0; i < 3; i++)
        a->m1[i] = v[k++];
    for (int i = 0; i < 6; i++)
        a->m2[i] = v[k++];
    for (int i = 0; i < 3; i++)
        a->gr[i] = v[k++];
    for (int i = 0; i < 3; i++)
        a->gt[i] = v[k++];
    a->h = v[k++];
    a->res = v[k++];
    a->points = (int)v[k++];
    a->inliers = (int)v[k++];
}

/* Sums NF values over the block (kThreads threads) and writes them to
 * out[0..NF) of this block: shuffles within warps, then the warps' sums in
 * warp order, so the result does not depend on scheduling. */
template <int NF> __device__ void block_sum(double v[NF], double *out)
{
    __shared__ double warp_sums[kWarps][NF];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int f = 0; f < NF; f++) {
        double x = v[f];
        for (int o = 16; o > 0; o >>= 1)
            x += __shfl_down_sync(0xffffffffu, x, o);
        if (lane == 0) warp_sums[warp][f] = x;
    }
    __syncthreads();
    for (int f = threadIdx.x; f < NF; f += blockDim.x) {
        double s = 0;
        for (int w = 0; w < kWarps; w++)
            s += warp_sums[w][f];
        out[f] = s;
    }
}

/* Partials of `blocks` blocks summed field by field in block order into s
 * (one field per thread; call with at least NF threads, then __syncthreads). */
template <int NF> __device__ void partials_sum(const double *partials, int blocks, double *s)
{
    for (int f = threadIdx.x; f < NF; f += blockDim.x) {
        double a = 0;
        for (int b = 0; b < blocks; b++)
            a += partials[(size_t)b * NF + f];
        s[f] = a;
    }
}

__device__ inline bool point_usable(const float *pts, const float *nrm, int i)
{
    /* NaN marks a missing point or normal (x != x only for NaN). */
    return !(pts[3 * i] != pts[3 * i] || nrm[3 * i] != nrm[3 * i]);
}

__global__ void centroid_kernel(const float *__restrict__ pts, const float *__restrict__ nrm, int n,
                                double *partials)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double v[kCentroidFields] = {0, 0, 0, 0, 0};
    if (i < n && point_usable(pts, nrm, i)) {
        const float *p = pts + 3 * i;
        v[0] = p[0];
        v[1] = p[1];
        v[2] = p[2];
        v[3] = (double)p[0] * p[0] + (double)p[1] * p[1] + (double)p[2] * p[2];
        v[4] = 1;
    }
    block_sum<kCentroidFields>(v, partials + (size_t)blockIdx.x * kCentroidFields);
}

/* The level's centroid and RMS radius (as pipeline/track/track.c cloud_centroid),
 * and whether the level is tracked; block k: seed k (one centroid for all). */
__global__ void begin_kernel(trk_dev *d, const double *partials, int blocks, int is_finest)
{
    __shared__ double s[kCentroidFields];
    partials_sum<kCentroidFields>(partials, blocks, s);
    __syncthreads();
    if (threadIdx.x != 0) return;
    trk_state *st = &d[blockIdx.x].st;
    double cnt = s[4];
    if (cnt == 0) {
        st->r.c_cam[0] = st->r.c_cam[1] = st->r.c_cam[2] = 0;
        st->r.L = 1;
    } else {
        for (int k = 0; k < 3; k++)
            st->r.c_cam[k] = s[k] / cnt;
        double r2 =
            s[3] / cnt - (st->r.c_cam[0] * st->r.c_cam[0] + st->r.c_cam[1] * st->r.c_cam[1] +
                          st->r.c_cam[2] * st->r.c_cam[2]);
        st->r.L = r2 > 1e-12 ? sqrt(r2) : 1e-6;
    }
    st->active = !(cnt == 0 && !is_finest);
    st->phase = PHASE_START;
}

/* One linearisation: each thread one pixel of the level, grid row k seed k.
 * `level` picks the plan's parameters; the pose is the state's (trial pose
 * during a line search). */
__global__ void __launch_bounds__(kThreads)
    eval_kernel(const trk_dev *d, int level, const float *__restrict__ pts,
                const float *__restrict__ nrm, int n, double *partials)
{
    d += blockIdx.y;
    partials += (size_t)blockIdx.y * gridDim.x * kAccFields;
    const trk_state *st = &d->st;
    if (!st->active) return; /* uniform over the grid */
    const kr_pose *T = st->phase == PHASE_START ? &st->r.T : &st->Tt;
    kr_track_real R[9], t[3];
    for (int k = 0; k < 9; k++)
        R[k] = T->R[k];
    for (int k = 0; k < 3; k++)
        t[k] = T->t[k];
    const kr_track_point_params P = d->plan.P[level];
    kr_track_acc a;
    kr_track_acc_zero(&a);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && point_usable(pts, nrm, i)) {
        const float p[3] = {pts[3 * i], pts[3 * i + 1], pts[3 * i + 2]};
        const float nf[3] = {nrm[3 * i], nrm[3 * i + 1], nrm[3 * i + 2]};
        kr_track_real q[3];
        kr_track_transform(R, t, p, q);
        uint32_t cell =
            kr_kdtree_descend_cell(d->nodes, d->n_internal, (float)q[0], (float)q[1], (float)q[2]);
        const float4 *c4 = reinterpret_cast<const float4 *>(d->cells + cell);
        float4 s4 = __ldg(c4), n4 = __ldg(c4 + 1);
        const float s[4] = {s4.x, s4.y, s4.z, s4.w}, cn[4] = {n4.x, n4.y, n4.z, n4.w};
        kr_track_pair_class cls;
        int kind = kr_track_classify_pair(&P, R, q, p[2], nf, s, cn, &cls);
        kr_track_accumulate(&a, &P, kind, &cls, q, s, cn);
    }
    double v[kAccFields];
    acc_pack(a, v);
    block_sum<kAccFields>(v, partials + (size_t)blockIdx.x * kAccFields);
}

/* Sums of the last evaluation into r's F, g, h, residual and counts. */
__device__ void take_sums(const double *s, kr_track_step_result *out)
{
    kr_track_acc a;
    acc_unpack(s, &a);
    kr_track_acc_finish(&a, out->F, out->g);
    out->h = a.h;
    out->residual = a.res;
    out->points = a.points;
    out->inliers = a.inliers;
}

/* Next Newton step from the current linearisation (pipeline/track/track.c: the
 * top of its iteration loop); leaves the level when the CPU loop would. */
__device__ void plan_step(const kr_track_step_plan *plan, int level, trk_state *st)
{
    st->it++;
    if (st->it > plan->iterations[level] || st->r.inliers < 6) {
        st->active = 0;
        return;
    }
    double slope = 0;
    if (!kr_track_step_direction(st->r.F, st->r.g, &st->r.T, st->r.c_cam, st->r.L, plan->damping,
                                 st->y, st->x, &slope)) {
        st->r.solved = 0;
        st->active = 0;
        return;
    }
    if (!(slope > 0) || plan->max_line_search < 0) { /* converged */
        st->active = 0;
        return;
    }
    st->slope = slope;
    st->alpha = 1;
    st->ls = 0;
    st->Tt = kr_track_step_trial(st->x, st->alpha, &st->r.T);
    st->phase = PHASE_TRIAL;
}

/* The state moves to `next`, the sums evaluated at the trial pose: its pose
 * is the trial's, orthonormalised; the level's centroid, radius and
 * solution flag carry over, and it counts one more step. */
__device__ void adopt(trk_state *st, kr_track_step_result *next)
{
    kr_pose T = st->Tt;
    kr_pose_orthonormalize_hd(&T);
    next->T = T;
    for (int k = 0; k < 3; k++)
        next->c_cam[k] = st->r.c_cam[k];
    next->L = st->r.L;
    next->total_iters = st->r.total_iters + 1;
    next->solved = st->r.solved;
    st->r = *next;
}

/* The polish (pipeline/track/track.c polish(), pipeline/track/track_step.h):
 * its next whole step from the current linearisation, or its end — the
 * polished pose kept, or the one before it restored. */
__device__ void polish_next(const kr_track_step_plan *plan, trk_state *st)
{
    double slope;
    bool go = st->pol < plan->polish_steps && st->r.inliers >= 6 &&
              kr_track_step_direction(st->r.F, st->r.g, &st->r.T, st->r.c_cam, st->r.L,
                                      plan->damping, st->y, st->x, &slope) &&
              !kr_track_polish_done(st->y, st->r.L, plan->converge_rot, plan->converge_trans);
    if (go) {
        kr_track_polish_moved(st->y, st->r.L, st->moved);
        st->Tt = kr_track_step_trial(st->x, 1.0, &st->r.T);
        st->phase = PHASE_POLISH;
        st->active = 1;
        return;
    }
    if (!kr_track_polish_keep(st->r.inliers, st->pre.inliers, st->moved, plan->polish_tolerance,
                              plan->polish_max_rot, plan->polish_max_trans))
        st->r = st->pre;
    st->active = 0;
}

/* After the finest level: the polish starts where the level ended, when
 * the level had a solution. Block k: seed k. */
__global__ void polish_start_kernel(trk_dev *d)
{
    if (threadIdx.x != 0) return;
    trk_state *st = &d[blockIdx.x].st;
    st->active = 0;
    if (!st->r.solved || st->r.inliers < 6) return;
    st->pre = st->r;
    st->moved[0] = st->moved[1] = 0;
    st->pol = 0;
    polish_next(&d[blockIdx.x].plan, st);
}

/* mode 0: the tracking loop's control after an evaluation; mode 1: only
 * store the sums (kr_track_cuda_linearize). Block k: seed k. */
__global__ void step_kernel(trk_dev *d, int level, const double *partials, int blocks, int mode)
{
    __shared__ double s[kAccFields];
    d += blockIdx.x;
    partials += (size_t)blockIdx.x * blocks * kAccFields;
    if (!d->st.active) return;
    partials_sum<kAccFields>(partials, blocks, s);
    __syncthreads();
    if (threadIdx.x != 0) return;
    trk_state *st = &d->st;
    const kr_track_step_plan *plan = &d->plan;
    if (mode == 1) {
        take_sums(s, &st->r);
        return;
    }
    if (st->phase == PHASE_START) {
        take_sums(s, &st->r);
        st->r.solved = st->r.inliers >= 6;
        st->it = 0;
        plan_step(plan, level, st);
        return;
    }
    kr_track_step_result trial;
    take_sums(s, &trial);
    if (st->phase == PHASE_POLISH) { /* s: the sums at the polish's next pose */
        adopt(st, &trial);
        st->pol++;
        polish_next(plan, st);
        return;
    }
    /* PHASE_TRIAL: s holds the objective at the trial pose. */
    if (kr_track_step_accept(trial.h, st->r.h, plan->armijo_c, st->alpha, st->slope)) {
        adopt(st, &trial);
        if (kr_track_step_converged(st->y, st->alpha, st->r.L, plan->converge_rot,
                                    plan->converge_trans))
            st->active = 0;
        else
            plan_step(plan, level, st);
        return;
    }
    st->ls++;
    if (st->ls > plan->max_line_search) {
        st->active = 0; /* no decrease along x: the level stops */
        return;
    }
    st->alpha *= 0.5;
    st->Tt = kr_track_step_trial(st->x, st->alpha, &st->r.T);
}

__global__ void descend_kernel(const trk_dev *d, const float *__restrict__ q, int n,
                               uint32_t *cells)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        cells[i] =
            kr_kdtree_descend_cell(d->nodes, d->n_internal, q[3 * i], q[3 * i + 1], q[3 * i + 2]);
}

int blocks_for(long n)
{
    return (int)((n + kThreads - 1) / kThreads);
}

/* Device layout of the TRACK slot: `count` trk_dev, then their partials. */
size_t partials_offset(int count)
{
    return (count * sizeof(trk_dev) + 255) & ~(size_t)255;
}

/* The tree's device copy: its own when it was built on this device
 * (gpu/kdtree_cuda.cu; read in place, nothing to upload), else uploaded when
 * it is not the one already there. */
kr_status tree_on_device(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_kdtree_node **nodes,
                         const kr_kdtree_cell **cells)
{
    const kr_kdtree_device_copy *own = (const kr_kdtree_device_copy *)tree->device;
    if (own && own->device == ctx->device) {
        *nodes = own->nodes;
        *cells = own->cells;
        return KR_OK;
    }
    void *dn, *dc;
    kr_status s;
    size_t nb = (size_t)(tree->n_internal ? tree->n_internal : 1) * sizeof(kr_kdtree_node);
    size_t cb = (size_t)tree->n * sizeof(kr_kdtree_cell);
    if (ctx->tree_serial != tree->serial || tree->serial == 0) {
        ctx->tree_serial = 0; /* until the upload has succeeded */
        if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_TREE_NODES, nb, &dn)) != KR_OK) return s;
        if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_TREE_CELLS, cb, &dc)) != KR_OK) return s;
        if (tree->n_internal)
            KR_CUDA_CHECK(cudaMemcpyAsync(dn, tree->nodes,
                                          tree->n_internal * sizeof(kr_kdtree_node),
                                          cudaMemcpyHostToDevice, ctx->stream));
        KR_CUDA_CHECK(cudaMemcpyAsync(dc, tree->cells, cb, cudaMemcpyHostToDevice, ctx->stream));
        ctx->tree_serial = tree->serial;
    }
    *nodes = (const kr_kdtree_node *)ctx->scratch[KR_GPU_SCRATCH_TREE_NODES].ptr;
    *cells = (const kr_kdtree_cell *)ctx->scratch[KR_GPU_SCRATCH_TREE_CELLS].ptr;
    return KR_OK;
}

/* The TRACK slot sized for `count` seeds of `max_points` per evaluation; *d
 * and *partials point into it, *host into the staging slot (count trk_dev). */
kr_status track_buffers(kr_gpu_context *ctx, long max_points, int count, trk_dev **d,
                        double **partials, trk_dev **host)
{
    int blocks = blocks_for(max_points > 0 ? max_points : 1);
    size_t bytes = partials_offset(count) + (size_t)count * blocks * kAccFields * sizeof(double);
    void *dev, *stage;
    kr_status s;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_TRACK, bytes, &dev)) != KR_OK) return s;
    if ((s = kr_gpu_staging(ctx, KR_GPU_STAGING_TRACK, count * sizeof(trk_dev), &stage)) != KR_OK)
        return s;
    *d = (trk_dev *)dev;
    *partials = (double *)((char *)dev + partials_offset(count));
    *host = (trk_dev *)stage;
    return KR_OK;
}

/* Device pointers of the pyramid's levels: where kr_preprocess_cuda left
 * them, or uploaded into the same slot. */
kr_status pyramid_on_device(kr_gpu_context *ctx, const kr_pyramid *pyr, const float **pts,
                            const float **nrm)
{
    void *block;
    kr_status s;
    bool resident = pyr->device_stamp != 0 && pyr->device_stamp == ctx->pyramid_stamp &&
                    ctx->scratch[KR_GPU_SCRATCH_PYRAMID].bytes >= pyr->storage_bytes;
    if (!resident) {
        if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_PYRAMID, pyr->storage_bytes, &block)) != KR_OK)
            return s;
        KR_CUDA_CHECK(cudaMemcpyAsync(block, pyr->storage, pyr->storage_bytes,
                                      cudaMemcpyHostToDevice, ctx->stream));
        ctx->pyramid_stamp++; /* the device block no longer holds the preprocessed one */
    }
    block = ctx->scratch[KR_GPU_SCRATCH_PYRAMID].ptr;
    const float *base = (const float *)pyr->storage;
    for (int l = 0; l < pyr->levels; l++) {
        pts[l] = (const float *)block + (pyr->level[l].points - base);
        nrm[l] = (const float *)block + (pyr->level[l].normals - base);
    }
    return KR_OK;
}

/* What one frame's kernel sequence depends on besides the device state:
 * a captured graph is replayed while this stays the same. */
struct frame_key {
    trk_dev *d;
    double *partials;
    const float *pts[KR_MAX_LEVELS], *nrm[KR_MAX_LEVELS];
    int n[KR_MAX_LEVELS], evals[KR_MAX_LEVELS];
    int top, finest, seeds, polish;
};
static_assert(sizeof(frame_key) <= sizeof(((kr_gpu_context *)0)->track_graph_key),
              "frame_key must fit the context's key");

/* Evaluations a level may take: its start, then each iteration's line
 * search. */
int evals_of(const kr_track_step_plan *plan, int level)
{
    int iters = plan->iterations[level] > 0 ? plan->iterations[level] : 0;
    int trials = plan->max_line_search >= 0 ? plan->max_line_search + 1 : 0;
    return 1 + iters * trials;
}

kr_status enqueue_frame(cudaStream_t stream, const frame_key *k)
{
    for (int level = k->top; level >= k->finest; level--) {
        const int n = k->n[level];
        const int blocks = blocks_for(n > 0 ? n : 1);
        centroid_kernel<<<blocks, kThreads, 0, stream>>>(k->pts[level], k->nrm[level], n,
                                                         k->partials);
        KR_CUDA_CHECK_LAUNCH(centroid_kernel);
        begin_kernel<<<k->seeds, 32, 0, stream>>>(k->d, k->partials, blocks, level == k->finest);
        KR_CUDA_CHECK_LAUNCH(begin_kernel);
        for (int e = 0; e < k->evals[level]; e++) {
            eval_kernel<<<dim3(blocks, k->seeds), kThreads, 0, stream>>>(
                k->d, level, k->pts[level], k->nrm[level], n, k->partials);
            KR_CUDA_CHECK_LAUNCH(eval_kernel);
            step_kernel<<<k->seeds, 64, 0, stream>>>(k->d, level, k->partials, blocks, 0);
            KR_CUDA_CHECK_LAUNCH(step_kernel);
        }
        if (level != k->finest || k->polish == 0) continue;
        polish_start_kernel<<<k->seeds, 32, 0, stream>>>(k->d);
        KR_CUDA_CHECK_LAUNCH(polish_start_kernel);
        for (int e = 0; e < k->polish; e++) {
            eval_kernel<<<dim3(blocks, k->seeds), kThreads, 0, stream>>>(
                k->d, level, k->pts[level], k->nrm[level], n, k->partials);
            KR_CUDA_CHECK_LAUNCH(eval_kernel);
            step_kernel<<<k->seeds, 64, 0, stream>>>(k->d, level, k->partials, blocks, 0);
            KR_CUDA_CHECK_LAUNCH(step_kernel);
        }
    }
    return KR_OK;
}

/* One frame's kernels as one graph launch: captured on the first frame and
 * whenever the key changes, replayed otherwise (some 70 launches become
 * one). */
kr_status launch_frame(kr_gpu_context *ctx, const frame_key *k)
{
    if (!ctx->track_graph || memcmp(ctx->track_graph_key, k, sizeof *k) != 0) {
        if (ctx->track_graph) {
            KR_CUDA_CHECK(cudaGraphExecDestroy(ctx->track_graph));
            ctx->track_graph = NULL;
        }
        KR_CUDA_CHECK(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
        kr_status s = enqueue_frame(ctx->stream, k);
        cudaGraph_t graph = NULL;
        kr_status e = KR_CUDA_STATUS(cudaStreamEndCapture(ctx->stream, &graph));
        if (s == KR_OK) s = e;
        cudaGraphExec_t exec = NULL;
        if (s == KR_OK) s = KR_CUDA_STATUS(cudaGraphInstantiate(&exec, graph, 0));
        if (graph) (void)cudaGraphDestroy(graph);
        if (s != KR_OK) return s;
        ctx->track_graph = exec;
        memset(ctx->track_graph_key, 0, sizeof ctx->track_graph_key);
        memcpy(ctx->track_graph_key, k, sizeof *k);
    }
    KR_CUDA_CHECK(cudaGraphLaunch(ctx->track_graph, ctx->stream));
    return KR_OK;
}

} // namespace

kr_status kr_track_cuda(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_pyramid *pyr,
                        const kr_track_step_plan *plan, const kr_pose *seeds, int count,
                        kr_track_step_result *out)
{
    if (count < 1 || count > KR_TRACK_CUDA_MAX_SEEDS)
        return kr_error(KR_ERR_INVALID_ARG, "kr_track_cuda: %d seeds (1..%d)", count,
                        KR_TRACK_CUDA_MAX_SEEDS);
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    long max_points = 0;
    for (int l = plan->finest; l <= plan->top; l++) {
        long n = (long)pyr->level[l].width * pyr->level[l].height;
        max_points = n > max_points ? n : max_points;
    }
    const kr_kdtree_node *nodes;
    const kr_kdtree_cell *cells;
    const float *pts[KR_MAX_LEVELS], *nrm[KR_MAX_LEVELS];
    trk_dev *d, *h;
    double *partials;
    if ((s = track_buffers(ctx, max_points, count, &d, &partials, &h)) != KR_OK) return s;
    if ((s = tree_on_device(ctx, tree, &nodes, &cells)) != KR_OK) return s;
    if ((s = pyramid_on_device(ctx, pyr, pts, nrm)) != KR_OK) return s;

    /* The staging copy is free once the stream is idle: it is after every
     * successful call, and this also covers a call that failed half-way. */
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    memset(h, 0, count * sizeof *h);
    for (int k = 0; k < count; k++) {
        h[k].plan = *plan;
        h[k].nodes = nodes;
        h[k].cells = cells;
        h[k].n_internal = tree->n_internal;
        h[k].st.r.T = seeds[k];
        h[k].st.r.L = 1;
    }
    KR_CUDA_CHECK(cudaMemcpyAsync(d, h, count * sizeof *h, cudaMemcpyHostToDevice, ctx->stream));

    frame_key key;
    memset(&key, 0, sizeof key);
    key.d = d;
    key.partials = partials;
    key.top = plan->top;
    key.finest = plan->finest;
    key.seeds = count;
    key.polish = plan->polish_steps;
    for (int l = plan->finest; l <= plan->top; l++) {
        key.pts[l] = pts[l];
        key.nrm[l] = nrm[l];
        key.n[l] = pyr->level[l].width * pyr->level[l].height;
        key.evals[l] = evals_of(plan, l);
    }
    if ((s = launch_frame(ctx, &key)) != KR_OK) return s;
    KR_CUDA_CHECK(cudaMemcpyAsync(h, d, count * sizeof *h, cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    for (int k = 0; k < count; k++)
        out[k] = h[k].st.r;
    return KR_OK;
}

namespace
{

/* One linearisation of n device points at `pose`: the eval kernel with the
 * state forced to "evaluate at T", the sums stored by step mode 1. */
kr_status linearize_device(kr_gpu_context *ctx, const kr_kdtree *tree, const float *dp,
                           const float *dn, long n, const kr_pose *pose,
                           const kr_track_point_params *P, trk_dev *d, double *partials, trk_dev *h,
                           kr_track_step_result *out)
{
    const kr_kdtree_node *nodes;
    const kr_kdtree_cell *cells;
    kr_status s;
    if ((s = tree_on_device(ctx, tree, &nodes, &cells)) != KR_OK) return s;
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream)); /* staging free (see kr_track_cuda) */
    memset(h, 0, sizeof *h);
    h->plan.P[0] = *P;
    h->nodes = nodes;
    h->cells = cells;
    h->n_internal = tree->n_internal;
    h->st.r.T = *pose;
    h->st.active = 1;
    h->st.phase = PHASE_START;
    KR_CUDA_CHECK(cudaMemcpyAsync(d, h, sizeof *h, cudaMemcpyHostToDevice, ctx->stream));
    const int blocks = blocks_for(n > 0 ? n : 1);
    eval_kernel<<<blocks, kThreads, 0, ctx->stream>>>(d, 0, dp, dn, (int)n, partials);
    KR_CUDA_CHECK_LAUNCH(eval_kernel);
    step_kernel<<<1, 64, 0, ctx->stream>>>(d, 0, partials, blocks, 1);
    KR_CUDA_CHECK_LAUNCH(step_kernel);
    KR_CUDA_CHECK(
        cudaMemcpyAsync(&h->st, &d->st, sizeof h->st, cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    *out = h->st.r;
    return KR_OK;
}

} // namespace

kr_status kr_track_cuda_linearize(kr_gpu_context *ctx, const kr_kdtree *tree, const kr_cloud *cloud,
                                  const kr_pose *pose, const kr_track_point_params *P,
                                  kr_track_step_result *out)
{
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    const long n = (long)cloud->width * cloud->height;
    trk_dev *d, *h;
    double *partials;
    void *q;
    if ((s = track_buffers(ctx, n, 1, &d, &partials, &h)) != KR_OK) return s;
    size_t bytes = 6 * (size_t)(n > 0 ? n : 1) * sizeof(float);
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_QUERY, bytes, &q)) != KR_OK) return s;
    float *dp = (float *)q, *dn = dp + 3 * n;
    if (n > 0) {
        KR_CUDA_CHECK(cudaMemcpyAsync(dp, cloud->points, 3 * n * sizeof(float),
                                      cudaMemcpyHostToDevice, ctx->stream));
        KR_CUDA_CHECK(cudaMemcpyAsync(dn, cloud->normals, 3 * n * sizeof(float),
                                      cudaMemcpyHostToDevice, ctx->stream));
    }
    return linearize_device(ctx, tree, dp, dn, n, pose, P, d, partials, h, out);
}

kr_status kr_track_cuda_linearize_level(kr_gpu_context *ctx, const kr_kdtree *tree,
                                        const kr_pyramid *pyr, int level, const kr_pose *pose,
                                        const kr_track_point_params *P, kr_track_step_result *out)
{
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    const long n = (long)pyr->level[level].width * pyr->level[level].height;
    trk_dev *d, *h;
    double *partials;
    const float *pts[KR_MAX_LEVELS], *nrm[KR_MAX_LEVELS];
    if ((s = track_buffers(ctx, n, 1, &d, &partials, &h)) != KR_OK) return s;
    if ((s = pyramid_on_device(ctx, pyr, pts, nrm)) != KR_OK) return s;
    return linearize_device(ctx, tree, pts[level], nrm[level], n, pose, P, d, partials, h, out);
}

kr_status kr_track_cuda_descend(kr_gpu_context *ctx, const kr_kdtree *tree, const float *q,
                                size_t n, uint32_t *cells_out)
{
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    if (n > (size_t)INT32_MAX / 4)
        return kr_error(KR_ERR_INVALID_ARG, "kr_track_cuda_descend: %zu queries is too many", n);
    const kr_kdtree_node *nodes;
    const kr_kdtree_cell *cells;
    trk_dev *d, *h;
    double *partials;
    void *buf;
    if ((s = track_buffers(ctx, 1, 1, &d, &partials, &h)) != KR_OK) return s;
    if ((s = tree_on_device(ctx, tree, &nodes, &cells)) != KR_OK) return s;
    size_t bytes = (size_t)(n ? n : 1) * (3 * sizeof(float) + sizeof(uint32_t));
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_QUERY, bytes, &buf)) != KR_OK) return s;
    float *dq = (float *)buf;
    uint32_t *dc = (uint32_t *)(dq + 3 * n);
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream)); /* staging free (see kr_track_cuda) */
    memset(h, 0, sizeof *h);
    h->nodes = nodes;
    h->cells = cells;
    h->n_internal = tree->n_internal;
    KR_CUDA_CHECK(cudaMemcpyAsync(d, h, sizeof *h, cudaMemcpyHostToDevice, ctx->stream));
    if (n) {
        KR_CUDA_CHECK(
            cudaMemcpyAsync(dq, q, 3 * n * sizeof(float), cudaMemcpyHostToDevice, ctx->stream));
        descend_kernel<<<blocks_for((long)n), kThreads, 0, ctx->stream>>>(d, dq, (int)n, dc);
        KR_CUDA_CHECK_LAUNCH(descend_kernel);
        KR_CUDA_CHECK(cudaMemcpyAsync(cells_out, dc, n * sizeof(uint32_t), cudaMemcpyDeviceToHost,
                                      ctx->stream));
    }
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return KR_OK;
}

kr_status kr_track_cuda_tree_download(kr_gpu_context *ctx, const kr_kdtree *tree,
                                      kr_kdtree_node *nodes_out, kr_kdtree_cell *cells_out)
{
    kr_status s = kr_gpu_enter(ctx);
    if (s != KR_OK) return s;
    const kr_kdtree_node *nodes;
    const kr_kdtree_cell *cells;
    if ((s = tree_on_device(ctx, tree, &nodes, &cells)) != KR_OK) return s;
    if (tree->n_internal)
        KR_CUDA_CHECK(cudaMemcpyAsync(nodes_out, nodes, tree->n_internal * sizeof(kr_kdtree_node),
                                      cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaMemcpyAsync(cells_out, cells, tree->n * sizeof(kr_kdtree_cell),
                                  cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return KR_OK;
}
