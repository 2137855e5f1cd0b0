/* CUDA and cuBLAS failures become KR_ERR_CUDA with the failing statement,
 * its file:line and the library's own message recorded (kr_error) and logged
 * (DESIGN.md §7). CUDA-side header: include only from gpu/ .cu files.
 *
 *   KR_CUDA_CHECK(cudaMemcpyAsync(...));       returns the status on failure
 *   kr_status s = KR_CUDA_STATUS(cudaFree(p));  for paths that must clean up */
#ifndef KINREG_GPU_CUDA_CHECK_CUH
#define KINREG_GPU_CUDA_CHECK_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kinreg/status.h"

kr_status kr_cuda_fail(cudaError_t err, const char *stmt, const char *file, int line);
kr_status kr_cublas_fail(cublasStatus_t err, const char *stmt, const char *file, int line);

static inline kr_status kr_cuda_status(cudaError_t err, const char *stmt, const char *file,
                                       int line)
{
    return err == cudaSuccess ? KR_OK : kr_cuda_fail(err, stmt, file, line);
}

static inline kr_status kr_cublas_status(cublasStatus_t err, const char *stmt, const char *file,
                                         int line)
{
    return err == CUBLAS_STATUS_SUCCESS ? KR_OK : kr_cublas_fail(err, stmt, file, line);
}

#define KR_CUDA_STATUS(call) kr_cuda_status((call), #call, __FILE__, __LINE__)
#define KR_CUBLAS_STATUS(call) kr_cublas_status((call), #call, __FILE__, __LINE__)

#define KR_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        kr_status kr_cs_status_ = KR_CUDA_STATUS(call);                                            \
        if (kr_cs_status_ != KR_OK) return kr_cs_status_;                                          \
    } while (0)

#define KR_CUBLAS_CHECK(call)                                                                      \
    do {                                                                                           \
        kr_status kr_cs_status_ = KR_CUBLAS_STATUS(call);                                          \
        if (kr_cs_status_ != KR_OK) return kr_cs_status_;                                          \
    } while (0)

/* After a kernel launch, where launch-configuration errors show up; names
 * the kernel rather than cudaGetLastError(). */
#define KR_CUDA_CHECK_LAUNCH(kernel)                                                               \
    do {                                                                                           \
        kr_status kr_cs_status_ =                                                                  \
            kr_cuda_status(cudaGetLastError(), "launch of " #kernel, __FILE__, __LINE__);          \
        if (kr_cs_status_ != KR_OK) return kr_cs_status_;                                          \
    } while (0)

#endif
