/* The device context in a build without CUDA: there are no devices, and
 * anything that would need one says how to get it. */
#include <stdio.h>

#include "gpu/engine.h"

#define KR_NOCUDA_HINT                                                                             \
    "this kinreg was built without CUDA; rebuild with nvcc installed or use --backend cpu"

int kr_gpu_device_count(char *why, size_t why_len)
{
    if (why && why_len) snprintf(why, why_len, "this kinreg was built without CUDA");
    return 0;
}

kr_status kr_gpu_context_create(kr_gpu_context **out, int device)
{
    (void)out;
    (void)device;
    return kr_error(KR_ERR_NO_DEVICE, KR_NOCUDA_HINT);
}

void kr_gpu_context_destroy(kr_gpu_context **ctx)
{
    if (ctx) *ctx = NULL;
}

int kr_gpu_context_device(const kr_gpu_context *ctx)
{
    (void)ctx;
    return -1;
}

const char *kr_gpu_context_describe(const kr_gpu_context *ctx)
{
    (void)ctx;
    return "cuda: not built";
}

kr_status kr_gpu_host_alloc(void **out, size_t bytes)
{
    (void)out;
    (void)bytes;
    return kr_error(KR_ERR_NO_DEVICE, KR_NOCUDA_HINT);
}

/* Nothing can have been allocated by kr_gpu_host_alloc here. */
void kr_gpu_host_free(void *p)
{
    (void)p;
}

kr_status kr_gpu_context_twin(const kr_gpu_context *ctx, kr_gpu_context **out)
{
    (void)ctx;
    (void)out;
    return kr_error(KR_ERR_NO_DEVICE, KR_NOCUDA_HINT);
}
