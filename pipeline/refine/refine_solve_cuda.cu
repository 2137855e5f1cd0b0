/* The refinement's dense solve on a CUDA device (pipeline/refine/refine_solve_cuda.h):
 * the matrix up, cuSOLVER's potrf, its info down (potrs on a failed factor
 * would solve with garbage), then potrs and the solution down. The uplo
 * argument is LAPACK's "U", as in refine_solve.c's host call, so both
 * factor the same stored triangle. */
#include <stdlib.h>

#include "gpu/cuda_check.cuh"
#include "gpu/cusolver_loader.cuh"
#include "pipeline/refine/refine_solve_cuda.h"

struct kr_refine_device_solver {
    int device;
    cudaStream_t stream;
    const kr_cusolver_api *api;
    cusolverDnHandle_t handle;
    double *d_A, *d_x, *d_work;
    double *d_H, *d_d; /* the undamped matrix kept between solves, and the damping */
    int *d_info;
    int capacity, work_capacity; /* n the buffers hold; work entries */
    int h_capacity;              /* n that d_H and d_d hold */
};

#define KR_CUSOLVER_CHECK(call, what)                                                              \
    do {                                                                                           \
        cusolverStatus_t kr_st_ = (call);                                                          \
        if (kr_st_ != CUSOLVER_STATUS_SUCCESS)                                                     \
            return kr_error(KR_ERR_CUDA, "refine: cuSOLVER %s failed on device %d (status %d)",    \
                            what, s->device, (int)kr_st_);                                         \
    } while (0)

extern "C" kr_status kr_refine_device_solver_create(kr_refine_device_solver **out, int device)
{
    *out = NULL;
    const kr_cusolver_api *api;
    kr_status st = kr_cusolver_load(&api);
    if (st != KR_OK) return st;
    kr_refine_device_solver *s = (kr_refine_device_solver *)calloc(1, sizeof *s);
    if (!s) return kr_error(KR_ERR_NOMEM, "refine: no memory for a device solver");
    s->device = device;
    s->api = api;
    st = KR_CUDA_STATUS(cudaSetDevice(device));
    if (st == KR_OK)
        st = KR_CUDA_STATUS(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    if (st == KR_OK && api->create(&s->handle) != CUSOLVER_STATUS_SUCCESS)
        st = kr_error(KR_ERR_CUDA, "refine: cuSOLVER could not start on device %d", device);
    if (st == KR_OK && api->set_stream(s->handle, s->stream) != CUSOLVER_STATUS_SUCCESS)
        st = kr_error(KR_ERR_CUDA, "refine: cuSOLVER could not take a stream on device %d", device);
    if (st != KR_OK) {
        kr_refine_device_solver_destroy(&s);
        return st;
    }
    *out = s;
    return KR_OK;
}

static void release(kr_refine_device_solver *s)
{
    (void)cudaFree(s->d_A);
    (void)cudaFree(s->d_x);
    (void)cudaFree(s->d_work);
    (void)cudaFree(s->d_info);
    (void)cudaFree(s->d_H);
    (void)cudaFree(s->d_d);
    s->d_A = s->d_x = s->d_work = s->d_H = s->d_d = NULL;
    s->d_info = NULL;
    s->capacity = s->work_capacity = s->h_capacity = 0;
}

extern "C" void kr_refine_device_solver_destroy(kr_refine_device_solver **ps)
{
    if (!ps || !*ps) return;
    kr_refine_device_solver *s = *ps;
    (void)cudaSetDevice(s->device);
    if (s->stream) (void)cudaStreamSynchronize(s->stream);
    release(s);
    if (s->handle) (void)s->api->destroy(s->handle);
    if (s->stream) (void)cudaStreamDestroy(s->stream);
    (void)cudaGetLastError();
    free(s);
    *ps = NULL;
}

/* Buffers for an n×n system (grown, never shrunk). */
static kr_status reserve(kr_refine_device_solver *s, int n)
{
    if (n > s->capacity) {
        release(s);
        size_t bytes = sizeof(double) * (size_t)n * (size_t)n;
        cudaError_t e = cudaMalloc(&s->d_A, bytes);
        if (e == cudaSuccess) e = cudaMalloc(&s->d_x, sizeof(double) * (size_t)n);
        if (e == cudaSuccess) e = cudaMalloc(&s->d_info, sizeof(int));
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            release(s);
            return kr_error(KR_ERR_NOMEM,
                            "refine: CUDA device %d has no room for the %d×%d normal equations "
                            "(%.0f MB); the host solves",
                            s->device, n, n, (double)bytes / 1e6);
        }
        s->capacity = n;
    }
    int lwork = 0;
    KR_CUSOLVER_CHECK(
        s->api->dpotrf_buffer_size(s->handle, CUBLAS_FILL_MODE_UPPER, n, s->d_A, n, &lwork),
        "potrf workspace");
    if (lwork > s->work_capacity) {
        (void)cudaFree(s->d_work);
        s->d_work = NULL;
        s->work_capacity = 0;
        if (cudaMalloc(&s->d_work, sizeof(double) * (size_t)lwork) != cudaSuccess) {
            (void)cudaGetLastError();
            return kr_error(KR_ERR_NOMEM,
                            "refine: CUDA device %d has no room for cuSOLVER's workspace; the "
                            "host solves",
                            s->device);
        }
        s->work_capacity = lwork;
    }
    return KR_OK;
}

