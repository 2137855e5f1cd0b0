/* cuSOLVER, loaded on first use, as cuBLAS is (gpu/cublas_loader.cuh, and
 * for the same reason: linked, the library and the cuBLAS and cuSPARSE it
 * pulls in are mapped and relocated at every start of every command). Only
 * the refinement's dense solve on the device calls it
 * (pipeline/refine/refine_solve_cuda.cu). */
#ifndef KINREG_GPU_CUSOLVER_LOADER_CUH
#define KINREG_GPU_CUSOLVER_LOADER_CUH

#include <cusolverDn.h>

#include "kinreg/status.h"

/* The entry points kinreg uses. */
typedef struct {
    cusolverStatus_t (*create)(cusolverDnHandle_t *);
    cusolverStatus_t (*destroy)(cusolverDnHandle_t);
    cusolverStatus_t (*set_stream)(cusolverDnHandle_t, cudaStream_t);
    cusolverStatus_t (*dpotrf_buffer_size)(cusolverDnHandle_t, cublasFillMode_t, int, double *, int,
                                           int *);
    cusolverStatus_t (*dpotrf)(cusolverDnHandle_t, cublasFillMode_t, int, double *, int, double *,
                               int, int *);
    cusolverStatus_t (*dpotrs)(cusolverDnHandle_t, cublasFillMode_t, int, int, const double *, int,
                               double *, int, int *);
} kr_cusolver_api;

/* cuSOLVER, opened once per process (thread-safe). Sets *api, or returns
 * KR_ERR_NO_DEVICE naming the library and what to do. */
kr_status kr_cusolver_load(const kr_cusolver_api **api);

#endif
