/* EM-ICP and Softassign in the seed's formulation (Tamaki et al. §IV): the
 * N×M matrix in device memory, row/column sums by cublasSgemv, the
 * pseudo-points and the cross-covariance by cublasSgemm, element-wise
 * kernels between, and Horn on the host after every step — the faithful
 * reproduction, kept beside the fused engine for comparison.
 *
 * Two departures, both for correctness: EM-ICP's exponentials are shifted
 * per row by the row's smallest d² (the seed's exp(−d²/σ²) underflows float
 * at small σ and its rows become 0/0; the shift cancels in α_ij, see
 * pipeline/register/softreg_kernels.h), and Softassign scales the slack entries with their
 * row/column (Gold et al.) where the seed keeps them fixed. The matrix is
 * column-major (cuBLAS's order): A[i + j·N], rows = source points. */
#include <math.h>
#include <string.h>

#include "core/horn_kernels.h"
#include "pipeline/register/register_cuda.cuh"

static unsigned blocks_for(size_t n, unsigned threads)
{
    return (unsigned)((n + threads - 1) / threads);
}

/* Moved source points (three columns) for the pose. */
static __global__ void move_points(const float *src, size_t n, const float *Rt, float *moved)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float q[3];
    kr_register_move(Rt, Rt + 9, src + 3 * i, q);
    moved[i] = q[0];
    moved[n + i] = q[1];
    moved[2 * n + i] = q[2];
}

/* Source columns (n×3, column-major) for the moment GEMMs. */
static __global__ void src_columns(const float *src, size_t n, float *cols)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int k = 0; k < 3; k++)
        cols[k * n + i] = src[3 * i + k];
}

static __global__ void row_min_d2(const float *moved, size_t n, const float *dst, size_t m,
                                  float *mu)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float q[3] = {moved[i], moved[n + i], moved[2 * n + i]}, best = INFINITY;
    for (size_t j = 0; j < m; j++)
        best = fminf(best, kr_register_sqdist(q, dst[j], dst[m + j], dst[2 * m + j]));
    mu[i] = best;
}

/* EM-ICP: A_ij = exp(−(d²_ij − μ_i)/σ²). */
static __global__ void emicp_fill(const float *moved, size_t n, const float *dst, size_t m,
                                  const float *mu, float inv_s2, float *A)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
    if (i >= n) return;
    float q[3] = {moved[i], moved[n + i], moved[2 * n + i]};
    float d2 = kr_register_sqdist(q, dst[j], dst[m + j], dst[2 * m + j]);
    A[i + j * n] = kr_register_expf(-(d2 - mu[i]) * inv_s2);
}

/* C'_i += exp(−(d₀² − μ_i)/σ²) (the seed's saxpy, shifted per row). */
static __global__ void emicp_outlier(float *C, const float *mu, size_t n, double d02, double inv_s2)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double c = (double)C[i] + exp(-(d02 - (double)mu[i]) * inv_s2);
    C[i] = isfinite(c) ? (float)c : INFINITY;
}

/* A_ij = sqrt(A_ij / C'_i). */
static __global__ void emicp_sqrt(float *A, size_t n, const float *C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
    if (i >= n) return;
    A[i + j * n] = sqrtf(A[i + j * n] / C[i]);
}

/* Softassign: K_ij = exp(−(d²_ij − α)/T) (linear domain, as in the seed). */
static __global__ void softassign_fill(const float *moved, size_t n, const float *dst, size_t m,
                                       float alpha, float inv_t, float *A)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
    if (i >= n) return;
    float q[3] = {moved[i], moved[n + i], moved[2 * n + i]};
    float x = kr_register_softassign_logk(kr_register_sqdist(q, dst[j], dst[m + j], dst[2 * m + j]),
                                          alpha, inv_t);
    A[i + j * n] = expf(x < 80.0f ? x : 80.0f);
}

static __global__ void fill_value(float *v, size_t n, float value)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = value;
}

/* sums_i += slack_i; then slack_i /= sums_i (the slack entry is normalised too). */
static __global__ void add_slack(float *sums, float *slack, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sums[i] += slack[i];
    slack[i] /= sums[i];
}

/* Divides row i (by_row) or column j of A by sums. */
static __global__ void scale_matrix(float *A, size_t n, const float *sums, int by_row)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
    if (i >= n) return;
    A[i + j * n] /= sums[by_row ? i : j];
}

typedef struct {
    float *A, *moved, *srccols, *mu, *rowsum, *colsum, *slack_r, *slack_c, *ones, *Z, *small;
    float *Rt;
    const kr_cublas_api *blas; /* loaded on first use (gpu/cublas_loader.cuh) */
    cublasHandle_t h;
} cublas_buffers;

/* The 16 Horn moments from weights w (n) and weighted pseudo-point sums Z
 * (n×3, Z_i = w_i p_i): W = Σw, a = Srcᵀw, b = Zᵀ1, P = SrcᵀZ — gemv and gemm. */
