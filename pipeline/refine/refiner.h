/* The refiner thread (DESIGN.md §2): runs one multi-view refinement at a
 * time in the background. The tracker posts a job that owns copies of the
 * keyframes' points and poses, goes on tracking, and takes the finished job
 * at a later frame; it never waits unless it asks to (shutdown). */
#ifndef KINREG_PIPELINE_REFINE_REFINER_H
#define KINREG_PIPELINE_REFINE_REFINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/device.h"
#include "kinreg/pose.h"
#include "kinreg/refine.h"

/* One window of keyframes: what the refiner reads, and its answer. */
typedef struct {
    int first;             /* the window's first keyframe index (the tracker's bookkeeping) */
    int count;             /* keyframes in the window; the first is the gauge */
    kr_refine_view *views; /* owned copies of each keyframe's camera-frame points */
    kr_pose *poses;        /* in: the keyframes' poses when posted; out: refined */
    kr_status status;      /* of the refinement */
    char error[256];       /* its message when it failed */
    kr_refine_result result;
} kr_refine_job;

typedef struct kr_refiner kr_refiner;

/* Starts the thread. dev (may be NULL: the CPU engine) is used by the thread
 * alone from now on; threads is its OpenMP team size (0: OpenMP's default). */
kr_status kr_refiner_create(kr_refiner **out, const kr_refine_config *cfg, kr_device *dev,
                            int threads);

/* A job of `count` views, each copied from xyz[k] (n[k] points) at poses[k]. */
kr_status kr_refine_job_create(kr_refine_job **out, int first, int count, const float *const *xyz,
                               const size_t *n, const kr_pose *poses);
void kr_refine_job_free(kr_refine_job **job);

/* True when no job is queued, running or waiting to be taken. */
bool kr_refiner_idle(kr_refiner *r);

/* Hands *job over (it becomes NULL); KR_ERR_INVALID_ARG, the job kept, when
 * the refiner is not idle. */
kr_status kr_refiner_post(kr_refiner *r, kr_refine_job **job);

/* The finished job, or NULL when none is ready; with `wait`, waits for the
 * job queued or running (NULL only when there is none). */
kr_refine_job *kr_refiner_take(kr_refiner *r, bool wait);

/* Asks the job in flight, and every later one, to end now: they finish
 * with KR_ERR_INTERRUPTED within an LM iteration or a pairwise
 * registration, their poses as posted. Any thread, any time (a stop). */
void kr_refiner_interrupt(kr_refiner *r);

/* Finishes the job in flight (its result is dropped if not taken), stops the
 * thread and frees everything. Accepts NULL. */
void kr_refiner_destroy(kr_refiner **r);

#endif
