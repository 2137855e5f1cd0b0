/* kinreg — compute backend choice and the device context.
 *
 * One context owns the device, its streams, the cuBLAS handle and scratch
 * buffers (DESIGN.md §4). With the CPU backend it owns nothing but settings.
 * A device serves one thread at a time (the tracker thread owns it): its
 * buffers are reused from call to call. */
#ifndef KINREG_DEVICE_H
#define KINREG_DEVICE_H

#include <stdbool.h>

#include <stddef.h>

#include "kinreg/kdtree.h"
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
/* Number of usable CUDA devices (0 in a build without CUDA). */
KR_API int kr_cuda_device_count(void);

/* Device time of a k-d tree built on a CUDA device: the points' upload, the
 * build kernels and the tree's download, in ms. */
typedef struct {
    double upload_ms, build_ms, download_ms;
} kr_device_tree_times;

/* The model k-d tree of n points (kr_kdtree_build's inputs and checks) built
 * on `dev`: on a CUDA device the same tree as the host's build (where no two
 * points tie on a coordinate), which the CUDA tracker then reads in place; on
 * the CPU the host build (times zero). Blocks until the tree is on the host
 * too. times may be NULL. */
KR_API kr_status kr_device_build_kdtree(const kr_device *dev, const float *points,
                                        const float *normals, size_t n, kr_kdtree **out,
                                        kr_device_tree_times *times);

/* OpenMP waiting, for programs that embed the library.
 *
 * The CPU engine runs OpenMP teams beside the pipeline's own threads
 * (capture, model rebuilds, publisher). By default libgomp lets idle team
 * threads spin between parallel regions, taking those threads' cores: the
 * pipeline runs up to several times slower (measured on a 2-core machine:
 * kinreg demo 35 frames/s spinning, 41 passive; an embedding program was 3x
 * slower). The fix is OMP_WAIT_POLICY=passive in the environment, which
 * libgomp reads once, when it is loaded -- before any of this library's code
 * runs, so the library cannot set it for you. Either
 *   - set OMP_WAIT_POLICY=passive in the environment that starts your program, or
 *   - call kr_openmp_prefer_passive(argv) first thing in main(): unless the user
 *     chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT set), it re-executes the
 *     program (/proc/self/exe) with OMP_WAIT_POLICY=passive and does not return;
 *     the kinreg program does exactly this.
 * kr_device_create logs one warning per process when it creates a CPU device
 * and no policy was chosen. */
/* True when OpenMP's idle threads sleep (OMP_WAIT_POLICY=passive or GOMP_SPINCOUNT=0). */
KR_API bool kr_openmp_waits_passive(void);
/* True when the environment names a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT). */
KR_API bool kr_openmp_wait_policy_chosen(void);
/* Re-executes the program with OMP_WAIT_POLICY=passive unless a policy was
 * chosen; returns KR_OK when nothing was to be done, or an error when exec
 * failed (the program goes on spinning). */
KR_API kr_status kr_openmp_prefer_passive(char **argv);

#ifdef __cplusplus
}
#endif
#endif
