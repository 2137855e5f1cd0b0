/* The CUDA device context: creation checks that the device exists and can
 * run this build's kernels; buffers are kept and grown, never shrunk. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu/context.cuh"
#include "gpu/cublas_loader.cuh"

int kr_gpu_device_count(char *why, size_t why_len)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (why && why_len)
            snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        return 0;
    }
    if (count == 0 && why && why_len) snprintf(why, why_len, "cudaGetDeviceCount: 0 devices");
    return count;
}

/* Launched never: cudaFuncGetAttributes on it tells whether the device can
 * run the code this library was compiled for (sm_90 and PTX by default). */
__global__ void kr_probe_kernel(int *x)
{
    if (x) *x = 0;
}

static void release(kr_gpu_context *ctx)
{
    /* Best effort: a context torn down after a device failure still frees
     * what it can, and errors here have nowhere useful to go. */
    if (ctx->stream) (void)cudaStreamSynchronize(ctx->stream);
    if (ctx->track_graph) (void)cudaGraphExecDestroy(ctx->track_graph);
    for (int i = 0; i < 4; i++)
        if (ctx->transfer_events[i]) (void)cudaEventDestroy(ctx->transfer_events[i]);
    for (int i = 0; i < KR_GPU_SCRATCH_SLOTS; i++)
        if (ctx->scratch[i].ptr) (void)cudaFree(ctx->scratch[i].ptr);
    for (int i = 0; i < KR_GPU_STAGING_SLOTS; i++)
        if (ctx->staging[i].ptr) (void)cudaFreeHost(ctx->staging[i].ptr);
    const kr_cublas_api *api = NULL;
    if (ctx->cublas && kr_cublas_load(&api) == KR_OK) (void)api->destroy(ctx->cublas);
    if (ctx->stream) (void)cudaStreamDestroy(ctx->stream);
    (void)cudaGetLastError();
    free(ctx);
}

kr_status kr_gpu_context_create(kr_gpu_context **out, int device)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_gpu_context_create: NULL output");
    char why[256];
    int count = kr_gpu_device_count(why, sizeof why);
    if (count <= 0)
        return kr_error(KR_ERR_NO_DEVICE, "no CUDA device found (%s); use --backend cpu", why);
    if (device < 0 || device >= count)
        return kr_error(
            KR_ERR_NO_DEVICE,
            "CUDA device %d does not exist (%d found, numbered from 0); use --backend cpu", device,
            count);

    kr_gpu_context *ctx = (kr_gpu_context *)calloc(1, sizeof *ctx);
    if (!ctx) return kr_error(KR_ERR_NOMEM, "cannot allocate the CUDA context");
    ctx->device = device;
    cudaDeviceProp prop;
    cudaFuncAttributes attr;
    kr_status s;
    if ((s = KR_CUDA_STATUS(cudaSetDevice(device))) != KR_OK) goto fail;
    if ((s = KR_CUDA_STATUS(cudaGetDeviceProperties(&prop, device))) != KR_OK) goto fail;
    if (cudaFuncGetAttributes(&attr, kr_probe_kernel) != cudaSuccess) {
        (void)cudaGetLastError();
        s = kr_error(KR_ERR_NO_DEVICE,
                     "CUDA device %d (%s, sm_%d%d) cannot run this build's kernels; rebuild with "
                     "-DCMAKE_CUDA_ARCHITECTURES=%d%d or use --backend cpu",
                     device, prop.name, prop.major, prop.minor, prop.major, prop.minor);
        goto fail;
    }
    if ((s = KR_CUDA_STATUS(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking))) !=
        KR_OK)
        goto fail;
    snprintf(ctx->description, sizeof ctx->description, "cuda: %.200s (sm_%d%d)", prop.name,
             prop.major, prop.minor);
    *out = ctx;
    return KR_OK;
fail:
    release(ctx);
    return s;
}

kr_status kr_gpu_cublas(kr_gpu_context *ctx, const kr_cublas_api **api, cublasHandle_t *handle)
{
    kr_status s = kr_cublas_load(api);
    if (s != KR_OK) return s;
    if (!ctx->cublas) {
        if ((s = KR_CUBLAS_STATUS((*api)->create(&ctx->cublas))) != KR_OK) {
            ctx->cublas = NULL;
            return s;
        }
    }
    if ((s = KR_CUBLAS_STATUS((*api)->set_stream(ctx->cublas, ctx->stream))) != KR_OK) return s;
    *handle = ctx->cublas;
    return KR_OK;
}

void kr_gpu_context_destroy(kr_gpu_context **ctx)
{
    if (!ctx || !*ctx) return;
    (void)cudaSetDevice((*ctx)->device);
    release(*ctx);
    *ctx = NULL;
}

int kr_gpu_context_device(const kr_gpu_context *ctx)
{
    return ctx ? ctx->device : -1;
}

const char *kr_gpu_context_describe(const kr_gpu_context *ctx)
{
    return ctx ? ctx->description : "cuda: (none)";
}

kr_status kr_gpu_enter(kr_gpu_context *ctx)
{
    KR_CUDA_CHECK(cudaSetDevice(ctx->device));
    return KR_OK;
}

kr_status kr_gpu_host_alloc(void **out, size_t bytes)
{
    void *p = NULL;
    KR_CUDA_CHECK(cudaMallocHost(&p, bytes));
    *out = p;
    return KR_OK;
}

void kr_gpu_host_free(void *p)
{
    if (p && cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
}

/* Round up so that slightly varying requests do not reallocate every time. */
static size_t grown(size_t bytes)
{
    return (bytes + 4095) & ~(size_t)4095;
}

kr_status kr_gpu_scratch(kr_gpu_context *ctx, kr_gpu_scratch_slot slot, size_t bytes, void **out)
{
    kr_gpu_buffer *b = &ctx->scratch[slot];
    if (b->bytes < bytes || !b->ptr) {
        if (b->ptr) KR_CUDA_CHECK(cudaFree(b->ptr));
        b->ptr = NULL;
        b->bytes = 0;
        size_t n = grown(bytes ? bytes : 1);
        KR_CUDA_CHECK(cudaMalloc(&b->ptr, n));
        b->bytes = n;
    }
    *out = b->ptr;
    return KR_OK;
}

kr_status kr_gpu_staging(kr_gpu_context *ctx, kr_gpu_staging_slot slot, size_t bytes, void **out)
{
    kr_gpu_buffer *b = &ctx->staging[slot];
    if (b->bytes < bytes || !b->ptr) {
        if (b->ptr) KR_CUDA_CHECK(cudaFreeHost(b->ptr));
        b->ptr = NULL;
        b->bytes = 0;
        size_t n = grown(bytes ? bytes : 1);
        KR_CUDA_CHECK(cudaMallocHost(&b->ptr, n));
        b->bytes = n;
    }
    *out = b->ptr;
    return KR_OK;
}