/* Factors the n×n d_A and solves for d_x (b uploaded already), x down. */
static kr_status factor_solve(kr_refine_device_solver *s, int n, double *x)
{
    int info = 0;
    KR_CUSOLVER_CHECK(s->api->dpotrf(s->handle, CUBLAS_FILL_MODE_UPPER, n, s->d_A, n, s->d_work,
                                     s->work_capacity, s->d_info),
                      "potrf");
    KR_CUDA_CHECK(
        cudaMemcpyAsync(&info, s->d_info, sizeof info, cudaMemcpyDeviceToHost, s->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(s->stream));
    if (info != 0) return KR_ERR_NUMERIC; /* not positive definite: LM damps more */
    KR_CUSOLVER_CHECK(
        s->api->dpotrs(s->handle, CUBLAS_FILL_MODE_UPPER, n, 1, s->d_A, n, s->d_x, n, s->d_info),
        "potrs");
    KR_CUDA_CHECK(
        cudaMemcpyAsync(x, s->d_x, sizeof(double) * (size_t)n, cudaMemcpyDeviceToHost, s->stream));
    KR_CUDA_CHECK(cudaStreamSynchronize(s->stream));
    return KR_OK;
}

extern "C" kr_status kr_refine_device_solve(kr_refine_device_solver *s, const double *A, int n,
                                            double *x)
{
    if (!s || !A || !x || n < 1)
        return kr_error(KR_ERR_INVALID_ARG, "refine: device solve: needs a system");
    KR_CUDA_CHECK(cudaSetDevice(s->device));
    kr_status st = reserve(s, n);
    if (st != KR_OK) return st;
    size_t bytes = sizeof(double) * (size_t)n * (size_t)n;
    KR_CUDA_CHECK(cudaMemcpyAsync(s->d_A, A, bytes, cudaMemcpyHostToDevice, s->stream));
    KR_CUDA_CHECK(
        cudaMemcpyAsync(s->d_x, x, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice, s->stream));
    return factor_solve(s, n, x);
}

static __global__ void add_diagonal(double *A, const double *d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) A[(size_t)i * n + i] += d[i];
}

extern "C" kr_status kr_refine_device_solve_damped(kr_refine_device_solver *s, const double *H,
                                                   bool upload, const double *d, int n, double *x)
{
    if (!s || !H || !d || !x || n < 1)
        return kr_error(KR_ERR_INVALID_ARG, "refine: device solve: needs a system");
    KR_CUDA_CHECK(cudaSetDevice(s->device));
    kr_status st = reserve(s, n);
    if (st != KR_OK) return st;
    size_t bytes = sizeof(double) * (size_t)n * (size_t)n;
    if (n > s->h_capacity) {
        (void)cudaFree(s->d_H);
        (void)cudaFree(s->d_d);
        s->d_H = s->d_d = NULL;
        s->h_capacity = 0;
        if (cudaMalloc(&s->d_H, bytes) != cudaSuccess ||
            cudaMalloc(&s->d_d, sizeof(double) * (size_t)n) != cudaSuccess) {
            (void)cudaGetLastError();
            return kr_error(KR_ERR_NOMEM,
                            "refine: CUDA device %d has no room to keep the %d×%d normal "
                            "equations (%.0f MB); the host solves",
                            s->device, n, n, (double)bytes / 1e6);
        }
        s->h_capacity = n;
        upload = true;
    }
    if (upload) KR_CUDA_CHECK(cudaMemcpyAsync(s->d_H, H, bytes, cudaMemcpyHostToDevice, s->stream));
    KR_CUDA_CHECK(cudaMemcpyAsync(s->d_A, s->d_H, bytes, cudaMemcpyDeviceToDevice, s->stream));
    KR_CUDA_CHECK(
        cudaMemcpyAsync(s->d_d, d, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice, s->stream));
    add_diagonal<<<(unsigned)((n + 255) / 256), 256, 0, s->stream>>>(s->d_A, s->d_d, n);
    KR_CUDA_CHECK(cudaGetLastError());
    KR_CUDA_CHECK(
        cudaMemcpyAsync(s->d_x, x, sizeof(double) * (size_t)n, cudaMemcpyHostToDevice, s->stream));
    return factor_solve(s, n, x);
}
