/* Turns CUDA and cuBLAS error codes into kinreg statuses (gpu/cuda_check.cuh). */
#include <stdio.h>
#include <string.h>

#include "gpu/cublas_loader.cuh"
#include "gpu/cuda_check.cuh"

/* "…/kinreg/gpu/preprocess.cu" → "pipeline/preprocess/preprocess_cuda.cu": enough to find the line.
 */
static const char *short_path(const char *file)
{
    const char *last = strrchr(file, '/');
    if (!last) return file;
    const char *p = last;
    while (p > file && p[-1] != '/')
        p--;
    return p > file ? p : file;
}

kr_status kr_cuda_fail(cudaError_t err, const char *stmt, const char *file, int line)
{
    /* Reset the non-sticky error so later, unrelated calls do not report it. */
    (void)cudaGetLastError();
    kr_log(KR_LOG_ERROR, "%s:%d: %s failed: %s (%s)", short_path(file), line, stmt,
           cudaGetErrorName(err), cudaGetErrorString(err));
    return kr_error(KR_ERR_CUDA, "%s:%d: %s failed: %s (%s)", short_path(file), line, stmt,
                    cudaGetErrorName(err), cudaGetErrorString(err));
}

kr_status kr_cublas_fail(cublasStatus_t err, const char *stmt, const char *file, int line)
{
    const kr_cublas_api *api = NULL; /* loaded already: a call just failed */
    char code[32];
    snprintf(code, sizeof code, "status %d", (int)err);
    const char *what = kr_cublas_load(&api) == KR_OK ? api->status_string(err) : code;
    kr_log(KR_LOG_ERROR, "%s:%d: %s failed: %s", short_path(file), line, stmt, what);
    return kr_error(KR_ERR_CUDA, "%s:%d: %s failed: %s", short_path(file), line, stmt, what);
}