static kr_status moments(kr_gpu_context *ctx, const cublas_buffers *b, size_t n, const float *w,
                         double mom[16])
{
    cublasHandle_t h = b->h;
    const float one = 1, zero = 0;
    float *out = b->small; /* W, a[3], b[3], P[9] (column-major 3×3) */
    int N = (int)n;
    KR_CUBLAS_CHECK(b->blas->sgemv(h, CUBLAS_OP_T, N, 1, &one, w, N, b->ones, 1, &zero, out, 1));
    KR_CUBLAS_CHECK(
        b->blas->sgemv(h, CUBLAS_OP_T, N, 3, &one, b->srccols, N, w, 1, &zero, out + 1, 1));
    KR_CUBLAS_CHECK(
        b->blas->sgemv(h, CUBLAS_OP_T, N, 3, &one, b->Z, N, b->ones, 1, &zero, out + 4, 1));
    KR_CUBLAS_CHECK(b->blas->sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 3, 3, N, &one, b->srccols, N, b->Z,
                                   N, &zero, out + 7, 3));
    float host[16];
    KR_CUDA_CHECK(cudaMemcpyAsync(host, out, sizeof host, cudaMemcpyDeviceToHost, ctx->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    for (int k = 0; k < 7; k++)
        mom[k] = host[k];
    for (int a = 0; a < 3; a++) /* P[a][b] = (SrcᵀZ)(a, b), stored at a + 3b */
        for (int c = 0; c < 3; c++)
            mom[7 + 3 * a + c] = host[7 + a + 3 * c];
    return KR_OK;
}

static kr_status emicp_step(kr_gpu_context *ctx, const kr_register_params *p,
                            const kr_register_cuda_points *pts, const cublas_buffers *b,
                            double temp, double mom[16])
{
    cudaStream_t st = ctx->stream;
    cublasHandle_t h = b->h;
    size_t n = pts->n, m = pts->m;
    int N = (int)n, M = (int)m;
    const float one = 1, zero = 0;
    dim3 grid(blocks_for(n, 128), (unsigned)m);
    row_min_d2<<<blocks_for(n, 128), 128, 0, st>>>(b->moved, n, pts->dst, m, b->mu);
    KR_CUDA_CHECK_LAUNCH(row_min_d2);
    emicp_fill<<<grid, 128, 0, st>>>(b->moved, n, pts->dst, m, b->mu, (float)(1.0 / temp), b->A);
    KR_CUDA_CHECK_LAUNCH(emicp_fill);
    /* C = A·1 */
    KR_CUBLAS_CHECK(
        b->blas->sgemv(h, CUBLAS_OP_N, N, M, &one, b->A, N, b->ones, 1, &zero, b->rowsum, 1));
    emicp_outlier<<<blocks_for(n, 256), 256, 0, st>>>(b->rowsum, b->mu, n, p->d02, 1.0 / temp);
    KR_CUDA_CHECK_LAUNCH(emicp_outlier);
    emicp_sqrt<<<grid, 128, 0, st>>>(b->A, n, b->rowsum);
    KR_CUDA_CHECK_LAUNCH(emicp_sqrt);
    /* λ = A·1, X' λ = A·X (unnormalised pseudo-points: exactly the Z of moments()) */
    KR_CUBLAS_CHECK(
        b->blas->sgemv(h, CUBLAS_OP_N, N, M, &one, b->A, N, b->ones, 1, &zero, b->colsum, 1));
    KR_CUBLAS_CHECK(b->blas->sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, 3, M, &one, b->A, N, pts->dst, M,
                                   &zero, b->Z, N));
    return moments(ctx, b, n, b->colsum, mom);
}

static kr_status softassign_step(kr_gpu_context *ctx, const kr_register_params *p,
                                 const kr_register_cuda_points *pts, const cublas_buffers *b,
                                 double temp, double mom[16])
{
    cudaStream_t st = ctx->stream;
    cublasHandle_t h = b->h;
    size_t n = pts->n, m = pts->m;
    int N = (int)n, M = (int)m;
    const float one = 1, zero = 0;
    dim3 grid(blocks_for(n, 128), (unsigned)m);
    float mo = (float)exp(p->log_m_outlier);
    softassign_fill<<<grid, 128, 0, st>>>(b->moved, n, pts->dst, m, (float)p->alpha,
                                          (float)(1.0 / temp), b->A);
    KR_CUDA_CHECK_LAUNCH(softassign_fill);
    fill_value<<<blocks_for(n, 256), 256, 0, st>>>(b->slack_r, n, mo);
    KR_CUDA_CHECK_LAUNCH(fill_value);
    fill_value<<<blocks_for(m, 256), 256, 0, st>>>(b->slack_c, m, mo);
    KR_CUDA_CHECK_LAUNCH(fill_value);
    for (int k = 0; k < p->i1; k++) {
        KR_CUBLAS_CHECK(
            b->blas->sgemv(h, CUBLAS_OP_N, N, M, &one, b->A, N, b->ones, 1, &zero, b->rowsum, 1));
        add_slack<<<blocks_for(n, 256), 256, 0, st>>>(b->rowsum, b->slack_r, n);
        KR_CUDA_CHECK_LAUNCH(add_slack);
        scale_matrix<<<grid, 128, 0, st>>>(b->A, n, b->rowsum, 1);
        KR_CUDA_CHECK_LAUNCH(scale_matrix);
        KR_CUBLAS_CHECK(
            b->blas->sgemv(h, CUBLAS_OP_T, N, M, &one, b->A, N, b->ones, 1, &zero, b->colsum, 1));
        add_slack<<<blocks_for(m, 256), 256, 0, st>>>(b->colsum, b->slack_c, m);
        KR_CUDA_CHECK_LAUNCH(add_slack);
        scale_matrix<<<grid, 128, 0, st>>>(b->A, n, b->colsum, 0);
        KR_CUDA_CHECK_LAUNCH(scale_matrix);
    }
    /* r = M·1, Z = M·X */
    KR_CUBLAS_CHECK(
        b->blas->sgemv(h, CUBLAS_OP_N, N, M, &one, b->A, N, b->ones, 1, &zero, b->rowsum, 1));
    KR_CUBLAS_CHECK(b->blas->sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, 3, M, &one, b->A, N, pts->dst, M,
                                   &zero, b->Z, N));
    return moments(ctx, b, n, b->rowsum, mom);
}

