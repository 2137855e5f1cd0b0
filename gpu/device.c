/* Backend choice and the device context (DESIGN.md §4). The CPU backend owns
 * only settings; the CUDA backend owns a gpu/ context. AUTO takes CUDA when a
 * device is present; an explicit CUDA request without one is an error, never a
 * silent fallback to the CPU. */
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpu/engine.h"
#include "gpu/kdtree_cuda.h"

struct kr_device {
    kr_backend backend; /* CPU or CUDA, never AUTO */
    int threads;
    kr_gpu_context *gpu;
    char description[256];
};

void kr_device_config_default(kr_device_config *cfg)
{
    if (!cfg) return;
    cfg->backend = KR_BACKEND_AUTO;
    cfg->cuda_device = 0;
    cfg->cpu_threads = 0;
}

static kr_status create_cuda(kr_device *dev, int ordinal)
{
    /* The context says why there is no device (none found, or a build
     * without CUDA) and what to do. */
    kr_status s = kr_gpu_context_create(&dev->gpu, ordinal);
    if (s != KR_OK) return s;
    dev->backend = KR_BACKEND_CUDA;
    snprintf(dev->description, sizeof dev->description, "%s", kr_gpu_context_describe(dev->gpu));
    return KR_OK;
}

/* Once per process: an embedding program that did not choose a wait policy
 * runs the CPU engine with spinning OpenMP threads (device.h). */
static void warn_spinning_openmp(kr_backend backend)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (backend == KR_BACKEND_CUDA || kr_openmp_wait_policy_chosen() || atomic_flag_test_and_set(&warned)) return;
    kr_log(KR_LOG_WARN,
           "OpenMP threads spin while idle (OMP_WAIT_POLICY unset), which can slow the pipeline several "
           "times: set OMP_WAIT_POLICY=passive before the program starts, or call "
           "kr_openmp_prefer_passive(argv) in main (kinreg/device.h)");
}

kr_status kr_device_create(kr_device **out, const kr_device_config *cfg)
{
    if (!out) return kr_error(KR_ERR_INVALID_ARG, "kr_device_create: NULL output");
    kr_device_config defaults;
    if (!cfg) {
        kr_device_config_default(&defaults);
        cfg = &defaults;
    }
    if (cfg->cpu_threads < 0 || cfg->cuda_device < 0)
        return kr_error(KR_ERR_INVALID_ARG,
                        "device: cpu_threads (%d) and cuda_device (%d) must be >= 0",
                        cfg->cpu_threads, cfg->cuda_device);
    if (cfg->backend != KR_BACKEND_AUTO && cfg->backend != KR_BACKEND_CPU &&
        cfg->backend != KR_BACKEND_CUDA)
        return kr_error(KR_ERR_INVALID_ARG, "device: unknown backend %d", (int)cfg->backend);

    kr_device *dev = calloc(1, sizeof *dev);
    if (!dev) return kr_error(KR_ERR_NOMEM, "cannot allocate the device context");
    dev->threads = cfg->cpu_threads > 0 ? cfg->cpu_threads : omp_get_max_threads();
    if (dev->threads < 1) dev->threads = 1;
    warn_spinning_openmp(cfg->backend);

    kr_status s = KR_OK;
    if (cfg->backend == KR_BACKEND_CUDA) {
        s = create_cuda(dev, cfg->cuda_device);
    } else if (cfg->backend == KR_BACKEND_AUTO && kr_gpu_device_count(NULL, 0) > 0) {
        /* A device is present but unusable (busy, out of memory): AUTO may run
         * on the CPU, but says so rather than degrading silently. */
        s = create_cuda(dev, cfg->cuda_device);
        if (s != KR_OK) {
            kr_log(KR_LOG_WARN, "backend auto: CUDA device unusable (%s); using the CPU",
                   kr_last_error());
            kr_error_clear();
            s = KR_OK;
        }
    }
    if (s != KR_OK) {
        free(dev);
        return s;
    }
    if (!dev->gpu) {
        dev->backend = KR_BACKEND_CPU;
        snprintf(dev->description, sizeof dev->description, "cpu (%d OpenMP thread%s)",
                 dev->threads, dev->threads == 1 ? "" : "s");
    }
    *out = dev;
    return KR_OK;
}

void kr_device_destroy(kr_device **dev)
{
    if (!dev || !*dev) return;
    kr_gpu_context_destroy(&(*dev)->gpu);
    free(*dev);
    *dev = NULL;
}

kr_backend kr_device_backend(const kr_device *dev)
{
    return dev ? dev->backend : KR_BACKEND_CPU;
}

const char *kr_device_describe(const kr_device *dev)
{
    return dev ? dev->description : "(no device)";
}

kr_gpu_context *kr_device_gpu(const kr_device *dev)
{
    return dev ? dev->gpu : NULL;
}

int kr_device_threads(const kr_device *dev)
{
    return dev ? dev->threads : 1;
}

kr_status kr_backend_parse(const char *text, kr_backend *out)
{
    if (!text || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_backend_parse: NULL argument");
    static const struct {
        const char *name;
        kr_backend backend;
    } names[] = {{"auto", KR_BACKEND_AUTO}, {"cpu", KR_BACKEND_CPU}, {"cuda", KR_BACKEND_CUDA}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strcasecmp(text, names[i].name)) {
            *out = names[i].backend;
            return KR_OK;
        }
    }
    return kr_error(KR_ERR_INVALID_ARG, "unknown backend \"%s\" (expected auto, cpu or cuda)",
                    text);
}

const char *kr_backend_name(kr_backend b)
{
    switch (b) {
    case KR_BACKEND_AUTO:
        return "auto";
    case KR_BACKEND_CPU:
        return "cpu";
    case KR_BACKEND_CUDA:
        return "cuda";
    }
    return "unknown";
}

bool kr_cuda_available(void)
{
    return kr_gpu_device_count(NULL, 0) > 0;
}

int kr_cuda_device_count(void)
{
    return kr_gpu_device_count(NULL, 0);
}

kr_status kr_device_build_kdtree(const kr_device *dev, const float *points, const float *normals,
                                 size_t n, kr_kdtree **out, kr_device_tree_times *times)
{
    if (!dev) return kr_error(KR_ERR_INVALID_ARG, "kr_device_build_kdtree: NULL device");
    if (times) memset(times, 0, sizeof *times);
    kr_gpu_context *ctx = kr_device_gpu(dev);
    return ctx ? kr_kdtree_cuda_build(ctx, points, normals, n, out, times)
               : kr_kdtree_build(out, points, normals, n);
}
