/* cuSOLVER loaded on first use (gpu/cusolver_loader.cuh). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "gpu/cusolver_loader.cuh"

/* The soname of the toolkit this was built with (CUDA 13 ships cuSOLVER 12). */
#define KR_STR_(x) #x
#define KR_STR(x) KR_STR_(x)
#define KR_CUSOLVER_SONAME "libcusolver.so." KR_STR(CUSOLVER_VER_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static kr_cusolver_api api;
static bool loaded;
static char why[512];

template <typename F> static bool find(void *lib, const char *name, F *out)
{
    void *f = dlsym(lib, name);
    if (!f) {
        snprintf(why, sizeof why, "%s has no %s", KR_CUSOLVER_SONAME, name);
        return false;
    }
    *out = reinterpret_cast<F>(f);
    return true;
}

static void load(void)
{
    void *lib = dlopen(KR_CUSOLVER_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, sizeof why, "%s", e ? e : KR_CUSOLVER_SONAME ": not found");
        return;
    }
    loaded = find(lib, "cusolverDnCreate", &api.create) &&
             find(lib, "cusolverDnDestroy", &api.destroy) &&
             find(lib, "cusolverDnSetStream", &api.set_stream) &&
             find(lib, "cusolverDnDpotrf_bufferSize", &api.dpotrf_buffer_size) &&
             find(lib, "cusolverDnDpotrf", &api.dpotrf) &&
             find(lib, "cusolverDnDpotrs", &api.dpotrs);
    /* Never closed: its handles live as long as the solvers that made them. */
}

kr_status kr_cusolver_load(const kr_cusolver_api **out)
{
    pthread_once(&once, load);
    if (!loaded)
        return kr_error(KR_ERR_NO_DEVICE,
                        "the device solve needs cuSOLVER (%s), which could not be loaded: %s; "
                        "install the CUDA toolkit's cuSOLVER (the host solves meanwhile)",
                        KR_CUSOLVER_SONAME, why);
    *out = &api;
    return KR_OK;
}
