/* tests/device_hold.h: plain CUDA runtime calls (the C API; the runner links
 * cudart through the library). */
#include "device_hold.h"

#include <stdio.h>
#include <string.h>

#ifdef KINREG_HAVE_CUDA
#include <cuda_runtime_api.h>

bool kr_test_device_hold_begin(kr_test_device_hold *h, int device, size_t leave)
{
    memset(h, 0, sizeof *h);
    h->device = device;
    int before = 0;
    if (cudaGetDevice(&before) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
        (void)cudaGetLastError();
        printf("    cannot hold memory of device %d: it cannot be selected\n", device);
        return false;
    }
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
        (void)cudaDeviceSynchronize();
        (void)cudaMemPoolTrimTo(pool, 0);
    }
    (void)cudaGetLastError();
    /* Large blocks first; a block the allocator refuses is tried at half the
     * size, down to a MiB. */
    const int slots = (int)(sizeof h->block / sizeof *h->block);
    while (h->n < slots) {
        size_t free_bytes = 0, total = 0;
        if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess || free_bytes <= leave) break;
        size_t want = free_bytes - leave;
        void *p = NULL;
        while (want >= ((size_t)1 << 20) && cudaMalloc(&p, want) != cudaSuccess) {
            (void)cudaGetLastError();
            want /= 2;
        }
        if (!p) break;
        h->block[h->n++] = p;
        h->held += want;
    }
    size_t free_bytes = 0, total = 0;
    (void)cudaMemGetInfo(&free_bytes, &total);
    (void)cudaSetDevice(before);
    printf("    device %d: %.1f GiB held, %.1f MiB left free\n", device,
           (double)h->held / (1 << 30), (double)free_bytes / (1 << 20));
    if (free_bytes > leave + ((size_t)64 << 20)) {
        kr_test_device_hold_end(h);
        printf("    could not take device %d's memory down to %.1f MiB\n", device,
               (double)leave / (1 << 20));
        return false;
    }
    return true;
}

void kr_test_device_hold_end(kr_test_device_hold *h)
{
    if (!h->n) return;
    int before = 0;
    (void)cudaGetDevice(&before);
    (void)cudaSetDevice(h->device);
    for (int i = 0; i < h->n; i++)
        (void)cudaFree(h->block[i]);
    (void)cudaSetDevice(before);
    (void)cudaGetLastError();
    memset(h, 0, sizeof *h);
}
#else
bool kr_test_device_hold_begin(kr_test_device_hold *h, int device, size_t leave)
{
    (void)leave;
    memset(h, 0, sizeof *h);
    h->device = device;
    printf("    this build has no CUDA: no device memory to hold\n");
    return false;
}

void kr_test_device_hold_end(kr_test_device_hold *h)
{
    memset(h, 0, sizeof *h);
}
#endif
