/* What every CPU-vs-CUDA parity test needs: a skip without a GPU (CI has
 * none; the tests run on the GPU machine) and a device of a given backend. */
#ifndef KR_PARITY_FIXTURE_H
#define KR_PARITY_FIXTURE_H

#include "kinreg/device.h"
#include "kr_test.h"

#define NEED_CUDA()                                                                                \
    do {                                                                                           \
        if (!kr_cuda_available())                                                                  \
            SKIP("no CUDA device: parity needs a GPU (runs on the GPU machine)");                  \
    } while (0)

/* A device of backend b with default settings, or NULL. */
static inline kr_device *make_device(kr_backend b)
{
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = b;
    kr_device *dev = NULL;
    return kr_device_create(&dev, &dc) == KR_OK ? dev : NULL;
}

#endif
