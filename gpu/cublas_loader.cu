/* cuBLAS loaded on first use (gpu/cublas_loader.cuh). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "gpu/cublas_loader.cuh"

#ifndef KR_CUBLAS_SONAME
#define KR_CUBLAS_SONAME "libcublas.so"
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static kr_cublas_api api;
static bool loaded;
static char why[512];

template <typename F> static bool find(void *lib, const char *name, F *out)
{
    void *f = dlsym(lib, name);
    if (!f) {
        snprintf(why, sizeof why, "%s has no %s", KR_CUBLAS_SONAME, name);
        return false;
    }
    *out = reinterpret_cast<F>(f);
    return true;
}

static void load(void)
{
    void *lib = dlopen(KR_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, sizeof why, "%s", e ? e : KR_CUBLAS_SONAME ": not found");
        return;
    }
    /* cublas_v2.h maps the first three (and the BLAS calls) to their _v2 symbols. */
    loaded = find(lib, "cublasCreate_v2", &api.create) &&
             find(lib, "cublasDestroy_v2", &api.destroy) &&
             find(lib, "cublasSetStream_v2", &api.set_stream) &&
             find(lib, "cublasGetStatusString", &api.status_string) &&
             find(lib, "cublasSgemv_v2", &api.sgemv) && find(lib, "cublasSgemm_v2", &api.sgemm);
    /* Never closed: its handles live as long as the contexts that made them. */
}

kr_status kr_cublas_load(const kr_cublas_api **out)
{
    pthread_once(&once, load);
    if (!loaded)
        return kr_error(KR_ERR_NO_DEVICE,
                        "the cublas engine needs cuBLAS (%s), which could not be loaded: %s; "
                        "install the CUDA toolkit's cuBLAS or use the fused or cpu engine",
                        KR_CUBLAS_SONAME, why);
    *out = &api;
    return KR_OK;
}
