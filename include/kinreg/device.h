/* kinreg — compute backend choice and the device context.
 *
 * One context owns the device, its streams, the cuBLAS handle and scratch
 * buffers (DESIGN.md §4). With the CPU backend it owns nothing but settings.
 * A device serves one thread at a time (the tracker thread owns it): its
 * buffers are reused from call to call. */
#ifndef KINREG_DEVICE_H
#define KINREG_DEVICE_H

#include <stdbool.h>

#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KR_BACKEND_AUTO = 0, KR_BACKEND_CPU = 1, KR_BACKEND_CUDA = 2 } kr_backend;

typedef struct kr_device kr_device;

typedef struct {
    kr_backend backend; /* AUTO: CUDA when a device is present, else CPU */
    int cuda_device;    /* device ordinal, default 0 */
    int cpu_threads;    /* OpenMP threads, 0 = OpenMP default */
} kr_device_config;

KR_API void kr_device_config_default(kr_device_config *cfg);
/* Asking for CUDA where there is none (or in a build without CUDA) is
 * KR_ERR_NO_DEVICE with a message saying what to do — never a silent CPU. */
KR_API kr_status kr_device_create(kr_device **out, const kr_device_config *cfg);
KR_API void kr_device_destroy(kr_device **dev);
/* The backend actually in use (never AUTO). */
KR_API kr_backend kr_device_backend(const kr_device *dev);
/* e.g. "cpu (2 OpenMP threads)" or "cuda: NVIDIA H100 80GB HBM3 (sm_90)". */
KR_API const char *kr_device_describe(const kr_device *dev);

/* Parses "auto" "cpu" "cuda". */
KR_API kr_status kr_backend_parse(const char *text, kr_backend *out);
KR_API const char *kr_backend_name(kr_backend b);
/* True when this build includes CUDA and a device is usable now. */
KR_API bool kr_cuda_available(void);

#ifdef __cplusplus
}
#endif
#endif
