/* cuBLAS, loaded on first use. Only the seed's cuBLAS registration engine
 * (pipeline/register/register_cublas.cu) calls it; linked as a dependency,
 * libcublas and libcublasLt (~700 MB) were mapped and relocated at every
 * start of every kinreg command: ~100 ms of page faults before main() on
 * the dev VM, twice for `run` (which re-executes itself once, gpu/
 * openmp_waits.c), a window in which Ctrl-C or SIGTERM killed the program
 * before it could block them (issue 30, item 6). Now the library is opened
 * with dlopen when that engine first needs it. */
#ifndef KINREG_GPU_CUBLAS_LOADER_CUH
#define KINREG_GPU_CUBLAS_LOADER_CUH

#include <cublas_v2.h>

#include "kinreg/status.h"

/* The entry points kinreg uses, by the names cublas_v2.h maps to. */
typedef struct {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    const char *(*status_string)(cublasStatus_t);
    cublasStatus_t (*sgemv)(cublasHandle_t, cublasOperation_t, int, int, const float *,
                            const float *, int, const float *, int, const float *, float *, int);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const float *, const float *, int, const float *, int, const float *,
                            float *, int);
} kr_cublas_api;

/* cuBLAS, opened once per process (thread-safe). Sets *api, or returns
 * KR_ERR_NO_DEVICE naming the library and what to do. */
kr_status kr_cublas_load(const kr_cublas_api **api);

#endif