kr_status kr_register_cuda_cublas(kr_gpu_context *ctx, const kr_register_params *p,
                                  const kr_register_cuda_points *pts, kr_register_cuda_state *state)
{
    size_t n = pts->n, m = pts->m;
    if (n > (size_t)INT32_MAX || m > 65535)
        return kr_error(KR_ERR_NOMEM,
                        "register: the cuBLAS engine takes at most 65535 destination points (got "
                        "%zu); use the fused engine",
                        m);
    size_t free_b = 0, total_b = 0;
    KR_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    double need = (double)n * (double)m * sizeof(float);
    if (need > 0.9 * (double)free_b)
        return kr_error(KR_ERR_NOMEM,
                        "register: the cuBLAS engine's %zu×%zu matrix needs %.0f MB but the device "
                        "has %.0f MB free; use the fused engine (memory N + M) or fewer points",
                        n, m, need / 1e6, (double)free_b / 1e6);
    cublas_buffers b;
    kr_status s = kr_gpu_cublas(ctx, &b.blas, &b.h);
    if (s != KR_OK) return s;
    void *A = NULL, *vec = NULL;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_MATRIX, (size_t)need, &A)) != KR_OK) return s;
    size_t k = n > m ? n : m;
    size_t vec_floats = 3 * n + 3 * n + 4 * n + 2 * m + 2 * k + 3 * n + 16 + 12;
    if ((s = kr_gpu_scratch(ctx, KR_GPU_SCRATCH_REG_VECTORS, vec_floats * sizeof(float), &vec)) !=
        KR_OK)
        return s;
    b.A = (float *)A;
    b.moved = (float *)vec;
    b.srccols = b.moved + 3 * n;
    b.mu = b.srccols + 3 * n;
    b.rowsum = b.mu + n;
    b.slack_r = b.rowsum + n;
    b.colsum = b.slack_r + n; /* also λ (n) for EM-ICP: sized max(n, m) */
    b.slack_c = b.colsum + k;
    b.ones = b.slack_c + m;
    b.Z = b.ones + k;
    b.small = b.Z + 3 * n;
    b.Rt = b.small + 16;
    (void)b.ones;
    cudaStream_t st = ctx->stream;
    fill_value<<<blocks_for(k, 256), 256, 0, st>>>(b.ones, k, 1.0f);
    KR_CUDA_CHECK_LAUNCH(fill_value);
    src_columns<<<blocks_for(n, 256), 256, 0, st>>>(pts->src, n, b.srccols);
    KR_CUDA_CHECK_LAUNCH(src_columns);

    while (!state->st.done) {
        float Rt[12];
        for (int q = 0; q < 9; q++)
            Rt[q] = (float)state->R[q];
        for (int q = 0; q < 3; q++)
            Rt[9 + q] = (float)state->t[q];
        KR_CUDA_CHECK(cudaMemcpyAsync(b.Rt, Rt, sizeof Rt, cudaMemcpyHostToDevice, st));
        move_points<<<blocks_for(n, 256), 256, 0, st>>>(pts->src, n, b.Rt, b.moved);
        KR_CUDA_CHECK_LAUNCH(move_points);
        double mom[16], R[9], t[3];
        s = p->method == KR_REGISTER_METHOD_EMICP
                ? emicp_step(ctx, p, pts, &b, state->st.temp, mom)
                : softassign_step(ctx, p, pts, &b, state->st.temp, mom);
        if (s != KR_OK) return s;
        if (kr_horn_from_moments(mom, R, t) != 0) {
            state->st.done = -1;
            break;
        }
        double m2 = kr_register_motion2(p, state->R, state->t, R, t);
        memcpy(state->R, R, sizeof R);
        memcpy(state->t, t, sizeof t);
        kr_register_advance(p, &state->st, m2);
    }
    return KR_OK;
}
