/* A compute device made on a thread of its own while the program reads its
 * input. On two H200 the CUDA runtime's start and the first device's context
 * took 0.35-0.5 s of every `kinreg refine` and each further device's context
 * 0.1 s: as long as reading or making the scans, which can hide them. */
#ifndef KINREG_TOOLS_DEVICE_START_H
#define KINREG_TOOLS_DEVICE_START_H

#include <pthread.h>
#include <stdbool.h>

#include "kinreg/device.h"

typedef struct {
    kr_device_config cfg;
    int warm[16], n_warm; /* further CUDA devices whose contexts to start too */
    int local_rank;       /* ≥ 0: CUDA device local_rank mod the visible ones */
    pthread_t thread;
    bool started; /* the thread runs (else _end makes the device itself) */
    kr_device *dev;
    kr_status status;
    char why[512]; /* the thread's error message (they are per thread) */
} kr_device_start;

/* Starts making a device with cfg (its CUDA device chosen by local_rank when
 * that is ≥ 0), then warming the CUDA devices warm[0 … n_warm) (at most 16;
 * a device that cannot start is left to fail where it is used). */
void kr_device_start_begin(kr_device_start *d, const kr_device_config *cfg, int local_rank,
                           const int *warm, int n_warm);
/* Waits for it: the device (*out) or the error it met, whose message is
 * then this thread's kr_last_error(). */
kr_status kr_device_start_end(kr_device_start *d, kr_device **out);

#endif
