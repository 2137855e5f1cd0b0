/* What the compute steps need from a kr_device beyond the public API. */
#ifndef KR_DEVICE_INTERNAL_H
#define KR_DEVICE_INTERNAL_H

#include "gpu/gpu.h"
#include "kinreg/device.h"

/* The CUDA context of a CUDA device; NULL for the CPU backend. */
kr_gpu_context *kr_device_gpu(const kr_device *dev);
/* OpenMP threads the CPU engine uses (≥ 1). */
int kr_device_threads(const kr_device *dev);

#endif
